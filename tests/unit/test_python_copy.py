"""
The interpreter the sandbox user runs when the grader's lives in a closed folder (pyenv under /root):
setup.sh's copy at sandbox.python_copy, mapped by autograder/sandbox/users.py. A venv whose torch is its
own (Python 3.10 with PyPI's torch, README "Python 3.10") maps its interpreter from the base installation
and torch from the venv, into one copy; HW1_PYTHON_COPY puts that copy beside the 3.11 one.
"""

import os
import pwd
import shutil
import stat
import sys
import tempfile

from grader_runs import SANDBOX_USER, needs_sandbox, pool_user
from autograder.judge import config
from autograder.sandbox import users


def test_a_venvs_torch_maps_from_the_venv_and_its_interpreter_from_the_base(monkeypatch, tmp_path):
    base = tmp_path / 'versions' / '3.10.13'
    venv = base / 'envs' / 'hw1'   # pyenv-virtualenv keeps a venv inside its base: the innermost wins
    monkeypatch.setattr(sys, 'prefix', str(venv))
    monkeypatch.setattr(sys, 'base_prefix', str(base))
    assert users.installation_prefix(str(base / 'bin' / 'python3.10')) == str(base)
    assert users.installation_prefix(str(venv / 'lib' / 'python3.10' / 'site-packages' / 'torch')) == str(venv)
    assert users.installation_prefix('/usr/lib/python3/dist-packages/torch') is None
    monkeypatch.setattr(sys, 'prefix', str(base))   # no venv: one installation holds both, as before
    assert users.installation_prefix(str(base / 'lib' / 'python3.10' / 'site-packages' / 'torch')) == str(base)


def test_hw1_python_copy_replaces_the_yaml_path_for_setup_and_grader(monkeypatch):
    assert config.load().sandbox['python_copy'] == '/opt/hw1-python'
    monkeypatch.setenv('HW1_PYTHON_COPY', '/opt/hw1-python310')
    assert config.load().sandbox['python_copy'] == '/opt/hw1-python310'


def _touch(path, mode):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write('')
    os.chmod(path, mode)


@needs_sandbox
def test_the_sandbox_user_runs_the_merged_copy_of_a_venv_and_its_base(monkeypatch):
    closed, open_ = tempfile.mkdtemp(prefix='hw1-closed-'), tempfile.mkdtemp(prefix='hw1-copy-')
    try:
        os.chmod(closed, stat.S_IRWXU)          # like /root: the sandbox user cannot enter
        os.chmod(open_, 0o755)
        base, venv, copy = os.path.join(closed, 'base'), os.path.join(closed, 'venv'), os.path.join(open_, 'copy')
        site = os.path.join('lib', 'python3.10', 'site-packages')
        _touch(os.path.join(base, 'bin', 'python3.10'), 0o755)
        _touch(os.path.join(venv, site, 'torch', '__init__.py'), 0o644)
        monkeypatch.setattr(sys, 'executable', os.path.join(base, 'bin', 'python3.10'))
        monkeypatch.setattr(sys, 'prefix', venv)
        monkeypatch.setattr(sys, 'base_prefix', base)
        import importlib.util
        monkeypatch.setattr(importlib.util, 'find_spec', lambda name: type('Spec', (), {
            'origin': os.path.join(venv, site, 'torch', '__init__.py')}))
        uid, gid = pwd.getpwnam(SANDBOX_USER)[2:4]
        with pool_user(uid):   # asked as that user while no grading holds it (a grading kills its user's processes)
            exe, why = users.child_python(uid, gid, copy)
        assert exe is None and 'no usable copy at %s' % copy in why
        # setup.sh's copy: the base's files, with the venv's site-packages in place of the base's
        _touch(os.path.join(copy, 'bin', 'python3.10'), 0o755)
        _touch(os.path.join(copy, site, 'torch', '__init__.py'), 0o644)
        for folder, _, _ in os.walk(copy):
            os.chmod(folder, 0o755)
        with pool_user(uid):
            assert users.child_python(uid, gid, copy) == (os.path.join(copy, 'bin', 'python3.10'),
                                                           {'LD_LIBRARY_PATH': os.path.join(copy, 'lib')})
    finally:
        shutil.rmtree(closed)
        shutil.rmtree(open_)
