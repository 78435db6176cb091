"""
Probes of the memory the attention reports (generation and the KV cache are in
probes_generate.py). Collected by runner.py like every probes*.py module; none of them judges
anything.
"""

import gc

import numpy as np
import torch

from . import adapter, cuda_meter

INT64_MAX = 2 ** 62         # a reported figure is clipped into int64 (a wild figure must still come back)


# ----------------------------------------------------------------------------- memory

def _reported(mem):
    """The reported figure as an int64; -1 when there is none or it is not a finite number."""
    try:
        value = adapter.mem_as_int(mem)
    except (TypeError, ValueError, OverflowError, RuntimeError):
        return -1
    return max(-1, min(INT64_MAX, value))


def _measure(ctx, module, x, meter_cls, force_cuda=False):
    """
    One forward under the harness's own meter: [net, peak] of the whole forward (the output
    still alive), the figure the module reported, and the readings its code took.
    """
    gc.collect()  # garbage of earlier calls must not die inside the measured region
    if ctx.device.type == 'cuda':
        torch.cuda.synchronize(ctx.device)
        before = torch.cuda.memory_allocated(ctx.device)
        torch.cuda.reset_peak_memory_stats(ctx.device)
        y, mem = adapter.call_attention(module, x)
        torch.cuda.synchronize(ctx.device)
        net = torch.cuda.memory_allocated(ctx.device) - before
        peak = torch.cuda.max_memory_allocated(ctx.device) - before
        del y
        return [net, peak, _reported(mem), int(force_cuda), 0], np.zeros((0, 2), np.int64), np.zeros((0, 2), np.int64)
    forced = cuda_meter.ForcedIsCuda() if force_cuda else None
    with cuda_meter.MeterFigures(meter_cls) as figures, cuda_meter.Meter() as meter:
        if forced:
            with forced:
                y, mem = adapter.call_attention(module, x)
        else:
            y, mem = adapter.call_attention(module, x)
    del y
    readings = np.array(meter.readings, dtype=np.int64).reshape(-1, 2)
    meters = np.array(figures.figures, dtype=np.int64).reshape(-1, 2)
    return [meter.live, meter.peak, _reported(mem), int(force_cuda), 1], readings, meters


def probe_memory(ctx):
    """
    Per n_kv_head: the figure GroupedQueryAttention.forward reports (train mode, grad on) and
    what the harness's meter saw for the same call. A figure of 0 on CPU is measured again
    with every tensor answering is_cuda=True: code that measures only `if x.is_cuda` (the
    course's starter style) then reports what it measures on a GPU machine.
    """
    from mingpt.utils import AttentionMemory  # the handout's meter: the figures it gives the student are recorded
    x = ctx.t('memory/x')
    for kv in sorted(ctx.profile['kv_heads'], reverse=True):
        def run(kv=kv):
            module = ctx.attention('gqa', 'gqa-kv%d' % kv, kv).train()
            adapter.call_attention(module, x)  # warm-up: lazily built caches are not the attention's cost
            figures, readings, meters = _measure(ctx, module, x, AttentionMemory)
            if figures[2] <= 0 and ctx.device.type == 'cpu':
                try:
                    figures, readings, meters = _measure(ctx, module, x, AttentionMemory, force_cuda=True)
                except Exception:
                    figures[3] = -1  # the CUDA-only branch cannot run on CPU: nothing to judge
            return {'figures': np.array(figures, dtype=np.int64), 'readings': readings, 'meters': meters}
        ctx.case('n_kv_head=%d' % kv, run)


def probe_sliding_window_memory(ctx):
    """Peak bytes of the banded path at growing N, and its output (credited only when it is the windowed one)."""
    from mingpt.utils import AttentionMemory
    sw, mod = ctx.profile['sliding_window'], ctx.profile['module']
    block = max(sw['memory_seqs'])
    for n in sw['memory_seqs']:
        def run(n=n):
            module = ctx.attention('mha', 'mha', mod['n_query_head'], sliding_window=sw['memory_window'],
                                   sliding_window_impl='banded', block_size=block).eval()
            x = ctx.t('swmem/x%d' % n)
            with torch.no_grad():
                adapter.call_attention(module, x)
                gc.collect()
                with AttentionMemory(ctx.device) as mem:
                    y = adapter.call_attention(module, x)[0]
            return {'peak': np.array([mem.peak_bytes], dtype=np.int64), 'y': y}
        ctx.case('N=%d' % n, run)
