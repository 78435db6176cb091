"""
The seccomp filter every probe process installs just before the probe runs (wall.py installs
the bytes built here): a deny-list at least as wide as Docker's default profile, plus socket().

- socket(): no network, and no AF_UNIX connection to another process's socket. The harness
  link is a socketpair made by the harness and inherited: plain read/write on it still work.
- execve/execveat: no other program runs (subprocess, os.system, a re-exec'd interpreter), so the
  public tests' "on the grader it cannot run other programs" holds in both modes. A probe never
  needs one: it is a fork of the zygote, and torch's CPU ops start no program (torch.compile's C++
  build would, and is refused). Forks and threads still work: they run the same walled code.
- Docker's default profile denies (or, for root-only calls, the kernel refuses): kernel keyrings
  (add_key, keyctl, request_key), ptrace and process_vm_readv/writev, bpf, perf_event_open,
  userfaultfd, mount and the new mount API, pivot_root, chroot, unshare/setns and clone with a
  namespace flag, kexec, kernel modules, reboot, swap, clocks, acct, quotactl, open_by_handle_at,
  syslog, personality-free ABI tricks.
- Ours besides: io_uring (IORING_OP_SOCKET makes sockets without socket()), SysV IPC and POSIX
  message queue creation (objects that outlive a process: nothing then needs cleaning), kcmp,
  pidfd_getfd, process_madvise.
- clone3 answers ENOSYS (its flags are in memory the filter cannot read): glibc falls back to
  clone, whose flags the filter checks, as Docker does.
- Another ABI on the same machine (32-bit int 0x80 or x32 on x86_64) kills the process: it
  would reach socketcall() and every number above by other numbers.

Denied calls fail with EPERM, so student code sees an ordinary error. An architecture missing
from SYSCALLS gets no filter, and the sandbox's self-test then fails closed (defences.py).
"""

import errno
import platform
import struct

SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7fff0000, 0x00050000, 0x80000000
BPF_LD_W_ABS, BPF_JEQ_K, BPF_JGE_K, BPF_RET_K, BPF_AND_K = 0x20, 0x15, 0x35, 0x06, 0x54
X32_SYSCALL_BIT = 0x40000000
# clone() flags that make a namespace (CLONE_NEWTIME's bit is the exit signal in clone()'s first argument)
CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16   # struct seccomp_data (little-endian: arg0's low word first)

DENIED = ('socket', 'execve', 'execveat', 'io_uring_setup', 'io_uring_enter', 'io_uring_register',
          'add_key', 'request_key', 'keyctl',
          'ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd', 'process_madvise', 'kcmp',
          'bpf', 'perf_event_open', 'userfaultfd', 'fanotify_init', 'lookup_dcookie', 'syslog',
          'mount', 'umount2', 'pivot_root', 'chroot', 'open_tree', 'move_mount', 'fsopen', 'fsconfig', 'fsmount',
          'fspick', 'mount_setattr', 'unshare', 'setns',
          'kexec_load', 'kexec_file_load', 'init_module', 'finit_module', 'delete_module',
          'reboot', 'swapon', 'swapoff', 'acct', 'settimeofday', 'clock_settime', 'adjtimex', 'clock_adjtime',
          'sethostname', 'setdomainname', 'quotactl', 'quotactl_fd', 'open_by_handle_at', 'vhangup',
          'shmget', 'semget', 'msgget', 'mq_open',
          # x86_64 only (absent elsewhere): port I/O, obsolete calls
          'iopl', 'ioperm', 'uselib', 'ustat', 'sysfs', '_sysctl', 'nfsservctl', 'create_module',
          'get_kernel_syms', 'query_module')

# per architecture: (AUDIT_ARCH value, {name: number}); from the kernel's unistd headers
SYSCALLS = {
    'x86_64': (0xC000003E, dict(
        shmget=29, socket=41, clone=56, execve=59, semget=64, msgget=68, ptrace=101, syslog=103, uselib=134, ustat=136,
        sysfs=139, vhangup=153, pivot_root=155, _sysctl=156, adjtimex=159, chroot=161, acct=163,
        settimeofday=164, mount=165, umount2=166, swapon=167, swapoff=168, reboot=169, sethostname=170,
        setdomainname=171, iopl=172, ioperm=173, create_module=174, init_module=175, delete_module=176,
        get_kernel_syms=177, query_module=178, quotactl=179, nfsservctl=180, lookup_dcookie=212,
        clock_settime=227, mq_open=240, kexec_load=246, add_key=248, request_key=249, keyctl=250, unshare=272,
        perf_event_open=298, fanotify_init=300, open_by_handle_at=304, clock_adjtime=305, setns=308,
        process_vm_readv=310, process_vm_writev=311, kcmp=312, finit_module=313, kexec_file_load=320, bpf=321,
        execveat=322, userfaultfd=323, io_uring_setup=425, io_uring_enter=426, io_uring_register=427, open_tree=428,
        move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433, clone3=435, pidfd_getfd=438,
        process_madvise=440, mount_setattr=442, quotactl_fd=443)),
    'aarch64': (0xC00000B7, dict(
        lookup_dcookie=18, umount2=39, mount=40, pivot_root=41, chroot=51, vhangup=58, quotactl=60, acct=89,
        unshare=97, kexec_load=104, init_module=105, delete_module=106, clock_settime=112, syslog=116,
        ptrace=117, reboot=142, sethostname=161, setdomainname=162, settimeofday=170, adjtimex=171, mq_open=180,
        msgget=186, semget=190, shmget=194, socket=198, add_key=217, request_key=218, keyctl=219, clone=220,
        execve=221, swapon=224, swapoff=225, perf_event_open=241, fanotify_init=262, open_by_handle_at=265,
        clock_adjtime=266, setns=268, process_vm_readv=270, process_vm_writev=271, kcmp=272, finit_module=273,
        bpf=280, execveat=281, userfaultfd=282, kexec_file_load=294, io_uring_setup=425, io_uring_enter=426,
        io_uring_register=427, open_tree=428, move_mount=429, fsopen=430, fsconfig=431, fsmount=432, fspick=433,
        clone3=435, pidfd_getfd=438, process_madvise=440, mount_setattr=442, quotactl_fd=443)),
}


def numbers(machine=None):
    """{syscall name: number} of this machine's native ABI, or None where no filter is defined."""
    arch = SYSCALLS.get(machine or platform.machine())
    return None if arch is None else dict(arch[1])


def program(machine=None):
    """The classic-BPF filter as bytes (struct sock_filter[]), or None on an architecture not in SYSCALLS."""
    machine = machine or platform.machine()
    if machine not in SYSCALLS:
        return None
    audit_arch, nrs = SYSCALLS[machine]
    denied = sorted({nrs[name] for name in DENIED if name in nrs})
    # (code, jt, jf, k); a jump target given as a label is resolved below
    prog = [(BPF_LD_W_ABS, 0, 0, OFFSET_ARCH),
            (BPF_JEQ_K, 1, 0, audit_arch),
            (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),     # another ABI: killed
            (BPF_LD_W_ABS, 0, 0, OFFSET_NR)]
    if machine == 'x86_64':
        prog.append((BPF_JGE_K, 'kill', 0, X32_SYSCALL_BIT))   # x32 numbers share the x86_64 arch value
    prog += [(BPF_JEQ_K, 'deny', 0, nr) for nr in denied]
    prog += [(BPF_JEQ_K, 'clone', 0, nrs['clone']),
             (BPF_JEQ_K, 'enosys', 0, nrs['clone3']),
             (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW)]
    labels = {'clone': len(prog)}
    prog += [(BPF_LD_W_ABS, 0, 0, OFFSET_ARG0),
             (BPF_AND_K, 0, 0, CLONE_NS_FLAGS),
             (BPF_JEQ_K, 'allow', 'deny', 0)]
    labels['allow'] = len(prog)
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW))
    labels['deny'] = len(prog)
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.EPERM))
    labels['enosys'] = len(prog)
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | errno.ENOSYS))
    labels['kill'] = len(prog)
    prog.append((BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS))
    out = b''
    for i, (code, jt, jf, k) in enumerate(prog):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256, 'a BPF jump does not fit in 8 bits'
        out += struct.pack('=HBBI', code, jt, jf, k)
    return out
