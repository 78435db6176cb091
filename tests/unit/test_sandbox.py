"""
The pieces of autograder/sandbox/ on their own, in forks of the test process (seconds, no
grading): the seccomp program (decisions checked by a small BPF interpreter, then the filter
installed for real), the clean-up of files, keys and IPC objects as the sandbox user, the
cgroup of a grading, the kill that confirms, and the choice of defences (fail closed).
"""

import ctypes
import errno
import os
import pwd
import socket
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from grader_runs import SANDBOX_USER, SANDBOXED
from autograder.sandbox import cgroups, defences, leftovers, seccomp, users, wall, zygote_handle

needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox user (./setup.sh)')
libc = ctypes.CDLL(None, use_errno=True)


def in_fork(fn):
    """Run fn() in a child process; returns its exit code (0 = fn returned True)."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def as_user(pw):
    os.setgroups([])
    os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
    os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)


# ----------------------------------------------------------------------------- seccomp, as BPF

def run_bpf(program, arch, nr, arg0=0):
    """The filter's answer for one system call: a classic-BPF interpreter of the opcodes seccomp.py uses."""
    insns = [struct.unpack('=HBBI', program[i:i + 8]) for i in range(0, len(program), 8)]
    data = struct.pack('<iIQ6Q', nr, arch, 0, arg0 & (2 ** 64 - 1), 0, 0, 0, 0, 0)
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == seccomp.BPF_LD_W_ABS:
            acc = struct.unpack_from('<I', data, k)[0]
        elif code == seccomp.BPF_AND_K:
            acc &= k
        elif code == seccomp.BPF_JEQ_K:
            pc += jt if acc == k else jf
        elif code == seccomp.BPF_JGE_K:
            pc += jt if acc >= k else jf
        elif code == seccomp.BPF_RET_K:
            return k
        else:
            raise AssertionError('unknown opcode %#x' % code)
        pc += 1


@pytest.mark.parametrize('machine', sorted(seccomp.SYSCALLS))
def test_filter_decisions(machine):
    program = seccomp.program(machine)
    arch, nrs = seccomp.SYSCALLS[machine]
    eperm, enosys = seccomp.SECCOMP_RET_ERRNO | errno.EPERM, seccomp.SECCOMP_RET_ERRNO | errno.ENOSYS
    for name in seccomp.DENIED:
        if name in nrs:
            assert run_bpf(program, arch, nrs[name]) == eperm, name
    # what a probe needs: read/write/mmap (0..9 on x86_64, 63/64/222 on aarch64), threads and fork via clone
    for nr in ((0, 1, 9, 57, 231) if machine == 'x86_64' else (63, 64, 222, 93, 94)):
        assert run_bpf(program, arch, nr) == seccomp.SECCOMP_RET_ALLOW, nr
    thread_flags = 0x3d0f00    # CLONE_VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|PARENT_SETTID|CHILD_CLEARTID
    assert run_bpf(program, arch, nrs['clone'], thread_flags) == seccomp.SECCOMP_RET_ALLOW
    assert run_bpf(program, arch, nrs['clone'], 17) == seccomp.SECCOMP_RET_ALLOW          # fork(): SIGCHLD only
    for flag in (0x10000000, 0x20000000, 0x40000000, 0x00020000, 0x08000000, 0x04000000, 0x02000000):
        assert run_bpf(program, arch, nrs['clone'], 17 | flag) == eperm, hex(flag)        # any namespace flag
    assert run_bpf(program, arch, nrs['clone3']) == enosys                               # glibc falls back to clone
    assert run_bpf(program, 0x40000003, 102) == seccomp.SECCOMP_RET_KILL_PROCESS          # i386 socketcall()
    if machine == 'x86_64':
        assert run_bpf(program, arch, 0x40000000 | 41) == seccomp.SECCOMP_RET_KILL_PROCESS  # x32 socket()


def test_filter_installed_denies_and_allows_what_a_probe_needs():
    program = seccomp.program()
    if program is None:
        pytest.skip('no filter for this architecture')

    def attempt():
        wall.install_seccomp(program)
        for family in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
            try:
                socket.socket(family, socket.SOCK_STREAM).close()
                return False
            except PermissionError:
                pass
        if libc.syscall(seccomp.numbers()['keyctl'], 0, -4, 1) != -1 or ctypes.get_errno() != errno.EPERM:
            return False
        if libc.syscall(seccomp.numbers()['clone3'], 0, 0) != -1 or ctypes.get_errno() != errno.ENOSYS:
            return False
        try:   # no other program runs (issue 41: the public tests say so; `id` ran at import in both modes)
            subprocess.run(['id'], capture_output=True)
            return False
        except PermissionError:
            pass
        r, w = os.pipe()      # files, pipes, processes, threads still work
        os.write(w, b'x')
        with tempfile.TemporaryFile() as f:
            f.write(b'ok')
        import threading
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        return os.read(r, 1) == b'x' and os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7

    assert in_fork(attempt) == 0
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()   # the filter stayed in the fork


def test_the_zygote_interpreter_hashes_strings_with_the_fixed_seed():
    """Issue 41: the zygote ran with -I, which ignores PYTHONHASHSEED: a set in a student's AssertionError read
    differently at every grading. Its probes are its forks, so the seed must hold from the interpreter's start."""
    code = 'import sys; print(hash("hw1"), sys.flags.hash_randomization, repr({"q", "k", "v", "out"}))'
    runs = {subprocess.run([sys.executable, *zygote_handle.FLAGS, '-c', code], env=zygote_handle.ENV,
                           capture_output=True, text=True, check=True).stdout for _ in range(3)}
    assert len(runs) == 1 and runs.pop().split()[1] == '0', runs


# ----------------------------------------------------------------------------- defences: fail closed

ALL = {'user': True, 'seccomp': True, 'namespaces': True, 'cgroups': True, 'landlock': True}
GRADESCOPE = dict(ALL, namespaces='no CAP_SYS_ADMIN', cgroups='read-only /sys/fs/cgroup')
LEVELS = {'user': 'required', 'seccomp': 'required', 'namespaces': 'if_available', 'cgroups': 'if_available',
          'landlock': 'if_available'}


def test_a_required_defence_the_machine_lacks_refuses(monkeypatch):
    monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)
    with pytest.raises(defences.SandboxRefused, match='requires the seccomp defence'):
        defences.plan(LEVELS, dict(ALL, seccomp='no seccomp filter is defined for sparc'))
    with pytest.raises(defences.SandboxRefused, match='requires the namespaces defence'):
        defences.plan(dict(LEVELS, namespaces='required'), GRADESCOPE)


def test_the_weaker_mode_is_stated(monkeypatch):
    monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)
    plan = defences.plan(LEVELS, GRADESCOPE)
    assert plan['namespaces'] == (False, 'no CAP_SYS_ADMIN') and plan['seccomp'] == (True, 'in force')
    text = defences.describe(plan)
    assert text['lacks'] == ['namespaces: no CAP_SYS_ADMIN', 'cgroups: read-only /sys/fs/cgroup']
    assert text['network'] == 'seccomp: socket() denied' and text['proc'].startswith('NOT hidden')
    off = defences.plan(dict(LEVELS, cgroups='off'), ALL)
    assert off['cgroups'] == (False, 'off in grading.yaml (sandbox.defences.cgroups)')


def test_sandbox_check_lists_a_defence_that_is_not_in_force_as_not_available(monkeypatch):
    """`sandbox check`'s line of defences: one whose isolation entry is the reason it is off is not "in force"."""
    from autograder.sandbox import cli
    monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)
    isolation = dict(defences.describe(defences.plan(LEVELS, GRADESCOPE)), selftest={'user': True})
    line = next(l for l in cli.describe(isolation)[0] if l.strip().startswith('in force'))
    walled = isolation.get('landlock') is True   # Gradescope's mode walls with Landlock where the kernel has it
    assert line.split(None, 2)[2] == 'user, seccomp%s; not available: namespaces, cgroups, tmpfs' % (
        ', landlock' if walled else ''), line


def test_the_environment_never_turns_off_a_required_defence(monkeypatch):
    monkeypatch.setenv('HW1_SANDBOX_DISABLE', 'namespaces,tmpfs')
    assert defences.plan(LEVELS, ALL)['namespaces'] == (False, 'turned off by HW1_SANDBOX_DISABLE')
    monkeypatch.setenv('HW1_SANDBOX_DISABLE', 'seccomp')
    with pytest.raises(defences.SandboxRefused, match='which grading.yaml requires'):
        defences.plan(LEVELS, ALL)
    monkeypatch.setenv('HW1_SANDBOX_DISABLE', 'everything')
    with pytest.raises(defences.SandboxRefused, match='HW1_SANDBOX_DISABLE names everything'):
        defences.plan(LEVELS, ALL)


# ----------------------------------------------------------------------------- leftovers, as the user

@needs_sandbox
def test_remove_user_files_as_that_user():
    pw, lock = claimed_user()   # a grading running beside this test kills every process of its user
    top = tempfile.mkdtemp(prefix='hw1-sandbox-test-')
    os.chmod(top, 0o1777)
    try:
        root_file = os.path.join(top, 'root-owned')
        with open(root_file, 'w') as f:
            f.write('keep')
        outside = tempfile.NamedTemporaryFile(delete=False)   # root's, elsewhere: a link must not reach it

        def plant():
            as_user(pw)
            os.makedirs(os.path.join(top, 'd', 'e'))
            for i in range(50):
                open(os.path.join(top, 'd', 'e', str(i)), 'w').close()
            os.symlink(outside.name, os.path.join(top, 'link'))
            os.symlink('/', os.path.join(top, 'd', 'root-link'))
            os.chmod(os.path.join(top, 'd', 'e'), 0)
            os.chmod(os.path.join(top, 'd'), 0)
            return True

        assert in_fork(plant) == 0
        removed = leftovers.remove_user_files(pw.pw_uid, pw.pw_gid, folders=(top,))
        assert removed == 50 + 2 + 2   # the files, two folders, two links
        assert sorted(os.listdir(top)) == ['root-owned']
        assert os.path.exists(outside.name) and os.path.exists(root_file)
    finally:
        os.unlink(outside.name)
        os.unlink(root_file)
        os.rmdir(top)
        os.close(lock)


@needs_sandbox
def test_the_sweep_removes_a_tree_of_any_depth_without_recursion():
    """A 1,500-deep folder (and a FIFO, a unix socket, a 0000 folder at the bottom): removed with no
    recursion; before, RecursionError stopped the whole sweep and was swallowed."""
    pw, lock = claimed_user()   # a grading running beside this test kills every process of its user
    top = tempfile.mkdtemp(prefix='hw1-sandbox-test-')
    os.chmod(top, 0o1777)
    try:
        def plant():
            as_user(pw)
            fd = os.open(top, os.O_RDONLY)
            for _ in range(1500):
                os.mkdir('d', dir_fd=fd)
                child = os.open('d', os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = child
            os.mkfifo('fifo', dir_fd=fd)
            os.fchdir(fd)
            s = socket.socket(socket.AF_UNIX)
            s.bind('sock')
            os.mkdir('locked')
            os.chmod('locked', 0)
            return True

        assert in_fork(plant) == 0
        assert leftovers.remove_user_files(pw.pw_uid, pw.pw_gid, folders=(top,)) == 1500 + 3
        assert os.listdir(top) == []
    finally:
        subprocess_rm(top)
        os.close(lock)


@needs_sandbox
def test_a_sweep_that_cannot_finish_fails_closed():
    pw, lock = claimed_user()
    top = tempfile.mkdtemp(prefix='hw1-sandbox-test-')
    os.chmod(top, 0o1777)
    try:
        def plant():
            as_user(pw)
            os.mkdir(os.path.join(top, 'mine'))
            return True
        assert in_fork(plant) == 0
        os.chown(top, 0, 0)
        os.chmod(top, 0o755)   # the user can no longer remove its folder: the sweep must say so, not go on
        with pytest.raises(leftovers.SweepFailed, match='could not all be removed'):
            leftovers.remove_user_files(pw.pw_uid, pw.pw_gid, folders=(top,))
        assert issubclass(leftovers.SweepFailed, defences.SandboxRefused)   # the grading stops, fail closed
    finally:
        subprocess_rm(top)
        os.close(lock)


@needs_sandbox
def test_a_sweep_that_fails_says_why_to_staff():
    # before: only "the sweep could not finish", whatever had failed in the fork
    pw, lock = claimed_user()
    try:
        assert leftovers.as_user(pw.pw_uid, pw.pw_gid, lambda: 7) == (7, None)
        assert leftovers.as_user(pw.pw_uid, pw.pw_gid, lambda: 1 / 0) == (-1, 'ZeroDivisionError: division by zero')
    finally:
        os.close(lock)


def claimed_user():
    """A pool user no grading holds, and its lock (held by the caller until it closes it)."""
    pool, _ = users.sandbox_pool(SANDBOX_USER, 4)
    uid, lock = users.claim(pool)
    return pwd.getpwuid(uid[0]), lock


def subprocess_rm(path):
    subprocess.run(['rm', '-rf', path], check=True)


@needs_sandbox
def test_writable_places_cover_the_shared_folders():
    pw, lock = claimed_user()   # without setup.sh's scan, the scan runs as the user
    try:
        places = leftovers.writable_places(pw.pw_uid, pw.pw_gid)
    finally:
        os.close(lock)
    for folder in ('/tmp', '/var/tmp', '/dev/shm', '/run/lock'):
        if os.path.isdir(folder):
            assert folder in places
    assert not any(p.startswith('/var/lib/hw1-sandbox') or p.startswith('/proc') for p in places)


@needs_sandbox
def test_kernel_keys_and_sysv_ipc_of_the_user_are_removed():
    pw, lock = claimed_user()   # a grading beside this test clears its user's keys and IPC after every probe
    try:
        _keys_and_ipc_are_removed(pw)
    finally:
        os.close(lock)


def _keys_and_ipc_are_removed(pw):
    nr = seccomp.numbers()

    def plant():   # no filter here: what a set-up without seccomp would let through
        as_user(pw)
        key = libc.syscall(nr['add_key'], b'user\0', b'hw1-test-key\0', b'secret', 6, -4)   # the user keyring
        shm = libc.shmget(0, 4096, 0o1000 | 0o600)
        return key > 0 and shm >= 0

    assert in_fork(plant) == 0
    assert leftovers.keys_of(pw.pw_uid) >= 1
    assert leftovers.remove_ipc(pw.pw_uid) >= 1
    with open('/proc/sysvipc/shm') as f:
        assert not [l for l in f.read().splitlines()[1:] if l.split()[7] == str(pw.pw_uid)]
    leftovers.clear_keys(pw.pw_uid, pw.pw_gid)

    def search():
        as_user(pw)
        return libc.syscall(nr['request_key'], b'user\0', b'hw1-test-key\0', None, 0) == -1
    assert in_fork(search) == 0, 'the key outlived clear_keys'


# ----------------------------------------------------------------------------- processes and cgroups

@needs_sandbox
def test_processes_of_a_user_that_changed_uid_without_exec_are_found_and_killed():
    pw, lock = claimed_user()   # no grading kills its processes meanwhile, nor has any of its own
    try:
        pid = os.fork()
        if pid == 0:
            as_user(pw)   # /proc/<pid> stays root's (not dumpable): the owner of the folder says nothing
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
            time.sleep(60)
            os._exit(0)
        time.sleep(0.3)
        found = users.processes_of(pw.pw_uid)
        assert pid in found and len(found) >= 2
        users.kill_and_confirm(pw.pw_uid)
        assert users.processes_of(pw.pw_uid) == []
        os.waitpid(pid, 0)
    finally:
        os.close(lock)


def _burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


@pytest.mark.skipif(os.geteuid() != 0 or cgroups.available() is not True, reason='no writable cgroup hierarchy')
def test_a_grading_cgroup_counts_cpu_kills_and_goes():
    cg = cgroups.Cgroup(memory_mb=256, pids=32)
    try:
        pid = os.fork()
        if pid == 0:
            for procs in cg.procs_files():
                with open(procs, 'w') as f:
                    f.write('0')
            if os.fork() == 0:   # a grandchild that leaves the session: still in the cgroup, and counted
                os.setsid()
                _burn(0.5)
                time.sleep(60)
                os._exit(0)
            _burn(0.5)
            time.sleep(60)
            os._exit(0)
        end = time.time() + 60
        while cg.cpu_seconds() < 1.0 and time.time() < end:   # both burn 0.5 s of CPU, however busy the machine
            time.sleep(0.05)
        assert cg.contains(pid) and len(cg.pids()) == 2
        assert 1.0 <= cg.cpu_seconds() < 1.5
        cg.kill()
        os.waitpid(pid, 0)
        for _ in range(100):
            if not cg.pids():
                break
            time.sleep(0.02)
        assert cg.pids() == set()
        assert cg.oom_kills() in (0, None)
    finally:
        cg.kill()   # nothing of the test may outlive it, whatever failed
        cg.remove()
    assert not any(os.path.exists(d) for d in cg.dirs.values())


def test_an_access_check_killed_by_a_grading_beside_it_is_asked_again(monkeypatch):
    """users.user_can_access forks a process of a pool user without its lock; a grading holding that user may
    kill it (SIGKILL between probes). A kill is asked again, never read as "no"; a real "no" stays one."""
    statuses = []
    monkeypatch.setattr(os, 'fork', lambda: 4242)   # the parent's side only: no process is made
    monkeypatch.setattr(os, 'waitpid', lambda pid, flags: (pid, statuses.pop(0)))
    statuses[:] = [9, 9, 0]                          # killed by SIGKILL twice, then the answer: yes
    assert users.user_can_access(1, 1, [('/', os.R_OK)]) and statuses == []
    statuses[:] = [9, 1 << 8]                        # killed, then exit status 1: no
    assert not users.user_can_access(1, 1, [('/', os.R_OK)]) and statuses == []
    statuses[:] = [9, 9, 9]                          # killed every time: no answer, so no
    assert not users.user_can_access(1, 1, [('/', os.R_OK)]) and statuses == []
