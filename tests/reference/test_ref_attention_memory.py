"""
AttentionMemory of the reference (mingpt/utils.py) on CPU: it counts exactly the bytes
allocated inside the region, gives identical numbers on repeated runs, and the memory the
attention modules report shrinks when GQA shares KV heads.
"""

import torch

from mingpt.model import GPT, CausalSelfAttention, GroupedQueryAttention
from mingpt.utils import AttentionMemory
from ref_formulas import attention_config


def test_counts_allocations_in_region():
    before = torch.ones(1000)  # allocated outside: never counted
    with AttentionMemory('cpu') as mem:
        kept = torch.zeros(1000, dtype=torch.float32)          # 4000 bytes, still alive at exit
        tmp = torch.zeros(2000, dtype=torch.float64)           # 16000 bytes, freed inside
        del tmp
        view = kept.view(10, 100)                              # a view allocates nothing
        before.add_(1)                                         # in place: nothing new
    assert mem.net_bytes == 4000, "net counts live allocations of the region: %d" % mem.net_bytes
    assert mem.peak_bytes == 20000, "peak is the high-water mark 4000 + 16000: %d" % mem.peak_bytes
    assert view.shape == (10, 100)


def test_repeated_runs_identical():
    torch.manual_seed(0)
    model = GPT(attention_config(n_kv_head=2))
    idx = torch.randint(0, 65, (4, 32))
    runs = [model(idx, idx)[3] for _ in range(3)]
    assert runs[0] > 0 and runs[0] == runs[1] == runs[2], "memory must be deterministic: %s" % runs
    with torch.no_grad():
        runs = [model(idx)[3] for _ in range(3)]
    assert runs[0] > 0 and runs[0] == runs[1] == runs[2], "memory must be deterministic: %s" % runs


def test_repeated_runs_identical_with_rope():
    torch.manual_seed(0)
    model = GPT(attention_config(n_kv_head=2, rope=True))
    idx = torch.randint(0, 65, (4, 32))
    runs = [model(idx, idx)[3] for _ in range(3)]
    assert runs[1] > 0 and runs[1] == runs[2], "memory must be deterministic: %s" % runs
    # the first forward also builds the cos/sin caches inside the region: per layer
    # 2 modules (q, k) x 2 tables (cos, sin) x T=32 x head_dim=8 float32
    assert runs[0] - runs[1] == 2 * 2 * 32 * 8 * 4, "first run = later runs + RoPE caches: %s" % runs


def test_gqa_memory_falls_with_kv_heads():
    x = torch.randn(4, 32, 48)  # (B, T, C)
    mem = {}
    for n_kv in (6, 3, 2, 1):
        torch.manual_seed(1)
        cfg = attention_config(n_kv_head=n_kv)
        attn = CausalSelfAttention(cfg) if n_kv == 6 else GroupedQueryAttention(cfg)
        y, mem[n_kv] = attn(x)  # grad enabled: includes what autograd keeps for backward
        assert y.requires_grad
    # fewer KV heads never cost more; every GQA setting is below multi-head attention.
    # The reference repeats K and V to n_query_head heads inside the region, so kv=3, 2, 1
    # report the same bytes (the repeat, not the KV projection, is what backward keeps).
    assert mem[1] <= mem[2] <= mem[3] < mem[6], "memory must fall with n_kv_head: %s" % mem
    # and what MHA costs over GQA is at least one full K or V tensor (B*T*C float32 = 24576 B)
    assert mem[6] - mem[3] >= 4 * 32 * 48 * 4, mem
