"""
autograder/isolation.py on its own, in forks of the test process (seconds, no grading): the
seccomp filter denies sockets and nothing else a probe needs, and the clean-up removes exactly
the sandbox user's files, never through a planted link.
"""

import os
import pwd
import socket
import tempfile

import pytest

from ag_helpers import SANDBOX_USER, SANDBOXED
from autograder import isolation


def in_fork(fn):
    """Run fn() in a child process; returns its exit code (0 = fn returned True)."""
    pid = os.fork()
    if pid == 0:
        try:
            os._exit(0 if fn() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def test_seccomp_filter_denies_sockets_only():
    if isolation.seccomp_program() is None:
        pytest.skip('no filter for this architecture')
    filt = isolation.Seccomp()

    def attempt():
        filt.install()
        for family in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX):
            try:
                socket.socket(family, socket.SOCK_STREAM).close()
                return False
            except PermissionError:
                pass
        # what a probe needs still works: files, pipes, processes, threads
        r, w = os.pipe()
        os.write(w, b'x')
        with tempfile.TemporaryFile() as f:
            f.write(b'ok')
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        return os.read(r, 1) == b'x' and os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 7

    assert in_fork(attempt) == 0
    # the filter stays in the fork: this process still makes sockets
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()


def test_probe_and_describe_name_every_mechanism():
    found = isolation.probe()
    assert set(found) == {'seccomp', 'namespaces', 'tmpfs'}
    assert found['seccomp'] is True or isinstance(found['seccomp'], str)
    text = isolation.describe(found, sandboxed=False)
    assert text['network'].startswith('seccomp: socket() denied' if found['seccomp'] is True else 'NOT isolated')
    assert text['proc'].startswith('NOT hidden')   # without a sandbox user there is no PID namespace


@pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox user (./setup.sh)')
def test_remove_user_files_as_that_user():
    pw = pwd.getpwnam(SANDBOX_USER)
    top = tempfile.mkdtemp(prefix='hw1-isolation-test-')
    os.chmod(top, 0o1777)
    try:
        root_file = os.path.join(top, 'root-owned')
        with open(root_file, 'w') as f:
            f.write('keep')
        outside = tempfile.NamedTemporaryFile(delete=False)   # root's, elsewhere: a link must not reach it

        def plant():
            os.setgroups([])
            os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
            os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)
            os.makedirs(os.path.join(top, 'd', 'e'))
            for i in range(50):
                open(os.path.join(top, 'd', 'e', str(i)), 'w').close()
            os.symlink(outside.name, os.path.join(top, 'link'))
            os.symlink('/', os.path.join(top, 'd', 'root-link'))
            os.chmod(os.path.join(top, 'd', 'e'), 0)
            os.chmod(os.path.join(top, 'd'), 0)
            return True

        assert in_fork(plant) == 0
        removed = isolation.remove_user_files(pw.pw_uid, pw.pw_gid, folders=(top,))
        assert removed == 50 + 2 + 2   # the files, two folders, two links
        assert sorted(os.listdir(top)) == ['root-owned']
        assert os.path.exists(outside.name) and os.path.exists(root_file)
    finally:
        os.unlink(outside.name)
        os.unlink(root_file)
        os.rmdir(top)
