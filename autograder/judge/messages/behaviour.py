"""
The words of the behaviour tests (areas/behaviour.py): dropout and causality. A sentence that names
another test takes that test's number from its caller (grading.yaml's `number`, by id), never writes it.
"""

# the three dropout checks, by name
ATTENTION_DROPOUT = 'attention dropout'
RESIDUAL_DROPOUT = 'residual dropout'
EVAL_MODE = 'eval mode'


def dropout_checks(passed, total, names, p):
    return ('%d of %d dropout checks pass (%s; each at p = 1 and at p = %g).'
            % (passed, total, ', '.join(names), p))


def dropout_eval_p1_ok(number):
    """`number`: the test whose process gave the module's output at p = 0 (4.1)."""
    return ('ok   eval mode with attn_pdrop = resid_pdrop = 1 gives the output of p = 0 '
            '(test %s): dropout is off' % number)
DROPOUT_EVAL_IS_BIAS = ': that is out_proj.bias, so the attention weights are dropped in eval mode'
DROPOUT_EVAL_IS_ZERO = ': it is all zeros, so the residual dropout is applied in eval mode'


def dropout_eval_p1_failed(desc, why, number):
    return ('FAIL in eval mode dropout must do nothing, but with attn_pdrop = resid_pdrop = 1 the '
            'output differs from the same module\'s output with p = 0 in test %s '
            '(%s)%s' % (number, desc, why))


DROPOUT_ATTN_P1_OK = ('ok   train mode with attn_pdrop = 1 drops every attention weight: the '
                      'output is out_proj.bias')
DROPOUT_ATTN_IS_P0 = (': it equals the output without dropout, so no dropout is applied to the '
                      'attention weights')
DROPOUT_IS_ZERO = ': it is all zeros'


def dropout_attn_p1_failed(desc, why):
    return ('FAIL with attn_pdrop = 1 in train mode every attention weight is dropped, so the '
            'output must be out_proj(0) = out_proj.bias at every position (%s)%s' % (desc, why))


DROPOUT_RESID_P1_OK = 'ok   train mode with resid_pdrop = 1 gives all zeros'
DROPOUT_RESID_IS_P0 = (': it equals the output without dropout, so no dropout is applied after '
                       'out_proj')


def dropout_resid_p1_failed(desc, why):
    return ('FAIL with resid_pdrop = 1 in train mode the output must be all zeros '
            '(%s)%s' % (desc, why))


def dropout_unjudgeable(what, p, against, n):
    """`against`: 'out_proj.bias' or 'zero'."""
    return ('FAIL %s at p = %g: cannot be judged: the module\'s output without dropout (eval, p = '
            '0) differs from %s at only %d elements' % (what, p, against, n))


def dropout_nothing_dropped(what, p):
    return ('FAIL %s at p = %g in train mode: nothing is dropped, the output is the one without '
            'dropout' % (what, p))


def dropout_on_grid(dtype, numbers):
    """After a dropout check whose outputs are all %s numbers (areas.low_precision_grid); `numbers`: those of
    the values tests of the module (4.1, 5.1)."""
    return (' (your outputs are all %s numbers: the module computed in %s, autocast left on?; dropout '
            'is judged here at %s\'s precision, and the values tests %s judge the precision)'
            % (dtype, dtype, dtype, ' and '.join(numbers)))


DROPOUT_UNSCALED = ': the kept values are not scaled by 1/(1 - p)'


def dropout_neither(what, p, count, size, where, got, dropped, kept, why):
    return ('FAIL %s at p = %g in train mode: %d of %d output values are neither dropped nor kept '
            'and scaled by 1/(1 - p) (first at %s: got %.6g, expected %.6g or %.6g from your eval '
            'output)%s'
            % (what, p, count, size, where, got, dropped, kept, why))


def dropout_share_off(what, p, share, n, margin, sigmas):
    return ('FAIL %s at p = %g in train mode dropped %.3f of %d values, expected %g within %.3f '
            '(%g standard deviations of a binomial share)' % (what, p, share, n, p, margin, sigmas))


def dropout_share_ok(what, p, share, n):
    return ('ok   %s at p = %g in train mode: %.3f of %d values dropped, the others scaled by 1/(1 '
            '- p)'
            % (what, p, share, n))


def dropout_no_p0(case, n_kv_head, missing, number):
    return ('FAIL %s: cannot be judged without the same module\'s output at p = 0, which test %s '
            'did not return for n_kv_head=%d (%s)' % (case, number, n_kv_head, missing))


def dropout_output_shape(case, got, expected):
    return 'FAIL %s: output of shape %s, expected %s' % (case, got, expected)


def dropout_degenerate(case, number):
    return ('FAIL %s: not credited: the module\'s output at p = 0 (test %s) is already what p = 1 '
            'must give, so this proves nothing' % (case, number))


def outputs_missing(case, shape):
    """Dropout's and causality's outputs absent or of a shape the check cannot use."""
    return 'FAIL %s: outputs missing or of shape %s' % (case, shape)


def dropout_non_finite(case):
    return 'FAIL %s: non-finite values (NaN/inf) in the output' % case


def dropout_eval_mid_ok(p):
    return 'ok   eval mode at p = %g gives the output of p = 0: dropout is off' % p


def dropout_eval_mid_failed(p, desc):
    return ('FAIL in eval mode at attn_pdrop = resid_pdrop = %g the output differs from the same '
            'module\'s at p = 0 (%s): dropout must do nothing in eval mode' % (p, desc))


# ----------------------------------------------------------------------------- causality (7.1)

def other_non_finite(at):
    """`at`: ' first at [..]' or ''."""
    return 'non-finite values (NaN/inf) at other places%s' % at


def first_at(where):
    return ' first at %s' % where


ALL_NON_FINITE = 'all non-finite'


def causal_modules(passed, total):
    return '%d of %d modules are causal.' % (passed, total)


def not_deterministic(case, desc):
    return ('FAIL %s: two calls on the same input gave different outputs (%s): the model is not '
            'deterministic in eval mode, so causality cannot be judged' % (case, desc))


def causality_no_base(case, number, missing):
    return ('FAIL %s: cannot be judged: test %s returned no output for '
            'the original input (%s)' % (case, number, missing))


def causality_shapes(case, here, there, number):
    return 'FAIL %s: outputs of shape %s here but %s in test %s' % (case, here, there, number)


def causality_constant(case, c, number):
    return ('FAIL %s: not credited: the outputs at positions >= %d did not change either, although '
            'the tokens there did (test %s\'s outputs for the original input): outputs that do not '
            'depend on the input prove nothing' % (case, c, number))


def causal_ok(case, c, number):
    return ('ok   %s: outputs at positions < %d are unchanged when the tokens from %d on change '
            '(compared with test %s\'s outputs for the original input)' % (case, c, c, number))


def causal_failed(case, c, number, desc):
    return ('FAIL %s: changing the tokens from position %d on changed the outputs at earlier '
            'positions (against test %s\'s outputs for the original input: %s): the model looks at '
            'future tokens (a mask that lets a query see a later key does that, and so does a softmax '
            'over the queries, dim=-2, instead of the keys)' % (case, c, number, desc))
