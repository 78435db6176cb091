"""
The staff-only probe of shared inputs (staff/regrade/shared_inputs.py): the student's RoPE, both
attention classes and banded_attention (where it exists) on a small set of inputs that is the same
for the whole class. It is no graded test: no registry entry, no fixtures, no judge; only a staff
regrade runs it, after the grading is done, and its outputs go to behaviour.json alone. Like every
probe it records plain arrays and judges nothing.
"""

import torch

from . import adapter


def probe_staff_shared(ctx):
    nh = ctx.profile['module']['n_query_head']

    def rope():
        x = ctx.t('staff/rope/x')
        with torch.no_grad():
            return adapter.rope(x.shape[-1]).to(ctx.device)(x)
    ctx.case('rope', rope)
    for kind, kv in (('mha', nh), ('gqa', 2)):
        def attend(kind=kind, kv=kv):
            module = ctx.attention(kind, 'staff-' + kind, kv, rope=True).eval()
            with torch.no_grad():
                return adapter.call_attention(module, ctx.t('staff/attn/x'))[0]
        ctx.case(kind, attend)

    def banded():
        function = getattr(adapter.model_module(), 'banded_attention', None)
        if not callable(function):
            return None   # not attempted: nothing to compare
        q, k, v = (ctx.t('staff/banded/' + name) for name in 'qkv')
        with torch.no_grad():
            return function(q, k, v, ctx.profile['sliding_window']['window'], torch.nn.Dropout(0.0))
    ctx.case('banded', banded)
