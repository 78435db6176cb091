"""
The pool of sandbox users: which unprivileged user a grading runs student code as, the lock
that keeps two concurrent gradings off the same user, and what is removed after each child
(every process and every file of that user in the shared temporary folders). sandbox.py runs
the child; this module only says who it runs as and cleans up after it.
"""

import fcntl
import os
import pwd
import shutil
import stat
import sys
import tempfile


from autograder import GRADING_YAML, isolation


def _pool_size():
    from autograder import config
    return config.load(GRADING_YAML).sandbox['pool_size']


def child_python(uid, gid, python_copy):
    """
    (interpreter the sandbox user can run, extra environment) or (None, reason). The grader's
    own interpreter when the user can reach it and torch (Gradescope: /usr/bin/python3);
    otherwise the copy setup.sh makes at sandbox.python_copy (an interpreter under /root,
    e.g. pyenv, is never opened up to other users).
    """
    import importlib.util
    torch_dir = os.path.dirname(importlib.util.find_spec('torch').origin)
    exe = os.path.realpath(sys.executable)
    if _user_can_access(uid, gid, [(exe, os.X_OK), (torch_dir, os.R_OK)]):
        return exe, {}
    prefix = os.path.realpath(sys.prefix)
    if python_copy and exe.startswith(prefix + os.sep) and torch_dir.startswith(prefix + os.sep):
        copy_exe = os.path.join(python_copy, os.path.relpath(exe, prefix))
        copy_torch = os.path.join(python_copy, os.path.relpath(torch_dir, prefix))
        if _user_can_access(uid, gid, [(copy_exe, os.X_OK), (copy_torch, os.R_OK)]):
            # the copy's binary may carry an absolute RUNPATH into the original prefix
            return copy_exe, {'LD_LIBRARY_PATH': os.path.join(python_copy, 'lib')}
    return None, ('the sandbox user cannot run %s or read torch, and there is no usable copy at %s '
                  '(./setup.sh makes it)' % (exe, python_copy))


def _sandbox_user(name, pool_size=None, python_copy=None):
    """
    ([(uid, gid), ...] of the pool, None) or (None, the reason): not root, no such user (run
    setup.sh), or the user cannot reach a Python installation. The pool is `name`, name1, ...
    up to sandbox.pool_size of grading.yaml (setup.sh creates the same users from it).
    """
    if os.geteuid() != 0:
        return None, 'the grader is not running as root, so student code runs as the same user'
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None, 'user %r does not exist (./setup.sh creates it); student code runs as root' % name
    if python_copy is not None and child_python(pw.pw_uid, pw.pw_gid, python_copy)[0] is None:
        return None, child_python(pw.pw_uid, pw.pw_gid, python_copy)[1] + '; student code runs as root'
    pool = [(pw.pw_uid, pw.pw_gid)]
    for i in range(1, pool_size or _pool_size()):
        try:
            extra = pwd.getpwnam('%s%d' % (name, i))
        except KeyError:
            break
        if extra.pw_gid in [g for _, g in pool] or extra.pw_gid == 0:
            break   # the scratch folder is opened to the user's own group: it must be theirs alone
        pool.append((extra.pw_uid, extra.pw_gid))
    return pool, None


def _user_can_access(uid, gid, checks):
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os._exit(0 if all(os.access(p, mode) for p, mode in checks) else 1)
        except BaseException:
            os._exit(1)
    return os.waitpid(pid, 0)[1] == 0


def protect_source(paths):
    """Make the grader's own files unreadable to the sandbox user (root keeps access)."""
    for path in paths:
        if os.path.exists(path):
            os.chmod(path, 0o700)


def _lock_path(uid):
    for folder in ('/run', tempfile.gettempdir()):
        if os.access(folder, os.W_OK):
            return os.path.join(folder, 'hw1-sandbox-uid%d.lock' % uid)
    return None


def _try_lock(uid, blocking):
    """
    An exclusive lock per sandbox user, held for a whole run: after each child every process of
    that user is killed, so two gradings must never share a user at the same time.
    """
    path = _lock_path(uid)
    if path is None:
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def _claim_user(users):
    """The first free (uid, gid) of the pool and its lock; waits for the first one if all are busy."""
    for user in users:
        fd = _try_lock(user[0], blocking=False)
        if fd is not None:
            return user, fd
    return users[0], _try_lock(users[0][0], blocking=True)


def _kill_user_processes(uid):
    isolation.kill_user_processes(uid)


def _sweep(uid, gid):
    """
    What a grading killed before its own clean-up (the watchdog's SIGKILL) left for this user:
    processes, files in the shared temp folders, a scratch folder and its tmpfs mount. Call it
    only while holding the user's lock.
    """
    _kill_user_processes(uid)
    removed = isolation.remove_user_files(uid, gid)
    base = isolation.scratch_base(True)
    for name in os.listdir(base):
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if name.startswith('hw1-sandbox-') and stat.S_ISDIR(st.st_mode) and st.st_gid == gid:
            for sub in ('out', 'home'):
                isolation.umount(os.path.join(path, 'job', sub))
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def cleanup_stale(sandbox_cfg):
    """Sweep every sandbox user of the pool that no grading holds right now (run_autograder after its watchdog)."""
    pool, _ = _sandbox_user(sandbox_cfg['user'], sandbox_cfg['pool_size'])
    removed = 0
    for uid, gid in pool or []:
        lock = _try_lock(uid, blocking=False)
        if lock is None and _lock_path(uid) is not None:
            continue   # a grading in progress owns this user
        try:
            removed += _sweep(uid, gid)
        finally:
            if lock is not None:
                os.close(lock)
    return removed
