"""
Probes of the handout's workflow around the modules: generation (also past block_size, and
with the KV cache) and the memory the attention reports. Collected by runner.py like every
probes*.py module; none of them judges anything.
"""

import gc
import os

import numpy as np
import torch

from . import adapter, cuda_view, link_standin, memory_readings
from .configs import GENERATE_NEW


def _model_holder(ctx, label, kv, rope):
    holder = {}

    def model():
        if 'm' not in holder:
            holder['m'] = ctx.model(label, kv, rope)
        return holder['m']
    return model


def probe_generate(ctx):
    prompt = ctx.t('generate/prompt')
    model = _model_holder(ctx, 'rope-gqa', 3, True)
    long_new = 2 * ctx.profile['model']['block_size']   # the context must be cropped to its LAST block_size tokens

    def top_k(k):
        def run():
            torch.manual_seed(0)
            seq = adapter.generate(model(), prompt, GENERATE_NEW, temperature=1.0, do_sample=True, top_k=k)
            out = {'tokens': seq}
            if seq.dim() == 2 and seq.size(1) > prompt.size(1):
                with torch.no_grad():  # the student's own logits, to check each sample lies in its top k
                    out['logits'] = adapter.call_gpt(model(), seq[:, :-1])[0]
            return out
        return run
    ctx.case('greedy', lambda: adapter.generate(model(), prompt, GENERATE_NEW))
    ctx.case('top_k=1', top_k(1))
    ctx.case('top_k=5', top_k(5))
    ctx.case('greedy_past_block', lambda: adapter.generate(model(), prompt, long_new))


def probe_kv_cache(ctx):
    """Greedy generation with use_kv_cache=True, past block_size, with RoPE + GQA and with GQA alone."""
    prompt = ctx.t('generate/prompt')
    long_new = 2 * ctx.profile['model']['block_size']
    for label, kv, rope in (('rope-gqa', 3, True), ('gqa', 2, False)):
        def run(label=label, kv=kv, rope=rope):
            model = ctx.model(label, kv, rope)
            filled = -1
            try:  # does the attention append to the handout's KVCache? (tells "not implemented" from "wrong")
                import mingpt.model as student
                caches = [student.KVCache() for _ in model.transformer.h]
                with torch.no_grad():
                    model(prompt, kv_caches=caches)
                filled = int(caches[0].length)
            except Exception:
                pass
            tokens = adapter.generate(model, prompt, long_new, use_kv_cache=True)
            return {'tokens': tokens, 'filled': np.array([filled], dtype=np.int64)}
        ctx.case(label, run)


# ----------------------------------------------------------------------------- memory

FIGURE_TYPES = ('int', 'float', 'tensor', 'str', 'none', 'bool', 'other')


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
    Only the figure forward returned comes from here; the judge reads everything else from the log.
    """
    mem = ctx.profile['memory']
    T = mem['seq']
    x = ctx.t('memory/x')
    warm = x.repeat(-(-mem['warmup_batch'] // x.size(0)), 1, 1)[:mem['warmup_batch']]
    ask, standin = link_standin.connect(ctx.job)
    gpu = ctx.device.type == 'cuda'
    view = (lambda: cuda_view.Forward(ask)) if gpu else (lambda: cuda_view.CudaView(ask))
    labels = []
    for kv in sorted(ctx.profile['kv_heads'], reverse=True):
        label = 'n_kv_head=%d' % kv
        labels.append(label)

        def run(kv=kv, label=label):
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
        ctx.case(label, run)
    if standin is not None:   # DEV STAND-IN (link_standin.py): the log the harness keeps once the link is merged
        ctx.arrays['log'] = np.array(link_standin.rows(standin.log, labels), dtype=np.int64).reshape(-1, 5)


def _limit_address_space(margin_mb):
    """
    RLIMIT_AS = the process's address space now + margin, unless a lower limit is already set
    (the sandbox sets it before model.py is imported once job['limits'] is merged: then this does
    nothing). Until then this probe sets it itself, after model.py's import: what the import
    allocated is inside the base (the sandbox's global address-space limit still bounds it).
    """
    import resource
    size = memory_readings.proc_status(os.getpid())['VmSize']
    want = size + margin_mb * (1 << 20)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY or soft > want:
        resource.setrlimit(resource.RLIMIT_AS, (want, want))


def probe_sliding_window_memory(ctx):
    """
    banded_attention(q, k, v, window, dropout) at a long sequence, on the CPU, under an
    address-space limit in which one N x N float32 matrix does not fit. The whole output comes
    back; the judge compares it with the reference at rows the harness picked, which only the
    fixtures hold. No meter: the kernel's limit is the evidence.
    """
    sw = ctx.profile['sliding_window']
    n = sw['memory_seq']
    q, k, v = (torch.from_numpy(ctx.inputs['swmem/%s' % name].copy()) for name in 'qkv')
    dropout = torch.nn.Dropout(0.1).eval()   # a real module that leaves the weights as they are

    def run():
        import mingpt.model as student
        gc.collect()
        _limit_address_space(sw['memory_margin_mb'])
        with torch.no_grad():
            return {'out': student.banded_attention(q, k, v, sw['memory_window'], dropout)}
    ctx.case('N=%d' % n, run)
