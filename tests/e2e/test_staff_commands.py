"""
The installed `hw1-autograder` command works from another folder (a virtual environment of its
own, `pip install -e`); `grade` and `batch` as root close the checkout to other users from the
start of a grading, for good (its owner keeps every right).
Staff commands refuse bad requests with one sentence before doing anything (experiments
--device cuda without a GPU, --seeds 0), and `regenerate` on an unchanged checkout leaves the
tree clean (slow: it runs the reference and the 17 known bugs through every probe, about 1
minute of CPU on a quiet 2-core machine; the unit test test_fixture_changes.py holds the same
rule on fabricated changes in a second).
"""

import json
import os
import stat
import subprocess
import sys
import time
import zipfile

import pytest

from grader_runs import needs_lockdown
from autograder import FIXTURES_DIR, REPO_ROOT, TEMPLATE_DIR
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


def test_the_installed_command_works_from_any_folder(tmp_path):
    # `pip install -e .` into a virtual environment of its own (the machine's torch through --system-site-packages)
    venv = tmp_path / 'venv'
    # (without a pip of its own: this machine's pip installs into it, offline, with the machine's setuptools)
    subprocess.run([sys.executable, '-m', 'venv', '--system-site-packages', '--without-pip', str(venv)], check=True,
                   timeout=300)
    proc = subprocess.run([sys.executable, '-m', 'pip', '--python', str(venv / 'bin' / 'python'), 'install', '-q',
                           '--no-deps', '--no-build-isolation', '-e', REPO_ROOT], capture_output=True, text=True,
                          timeout=600, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    command = str(venv / 'bin' / 'hw1-autograder')
    for argv in ([command, '--help'], [str(venv / 'bin' / 'python'), '-m', 'autograder', '--help']):
        proc = subprocess.run(argv, cwd=str(elsewhere), capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.startswith('Command line of the autograder'), proc.stderr
        assert all(name in proc.stdout for name in ('grade PATH', 'batch EXPORT_DIR', 'diff OLD NEW', 'build-handout'))
    # a real subcommand, relative paths taken from the folder it runs in; --out as everywhere else
    (elsewhere / 'model.py').write_text('def broken(:\n    pass\n')
    proc = subprocess.run([command, 'grade', 'model.py', '--out', 'out/results.json'], cwd=str(elsewhere),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((elsewhere / 'out' / 'results.json').read_text())['score'] == 0
    assert 'syntax' in proc.stdout.lower()
    proc = subprocess.run([command, 'build-handout', '--out', 'hw1.zip'], cwd=str(elsewhere), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0 and zipfile.is_zipfile(str(elsewhere / 'hw1.zip')), proc.stderr
    # the install leaves the checkout as it was
    assert not [n for n in os.listdir(REPO_ROOT) if n.endswith('.egg-info')]


TEMPLATE = os.path.join(TEMPLATE_DIR, 'mingpt', 'model.py')


def _modes():
    return {p: stat.S_IMODE(os.stat(p).st_mode) for p in
            (REPO_ROOT, os.path.join(REPO_ROOT, 'reference'), os.path.join(REPO_ROOT, 'tests'), FIXTURES_DIR)}


def _sandbox_reads(paths):
    """The paths the first sandbox user can read, each on the way from / (as a probe without namespaces); asked as that
    user while no grading holds it (a grading beside this test kills every process of its user between probes)."""
    from grader_runs import pool_user
    from autograder.judge import config
    from autograder.sandbox.users import sandbox_pool, user_can_access
    pool, _ = sandbox_pool(config.load().sandbox['user'], 1)
    with pool_user(pool[0][0]):
        return [p for p in paths if user_can_access(pool[0][0], pool[0][1], [(p, os.R_OK)])]


@pytest.mark.lockdown   # opens the checkout to others by hand (tests/conftest.py)
def test_grade_and_batch_as_root_leave_the_checkout_locked(tmp_path):
    if os.geteuid() != 0:
        pytest.skip('the lock is taken only under root (with a sandbox user)')
    needs_lockdown('the checkout opened to others by hand')
    earlier = _modes()
    secrets = [os.path.join(FIXTURES_DIR, 'cpu', 'expected.npz'),
               os.path.join(REPO_ROOT, 'reference', 'mingpt', 'model.py')]
    try:
        for path in earlier:             # a checkout others can read, as a TA's clone is
            os.chmod(path, 0o755)
        proc = subprocess.Popen([sys.executable, '-m', 'autograder', 'grade', TEMPLATE, '--out',
                                 str(tmp_path / 'results' / 'results.json')], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        seen = set()
        while proc.poll() is None:
            seen.add(_modes()[REPO_ROOT])
            time.sleep(0.05)
        assert proc.returncode == 0, proc.communicate()[1]
        assert 0o700 in seen and seen <= {0o755, 0o700}, sorted(map(oct, seen))
        # closed at its top for good (the interpreter lies outside it); nothing below it was changed
        assert _modes() == dict(dict.fromkeys(earlier, 0o755), **{REPO_ROOT: 0o700})
        assert _sandbox_reads(secrets) == []
        assert stat.S_IMODE(os.stat(tmp_path / 'results').st_mode) & 0o077 == 0   # a results/ folder of its own too
        os.chmod(REPO_ROOT, 0o755)   # opened again by hand: the batch's gradings close it again
        export = tmp_path / 'export'
        for sub, text in (('submission_1', open(TEMPLATE).read()), ('submission_2', 'def broken(:\n    pass\n')):
            os.makedirs(export / sub)
            (export / sub / 'model.py').write_text(text)
        proc = subprocess.run([sys.executable, '-m', 'autograder', 'batch', str(export), '--jobs', '2', '--no-report'],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert _modes()[REPO_ROOT] == 0o700 and _sandbox_reads(secrets) == []
    finally:
        for path, mode in earlier.items():
            os.chmod(path, mode)
