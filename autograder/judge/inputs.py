"""
The inputs every probe runs on, generated with numpy from seeds (the draw key's, below), so the
harness needs no torch and the reference (at regenerate time) and the student (at grade time)
see bit-identical tensors. Weights use std ~ 1/sqrt(fan_in) so that attention scores are O(1):
with minGPT's 0.02 init the softmax is nearly uniform and many bugs would hide.

Keys are flat strings `<group>/<name>`; weight sets are `w/<config>/<parameter name>`, using
the handout's parameter names (q_proj, k_proj, v_proj, out_proj, ...).

Input sets: the fixtures hold the reference's outputs for `input_sets` sets of inputs, each
built from a seed only the draw key gives (set_seed), and a grading draws one set from the
key and the submission's bytes (draw). The shared probes' inputs (10.1's held-out positions and
initial weights, 9.1's input) are the same in every set, from a seed the key gives too
(shared_seed). The profile's own seed gives the public inputs that no grading uses. `for_submission` is the one
door through which a grading gets its inputs and the fixtures of its set (docs/ARCHITECTURE.md, "Input sets").
"""

import functools
import hashlib
import hmac
import itertools
import os
import string
from dataclasses import dataclass

import numpy as np

from autograder import DATA_FILE
from autograder.contract.configs import attention_configs, model_configs
from autograder.judge import registry


DROPOUT_KV = 2   # the dropout probe's module: GroupedQueryAttention with n_kv_head = 2


def _rng(seed, label):
    """An independent stream per label, so adding an input never shifts the others."""
    return np.random.default_rng([seed, sum((i + 1) * ord(c) for i, c in enumerate(label)) % (2 ** 31)])


def attention_weights(seed, label, n_embd, n_head, n_kv_head):
    rng = _rng(seed, 'w/' + label)
    hd = n_embd // n_head
    kv = n_kv_head * hd
    out = {}
    for name, rows in (('q_proj', n_embd), ('k_proj', kv), ('v_proj', kv), ('out_proj', n_embd)):
        out[name + '.weight'] = (rng.standard_normal((rows, n_embd)) / np.sqrt(n_embd)).astype(np.float32)
        out[name + '.bias'] = (0.1 * rng.standard_normal(rows)).astype(np.float32)
    return out


def gpt_state(seed, label, m, n_kv_head, rope):
    """A state_dict (reference names) for GPT with the profile's `model` sizes."""
    rng = _rng(seed, 'gpt/' + label)
    C, V = m['n_embd'], m['vocab_size']

    def normal(shape, std):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    state = {'transformer.wte.weight': normal((V, C), 1.0)}
    if not rope:
        state['transformer.wpe.weight'] = normal((m['block_size'], C), 0.5)
    for i in range(m['n_layer']):
        p = 'transformer.h.%d.' % i
        for ln in ('ln_1', 'ln_2'):
            state[p + ln + '.weight'] = (1.0 + normal((C,), 0.1)).astype(np.float32)
            state[p + ln + '.bias'] = normal((C,), 0.1)
        for k, val in attention_weights(seed, '%s/h%d' % (label, i), C, m['n_query_head'], n_kv_head).items():
            state[p + 'attn.' + k] = val
        state[p + 'mlp.c_fc.weight'] = normal((4 * C, C), 1 / np.sqrt(C))
        state[p + 'mlp.c_fc.bias'] = normal((4 * C,), 0.1)
        state[p + 'mlp.c_proj.weight'] = normal((C, 4 * C), 1 / np.sqrt(4 * C))
        state[p + 'mlp.c_proj.bias'] = normal((C,), 0.1)
    state['transformer.ln_f.weight'] = (1.0 + normal((C,), 0.1)).astype(np.float32)
    state['transformer.ln_f.bias'] = normal((C,), 0.1)
    state['lm_head.weight'] = normal((V, C), 1 / np.sqrt(C))
    return state


# probes whose inputs and fixtures are the same in every set (from shared_seed: the reference's 10.1 trains
# 7 seeds, most of regenerate's time, so it runs once): 10.1 trains on the corpus from inputs.training_init
# and is judged on 133k held-out logits; 9.1 judges kernel readings, not values (its fixtures are shapes only)
SHARED_PROBES = ('loss-curve', 'memory')


def set_seed(profile, key, index):
    """The seed of input set `index`: HMAC(staff key, profile seed, index); without the key no set's inputs are
    known."""
    digest = hmac.new(key, b'hw1 input set %d %d' % (profile['seed'], index), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], 'big') >> 1


def shared_seed(profile, key):
    """
    The seed of the shared probes' inputs: HMAC(key, profile seed). Secret with the key, as the sets'
    are: who knew 10.1's initial weights and held-out positions could train the reference offline and
    carry its trained weights, or its held-out logits, in model.py.
    """
    digest = hmac.new(key, b'hw1 shared inputs %d' % profile['seed'], hashlib.sha256).digest()
    return int.from_bytes(digest[:8], 'big') >> 1


def draw(key, submission_bytes, set_count):
    """The set a submission gets: HMAC(staff key, sha256(its bytes)) mod the number of sets; the same bytes, the same
    set."""
    digest = hmac.new(key, b'hw1 draw ' + hashlib.sha256(submission_bytes).digest(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], 'big') % max(1, set_count)


@dataclass
class Drawn:
    set_index: int      # which input set the grading runs on
    inputs: dict        # {probe id: the inputs of its process}, for their ProbeJobs
    fixtures: object    # fixtures.Fixtures of that set (the shared arrays included)


def for_submission(fx, profile, probe_ids, submission_bytes):
    """
    The one function a grading gets its inputs and fixtures from: the set drawn for these bytes
    (draw), its inputs cut per probe, and the fixtures view of that set. Callers never see which
    set it was except through Drawn.set_index (staff-only extra_data).
    """
    index = draw(fx.key, submission_bytes, fx.set_count)
    view = fx.view(index)
    return Drawn(index, per_probe(profile, probe_ids, build(profile, view.input_seed, view.shared_seed)), view)


def dropout_inputs(seed, mod, n_kv_head, seq):
    """
    6.1 at 0 < p < 1: weights under which each output element IS one attention weight, so the
    judge sees which weights were dropped. x_t has a one at dimension t (t < seq <= head size) and
    noise elsewhere; v_proj copies dimension j to dimension j of every KV head, so v_t = e_t and
    head i's output is row s of its attention matrix; out_proj is the identity plus a bias of
    magnitude 0.5..1.5, so a dropped attention weight leaves the bias and a dropped residual 0.
    q_proj and k_proj are random (non-uniform weights).
    """
    rng = _rng(seed, 'dropout')
    C, nh = mod['n_embd'], mod['n_query_head']
    hs = C // nh
    assert seq <= hs, 'the dropout probe needs seq <= head size'
    w = attention_weights(seed, 'dropout', C, nh, n_kv_head)
    v = np.zeros((n_kv_head * hs, C), np.float32)
    for h in range(n_kv_head):
        v[h * hs + np.arange(seq), np.arange(seq)] = 1.0
    bias = rng.uniform(0.5, 1.5, C) * rng.choice((-1.0, 1.0), C)
    w.update({'v_proj.weight': v, 'v_proj.bias': np.zeros(n_kv_head * hs, np.float32),
              'out_proj.weight': np.eye(C, dtype=np.float32), 'out_proj.bias': bias.astype(np.float32)})
    x = np.zeros((mod['batch'], seq, C), np.float32)
    x[:, np.arange(seq), np.arange(seq)] = 1.0
    x[:, :, hs:] = rng.standard_normal((mod['batch'], seq, C - hs)).astype(np.float32)
    return x, w


def build(profile, seed=None, shared=None):
    """
    Every input array of a profile, as {key: np.ndarray}: of the input set with this seed, the shared
    probes' from `shared` (shared_seed). Default for both: the profile's own seed, which no grading uses.
    """
    seed = profile['seed'] if seed is None else seed
    shared = profile['seed'] if shared is None else shared
    out = {}

    for i, (B, nh, T, d) in enumerate(profile['rope_cases']):
        out['rope/x%d' % i] = _rng(seed, 'rope%d' % i).standard_normal((B, nh, T, d)).astype(np.float32)
    rng = _rng(seed, 'rope-cache')
    out['rope-cache/x8'] = rng.standard_normal((1, 2, 8, 8)).astype(np.float32)
    out['rope-cache/x24'] = rng.standard_normal((1, 2, 24, 8)).astype(np.float32)
    out['rope-cache/x8_f64'] = rng.standard_normal((1, 2, 8, 8)).astype(np.float64)

    mod = profile['module']
    for label, (kv, _rope) in attention_configs(profile).items():
        for k, val in attention_weights(seed, label, mod['n_embd'], mod['n_query_head'], kv).items():
            out['w/%s/%s' % (label, k)] = val
    rng = _rng(seed, 'attn-x')
    x = rng.standard_normal((mod['batch'], mod['seq'], mod['n_embd'])).astype(np.float32)
    future = x.copy()
    cut = mod['seq'] // 2
    future[:, cut:] = rng.standard_normal(future[:, cut:].shape).astype(np.float32)
    out['attn/x'], out['attn/x_future'] = x, future

    m = profile['model']
    for label, (kv, rope) in model_configs(profile).items():
        for k, val in gpt_state(seed, label, m, kv, rope).items():
            out['model/%s/%s' % (label, k)] = val
    rng = _rng(seed, 'model-idx')
    idx = rng.integers(0, m['vocab_size'], (m['batch'], m['seq'] + 1)).astype(np.int64)
    out['model/idx'], out['model/targets'] = idx[:, :-1].copy(), idx[:, 1:].copy()
    idx_future = out['model/idx'].copy()
    idx_future[:, m['seq'] // 2:] = rng.integers(0, m['vocab_size'], idx_future[:, m['seq'] // 2:].shape)
    out['model/idx_future'] = idx_future
    out['generate/prompt'] = rng.integers(0, m['vocab_size'], (2, 5)).astype(np.int64)
    # the token fed after the prompt in the one cached step of 12.1: not one the model produced itself
    out['kv-cache/step'] = _rng(seed, 'kv-cache-step').integers(0, m['vocab_size'], (2, 1)).astype(np.int64)

    mem = profile['memory']
    out['memory/x'] = _rng(shared, 'memory').standard_normal(
        (mem['batch'], mem['seq'], mod['n_embd'])).astype(np.float32)

    sw = profile['sliding_window']
    out['sw/x'] = _rng(seed, 'sw').standard_normal((mod['batch'], sw['seq'], mod['n_embd'])).astype(np.float32)
    rng = _rng(seed, 'sw-qkv')   # banded_attention on its own: (B, nh, T, hs)
    shape = (mod['batch'], mod['n_query_head'], sw['seq'], mod['n_embd'] // mod['n_query_head'])
    for name in 'qkv':
        out['sw/' + name] = rng.standard_normal(shape).astype(np.float32)
    rng = _rng(seed, 'swmem-qkv')   # the same at a long sequence (test 11.2)
    for name in 'qkv':
        out['swmem/' + name] = rng.standard_normal(
            (1, sw['memory_heads'], sw['memory_seq'], sw['memory_head_dim'])).astype(np.float32)
    wf = profile['workflow']
    rng = _rng(seed, 'workflow')
    out['workflow/idx_short'] = rng.integers(0, m['vocab_size'], (m['batch'], wf['block_from'])).astype(np.int64)
    out['workflow/idx'] = rng.integers(0, m['vocab_size'], (1, wf['block_to'])).astype(np.int64)
    # the rows a grown wpe keeps at their random init are overwritten with these, so logits compare
    out['workflow/wpe_tail'] = (0.5 * rng.standard_normal((wf['block_to'] - wf['block_from'], m['n_embd']))
                                ).astype(np.float32)

    dx, dw = dropout_inputs(seed, mod, DROPOUT_KV, profile['dropout']['seq'])
    out['dropout/x'] = dx
    out.update({'w/dropout/' + k: v for k, v in dw.items()})

    out.update(_training_inputs(profile, shared))
    return out


def _training_inputs(profile, shared):
    """10.1's held-out text and initial weights (from the key's shared seed), where the corpus is: the loss-curve test
    runs there. Also the same start at n_kv_head = n_query_head (10.1 when the student's GroupedQueryAttention is set
    aside) and without RoPE (positions from wpe: their GQA fails only with RoPE, 5.1 and not 4.1)."""
    out = {}
    if not os.path.isfile(DATA_FILE):
        return out
    idx, _ = heldout(profile, seed=shared)
    out['heldout/idx'] = idx
    vocab = int(_corpus_tokens_of(DATA_FILE).max()) + 1
    lc = profile['loss_curve']
    sizes = {k: lc[k] for k in ('n_embd', 'n_layer', 'n_query_head', 'n_kv_head', 'rope', 'block_size')}
    for label, start in (('lc-init', sizes), ('lc-init-mha', dict(sizes, n_kv_head=lc['n_query_head'])),
                         ('lc-init-norope', dict(sizes, rope=False))):
        for k, val in training_init(shared, start, vocab).items():
            out['model/%s/%s' % (label, k)] = val
    return out


# the placeholders an entry's declared inputs may hold (registry.GradedTest.inputs): name -> what it
# stands for in a profile, in order ('w/gqa-kv{kv}/' is one pattern per kv_heads entry)
PLACEHOLDERS = {'kv': lambda profile: tuple(profile['kv_heads']),
                'model': lambda profile: tuple(model_configs(profile))}


def expand(pattern, profile):
    """The patterns one declared input stands for in `profile`: one per value of its placeholders."""
    names = [name for _, name, _, _ in string.Formatter().parse(pattern) if name is not None]
    unknown = sorted(set(names) - set(PLACEHOLDERS))
    if unknown:
        raise ValueError('%r: no placeholder %s (known: %s)' % (pattern, unknown, sorted(PLACEHOLDERS)))
    names = sorted(set(names))
    values = itertools.product(*(PLACEHOLDERS[n](profile) for n in names))
    return tuple(pattern.format(**dict(zip(names, v))) for v in values)


def probe_inputs(profile):
    """
    {probe id: the inputs its process receives}: exact keys, or prefixes ending in '/', expanded
    from each registry entry's `inputs` (registry.declared_inputs). Each probe runs in a process of
    its own that gets ONLY these (for_probe), so what one probe computes cannot depend on another's
    inputs: above all, the causality probe gets the "future" inputs and never the originals whose
    outputs 3.1, 5.1 and 8.1 return, against which it is judged.
    """
    return {pid: tuple(p for pattern in declared for p in expand(pattern, profile))
            for pid, declared in registry.declared_inputs().items()}


def wanted(key, patterns):
    return any(key == p or (p.endswith('/') and key.startswith(p)) for p in patterns)


def per_probe(profile, probe_ids, arrays=None):
    """{probe id: the inputs of its process} for the probes' ProbeJobs, from `arrays` (default: build(profile))."""
    arrays = build(profile) if arrays is None else arrays
    return {p: for_probe(profile, p, arrays) for p in probe_ids}


def for_probe(profile, probe_id, arrays=None):
    """The inputs of one probe's process (probe_inputs), from `arrays` (default: build(profile))."""
    if probe_id == 'import':
        return {}   # the import check reads no input
    patterns = probe_inputs(profile)[probe_id]
    arrays = build(profile) if arrays is None else arrays
    return {k: v for k, v in arrays.items() if wanted(k, patterns)}


@functools.lru_cache(maxsize=4)
def _corpus_tokens(path, size, mtime):
    """The corpus as chargpt.CharDataset encodes it: sorted distinct characters -> 0..V-1."""
    with open(path, 'r') as f:
        text = f.read()
    stoi = {ch: i for i, ch in enumerate(sorted(set(text)))}
    return np.array([stoi[c] for c in text], dtype=np.int64)


def _corpus_tokens_of(path):
    st = os.stat(path)
    return _corpus_tokens(path, st.st_size, st.st_mtime)


def training_init(seed, lc, vocab):
    """
    The initial weights the loss-curve training starts from (reference names), drawn as minGPT's
    _init_weights draws them (N(0, 0.02), zero biases, unit LayerNorm, residual projections at
    0.02/sqrt(2 n_layer)). Every submission starts from the same point, so its trajectory follows
    the reference's trained with the same seed; a model's own init, which differs with the order
    its parameters are created in, would add seed-to-seed noise and hide bugs that slow learning.
    """
    rng = _rng(seed, 'training-init')
    C, L = lc['n_embd'], lc['n_layer']
    kv = lc['n_kv_head'] * (C // lc['n_query_head'])
    resid = 0.02 / np.sqrt(2 * L)

    def normal(shape, std=0.02):
        return (std * rng.standard_normal(shape)).astype(np.float32)

    zeros, ones = (lambda n: np.zeros(n, np.float32)), (lambda n: np.ones(n, np.float32))
    state = {'transformer.wte.weight': normal((vocab, C))}
    if not lc['rope']:
        state['transformer.wpe.weight'] = normal((lc['block_size'], C))
    for i in range(L):
        p = 'transformer.h.%d.' % i
        state.update({p + 'ln_1.weight': ones(C), p + 'ln_1.bias': zeros(C),
                      p + 'ln_2.weight': ones(C), p + 'ln_2.bias': zeros(C)})
        for name, rows in (('q_proj', C), ('k_proj', kv), ('v_proj', kv)):
            state[p + 'attn.%s.weight' % name], state[p + 'attn.%s.bias' % name] = normal((rows, C)), zeros(rows)
        state[p + 'attn.out_proj.weight'], state[p + 'attn.out_proj.bias'] = normal((C, C), resid), zeros(C)
        state[p + 'mlp.c_fc.weight'], state[p + 'mlp.c_fc.bias'] = normal((4 * C, C)), zeros(4 * C)
        state[p + 'mlp.c_proj.weight'], state[p + 'mlp.c_proj.bias'] = normal((C, 4 * C), resid), zeros(C)
    state['transformer.ln_f.weight'], state['transformer.ln_f.bias'] = ones(C), zeros(C)
    state['lm_head.weight'] = normal((vocab, C))
    return state


def heldout(profile, data_file=None, seed=None):
    """
    (idx, targets), each (heldout_seqs, block_size) int64: text at positions the harness picks (from
    `seed`: shared_seed; default the profile's), on which the trained model's logits are scored (the
    loss is computed here, not in the child). Only idx is shipped to the child; the harness rebuilds
    targets from the corpus.
    """
    tokens = _corpus_tokens_of(data_file or DATA_FILE)
    lc = profile['loss_curve']
    T, n = lc['block_size'], lc['heldout_seqs']
    starts = np.sort(_rng(profile['seed'] if seed is None else seed, 'heldout').choice(len(tokens) - T - 1, size=n,
                                                                                        replace=False))
    rows = tokens[starts[:, None] + np.arange(T + 1)]   # (n, T + 1)
    return rows[:, :-1].copy(), rows[:, 1:].copy()
