"""
Each hostile submission of tests/hostile/ is graded through ./run_autograder in a temporary
AUTOGRADER_ROOT. Every case must end with a valid results.json written by the grader, a
message that names what went wrong, and no score the submission did not earn; no process of
the sandbox user may survive the grading.

Timeouts stay at grading.yaml's values except where a case hangs on purpose: there the
copy of grading.yaml in $ROOT/source gets a few seconds for the one test that hangs.
"""

import os
import pwd
import re
import subprocess
import sys
import time

import pytest

from ag_helpers import (REPO, SANDBOXED, by_id, mode, possible, sandbox_processes,
                      sandbox_uid, total, grading_text)
from autograder import GRADING_YAML, config, sandbox

HOSTILE = os.path.join(REPO, 'tests', 'hostile')
GRADING = config.load(GRADING_YAML)
CAP = GRADING.sandbox['max_output_chars']
PROFILE = GRADING.profiles['cpu']
IMPLEMENTATION = [t.id for t in GRADING.enabled_tests() if t.id != 'submission']
ROPE_TESTS = ('rope', 'rope-cache', 'mha-rope', 'gqa-rope')


def read(name):
    with open(os.path.join(HOSTILE, name, 'model.py')) as f:
        return f.read()


def describe(pids):
    out = []
    for pid in pids:
        try:
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                out.append('%d %s' % (pid, f.read().replace(b'\0', b' ').decode(errors='replace')[:200]))
        except OSError:
            out.append(str(pid))
    return out


def full(t):
    return t['score'] == t['max_score']


def all_zero(tests, ids=IMPLEMENTATION):
    bad = {i: tests[i]['score'] for i in ids if tests[i]['score'] != 0}
    assert not bad, 'points for a hostile submission: %s' % bad


# ----------------------------------------------------------------------------- per-case checks
# each gets (results dict, {test id: entry}, the AutograderRoot)

def check_syntax_error(out, tests, root):
    line = next(i for i, l in enumerate(read('syntax_error').splitlines(), 1) if l.rstrip().endswith('+ offset +'))
    assert 'syntax error in model.py line %d' % line in tests['submission']['output']
    for tid in IMPLEMENTATION:
        assert 'not graded: syntax error' in tests[tid]['output']
    all_zero(tests)


def check_import_subprocess(out, tests, root):
    assert re.search(r"line \d+ imports 'subprocess', which the autograder does not allow", tests['submission']['output'])
    all_zero(tests)


def check_import_wandb(out, tests, root):
    assert re.search(r"line \d+ imports 'wandb', which the autograder does not provide", tests['submission']['output'])
    all_zero(tests)


def check_loop_at_import(out, tests, root):
    msg = tests['submission']['output']
    assert 'could not be imported' in msg and 'ran longer than the 5 s allowed' in msg, msg
    all_zero(tests)


def check_loop_in_forward(out, tests, root):
    assert tests['rope-cache']['score'] == 0
    assert 'timed out' in tests['rope-cache']['output'] and 'ran longer than the 4 s allowed' in tests['rope-cache']['output']
    others = {i: t for i, t in tests.items() if i != 'rope-cache'}
    assert not [i for i, t in others.items() if 'timed out' in t['output']]
    assert [i for i, t in others.items() if not full(t)] == []  # the rest is the reference: every point earned
    assert total(out) == possible(out) - tests['rope-cache']['max_score']


def check_alloc_at_import(out, tests, root):
    msg = tests['submission']['output']
    assert 'could not be imported' in msg and 'allocate' in msg, msg
    all_zero(tests)


def check_alloc_in_forward(out, tests, root):
    for tid in ('gqa', 'gqa-rope', 'memory', 'loss-curve'):
        assert tests[tid]['score'] == 0, tid
        assert 'allocate' in tests[tid]['output'], tests[tid]['output']
    for tid in ('rope', 'rope-cache', 'mha-rope'):  # CausalSelfAttention and RoPE do not allocate
        assert full(tests[tid]), tests[tid]['output']


def check_print_50mb(out, tests, root):
    # a correct model that prints a lot earns its points; nothing it printed reaches results.json whole
    assert total(out) == possible(out)
    assert 'model.py printed at import' in tests['submission']['output']
    assert os.path.getsize(root.results_path) < 200_000
    assert len(out['extra_data']['child_log_tail']) <= 2000


def check_sys_exit_at_import(out, tests, root):
    assert 'sys.exit(0)' in tests['submission']['output']
    all_zero(tests)


def check_os_exit_at_import(out, tests, root):
    msg = tests['submission']['output']
    assert 'exited with code 0' in msg and 'os._exit' in msg, msg
    all_zero(tests)


def check_fork_bomb(out, tests, root):
    msg = tests['submission']['output']
    assert 'could not be imported' in msg and 'ran longer than the 5 s allowed' in msg, msg
    all_zero(tests)


def check_write_results(out, tests, root):
    target = os.path.join(root.results_dir, 'results.json')
    assert 'HOSTILE-WRITE %s: PermissionError' % target in tests['submission']['output']
    assert mode(root.results_dir) == (0o700, 0)   # root-only while grading (and after)
    time.sleep(1.0)  # the detached writer, had it survived, would try again within 0.1 s
    with open(root.results_path) as f:
        assert 'HOSTILE-FAKE' not in f.read()
    all_zero(tests)


def check_read_fixtures(out, tests, root):
    msg = tests['submission']['output']
    lines = [l for l in msg.splitlines() if l.startswith('HOSTILE-READ')]
    assert len(lines) == 4, msg
    assert all(l.endswith(': PermissionError') for l in lines), msg
    assert mode(root.source)[0] == 0o700
    all_zero(tests)


def check_monkeypatch(out, tests, root):
    # the RoPE sign bug fails as it would without the patches: comparisons run in the harness
    for tid in ROPE_TESTS:
        assert tests[tid]['score'] == 0, tid
        assert 'max abs error' in tests[tid]['output']
    assert full(tests['gqa'])
    assert total(out) < possible(out)


def check_nan_outputs(out, tests, root):
    for tid in ROPE_TESTS:
        assert tests[tid]['score'] == 0, tid
    assert not full(tests['model'])  # its RoPE configurations
    for tid in ROPE_TESTS:
        assert 'non-finite' in tests[tid]['output'], tests[tid]['output']
    assert full(tests['gqa'])  # no RoPE there


def check_wrong_shape(out, tests, root):
    m = PROFILE['module']
    want = 'shape (%d, %d, %d), expected (%d, %d, %d)' % (m['batch'], m['seq'] - 1, m['n_embd'],
                                                         m['batch'], m['seq'], m['n_embd'])
    for tid in ('gqa', 'gqa-rope'):
        assert tests[tid]['score'] == 0
        assert want in tests[tid]['output'], tests[tid]['output']
    assert full(tests['rope']) and full(tests['mha-rope'])


def check_forge_outputs(out, tests, root):
    all_zero(tests)


CASES = {
    # name: (timeouts for the copy of grading.yaml, check)
    'syntax_error': ({}, check_syntax_error),
    'import_subprocess': ({}, check_import_subprocess),
    'import_wandb': ({}, check_import_wandb),
    'loop_at_import': ({'submission': 5}, check_loop_at_import),
    'loop_in_forward': ({'rope-cache': 4}, check_loop_in_forward),
    'alloc_at_import': ({}, check_alloc_at_import),
    'alloc_in_forward': ({}, check_alloc_in_forward),
    'print_50mb': ({}, check_print_50mb),
    'sys_exit_at_import': ({}, check_sys_exit_at_import),
    'os_exit_at_import': ({}, check_os_exit_at_import),
    'fork_bomb': ({'submission': 5}, check_fork_bomb),
    'write_results': ({}, check_write_results),
    'read_fixtures': ({}, check_read_fixtures),
    'monkeypatch': ({}, check_monkeypatch),
    'nan_outputs': ({}, check_nan_outputs),
    'wrong_shape': ({}, check_wrong_shape),
    'forge_outputs': ({}, check_forge_outputs),
    'forge_malformed': ({}, check_forge_outputs),
}
# where running as the same user as the grader would be unsafe or the check meaningless
NEED_SANDBOX = ('fork_bomb', 'write_results', 'read_fixtures')


def test_corpus_matches_cases():
    sys.path.insert(0, HOSTILE)
    from os_cases import CASES as OS_CASES   # the attacks on the machine: tests/corpora/test_hostile_os.py
    on_disk = sorted(d for d in os.listdir(HOSTILE) if os.path.isfile(os.path.join(HOSTILE, d, 'model.py')))
    assert on_disk == sorted(list(CASES) + list(OS_CASES))


def test_corpus_is_built_from_the_current_reference():
    proc = subprocess.run([sys.executable, os.path.join(HOSTILE, 'build.py'), '--check'],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize('name', sorted(CASES))
def test_hostile(name, ag_root):
    timeouts, check = CASES[name]
    if name in NEED_SANDBOX and not SANDBOXED:
        pytest.skip('needs root and the sandbox user (./setup.sh)')
    root = ag_root(grading_text(timeouts))
    if name == 'read_fixtures':  # the attack would succeed without the grader's lockdown
        pw = pwd.getpwuid(sandbox_uid())
        secret = os.path.join(root.source, 'autograder', 'fixtures', 'cpu', 'expected.npz')
        assert sandbox._user_can_access(pw.pw_uid, pw.pw_gid, [(secret, os.R_OK)])
    root.submit('model.py', read(name))
    started = time.time()
    out, proc = root.run()
    tests = by_id(out)
    assert set(tests) == {t.id for t in GRADING.enabled_tests()}, proc.stdout[-2000:]
    assert 'Autograder error' not in [t['name'] for t in out['tests']]
    assert isinstance(out['execution_time'], (int, float))
    for t in out['tests']:
        assert len(t.get('output', '')) <= CAP + 100
        assert 0 <= t['score'] <= t['max_score']
    check(out, tests, root)
    left = sandbox_processes()
    assert left == [], 'processes of the sandbox users survived the grading: %s' % describe(left)
    assert time.time() - started < 180  # bounded, whatever the submission does
