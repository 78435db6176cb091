"""
Memory readings as facts of the kernel, for test 9.1: the handler that answers the child's
torch.cuda memory queries (child/cuda_view.py) and logs every one of them.

    handler = Readings()                 # on the grader: the harness's handler of the link
    reply = handler(b'memory_allocated', pid)
    handler.log -> [{'i': 0, 'kind': 'allocated', 'call': 'memory_allocated', 'value': 123, 'pid': pid}, ...]

What each query means, read from /proc/<pid>/status of the process that asked:
  memory_allocated / memory_reserved           RssAnon + RssShmem: every page it holds that is not a file's
                                               copy: private anonymous memory (tensor data) AND shared memory
                                               (mmap(-1, MAP_SHARED), memfd, a mapped tmpfs or /dev/shm file),
                                               so that no tensor can live where the meter does not look
  max_memory_allocated / max_memory_reserved   VmHWM - RssFile: that peak since the last reset (VmHWM is the
                                               total resident peak; pages of ordinary files are not tensors)
  reset_peak_memory_stats                      writes 5 to /proc/<pid>/clear_refs, which resets VmHWM
  memory_stats                                 one allocated and one peak reading ("current peak")
  mem_get_info                                 free = total - allocated ("free total")
  mark <text>                                  the probe's start/end of a measured call (value: allocated)
  report <query> <int>                         gpu profile only: a reading of the real CUDA allocator that
                                               the child forwards (logged with 'source': 'child')

The log is the evidence 9.1 judges (autograder/contract/memory_rules.py): kind, value, the asking pid
(from the kernel on the grader) and the order. Standard library only and self-contained:
the harness runs it on the link, the child runs it on itself until the link is merged, and
build-template copies its code into the students' memory_check.py (on Linux, /proc/self).
`measure`/`reset` can be swapped for another source (a storage meter where there is no /proc).
"""

import ctypes
import gc

MAX_LOG = 512              # readings logged per probe; a loop of queries must not grow the log without bound
MAX_LABEL = 80             # characters of a mark's text
KINDS = {                  # query -> kind of reading in the log
    'memory_allocated': 'allocated', 'memory_reserved': 'allocated', 'memory_cached': 'allocated',
    'max_memory_allocated': 'peak', 'max_memory_reserved': 'peak', 'max_memory_cached': 'peak',
    'reset_peak_memory_stats': 'reset', 'reset_max_memory_allocated': 'reset', 'reset_max_memory_cached': 'reset',
    'memory_stats': 'stats', 'mem_get_info': 'free', 'mark': 'mark',
}


def proc_status(pid):
    """{field: bytes} of the memory fields of /proc/<pid>/status."""
    out = {}
    with open('/proc/%d/status' % pid, 'rb') as f:
        for line in f:
            key, _, value = line.partition(b':')
            if key in (b'RssAnon', b'RssFile', b'RssShmem', b'VmHWM', b'VmRSS', b'VmSize'):
                out[key.decode()] = int(value.split()[0]) * 1024   # the kernel writes kB
    return out


def proc_measure(pid):
    """(allocated, peak) of a process: RssAnon + RssShmem (anonymous and shared memory: a tensor in a shared
    mapping is memory too), and that peak since the last reset (VmHWM less the pages of files)."""
    s = proc_status(pid)
    anon = s['RssAnon'] + s.get('RssShmem', 0)
    return anon, max(anon, s['VmHWM'] - s['RssFile'])


def proc_reset(pid):
    """reset_peak_memory_stats(): VmHWM starts again from the current resident size."""
    with open('/proc/%d/clear_refs' % pid, 'w') as f:
        f.write('5')


def machine_total():
    """Bytes of memory of this machine (mem_get_info's total)."""
    try:
        with open('/proc/meminfo') as f:
            for line in f:
                if line.startswith('MemTotal:'):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 << 30


def settle():
    """
    Called by the measuring code (never inside a measured call) before each measured call, in
    the process that is measured. glibc keeps freed memory resident and raises its mmap
    threshold as large blocks are freed, so later tensors reuse resident pages and RssAnon
    would not grow with them (measured: the second identical call read 0 bytes). A fixed mmap
    threshold makes every tensor of 128 KB or more its own mapping, returned to the kernel when
    freed, as CUDA's allocated count drops when a tensor dies; malloc_trim gives back what
    earlier work left; the garbage of earlier calls is collected first so that it cannot die
    inside the measured call.
    """
    gc.collect()
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 128 * 1024)   # M_MMAP_THRESHOLD, fixed: disables glibc's dynamic threshold
        libc.malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: readings are still facts, only coarser
        pass


def describe_figure(mem):
    """
    {'type': ..., 'value': ...} of the figure a forward returned, as memory_rules.judge_call takes
    it: 'int', 'float', 'tensor' (value: its item when it holds one number), 'str', 'none', 'bool'
    or 'other' (value None). Duck-typed, so that it needs no torch.
    """
    if mem is None:
        return {'type': 'none', 'value': None}
    if isinstance(mem, bool):
        return {'type': 'bool', 'value': int(mem)}
    if isinstance(mem, str):
        return {'type': 'str', 'value': None}
    if hasattr(mem, 'numel') and hasattr(mem, 'item'):   # a torch tensor (numpy scalars have no numel)
        try:
            item = mem.item() if mem.numel() == 1 else None
        except Exception:
            item = None
        return {'type': 'tensor', 'value': item if isinstance(item, (int, float)) else None}
    if hasattr(mem, '__index__'):   # int, numpy integers
        return {'type': 'int', 'value': int(mem)}
    try:
        return {'type': 'float', 'value': float(mem)}
    except (TypeError, ValueError, OverflowError):
        return {'type': 'other', 'value': None}


class Readings:
    """
    The handler: `handler(payload, pid) -> reply`. Every query is answered (so the student's
    code never breaks on the grader), and logged while the log has room; `full` tells that
    readings were dropped. Replies are ASCII: one integer, two for memory_stats and
    mem_get_info, or 'error ...' for a query it does not know.
    """

    def __init__(self, measure=proc_measure, reset=proc_reset, total=None, forwarded=False):
        self.measure, self.reset = measure, reset
        self.forwarded = forwarded   # 'report' queries are accepted only where the real allocator answers (gpu)
        self.total = machine_total() if total is None else total
        self.log = []
        self.full = False

    def _add(self, pid, kind, call, value, **extra):
        if len(self.log) >= MAX_LOG and kind != 'mark':
            self.full = True
            return
        if len(self.log) < MAX_LOG + 64:   # marks keep a little room of their own
            self.log.append(dict({'i': len(self.log), 'kind': kind, 'call': call, 'value': int(value), 'pid': pid},
                                 **extra))

    def __call__(self, payload, pid):
        try:
            text = bytes(payload).decode('ascii')
        except (UnicodeDecodeError, TypeError):
            return b'error: not an ASCII query'
        call, _, rest = text.partition(' ')
        if call == 'report':
            return self._report(rest, pid) if self.forwarded else b'error: no forwarded readings here'
        kind = KINDS.get(call)
        if kind is None:
            return b'error: unknown query'
        if kind == 'reset':
            self.reset(pid)
            allocated, _ = self.measure(pid)
            self._add(pid, 'reset', call, allocated)
            return b'0'
        allocated, peak = self.measure(pid)
        if kind == 'mark':
            self._add(pid, 'mark', call, allocated, label=rest[:MAX_LABEL])
            return str(allocated).encode()
        if kind == 'stats':
            self._add(pid, 'allocated', call, allocated)
            self._add(pid, 'peak', call, peak)
            return ('%d %d' % (allocated, peak)).encode()
        if kind == 'free':
            self._add(pid, 'free', call, self.total - allocated)
            return ('%d %d' % (self.total - allocated, self.total)).encode()
        value = allocated if kind == 'allocated' else peak
        self._add(pid, kind, call, value)
        return str(value).encode()

    def _report(self, rest, pid):
        """gpu profile: the child forwards what the real CUDA allocator answered (not a kernel fact)."""
        call, _, value = rest.partition(' ')
        kind = KINDS.get(call)
        try:
            number = int(value)
        except ValueError:
            return b'error: not an integer'
        if kind is None or kind in ('mark', 'stats'):
            return b'error: unknown query'
        self._add(pid, kind, call, number, source='child')
        return b'0'
