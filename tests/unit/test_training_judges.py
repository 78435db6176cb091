"""
The judges of the training path (areas/training.py: gradients, loss-curve) and of the
block-16 -> block-256 workflow (areas/pretrained.py), on synthetic probe results: no sandbox,
no torch, no fixtures on disk.
"""

import numpy as np
import pytest

from autograder import GRADING_YAML
from autograder.judge import config
from autograder.judge.areas import training as training_judges
from autograder.judge.areas import pretrained
from autograder.judge.fixtures import Fixtures
from autograder.sandbox import ProbeResult

GRADING = config.load(GRADING_YAML)
PARAMS = ('transformer.h.0.attn.q_proj.weight', 'transformer.h.0.attn.k_proj.weight',
          'transformer.h.0.attn.k_proj.bias', 'transformer.h.0.attn.v_proj.weight', 'lm_head.weight')


def fixtures(expected):
    return Fixtures('cpu', expected, {}, {})


# ----------------------------------------------------------------------------- gradients

STEP0 = 'seed%d/step0/' % GRADING.profiles['cpu'].loss_curve.student_seed


def gradient_fixtures():
    rng = np.random.default_rng(0)
    exp = {}
    for label in ('rope', 'gqa'):
        for p in PARAMS:
            exp['gradients/%s/%s' % (label, p)] = (0.05 * rng.standard_normal((4, 3))).astype(np.float32)
    for p in PARAMS:   # the gradients of the reference's training at step 0 (10.1's run at the student's seed)
        exp['loss-curve/%s%s' % (STEP0, p)] = (0.01 * rng.standard_normal((4, 3))).astype(np.float32)
    return exp


def observed(exp, probe='gradients'):
    return {k[len(probe) + 1:]: v.copy() for k, v in exp.items() if k.startswith(probe + '/')}


def judge_gradients(arrays, errors=None, training=None):
    exp = gradient_fixtures()
    info = {'case_errors': errors} if errors else {}
    training = ProbeResult('ok', arrays=observed(exp, 'loss-curve')) if training is None else training
    return training_judges.judge_gradients(GRADING.test('gradients'), ProbeResult('ok', arrays=arrays, info=info),
                                           fixtures(exp), GRADING, {'loss-curve': training})


def test_gradients_of_the_reference_pass():
    v = judge_gradients(observed(gradient_fixtures()))
    assert v.fraction == 1.0, v.lines
    assert '3 of 3' in v.lines[0] and 'ok   training run' in '\n'.join(v.lines)


def test_float_noise_in_gradients_passes():
    arrays = observed(gradient_fixtures())
    for k in arrays:
        if arrays[k].dtype.kind == 'f':
            arrays[k] = arrays[k] + np.float32(2e-6)   # what SDPA/einsum styles differ by
    assert judge_gradients(arrays).fraction == 1.0


def test_missing_gradient_names_the_parameter_and_the_cause():
    arrays = observed(gradient_fixtures())
    del arrays['gqa/transformer.h.0.attn.k_proj.weight']
    v = judge_gradients(arrays)
    assert v.fraction == pytest.approx(1 / 2)   # 'rope' of the 2 probe cases; the training's gradients are right
    text = '\n'.join(v.lines)
    assert 'transformer.h.0.attn.k_proj.weight gets no gradient' in text
    assert 'is k detached, computed under torch.no_grad()' in text
    assert 'ok   rope' in text


def test_an_all_zero_gradient_counts_as_none():
    """A fused layer used through .data for its K/V rows: the gradient exists, its K/V part is zero."""
    arrays = observed(gradient_fixtures())
    arrays['rope/transformer.h.0.attn.v_proj.weight'][:] = 0
    v = judge_gradients(arrays)
    assert v.fraction < 1.0
    assert 'transformer.h.0.attn.v_proj.weight gets no gradient' in '\n'.join(v.lines)


def test_wrong_gradient_names_the_parameter_with_expected_and_observed():
    arrays = observed(gradient_fixtures())
    arrays['rope/transformer.h.0.attn.q_proj.weight'] *= 0.5
    v = judge_gradients(arrays)
    text = '\n'.join(v.lines)
    assert v.fraction < 1.0
    assert 'transformer.h.0.attn.q_proj.weight has a wrong gradient' in text and 'expected' in text


def test_a_case_error_fails_that_case_only():
    arrays = {k: v for k, v in observed(gradient_fixtures()).items() if not k.startswith('gqa/')}
    v = judge_gradients(arrays, errors={'gqa': {'status': 'error', 'message': 'RuntimeError: boom'}})
    assert v.fraction == pytest.approx(1 / 2)
    assert 'boom' in '\n'.join(v.lines)


def test_wrong_training_gradients_earn_nothing_however_right_the_probe_is():
    """A model that answers the gradients probe right but trains with other gradients (it detected the probe)."""
    training = observed(gradient_fixtures(), 'loss-curve')
    training[STEP0 + 'transformer.h.0.attn.k_proj.weight'][:] = 0
    v = judge_gradients(observed(gradient_fixtures()), training=ProbeResult('ok', arrays=training))
    text = '\n'.join(v.lines)
    assert v.fraction == 0.0
    assert 'FAIL training run' in text and 'k_proj.weight gets no gradient' in text and 'earns nothing' in text


def test_a_training_run_without_gradients_earns_nothing():
    for training in (ProbeResult('timeout', 'it ran longer than the 240 s allowed'),
                     ProbeResult('ok', info={'case_errors': {STEP0.rstrip('/'): {
                         'status': 'error', 'message': "AdapterError: the training ran no step"}}})):
        v = judge_gradients(observed(gradient_fixtures()), training=training)
        assert v.fraction == 0.0 and 'FAIL training run' in '\n'.join(v.lines), v.lines


def test_other_parameters_and_buffers_of_the_student_cost_nothing():
    # a persistent RoPE inv_freq, an extra parameter: the probe reports the reference's names only, and
    # arrays of other names (a forged or older probe) are not judged
    arrays = observed(gradient_fixtures())
    arrays['rope/transformer.h.0.attn.query_rotary_pe.inv_freq'] = np.ones(4, np.float32)
    assert judge_gradients(arrays).fraction == 1.0


# ----------------------------------------------------------------------------- loss curve

LC = GRADING.profiles['cpu'].loss_curve
N, T, V = 6, LC.block_size, 11


def targets():
    return np.random.default_rng(1).integers(0, V, (N, T))


def logits_with_loss(loss, seed=0):
    """Logits (N, T, V) whose cross-entropy against targets() is exactly `loss` nats."""
    # the target gets probability p, the other V - 1 classes share 1 - p evenly
    p = np.exp(-loss)
    x = np.full((N, T, V), np.log((1 - p) / (V - 1)))
    np.put_along_axis(x, targets()[..., None], np.log(p), axis=-1)
    # a shift per row changes nothing
    return (x + np.random.default_rng(seed).standard_normal((N, T, 1))).astype(np.float32)


@pytest.fixture
def loss_fixtures(monkeypatch):
    monkeypatch.setattr(training_judges, 'heldout_targets', lambda profile, grading, seed: targets())
    exp = {'loss-curve/seed%d' % seed: np.linspace(4.0, 2.5, LC.iters) for seed in LC.reference_seeds}
    # the yardstick: the reference trained at the student's seed from the same initial weights
    exp['loss-curve/seed%d/heldout_logits' % LC.student_seed] = logits_with_loss(2.01, 3)
    return fixtures(exp)


def judge_loss(fx, loss=None, curve=None, logits=None, errors=None):
    key = 'seed%d' % LC.student_seed
    arrays = {key: np.linspace(4.0, 2.5, LC.iters) if curve is None else curve}
    if logits is not None or loss is not None:
        arrays[key + '/heldout_logits'] = logits if logits is not None else logits_with_loss(loss, 9)
    info = {'case_errors': errors} if errors else {}
    return training_judges.judge_loss_curve(GRADING.test('loss-curve'), ProbeResult('ok', arrays=arrays, info=info),
                                            fx, GRADING)


def test_cross_entropy_in_numpy():
    assert training_judges.cross_entropy(logits_with_loss(1.7), targets()) == pytest.approx(1.7, abs=1e-5)
    uniform = np.zeros((2, 3, 4), dtype=np.float32)
    assert training_judges.cross_entropy(uniform, np.zeros((2, 3), dtype=np.int64)) == pytest.approx(np.log(4))


REF_LOGITS = logits_with_loss(2.01, 3)   # the reference's run at the student's seed (loss_fixtures)


def test_the_references_logits_to_float_noise_pass(loss_fixtures):
    tol = GRADING.test('loss-curve').tolerance
    noise = np.random.default_rng(5).uniform(-1, 1, REF_LOGITS.shape).astype(np.float32) * 1.2e-5   # the corpus' worst
    v = judge_loss(loss_fixtures, logits=REF_LOGITS + noise)
    assert v.fraction == 1.0, v.lines
    assert 'held-out loss 2.0100' in v.summary and 'not graded' in v.summary
    assert judge_loss(loss_fixtures, logits=REF_LOGITS + np.float32(0.5 * tol.atol)).fraction == 1.0


def test_no_reference_logits_at_the_student_seed_asks_to_regenerate(loss_fixtures):
    del loss_fixtures.expected['loss-curve/seed%d/heldout_logits' % LC.student_seed]
    assert 'regenerate' in judge_loss(loss_fixtures, loss=2.01).lines[0]


def test_the_logits_decide_not_the_loss_nor_the_reported_curve(loss_fixtures):
    """Logits with the reference's held-out loss but not its values (one extra step moves them by 0.4) fail;
    a forged curve changes nothing."""
    v = judge_loss(loss_fixtures, logits=logits_with_loss(2.01, 9), curve=np.full(LC.iters, 2.01))
    assert v.fraction == 0.0 and 'differ from the reference\'s run' in v.lines[0]
    assert 'held-out loss 2.0100, the reference\'s 2.0100' in v.lines[0]
    assert judge_loss(loss_fixtures, logits=REF_LOGITS.copy(), curve=np.full(LC.iters, 9.0)).fraction == 1.0


def test_the_message_says_what_the_training_shows(loss_fixtures):
    key = 'seed%d' % LC.student_seed
    v = judge_loss(loss_fixtures, logits=REF_LOGITS + 0.4, curve=np.linspace(4.0, 2.5, 2 * LC.iters))
    assert 'the training ran %d iterations, not %d' % (2 * LC.iters, LC.iters) in v.lines[1]
    loss_fixtures.expected['loss-curve/%s/step0/lm_head.weight' % key] = np.ones((3, 2), np.float32)
    arrays = {key: np.linspace(4.0, 2.5, LC.iters), key + '/heldout_logits': REF_LOGITS + 0.4,
              key + '/step0/lm_head.weight': np.zeros((3, 2), np.float32)}
    run = lambda arrays: training_judges.judge_loss_curve(GRADING.test('loss-curve'), ProbeResult('ok', arrays=arrays),
                                                          loss_fixtures, GRADING)
    assert 'first training step already differ' in run(arrays).lines[1]
    arrays[key + '/step0/lm_head.weight'] = np.ones((3, 2), np.float32)
    assert 'the training parts ways later' in run(arrays).lines[1]


def test_missing_wrong_shape_or_nonfinite_heldout_logits_fail(loss_fixtures):
    assert 'shape None' in judge_loss(loss_fixtures).lines[0]
    assert judge_loss(loss_fixtures, logits=np.zeros((N, T, V + 1), dtype=np.float32)).fraction == 0.0
    bad = logits_with_loss(2.01)
    bad[0, 0, 0] = np.nan
    assert 'not finite' in judge_loss(loss_fixtures, logits=bad).lines[0]


def test_training_error_fails_with_its_message(loss_fixtures):
    v = judge_loss(loss_fixtures, errors={'seed%d' % LC.student_seed: {'status': 'error', 'message': 'boom'}})
    assert v.fraction == 0.0 and 'boom' in v.lines[0]


# ----------------------------------------------------------------------------- load_pretrained

def workflow_fixtures():
    rng = np.random.default_rng(2)
    return {'load-pretrained/%s/logits' % label: rng.standard_normal((1, 256, 7)).astype(np.float32)
            for label in ('rope', 'gqa', 'rope-gqa')}


def judge_workflow(arrays, errors=None, facts=None):
    info = {'case_errors': errors} if errors else {}
    if facts:
        info['facts'] = facts
    return pretrained.judge_load_pretrained(GRADING.test('load-pretrained'),
                                            ProbeResult('ok', arrays=arrays, info=info),
                                            fixtures(workflow_fixtures()), GRADING)


def good_workflow():
    arrays = {k[len('load-pretrained/'):]: v.copy() for k, v in workflow_fixtures().items()}
    for label in ('rope', 'gqa', 'rope-gqa'):
        arrays[label + '/stage'] = np.array(3)
    return arrays


def test_workflow_of_the_reference_passes():
    v = judge_workflow(good_workflow())
    assert v.fraction == 1.0, v.lines


def test_a_loader_that_raises_costs_its_case_and_shows_what_does_not_fit():
    arrays = good_workflow()
    del arrays['rope/logits']
    arrays['rope/stage'] = np.array(1)
    # the probe names, in words, the tensors of model.pt whose shape differs in a fresh block-256 model
    fact = ('model.pt holds transformer.h.0.attn.mask of shape (1, 1, 16, 16); a fresh block-256 model has '
            '(1, 1, 256, 256)')
    v = judge_workflow(arrays, errors={'rope': {'status': 'error', 'message': 'RuntimeError: Error(s) in loading '
                                                'state_dict for GPT: size mismatch for transformer.h.0.attn.mask',
                                                'where': ['model.py line 520, in load_pretrained: '
                                                          'self.load_state_dict(state)']}},
                       facts={'rope': [fact]})
    text = '\n'.join(v.lines)
    assert v.fraction == pytest.approx(2 / 3)
    assert 'GPT.load_pretrained(folder) into a block-256 model: your code raised an error: RuntimeError' in text
    assert 'model.py line 520, in load_pretrained' in text and fact in text
    assert 'persistent=False' in text


def test_crash_at_T256_shows_what_the_loader_left():
    arrays = good_workflow()
    del arrays['rope-gqa/logits']
    arrays['rope-gqa/stage'] = np.array(2)
    v = judge_workflow(arrays, errors={'rope-gqa': {'status': 'error', 'message': 'IndexError: index 128 is out of '
                                                    'bounds for dimension 0 with size 128'}})
    text = '\n'.join(v.lines)
    assert 'the forward at T=256 after load_pretrained: your code raised an error: IndexError' in text
    assert 'persistent' not in text   # no guess: the error and its place are the evidence


def test_wrong_values_name_the_tensor_the_loader_did_not_copy():
    arrays = good_workflow()
    arrays['gqa/logits'][:, :] += 1.0
    fact = 'after load_pretrained, transformer.wpe.weight (its first (16, 48) entries) is not what model.pt holds'
    v = judge_workflow(arrays, facts={'gqa': [fact]})
    text = '\n'.join(v.lines)
    assert v.fraction == pytest.approx(2 / 3) and fact in text


def test_wrong_values_with_every_tensor_copied_say_whether_the_early_positions_match():
    arrays = good_workflow()
    arrays['rope/logits'][:, 16:] += 1.0          # a cache never extended past 16, say
    arrays['gqa/logits'][:, :] += 1.0
    v = judge_workflow(arrays)
    text = '\n'.join(v.lines)
    assert v.fraction == pytest.approx(1 / 3)
    assert 'positions < 16 match, later ones do not' in text
    assert 'even positions < 16 differ' in text


def test_a_loader_error_not_about_shapes_shows_no_shape_facts():
    arrays = good_workflow()
    del arrays['gqa/logits']
    arrays['gqa/stage'] = np.array(1)
    fact = 'model.pt holds transformer.wpe.weight of shape (16, 48); a fresh block-256 model has (256, 48)'
    v = judge_workflow(arrays, errors={'gqa': {'status': 'error', 'message': "FileNotFoundError: [Errno 2] No such "
                                               "file or directory: '/tmp/x/config.yaml'"}}, facts={'gqa': [fact]})
    text = '\n'.join(v.lines)
    assert 'config.yaml' in text and fact not in text and 'persistent' not in text
