"""
The memory and sliding-window forgeries of tests/hostile/memory/ (built by its build.py): each
pair is some code (honest.py) and the same code with an attack (model.py). Graded on the tests
the attack aims at, the attack must gain nothing: no test scores more than the honest code does.

Two attacks aim at what used to live in the student's own process: the readings log (now kept by
the harness, on the link: log_tamper) and 11.2's address-space limit (now set by the probe
process before model.py is imported: window_workspace_at_import).
"""

import importlib.util
import os

import pytest

from grader_runs import REPO
from autograder.judge import config, grade

HOSTILE = os.path.join(REPO, 'tests', 'hostile', 'memory')
_spec = importlib.util.spec_from_file_location('hostile_memory_build', os.path.join(HOSTILE, 'build.py'))
BUILD = importlib.util.module_from_spec(_spec)   # a name of its own: tests/hostile/build.py is another `build`
_spec.loader.exec_module(BUILD)
CASES = BUILD.CASES

GRADING = config.load()


def scores(path, tests, tmp_path, tag):
    skip = tuple(t.id for t in GRADING.enabled_tests() if t.id not in tests and t.id != 'submission')
    out = grade.grade_results(path, results_path=str(tmp_path / tag / 'results.json'), skip=skip)
    return {tid: (t.score, t.output) for tid, t in out.tests.items() if tid in tests}


def test_pairs_are_built_from_the_current_reference():
    assert BUILD.main(['build.py', '--check']) == 0


@pytest.mark.parametrize('name', sorted(CASES))
def test_memory_forgery_gains_nothing(name, tmp_path):
    _, tests, _, _ = CASES[name]
    honest = scores(os.path.join(HOSTILE, name, 'honest.py'), tests, tmp_path, 'honest')
    forged = scores(os.path.join(HOSTILE, name, 'model.py'), tests, tmp_path, 'forged')
    gained = {tid: (honest[tid][0], forged[tid][0], forged[tid][1][:300])
              for tid in tests if forged[tid][0] > honest[tid][0]}
    assert not gained, 'the attack gained points (honest, forged, output): %s' % gained
