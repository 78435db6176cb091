"""
python -m autograder sandbox check     the defences in force on this machine, proven by the self-test
                                       (a process forked and walled exactly like a probe); exit 1 when
                                       the grading would refuse to run student code
python -m autograder sandbox cleanup   sweep idle sandbox users: processes, files, keys, IPC, scratch
                                       folders and mounts, grading cgroups of dead graders
                                       (run_autograder runs it after its watchdog)
python -m autograder sandbox scan      list the folders the sandbox user could write to (setup.sh runs
                                       it once; without namespaces they are swept after every probe)

The command line lives in autograder/judge/sandbox_commands.py, which reads grading.yaml and hands
its settings in: nothing of the sandbox package reads grading.yaml.
"""

import json
import os
import shutil
import stat
import sys

from autograder.sandbox import cgroups, leftovers, scratch, users, wall


def _mounts_under(path):
    with open('/proc/mounts') as f:
        points = [line.split()[1] for line in f]
    return sorted((p for p in points if p.startswith(path.rstrip('/') + '/')), key=len, reverse=True)


def sweep_user(uid, gid):
    """What a grading killed before its own clean-up (a watchdog's SIGKILL) left for this user. Hold its lock."""
    users.kill_and_confirm(uid)
    removed = leftovers.remove_user_files(uid, gid) + leftovers.remove_ipc(uid)
    leftovers.clear_keys(uid, gid)
    base = scratch.base(True)
    for name in os.listdir(base):
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if name.startswith('hw1-sandbox-') and stat.S_ISDIR(st.st_mode) and st.st_gid == gid:
            for point in _mounts_under(path):
                wall.umount(point)
            shutil.rmtree(path, ignore_errors=True)
            removed += 1
    return removed


def cleanup_stale(sandbox_cfg):
    """Sweep every sandbox user of the pool that no grading holds right now, and dead graders' cgroups."""
    pool, _ = users.sandbox_pool(sandbox_cfg['user'], sandbox_cfg['pool_size'])
    removed = cgroups.sweep_stale() if os.geteuid() == 0 else 0
    for uid, gid in pool or []:
        lock = users.try_lock(uid, blocking=False)
        if lock is None and users.lock_path(uid) is not None:
            continue   # a grading in progress owns this user
        try:
            removed += sweep_user(uid, gid)
        finally:
            if lock is not None:
                os.close(lock)
    return removed


def check(grading):
    """The isolation a grading gets here, self-test included (raises SandboxRefused when it would refuse)."""
    from autograder import TEMPLATE_DIR
    from autograder.sandbox import Sandbox
    with Sandbox(grading.sandbox) as sandbox:
        run = sandbox.run(os.path.join(TEMPLATE_DIR, 'mingpt', 'model.py'), {'profile': grading.profiles['cpu']},
                          [], {}, {}, import_timeout=120)
    return run.isolation


def main(argv, grading):
    """`argv[1]` is the command; `grading` is grading.yaml as config.load reads it (the caller loads it)."""
    from autograder.sandbox.defences import SandboxRefused
    what = argv[1] if len(argv) > 1 else 'check'
    if what == 'cleanup':
        print('sandbox: clean-up removed %d leftovers' % cleanup_stale(grading.sandbox))
        return 0
    if what == 'scan':
        pool, note = users.sandbox_pool(grading.sandbox['user'], grading.sandbox['pool_size'])
        if not pool:
            print('sandbox: no scan (%s)' % note)
            return 0
        places = leftovers.write_cache(*pool[0], by_setup=True)
        print('sandbox: %d folders the sandbox user can write to: %s' % (len(places), ', '.join(places[:20])))
        return 0
    if what == 'check':
        try:
            print(json.dumps(check(grading), indent=2))
        except SandboxRefused as e:
            print('sandbox: student code would NOT run here: %s' % e)
            return 1
        return 0
    print(__doc__)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
