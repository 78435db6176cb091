"""
Each hostile submission of tests/hostile/ is graded through ./run_autograder in a temporary
AUTOGRADER_ROOT. Every case must end with a valid results.json written by the grader, a
message that names what went wrong, and no score the submission did not earn; no process of
the sandbox user may survive the grading.

Timeouts stay at grading.yaml's values except where a case hangs on purpose: there the
copy of grading.yaml in $ROOT/source gets a few seconds for the one test that hangs.

Besides the model.py files of tests/hostile/, UPLOADS are hostile uploads built here (links,
hard links, zips, bytes that are not UTF-8). Every case must also leave a strict results.json
(no NaN/Infinity), no temporary folder of the grader behind, and the grader's own peak memory
(extra_data.grader_peak_rss_mb) under GRADER_MEMORY_MB.
"""

import json
import os
import zipfile
import re
import stat
import subprocess
import sys
import time

import grading_store
import pytest

from grader_runs import (REPO, SANDBOXED, by_id, full, pool_user, possible, sandbox_processes,
                        score_in_range, sandbox_uid, total, grading_text)
from autograder import GRADING_YAML
from autograder.judge import config
from autograder.contract import report_schema
from autograder.judge.student_text import WITHHELD
from autograder.sandbox import users

HOSTILE = os.path.join(REPO, 'tests', 'hostile')
GRADING = config.load(GRADING_YAML)
# every case opens its AUTOGRADER_ROOT to the sandbox users until the grading locks it; those graded in Gradescope's
# mode are `gradescope_mode` as well (tests/conftest.py)
pytestmark = pytest.mark.lockdown
CAP = GRADING.sandbox['max_output_chars']
PROFILE = GRADING.profiles['cpu']
IMPLEMENTATION = [t.id for t in GRADING.enabled_tests() if t.id != 'submission']
GRADER_MEMORY_MB = 250   # the harness alone (numpy, fixtures, judges) is ~45 MB; Gradescope gives the tree 768 MB
PEAK_MB = {}             # case -> the grader's peak resident memory, printed at the end (pytest -s)


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


def reference_scores():
    """{test id: score} of the reference itself, graded once in the run (tests/helpers/grading_store.py: the grading
    tests/e2e/test_grading.py checks): the honest score of code that only adds an attack."""
    out, _ = grading_store.reference()
    return {i: t['score'] for i, t in by_id(out).items()}


def check_import_subprocess(out, tests, root):
    # a module a model has no use for is a warning, never a 0: the OS sandbox is the wall
    assert re.search(r"Warning: model.py line \d+ imports 'subprocess', which a model has no use for; it costs nothing",
                     tests['submission']['output']), tests['submission']['output']
    assert not [i for i, t in tests.items() if t['output'].startswith('not graded:')]
    assert {i: t['score'] for i, t in tests.items()} == reference_scores()


def check_import_wandb(out, tests, root):
    # a module the grader lacks, imported at the top: importing model.py fails, in one sentence with its line
    msg = tests['submission']['output']
    assert "could not be imported: model.py imports 'wandb', which the autograder does not provide" in msg, msg
    assert re.search(r'at model.py line \d+, in <module>: import wandb', msg), msg
    all_zero(tests)


def check_loop_at_import(out, tests, root):
    msg = tests['submission']['output']
    assert 'could not be imported' in msg and 'ran longer than the 5 s allowed' in msg, msg
    all_zero(tests)


def check_loop_in_forward(out, tests, root):
    assert tests['rope-cache']['score'] == 0
    assert 'timed out' in tests['rope-cache']['output'] \
        and 'ran longer than the 4 s allowed' in tests['rope-cache']['output']
    others = {i: t for i, t in tests.items() if i != 'rope-cache'}
    assert not [i for i, t in others.items() if 'timed out' in t['output']]
    # the rest is the reference: every point earned, but RoPE's own 2.1, which its hang charges (a part that hangs
    # costs its whole part; the later cases ran with the grader's RoPE)
    assert [i for i, t in others.items() if not full(t)] == ['rope']
    assert tests['rope']['output'].startswith('0 points: your RoPE did not return in test 2.2'), tests['rope']['output']
    assert total(out) == possible(out) - tests['rope-cache']['max_score'] - tests['rope']['max_score']


def check_alloc_at_import(out, tests, root):
    msg = tests['submission']['output']
    assert 'could not be imported' in msg and 'allocate' in msg, msg
    all_zero(tests)


def check_alloc_in_forward(out, tests, root):
    # the allocation is in GroupedQueryAttention.forward: it costs the tests of that part; under set_aside: on_evidence
    # the training (10.1) runs at n_kv_head = n_query_head (the student's CausalSelfAttention) and judges that
    for tid in ('gqa', 'gqa-rope', 'memory'):
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
    reached_the_probes(tests)
    target = os.path.join(root.results_dir, 'results.json')
    # out of reach: root-only (PermissionError), or not in the probe's allow-listed file system at all, where
    # creating its folder meets the read-only root (OSError: EROFS)
    assert re.search(r'HOSTILE-WRITE %s: (PermissionError|OSError|FileNotFoundError)' % re.escape(target),
                     tests['submission']['output']), tests['submission']['output']
    # root-only from the start of the grading, and for good (check_read_fixtures holds the modes)
    time.sleep(1.0)  # the detached writer, had it survived, would try again within 0.1 s
    with open(root.results_path) as f:
        assert 'HOSTILE-FAKE' not in f.read()
    all_zero(tests)


def check_read_fixtures(out, tests, root):
    reached_the_probes(tests)
    msg = tests['submission']['output']
    # what model.py printed is shown on one line (judge/student_text.py: a newline of its own reads "\n")
    lines = [l for l in msg.replace('\\n', '\n').splitlines() if l.startswith('HOSTILE-READ')]
    assert len(lines) == 4, msg
    assert all(l.endswith(': PermissionError') or l.endswith(': FileNotFoundError') for l in lines), msg   # root-only,
    # or (with namespaces) not in the probe's allow-listed file system at all
    all_zero(tests)
    gradescope_layout_stays_locked(root)


# README's words on what a grading leaves root-only on Gradescope (its "How grading works"); the modes below hold them
README_LOCK = ('`/autograder` listable by nobody (0711), its `source/`, `submission/`, `results/` and '
               '`submission_metadata.json` root-only')


def gradescope_layout_stays_locked(root):
    """After the grading, as while it ran: nothing a probe wants is open to the sandbox user (README_LOCK). A lock
    given back at the end left the next reader, or a grading beside it, the fixtures and the reference."""
    readme = open(os.path.join(REPO, 'README.md')).read()
    assert README_LOCK in ' '.join(readme.split()) and 'they stay so after the grading' in ' '.join(readme.split())
    assert stat.S_IMODE(os.stat(root.path).st_mode) == 0o711
    for name in ('source', 'submission', 'results'):
        assert stat.S_IMODE(os.stat(os.path.join(root.path, name)).st_mode) & 0o077 == 0, name
    secret = os.path.join(root.source, 'autograder', 'fixtures', 'cpu', 'expected.npz')
    with pool_user(sandbox_uid()) as pw:   # asked as that user while no grading holds it
        assert not users.user_can_access(pw.pw_uid, pw.pw_gid, [(secret, os.R_OK)])


def check_monkeypatch(out, tests, root):
    # the RoPE sign bug fails as it would without the patches: comparisons run in the harness (RoPE's own
    # tests; under set_aside: on_evidence the attention tests judge the attention again with the grader's RoPE)
    for tid in ('rope', 'rope-cache'):
        assert tests[tid]['score'] == 0, tid
        assert 'max abs error' in tests[tid]['output']
    assert full(tests['gqa'])
    assert total(out) < possible(out)


def check_nan_outputs(out, tests, root):
    # RoPE's own tests see the NaN outputs; under set_aside: on_evidence the tests built on RoPE run again with
    # the grader's
    for tid in ('rope', 'rope-cache'):
        assert tests[tid]['score'] == 0, tid
        assert 'non-finite' in tests[tid]['output'], tests[tid]['output']
    assert full(tests['gqa'])  # no RoPE there


def check_wrong_shape(out, tests, root):
    m = PROFILE.module
    want = 'shape (%d, %d, %d), expected (%d, %d, %d)' % (m.batch, m.seq - 1, m.n_embd,
                                                         m.batch, m.seq, m.n_embd)
    for tid in ('gqa', 'gqa-rope'):
        assert tests[tid]['score'] == 0
        assert want in tests[tid]['output'], tests[tid]['output']
    assert full(tests['rope']) and full(tests['mha-rope'])


def reached_the_probes(tests):
    """A stand-alone forgery got past the upload check (its stub GPT is one of the handout's classes) and
    its import check passed, so every probe's process imported it and ran its attack."""
    msg = tests['submission']['output']
    assert "defines none of the handout's classes" not in msg and 'could not be imported' not in msg, msg
    assert 'model.py does not define the handout interface' in msg, msg   # only the stub: 1.1 names what it lacks
    assert not [i for i in IMPLEMENTATION if tests[i]['output'].startswith('not graded')], tests


def check_forge_outputs(out, tests, root):
    # every forged file was read as the probe's output (status ok, arrays of the right names and shapes) and
    # judged against the reference: zeros earn nothing
    reached_the_probes(tests)
    assert not [i for i in IMPLEMENTATION if 'the output could not be read' in tests[i]['output']], tests
    for tid in ('rope', 'gqa'):
        assert 'max abs error' in tests[tid]['output'] and 'got 0' in tests[tid]['output'], tests[tid]['output']
    # a forgery runs no module of its own: nothing is set aside without evidence from the case, and zeros earn nothing
    assert tests['model']['score'] == 0 and 'got 0' in tests['model']['output'], tests['model']['output']
    all_zero(tests)


def check_forge_malformed(out, tests, root):
    # report fields of the wrong JSON types make the probe unreadable; arrays of the wrong rank are wrong shapes
    reached_the_probes(tests)
    for tid in ('rope', 'rope-cache', 'gqa'):
        assert 'the output could not be read' in tests[tid]['output'] and 'of the report has the wrong type' \
            in tests[tid]['output'], tests[tid]['output']
    for tid in ('generate', 'loss-curve'):   # judged on what it forged (no module of its own ran): nothing earned
        assert tests[tid]['score'] == 0, tests[tid]['output']
    all_zero(tests)


# an optional test that builds on a required part the submission fails is "Not judged" (0 / 0, never red):
# it names the failing part instead of the attack's symptom, and scores nothing
OPTIONAL_TESTS = {t.id for t in GRADING.enabled_tests() if GRADING.is_extra_credit(t)}


def not_judged(test_id, test):
    """An optional test on a failed required part or left untouched (a stand-alone forgery defines none of it), or
    (issue 32) a test none of whose cases has anything of the student's left to judge: each says so instead of the
    attack's symptom, and scores nothing."""
    nothing_left = test['output'].startswith('Not judged: every case of this test runs only parts of yours')
    optional = test_id in OPTIONAL_TESTS and test['output'].startswith(('Not judged', 'Not attempted'))   # issue 33
    return (optional or nothing_left) and test['score'] == 0


def outputs_say(tests, words, ids=IMPLEMENTATION):
    missing = {i: tests[i]['output'][:300] for i in ids
               if words not in tests[i]['output'] and not not_judged(i, tests[i])}
    assert not missing, 'expected %r in: %s' % (words, missing)


def check_fifo_outputs(out, tests, root):
    reached_the_probes(tests)
    outputs_say(tests, 'is not a regular file')
    all_zero(tests)


def check_oversized_arrays(out, tests, root):
    reached_the_probes(tests)
    # 8.2: no module of this stand-alone forgery ran, so nothing is set aside; its tokens are far too many to read
    assert tests['generate']['score'] == 0 and 'far too large, not read' in tests['generate']['output'], \
        tests['generate']['output']
    assert 'd2_T5 has shape (2, 3, 5, 200000)' in tests['rope']['output']
    assert 'n_kv_head=1 has shape (2, 13, 480000)' in tests['gqa']['output']
    all_zero(tests)


def check_npz_bomb(out, tests, root):
    reached_the_probes(tests)
    # the member is rope's d2_T5: there it is refused as compressed; elsewhere as an array the test never returns
    assert 'arrays must be stored (np.savez)' in tests['rope']['output'], tests['rope']['output']
    outputs_say(tests, 'the output could not be read')
    all_zero(tests)


def check_npz_malformed(out, tests, root):
    reached_the_probes(tests)
    assert 'arrays must be stored' in tests['rope']['output']          # the corrupt deflate stream is never inflated
    assert 'BadZipFile' in tests['rope-cache']['output'] and 'CRC' in tests['rope-cache']['output']
    assert 'declares shape (1099511627776,)' in tests['mha-rope']['output']
    assert 'holds 5000 files' in tests['gqa']['output'] \
        and ('at most %d are allowed' % report_schema.MAX_ARRAYS) in tests['gqa']['output']
    all_zero(tests)


def check_report_numbers(out, tests, root):
    reached_the_probes(tests)
    assert 'out of range' in tests['rope']['output']                   # 1e400
    assert 'NaN' in tests['rope-cache']['output']
    assert '-Infinity' in tests['mha-rope']['output']
    assert "field 'seconds'" in tests['gqa']['output']                 # -5
    outputs_say(tests, 'the output could not be read')
    assert 'HOSTILE-NAN' not in json.dumps(out)
    all_zero(tests)


def check_many_notes(out, tests, root):
    reached_the_probes(tests)
    outputs_say(tests, "field 'notes'")
    assert os.path.getsize(root.results_path) < 100_000
    all_zero(tests)


def check_load_pretrained_hangs(out, tests, root):
    # a load_pretrained that never returns costs that test only, in one sentence
    lp = tests['load-pretrained']
    assert lp['score'] == 0 and 'timed out:' in lp['output'], lp['output']
    assert lp['output'].startswith('Your code was stopped in GPT.load_pretrained (model.py line '), lp['output']
    own = [line for line in lp['output'].splitlines() if line.strip() and 'scored 0% of its points' not in line]
    assert len(own) == 2, lp['output']   # where it was stopped, and the timeout (besides '... scored 0% ...')
    ref = reference_scores()
    assert {i: t['score'] for i, t in tests.items() if i != 'load-pretrained'} == \
        {i: s for i, s in ref.items() if i != 'load-pretrained'}


def check_forged_progress(out, tests, root):
    # there is no progress file any more: each probe is a process of its own, and its deadline counts the CPU
    # seconds the harness measures from outside. The forgery announces "end loss-curve" wherever its process can
    # write (files named progress, stdout and stderr, the harness link) when the training starts, then burns
    # 0.5 s of CPU per step (15 s in all over 30 steps, against the 8 s allowed here; the reference's
    # training takes ~1 s): the deadline stops it all the same.
    # gradients rests on the training's step-0 gradients (evidence from this probe), so it is lost with it;
    # every other test is the reference's own.
    assert 'end loss-curve' in out['extra_data']['child_log_tail']   # the attack fired: its stdout reached the log
    lc = tests['loss-curve']
    assert lc['score'] == 0 and 'timed out' in lc['output'] and 'ran longer than the 8 s allowed' \
        in lc['output'] and 'CPU time' in lc['output'], lc['output']
    # 10.1 runs parts that other probes proved return: the harness places no hang there (its process's own stack
    # dump decides nothing), so later probes run; every test but these two keeps its points
    hung = ('not run: GPT did not return in test %s' % GRADING.test('loss-curve').number)
    grad = tests['gradients']
    assert grad['score'] == 0 and ('the training gave no gradients' in grad['output']
                                   or grad['output'].startswith(hung)), grad['output']
    lost = {i: t['output'][:200] for i, t in tests.items()
            if i not in ('loss-curve', 'gradients') and not full(t) and not t['output'].startswith(hung)}
    assert lost == {}, lost
    assert total(out) <= possible(out) - lc['max_score'] - grad['max_score']


def check_leak_input_in_error(out, tests, root):
    """RoPE raises an error whose message is its whole input: at most sandbox.student_text_chars of it come out."""
    limit = GRADING.sandbox['student_text_chars']
    shown = [(tid, 'HOSTILE ' + chunk.split('\n')[0].split(' [... ')[0]) for tid, t in tests.items()
             for chunk in t['output'].split('HOSTILE ')[1:]]
    assert shown, 'the error message should be shown, cut'
    assert all(len(text) <= limit for _, text in shown), [(tid, len(text)) for tid, text in shown if len(text) > limit]
    assert 'more characters not shown' in tests['rope']['output'], tests['rope']['output']
    assert tests['rope']['score'] == 0


def check_slow_import(out, tests, root):
    """An import that busy-waits or sleeps for 100 s: named once in 1.1 with its line, no probe pays it again, no
    part is blamed; grade_and_check holds the whole grading to 180 s."""
    msg = tests['submission']['output']
    assert 'importing your model.py did not finish' in msg and 'line ' in msg, msg
    line = next(i for i, l in enumerate(read(root.case).splitlines(), 1) if 'HOSTILE' in l and i > 2)   # not the header
    assert abs(int(re.search(r'line (\d+)', msg).group(1)) - line) < 8, (msg, line)
    for tid in IMPLEMENTATION:
        assert 'GroupedQueryAttention' not in tests[tid]['output'] and 'RotaryPositional' not in tests[tid]['output']
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
    'forge_malformed': ({}, check_forge_malformed),
    'fifo_outputs': ({}, check_fifo_outputs),
    'oversized_arrays': ({}, check_oversized_arrays),
    'npz_bomb': ({}, check_npz_bomb),
    'npz_malformed': ({}, check_npz_malformed),
    'report_numbers': ({}, check_report_numbers),
    'many_notes': ({}, check_many_notes),
    'forged_progress': ({'loss-curve': 8}, check_forged_progress),   # with 0.1 CPU s per iteration it takes > 12 s
    'load_pretrained_hangs': ({'load-pretrained': 6}, check_load_pretrained_hangs),
    'leak_input_in_error': ({}, check_leak_input_in_error),
    'slow_import': ({}, check_slow_import),   # at grading.yaml's own limit: the 3 minutes of issue 32, measured
}
# where running as the same user as the grader would be unsafe or the check meaningless
NEED_SANDBOX = ('fork_bomb', 'write_results', 'read_fixtures')


def test_corpus_matches_cases():
    sys.path.insert(0, HOSTILE)
    from os_cases import CASES as OS_CASES   # the attacks on the machine: tests/corpora/test_hostile_os.py
    on_disk = sorted(d for d in os.listdir(HOSTILE) if os.path.isfile(os.path.join(HOSTILE, d, 'model.py')))
    assert on_disk == sorted(list(CASES) + list(OS_CASES) + list(EVIDENCE_ATTACKS) + list(SET_ASIDE_ATTACKS)
                             + list(TEXT_ATTACKS) + ['sleep_import']   # graded below, in Gradescope's mode
                             + list(HANG_PAIR) + list(SERVICE_FLOODS) + list(EVIDENCE_CASE_ATTACKS))


def test_corpus_is_built_from_the_current_reference():
    proc = subprocess.run([sys.executable, os.path.join(HOSTILE, 'build.py'), '--check'],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.returncode == 0, proc.stdout


# Cases that attack the harness's reader with outputs of tens of MB. Where mounts are allowed,
# out/ is a 64 MB tmpfs and the kernel refuses those writes first (the child then dies with
# ENOSPC and scores 0: safe, but the reader is never reached). They run without the tmpfs, as
# on a machine that refuses mounts (Gradescope's unprivileged container), so that the reader
# itself is what these cases test; the tmpfs has its own cases in test_hostile_os.py.
READER_CASES = ('npz_bomb', 'npz_malformed', 'oversized_arrays')
READER_ENV = {'HW1_SANDBOX_DISABLE': 'tmpfs'}




def _case(name):
    """slow_import at grading.yaml's own limit (issue 32's 3 minutes: 73 s measured) is run by hand (`-m slow`), alone
    (grade_and_check holds it to 180 s of wall-clock time); CI grades it and sleep_import in Gradescope's mode at a
    short limit below (test_a_slow_import_is_named_once_...). The reader's cases grade without namespaces
    (READER_ENV; 'tmpfs' names them): `gradescope_mode`."""
    if name == 'slow_import':
        return pytest.param(name, marks=[pytest.mark.slow, pytest.mark.alone])
    return pytest.param(name, marks=pytest.mark.gradescope_mode) if name in READER_CASES else name


@pytest.mark.parametrize('name', [_case(n) for n in sorted(CASES)])
def test_hostile(name, ag_root):
    timeouts, check = CASES[name]
    if name in NEED_SANDBOX and not SANDBOXED:
        pytest.skip('needs root and the sandbox user (./setup.sh)')
    root = ag_root(grading_text(timeouts))
    if name == 'read_fixtures':  # the attack would succeed without the grader's lockdown
        secret = os.path.join(root.source, 'autograder', 'fixtures', 'cpu', 'expected.npz')
        with pool_user(sandbox_uid()) as pw:   # asked as that user while no grading holds it
            assert users.user_can_access(pw.pw_uid, pw.pw_gid, [(secret, os.R_OK)])
    root.submit('model.py', read(name))
    root.case = name
    grade_and_check(name, root, check, env=READER_ENV if name in READER_CASES else None)


@pytest.mark.gradescope_mode
@pytest.mark.parametrize('name', ('slow_import', 'sleep_import'))
def test_a_slow_import_is_named_once_in_gradescopes_mode(name, ag_root):
    root = ag_root(grading_text({'submission': 2}))   # the same rule at a shorter limit: CI's minutes
    root.submit('model.py', read(name))
    root.case = name
    grade_and_check(name, root, check_slow_import, env=GRADESCOPE_ENV)


@pytest.mark.gradescope_mode
def test_a_leak_through_an_error_is_capped_in_gradescopes_mode(ag_root):
    """leak_input_in_error again, without namespaces and cgroups: the cap is the harness's, whatever the mode."""
    timeouts, check = CASES['leak_input_in_error']
    root = ag_root(grading_text(timeouts))
    root.submit('model.py', read('leak_input_in_error'))
    grade_and_check('leak_input_in_error', root, check, env=GRADESCOPE_ENV)
    with open(root.results_path) as f:
        lacks = json.load(f)['extra_data']['isolation']['lacks']
    assert {item.split(':')[0] for item in lacks} >= {'namespaces', 'cgroups'}, lacks


def refuse_constant(name):
    raise ValueError('results.json holds %s, which is not JSON' % name)


def grade_and_check(name, root, check, env=None):
    """Grade `root`'s submission through run_autograder and check what every case must satisfy, then `check`."""
    tmp = os.path.join(root.path, 'tmp')   # the grader's own temporary folders go here, to be checked
    os.makedirs(tmp)
    started = time.time()
    out, proc = root.run(env=dict(env or {}, TMPDIR=tmp))
    with open(root.results_path) as f:
        assert json.loads(f.read(), parse_constant=refuse_constant) == out
    PEAK_MB[name] = out.get('extra_data', {}).get('grader_peak_rss_mb')
    assert PEAK_MB[name] is not None and PEAK_MB[name] < GRADER_MEMORY_MB, PEAK_MB[name]
    assert [n for n in os.listdir(tmp) if not n.endswith('.lock')] == [], 'left behind in TMPDIR'
    tests = by_id(out)
    assert set(tests) == {t.id for t in GRADING.enabled_tests()}, proc.stdout[-2000:]
    assert 'Autograder error' not in [t['name'] for t in out['tests']]
    assert isinstance(out['execution_time'], (int, float))
    for t in out['tests']:
        assert len(t.get('output', '')) <= CAP + 100
        assert score_in_range(t), t
    check(out, tests, root)
    left = sandbox_processes()
    assert left == [], 'processes of the sandbox users survived the grading: %s' % describe(left)
    assert time.time() - started < 180  # bounded, whatever the submission does


# ----------------------------------------------------------------------------- hostile uploads

REFERENCE_TEXT = open(os.path.join(REPO, 'reference', 'mingpt', 'model.py')).read()
TEMPLATE_TEXT = open(grading_store.TEMPLATE_MODEL).read()


def upload_symlink_reference(root):
    os.makedirs(os.path.join(root.submission, 'mingpt'))
    os.symlink(os.path.join(root.source, 'reference', 'mingpt', 'model.py'),
               os.path.join(root.submission, 'mingpt', 'model.py'))


def upload_symlink_root_only(root):
    secret = os.path.join(root.path, 'root-only.py')
    with open(secret, 'w') as f:
        f.write('HOSTILE-SECRET-7f3a = (\n')   # a syntax error: the feedback must not quote its line
    os.chmod(secret, 0o600)
    os.symlink(secret, os.path.join(root.submission, 'model.py'))


def upload_hard_link(root):
    os.link(os.path.join(root.source, 'reference', 'mingpt', 'model.py'), os.path.join(root.submission, 'model.py'))


def upload_zip_20k(root):
    with zipfile.ZipFile(os.path.join(root.submission, 'hw1.zip'), 'w') as z:
        z.writestr('hw1/mingpt/model.py', 'import torch\n')
        for i in range(20_000):
            z.writestr('copies/%d/model.py' % i, '')


def upload_expr_10000(root):
    root.submit('model.py', REFERENCE_TEXT + '\n_HOSTILE = ' + '+'.join(['1'] * 10_000) + '\n')


def upload_nul_byte(root):
    with open(os.path.join(root.submission, 'model.py'), 'wb') as f:
        f.write(REFERENCE_TEXT.encode() + b'\n# HOSTILE \0 byte\n')


def upload_latin1_coding(root):
    with open(os.path.join(root.submission, 'model.py'), 'wb') as f:
        f.write(('# -*- coding: latin-1 -*-\n# r\xe9sum\xe9 du mod\xe8le\n' + REFERENCE_TEXT).encode('latin-1'))


def refused_with(words):
    def check(out, tests, root):
        assert words in tests['submission']['output'], tests['submission']['output']
        text = open(root.results_path).read()
        assert 'HOSTILE-SECRET' not in text and 'END SOLUTION' not in text
        all_zero(tests)
    return check


def check_zip_20k(out, tests, root):
    assert 'graded hw1.zip/hw1/mingpt/model.py (from the zip you uploaded; ' in tests['submission']['output']
    assert 'and 19995 more. To have one of these graded, upload it alone' in tests['submission']['output']
    assert os.path.getsize(root.results_path) < 100_000
    all_zero(tests)


def check_latin1(out, tests, root):
    assert total(out) == possible(out), [(i, t['output'][:200]) for i, t in tests.items() if not full(t)]


UPLOADS = {
    'symlink_reference': (upload_symlink_reference, refused_with('mingpt/model.py is a symbolic link')),
    'symlink_root_only': (upload_symlink_root_only, refused_with('model.py is a symbolic link')),
    'hard_link': (upload_hard_link, refused_with('model.py is a hard link')),
    'zip_20k': (upload_zip_20k, check_zip_20k),
    'expr_10000': (upload_expr_10000, refused_with('could not be parsed (RecursionError')),
    'nul_byte': (upload_nul_byte, refused_with('contains a NUL byte')),
    'latin1_coding': (upload_latin1_coding, check_latin1),
}


@pytest.mark.parametrize('name', sorted(UPLOADS))
def test_hostile_upload(name, ag_root):
    build, check = UPLOADS[name]
    root = ag_root(grading_text())
    build(root)
    grade_and_check(name, root, check)


# ----------------------------------------------------------------------------- attacks on a judge's evidence
# Each attack of tests/hostile/build.py's HONEST table is graded beside the same code without the
# attack (the bug alone): no test may score more under the attack. What each attack tries to win:
EVIDENCE_ATTACKS = {
    'replay_generate_logits': 'generate',                 # 8.2 used to check samples against the model's own logits
    'isinstance_sees_the_probe': 'gradients',             # right gradients only where the gradients probe asks
    'trainer_runs_longer': 'loss-curve',                  # a slow learner trained twice as long
    'trainer_runs_twice': 'loss-curve',                   # a second run after the first
    'replace_result_writer': 'causality',                 # the value tests' prefixes written as the causality outputs
    'memorise_answers': 'rope',                           # 2.1/2.2 from a table of the inputs every grading used
    'dropout_only_at_p_one': 'dropout',                   # 6.1 from what p = 1 must give, with no dropout at all
}


def _against_honest(ag_root, name, env, timeouts=None):
    """Attack `name` graded beside its honest control (tests/hostile/build.py's HONEST) in `env`'s mode:
    (honest results.json, its tests by id, the attack's, its tests by id, {test: (honest, attack) where it gained})."""
    sys.path.insert(0, HOSTILE)
    import build as hostile_build
    honest_out, honest = _graded(ag_root, hostile_build.honest(name), env, timeouts)
    attack_out, attack = _graded(ag_root, read(name), env, timeouts)
    gained = {i: (honest[i]['score'], attack[i]['score']) for i in honest if attack[i]['score'] > honest[i]['score']}
    return honest_out, honest, attack_out, attack, gained


def _graded(ag_root, text, env=None, timeouts=None):
    """`text` graded through run_autograder in `env`'s mode, once in the run (tests/helpers/grading_store.py):
    several attacks share an honest control. The untouched template with every defence is test_grading's grading
    of it (in the grader's own process: the same grader, the same mode)."""
    if env is None and not timeouts and text == TEMPLATE_TEXT:
        out, _ = grading_store.template()
    else:
        out, _ = grading_store.through_run_autograder(text, grading_text(timeouts or {}), env, ag_root=ag_root)
    if env == GRADESCOPE_ENV:   # the mode really was Gradescope's
        assert 'isolation' in out['extra_data'], out['extra_data']   # no grading at all: the grader's error says why
        lacks = out['extra_data']['isolation']['lacks']
        assert {item.split(':')[0] for item in lacks} >= {'namespaces', 'cgroups'}, lacks
    return out, by_id(out)


# Gradescope's own mode: no namespaces and no writable cgroups (README, grading.yaml sandbox.defences). The
# attacks on answers rest on no OS defence; graded again in that mode, they prove it where students are graded.
GRADESCOPE_ENV = {'HW1_SANDBOX_DISABLE': 'namespaces,cgroups'}
ANSWER_ATTACKS = ('memorise_answers', 'dropout_only_at_p_one')


# Attacks on the harness's own rules alone (issue 43: the suite in 15 minutes): set_aside.py's plan,
# evidence in the case,
# what the grader's process holds, the student's text budget. Each is graded in CI in the strongest mode only, beside
# its honest control; its Gradescope-mode case is `slow` (`python -m pytest -m slow` runs it, as before). Why that
# proves as much: what they attack is judge code (judge/set_aside.py, judge/evidence.py, judge/student_text.py) and the
# probe's own hooks (child/), the same code in both modes, fed the same probe outputs; none reads, writes or signals
# anything outside its probe process, so no OS defence stands between it and what it wants. Every OS defence stays
# proven in both modes in CI by the OS-class attacks (tests/corpora/test_hostile_os*.py,
# tests/e2e/test_sandbox_process.py, test_wall_everywhere.py), and what in these attacks passes through
# mode-specific machinery keeps both modes here:
# a hang (CPU metered by the cgroup or by users.CpuMeter, the stack dump read back from out/: forged_hang_dump,
# rope_hangs_on_purpose, the hang pair), the link (ask_grader_rope, rope_flood), and the attacks on answers (issue 34's
# choice: proven where students are graded). The seven Gradescope-mode cases left out took 11-25 s each, 112 s in all,
# of the one serial Gradescope-mode group (docs/BENCHMARKS.md, "The suite": measured 2026-12-07, `-n 0`).
JUDGE_RULES_ONLY = ('fail_on_purpose', 'borrow_grader_rope', 'rope_in_block_fails_on_purpose',
                    'gqa_in_block_fails_on_purpose', 'rope_raises_in_training', 'sees_its_recording', 'text_in_bulk')


def in_mode(env, *values, id, judge_rules_only=False):
    """A parameter set graded in `env`'s mode: in Gradescope's (no namespaces) it is `gradescope_mode`
    (tests/conftest.py), and `slow` as well where the attack is on the harness's rules alone (JUDGE_RULES_ONLY: CI
    grades it in one mode)."""
    if env != GRADESCOPE_ENV:
        return pytest.param(*values, id=id)
    return pytest.param(*values, id=id, marks=[pytest.mark.gradescope_mode] + ([pytest.mark.slow] if judge_rules_only
                                                                               else []))


@pytest.mark.parametrize('name,env', [in_mode(None, n, None, id=n) for n in sorted(EVIDENCE_ATTACKS)]
                         + [in_mode(GRADESCOPE_ENV, n, GRADESCOPE_ENV, id=n + '-gradescope') for n in ANSWER_ATTACKS])
def test_an_attack_on_evidence_gains_nothing(name, env, ag_root):
    honest_out, honest, attack_out, attack, gained = _against_honest(ag_root, name, env)
    target = EVIDENCE_ATTACKS[name]
    assert honest[target]['score'] < honest[target]['max_score'], 'the honest bug must cost %s' % target
    assert not gained, 'the attack gained points (honest, attack): %s' % gained
    assert total(attack_out) <= total(honest_out)


# ----------------------------------------------------------------------------- round four: setting aside and the key
# Each graded in both modes beside the same code without the attack (tests/hostile/build.py's HONEST): no test may
# score more. What each tries to win:
SET_ASIDE_ATTACKS = {
    'fail_on_purpose': 'fails 4.1 and 5.1 on purpose so that 10.1 and 10.2 set its K/V-detaching GQA aside',
    'borrow_grader_rope': 'the template scores with whatever RoPE or attention class the grader left in its process',
    'ask_grader_rope': 'a RoPE that is the grader\'s, asked over the link in every process',
    'forged_hang_dump': 'a hang at dropout p = 1 whose forged stack dump names GPT.generate, so nothing else is '
                        'skipped',
}


@pytest.mark.parametrize('name,env', [in_mode(e, n, e, id=n + ('-gradescope' if e else ''),
                                              judge_rules_only=n in JUDGE_RULES_ONLY)
                                      for n in sorted(SET_ASIDE_ATTACKS) for e in (None, GRADESCOPE_ENV)])
def test_an_attack_on_setting_aside_gains_nothing(name, env, ag_root):
    timeouts = {'dropout': 4} if name == 'forged_hang_dump' else {}   # its honest bug hangs 6.1: CI's minutes
    honest_out, honest, attack_out, attack, gained = _against_honest(ag_root, name, env, timeouts)
    assert not gained, 'the attack gained points (honest, attack): %s' % gained
    assert total(attack_out) <= total(honest_out)
    if name == 'fail_on_purpose':   # the hidden bug is still charged where it lives
        assert attack['loss-curve']['score'] == 0 and attack['gradients']['score'] == 0
    if name == 'borrow_grader_rope':   # the template's score, and not a word of a grader's class
        assert total(attack_out) == total(honest_out) == 0
    if name == 'forged_hang_dump':   # decided from the harness's own knowledge: 6.1 runs the GQA alone
        assert 'GroupedQueryAttention did not return in test 6.1' in attack['generate']['output']


# ----------------------------------------------------------------------------- round five: evidence in the case
# A part is set aside in a case only where that case's own records show it wrong (judge/evidence.py), and a part
# shown wrong anywhere costs its own tests. Each attack graded in both modes beside its honest control
# (tests/hostile/build.py's HONEST): no test may score more, and the honest part wrong only inside the model costs
# its own tests alone.
EVIDENCE_CASE_ATTACKS = {
    'rope_in_block_fails_on_purpose': 'fails 2.2 on purpose so that every GPT case gets the grader\'s RoPE',
    'gqa_in_block_fails_on_purpose': 'fails 5.1\'s n_kv_head = 3 case so that the GPT cases set its GQA aside',
    'rope_raises_in_training': 'raises where it trains, so that the grader\'s RoPE hides its training-only bug',
    'rope_hangs_on_purpose': 'hangs in 2.2, so that the grader\'s RoPE hides its training-only bug',
    'sees_its_recording': 'behaves otherwise where it sees the grader\'s hooks',
}
WRONG_INSIDE = {'rope_in_block_fails_on_purpose': (('rope', 'rope-cache'), 'RotaryPositionalEmbeddings'),
                'gqa_in_block_fails_on_purpose': (('gqa', 'gqa-rope'), 'GroupedQueryAttention')}


@pytest.mark.parametrize('name,env', [in_mode(e, n, e, id=n + ('-gradescope' if e else ''),
                                              judge_rules_only=n in JUDGE_RULES_ONLY)
                                      for n in sorted(EVIDENCE_CASE_ATTACKS) for e in (None, GRADESCOPE_ENV)])
def test_a_part_is_set_aside_only_on_evidence_in_the_case(name, env, ag_root):
    timeouts = {'rope-cache': 4} if name == 'rope_hangs_on_purpose' else {}
    honest_out, honest, attack_out, attack, gained = _against_honest(ag_root, name, env, timeouts)
    if name == 'rope_hangs_on_purpose':
        # a part that hangs is charged whole (RoPE: 15) and set aside after, its training bug unjudged (here 10.1
        # and 10.2: 15): never more than the honest total (docs/ARCHITECTURE.md, "What still pays")
        assert set(gained) <= {'loss-curve', 'gradients', 'load-pretrained'}, gained
        assert attack['rope']['score'] == 0 and 'did not return in test 2.2' in attack['rope']['output']
    else:
        assert not gained, 'the attack gained points (honest, attack): %s' % gained
    assert total(attack_out) <= total(honest_out)
    if name in WRONG_INSIDE:   # the honest part wrong only inside the model: its own tests, and nothing else
        own, cls = WRONG_INSIDE[name]
        lost = sorted(i for i, t in honest.items() if t['score'] < t['max_score'])
        assert lost == sorted(own), lost
        assert ('0 points: your %s is wrong when test' % {'RotaryPositionalEmbeddings': 'RoPE'}.get(cls, cls)) \
            in honest[own[0]]['output'], honest[own[0]]['output'][:300]
    if name in ('rope_raises_in_training', 'rope_hangs_on_purpose'):   # its training bug is still its own
        assert honest['gradients']['score'] < honest['gradients']['max_score']


# ----------------------------------------------------------------------------- the student's text
# text_in_bulk (tests/hostile/build.py) against its honest control (the same errors without the attack), in both
# modes: the budget is the harness's (judge/student_text.py), the table the judges' data (judge/markdown.py)
TEXT_ATTACKS = ('text_in_bulk',)
FORGED_STARTS = ('FAIL FORGED', '## FORGED', '| FORGED', 'ok   FORGED', 'HOSTILE', 'RoPE is not done')


def _plain_lines(test):
    from autograder.judge import markdown
    text = test.get('output', '')
    return (markdown.plain(text) if test.get('output_format') == markdown.FORMAT else text).splitlines()


@pytest.mark.parametrize('env', [in_mode(None, None, id='every-defence'),
                                 in_mode(GRADESCOPE_ENV, GRADESCOPE_ENV, id='gradescope', judge_rules_only=True)])
def test_student_text_stays_student_text(env, ag_root):
    honest_out, honest, attack_out, attack, gained = _against_honest(ag_root, 'text_in_bulk', env)
    assert not gained and total(attack_out) <= total(honest_out), gained
    assert honest['rope']['score'] == 0 and 'RoPE is not done' in honest['rope']['output']
    # the slices: at most the budget of them, though the attack wrote more (some withheld, in the grader's words)
    budget = GRADING.sandbox['student_text_budget']
    text = json.dumps(attack_out)
    slices = set(re.findall(r'HOSTILE-SLICE \d{3} [0-9a-f]+', text))
    spent = attack_out['extra_data']['student_text']
    assert slices and sum(len(s) for s in slices) <= spent['shown_chars'] <= budget, (len(slices), spent)
    assert spent['withheld_texts'] > 0 and json.dumps(WITHHELD % budget)[1:-1] in text
    # student text never starts a line, forms a row, a heading or a table: the outputs' formats are the honest ones
    starts = [(tid, line) for tid, t in attack.items() for line in _plain_lines(t)
              if line.lstrip().startswith(FORGED_STARTS)]
    assert starts == [], starts[:3]
    assert {i: t.get('output_format') for i, t in attack.items()} == \
        {i: t.get('output_format') for i, t in honest.items()}
    assert 'FORGED' in attack['rope']['output'] and '\\nFAIL FORGED-ROW' in attack['rope']['output']


# ----------------------------------------------------------------------------- round five: a hang, however it grows
# The same GQA loop without its increment (tests/hostile/build.py), one that only spins and one that appends to a list
# as it goes, graded in both modes: the same score, the same words, the line named, within 3 minutes. The allocating
# one read "ran out of memory" with no line (every defence) or "exited with code 1 (sys.exit or os._exit in your
# code?)" (Gradescope's mode), cost 7.1's MHA case and 8.1's RoPE case, and scored 35 or 50 where the spinning one
# scores 63.33: the harness now stops a process past sandbox.probe_memory_mb as a hang (sandbox/probe.py).
HANG_PAIR = ('gqa_loop_spins', 'gqa_loop_allocates')
HANG_TIMEOUTS = {'gqa': 10}   # the spinning loop's 4.1 at CI's minutes; the allocating one stops at its memory cap


def _loop_lines(name):
    lines = read(name).splitlines()
    first = next(i for i, l in enumerate(lines, 1) if 'while h < self.n_head' in l)
    return first, first + 1


@pytest.mark.parametrize('env', [in_mode(None, None, id='every-defence'),
                                 in_mode(GRADESCOPE_ENV, GRADESCOPE_ENV, id='gradescope')])
def test_a_hang_is_a_hang_however_it_grows(env, ag_root):
    graded = {name: _graded(ag_root, read(name), env, HANG_TIMEOUTS) for name in HANG_PAIR}
    (_, spin), (_, alloc) = graded['gqa_loop_spins'], graded['gqa_loop_allocates']
    assert {i: t['score'] for i, t in alloc.items()} == {i: t['score'] for i, t in spin.items()}, \
        {i: (spin[i]['score'], t['score']) for i, t in alloc.items() if t['score'] != spin[i]['score']}
    for name, (out, tests) in graded.items():
        text = json.dumps(out)
        assert out['execution_time'] <= 180, (name, out['execution_time'])
        assert 'out of memory' not in text and 'sys.exit' not in text and 'exited with code' not in text, name
        msg = tests['gqa']['output']
        assert re.search(r'stopped in GroupedQueryAttention\.forward \(model\.py line (%d|%d)\)' % _loop_lines(name),
                         msg), (name, msg)
        # 5.1 is the GQA's own test: the hang charges it whole, and says where it was not run
        assert tests['gqa']['score'] == 0 and tests['gqa-rope']['score'] == 0 \
            and tests['gqa-rope']['output'].startswith(
                ('0 points: your GroupedQueryAttention did not return in test %s' % GRADING.test('gqa').number)) \
            and ('not run: GroupedQueryAttention did not return in test %s'
                 % GRADING.test('gqa').number) in tests['gqa-rope']['output'], \
            (name, tests['gqa-rope']['output'])
        # its own part only: RoPE, the MHA, and every GPT test the harness judges without the GQA keep their points
        for tid in ('rope', 'rope-cache', 'mha-rope', 'model', 'generate', 'loss-curve', 'gradients',
                    'load-pretrained'):
            assert full(tests[tid]), (name, tid, tests[tid]['output'][:300])
    assert 'memory kept growing past the %d MB' % GRADING.sandbox['probe_memory_mb'] in alloc['gqa']['output']
    assert 'ran longer than the 10 s allowed' in spin['gqa']['output']


# ----------------------------------------------------------------------------- round five: every service capped
# rope_flood (tests/hostile/build.py) against its honest control (no RoPE: the second run gives every GPT case the
# grader's RoPE), in both modes: ~900,000 calls once took the harness from 83 to 420 MB and a grading from 28 to 371 s;
# the grading's one budget of calls (grading.yaml's rope_service_calls) now stops the process that asks past it.
SERVICE_FLOODS = ('rope_flood',)


@pytest.mark.parametrize('env', [in_mode(None, None, id='every-defence'),
                                 in_mode(GRADESCOPE_ENV, GRADESCOPE_ENV, id='gradescope')])
def test_a_flood_of_the_graders_rope_costs_the_judge_nothing(env, ag_root):
    honest_out, honest, attack_out, attack, gained = _against_honest(ag_root, 'rope_flood', env)
    assert not gained and total(attack_out) <= total(honest_out), gained
    cap = GRADING.sandbox['rope_service_calls']['cpu']
    calls = {pid: run['rope_calls'] for pid, run in attack_out['extra_data']['second_run'].items()}
    assert calls and sum(calls.values()) <= cap, calls   # one budget for the grading: answered at most that often
    honest_calls = {pid: run['rope_calls'] for pid, run in honest_out['extra_data']['second_run'].items()}
    assert sum(honest_calls.values()) * 10 <= cap, honest_calls   # the honest submission is far from it
    assert "asked the grader's RoPE for more than a grading needs" in json.dumps(attack_out)
    # a few MB and seconds at most, whatever the flood
    peak = attack_out['extra_data']['grader_peak_rss_mb'], honest_out['extra_data']['grader_peak_rss_mb']
    assert peak[0] <= peak[1] + 10, peak
    assert attack_out['execution_time'] <= honest_out['execution_time'] + 60, (
        attack_out['execution_time'], honest_out['execution_time'])


def test_print_grader_peak_memory():
    """Runs last in its group (the module is in two: tests/conftest.py LOCKDOWN_PARTS): the grader's peak memory
    per case that ran in this process, for the record (pytest -s)."""
    if PEAK_MB:
        known = {k: v for k, v in PEAK_MB.items() if v is not None}   # a case that failed before its figure: none
        print('\ngrader peak RSS (MB): ' + ', '.join('%s %.1f' % kv
                                                     for kv in sorted(known.items(), key=lambda kv: -kv[1])))
