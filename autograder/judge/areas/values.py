"""
Judges of tests that compare output tensors with the reference's: RoPE, the attention
modules, the full model and sliding-window attention. Partial credit per case; a failing
case names the known bug whose outputs it matches.
"""

from collections import Counter

from autograder.judge import messages
from autograder.judge.areas import Verdict, case_error_line, case_of, close, compare, row
from autograder.judge.known_bugs import BY_ID

KNOWN_BUG_SLACK = 10.0  # a known bug matches at 10x the test's tolerance: styles add float noise
# a single number (a loss) cannot name a bug: at 10x the tolerance it agrees with some wrong variant by
# chance (GPT keeping wpe with RoPE matched rope-base-1000's loss, out_proj skipped gqa-no-scale's)
KNOWN_BUG_MIN_VALUES = 2



def group_cases(expected):
    """Keys grouped by case: 'vanilla/logits' and 'vanilla/loss' are one case, 'vanilla'."""
    cases = {}
    for key in expected:
        cases.setdefault(case_of(key), []).append(key)
    return cases


def known_bug_matches(key, observed, bug_outputs, tol):
    names = []
    if observed is None or observed.size < KNOWN_BUG_MIN_VALUES:
        return names
    for bug_id, arrays in bug_outputs.items():
        if key in arrays and close(observed, arrays[key], tol.atol * KNOWN_BUG_SLACK, tol.rtol * KNOWN_BUG_SLACK):
            names.append(bug_id)
    return names


def judge_cases(test, result, fixtures, extra_check=None, hint=None, graded=None):
    """Partial credit per case of the fixtures; `graded(key)` False leaves a reference-only key out."""
    tol = test.tolerance
    expected = {k: v for k, v in fixtures.probe(test.id).items() if graded is None or graded(k)}
    bug_outputs = fixtures.known_bug_outputs(test.id)
    errors = result.info.get('case_errors', {})
    cases = group_cases(expected)
    lines, rows, passed, bug_votes = [], [], 0, Counter()
    for case, keys in cases.items():
        if case in errors:
            lines.append(messages.FAIL + case_error_line(case, errors[case]))
            h = hint(case) if hint else None   # a longer call that raises says why as one that is wrong does
            if h:
                lines.append(messages.hint(h))
            continue
        case_ok, details = True, []
        for key in keys:
            ok, desc = compare(result.arrays.get(key), expected[key], tol.atol, tol.rtol)
            if ok and extra_check:
                ok, desc = extra_check(key, desc)
            if not ok:
                case_ok = False
                details.append(messages.output_differs(key, desc))
                rows.append(row(key, desc))
                bug_votes.update(known_bug_matches(key, result.arrays.get(key), bug_outputs, tol))
        if case_ok:
            passed += 1
            lines.append(messages.case_ok(case))
        else:
            lines.append(messages.case_failed(details))
            if hint:
                h = hint(case)
                if h:
                    lines.append(messages.hint(h))
    likely = bug_votes.most_common(1)[0][0] if bug_votes else ''
    if likely:
        lines.append(messages.likely_bug(BY_ID[likely].description, likely, BY_ID[likely].note))
    fraction = passed / len(cases) if cases else 0.0
    lines.insert(0, messages.cases_match(passed, len(cases)))
    return Verdict(fraction, lines, rows=[r for r in rows if r],
                   known_bug=likely)


def judge_values(test, result, fixtures, grading):
    return judge_cases(test, result, fixtures)


def judge_rope_cache(test, result, fixtures, grading):
    dtypes = result.info.get('dtypes', {})

    def dtype_check(key, desc):
        got = dtypes.get(key)
        if isinstance(got, list) and len(got) == 2 and got[0] != got[1]:
            return False, messages.rope_cache_dtype(got[0], got[1])
        return True, desc
    # the cache-length hint only where the evidence shows it: the first call (T=8) is right, the longer one is not
    expected, tol = fixtures.probe(test.id), test.tolerance
    first_ok = ('call0_T8' in expected
                and compare(result.arrays.get('call0_T8'), expected['call0_T8'], tol.atol, tol.rtol)[0])
    return judge_cases(test, result, fixtures, extra_check=dtype_check,
                       hint=lambda case: messages.ROPE_CACHE_LONGER if 'T24' in case and first_ok
                       else None)


def judge_model(test, result, fixtures, grading):
    verdict = judge_cases(test, result, fixtures)
    for label, has_wpe in result.info.get('has_wpe', {}).items():
        if 'rope' in label and has_wpe:
            verdict.lines.append(messages.WPE_WITH_ROPE)
    return verdict
