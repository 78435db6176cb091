"""
Two pure pieces the grader and the public tests rely on: `plan_projections` (which Linear
layer of a renamed or fused attention plays which projection) and `inputs.build` (the arrays
every probe runs on, identical at regenerate and at grade time).
"""

import dataclasses

import numpy as np
import pytest

from autograder import GRADING_YAML
from autograder.judge import config, inputs
from autograder.contract.configs import attention_configs, model_configs
from torch_free import needs_torch

C = 48   # n_embd of the cpu profile; head_dim 8


def plan_projections(layers, n_embd, kv_dim):
    """The grader's own, from autograder/child/adapter.py, whose module imports torch (the inputs tests need none)."""
    needs_torch()
    from autograder.child.adapter import plan_projections as plan
    return plan(layers, n_embd, kv_dim)


@pytest.mark.parametrize('layers, kv_dim, plan', [
    # the course's original starter: one fused c_attn [q; k; v] and c_proj
    ([('c_attn', 3 * C), ('c_proj', C)], C, {'qkv': 'c_attn', 'out': 'c_proj'}),
    # GQA with a fused [k; v] layer (n_kv_head = 2: kv_dim 16)
    ([('query', C), ('key_value', 32), ('proj', C)], 16, {'q': 'query', 'kv': 'key_value', 'out': 'proj'}),
    # renamed separate projections: shapes decide, the last square layer is the output
    ([('wq', C), ('wk', 16), ('wv', 16), ('wo', C)], 16, {'q': 'wq', 'k': 'wk', 'v': 'wv', 'out': 'wo'}),
    # n_kv_head = n_query_head / 2 makes [k; v] as wide as n_embd: only the name tells it from q
    ([('q', C), ('kv', C), ('o', C)], 24, {'q': 'q', 'kv': 'kv', 'out': 'o'}),
])
def test_plan_projections_matches_each_style(layers, kv_dim, plan):
    found, missing = plan_projections(layers, C, kv_dim)
    assert (found, missing) == (plan, [])


def test_plan_projections_names_what_is_missing():
    found, missing = plan_projections([('q_proj', C), ('out_proj', C)], C, 16)
    assert missing == ['k', 'v'] and found == {'q': 'q_proj', 'out': 'out_proj'}


def test_a_layer_named_for_another_role_is_never_taken():
    # 'out' of width 16 must not be picked as k or v
    found, missing = plan_projections([('q', C), ('out', 16), ('o', C)], C, 16)
    assert 'k' not in found and 'v' not in found and missing == ['k', 'v']


# ----------------------------------------------------------------------------- inputs

@pytest.fixture(scope='module')
def profile():
    return config.load(GRADING_YAML).profiles['cpu']


def test_inputs_are_deterministic_and_independent_per_label(profile):
    a, b = inputs.build(profile), inputs.build(profile)
    assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    # adding a kv head shifts no other input: every label has its own stream
    more = dataclasses.replace(profile, kv_heads=profile.kv_heads + (12,))
    c = inputs.build(more)
    assert all(np.array_equal(a[k], c[k]) for k in a)


def test_inputs_cover_every_configuration_with_handout_shapes(profile):
    built = inputs.build(profile)
    mod, m = profile.module, profile.model
    hd = mod.n_embd // mod.n_query_head
    for label, (kv, _rope) in attention_configs(profile).items():
        assert built['w/%s/q_proj.weight' % label].shape == (mod.n_embd, mod.n_embd)
        assert built['w/%s/k_proj.weight' % label].shape == (kv * hd, mod.n_embd)
    for label, (kv, rope) in model_configs(profile).items():
        assert ('model/%s/transformer.wpe.weight' % label in built) == (not rope)
    assert built['model/idx'].shape == (m.batch, m.seq) and built['model/idx'].dtype == np.int64
    assert built['model/idx'].max() < m.vocab_size
    # the altered input changes only the second half, so earlier outputs must not move
    half = mod.seq // 2
    assert np.array_equal(built['attn/x'][:, :half], built['attn/x_future'][:, :half])
    assert not np.allclose(built['attn/x'][:, half:], built['attn/x_future'][:, half:])


def test_weights_keep_attention_scores_of_order_one(profile):
    # minGPT's 0.02 init would make the softmax nearly uniform and hide bugs; ours is 1/sqrt(fan_in)
    w = inputs.build(profile)['w/mha/q_proj.weight']
    assert abs(float(w.std()) * np.sqrt(w.shape[1]) - 1.0) < 0.1


# ----------------------------------------------------------------------------- per-probe inputs

STRICT_RUN = r'''
import dataclasses, json, os, sys
import numpy as np
sys.path.insert(0, sys.argv[1])          # reference/: mingpt and chargpt
sys.path.insert(0, sys.argv[2])          # the repository: autograder
from autograder import GRADING_YAML
from autograder.judge import config, inputs, registry
from autograder.child import runner

prof = config.load(GRADING_YAML).profiles['cpu']
# the keys it reads do not depend on the length
prof = dataclasses.replace(prof, loss_curve=dataclasses.replace(prof.loss_curve, iters=2))
every = inputs.build(prof)
asked = {}


class Strict:
    """inputs.npz of one probe: reading a key of build() that for_probe() did not give it is recorded."""
    def __init__(self, given, probe):
        self.given, self.probe = given, probe
        self.files = list(given)

    def __getitem__(self, key):
        if key not in self.given:
            asked.setdefault(self.probe, set()).add(key)
        return every[key] if key in every else self.given[key]


class Ctx(runner.Context):
    def __init__(self, probe):
        # as the child reads it
        self.job = {'profile': prof.as_json(), 'loss_curve_seeds': [prof.loss_curve.student_seed]}
        self.profile = self.job['profile']
        import torch
        self.device = torch.device('cpu')
        self.scratch = os.path.dirname(sys.argv[3])
        self.inputs = Strict(inputs.for_probe(prof, probe, every), probe)
        self.arrays, self.info = {}, {}

    def _prefix(self, prefix):
        wanted = [k for k in every if k.startswith(prefix)]
        missing = [k for k in wanted if k not in self.inputs.given]
        if missing:
            asked.setdefault(self.inputs.probe, set()).update(missing)
        return {k[len(prefix):]: __import__('torch').from_numpy(every[k].copy()) for k in wanted}

    def weights(self, label):
        return self._prefix('w/%s/' % label)

    def state(self, label):
        return self._prefix('model/%s/' % label)


import torch
torch.set_num_threads(1)   # as in a probe process: one thread, on a machine other jobs share
import mingpt.model  # noqa: F401
table = runner.load_probes()
errors = {}
for probe in registry.PROBED:
    ctx = Ctx(probe)
    table[probe](ctx)
    if ctx.info.get('case_errors'):
        errors[probe] = ctx.info['case_errors']
print(json.dumps({'asked': {k: sorted(v) for k, v in asked.items()}, 'errors': errors,
                  'probes': sorted(registry.PROBED)}))
'''


def test_each_probe_reads_only_the_inputs_declared_for_it(tmp_path):
    """
    Every probe runs on the reference in-process with exactly inputs.for_probe(...) of its id (what its
    process gets in the sandbox): a key of inputs.build() it reads but was not given fails here, naming it.
    """
    import json
    import os
    import shutil
    import subprocess
    import sys
    from autograder import DATA_FILE, REFERENCE_DIR, REPO_ROOT
    from autograder.judge import registry
    needs_torch()   # the probes run in a child interpreter that imports torch
    if not os.path.isfile(DATA_FILE):
        pytest.skip('data/input.txt is missing (./setup.sh builds it)')
    shutil.copyfile(DATA_FILE, tmp_path / 'input.txt')
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, '-c', STRICT_RUN, REFERENCE_DIR, REPO_ROOT, str(tmp_path / 'input.txt')],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found['asked'] == {}, 'probes read inputs not declared in inputs.probe_inputs: %s' % found['asked']
    assert found['errors'] == {}, found['errors']
    declared = inputs.probe_inputs(config.load().profiles['cpu'])
    assert set(declared) == set(registry.PROBED) == set(found['probes']), 'a probe has no inputs declared'


def test_for_probe_gives_no_other_probes_inputs(profile):
    every = inputs.build(profile)
    assert inputs.for_probe(profile, 'rope', every) == {k: v for k, v in every.items() if k.startswith('rope/')}
    assert inputs.for_probe(profile, 'import', every) == {}
    assert 'heldout/idx' not in inputs.for_probe(profile, 'gradients', every)
    assert not any(k.startswith('w/') for k in inputs.for_probe(profile, 'model', every))
    # the causality probe never gets the originals whose outputs (3.1, 5.1, 8.1) it is judged against
    assert not {'attn/x', 'model/idx'} & set(inputs.for_probe(profile, 'causality', every))
    with pytest.raises(KeyError):
        inputs.for_probe(profile, 'a-probe-nobody-declared', every)
