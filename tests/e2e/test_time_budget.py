"""
The whole run's time budget (grading.yaml sandbox.total_seconds): a submission whose RoPE
hangs times out every test that uses RoPE, and without a cap those timeouts add up past
Gradescope's own limit, after which Gradescope shows no results at all. With the cap the
grading ends on time and still writes a valid results.json.
"""

import json
import re
import time

from autograder import GRADING_YAML, patching
from autograder import results as results_mod
from autograder.grade import grade

BUDGET_S = 30
PER_TEST_S = 5  # RoPE tests time out one by one, GQA (no RoPE) runs, then the budget ends


def test_a_hanging_rope_stops_at_the_budget_with_valid_results(tmp_path):
    hang = '        # BEGIN SOLUTION\n        # `offset` shifts'
    submission = tmp_path / 'model.py'
    submission.write_text(patching.patched_reference([(hang, '        while True:\n            pass\n' + hang)],
                                                     'the infinite loop of test_time_budget'))
    with open(GRADING_YAML) as f:
        text = f.read()
    text, n = re.subn(r'total_seconds: \d+', 'total_seconds: %d' % BUDGET_S, text)
    assert n == 1
    head, sep, rest = text.partition('  - id: rope\n')  # the import keeps its own, generous timeout
    text = head + sep + re.sub(r'\n    timeout: \d+', '\n    timeout: %d' % PER_TEST_S, rest)
    grading = tmp_path / 'grading.yaml'
    grading.write_text(text)

    started = time.time()
    out = grade(str(submission), results_path=str(tmp_path / 'results' / 'results.json'), grading_path=str(grading))
    elapsed = time.time() - started

    results_mod.validate(out)
    with open(tmp_path / 'results' / 'results.json') as f:
        assert json.load(f)['tests'] == out['tests']
    # the budget, plus one child start and the judging, not the 60 s timeout of every RoPE test
    assert elapsed < BUDGET_S + 30, elapsed
    by_number = {t['number']: t for t in out['tests']}
    assert by_number['2.1']['score'] == 0 and 'longer than the %d s allowed' % PER_TEST_S in by_number['2.1']['output']
    assert any('grading time budget of %d s was used up' % BUDGET_S in t.get('output', '') for t in out['tests'])
    # tests that never touch RoPE and ran before the budget ended keep their points
    assert by_number['4.1']['score'] == by_number['4.1']['max_score']
