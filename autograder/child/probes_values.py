"""
Probes of the graded values (judge/areas/values.py): RoPE, its cache, the attention modules with and
without RoPE, and the whole model's logits and loss. Like every probe, one function per graded
test, named `probe_<id>` (dashes become underscores), run inside the sandbox by runner.py, which
collects them from every `probes*.py` module of this package; each runs the student's code on
the inputs of the job and records plain arrays through `ctx.case`; none of them judges anything.
"""

import torch

from . import adapter
from autograder.contract.configs import MODEL_CONFIGS


def probe_rope(ctx):
    for i, (B, nh, T, d) in enumerate(ctx.profile['rope_cases']):
        def compute(i=i, d=d):
            with torch.no_grad():
                return adapter.rope(d).to(ctx.device)(ctx.t('rope/x%d' % i))
        ctx.case('d%d_T%d' % (d, T), compute)


def probe_rope_cache(ctx):
    module = {}

    def call(key, dtype=None):
        def compute():
            if 'm' not in module:
                module['m'] = adapter.rope(8).to(ctx.device)
            x = ctx.t(key)
            with torch.no_grad():
                y = module['m'](x)
            ctx.info.setdefault('dtypes', {})[name] = [str(t.dtype).replace('torch.', '') for t in (x, y)]
            return y
        return compute
    for name, key in (('call0_T8', 'rope-cache/x8'), ('call1_T24', 'rope-cache/x24'), ('call2_T8', 'rope-cache/x8'),
                      ('call3_T8_float64', 'rope-cache/x8_f64'), ('call4_T8_float32', 'rope-cache/x8')):
        ctx.case(name, call(key))


def _attention_cases(ctx, kind, label_fmt, rope, kv_heads):
    x = ctx.t('attn/x')
    for kv in kv_heads:
        def compute(kv=kv):
            module = ctx.attention(kind, label_fmt % kv, kv, rope=rope).eval()
            with torch.no_grad():
                y, _ = adapter.call_attention(module, x)
            return y
        ctx.case('n_kv_head=%d' % kv, compute)


def probe_mha_rope(ctx):
    nh = ctx.profile['module']['n_query_head']
    _attention_cases(ctx, 'mha', 'mha-rope%.0s', True, [nh])  # one weight set, whatever n_kv_head


def probe_gqa(ctx):
    _attention_cases(ctx, 'gqa', 'gqa-kv%d', False, ctx.profile['kv_heads'])


def probe_gqa_rope(ctx):
    _attention_cases(ctx, 'gqa', 'gqa-rope-kv%d', True, ctx.profile['kv_heads'])


def probe_model(ctx):
    nh = ctx.profile['model']['n_query_head']
    for label, kv, rope in MODEL_CONFIGS:
        def compute(label=label, kv=kv, rope=rope):
            model = ctx.model(label, kv or nh, rope)
            with torch.no_grad():
                logits, loss = adapter.call_gpt(model, ctx.t('model/idx'), ctx.t('model/targets'))
            return {'logits': logits, 'loss': loss.reshape(1) if loss is not None else None}
        ctx.case(label, compute)
