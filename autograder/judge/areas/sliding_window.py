"""
Judges of the handout's optional parts (grading.yaml handout.optional_parts): sliding-window
attention (11.1) here, KV-cache generation (12.1) in generation.py. An untouched part (the
template's NotImplementedError, or code that ignores the part's setting) is reported as "not
implemented (optional)" rather than as wrong values; it earns nothing, and costs nothing when
the part is extra credit (handout.extra_credit).
"""

from autograder.judge import messages
from autograder.judge.areas import Verdict, close
from autograder.judge.areas.values import judge_cases

NO_WINDOW = '/no_window'   # reference-only cases of the sliding-window probe: the same module without a window


def _untouched_window(key, result, expected, tol):
    """True when case `key` raised NotImplementedError or returned the output of attention without a window."""
    case = key
    err = result.info.get('case_errors', {}).get(case)
    if err is not None:
        return err.get('status') == 'not_implemented'
    # the reference's output without a window, or the student's own module without one (a window ignored by a
    # module whose other bug fails 3.1-5.1 still returns what it returns without a window)
    plains = (expected.get(key.split('/')[0] + NO_WINDOW), result.arrays.get(key.split('/')[0] + NO_WINDOW))
    return any(p is not None and close(result.arrays.get(key), p, tol.atol, tol.rtol) for p in plains)


def judge_sliding_window(test, result, fixtures, grading):
    expected = fixtures.probe(test.id)
    graded = [k for k in expected if not k.endswith(NO_WINDOW)]
    if graded and all(_untouched_window(k, result, expected, test.tolerance) for k in graded):
        return Verdict(0.0, [messages.SLIDING_NOT_IMPLEMENTED], not_implemented=True)
    verdict = judge_cases(test, result, fixtures, graded=lambda k: not k.endswith(NO_WINDOW))
    ignored = [k for k in graded if _untouched_window(k, result, expected, test.tolerance)
               and k not in result.info.get('case_errors', {})]
    if ignored:
        verdict.lines.append(messages.window_ignored(ignored))
    return verdict
