"""
Behaviour on the class's shared inputs (autograder/staff/regrade/shared_inputs.py), without grading:
students' outputs on those inputs are made here in numpy (a copied RoPE bug, a copied attention
bug, another bug, correct code), judged by the harness's own recomputation, and compared across the
class by behaviour_match as a regrade's behaviour.json holds them. numpy only (no torch).
"""

import numpy as np

from autograder import GRADING_YAML
from autograder.judge import config, evidence, inputs
from autograder.judge.rope_service import rotate
from autograder.staff.regrade import behaviour_match, shared_inputs, similarity

GRADING = config.load(GRADING_YAML)
PROFILE = GRADING.profiles['cpu']
KEY = bytes(range(32))   # a course's key (any 32 bytes)


def _outputs(arrays, rope_base=evidence.BASE, gqa_scale=1.0):
    """A student's four outputs on the shared inputs: the handout's, with RoPE at another base (a RoPE bug) or the
    GQA output scaled (an attention bug)."""
    right = shared_inputs.expected(arrays, [], PROFILE, GRADING.evidence)
    x = arrays['staff/rope/x']
    out = {k: v.astype(np.float32) for k, v in right.items()}
    out['rope'] = rotate(x.reshape(-1, x.shape[-2], x.shape[-1]), 0, rope_base).reshape(x.shape).astype(np.float32)
    out['gqa'] = (right['gqa'] * gqa_scale).astype(np.float32)
    return out


def _behaviour(input_set, outputs, arrays):
    """What a regrade keeps in behaviour.json: the graded tests' prints (none compare across sets) and the shared
    inputs' prints."""
    return {'input_set': input_set, 'shared': list(inputs.SHARED_PROBES), 'tests': {},
            'shared_inputs': shared_inputs.wrong_outputs(outputs, arrays, [], PROFILE, GRADING.evidence)}


def test_a_copied_bug_under_different_input_sets_is_a_lead_naming_its_part():
    arrays = shared_inputs.build(PROFILE, KEY)
    prints = {
        'copy_a': _behaviour(0, _outputs(arrays, rope_base=5000), arrays),    # one RoPE bug, copied ...
        'copy_b': _behaviour(3, _outputs(arrays, rope_base=5000), arrays),    # ... graded on another set
        'gqa_a': _behaviour(1, _outputs(arrays, gqa_scale=1.1), arrays),      # one attention bug, copied
        'gqa_b': _behaviour(2, _outputs(arrays, gqa_scale=1.1), arrays),
        'other': _behaviour(0, _outputs(arrays, rope_base=20000), arrays),    # another RoPE bug, same set as copy_a
        'right_a': _behaviour(0, _outputs(arrays), arrays),                   # two correct files
        'right_b': _behaviour(0, _outputs(arrays), arrays),
    }
    assert sorted(prints['copy_a']['shared_inputs']) == ['rope']
    assert sorted(prints['gqa_a']['shared_inputs']) == ['gqa']
    assert prints['right_a']['shared_inputs'] == {} and prints['other']['shared_inputs']
    found = {(p.a, p.b): p for p in behaviour_match.pairs(prints)}
    assert sorted(found) == [('copy_a', 'copy_b'), ('gqa_a', 'gqa_b')]
    assert list(found[('copy_a', 'copy_b')].tests) == ['shared:rope']
    assert list(found[('gqa_a', 'gqa_b')].tests) == ['shared:gqa']
    words = similarity._behaviour_words(similarity.Lead('copy_a', 'copy_b', behaviour=found[('copy_a', 'copy_b')]), {})
    assert words.startswith('shared inputs, RotaryPositionalEmbeddings: `rope`[')


def test_an_attention_is_judged_with_its_own_rope_so_a_rope_bug_is_no_attention_lead():
    arrays = shared_inputs.build(PROFILE, KEY)
    x = arrays['staff/attn/x'].astype(np.float64)
    weights = {k.split('/')[-1]: v.astype(np.float64) for k, v in arrays.items() if k.startswith('w/staff-gqa/')}
    nh = PROFILE['module']['n_query_head']
    hs = PROFILE['module']['n_embd'] // nh
    q = (x @ weights['q_proj.weight'].T + weights['q_proj.bias']).reshape(1, -1, nh, hs).transpose(0, 2, 1, 3)
    k = (x @ weights['k_proj.weight'].T + weights['k_proj.bias']).reshape(1, -1, 2, hs).transpose(0, 2, 1, 3)

    def bad_rope(t):   # the copied RoPE bug, inside the attention
        return rotate(t.reshape(-1, t.shape[-2], t.shape[-1]), 0, 5000).reshape(t.shape)
    record = {'case': 'gqa', 'part': 'gqa', 'dropout': False, 'offsets': [0, 0],
              'arrays': dict(weights, x=x, rope_x0=q, rope_y0=bad_rope(q), rope_x1=k, rope_y1=bad_rope(k))}
    with_own_rope = evidence.expected_attention(dict(record['arrays']), nh, True)
    record['arrays']['y'] = with_own_rope
    outputs = {'gqa': with_own_rope.astype(np.float32)}
    # the RoPE inside it is wrong: the attention is no evidence (the lead is RoPE's, from its own case)
    assert shared_inputs.wrong_outputs(outputs, arrays, [record], PROFILE, GRADING.evidence) == {}
    # without its record, the same output is judged against the handout's RoPE, and is wrong
    assert list(shared_inputs.wrong_outputs(outputs, arrays, [], PROFILE, GRADING.evidence)) == ['gqa']


def test_the_shared_inputs_are_the_keys_own_and_no_graded_input():
    arrays = shared_inputs.build(PROFILE, KEY)
    again = shared_inputs.build(PROFILE, KEY)
    other = shared_inputs.build(PROFILE, bytes(32))
    assert all(np.array_equal(arrays[k], again[k]) for k in arrays)
    assert not any(np.array_equal(arrays[k], other[k]) for k in arrays)
    seed = shared_inputs.seed(PROFILE, KEY)
    assert seed not in {inputs.set_seed(PROFILE, KEY, i) for i in range(PROFILE['input_sets'])} | \
        {inputs.shared_seed(PROFILE, KEY), PROFILE['seed']}
    graded = inputs.build(PROFILE, inputs.set_seed(PROFILE, KEY, 0), inputs.shared_seed(PROFILE, KEY))
    assert not set(arrays) & set(graded)
    values = {v.tobytes() for v in graded.values()}
    assert not any(a.tobytes() in values for a in arrays.values())


def test_banded_attention_in_numpy_is_the_dense_masked_one():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 12, 8)) for _ in range(3))
    window = 6
    w = window // 2 + 1
    dense = np.zeros_like(q)
    for t in range(12):
        keys = range(max(0, t - w + 1), t + 1)
        s = np.stack([np.einsum('bhd,bhd->bh', q[..., t, :], k[..., j, :]) for j in keys], -1) / np.sqrt(8)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        dense[..., t, :] = np.einsum('bhj,bhjd->bhd', p, v[..., list(keys), :])
    assert np.allclose(shared_inputs.banded(q, k, v, window), dense)
