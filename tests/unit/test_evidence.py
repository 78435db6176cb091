"""
The records of the student's parts inside a case (child/evidence.py) and the harness's own check of
them (judge/evidence.py), end to end in one process: the reference's modules are right everywhere;
a RoPE wrong at one position, an attention scaled twice, a RoPE that raises and an attention that
raises are each shown wrong, in their own part only; what cannot be matched is no evidence.
"""

import importlib
import os
import sys

import numpy as np
import pytest

from autograder import REPO_ROOT
from autograder.judge import config, evidence as judge_side
from autograder.sandbox.readback import ProbeResult
from torch_free import needs_torch


@pytest.fixture(scope='module')
def ref():
    needs_torch()
    sys.path.insert(0, os.path.join(REPO_ROOT, 'reference'))
    try:
        yield importlib.import_module('mingpt.model')
    finally:
        sys.path.remove(os.path.join(REPO_ROOT, 'reference'))
        for name in [n for n in sys.modules if n == 'mingpt' or n.startswith('mingpt.')]:
            del sys.modules[name]


def recorded(ref, kind='gqa', n_kv_head=2, case='rope-gqa', probe='model', patch=None, monkeypatch=None):
    """{unit: {part: Shown}} of one call of the reference's attention (`patch`: a change to the module's class)."""
    import torch
    from autograder.child import adapter, evidence
    cfg = ref.GPT.get_default_config()
    for k, v in dict(n_embd=48, n_query_head=6, n_kv_head=n_kv_head, block_size=32, rope=True, attn_pdrop=0.0,
                     resid_pdrop=0.0, sliding_window=None).items():
        setattr(cfg, k, v)
    torch.manual_seed(0)
    module = (ref.GroupedQueryAttention if kind == 'gqa' else ref.CausalSelfAttention)(cfg).eval()
    if patch:
        patch(module)
    monkeypatch.setattr(evidence, 'ON', True)
    evidence.watch(module, cfg, ref, adapter.attention_weights)
    evidence.begin(case)
    try:
        module(torch.randn(3, 16, 48))
    except RuntimeError:
        evidence.failed(case)
    finally:
        evidence.end()
    arrays, info = {}, {}
    evidence.collect(arrays, info)
    bare, records = judge_side.take(ProbeResult('ok', arrays=arrays, info=info))
    assert not bare.arrays and 'evidence' not in bare.info
    return judge_side.shown_wrong(probe, records, {}, 6, config.load().evidence), records


def test_the_reference_is_right_in_every_case(ref, monkeypatch):
    for kind, kv, case in (('gqa', 2, 'rope-gqa'), ('gqa', 1, 'rope-gqa'), ('mha', 6, 'rope')):
        shown, records = recorded(ref, kind, kv, case, monkeypatch=monkeypatch)
        assert shown == {} and len(records) == 1, (kind, kv)
        assert records[0]['arrays']['x'].shape == (2, 16, 48)   # the batch cut to its first rows
        assert len(records[0]['offsets']) == 2   # its queries' and keys' RoPE


def test_a_rope_wrong_at_one_position_is_shown_wrong_there_and_the_attention_is_not(ref, monkeypatch):
    def patch(module):
        for rope in (module.query_rotary_pe, module.key_rotary_pe):
            forward = rope.forward

            def wrong(x, offset=0, forward=forward):
                y = forward(x, offset).clone()
                y[..., 2, :] = -y[..., 2, :]   # position 3
                return y
            rope.forward = wrong
    shown, _ = recorded(ref, patch=patch, monkeypatch=monkeypatch)
    assert list(shown) == ['rope-gqa'] and list(shown['rope-gqa']) == ['rope']
    assert shown['rope-gqa']['rope'].what == 'values' and shown['rope-gqa']['rope'].position == 3


def test_an_attention_wrong_around_a_right_rope_is_shown_wrong(ref, monkeypatch):
    import torch

    def q_scaled(module):   # q scaled before the scores are scaled again: its RoPE is given no query of ours
        q_proj = module.q_proj.forward
        module.q_proj.forward = lambda x: q_proj(x) / 8 ** 0.5

    def keys_not_rotated(module):   # RoPE on the queries only: no RoPE call rotates its keys
        del module._modules['key_rotary_pe']
        module.key_rotary_pe = lambda x, offset=0: x

    def softmax_doubled(module):
        softmax = torch.softmax
        monkeypatch.setattr(torch, 'softmax', lambda t, dim=-1, **k: softmax(t * 2.0, dim=dim, **k))
        monkeypatch.setattr(torch.nn.functional, 'softmax', lambda t, dim=-1, **k: softmax(t * 2.0, dim=dim, **k))
    for patch in (q_scaled, keys_not_rotated, softmax_doubled):
        shown, _ = recorded(ref, patch=patch, monkeypatch=monkeypatch)
        assert {p: s.what for p, s in shown.get('rope-gqa', {}).items()} == {'gqa': 'values'}, patch.__name__
        monkeypatch.undo()


def test_a_raise_is_placed_in_the_part_whose_code_raised(ref, monkeypatch):
    def rope_raises(module):
        def boom(x, offset=0):
            raise RuntimeError('rope raised')
        module.key_rotary_pe.forward = boom
    shown, _ = recorded(ref, patch=rope_raises, monkeypatch=monkeypatch)
    assert {p: s.what for p, s in shown['rope-gqa'].items()} == {'rope': 'raised'}

    def attention_raises(module):

        def boom(x):
            raise RuntimeError('attention raised')
        module.v_proj.forward = boom
    shown, _ = recorded(ref, patch=attention_raises, monkeypatch=monkeypatch)
    assert {p: s.what for p, s in shown['rope-gqa'].items()} == {'gqa': 'raised'}


def test_a_raise_in_a_later_call_of_the_case_is_placed_too(ref, monkeypatch):
    calls = []

    def second_call_raises(module):
        forward = module.key_rotary_pe.forward

        def once(x, offset=0):
            calls.append(1)
            if len(calls) > 1:
                raise RuntimeError('cache not rebuilt')
            return forward(x, offset)
        module.key_rotary_pe.forward = once
        attention = module.forward
        module.forward = lambda x, kv_cache=None: (attention(x), attention(x))[1]   # called twice in the case
    shown, records = recorded(ref, patch=second_call_raises, monkeypatch=monkeypatch)
    assert {p: s.what for p, s in shown['rope-gqa'].items()} == {'rope': 'raised'}


def test_a_case_that_does_not_run_a_part_counts_no_evidence_of_it(ref, monkeypatch):
    # 8.1's 'gqa' case runs no RoPE: a RoPE record there is not read; an MHA record in a GQA case is not either
    shown, _ = recorded(ref, 'mha', 6, 'gqa', monkeypatch=monkeypatch)
    assert shown == {}


def test_forged_records_are_dropped_or_refused():
    from autograder.contract import report_schema
    good = {'case': 'rope', 'part': 'gqa', 'slot': 0, 'layout': [['x', [1, 2, 3]]], 'offsets': [0], 'dropout': False,
            'raised': ''}
    assert report_schema.check_report({'evidence': [good]})
    for bad in (dict(good, part='gpt'), dict(good, slot=report_schema.MAX_EVIDENCE), dict(good, layout=[['w', [1]]]),
                dict(good, extra=1), dict(good, raised='yes')):
        with pytest.raises(ValueError):
            report_schema.check_report({'evidence': [bad]})
    # a layout that does not fit its array is no record
    result = ProbeResult('ok', arrays={'evidence/0': np.zeros(5)}, info={'evidence': [good]})
    bare, records = judge_side.take(result)
    assert records == [] and bare.arrays == {}


def test_a_second_argument_read_as_an_offset_never_shows_a_right_rope_wrong():
    from autograder.judge.rope_service import rotate
    tol = config.load().evidence['rope']
    x = np.random.default_rng(0).standard_normal((2, 3, 7, 8))
    at = lambda first: rotate(x.reshape(-1, 7, 8), first, 10_000).reshape(x.shape)
    assert judge_side.check_rope(x, at(4), 4, tol, 'c') is None      # an offset, honoured
    assert judge_side.check_rope(x, at(0), 7, tol, 'c') is None      # their second argument was a length
    shown = judge_side.check_rope(x, -at(0), 4, tol, 'c')            # right under neither reading
    assert shown is not None and shown.what == 'values' and shown.position == 1
