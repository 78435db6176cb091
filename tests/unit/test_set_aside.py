"""
Setting a part aside (autograder/judge/set_aside.py) on made-up first runs against the real fixtures: which
parts fail, which cases a second run judges without them (only where their own values are wrong),
which are set aside with nothing in their place, where a hang is placed (never from the process's
own dump) and the words. The grader's RoPE (judge/rope_service.py, child/set_aside.py) is checked
against the reference's, forward and backward.
"""

import ast
import dataclasses

import numpy as np
import pytest

from autograder.judge import config, evidence, fixtures, plans, registry, set_aside
from autograder.judge.interface_check import untouched_optional
from autograder.sandbox.readback import ProbeResult
from torch_free import needs_torch

MODEL_PY = '''import torch

class RotaryPositionalEmbeddings:
    def forward(self, x):
        return x

class GroupedQueryAttention:
    def __init__(self, config):
        self.g = 2

    def forward(self, x):
        h = 0
        while h < 6:
            pass
        return x
'''


@pytest.fixture(scope='module')
def grading():
    return config.load()


@pytest.fixture(scope='module')
def fx(grading):
    return fixtures.load_for_grading(grading, 'cpu').view(0)


def make(grading, fx, passes=(), policy='on_evidence'):
    """A SetAside whose part tests pass exactly for the ids in `passes`."""
    c = set_aside.SetAside(dataclasses.replace(grading, set_aside=policy), fx, ast.parse(MODEL_PY),
                        grading.enabled_tests())
    c._passes = lambda probe_id, result, results: probe_id in passes
    return c


def first_run(c, passes_through=('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope')):
    for pid in passes_through:
        c.observe(pid, ProbeResult('ok'), {})


def outputs(fx, probe_id, wrong=(), drop=()):
    """The reference's outputs of a probe as a first run's result, with the keys of `wrong` units off by 1."""
    arrays = {}
    for key, value in fx.probe(probe_id).items():
        unit = plans.unit_of(probe_id, key)
        if unit in drop:
            continue
        arrays[key] = value + 1 if unit in wrong and value.dtype.kind == 'f' else \
            (value + 1 if unit in wrong else value.copy())
    return ProbeResult('ok', arrays=arrays, info={})


def wrong_in(c, probe_id, result, shown, monkeypatch):
    """Observe `result` of `probe_id` as if its recorded calls showed {unit: parts} wrong (judge/evidence.py is
    tested on real records in test_evidence.py)."""
    table = {unit: {p: evidence.Shown(unit or 'x', 'values', 3) for p in parts} for unit, parts in shown.items()}
    monkeypatch.setattr(set_aside.evidence, 'shown_wrong', lambda *args: table)
    c.observe(probe_id, result, {}, [])
    monkeypatch.undo()


def test_a_part_is_set_aside_only_in_the_cases_that_show_it_wrong(grading, fx, monkeypatch):
    c = make(grading, fx, passes=('rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    first_run(c)
    assert c.failed == {'rope': grading.test('rope').number}
    # its 2.1 fails, but no GPT case shows it wrong: every case is judged as it ran, whatever the outputs
    c.observe('model', outputs(fx, 'model', wrong=('rope', 'rope-gqa')), {})
    assert c.plan_later() == {} and c.charged == {}
    c = make(grading, fx, passes=('rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    first_run(c)
    wrong_in(c, 'model', outputs(fx, 'model', wrong=('rope', 'rope-gqa')), {'rope-gqa': ('rope',)}, monkeypatch)
    plan = c.plan_later()['model']
    assert plan.units == {'rope': 'native', 'gqa': 'native', 'rope-gqa': 'second'}
    assert plan.job() == {'set_aside': ['rope'], 'skip_cases': ['gqa', 'rope']}
    assert 'rope-cache' not in c.plans and 'gqa' not in c.plans   # its own tests never set it aside


def test_a_part_wrong_only_inside_the_model_costs_its_own_tests(grading, fx, monkeypatch):
    # every part test passes; the GPT's GQA calls show the GQA wrong: 4.1 and 5.1 score 0, the GPT cases that it
    # spoiled are judged without it, and failing one more of its cases on purpose changes nothing
    for passes in (('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'), ('rope', 'rope-cache', 'mha-rope', 'gqa')):
        c = make(grading, fx, passes=passes)
        first_run(c)
        wrong_in(c, 'model', outputs(fx, 'model', wrong=('gqa', 'rope-gqa')), {'gqa': ('gqa',), 'rope-gqa': ('gqa',)},
                 monkeypatch)
        c.plan_later()
        assert c.plans['model'].units == {'rope': 'native', 'gqa': 'excluded', 'rope-gqa': 'excluded'}
        assert c.charge('gqa').startswith('0 points: your GroupedQueryAttention is wrong when test %s runs it'
                                          % grading.test('model').number)
        assert c.charge('gqa-rope') == c.charge('gqa') and c.charge('rope') is None and c.charge('model') is None


def test_a_shown_wrong_part_whose_case_is_still_right_is_judged_as_it_ran(grading, fx, monkeypatch):
    c = make(grading, fx, passes=('rope', 'rope-cache', 'mha-rope', 'gqa'))
    first_run(c)
    trained = outputs(fx, 'loss-curve')
    wrong_in(c, 'loss-curve', trained, {'': ('gqa',)}, monkeypatch)
    assert c.plan_later() == {} and c.plans['loss-curve'].units == {'': 'native'}
    assert "model's own values are the reference's" in c.plans['loss-curve'].why['']
    # where the case's own forward is wrong too, the training is judged at n_kv_head = n_query_head
    initial = [k for k in trained.arrays if k.endswith('initial_logits')]
    assert initial, 'the fixtures hold 10.1\'s logits at the initial weights'
    trained.arrays[initial[0]] = trained.arrays[initial[0]] + 1.0
    plan = c.plan('loss-curve', trained)
    assert plan.units == {'': 'second'} and plan.job()['set_aside'] == ['gqa']


def test_a_case_with_nothing_of_the_student_left_is_not_judged(grading, fx, monkeypatch):
    # a correct RoPE, an MHA and a GQA shown wrong in every GPT case: nothing of theirs is judged there
    c = make(grading, fx, passes=('rope', 'rope-cache'))
    first_run(c)
    assert c.failed == {'mha': grading.test('mha-rope').number, 'gqa': grading.test('gqa').number}
    everywhere = {'rope': ('mha',), 'gqa': ('gqa',), 'rope-gqa': ('gqa',), '': ('gqa',)}
    for pid in ('model', 'generate', 'loss-curve', 'gradients', 'load-pretrained'):
        wrong_in(c, pid, ProbeResult('ok', info={'case_errors': {}}), everywhere, monkeypatch)
    c.plan_later()
    for pid in ('model', 'generate', 'loss-curve', 'gradients', 'load-pretrained'):
        assert set(c.plans[pid].units.values()) == {'excluded'}, pid
        assert c.nothing_left(pid).startswith('Not judged: every case'), pid
    # a GQA shown wrong and an MHA that works: the one-configuration tests run at n_kv_head = n_query_head
    c = make(grading, fx, passes=('rope', 'rope-cache', 'mha-rope'))
    first_run(c)
    wrong_in(c, 'generate', ProbeResult('ok'), {'': ('gqa',)}, monkeypatch)
    wrong_in(c, 'model', outputs(fx, 'model', wrong=('gqa', 'rope-gqa')), {'gqa': ('gqa',), 'rope-gqa': ('gqa',)},
             monkeypatch)
    c.observe('causality', ProbeResult('ok'), {})
    c.plan_later()
    assert c.plans['generate'].units == {'': 'second'} and c.plans['generate'].aside[''] == ('gqa',)
    # 7.1 follows 8.1: its GPT case runs at n_kv_head = n_query_head, as 8.1's MHA case did
    assert c.plans['causality'].units == {'mha': 'native', 'gqa': 'native', 'gpt': 'second'}
    assert c.plans['causality'].job() == {'set_aside': ['gqa'], 'skip_cases': ['gqa', 'mha']}
    assert c.plans['model'].units == {'rope': 'native', 'gqa': 'excluded', 'rope-gqa': 'excluded'}
    assert c.nothing_left('model') is None


def test_a_gqa_that_fails_only_with_rope_is_judged_without_rope(grading, fx, monkeypatch):
    # RoPE applied to the values in both attention modules: 3.1 and 5.1 fail, 4.1 passes (no RoPE there)
    c = make(grading, fx, passes=('rope', 'rope-cache', 'gqa'))
    first_run(c)
    assert c.failed == {'mha': grading.test('mha-rope').number, 'gqa': grading.test('gqa-rope').number}
    for pid in ('generate', 'loss-curve'):
        wrong_in(c, pid, ProbeResult('ok'), {'': ('gqa',)}, monkeypatch)
    c.observe('causality', ProbeResult('ok'), {})
    wrong_in(c, 'model', outputs(fx, 'model', wrong=('rope', 'rope-gqa')), {'rope': ('mha',), 'rope-gqa': ('gqa',)},
             monkeypatch)
    c.plan_later()
    assert c.plans['generate'].aside == {'': ('gqa_rope',)} and c.plans['loss-curve'].job()['set_aside'] == ['gqa_rope']
    assert c.plans['model'].units == {'rope': 'excluded', 'gqa': 'native', 'rope-gqa': 'excluded'}
    assert c.plans['causality'].units['gpt'] == 'second' and c.plans['causality'].aside['gpt'] == ('gqa_rope',)


def test_the_merged_result_and_the_fixtures_the_judges_read(grading, fx, monkeypatch):
    c = make(grading, fx, passes=('rope', 'rope-cache', 'mha-rope'))
    first_run(c)
    native = outputs(fx, 'model', wrong=('gqa', 'rope-gqa'))
    wrong_in(c, 'model', native, {'gqa': ('gqa',), 'rope-gqa': ('gqa',)}, monkeypatch)
    wrong_in(c, 'generate', outputs(fx, 'generate', wrong=('',)), {'': ('gqa',)}, monkeypatch)
    c.plan_later()
    second = {'generate': dataclasses.replace(outputs(fx, 'generate~gqa'), info={'set_aside': {'built': []}})}
    merged, view = c.merge({'model': native, 'generate': outputs(fx, 'generate', wrong=('',))}, second)
    assert sorted(view.probe('model')) == sorted(k for k in fx.probe('model') if k.startswith('rope/'))
    assert all(np.array_equal(view.probe('generate')[k], fx.probe('generate~gqa')[k]) for k in view.probe('generate'))
    assert view.known_bug_outputs('generate') == {fp: {} for fp in fx.known_bug_outputs('generate')}
    assert view.set_aside_in('generate', '') == ('gqa',) and fx.set_aside_in('generate', '') == ()
    assert merged['generate'].arrays.keys() == fx.probe('generate~gqa').keys()
    assert c.lines('generate', merged['generate']) == [
        'Judged at n_kv_head = n_query_head, where the given Block builds your CausalSelfAttention: your '
        'GroupedQueryAttention fails 4.1.']


def test_a_hang_is_placed_from_the_harness_own_knowledge(grading, fx):
    c = make(grading, fx, passes=('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    first_run(c)
    # 6.1 runs the GQA alone: that is where it hung, whatever the process's dump says (it names generate here)
    forged = {'ended': 'timeout', 'imported_after': 1.0, 'hang': {'frames': [{'line': 9}]}}
    c.observe('dropout', ProbeResult('timeout', 'timed out', harness=forged), {})
    assert c.hung == {'gqa': 'not run: GroupedQueryAttention did not return in test 6.1 (your process said it was at '
                             'model.py line 9, in GroupedQueryAttention.__init__)'}
    # charged like a part shown wrong: its own tests score 0, and later cases run without it
    assert c.charge('gqa').startswith('0 points: your GroupedQueryAttention did not return in test 6.1')
    assert c.skip('model') == c.hung['gqa'] and c.skip('generate') == c.hung['gqa']
    assert c.stopped['dropout'].endswith(set_aside.OWN_ACCOUNT) and 'line 9' in c.stopped['dropout']
    # a GPT test that times out when every attention part is proven to return: the GPT's own code
    c = make(grading, fx, passes=('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    first_run(c)
    c.observe('model', ProbeResult('timeout', 'x', harness={'ended': 'timeout', 'imported_after': 1.0}), {})
    assert list(c.hung) == ['gpt'] and c.skip('gradients') and c.skip('memory') is None


def test_a_case_left_unrun_by_a_hang_says_not_run_once(grading, fx):
    """Issue 41: "FAIL gqa: not run: not run: ..." (the case's status words, then its reason, which says them too)."""
    from autograder.judge import areas, messages
    c = make(grading, fx, passes=('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    first_run(c)
    c.observe('dropout', ProbeResult('timeout', 'timed out', harness={'ended': 'timeout', 'imported_after': 1.0}), {})
    line = messages.FAIL + areas.case_error_line('gqa', {'status': 'missing', 'message': c.skip('model')})
    assert line == 'FAIL gqa: not run: GroupedQueryAttention did not return in test 6.1', line
    assert messages.probe_failed('missing', 'not run', []) == ['not run']
    # other words stay
    assert messages.case_error('gqa', 'error', 'boom', []) == 'gqa: your code raised an error: boom'


def test_an_import_that_stalls_in_a_probe_stops_the_probes_and_blames_no_part(grading, fx):
    c = make(grading, fx, passes=('rope',))
    dump = {'frames': [{'line': 11}]}
    c.observe('rope', ProbeResult('timeout', 'x', harness={'ended': 'wall', 'hang': dump}), {})
    assert c.hung == {} and c.failed == {}
    assert c.import_hang == ('model.py did not finish importing in test 2.1\'s process (your process said it was at '
                             'model.py line 11, in GroupedQueryAttention.forward)')
    assert c.skip('gqa').startswith('not run: model.py did not finish importing') and c.skip_second('model')
    c = make(grading, fx)
    c.observe('import', ProbeResult('timeout', 'x', harness={'ended': 'timeout', 'hang': {'frames': [{'line': 1}]}}),
              {})
    assert c.import_hang == 'model.py did not finish importing (your process said it was at model.py line 1)'


def test_a_part_test_spoiled_by_a_rope_shown_wrong_waits_for_its_second_run(grading, fx, monkeypatch):
    # 5.1 runs the GQA with RoPE: with a RoPE shown wrong there, whether the GQA fails is known once RoPE is set aside
    c = make(grading, fx, passes=('rope-cache', 'mha-rope', 'gqa'))
    for pid in ('rope', 'rope-cache', 'mha-rope', 'gqa'):
        c.observe(pid, ProbeResult('ok'), {})
    wrong_in(c, 'gqa-rope', outputs(fx, 'gqa-rope', wrong=('',)), {'': ('rope',)}, monkeypatch)
    assert c.failed == {'rope': grading.test('rope').number} and c.pending == {'gqa': ['gqa-rope']}
    assert list(c.part_tests_again()) == ['gqa-rope']
    assert c.part_tests_again()['gqa-rope'].job()['set_aside'] == ['rope']
    c.settle_parts({'gqa-rope': outputs(fx, 'gqa-rope')})   # right without the student's RoPE: the GQA works
    assert c.failed == {'rope': grading.test('rope').number} and c.pending == {}
    c = make(grading, fx, passes=('rope-cache', 'mha-rope', 'gqa'))
    for pid in ('rope', 'rope-cache', 'mha-rope', 'gqa'):
        c.observe(pid, ProbeResult('ok'), {})
    wrong_in(c, 'gqa-rope', outputs(fx, 'gqa-rope', wrong=('',)), {'': ('rope',)}, monkeypatch)
    c._passes_merged = lambda pid, merged, view: False   # still wrong without the student's RoPE: the GQA fails
    c.settle_parts({'gqa-rope': outputs(fx, 'gqa-rope', wrong=('',))})
    assert c.failed == {'rope': grading.test('rope').number, 'gqa': grading.test('gqa-rope').number}


def test_charge_sets_nothing_aside(grading, fx):
    c = make(grading, fx, policy='never')
    first_run(c, ('rope', 'gqa'))
    c.observe('model', ProbeResult('ok'), {})
    assert c.failed == {'rope': grading.test('rope').number, 'gqa': grading.test('gqa').number}
    assert c.plan_later() == {} and c.plans == {}


def test_every_probe_declares_its_parts_and_cases():
    for t in registry.TESTS:
        if t.probe:
            assert t.calls and set(t.calls) <= set(registry.PARTS) and set(t.owns) <= set(t.calls), t.id
    for pid, table in registry.CASE_PARTS.items():
        for unit, parts in table.items():
            assert set(parts) <= set(registry.BY_ID[pid].calls), (pid, unit)
    order = [t.id for t in registry.TESTS]
    decided = [tid for tests in registry.PART_TESTS.values() for tid in tests]
    for t in registry.TESTS:   # the tests that decide a part run before every probe that can build on it
        if t.probe and t.id not in decided:
            assert all(order.index(d) < order.index(t.id) for d in decided), t.id


def test_the_grader_rope_is_the_reference_rope_forward_and_backward(monkeypatch):
    torch = needs_torch()
    import importlib
    import os
    import sys
    from autograder import REPO_ROOT
    from autograder.child import set_aside as child_side, socket_link
    from autograder.judge import rope_service as harness_side
    sys.path.insert(0, os.path.join(REPO_ROOT, 'reference'))
    try:
        ref = importlib.import_module('mingpt.model')
    finally:
        sys.path.remove(os.path.join(REPO_ROOT, 'reference'))
        for name in [n for n in sys.modules if n == 'mingpt' or n.startswith('mingpt.')]:
            del sys.modules[name]   # other tests import other mingpt packages
    answer, log = harness_side.for_probe(), []

    def ask(payload):
        reply, entry = answer(payload, 0)
        log.append(entry)
        return reply
    monkeypatch.setattr(socket_link, 'ask', ask)
    torch.manual_seed(0)
    x = torch.randn(32, 6, 300, 8, dtype=torch.float64, requires_grad=True)   # several messages' worth
    mine, theirs = child_side.GraderRoPE(8)(x), ref.RotaryPositionalEmbeddings(8)(x)
    assert torch.allclose(mine, theirs, atol=1e-12)
    g = torch.randn_like(mine)
    (grad_mine,) = torch.autograd.grad(mine, x, g)
    (grad_theirs,) = torch.autograd.grad(theirs, x, g)
    assert torch.allclose(grad_mine, grad_theirs, atol=1e-12)
    assert len(log) > 2 and {e['op'] for e in log} == {'forward', 'backward'}
    y = torch.randn(2, 3, 5, 8)   # float32 and a position offset (a KV cache's new tokens)
    assert torch.allclose(child_side.GraderRoPE(8)(y, offset=4), ref.RotaryPositionalEmbeddings(8)(
        torch.cat([torch.zeros(2, 3, 4, 8), y], dim=2))[:, :, 4:], atol=1e-5)
    monkeypatch.setattr(socket_link, 'ask', lambda payload: b'')   # a process the grader gives no RoPE
    with pytest.raises(child_side.GraderUnavailable):
        child_side.GraderRoPE(8)(y)
    assert answer(b'not a request', 0) == (b'', {'kind': 'rope', 'refused': 'not a well-formed request', 'bytes': 13})


def test_untouched_optional_parts_are_found_in_the_source():
    template = open('student_template/hw1/mingpt/model.py').read()
    assert untouched_optional(ast.parse(template)) == {'sliding_window', 'kv_cache'}
    assert untouched_optional(ast.parse(open('reference/mingpt/model.py').read())) == set()
    written = template.replace('raise NotImplementedError("TODO (optional): implement KVCache")', 'self.k = None')
    assert untouched_optional(ast.parse(written)) == {'sliding_window'}
    # absent: untouched
    assert untouched_optional(ast.parse('class GPT:\n    pass\n')) == {'sliding_window', 'kv_cache'}
    assert untouched_optional(ast.parse('from elsewhere import banded_attention\n')) == {'kv_cache'}
