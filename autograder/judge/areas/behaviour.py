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

from autograder.judge import inputs, messages
from autograder.judge.areas import Verdict, case_error_line, close, compare, evidence_output, low_precision_grid

DROPOUT_KV = inputs.DROPOUT_KV   # the dropout probe's module: GroupedQueryAttention with n_kv_head = 2
# three checks, each of a p = 1 case on weights 'gqa-kv2' and a 0 < p < 1 case on weights 'dropout'
# (inputs.dropout_inputs): a check passes only when both do, since p = 1 alone is met by a module that
# returns a constant when p >= 1 and has no dropout otherwise
DROPOUT_CHECKS = ((messages.ATTENTION_DROPOUT, 'attn_p1_train', 'mid_attn_train'),
                  (messages.RESIDUAL_DROPOUT, 'resid_p1_train', 'mid_resid_train'),
                  (messages.EVAL_MODE, 'both_p1_eval', 'mid_eval'))
DROPOUT_CASES = tuple(c for _, p1, mid in DROPOUT_CHECKS for c in (p1, mid)) + ('mid_eval_p0',)
MIN_JUDGED = 100   # elements whose dropped and kept values differ clearly, needed to judge a share of p
# Outputs on a low-precision grid (areas.low_precision_grid: the module ran in bfloat16 or float16) are judged
# at that dtype's precision: a few roundings (the weight, its 1/(1 - p) scaling, the bias) of 2^-8 (bfloat16)
# or 2^-11 (float16) each, relative to the values rounded. Dropout is judged on what dropout does; the
# precision costs the value tests (4.1, 5.1), whose messages name the dtype, not this one.
GRID_RTOL = {'bfloat16': 2.0 ** -6, 'float16': 2.0 ** -9}


class _GridTolerance:
    """The test's tolerance widened to a low-precision dtype's rounding (GRID_RTOL)."""

    def __init__(self, tol, grid):
        self.atol, self.rtol = tol.atol, max(tol.rtol, GRID_RTOL[grid])
        self.binomial_sigmas = tol.binomial_sigmas


def _input_seed(grading, fixtures):
    """The seed of the drawn input set (fixtures view), else the profile's."""
    seed = getattr(fixtures, 'input_seed', None)
    return grading.profiles[fixtures.profile_name].seed if seed is None else seed


def _out_proj_bias(grading, fixtures, label='gqa-kv%d' % DROPOUT_KV):
    prof = grading.profiles[fixtures.profile_name]
    seed = _input_seed(grading, fixtures)
    if label == 'dropout':
        return inputs.dropout_inputs(seed, prof.module, DROPOUT_KV, prof.dropout.seq)[1]['out_proj.bias']
    return inputs.attention_weights(seed, label, prof.module.n_embd, prof.module.n_query_head,
                                    DROPOUT_KV)['out_proj.bias']


def _p1_case(case, got, p0, bias, tol, numbers):
    """(ok, line) of one p = 1 case: `got` its output, `p0` the same module's eval output at p = 0 (4.1);
    `numbers`: {test id: number} of the tests its sentences name (dropout_numbers)."""
    grid = low_precision_grid(got, np.broadcast_to(bias, p0.shape)) \
        if case == 'attn_p1_train' and not isinstance(tol, _GridTolerance) else None
    if grid:
        ok, line = _p1_case(case, got, p0, bias, _GridTolerance(tol, grid), numbers)
        return ok, line + messages.dropout_on_grid(grid, (numbers['gqa'], numbers['gqa-rope']))
    zeros = np.zeros_like(p0)
    is_p0 = close(got, p0, tol.atol, tol.rtol)
    is_bias = close(got, np.broadcast_to(bias, p0.shape), tol.atol, tol.rtol)
    is_zero = close(got, zeros, tol.atol, tol.rtol)
    if case == 'both_p1_eval':
        ok, desc = _unchanged(got, p0, tol)   # NaN where 4.1 had NaN too is the same module's output
        if ok:
            return True, messages.dropout_eval_p1_ok(numbers['gqa'])
        why = (messages.DROPOUT_EVAL_IS_BIAS if is_bias else
               messages.DROPOUT_EVAL_IS_ZERO if is_zero else '')
        return False, messages.dropout_eval_p1_failed(desc, why, numbers['gqa'])
    if case == 'attn_p1_train':
        ok, desc = compare(got, np.broadcast_to(bias, p0.shape).astype(p0.dtype), tol.atol, tol.rtol)
        if ok:
            return True, messages.DROPOUT_ATTN_P1_OK
        why = (messages.DROPOUT_ATTN_IS_P0 if is_p0 else
               messages.DROPOUT_IS_ZERO if is_zero else '')
        return False, messages.dropout_attn_p1_failed(desc, why)
    ok, desc = compare(got, zeros, tol.atol, tol.rtol)
    if ok:
        return True, messages.DROPOUT_RESID_P1_OK
    why = messages.DROPOUT_RESID_IS_P0 if is_p0 else ''
    return False, messages.dropout_resid_p1_failed(desc, why)


def _near(a, b, tol):
    return np.abs(a - b) <= tol.atol + tol.rtol * np.abs(b)


def _mid_train(what, got, base, offset, p, tol, numbers):
    """
    (ok, line) of a train-mode output at 0 < p < 1 on the 'dropout' weights, where each output element
    is offset + one value (an attention weight, or the whole output for the residual): each element must
    be dropped (offset) or kept and scaled (offset + value / (1 - p)), and the share dropped among the
    elements where the two differ clearly must be p within tolerance.binomial_sigmas standard deviations.
    `base` is the same module's eval output at p = 0 in the same process; `numbers`: dropout_numbers.
    """
    grid = low_precision_grid(got)
    got, base = got.astype(np.float64), base.astype(np.float64)
    offset = np.broadcast_to(offset, base.shape).astype(np.float64)
    value = base - offset
    dropped, kept = _near(got, offset, tol), _near(got, offset + value / (1 - p), tol)
    judged = np.abs(value) > 100 * (tol.atol + tol.rtol * np.abs(offset))
    said = messages.dropout_on_grid(grid, (numbers['gqa'], numbers['gqa-rope'])) if grid else ''
    if grid:
        # each rounding is relative to the values rounded (the bias and the scaled weight), not to their sum
        room = tol.atol + GRID_RTOL[grid] * (np.abs(offset) + np.abs(value) / (1 - p))
        dropped = np.abs(got - offset) <= room
        kept = np.abs(got - (offset + value / (1 - p))) <= room
        # an element is judged only where dropped, kept unscaled and kept scaled are each told apart at that precision
        judged &= np.abs(value) * p / (1 - p) > 2 * room
    n = int(judged.sum())
    if n < MIN_JUDGED:
        return False, messages.dropout_unjudgeable(what, p, 'out_proj.bias' if np.any(offset) else 'zero',
                                                   n) + said
    if np.all(_near(got, base, tol)):
        return False, messages.dropout_nothing_dropped(what, p) + said
    neither = ~(dropped | kept)
    if neither.any():
        where = tuple(int(i) for i in np.argwhere(neither)[0])
        unscaled = np.mean(_near(got, base, tol)[judged & ~dropped]) if (judged & ~dropped).any() else 0.0
        why = (messages.DROPOUT_UNSCALED if unscaled > 0.9 else '')
        return False, messages.dropout_neither(what, p, int(neither.sum()), got.size, list(where),
                                               got[where], offset[where],
                                               offset[where] + value[where] / (1 - p), why) + said
    share = float(dropped[judged].mean())
    sd = np.sqrt(p * (1 - p) / n)
    if abs(share - p) > tol.binomial_sigmas * sd:
        return False, messages.dropout_share_off(what, p, share, n, tol.binomial_sigmas * sd,
                                                 tol.binomial_sigmas) + said
    return True, messages.dropout_share_ok(what, p, share, n) + said


def dropout_numbers(grading):
    """{test id: number} of the tests dropout's sentences name: 4.1 gives the output at p = 0 (its evidence), and
    4.1 and 5.1 judge the module's precision."""
    return {tid: grading.test(tid).number for tid in ('gqa', 'gqa-rope')}


def judge_dropout(test, result, fixtures, grading, evidence):
    tol = test.tolerance
    numbers = dropout_numbers(grading)
    p = grading.profiles[fixtures.profile_name].dropout.p
    errors = result.info.get('case_errors', {})
    p0, missing = evidence_output(evidence, 'gqa', 'n_kv_head=%d' % DROPOUT_KV)
    bias = _out_proj_bias(grading, fixtures)
    lines, passed = [], 0
    for name, p1_case, mid_case in DROPOUT_CHECKS:
        check = [_p1_line(p1_case, result, errors, p0, missing, bias, tol, numbers),
                 _mid_line(mid_case, result, errors, grading, fixtures, p, tol, numbers)]
        passed += all(ok for ok, _ in check)
        lines += [line for _, line in check]
    return Verdict(passed / len(DROPOUT_CHECKS),
                   [messages.dropout_checks(passed, len(DROPOUT_CHECKS),
                                            [n for n, _, _ in DROPOUT_CHECKS], p)]
                   + lines)


def _p1_line(case, result, errors, p0, missing, bias, tol, numbers):
    key = 'gqa/' + case
    if key in errors:
        return False, messages.FAIL + case_error_line(key, errors[key])
    got = result.arrays.get(key)
    if p0 is None:
        return False, messages.dropout_no_p0(case, DROPOUT_KV, missing, numbers['gqa'])
    if got is None or got.shape != p0.shape:
        return False, messages.dropout_output_shape(case, None if got is None else tuple(got.shape),
                                                    tuple(p0.shape))
    # a module whose output never depends on dropout proves nothing where that output is what p = 1 gives
    degenerate = (case == 'attn_p1_train' and close(p0, np.broadcast_to(bias, p0.shape), tol.atol, tol.rtol)) or \
                 (case in ('resid_p1_train', 'both_p1_eval') and not np.any(p0))
    if degenerate:
        return False, messages.dropout_degenerate(case, numbers['gqa'])
    return _p1_case(case, got, p0, bias, tol, numbers)


def _mid_line(case, result, errors, grading, fixtures, p, tol, numbers):
    for key in ('gqa/' + case, 'gqa/mid_eval_p0'):
        if key in errors:
            return False, messages.FAIL + case_error_line(key, errors[key])
    got, base = result.arrays.get('gqa/' + case), result.arrays.get('gqa/mid_eval_p0')
    if got is None or base is None or got.shape != base.shape:
        return False, messages.outputs_missing(case, None if got is None else tuple(got.shape))
    if not (np.all(np.isfinite(got)) and np.all(np.isfinite(base))):
        return False, messages.dropout_non_finite(case)
    if case == 'mid_eval':
        ok, desc = _unchanged(got, base, tol)
        return ok, (messages.dropout_eval_mid_ok(p) if ok else
                    messages.dropout_eval_mid_failed(p, desc))
    if case == 'mid_attn_train':
        return _mid_train(messages.ATTENTION_DROPOUT, got, base,
                          _out_proj_bias(grading, fixtures, 'dropout'), p, tol, numbers)
    return _mid_train(messages.RESIDUAL_DROPOUT, got, base, 0.0, p, tol, numbers)


# ----------------------------------------------------------------------------- causality

def _unchanged(a, b, tol):
    """(ok, description) of `a` against `b` where both come from the student: NaN or inf at the same
    places with the same values count as unchanged (a fully masked row is a values bug, not a leak)."""
    fa, fb = np.isfinite(a), np.isfinite(b)
    if a.shape != b.shape:
        return False, messages.wrong_shape(tuple(a.shape), tuple(b.shape))
    same_bad = np.array_equal(fa, fb) and np.array_equal(np.isnan(a), np.isnan(b)) \
        and np.array_equal(a[np.isinf(a)], b[np.isinf(b)])
    if not same_bad:
        where = np.argwhere(fa != fb)
        at = messages.first_at(list(where[0])) if len(where) else ''
        return False, messages.other_non_finite(at)
    if not fa.any():
        return True, messages.ALL_NON_FINITE
    return compare(np.where(fa, a, 0), np.where(fb, b, 0), tol.atol, tol.rtol)


# case -> (the test whose process returned the outputs for the original input, its output key); the sentences
# name that test by its number in grading.yaml
CAUSALITY_BASES = {'mha': ('mha-rope', 'n_kv_head=%d'), 'gqa': ('gqa-rope', 'n_kv_head=2'),
                   'gpt': ('model', 'rope-gqa/logits')}


def judge_causality(test, result, fixtures, grading, evidence):
    """
    The first half of the outputs for the "future" inputs (this probe's process never saw the
    originals) against the outputs other tests' processes returned for the original inputs.
    """
    tol = test.tolerance
    errors = result.info.get('case_errors', {})
    prof = grading.profiles[fixtures.profile_name]
    lines, passed = [], 0
    cases = [c for c in CAUSALITY_BASES if not fixtures.excluded('causality', c)]   # set aside: not judged
    for case in cases:
        probe_id, key = CAUSALITY_BASES[case]
        number = grading.test(probe_id).number
        aside = fixtures.set_aside_in('causality', case)
        if 'gqa' in aside or 'gqa_rope' in aside:   # run as 8.1's MHA model, or as its GQA model without RoPE
            key = 'rope/logits' if 'gqa' in aside else 'gqa/logits'
        key = key % prof.module.n_query_head if '%d' in key else key
        c = (prof.model if case == 'gpt' else prof.module).seq // 2
        if case in errors:
            lines.append(messages.FAIL + case_error_line(case, errors[case]))
            continue
        future, again = result.arrays.get(case + '/future'), result.arrays.get(case + '/again')
        base, missing = evidence_output(evidence, probe_id, key)
        if future is None or again is None or future.ndim < 2 or future.shape != again.shape:
            lines.append(messages.outputs_missing(case,
                                                  None if future is None else tuple(future.shape)))
            continue
        same, desc = _unchanged(again, future, tol)
        if not same:
            lines.append(messages.not_deterministic(case, desc))
            continue
        if base is None:
            lines.append(messages.causality_no_base(case, number, missing))
            continue
        if base.shape != future.shape:
            lines.append(messages.causality_shapes(case, tuple(future.shape), tuple(base.shape),
                                                   number))
            continue
        ok, desc = _unchanged(future[:, :c], base[:, :c], tol)
        if ok and _unchanged(future[:, c:], base[:, c:], tol)[0]:
            # a model whose outputs ignore the tokens that changed is causal only in the way a constant is
            lines.append(messages.causality_constant(case, c, number))
            continue
        if ok:
            passed += 1
            lines.append(messages.causal_ok(case, c, number))
        else:
            lines.append(messages.causal_failed(case, c, number, desc))
    return Verdict(passed / len(cases) if cases else 0.0,
                   [messages.causal_modules(passed, len(cases))] + lines)
