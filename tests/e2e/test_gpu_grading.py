"""
bench/gpu_grading.py, the one prepared call for a lent GPU machine (issue 45), run here as its CPU dry run so that
it cannot rot between the times a GPU is lent: every phase but the CUDA-only ones (regenerate into a temporary
root, the whole regenerate), on the cpu profile with the committed fixtures, in both sandbox modes.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from autograder.staff.fixtures.fixture_changes import NOISE_FLOOR
from grader_runs import REPO, needs_sandbox

SCRIPT = os.path.join(REPO, 'bench', 'gpu_grading.py')
sys.path.insert(0, os.path.join(REPO, 'bench'))
import gpu_grading  # noqa: E402


@needs_sandbox
@pytest.mark.gradescope_mode   # its second half grades without namespaces (tests/conftest.py)
def test_the_cpu_dry_run_passes_every_check_and_writes_its_report(tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, PYTHONPATH=REPO)
    env.pop('HW1_SANDBOX_DISABLE', None)
    proc = subprocess.run([sys.executable, SCRIPT, '--out', str(out), '--device', 'cpu', '--quick',
                           '--setup', 'dry-run', '--budget', '240'],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=400)
    report = json.loads((out / 'gpu_grading.json').read_text())
    assert proc.returncode == 0, ([c for c in report['checks'] if not c['ok']], proc.stdout[-2000:])
    assert report['failed'] == [] and report['passed'] == len(report['checks'])
    checks = {c['check']: c for c in report['checks']}

    # the defences of both modes, as `sandbox check` proved them
    assert set(report['defences']) == {'strongest, committed', 'gradescope, committed'}
    assert [l.split(':')[0] for l in report['defences']['gradescope, committed']['lacks']] == ['namespaces', 'cgroups']
    assert report['defences']['strongest, committed']['lacks'] == []
    # the reference's outputs at the cpu sizes, compared array by array with the committed fixtures
    compare = report['compare']
    assert compare['arrays'] >= 20 and set(compare['tests']) >= {'rope', 'gqa', 'model', 'generate'}
    # on a CPU the same float32 outputs as the committed ones, up to another host's rounding (regenerate's noise floor)
    assert all(t['worst'] < NOISE_FLOOR for t in compare['tests'].values()), compare['tests']
    # each submission as it must come out, in both modes
    for mode in ('strongest', 'gradescope'):
        rows = {r['submission']: r for r in report['gradings'][mode]}
        assert set(rows) == {name for name, *_ in gpu_grading.GRADED}
        assert rows['reference']['failed_tests'] == [] and rows['reference']['total'] > 0
        assert rows['template']['total'] == 0
        for name in ('memory_peak_no_reset', 'memory_raw_allocated', 'memory_raw_max', 'memory_constant'):
            assert rows[name]['failed_tests'] == ['9.1'], rows[name]
        assert rows['course_region_device_flag_sync']['failed_tests'] == []
        assert (out / 'results' / mode / 'reference.json').is_file()
    assert checks['setup.sh --dry-run keeps torch and installs from the wheelhouse only']['ok']
    table = (out / 'gpu_grading.md').read_text()
    assert '| reference under --profile cpu, gradescope mode: full | ok |' in table
    # plain file names only: what the device tool brings back
    assert all(' ' not in name for name in os.listdir(out / 'logs'))
    assert report['seconds'] < 240


def test_the_comparison_measures_each_array_in_its_tests_tolerance():
    """A planted difference: within 3.1's tolerance it passes, beyond it fails; integers are exact."""
    from autograder.judge import config
    grading = config.load()
    tol = grading.test('mha-rope').tolerance
    old = {'mha-rope/y': np.ones((2, 3), np.float32), 'generate/tokens': np.arange(6)}
    near = {'mha-rope/y': old['mha-rope/y'] + np.float32(0.5 * (tol.atol + tol.rtol)), 'generate/tokens': np.arange(6)}
    far = {'mha-rope/y': old['mha-rope/y'] + np.float32(3 * (tol.atol + tol.rtol)),
           'generate/tokens': np.arange(6)[::-1]}
    ok = gpu_grading.compare_arrays(grading, near, old, None)
    assert ok['mha-rope']['ok'] and 0.4 < ok['mha-rope']['worst'] < 0.6 and ok['generate']['worst'] == 0
    bad = gpu_grading.compare_arrays(grading, far, old, None)
    assert not bad['mha-rope']['ok'] and bad['mha-rope']['worst'] > 2.5
    assert not bad['generate']['ok']
    missing = gpu_grading.compare_arrays(grading, dict(far, **{'rope/extra': np.zeros(2)}), old, None)
    assert not missing['rope']['ok'] and 'not in the committed fixtures' in missing['rope']['problems'][0]
