"""
The sandbox's self-test, run INSIDE a process forked exactly like a probe process (same zygote,
same wall, same user), before any student code of the grading runs. It tries what an attack
would try, with raw system calls through ctypes (no module import can make a check pass or
fail: the interpreter's location, modules already imported and test order change nothing),
and sends {check: true | "what went wrong"} to the harness over the link. The harness compares
it with the defences it expects (autograder/sandbox/defences.py) and fails closed.

Standard library and ctypes only; imports nothing of `autograder`.
"""

import ctypes
import errno
import json
import os
import platform
import resource

from . import socket_link

_libc = ctypes.CDLL(None, use_errno=True)
# the calls tried, by number (the native ABI's), so that no wrapper or module stands in between
NR = {
    'x86_64': dict(socket=41, ptrace=101, mount=165, unshare=272, clone=56, clone3=435, keyctl=250, add_key=248,
                   io_uring_setup=425, bpf=321, perf_event_open=298, userfaultfd=323, shmget=29, msgget=68,
                   semget=64, mq_open=240, process_vm_readv=310, setns=308, pivot_root=155),
    'aarch64': dict(socket=198, ptrace=117, mount=40, unshare=97, clone=220, clone3=435, keyctl=219, add_key=217,
                    io_uring_setup=425, bpf=280, perf_event_open=241, userfaultfd=282, shmget=194, msgget=186,
                    semget=190, mq_open=180, process_vm_readv=270, setns=268, pivot_root=41),
}
CLONE_NEWUSER, SIGCHLD, IPC_CREAT, IPC_PRIVATE = 0x10000000, 17, 0o1000, 0


def _call(nr, *args):
    """(return value, errno) of a raw system call; a call that succeeds in a child ends that child at once."""
    ctypes.set_errno(0)
    ret = _libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return ret, ctypes.get_errno()


def _status_field(name):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(name + ':'):
                return line.split(':', 1)[1].strip()
    return ''


def check_seccomp():
    nr = NR.get(platform.machine())
    if nr is None:
        return 'no system call table for %s' % platform.machine()
    if _status_field('Seccomp') != '2' or _status_field('NoNewPrivs') != '1':
        return 'no seccomp filter in force (Seccomp: %s, NoNewPrivs: %s)' % (
            _status_field('Seccomp'), _status_field('NoNewPrivs'))
    name = b'hw1-selftest\0'
    tries = {
        'socket(AF_INET)': (nr['socket'], 2, 1, 0), 'socket(AF_INET6)': (nr['socket'], 10, 1, 0),
        'socket(AF_UNIX)': (nr['socket'], 1, 1, 0), 'socket(AF_NETLINK)': (nr['socket'], 16, 3, 0),
        'keyctl': (nr['keyctl'], 0, -4, 1), 'add_key': (nr['add_key'], b'user\0', name, b'x', 1, -4),
        'io_uring_setup': (nr['io_uring_setup'], 1, 0), 'bpf': (nr['bpf'], 0, 0, 0),
        'perf_event_open': (nr['perf_event_open'], 0, 0, -1, -1, 0), 'userfaultfd': (nr['userfaultfd'], 0),
        'ptrace(TRACEME)': (nr['ptrace'], 0, 0, 0, 0), 'process_vm_readv': (nr['process_vm_readv'], 1, 0, 0, 0, 0, 0),
        'unshare(CLONE_NEWUSER)': (nr['unshare'], CLONE_NEWUSER), 'setns': (nr['setns'], 0, 0),
        'mount': (nr['mount'], b'none\0', b'/\0', b'tmpfs\0', 0, 0), 'pivot_root': (nr['pivot_root'], b'/\0', b'/\0'),
        'shmget': (nr['shmget'], IPC_PRIVATE, 4096, IPC_CREAT | 0o600),
        'msgget': (nr['msgget'], IPC_PRIVATE, IPC_CREAT | 0o600),
        'semget': (nr['semget'], IPC_PRIVATE, 1, IPC_CREAT | 0o600),
        'mq_open': (nr['mq_open'], name, os.O_CREAT | os.O_RDWR, 0o600, 0),
        'clone(CLONE_NEWUSER)': (nr['clone'], CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0),
    }
    failed = []
    for what, (number, *args) in tries.items():
        ret, err = _call(number, *args)
        if ret == 0 and what.startswith('clone'):
            os._exit(0)   # the clone succeeded and this is its child
        if ret >= 0 or err != errno.EPERM:
            failed.append('%s returned %d (errno %d)' % (what, ret, err))
    ret, err = _call(nr['clone3'], 0, 0)
    if ret >= 0 or err != errno.ENOSYS:
        failed.append('clone3 returned %d (errno %d), not ENOSYS' % (ret, err))
    return True if not failed else 'not denied: ' + '; '.join(failed)


def check_user(uid, gid):
    if os.getresuid() != (uid,) * 3 or os.getresgid() != (gid,) * 3 or os.getgroups():
        return 'runs as uid %s gid %s groups %s, expected %d:%d' % (os.getresuid(), os.getresgid(), os.getgroups(),
                                                                    uid, gid)
    try:
        os.setuid(0)
        return 'setuid(0) succeeded'
    except OSError:
        return True


def check_namespaces():
    if os.getpid() != 1:
        return 'not the first process of its own PID namespace (pid %d)' % os.getpid()
    others = [p for p in os.listdir('/proc') if p.isdigit() and p != '1']
    if others:
        return '/proc shows other processes: %s' % ' '.join(sorted(others)[:10])
    with open('/proc/net/dev') as f:
        interfaces = [line.split(':')[0].strip() for line in f.readlines()[2:]]
    if interfaces != ['lo']:
        return 'network interfaces visible: %s' % ', '.join(interfaces)
    return True


def _refused(path):
    """True when `path` can be neither listed nor read (missing counts as refused)."""
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, 'rb') as f:
                f.read(1)
        return False
    except OSError:
        return True


def _writable(folder):
    probe = os.path.join(folder, '.hw1-selftest-%d' % os.getpid())
    try:
        fd = os.open(probe, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return False
    os.close(fd)
    os.unlink(probe)
    return True


def check_filesystem(hidden, writable, readonly):
    problems = ['%s is readable' % p for p in hidden if not _refused(p)]
    problems += ['%s is not writable' % p for p in writable if not _writable(p)]
    problems += ['%s is writable' % p for p in readonly if os.path.isdir(p) and _writable(p)]
    return True if not problems else '; '.join(problems)


def check_rlimits(expected):
    wrong = []
    for name, value in expected.items():
        soft, hard = value if isinstance(value, list) else (value, value)
        got = resource.getrlimit(getattr(resource, 'RLIMIT_' + name))
        if got != (soft, hard):
            wrong.append('%s is %s, expected %s' % (name, got, (soft, hard)))
    return True if not wrong else '; '.join(wrong)


def main(expect):
    found = {}
    for name, fn in (('user', lambda: check_user(expect['uid'], expect['gid']) if expect.get('uid') is not None
                      else True),
                     ('seccomp', check_seccomp if expect.get('seccomp') else lambda: True),
                     ('namespaces', check_namespaces if expect.get('namespaces') else lambda: True),
                     ('filesystem', lambda: check_filesystem(expect.get('hidden', ()), expect.get('writable', ()),
                                                             expect.get('readonly', ()))),
                     ('rlimits', lambda: check_rlimits(expect.get('rlimits', {})))):
        try:
            found[name] = fn()
        except BaseException as e:   # a check that cannot run is a failed check
            found[name] = 'the check failed: %s: %s' % (type(e).__name__, str(e)[:300])
    socket_link.ask(b'selftest ' + json.dumps(found).encode())
    return 0
