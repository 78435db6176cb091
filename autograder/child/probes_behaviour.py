"""
Probes of the attention's behaviour (judge/areas/behaviour.py): dropout where the handout puts it,
and causality (outputs for inputs whose future half changed). They record plain arrays and
judge nothing.
"""

import torch

from . import adapter


def probe_dropout(ctx):
    # GQA only: CausalSelfAttention's dropout is given code, and a test credits the student's own work
    x = ctx.t('attn/x')
    for kind, label, kv in (('gqa', 'gqa-kv2', 2),):
        for case, attn_p, resid_p, train in (('attn_p1_train', 1.0, 0.0, True), ('resid_p1_train', 0.0, 1.0, True),
                                             ('both_p1_eval', 1.0, 1.0, False)):
            def compute(kind=kind, label=label, kv=kv, attn_p=attn_p, resid_p=resid_p, train=train):
                module = ctx.attention(kind, label, kv, attn_pdrop=attn_p, resid_pdrop=resid_p)
                module.train(train)
                with torch.no_grad():
                    y, _ = adapter.call_attention(module, x)
                return y
            ctx.case('%s/%s' % (kind, case), compute)
    # 0 < p < 1 on weights where each output element is one attention weight (inputs.dropout_inputs); ctx.case
    # seeds torch before each case, so the dropped elements are the same in every grading of the same code
    p, xd = ctx.profile['dropout']['p'], ctx.t('dropout/x')
    for case, attn_p, resid_p, train in (('mid_eval_p0', 0.0, 0.0, False), ('mid_eval', p, p, False),
                                         ('mid_attn_train', p, 0.0, True), ('mid_resid_train', 0.0, p, True)):
        def run_mid(attn_p=attn_p, resid_p=resid_p, train=train):
            module = ctx.attention('gqa', 'dropout', 2, attn_pdrop=attn_p, resid_pdrop=resid_p)
            module.train(train)
            with torch.no_grad():
                y, _ = adapter.call_attention(module, xd)
            return y
        ctx.case('gqa/' + case, run_mid)


def probe_causality(ctx):
    """
    Outputs for the "future" inputs only: the original inputs of 3.1, 5.1 and 8.1 with their
    second half replaced. This probe's process never sees the originals (judge/inputs.probe_inputs);
    the harness compares the first half of these outputs with what those tests' processes returned
    for the originals. Each input runs twice: outputs that change between two identical calls
    are told apart from a leak of future tokens.
    """
    nh = ctx.profile['module']['n_query_head']
    for kind, label, kv in (('mha', 'mha-rope', nh), ('gqa', 'gqa-rope-kv2', 2)):
        def compute(kind=kind, label=label, kv=kv):
            module = ctx.attention(kind, label, kv, rope=True).eval()
            x = ctx.t('attn/x_future')
            with torch.no_grad():
                return {'future': adapter.call_attention(module, x)[0], 'again': adapter.call_attention(module, x)[0]}
        ctx.case(kind, compute)

    def run_gpt():
        model = ctx.model('rope-gqa', 3, True)
        idx = ctx.t('model/idx_future')
        with torch.no_grad():
            return {'future': adapter.call_gpt(model, idx)[0], 'again': adapter.call_gpt(model, idx)[0]}
    ctx.case('gpt', run_gpt)
