"""
Attacks on the machine, and on the sandbox's own design
(autograder/sandbox/), graded like tests/corpora/test_hostile_os.py: through ./run_autograder in
a temporary AUTOGRADER_ROOT outside /tmp (as Gradescope's /autograder is), with the strongest
set-up here and, as root, without namespaces (HW1_SANDBOX_DISABLE, Gradescope's Docker). Each
asserts that the attack gains nothing against the honest score of the same code (the reference:
full marks; the untouched template: 0) and leaks nothing; test_hostile_os.grade also checks that
no process of the sandbox users survived.
"""

import ctypes
import glob
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from grader_runs import (REPO, SANDBOXED, by_id, grading_text, pool_user, possible, sandbox_processes, sandbox_uids,
                         total)
from autograder import GRADING_YAML
from autograder.judge import config
from autograder.sandbox import seccomp
from test_hostile_os import SETUP_PARAMS, SETUPS, GRADING, grade, graded_fully, printed, read, setup_env, strict_load

# every case opens its AUTOGRADER_ROOT to the sandbox users until the grading locks it; those graded in Gradescope's
# mode are `gradescope_mode` as well (SETUP_PARAMS; tests/conftest.py)
pytestmark = pytest.mark.lockdown

needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox users (./setup.sh)')
libc = ctypes.CDLL(None, use_errno=True)
WRITABLE = ('/run/lock', '/dev/shm', '/var/tmp', '/tmp', '/dev/mqueue', '/var/crash')


def token():
    return 'hostile%s' % uuid.uuid4().hex[:10]


def as_uid(uid, fn):
    """fn() in a fork running as `uid`; its truth as the exit code 0."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os._exit(0 if fn() else 1)
        except BaseException:
            os._exit(2)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


# ----------------------------------------------------------------------------- leftovers

@needs_sandbox
@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_kernel_keys_do_not_outlive_the_grading(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    tok = token()
    out, tests, raw, root, _ = grade(ag_root, read('keyring').replace('HOSTILETOKEN', tok))
    line = printed(tests, 'HOSTILE-KEYS')
    assert line.count('=-1 errno=1') == 4, line   # add_key into three keyrings and the persistent keyring: EPERM
    graded_fully(out, tests)
    nr = seccomp.numbers()
    for uid in sandbox_uids():   # no such key for any user of the pool, whoever graded it
        with pool_user(uid):     # asked as that user while no grading holds it (a grading kills its user's processes)
            assert as_uid(uid, lambda: libc.syscall(nr['request_key'], b'user\0', ('hw1-%s\0' % tok).encode(),
                                                    None, 0) == -1) == 0


@needs_sandbox
@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_world_writable_folders_keep_nothing(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    tok = token()
    try:
        out, tests, raw, root, _ = grade(ag_root, read('shared_dirs').replace('HOSTILETOKEN', tok))
        line = printed(tests, 'HOSTILE-SHARED')
        assert 'mq_open=-1 errno=1' in line, line   # no POSIX message queue: seccomp
        if SETUPS[setup]:   # shared folders: written, then removed by the sweep of every writable folder
            assert '/run/lock:written' in line and '/var/tmp:written' in line, line
            assert out['extra_data']['isolation']['files_removed'] >= 17 * 3 * 3, out['extra_data']['isolation']
        else:               # the allow-listed root: only its own /tmp (= /dev/shm) is writable
            assert '/run/lock:FileNotFoundError' in line and '/var/tmp:FileNotFoundError' in line, line
            assert '/tmp:written' in line
        left = [p for top in WRITABLE for p in glob.glob(os.path.join(top, '*%s*' % tok))]
        assert left == [], 'files outlived the grading: %s' % left
        graded_fully(out, tests)
    finally:
        for p in [p for top in WRITABLE for p in glob.glob(os.path.join(top, '*%s*' % tok))]:
            os.unlink(p)


# ----------------------------------------------------------------------------- leaks outside /tmp

@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_submission_metadata_and_the_autograder_root_are_out_of_reach(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    secret = 'HIDDEN-%s' % token()
    root = ag_root()
    meta = os.path.join(root.path, 'submission_metadata.json')
    with open(meta, 'w') as f:   # Gradescope's: world-readable, with earlier submissions' hidden results
        json.dump({'id': 1, 'previous_submissions': [{'results': {'tests': [{'output': secret}]}}]}, f)
    os.chmod(meta, 0o644)
    root.submit('model.py', read('read_metadata'))
    root.run(timeout=300)
    out, raw = strict_load(root.results_path)
    tests = by_id(out)
    line = printed(tests, 'HOSTILE-META')
    assert secret not in raw and 'LISTED' not in line and 'READ' not in line, line
    for entry in line[len('HOSTILE-META '):].split(' ;; '):
        assert entry.split(': ')[-1] in ('PermissionError', 'FileNotFoundError'), entry
    graded_fully(out, tests)
    assert sandbox_processes() == []


def _export(tmp_mode):
    """A batch export outside /tmp: submission_A (the attacker) and submission_B (a correct classmate)."""
    base = '/var/lib/hw1-agtest' if os.geteuid() == 0 else tempfile.gettempdir()
    os.makedirs(base, mode=0o755, exist_ok=True)
    export = tempfile.mkdtemp(prefix='hw1-export-', dir=base)
    for name, text in (('submission_B', open(os.path.join(REPO, 'reference', 'mingpt', 'model.py')).read()),
                       ('submission_A', read('classmate').replace('/HOSTILE-CLASSMATE',
                                                                  os.path.join(export, 'submission_B')))):
        os.makedirs(os.path.join(export, name))
        with open(os.path.join(export, name, 'model.py'), 'w') as f:
            f.write(text)
        os.chmod(os.path.join(export, name), 0o755)
        os.chmod(os.path.join(export, name, 'model.py'), 0o644)
    os.chmod(export, tmp_mode)
    return export


@needs_sandbox
@pytest.mark.parametrize('setup, export_mode', [
    ('strongest', 0o755),
    pytest.param('no-namespaces', 0o755, marks=pytest.mark.gradescope_mode),
    pytest.param('no-namespaces', 0o700, marks=pytest.mark.gradescope_mode)])
def test_a_classmate_in_a_batch_export_is_out_of_reach(monkeypatch, setup, export_mode):
    setup_env(monkeypatch, setup)
    export = _export(export_mode)
    results = os.path.join(export, 'results.json')
    try:
        proc = subprocess.run([sys.executable, '-m', 'autograder', 'grade', os.path.join(export, 'submission_A'),
                               '--results', results], cwd=REPO, capture_output=True, text=True, timeout=300)
        out, raw = strict_load(results)
        assert 'ran the classmate' not in raw
        if SETUPS[setup] and export_mode == 0o755:
            # no namespaces to hide a world-readable export: refused before any student code ran, saying why
            assert proc.returncode == 2 and out['score'] == 0
            assert 'submission_B is readable' in out['extra_data']['grader_error'], out['extra_data']
            assert 'HOSTILE-CLASSMATE' not in raw
        else:
            tests = by_id(out)
            line = printed(tests, 'HOSTILE-CLASSMATE')
            assert line in ('HOSTILE-CLASSMATE FileNotFoundError', 'HOSTILE-CLASSMATE PermissionError'), line
            assert total(out) == 0   # the untouched template's honest score
    finally:
        shutil.rmtree(export, ignore_errors=True)
    assert sandbox_processes() == []


# ----------------------------------------------------------------------------- reading, CPU, the end of a probe

@pytest.mark.alone   # a race by design (the attacker appends as the probe ends): no busy neighbour to tilt it
@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_an_inotify_timed_append_gains_nothing(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    out, tests, raw, root, _ = grade(ag_root, read('inotify_append'))
    assert 'Autograder error' not in [t['name'] for t in out['tests']]
    assert total(out) <= possible(out)
    assert out['extra_data']['grader_peak_rss_mb'] < 250   # the bomb is never inflated: STORED members only
    for t in tests.values():   # a probe whose .npz got the bomb is lost, never read whole; a test that builds on
        # a part lost that way reads Not judged (the set-aside words for a later test of a failed part)
        assert (t['score'] == t['max_score'] or 'could not be read' in t['output'] or 'compressed' in t['output']
                or t['output'].startswith('Not judged')), t
    lost = [t for t in tests.values() if 'could not be read' in t['output'] or 'compressed' in t['output']]
    assert lost or not any(t['output'].startswith('Not judged') for t in tests.values()), tests
    # the second run repeats the import check: when the bomb took that repeat's output, its probes
    # say so, with the reason, never that the submission could not be imported (the first run did)
    for t in tests.values():
        if "not run in the second run: model.py's import check in that run failed: " in t['output']:
            assert 'could not be read' in t['output'] or 'compressed' in t['output'], t
    if tests['submission']['status'] == 'passed':
        said = 'because the submission could not be imported'
        assert not [t for t in tests.values() if said in t['output']], tests


@needs_sandbox
@pytest.mark.alone   # the attacker is the only neighbour the honest grading may have
def test_busy_loops_do_not_starve_a_concurrent_grading(ag_root, monkeypatch):
    monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)
    if len(sandbox_uids()) < 2:
        pytest.skip('needs two sandbox users (./setup.sh creates the pool)')
    fast = grading_text({t.id: 5 for t in GRADING.tests})   # the attacker's probes each get 5 s of CPU
    attacker = ag_root(fast)
    attacker.submit('model.py', read('busy_loops'))
    env = dict(os.environ, AUTOGRADER_ROOT=attacker.path, PYTHON=sys.executable)
    proc = subprocess.Popen(['bash', os.path.join(REPO, 'run_autograder')], cwd=attacker.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(3)   # its busy loops run while the honest grading starts and goes on
        out, tests, raw, root, seconds = grade(ag_root,
                                               open(os.path.join(REPO, 'reference', 'mingpt', 'model.py')).read(),
                                               limit=400)
    finally:
        proc.communicate(timeout=400)
    graded_fully(out, tests)   # every point: its deadlines count its own CPU, and its cgroup has an equal share
    assert not [t for t in tests.values() if 'timed out' in t['output']]
    a_out, _ = strict_load(attacker.results_path)
    assert total(a_out) <= possible(a_out)   # the attack only costs the attacker
    assert sandbox_processes() == []


@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_a_background_process_forges_no_later_probe(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    out, tests, raw, root, _ = grade(ag_root, read('background_forger'))
    assert total(out) == 0, {i: t['score'] for i, t in tests.items() if t['score']}   # the template's honest 0
    assert 'HOSTILE-FORGER' not in raw


# ----------------------------------------------------------------------------- the sandbox's own design

@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_attacks_on_the_sandbox_design_gain_nothing(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    out, tests, raw, root, _ = grade(ag_root, read('sandbox_design'))
    line = printed(tests, 'HOSTILE-DESIGN')
    fields = dict(f.split('=', 1) if '=' in f else (f.split(':', 1)[0], f.split(':', 1)[-1]) for f in line.split()[1:])
    fds = [int(x) for x in fields['fds'].split(',')]
    # 0-2, the link, the hang-stack file (runner.arm_hang_dump keeps it open for faulthandler), the listing's own
    assert fds[:4] == [0, 1, 2, 3] and len(fds) <= 6, line
    assert fields['frame-answer'] == "b'\\x01'", line         # a late "wall up" frame is an ordinary message
    for sig in ('9', '19'):
        assert fields['kill-parent-' + sig] in ('PermissionError', 'no-parent-visible'), line
    assert fields['cgroup-escape'] in ('PermissionError', 'FileNotFoundError', 'OSError'), line
    assert 'unshare-user=-1 errno=1' in line and 'ptrace-parent=-1 errno=1' in line, line   # seccomp: EPERM
    graded_fully(out, tests)


@needs_sandbox
def test_the_self_test_holds_in_a_fresh_interpreter_whatever_is_imported():
    code = ('import sys; sys.path.insert(0, %r); from autograder.judge.sandbox_commands import main; '
            'sys.exit(main(["sandbox", "check", "--json"]))')
    proc = subprocess.run([sys.executable, '-I', '-c', code % REPO], cwd='/', capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    found = json.loads(proc.stdout)
    assert found['seccomp'] is True and found['selftest']['seccomp'] is True and found['user'] is True
    # in this process, with socket and ctypes imported long ago: the same answer
    import socket  # noqa: F401
    from autograder.judge import sandbox_commands
    again = sandbox_commands.check(config.load(GRADING_YAML))
    assert again['selftest'] == found['selftest']
    assert pwd.getpwuid(os.geteuid()).pw_name == 'root'


# ----------------------------------------------------------------------------- the default mode on Gradescope

@needs_sandbox
@pytest.mark.gradescope_mode   # no namespaces: the grader finds out by itself
@pytest.mark.skipif(shutil.which('setpriv') is None, reason='setpriv (util-linux) drops CAP_SYS_ADMIN here')
def test_the_default_mode_without_cap_sys_admin_grades_and_says_what_it_lacks(ag_root, monkeypatch):
    """
    Gradescope's Docker: root without CAP_SYS_ADMIN, /sys/fs/cgroup read-only. The grader runs under
    setpriv with CAP_SYS_ADMIN out of its bounding set (cgroups turned off as a read-only hierarchy would):
    grading.yaml's default grades the reference under the network attack fully, nothing leaves the
    machine, and results.json names what was missing and why. No HW1_SANDBOX_DISABLE for namespaces:
    the grader finds out by itself.
    """
    from test_hostile_os import Listener
    monkeypatch.setenv('HW1_SANDBOX_DISABLE', 'cgroups')
    listener = Listener()
    root = ag_root()
    root.submit('model.py', read('net_socket').replace('47001', str(listener.port)))
    env = dict(os.environ, AUTOGRADER_ROOT=root.path, PYTHON=sys.executable)
    try:
        proc = subprocess.run(['setpriv', '--bounding-set', '-sys_admin', '--inh-caps', '-sys_admin', 'bash',
                               os.path.join(REPO, 'run_autograder')], cwd=root.path, env=env, capture_output=True,
                              text=True, timeout=400)
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stdout[-2000:]
    out, raw = strict_load(root.results_path)
    tests = by_id(out)
    assert listener.received == []
    iso = out['extra_data']['isolation']
    assert iso['namespaces'].startswith('no CAP_SYS_ADMIN') and iso['seccomp'] is True and iso['user'] is True
    assert any(line.startswith('namespaces: no CAP_SYS_ADMIN') for line in iso['lacks']), iso['lacks']
    assert iso['selftest'] == {'user': True, 'seccomp': True, 'namespaces': True, 'filesystem': True, 'rlimits': True}
    assert 'raw-socket-fd=-1 errno=1' in printed(tests, 'HOSTILE-NET')
    graded_fully(out, tests)
    assert sandbox_processes() == []
