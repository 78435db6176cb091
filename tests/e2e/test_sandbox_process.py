"""
The process model of autograder/sandbox/ end to end, with tiny model.py files run through one
Sandbox (one zygote for the whole module, as a batch worker would use it): the harness link
with an echo handler and the kernel's sender pid, a forged sender refused, per-probe limits
applied before model.py is imported, deadlines that count CPU time and not sleep, a background
process that does not outlive its probe, an OOM kill reported as such, and what the harness
measured in ProbeResult.harness, and another copy of the grader on the machine, open to others:
out of reach with namespaces or Landlock (Gradescope's mode here), refused before student code runs
with neither (tests/e2e/test_wall_everywhere.py).
"""

import os
import shutil
import tempfile

import pytest

from grader_runs import SANDBOXED, needs_lockdown, sandbox_in_mode, sandbox_processes
from autograder import GRADING_YAML
from autograder.judge import config, probe_job
from autograder.contract import report_schema
from autograder.sandbox import SandboxRefused, copies

GRADING = config.load(GRADING_YAML)
JOB = {'profile': GRADING.profiles['cpu'].as_json()}   # the probe job, as the child reads it
# an open copy of the grader is planted on purpose: never beside a grading without namespaces (tests/conftest.py); the
# half that grades without them is one itself (the fixture's `gradescope_mode`)
pytestmark = pytest.mark.lockdown


@pytest.fixture(scope='module', params=['strongest', pytest.param('no-namespaces', marks=pytest.mark.gradescope_mode)])
def sandbox(request):
    """The strongest set-up here, and the one of a Docker container without CAP_SYS_ADMIN (Gradescope)."""
    yield from sandbox_in_mode(request, 'no-namespaces')


def run(sandbox, tmp_path, code, probes=(), timeout=60, skip=None, **kwargs):
    """The harness's loop (probe_job.execute) over a session of `sandbox` on `code`, the job JOB."""
    path = tmp_path / 'model.py'
    path.write_text('import os\nimport sys\nimport time\n\n' + code)
    job = dict(JOB, **kwargs.pop('job', {}))
    plan = probe_job.RunPlan(str(path), job, tuple(probes), timeout, **kwargs)
    return probe_job.execute(sandbox, plan, skip=skip)


def test_the_link_hands_each_question_to_the_judge_with_the_senders_pid_from_the_kernel(sandbox, tmp_path):
    seen = []

    def echo(payload, pid):
        seen.append(pid)
        return b'echo:' + payload, {'pid': pid, 'payload': payload.decode()}

    r = run(sandbox, tmp_path, "import autograder.child.socket_link as link\nprint('GOT', link.ask(b'hello').decode(), "
                               "link.ask(b'').decode() or 'empty')\n", link_services={report_schema.IMPORT: echo})
    imp = r.import_result
    assert imp.status == 'ok', imp.message
    assert 'GOT echo:hello echo:' in imp.info['stdout']
    assert imp.harness['link'] == [{'pid': imp.harness['pid'], 'payload': 'hello'},
                                   {'pid': imp.harness['pid'], 'payload': ''}]
    # the third message is the runner's own, once model.py is imported (report_schema.IMPORTED): never the handler's
    assert imp.harness['link_messages'] == 3 and seen == [imp.harness['pid']] * 2
    assert 0 < imp.harness['imported_after'] < imp.harness['wall_seconds']


def test_a_service_that_fails_costs_its_probe_an_empty_reply_and_nothing_else(sandbox, tmp_path):
    r = run(sandbox, tmp_path, "import autograder.child.socket_link as link\n"
                               "print('GOT', repr(link.ask(b'a')), repr(link.ask(b'b')))\n",
            link_services={report_schema.IMPORT: lambda payload, pid: 1 / 0 if payload == b'a' else b'fine'})
    imp = r.import_result
    assert imp.status == 'ok' and "GOT b'' b'fine'" in imp.info['stdout'], imp.info
    assert [e['kind'] for e in imp.harness['link_errors']] == ['service_error'], imp.harness
    assert imp.harness['link_errors'][0]['error'].startswith('ZeroDivisionError')


def test_a_forged_sender_pid_is_refused_by_the_kernel(sandbox, tmp_path):
    got = []
    r = run(sandbox, tmp_path, """
import socket, struct
s = socket.socket(fileno=os.dup(3))          # the inherited link: no socket() call
try:
    s.sendmsg([b'\\x01forged'], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, struct.pack('3i', 1, 0, 0))])
    print('FORGED sent')
except OSError as e:
    print('FORGED refused', e.errno)
""", link_services={report_schema.IMPORT: lambda payload, pid: got.append((payload, pid)) or b''})
    assert 'FORGED refused 1' in r.import_result.info['stdout'], r.import_result.info['stdout']
    assert got == []


def test_per_probe_limits_apply_before_model_py_is_imported(sandbox, tmp_path):
    code = "import torch\n_X = torch.ones(50_000_000)   # 200 MB at import\nprint('ALLOCATED')\n"
    free = run(sandbox, tmp_path, code)
    assert free.import_result.status == 'ok' and 'ALLOCATED' in free.import_result.info['stdout']
    capped = run(sandbox, tmp_path, code, job={'limits': {report_schema.IMPORT: {'address_space_margin_mb': 100}}})
    assert capped.import_result.status == 'error' and 'allocate' in capped.import_result.message


def test_deadlines_count_cpu_time_not_sleep(sandbox, tmp_path):
    slept = run(sandbox, tmp_path, 'time.sleep(4)\n', timeout=2)   # 4 s asleep, far under 2 s of CPU
    assert slept.import_result.status == 'ok', slept.import_result.message
    h = slept.import_result.harness
    assert h['wall_seconds'] >= 4 and h['cpu_seconds'] < 2 and h['ended'] == 'exit'
    busy = run(sandbox, tmp_path, 'while True:\n    pass\n', timeout=2)
    h = busy.import_result.harness
    assert busy.import_result.status == 'timeout' and h['ended'] == 'timeout'
    assert 2 <= h['cpu_seconds'] < 4 and 'ran longer than the 2 s allowed' in busy.import_result.message
    asleep = run(sandbox, tmp_path, 'time.sleep(3600)\n', timeout=1)   # the wall-clock cap: 3 x 1 + 10 s
    h = asleep.import_result.harness
    assert asleep.import_result.status == 'timeout' and h['ended'] == 'wall' and h['wall_seconds'] < 20
    assert 'sleeping or waiting forever' in asleep.import_result.message


def test_a_loop_that_allocates_is_stopped_as_a_hang_with_its_line(sandbox, tmp_path):
    """Issue 40: a loop that appends without end, in every mode, is stopped by the harness past
    sandbox.probe_memory_mb like a process past its deadline, its stack dumped: not an OOM kill with no line (cgroup),
    nor a MemoryError or an exit code somewhere (RLIMIT_AS, Gradescope's mode)."""
    r = run(sandbox, tmp_path, 'grown = []\nwhile True:\n    grown.append(len(grown))\n', timeout=60)
    imp, h = r.import_result, r.import_result.harness
    assert imp.status == 'timeout' and imp.hung and h['ended'] == 'memory', (imp.status, h)
    assert h['memory_bytes'] > h['memory_limit_bytes'] == GRADING.sandbox['probe_memory_mb'] << 20
    assert h['memory_peak_bytes'] >= h['memory_bytes'] and h['cpu_seconds'] < 60 and h['wall_seconds'] < 60
    assert [f['line'] for f in h['hang']['frames']][-1] in (6, 7), h.get('hang')   # the while loop or its append
    assert 'its memory kept growing past the %d MB' % GRADING.sandbox['probe_memory_mb'] in imp.message, imp.message
    assert sandbox_processes() == []


def test_busy_children_count_in_the_deadline(sandbox, tmp_path):
    code = "for _ in range(3):\n    if os.fork() == 0:\n        while True:\n            pass\ntime.sleep(3600)\n"
    r = run(sandbox, tmp_path, code, timeout=3)
    h = r.import_result.harness
    assert r.import_result.status == 'timeout' and h['ended'] == 'timeout', h
    assert h['wall_seconds'] < 30
    assert sandbox_processes() == []


@pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox user (./setup.sh)')
def test_a_background_process_does_not_outlive_its_probe(sandbox, tmp_path):
    code = """
print('BEFORE', os.path.exists(os.path.join(os.environ['TMPDIR'], 'kept')))
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            with open(os.path.join(os.environ['TMPDIR'], 'kept'), 'a') as f:
                f.write('x')
            time.sleep(0.05)
    os._exit(0)
time.sleep(0.3)
print('KEPT', sorted(os.listdir(os.environ['TMPDIR'])))
"""
    r = run(sandbox, tmp_path, code, probes=['rope'])
    assert "BEFORE False" in r.import_result.info['stdout'] and "KEPT ['kept']" in r.import_result.info['stdout']
    # the rope probe's process imports model.py again: a fresh home, and the import check's writer is dead
    assert "BEFORE False" in r.probes['rope'].info.get('stdout', ''), r.probes['rope'].info
    assert sandbox_processes() == []


@pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox user (./setup.sh)')
def test_an_oom_kill_is_reported_as_out_of_memory(sandbox, tmp_path):
    if not sandbox.on['cgroups']:
        # without a cgroup (Docker without CAP_SYS_ADMIN) the address-space limit is the wall: an allocation
        # past it fails inside the process, which is reported as the error it is, never as a timeout
        mb = GRADING.sandbox['address_space_mb'] + 200
        r = run(sandbox, tmp_path, 'import torch\n_X = torch.ones(%d * 262144)\n' % mb)
        imp = r.import_result
        assert imp.status == 'error' and imp.harness['ended'] == 'exit', (imp.status, imp.harness)
        assert 'memory' in imp.message.lower() and 'timed out' not in imp.message, imp.message
        return
    mb = GRADING.sandbox['cgroup_memory_mb'] + 200
    r = run(sandbox, tmp_path, 'import torch\n_X = torch.ones(%d * 262144)\n' % mb)
    imp = r.import_result
    assert imp.harness['ended'] == 'oom', imp.harness
    assert imp.status == 'crashed' and 'out of memory' in imp.message and 'SIGKILL' in imp.message
    assert 'timed out' not in imp.message and 'ran longer' not in imp.message


def test_the_harness_measures_each_process(sandbox, tmp_path):
    r = run(sandbox, tmp_path, "import torch\n_X = torch.ones(10_000_000)\n", probes=['rope'])
    for result in (r.import_result, r.probes['rope']):
        h = result.harness
        assert result.status == 'ok', result.message
        assert h['ended'] == 'exit' and h['exit_code'] == 0 and h['signal'] is None
        assert 0 < h['cpu_seconds'] < 30 and 0 < h['wall_seconds'] < 60
        assert h['max_rss_bytes'] > 40_000_000   # the 40 MB tensor, in the process's own peak
    assert r.import_result.harness['pid'] != r.probes['rope'].harness['pid']   # one fresh process each
    assert r.isolation['selftest'] and all(v is True for v in r.isolation['selftest'].values())
    if r.isolation['cgroups'] is True:
        assert r.import_result.harness['cgroup_peak_bytes'] >= 40_000_000


# ----------------------------------------------------------------------------- the link never blocks the harness

def test_a_flood_of_the_link_is_stopped_and_the_harness_keeps_its_deadlines(sandbox, tmp_path):
    """Queries written to descriptor 3 without ever reading a reply: the harness's replies queue up to
    their cap, and the probe is stopped (before, a blocking send froze the grader past every deadline)."""
    r = run(sandbox, tmp_path, "while True:\n    os.write(3, b'\\x01q' * 100)\n", timeout=5,
            link_services={report_schema.IMPORT: lambda payload, pid: b'x' * 4000})
    imp = r.import_result
    assert imp.harness['ended'] == 'link' and imp.status == 'crashed', imp.harness
    assert 'flooded or stopped reading the grader\'s channel' in imp.message, imp.message
    assert imp.harness['wall_seconds'] < 10
    assert sandbox_processes() == []


def test_only_the_probe_process_speaks_on_the_link(sandbox, tmp_path):
    """A forked helper inherits descriptor 3 and asks: refused (the kernel gives its pid), the probe stopped."""
    seen = []
    r = run(sandbox, tmp_path, """
import autograder.child.socket_link as link
if os.fork() == 0:
    link.ask(b'from the helper')
    os._exit(0)
os.wait()
print('ASKED', link.ask(b'from the probe'))
""", link_services={report_schema.IMPORT: lambda payload, pid: seen.append((payload, pid)) or b'ok'})
    imp = r.import_result
    assert imp.harness['ended'] == 'link', imp.harness
    assert 'a process other than the test\'s own' in imp.message, imp.message
    assert seen == [] and 'ASKED' not in imp.info.get('stdout', '')


# ----------------------------------------------------------------------------- where a hang was

def test_a_hang_is_located_in_model_py(sandbox, tmp_path):
    code = "def spin():\n    while True: pass\n\n\nspin()\n"
    busy = run(sandbox, tmp_path, code, timeout=2)
    h = busy.import_result.harness
    assert h['ended'] == 'timeout', h
    assert h['hang'] == {'frames': [{'file': 'model.py', 'line': 9, 'function': '<module>'},
                                    {'file': 'model.py', 'line': 6, 'function': 'spin'}]}, h.get('hang')
    asleep = run(sandbox, tmp_path, 'time.sleep(3600)\n', timeout=1)
    h = asleep.import_result.harness
    assert h['ended'] == 'wall', h
    assert h['hang'] == {'frames': [{'file': 'model.py', 'line': 5, 'function': '<module>'}]}, h.get('hang')
    assert not any('/' in str(v) for f in h['hang']['frames'] for v in f.values())


def test_skipped_probes_are_not_run(sandbox, tmp_path):
    asked = []

    def skip(probe_id, so_far):
        asked.append((probe_id, sorted(so_far)))
        return 'not run: it hung in 4.1'
    r = run(sandbox, tmp_path, 'X = 1\n', probes=['gqa', 'rope'], skip=skip)
    assert r.import_result.status == 'ok'
    assert r.probes['gqa'].status == 'skipped'
    assert r.probes['gqa'].message == 'not run: it hung in 4.1'
    assert r.probes['gqa'].harness == {}
    assert asked == [('gqa', []), ('rope', ['gqa'])] and r.probes['rope'].status == 'skipped'


def _open_copy():
    """Another copy of the grader, as a TA's checkout or a second unpacked zip left world-readable: under /var/tmp,
    one of the usual places, with the files a probe would want (their contents a marker)."""
    needs_lockdown('an open copy of the grader')
    copy = tempfile.mkdtemp(prefix='hw1-open-copy-', dir='/var/tmp')
    for rel in ('autograder/judge/grade.py', 'autograder/fixtures/draw.key', 'autograder/fixtures/cpu/expected.npz',
                'reference/mingpt/model.py'):
        os.makedirs(os.path.join(copy, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(copy, rel), 'w') as f:
            f.write('HOSTILE-SECRET\n')
    for root, dirs, files in os.walk(copy):
        os.chmod(root, 0o755)
        for name in files:
            os.chmod(os.path.join(root, name), 0o644)
    return copy


@pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox user (./setup.sh)')
def test_an_open_copy_of_the_grader_is_refused_or_out_of_reach(sandbox, tmp_path):
    copy = _open_copy()
    key = os.path.join(copy, 'autograder', 'fixtures', 'draw.key')
    code = ("try:\n    print('READ', open(%r).read().strip())\n"
            "except OSError as e:\n    print('REFUSED', type(e).__name__)\n" % key)
    try:
        assert copy in copies.find()   # as root: found in /var/tmp, one of the usual places
        if sandbox.on['namespaces'] or sandbox.on['landlock']:
            # the allow-listed root hides it, or Landlock refuses it: the self-test passes, the probe reads nothing
            r = run(sandbox, tmp_path, code)
            assert r.isolation['grader_copies'] >= 2 and r.isolation['selftest']['filesystem'] is True
            assert 'REFUSED' in r.import_result.info['stdout'], r.import_result.info
            if not sandbox.on['namespaces']:
                assert 'REFUSED PermissionError' in r.import_result.info['stdout'], r.import_result.info
        else:   # Gradescope's mode: refused before any student code ran, naming the copy and the fix
            with pytest.raises(SandboxRefused) as refused:
                run(sandbox, tmp_path, code)
            message = str(refused.value)
            assert '%s is readable' % key in message and 'chmod 700 %s' % copy in message, message
            os.chmod(copy, 0o700)   # closed as the message says: the same grading runs
            r = run(sandbox, tmp_path, code)
            assert r.isolation['selftest']['filesystem'] is True
            assert 'REFUSED PermissionError' in r.import_result.info['stdout'], r.import_result.info
            assert r.isolation['copy_scan_ms'] < 1000, r.isolation['copy_scan_ms']
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    assert sandbox_processes() == []
