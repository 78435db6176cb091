"""
The linter as a test, so `python -m pytest` (the README's and CI's command) runs it: ruff
with pyproject.toml's configuration, whose target is Python 3.10 (Gradescope's), so syntax
newer than 3.10 fails here on 3.11.
"""

import os
import shutil
import subprocess
import sys

from autograder import REPO_ROOT


def _ruff():
    found = shutil.which('ruff')
    assert found, 'ruff is not installed: ./setup.sh installs requirements-dev.txt (pip install ruff==0.17.6)'
    return found


def test_ruff_passes_on_the_whole_tree():
    proc = subprocess.run([_ruff(), 'check', '--output-format', 'concise', '.'], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_ruff_targets_gradescope_python_and_catches_newer_syntax(tmp_path):
    # the check is real: a 3.11-only construct (except*) is refused for the 3.10 target
    bad = tmp_path / 'new_syntax.py'
    bad.write_text('try:\n    pass\nexcept* ValueError:\n    pass\n')
    proc = subprocess.run([_ruff(), 'check', '--config', os.path.join(REPO_ROOT, 'pyproject.toml'),
                           '--output-format', 'concise', str(bad)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and 'except*' in proc.stdout + proc.stderr, proc.stdout
    assert sys.version_info >= (3, 10)
