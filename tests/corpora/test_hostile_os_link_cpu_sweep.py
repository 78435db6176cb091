"""
Attacks on the OS wall's link, its CPU accounting and its sweep (issue 27), each run against one Sandbox in both modes:
'strongest' (every defence this machine gives) and 'gradescope' (HW1_SANDBOX_DISABLE=namespaces,cgroups,landlock:
no namespaces and no writable cgroups, the mode every student is graded in, on a kernel without Landlock, where
the shared folders can be written to and the sweep is what holds; with Landlock they cannot be written:
tests/e2e/test_wall_everywhere.py). Each attack is a tiny
model.py whose import does the attack (the import runs in every probe process, like any code of
model.py), and each test asserts what the defence guarantees. Without the defence (the code before
issue 27), the outcome each test names in its docstring was measured.

- the link: a flood of descriptor 3 without reading a reply (froze the grader past every deadline);
  a forked helper that speaks on it, a re-exec'd grandchild, a helper named like the probe;
- CPU: unreaped (zombie) children that worked; a double-forked daemon burning CPU after the probe
  ended (its CPU was charged to the next process: an honest classmate's self-test timed out);
  a zombie storm;
- the sweep: a 1,500-deep folder in /dev/shm (RecursionError, swallowed: later probes read it),
  a FIFO and a unix socket left in /tmp for the next probe.
"""

import os
import pwd
import time
import uuid

import pytest

from grader_runs import sandbox_in_mode, sandbox_processes
from autograder import GRADING_YAML
from autograder.judge import config, probe_job
from autograder.contract import report_schema
from autograder.sandbox import Sandbox, leftovers

GRADING = config.load(GRADING_YAML)
JOB = {'profile': GRADING.profiles['cpu'].as_json()}   # the probe job, as the child reads it
SHARED = ('/tmp', '/var/tmp', '/dev/shm', '/run/lock')
# owned_by_pool() looks at every pool user's files in the shared folders, where a grading without namespaces writes:
# never beside one (tests/conftest.py); the Gradescope half is one itself (the fixture's `gradescope_mode`)
pytestmark = pytest.mark.lockdown


@pytest.fixture(scope='module', params=['strongest', pytest.param('gradescope', marks=pytest.mark.gradescope_mode)])
def sandbox(request):
    yield from sandbox_in_mode(request, 'gradescope', 'namespaces,cgroups,landlock')   # the sweep's mode


def run(sandbox, tmp_path, code, probes=(), timeout=60, skip=None, **kwargs):
    """The harness's loop (probe_job.execute) over a session of `sandbox` on `code`, the job JOB."""
    path = tmp_path / ('model-%s.py' % uuid.uuid4().hex[:6])
    path.write_text('import os\nimport sys\nimport time\n\n' + code)
    plan = probe_job.RunPlan(str(path), dict(JOB), tuple(probes), timeout, **kwargs)
    return probe_job.execute(sandbox, plan, skip=skip)


def owned_by_pool():
    """Entries of the sandbox users left in the shared writable folders."""
    left = []
    for name in [GRADING.sandbox['user']] + ['%s%d' % (GRADING.sandbox['user'], i) for i in range(1, 4)]:
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            continue
        left += leftovers.owned_in(uid, [d for d in SHARED if os.path.isdir(d)])
    return left


# ----------------------------------------------------------------------------- the link

def test_link_flood_without_reading(sandbox, tmp_path):
    """Before: the harness's blocking send() froze the grader (no results.json after 330 s)."""
    started = time.time()
    r = run(sandbox, tmp_path, "while True:\n    os.write(3, b'\\x01mark start')\n", timeout=5,
            link_services={report_schema.IMPORT: lambda payload, pid: b'0' * 60000})
    imp = r.import_result
    assert imp.harness['ended'] == 'link' and 'flooded or stopped reading' in imp.message, imp.harness
    assert time.time() - started < 30
    assert sandbox_processes() == []


@pytest.mark.parametrize('how', ['fork', 'reexec', 'named-like-the-probe', 'daemon'])
def test_only_the_probe_process_speaks(sandbox, tmp_path, how):
    """Before: a forked helper's `mark start` was taken by the memory judge (5/5 against 0 honest)."""
    helper = {
        'fork': "link.ask(b'mark start')",
        'reexec': "os.execv(sys.executable, [sys.executable, '-c', "
                  "\"import os; os.write(3, b'\\\\x01mark start'); os.read(3, 99)\"])",
        'named-like-the-probe': "try:\n            open('/proc/self/comm', 'w').write('hw1-probe')\n"
                                "        except OSError:\n            pass\n        sys.argv[:] = ['hw1-probe']\n"
                                "        link.ask(b'mark start')",
        'daemon': "os.setsid()\n        if os.fork():\n            os._exit(0)\n        link.ask(b'mark start')",
    }[how]
    heard = []
    r = run(sandbox, tmp_path, """
import autograder.child.socket_link as link
if os.fork() == 0:
    try:
        %s
    finally:
        os._exit(0)
time.sleep(1.5)
print('PROBE', link.ask(b'mark end'))
""" % helper, link_services={report_schema.IMPORT: lambda payload, pid: heard.append(payload) or b'ok'})
    imp = r.import_result
    if how == 'reexec':   # no other program runs (seccomp denies execve, issue 41): the helper never spoke
        assert heard == [b'mark end'] and 'a process other than' not in (imp.message or ''), (heard, imp.harness)
        assert sandbox_processes() == []
        return
    assert heard == [], heard   # the handler never heard the helper (nor the probe, stopped at once)
    assert imp.harness['ended'] == 'link' and 'a process other than the test\'s own' in imp.message, imp.harness
    assert sandbox_processes() == []


def test_a_probe_hashes_strings_with_the_fixed_seed_and_starts_no_program(sandbox, tmp_path):
    """Issue 41: a set in the student's own error read differently at every grading (the zygote's -I ignored
    PYTHONHASHSEED: each zygote, so each grading, hashed strings at random), and subprocess.run(['id']) at import
    ran in both modes although the public tests say no other program runs on the grader (seccomp denies execve).
    Two zygotes, as two gradings get: the same words (the order also follows what the zygote imported, the same
    in every grading, so it is compared between zygotes, not with a plain interpreter)."""
    code = ("import subprocess, sys\ntry:\n    subprocess.run(['id'])\n    ran = 'ran'\nexcept PermissionError:\n"
            "    ran = 'refused'\nraise AssertionError('%s %d %r' % (ran, sys.flags.hash_randomization, "
            "{'q_proj', 'k_proj', 'v_proj', 'out_proj', 'rope', 'alibi', 'wq', 'wk', 'wv', 'wo', 'bias', 'mask'}))\n")
    messages = []
    for _ in range(2):
        sandbox.zygote.close()   # the next process starts a fresh zygote: another interpreter, as another grading
        messages.append(run(sandbox, tmp_path, code).import_result.message)
    assert messages[0] == messages[1] and messages[0].startswith('AssertionError: refused 0 {'), messages
    assert sandbox_processes() == []


# ----------------------------------------------------------------------------- CPU

def test_zombie_children_count(sandbox, tmp_path):
    """A sleeping helper's children, one after another, each work 1.5 CPU-s and stay unreaped (zombies): at
    most 1.5 s is alive at any time, 6 s in all. Before: without cgroups only live processes were summed,
    and the import passed its 4-s limit."""
    r = run(sandbox, tmp_path, """
if os.fork() == 0:
    for _ in range(4):
        if os.fork() == 0:
            _end = time.process_time() + 1.5
            while time.process_time() < _end:
                pass
            os._exit(0)
        time.sleep(2)
    time.sleep(3600)
time.sleep(20)
""", timeout=4)
    h = r.import_result.harness
    assert h['ended'] == 'timeout' and h['cpu_seconds'] >= 4, h
    assert sandbox_processes() == []


def test_a_daemon_left_behind_is_charged_to_its_own_probe(sandbox, tmp_path):
    """A double-forked daemon burns CPU after its probe returned. Before: the zygote reaped it during the
    next process, whose account took its CPU (an honest classmate's self-test timed out)."""
    attack = run(sandbox, tmp_path, """
import tempfile
burned = os.path.join(tempfile.gettempdir(), 'burned')
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        end = time.process_time() + 1.6
        while time.process_time() < end:
            pass
        open(burned, 'w').close()   # 1.6 CPU-s done, however loaded the machine: the import may return
        while True:
            pass
    os._exit(0)
while not os.path.exists(burned):
    time.sleep(0.05)
""", timeout=10)
    assert attack.import_result.harness['cpu_seconds'] >= 1.5, attack.import_result.harness
    alone = run(sandbox, tmp_path, 'X = 1\n', timeout=10)
    after = run(sandbox, tmp_path, 'X = 1\n', timeout=10)
    assert alone.import_result.status == after.import_result.status == 'ok'
    assert after.import_result.harness['cpu_seconds'] < 1.0, after.import_result.harness
    assert sandbox_processes() == []


def test_zombie_storm(sandbox, tmp_path):
    """Forty children that exit at once and are never reaped: the probe ends normally, nothing is left."""
    r = run(sandbox, tmp_path, """
_kids = 0
for _ in range(40):
    try:
        if os.fork() == 0:
            os._exit(0)
        _kids += 1
    except OSError:
        break
print('KIDS', _kids)
""", timeout=20)
    assert r.import_result.status == 'ok', r.import_result.message
    assert 'KIDS 40' in r.import_result.info['stdout']
    assert sandbox_processes() == []


# ----------------------------------------------------------------------------- between probes

DEEP = """
_where = '/dev/shm/hw1-deep-TOKEN'
if os.path.exists(_where):
    print('SEEN-BY-A-LATER-PROBE')
else:
    os.mkdir(_where)
    _fd = os.open(_where, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir('d', dir_fd=_fd)
        _next = os.open('d', os.O_RDONLY, dir_fd=_fd)
        os.close(_fd)
        _fd = _next
    os.fchdir(_fd)
    os.mkfifo('fifo')
    import socket as _socket
    try:
        _socket.socket(_socket.AF_UNIX).bind('sock')
    except OSError:
        pass
    os.chdir('/')
"""


def test_a_deep_tree_in_dev_shm_reaches_no_later_probe(sandbox, tmp_path):
    """Before: RecursionError stopped the sweep (swallowed); 3.1 and 5.1 read what 7.1's probe saved."""
    token = uuid.uuid4().hex[:8]
    r = run(sandbox, tmp_path, DEEP.replace('TOKEN', token), probes=['rope', 'gqa'])
    assert r.import_result.status == 'ok', r.import_result.message
    for probe_id, result in r.probes.items():
        assert 'SEEN-BY-A-LATER-PROBE' not in result.info.get('stdout', ''), probe_id
    assert not os.path.exists('/dev/shm/hw1-deep-' + token)
    assert owned_by_pool() == []
    assert sandbox_processes() == []


def test_a_fifo_and_a_socket_in_tmp_reach_no_later_probe(sandbox, tmp_path):
    token = uuid.uuid4().hex[:8]
    code = """
import socket as _socket
_fifo, _sock = '/tmp/hw1-fifo-TOKEN', '/tmp/hw1-sock-TOKEN'
if os.path.exists(_fifo) or os.path.exists(_sock):
    print('SEEN-BY-A-LATER-PROBE')
else:
    os.mkfifo(_fifo, 0o666)
    try:
        _socket.socket(_socket.AF_UNIX).bind(_sock)   # seccomp denies socket(): no socket, then
    except OSError:
        pass
""".replace('TOKEN', token)
    r = run(sandbox, tmp_path, code, probes=['rope'])
    for result in [r.import_result] + list(r.probes.values()):
        assert 'SEEN-BY-A-LATER-PROBE' not in result.info.get('stdout', '')
    assert not os.path.exists('/tmp/hw1-fifo-' + token) and not os.path.exists('/tmp/hw1-sock-' + token)
    assert owned_by_pool() == []


# ----------------------------------------------------------------------------- sleeping

def test_a_sleeping_import_is_stopped_when_idle_and_named(sandbox, tmp_path):
    """An import that sleeps: stopped after sandbox.idle_seconds of (almost) no CPU, with its line. Before:
    it held the grading to the import check's wall cap, 3 x 120 + 10 = 370 s (here: idle 3 s, timeout 60)."""
    with Sandbox(dict(GRADING.sandbox, idle_seconds=3), zygote=sandbox.zygote) as quick:
        started = time.time()
        r = run(quick, tmp_path, 'def wait():\n    time.sleep(3600)\n\n\nwait()\n', timeout=60)
    h = r.import_result.harness
    assert h['ended'] == 'wall' and h['idle_seconds'] == 3, h
    assert time.time() - started < 20
    assert 'used almost no CPU for 3 s' in r.import_result.message, r.import_result.message
    assert h['hang']['frames'][-1] == {'file': 'model.py', 'line': 6, 'function': 'wait'}, h.get('hang')
