"""
Judges of behaviour rather than values, each resting on the same model's answers in other
processes of the grading (registry `evidence`), never on the reference's values:
- dropout (6.1): with p = 1 in eval mode, the output of 4.1's process at p = 0; in train mode
  with attn_pdrop = 1, out_proj.bias (every attention weight dropped); with resid_pdrop = 1, zeros;
- causality (7.1): the outputs for inputs whose second half was replaced, up to that half,
  against what 3.1, 5.1 and 8.1 returned for the original inputs. A causal model with wrong
  values passes; a model that reads later tokens fails, however it answers each process.
"""

import numpy as np

from autograder.judge import inputs
from autograder.judge.judges import Verdict, case_error_line, close, compare

DROPOUT_KV = 2          # the dropout probe's module: GroupedQueryAttention with n_kv_head = 2, weights 'gqa-kv2'
DROPOUT_CASES = ('attn_p1_train', 'resid_p1_train', 'both_p1_eval')


def _evidence_output(evidence, probe_id, key):
    """(array, None) of another probe's output, or (None, why it is missing) in the student's terms."""
    result = evidence.get(probe_id)
    if result is None:
        return None, 'that test did not run'
    if result.status != 'ok':
        return None, '%s: %s' % (result.status, result.message)
    case = key.rsplit('/', 1)[0] if key.endswith('/logits') else key
    err = result.info.get('case_errors', {}).get(case)
    if err is not None:
        return None, err.get('message', 'an error')
    array = result.arrays.get(key)
    return (array, None) if array is not None else (None, 'no output')


def _out_proj_bias(grading, profile_name):
    mod = grading.profiles[profile_name]
    w = inputs.attention_weights(mod['seed'], 'gqa-kv%d' % DROPOUT_KV, mod['module']['n_embd'],
                                 mod['module']['n_query_head'], DROPOUT_KV)
    return w['out_proj.bias']


def _dropout_case(case, got, p0, bias, tol):
    """(ok, line) of one dropout case: `got` its output, `p0` the same module's eval output at p = 0 (4.1)."""
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


def judge_dropout(test, result, fixtures, grading, evidence):
    tol = test.tolerance
    errors = result.info.get('case_errors', {})
    p0, missing = _evidence_output(evidence, 'gqa', 'n_kv_head=%d' % DROPOUT_KV)
    bias = _out_proj_bias(grading, fixtures.profile)
    lines, passed = [], 0
    for case in DROPOUT_CASES:
        key = 'gqa/' + case
        if key in errors:
            lines.append('FAIL ' + case_error_line(key, errors[key]))
            continue
        got = result.arrays.get(key)
        if p0 is None:
            lines.append('FAIL %s: cannot be judged without the same module\'s output at p = 0, which test 4.1 did not '
                         'return for n_kv_head=%d (%s)' % (case, DROPOUT_KV, missing))
            continue
        if got is None or got.shape != p0.shape:
            lines.append('FAIL %s: output of shape %s, expected %s' % (case, None if got is None else tuple(got.shape),
                                                                        tuple(p0.shape)))
            continue
        # a module whose output never depends on dropout proves nothing where that output is what p = 1 gives
        degenerate = (case == 'attn_p1_train' and close(p0, np.broadcast_to(bias, p0.shape), tol.atol, tol.rtol)) or \
                     (case in ('resid_p1_train', 'both_p1_eval') and not np.any(p0))
        if degenerate:
            lines.append('FAIL %s: not credited: the module\'s output at p = 0 (test 4.1) is already what p = 1 must '
                         'give, so this proves nothing' % case)
            continue
        ok, line = _dropout_case(case, got, p0, bias, tol)
        passed += ok
        lines.append(line)
    return Verdict(passed / len(DROPOUT_CASES), ['%d of %d dropout checks pass.' % (passed, len(DROPOUT_CASES))] + lines)


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
    for case, (probe_id, key, number) in CAUSALITY_BASES.items():
        key = key % prof['module']['n_query_head'] if '%d' in key else key
        c = prof['model' if case == 'gpt' else 'module']['seq'] // 2
        if case in errors:
            lines.append('FAIL ' + case_error_line(case, errors[case]))
            continue
        future, again = result.arrays.get(case + '/future'), result.arrays.get(case + '/again')
        base, missing = _evidence_output(evidence, probe_id, key)
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
    return Verdict(passed / len(CAUSALITY_BASES), ['%d of %d modules are causal.' % (passed, len(CAUSALITY_BASES))] + lines)
