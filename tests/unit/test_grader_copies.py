"""
The copies of the grader the harness finds before any student code runs (autograder/sandbox/copies.py):
one that a process names (its working folder, a path on its command line, the folder holding the named
one: Gradescope's /autograder holds source/), one in a usual place, each with the secrets the self-test
must find closed; the scan's cost; and what of the grader's own copy is locked, for good. That the self-test
refuses an open one is tests/e2e/test_sandbox_process.py's.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time

from autograder import REPO_ROOT
from autograder.sandbox import copies, protect_source


def _copy(parent, *extra):
    """An unpacked zip's layout under `parent`/source: the harness, the fixtures and their key."""
    copy = os.path.join(parent, 'source')
    for rel in ('autograder/judge/grade.py', 'autograder/fixtures/draw.key',
                'autograder/fixtures/cpu/expected.npz') + extra:
        os.makedirs(os.path.join(copy, os.path.dirname(rel)), exist_ok=True)
        open(os.path.join(copy, rel), 'w').close()
    return copy


def test_a_copy_a_process_names_is_found_however_deep(tmp_path):
    """Beyond every usual place's depth: found because a process names its folder on its command line."""
    root = tmp_path / 'a' / 'b' / 'c' / 'd' / 'autograder-root'
    copy = _copy(str(root))
    sleeper = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)', '--autograder-root', str(root)],
                               cwd='/')
    try:
        found = copies.find(places=())
    finally:
        sleeper.kill()
        sleeper.wait()
    assert copy in found
    secrets = found[copy]
    for rel in ('', 'autograder', 'autograder/fixtures', 'autograder/fixtures/draw.key',
                'autograder/fixtures/cpu/expected.npz'):
        assert os.path.join(copy, rel).rstrip('/') in secrets, rel
    assert copies.find(places=()).get(copy) is None   # no process names it any more


def test_a_copy_in_a_usual_place_is_found_and_the_scan_costs_tens_of_ms():
    parent = tempfile.mkdtemp(prefix='hw1-copies-', dir='/var/tmp')
    try:
        copy = _copy(parent, 'reference/mingpt/model.py')
        stray = os.path.join(parent, 'backup')
        os.makedirs(stray)
        open(os.path.join(stray, 'draw.key'), 'w').close()   # a course's key copied on its own
        costs = []
        for _ in range(5):
            started = time.perf_counter()
            found = copies.find()
            costs.append(time.perf_counter() - started)
        assert copy in found and os.path.join(copy, 'reference', 'mingpt', 'model.py') in found[copy]
        assert stray in found and os.path.join(stray, 'draw.key') in found[stray]
        assert os.path.realpath(REPO_ROOT) in found   # this checkout: on sys.path, and this process's own folder
        print('copy scan: median %.1f ms of %d copies' % (sorted(costs)[2] * 1000, len(found)))
        assert sorted(costs)[2] < 0.25   # tens of ms on a quiet machine; a loaded one takes a few times that
    finally:
        shutil.rmtree(parent)


def test_the_own_copy_is_closed_whole_or_around_an_interpreter_inside_it(tmp_path):
    copy = tmp_path / 'checkout'
    for rel in ('autograder/judge/grade.py', 'reference/mingpt/model.py', '.venv/bin/python', 'README.md'):
        os.makedirs(copy / os.path.dirname(rel), exist_ok=True)
        (copy / rel).write_text('')
    os.symlink(str(tmp_path), str(copy / 'elsewhere'))
    assert copies.lock_paths(str(copy)) == ([str(copy)], [])
    close, traverse = copies.lock_paths(str(copy), keep=[str(copy / '.venv' / 'bin' / 'python')])
    assert traverse == [str(copy)]   # the sandbox user still passes through to its interpreter
    assert sorted(os.path.basename(p) for p in close) == ['README.md', 'autograder', 'reference']   # no link followed
    for path in [copy] + [copy / n for n in ('autograder', 'reference', '.venv', 'README.md')]:
        os.chmod(path, 0o755)
    protect_source(close, traverse)
    modes = {n: stat.S_IMODE(os.stat(copy / n).st_mode) for n in ('', 'autograder', 'reference', '.venv', 'README.md')}
    assert modes == {'': 0o711, 'autograder': 0o700, 'reference': 0o700, '.venv': 0o755, 'README.md': 0o700}
    assert protect_source(close, traverse) == []   # nothing is ever opened, and a lock taken stays



def _zip(path, names):
    import zipfile
    with zipfile.ZipFile(path, 'w') as z:
        for name in names:
            z.writestr(name, 'HOSTILE-SECRET\n')


def test_the_shared_folders_are_searched_to_any_depth_and_zips_by_their_contents():
    """Where a copy was once not found: five folders deep under /tmp, in /dev/shm, a zip renamed to hide its key
    (and one with data before it, as a self-extracting archive is); a zip of anything else is no copy."""
    tops = []
    try:
        for where in ('/tmp', '/dev/shm', '/var/tmp'):
            tops.append(tempfile.mkdtemp(prefix='hw1-copies-', dir=where))
        deep = _copy(os.path.join(tops[0], 'a', 'b', 'c', 'd', 'e', '.cache'))   # pruned elsewhere, not here
        shm = _copy(tops[1])
        renamed = os.path.join(tops[2], 'notes.dat')
        _zip(renamed, ['course/draw.key'])
        prefixed = os.path.join(tops[2], 'setup.bin')
        _zip(prefixed + '.zip', ['x/autograder/fixtures/cpu/expected.npz'])
        with open(prefixed, 'wb') as f, open(prefixed + '.zip', 'rb') as z:
            f.write(b'#!/bin/sh\nexit 0\n' + z.read())
        os.unlink(prefixed + '.zip')
        innocent = os.path.join(tops[2], 'wheel.whl')
        _zip(innocent, ['pkg/model.py', 'pkg/data/expected_values.npz', 'pkg/draw_keys.py'])
        hidden = os.path.join(tops[2], 'closed.dat')
        _zip(hidden, ['draw.key'])
        os.chmod(hidden, 0o600)   # others cannot read it: no secret of theirs, and its contents are not read
        report = {}
        found = copies.find(report=report)
        assert deep in found and shm in found, sorted(found)
        assert found[renamed] == [renamed] and prefixed in found, sorted(found)
        assert innocent not in found and hidden not in found
        assert 0 < report['entries'] < copies.MAX_ENTRIES and 'incomplete' not in report
        assert copies.zip_holds_copy(hidden)   # as root the helper itself reads it
    finally:
        for top in tops:
            shutil.rmtree(top, ignore_errors=True)


def test_a_search_that_runs_out_of_entries_says_so(tmp_path, monkeypatch):
    for i in range(30):
        (tmp_path / ('d%d' % i)).mkdir()
    monkeypatch.setattr(copies, 'MAX_ENTRIES', 10)
    report = {}
    copies.find(places=((str(tmp_path), copies.DEEP),), report=report)
    assert report['incomplete'] == str(tmp_path) and report['entries'] > 10
