"""
The judges on synthetic probe results: no sandbox, no torch, no fixtures on disk, so a change
to a judge is checked in well under a second. The tolerances and profile sizes are the real
ones of grading.yaml; the arrays are made up here, with the errors placed on purpose.
"""

import numpy as np

from autograder import GRADING_YAML
from autograder.judge import config
from autograder.judge.areas import compare
from autograder.judge.verdicts import verdict_for
from autograder.judge.known_bugs import BY_ID as KNOWN_BUGS
from autograder.judge.fixtures import Fixtures
from autograder.sandbox import ProbeResult

GRADING = config.load(GRADING_YAML)


def fixtures(expected, known_bugs=None):
    return Fixtures('cpu', expected, known_bugs or {}, {})


def ok(arrays, **info):
    return ProbeResult('ok', arrays=arrays, info=info)


def spec(test_id):
    return GRADING.test(test_id)


def ref(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- compare

def test_compare_names_shape_non_finite_and_the_worst_element():
    e = ref((2, 3))
    assert compare(e.copy(), e, 1e-5, 1e-5)[0]
    good, desc = compare(e[:1], e, 1e-5, 1e-5)
    assert not good and desc == 'shape (1, 3), expected (2, 3)'
    bad = e.copy()
    bad[1, 2] = np.nan
    good, desc = compare(bad, e, 1e-5, 1e-5)
    assert not good and 'non-finite value nan at [1, 2]' in desc
    off = e.copy()
    off[0, 1] += 0.5
    good, desc = compare(off, e, 1e-5, 1e-5)
    assert not good and 'max abs error 0.5' in desc and 'worst at [0, 1]' in desc


# ----------------------------------------------------------------------------- values

def test_values_judge_gives_a_fraction_per_case_and_says_where():
    expected = {'gqa/n_kv_head=%d' % kv: ref((2, 13, 48), kv) for kv in (1, 2, 3, 6)}
    observed = {k[len('gqa/'):]: v.copy() for k, v in expected.items()}
    assert verdict_for(spec('gqa'), ok(observed), fixtures(expected), GRADING).fraction == 1.0
    observed['n_kv_head=2'] = observed['n_kv_head=2'] + 1e-3   # 100x the tolerance
    v = verdict_for(spec('gqa'), ok(observed), fixtures(expected), GRADING)
    assert v.fraction == 0.75 and v.lines[0] == '3 of 4 cases match the reference.'
    assert any(line.startswith('FAIL n_kv_head=2: max abs error 0.001') for line in v.lines), v.lines


def test_values_judge_names_the_known_bug_the_outputs_match():
    expected = {'gqa/n_kv_head=2': ref((2, 13, 48))}
    tiled = ref((2, 13, 48), seed=5)
    bugs = {'gqa-tiled': {'gqa/n_kv_head=2': tiled}, 'gqa-no-scale': {'gqa/n_kv_head=2': ref((2, 13, 48), 6)}}
    v = verdict_for(spec('gqa'), ok({'n_kv_head=2': tiled + 1e-6}), fixtures(expected, bugs), GRADING)
    assert v.fraction == 0.0
    assert v.lines[-1].startswith('Likely bug: ' + KNOWN_BUGS['gqa-tiled'].description), v.lines[-1]


def test_a_shift_of_rope_positions_says_why_attention_still_passes():
    # attention with RoPE is relative: 2.1 names the bug and says why the attention tests may pass with it
    expected = {'rope/d8_T16': ref((1, 2, 16, 8))}
    shifted = ref((1, 2, 16, 8), seed=3)
    v = verdict_for(spec('rope'), ok({'d8_T16': shifted}),
                    fixtures(expected, {'rope-positions-from-0': {'rope/d8_T16': shifted}}), GRADING)
    known_bug = KNOWN_BUGS['rope-positions-from-0']
    assert v.lines[-1] == 'Likely bug: %s (your outputs match a known wrong variant: rope-positions-from-0). %s' % (
        known_bug.description, known_bug.note)
    assert 'distance m - n' in known_bug.note


def test_values_judge_reports_a_case_error_with_its_place():
    expected = {'rope/d2_T5': ref((2, 3, 5, 2)), 'rope/d8_T16': ref((1, 2, 16, 8))}
    errors = {'d8_T16': {'status': 'not_implemented', 'message': 'NotImplementedError: TODO',
                         'where': ['model.py line 40, in forward: raise NotImplementedError']}}
    v = verdict_for(spec('rope'), ok({'d2_T5': expected['rope/d2_T5']}, case_errors=errors), fixtures(expected),
                    GRADING)
    assert v.fraction == 0.5
    assert 'FAIL d8_T16: not implemented yet: NotImplementedError: TODO\n    at model.py line 40' in '\n'.join(v.lines)


def test_rope_cache_judge_refuses_an_output_in_another_dtype():
    expected = {'rope-cache/call3_T8_float64': ref((1, 2, 8, 8)).astype(np.float64)}
    observed = {'call3_T8_float64': expected['rope-cache/call3_T8_float64'].astype(np.float32)}
    v = verdict_for(spec('rope-cache'), ok(observed, dtypes={'call3_T8_float64': ['float64', 'float32']}),
              fixtures(expected), GRADING)
    assert v.fraction == 0.0 and 'output dtype float32 for a float64 input' in '\n'.join(v.lines)


def test_model_judge_groups_logits_and_loss_into_one_case_and_notes_wpe_with_rope():
    expected = {'model/rope/logits': ref((2, 16, 65)), 'model/rope/loss': np.array([4.2], np.float32)}
    observed = {'rope/logits': expected['model/rope/logits'].copy(), 'rope/loss': np.array([4.3], np.float32)}
    v = verdict_for(spec('model'), ok(observed, has_wpe={'rope': True}), fixtures(expected), GRADING)
    assert v.lines[0] == '0 of 1 cases match the reference.'
    assert 'RoPE replaces the absolute position embedding' in v.lines[-1]


# ----------------------------------------------------------------------------- guard

def test_a_probe_that_did_not_finish_scores_zero_with_its_status():
    v = verdict_for(spec('gqa'), ProbeResult('timeout', 'it ran longer than the 60 s allowed'), fixtures({}), GRADING)
    assert v.fraction == 0.0 and v.lines[0] == 'timed out: it ran longer than the 60 s allowed'


def test_malformed_student_arrays_cost_the_test_not_the_grading():
    lc = GRADING.profiles['cpu'].loss_curve
    key = 'seed%d' % lc.student_seed
    expected = {'loss-curve/' + key: np.linspace(4.2, 2.5, lc.iters),
                'loss-curve/%s/heldout_logits' % key: np.zeros((lc.heldout_seqs, lc.block_size, 90), np.float32)}
    # a 0-d array where the held-out logits belong: the harness must answer, never raise
    v = verdict_for(spec('loss-curve'), ok({key: np.array(3.0), key + '/heldout_logits': np.array(3.0)}),
              fixtures(expected), GRADING)
    assert v.fraction == 0.0 and v.lines[0].startswith('FAIL')


# The loss-curve judge (a held-out loss the harness computes) is tested in test_training_judges.py.
