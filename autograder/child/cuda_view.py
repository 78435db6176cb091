"""
The CUDA view: runs a CPU forward as if it ran on a GPU, so that the course's memory code
(torch.cuda.memory_allocated() before and after the attention, behind any guard) measures on a
CPU, and the torch.cuda memory queries it makes are answered by a reading source.

Inside `with CudaView(ask):`
  - every tensor answers is_cuda True, .device cuda:0, get_device() 0 (they stay CPU tensors);
  - torch.cuda.is_available() is True, device_count() 1, synchronize()/empty_cache() do nothing;
  - a TorchFunctionMode maps device= arguments, .to('cuda'), .to(0) and .cuda() back to the CPU;
  - the torch.cuda memory queries (memory_allocated, max_memory_allocated, reset_peak_memory_stats,
    memory_reserved, memory_stats, mem_get_info, ...) are sent to `ask(payload) -> reply`, the
    reading source: the harness link on the grader (kernel facts, memory_readings.py), the same
    handler on the process itself for the public tests on Linux, or StorageMeter below elsewhere.
So the guard idioms x.is_cuda, x.device.type == 'cuda' (also as a flag), torch.cuda.is_available(),
str(x.device).startswith('cuda'), memory_allocated(x.device) and `if ...: synchronize()` all
take their CUDA branch, and code that truly cannot run that way raises where it fails.

`install()` (before model.py is imported, so that `from torch.cuda import memory_allocated` gets
them) puts the routing queries into torch.cuda for good: outside a view they answer what CPU
torch answers (0, {}), or, under `Forward(ask)` on a real GPU, call the real allocator and send
its answer to `ask` as 'report <query> <value>' (gpu profile).

Torch only and self-contained: build-template copies its code into the students' memory_check.py.
"""

import contextlib
import time

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

CUDA0 = torch.device('cuda', 0)
_device_of = torch._C.TensorBase.device.__get__
MEMORY_QUERIES = ('memory_allocated', 'memory_reserved', 'memory_cached', 'max_memory_allocated',
                  'max_memory_reserved', 'max_memory_cached', 'reset_peak_memory_stats',
                  'reset_max_memory_allocated', 'reset_max_memory_cached', 'memory_stats', 'mem_get_info')
_REAL = {}        # torch.cuda's own functions, saved by install()
_SOURCES = []     # [(mode, ask)] of the views / forwarders in effect, innermost last
_MISSING = object()


def _real_device(t):
    with torch._C.DisableTorchFunction():   # the tensor's own device, not what a mode or the view says
        return _device_of(t)


def _cudaish(d):
    """True for a device argument that names a CUDA device: 'cuda', 'cuda:1', torch.device('cuda'), 0."""
    if isinstance(d, torch.device):
        return d.type == 'cuda'
    if isinstance(d, str):
        return d.split(':')[0].strip() == 'cuda'
    return isinstance(d, int) and not isinstance(d, bool)


def _ask_int(payload):
    reply = _SOURCES[-1][1](payload.encode())
    try:
        return [int(v) for v in reply.split()] or [int(b'')]
    except ValueError:
        raise RuntimeError('torch.cuda.%s: the memory reading source gave no answer (%r)' % (payload, reply[:80]))


def _router(name):
    def query(*args, **kwargs):
        mode = _SOURCES[-1][0] if _SOURCES else None
        if mode == 'forward':     # a real GPU: the allocator answers, the source hears it
            value = _REAL[name](*args, **kwargs)
            _forward(name, value)
            return value
        if mode is None:          # no view: what CPU torch answers, without its errors
            return {} if name == 'memory_stats' else (0, 0) if name == 'mem_get_info' else \
                None if name.startswith('reset') else 0
        values = _ask_int(name)
        if name == 'memory_stats':
            current, peak = values
            return {'%s_bytes.all.%s' % (k, w): v for k in ('allocated', 'reserved', 'active')
                    for w, v in (('current', current), ('peak', peak))}
        if name == 'mem_get_info':
            return tuple(values)
        return None if name.startswith('reset') else values[0]
    query.__name__ = name
    return query


def _forward(name, value):
    ask = _SOURCES[-1][1]
    if name == 'memory_stats':
        ask(b'report memory_allocated %d' % value.get('allocated_bytes.all.current', 0))
        ask(b'report max_memory_allocated %d' % value.get('allocated_bytes.all.peak', 0))
    elif name == 'mem_get_info':
        ask(b'report mem_get_info %d' % value[0])
    elif name.startswith('reset'):
        ask(b'report reset_peak_memory_stats 0')
    else:
        ask(b'report %s %d' % (name.encode(), int(value)))


def install():
    """
    Put the routing memory queries into torch.cuda and torch.cuda.memory (once, before model.py is
    imported). Where CUDA is missing, torch.cuda.synchronize() does nothing too: correct on a GPU,
    it would otherwise raise "Torch not compiled with CUDA" on a CPU grader.
    """
    import torch.cuda.memory as cuda_memory
    if not torch.cuda.is_available() and 'synchronize' not in _REAL:
        _REAL['synchronize'] = torch.cuda.synchronize
        torch.cuda.synchronize = _nothing('synchronize')
    for name in MEMORY_QUERIES:
        if name in _REAL:
            continue
        _REAL[name] = getattr(torch.cuda, name, None)
        fn = _router(name)
        setattr(torch.cuda, name, fn)
        if hasattr(cuda_memory, name):
            setattr(cuda_memory, name, fn)


class _Event:
    """torch.cuda.Event with enable_timing, on the CPU clock."""

    def __init__(self, *args, **kwargs):
        self.t = None

    def record(self, *args, **kwargs):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def query(self):
        return True

    def elapsed_time(self, end):
        return (end.t - self.t) * 1000.0


class _Stream:
    def synchronize(self):
        pass

    def wait_stream(self, *args):
        pass

    def record_event(self, event=None):
        event = event or _Event()
        event.record()
        return event


class _Properties:
    name, major, minor, multi_processor_count = 'CUDA view of a CPU', 8, 0, 1

    def __init__(self, total):
        self.total_memory = total


def _nothing(name):
    """A placeholder: does nothing; one function object per name (torch._dynamo, if it is first imported
    inside a view, refuses one object under two names)."""
    def nothing(*args, **kwargs):
        return None
    nothing.__name__ = name
    return nothing


class _DeviceMapping(TorchFunctionMode):
    """Every CUDA device argument of a torch function means the CPU; .cuda() is the tensor itself."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0]
        if _cudaish(kwargs.get('device')):
            kwargs['device'] = 'cpu'
        if func is torch.Tensor.to:
            args = tuple('cpu' if i > 0 and _cudaish(a) else a for i, a in enumerate(args))
        return func(*args, **kwargs)


class CudaView:
    """
    `with CudaView(ask):` the CPU forward runs as on a GPU (see the module's docstring). `ask`
    answers the memory queries; `meter`, when given, is a context manager entered inside the
    view (StorageMeter). Not re-entrant; everything it changes is restored on exit.
    """

    TENSOR = {'is_cuda': property(lambda t: True),
              'is_cpu': property(lambda t: False),
              'device': property(lambda t: CUDA0 if _real_device(t).type == 'cpu' else _real_device(t)),
              'get_device': lambda t: 0}

    def __init__(self, ask, meter=None, total=80 << 30):
        self.ask, self.meter, self.total = ask, meter, total

    def _cuda_functions(self):
        return {'is_available': lambda: True, 'device_count': lambda: 1, 'current_device': lambda: 0,
                'is_initialized': lambda: True, 'init': _nothing('init'), 'set_device': _nothing('set_device'),
                'synchronize': _nothing('synchronize'), 'empty_cache': _nothing('empty_cache'),
                'ipc_collect': _nothing('ipc_collect'),
                'reset_accumulated_memory_stats': _nothing('reset_accumulated_memory_stats'),
                'get_device_name': lambda *a, **k: _Properties.name,
                'get_device_capability': lambda *a, **k: (8, 0),
                'get_device_properties': lambda *a, **k: _Properties(self.total),
                'device': lambda *a, **k: contextlib.nullcontext(),
                'Event': _Event, 'current_stream': lambda *a, **k: _Stream(),
                'default_stream': lambda *a, **k: _Stream()}

    def __enter__(self):
        install()
        if self.meter is not None:   # first: entering a dispatch mode may import torch._dynamo, which reads torch.cuda
            self.meter.__enter__()
        self._saved_tensor = {n: vars(torch.Tensor).get(n) for n in self.TENSOR}
        self._saved_cuda = {n: getattr(torch.cuda, n, _MISSING) for n in self._cuda_functions()}
        for n, v in self.TENSOR.items():
            setattr(torch.Tensor, n, v)
        for n, v in self._cuda_functions().items():
            setattr(torch.cuda, n, v)
        _SOURCES.append(('view', self.ask))
        self._mode = _DeviceMapping()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc):
        self._mode.__exit__(*exc)
        _SOURCES.pop()
        for n, v in self._saved_tensor.items():
            if v is None:
                delattr(torch.Tensor, n)   # the C attribute of the tensor base shows again
            else:
                setattr(torch.Tensor, n, v)
        for n, v in self._saved_cuda.items():
            if v is _MISSING:
                delattr(torch.cuda, n)
            else:
                setattr(torch.cuda, n, v)
        if self.meter is not None:
            self.meter.__exit__(*exc)
        return False


class Forward:
    """`with Forward(ask):` on a real GPU, every memory query the code makes is also sent to `ask`."""

    def __init__(self, ask):
        self.ask = ask

    def __enter__(self):
        install()
        _SOURCES.append(('forward', self.ask))
        return self

    def __exit__(self, *exc):
        _SOURCES.pop()
        return False


class StorageMeter(TorchDispatchMode):
    """
    A reading source where the kernel gives none (no /proc): counts the bytes of every tensor
    storage created while it is active, until torch frees it (tensors autograd saved stay
    counted). `measure(pid) -> (live, peak since reset)` and `reset(pid)` plug into
    memory_readings.Readings in place of /proc. Used by the public tests on macOS/Windows only.
    """

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self._counted = {}

    def measure(self, pid=None):
        return self.live, self.peak

    def reset(self, pid=None):
        self.peak = self.live

    def _release(self, key):
        self.live -= self._counted.pop(key, 0)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        import weakref
        out = func(*args, **(kwargs or {}))
        seen = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                storage = t.untyped_storage()
                key, nbytes = storage.data_ptr(), storage.nbytes()
                if nbytes and key not in seen and key not in self._counted:
                    self._counted[key] = nbytes
                    self.live += nbytes
                    self.peak = max(self.peak, self.live)
                    weakref.finalize(storage, self._release, key)
        return out
