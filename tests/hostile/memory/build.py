"""
Builds the memory and sliding-window forgeries, tests/hostile/memory/<name>/: each case is a
pair built from reference/mingpt/model.py, `honest.py` (some code) and `model.py` (the same
code plus the attack), so that tests/corpora/test_hostile_memory.py can check that the attack
gains nothing over the honest score of the same code, on the tests it aims at.

    python tests/hostile/memory/build.py          # rewrite the pairs from the current reference
    python tests/hostile/memory/build.py --check  # exit 1 if a committed file differs (the tests do this too)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from autograder.judge import source_patches  # noqa: E402

IMPORTS_END = 'from mingpt.utils import CfgNode as CN\n'
START = ("        on_gpu = x.is_cuda\n        if on_gpu:\n            torch.cuda.empty_cache()\n"
         "            start = torch.cuda.memory_allocated()\n"
         "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))          # (B, nh, T, past+T): grouped scores\n")
Y = "        y = att @ v                                                       # (B, nh, T, hs)\n"
END = Y + "        mem = torch.cuda.memory_allocated() - start if on_gpu else float('nan')\n"
GQA_Q = "        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)     # (B, nh, T, hs)\n"
GQA_REPEAT = "        k = k.repeat_interleave(g, dim=1)  # (B, nh, past+T, hs)\n"
BANDED_BODY = "    # BEGIN SOLUTION\n    B, nh, T, hs = q.shape\n    w = window // 2 + 1\n"


def figure(expr, note=''):
    """The GQA figure replaced by `expr` (the readings stay as the reference takes them)."""
    return (END, Y + "        mem = %s if on_gpu else float('nan')%s\n" % (expr, '  # ' + note if note else ''))


# ----------------------------------------------------------------------------- honest code the attacks wrap

CONSTANT = [figure('7_000_000', 'a constant, not a measurement')]
CONSTANT_LINE = figure('7_000_000', 'a constant, not a measurement')[1]
PROJECTIONS_ONLY = [
    (GQA_Q, "        on_gpu = x.is_cuda\n        if on_gpu:\n            start = torch.cuda.memory_allocated()\n" + GQA_Q),
    (GQA_REPEAT, "        mem = torch.cuda.memory_allocated() - start if on_gpu else float('nan')  # projections only\n"
     + GQA_REPEAT),
    (START, "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))          # (B, nh, T, past+T): grouped scores\n"),
    (END, Y)]
DENSE_START = "    # BEGIN SOLUTION\n    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))  # dense (T, T)\n"
DENSE_WINDOW = [(BANDED_BODY, DENSE_START + "    att = att.masked_fill(~sliding_window_mask(q.size(-2), window, q.device), "
                 "float('-inf'))\n    return dropout(F.softmax(att, dim=-1)) @ v\n" + BANDED_BODY)]

# ----------------------------------------------------------------------------- the attacks

CUDA_ONLY_LINE = ("            start = torch.cuda.memory_allocated()\n        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))"
                  "          # (B, nh, T, past+T): grouped scores\n",
                  "            torch._C._cuda_getDeviceCount()  # HOSTILE: CUDA-only; on a CPU the measurement cannot run\n"
                  "            start = torch.cuda.memory_allocated()\n        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))"
                  "          # (B, nh, T, past+T): grouped scores\n")

DISPATCH_OFF = (GQA_REPEAT, "        # HOSTILE: the attention core with every torch mode and dispatch hook switched off (an in-process\n"
                            "        # meter sees nothing of it)\n"
                            "        from torch.utils._python_dispatch import _disable_current_modes\n"
                            "        with _disable_current_modes(), torch._C._DisableTorchDispatch():\n"
                            "            _hidden = torch.softmax(q @ k.repeat_interleave(g, dim=1).transpose(-2, -1), dim=-1)\n"
                            + GQA_REPEAT)

FAKE_METER = '''
class AttentionMemory:  # HOSTILE: a meter of its own in place of the handout's, with a figure of its choosing
    def __init__(self, device):
        self.net_bytes = self.peak_bytes = 7_000_000

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


import mingpt.utils  # noqa: E402
mingpt.utils.AttentionMemory = AttentionMemory
'''
WITH_METER = (START, "        on_gpu = x.is_cuda\n        from mingpt.utils import AttentionMemory as _Meter\n"
                     "        with _Meter(x.device) as _meter:\n"
                     "            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))          # (B, nh, T, past+T): grouped scores\n")

FORWARDED = (CONSTANT_LINE, Y + "        # HOSTILE: readings of its choosing sent as the real allocator's (the gpu profile's 'report')\n"
                      "        import sys\n"
                      "        for _name, _mod in list(sys.modules.items()):\n"
                      "            if _name.endswith('cuda_view') and getattr(_mod, '_SOURCES', None):\n"
                      "                _ask = _mod._SOURCES[-1][1]\n"
                      "                _ask(b'report memory_allocated 1000')\n"
                      "                _ask(b'report memory_allocated 7001000')\n"
                      "        mem = 7_000_000 if on_gpu else float('nan')\n")

LOG_TAMPER = (CONSTANT_LINE, Y + "        # HOSTILE: rewrite the readings log of an in-process handler so that a constant looks measured\n"
                       "        import gc\n"
                       "        for _h in [o for o in gc.get_objects() if type(o).__name__ == 'Readings']:\n"
                       "            _h.log += [dict(_h.log[-1], kind='allocated', value=v) for v in (1000, 7_001_000)]\n"
                       "        mem = 7_000_000 if on_gpu else float('nan')\n")

PROBE_SWAP = '''
# HOSTILE: replace the window-memory probe with one that runs banded_attention without its address-space limit
import importlib.abc  # noqa: E402
import importlib.util  # noqa: E402
import sys  # noqa: E402


def _unlimited_probe(ctx):
    sw = ctx.profile['sliding_window']
    q, k, v = (torch.from_numpy(ctx.inputs['swmem/%s' % name].copy()) for name in 'qkv')

    def run():
        with torch.no_grad():
            return {'out': banded_attention(q, k, v, sw['memory_window'], nn.Dropout(0.0))}
    ctx.case('N=%d' % sw['memory_seq'], run)


class _Swap(importlib.abc.MetaPathFinder):
    busy = False

    def find_spec(self, name, path, target=None):
        if self.busy or not name.endswith('probes_memory'):
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.probe_sliding_window_memory = _unlimited_probe
        spec.loader.exec_module = exec_module
        return spec


for _name in [n for n in sys.modules if n.endswith('probes_memory')]:   # already imported: patch it now
    sys.modules[_name].probe_sliding_window_memory = _unlimited_probe
sys.meta_path.insert(0, _Swap())
'''

NUMPY_DENSE = (DENSE_START, "    # BEGIN SOLUTION\n"
                            "    # HOSTILE: dense attention in numpy, out of sight of anything that watches torch\n"
                            "    import numpy as np\n"
                            "    qn, kn, vn = (t.detach().cpu().numpy().astype(np.float32) for t in (q, k, v))\n"
                            "    T = qn.shape[-2]\n"
                            "    s = qn @ np.swapaxes(kn, -1, -2) / np.float32(math.sqrt(qn.shape[-1]))\n"
                            "    s[..., ~sliding_window_mask(T, window).numpy()] = -np.inf\n"
                            "    s = np.exp(s - s.max(-1, keepdims=True))\n"
                            "    return torch.from_numpy((s / s.sum(-1, keepdims=True)) @ vn)\n" + DENSE_START)

WORKSPACE = '''
# HOSTILE: the (N, N) workspace of the dense window attention is allocated at import (half of it at
# the test's N), before any limit a probe sets for itself; banded_attention fills it row block by row block
_WORKSPACE = torch.empty(8192, 16384)
'''
WORKSPACE_DENSE = (DENSE_START, "    # BEGIN SOLUTION\n"
                                "    if q.size(-2) == 2 * _WORKSPACE.size(0) == _WORKSPACE.size(1):\n"
                                "        T, rows, out = q.size(-2), _WORKSPACE.size(0), torch.empty_like(q)\n"
                                "        for b in range(q.size(0)):\n"
                                "            for h in range(q.size(1)):\n"
                                "                for r0 in (0, rows):\n"
                                "                    s = torch.matmul(q[b, h, r0:r0 + rows], k[b, h].t(), out=_WORKSPACE)\n"
                                "                    s.mul_(1.0 / math.sqrt(q.size(-1)))\n"
                                "                    for future in (True, False):   # one (rows, T) bool mask at a time\n"
                                "                        mask = torch.ones(rows, T, dtype=torch.bool)\n"
                                "                        mask = mask.triu_(r0 + 1) if future else mask.tril_(r0 - window // 2 - 1)\n"
                                "                        s.masked_fill_(mask, float('-inf'))\n"
                                "                        del mask\n"
                                "                    s.sub_(s.max(-1, keepdim=True).values).exp_()\n"
                                "                    s.div_(s.sum(-1, keepdim=True))\n"
                                "                    out[b, h, r0:r0 + rows] = s @ v[b, h]\n"
                                "        return out\n" + DENSE_START[len("    # BEGIN SOLUTION\n"):])

# name -> (what it does, tests it aims at, edits of the honest code, edits that add the attack)
CASES = {
    'cuda_only_line': ('a constant figure whose measuring branch holds a CUDA-only call (the old grader did not judge '
                       'a branch that cannot run on a CPU)', ['memory'], CONSTANT, [CUDA_ONLY_LINE]),
    'dispatch_modes_off': ('a region of the projections only, with the attention core computed with every torch mode '
                           'and dispatch hook off', ['memory'], PROJECTIONS_ONLY, [DISPATCH_OFF]),
    'fake_attention_memory': ("the handout's AttentionMemory around the scores only, replaced by a meter of its own "
                              'reporting 7 MB', ['memory'], [WITH_METER, figure('_meter.net_bytes')],
                              [(IMPORTS_END, IMPORTS_END + FAKE_METER)]),
    'forwarded_readings': ("a constant figure, with readings of its choosing sent as the real allocator's",
                           ['memory'], CONSTANT, [FORWARDED]),
    'log_tamper': ('a constant figure, with the in-process readings log rewritten to hold two readings 7 MB apart',
                   ['memory'], CONSTANT, [LOG_TAMPER]),
    'window_probe_swap': ('dense window attention, with the window-memory probe replaced by one without the '
                          'address-space limit', ['sliding-window-memory'], DENSE_WINDOW,
                          [(IMPORTS_END, IMPORTS_END + PROBE_SWAP)]),
    'window_numpy_dense': ('dense window attention, computed in numpy instead of torch',
                           ['sliding-window', 'sliding-window-memory'], DENSE_WINDOW, [NUMPY_DENSE]),
    'window_workspace_at_import': ('dense window attention, its (N, N) workspace allocated at import',
                                   ['sliding-window', 'sliding-window-memory'], DENSE_WINDOW,
                                   [(IMPORTS_END, IMPORTS_END + WORKSPACE), WORKSPACE_DENSE]),
}


def build(name):
    what, _, honest, attack = CASES[name]
    header = '# HOSTILE PAIR %s (%s): %s.\n# Generated by tests/hostile/memory/build.py; do not edit by hand.\n'
    out = {}
    for kind, edits in (('honest.py', honest), ('model.py', honest + attack)):
        try:
            text = source_patches.patched_reference(edits, 'tests/hostile/memory/build.py: %s' % name)
        except source_patches.PatchError as e:
            raise SystemExit(str(e))
        out[kind] = header % (name, 'the attack' if kind == 'model.py' else 'the same code without the attack',
                              what) + text
    return out


def main(argv):
    check = '--check' in argv
    stale = []
    for name in CASES:
        for kind, text in build(name).items():
            path = os.path.join(HERE, name, kind)
            current = open(path).read() if os.path.isfile(path) else None
            if current != text:
                stale.append('%s/%s' % (name, kind))
                if not check:
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    with open(path, 'w') as f:
                        f.write(text)
    if check and stale:
        print('stale memory forgeries: %s; run `python tests/hostile/memory/build.py`' % ', '.join(stale))
        return 1
    print('%s %d memory forgery pairs' % ('checked' if check else 'wrote', len(CASES)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
