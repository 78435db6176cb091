"""
The course's starter code measures attention memory with torch.cuda.memory_allocated()
before and after the attention (often with torch.cuda.empty_cache() / synchronize() first, or
guarded by `if x.is_cuda`). On a CPU grader those calls return 0 or raise, so correct code
would report nothing. Inside the sandbox on the cpu profile, `install()` makes the
torch.cuda memory queries answer from a CPU meter (a TorchDispatchMode that counts tensor
storages, as the handout's AttentionMemory does on CPU): while the memory probe runs a
`Meter` around the student's forward, torch.cuda.memory_allocated() returns the bytes that
meter sees live, max_memory_allocated() its high-water mark since the last reset, and every
reading is recorded so that the harness can check the reported figure is one the code
really measured. Outside a Meter the queries answer 0 (what CPU torch answers).
torch.cuda.is_available() is left alone: it stays False on a CPU grader.

Runs INSIDE the sandbox only (imports torch).
"""

import gc
import weakref

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from . import wire

MAX_READINGS = wire.MAX_RAGGED_ROWS   # readings kept per measured call (a loop of queries must not grow the report)
ALLOCATED, PEAK = 0, 1      # kinds of reading: memory_allocated-like, max_memory_allocated-like

_active = []                # the Meter currently measuring (at most one)


class Meter(TorchDispatchMode):
    """
    Counts the bytes of every new tensor storage an op returns while it is active, until torch
    frees that storage (a weakref on the storage fires only when the C++ storage dies, so
    tensors autograd saved for backward stay counted). Views and in-place results are not new.
    `live`, `peak` (since entering), `peak_since_reset`, and the `readings` the student's code
    took through the torch.cuda queries: [(kind, value)] in call order.
    """

    def __init__(self):
        super().__init__()
        self.live = self.peak = self.peak_since_reset = 0
        self.readings = []
        self._counted = {}
        self._closed = False

    def _release(self, key):
        nbytes = self._counted.pop(key, None)
        if nbytes is not None and not self._closed:
            self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self._closed:
            return out
        seen = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or key in seen or key in self._counted:
                continue
            self._counted[key] = nbytes
            self.live += nbytes
            self.peak = max(self.peak, self.live)
            self.peak_since_reset = max(self.peak_since_reset, self.live)
            weakref.finalize(storage, self._release, key)
        return out

    def __enter__(self):
        # no cyclic-GC pass inside: when one runs would decide when some storages die
        self._gc_was_enabled = gc.isenabled()
        gc.disable()
        _active.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        out = super().__exit__(*exc)
        _active.remove(self)
        self._closed = True
        if self._gc_was_enabled:
            gc.enable()
        return out

    def record(self, kind, value):
        if len(self.readings) < MAX_READINGS:
            self.readings.append((kind, int(value)))
        return value


# ----------------------------------------------------------------------------- the torch.cuda stand-ins

def memory_allocated(device=None):
    return _active[-1].record(ALLOCATED, _active[-1].live) if _active else 0


def max_memory_allocated(device=None):
    return _active[-1].record(PEAK, _active[-1].peak_since_reset) if _active else 0


def reset_peak_memory_stats(device=None):
    if _active:
        _active[-1].peak_since_reset = _active[-1].live


def memory_stats(device=None):
    if not _active:
        return {}
    m = _active[-1]
    return {'allocated_bytes.all.current': m.record(ALLOCATED, m.live),
            'allocated_bytes.all.peak': m.record(PEAK, m.peak_since_reset)}


def _nothing(*args, **kwargs):
    return None


STAND_INS = {
    'memory_allocated': memory_allocated, 'memory_reserved': memory_allocated,
    'max_memory_allocated': max_memory_allocated, 'max_memory_reserved': max_memory_allocated,
    'reset_peak_memory_stats': reset_peak_memory_stats, 'reset_max_memory_allocated': reset_peak_memory_stats,
    'memory_stats': memory_stats, 'empty_cache': _nothing, 'synchronize': _nothing,
}


def install():
    """Replace the torch.cuda memory queries (before model.py is imported, so `from torch.cuda import ...` sees them)."""
    import torch.cuda.memory as cuda_memory
    for name, fn in STAND_INS.items():
        setattr(torch.cuda, name, fn)
        if hasattr(cuda_memory, name):
            setattr(cuda_memory, name, fn)


class ForcedIsCuda:
    """
    Within this block every tensor answers `is_cuda` True, so code that measures only
    `if x.is_cuda` takes its measuring branch on the CPU grader (the queries it then makes are
    the stand-ins above). torch.Tensor is a Python subclass of the C tensor base, so a property
    set on it shadows the base's attribute and is removed again on exit.
    """

    def __enter__(self):
        self._had = 'is_cuda' in vars(torch.Tensor)
        self._old = vars(torch.Tensor).get('is_cuda')
        torch.Tensor.is_cuda = property(lambda self: True)
        return self

    def __exit__(self, *exc):
        if self._had:
            torch.Tensor.is_cuda = self._old
        else:
            del torch.Tensor.is_cuda
        return False


class MeterFigures:
    """Within this block, every handout AttentionMemory that closes appends its (net, peak) to `figures`."""

    def __init__(self, cls):
        self.cls, self.figures = cls, []

    def __enter__(self):
        self._exit = self.cls.__exit__
        figures, original = self.figures, self._exit

        def recording_exit(meter, *exc):
            out = original(meter, *exc)
            if len(figures) < MAX_READINGS:
                figures.append((int(getattr(meter, 'net_bytes', 0)), int(getattr(meter, 'peak_bytes', 0))))
            return out
        self.cls.__exit__ = recording_exit
        return self

    def __exit__(self, *exc):
        self.cls.__exit__ = self._exit
        return False
