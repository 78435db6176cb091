"""
The public tests and the grader agree: for each model.py below, the real
`python test_model.py` of the template passes every test exactly when the real
`python -m autograder grade` gives it full marks (every required point, no failed test). The
cases are the grader's policies, where a student's own machine would tell them otherwise:
imports (a module the grader lacks, at the top or guarded or inside a function; a denied
module), a file with nothing to grade, and a correct submission in the course starter's
style; a value bug fails both.

"Full marks" is measured against the reference graded by the same grader in the same run (the run's one
grading of it, tests/helpers/grading_store.py, through ./run_autograder):
a case is at full marks when it loses no test the reference keeps. Where the reference scores
100 (build-zip's check), that is exactly 100.
"""

import json
import os
import shutil
import subprocess
import sys

import grading_store
import pytest

from autograder import REFERENCE_DIR, REPO_ROOT, TEMPLATE_DIR
from autograder.judge import known_bugs

REFERENCE = open(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')).read()
COURSE_STYLE = os.path.join(REPO_ROOT, 'tests', 'submissions', 'correct', 'course_memory_skip_kv_copy', 'model.py')
ANCHOR = 'import torch\n'


def _with(lines, where=ANCHOR):
    assert REFERENCE.count(where) >= 1
    return REFERENCE.replace(where, where + lines, 1)


def _course_style_with_guarded_wandb():
    with open(COURSE_STYLE) as f:
        source = f.read()
    return source.replace(ANCHOR, ANCHOR + 'try:\n    import wandb\nexcept ImportError:\n    wandb = None\n', 1)


LAZY_MATPLOTLIB = ('    def plot_attention(self):\n        import matplotlib.pyplot as plt\n        return plt\n\n'
                   '    def configure_optimizers(self, train_config):')
CASES = {
    # name: (model.py source, True: the public tests pass and the grader gives full marks / False: neither,
    #        what the public tests' report must say)
    'course_style_guarded_wandb': (_course_style_with_guarded_wandb, True, []),
    'top_level_wandb': (lambda: _with('import wandb\n'), False, [
        "your model.py could not be imported: ModuleNotFoundError: No module named 'wandb' on the grader: it has only "
        "torch, einops, numpy and the Python standard library (mingpt/model.py line 18)"]),
    # importable on the student's machine (it is on the public tests' path), absent on the grader
    'locally_installed_module': (lambda: _with('import hw1_local_only\n'), False, [
        "No module named 'hw1_local_only' on the grader", 'could not run: mingpt/model.py cannot be imported']),
    'unused_subprocess': (lambda: _with('import subprocess\n'), True, [
        "note: model.py line 18 imports 'subprocess': allowed, but a model has no use for it"]),
    'matplotlib_in_unused_function': (lambda: REFERENCE.replace(
        '    def configure_optimizers(self, train_config):', LAZY_MATPLOTLIB, 1), True, [
        "imports 'matplotlib.pyplot' inside a function: the grader does not have it, so a test that runs this code "
        "fails there (importing model.py still works)"]),
    'empty': (lambda: '', False, ['model.py is empty: there is nothing to grade']),
    'gqa_no_scale': (lambda: known_bugs.apply(known_bugs.BY_ID['gqa-no-scale'], REFERENCE), False, [
        'Likely bug: ']),
}


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'HW1_DATA')}
    env.update(PYTHONDONTWRITEBYTECODE='1', OMP_NUM_THREADS='1', **extra)
    return env


def _grade(model_py, tmp_path):
    results = tmp_path / 'results.json'
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'grade', str(model_py), '--results', str(results)],
                          cwd=REPO_ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    with open(str(results)) as f:
        out = json.load(f)
    return _lost(out), out


def _lost(out):
    return {t['extra_data']['id'] for t in out['tests'] if t['status'] == 'failed' or t['score'] < t['max_score']}


# the reference's grading is the run's one (tests/helpers/grading_store.py: tests/e2e/test_grading.py checks it),
# through ./run_autograder: an AUTOGRADER_ROOT open to the sandbox users until it is locked, so every test here is
# `lockdown`
pytestmark = pytest.mark.lockdown


@pytest.fixture(scope='module')
def reference_lost():
    """The tests the grader docks the reference itself (none once the reference scores 100)."""
    out, _ = grading_store.reference()
    return _lost(out)


def _public_tests(source, tmp_path):
    """The real public tests in a template copy holding `source`; a module only this machine has is on its path."""
    hw1 = tmp_path / 'hw1'
    shutil.copytree(TEMPLATE_DIR, str(hw1), ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    (hw1 / 'mingpt' / 'model.py').write_text(source)
    site = tmp_path / 'site'
    site.mkdir()
    (site / 'hw1_local_only.py').write_text('INSTALLED_HERE = True\n')   # importable here, absent on the grader
    proc = subprocess.run([sys.executable, 'test_model.py'], cwd=str(hw1), env=_env(PYTHONPATH=str(site)),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600)
    return proc.returncode == 0, proc.stdout


@pytest.mark.parametrize('name', list(CASES))
def test_public_tests_pass_exactly_when_the_grader_gives_full_marks(name, reference_lost, tmp_path):
    make, expected, words = CASES[name]
    source = make()
    public_ok, report = _public_tests(source, tmp_path)
    for w in words:
        assert w in report, 'the public tests do not say %r:\n%s' % (w, report[-3000:])
    (tmp_path / 'model.py').write_text(source)
    lost, out = _grade(tmp_path / 'model.py', tmp_path)
    grader_full = lost <= reference_lost
    summary = report.split('Summary of the public tests')[-1][-2500:]
    assert (public_ok, grader_full) == (expected, expected), \
        'public tests %s, grader lost %s (the reference loses %s)\n%s\n%s' % (
            'pass' if public_ok else 'fail', sorted(lost - reference_lost), sorted(reference_lost), summary,
            out['tests'][0]['output'][:1500])
