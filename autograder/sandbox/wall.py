"""
The wall itself: what a probe process does to itself between the zygote's fork and the first
line of the probe, in this order (each step needs the privilege the next one gives up):

  1. its descriptors: stdin /dev/null, stdout/stderr the probe's log, fd 3 the harness link;
     every other descriptor (the zygote's control socket above all) is closed;
  2. a session of its own; joins the grading's cgroup; oom_score_adj 1000;
  3. with namespaces: new mount, network, IPC and UTS namespaces (the PID namespace was made
     by the zygote's fork: this process is its pid 1) and an allow-listed root (build_root):
     read-only binds of the interpreter, the system libraries and the probe's own scratch,
     writable out/ and home/ (= /tmp), a fresh /proc, a few devices; pivot_root into it;
  4. resource limits; the sandbox user (setgroups, setresgid, setresuid);
     parent-death signal; without namespaces, where the kernel offers it, Landlock (restrict_landlock:
     the probe may open only the allow-list the spec names, the same paths the allow-listed root
     would hold); no_new_privs and the seccomp filter (seccomp.py), last, so that nothing it denies
     is needed by the steps before it.

Standard library and ctypes only, and it imports nothing of `autograder`: the zygote loads this
file by its path before it forks (autograder/sandbox/zygote_handle.py), and the harness imports it for
the same few system calls (mount, umount, capabilities).
"""

import ctypes
import errno
import fcntl
import os
import platform
import resource
import signal

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = \
    0x00020000, 0x04000000, 0x08000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = \
    1, 2, 4, 8, 32, 4096, 0x4000, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_SET_CHILD_SUBREAPER = 1, 38, 22, 36
SECCOMP_MODE_FILTER = 2
SYS_PIVOT_ROOT = {'x86_64': 155, 'aarch64': 41}
LINK_FD = 3                  # the harness link's number in every probe process (job.json says so too)
WALL_FAILED = 121            # exit code of a probe process whose wall could not be built
READY, FAILED = b'\x00hw1-wall-up', b'\x00hw1-wall-failed '   # first frame on the link, before any probe code
CAP_SYS_ADMIN = 21
# Landlock (linux/landlock.h): system call numbers are the same on every architecture (the generic table)
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION, LANDLOCK_RULE_PATH_BENEATH = 1, 1
# file-system rights, by the ABI version that introduced them
FS_EXECUTE, FS_WRITE_FILE, FS_READ_FILE, FS_READ_DIR, FS_REMOVE_DIR, FS_REMOVE_FILE, FS_MAKE_CHAR, FS_MAKE_DIR, \
    FS_MAKE_REG, FS_MAKE_SOCK, FS_MAKE_FIFO, FS_MAKE_BLOCK, FS_MAKE_SYM = (1 << i for i in range(13))
FS_REFER, FS_TRUNCATE, FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15     # ABI 2, 3, 5
FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
NET_BIND_TCP, NET_CONNECT_TCP = 1, 2                                    # ABI 4: handled, never allowed
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2                         # ABI 6: no signal or abstract socket out
O_PATH = 0o10000000

_libc = ctypes.CDLL(None, use_errno=True)


class _SockFprog(ctypes.Structure):
    _fields_ = [('len', ctypes.c_ushort), ('filter', ctypes.c_void_p)]


def _check(ret, what):
    if ret != 0:
        e = ctypes.get_errno()
        raise OSError(e, '%s: %s' % (what, os.strerror(e)))


def _b(s):
    return None if s is None else os.fsencode(s)


def unshare(flags):
    _check(_libc.unshare(ctypes.c_int(flags)), 'unshare')   # os.unshare exists only from Python 3.12


def setns(fd, nstype):
    _check(_libc.setns(ctypes.c_int(fd), ctypes.c_int(nstype)), 'setns')


def mount(source, target, fstype, flags, data=None):
    _check(_libc.mount(_b(source), _b(target), _b(fstype), ctypes.c_ulong(flags), _b(data)), 'mount %s' % target)


def umount(target):
    """Detach a mount (lazy: busy files stay readable to whoever holds them); no error when nothing is mounted."""
    _libc.umount2(_b(target), ctypes.c_int(MNT_DETACH))


def prctl(option, arg2=0):
    _check(_libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0),
                       ctypes.c_ulong(0)), 'prctl(%d)' % option)


def has_cap_sys_admin():
    """CAP_SYS_ADMIN in this process's effective set: namespaces, mounts and pivot_root are then the machine's to
    give."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('CapEff:'):
                    return bool(int(line.split()[1], 16) >> CAP_SYS_ADMIN & 1)
    except (OSError, ValueError):
        pass
    return False


class _RulesetAttr(ctypes.Structure):
    _fields_ = [('handled_access_fs', ctypes.c_uint64), ('handled_access_net', ctypes.c_uint64),
                ('scoped', ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1   # __attribute__((packed)) in linux/landlock.h: 12 bytes
    _fields_ = [('allowed_access', ctypes.c_uint64), ('parent_fd', ctypes.c_int32)]


def landlock_abi():
    """The kernel's Landlock ABI version (1, 2, ...), or -errno: ENOSYS (no Landlock in the kernel, or a seccomp
    profile that answers ENOSYS), EOPNOTSUPP (built in, off at boot: lsm=), EPERM (a container's seccomp profile)."""
    ret = _libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                        ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))
    return ret if ret >= 0 else -ctypes.get_errno()


def landlock_rights(abi):
    """(every file-system right this ABI handles, read-only rights, writable-folder rights, device rights)."""
    handled = FS_BY_ABI[min(abi, 5)]
    read = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR
    # a writable folder: everything but executing, device nodes (root-only anyway), and rights this ABI lacks
    write = handled & ~(FS_EXECUTE | FS_MAKE_CHAR | FS_MAKE_BLOCK)
    device = handled & (FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
    return handled, read, write, device


def restrict_landlock(rules):
    """
    Landlock this process (and everything it ever starts) to `rules`: {'read': [paths], 'write': [folders],
    'devices': [files]}; no other path can be opened, listed, created or removed, and from ABI 6 no signal or
    abstract socket reaches a process outside it. A path this process cannot open is skipped (it grants nothing). Raises
    OSError when the kernel refuses any step: the caller's wall then fails, closed. Returns the ABI used.
    """
    abi = landlock_abi()
    if abi < 1:
        raise OSError(-abi, 'Landlock: %s' % os.strerror(-abi))
    handled, read, write, device = landlock_rights(abi)
    attr = _RulesetAttr(handled, (NET_BIND_TCP | NET_CONNECT_TCP) if abi >= 4 else 0,
                        (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24   # what this ABI's struct holds: an older kernel reads no more
    ruleset = _libc.syscall(ctypes.c_long(SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        e = ctypes.get_errno()
        raise OSError(e, 'landlock_create_ruleset: %s' % os.strerror(e))
    try:
        for key, rights in (('read', read), ('write', write), ('devices', device)):
            for path in rules.get(key, ()):
                try:
                    fd = os.open(path, O_PATH | os.O_CLOEXEC)
                except OSError:
                    continue   # missing, or out of this user's reach: a rule for it would grant nothing
                try:
                    allowed = rights
                    if not os.path.isdir(path):   # a file's rule may name only a file's rights
                        allowed &= FS_EXECUTE | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV
                    rule = _PathBeneathAttr(allowed, fd)
                    _check(_libc.syscall(ctypes.c_long(SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                         ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                                         ctypes.c_uint32(0)), 'landlock_add_rule %s' % path)
                finally:
                    os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)   # restrict_self needs it (or CAP_SYS_ADMIN, which Gradescope lacks)
        _check(_libc.syscall(ctypes.c_long(SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               'landlock_restrict_self')
    finally:
        os.close(ruleset)
    return abi


def mount_tmpfs(path, size_mb, inodes):
    mount('hw1-sandbox', path, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=%dm,nr_inodes=%d,mode=0700' % (size_mb, inodes))


# ----------------------------------------------------------------------------- the zygote's fork

def fork(namespaces, pidns_fd):
    """
    os.fork(), the child in a new PID namespace (its pid 1) when `namespaces`: unshare(CLONE_NEWPID)
    sets the namespace of the zygote's next child only, and setns puts the zygote's back at once.
    """
    if not namespaces:
        return os.fork()
    unshare(CLONE_NEWPID)
    try:
        pid = os.fork()
    except BaseException:
        setns(pidns_fd, CLONE_NEWPID)
        raise
    if pid:
        setns(pidns_fd, CLONE_NEWPID)
    return pid


# ----------------------------------------------------------------------------- the new root

def _bind(source, target, writable):
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY, 0o644))
    mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (MS_NOEXEC | MS_NODEV if writable else MS_RDONLY)
    if not source.startswith('/dev/'):
        flags |= MS_NODEV
    mount(None, target, None, flags)


def build_root(root):
    """
    The allow-listed file system, built in a fresh mount namespace on the empty folder root['dir']:
    a 1 MB tmpfs holding only what root names, read-only but for root['rw'], then pivot_root into it.
    """
    new = root['dir']
    mount(None, '/', None, MS_REC | MS_PRIVATE)           # nothing below propagates back to the host
    mount('hw1-root', new, 'tmpfs', MS_NOSUID | MS_NODEV, 'size=1m,nr_inodes=4096,mode=0755')
    for inside, text in root.get('files', {}).items():     # generated: /etc/passwd with two users, ...
        path = new + inside
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text)
    for inside, target in root.get('symlinks', {}).items():   # /bin -> usr/bin where the host has it so
        os.makedirs(os.path.dirname(new + inside), exist_ok=True)
        os.symlink(target, new + inside)
    for source, inside in root['ro']:
        _bind(source, new + inside, writable=False)
    os.makedirs(new + '/dev', exist_ok=True)
    mount('hw1-dev', new + '/dev', 'tmpfs', MS_NOSUID | MS_NOEXEC, 'size=64k,nr_inodes=64,mode=0755')
    for name in root.get('devices', ()):
        _bind('/dev/' + name, new + '/dev/' + name, writable=False)
    for name, target in (('fd', '/proc/self/fd'), ('stdin', '/proc/self/fd/0'), ('stdout', '/proc/self/fd/1'),
                         ('stderr', '/proc/self/fd/2'), ('shm', '/tmp')):
        os.symlink(target, new + '/dev/' + name)
    mount(None, new + '/dev', None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NOEXEC)
    for source, inside in root['rw']:
        _bind(source, new + inside, writable=True)
    os.makedirs(new + '/proc', exist_ok=True)
    mount('proc', new + '/proc', 'proc', MS_NOSUID | MS_NODEV | MS_NOEXEC)   # this PID namespace's processes only
    os.makedirs(new + '/.old')
    _check(_libc.syscall(ctypes.c_long(SYS_PIVOT_ROOT[platform.machine()]), _b(new), _b(new + '/.old')),
           'pivot_root')
    os.chdir('/')
    _check(_libc.umount2(b'/.old', ctypes.c_int(MNT_DETACH)), 'umount the old root')
    os.rmdir('/.old')
    mount(None, '/', None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


# ----------------------------------------------------------------------------- the whole wall

def _descriptors(log_fd, link_fd):
    devnull = os.open('/dev/null', os.O_RDWR)
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (devnull, log_fd, log_fd, link_fd)]
    for target, fd in enumerate(high):
        os.dup2(fd, target)
    os.closerange(LINK_FD + 1, max(max(high) + 1, min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 1 << 16)))


def install_seccomp(program):
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    _check(_libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog),
                       ctypes.c_ulong(0), ctypes.c_ulong(0)), 'prctl(PR_SET_SECCOMP)')


def enter(spec, log_fd, link_fd, state):
    """
    Build the wall around this (freshly forked, still root) process as `spec` says; raises when a
    step fails. state['fds'] says whether the link is already descriptor LINK_FD.
    """
    _descriptors(log_fd, link_fd)
    state['fds'] = True
    os.setsid()
    for procs in spec.get('cgroup_procs', ()):
        with open(procs, 'w') as f:
            f.write('0')   # this process; everything it starts stays in the grading's cgroup
    try:
        with open('/proc/self/oom_score_adj', 'w') as f:
            f.write('1000')   # under memory pressure the kernel kills a probe, never the grader first
    except OSError:
        pass
    if spec.get('namespaces'):
        if os.getpid() != 1:
            raise OSError(errno.EPERM, 'the probe process is not the first of a new PID namespace')
        unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)
        build_root(spec['root'])
    os.chdir(spec['cwd'])
    for name, value in spec.get('rlimits', {}).items():
        soft, hard = value if isinstance(value, list) else (value, value)
        resource.setrlimit(getattr(resource, 'RLIMIT_' + name), (soft, hard))
    os.umask(0o077)   # after the root is built: what the probe writes, anywhere, is its own user's (and root's) only
    if spec.get('uid') is not None:
        os.setgroups([])
        os.setresgid(spec['gid'], spec['gid'], spec['gid'])
        os.setresuid(spec['uid'], spec['uid'], spec['uid'])
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # cleared by setresuid: set after it; the zygote's death ends the probe
    if spec.get('landlock'):   # before seccomp: the filter denies none of Landlock's calls, but the order needs none
        restrict_landlock(spec['landlock'])
    if spec.get('seccomp'):
        install_seccomp(bytes.fromhex(spec['seccomp']))
