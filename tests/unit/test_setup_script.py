"""
./setup.sh in a fresh venv (issue 41): without build isolation the editable install builds on the venv's own
setuptools, which (65.5 on Python 3.11, none from 3.12) has no bdist_wheel, and the script stopped there with
"invalid command 'bdist_wheel'" before building data/input.txt. It now installs setuptools >= 70.1 first where
neither that nor `wheel` is there, and leaves an interpreter that can build alone. Checked by --dry-run, which
prints each step and changes nothing (the full run in a fresh venv: the report of issue 41).
"""

import os
import subprocess
import sys
import venv

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SETUPTOOLS = 'setuptools>=70.1'


def _dry_run(python):
    env = dict(os.environ, PYTHON=python, HW1_SKIP_DATA='1')
    done = subprocess.run(['bash', os.path.join(ROOT, 'setup.sh'), '--dry-run'], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith('+ ')]


def test_a_fresh_venv_gets_a_setuptools_that_builds_before_the_editable_install(tmp_path):
    # no setuptools at all: as Python 3.12's venv, or 3.11's without wheel
    venv.create(tmp_path / 'venv', with_pip=False)
    python = str(tmp_path / 'venv' / 'bin' / 'python')
    steps = _dry_run(python)
    editable = [i for i, s in enumerate(steps) if s.endswith('--no-build-isolation -e .')]
    first = [i for i, s in enumerate(steps) if s.endswith('pip install -q %s' % SETUPTOOLS)]
    assert editable and first and first[0] < editable[0], steps


def test_an_interpreter_that_can_build_installs_no_setuptools():
    pytest.importorskip('setuptools.command.bdist_wheel')   # this interpreter's own setuptools can build
    steps = _dry_run(sys.executable)
    assert any(s.endswith('--no-build-isolation -e .') for s in steps), steps
    assert not any(SETUPTOOLS in s for s in steps), steps
