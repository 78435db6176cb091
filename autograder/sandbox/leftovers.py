"""
Nothing of a grading survives it. Between probes and after the grading, for the sandbox user:

- files: every entry it owns in every folder it can write to. With namespaces a probe can write
  only to its own out/ and home/ (tmpfs, dropped after the probe), and the self-test confirms
  that everything else is read-only. Without them, `writable_places()` lists every folder of
  the machine the user could create files in (world-writable like /tmp, /run/lock, /dev/mqueue,
  or its own), from a scan that setup.sh makes once (cached) plus the usual volatile ones; the
  removal runs AS that user, so a planted link can only make it delete what the student could.
- kernel keys: seccomp denies add_key/keyctl/request_key; its user, session and persistent
  keyrings are cleared anyway (clear_keys), for kernels or set-ups without the filter.
- SysV IPC: seccomp denies creating objects (and an IPC namespace drops them with the probe);
  any object it owns is removed (remove_ipc).
- processes: users.kill_and_confirm.
"""

import ctypes
import json
import os
import stat
import time

from autograder.sandbox import seccomp, users
from autograder.sandbox.defences import SandboxRefused

VOLATILE = ('/tmp', '/var/tmp', '/dev/shm', '/run/lock', '/run/shm', '/dev/mqueue', '/var/crash')
SKIP_FS = {'proc', 'sysfs', 'cgroup', 'cgroup2', 'devpts', 'securityfs', 'debugfs', 'tracefs', 'bpf', 'fusectl',
           'configfs', 'binfmt_misc', 'pstore', 'hugetlbfs', 'autofs', 'efivarfs', 'nsfs'}
CACHE = '/var/lib/hw1-sandbox/writable.json'
SCAN_SECONDS = 60.0          # a scan that takes longer is cut short (it then lists what it found so far)

_libc = ctypes.CDLL(None, use_errno=True)
_scanned = {}                # (uid, gid) -> places: one scan per process at most


def as_user(uid, gid, fn):
    """
    fn() in a fork running as uid:gid (users.run_as): (the integer it returns, None), or (-1, why it failed:
    the exception it raised, for staff) when it failed.
    """
    r, w = os.pipe()

    def child():
        os.close(r)
        try:
            said = '%d ' % int(fn())
        except BaseException as e:  # noqa: BLE001  said to the parent, which fails closed
            said = '-1 %s: %s' % (type(e).__name__, e)
        os.write(w, said.encode('utf-8', 'replace')[:400])   # within a pipe's buffer: written before the wait
        return 0
    status = users.run_as(uid, gid, child)
    os.close(w)
    with os.fdopen(r, 'rb') as f:
        data = f.read(400).decode('utf-8', 'replace')
    number, _, why = data.partition(' ')
    try:
        return int(number), why or None
    except ValueError:
        ended = 'killed by signal %d' % os.WTERMSIG(status) if os.WIFSIGNALED(status) else \
            'it could not become the user, or said nothing'
        return -1, 'the fork said nothing: %s' % ended


# ----------------------------------------------------------------------------- where the user can write

def _can_create(st, uid, gid):
    mode = st.st_mode
    if st.st_uid == uid:
        return bool(mode & stat.S_IWUSR and mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(mode & stat.S_IWGRP and mode & stat.S_IXGRP)
    return bool(mode & stat.S_IWOTH and mode & stat.S_IXOTH)


def _can_enter(st, uid, gid):
    mode = st.st_mode
    bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
    return bool(mode & bit)


def _mount_points(exclude):
    points = []
    with open('/proc/self/mountinfo') as f:
        for line in f:
            left, _, right = line.partition(' - ')
            point, fstype = left.split()[4], right.split()[0]
            if fstype not in SKIP_FS and not any(point == e or point.startswith(e + '/') for e in exclude):
                points.append(point.encode().decode('unicode_escape'))
    return sorted(set(points))


def scan(uid, gid, exclude=('/var/lib/hw1-sandbox', '/proc', '/sys'), max_seconds=SCAN_SECONDS):
    """Every folder `uid` could create an entry in, walking each mounted file system once (no folder
    the user cannot enter is descended into: what lies below is out of its reach)."""
    found, end = set(), time.time() + max_seconds
    for top in _mount_points(exclude):
        try:
            dev = os.lstat(top).st_dev
        except OSError:
            continue
        todo = [top]
        while todo and time.time() < end:
            path = todo.pop()
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode) or st.st_dev != dev or any(path == e for e in exclude):
                continue
            if _can_create(st, uid, gid):
                found.add(path)
            if not _can_enter(st, uid, gid):
                continue
            try:
                with os.scandir(path) as it:
                    todo += [e.path for e in it if e.is_dir(follow_symlinks=False)]
            except OSError:
                pass
    return sorted(found)


def _boot_id():
    try:
        with open('/proc/sys/kernel/random/boot_id') as f:
            return f.read().strip()
    except OSError:
        return ''


def write_cache(uid, gid, by_setup=False):
    """The scan, kept for later gradings (setup.sh runs this once: `python -m autograder sandbox scan`)."""
    places = scan(uid, gid)
    os.makedirs(os.path.dirname(CACHE), mode=0o711, exist_ok=True)
    tmp = CACHE + '.tmp'
    with open(tmp, 'w') as f:
        json.dump({'boot_id': _boot_id(), 'setup': by_setup, 'uid': uid, 'gid': gid, 'places': places}, f)
    os.chmod(tmp, 0o600)
    os.replace(tmp, CACHE)
    return places


def writable_places(uid, gid):
    """The cached scan (setup.sh's, or this boot's) for any sandbox user, plus the volatile folders now."""
    key = (uid, gid)
    if key not in _scanned:
        places = None
        try:
            with open(CACHE) as f:
                cached = json.load(f)
            if cached.get('setup') or cached.get('boot_id') == _boot_id():
                places = cached['places']
        except (OSError, ValueError, KeyError):
            pass
        if places is None:
            places = write_cache(uid, gid)
        _scanned[key] = places
    extra = [v for v in VOLATILE if os.path.isdir(v)]
    return sorted(set(_scanned[key]) | set(extra))


# ----------------------------------------------------------------------------- removal

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class SweepFailed(SandboxRefused):
    """Something of the sandbox user's could not be removed: the grading must not go on (fail closed)."""


def remove_entry(dir_fd, name, end):
    """
    Remove `name` in the folder `dir_fd` and everything below it, with no recursion and no link followed:
    one folder open at a time (openat with O_NOFOLLOW; back up through its '..', which no link can be),
    a list of the names still to remove per level. Returns (removed, failed, unfinished). Run as the user,
    after every process of it is dead (nothing changes the tree meanwhile).
    """
    removed = failed = 0
    fd, pending, stack = os.dup(dir_fd), [name], []   # stack: (folder name in its parent, the parent's pending)
    try:
        while True:
            if time.time() > end:
                return removed, failed, True
            if pending:
                entry = pending.pop()
                try:
                    st = os.stat(entry, dir_fd=fd, follow_symlinks=False)
                    if not stat.S_ISDIR(st.st_mode):
                        os.unlink(entry, dir_fd=fd)
                        removed += 1
                        continue
                    try:
                        os.rmdir(entry, dir_fd=fd)   # empty: done
                        removed += 1
                        continue
                    except OSError:
                        pass
                    if stat.S_IMODE(st.st_mode) & 0o700 != 0o700:
                        os.chmod(entry, 0o700, dir_fd=fd)   # a 0000 folder of its own would hide its files
                    child = os.open(entry, DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    continue
                except OSError:
                    failed += 1
                    continue
                stack.append((entry, pending))
                os.close(fd)
                fd, pending = child, os.listdir(child)
                continue
            if not stack:
                return removed, failed, False
            entry, pending = stack.pop()
            parent = os.open('..', DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = parent
            try:
                os.rmdir(entry, dir_fd=fd)
                removed += 1
            except OSError:
                failed += 1
    finally:
        os.close(fd)


def remove_user_files(uid, gid, folders=None, max_seconds=60.0):
    """
    Delete every entry owned by `uid` in `folders` (default: writable_places), from a fork that runs
    AS that user (a planted link can only make it delete what the student could). Returns the number
    of entries removed; SweepFailed when one could not be removed, the time ran out, or an entry of
    the user is still there afterwards (checked as root).
    """
    folders = writable_places(uid, gid) if folders is None else folders

    def sweep():
        removed, failed, end = 0, 0, time.time() + max_seconds
        for folder in folders:
            try:
                top = os.open(folder, DIR_FLAGS)
            except OSError:
                continue   # a folder the user cannot open holds nothing it could reach
            try:
                with os.scandir(top) as it:
                    mine = [e.name for e in it if _owner(e) == uid]
                for name in mine:
                    r, f, unfinished = remove_entry(top, name, end)
                    removed, failed = removed + r, failed + f
                    if unfinished:
                        return -1
            finally:
                os.close(top)
        if failed:
            raise OSError('%d entries could not be removed' % failed)
        return removed
    removed, why = as_user(uid, gid, sweep)
    left = owned_in(uid, folders)
    if removed < 0 or left:
        unfinished = 'the sweep could not finish%s' % (': ' + why if why else ' in %g s' % max_seconds)
        raise SweepFailed('the sandbox user\'s files could not all be removed (%s): the next test or grading '
                          'could read them' % (', '.join(left[:5]) if left else unfinished))
    return removed


def _owner(entry):
    """The uid owning a scandir entry, or None when it is gone: another process's file removed between
    the listing and the stat (a grading beside this one sweeping its own user) is no entry of this user's.
    What the sweep leaves is checked afterwards as root (owned_in), whatever this skipped."""
    try:
        return entry.stat(follow_symlinks=False).st_uid
    except FileNotFoundError:
        return None


def owned_in(uid, folders):
    """Entries owned by `uid` directly in `folders` (what a complete sweep leaves: none)."""
    left = []
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                left += [e.path for e in it if _owner(e) == uid]   # a vanished entry: no longer left
        except OSError:
            continue
    return left


KEYCTL_GET_PERSISTENT, KEYCTL_CLEAR = 22, 7
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -2, -4, -5


def clear_keys(uid, gid):
    """Clear the user's kernel keyrings (user, user-session, persistent), as that user. Returns keys left
    (key-users)."""
    nr = (seccomp.numbers() or {}).get('keyctl')
    if nr is None:
        return keys_of(uid)

    def clear():
        def keyctl(*args):   # glibc has no keyctl(): the system call itself (libkeyutils is not needed)
            return _libc.syscall(ctypes.c_long(nr), *args)
        for ring in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
            keyctl(ctypes.c_int(KEYCTL_CLEAR), ctypes.c_long(ring))
        persistent = keyctl(ctypes.c_int(KEYCTL_GET_PERSISTENT), ctypes.c_long(-1),
                            ctypes.c_long(KEY_SPEC_PROCESS_KEYRING))
        if persistent > 0:
            keyctl(ctypes.c_int(KEYCTL_CLEAR), ctypes.c_long(persistent))
        return 0
    as_user(uid, gid, clear)   # its failure shows in the kernel's count of the user's keys, read after it
    return keys_of(uid)


def keys_of(uid):
    """Keys the kernel holds for `uid` besides its own keyrings' shells (/proc/key-users: nkeys), or None."""
    try:
        with open('/proc/key-users') as f:
            for line in f:
                owner, _, rest = line.partition(':')
                if owner.strip() == str(uid):
                    return int(rest.split()[1].split('/')[0])
    except (OSError, ValueError, IndexError):
        return None
    return 0


IPC_RMID = 0


def remove_ipc(uid):
    """Remove every SysV shared memory segment, semaphore set and message queue owned or created by `uid`."""
    removed = 0
    for kind, call in (('shm', lambda i: _libc.shmctl(i, IPC_RMID, None)),
                       ('sem', lambda i: _libc.semctl(i, 0, IPC_RMID)),
                       ('msg', lambda i: _libc.msgctl(i, IPC_RMID, None))):
        try:
            with open('/proc/sysvipc/%s' % kind) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        if not lines:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            row = dict(zip(header, line.split()))
            if str(uid) in (row.get('uid'), row.get('cuid')):
                ident = int(row.get('shmid') or row.get('semid') or row.get('msqid'))
                if call(ctypes.c_int(ident)) == 0:
                    removed += 1
    return removed
