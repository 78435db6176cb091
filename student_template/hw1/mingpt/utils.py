"""
Helpers for chargpt.py, the model and the trainer: seeding, saving the run folder's config, logs
and model, the CfgNode configuration with strict `--section.key=value` overrides, and an
attention memory meter (AttentionMemory; the given model measures the course's way instead,
with torch.cuda.memory_allocated() around the attention).
"""

import gc
import json
import math
import os
import random
import signal
import sys
import weakref
from ast import literal_eval

import numpy as np
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# -----------------------------------------------------------------------------


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)


def setup_logging(config):
    """ monotonous bookkeeping """
    work_dir = config.system.work_dir
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, 'args.txt'), 'w') as f:
        f.write(' '.join(sys.argv))
    with open(os.path.join(work_dir, 'config.json'), 'w') as f:
        f.write(json.dumps(config.to_dict(), indent=4))

# -----------------------------------------------------------------------------
# the run folder's per-iteration lists, written safely (chargpt.py)

# what the run folder's per-iteration lists are called (as in the course's chargpt.py)
LOG_FILES = (('train_losses', 'train_losses.json'), ('attn_times', 'attention_computation_time.json'),
             ('attn_mem', 'attention_computation_memory.json'))


class StopOnCtrlC:
    """
    While active, Ctrl-C asks training to stop after the current iteration (so the logs and
    model.pt written at the end belong to one completed iteration); a second Ctrl-C stops at once.
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle) or signal.default_int_handler
        except ValueError:
            self._previous = None  # not the main thread: signals go elsewhere, nothing to change
        return self

    def _handle(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, self._previous)
        print("Ctrl-C: stopping after this iteration (press Ctrl-C again to stop at once)", file=sys.stderr)

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def _write_atomically(path, data):
    """A temporary file renamed over the old one: a run stopped at any moment leaves a complete file."""
    tmp = '%s.%d.tmp' % (path, os.getpid())  # same folder, so the rename is atomic
    try:
        with open(tmp, 'w') as f:
            json.dump(data, f, allow_nan=False)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _json_number(x):
    """A figure as strict JSON: NaN or infinity becomes null."""
    return x if math.isfinite(x) else None


def memory_measured(figure, on_gpu):
    """False for a figure that measured nothing: NaN, or 0 off a GPU (memory_allocated() reads 0 there)."""
    return math.isfinite(figure) and (on_gpu or figure != 0)


def write_logs(work_dir, logs, on_gpu):
    """
    Write the three per-iteration lists (LOG_FILES), cut to a common length (an interrupt between
    two appends must not leave them unequal); a memory figure that measured nothing is null, never
    a 0 that reads like a measurement. Returns the number of iterations.
    """
    n = min(len(v) for v in logs.values())
    lists = {key: [_json_number(float(x)) for x in values[:n]] for key, values in logs.items()}
    lists['attn_mem'] = [x if memory_measured(float(x), on_gpu) else None for x in logs['attn_mem'][:n]]
    for key, name in LOG_FILES:
        _write_atomically(os.path.join(work_dir, name), lists[key])
    return n


def save_model(work_dir, model):
    path = os.path.join(work_dir, 'model.pt')
    tmp = '%s.%d.tmp' % (path, os.getpid())
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    print("saved %s" % path)

# -----------------------------------------------------------------------------
# memory measurement for the attention computation


class _CpuAllocationTracker(TorchDispatchMode):
    """
    Counts the bytes of every new tensor storage an op returns inside the region (not views,
    in-place results or tensors from before it) until torch really frees it, autograd's saved
    tensors included: `live`, its `peak`, and the `total` allocated. Deterministic: the counts
    depend only on the sequence of ops.
    """

    def __init__(self):
        super().__init__()
        self.live = self.peak = self.total = 0
        self._counted = {}  # storage data_ptr -> nbytes, for storages allocated in the region
        self._closed = False

    def _release(self, key):
        nbytes = self._counted.pop(key, None)
        if nbytes is not None:
            self.live -= nbytes

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self._closed:
            return out
        seen_inputs = {t.untyped_storage().data_ptr() for t in tree_leaves((args, kwargs))
                       if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            storage = t.untyped_storage()
            key, nbytes = storage.data_ptr(), storage.nbytes()
            if nbytes == 0 or key in seen_inputs or key in self._counted:
                continue  # a view, an in-place result, or an alias of something counted
            self._counted[key] = nbytes
            self.live += nbytes
            self.total += nbytes
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._release, key)
        return out


class AttentionMemory:
    """
    `with AttentionMemory(x.device) as mem: ...attention...`, then mem.net_bytes (still allocated
    at the end), mem.peak_bytes (high-water mark) and mem.allocated_bytes (everything allocated
    inside). CUDA reads the caching allocator; other devices use the CPU tracker above.
    """

    def __init__(self, device):
        self.device = torch.device(device)
        self.net_bytes = self.peak_bytes = self.allocated_bytes = 0

    def __enter__(self):
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            self._start_total = torch.cuda.memory_stats(self.device).get('allocated_bytes.all.allocated', 0)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            # no cyclic-GC pass inside the region: when one runs would otherwise decide when some
            # storages die, and the counts would depend on what the process did before
            self._gc_was_enabled = gc.isenabled()
            gc.disable()
            self._tracker = _CpuAllocationTracker()
            self._tracker.__enter__()
        return self

    def __exit__(self, *exc):
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            self.net_bytes = torch.cuda.memory_allocated(self.device) - self._start
            self.peak_bytes = torch.cuda.max_memory_allocated(self.device) - self._start
            self.allocated_bytes = torch.cuda.memory_stats(self.device).get('allocated_bytes.all.allocated', 0) - self._start_total
        else:
            self._tracker.__exit__(*exc)
            self._tracker._closed = True  # late frees must not touch a finished count
            self.net_bytes = self._tracker.live
            self.peak_bytes = self._tracker.peak
            self.allocated_bytes = self._tracker.total
            if self._gc_was_enabled:
                gc.enable()
        return False

# -----------------------------------------------------------------------------


class ConfigError(ValueError):
    """A command-line override that names no known key or carries a value of the wrong type."""


def _parse_value(text):
    """Python literal if it is one (True, 3, 0.1, None, 'x'), the raw string otherwise."""
    try:
        return literal_eval(text)
    except (ValueError, SyntaxError):
        return text


# how a boolean flag may be written: --model.rope=True as in the handout, or true/false, 1/0
BOOLEANS = {'True': True, 'true': True, '1': True, 'False': False, 'false': False, '0': False}


def _parse_bool(text, key):
    if text not in BOOLEANS:
        raise ConfigError("value %r for --%s is not a boolean: write True or False (also accepted: %s)"
                          % (text, key, ', '.join(k for k in BOOLEANS if k not in ('True', 'False'))))
    return BOOLEANS[text]


def _compatible(old, new, declared=None):
    if new is None:
        return True
    if old is None:
        # an optional setting takes None or a value of its declared type
        return declared is None or _compatible(declared(), new)
    if isinstance(old, bool) or isinstance(new, bool):
        return isinstance(old, bool) and isinstance(new, bool)
    if isinstance(old, float):
        return isinstance(new, (int, float))
    return isinstance(new, type(old))


class CfgNode:
    """ a lightweight configuration class inspired by yacs """

    def __init__(self, **kwargs):
        self.__dict__['_types'] = {}
        self.__dict__.update(kwargs)

    def declare(self, key, default, type_):
        """Add a setting whose default is None but whose values must be of `type_`."""
        self._types[key] = type_
        setattr(self, key, default)

    def _items(self):
        return [(k, v) for k, v in self.__dict__.items() if not k.startswith('_')]

    def __str__(self):
        return self._str_helper(0)

    def _str_helper(self, indent):
        """ need to have a helper to support nested indentation for pretty printing """
        parts = []
        for k, v in self._items():
            if isinstance(v, CfgNode):
                parts.append("%s:\n" % k)
                parts.append(v._str_helper(indent + 1))
            else:
                parts.append("%s: %s\n" % (k, v))
        parts = [' ' * (indent * 4) + p for p in parts]
        return "".join(parts)

    def to_dict(self):
        """ return a dict representation of the config """
        return {k: v.to_dict() if isinstance(v, CfgNode) else v for k, v in self._items()}

    def merge_from_dict(self, d):
        self.__dict__.update(d)

    def merge_from_args(self, args):
        """
        update the configuration from a list of strings such as `--model.rope=True`.
        Unknown keys and values whose type does not match the default are refused with a
        ConfigError that says which argument was wrong and what was expected.
        """
        for arg in args:
            keyval = arg.split('=', maxsplit=1)
            if len(keyval) != 2 and arg.startswith('--'):
                raise ConfigError("argument %r has no value: write %s=VALUE, with '=' and no space" % (arg, arg))
            if len(keyval) != 2 or not keyval[0].startswith('--'):
                raise ConfigError("argument %r is not of the form --section.key=value" % arg)
            key, val = keyval[0][2:], _parse_value(keyval[1])
            *path, leaf = key.split('.')
            obj = self
            for name in path:
                obj = getattr(obj, name, None)
                if not isinstance(obj, CfgNode):
                    raise ConfigError("unknown config section %r in %r" % (name, arg))
            settings = dict(obj._items())
            if leaf not in settings or isinstance(settings[leaf], CfgNode):
                known = ', '.join(k for k, v in settings.items() if not isinstance(v, CfgNode))
                raise ConfigError("unknown config key %r in %r (known keys here: %s)" % (key, arg, known))
            old, declared = settings[leaf], obj._types.get(leaf)
            if (isinstance(old, bool) or declared is bool) and keyval[1] != 'None':
                val = _parse_bool(keyval[1], key)
            if not _compatible(old, val, declared):
                expected = (declared or type(old)).__name__
                raise ConfigError("value %r for --%s does not parse as %s (default is %r)"
                                  % (keyval[1], key, expected, old))
            if isinstance(old, float) and isinstance(val, int):
                val = float(val)
            print("command line overwriting config attribute %s with %s" % (key, val))
            setattr(obj, leaf, val)
