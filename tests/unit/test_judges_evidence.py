"""
The judges that rest on the same model's answers in other processes (registry `evidence`) or on
exact tokens, on synthetic probe results: dropout (6.1) against 4.1's output, causality (7.1)
against 3.1/5.1/8.1's outputs, generation (8.2) and the KV cache (12.1) on tokens. Also the
plumbing: verdict_for() hands a judge the results it names, and each probe's process gets only the
inputs inputs.probe_inputs declares. Fast: no sandbox, no torch; the sizes are grading.yaml's.
"""

import numpy as np
import pytest

from autograder.judge import config, inputs, registry
from autograder.judge.verdicts import verdict_for
from autograder.judge.areas.behaviour import judge_causality, judge_dropout
from autograder.judge.areas.generate import judge_generate, judge_kv_cache
from autograder.judge.fixtures import Fixtures
from autograder.sandbox import ProbeResult

GRADING = config.load()
PROFILE = GRADING.profiles['cpu']
MOD, MODEL = PROFILE.module, PROFILE.model


def fixtures(arrays, known_bugs=None):
    return Fixtures('cpu', arrays, known_bugs or {}, {})


def ok(arrays, **info):
    return ProbeResult('ok', arrays=arrays, info=info)


def rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------- plumbing

def test_the_probes_of_a_grading_include_the_evidence_its_judges_read():
    assert registry.probes_for(['causality']) == ['causality', 'mha-rope', 'gqa-rope', 'model']
    assert registry.probes_for(['gradients']) == ['gradients', 'loss-curve']
    assert registry.probes_for(['gqa', 'dropout']) == ['gqa', 'dropout']
    every = registry.probes_for(list(registry.PROBED))
    assert sorted(every) == sorted(registry.PROBED)


def test_judge_hands_over_the_named_results_shape_guarded():
    base = rand((MOD.batch, MOD.seq, MOD.n_embd), 0)
    wrong_shape = ok({'n_kv_head=2': base[:, :3]})
    arrays = {'gqa/' + c: base for c in ('attn_p1_train', 'resid_p1_train', 'both_p1_eval')}
    fx = fixtures({'dropout/' + k: v for k, v in arrays.items()} | {'gqa/n_kv_head=2': base})
    v = verdict_for(GRADING.test('dropout'), ok(arrays), fx, GRADING, {'gqa': wrong_shape, 'rope': ok({})})
    # 4.1's array of the wrong shape is taken out before the dropout judge sees it
    assert v.fraction == 0.0 and 'has shape (2, 3, 48), expected (2, 13, 48)' in '\n'.join(v.lines), v.lines


def test_the_causality_process_never_gets_the_original_inputs():
    keys = set(inputs.for_probe(PROFILE, 'causality'))
    assert {'attn/x_future', 'model/idx_future'} <= keys
    assert not keys & {'attn/x', 'model/idx', 'model/targets'}


def test_every_probe_declares_its_inputs_and_every_input_has_a_probe():
    built = inputs.build(PROFILE)
    declared = inputs.probe_inputs(PROFILE)
    assert set(declared) == set(registry.PROBED)
    for pid, patterns in declared.items():
        for p in patterns:
            assert any(inputs.wanted(k, (p,)) for k in built), '%s declares %s, which build() does not make' % (pid, p)
    unused = [k for k in built if not any(inputs.wanted(k, ps) for ps in declared.values())]
    assert unused == []


# ----------------------------------------------------------------------------- dropout (6.1)

P = PROFILE.dropout.p


def mid_dropout(rate=P, scale=None, seed=3):
    """The 0 < p < 1 cases of a module whose dropout drops `rate` and scales kept values by `scale`."""
    scale = 1 / (1 - P) if scale is None else scale
    bias = inputs.dropout_inputs(PROFILE.seed, MOD, 2, PROFILE.dropout.seq)[1]['out_proj.bias']
    rng = np.random.default_rng(seed)
    value = rng.uniform(0.05, 0.5, (MOD.batch, PROFILE.dropout.seq, MOD.n_embd)).astype(np.float32)
    base = value + bias
    keep = lambda: (rng.random(base.shape) >= rate).astype(np.float32)   # noqa: E731
    return {'gqa/mid_eval_p0': base, 'gqa/mid_eval': base.copy(),
            'gqa/mid_attn_train': (bias + value * keep() * scale).astype(np.float32),
            'gqa/mid_resid_train': (base * keep() * scale).astype(np.float32)}


def dropout_case():
    """The student's own p = 0 output (4.1's process), the module's out_proj.bias, and working dropout's outputs."""
    p0 = rand((MOD.batch, MOD.seq, MOD.n_embd), 1)
    bias = inputs.attention_weights(PROFILE.seed, 'gqa-kv2', MOD.n_embd, MOD.n_query_head, 2)['out_proj.bias']
    good = {'gqa/attn_p1_train': np.broadcast_to(bias, p0.shape).copy(), 'gqa/resid_p1_train': np.zeros_like(p0),
            'gqa/both_p1_eval': p0.copy(), **mid_dropout()}
    return p0, bias, good


def run_dropout(arrays, p0):
    return judge_dropout(GRADING.test('dropout'), ok(arrays), fixtures({}), GRADING, {'gqa': ok({'n_kv_head=2': p0})})


def test_dropout_that_works_passes_whatever_the_attention_values():
    p0, _, good = dropout_case()
    v = run_dropout(good, p0)   # p0 is not the reference's output: only the module's own behaviour is judged
    assert v.fraction == 1.0, v.lines


def test_dropout_hints_only_what_the_outputs_show():
    p0, bias, good = dropout_case()
    v = run_dropout(dict(good, **{'gqa/attn_p1_train': p0.copy()}), p0)
    text = '\n'.join(v.lines)
    assert v.fraction == pytest.approx(2 / 3) and 'equals the output without dropout' in text
    assert 'nn.Dropout' not in text
    v = run_dropout(dict(good, **{'gqa/both_p1_eval': good['gqa/attn_p1_train']}), p0)
    assert 'attention weights are dropped in eval mode' in '\n'.join(v.lines)
    v = run_dropout(dict(good, **{'gqa/both_p1_eval': np.zeros_like(p0)}), p0)
    assert 'residual dropout is applied in eval mode' in '\n'.join(v.lines)
    v = run_dropout(dict(good, **{'gqa/both_p1_eval': p0 + 0.1}), p0)
    assert v.fraction == pytest.approx(2 / 3) and 'in eval mode' not in v.lines[-1].split('(')[-1]


def test_dropout_only_at_p_1_gains_nothing():
    """A module that returns a constant when p >= 1 and has no dropout otherwise scores what no dropout scores."""
    p0, bias, good = dropout_case()
    no_dropout = {k: v for k, v in mid_dropout(rate=0.0, scale=1.0).items()}
    attack = run_dropout(dict(good, **no_dropout), p0)
    honest = run_dropout(dict(good, **no_dropout, **{'gqa/attn_p1_train': p0.copy(), 'gqa/resid_p1_train': p0.copy()}),
                         p0)
    assert attack.fraction == honest.fraction == pytest.approx(1 / 3), attack.lines
    assert 'nothing is dropped' in '\n'.join(attack.lines)


def test_dropout_at_p_between_0_and_1_judges_the_share_and_the_scaling():
    p0, _, good = dropout_case()
    unscaled = run_dropout(dict(good, **{k: v for k, v in mid_dropout(scale=1.0).items() if 'train' in k}), p0)
    assert unscaled.fraction == pytest.approx(1 / 3) and 'not scaled by 1/(1 - p)' in '\n'.join(unscaled.lines)
    other_rate = run_dropout(dict(good, **{k: v for k, v in mid_dropout(rate=1 - P).items() if 'train' in k}), p0)
    assert other_rate.fraction == pytest.approx(1 / 3) and 'expected %g within' % P in '\n'.join(other_rate.lines)
    for seed in range(20):   # a correct mask of any seed passes (5 standard deviations)
        assert run_dropout(dict(good, **mid_dropout(seed=seed)), p0).fraction == 1.0
    leaky_eval = run_dropout(dict(good, **{'gqa/mid_eval': good['gqa/mid_resid_train']}), p0)
    assert leaky_eval.fraction == pytest.approx(2 / 3)
    assert 'dropout must do nothing in eval mode' in '\n'.join(leaky_eval.lines)


def test_dropout_of_a_module_that_never_depends_on_it_is_not_credited():
    _, _, good = dropout_case()
    zero = np.zeros_like(good['gqa/both_p1_eval'])
    v = run_dropout(dict(good, **{'gqa/both_p1_eval': zero}), zero)
    assert v.fraction < 1.0 and 'proves nothing' in '\n'.join(v.lines)


def test_dropout_without_4_1s_output_says_so():
    _, _, good = dropout_case()
    v = judge_dropout(GRADING.test('dropout'), ok(good), fixtures({}), GRADING,
                      {'gqa': ok({}, case_errors={'n_kv_head=2': {'status': 'error',
                                                                  'message': 'RuntimeError: boom'}})})
    assert v.fraction == 0.0 and 'boom' in v.lines[1]
    assert ('test %s did not return' % GRADING.test('gqa').number) in v.lines[1]


# ----------------------------------------------------------------------------- causality (7.1)

def causality_case(seed=0):
    """(this probe's arrays, the other tests' results): a causal model, whatever its values."""
    c_mod, c_gpt = MOD.seq // 2, MODEL.seq // 2
    outs, evidence = {}, {}
    for case, shape, c in (('mha', (2, MOD.seq, MOD.n_embd), c_mod), ('gqa', (2, MOD.seq, MOD.n_embd), c_mod),
                           ('gpt', (2, MODEL.seq, MODEL.vocab_size), c_gpt)):
        base = rand(shape, seed + len(outs))
        future = base.copy()
        future[:, c:] = rand(future[:, c:].shape, 99)
        outs[case + '/future'], outs[case + '/again'], evidence[case] = future, future.copy(), base
    results = {'mha-rope': ok({'n_kv_head=%d' % MOD.n_query_head: evidence['mha']}),
               'gqa-rope': ok({'n_kv_head=2': evidence['gqa']}), 'model': ok({'rope-gqa/logits': evidence['gpt']})}
    return outs, results


def run_causality(arrays, results):
    return judge_causality(GRADING.test('causality'), ok(arrays), fixtures({}), GRADING, results)


def test_a_causal_model_passes_with_values_that_are_not_the_references():
    v = run_causality(*causality_case())
    assert v.fraction == 1.0, v.lines
    assert ('compared with test %s' % GRADING.test('mha-rope').number) in v.lines[1]


def test_a_leak_fails_and_is_named():
    arrays, results = causality_case()
    arrays['gqa/future'][:, 0] += 0.5
    arrays['gqa/again'] = arrays['gqa/future'].copy()
    v = run_causality(arrays, results)
    assert v.fraction == pytest.approx(2 / 3) and 'looks at future tokens' in '\n'.join(v.lines)


def test_answering_the_causality_probe_unlike_the_value_probes_fails():
    # a non-causal model whose other processes gave outputs that depend on the original second half
    arrays, results = causality_case()
    results['model'] = ok({'rope-gqa/logits': results['model'].arrays['rope-gqa/logits'] + 0.3})
    v = run_causality(arrays, results)
    assert v.fraction == pytest.approx(2 / 3) and ('test %s' % GRADING.test('model').number) in v.lines[-1]


def test_outputs_that_change_between_two_calls_are_not_called_a_leak():
    arrays, results = causality_case()
    arrays['mha/again'] = arrays['mha/future'] + 0.2
    v = run_causality(arrays, results)
    text = '\n'.join(v.lines)
    assert 'not deterministic' in text and 'future tokens' not in text


def test_causality_without_the_other_tests_output_says_which():
    arrays, results = causality_case()
    results['gqa-rope'] = ProbeResult('timeout', 'it ran longer than the 60 s allowed')
    v = run_causality(arrays, results)
    assert v.fraction == pytest.approx(2 / 3)
    assert ('test %s returned no output' % GRADING.test('gqa-rope').number) in '\n'.join(v.lines)


# ----------------------------------------------------------------------------- generate (8.2)

def generate_fixtures():
    rng = np.random.default_rng(3)
    prompt = rng.integers(0, 65, (2, 5))
    exp = {k: np.concatenate([prompt, rng.integers(0, 65, (2, n))], axis=1)
           for k, n in (('greedy', 12), ('top_k=5', 12), ('greedy_past_block', 2 * MODEL.block_size))}
    exp['top_k=1'] = exp['greedy'].copy()
    return exp


def run_generate(arrays, bugs=None, model=None):
    exp = generate_fixtures()
    fx = fixtures({'generate/' + k: v for k, v in exp.items()}, bugs)
    return judge_generate(GRADING.test('generate'), ok(arrays), fx, GRADING, {'model': model or ok({})})


def test_exact_tokens_pass():
    assert run_generate(generate_fixtures()).fraction == 1.0


def test_sampled_tokens_are_compared_exactly_and_never_with_the_students_logits():
    exp = generate_fixtures()
    bad = dict(exp, **{'top_k=5': exp['top_k=5'].copy()})
    bad['top_k=5'][1, 9] = (bad['top_k=5'][1, 9] + 1) % 65
    v = run_generate(bad)
    assert v.fraction == 0.75 and 'first at batch 1, position 9' in '\n'.join(v.lines)


def test_a_known_generate_bug_is_named_only_when_the_tokens_are_its_tokens():
    exp = generate_fixtures()
    ignored = exp['top_k=5'].copy()
    ignored[:, 6:] = 3
    bugs = {'generate-top-k-ignored': {'generate/top_k=5': ignored}}
    v = run_generate(dict(exp, **{'top_k=5': ignored}), bugs)
    assert 'Likely bug: generate samples from every token' in v.lines[-1]
    other = ignored.copy()
    other[0, 7] = 4
    v = run_generate(dict(exp, **{'top_k=5': other}), bugs)
    assert not any(line.startswith('Likely bug') for line in v.lines)


def test_past_block_size_the_hint_needs_matching_tokens_before_it():
    exp = generate_fixtures()
    late = exp['greedy_past_block'].copy()
    late[:, MODEL.block_size + 3:] = 0
    v = run_generate(dict(exp, greedy_past_block=late))
    assert 'outgrows block_size=32' in '\n'.join(v.lines)
    early = exp['greedy_past_block'].copy()
    early[:, 6] = (early[:, 6] + 1) % 65
    v = run_generate(dict(exp, greedy_past_block=early))
    assert 'outgrows' not in '\n'.join(v.lines)


def test_a_wrong_model_is_cited_from_test_8_1():
    exp = generate_fixtures()
    ref_logits = rand((2, MODEL.seq, 65), 5)
    fx_model = {'model/rope-gqa/logits': ref_logits}
    bad = dict(exp, greedy=exp['greedy'][:, ::-1].copy())
    fx = fixtures(dict({'generate/' + k: v for k, v in exp.items()}, **fx_model))
    v = judge_generate(GRADING.test('generate'), ok(bad), fx, GRADING,
                       {'model': ok({'rope-gqa/logits': ref_logits + 1.0})})
    assert ('whose logits differ from the reference\'s in test %s' % GRADING.test('model').number) in '\n'.join(v.lines)
    v = judge_generate(GRADING.test('generate'), ok(bad), fx, GRADING, {'model': ok({'rope-gqa/logits': ref_logits})})
    assert ('test %s' % GRADING.test('model').number) not in '\n'.join(v.lines)


# ----------------------------------------------------------------------------- KV cache (12.1)

def kv_fixtures():
    rng = np.random.default_rng(4)
    exp = {}
    for label in ('rope-gqa', 'gqa'):
        exp[label + '/step/prefill'] = rand((2, 5, 65), len(exp))
        exp[label + '/step/logits'] = rand((2, 1, 65), len(exp) + 1)
        exp[label + '/step/lengths'] = np.array([[5, 5], [6, 6]])
        exp[label + '/generate'] = rng.integers(0, 65, (2, 5 + 2 * MODEL.block_size))
        exp[label + '/uses_cache/plain'] = rng.integers(0, 65, (2, 17))
        exp[label + '/uses_cache/altered'] = rng.integers(0, 65, (2, 17))
    return exp


def run_kv(arrays, **info):
    return judge_kv_cache(GRADING.test('kv-cache'), ok(arrays, **info),
                          fixtures({'kv-cache/' + k: v for k, v in kv_fixtures().items()}), GRADING)


def test_kv_cache_of_the_reference_passes():
    v = run_kv(kv_fixtures())
    assert v.fraction == 1.0 and not v.not_implemented, v.lines


def test_a_generate_that_ignores_use_kv_cache_earns_no_generation_points():
    arrays = kv_fixtures()
    for label in ('rope-gqa', 'gqa'):
        arrays[label + '/uses_cache/altered'] = arrays[label + '/uses_cache/plain'].copy()
    v = run_kv(arrays)
    text = '\n'.join(v.lines)
    assert v.fraction == 0.5 and 'does not use the cache' in text and 'uncached' not in text


def test_no_cache_at_all_is_not_implemented_optional():
    todo = {'status': 'not_implemented', 'message': 'NotImplementedError: model.py has no KVCache class'}
    errors = {label + case: todo for label in ('rope-gqa', 'gqa') for case in ('/step', '/uses_cache')}
    arrays = {label + '/generate': kv_fixtures()[label + '/generate'] for label in ('rope-gqa', 'gqa')}
    v = run_kv(arrays, case_errors=errors)
    assert v.not_implemented and v.lines[0].startswith('not implemented (optional)')


def test_a_wrong_cached_step_says_which_logits_differ():
    arrays = kv_fixtures()
    arrays['gqa/step/logits'] = arrays['gqa/step/logits'] + 1.0
    v = run_kv(arrays)
    text = '\n'.join(v.lines)
    assert v.fraction == 0.75 and "the prompt's logits match, but those of the next token" in text
    arrays = kv_fixtures()
    arrays['rope-gqa/step/lengths'] = np.array([[5, 5], [5, 5]])
    assert 'KVCache.length' in '\n'.join(run_kv(arrays).lines)


def test_cached_tokens_that_differ_from_the_references_blame_no_uncached_run():
    arrays = kv_fixtures()
    arrays['gqa/uses_cache/altered'] = arrays['gqa/uses_cache/altered'].copy()
    arrays['gqa/uses_cache/altered'][0, 8] = (arrays['gqa/uses_cache/altered'][0, 8] + 1) % 65
    v = run_kv(arrays)
    text = '\n'.join(v.lines)
    assert v.fraction == 0.75 and 'other tokens than the reference under the same change' in text
    assert 'its tokens without the change are the reference\'s' in text


def test_reference_fixtures_show_the_altered_cache_changes_its_tokens():
    # the check of "uses the cache" is only evidence if the change moves the reference's tokens
    from autograder.judge import fixtures as fx_module
    fx = fx_module.load(GRADING, 'cpu', check=False)
    kv, gen = fx.probe('kv-cache'), fx.probe('generate')
    for label in ('rope-gqa', 'gqa'):
        assert not np.array_equal(kv[label + '/uses_cache/plain'], kv[label + '/uses_cache/altered'])
    assert np.array_equal(kv['rope-gqa/uses_cache/plain'], gen['greedy'])
    assert np.array_equal(kv['rope-gqa/generate'], gen['greedy_past_block'])
    assert kv['rope-gqa/generate'].shape[1] > 2 * MODEL.block_size


def test_nan_at_the_same_places_is_not_a_leak():
    # a mask that hides the diagonal too gives NaN rows: a values bug, seen by 5.1, not a causality one
    arrays, results = causality_case()
    base = results['gqa-rope'].arrays['n_kv_head=2']
    base[:, 0] = np.nan
    arrays['gqa/future'][:, 0] = np.nan
    arrays['gqa/again'][:, 0] = np.nan
    v = run_causality(arrays, results)
    assert v.fraction == 1.0, v.lines
    arrays['gqa/future'][:, 1] = np.nan
    arrays['gqa/again'] = arrays['gqa/future'].copy()
    v = run_causality(arrays, results)
    assert v.fraction == pytest.approx(2 / 3) and 'NaN/inf' in '\n'.join(v.lines)


def test_outputs_that_ignore_the_input_earn_no_causality_nor_dropout():
    # a forged or constant model (all zeros in every process) is causal only in the way a constant is
    arrays, results = causality_case()
    zeros = {k: np.zeros_like(v) for k, v in arrays.items()}
    zero_results = {pid: ok({k: np.zeros_like(v) for k, v in r.arrays.items()}) for pid, r in results.items()}
    v = run_causality(zeros, zero_results)
    assert v.fraction == 0.0 and 'prove nothing' in '\n'.join(v.lines)
    p0, _, good = dropout_case()
    z = np.zeros_like(p0)
    v = run_dropout({k: z for k in good}, z)
    assert v.fraction == 0.0


def test_renumbering_a_test_in_grading_yaml_renumbers_every_sentence_that_names_it(tmp_path):
    # the sentences of 6.1 and 7.1 name 4.1 and 3.1 by the numbers grading.yaml gives them, never by text
    from grader_runs import grading_text
    new = {'gqa': '4.7', 'mha-rope': '3.7'}
    path = tmp_path / 'grading.yaml'
    path.write_text(grading_text(edit=lambda d: [t.update(number=new[t['id']]) for t in d['tests'] if t['id'] in new]))
    renumbered = config.load(str(path))
    assert {t: renumbered.test(t).number for t in new} == new and GRADING.test('gqa').number not in new.values()
    _, _, good = dropout_case()
    v = judge_dropout(renumbered.test('dropout'), ok(good), fixtures({}), renumbered,
                      {'gqa': ok({}, case_errors={'n_kv_head=2': {'status': 'error',
                                                                  'message': 'RuntimeError: boom'}})})
    assert 'which test 4.7 did not return' in v.lines[1], v.lines
    v = judge_causality(renumbered.test('causality'), ok(causality_case()[0]), fixtures({}), renumbered,
                        causality_case()[1])
    assert 'compared with test 3.7' in v.lines[1] and 'test %s' % GRADING.test('mha-rope').number not in v.lines[1]
