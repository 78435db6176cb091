"""
End-to-end gradings of known submissions: the reference (full marks, through ./run_autograder
with HW1_SOURCE pointing at this checkout), the untouched template (0 on every implementation
test, "not implemented yet"), one buggy submission graded three times (identical results),
and a correct submission written against older starter code, whose CausalSelfAttention has
a fused c_attn (weights matched by shape, full marks). Each grading runs once per module
and serves several tests; the reference's and the template's once per test run (tests/helpers/grading_store.py:
tests/corpora/test_hostile.py and tests/e2e/test_policy_agreement.py read the same ones).
"""

import os
import re

import grading_store
import pytest

from grader_runs import REPO, by_id, full, possible, total
from autograder import GRADING_YAML
from autograder.judge import config, grade, source_patches

GRADING = config.load(GRADING_YAML)
CAP = GRADING.sandbox['max_output_chars']
IMPLEMENTATION = [t.id for t in GRADING.enabled_tests() if t.id != 'submission']
REFERENCE_MODEL = os.path.join(REPO, 'reference', 'mingpt', 'model.py')
TEMPLATE_MODEL = os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py')


def reference_with(*edits):
    """The reference's model.py with each (old, new) replaced; every `old` must occur exactly once."""
    return source_patches.patched_reference(edits, 'tests/e2e/test_grading.py', REFERENCE_MODEL)


def graded(tmp_path_factory, name, text, runs=1):
    folder = tmp_path_factory.mktemp(name)
    path = str(folder / 'model.py')
    with open(path, 'w') as f:
        f.write(text)
    return [grade.grade_results(path, 'cpu', str(folder / ('results%d.json' % i))).to_json() for i in range(runs)]


# ----------------------------------------------------------------------------- the reference

# through ./run_autograder: an AUTOGRADER_ROOT, open to the sandbox users until its grading locks it, so the two tests
# that read this grading are `lockdown` (tests/conftest.py); the module's other gradings run beside anything. The
# run's store of gradings (tests/helpers/grading_store.py) grades it once for every test file that asks.
@pytest.fixture(scope='module')
def reference():
    return grading_store.reference()


@pytest.mark.lockdown
def test_reference_gets_full_marks(reference):
    out, raw = reference
    tests = by_id(out)
    assert set(tests) == {t.id for t in GRADING.enabled_tests()}
    # every point: extra-credit tests are worth max_score 0 and score their weight on top
    assert {i: t['score'] for i, t in tests.items() if t['score'] != GRADING.test(i).weight} == {}
    assert total(out) == possible(out) == sum(t.weight for t in GRADING.enabled_tests())
    assert sum(t['max_score'] for t in out['tests']) == out['extra_data']['points']['required_max'] == 100
    assert all(t['status'] == 'passed' for t in out['tests'])
    assert out['output'].startswith('Graded model.py.') and 'Profile' not in out['output']


@pytest.mark.lockdown
def test_reference_results_json_follows_the_spec(reference):
    out, raw = reference
    assert isinstance(out['execution_time'], (int, float)) and out['execution_time'] > 0
    for t in out['tests']:
        assert len(t['output']) <= CAP
        spec = next(s for s in GRADING.tests if s.number == t['number'])
        worth = 0 if GRADING.is_extra_credit(spec) else spec.weight
        assert (t['name'], t['max_score'], t['visibility']) == (spec.name, worth, spec.visibility)
        assert t['tags'] == spec.tags
    extra = out['extra_data']
    assert extra['profile'] == 'cpu'
    assert set(extra['probe_seconds']) == set(IMPLEMENTATION)
    assert all(isinstance(v, (int, float)) for v in extra['probe_seconds'].values())
    assert isinstance(extra['wall_seconds'], (int, float))
    assert extra['wall_seconds'] >= sum(extra['probe_seconds'].values())
    if os.geteuid() == 0:
        assert extra['sandboxed_as'].startswith(GRADING.sandbox['user'])
    assert len(raw) < 100_000


# ----------------------------------------------------------------------------- the template

@pytest.fixture(scope='module')
def template():
    return grading_store.template()[0]   # graded once in the run (tests/helpers/grading_store.py)


def test_template_scores_zero_with_not_implemented(template):
    tests = by_id(template)
    assert tests['submission']['status'] == 'passed'  # it imports: only the TODOs are missing
    for tid in IMPLEMENTATION:
        assert tests[tid]['score'] == 0, tid
        if GRADING.is_extra_credit(GRADING.test(tid)):
            # an untouched optional part reads as not attempted: worth 0, not a (red) failure
            assert (tests[tid]['max_score'], tests[tid]['status']) == (0, 'passed'), tests[tid]
            assert tests[tid]['output'].startswith('Not attempted: this optional part (extra credit)'), tests[tid]
        elif tid in GPT_TESTS:   # its attention modules fail their own tests: nothing of the student's left to judge
            assert tests[tid]['status'] == 'failed' and tests[tid]['output'].startswith('Not judged: every case'), \
                tests[tid]
        else:
            assert tests[tid]['status'] == 'failed' and 'not implemented yet' in tests[tid]['output'], tests[tid]
    assert total(template) == 0


GPT_TESTS = ('model', 'generate', 'loss-curve', 'gradients', 'load-pretrained')


def with_class_of(text, donor, name):
    """`text` with class `name` replaced by `donor`'s class of that name (whole, as written there)."""
    import ast

    def span(source):
        node = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == name)
        lines = source.splitlines(keepends=True)
        return lines, node.lineno - 1, node.end_lineno
    lines, a, b = span(text)
    theirs, c, d = span(donor)
    return ''.join(lines[:a] + theirs[c:d] + lines[b:])


def test_the_template_with_a_correct_rope_earns_ropes_points_and_no_more(tmp_path_factory):
    # issue 32: no GPT case is left with anything of the student's (their MHA hooks and GQA are the TODOs), so the
    # GPT tests earn nothing; before, they ran the reference's attention with its own RoPE and scored 36.67
    with open(TEMPLATE_MODEL) as f, open(os.path.join(REPO, 'reference', 'mingpt', 'model.py')) as g:
        text = with_class_of(f.read(), g.read(), 'RotaryPositionalEmbeddings')
    tests = by_id(graded(tmp_path_factory, 'rope-only', text)[0])
    earned = {tid: t['score'] for tid, t in tests.items() if t['score']}
    assert earned == {'rope': 10, 'rope-cache': 5}, earned
    for tid in GPT_TESTS:
        assert tests[tid]['output'].startswith('Not judged: every case'), tests[tid]['output'][:200]


# ----------------------------------------------------------------------------- determinism

BUGGY = reference_with(('    def __init__(self, d: int, base: int = 10_000):\n',
                        '    def __init__(self, d: int, base: int = 1_000):  # the bug: base 1000\n'))


@pytest.fixture(scope='module')
def buggy_three_times(tmp_path_factory):
    return graded(tmp_path_factory, 'buggy', BUGGY, runs=3)


# 9.1's feedback quotes the kernel's readings of this run (bytes of RssAnon), which differ by some
# pages from run to run; its score does not (the floor is 3x below the reference's region)
MEASURED = re.compile(r'\d+ bytes \([\d.]+ KiB\)')


def _verdicts(out):
    return [(t['number'], t['score'], t['status'], MEASURED.sub('N bytes', t['output'])) for t in out['tests']]


def test_same_submission_same_grade(buggy_three_times):
    first, *rest = buggy_three_times
    for other in rest:
        assert _verdicts(other) == _verdicts(first)
        assert other['output'] == first['output']  # includes the loss-curve summary


def test_buggy_submission_loses_the_rope_points(buggy_three_times):
    tests = by_id(buggy_three_times[0])
    assert tests['rope']['score'] < tests['rope']['max_score']  # (d = 2 has theta_1 = 1 for any base)
    assert 'Likely bug' in tests['rope']['output'] and 'rope-base' in tests['rope']['output'], tests['rope']['output']
    # set_aside: on_evidence: the tests that build on RoPE run again with the grader's RoPE in its place, and say so
    for tid in ('mha-rope', 'gqa-rope', 'model', 'generate', 'loss-curve', 'gradients', 'load-pretrained'):
        assert full(tests[tid]), tests[tid]['output']
        assert "Judged with the grader's RoPE, computed outside your process, in place of yours, which fails 2.1." \
            in tests[tid]['output'], tests[tid]['output']
    assert tests['gqa']['score'] == tests['gqa']['max_score']
    assert 0 < total(buggy_three_times[0]) < possible(buggy_three_times[0])


# ----------------------------------------------------------------------------- fallback by shape

FUSED = reference_with(
    ('        self.q_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename\n'
     '        self.k_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename\n'
     '        self.v_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename\n',
     '        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd)  # older starter code: [Q; K; V] fused\n'),
    ('        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n'
     '        k = self.k_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n'
     '        v = self.v_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n',
     '        q, k, v = self.c_attn(x).split(C, dim=2)\n'
     '        q = q.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n'
     '        k = k.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n'
     '        v = v.view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n'))


@pytest.fixture(scope='module')
def fused(tmp_path_factory):
    return graded(tmp_path_factory, 'fused', FUSED)[0]


def test_fused_c_attn_is_matched_by_shape(fused):
    tests = by_id(fused)
    note = tests['submission']['output']
    assert 'CausalSelfAttention lacks the handout names' in note
    assert 'weights were matched by shape' in note and 'c_attn <- q_proj+k_proj+v_proj' in note
    for tid in ('mha-rope', 'model', 'causality', 'generate'):  # every test that loads CausalSelfAttention
        assert full(tests[tid]), tests[tid]['output']
    # the GQA half is the reference's own: nothing else may change
    for tid in ('rope', 'rope-cache', 'gqa', 'gqa-rope', 'dropout', 'memory', 'sliding-window'):
        assert full(tests[tid]), tests[tid]['output']
