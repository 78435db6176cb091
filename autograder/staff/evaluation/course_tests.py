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

`run(model_py)` asks one long-lived subprocess per process (torch imported once, not once per
model.py: ~1.6 CPU-s each): in its temp folder with the handout's chargpt.py and
mingpt/{__init__,trainer,utils}.py, each submission is copied in as mingpt/model.py and imported
afresh, under an alarm (the timeout). The reference module is loaded in the same subprocess from
reference/mingpt/model.py (trusted, staff code): its weights and outputs are the expected values.
Only for our own corpus of trusted files: student code is not sandboxed here.
"""

import atexit
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

from autograder import REPO_ROOT

CHECKS = ('gqa', 'rope', 'dropout', 'rope-d')
TEMPLATE = os.path.join(REPO_ROOT, 'student_template', 'hw1')
REFERENCE = os.path.join(REPO_ROOT, 'reference', 'mingpt', 'model.py')

SERVER = r'''
import importlib, importlib.util, json, os, shutil, signal, sys, traceback
import torch
from torch import nn
torch.set_num_threads(1)


class CourseTimeout(BaseException):
    """Raised by the alarm: a BaseException, so that check() cannot swallow it and run the next check."""


def on_alarm(signum, frame):
    raise CourseTimeout()


spec = importlib.util.spec_from_file_location('hw1_reference_model', sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
student = None

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


def one(model_py, timeout):
    """The four checks on one model.py, imported afresh as mingpt.model (the handout's files stay loaded)."""
    global student
    result = {}

    def check(name, fn):
        try:
            msg = fn()
            result[name] = {'ok': msg is None, 'message': msg or 'ok'}
        except Exception as e:
            result[name] = {'ok': False, 'message': 'error: %s: %s' % (type(e).__name__, e)}
    shutil.copy(model_py, os.path.join('mingpt', 'model.py'))
    sys.modules.pop('mingpt.model', None)
    importlib.invalidate_caches()
    torch.set_default_dtype(torch.float32)   # what one submission set must not reach the next
    torch.set_grad_enabled(True)
    signal.alarm(timeout)
    try:
        try:
            student = importlib.import_module('mingpt.model')
        except Exception as e:
            return {n: {'ok': False, 'message': 'import error: %s: %s' % (type(e).__name__, e)} for n in @CHECKS@}
        for n, f in (('gqa', gqa), ('rope', rope), ('dropout', dropout), ('rope-d', rope_d)):
            check(n, f)
        return result
    except CourseTimeout:
        return {n: {'ok': False, 'message': 'timeout after %ds' % timeout} for n in @CHECKS@}
    finally:
        signal.alarm(0)


signal.signal(signal.SIGALRM, on_alarm)
answers = os.fdopen(os.dup(1), 'w')   # one line per request; whatever a submission prints goes to stderr
os.dup2(2, 1)
sys.stdout = sys.stderr
for line in sys.stdin:
    request = json.loads(line)
    answers.write('@@RESULT@@' + json.dumps(one(request['model'], request['timeout'])) + '\n')
    answers.flush()
'''.replace('@CHECKS@', repr(CHECKS))


class _Server:
    """One course-test process for many model.py files (torch imported once): a work folder with the handout's
    chargpt.py and mingpt/, the submission copied in as mingpt/model.py for each request."""

    def __init__(self):
        self.work = tempfile.mkdtemp(prefix='hw1-course-tests-')
        os.makedirs(os.path.join(self.work, 'mingpt'))
        shutil.copy(os.path.join(TEMPLATE, 'chargpt.py'), self.work)
        for name in ('__init__.py', 'trainer.py', 'utils.py'):
            shutil.copy(os.path.join(TEMPLATE, 'mingpt', name), os.path.join(self.work, 'mingpt', name))
        env = dict(os.environ, PYTHONPATH=self.work, OMP_NUM_THREADS='1', PYTHONDONTWRITEBYTECODE='1')
        self.proc = subprocess.Popen([sys.executable, '-c', SERVER, REFERENCE], cwd=self.work, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def ask(self, model_py, timeout):
        """The checks' JSON, or None when the process did not answer within timeout + 30 s (a hang in C code)."""
        self.proc.stdin.write(json.dumps({'model': os.path.abspath(model_py), 'timeout': int(timeout)}) + '\n')
        self.proc.stdin.flush()
        end = time.time() + timeout + 30
        while time.time() < end:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, end - time.time()))
            if not ready:
                break
            line = self.proc.stdout.readline()
            if not line:
                return None                           # the process died (a submission's os._exit)
            if line.startswith('@@RESULT@@'):
                return json.loads(line[len('@@RESULT@@'):])
        return None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.work, ignore_errors=True)


_SERVER = []


def check_model(model_py, timeout=10):
    """
    {check: {'ok': bool, 'message': str}} for one model.py; 'passed' is True when all four pass.
    `timeout`: wall seconds; the four checks took at most 0.22 s on any corpus model.py once torch is imported
    (docs/BENCHMARKS.md, round seven), so only a hang reaches 10 s, which it spins out on a core (45 s before, on top
    of the hang mutant's own grading). One process per evaluate worker answers every model.py; a
    submission that kills it or hangs in C code gets a new one.
    """
    if not _SERVER:
        _SERVER.append(_Server())
        atexit.register(lambda: _SERVER and _SERVER.pop().close())
    checks = _SERVER[0].ask(model_py, timeout)
    if checks is None:
        _SERVER.pop().close()
        checks = {n: {'ok': False, 'message': 'timeout after %ds' % timeout} for n in CHECKS}
    return {'checks': checks, 'passed': all(checks.get(n, {}).get('ok') for n in CHECKS)}


if __name__ == '__main__':
    print(json.dumps(check_model(sys.argv[1]), indent=1))
