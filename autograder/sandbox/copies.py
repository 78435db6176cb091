"""
Copies of the grader on this machine, found as root before any student code runs, so that the
sandbox's self-test can prove the sandbox user reads none of them, in either mode (session.py
_selftest); and what of the grader's own copy is locked, for good (lock_paths).

A copy is a folder holding autograder/judge/ or autograder/fixtures/ (a checkout, an unpacked
zip), reference/mingpt/model.py, a draw.key (a fixtures root: course/, the zip's
autograder/fixtures/), expected.npz or known_bugs.npz (a fixtures folder on its own), or an
autograder.zip. Where they are looked for (find): the working folder and every path on the
command line of every process (each with its parents and its sub-folders: Gradescope's run names
/autograder, whose source/ is the copy), the grader's own copy, and the usual places, each
to a depth (PLACES). Without namespaces a probe can read /proc as well as this does, so a copy
a process names is one a probe can find: it must be closed to it.

Standard library only; nothing here reads a file's contents.
"""

import glob
import os
import stat

from autograder import REPO_ROOT

# what makes a folder a copy: a sub-folder, or a file, under it
MARKER_DIRS = ('autograder/judge', 'autograder/fixtures')
MARKER_FILES = ('reference/mingpt/model.py', 'draw.key', 'expected.npz', 'known_bugs.npz', 'autograder.zip')
MARKER_NAMES = {'autograder', 'reference'} | {n for n in MARKER_FILES if '/' not in n}
# what of a copy the self-test must find closed: the folders of secrets and the files of answers (a folder
# that can be entered but not listed still gives a file whose name is known)
SECRET_DIRS = ('autograder', 'autograder/fixtures', 'reference', 'tests', 'course', 'dist', 'results')
SECRET_FILES = MARKER_FILES + ('autograder/fixtures/draw.key', 'course/draw.key', 'dist/autograder.zip')
FIXTURE_ROOTS = ('', 'autograder/fixtures', 'course')   # where <profile>/expected.npz may lie ('': the copy itself)
# (place, depth): how many levels below it are listed. The copies of Gradescope's layout (/autograder/source),
# of a TA's checkout (/home/ta/src/hw1), of staff worktrees (/root/wt/x, /work/x), of pytest's and build-zip's
# temporary roots (/tmp/x/y/source) are within these; deeper ones are found when a process names them
PLACES = (('/', 1), ('/autograder*', 1), ('/home', 3), ('/root', 3), ('/srv', 2), ('/opt', 2), ('/tmp', 3),
          ('/var/tmp', 3), ('/work', 3), ('/mnt', 3), (os.path.dirname(REPO_ROOT), 1))
# never listed: kernel views, and trees that hold no copy but thousands of folders
SKIP = {'/proc', '/sys', '/dev', '/run', '/usr', '/boot', '/lib', '/lib64', '/bin', '/sbin', '/etc', '/var/lib'}
PRUNE = {'.git', '__pycache__', 'node_modules', 'site-packages', 'dist-packages', '.cache'}


def _isdir(path):
    return os.path.isdir(path) and not os.path.islink(path)


def is_copy(folder):
    """True when `folder` holds what makes a copy of the grader (MARKER_DIRS, MARKER_FILES)."""
    return any(_isdir(os.path.join(folder, m)) for m in MARKER_DIRS) or \
        any(os.path.isfile(os.path.join(folder, m)) for m in MARKER_FILES)


def secrets_of(copy):
    """The copy itself and each of its secrets that exists: what the sandbox user must be unable to list or read."""
    out = [copy]
    out += [os.path.join(copy, d) for d in SECRET_DIRS if _isdir(os.path.join(copy, d))]
    out += [os.path.join(copy, f) for f in SECRET_FILES if os.path.isfile(os.path.join(copy, f))]
    folders = [copy]   # the answers of each profile: <fixtures root>/<profile>/expected.npz, known_bugs.npz
    for base in FIXTURE_ROOTS:
        try:
            folders += [e.path for e in os.scandir(os.path.join(copy, base)) if e.is_dir(follow_symlinks=False)]
        except OSError:
            pass
    out += [os.path.join(f, n) for f in folders for n in ('expected.npz', 'known_bugs.npz')
            if os.path.isfile(os.path.join(f, n))]
    return list(dict.fromkeys(out))


def _named_by_processes():
    """(working folders, paths on command lines) of the processes of this machine."""
    cwds, named = set(), set()
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            cwd = os.readlink('/proc/%s/cwd' % pid)
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                args = f.read(65536).split(b'\0')
        except OSError:
            continue   # gone, or a kernel thread
        cwds.add(cwd)
        for arg in args[1:]:   # not the program: an interpreter's folders hold no copy
            text = arg.decode('utf-8', 'replace').split('=', 1)[-1]   # --results=PATH as well as PATH
            if '/' in text and '\n' not in text:
                named.add(os.path.normpath(os.path.join(cwd, text)))
    return cwds, named


def _around(path, below):
    """`path` and its parents, and with `below` its sub-folders: where a copy that a process names can be."""
    out = []
    p = path
    while p not in ('/', ''):
        out.append(p)
        p = os.path.dirname(p)
    if below and _isdir(path):
        try:
            out += [e.path for e in os.scandir(path) if e.is_dir(follow_symlinks=False)][:64]
        except OSError:
            pass
    return out


def _walk(place, depth, seen, found):
    """
    List `place` and the folders below it to `depth`, recording every copy (not descended into). `seen`:
    {folder: levels listed below it}, shared by the walks: a folder is listed again only for more levels
    (`/` lists /home one level deep, the walk of /home three).
    """
    stack = [(place, depth)]
    while stack:
        folder, left = stack.pop()
        if seen.get(folder, -1) >= left or folder in SKIP:
            continue
        seen[folder] = left
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        names = {e.name for e in entries}
        if names & MARKER_NAMES and is_copy(folder):
            found.add(folder)
            continue
        if left > 0:
            stack += [(e.path, left - 1) for e in entries
                      if e.name not in PRUNE and e.is_dir(follow_symlinks=False)]


def find(places=PLACES, extra=()):
    """
    {copy: [its secrets]} of every copy of the grader found: this one (REPO_ROOT), those a process names, those
    in `places` ((path or glob, depth)), and `extra` (paths the caller knows of). Runs as root.
    """
    found, seen = set(), {}
    candidates = set(extra) | {os.path.realpath(REPO_ROOT)}
    cwds, named = _named_by_processes()
    for paths, below in ((cwds, False), (named, True)):   # a named folder's sub-folders: /autograder's source/
        for path in paths:
            if not path.startswith(('/proc/', '/sys/', '/dev/', '/usr/')):
                candidates.update(_around(path, below))
    found.update(c for c in candidates if _isdir(c) and is_copy(c))
    for pattern, depth in places:
        for place in sorted(glob.glob(pattern)) if '*' in pattern else [pattern]:
            _walk(os.path.realpath(place), depth, seen, found)
    return {copy: secrets_of(copy) for copy in sorted(found)}


def lock_paths(copy=REPO_ROOT, keep=()):
    """
    (close, traverse) of the grader's own copy: the paths to make owner-only, and those that keep only the
    right to pass through. The whole copy, closed at its top; where the interpreter the sandbox user runs
    lies inside it (a virtual environment in the checkout), the top can still be passed through, and every
    entry but the one holding it is closed one by one.
    """
    copy = os.path.realpath(copy)
    inside = {os.path.relpath(os.path.abspath(k), copy).split(os.sep)[0] for k in keep
              if os.path.abspath(k).startswith(copy + os.sep)}
    inside |= {os.path.relpath(os.path.realpath(k), copy).split(os.sep)[0] for k in keep
               if os.path.realpath(k).startswith(copy + os.sep)}
    if not inside:
        return [copy], []
    entries = sorted(os.path.join(copy, n) for n in os.listdir(copy) if n not in inside)
    return [e for e in entries if not os.path.islink(e)], [copy]


def protect_source(paths, traverse=()):
    """
    Close `paths` to everyone but their owner (group and others lose every right: root-only where root owns
    them), and `traverse` to listing and reading (others may still pass through). For good: a lock that a
    grading gave back at its end left the grader's secrets open to the next reader, or to a grading still
    running beside it. Nothing is ever opened here. Returns the paths changed.
    """
    changed = []
    for path, strip in [(p, 0o077) for p in paths] + [(p, 0o066) for p in traverse]:
        path = os.path.realpath(path)
        try:
            mode = stat.S_IMODE(os.stat(path).st_mode)
        except OSError:
            continue   # gone
        if mode & strip:
            os.chmod(path, mode & ~strip)
            changed.append(path)
    return changed


def lock_own_copy(keep=()):
    """The grader's own copy (REPO_ROOT) closed for good before student code runs: copies.lock_paths; `keep`: the
    interpreter the sandbox user runs and its prefix, which stay reachable where they lie inside the copy."""
    close, traverse = lock_paths(keep=keep)
    return protect_source(close, traverse)
