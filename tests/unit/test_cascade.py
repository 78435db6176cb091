"""
The cascade (autograder/judge/cascade.py) on fake probe results: which parts a grading sets aside,
what each later probe is told, which probes a hang skips and the words the student reads.
The stand-ins themselves (child/standins.py) are checked against the reference's classes.
"""

import dataclasses

import pytest

from autograder.judge import cascade, config, registry
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

class Block:
    def forward(self, x):
        return self.attn(x)
'''


@pytest.fixture(scope='module')
def grading():
    return config.load()


def make(grading, policy='insulate', passes=()):
    """A Cascade whose part tests pass exactly for the ids in `passes` (no fixtures needed)."""
    c = cascade.Cascade(dataclasses.replace(grading, cascade=policy), None, MODEL_PY, grading.enabled_tests())
    c._passes = lambda probe_id, result, results: probe_id in passes
    return c


def ok():
    return ProbeResult('ok')


def test_a_failed_rope_is_replaced_in_later_probes_but_never_in_its_own_tests(grading):
    c = make(grading, passes=('rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    for pid in ('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'):
        c.observe(pid, ok(), {})
    assert c.failed == {'rope': '2.1'}
    assert c.stand_ins('rope-cache') == {}
    assert c.stand_ins('mha-rope') == {'rope': '2.1'}
    assert c.stand_ins('model') == {'rope': '2.1'}
    assert c.stand_ins('gqa') == {}          # 4.1 runs no RoPE
    assert c.stand_ins('memory') == {}


def test_a_failed_gqa_is_replaced_in_the_gpt_but_its_own_tests_keep_it(grading):
    c = make(grading, passes=('rope', 'rope-cache', 'mha-rope'))
    for pid in ('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'):
        c.observe(pid, ok(), {})
    assert c.failed == {'gqa': '4.1'}
    assert c.stand_ins('gqa-rope') == {} and c.stand_ins('dropout') == {} and c.stand_ins('memory') == {}
    for pid in ('causality', 'model', 'generate', 'loss-curve', 'gradients', 'load-pretrained'):
        assert c.stand_ins(pid) == {'gqa': '4.1'}, pid


def test_stand_ins_never_stand_for_every_part_a_probe_runs(grading):
    # the untouched template fails 2.1, 3.1 and 4.1: its GPT tests would otherwise judge stand-ins and given code only
    c = make(grading, passes=())
    for pid in ('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'):
        c.observe(pid, ok(), {})
    assert c.failed == {'rope': '2.1', 'mha': '3.1', 'gqa': '4.1'}
    for pid in ('causality', 'model', 'generate', 'loss-curve', 'gradients', 'load-pretrained', 'kv-cache'):
        assert c.stand_ins(pid) == {}, pid
    assert c.stand_ins('mha-rope') == {'rope': '2.1'}   # 3.1 still judges the student's MHA with the reference RoPE
    # a RoPE and a GQA that fail, an MHA that passes: the GPT tests that run the MHA keep both stand-ins
    c = make(grading, passes=('mha-rope',))
    for pid in ('rope', 'rope-cache', 'mha-rope', 'gqa', 'gqa-rope'):
        c.observe(pid, ok(), {})
    assert c.stand_ins('model') == {'rope': '2.1', 'gqa': '4.1'}
    assert c.stand_ins('generate') == {}   # it runs only the GQA and RoPE (and the given GPT)


def test_charge_replaces_nothing(grading):
    c = make(grading, policy='charge')
    for pid in ('rope', 'gqa'):
        c.observe(pid, ok(), {})
    assert c.failed == {'rope': '2.1', 'gqa': '4.1'}
    assert c.stand_ins('model') == {}


def test_the_message_says_which_stand_in_ran_or_that_the_part_could_not_be_set_aside(grading):
    c = make(grading, passes=('rope-cache', 'mha-rope', 'gqa', 'gqa-rope'))
    c.observe('rope', ok(), {})
    c.stand_ins('model')
    used = ProbeResult('ok', info={'stand_ins': {'built': ['rope'], 'kept': []}})
    assert c.lines('model', used) == ['Judged with the reference RoPE in place of yours, which fails 2.1.']
    kept = ProbeResult('ok', info={'stand_ins': {'built': [], 'kept': ['rope']}})
    assert 'could not be set aside' in c.lines('model', kept)[0] and '2.1' in c.lines('model', kept)[0]
    # a part the probe was not told to replace is never claimed, whatever the child reports
    forged = ProbeResult('ok', info={'stand_ins': {'built': ['gqa', 'rope'], 'kept': 'x'}})
    assert c.lines('model', forged) == ['Judged with the reference RoPE in place of yours, which fails 2.1.']
    assert c.lines('rope-cache', used) == []


def test_an_optional_test_on_a_failed_part_is_not_judged(grading):
    c = make(grading, passes=('rope', 'rope-cache', 'mha-rope'))
    c.observe('gqa', ok(), {})
    assert 'GroupedQueryAttention, which fails 4.1' in c.blocked(grading.test('sliding-window'))
    assert c.blocked(grading.test('sliding-window-memory')) is None   # banded_attention alone


def test_functions_and_the_frame_of_a_hang(grading):
    functions = cascade.functions_of(MODEL_PY)
    assert ('GroupedQueryAttention.forward' in [f[2] for f in functions])
    loop_line = MODEL_PY.splitlines().index('        while h < 6:') + 1
    hang = {'frames': [{'file': 'model.py', 'line': 19, 'function': 'forward'},
                       {'file': 'model.py', 'line': loop_line, 'function': 'forward'}]}
    assert cascade.where_hung(hang, functions) == ('gqa', 'GroupedQueryAttention.forward', loop_line)
    assert cascade.where_hung({'frames': [{'line': 'x'}, 7]}, functions) is None
    assert cascade.where_hung('junk', functions) is None
    assert cascade.where_hung({'frames': [{'line': 1}]}, functions) == (None, 'model.py', 1)   # at import


def test_a_hang_in_gqa_skips_the_probes_that_run_it_again_and_only_those(grading):
    c = make(grading, passes=('rope', 'rope-cache', 'mha-rope'))
    loop_line = MODEL_PY.splitlines().index('        while h < 6:') + 1
    hung = ProbeResult('timeout', 'timed out', harness={'hang': {'frames': [{'file': 'model.py', 'line': loop_line,
                                                                             'function': 'forward'}]}})
    for pid in ('rope', 'rope-cache', 'mha-rope'):
        c.observe(pid, ok(), {})
    c.observe('gqa', hung, {})
    sentence = 'not run: GroupedQueryAttention.forward did not return in test 4.1 (model.py line %d)' % loop_line
    assert c.lines('gqa', hung) == ['Your code was stopped in GroupedQueryAttention.forward (model.py line %d): '
                                    'a loop that never ends?' % loop_line]
    assert {pid: c.skip(pid, {}) for pid in ('gqa-rope', 'dropout', 'causality', 'memory', 'sliding-window')} == \
        dict.fromkeys(('gqa-rope', 'dropout', 'causality', 'memory', 'sliding-window'), sentence)
    # the GPT-level probes build the stand-in GQA in its place; tests that never call GQA run
    for pid in ('model', 'generate', 'loss-curve', 'gradients', 'load-pretrained', 'kv-cache', 'sliding-window-memory',
                'rope', 'mha-rope'):
        assert c.skip(pid, {}) is None, pid
    charged = make(grading, policy='charge', passes=('rope', 'rope-cache', 'mha-rope'))
    charged.observe('gqa', hung, {})
    assert charged.skip('model', {}) == sentence


def test_a_timeout_without_a_dump_names_the_one_part_its_probe_runs(grading):
    c = make(grading)
    c.observe('gqa', ProbeResult('timeout', 'timed out'), {})
    assert c.skip('memory', {}) == 'not run: GroupedQueryAttention did not return in test 4.1'
    c.observe('model', ProbeResult('timeout', 'timed out'), {})   # many parts: no guess
    assert set(c.hung) == {'gqa'}


def test_an_import_that_hangs_is_named(grading):
    c = make(grading)
    c.observe('import', ProbeResult('timeout', 'timed out', harness={'hang': {'frames': [{'line': 1}]}}), {})
    assert c.import_hang == 'model.py did not finish importing (model.py line 1)'


def test_every_probe_declares_the_parts_it_calls():
    for t in registry.TESTS:
        if t.probe:
            assert t.calls and set(t.calls) <= set(registry.PARTS) and set(t.owns) <= set(t.calls), t.id
    order = [t.id for t in registry.TESTS]
    decided = [tid for tests in registry.PART_TESTS.values() for tid in tests]
    # the tests that decide a part run before every probe that can build on it
    for t in registry.TESTS:
        if t.probe and t.id not in decided:
            assert all(order.index(d) < order.index(t.id) for d in decided), t.id


def test_the_stand_ins_compute_the_reference_modules():
    torch = needs_torch()
    import importlib
    import os
    import sys
    from types import SimpleNamespace
    from autograder import REPO_ROOT
    from autograder.child import standins
    sys.path.insert(0, os.path.join(REPO_ROOT, 'reference'))
    try:
        ref = importlib.import_module('mingpt.model')
    finally:
        sys.path.remove(os.path.join(REPO_ROOT, 'reference'))
        for name in [n for n in sys.modules if n == 'mingpt' or n.startswith('mingpt.')]:
            del sys.modules[name]   # other tests import other mingpt packages
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    assert torch.allclose(standins.StandInRoPE(8)(x), ref.RotaryPositionalEmbeddings(8)(x))
    cfg = SimpleNamespace(n_embd=24, n_query_head=6, n_kv_head=2, block_size=16, attn_pdrop=0.0, resid_pdrop=0.0,
                          rope=True, sliding_window=None)
    mine, theirs = standins.StandInGroupedQueryAttention(cfg).eval(), ref.GroupedQueryAttention(cfg).eval()
    theirs.load_state_dict(mine.state_dict(), strict=False)
    h = torch.randn(2, 11, 24)
    assert torch.allclose(mine(h)[0], theirs(h)[0], atol=1e-6)
    module = SimpleNamespace(GroupedQueryAttention='theirs')
    with standins.swapped(module, ['gqa', 'rope']):
        assert module.GroupedQueryAttention is standins.StandInGroupedQueryAttention
        assert not hasattr(module, 'RotaryPositionalEmbeddings')
    assert module.GroupedQueryAttention == 'theirs'


def test_an_optional_test_is_never_red_for_a_required_part(grading):
    c = make(grading, passes=('rope', 'rope-cache', 'mha-rope'))
    c.observe('gqa', ProbeResult('timeout', 'timed out'), {})
    skipped = ProbeResult('skipped', c.skip('sliding-window', {}))
    v = c.optional_verdict(grading.test('sliding-window'), skipped, {'sliding-window': skipped}, grading.enabled_tests())
    assert (v.fraction, v.not_judged, v.lines) == (
        0.0, True, ['Not judged: it builds on your GroupedQueryAttention, which fails 4.1.'])
    late = ProbeResult('timeout', 'not run: the grading time budget was used up')
    probes = {'model': ProbeResult('timeout', 'timed out'), 'kv-cache': late}
    v = make(grading).optional_verdict(grading.test('kv-cache'), late, probes, grading.enabled_tests())
    assert v.not_judged and v.lines == ['Not judged: test 8.1 did not finish in time, so this one could not finish '
                                        'either.']
    untouched = ProbeResult('not_implemented', 'NotImplementedError: TODO (optional)')
    assert make(grading).optional_verdict(grading.test('kv-cache'), untouched, {}, []).not_implemented
