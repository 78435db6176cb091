"""
Independent float64 versions of the handout's formulas, written from the handout text and
not from the reference code, for the reference tests to compare against:
  - RoPE as an explicit rotation matrix R_{Theta,m} per position (handout section 5),
  - the sliding-window mask M of handout 4.1,
  - grouped-query attention as a loop over query heads (i, j) (handout section 5, GQA),
plus small builders for attention configs and non-trivial weights.
"""

import math

import torch
import torch.nn as nn

from mingpt.model import GPT


def rope_matrix(m, d, base=10000.0):
    """R_{Theta,m} (d, d), float64: feature i is rotated together with feature i + d/2."""
    assert d % 2 == 0, "RoPE needs an even d, got %d" % d
    R = torch.zeros(d, d, dtype=torch.float64)
    half = d // 2
    for i in range(1, half + 1):  # 1-based as in the handout
        theta = base ** (-2.0 * (i - 1) / d)
        c, s = math.cos(m * theta), math.sin(m * theta)
        a, b = i - 1, i - 1 + half  # 0-based indices of the pair (i, i + d/2)
        R[a, a], R[a, b] = c, -s
        R[b, a], R[b, b] = s, c
    return R


def rope_reference(y, first_position=1):
    """Row m of y (..., T, d) multiplied by R_{Theta,m}, m = first_position.. ; float64."""
    T, d = y.shape[-2], y.shape[-1]
    y = y.to(torch.float64)
    rows = [y[..., t, :] @ rope_matrix(first_position + t, d).T for t in range(T)]  # each (..., d)
    return torch.stack(rows, dim=-2)  # (..., T, d)


def handout_window_allowed(N, w):
    """(N, N) booleans, True where M is 0: query t sees the w//2 + 1 tokens ending at itself."""
    width = w // 2 + 1
    allowed = torch.zeros(N, N, dtype=torch.bool)
    for t in range(N):
        for n in range(N):
            allowed[t, n] = t - width < n <= t
    return allowed


def causal_allowed(N):
    allowed = torch.zeros(N, N, dtype=torch.bool)
    for t in range(N):
        allowed[t, :t + 1] = True
    return allowed


def gqa_reference(x, attn, h_q, rope=False, window=None):
    """
    The handout's GQA equations, one query head (i, j) at a time, in float64, using the
    weights of `attn` (q_proj, k_proj, v_proj, out_proj) and h_q query heads. Query head
    (i, j) is feature block i*g + j of q_proj and uses key/value block i; the outputs are
    concatenated in that order.
    x: (B, T, C) -> (B, T, C).
    """
    B, T, C = x.shape
    d_k = C // h_q
    h_kv = attn.k_proj.out_features // d_k
    g = h_q // h_kv
    x = x.to(torch.float64)

    def block(lin, idx):  # rows of W^T, b for head idx: X W + b restricted to that head
        W = lin.weight.detach().to(torch.float64)[idx * d_k:(idx + 1) * d_k]  # (d_k, C)
        b = lin.bias.detach().to(torch.float64)[idx * d_k:(idx + 1) * d_k]    # (d_k,)
        return x @ W.T + b  # (B, T, d_k)

    allowed = causal_allowed(T) if window is None else handout_window_allowed(T, window)
    heads = []
    for i in range(h_kv):
        K, V = block(attn.k_proj, i), block(attn.v_proj, i)  # (B, T, d_k)
        if rope:
            K = rope_reference(K)
        for j in range(g):
            Q = block(attn.q_proj, i * g + j)  # (B, T, d_k)
            if rope:
                Q = rope_reference(Q)
            S = Q @ K.transpose(-2, -1) / math.sqrt(d_k)  # (B, T, T)
            S = S.masked_fill(~allowed, float('-inf'))
            A = torch.softmax(S, dim=-1)
            heads.append(A @ V)  # (B, T, d_k)
    Xp = torch.cat(heads, dim=-1)  # (B, T, C)
    Wo = attn.out_proj.weight.detach().to(torch.float64)
    bo = attn.out_proj.bias.detach().to(torch.float64)
    return Xp @ Wo.T + bo


def attention_config(n_embd=48, n_query_head=6, n_kv_head=None, block_size=32, rope=False,
                     sliding_window=None):
    """A model config as GPT would see it, with dropout off so outputs are deterministic."""
    C = GPT.get_default_config()
    C.model_type = None
    C.n_layer = 2
    C.n_embd = n_embd
    C.n_query_head = n_query_head
    C.n_kv_head = n_query_head if n_kv_head is None else n_kv_head
    C.vocab_size = 65
    C.block_size = block_size
    C.rope = rope
    C.sliding_window = sliding_window
    C.embd_pdrop = C.resid_pdrop = C.attn_pdrop = 0.0
    return C


def fan_in_init_(module, seed):
    """
    Weights ~ N(0, 1/fan_in) and small random biases: GPT's 0.02 init makes attention
    almost uniform, which would hide mistakes in which key a query looks at.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen) / math.sqrt(m.in_features))
                if m.bias is not None:
                    m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
            elif isinstance(m, nn.Embedding):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
    return module
