"""
A wall, not a search, in every mode (issue 40, item 4). Copies of the grader left open to everyone where the search
once missed them (five folders deep under /tmp, in /dev/shm, a zip renamed to hide its key), and a secret no search
can recognise (a key renamed notes.txt): a submission that reads them at import against the same planted machine
with an honest submission, in each mode:

- with namespaces (the strongest here): the allow-listed root holds none of them; the attack reads nothing;
- without namespaces, with Landlock (Gradescope's mode on a kernel that offers it): the probe may open only its
  allow-list; the attack reads nothing, the unrecognised secret included, and the self-test proved it on decoys;
- with neither: the search finds every copy above and refuses the grading before any student code runs, the honest
  one as well (the attack gains nothing); the unrecognised secret is what `sandbox check` and STAFF.md warn of.

Each mode grades only the import check, in a Sandbox of its own: a few seconds each.
"""

import os
import shutil
import tempfile
import zipfile

import pytest

from grader_runs import SANDBOXED, needs_gradescope_mode, needs_lockdown, sandbox_processes
from autograder import GRADING_YAML
from autograder.judge import config, probe_job
from autograder.sandbox import Sandbox, SandboxRefused, cli, wall

GRADING = config.load(GRADING_YAML)
JOB = {'profile': GRADING.profiles['cpu'].as_json()}
SECRET = 'HOSTILE-SECRET-40'
MODES = {'strongest': '', 'landlock': 'namespaces,cgroups', 'no-wall': 'namespaces,cgroups,landlock'}
needs_sandbox = pytest.mark.skipif(not SANDBOXED, reason='needs root and the sandbox users (./setup.sh)')
# open copies are planted: never beside a grading without namespaces (tests/conftest.py)
pytestmark = [needs_sandbox, pytest.mark.lockdown]

ATTACK = '''
import os, zipfile
found = []
for path in %r:
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as z:
                text = ' '.join(z.read(n).decode() for n in z.namelist())
        else:
            with open(path) as f:
                text = f.read()
        found.append('READ %%s %%s' %% (path, text.strip()))
    except OSError as e:
        found.append('REFUSED %%s %%s' %% (path, type(e).__name__))
for root in ('/tmp', '/dev/shm', '/var/tmp'):   # and a search of its own, as the attack of round five did
    for folder, dirs, files in os.walk(root):
        for name in files:
            try:
                with open(os.path.join(folder, name), 'rb') as f:
                    if %r.encode() in f.read(1 << 16):
                        found.append('FOUND %%s' %% os.path.join(folder, name))
            except OSError:
                pass
print('\\n'.join(found))
'''


def _open(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)


def plant():
    """(tops to remove, {what: path}): the open copies and the unrecognised secret, every folder 0755, file 0644."""
    needs_lockdown('open copies of the grader')
    tops = [tempfile.mkdtemp(prefix='hw1-wall-', dir=d) for d in ('/tmp', '/dev/shm', '/var/tmp')]
    deep = os.path.join(tops[0], 'a', 'b', 'c', 'd', 'e')
    paths = {'deep key': os.path.join(deep, 'source', 'autograder', 'fixtures', 'draw.key'),
             'shm reference': os.path.join(tops[1], 'source', 'reference', 'mingpt', 'model.py'),
             'renamed zip': os.path.join(tops[2], 'notes.dat'),
             'unrecognised': os.path.join(tops[0], 'a', 'b', 'notes.txt')}
    _open(paths['deep key'], SECRET)
    _open(os.path.join(deep, 'source', 'autograder', 'judge', 'grade.py'), SECRET)
    _open(paths['shm reference'], SECRET)
    _open(paths['unrecognised'], SECRET)
    with zipfile.ZipFile(paths['renamed zip'], 'w') as z:
        z.writestr('autograder/fixtures/draw.key', SECRET)
    for top in tops:
        for root, dirs, files in os.walk(top):
            os.chmod(root, 0o755)
            for name in files:
                os.chmod(os.path.join(root, name), 0o644)
    return tops, paths


def grade(mode, code, tmp_path):
    """The import check of `code` in a Sandbox of `mode` (MODES): its result and the session's isolation."""
    old = os.environ.pop('HW1_SANDBOX_DISABLE', None)
    if MODES[mode]:
        needs_gradescope_mode('grading without namespaces')
        os.environ['HW1_SANDBOX_DISABLE'] = MODES[mode]
    try:
        with Sandbox(GRADING.sandbox) as sandbox:
            path = tmp_path / 'model.py'
            path.write_text(code)
            r = probe_job.execute(sandbox, probe_job.RunPlan(str(path), JOB, (), 60))
            return r.import_result, r.isolation
    finally:
        os.environ.pop('HW1_SANDBOX_DISABLE', None)
        if old is not None:
            os.environ['HW1_SANDBOX_DISABLE'] = old


@pytest.mark.parametrize('mode', [pytest.param(m, marks=pytest.mark.gradescope_mode) if MODES[m] else m
                                  for m in MODES])
def test_copies_the_search_missed_are_out_of_reach_in_every_mode(mode, tmp_path):
    if mode == 'landlock' and wall.landlock_abi() < 1:
        pytest.skip('the kernel offers no Landlock here')
    tops, paths = plant()
    attack = ATTACK % (sorted(paths.values()), SECRET)
    try:
        if mode == 'no-wall':   # the search is the only defence: it finds every copy and refuses, honest code too
            for code in ('X = 1\n', attack):
                with pytest.raises(SandboxRefused) as refused:
                    grade(mode, code, tmp_path)
                message = str(refused.value)
                for what in ('deep key', 'shm reference', 'renamed zip'):
                    assert '%s is readable' % paths[what] in message, (what, message)
            return
        honest, _ = grade(mode, 'X = 1\n', tmp_path)
        assert honest.status == 'ok', honest.message
        result, isolation = grade(mode, attack, tmp_path)
        assert result.status == 'ok', result.message
        out = result.info['stdout']
        assert SECRET not in out and 'READ' not in out and 'FOUND' not in out, out
        assert out.count('REFUSED') == len(paths), out
        assert isolation['selftest']['filesystem'] is True and isolation['grader_copies'] >= 3
        if mode == 'landlock':   # refused by the wall, not missing; and the wall proven on decoys before
            assert out.count('PermissionError') == len(paths), out
            assert isolation['landlock'] is True and isolation['landlock_decoys'] == 3, isolation
            assert isolation['landlock_abi'] == wall.landlock_abi() and 'wall' not in isolation
            lines, safe = cli.describe(isolation)   # what `sandbox check` prints of the same record
            assert safe and any(line.split()[:2] == ['landlock_decoys', '3'] for line in lines), lines
            assert any(line.split()[:2] == ['filesystem', 'Landlock'] for line in lines), lines
    finally:
        for top in tops:
            shutil.rmtree(top, ignore_errors=True)
    assert sandbox_processes() == []


@pytest.mark.gradescope_mode
def test_without_namespaces_or_landlock_the_report_says_single_tenant():
    """What a grading and `sandbox check` report in that mode, decided before anything runs (no grading: on a machine
    with an open copy the grading itself is refused, which the test above shows)."""
    old = os.environ.pop('HW1_SANDBOX_DISABLE', None)
    os.environ['HW1_SANDBOX_DISABLE'] = MODES['no-wall']
    try:
        with Sandbox(GRADING.sandbox) as sandbox:
            isolation = dict(sandbox.isolation, selftest={'filesystem': True})
    finally:
        os.environ.pop('HW1_SANDBOX_DISABLE', None)
        if old is not None:
            os.environ['HW1_SANDBOX_DISABLE'] = old
    assert 'single-tenant machine' in isolation['wall'], isolation
    assert any(line.startswith('landlock: ') for line in isolation['lacks']), isolation['lacks']
    lines, safe = cli.describe(isolation)
    assert safe and lines[-1].startswith('sandbox: verdict: student code runs here, but the file system is NOT walled: '
                                         'safe only on a single-tenant machine'), lines[-1]
