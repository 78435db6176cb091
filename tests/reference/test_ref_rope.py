"""
RotaryPositionalEmbeddings of the reference against the handout's RoPE definition: the
formula for several d, positions starting at 1, relative-position scores, norms, the
cos/sin cache (rebuilt for longer T and another dtype, kept out of state_dict, moved by .to()).
"""

import math

import pytest
import torch

from mingpt.model import GPT, RotaryPositionalEmbeddings
from ref_formulas import attention_config, rope_matrix, rope_reference

# One float32 op (x*cos + rot(x)*sin) on |x| <~ 5: float32 rounding is ~6e-8 relative, so
# 1e-6 leaves margin while a wrong base, sign or pairing is off by > 1e-2.
ATOL32 = 1e-6
# Same op carried out in float64 against a float64 formula: only float64 rounding remains.
ATOL64 = 1e-12


@pytest.mark.parametrize("d", [2, 8, 32])
def test_matches_handout_formula(d):
    torch.manual_seed(d)
    x = torch.randn(2, 3, 7, d)  # (B, nh, T, d)
    out = RotaryPositionalEmbeddings(d)(x)
    assert out.shape == x.shape and out.dtype == torch.float32, "RoPE must keep shape and dtype"
    expected = rope_reference(x)  # rows rotated by R_1 .. R_7
    torch.testing.assert_close(out.double(), expected, atol=ATOL32, rtol=ATOL32)


def test_positions_start_at_one():
    # for d=2 the handout's first row is (cos 1*theta_1, sin 1*theta_1) with theta_1 = 1
    x = torch.tensor([[1.0, 0.0], [1.0, 0.0]], dtype=torch.float64)  # (T=2, d=2)
    out = RotaryPositionalEmbeddings(2)(x)
    expected = torch.tensor([[math.cos(1.0), math.sin(1.0)],
                             [math.cos(2.0), math.sin(2.0)]], dtype=torch.float64)
    torch.testing.assert_close(out, expected, atol=ATOL64, rtol=0)
    assert (out[0] - x[0]).abs().max() > 0.4, "position 1 must be rotated, not left as the identity"


def test_offset_shifts_positions():
    # used by KV-cache generation: offset k means positions k+1 .. k+T
    torch.manual_seed(0)
    x = torch.randn(1, 2, 3, 8, dtype=torch.float64)
    out = RotaryPositionalEmbeddings(8)(x, offset=5)
    torch.testing.assert_close(out, rope_reference(x, first_position=6), atol=ATOL64, rtol=0)


def test_score_depends_only_on_relative_position():
    # float64 so that only the math is tested, not float32 rounding of the scores
    d, T = 16, 10
    torch.manual_seed(1)
    q = torch.randn(d, dtype=torch.float64).expand(T, d)  # the same query at every position
    k = torch.randn(d, dtype=torch.float64).expand(T, d)  # the same key at every position
    rope = RotaryPositionalEmbeddings(d)
    S = rope(q) @ rope(k).T  # (T, T): S[m, n] = q~_m . k~_n
    for m in range(T):
        for n in range(T):
            expected = q[0] @ rope_matrix(n - m, d) @ k[0]  # R_m^T R_n = R_{n-m}
            assert abs(S[m, n] - expected) < 1e-10, "score (%d, %d) is not a function of m-n" % (m, n)
    assert S.diagonal(1).std() < 1e-10 and (S[0] - S[0, 0]).abs().max() > 1e-2, \
        "scores must be constant along diagonals but vary across them"


def test_preserves_norms():
    torch.manual_seed(2)
    x = torch.randn(2, 4, 20, 32)  # (B, nh, T, d)
    out = RotaryPositionalEmbeddings(32)(x)
    # rotations are orthogonal; float32 sums of 32 squares keep ~1e-7 relative error
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), atol=0, rtol=1e-6)


def test_cache_rebuilt_for_longer_sequence():
    rope = RotaryPositionalEmbeddings(8)
    torch.manual_seed(3)
    for T in (4, 12, 4):
        x = torch.randn(1, 2, T, 8)
        torch.testing.assert_close(rope(x).double(), rope_reference(x), atol=ATOL32, rtol=ATOL32)
    assert rope.cos_cached.shape[0] >= 12, "the cache must cover the longest T seen"


def test_cache_rebuilt_for_other_dtype():
    rope = RotaryPositionalEmbeddings(8)
    torch.manual_seed(4)
    x32 = torch.randn(1, 1, 6, 8)
    torch.testing.assert_close(rope(x32).double(), rope_reference(x32), atol=ATOL32, rtol=ATOL32)
    x64 = torch.randn(1, 1, 6, 8, dtype=torch.float64)
    out64 = rope(x64)
    assert out64.dtype == torch.float64, "float64 input must give float64 output"
    # a float32 cache reused here would be off by ~1e-7, far above the float64 tolerance
    torch.testing.assert_close(out64, rope_reference(x64), atol=ATOL64, rtol=0)


def test_cache_not_in_state_dict_and_follows_to():
    model = GPT(attention_config(rope=True))
    model(torch.zeros(1, 5, dtype=torch.long))  # builds the caches
    leaked = [k for k in model.state_dict() if 'cos' in k or 'sin' in k or 'cache' in k]
    assert not leaked, "RoPE caches must not be saved in checkpoints: %s" % leaked
    rope = model.transformer.h[0].attn.query_rotary_pe
    assert rope.cos_cached is not None and rope.cos_cached.dtype == torch.float32
    model.to(torch.float64)
    assert rope.cos_cached.dtype == torch.float64 and rope.sin_cached.dtype == torch.float64, \
        "cos/sin caches must be buffers so that .to() moves them"
