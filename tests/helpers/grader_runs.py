"""
Shared helpers for the autograder's own tests (imported as `grader_runs`: a module called
`conftest` would be shadowed by the other test folders' conftest.py in one pytest run).

`AutograderRoot` builds Gradescope's layout in a temporary folder ($ROOT/source,
$ROOT/submission, $ROOT/results) and runs ./run_autograder on it with AUTOGRADER_ROOT set.
$ROOT/source is what the autograder zip unpacks to: autograder/, reference/ and grading.yaml
are real copies (world-readable before grading, so that only the grader's own lockdown keeps
them from student code; grading.yaml may be edited, e.g. shorter timeouts), the rest are
links into this checkout. Every grading leaves a results.json that must pass
autograder.judge.results.validate.

Tests that need the sandbox user (root, with hw1student created by setup.sh) are skipped
elsewhere: without it student code runs as the grader's own user.
"""

import contextlib
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from autograder import GRADING_YAML  # noqa: E402
from autograder.judge import config, results  # noqa: E402
from autograder.sandbox import users  # noqa: E402

SANDBOX_USER = config.load(GRADING_YAML).sandbox['user']


def sandbox_uid():
    """uid of the sandbox user when the grader would use it (root, user exists), else None."""
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SANDBOX_USER).pw_uid
    except KeyError:
        return None


SANDBOXED = sandbox_uid() is not None
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox user %r (./setup.sh)'
                                   % SANDBOX_USER)

# the group of the test running now (tests/conftest.py): 'alone', 'gradescope', 'lockdown:<module>' or its module;
# None outside pytest
RUNNING_GROUP = None


def needs_lockdown(what):
    """
    Called where a test opens a copy of the grader to the sandbox users: a grading without namespaces beside it
    would be refused (its self-test finds the open copy) for a reason not its own. Such a test is marked
    `lockdown` (or `gradescope_mode`, or `alone`): tests/conftest.py.
    """
    if RUNNING_GROUP is not None and RUNNING_GROUP not in ('alone', 'gradescope') \
            and not RUNNING_GROUP.startswith('lockdown:'):
        pytest.fail('%s: mark the test `lockdown` (tests/conftest.py): it must never run beside a grading without '
                    'namespaces' % what, pytrace=False)


def needs_gradescope_mode(what):
    """Called where a test grades without namespaces (Gradescope's mode): its self-test refuses while any copy of the
    grader is open to the sandbox user. Such a test is marked `gradescope_mode` (or `alone`): tests/conftest.py."""
    if RUNNING_GROUP not in (None, 'alone', 'gradescope'):
        pytest.fail('%s: mark the test `gradescope_mode` (tests/conftest.py): it must never run beside an open copy of '
                    'the grader' % what, pytrace=False)


def without_namespaces(env):
    """Whether a grading in the environment `env` runs without namespaces (HW1_SANDBOX_DISABLE names them, or
    'tmpfs')."""
    from autograder.sandbox import defences
    names = [n.strip() for n in env.get('HW1_SANDBOX_DISABLE', '').split(',')]
    return 'namespaces' in [defences.ALIASES.get(n, n) for n in names]


@contextlib.contextmanager
def pool_user(uid=None):
    """
    A user of the sandbox pool (a pwd entry) held by its lock, as a grading holds it, while the test acts as it:
    no grading beside the test kills its processes, sweeps its files or claims it meanwhile, and
    sandbox_processes() passes it by. `uid`: that user (waits until no grading holds it); default: the first free.
    """
    from autograder.sandbox import users
    if uid is None:
        pool, _ = users.sandbox_pool(SANDBOX_USER, config.load(GRADING_YAML).sandbox['pool_size'])
        (uid, _gid), lock = users.claim(pool)
    else:
        lock = users.try_lock(uid, blocking=True)
    try:
        yield pwd.getpwuid(uid)
    finally:
        if lock is not None:
            os.close(lock)


# copied, not linked: the secrets (so that the test sees the grader protect them) and what tests edit
COPIED = ('autograder', 'reference', 'grading.yaml')
REFERENCE_FILES = ('chargpt.py', 'mingpt/__init__.py', 'mingpt/model.py', 'mingpt/trainer.py', 'mingpt/utils.py')


def grading_text(timeouts=None, edit=None):
    """grading.yaml with some test timeouts changed ({test id: seconds}) and/or edited by `edit(dict)`."""
    with open(GRADING_YAML) as f:
        text = f.read()
    if not timeouts and not edit:
        return text
    data = yaml.safe_load(text)
    for t in data['tests']:
        if t['id'] in (timeouts or {}):
            t['timeout'] = timeouts[t['id']]
    if edit:
        edit(data)
    return yaml.safe_dump(data, sort_keys=False)


def _copy_tree(src, dst):
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))


class AutograderRoot:
    def __init__(self, grading=None):
        needs_lockdown('an AUTOGRADER_ROOT is open to the sandbox users until its grading locks it')
        # not under /tmp: with namespaces the child's /tmp is its own private folder, where a relocated
        # /autograder/... path would be out of reach for the wrong reason
        base = '/var/lib/hw1-agtest' if os.geteuid() == 0 else tempfile.gettempdir()
        os.makedirs(base, mode=0o755, exist_ok=True)
        self.path = tempfile.mkdtemp(prefix='hw1-agtest-', dir=base)
        self.source = os.path.join(self.path, 'source')
        self.submission = os.path.join(self.path, 'submission')
        self.results_dir = os.path.join(self.path, 'results')
        self.results_path = os.path.join(self.results_dir, 'results.json')
        os.makedirs(self.source)
        os.makedirs(self.submission)
        for name in sorted(os.listdir(REPO)):
            # never a course's key and fixtures (course/): the tests grade with the committed ones
            if name.startswith('.') or name in COPIED or name in ('results', 'dist', '__pycache__', 'course'):
                continue
            os.symlink(os.path.join(REPO, name), os.path.join(self.source, name))
        _copy_tree(os.path.join(REPO, 'autograder'), os.path.join(self.source, 'autograder'))
        for rel in REFERENCE_FILES:
            os.makedirs(os.path.dirname(os.path.join(self.source, 'reference', rel)), exist_ok=True)
            shutil.copyfile(os.path.join(REPO, 'reference', rel), os.path.join(self.source, 'reference', rel))
        with open(os.path.join(self.source, 'grading.yaml'), 'w') as f:
            f.write(grading if grading is not None else grading_text())
        # like /autograder after the image build: everything readable by everyone
        for root, dirs, files in os.walk(self.path):
            os.chmod(root, 0o755)
            for name in files:
                if not os.path.islink(os.path.join(root, name)):  # a link's chmod would change the repo's file
                    os.chmod(os.path.join(root, name), 0o644)

    def relocate(self, text):
        """Gradescope's /autograder/... paths in a submission, moved to this root."""
        return text.replace('/autograder/', self.path + '/')

    def submit(self, name, text):
        target = os.path.join(self.submission, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, 'w') as f:
            f.write(self.relocate(text))
        os.chmod(target, 0o644)
        return target

    def run(self, timeout=600, source=None, env=None):
        """./run_autograder on this root (`env`: extra variables). Returns (results dict, CompletedProcess)."""
        env = dict(os.environ, AUTOGRADER_ROOT=self.path, PYTHON=sys.executable, **(env or {}))
        if without_namespaces(env):
            needs_gradescope_mode('grading without namespaces')
        env.pop('HW1_SOURCE', None)
        if source:
            env['HW1_SOURCE'] = source
        proc = subprocess.run(['bash', os.path.join(REPO, 'run_autograder')], cwd=self.path, env=env, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.returncode == 0, proc.stdout[-3000:]
        return load_results(self.results_path), proc

    def cleanup(self):
        shutil.rmtree(self.path, ignore_errors=True)


def load_results(path):
    with open(path) as f:
        out = json.load(f)
    results.validate(out)
    return out


def by_id(out, grading_path=GRADING_YAML):
    """{test id: result entry}, matched through the numbers grading.yaml gives each id."""
    numbers = {t.number: t.id for t in config.load(grading_path).tests}
    return {numbers[t['number']]: t for t in out['tests'] if t.get('number') in numbers}


def total(out):
    return sum(t['score'] for t in out['tests'])


def possible(out):
    """Every point there is: the tests' maxima (the required 100) plus the extra credit, which is scored on top
    of tests worth max_score 0 (results.add_points writes the split into extra_data)."""
    split = (out.get('extra_data') or {}).get('points')
    return split['required_max'] + split['extra_credit_max'] if split else sum(t['max_score'] for t in out['tests'])


def full(t):
    """Every point of one test: its max_score, or for extra credit (max_score 0) points on top;
    never 'Not attempted'."""
    return t['status'] == 'passed' and t['score'] >= t['max_score'] \
        and not t.get('output', '').startswith('Not attempted')


# the most an extra-credit test can score (its weight) on top of its max_score of 0
EXTRA_CREDIT_MAX = max([t.weight for t in config.load(GRADING_YAML).tests if t.optional_part] or [0])


def score_in_range(t):
    return 0 <= t['score'] <= (t['max_score'] if t['max_score'] > 0 else EXTRA_CREDIT_MAX)


def sandbox_uids():
    """uids of the sandbox user pool (hw1student, hw1student1, ...) when the grader would use it."""
    if sandbox_uid() is None:
        return []
    pool, _ = users.sandbox_pool(SANDBOX_USER, config.load(GRADING_YAML).sandbox['pool_size'])
    return [uid for uid, _gid in pool or []]


def sandbox_processes():
    """
    pids of the sandbox users' live processes, each user checked under its sandbox lock so that no
    grading is in flight for it; a user that another grading holds right now is not checked. Probe
    processes change user without exec (their /proc folder stays root's): their status is read.
    """
    pids = _sandbox_processes_now()
    if pids:
        # One more look a moment later: a Sandbox being built beside this test (another xdist
        # worker's grading) forks a process as the pool's first user for a few milliseconds, without
        # its lock, to ask whether that user can run the interpreter (users.child_python). A
        # process that survived a grading is still there; that one is gone.
        time.sleep(SETTLE_SECONDS)
        pids = sorted(set(pids) & set(_sandbox_processes_now()))
    return pids


SETTLE_SECONDS = 0.5


def _sandbox_processes_now():
    pids = []
    for uid in sandbox_uids():
        lock = users.try_lock(uid, blocking=False)
        if lock is None and users.lock_path(uid) is not None:
            continue  # busy with someone else's grading
        try:
            pids += users.processes_of(uid)
        finally:
            if lock is not None:
                os.close(lock)
    return pids


def mode(path):
    st = os.stat(path)
    return stat.S_IMODE(st.st_mode), st.st_uid


def sandbox_in_mode(request, weaker='gradescope', disable='namespaces,cgroups'):
    """
    The body of a module-scoped `sandbox` fixture parametrized over 'strongest' and `weaker`: one Sandbox
    with every defence this machine gives, or with Gradescope's (HW1_SANDBOX_DISABLE=namespaces,cgroups:
    no namespaces and no writable cgroups; Landlock where the kernel offers it, as Gradescope's may), or
    what `disable` turns off instead. The environment is restored afterwards.
    """
    from autograder.sandbox import Sandbox
    if request.param == weaker and not SANDBOXED:
        pytest.skip('the weaker set-up differs only under root')
    old = os.environ.pop('HW1_SANDBOX_DISABLE', None)
    if request.param == weaker:
        needs_gradescope_mode('grading without namespaces')
        os.environ['HW1_SANDBOX_DISABLE'] = disable
    try:
        with Sandbox(config.load(GRADING_YAML).sandbox) as sb:
            yield sb
    finally:
        os.environ.pop('HW1_SANDBOX_DISABLE', None)
        if old is not None:
            os.environ['HW1_SANDBOX_DISABLE'] = old
