"""
Memory figures of the reference, measured the course's way: the attention modules read
torch.cuda.memory_allocated() after q, k, v are ready and again right after y = att @ v, and
report the difference. On a CPU there is nothing to read, and the figure is NaN ("not
measured"), never a silent 0. With a simulated CUDA device (tensors answer is_cuda, and the
torch.cuda queries answer from a storage meter of mingpt/utils.py) the figure is exactly the
bytes the attention core leaves allocated, and it leaves out the projections.

Also the CPU meter AttentionMemory of mingpt/utils.py (the staff tools measure with it).
"""

import math

import pytest
import torch

from mingpt.model import GPT, CausalSelfAttention, GroupedQueryAttention
from mingpt.utils import AttentionMemory, _CpuAllocationTracker
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


def test_cpu_figure_is_nan_not_zero():
    torch.manual_seed(0)
    model = GPT(attention_config(n_kv_head=2))
    idx = torch.randint(0, 65, (2, 16))
    mem = model(idx, idx)[3]
    assert math.isnan(mem), "on a CPU the attention memory is 'not measured' (NaN), got %r" % mem


class SimulatedCuda:
    """
    Within this block tensors answer is_cuda = True and torch.cuda.memory_allocated() returns
    the bytes a storage meter has seen allocated and not yet freed since the block began; every
    reading is kept in `readings`.
    """

    def __enter__(self):
        self.meter = _CpuAllocationTracker()
        self.readings = []
        self._saved = (torch.cuda.memory_allocated, torch.cuda.empty_cache, torch.cuda.synchronize)
        torch.cuda.memory_allocated = lambda device=None: self.readings.append(self.meter.live) or self.meter.live
        torch.cuda.empty_cache = lambda: None
        torch.cuda.synchronize = lambda device=None: None  # Block.forward times the attention on CUDA
        torch.Tensor.is_cuda = property(lambda t: True)
        self.meter.__enter__()
        return self

    def __exit__(self, *exc):
        self.meter.__exit__(*exc)
        self.meter._closed = True
        del torch.Tensor.is_cuda
        torch.cuda.memory_allocated, torch.cuda.empty_cache, torch.cuda.synchronize = self._saved
        return False


B, T, NH, HS = 4, 32, 6, 8


@pytest.mark.parametrize("n_kv", [6, 3, 2, 1])
def test_figure_is_the_core_region(n_kv):
    """Train mode, dropout 0.1, grad on: the weights saved for backward dominate the figure."""
    torch.manual_seed(1)
    cfg = attention_config(n_kv_head=n_kv)
    cfg.attn_pdrop = 0.1
    attn = (CausalSelfAttention(cfg) if n_kv == 6 else GroupedQueryAttention(cfg)).train()
    x = torch.randn(B, T, NH * HS)
    with SimulatedCuda() as sim:
        y, mem = attn(x)
        whole = sim.meter.live  # everything the forward left allocated (y included)
    assert isinstance(mem, int) and len(sim.readings) == 2, (mem, sim.readings)
    assert mem == sim.readings[1] - sim.readings[0], "the figure is end - start of two readings"
    weights = B * NH * T * T * 4
    # what autograd keeps for backward (the softmax output, the dropout output and mask, ...) is at
    # least one float32 (B, nh, T, T) tensor in every correct style: the floor the grader's 9.1 uses
    assert weights <= mem <= 5 * weights, "core region keeps the (B, nh, T, T) weights: %d vs %d" % (mem, weights)
    assert mem < whole, "the projections and out_proj lie outside the region: %d vs %d" % (mem, whole)


def test_figure_does_not_depend_on_kv_heads():
    """
    The K/V repeat sits before `start`, so every GQA setting measures the same core. (Multi-head
    attention differs: its k and v are transposed views, which the matmuls copy inside the region.)
    """
    figures = {}
    for n_kv in (3, 2, 1):
        torch.manual_seed(2)
        cfg = attention_config(n_kv_head=n_kv)
        attn = GroupedQueryAttention(cfg).train()
        with SimulatedCuda():
            figures[n_kv] = attn(torch.randn(B, T, NH * HS))[1]
    assert len(set(figures.values())) == 1, figures


def test_repeated_runs_identical():
    torch.manual_seed(0)
    model = GPT(attention_config(n_kv_head=2, rope=True))
    idx = torch.randint(0, 65, (4, 32))
    with SimulatedCuda():
        runs = [model(idx, idx)[3] for _ in range(3)]
    assert runs[0] > 0 and runs[0] == runs[1] == runs[2], "memory must be deterministic: %s" % runs
