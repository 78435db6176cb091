"""
Sliding-window attention of the reference (handout section 4): the mask for N=6, w=4 is the
handout's example; banded_attention, the dense masked form and the handout's loop
pseudocode agree, also inside the attention modules with RoPE and GQA; the banded form's
memory grows linearly in N while the dense form's grows quadratically.
"""

import pytest
import torch
import torch.nn as nn

from mingpt.model import (GPT, CausalSelfAttention, GroupedQueryAttention, banded_attention,
                          causal_attention, sliding_window_attention_loop, sliding_window_mask)
from mingpt.utils import AttentionMemory
from ref_formulas import attention_config, fan_in_init_, gqa_reference, handout_window_allowed

NO_DROPOUT = nn.Dropout(0.0)
# One attention op in float32 on outputs of size ~1: einsum, matmul and the scalar loop
# order their sums differently (~1e-7); a key off by one position moves outputs by ~1e-1.
ATOL = 1e-5

# handout 4.1, N = 6, w = 4: 0 where attending is allowed, -inf elsewhere
INF = float('inf')
HANDOUT_M = torch.tensor([
    [0, -INF, -INF, -INF, -INF, -INF],
    [0, 0, -INF, -INF, -INF, -INF],
    [0, 0, 0, -INF, -INF, -INF],
    [-INF, 0, 0, 0, -INF, -INF],
    [-INF, -INF, 0, 0, 0, -INF],
    [-INF, -INF, -INF, 0, 0, 0],
])


def test_mask_is_handouts_example():
    mask = sliding_window_mask(6, 4)
    assert mask.dtype == torch.bool and mask.shape == (6, 6)
    assert torch.equal(mask, HANDOUT_M == 0), "mask differs from handout 4.1:\n%s" % mask.int()
    assert torch.equal(handout_window_allowed(6, 4), HANDOUT_M == 0), "the test's own formula is off"


@pytest.mark.parametrize("T, w", [(10, 4), (9, 5), (7, 0), (5, 16), (16, 6)])
def test_banded_equals_dense_equals_loop(T, w):
    gen = torch.Generator().manual_seed(T * 100 + w)
    q, k, v = (torch.randn(2, 3, T, 8, generator=gen) for _ in range(3))  # (B, nh, T, hs)
    banded = banded_attention(q, k, v, w, NO_DROPOUT)
    dense = causal_attention(q, k, v, sliding_window_mask(T, w), NO_DROPOUT)
    assert torch.equal(sliding_window_mask(T, w), handout_window_allowed(T, w))
    loop = torch.stack([torch.stack([sliding_window_attention_loop(q[b, h], k[b, h], v[b, h], w)
                                     for h in range(3)]) for b in range(2)])  # (B, nh, T, hs)
    torch.testing.assert_close(banded, dense, atol=ATOL, rtol=ATOL)
    torch.testing.assert_close(loop, dense, atol=ATOL, rtol=ATOL)


@pytest.mark.parametrize("n_kv, rope", [(6, False), (6, True), (2, False), (3, True)])
def test_attention_module_with_window(n_kv, rope):
    cfg = attention_config(n_kv_head=n_kv, rope=rope, sliding_window=6)
    cls = CausalSelfAttention if n_kv == 6 else GroupedQueryAttention
    attn = fan_in_init_(cls(cfg), seed=20 + n_kv).eval()
    x = torch.randn(2, 15, 48, generator=torch.Generator().manual_seed(21))  # (B, T, C)
    y, _ = attn(x)
    # whole attention layer in float32 vs float64 per-head loop: see test_ref_gqa.ATOL
    expected = gqa_reference(x, attn, h_q=6, rope=rope, window=6)
    torch.testing.assert_close(y.double(), expected, atol=ATOL, rtol=ATOL)


def test_gpt_window_changes_logits_only_past_the_window():
    # the modules apply the window as a mask (the dense form); banded_attention is its O(N w) twin above
    gen = torch.Generator().manual_seed(30)
    idx = torch.randint(0, 65, (2, 20), generator=gen)
    logits = {}
    for window in (None, 4):
        torch.manual_seed(31)  # same weights for both
        model = GPT(attention_config(n_kv_head=2, rope=True, sliding_window=window))
        fan_in_init_(model, seed=32).eval()
        logits[window], _, _, _ = model(idx)
    # two layers of a window of w' = 3 tokens: positions 0..2 see exactly what causal attention sees
    torch.testing.assert_close(logits[4][:, :3], logits[None][:, :3], atol=1e-4, rtol=1e-5)
    assert (logits[4][:, 5:] - logits[None][:, 5:]).abs().max() > 1e-2, "the window must hide old tokens"


def test_window_hides_old_tokens():
    # a token more than w//2 positions back must not influence a single attention layer
    cfg = attention_config(n_kv_head=2, rope=True, sliding_window=4)
    attn = fan_in_init_(GroupedQueryAttention(cfg), seed=40).eval()
    gen = torch.Generator().manual_seed(41)
    x = torch.randn(1, 12, 48, generator=gen)  # (B, T, C)
    x2 = x.clone()
    x2[:, 0] = torch.randn(48, generator=gen)
    d = (attn(x2)[0] - attn(x)[0]).abs().amax(dim=-1)[0]  # (T,)
    assert d[:3].min() > 1e-2, "positions 0..2 see token 0 (w'=3)"
    assert d[3:].max() < 1e-6, "positions >= 3 must not see token 0: %s" % d


def _peak(fn, N, w=16, hs=8):
    gen = torch.Generator().manual_seed(N)
    q, k, v = (torch.randn(1, 2, N, hs, generator=gen) for _ in range(3))  # (B, nh, N, hs)
    with AttentionMemory('cpu') as mem:
        fn(q, k, v, w)
    return mem.peak_bytes


def test_banded_memory_linear_dense_quadratic():
    banded = [_peak(lambda q, k, v, w: banded_attention(q, k, v, w, NO_DROPOUT), N) for N in (256, 512, 1024)]
    dense = [_peak(lambda q, k, v, w: causal_attention(q, k, v, sliding_window_mask(q.size(-2), w), NO_DROPOUT), N)
             for N in (256, 512, 1024)]
    for small, big in zip(banded, banded[1:]):
        # the band holds O(N w) scores plus O(N hs) padded K/V: exactly linear up to the w-1 pad rows
        assert 1.8 < big / small < 2.2, "banded peak should double with N: %s" % banded
    for small, big in zip(dense, dense[1:]):
        # the (N, N) scores and mask dominate: 4x per doubling
        assert 3.6 < big / small < 4.4, "dense peak should quadruple with N: %s" % dense
    assert dense[-1] > 8 * banded[-1], "at N=1024, w=16 the band must be far smaller than N x N"


def test_banded_memory_far_below_dense_at_handout_sizes():
    # N=2048, w=128, head dim 32: the (N, N) scores take 16 MiB per head, the band
    # (N x 65 scores) 0.5 MiB; a band that copies a (hs, w') window per query would
    # need 17 MiB per head for K and again for V, no better than dense
    banded = _peak(lambda q, k, v, w: banded_attention(q, k, v, w, NO_DROPOUT), 2048, w=128, hs=32)
    dense = _peak(lambda q, k, v, w: causal_attention(q, k, v, sliding_window_mask(q.size(-2), w), NO_DROPOUT),
                  2048, w=128, hs=32)
    assert dense >= 8 * banded, "banded peak %d B should be >= 8x below dense %d B" % (banded, dense)
