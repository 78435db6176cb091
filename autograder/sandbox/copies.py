"""
Copies of the grader on this machine, found as root before any student code runs, so that the
sandbox's self-test can prove the sandbox user reads none of them, in either mode (session.py
_selftest); and what of the grader's own copy is locked, for good (lock_paths).

A copy is a folder holding autograder/judge/ or autograder/fixtures/ (a checkout, an unpacked
zip), reference/mingpt/model.py, a draw.key (a fixtures root: course/, the zip's
autograder/fixtures/), expected.npz or known_bugs.npz (a fixtures folder on its own), or an
autograder.zip; or a zip file, whatever its name, holding any of these (zip_holds_copy). Where they
are looked for (find): the working folder and every path on the command line of every process
(each with its parents and its sub-folders: Gradescope's run names /autograder, whose source/ is
the copy), the grader's own copy, and the usual places, each to a depth (PLACES); the folders
everyone can write to (/tmp, /var/tmp, /dev/shm) to any depth, within MAX_ENTRIES. Without
namespaces a probe can read /proc as well as this does, so a copy a process names is one a probe
can find: it must be closed to it.

This is a search, not a wall: where Landlock or namespaces are in force the probe cannot open any
of these anyway, and the self-test proves it on decoys (scratch.decoys); where neither is, a copy
the search does not recognise stays readable (defences.SINGLE_TENANT).

Standard library only; of a file's contents only a zip's directory is read (the first 4 bytes,
the last 22, then its central directory), and only of a file others may read.
"""

import glob
import os
import stat
import struct
import zipfile

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
# of a TA's checkout (/home/ta/src/hw1), of staff worktrees (/root/wt/x, /work/x) are within these; deeper ones
# are found when a process names them. The folders everyone can write to are listed to any depth, nothing pruned
# (a copy left five folders deep under /tmp, or in /dev/shm, was once not found)
DEEP = 4096   # deeper than any path PATH_MAX allows: no depth limit in practice
PLACES = (('/', 1), ('/autograder*', 1), ('/home', 3), ('/root', 3), ('/srv', 2), ('/opt', 2), ('/tmp', DEEP),
          ('/var/tmp', DEEP), ('/dev/shm', DEEP), ('/work', 3), ('/mnt', 3), (os.path.dirname(REPO_ROOT), 1))
MAX_ENTRIES = 200_000   # entries listed per search (~0.2 s); past it the search says it is incomplete
# a zip holds a copy when one of its names is (or ends with) one of these, or passes through a MARKER_DIRS folder
ZIP_NAMES = ('draw.key', 'expected.npz', 'known_bugs.npz', 'autograder.zip', 'reference/mingpt/model.py')
MAX_ZIP_NAMES = 100_000  # a zip listing more names than this counts as a copy (fail closed)
MAX_ZIP_BYTES = 16 << 20  # a raw central directory larger than this is left to zipfile
# what every name of ZIP_NAMES and MARKER_DIRS contains: a raw directory holding none of these needs no listing
ZIP_MARKERS = (b'autograder', b'draw.key', b'expected.npz', b'known_bugs.npz', b'reference/mingpt/model.py')
ZIP_HEAD, ZIP_END = b'PK\x03\x04', b'PK\x05\x06'
END = struct.Struct('<4s4H2LH')   # the end of central directory record (22 bytes, then its comment)
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


def _central_directory(f, size):
    """
    The raw central directory of the zip open in `f` (binary), None when `f` shows no zip, or b'' where it cannot
    be read here (zip64, a directory past MAX_ZIP_BYTES): the caller then asks zipfile.
    """
    if size < END.size:
        return None
    head = f.read(4)
    f.seek(size - END.size)
    block = f.read(END.size)
    if block[:4] != ZIP_END:   # a comment of up to 64 KB may follow the end record
        if head != ZIP_HEAD:
            return None
        f.seek(max(0, size - END.size - 0xFFFF))
        block = f.read()
        at = block.rfind(ZIP_END)
        if at < 0 or len(block) - at < END.size:
            return None
        block = block[at:at + END.size]
    _, _, _, _, count, cd_size, cd_offset, _ = END.unpack(block)
    if count == 0xFFFF or cd_size == 0xFFFFFFFF or cd_offset == 0xFFFFFFFF or cd_size > MAX_ZIP_BYTES:
        return b''
    f.seek(cd_offset)   # a zip with data prepended (self-extracting) has its directory further on: zipfile's case
    return f.read(cd_size)


# a central directory entry's fixed 46 bytes: signature, name/extra/comment lengths
ENTRY = struct.Struct('<4s24xHHH12x')


def _names(raw):
    """The names of a raw central directory (decoded loosely: only their ASCII markers matter)."""
    names, at = [], 0
    while at + ENTRY.size <= len(raw) and len(names) <= MAX_ZIP_NAMES:
        signature, name_len, extra_len, comment_len = ENTRY.unpack_from(raw, at)
        if signature != b'PK\x01\x02':
            break
        names.append(raw[at + ENTRY.size:at + ENTRY.size + name_len].decode('utf-8', 'replace'))
        at += ENTRY.size + name_len + extra_len + comment_len
    return names


def zip_holds_copy(path):
    """
    True when the file at `path` is a zip (whatever its name) holding a copy of the grader or one of its secrets
    (ZIP_NAMES, MARKER_DIRS), or one too large to list (MAX_ZIP_NAMES, fail closed). Only its directory is read:
    raw, searched for the markers' bytes (fast: a machine holds thousands of wheels), and listed by zipfile only
    where one appears or the raw directory cannot be had.
    """
    try:
        # never a link followed, never a FIFO or device waited on: what was a file when listed may not be one now
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, 'rb') as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return False
            raw = _central_directory(f, st.st_size)
            if raw is None:
                return False
            if raw and raw[:4] == b'PK\x01\x02':
                if not any(m in raw for m in ZIP_MARKERS):
                    return False
                names = _names(raw)
            else:
                f.seek(0)
                names = zipfile.ZipFile(f).namelist()
    except (OSError, zipfile.BadZipFile, struct.error, ValueError, NotImplementedError, EOFError):
        return False
    if len(names) > MAX_ZIP_NAMES:
        return True
    for name in names:
        name = '/' + name.replace('\\', '/')
        if any(name.endswith('/' + n) for n in ZIP_NAMES) or any('/' + m + '/' in name for m in MARKER_DIRS):
            return True
    return False


_ZIPS_SEEN = {}   # (device, inode, size, mtime) -> zip_holds_copy: a batch worker reads each zip's directory once


def _zip_copy(entry):
    """Whether the directory entry is a file others may read that is a zip holding a copy (zip_holds_copy)."""
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode) or not st.st_mode & 0o044 or st.st_size < END.size:
        return False
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _ZIPS_SEEN:
        if len(_ZIPS_SEEN) > 100_000:
            _ZIPS_SEEN.clear()
        _ZIPS_SEEN[key] = zip_holds_copy(entry.path)
    return _ZIPS_SEEN[key]


def _walk(place, depth, seen, found, budget):
    """
    List `place` and the folders below it to `depth`, recording every copy (not descended into), and every zip
    that others may read and that holds one (zip_holds_copy). `seen`: {folder: levels listed below it}, shared by
    the walks: a folder is listed again only for more levels (`/` lists /home one level deep, the walk of /home
    three). `budget`: {'left': entries still to list}, shared too; once spent, 'incomplete' is set and the walk ends.
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
        budget['left'] -= len(entries)
        if budget['left'] < 0:
            budget['incomplete'] = folder
            return
        names = {e.name for e in entries}
        if names & MARKER_NAMES and is_copy(folder):
            found.add(folder)
            continue
        found.update(e.path for e in entries if _zip_copy(e))
        if left > 0:
            stack += [(e.path, left - 1) for e in entries
                      if (depth == DEEP or e.name not in PRUNE) and e.is_dir(follow_symlinks=False)]


def find(places=PLACES, extra=(), report=None):
    """
    {copy: [its secrets]} of every copy of the grader found: this one (REPO_ROOT), those a process names, those
    in `places` ((path or glob, depth)), and `extra` (paths the caller knows of); a zip holding one is a copy, its
    only secret itself. Runs as root. `report` (a dict), if given, gets 'entries' (listed) and, where MAX_ENTRIES
    ran out, 'incomplete' (the folder it ran out in).
    """
    found, seen, budget = set(), {}, {'left': MAX_ENTRIES}
    candidates = set(extra) | {os.path.realpath(REPO_ROOT)}
    cwds, named = _named_by_processes()
    for paths, below in ((cwds, False), (named, True)):   # a named folder's sub-folders: /autograder's source/
        for path in paths:
            if not path.startswith(('/proc/', '/sys/', '/dev/', '/usr/')):
                candidates.update(_around(path, below))
    found.update(c for c in candidates if _isdir(c) and is_copy(c))
    for pattern, depth in places:
        for place in sorted(glob.glob(pattern)) if '*' in pattern else [pattern]:
            if 'incomplete' not in budget:
                _walk(os.path.realpath(place), depth, seen, found, budget)
    if report is not None:
        report['entries'] = MAX_ENTRIES - budget['left']
        if 'incomplete' in budget:
            report['incomplete'] = budget['incomplete']
    return {copy: secrets_of(copy) if _isdir(copy) else [copy] for copy in sorted(found)}


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
