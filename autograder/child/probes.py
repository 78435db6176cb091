"""
The probes: one function per graded test, named `probe_<id>` (dashes become underscores),
run inside the sandbox by runner.py, which collects them from every `probes*.py` module of
this package (so a new group of probes can live in a module of its own). Each runs the student's code on the inputs of the job
and records plain arrays through `ctx.case`; none of them judges anything.
"""

import torch

from . import adapter
from .configs import MODEL_CONFIGS


def probe_rope(ctx):
    for i, (B, nh, T, d) in enumerate(ctx.profile['rope_cases']):
        def run(i=i, d=d):
            with torch.no_grad():
                return adapter.rope(d).to(ctx.device)(ctx.t('rope/x%d' % i))
        ctx.case('d%d_T%d' % (d, T), run)


def probe_rope_cache(ctx):
    module = {}

    def call(key, dtype=None):
        def run():
            if 'm' not in module:
                module['m'] = adapter.rope(8).to(ctx.device)
            x = ctx.t(key)
            with torch.no_grad():
                y = module['m'](x)
            ctx.info.setdefault('dtypes', {})[name] = [str(x.dtype).replace('torch.', ''), str(y.dtype).replace('torch.', '')]
            return y
        return run
    for name, key in (('call0_T8', 'rope-cache/x8'), ('call1_T24', 'rope-cache/x24'), ('call2_T8', 'rope-cache/x8'),
                      ('call3_T8_float64', 'rope-cache/x8_f64'), ('call4_T8_float32', 'rope-cache/x8')):
        ctx.case(name, call(key))


def _attention_cases(ctx, kind, label_fmt, rope, kv_heads):
    x = ctx.t('attn/x')
    for kv in kv_heads:
        def run(kv=kv):
            module = ctx.attention(kind, label_fmt % kv, kv, rope=rope).eval()
            with torch.no_grad():
                y, _ = adapter.call_attention(module, x)
            return y
        ctx.case('n_kv_head=%d' % kv, run)


def probe_mha_rope(ctx):
    nh = ctx.profile['module']['n_query_head']
    _attention_cases(ctx, 'mha', 'mha-rope%.0s', True, [nh])  # one weight set, whatever n_kv_head


def probe_gqa(ctx):
    _attention_cases(ctx, 'gqa', 'gqa-kv%d', False, ctx.profile['kv_heads'])


def probe_gqa_rope(ctx):
    _attention_cases(ctx, 'gqa', 'gqa-rope-kv%d', True, ctx.profile['kv_heads'])


def probe_dropout(ctx):
    # GQA only: CausalSelfAttention's dropout is given code, and a test credits the student's own work
    x = ctx.t('attn/x')
    for kind, label, kv in (('gqa', 'gqa-kv2', 2),):
        for case, attn_p, resid_p, train in (('attn_p1_train', 1.0, 0.0, True), ('resid_p1_train', 0.0, 1.0, True),
                                             ('both_p1_eval', 1.0, 1.0, False)):
            def run(kind=kind, label=label, kv=kv, attn_p=attn_p, resid_p=resid_p, train=train):
                module = ctx.attention(kind, label, kv, attn_pdrop=attn_p, resid_pdrop=resid_p)
                module.train(train)
                with torch.no_grad():
                    y, _ = adapter.call_attention(module, x)
                return y
            ctx.case('%s/%s' % (kind, case), run)


def probe_causality(ctx):
    """
    Outputs for the "future" inputs only: the original inputs of 3.1, 5.1 and 8.1 with their
    second half replaced. This probe's process never sees the originals (inputs.PROBE_INPUTS);
    the judge compares the first half of these outputs with what those tests' processes returned
    for the originals. Each input runs twice: outputs that change between two identical calls
    are told apart from a leak of future tokens.
    """
    nh = ctx.profile['module']['n_query_head']
    for kind, label, kv in (('mha', 'mha-rope', nh), ('gqa', 'gqa-rope-kv2', 2)):
        def run(kind=kind, label=label, kv=kv):
            module = ctx.attention(kind, label, kv, rope=True).eval()
            x = ctx.t('attn/x_future')
            with torch.no_grad():
                return {'future': adapter.call_attention(module, x)[0], 'again': adapter.call_attention(module, x)[0]}
        ctx.case(kind, run)

    def run_gpt():
        model = ctx.model('rope-gqa', 3, True)
        idx = ctx.t('model/idx_future')
        with torch.no_grad():
            return {'future': adapter.call_gpt(model, idx)[0], 'again': adapter.call_gpt(model, idx)[0]}
    ctx.case('gpt', run_gpt)


def probe_model(ctx):
    nh = ctx.profile['model']['n_query_head']
    for label, kv, rope in MODEL_CONFIGS:
        def run(label=label, kv=kv, rope=rope):
            model = ctx.model(label, kv or nh, rope)
            with torch.no_grad():
                logits, loss = adapter.call_gpt(model, ctx.t('model/idx'), ctx.t('model/targets'))
            return {'logits': logits, 'loss': loss.reshape(1) if loss is not None else None}
        ctx.case(label, run)


def probe_sliding_window(ctx):
    """
    The optional part's two forms at small N: both attention modules with config.sliding_window
    (the window as a mask inside the module), and banded_attention(q, k, v, window, dropout) on
    its own for several windows, one wider than the sequence.
    """
    sw, mod = ctx.profile['sliding_window'], ctx.profile['module']
    x = ctx.t('sw/x')
    for kind, label, kv, rope in (('mha', 'mha', mod['n_query_head'], False), ('gqa', 'gqa-rope-kv2', 2, True)):
        def run(kind=kind, label=label, kv=kv, rope=rope, window=sw['window']):
            module = ctx.attention(kind, label, kv, rope=rope, sliding_window=window, block_size=sw['seq']).eval()
            with torch.no_grad():
                return adapter.call_attention(module, x)[0]
        ctx.case('%s/window' % kind, run)
        # the same module without a window: its reference output is what an attention that ignores
        # config.sliding_window returns, so the judge can say "not implemented"
        ctx.case('%s/no_window' % kind, lambda run=run: run(window=None))
    q, k, v = (ctx.t('sw/' + name) for name in 'qkv')
    for case, window, T in banded_cases(sw):
        def banded(window=window, T=T):
            student = banded_function()
            with torch.no_grad():
                return student(q[:, :, :T], k[:, :, :T], v[:, :, :T], window, torch.nn.Dropout(0.0))
        ctx.case(case, banded)


def banded_function():
    """The student's banded_attention; a model.py without one (the course's starter has none) has not attempted it."""
    function = getattr(adapter.model_module(), 'banded_attention', None)
    if not callable(function):
        raise NotImplementedError('model.py defines no banded_attention (the optional sliding-window part)')
    return function


def banded_cases(sw):
    """(case name, window, T) of banded_attention at small N: the test's window, an odd one, and windows
    wider than the sequence (w' = window//2 + 1 > T: every query sees the whole causal prefix)."""
    T = sw['seq']
    return [('banded/w%d' % w, w, T) for w in (sw['window'], sw['window'] - 1, 2 * T)] + \
        [('banded/w%d_T7' % sw['memory_window'], sw['memory_window'], 7)]
