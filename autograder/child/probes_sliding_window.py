"""
Probes of the optional sliding-window part (judge/areas/sliding_window.py): both attention modules
with config.sliding_window, and banded_attention on its own. They record plain arrays and judge
nothing.
"""

import torch

from . import adapter


def probe_sliding_window(ctx):
    """
    The optional part's two forms at small N: both attention modules with config.sliding_window
    (the window as a mask inside the module), and banded_attention(q, k, v, window, dropout) on
    its own for several windows, one wider than the sequence.
    """
    sw, mod = ctx.profile['sliding_window'], ctx.profile['module']
    x = ctx.t('sw/x')
    for kind, label, kv, rope in (('mha', 'mha', mod['n_query_head'], False), ('gqa', 'gqa-rope-kv2', 2, True)):
        def compute(kind=kind, label=label, kv=kv, rope=rope, window=sw['window']):
            module = ctx.attention(kind, label, kv, rope=rope, sliding_window=window, block_size=sw['seq']).eval()
            with torch.no_grad():
                return adapter.call_attention(module, x)[0]
        ctx.case('%s/window' % kind, compute)
        # the same module without a window: its reference output is what an attention that ignores
        # config.sliding_window returns, so the harness can say "not implemented"
        ctx.case('%s/no_window' % kind, lambda compute=compute: compute(window=None))
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
        raise adapter.report_schema.NotImplementedFact('no_banded_attention')
    return function


def banded_cases(sw):
    """(case name, window, T) of banded_attention at small N: the test's window, an odd one, and windows
    wider than the sequence (w' = window//2 + 1 > T: every query sees the whole causal prefix)."""
    T = sw['seq']
    return [('banded/w%d' % w, w, T) for w in (sw['window'], sw['window'] - 1, 2 * T)] + \
        [('banded/w%d_T7' % sw['memory_window'], sw['memory_window'], 7)]
