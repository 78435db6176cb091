"""
The grader's numbers the public tests use, generated into test_model_expected.json (build-template)
so that the handout never holds a second, hand-written copy of them:

- each public output's tolerance (atol, rtol): that of the graded test it mirrors, from grading.yaml;
- the known-bug rules of the grader's value tests (judge/areas/values.py): a bug is named at
  KNOWN_BUG_SLACK times the test's tolerance, and never from fewer than KNOWN_BUG_MIN_VALUES values;
- the low-precision rule (judge/areas: MIN_GRID, GRID_SHARE) and the rounding a dtype's grid adds to
  the dropout test (judge/areas/behaviour.py GRID_RTOL);
- the grader's sentences for the causes an output or an error shows (judge/messages.py), and for a
  likely bug (public_known_bugs), so that a public test words them as Gradescope does.

tests/e2e/test_template.py holds the committed file to these (a changed tolerance in grading.yaml makes
the template stale, as a changed reference does).
"""

from autograder import GRADING_YAML

# the graded test each public output (by the start of its name) or check mirrors, first match wins;
# a name that matches none is refused, so a new public case cannot go without the grader's tolerance
GRADED_TEST = (('rope_cache', 'rope-cache'), ('rope_', 'rope'), ('mha_rope', 'mha-rope'), ('gqa_rope', 'gqa-rope'),
               ('gqa_', 'gqa'), ('gpt_', 'model'), ('generate_', 'generate'), ('sw_mask', 'sliding-window'),
               ('banded', 'sliding-window'), ('dropout', 'dropout'), ('causality', 'causality'))
# the public checks that are not outputs compared with the staff solution's values (test_model.py's own)
CHECKS = ('dropout', 'causality')
# signatures are written with 7 significant digits (public_known_bugs): half a unit of the 7th digit, relative
SIGNATURE_ROUNDING = 5e-7


def graded_test(name):
    """The id of the graded test whose tolerance the public output or check `name` uses."""
    for prefix, test_id in GRADED_TEST:
        if name.startswith(prefix):
            return test_id
    raise ValueError('the public output %r mirrors no graded test: add it to grader_values.GRADED_TEST' % name)


def tolerances(names, grading=None):
    """{name: [atol, rtol]} of each public output and check; a test without a tolerance (tokens) is exact."""
    from autograder.judge import config
    grading = config.load(GRADING_YAML) if grading is None else grading
    found = {}
    for name in list(names) + list(CHECKS):
        tol = grading.test(graded_test(name)).tolerance
        found[name] = [tol.atol, tol.rtol] if tol is not None else [0.0, 0.0]
    return found


def rules():
    """The grader's rules the public tests apply, by the grader's own constants."""
    from autograder.judge import areas
    from autograder.judge.areas import behaviour, values
    return {'known_bug_slack': values.KNOWN_BUG_SLACK, 'known_bug_min_values': values.KNOWN_BUG_MIN_VALUES,
            'signature_rounding': SIGNATURE_ROUNDING, 'min_grid': areas.MIN_GRID, 'grid_share': areas.GRID_SHARE,
            'grid_rtol': dict(behaviour.GRID_RTOL)}


def words():
    """The grader's words for a low-precision output and for the causes an error's text shows (messages.py)."""
    from autograder.judge import areas, messages
    return {'low_precision': {grid: messages.low_precision(grid) for grid in ('bfloat16', 'float16')},
            'error_causes': dict(messages.ERROR_CAUSES),
            'error_cause_marks': [list(m) for m in areas.ERROR_CAUSE_MARKS]}


def fails(values, expected, tolerance):
    """True when an output is finite, of the expected size and past `tolerance` (atol, rtol) somewhere."""
    atol, rtol = tolerance
    if len(values) != len(expected) or not all(abs(v) < float('inf') for v in values):
        return False   # another shape, or non-finite: the test's own message says enough
    return any(abs(a - b) > atol + rtol * abs(b) for a, b in zip(values, expected))
