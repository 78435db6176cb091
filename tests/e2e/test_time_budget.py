"""
The whole run's time budget (grading.yaml sandbox.total_seconds): a hang set_aside.py cannot
place times out every test that runs it, and without a cap those timeouts add up past
Gradescope's own limit, after which Gradescope shows no results at all. With the cap the
grading ends on time and still writes a valid results.json.
"""

import json
import re
import time

import pytest

from autograder import GRADING_YAML
from autograder.judge import config, source_patches
from autograder.judge import results as results_mod
from autograder.judge.grade import grade_results

# wall-clock budgets, some with tests that must finish before them: run last, with no busy neighbour (tests/conftest.py)
pytestmark = pytest.mark.alone

BUDGET_S = 12   # the tests before 10.1 take ~6 s here, and 10.1-10.3's three timeouts ~14 s more
PER_TEST_S = 4
# Block.forward never returns while gradients are recorded (training), and model.py unsets the hang dump
# (faulthandler.unregister). The harness places a hang only from its own knowledge (set_aside.py): the part a probe
# runs alone, or the one part of it no earlier probe proved returns. 7.1-8.2 run every part of the GPT without
# gradients and return, so when 10.1 (training) hangs there is nothing left to place it on: every later probe that
# trains or backpropagates (10.2, 10.3 and the second run's tries) runs into its 4 s timeout, and the budget ends it.
HIDDEN_HANG = [
    ('import json\n', 'import faulthandler\nimport json\nimport signal\n'),
    ('        x = x + attn_out\n',
     '        while torch.is_grad_enabled():\n            pass\n        x = x + attn_out\n'),
    ('from mingpt.utils import CfgNode as CN\n',
     'from mingpt.utils import CfgNode as CN\nfaulthandler.unregister(signal.SIGUSR1)\n'),
]


def test_a_hang_that_hides_where_it_is_stops_at_the_budget_with_valid_results(tmp_path):
    """The budget is the defence left when set_aside.py cannot skip a hang: the grading ends at it, results valid."""
    submission = tmp_path / 'model.py'
    submission.write_text(source_patches.patched_reference(HIDDEN_HANG, 'a Block.forward that hangs, dump unset'))
    from grader_runs import grading_text
    # grading.yaml by key: the import keeps its own, generous timeout, every other test gets PER_TEST_S
    timeouts = {t.id: PER_TEST_S for t in config.load(GRADING_YAML).tests if t.id != 'submission'}
    grading = tmp_path / 'grading.yaml'
    grading.write_text(grading_text(timeouts, edit=lambda d: d['sandbox'].update(total_seconds=BUDGET_S)))

    started = time.time()
    out = grade_results(str(submission), results_path=str(tmp_path / 'results' / 'results.json'),
                        grading_path=str(grading)).to_json()
    elapsed = time.time() - started

    results_mod.validate(out)
    with open(tmp_path / 'results' / 'results.json') as f:
        assert json.load(f)['tests'] == out['tests']
    # the budget, plus one child start and the judging, not the timeouts of every GPT test
    assert elapsed < BUDGET_S + 30, elapsed
    by_id = {t['extra_data']['id']: t for t in out['tests']}
    assert by_id['loss-curve']['score'] == 0
    assert ('longer than the %d s allowed' % PER_TEST_S in by_id['loss-curve']['output']
            or 'grading time budget' in by_id['loss-curve']['output'])
    assert any('grading time budget of %d s was used up' % BUDGET_S in t.get('output', '') for t in out['tests'])
    # tests that never run a Block with gradients and ran before the budget ended keep their points
    for test_id in ('rope', 'gqa', 'model'):
        assert by_id[test_id]['score'] == by_id[test_id]['max_score'], by_id[test_id]


# ----------------------------------------------------------------------------- run_autograder's ends

def _root_with(timeouts, watchdog):
    import sys
    sys.path.insert(0, __import__('os').path.join(__import__('os').path.dirname(__file__), '..', 'helpers'))
    from grader_runs import AutograderRoot, grading_text
    return AutograderRoot(grading_text(timeouts, edit=lambda d: d['sandbox'].update(watchdog_seconds=watchdog)))


def test_the_watchdog_keeps_the_tests_that_had_finished():
    """results.json is rewritten after every finished test: a watchdog stop keeps those, the rest did not run;
    execution_time is the run's and the grader says in one line that it was stopped."""
    from grader_runs import by_id
    hang = '        # BEGIN SOLUTION\n        # `offset` shifts'
    loop = source_patches.patched_reference(
        [(hang, '        while x.dtype == torch.float64:\n            pass\n' + hang)],
        'a RoPE that hangs on float64 only (rope-cache)')
    budget = 25
    root = _root_with({'rope-cache': 600}, budget)   # only the watchdog can end rope-cache
    try:
        root.submit('model.py', loop)
        out, proc = root.run(timeout=120)
        tests = by_id(out)
        assert 'watchdog stopped the grading after %d s' % budget in proc.stdout, proc.stdout[-2000:]
        assert tests['rope']['score'] == tests['rope']['max_score']          # finished before: kept
        assert tests['submission']['status'] == 'passed'
        for tid in ('rope-cache', 'gqa', 'loss-curve'):                      # the one running, and after it
            assert tests[tid]['score'] == 0 and 'did not run: Grading was stopped after %d s' % budget \
                in tests[tid]['output'], tests[tid]
        assert 'kept' in out['output'] and out['extra_data']['stopped']
        # what Gradescope shows: the whole run's time (not the last finished test's), one line per reason, no traceback
        assert budget <= out['execution_time'] < budget + 60, out['execution_time']
        assert 'Traceback' not in proc.stdout and 'GradingStopped' not in proc.stdout, proc.stdout[-3000:]
        assert re.search(r'^grade: stopped by SIGTERM after \d+ s; .* keeps the tests that had finished$', proc.stdout,
                         re.M), proc.stdout[-3000:]
    finally:
        root.cleanup()


def test_a_grader_killed_before_the_budget_is_not_called_a_timeout(tmp_path):
    """SIGKILL of the grader itself (the container's OOM killer) before the watchdog: said as such, finished tests
    kept."""
    import os
    import subprocess
    import sys
    from grader_runs import REPO, load_results
    root = _root_with({}, 300)
    fake = tmp_path / 'python'
    # the real interpreter for everything but the grading, which writes one finished test and is SIGKILLed
    fake.write_text('#!/bin/bash\nif [[ "$*" == *"autograder grade"* ]]; then\n'
                    '  %s -c "import sys; sys.path.insert(0, \'%s\'); from autograder.judge import config; '
                    'from autograder.judge.areas import Verdict; from autograder.judge.results import partial; '
                    'g = config.load(\'%s\'); partial(g.enabled_tests(), {\'rope\': Verdict(1.0, [\'ok\'])}, 0)'
                    '.write(\'%s\')"\n  kill -9 $$\nfi\nexec %s "$@"\n'
                    % (sys.executable, REPO, GRADING_YAML, root.results_path, sys.executable))
    fake.chmod(0o755)
    try:
        root.submit('model.py', 'x = 1\n')
        env = dict(os.environ, AUTOGRADER_ROOT=root.path, PYTHON=str(fake))
        env.pop('HW1_SOURCE', None)
        proc = subprocess.run(['bash', os.path.join(REPO, 'run_autograder')], env=env, cwd=root.path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        out = load_results(root.results_path)
        assert 'the grader itself was killed' in proc.stdout and 'watchdog stopped' not in proc.stdout, proc.stdout
        assert 'most likely out of memory' in out['output'] and 'not a timeout of your code' in out['output']
        rope = [t for t in out['tests'] if t.get('number') == '2.1'][0]
        assert rope['score'] == rope['max_score']
        assert all('stopped after' not in t.get('output', '') for t in out['tests'])
    finally:
        root.cleanup()
