"""
OS-level isolation of the child process: what the kernel can stop before any byte of student
code runs. Defence in depth: the harness already trusts nothing the child writes; this keeps
student code off the network, out of other processes' /proc entries and out of other
gradings' files, and removes what it leaves behind.

Every mechanism is probed once per grading (`probe()`), used where the machine allows it, and
named in results.json's extra_data (`describe()`) so that staff can see what was in force:

- seccomp filter (stdlib ctypes, no package): `socket()` and `io_uring_setup()` fail with EPERM,
  so no network and no AF_UNIX connection to another process's socket. Needs only
  prctl(PR_SET_NO_NEW_PRIVS), allowed in an unprivileged Docker container.
- namespaces (needs CAP_SYS_ADMIN, i.e. root outside a default Docker container): a new network
  namespace (only a loopback that is down), PID namespace with its own /proc (other processes
  are invisible), IPC namespace, and a mount namespace where /tmp, /var/tmp and /dev/shm are the
  grading's own private folder.
- size-limited tmpfs mounts for the child's two writable folders, out/ and home/ (its TMPDIR and,
  with namespaces, its /tmp), so that it can fill neither the disk nor the inode table (needs the
  same capability).
- after each child, every process and every file in /tmp, /var/tmp and /dev/shm of the sandbox
  user is removed, by a helper that runs AS that user (so a planted symlink can only make it
  delete what the student could delete anyway).

The import denylist of autograder/submission.py is NOT a defence (``__import__('socket')``
passes it); it only gives a friendly message for the obvious cases.

Everything here is stdlib only: it runs in the forked child before exec (subprocess preexec_fn).
"""

import ctypes
import errno
import json
import os
import platform
import resource
import signal
import struct
import sys
import tempfile
import time

# ----------------------------------------------------------------------------- libc

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x08000000, 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 0x4000, 1 << 18
MNT_DETACH = 2
PRIVATE_DIRS = ('/tmp', '/var/tmp', '/dev/shm')   # shared writable places a child could plant files in

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, '%s: %s' % (what, os.strerror(e)))


def _bytes(s):
    return None if s is None else os.fsencode(s)


def unshare(flags):
    _check(_libc.unshare(ctypes.c_int(flags)), 'unshare')   # os.unshare exists only from Python 3.12


def mount(source, target, fstype, flags, data=None):
    _check(_libc.mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), _bytes(data)),
           'mount %s' % target)


def umount(target):
    _libc.umount2(_bytes(target), ctypes.c_int(MNT_DETACH))


# ----------------------------------------------------------------------------- seccomp

SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7fff0000, 0x00050000, 0x80000000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K = 0x20, 0x15, 0x35, 0x06
# per architecture: (AUDIT_ARCH value, {syscall: number}) for the syscalls denied
ARCHES = {
    'x86_64': (0xC000003E, {'socket': 41, 'io_uring_setup': 425}),
    'aarch64': (0xC00000B7, {'socket': 198, 'io_uring_setup': 425}),
}
X32_SYSCALL_BIT = 0x40000000   # x86_64's x32 ABI numbers: denied wholesale


class _SockFprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]


def seccomp_program():
    """
    The classic-BPF filter as bytes (struct sock_filter[]), or None on an architecture not in
    ARCHES. A syscall of another ABI (32-bit int 0x80 on x86_64) kills the process: socketcall()
    would otherwise reach sockets. io_uring is denied because IORING_OP_SOCKET makes sockets
    without the socket() syscall.
    """
    arch = ARCHES.get(platform.machine())
    if arch is None:
        return None
    audit_arch, numbers = arch
    denied = sorted(numbers.values())
    # instructions as (code, jt, jf, k); 'DENY' in jt is patched to the offset of the last instruction
    prog = [(BPF_LD_W_ABS, 0, 0, 4),                       # A = seccomp_data.arch
            (BPF_JEQ_K, 1, 0, audit_arch),                 # native ABI: skip the kill
            (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
            (BPF_LD_W_ABS, 0, 0, 0)]                       # A = seccomp_data.nr
    if audit_arch == ARCHES['x86_64'][0]:
        prog.append((BPF_JGE_K, 'DENY', 0, X32_SYSCALL_BIT))
    prog += [(BPF_JEQ_K, 'DENY', 0, nr) for nr in denied]
    prog += [(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW), (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM)]
    deny_at = len(prog) - 1
    out = b''
    for i, (code, jt, jf, k) in enumerate(prog):
        if jt == 'DENY':
            jt = deny_at - i - 1
        out += struct.pack('=HBBI', code, jt, jf, k)
    return out


class Seccomp:
    """A filter prepared in the parent (no allocation to do in the forked child) and installed there."""

    def __init__(self):
        self.program = seccomp_program()
        if self.program is not None:
            self._buf = ctypes.create_string_buffer(self.program, len(self.program))
            self._fprog = _SockFprog(len(self.program) // 8, ctypes.cast(self._buf, ctypes.c_void_p))

    def install(self):
        """In the current process and everything it execs or forks afterwards; cannot be undone."""
        if self.program is None:
            raise OSError(errno.ENOSYS, 'no seccomp filter for the %s architecture' % platform.machine())
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), ctypes.c_ulong(0), ctypes.c_ulong(0),
                           ctypes.c_ulong(0)), 'prctl(PR_SET_NO_NEW_PRIVS)')
        _check(_libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(self._fprog),
                           ctypes.c_ulong(0), ctypes.c_ulong(0)), 'prctl(PR_SET_SECCOMP)')


# ----------------------------------------------------------------------------- namespaces

def _max_fd():
    return min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)


def _relay(pid):
    """
    The process left outside the namespaces: waits for the namespace's first process and ends
    the same way (exit code or signal), so the harness sees the child's own ending.
    """
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def enter_namespaces(private_dir):
    """
    Called as root in the forked child before exec. Returns in the first process of new PID,
    network, IPC and mount namespaces, with a fresh /proc (only this namespace's processes) and
    `private_dir` bound over /tmp, /var/tmp and /dev/shm. The process outside never returns: it
    relays the exit status. When the first process ends, the kernel kills every process left in
    its namespace, so nothing the child started can outlive it.
    """
    unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC)
    pid = os.fork()
    if pid:
        # subprocess waits for its error pipe to close at exec: this process must not hold it open
        os.closerange(3, _max_fd())
        _relay(pid)
    try:
        mount(None, '/', None, MS_REC | MS_PRIVATE)        # nothing below propagates back to the host
        mount('proc', '/proc', 'proc', MS_NOSUID | MS_NODEV | MS_NOEXEC)
        for folder in PRIVATE_DIRS:
            if private_dir and os.path.isdir(folder):
                mount(private_dir, folder, None, MS_BIND | MS_REC)
    except BaseException:
        os._exit(121)   # the probe said this works: end quietly rather than run without isolation


# ----------------------------------------------------------------------------- capability probe

def _probe_child(uid, gid, seccomp):
    """In a fork of the grader: try each mechanism as it would be used. Returns {name: True | reason}."""
    found = {}
    # seccomp, as the sandbox user when there is one: socket() must fail with EPERM
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            if uid is not None:
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
            seccomp.install()
            import socket
            try:
                socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
                code = 2
            except PermissionError:
                code = 0
        except BaseException:
            code = 3
        os._exit(code)
    code = os.waitpid(pid, 0)[1]
    found['seccomp'] = True if code == 0 else ('socket() still works under the filter' if code == 2 << 8
                                               else 'the filter cannot be installed here')
    if uid is None:
        found['namespaces'] = found['tmpfs'] = 'no sandbox user (the grader is not root, or ./setup.sh was not run)'
        return found
    # namespaces: the whole sequence enter_namespaces runs, in a throw-away child
    scratch = tempfile.mkdtemp(prefix='hw1-probe-')
    try:
        pid = os.fork()
        if pid == 0:
            code = 3
            try:
                unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC)
                inner = os.fork()
                if inner == 0:
                    ok = 3
                    try:
                        mount(None, '/', None, MS_REC | MS_PRIVATE)
                        mount('proc', '/proc', 'proc', MS_NOSUID | MS_NODEV | MS_NOEXEC)
                        mount(scratch, '/tmp', None, MS_BIND | MS_REC)
                        ok = 0 if os.getpid() == 1 and os.listdir('/proc/1') else 3
                    except BaseException:
                        ok = 3
                    os._exit(ok)
                code = os.waitstatus_to_exitcode(os.waitpid(inner, 0)[1]) if hasattr(os, 'waitstatus_to_exitcode') \
                    else os.waitpid(inner, 0)[1] >> 8
            except BaseException:
                code = 3
            os._exit(code)
        code = os.waitpid(pid, 0)[1]
        found['namespaces'] = True if code == 0 else 'unshare/mount refused (no CAP_SYS_ADMIN, e.g. a Docker container)'
        # a size-limited tmpfs mounted in the grader's own mount namespace (for the scratch folder)
        try:
            mount('hw1-probe', scratch, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=1m,mode=0700')
            umount(scratch)
            found['tmpfs'] = True
        except OSError as e:
            found['tmpfs'] = 'tmpfs mount refused (%s)' % e.strerror
    finally:
        os.rmdir(scratch)
    return found


def probe(uid=None, gid=None, seccomp=None):
    """{'seccomp'|'namespaces'|'tmpfs': True, or the reason it is not available}. Runs in forks only."""
    seccomp = seccomp or Seccomp()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            found = _probe_child(uid, gid, seccomp)
        except BaseException as e:
            found = {'error': repr(e)}
        os.write(w, json.dumps(found).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, 'rb') as f:
        data = f.read()
    os.waitpid(pid, 0)
    try:
        found = json.loads(data.decode())
    except ValueError:
        found = {}
    return {k: found.get(k, 'probe failed: %s' % found.get('error', 'no answer')) for k in ('seccomp', 'namespaces', 'tmpfs')}


def describe(found, sandboxed):
    """What was in force, in words, for results.json's extra_data and the child log."""
    net = []
    if found.get('seccomp') is True:
        net.append('seccomp: socket() denied')
    if sandboxed and found.get('namespaces') is True:
        net.append('own network namespace')
    ns = sandboxed and found.get('namespaces') is True
    return {
        'network': ' + '.join(net) if net else 'NOT isolated (%s; %s)' % (found.get('seccomp'), found.get('namespaces')),
        'proc': 'own PID namespace and /proc: other processes invisible' if ns
                else 'NOT hidden: /proc shows other processes (%s)' % found.get('namespaces'),
        'tmp': '/tmp, /var/tmp, /dev/shm are the grading\'s private folder' if ns
               else 'shared /tmp, /var/tmp, /dev/shm: files of the sandbox user are deleted after each child',
        'scratch': ('folder on disk, its writable out/ and home/ each a size-limited tmpfs'
                    if sandboxed and found.get('tmpfs') is True else 'private folder on disk')
                   + (', mode 0750 root:<sandbox group>, outputs 0600' if sandboxed else ', mode 0700'),
        'seccomp': found.get('seccomp'), 'namespaces': found.get('namespaces'), 'tmpfs': found.get('tmpfs'),
    }


# ----------------------------------------------------------------------------- clean-up

def remove_user_files(uid, gid, folders=PRIVATE_DIRS, max_entries=500_000, max_seconds=30.0):
    """
    Delete every file and folder owned by `uid` under `folders` (one file system each), from a
    fork that runs AS that user: it can remove only what the student could remove anyway, so
    links planted to steer it elsewhere gain nothing. Returns the number of entries removed.
    """
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        removed = 0
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            seen, end = 0, time.time() + max_seconds
            for top in folders:
                try:
                    dev = os.lstat(top).st_dev
                except OSError:
                    continue
                # first open up the user's own folders (a 0000 folder would hide its files), then delete bottom-up
                for root, dirs, _files in os.walk(top, onerror=lambda e: None):
                    for name in dirs:
                        path = os.path.join(root, name)
                        try:
                            st = os.lstat(path)
                            if st.st_uid == uid and st.st_dev == dev and not os.path.islink(path):
                                os.chmod(path, 0o700)
                        except OSError:
                            pass
                for root, dirs, files in os.walk(top, topdown=False, onerror=lambda e: None):
                    if seen > max_entries or time.time() > end:
                        break
                    for name in files + dirs:
                        seen += 1
                        path = os.path.join(root, name)
                        try:
                            st = os.lstat(path)
                            if st.st_uid != uid or st.st_dev != dev:
                                continue
                            if name in dirs and not os.path.islink(path):
                                os.rmdir(path)
                            else:
                                os.unlink(path)
                            removed += 1
                        except OSError:
                            pass
        except BaseException:
            pass
        os.write(w, str(removed).encode())
        os._exit(0)
    os.close(w)
    with os.fdopen(r, 'rb') as f:
        data = f.read()
    os.waitpid(pid, 0)
    try:
        return int(data or 0)
    except ValueError:
        return 0


def kill_user_processes(uid):
    """Kill every process of the sandbox user, in every namespace, including ones that left the process group."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)  # as that user, -1 reaches exactly its processes
        except BaseException:
            pass
        os._exit(0)
    os.waitpid(pid, 0)


def scratch_base(sandboxed):
    """
    Where scratch folders go: not under /tmp, /var/tmp or /dev/shm, which the child sees as its
    own private folder when namespaces are available.
    """
    if sandboxed:
        base = '/var/lib/hw1-sandbox'
        os.makedirs(base, mode=0o711, exist_ok=True)
        os.chmod(base, 0o711)   # others may traverse to their own scratch, never list
        return base
    return tempfile.gettempdir()


def main(argv):
    """
    python -m autograder.isolation [UID GID]   what this machine allows (as that user)
    python -m autograder.isolation --cleanup   sweep idle sandbox users (run_autograder, after its watchdog)
    """
    if argv[1:2] == ['--cleanup']:
        from autograder import GRADING_YAML, config, sandbox
        print('isolation: clean-up removed %d leftovers' % sandbox.cleanup_stale(config.load(GRADING_YAML).sandbox))
        return 0
    ids = [int(a) for a in argv[1:3]] or [None, None]
    print(json.dumps(probe(*ids), indent=2))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
