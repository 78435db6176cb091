"""
Staff commands refuse bad requests with one sentence before doing anything (experiments
--device cuda without a GPU, --seeds 0), and `regenerate` on an unchanged checkout leaves the
tree clean (slow: it runs the reference and the 17 known bugs through every probe, about 1
minute of CPU on a quiet 2-core machine; the unit test test_fixture_changes.py holds the same
rule on fabricated changes in a second).
"""

import subprocess
import sys

import pytest

from autograder import REPO_ROOT
from autograder.staff.fixtures.regenerate import cuda_problem


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, '-m', 'autograder'] + list(args), cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout)


def test_experiments_refuses_cuda_without_a_gpu_and_zero_seeds_before_starting(tmp_path):
    out = tmp_path / 'exp'
    proc = _run('experiments', '--seeds', '0', '--quick', '--out', str(out))
    assert proc.returncode == 2 and proc.stderr.strip() == \
        'experiments: --seeds must be at least 1 (got 0); nothing was run', proc.stderr
    if cuda_problem() is None:
        pytest.skip('this machine has a CUDA GPU')
    proc = _run('experiments', '--device', 'cuda', '--quick', '--out', str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith('experiments: --device cuda needs a CUDA GPU: ') and lines[0].endswith('nothing was run')
    assert proc.stdout == '' and not out.exists()


def _status(*paths):
    return subprocess.run(['git', 'status', '--porcelain', '--'] + list(paths), cwd=REPO_ROOT, capture_output=True,
                          text=True).stdout


@pytest.mark.slow
def test_regenerate_twice_leaves_the_tree_clean():
    fixtures_dir = 'autograder/fixtures'
    if _status(fixtures_dir):
        pytest.skip('the fixtures have uncommitted changes already')
    for run in (1, 2):
        proc = _run('regenerate', '--skip-reference-tests', timeout=1800)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert 'fixtures left untouched' in proc.stdout, proc.stdout[-3000:]
        assert _status(fixtures_dir) == '', 'run %d changed %s' % (run, _status(fixtures_dir))
