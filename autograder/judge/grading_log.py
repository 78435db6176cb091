"""
HW1_GRADING_LOG=<file>: one JSON line per grading appended to that file (nothing otherwise), so that staff can
count how many gradings a run made and which graded the same upload in the same mode twice (the test suite:
bench/grading_log.py reads the file; issue 43). Standard library only; it never changes a grading and never
raises: a line that cannot be written is simply missing.

A line: the upload's sha256 (a file's bytes, or those of the one file a folder holds; else a folder's files by
relative path, links by their target, never followed), the profile, grading.yaml's sha256, the tests skipped, the
sandbox defences turned off (HW1_SANDBOX_DISABLE), whether the grading ran under an AUTOGRADER_ROOT
(run_autograder) or in a batch worker's Sandbox, the test that ran it (PYTEST_CURRENT_TEST, inherited by
subprocesses) and its seconds.
"""

import hashlib
import json
import os
import stat
import time

ENV = 'HW1_GRADING_LOG'
READ_CAP = 256 << 20   # past this a file counts by its size: the log must not cost a grading much


def _file_digest(h, path, st):
    if st.st_size > READ_CAP:
        h.update(b'size:%d' % st.st_size)
        return
    with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
            h.update(chunk)


def _only_file(path):
    """The one entry of a folder that holds a single regular file and nothing else (run_autograder's submission/
    with its model.py), else None."""
    entries = [(root, dirs, files) for root, dirs, files in os.walk(path)]
    names = [os.path.join(root, n) for root, dirs, files in entries for n in files + dirs]
    files = [n for n in names if not os.path.isdir(n) or os.path.islink(n)]
    if len(files) == 1 and stat.S_ISREG(os.lstat(files[0]).st_mode):
        return files[0]
    return None


def upload_sha256(path):
    """sha256 of an upload as it lies (file, folder or link), or None where it cannot be read. A folder that holds
    one file alone counts as that file (the same model.py graded through run_autograder's submission/ folder or as a
    path is the same upload)."""
    h = hashlib.sha256()
    try:
        st = os.lstat(path)
        alone = _only_file(path) if stat.S_ISDIR(st.st_mode) else None
        if alone:
            path, st = alone, os.lstat(alone)
        if stat.S_ISREG(st.st_mode):
            _file_digest(h, path, st)
        elif stat.S_ISDIR(st.st_mode):
            for root, dirs, files in os.walk(path):   # os.walk never follows a link to a folder
                dirs.sort()
                for name in sorted(files + [d for d in dirs if os.path.islink(os.path.join(root, d))]):
                    full = os.path.join(root, name)
                    h.update(os.path.relpath(full, path).encode('utf-8', 'surrogateescape') + b'\0')
                    fst = os.lstat(full)
                    if stat.S_ISLNK(fst.st_mode):
                        h.update(b'link:' + os.readlink(full).encode('utf-8', 'surrogateescape'))
                    elif stat.S_ISREG(fst.st_mode):
                        _file_digest(h, full, fst)
        else:
            h.update(b'mode:%o' % st.st_mode)
        return h.hexdigest()
    except (OSError, ValueError):
        return None


def _sha256_of(path):
    try:
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def record(path, profile_name, grading_path, skip, autograder_root, batch_sandbox, seconds):
    """Append this grading's line to $HW1_GRADING_LOG, if set."""
    target = os.environ.get(ENV)
    if not target:
        return
    try:
        line = {'upload': upload_sha256(path), 'profile': profile_name, 'grading_yaml': _sha256_of(grading_path),
                'skip': sorted(skip or ()), 'disable': os.environ.get('HW1_SANDBOX_DISABLE', ''),
                'autograder_root': bool(autograder_root), 'batch': bool(batch_sandbox),
                'test': os.environ.get('PYTEST_CURRENT_TEST', ''), 'pid': os.getpid(),
                'seconds': round(seconds, 2), 'at': round(time.time(), 2)}
        with open(target, 'a', encoding='utf-8') as f:
            f.write(json.dumps(line, sort_keys=True) + '\n')
    except Exception:   # noqa: BLE001  the log is staff's tally, never a reason for a grading to fail
        pass
