"""
Causes a failure message names from its own evidence (issue 41): a low-precision grid in any
comparison and in 6.1's dropout, and the errors whose text shows their cause (a device written
into the code, is_causal beside a mask). Synthetic probe results, no torch: bfloat16 and float16
rounding are made here in numpy.
"""

import re

import numpy as np
import pytest

from autograder.judge import config, inputs
from autograder.judge.areas import case_error_line, compare, error_cause, low_precision_grid
from autograder.judge.areas.behaviour import judge_dropout
from autograder.judge.fixtures import Fixtures
from autograder.sandbox import ProbeResult
from autograder.staff.evaluation import evaluate

GRADING = config.load()
PROFILE = GRADING.profiles['cpu']
MOD = PROFILE.module
P = PROFILE.dropout.p


def bf16(x):
    """float32 values rounded to bfloat16 (nearest, ties to even), as float32: what torch's .bfloat16().float()
    gives."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- the grid in comparisons

def test_a_comparison_names_bfloat16_or_float16_only_where_every_value_lies_on_that_grid():
    e = rand((2, 13, 48), 0)
    ok, desc = compare(bf16(e), e, 1e-5, 1e-4)
    assert not ok and 'every value of this output is a bfloat16 number' in desc and 'autocast' in desc
    ok, desc = compare(e.astype(np.float16).astype(np.float32), e, 1e-5, 1e-4)
    assert not ok and 'float16 number' in desc and 'bfloat16' not in desc
    assert low_precision_grid(e.astype(np.float16), e) == 'float16'   # a float16 array says so by its dtype
    # a float32 output that is wrong by other means: no dtype is named
    ok, desc = compare(e * 1.01, e, 1e-5, 1e-4)
    assert not ok and 'float16' not in desc
    # a bfloat16 layer followed by a float32 bias leaves the grid: nothing said that the values do not show
    assert low_precision_grid(bf16(e) + np.float32(0.0123), e) is None
    # too few values to tell a grid from chance, and values that are on every grid (0, 0.5) are not counted
    assert low_precision_grid(bf16(e[0, 0, :8]), e[0, 0, :8]) is None
    halves = np.full((4, 8), 0.5, dtype=np.float32)
    assert low_precision_grid(halves, halves + 1e-3) is None and low_precision_grid(halves, halves) is None


# ----------------------------------------------------------------------------- dropout (6.1) in bfloat16

def _bf16_dropout(scale, seed=3):
    """A module run in bfloat16 whose dropout keeps (1 - P) and scales kept weights by `scale`."""
    bias = inputs.dropout_inputs(PROFILE.seed, MOD, 2, PROFILE.dropout.seq)[1]['out_proj.bias']
    rng = np.random.default_rng(seed)
    value = bf16(rng.uniform(0.05, 0.5, (MOD.batch, PROFILE.dropout.seq, MOD.n_embd)))
    base = bf16(bf16(bias) + value)
    keep = lambda: (rng.random(base.shape) >= P).astype(np.float32)   # noqa: E731
    p1_bias = inputs.attention_weights(PROFILE.seed, 'gqa-kv2', MOD.n_embd, MOD.n_query_head, 2)['out_proj.bias']
    p0 = bf16(rand((MOD.batch, MOD.seq, MOD.n_embd), 1))
    arrays = {'gqa/mid_eval_p0': base, 'gqa/mid_eval': base.copy(),
              'gqa/mid_attn_train': bf16(bf16(bias) + bf16(value * keep() * np.float32(scale))),
              'gqa/mid_resid_train': bf16(base * keep() * np.float32(scale)),
              'gqa/attn_p1_train': np.broadcast_to(bf16(p1_bias), p0.shape).copy(),
              'gqa/resid_p1_train': np.zeros_like(p0), 'gqa/both_p1_eval': p0.copy()}
    return arrays, p0


def _judge(arrays, p0):
    return judge_dropout(GRADING.test('dropout'), ProbeResult('ok', arrays=arrays, info={}),
                         Fixtures('cpu', {}, {}, {}), GRADING, {'gqa': ProbeResult('ok', arrays={'n_kv_head=2': p0})})


def test_a_correct_dropout_in_bfloat16_passes_and_the_message_names_the_dtype_not_dropout():
    arrays, p0 = _bf16_dropout(1 / (1 - P))
    v = _judge(arrays, p0)
    text = '\n'.join(v.lines)
    assert v.fraction == 1.0, text
    assert 'bfloat16' in text and 'neither dropped nor kept' not in text


def test_a_wrong_dropout_in_bfloat16_still_fails_on_its_own_evidence():
    arrays, p0 = _bf16_dropout(1.0)   # kept weights not scaled
    v = _judge(arrays, p0)
    text = '\n'.join(v.lines)
    assert v.fraction == pytest.approx(1 / 3), text
    assert 'not scaled by 1/(1 - p)' in text and 'bfloat16' in text


# ----------------------------------------------------------------------------- errors whose text shows the cause

def test_an_error_of_a_device_written_into_the_code_says_the_grader_has_no_gpu():
    line = case_error_line('d8_T16',
                           {'status': 'error', 'message': 'AssertionError: Torch not compiled with CUDA enabled'})
    assert 'the grader has no GPU' in line and 'x.device' in line
    assert 'is_causal=True or an attn_mask' in error_cause(
        'RuntimeError: _scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True')
    assert error_cause('RuntimeError: shapes do not match') == '' and error_cause(None) == ''


# ----------------------------------------------------------------------------- evaluate's count of named causes

def _row(verdict, outputs, must_fail=(), causes=()):
    tests = {tid: {'score': 0.0 if out else 5.0, 'max_score': 5.0, 'output': out,
                   'status': 'failed' if out else 'passed'}
             for tid, out in outputs.items()}
    return {'verdict': verdict, 'must_fail': list(must_fail), 'causes': list(causes), 'tests': tests,
            'lost': {tid for tid, out in outputs.items() if out}}


def test_evaluate_counts_a_message_named_only_when_it_says_the_declared_cause_and_no_other():
    row = _row('buggy', {'gqa': 'FAIL ... (your outputs match a known wrong variant: gqa-no-scale).',
                         'gqa-rope': 'FAIL max abs error 0.1', 'rope': ''}, ('gqa', 'gqa-rope'), ('gqa-no-scale',))
    assert evaluate.cause_cells(row) == {'gqa': 'named', 'gqa-rope': 'NOT NAMED'}
    wrong = _row('buggy',
                 {'gqa': 'FAIL ... wrong variant: gqa-tiled). every value of this output is a bfloat16 number'},
                 ('gqa',), ('bfloat16',))
    assert evaluate.cause_cells(wrong) == {'gqa': 'WRONG (gqa-tiled)'}
    assert evaluate.cause_cells(_row('correct', {'gqa': 'ok', 'rope': ''})) == {}


# ----------------------------------------------------------------------------- the public tests say the same

def test_the_public_tests_word_these_causes_as_the_grader_does():
    # the handout's words and rules are generated from the grader's (staff/handout/grader_values.py) into the
    # committed test_model_expected.json; the handout's code holds no copy of them
    import json
    import os
    from autograder import REPO_ROOT, TEMPLATE_DIR
    from autograder.judge import areas, messages
    from autograder.judge.areas.behaviour import GRID_RTOL
    with open(os.path.join(TEMPLATE_DIR, 'tests', '_support', 'test_model_expected.json'), encoding='utf-8') as f:
        committed = json.load(f)
    words, rules = committed['words'], committed['rules']
    assert words['low_precision'] == {g: messages.low_precision(g) for g in ('bfloat16', 'float16')}
    assert words['error_causes'] == messages.ERROR_CAUSES
    assert [tuple(m) for m in words['error_cause_marks']] == list(areas.ERROR_CAUSE_MARKS)
    assert (rules['min_grid'], rules['grid_share'], rules['grid_rtol']) == (areas.MIN_GRID, areas.GRID_SHARE, GRID_RTOL)
    path = os.path.join(REPO_ROOT, 'student_template', 'templates', 'tests', '_support', 'public_checks.py')
    with open(path, encoding='utf-8') as f:
        source = f.read()
    for copied in ('LOW_PRECISION', 'ERROR_CAUSES', 'ERROR_CAUSE_MARKS', 'MIN_GRID', 'GRID_SHARE', 'GRID_RTOL', 'ATOL'):
        assert not re.search(r'^%s\s*=' % copied, source, re.M), copied
