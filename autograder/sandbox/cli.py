"""
python -m autograder sandbox check     the defences in force on this machine, proven by the self-test
                                       (a process forked and walled exactly like a probe), each figure
                                       explained, and a last line "sandbox: verdict: ..."; exit 1 when
                                       the grading would refuse to run student code (--json: the raw record)
python -m autograder sandbox cleanup   sweep idle sandbox users: processes, files, keys, IPC, scratch
                                       folders and mounts, grading cgroups of dead graders
                                       (run_autograder runs it after its watchdog)
python -m autograder sandbox scan      list the folders the sandbox user could write to (setup.sh runs
                                       it once; without namespaces they are swept after every probe)

The command line lives in autograder/judge/sandbox_commands.py, which reads grading.yaml and hands
its settings and the self-test's probe job in: nothing of the sandbox package reads grading.yaml or
builds a probe job.
"""

import json
import os
import shutil
import stat

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


def check(settings, job):
    """The isolation a grading gets here, self-test included (SandboxRefused when it would refuse):
    the handout's model.py imported under `settings` (grading.yaml's sandbox section), its import
    check's process reading `job` (the caller's probe job, as the child reads it)."""
    from autograder import TEMPLATE_DIR
    from autograder.sandbox import Sandbox
    with Sandbox(settings) as sandbox:
        with sandbox.grading(os.path.join(TEMPLATE_DIR, 'mingpt', 'model.py')) as session:
            session.import_check(job, 120).finish()
    return session.report.isolation


# what each figure of `check` means, in the order printed (the self-test's probe, like any probe)
FIGURES = {
    'files_removed': 'files the self-test probe left in folders the sandbox user can write to, removed after it '
                     '(0 is expected: the template writes nothing)',
    'ipc_removed': 'SysV shared memory, semaphores and message queues of the sandbox user removed after it '
                   '(0 expected)',
    'keys_left': 'kernel keys the kernel still counts for the sandbox user (/proc/key-users) after its keyrings were '
                 'emptied: the keyrings themselves (user, user-session, persistent: the kernel keeps them per user, '
                 'empty) and the session keyring of the process just ended until the kernel collects it; what a probe '
                 'put in them is gone. A few (up to about 4) is this; more would mean keys the clearing missed',
    'grader_copies': 'copies of the grader found on this machine (checkouts, unpacked zips, fixtures, keys: named by a '
                     'process or in the usual places), each proven unreadable by the self-test probe',
    'copy_scan_ms': 'milliseconds to lock this copy and look for the others (every grading)',
    'copy_scan_entries': 'entries the search listed (the usual places, and /tmp, /var/tmp and /dev/shm to any depth; '
                         'zips others may read are searched by their contents)',
    'landlock_abi': 'the kernel\'s Landlock ABI version (the rights a probe\'s allow-list can name: 2 renames across '
                    'folders, 3 truncation, 5 device ioctls, 6 signals and abstract sockets scoped)',
    'landlock_decoys': 'files open to everyone under /tmp (five folders deep), /var/tmp and /dev/shm that the '
                       'self-test '
                       'probe found it could neither read nor write beside: the Landlock wall, proven',
    'cgroup.memory_mb': 'memory limit of the grading cgroup, MiB (all probes of one grading share it)',
    'cgroup.pids': 'most processes and threads the grading cgroup may hold at once',
    'cgroup.cpu_share': 'CPU weight of the grading against other gradings (equal shares)',
    'cgroup.name': 'the grading cgroup (removed when the grading ends)',
    'zygote.start_seconds': 'seconds the zygote (an interpreter with torch imported, never running student code) took '
                            'to start; once per grading, or per batch worker',
    'zygote.threads': 'threads of the zygote when it forks a probe (1: a fork copies no half-held lock)',
    'zygote.executable': 'the interpreter probes run in',
}


def describe(isolation):
    """The check's lines for a person: each defence, each figure with what it means, then the one-line verdict."""
    lines = ['sandbox: the defences a grading gets on this machine (proven by a self-test probe):']
    for key in ('network', 'proc', 'filesystem', 'tmp', 'processes', 'cpu', 'wall'):
        if key in isolation:
            lines.append('  %-22s %s' % (key, isolation[key]))
    names = ('user', 'seccomp', 'namespaces', 'cgroups', 'tmpfs', 'landlock')
    on = [k for k in names if isolation.get(k) is True]   # a defence not in force holds the reason, a string
    off = [k for k in names if k in isolation and isolation[k] is not True and 'not used' not in str(isolation[k])]
    lines.append('  %-22s %s%s' % ('in force', ', '.join(on) or 'none',
                                   ('; not available: ' + ', '.join(off)) if off else ''))
    test = isolation.get('selftest') or {}
    lines.append('  %-22s %s' % ('self-test',
                                 ', '.join('%s %s' % (k, 'held' if v else 'FAILED') for k, v in test.items())
                                 or 'not run'))
    lines.append('  %-22s %s' % ('python', isolation.get('python')))
    for name, meaning in FIGURES.items():
        group, _, key = name.rpartition('.')
        where = isolation.get(group) if group else isolation
        if isinstance(where, dict) and key in where:
            lines.append('  %-22s %-10s %s' % (name, where[key], meaning))
    lacks = isolation.get('lacks') or []
    failed = [k for k, v in test.items() if not v]
    if failed:
        verdict = 'NOT SAFE: the self-test found %s not holding' % ', '.join(failed)
    elif isolation.get('wall'):   # neither namespaces nor Landlock: said plainly, whatever else holds
        verdict = ('student code runs here, but the file system is NOT walled: safe only on a single-tenant machine '
                   '(lacks: %s)' % ', '.join(lacks))
    elif lacks:
        verdict = ('student code runs here, in a weaker mode (lacks: %s; grading.yaml sandbox.defences allows it)'
                   % ', '.join(lacks))
    else:
        verdict = 'student code runs here with every defence in force'
    lines.append('sandbox: verdict: %s' % verdict)
    return lines, not failed


def main(argv, settings, job):
    """`argv[1]` is the command; `settings`: grading.yaml's sandbox section, `job`: the probe job of
    `check`'s import check (the caller, judge/sandbox_commands.py, reads and builds both)."""
    from autograder.sandbox.defences import SandboxRefused
    what = argv[1] if len(argv) > 1 else 'check'
    if what == 'cleanup':
        print('sandbox: clean-up removed %d leftovers' % cleanup_stale(settings))
        return 0
    if what == 'scan':
        pool, note = users.sandbox_pool(settings['user'], settings['pool_size'])
        if not pool:
            print('sandbox: no scan (%s)' % note)
            return 0
        places = leftovers.write_cache(*pool[0], by_setup=True)
        print('sandbox: %d folders the sandbox user can write to: %s' % (len(places), ', '.join(places[:20])))
        return 0
    if what == 'check':
        try:
            isolation = check(settings, job)
        except SandboxRefused as e:
            print('sandbox: verdict: student code would NOT run here: %s' % e)
            return 1
        if '--json' in argv:
            print(json.dumps(isolation, indent=2))
            return 0
        lines, safe = describe(isolation)
        print('\n'.join(lines))
        return 0 if safe else 1
    print(__doc__)
    return 2

