"""
The course's CURRENT public test_model.py, re-implemented: the baseline the autograder must beat.

    (a) gqa      GroupedQueryAttention(n_query_head=6, n_kv_head=2, n_embd=12, head_dim 2) on a
                 (2, 2, 12) input with the reference's weights copied in by name
                 (q_proj/k_proj/v_proj/out_proj), output vs the reference at atol 1e-3
    (b) rope     RotaryPositionalEmbeddings(d=2) on positions 1..4 (a (1, 1, 4, 2) input)
                 vs the reference at atol 1e-3
    (c) dropout  GroupedQueryAttention.attn_dropout / .resid_dropout are nn.Dropout with
                 p == config.attn_pdrop / config.resid_pdrop
    (d) rope-d   with rope=True, query_rotary_pe.d and key_rotary_pe.d == head_dim

`run(model_py)` copies the handout's chargpt.py and mingpt/{__init__,trainer,utils}.py into a
temp folder with the submission as mingpt/model.py and runs the checks in a subprocess (with
a timeout). The reference module is loaded in the same subprocess from reference/mingpt/model.py
(trusted, staff code): its weights and outputs are the expected values. Only for our own
corpus of trusted files: student code is not sandboxed here.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from autograder import REPO_ROOT

CHECKS = ('gqa', 'rope', 'dropout', 'rope-d')
TEMPLATE = os.path.join(REPO_ROOT, 'student_template', 'hw1')
REFERENCE = os.path.join(REPO_ROOT, 'reference', 'mingpt', 'model.py')

RUNNER = r'''
import importlib.util, json, sys, traceback
import torch
from torch import nn
result = {}
def check(name, fn):
    try:
        msg = fn()
        result[name] = {'ok': msg is None, 'message': msg or 'ok'}
    except Exception as e:
        result[name] = {'ok': False, 'message': 'error: %s: %s' % (type(e).__name__, e)}
try:
    import mingpt.model as student
    spec = importlib.util.spec_from_file_location('hw1_reference_model', sys.argv[1])
    ref = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ref)
except Exception as e:
    for n in @CHECKS@:
        result[n] = {'ok': False, 'message': 'import error: %s: %s' % (type(e).__name__, e)}
    print('@@RESULT@@' + json.dumps(result)); sys.exit(0)

def cfg(rope=False, attn_pdrop=0.0, resid_pdrop=0.0):
    c = student.GPT.get_default_config()
    c.model_type = None
    c.n_layer, c.n_query_head, c.n_kv_head, c.n_embd = 1, 6, 2, 12
    c.vocab_size, c.block_size = 11, 8
    c.embd_pdrop, c.attn_pdrop, c.resid_pdrop = 0.0, attn_pdrop, resid_pdrop
    c.rope = rope
    try:
        c.sliding_window = None
    except Exception:
        pass
    return c

def first(y):
    return y[0] if isinstance(y, (tuple, list)) else y

def gqa():
    c = cfg()
    torch.manual_seed(0)
    r = ref.GroupedQueryAttention(c).eval()
    s = student.GroupedQueryAttention(c).eval()
    sd = r.state_dict()
    with torch.no_grad():
        for name in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):
            lin = getattr(s, name)  # AttributeError: the course's test crashes the same way
            lin.weight.copy_(sd[name + '.weight'])
            lin.bias.copy_(sd[name + '.bias'])
        torch.manual_seed(1)
        x = torch.randn(2, 2, 12)
        want = first(r(x))
        got = first(s(x))
    if tuple(got.shape) != tuple(want.shape):
        return 'shape %s, expected %s' % (tuple(got.shape), tuple(want.shape))
    err = (got.double() - want.double()).abs().max().item()
    if not err <= 1e-3:
        return 'max abs error %.3g > 1e-3' % err

def rope():
    torch.manual_seed(2)
    x = torch.randn(1, 1, 4, 2)
    with torch.no_grad():
        want = ref.RotaryPositionalEmbeddings(2)(x)
        got = student.RotaryPositionalEmbeddings(2)(x)
    if tuple(got.shape) != tuple(want.shape):
        return 'shape %s, expected %s' % (tuple(got.shape), tuple(want.shape))
    err = (got.double() - want.double()).abs().max().item()
    if not err <= 1e-3:
        return 'max abs error %.3g > 1e-3' % err

def dropout():
    c = cfg(attn_pdrop=0.1, resid_pdrop=0.2)
    s = student.GroupedQueryAttention(c)
    for name, p in (('attn_dropout', 0.1), ('resid_dropout', 0.2)):
        m = getattr(s, name, None)
        if not isinstance(m, nn.Dropout):
            return '%s is %r, not nn.Dropout' % (name, type(m).__name__)
        if m.p != p:
            return '%s.p = %r, expected %r' % (name, m.p, p)

def rope_d():
    s = student.GroupedQueryAttention(cfg(rope=True))
    for name in ('query_rotary_pe', 'key_rotary_pe'):
        d = getattr(getattr(s, name), 'd')
        if d != 2:
            return '%s.d = %r, expected head_dim 2' % (name, d)

for n, f in (('gqa', gqa), ('rope', rope), ('dropout', dropout), ('rope-d', rope_d)):
    check(n, f)
print('@@RESULT@@' + json.dumps(result))
'''.replace('@CHECKS@', repr(CHECKS))


def run(model_py, timeout=45):
    """
    {check: {'ok': bool, 'message': str}} for one model.py; 'passed' is True when all four pass.
    `timeout`: wall seconds; the four checks take ~2 s (a loop over heads ~4 s, ~2x that on a loaded
    machine), so only a hang reaches 45 s, and a hang mutant then holds one evaluate job that long.
    """
    work = tempfile.mkdtemp(prefix='hw1-course-tests-')
    try:
        os.makedirs(os.path.join(work, 'mingpt'))
        shutil.copy(os.path.join(TEMPLATE, 'chargpt.py'), work)
        for name in ('__init__.py', 'trainer.py', 'utils.py'):
            shutil.copy(os.path.join(TEMPLATE, 'mingpt', name), os.path.join(work, 'mingpt', name))
        shutil.copy(model_py, os.path.join(work, 'mingpt', 'model.py'))
        with open(os.path.join(work, 'course_runner.py'), 'w') as f:
            f.write(RUNNER)
        env = dict(os.environ, PYTHONPATH=work, OMP_NUM_THREADS='1')
        try:
            p = subprocess.run([sys.executable, 'course_runner.py', REFERENCE], cwd=work, env=env,
                               capture_output=True, text=True, timeout=timeout)
            line = next((l for l in p.stdout.splitlines() if l.startswith('@@RESULT@@')), None)
            if line is None:
                why = 'runner crashed (rc %s): %s' % (p.returncode, (p.stderr or p.stdout)[-300:])
                checks = {n: {'ok': False, 'message': why} for n in CHECKS}
            else:
                checks = json.loads(line[len('@@RESULT@@'):])
        except subprocess.TimeoutExpired:
            checks = {n: {'ok': False, 'message': 'timeout after %ds' % timeout} for n in CHECKS}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {'checks': checks, 'passed': all(checks.get(n, {}).get('ok') for n in CHECKS)}


if __name__ == '__main__':
    print(json.dumps(run(sys.argv[1]), indent=1))
