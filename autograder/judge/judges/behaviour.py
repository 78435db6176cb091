"""
Judges of behaviour rather than values, each resting on the same model's answers in other
processes of the grading (registry `evidence`), never on the reference's values:
- dropout (6.1): with p = 1 in eval mode, the output of 4.1's process at p = 0; in train mode
  with attn_pdrop = 1, out_proj.bias (every attention weight dropped); with resid_pdrop = 1, zeros;
  and at 0 < p < 1, on weights where each output element is one attention weight, the share of
  dropped elements and the 1/(1 - p) scaling of the kept ones against the same module's eval output;
- causality (7.1): the outputs for inputs whose second half was replaced, up to that half,
  against what 3.1, 5.1 and 8.1 returned for the original inputs. A causal model with wrong
  values passes; a model that reads later tokens fails, however it answers each process.
"""

import numpy as np

from autograder.judge import inputs
from autograder.judge.judges import Verdict, case_error_line, close, compare, evidence_output

DROPOUT_KV = inputs.DROPOUT_KV   # the dropout probe's module: GroupedQueryAttention with n_kv_head = 2
# three checks, each of a p = 1 case on weights 'gqa-kv2' and a 0 < p < 1 case on weights 'dropout'
# (inputs.dropout_inputs): a check passes only when both do, since p = 1 alone is met by a module that
# returns a constant when p >= 1 and has no dropout otherwise
DROPOUT_CHECKS = (('attention dropout', 'attn_p1_train', 'mid_attn_train'),
                  ('residual dropout', 'resid_p1_train', 'mid_resid_train'),
                  ('eval mode', 'both_p1_eval', 'mid_eval'))
DROPOUT_CASES = tuple(c for _, p1, mid in DROPOUT_CHECKS for c in (p1, mid)) + ('mid_eval_p0',)
MIN_JUDGED = 100   # elements whose dropped and kept values differ clearly, needed to judge a share of p


def _input_seed(grading, fixtures):
    """The seed of the drawn input set (fixtures view), else the profile's."""
    seed = getattr(fixtures, 'input_seed', None)
    return grading.profiles[fixtures.profile].seed if seed is None else seed


def _out_proj_bias(grading, fixtures, label='gqa-kv%d' % DROPOUT_KV):
    prof = grading.profiles[fixtures.profile]
    seed = _input_seed(grading, fixtures)
    if label == 'dropout':
        return inputs.dropout_inputs(seed, prof.module, DROPOUT_KV, prof.dropout.seq)[1]['out_proj.bias']
    return inputs.attention_weights(seed, label, prof.module.n_embd, prof.module.n_query_head,
                                    DROPOUT_KV)['out_proj.bias']


def _p1_case(case, got, p0, bias, tol):
    """(ok, line) of one p = 1 case: `got` its output, `p0` the same module's eval output at p = 0 (4.1)."""
    zeros = np.zeros_like(p0)
    is_p0 = close(got, p0, tol.atol, tol.rtol)
    is_bias = close(got, np.broadcast_to(bias, p0.shape), tol.atol, tol.rtol)
    is_zero = close(got, zeros, tol.atol, tol.rtol)
    if case == 'both_p1_eval':
        ok, desc = _unchanged(got, p0, tol)   # NaN where 4.1 had NaN too is the same module's output
        if ok:
            return True, 'ok   eval mode with attn_pdrop = resid_pdrop = 1 gives the output of p = 0 (test 4.1): dropout is off'
        why = (': that is out_proj.bias, so the attention weights are dropped in eval mode' if is_bias else
               ': it is all zeros, so the residual dropout is applied in eval mode' if is_zero else '')
        return False, ('FAIL in eval mode dropout must do nothing, but with attn_pdrop = resid_pdrop = 1 the output '
                       'differs from the same module\'s output with p = 0 in test 4.1 (%s)%s' % (desc, why))
    if case == 'attn_p1_train':
        ok, desc = compare(got, np.broadcast_to(bias, p0.shape).astype(p0.dtype), tol.atol, tol.rtol)
        if ok:
            return True, 'ok   train mode with attn_pdrop = 1 drops every attention weight: the output is out_proj.bias'
        why = (': it equals the output without dropout, so no dropout is applied to the attention weights' if is_p0 else
               ': it is all zeros' if is_zero else '')
        return False, ('FAIL with attn_pdrop = 1 in train mode every attention weight is dropped, so the output must be '
                       'out_proj(0) = out_proj.bias at every position (%s)%s' % (desc, why))
    ok, desc = compare(got, zeros, tol.atol, tol.rtol)
    if ok:
        return True, 'ok   train mode with resid_pdrop = 1 gives all zeros'
    why = ': it equals the output without dropout, so no dropout is applied after out_proj' if is_p0 else ''
    return False, 'FAIL with resid_pdrop = 1 in train mode the output must be all zeros (%s)%s' % (desc, why)


def _near(a, b, tol):
    return np.abs(a - b) <= tol.atol + tol.rtol * np.abs(b)


def _mid_train(what, got, base, offset, p, tol):
    """
    (ok, line) of a train-mode output at 0 < p < 1 on the 'dropout' weights, where each output element
    is offset + one value (an attention weight, or the whole output for the residual): each element must
    be dropped (offset) or kept and scaled (offset + value / (1 - p)), and the share dropped among the
    elements where the two differ clearly must be p within tolerance.binomial_sigmas standard deviations.
    `base` is the same module's eval output at p = 0 in the same process.
    """
    got, base = got.astype(np.float64), base.astype(np.float64)
    offset = np.broadcast_to(offset, base.shape).astype(np.float64)
    value = base - offset
    dropped, kept = _near(got, offset, tol), _near(got, offset + value / (1 - p), tol)
    judged = np.abs(value) > 100 * (tol.atol + tol.rtol * np.abs(offset))
    n = int(judged.sum())
    if n < MIN_JUDGED:
        return False, ('FAIL %s at p = %g: cannot be judged: the module\'s output without dropout (eval, p = 0) differs '
                       'from %s at only %d elements' % (what, p, 'out_proj.bias' if np.any(offset) else 'zero', n))
    if np.all(_near(got, base, tol)):
        return False, ('FAIL %s at p = %g in train mode: nothing is dropped, the output is the one without dropout'
                       % (what, p))
    neither = ~(dropped | kept)
    if neither.any():
        where = tuple(int(i) for i in np.argwhere(neither)[0])
        unscaled = np.mean(_near(got, base, tol)[judged & ~dropped]) if (judged & ~dropped).any() else 0.0
        why = (': the kept values are not scaled by 1/(1 - p)' if unscaled > 0.9 else '')
        return False, ('FAIL %s at p = %g in train mode: %d of %d output values are neither dropped nor kept and scaled '
                       'by 1/(1 - p) (first at %s: got %.6g, expected %.6g or %.6g from your eval output)%s'
                       % (what, p, int(neither.sum()), got.size, list(where), got[where], offset[where],
                          offset[where] + value[where] / (1 - p), why))
    share = float(dropped[judged].mean())
    sd = np.sqrt(p * (1 - p) / n)
    if abs(share - p) > tol.binomial_sigmas * sd:
        return False, ('FAIL %s at p = %g in train mode dropped %.3f of %d values, expected %g within %.3f '
                       '(%g standard deviations of a binomial share)'
                       % (what, p, share, n, p, tol.binomial_sigmas * sd, tol.binomial_sigmas))
    return True, ('ok   %s at p = %g in train mode: %.3f of %d values dropped, the others scaled by 1/(1 - p)'
                  % (what, p, share, n))


def judge_dropout(test, result, fixtures, grading, evidence):
    tol = test.tolerance
    p = grading.profiles[fixtures.profile].dropout.p
    errors = result.info.get('case_errors', {})
    p0, missing = evidence_output(evidence, 'gqa', 'n_kv_head=%d' % DROPOUT_KV)
    bias = _out_proj_bias(grading, fixtures)
    lines, passed = [], 0
    for name, p1_case, mid_case in DROPOUT_CHECKS:
        check = [_p1_line(p1_case, result, errors, p0, missing, bias, tol),
                 _mid_line(mid_case, result, errors, grading, fixtures, p, tol)]
        passed += all(ok for ok, _ in check)
        lines += [line for _, line in check]
    return Verdict(passed / len(DROPOUT_CHECKS),
                   ['%d of %d dropout checks pass (%s; each at p = 1 and at p = %g).'
                    % (passed, len(DROPOUT_CHECKS), ', '.join(n for n, _, _ in DROPOUT_CHECKS), p)] + lines)


def _p1_line(case, result, errors, p0, missing, bias, tol):
    key = 'gqa/' + case
    if key in errors:
        return False, 'FAIL ' + case_error_line(key, errors[key])
    got = result.arrays.get(key)
    if p0 is None:
        return False, ('FAIL %s: cannot be judged without the same module\'s output at p = 0, which test 4.1 did not '
                       'return for n_kv_head=%d (%s)' % (case, DROPOUT_KV, missing))
    if got is None or got.shape != p0.shape:
        return False, 'FAIL %s: output of shape %s, expected %s' % (case, None if got is None else tuple(got.shape),
                                                                   tuple(p0.shape))
    # a module whose output never depends on dropout proves nothing where that output is what p = 1 gives
    degenerate = (case == 'attn_p1_train' and close(p0, np.broadcast_to(bias, p0.shape), tol.atol, tol.rtol)) or \
                 (case in ('resid_p1_train', 'both_p1_eval') and not np.any(p0))
    if degenerate:
        return False, ('FAIL %s: not credited: the module\'s output at p = 0 (test 4.1) is already what p = 1 must '
                       'give, so this proves nothing' % case)
    return _p1_case(case, got, p0, bias, tol)


def _mid_line(case, result, errors, grading, fixtures, p, tol):
    for key in ('gqa/' + case, 'gqa/mid_eval_p0'):
        if key in errors:
            return False, 'FAIL ' + case_error_line(key, errors[key])
    got, base = result.arrays.get('gqa/' + case), result.arrays.get('gqa/mid_eval_p0')
    if got is None or base is None or got.shape != base.shape:
        return False, 'FAIL %s: outputs missing or of shape %s' % (case, None if got is None else tuple(got.shape))
    if not (np.all(np.isfinite(got)) and np.all(np.isfinite(base))):
        return False, 'FAIL %s: non-finite values (NaN/inf) in the output' % case
    if case == 'mid_eval':
        ok, desc = _unchanged(got, base, tol)
        return ok, ('ok   eval mode at p = %g gives the output of p = 0: dropout is off' % p if ok else
                    'FAIL in eval mode at attn_pdrop = resid_pdrop = %g the output differs from the same module\'s at '
                    'p = 0 (%s): dropout must do nothing in eval mode' % (p, desc))
    if case == 'mid_attn_train':
        return _mid_train('attention dropout', got, base, _out_proj_bias(grading, fixtures, 'dropout'), p, tol)
    return _mid_train('residual dropout', got, base, 0.0, p, tol)


# ----------------------------------------------------------------------------- causality

def _unchanged(a, b, tol):
    """(ok, description) of `a` against `b` where both come from the student: NaN or inf at the same
    places with the same values count as unchanged (a fully masked row is a values bug, not a leak)."""
    fa, fb = np.isfinite(a), np.isfinite(b)
    if a.shape != b.shape:
        return False, 'shape %s, expected %s' % (tuple(a.shape), tuple(b.shape))
    same_bad = np.array_equal(fa, fb) and np.array_equal(np.isnan(a), np.isnan(b)) \
        and np.array_equal(a[np.isinf(a)], b[np.isinf(b)])
    if not same_bad:
        where = np.argwhere(fa != fb)
        at = ' first at %s' % list(where[0]) if len(where) else ''
        return False, 'non-finite values (NaN/inf) at other places%s' % at
    if not fa.any():
        return True, 'all non-finite'
    return compare(np.where(fa, a, 0), np.where(fb, b, 0), tol.atol, tol.rtol)


# case -> (the test whose process returned the outputs for the original input, its output key, its number)
CAUSALITY_BASES = {'mha': ('mha-rope', 'n_kv_head=%d', '3.1'), 'gqa': ('gqa-rope', 'n_kv_head=2', '5.1'),
                   'gpt': ('model', 'rope-gqa/logits', '8.1')}


def judge_causality(test, result, fixtures, grading, evidence):
    """
    The first half of the outputs for the "future" inputs (this probe's process never saw the
    originals) against the outputs other tests' processes returned for the original inputs.
    """
    tol = test.tolerance
    errors = result.info.get('case_errors', {})
    prof = grading.profiles[fixtures.profile]
    lines, passed = [], 0
    cases = [c for c in CAUSALITY_BASES if not fixtures.excluded('causality', c)]   # set aside: not judged
    for case in cases:
        probe_id, key, number = CAUSALITY_BASES[case]
        aside = fixtures.set_aside_in('causality', case)
        if 'gqa' in aside or 'gqa_rope' in aside:   # run as 8.1's MHA model, or as its GQA model without RoPE
            key = 'rope/logits' if 'gqa' in aside else 'gqa/logits'
        key = key % prof.module.n_query_head if '%d' in key else key
        c = (prof.model if case == 'gpt' else prof.module).seq // 2
        if case in errors:
            lines.append('FAIL ' + case_error_line(case, errors[case]))
            continue
        future, again = result.arrays.get(case + '/future'), result.arrays.get(case + '/again')
        base, missing = evidence_output(evidence, probe_id, key)
        if future is None or again is None or future.ndim < 2 or future.shape != again.shape:
            lines.append('FAIL %s: outputs missing or of shape %s' % (case, None if future is None else tuple(future.shape)))
            continue
        same, desc = _unchanged(again, future, tol)
        if not same:
            lines.append('FAIL %s: two calls on the same input gave different outputs (%s): the model is not '
                         'deterministic in eval mode, so causality cannot be judged' % (case, desc))
            continue
        if base is None:
            lines.append('FAIL %s: cannot be judged: test %s returned no output for the original input (%s)'
                         % (case, number, missing))
            continue
        if base.shape != future.shape:
            lines.append('FAIL %s: outputs of shape %s here but %s in test %s' % (case, tuple(future.shape),
                                                                               tuple(base.shape), number))
            continue
        ok, desc = _unchanged(future[:, :c], base[:, :c], tol)
        if ok and _unchanged(future[:, c:], base[:, c:], tol)[0]:
            # a model whose outputs ignore the tokens that changed is causal only in the way a constant is
            lines.append('FAIL %s: not credited: the outputs at positions >= %d did not change either, although the '
                         'tokens there did (test %s\'s outputs for the original input): outputs that do not depend on '
                         'the input prove nothing' % (case, c, number))
            continue
        if ok:
            passed += 1
            lines.append('ok   %s: outputs at positions < %d are unchanged when the tokens from %d on change '
                         '(compared with test %s\'s outputs for the original input)' % (case, c, c, number))
        else:
            lines.append('FAIL %s: changing the tokens from position %d on changed the outputs at earlier positions '
                         '(against test %s\'s outputs for the original input: %s): the model looks at future '
                         'tokens; check the causal mask' % (case, c, number, desc))
    return Verdict(passed / len(cases) if cases else 0.0, ['%d of %d modules are causal.' % (passed, len(cases))] + lines)
