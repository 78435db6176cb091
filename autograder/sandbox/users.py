"""
The pool of sandbox users: which unprivileged user a grading runs student code as, the lock
that keeps two concurrent gradings off the same user, and the kill that ends every process of
that user between probes (confirmed: nothing of a probe is alive when its outputs are read).

The lock files are `flock`s on /run/hw1-sandbox-uid<uid>.lock held for a whole grading: every
grading on the machine, whatever version of the grader, takes the same ones.
"""

import fcntl
import os
import pwd
import signal
import sys
import tempfile
import time

PROC = '/proc'


class StillRunning(RuntimeError):
    """Processes of the sandbox user survived every kill: the grading stops (fail closed)."""


def run_as(uid, gid, fn):
    """fn() in a fork running as uid:gid (no supplementary groups): the fork's wait status. What fn returns is the
    fork's exit code; an exception (the change of user's included) exits 1."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            code = int(fn())
        except BaseException:
            pass
        os._exit(code)
    return os.waitpid(pid, 0)[1]


def user_can_access(uid, gid, checks, tries=3):
    """
    Whether `uid` (no supplementary groups) passes os.access for every (path, mode) of `checks`, tried in a fork.
    The fork is a process of that user without its lock (it lives milliseconds): a grading that holds the user
    may kill it between two probes. Killed by a signal, it is asked again, so that a kill is never read as "no".
    """
    for _ in range(tries):
        status = run_as(uid, gid, lambda: 0 if all(os.access(p, mode) for p, mode in checks) else 1)
        if not os.WIFSIGNALED(status):
            return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    return False


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
    if user_can_access(uid, gid, [(exe, os.X_OK), (torch_dir, os.R_OK)]):
        return exe, {}
    exe_prefix, torch_prefix = installation_prefix(exe), installation_prefix(torch_dir)
    if python_copy and exe_prefix and torch_prefix:
        copy_exe = os.path.join(python_copy, os.path.relpath(exe, exe_prefix))
        copy_torch = os.path.join(python_copy, os.path.relpath(torch_dir, torch_prefix))
        if user_can_access(uid, gid, [(copy_exe, os.X_OK), (copy_torch, os.R_OK)]):
            # the copy's binary may carry an absolute RUNPATH into the original prefix
            return copy_exe, {'LD_LIBRARY_PATH': os.path.join(python_copy, 'lib')}
    return None, ('the sandbox user cannot run %s or read torch, and there is no usable copy at %s '
                  '(./setup.sh makes it)' % (exe, python_copy))


def installation_prefix(path):
    """
    The installation `path` lies in, mapped to the root of setup.sh's copy: sys.base_prefix for the
    interpreter and for torch of a venv made with --system-site-packages (the hw1-autograder command's),
    sys.prefix for torch installed in a venv (setup.sh merges that venv's site-packages into the copy of
    its base). The innermost wins (pyenv-virtualenv keeps venvs inside the base). None: in neither.
    """
    inside = [p for p in {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
              if path.startswith(p + os.sep)]
    return max(inside, key=len) if inside else None


def sandbox_pool(name, size, python_copy=None):
    """
    ([(uid, gid), ...] of the pool, None) or (None, the reason): not root, no such user (run
    setup.sh), or the user cannot reach a Python installation. The pool is `name`, name1, ...
    up to `size` users (grading.yaml's sandbox.pool_size, given by the caller; setup.sh creates the
    same users from it).
    """
    if os.geteuid() != 0:
        return None, 'the grader is not running as root, so it cannot run student code as another user'
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return None, 'user %r does not exist (./setup.sh creates it)' % name
    if python_copy is not None and child_python(pw.pw_uid, pw.pw_gid, python_copy)[0] is None:
        return None, child_python(pw.pw_uid, pw.pw_gid, python_copy)[1]
    pool = [(pw.pw_uid, pw.pw_gid)]
    for i in range(1, size):
        try:
            extra = pwd.getpwnam('%s%d' % (name, i))
        except KeyError:
            break
        if extra.pw_gid in [g for _, g in pool] or extra.pw_gid == 0:
            break   # the scratch folder is opened to the user's own group: it must be theirs alone
        pool.append((extra.pw_uid, extra.pw_gid))
    return pool, None


# ----------------------------------------------------------------------------- locks

def lock_path(uid):
    for folder in ('/run', tempfile.gettempdir()):
        if os.access(folder, os.W_OK):
            return os.path.join(folder, 'hw1-sandbox-uid%d.lock' % uid)
    return None


def try_lock(uid, blocking):
    """
    An exclusive lock per sandbox user, held for a whole grading: between probes every process of
    that user is killed, so two gradings must never share a user at the same time.
    """
    path = lock_path(uid)
    if path is None:
        return None
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def claim(users):
    """The first free (uid, gid) of the pool and its lock; waits for the first one if all are busy."""
    for user in users:
        fd = try_lock(user[0], blocking=False)
        if fd is not None:
            return user, fd
    return users[0], try_lock(users[0][0], blocking=True)


# ----------------------------------------------------------------------------- processes

def _field(status, name):
    """The words of one line of a /proc status file (bytes) after `name` (b'Uid:'), or [] when it has none."""
    at = status.find(b'\n' + name)
    if at < 0:
        return []
    end = status.find(b'\n', at + 1)
    return status[at + 1 + len(name):end if end >= 0 else len(status)].split()


def _ids(pid):
    """(real, effective, saved uids, state) of a process, or None when it is gone. Read as bytes and searched,
    not split into lines: the harness scans /proc after every probe process (half its CPU went to that)."""
    try:
        with open('%s/%s/status' % (PROC, pid), 'rb') as f:
            status = f.read()
    except OSError:
        return None
    uids = tuple(int(x) for x in _field(status, b'Uid:')[:3])
    state = _field(status, b'State:')
    return uids, state[0].decode() if state else ''


def processes_of(uid, zombies=False):
    """pids of the live (and, with `zombies`, the zombie) processes whose real, effective or saved uid is `uid`.
    Probe processes changed user without exec, so /proc/<pid> belongs to root: the status file is read."""
    out = []
    gone = ('X',) if zombies else ('Z', 'X')
    for entry in os.listdir(PROC):
        if entry.isdigit():
            ids = _ids(entry)
            if ids and uid in ids[0] and ids[1] not in gone:
                out.append(int(entry))
    return out


def _stat(pid):
    """(ppid, start time, own CPU ticks utime+stime, reaped children's cutime+cstime) from /proc/<pid>/stat."""
    try:
        with open('%s/%d/stat' % (PROC, pid)) as f:
            fields = f.read().rpartition(')')[2].split()
        return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])
    except (OSError, ValueError, IndexError):
        return None


class CpuMeter:
    """
    The CPU time of every process a probe ever had, without a cgroup: each sample reads every process of
    the user, zombies included (a zombie keeps its times until it is reaped), and keeps per process the
    most seen of its own time and of its reaped children's. A process that vanished was reaped: by its
    parent, when that is one of the user's (its time is now in the parent's children's time, counted
    there), else by the zygote, which reports its exact total (`reaped`, from wait4's rusage). What a
    child did between the last sample and its end is in its parent's children's time or the zygote's
    report: nothing is lost, and nothing is counted twice.
    """

    def __init__(self, uid):
        self.uid = uid
        self.ticks = os.sysconf('SC_CLK_TCK')
        self.seen = {}     # pid -> [ppid, start, own ticks, children ticks]
        self.counted = 0.0   # seconds of processes that are gone and were not reaped by one of the user's
        self.orphans = {}    # pid -> seconds sampled of a process gone that way (the zygote's report replaces it)

    def sample(self):
        alive = {}
        for pid in processes_of(self.uid, zombies=True):
            st = _stat(pid)
            if st is not None:
                alive[pid] = st
        for pid, (ppid, start, own, kids) in alive.items():
            old = self.seen.get(pid)
            if old is None or old[1] != start:
                if old is not None:
                    self._gone(pid, alive)
                self.seen[pid] = [ppid, start, own, kids]
            else:
                old[0], old[2], old[3] = ppid, max(old[2], own), max(old[3], kids)
        for pid in [p for p in self.seen if p not in alive]:
            self._gone(pid, alive)
        return self.seconds()

    def _gone(self, pid, alive):
        ppid, _, own, kids = self.seen.pop(pid)
        if ppid not in alive:   # not reaped by one of the user's: the zygote's report (reaped) replaces this
            self.counted += (own + kids) / self.ticks
            self.orphans[pid] = (own + kids) / self.ticks

    def reaped(self, pid, seconds):
        """The zygote reaped `pid` (an orphan of the probe): its exact total replaces what was sampled of it."""
        sampled = self.orphans.pop(pid, None)
        if pid in self.seen:
            sampled = sum(self.seen.pop(pid)[2:]) / self.ticks
        self.counted += max(0.0, seconds - (sampled or 0.0))

    def seconds(self):
        return self.counted + sum(own + kids for _, _, own, kids in self.seen.values()) / self.ticks


def kill_as(uid):
    """kill(-1, SIGKILL) as `uid`: exactly that user's processes, in every PID namespace, whatever their group."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        except BaseException:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def wait_reaped(uid, timeout=10.0):
    """After kill_and_confirm: until no zombie of `uid` is left (the zygote, their subreaper, reaps them), so
    that every exit report of them is sent before the next process starts. StillRunning past `timeout`."""
    end = time.time() + timeout
    while processes_of(uid, zombies=True):
        if time.time() > end:
            raise StillRunning('zombies of the sandbox user were not reaped: %s'
                               % ', '.join(str(p) for p in processes_of(uid, zombies=True)[:10]))
        time.sleep(0.005)


def kill_and_confirm(uid, cgroup=None, timeout=10.0):
    """
    Kill every process of `uid` and of the grading's cgroup, and return once none is alive;
    StillRunning when some still are after `timeout` seconds (a fork bomb racing the kill is
    bounded by RLIMIT_NPROC and pids.max, so this does not happen by design).
    """
    end = time.time() + timeout

    def alive():
        left = set(processes_of(uid)) if uid is not None else set()
        if cgroup is not None:
            left |= {p for p in cgroup.pids() if (_ids(p) or ((), 'X'))[1] not in ('Z', 'X')}
        return left
    if not alive():   # the usual case (a PID namespace ends with its first process): nothing to kill
        return
    while True:
        if cgroup is not None:
            cgroup.kill()
        if uid is not None:
            kill_as(uid)
        left = alive()
        if not left:
            return
        if time.time() > end:
            raise StillRunning('processes of the sandbox user survived every kill: %s'
                               % ', '.join(str(p) for p in sorted(left)[:10]))
        time.sleep(0.01)
