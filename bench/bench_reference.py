"""
Benchmarks of the staff reference model (reference/), run by hand, never by pytest:

    python bench/bench_reference.py            # full run, a few minutes on 2 CPU cores
    python bench/bench_reference.py --quick    # smoke run, well under a minute

1. training throughput (forward + backward + AdamW step) of vanilla, RoPE, GQA and
   RoPE+GQA at block 16 and block 256, as a ratio to vanilla;
2. sliding-window attention: banded vs dense masked vs torch SDPA with the same mask,
   time and peak memory (AttentionMemory's CPU tracker) for N = 1024 .. 8192, w = 128;
3. KV-cache generation speed-up for 1000 greedy tokens.

Timings on a shared machine are noisy, so every comparison is a ratio measured within one
run, with the variants interleaved round-robin and the median of the repeats reported;
times are CPU seconds of this process (see clock()), torch on one thread by default.
Prints markdown tables; docs/BENCHMARKS.md records a run.
"""

import argparse
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'reference'))

from mingpt.model import GPT, banded_attention, causal_attention, sliding_window_mask  # noqa: E402
from mingpt.utils import AttentionMemory  # noqa: E402
from machine import cpu_model  # noqa: E402  (bench/machine.py, beside this script)

VOCAB = 65


def clock():
    """
    CPU seconds of this process. With torch on one thread that is the compute time, and it
    is far less disturbed than wall time by other jobs on a small shared machine.
    """
    return time.process_time()

TRAIN_VARIANTS = [
    ('vanilla', dict()),
    ('RoPE', dict(rope=True)),
    ('GQA kv=1', dict(n_kv_head=1)),
    ('GQA kv=2', dict(n_kv_head=2)),
    ('GQA kv=3', dict(n_kv_head=3)),
    ('RoPE+GQA kv=2', dict(rope=True, n_kv_head=2)),
]


def model_config(block_size, n_layer=6, n_head=6, n_embd=192, **overrides):
    C = GPT.get_default_config()
    C.model_type = None
    C.n_layer, C.n_query_head, C.n_embd = n_layer, n_head, n_embd
    C.vocab_size, C.block_size = VOCAB, block_size
    C.merge_from_dict(overrides)
    return C


def quiet_gpt(config):
    """GPT prints its parameter count; keep the tables readable."""
    stdout, sys.stdout = sys.stdout, open(os.devnull, 'w')
    try:
        return GPT(config)
    finally:
        sys.stdout.close()
        sys.stdout = stdout


def machine_line():
    return "nproc=%d, CPU: %s, torch %s, torch threads=%d, Python %s" % (
        os.cpu_count(), cpu_model(), torch.__version__, torch.get_num_threads(), platform.python_version())

# -----------------------------------------------------------------------------
# 1. training throughput


def bench_training(block_size, batch_size, repeats, steps):
    """Median seconds per training step for every variant, interleaved round-robin."""
    runs = {}
    for name, overrides in TRAIN_VARIANTS:
        torch.manual_seed(0)
        model = quiet_gpt(model_config(block_size, **overrides))
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4)  # what Trainer builds, minus grouping
        gen = torch.Generator().manual_seed(1)
        x = torch.randint(0, VOCAB, (batch_size, block_size), generator=gen)  # (B, T)
        y = torch.randint(0, VOCAB, (batch_size, block_size), generator=gen)  # (B, T)
        runs[name] = (model, optimizer, x, y)

    def step(model, optimizer, x, y):
        _, loss, _, _ = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    for args in runs.values():  # warm-up: RoPE caches, allocator, AdamW state
        step(*args)
    times = {name: [] for name in runs}
    for _ in range(repeats):
        for name, args in runs.items():
            start = clock()
            for _ in range(steps):
                step(*args)
            times[name].append((clock() - start) / steps)
    return {name: statistics.median(t) for name, t in times.items()}

# -----------------------------------------------------------------------------
# 2. sliding window


def sliding_window_variants(window):
    no_dropout = nn.Dropout(0.0)

    def banded(q, k, v):
        return banded_attention(q, k, v, window, no_dropout)

    def dense(q, k, v):  # as the model's 'dense' impl does: build the (N, N) mask, then mask
        return causal_attention(q, k, v, sliding_window_mask(q.size(-2), window), no_dropout)

    def sdpa(q, k, v):  # torch's fused kernel with the same boolean mask (True = attend)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=sliding_window_mask(q.size(-2), window))

    return {'banded': banded, 'dense': dense, 'SDPA+mask': sdpa}


def bench_sliding_window(seqs, window, heads, head_dim, repeats, max_dense_bytes):
    variants = sliding_window_variants(window)
    rows = []
    for N in seqs:
        gen = torch.Generator().manual_seed(N)
        q, k, v = (torch.randn(1, heads, N, head_dim, generator=gen) for _ in range(3))  # (1, nh, N, hs)
        # the dense forms hold a few (nh, N, N) float32 tensors at once
        skip = {'dense', 'SDPA+mask'} if 3 * heads * N * N * 4 > max_dense_bytes else set()
        row = {'N': N}
        outputs = {}
        for name, fn in variants.items():
            if name in skip:
                continue
            with torch.no_grad(), AttentionMemory('cpu') as mem:
                outputs[name] = fn(q, k, v)  # (1, nh, N, hs)
            row[name + ' peak'] = mem.peak_bytes
        ref = outputs.get('dense')
        for name, out in outputs.items():  # a benchmark of wrong answers is worthless
            assert ref is None or torch.allclose(out, ref, atol=1e-4), "%s disagrees with dense at N=%d" % (name, N)
        del outputs
        times = {name: [] for name in variants if name not in skip}
        with torch.no_grad():
            for _ in range(repeats):
                for name in times:
                    start = clock()
                    variants[name](q, k, v)
                    times[name].append(clock() - start)
        for name, t in times.items():
            row[name + ' s'] = statistics.median(t)
        rows.append(row)
    return rows

# -----------------------------------------------------------------------------
# 3. KV cache


class _NoMemory:
    """A fake AttentionMemory that measures nothing: shows what the CPU tracker costs."""

    def __init__(self, device):
        self.net_bytes = self.peak_bytes = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def bench_kv_cache(new_tokens, prompt_len, repeats, track_memory=True):
    """Median seconds of uncached and cached greedy generation (1 uncached run: it is slow)."""
    import mingpt.model as model_module
    saved = model_module.AttentionMemory
    if not track_memory:
        model_module.AttentionMemory = _NoMemory
    try:
        torch.manual_seed(0)
        model = quiet_gpt(model_config(prompt_len + new_tokens, n_layer=4, n_head=4, n_embd=128))  # gpt-micro
        model.eval()
        prompt = torch.randint(0, VOCAB, (1, prompt_len), generator=torch.Generator().manual_seed(2))
        times = {False: [], True: []}
        tokens = {}
        for r in range(repeats):
            for cached in (False, True) if r == 0 else (True,):
                start = clock()
                tokens[cached], _ = model.generate(prompt, new_tokens, do_sample=False, use_kv_cache=cached)
                times[cached].append(clock() - start)
    finally:
        model_module.AttentionMemory = saved
    assert torch.equal(tokens[True], tokens[False]), "cached generation changed the tokens"
    return statistics.median(times[False]), statistics.median(times[True])

# -----------------------------------------------------------------------------


def mib(n):
    return "%.1f MiB" % (n / 2**20)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='small sizes and few repeats: a smoke run')
    parser.add_argument('--threads', type=int, default=1,
                        help='torch threads (default 1: on a small shared machine a second OpenMP '
                             'thread makes small ops wait and the timings erratic)')
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    quick = args.quick

    def verdict(ok):
        # --quick sizes are too small for the targets (e.g. 200 tokens for the KV cache)
        return "not judged in --quick" if quick else ("met" if ok else "MISSED")

    print("# Reference model benchmarks%s\n" % (" (--quick)" if quick else ""))
    print("Machine: %s\n" % machine_line())
    print("Command: python bench/bench_reference.py%s%s\n"
          % (" --quick" if quick else "", "" if args.threads == 1 else " --threads=%d" % args.threads))

    # 1. training throughput
    settings = [(16, 32), (256, 4)] if quick else [(16, 64), (256, 8)]  # (block, batch)
    repeats = 2 if quick else 5
    print("## 1. Training tokens/s, gpt-mini (6 layers, 6 heads, 192), dropout 0.1, AdamW\n")
    print("Tokens per CPU-second of this process. One timing = forward + backward + clip + AdamW step on ~2048 "
          "tokens (2 steps at block 16, 1 at block 256); median of %d timings per variant, variants "
          "interleaved.\n" % repeats)
    print("| variant | " + " | ".join("block %d (batch %d) tokens/CPU-s | ratio" % s for s in settings) + " |")
    print("|---|" + "---:|---:|" * len(settings))
    results = [bench_training(block, batch, repeats, max(1, 2048 // (block * batch))) for block, batch in settings]
    for name, _ in TRAIN_VARIANTS:
        cells = []
        for (block, batch), res in zip(settings, results):
            cells.append("%.0f | %.2f" % (block * batch / res[name], res['vanilla'] / res[name]))
        print("| %s | %s |" % (name, " | ".join(cells)))
    for (block, _), res in zip(settings, results):
        ratio = res['vanilla'] / res['RoPE']
        print("\nRoPE / vanilla throughput at block %d: %.2f (target >= 0.9: %s)"
              % (block, ratio, verdict(ratio >= 0.9)))

    # 2. sliding window
    seqs = [256, 512] if quick else [1024, 2048, 4096, 8192]
    heads, head_dim, window = 4, 32, 128
    sw_repeats = 2 if quick else 3
    print("\n## 2. Sliding window w=%d (w'=%d keys per query): batch 1, %d heads, head dim %d, float32, no grad\n"
          % (window, window // 2 + 1, heads, head_dim))
    print("Peak = AttentionMemory CPU tracker peak bytes of one call, mask construction included. "
          "Time = CPU seconds, median of %d interleaved calls.\n" % sw_repeats)
    rows = bench_sliding_window(seqs, window, heads, head_dim, sw_repeats, max_dense_bytes=8 * 2**30)
    print("| N | banded time | dense time | SDPA+mask time | banded peak | dense peak | SDPA+mask peak "
          "| dense/banded memory |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        def t(name):
            return "%.3f s" % r[name + ' s'] if name + ' s' in r else "skipped"

        def m(name):
            return mib(r[name + ' peak']) if name + ' peak' in r else "skipped"
        ratio = "%.1fx" % (r['dense peak'] / r['banded peak']) if 'dense peak' in r else "-"
        print("| %d | %s | %s | %s | %s | %s | %s | %s |" % (r['N'], t('banded'), t('dense'), t('SDPA+mask'),
                                                             m('banded'), m('dense'), m('SDPA+mask'), ratio))
    at = [r for r in rows if r['N'] == 4096 and 'dense peak' in r]
    if at:
        ratio = at[0]['dense peak'] / at[0]['banded peak']
        print("\nDense / banded peak memory at N=4096: %.1fx (target >= 8x: %s)" % (ratio, verdict(ratio >= 8)))

    # 3. KV cache
    new_tokens, prompt_len = (200, 10) if quick else (1000, 10)
    kv_repeats = 1 if quick else 3
    print("\n## 3. KV-cache generation: gpt-micro (4 layers, 4 heads, 128), block_size %d, prompt %d, "
          "%d new tokens, greedy, batch 1\n" % (prompt_len + new_tokens, prompt_len, new_tokens))
    print("Uncached: 1 run; cached: median of %d. The model's attention always runs inside "
          "AttentionMemory, whose CPU tracker intercepts every op; the second pair of rows swaps "
          "it for a no-op to show what it costs.\n" % kv_repeats)
    print("| generation | attention memory tracker | CPU seconds | tokens/CPU-s | speed-up |")
    print("|---|---|---:|---:|---:|")
    speedups = {}
    for track in (True, False):
        plain, cached = bench_kv_cache(new_tokens, prompt_len, kv_repeats, track_memory=track)
        speedups[track] = plain / cached
        label = "on (as trained)" if track else "off"
        print("| uncached | %s | %.2f | %.0f | |" % (label, plain, new_tokens / plain))
        print("| KV cache | %s | %.2f | %.0f | %.1fx |" % (label, cached, new_tokens / cached, plain / cached))
    print("\nKV-cache speed-up with the tracker on: %.1fx (target >= 5x: %s), off: %.1fx; "
          "tokens identical in every run"
          % (speedups[True], verdict(speedups[True] >= 5), speedups[False]))


if __name__ == '__main__':
    main()
