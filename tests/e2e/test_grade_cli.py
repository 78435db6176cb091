"""
`python -m autograder grade` as staff and run_autograder use it: a path that does not exist
or an unknown profile exits 2 with one sentence for the person at the command line (never
the student-facing "internal error" text) and still writes a valid results.json; a zip upload
leaves no copy of student code in the temporary folder; a guarded optional import (wandb, as
the handout suggests) does not cost points; a model.py that lacks part of the interface fails test 1.1.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

from autograder import REPO_ROOT
from autograder.judge import source_patches, results

WANDB = ('import torch\n', 'import torch\ntry:\n    import wandb\nexcept ImportError:\n    wandb = None\n')


def _grade(path, tmp_path, *extra, env=None):
    out = tmp_path / 'results' / 'results.json'
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'grade', str(path), '--results', str(out)] + list(extra),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, env=env)
    return proc, results.load(str(out))


def test_missing_path_and_unknown_profile_fail_clearly_and_still_write_results(tmp_path):
    proc, out = _grade(tmp_path / 'nope', tmp_path)
    assert proc.returncode == 2 and proc.stdout == ''
    assert proc.stderr.strip().splitlines() == [
        'grade: %s does not exist (give a model.py, a folder holding one, or a zip)' % (tmp_path / 'nope')]
    assert out.total == 0 and 'no submission found' in out['submission'].output     # what Gradescope would show

    proc, out = _grade(os.path.join(REPO_ROOT, 'reference', 'mingpt', 'model.py'), tmp_path, '--profile', 'foo')
    assert proc.returncode == 2 and proc.stdout == ''
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('grade: could not grade ') and "unknown profile 'foo'" in lines[0]
    assert 'internal error' not in proc.stderr and 'not your fault' not in proc.stderr
    assert out.is_error and out.total == 0


def test_zip_upload_with_a_guarded_wandb_import_scores_full_and_leaves_no_copy(tmp_path):
    # a TMPDIR of this grading's own, reachable by the sandbox user like /tmp is
    scratch = tempfile.mkdtemp(prefix='hw1-test-tmpdir-', dir='/tmp')
    os.chmod(scratch, 0o1777)
    upload = tmp_path / 'hw1.zip'
    with zipfile.ZipFile(str(upload), 'w') as z:
        z.writestr('hw1/mingpt/model.py', source_patches.patched_reference([WANDB], 'guarded wandb import'))
    try:
        proc, out = _grade(upload, tmp_path, env=dict(os.environ, TMPDIR=str(scratch)))
        left = [n for n in os.listdir(scratch) if n.startswith('hw1-')]
    finally:   # the scratch folder goes whatever the grading did
        shutil.rmtree(scratch, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr
    # full marks: the required 100 and every extra-credit point (grading.yaml handout.extra_credit)
    points = out.extra_data['points']
    assert (points['required'], points['required_max']) == (100, 100) and \
        points['extra_credit'] == points['extra_credit_max'] > 0, \
        [(t.number, t.score, t.output[:200]) for t in out.tests.values()]
    assert 'from the zip you uploaded' in out['submission'].output
    assert left == []   # no copy of the upload left in the grading's TMPDIR
    assert 'total: 100 / 100' in proc.stdout


def test_a_model_without_part_of_the_interface_fails_test_1_1(tmp_path):
    partial = tmp_path / 'model.py'
    partial.write_text('import torch\n\n\nclass GPT(torch.nn.Module):\n    pass\n')
    proc, out = _grade(partial, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert out['submission'].status == 'failed' and out.total == 0
    assert ('does not define the handout interface: RotaryPositionalEmbeddings, CausalSelfAttention'
            in out['submission'].output)
    with open(tmp_path / 'results' / 'results.json') as f:
        assert json.load(f)['tests'][0]['status'] == 'failed'
