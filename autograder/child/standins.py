"""
Stand-ins for a part of the submission that already fails its own tests (grading.yaml
`cascade: insulate`): a RoPE and the two attention modules written from the handout's formulas,
swapped in for the student's class while a LATER probe builds a module or a model on that part,
so that one mistake costs its own part's tests only (2.1 failing does not also fail 3.1, 8.1 and
10.x). Runs INSIDE the sandboxed child only, and only when the harness names the part in the
probe's job (`job['stand_ins']`: {part: number of the test it fails}); the harness tells the
student in words ("judged with the reference RoPE in place of yours, which fails 2.1").

The swap is by name in the student's module (mingpt.model.RotaryPositionalEmbeddings = StandIn)
for the time a module or model is BUILT, so it works where the student's code builds the class by
that name; `BUILT` records which stand-ins were really built, so that the harness says so where
the student's code could not be set aside (RoPE inlined in forward) instead of guessing.
What a submission could learn from these classes is in docs/ARCHITECTURE.md ("Stand-ins").
"""

import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# part -> the handout's class name that the stand-in replaces
CLASS_OF = {'rope': 'RotaryPositionalEmbeddings', 'mha': 'CausalSelfAttention', 'gqa': 'GroupedQueryAttention'}
BUILT = set()   # the parts whose stand-in was built in this process


class StandInRoPE(nn.Module):
    """g(Y) = Y * cos(C) + rotate_half(Y) * sin(C), C[m, i] = m * base^(-2(i-1)/d), positions from 1."""

    def __init__(self, d, base=10_000, *args, **kwargs):
        super().__init__()
        BUILT.add('rope')
        self.d, self.base = int(d), base

    def forward(self, x, offset=0, *args, **kwargs):
        T = x.shape[-2]
        half = torch.arange(0, self.d, 2, dtype=torch.float64, device=x.device) / self.d
        m = torch.arange(offset + 1, offset + T + 1, dtype=torch.float64, device=x.device)
        angles = torch.outer(m, float(self.base) ** (-half))
        angles = torch.cat([angles, angles], dim=-1)
        first, second = x.chunk(2, dim=-1)
        return x * angles.cos().to(x.dtype) + torch.cat([-second, first], dim=-1) * angles.sin().to(x.dtype)


class _StandInAttention(nn.Module):
    """Causal attention with n_kv_head key/value heads shared by groups of query heads (the handout's names)."""
    part = None

    def __init__(self, config, *args, **kwargs):
        super().__init__()
        BUILT.add(self.part)
        self.n_head = config.n_query_head
        self.n_kv_head = self.n_head if self.part == 'mha' else config.n_kv_head
        self.head_dim = config.n_embd // self.n_head
        self.q_proj = nn.Linear(config.n_embd, config.n_embd)
        self.k_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)
        self.v_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        self.rope = bool(getattr(config, 'rope', False))
        if self.rope:
            self.query_rotary_pe = StandInRoPE(self.head_dim)
            self.key_rotary_pe = StandInRoPE(self.head_dim)

    def forward(self, x, kv_cache=None, *args, **kwargs):
        if kv_cache is not None:
            raise NotImplementedError('the stand-in attention keeps no KV cache')
        B, T, C = x.shape
        split = lambda t, n: t.view(B, T, n, self.head_dim).transpose(1, 2)
        q, k, v = split(self.q_proj(x), self.n_head), split(self.k_proj(x), self.n_kv_head), split(self.v_proj(x), self.n_kv_head)
        if self.rope:
            q, k = self.query_rotary_pe(q), self.key_rotary_pe(k)
        group = self.n_head // self.n_kv_head
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        allowed = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        weights = self.attn_dropout(F.softmax(scores.masked_fill(~allowed, float('-inf')), dim=-1))
        y = (weights @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.out_proj(y)), 0


class StandInCausalSelfAttention(_StandInAttention):
    part = 'mha'


class StandInGroupedQueryAttention(_StandInAttention):
    part = 'gqa'


STAND_IN = {'rope': StandInRoPE, 'mha': StandInCausalSelfAttention, 'gqa': StandInGroupedQueryAttention}


@contextlib.contextmanager
def swapped(module, parts):
    """The student's classes of `parts` replaced by the stand-ins in `module` (mingpt.model) while the block runs."""
    saved = {}
    try:
        for part in parts:
            name = CLASS_OF[part]
            if hasattr(module, name):
                saved[name] = getattr(module, name)
                setattr(module, name, STAND_IN[part])
        yield
    finally:
        for name, cls in saved.items():
            setattr(module, name, cls)
