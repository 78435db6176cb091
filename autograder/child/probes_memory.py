"""
Probes of the memory the attention reports (generation and the KV cache are in
probes_generate.py). Collected by runner.py like every probes*.py module; none of them judges
anything.
"""

import gc
import os

import numpy as np
import torch

from . import adapter, cuda_view, socket_link
from autograder.contract import memory_readings
from autograder.contract.report_schema import FIGURE_TYPES


# ----------------------------------------------------------------------------- memory

def _figure(mem):
    """[type code, value] of the figure forward returned (value NaN when there is none): float64 holds every
    integer up to 2**53 exactly, far above any byte count a test call can reach."""
    fig = memory_readings.describe_figure(mem)
    value = fig['value']
    try:
        value = float(value) if value is not None else float('nan')
    except OverflowError:
        value = float('inf') if value > 0 else float('-inf')
    return np.array([FIGURE_TYPES.index(fig['type']), value], dtype=np.float64)


def probe_memory(ctx):
    """
    Per n_kv_head, GroupedQueryAttention.forward in train mode with grad on and attention dropout,
    first at a larger batch (warm-up: a peak never reset is then wrong, as on a GPU), then the
    measured call between the marks 'start n_kv_head=K' / 'end n_kv_head=K' sent to the harness.
    On a CPU both calls run in the CUDA view, so whatever guard the code uses, it measures, and
    its torch.cuda memory queries are answered by the harness from the kernel (RssAnon, VmHWM,
    clear_refs) and logged there; on a GPU the real allocator answers and each answer is sent on.
    Only the figure forward returned comes from here; the harness reads everything else from the log.
    """
    mem = ctx.profile['memory']
    T = mem['seq']
    x = ctx.t('memory/x')
    warm = x.repeat(-(-mem['warmup_batch'] // x.size(0)), 1, 1)[:mem['warmup_batch']]
    if socket_link.connected():
        ask = socket_link.ask   # the harness answers and keeps the log: the evidence 9.1 judges
    else:   # run in-process (tests): answered here, and nothing is evidence (the harness reads only the harness's log)
        local, pid = memory_readings.Readings(), os.getpid()
        ask = lambda payload: local(payload, pid)   # noqa: E731
    gpu = ctx.device.type == 'cuda'
    view = (lambda: cuda_view.Forward(ask)) if gpu else (lambda: cuda_view.CudaView(ask))
    for kv in sorted(ctx.profile['kv_heads'], reverse=True):
        label = 'n_kv_head=%d' % kv

        def compute(kv=kv, label=label):
            with torch.enable_grad():
                with view():
                    # built in the view too: a flag such as self.on_gpu = torch.cuda.is_available() in __init__
                    # is then what it is on a GPU machine
                    module = ctx.attention('gqa', 'gqa-kv%d' % kv, kv, attn_pdrop=mem['attn_pdrop'], block_size=T)
                    module.train()
                    adapter.call_attention(module, warm)   # its outputs die here, before the measured call
                memory_readings.settle()
                if gpu:
                    torch.cuda.synchronize(ctx.device)
                ask(('mark start ' + label).encode())
                try:
                    with view():
                        y, figure = adapter.call_attention(module, x)
                finally:
                    ask(('mark end ' + label).encode())
            del y
            return {'figure': _figure(figure)}
        ctx.case(label, compute)


def probe_sliding_window_memory(ctx):
    """
    banded_attention(q, k, v, window, dropout) at a long sequence, on the CPU, under an
    address-space limit in which one N x N float32 matrix does not fit. The whole output comes
    back; the harness compares it with the reference at rows the harness picked, which only the
    fixtures hold. No meter: the kernel's limit is the evidence (RLIMIT_AS = VmSize + the margin,
    set by runner.apply_limits from job['limits'] before model.py was imported).
    """
    sw = ctx.profile['sliding_window']
    n = sw['memory_seq']
    q, k, v = (torch.from_numpy(ctx.inputs['swmem/%s' % name].copy()) for name in 'qkv')
    dropout = torch.nn.Dropout(0.1).eval()   # a real module that leaves the weights as they are

    def compute():
        from .probes_sliding_window import banded_function
        banded = banded_function()
        gc.collect()
        with torch.no_grad():
            return {'out': banded(q, k, v, sw['memory_window'], dropout)}
    ctx.case('N=%d' % n, compute)
