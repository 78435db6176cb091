"""
The OS wall between the student's code (autograder/child/, run in a probe process) and the
judge (the rest of autograder/). Standard library and ctypes only; nothing here imports torch or
student code, and nothing of autograder/child/ imports this package.

    grading.py    Sandbox.run: one grading, one fresh process per probe, plain data back
    settings.py   Settings: the sandbox's typed settings, given by the caller (never read from grading.yaml here)
    zygote.py     the harness's side of the zygote (child/zygote.py is the other): forks probe processes
    wall.py       what a probe process does to itself before the probe runs (namespaces, allow-listed
                  root, limits, user, seccomp); loaded by path into the zygote
    probe.py      one probe process watched to its end, never waited on: the link (non-blocking, the probe's
                  own pid only), CPU deadline, idle and wall caps, the stack dump before the kill, how it ended
    seccomp.py    the seccomp filter (BPF), Docker's default deny-list and more
    defences.py   which defences are in force (grading.yaml sandbox.defences), fail closed
    cgroups.py    one cgroup per grading: CPU time, equal share, memory and task limits, OOM, kill
    users.py      the pool of sandbox users, their locks, kill-and-confirm, CPU of every process they ever had
    leftovers.py  files in every writable folder (iterative, fd-relative, fail closed), kernel keys, SysV IPC
    scratch.py    the grading's folders and the file system a probe sees
    readback.py   reading a probe's outputs: bounded bytes read once, parsed from the copy with caps
    cli.py        python -m autograder sandbox: the self-test, the clean-up, the writable-folder scan

Order within the package (no circle): wall, seccomp, cgroups, readback, users, settings <- defences
<- leftovers, zygote, scratch <- probe <- grading <- cli.
"""

import contextlib
import fcntl
import json
import os
import stat

from autograder.sandbox.grading import GradingStopped, RunResult, Sandbox  # noqa: F401
from autograder.sandbox.defences import SandboxRefused  # noqa: F401
from autograder.sandbox.readback import ProbeResult  # noqa: F401
from autograder.sandbox.settings import Settings  # noqa: F401
from autograder.sandbox.users import claim as _claim_user  # noqa: F401  (tests and the batch engine)
from autograder.sandbox.users import lock_path as _lock_path  # noqa: F401
from autograder.sandbox.users import sandbox_pool as _sandbox_user  # noqa: F401
from autograder.sandbox.users import try_lock as _try_lock  # noqa: F401
from autograder.sandbox.users import user_can_access as _user_can_access  # noqa: F401
from autograder.sandbox.zygote import Zygote  # noqa: F401


LOCKDOWN_STATE = '/run/hw1-autograder-lockdown'   # root-only: which paths gradings hold locked, their modes before


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _update_lockdown(change):
    """Run change(held) on the registry {realpath: {'mode': before, 'holders': [pid]}} under its lock; save it."""
    os.makedirs(LOCKDOWN_STATE, mode=0o700, exist_ok=True)
    os.chmod(LOCKDOWN_STATE, 0o700)
    state = os.path.join(LOCKDOWN_STATE, 'held.json')
    with open(os.path.join(LOCKDOWN_STATE, 'lock'), 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(state) as f:
                held = json.load(f)
        except (OSError, ValueError):
            held = {}
        for path, entry in list(held.items()):   # a grading killed before its release: its hold ends now
            entry['holders'] = [p for p in entry['holders'] if _alive(p)]
        change(held)
        for path, entry in list(held.items()):
            if not entry['holders']:
                if os.path.exists(path):
                    os.chmod(path, entry['mode'])
                del held[path]
        with open(state + '.tmp', 'w') as f:
            json.dump(held, f)
        os.replace(state + '.tmp', state)


@contextlib.contextmanager
def protect_source(paths):
    """
    For the block's duration, make the grader's own files unreadable to the sandbox user (mode 0700;
    root keeps access), then give each path back the mode it had. Gradings running at once (a
    batch's workers, two `grade` commands) share the hold: a path is locked while any of them runs,
    and given back its earlier mode when the last one ends (or, after a grader was killed, when the
    next grading or `python -m autograder sandbox cleanup` finds no holder alive).
    """
    me = os.getpid()
    paths = sorted({os.path.realpath(p) for p in paths if os.path.exists(p)})

    def hold(held):
        for path in paths:
            entry = held.setdefault(path, {'mode': stat.S_IMODE(os.stat(path).st_mode), 'holders': []})
            entry['holders'].append(me)
            os.chmod(path, 0o700)

    def release(held):
        for path in paths:
            if path in held and me in held[path]['holders']:
                held[path]['holders'].remove(me)

    _update_lockdown(hold)
    try:
        yield paths
    finally:
        _update_lockdown(release)


def release_stale_lockdowns():
    """Give back their modes to paths whose gradings are all gone (the sandbox clean-up calls it)."""
    if os.path.isdir(LOCKDOWN_STATE):
        _update_lockdown(lambda held: None)
