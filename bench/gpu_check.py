"""
The reference's CUDA paths, checked on a real GPU against the same model on the CPU. Run by hand
on a machine with a GPU (never by pytest: CI has none):

    python bench/gpu_check.py --out gpu_check.json            # the handout's sizes (gpt-mini, N = 256)
    python bench/gpu_check.py --device cpu --small             # a dry run of the script itself

What it checks, each against the CPU run of the same weights and inputs (one row each):
- logits of GPT.forward (rope, GQA with n_kv_head = 2, sliding window) and of banded_attention;
- the attention memory the reference measures with torch.cuda.memory_allocated(), which is only
  measured on a GPU: it must be at least one float32 (B, n_query_head, T, T) tensor (the weights
  kept for backward in train mode) and is reported as a ratio to it;
- greedy tokens of generate() past block_size, with and without the KV cache;
- chargpt.py trained on the GPU, then continued at block 256 from its folder (handout 5.2/5.7):
  the files the course's chargpt.py writes, a memory log with numbers (null on a CPU), a falling
  loss, and training speed.

Writes one JSON report (--out) and prints a table; exits 1 when a check fails.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'reference'))
from mingpt.model import GPT, banded_attention  # noqa: E402  (reference/ on the path first)

# float32 CUDA kernels reorder sums: logits of a 6-layer model agree with the CPU's to ~1e-5; a wrong
# CUDA branch (another mask, a missing rotation) moves them by 1e-1 or more
LOGITS_ATOL = 1e-3


def build(device, small, rope=True, n_kv_head=2, window=None, dropout=0.0):
    """The handout's gpt-mini (or a tiny one), weights from seed 0, on `device`."""
    torch.manual_seed(0)
    c = GPT.get_default_config()
    c.model_type = None
    c.n_layer, c.n_query_head, c.n_embd = (2, 6, 48) if small else (6, 6, 192)
    c.n_kv_head, c.vocab_size, c.block_size, c.rope = n_kv_head, 65, 32 if small else 256, rope
    c.sliding_window = window
    c.embd_pdrop = c.resid_pdrop = c.attn_pdrop = dropout
    return GPT(c).to(device)


def row(rows, name, ok, **facts):
    rows.append(dict(check=name, ok=bool(ok), **facts))
    print('%-4s %-44s %s' % ('ok' if ok else 'FAIL', name, ', '.join('%s=%s' % kv for kv in facts.items())))


def check_logits(rows, device, small):
    """GPT.forward on the GPU against the CPU: rope+GQA, then with a sliding window; banded_attention alone."""
    T = 32 if small else 256
    idx = torch.randint(0, 65, (4, T), generator=torch.Generator().manual_seed(1))
    for label, window in (('rope gqa', None), ('rope gqa window 32', 8 if small else 32)):
        cpu, gpu = build('cpu', small, window=window).eval(), build(device, small, window=window).eval()
        with torch.no_grad():
            want = cpu(idx)[0]
            got = gpu(idx.to(device))[0].cpu()
        err = float((got - want).abs().max())
        row(rows, 'forward logits, %s' % label, err <= LOGITS_ATOL, max_abs_err='%.2e' % err)
    q, k, v = (torch.randn(1, 2, 512, 8, generator=torch.Generator().manual_seed(s)) for s in (2, 3, 4))
    want = banded_attention(q, k, v, 16, torch.nn.Identity())
    got = banded_attention(q.to(device), k.to(device), v.to(device), 16, torch.nn.Identity()).cpu()
    err = float((got - want).abs().max())
    row(rows, 'banded_attention N=512 w=16', err <= 1e-5, max_abs_err='%.2e' % err)


def check_memory(rows, device, small):
    """The attention memory of a train-mode forward, measured by the reference with torch.cuda."""
    B, T = 4, 32 if small else 256
    model = build(device, small, dropout=0.1).train()
    idx = torch.randint(0, 65, (B, T), generator=torch.Generator().manual_seed(5)).to(device)
    _, loss, seconds, mem = model(idx, idx)
    weights = 4 * B * 6 * T * T   # one float32 (B, n_query_head, T, T) tensor
    if device == 'cpu':
        row(rows, 'attention memory (not measured on a CPU)', mem != mem, figure=mem)
        return
    ok = isinstance(mem, (int, float)) and mem == mem and mem >= weights
    row(rows, 'attention memory >= one (B,nh,T,T) float32', ok, bytes=int(mem) if mem == mem else mem,
        ratio_to_weights='%.2f' % (mem / weights), seconds='%.2e' % seconds)
    loss.backward()
    grads = all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in model.parameters())
    row(rows, 'backward on the GPU: finite gradients', grads)


def check_generate(rows, device, small):
    """Greedy tokens past block_size: GPU against CPU, and the GPU's KV cache against no cache."""
    block = 32 if small else 256
    prompt = torch.randint(0, 65, (1, block - 4), generator=torch.Generator().manual_seed(6))
    cpu, gpu = build('cpu', small).eval(), build(device, small).eval()
    want = cpu.generate(prompt, 12, do_sample=False)[0]
    got = gpu.generate(prompt.to(device), 12, do_sample=False)[0].cpu()
    row(rows, 'generate greedy past block_size, GPU = CPU', torch.equal(got, want),
        differing=int((got != want).sum()))
    cached = gpu.generate(prompt.to(device), 12, do_sample=False, use_kv_cache=True)[0].cpu()
    row(rows, 'generate with KV cache = without (GPU)', torch.equal(cached, got), differing=int((cached != got).sum()))


def run_chargpt(args, work, extra):
    cmd = [sys.executable, os.path.join(REPO, 'reference', 'chargpt.py'), '--system.work_dir=' + work,
           '--trainer.device=' + args.device, '--model.rope=True', '--model.n_kv_head=2'] + extra
    if args.small:
        cmd += ['--model.model_type=None', '--model.n_layer=2', '--model.n_query_head=6', '--model.n_embd=48']
    start = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    return proc, time.time() - start


def check_chargpt(rows, args, folder):
    """chargpt.py trained on the device at N = 16, then continued at N = 256 from its folder."""
    iters = 20 if args.small else args.iters
    first = os.path.join(folder, 'n16')
    proc, secs = run_chargpt(args, first, ['--trainer.max_iters=%d' % iters])
    files = sorted(os.listdir(first)) if os.path.isdir(first) else []
    row(rows, 'chargpt.py N=16 on %s' % args.device, proc.returncode == 0, seconds='%.1f' % secs,
        iters_per_s='%.1f' % (iters / secs), files=' '.join(files),
        stderr_tail=proc.stderr[-300:] if proc.returncode else '')
    if proc.returncode:
        return
    with open(os.path.join(first, 'train_losses.json')) as f:
        losses = json.load(f)
    with open(os.path.join(first, 'attention_computation_memory.json')) as f:
        memory = json.load(f)
    k = max(1, len(losses) // 10)
    falling = sum(losses[-k:]) / k < sum(losses[:k]) / k
    row(rows, 'loss falls over the run', falling, first='%.3f' % losses[0], last='%.3f' % losses[-1])
    numbers = [m for m in memory if m is not None]
    want_numbers = args.device != 'cpu'
    row(rows, 'memory log: numbers on a GPU, null on a CPU', bool(numbers) == want_numbers,
        measured=len(numbers), of=len(memory))
    second = os.path.join(folder, 'n256')
    proc, secs = run_chargpt(args, second, ['--trainer.max_iters=5',
                                            '--data.block_size=%d' % (32 if args.small else 256),
                                            '--model.pretrained_folder=' + first])
    row(rows, 'continue from --model.pretrained_folder at larger N', proc.returncode == 0, seconds='%.1f' % secs,
        stderr_tail=proc.stderr[-300:] if proc.returncode else '')


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument('--device', default='cuda')
    ap.add_argument('--small', action='store_true', help='tiny sizes: a dry run of the script on a CPU')
    ap.add_argument('--iters', type=int, default=300, help='iterations of the N = 16 chargpt.py run')
    ap.add_argument('--out', help='write the report here (JSON)')
    args = ap.parse_args()
    if args.device.startswith('cuda') and not torch.cuda.is_available():
        sys.exit('gpu_check: no CUDA device here (torch %s)' % torch.__version__)
    torch.backends.cuda.matmul.allow_tf32 = False   # compare float32 against float32
    rows = []
    env = {'torch': torch.__version__, 'device': torch.cuda.get_device_name() if args.device != 'cpu' else 'cpu',
           'sizes': 'small' if args.small else 'gpt-mini (6 layers, 6 query heads, n_embd 192, N=256)'}
    print(json.dumps(env))
    check_logits(rows, args.device, args.small)
    check_memory(rows, args.device, args.small)
    check_generate(rows, args.device, args.small)
    with tempfile.TemporaryDirectory() as folder:
        check_chargpt(rows, args, folder)
    failed = [r['check'] for r in rows if not r['ok']]
    print('%d passed, %d failed' % (len(rows) - len(failed), len(failed)))
    if args.out:
        with open(args.out, 'w') as f:
            json.dump({'env': env, 'rows': rows}, f, indent=1)
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
