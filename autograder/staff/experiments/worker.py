"""
The part of `python -m autograder experiments` that runs the reference model itself, in its
own process (the reference's `mingpt` package must not shadow anything in the harness):

    python worker.py sample   '{"folder": RUN, "prompt": ..., "tokens": 500, "seed": S, "device": D}'
    python worker.py section4 '{"d_k": 32, "fixed_w": 64, "Ns": [...], "fixed_N": 2048, "ws": [...], "repeats": 3}'
    python worker.py speed    '{"device": D, "blocks": [16, 256], "batch": 64}'

Each prints one JSON line, the result, last on stdout.
"""

import json
import math
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, 'reference'))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

from chargpt import CharDataset, find_input_file  # noqa: E402
from mingpt.model import (GPT, banded_attention, causal_attention, sliding_window_attention_loop,  # noqa: E402
                          sliding_window_mask)
from mingpt.utils import AttentionMemory, set_seed  # noqa: E402


def quietly(fn, *args):
    """The reference prints (parameter counts, dataset sizes); stdout carries only our JSON."""
    stdout, sys.stdout = sys.stdout, sys.stderr
    try:
        return fn(*args)
    finally:
        sys.stdout = stdout

# -----------------------------------------------------------------------------
# 5.1, 5.2: a sample of a trained run, the way chargpt.py samples


def sample(p):
    with open(os.path.join(p['folder'], 'config.json')) as f:
        saved = json.load(f)
    with open(find_input_file(saved['data'].get('input_file'))) as f:
        dataset = quietly(CharDataset, CharDataset.get_default_config(), f.read())  # its stoi/itos, as in training
    config = GPT.get_default_config()
    config.merge_from_dict({k: v for k, v in saved['model'].items() if k in config.to_dict()})
    config.vocab_size = dataset.get_vocab_size()
    config.block_size = saved['data']['block_size']
    config.pretrained_folder = None
    model = quietly(GPT, config)
    model.load_state_dict(torch.load(os.path.join(p['folder'], 'model.pt'), map_location='cpu', weights_only=True))
    model.to(p['device']).eval()
    set_seed(p['seed'])
    x = torch.tensor([dataset.stoi[c] for c in p['prompt']], dtype=torch.long)[None, ...].to(p['device'])
    # chargpt.py's own call: 500 new tokens, temperature 1, top_k 10 (5.1 says not to change max_new_tokens)
    y, _ = model.generate(x, p['tokens'], temperature=1.0, do_sample=True, top_k=10)
    return {'text': ''.join(dataset.itos[int(i)] for i in y[0]), 'block_size': config.block_size}

# -----------------------------------------------------------------------------
# section 4: the pseudocode executed, checked against the dense form, and its scaling


def loop_variant(Q, K, V, w, init=float('-inf'), window=None, index=None, keep=None):
    """
    The 4.2 loop with one blank swapped for a common wrong answer, to show the TAs what each
    does to the output. Defaults are the answer key (the reference's sliding_window_attention_loop).
    """
    N, d_k = Q.shape
    X = torch.zeros(N, d_k, dtype=Q.dtype)
    w_ = w // 2 + 1
    width = window or w_
    index = index or (lambda j, i: j - w_ + 1 + i)
    keep = keep or (lambda t: t >= 0)
    for j in range(N):
        a = torch.full((width,), init, dtype=Q.dtype)
        for i in range(width):
            t = index(j, i)
            if keep(t) and 0 <= t < N:  # the bound check keeps a wrong index from crashing
                a[i] = Q[j] @ K[t] / math.sqrt(d_k)
        a = torch.softmax(a, dim=0)
        for i in range(width):
            t = index(j, i)
            if keep(t) and 0 <= t < N:
                X[j] += a[i] * V[t]
    return X


def dense(q, k, v, w):
    """Equation (1): the (N, N) masked product, for (B, nh, N, d) inputs."""
    return causal_attention(q, k, v, sliding_window_mask(q.size(-2), w, q.device), nn.Dropout(0.0))


def check_pseudocode():
    gen = torch.Generator().manual_seed(0)
    cases, worst_loop, worst_banded = [], 0.0, 0.0
    for N in (1, 6, 17, 40):
        for w in (1, 2, 4, 7, 16, 100):
            Q, K, V = (torch.randn(N, 8, generator=gen) for _ in range(3))
            ref = dense(Q[None, None], K[None, None], V[None, None], w)[0, 0]
            d_loop = float((sliding_window_attention_loop(Q, K, V, w) - ref).abs().max())
            d_band = float((banded_attention(Q[None, None], K[None, None], V[None, None], w, nn.Dropout(0.0))[0, 0]
                            - ref).abs().max())
            worst_loop, worst_banded = max(worst_loop, d_loop), max(worst_banded, d_band)
            cases.append({'N': N, 'w': w, 'loop_vs_dense': d_loop, 'banded_vs_dense': d_band})
    # the handout's example, N = 6, w = 4, as 0 / -inf
    mask = sliding_window_mask(6, 4).tolist()
    # common wrong answers, each on N = 17, w = 6 (w' = 4)
    Q, K, V = (torch.randn(17, 8, generator=gen) for _ in range(3))
    w, w_ = 6, 6 // 2 + 1
    ref = dense(Q[None, None], K[None, None], V[None, None], w)[0, 0]
    wrong = {
        '(1b) init 0 instead of -inf': dict(init=0.0),
        '(2) range(0, w) instead of range(0, w\')': dict(window=w, index=lambda j, i: j - w + 1 + i),
        '(3) token_idx = j + i (looks ahead)': dict(index=lambda j, i: j + i, keep=lambda t: t < 17),
        '(3) token_idx = j - i (window reversed: same set, same X\')': dict(index=lambda j, i: j - i),
    }
    variants = {name: float((loop_variant(Q, K, V, w, **kw) - ref).abs().max()) for name, kw in wrong.items()}
    return {'cases': cases, 'max_loop_vs_dense': worst_loop, 'max_banded_vs_dense': worst_banded,
            'handout_mask': [['0' if m else '-inf' for m in row] for row in mask], 'wrong_answers': variants,
            'wrong_answers_case': {'N': 17, 'w': w, 'w_prime': w_}}


def measure(fn, q, k, v, w, repeats):
    """(median CPU seconds, peak bytes by AttentionMemory's tracker) of one attention call."""
    with AttentionMemory('cpu') as mem:
        fn(q, k, v, w)
    fn(q, k, v, w)  # warm-up outside the tracker: the first plain call pays one-off costs
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn(q, k, v, w)
        times.append(time.process_time() - start)
    return sorted(times)[len(times) // 2], mem.peak_bytes


def scaling(p):
    torch.set_num_threads(1)  # CPU seconds of one thread: comparable between runs on a shared machine
    forms = {'dense': dense, 'banded': lambda q, k, v, w: banded_attention(q, k, v, w, nn.Dropout(0.0))}
    gen = torch.Generator().manual_seed(1)

    def point(N, w):
        q, k, v = (torch.randn(1, 1, N, p['d_k'], generator=gen) for _ in range(3))
        row = {'N': N, 'w': w}
        for name, fn in forms.items():
            row[name + '_seconds'], row[name + '_bytes'] = measure(fn, q, k, v, w, p['repeats'])
        return row
    with torch.no_grad():
        return {'vs_N': [point(N, p['fixed_w']) for N in p['Ns']],
                'vs_w': [point(p['fixed_N'], w) for w in p['ws']]}


def section4(p):
    return {'check': check_pseudocode(), 'scaling': scaling(p)}

# -----------------------------------------------------------------------------
# the handout's model on this device, so that the report can say what the full sizes cost


def speed(p):
    out = {}
    for block in p['blocks']:
        config = GPT.get_default_config()
        config.model_type, config.vocab_size, config.block_size = 'gpt-mini', 65, block
        model = quietly(GPT, config).to(p['device'])
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)
        x = torch.randint(0, 65, (p['batch'], block), device=p['device'])
        # CPU seconds on a CPU: on a shared machine wall time would measure the other users too
        clock = time.time if p['device'] == 'cuda' else time.process_time
        times = []
        for _ in range(3):  # the first one warms up (allocator, AdamW state)
            start = clock()
            _, loss, _, _ = model(x, x)
            model.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            if p['device'] == 'cuda':
                torch.cuda.synchronize()
            times.append(clock() - start)
        out[str(block)] = min(times[1:])
    return {'seconds_per_iteration': out, 'threads': torch.get_num_threads(), 'batch': p['batch'],
            'clock': 'wall' if p['device'] == 'cuda' else 'cpu'}


TASKS = {'sample': sample, 'section4': section4, 'speed': speed}

if __name__ == '__main__':
    result = TASKS[sys.argv[1]](json.loads(sys.argv[2]))
    print(json.dumps(result))
