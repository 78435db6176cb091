"""
Judges of the handout's optional parts (grading.yaml handout.optional_parts): sliding-window
attention (11.1) and KV-cache generation (12.1). An untouched part (the template's
NotImplementedError, or code that ignores the part's setting) is reported as "not implemented
(optional)" rather than as wrong values; it earns nothing, and costs nothing when the part is
extra credit (handout.extra_credit).
"""

import numpy as np

from autograder.checks import Verdict, case_error_line, close
from autograder.checks.values import judge_cases

NO_WINDOW = '/no_window'   # reference-only cases of the sliding-window probe: the same module without a window


def _untouched_window(key, result, expected, tol):
    """True when case `key` raised NotImplementedError or returned the output of attention without a window."""
    case = key
    err = result.info.get('case_errors', {}).get(case)
    if err is not None:
        return err.get('status') == 'not_implemented'
    plain = expected.get(key.split('/')[0] + NO_WINDOW)
    return plain is not None and close(result.arrays.get(key), plain, tol.atol, tol.rtol)


def judge_sliding_window(test, result, fixtures, grading):
    expected = fixtures.probe(test.id)
    graded = [k for k in expected if not k.endswith(NO_WINDOW)]
    if graded and all(_untouched_window(k, result, expected, test.tolerance) for k in graded):
        return Verdict(0.0, ['not implemented (optional): every sliding-window case raised NotImplementedError or '
                             'returned plain causal attention (config.sliding_window is ignored).'],
                       not_implemented=True)
    verdict = judge_cases(test, result, fixtures, graded=lambda k: not k.endswith(NO_WINDOW))
    ignored = [k for k in graded if _untouched_window(k, result, expected, test.tolerance)
               and k not in result.info.get('case_errors', {})]
    if ignored:
        verdict.lines.append('Likely bug: %s returned plain causal attention: the window is ignored there.'
                             % ', '.join(ignored))
    return verdict


KV_HINT = ('with a cache, the new query sits at position past (not 0): pass offset=past to both rotary embeddings, '
           'and mask so that it sees every cached key (SDPA is_causal=True aligns the mask to the top-left corner '
           'when there are fewer queries than keys: use is_causal only when T_q == T_k)')


def judge_kv_cache(test, result, fixtures, grading):
    """Greedy tokens with use_kv_cache=True must be exactly the reference's (which equal its uncached tokens)."""
    expected = fixtures.probe(test.id)
    errors = result.info.get('case_errors', {})
    cases = sorted({k.split('/')[0] for k in expected})
    lines, passed, untouched = [], 0, 0
    for case in cases:
        exp = expected[case + '/tokens']
        if case in errors:
            err = errors[case]
            if err.get('status') == 'not_implemented' or ('kv_cache' in err.get('message', '')
                                                           and 'argument' in err.get('message', '')):
                untouched += 1
            lines.append('FAIL ' + case_error_line(case, err))
            continue
        got, filled = result.arrays.get(case + '/tokens'), result.arrays.get(case + '/filled')
        if got is None or got.shape != exp.shape:
            lines.append('FAIL %s: generate(use_kv_cache=True) returned shape %s, expected %s'
                         % (case, None if got is None else tuple(got.shape), tuple(exp.shape)))
            continue
        if np.array_equal(got, exp):
            passed += 1
            lines.append('ok   %s: %d cached greedy tokens (past block_size) equal the uncached ones' % (case, got.shape[1]))
            continue
        if filled is not None and filled.shape == (1,) and int(filled[0]) == 0:
            untouched += 1
            lines.append('FAIL %s: the attention never appends to kv_cache (KVCache.length stays 0)' % case)
            continue
        b, t = (int(i) for i in np.argwhere(got != exp)[0])
        prompt = exp.shape[1] - 2 * grading.profiles[fixtures.profile]['model']['block_size']
        lines.append('FAIL %s: cached generation differs from the uncached tokens first at batch %d, position %d '
                     '(new token %d; expected %d, got %d)' % (case, b, t, t - prompt + 1, exp[b, t], got[b, t]))
    if untouched == len(cases):
        return Verdict(0.0, ['not implemented (optional): the attention ignores kv_cache.'] + lines,
                       not_implemented=True)
    if passed < len(cases):
        lines.append('hint: ' + KV_HINT)
    return Verdict(passed / len(cases), ['%d of %d cached generations match.' % (passed, len(cases))] + lines)
