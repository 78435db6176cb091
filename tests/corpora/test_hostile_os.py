"""
The attacks on the machine (tests/hostile/os_cases.py), graded through ./run_autograder in a
temporary AUTOGRADER_ROOT like tests/corpora/test_hostile.py. Every case asserts a strict
results.json (no NaN), written in bounded time, no points beyond the submission's honest score
(the reference's full marks, or 0 where the attack stops the import), no leaked text, and no
process or file of the sandbox users left behind.

What the OS can stop depends on the machine (autograder/sandbox/defences.py probes it; results.json's
extra_data.isolation says what was in force). Here each case runs with the strongest set-up
the machine allows and, where the grader is root, again with HW1_SANDBOX_DISABLE turning the
namespaces, the cgroups and Landlock off: Gradescope's set-up (a Docker container without CAP_SYS_ADMIN and
with a read-only cgroup hierarchy) on a kernel without Landlock, where the shared folders can be written to
and are swept after every probe. With Landlock they cannot be: tests/e2e/test_wall_everywhere.py.
"""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid

import pytest

from grader_runs import (REPO, SANDBOXED, by_id, full, grading_text, load_results, needs_gradescope_mode, possible,
                         sandbox_processes, score_in_range, total)
from autograder import GRADING_YAML
from autograder.judge import config

HOSTILE = os.path.join(REPO, 'tests', 'hostile')
sys.path.insert(0, HOSTILE)
from os_cases import CASES as OS_CASES  # noqa: E402

GRADING = config.load(GRADING_YAML)
# every case opens its AUTOGRADER_ROOT to the sandbox users until the grading locks it; those graded in Gradescope's
# mode are `gradescope_mode` as well (SETUP_PARAMS; tests/conftest.py)
pytestmark = pytest.mark.lockdown
IMPLEMENTATION = [t.id for t in GRADING.enabled_tests() if t.id != 'submission']
SCRATCH_BASE = '/var/lib/hw1-sandbox'
# the set-ups each case runs under: the strongest, and (as root) Gradescope's: no namespaces (so no tmpfs)
# and no writable cgroups. The key keeps its name (other files parametrize on it).
SETUPS = {'strongest': '', 'no-namespaces': 'namespaces,cgroups,landlock'}   # the sweep is what these cases test
SETUP_PARAMS = [pytest.param(s, marks=pytest.mark.gradescope_mode) if SETUPS[s] else s for s in sorted(SETUPS)]
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox users (./setup.sh)')


def test_every_os_case_is_graded_here():
    graded = {'net_socket', 'plant_tmp', 'thread_forever', 'proc_snoop', 'other_victim', 'other_reader',
              'hang_past_watchdog', 'memory_hog', 'keyring', 'shared_dirs', 'read_metadata', 'classmate',
              'inotify_append', 'busy_loops', 'background_forger', 'sandbox_design'}
    assert set(OS_CASES) == graded


def read(name):
    with open(os.path.join(HOSTILE, name, 'model.py')) as f:
        return f.read()


def strict_load(path):
    """results.json as Gradescope parses it: NaN/Infinity are not JSON."""
    def refuse(constant):
        raise ValueError('%s in results.json' % constant)
    with open(path) as f:
        raw = f.read()
    json.loads(raw, parse_constant=refuse)
    return load_results(path), raw


def setup_env(monkeypatch, setup):
    if SETUPS[setup]:
        if not SANDBOXED:
            pytest.skip('the weaker set-ups differ only under root')
        needs_gradescope_mode('grading without namespaces')
        monkeypatch.setenv('HW1_SANDBOX_DISABLE', SETUPS[setup])
    else:
        monkeypatch.delenv('HW1_SANDBOX_DISABLE', raising=False)


def grade(ag_root, text, grading=None, limit=240):
    """Grade `text` through run_autograder. Returns (results, {id: test}, raw text, root, seconds)."""
    root = ag_root(grading)
    root.submit('model.py', text)
    started = time.time()
    root.run(timeout=limit)
    seconds = time.time() - started
    out, raw = strict_load(root.results_path)
    assert seconds < limit
    for t in out['tests']:
        assert score_in_range(t), t
    left = sandbox_processes()
    assert left == [], 'processes of the sandbox users survived the grading: %s' % left
    return out, by_id(out), raw, root, seconds


def graded_fully(out, tests, except_=()):
    """Every test at full marks, but those in `except_`, which the submission's own attack costs."""
    assert set(tests) == {t.id for t in GRADING.enabled_tests()}
    assert 'Autograder error' not in [t['name'] for t in out['tests']]
    lost = {i: t['output'][:200] for i, t in tests.items() if not full(t)}
    assert set(lost) == set(except_), lost


def printed(tests, tag):
    """The first line model.py printed at import that starts with `tag` (shown on one line: judge/student_text.py
    writes a newline of the student's as "\\n")."""
    lines = [l for l in tests['submission']['output'].replace('\\n', '\n').splitlines() if l.startswith(tag)]
    assert lines, tests['submission']['output'][:2000]
    return lines[0]


def leftovers(token):
    return [p for top in ('/tmp', '/var/tmp', '/dev/shm') for p in glob.glob(os.path.join(top, '*%s*' % token))]


# ----------------------------------------------------------------------------- network

class Listener:
    """A TCP listener on the loopback that records every connection and every byte it receives."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received, self.stop = [], False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            conn.settimeout(2)
            data = b''
            try:
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            except OSError:
                pass
            self.received.append(data or b'(connected)')
            conn.close()

    def close(self):
        self.stop = True
        self.thread.join()
        self.sock.close()


@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_net_socket(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    listener = Listener()
    try:
        out, tests, raw, root, _ = grade(ag_root, read('net_socket').replace('47001', str(listener.port)))
    finally:
        listener.close()
    assert listener.received == [], 'student code reached the loopback listener: %r' % listener.received[:1]
    line = printed(tests, 'HOSTILE-NET')
    assert 'connected' not in line and 'unix-socket-made' not in line, line
    assert 'raw-socket-fd=-1 errno=1' in line, line   # the syscall itself is refused (EPERM)
    iso = out['extra_data']['isolation']
    assert iso['seccomp'] is True and iso['network'].startswith('seccomp: socket() denied'), iso
    if SANDBOXED and not SETUPS[setup]:
        assert 'own network namespace' in iso['network']
    graded_fully(out, tests)   # the reference under the attack: every point, none more
    assert 'root:x:0:0' not in raw


# ----------------------------------------------------------------------------- temp files

@needs_sandbox
@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_plant_tmp_removed_afterwards(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    token = 'hostile%s' % uuid.uuid4().hex[:10]
    try:
        out, tests, raw, root, _ = grade(ag_root, read('plant_tmp').replace('HOSTILETOKEN', token))
        line = printed(tests, 'HOSTILE-PLANT')
        iso = out['extra_data']['isolation']
        if SETUPS[setup]:
            # shared temp folders: everything landed there, and the clean-up (as the sandbox user) removed it
            assert line.startswith('HOSTILE-PLANT 10000 inodes') and 'locked' in line.split(), line
            assert iso['files_removed'] >= 10000 + 6, iso
        else:
            # private, size-limited /tmp: the inode flood stops at sandbox.scratch_inodes
            assert 'inodes:OSError' in line, line
            assert int(line.split()[1]) < GRADING.sandbox['scratch_inodes'], line
        assert leftovers(token) == [], 'planted files outlived the grading'
        # with a private, size-limited /tmp the flood fills the submission's own temp folder, where
        # load-pretrained saves its model.pt (as chargpt.py does): that test is lost, honestly
        graded_fully(out, tests, except_=() if SETUPS[setup] else ('load-pretrained',))
    finally:
        for path in leftovers(token):   # never leave the machine dirty, even when the test fails
            subprocess.run(['chmod', '-R', 'u+rwx', path])
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)


# ----------------------------------------------------------------------------- the child ends

def test_thread_forever_does_not_hold_the_child(ag_root):
    out, tests, raw, root, seconds = grade(ag_root, read('thread_forever'), limit=GRADING.sandbox['total_seconds'])
    graded_fully(out, tests)
    # without os._exit the child would wait for the thread until the whole budget ran out
    budget = GRADING.sandbox['total_seconds']
    assert out['extra_data']['wall_seconds'] < budget / 2, (out['extra_data']['wall_seconds'], budget)


# ----------------------------------------------------------------------------- /proc

@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_proc_of_others(ag_root, monkeypatch, setup):
    setup_env(monkeypatch, setup)
    out, tests, raw, root, _ = grade(ag_root, read('proc_snoop'))
    line = printed(tests, 'HOSTILE-PROC')
    iso = out['extra_data']['isolation']
    if iso['namespaces'] is True and SANDBOXED:
        assert line.startswith('HOSTILE-PROC 0 visible'), line
        assert 'autograder' not in line and root.path not in line
        assert iso['proc'].startswith('own PID namespace')
    else:   # the report must say so plainly
        assert iso['proc'].startswith('NOT hidden'), iso
    graded_fully(out, tests)


# ----------------------------------------------------------------------------- other gradings

def _scratch_of(token, timeout=120):
    """The victim's scratch folder (root can list the base) once its import has written the secret."""
    end = time.time() + timeout
    while time.time() < end:
        for path in glob.glob(os.path.join(SCRATCH_BASE, 'hw1-sandbox-*')):
            try:
                with open(os.path.join(path, 'code', 'mingpt', 'model.py')) as f:
                    mine = token in f.read()
            except OSError:
                continue
            if mine and glob.glob(os.path.join(path, 'p[0-9]*', 'job', 'home', 'secret.txt')):
                return path
        time.sleep(0.2)
    raise AssertionError('the victim grading never started')


@needs_sandbox
@pytest.mark.parametrize('setup', SETUP_PARAMS)
def test_concurrent_gradings_cannot_read_each_other(ag_root, monkeypatch, setup):
    from autograder.sandbox import users
    if len(users.sandbox_pool(GRADING.sandbox['user'], GRADING.sandbox['pool_size'])[0]) < 2:
        pytest.skip('needs two sandbox users (./setup.sh creates the pool)')
    setup_env(monkeypatch, setup)
    token = 'hostile%s' % uuid.uuid4().hex[:10]
    victim = ag_root(grading_text({'submission': 120}))
    victim_text = read('other_victim').replace('HOSTILETOKEN', token).replace(
        "while True:\n    _hostile_time.sleep(0.2)",
        "while not os.path.exists(os.path.join(os.environ['TMPDIR'], 'go')):\n"
        "    _hostile_time.sleep(0.2)\nos._exit(3)")
    victim.submit('model.py', victim_text)
    env = dict(os.environ, AUTOGRADER_ROOT=victim.path, PYTHON=sys.executable)
    proc = subprocess.Popen(['bash', os.path.join(REPO, 'run_autograder')], cwd=victim.path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        target = _scratch_of(token)
        out, tests, raw, root, _ = grade(ag_root, read('other_reader').replace('HOSTILETOKEN', token)
                                         .replace('/HOSTILE-TARGET', target))
    finally:
        for path in glob.glob(os.path.join(SCRATCH_BASE, 'hw1-sandbox-*', 'p[0-9]*', 'job', 'home')):
            if os.path.isdir(path):
                open(os.path.join(path, 'go'), 'w').close()   # let the victim end
        proc.wait(timeout=180)
    line = printed(tests, 'HOSTILE-OTHER')
    assert 'SECRET-' + token not in raw, line
    for entry in line[len('HOSTILE-OTHER '):].split(' ;; '):
        path, _, what = entry.partition(': ')
        assert what in ('PermissionError', 'FileNotFoundError'), entry
    graded_fully(out, tests)
    # the victim: its import never finished normally (os._exit), an honest 0
    v_out, _ = strict_load(victim.results_path)
    assert total(v_out) == 0
    assert leftovers(token) == []


# ----------------------------------------------------------------------------- watchdog

def test_watchdog_answers_past_the_budget(ag_root):
    budget = 8
    text = grading_text({'submission': 300}, edit=lambda d: d['sandbox'].update(watchdog_seconds=budget))
    started = time.time()
    root = ag_root(text)
    root.submit('model.py', read('hang_past_watchdog'))
    _, proc = root.run(timeout=120)
    seconds = time.time() - started
    out, raw = strict_load(root.results_path)
    assert seconds < budget + 10 + 30, seconds   # SIGTERM at the budget, SIGKILL 10 s later, then the clean-up
    assert 'watchdog stopped the grading after %d s' % budget in proc.stdout, proc.stdout[-2000:]
    assert out['score'] == 0 and total(out) == 0
    assert 'stopped after %d s' % budget in out['tests'][0]['output']
    assert sandbox_processes() == []
    if SANDBOXED:   # the grader's own clean-up ran on SIGTERM: no scratch folder or mount of it is left
        with open('/proc/mounts') as f:
            assert root.path not in f.read()


# ----------------------------------------------------------------------------- memory of the whole tree

def _memory_cgroup():
    """A fresh memory cgroup under this process's own (v1 or v2), or None where none can be made."""
    try:
        with open('/proc/self/cgroup') as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(':', 2)
        if 'memory' in controllers.split(','):
            base = '/sys/fs/cgroup/memory' + path
            kind = 'v1'
        elif controllers == '' and os.path.exists('/sys/fs/cgroup/cgroup.controllers'):
            base = '/sys/fs/cgroup' + path
            kind = 'v2'
        else:
            continue
        cg = os.path.join(base, 'hw1-memtest-%s' % uuid.uuid4().hex[:8])
        try:
            os.mkdir(cg)
            if kind == 'v1':
                for name in ('memory.limit_in_bytes', 'memory.memsw.limit_in_bytes'):
                    if os.path.exists(os.path.join(cg, name)):
                        with open(os.path.join(cg, name), 'w') as f:
                            f.write(str(768 << 20))
            else:
                with open(os.path.join(cg, 'memory.max'), 'w') as f:
                    f.write(str(768 << 20))
                if os.path.exists(os.path.join(cg, 'memory.swap.max')):
                    with open(os.path.join(cg, 'memory.swap.max'), 'w') as f:
                        f.write('0')
            return kind, cg
        except OSError:
            try:
                os.rmdir(cg)
            except OSError:
                pass
    return None


def _cgroup_figures(kind, cg):
    def get(name):
        try:
            with open(os.path.join(cg, name)) as f:
                return f.read()
        except OSError:
            return ''
    if kind == 'v1':
        oom = dict(l.split() for l in get('memory.oom_control').splitlines() if len(l.split()) == 2)
        return int(get('memory.max_usage_in_bytes') or 0), int(oom.get('oom_kill', 0))
    events = dict(l.split() for l in get('memory.events').splitlines() if len(l.split()) == 2)
    return int(get('memory.peak') or 0), int(events.get('oom_kill', 0))


def _memory_of(pid, rss_pages):
    """Proportional set size (shared pages split between their users: the relay process forked from the
    grader shares nearly all its pages), or the resident size where smaps_rollup is missing."""
    try:
        with open('/proc/%d/smaps_rollup' % pid) as f:
            for line in f:
                if line.startswith('Pss:'):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return rss_pages * os.sysconf('SC_PAGE_SIZE')


def _tree_rss(root_pid):
    """Memory of root_pid and all its descendants, in bytes (one sample): the sum of their PSS."""
    children, rss = {}, {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rpartition(')')[2].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
            rss[int(entry)] = int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
    total_rss, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        if pid in rss:
            total_rss += _memory_of(pid, rss[pid])
        todo += children.get(pid, [])
    return total_rss


MEMORY_FIGURES = os.path.join(REPO, 'results', 'memory_peaks.json')   # for the report; git-ignored


# the harness's own memory under the cases that aim at it (decompression bombs, oversized arrays), whoever wrote them
MEMORY_CASES = ['reference', 'memory_hog', 'alloc_in_forward', 'print_50mb'] + sorted(
    d for d in os.listdir(HOSTILE) if re.search(r'zip_bomb|npz|oversiz|huge|inflat|decompress|deflat', d)
    and os.path.isfile(os.path.join(HOSTILE, d, 'model.py')))


@pytest.mark.parametrize('name', MEMORY_CASES)
def test_memory_of_the_whole_tree_fits_768mb(ag_root, name):
    """
    The grader and everything it starts, in a real 768 MB memory cgroup where the machine allows
    one: the grader is never the process killed, and results.json is always its own. The tree's
    memory (sum of PSS, sampled every 50 ms) is measured too, and where no cgroup can be made it
    is the only figure (and the hog, which only a cgroup would stop, is skipped).
    """
    cgroup = _memory_cgroup()
    if cgroup is None and name == 'memory_hog':
        pytest.skip('no memory cgroup can be made here: nothing would stop a 700 MB allocation at 768 MB')
    text = open(os.path.join(REPO, 'reference', 'mingpt', 'model.py')).read() if name == 'reference' else read(name)
    root = ag_root()
    root.submit('model.py', text)
    cmd = ['bash', os.path.join(REPO, 'run_autograder')]
    if cgroup:
        cmd = ['bash', '-c', 'echo $$ > %s/cgroup.procs && exec "$@"' % cgroup[1], 'cg'] + cmd
    env = dict(os.environ, AUTOGRADER_ROOT=root.path, PYTHON=sys.executable)
    env.pop('HW1_SANDBOX_DISABLE', None)
    proc = subprocess.Popen(cmd, cwd=root.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak_rss = 0
    reader = threading.Thread(target=lambda: proc.stdout.read(), daemon=True)
    reader.start()
    while proc.poll() is None:
        peak_rss = max(peak_rss, _tree_rss(proc.pid))
        time.sleep(0.05)
    reader.join(timeout=5)
    figures = {'tree_pss_peak_mb': round(peak_rss / 2 ** 20)}
    try:
        out, raw = strict_load(root.results_path)
        tests = by_id(out)
        assert 'Autograder error' not in [t['name'] for t in out['tests']], \
            'the grader itself did not answer: %s %s' % ([t.get('output', '')[-1500:] for t in out['tests']],
                                                         out.get('extra_data'))
        if cgroup:
            usage, oom_kills = _cgroup_figures(*cgroup)
            figures.update(cgroup=cgroup[0], cgroup_peak_mb=round(usage / 2 ** 20), oom_kills=oom_kills)
        if name == 'reference':
            graded_fully(out, tests)
            assert figures.get('oom_kills', 0) == 0
            assert cgroup or peak_rss < 768 << 20, figures   # PSS sums are estimates: the cgroup's figure rules
        elif name == 'memory_hog':
            msg = tests['submission']['output']
            assert 'could not be imported' in msg and 'SIGKILL' in msg, msg   # the child, not the grader
            # the kernel killed it: in the test's 768 MB cgroup, or first in the grading's own cgroup
            # (sandbox.cgroup_memory_mb, smaller; cgroup v1 counts an OOM kill only where it happened)
            assert (figures['oom_kills'] >= 1 or 'out of memory' in msg) and total(out) == 0
        else:
            assert total(out) < possible(out) or name == 'print_50mb'
            assert figures.get('oom_kills', 0) == 0
            assert cgroup or peak_rss < 768 << 20, figures   # PSS sums are estimates: the cgroup's figure rules
    finally:
        if cgroup:
            for _ in range(50):
                try:
                    os.rmdir(cgroup[1])
                    break
                except OSError:
                    time.sleep(0.1)
        os.makedirs(os.path.dirname(MEMORY_FIGURES), exist_ok=True)
        known = {}
        if os.path.exists(MEMORY_FIGURES):
            with open(MEMORY_FIGURES) as f:
                known = json.load(f)
        known[name] = figures
        with open(MEMORY_FIGURES, 'w') as f:
            json.dump(known, f, indent=1)
    print('memory %s: %s' % (name, figures))
