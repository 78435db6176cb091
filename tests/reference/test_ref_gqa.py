"""
GroupedQueryAttention of the reference against the handout's GQA equations: it reduces to
CausalSelfAttention when every query head has its own KV head, and it equals an explicit
loop over query heads (i, j) sharing KV head i, with and without RoPE.
"""

import pytest
import torch

from mingpt.model import CausalSelfAttention, GroupedQueryAttention
from ref_formulas import attention_config, fan_in_init_, gqa_reference

# Whole attention module (4 matmuls + softmax) in float32 against float64 with O(1) outputs:
# accumulated float32 rounding stays below ~1e-6; 1e-5 leaves margin, while using the wrong
# KV head for a query head changes outputs by ~1e-1.
ATOL = 1e-5


@pytest.mark.parametrize("rope", [False, True])
def test_equals_multi_head_attention_when_kv_equals_q(rope):
    cfg = attention_config(n_query_head=6, n_kv_head=6, rope=rope)
    gqa = fan_in_init_(GroupedQueryAttention(cfg), seed=0).eval()
    mha = CausalSelfAttention(cfg).eval()
    mha.load_state_dict(gqa.state_dict())
    x = torch.randn(2, 13, 48, generator=torch.Generator().manual_seed(1))  # (B, T, C)
    y_gqa, _ = gqa(x)
    y_mha, _ = mha(x)
    # g = 1 runs the same float32 ops in the same order; 1e-6 covers any kernel reordering
    torch.testing.assert_close(y_gqa, y_mha, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("rope", [False, True])
@pytest.mark.parametrize("n_kv", [1, 2, 3, 6])
def test_equals_per_head_loop_of_handout_equations(n_kv, rope):
    cfg = attention_config(n_query_head=6, n_kv_head=n_kv, rope=rope)
    attn = fan_in_init_(GroupedQueryAttention(cfg), seed=10 + n_kv).eval()
    assert attn.k_proj.out_features == n_kv * 8 and attn.v_proj.out_features == n_kv * 8, \
        "K and V projections must have n_kv_head * head_dim outputs"
    x = torch.randn(2, 13, 48, generator=torch.Generator().manual_seed(n_kv))  # (B, T, C)
    y, _ = attn(x)
    expected = gqa_reference(x, attn, h_q=6, rope=rope)
    torch.testing.assert_close(y.double(), expected, atol=ATOL, rtol=ATOL)


def test_kv_head_order_is_repeat_interleave():
    # with g = 2, swapping the two KV heads must change the output: query heads 0,1 use KV head 0
    cfg = attention_config(n_query_head=4, n_embd=32, n_kv_head=2)
    attn = fan_in_init_(GroupedQueryAttention(cfg), seed=3).eval()
    x = torch.randn(1, 9, 32, generator=torch.Generator().manual_seed(3))  # (B, T, C)
    y, _ = attn(x)
    swapped = fan_in_init_(GroupedQueryAttention(cfg), seed=3).eval()
    with torch.no_grad():
        for lin in (swapped.k_proj, swapped.v_proj):
            lin.weight.copy_(torch.cat([lin.weight[8:], lin.weight[:8]]))
            lin.bias.copy_(torch.cat([lin.bias[8:], lin.bias[:8]]))
    torch.testing.assert_close(swapped(x)[0].double(), gqa_reference(x, swapped, h_q=4), atol=ATOL, rtol=ATOL)
    assert (swapped(x)[0] - y).abs().max() > 1e-2, "which KV head a query head uses must matter"
