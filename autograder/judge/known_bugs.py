"""
Known wrong variants of the reference . Each is a small source patch of
reference/mingpt/model.py; `regenerate` runs the probes on every patched copy and stores its
outputs, and the checks name the variant whose outputs a failing submission matches.
A patch that no longer applies makes `regenerate` fail, so the list cannot drift silently.
"""

from dataclasses import dataclass
from typing import List, Tuple

from autograder.judge import source_patches


ROPE_APPLY_Q = "            q = self.query_rotary_pe(q, offset=past)\n"
ROPE_APPLY_K = "            k = self.key_rotary_pe(k, offset=past)\n"
CSA_Q = "        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n"
CSA_K = "        k = self.k_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)\n"
GQA_Q = "        q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)     # (B, nh, T, hs)\n"
GQA_K = "        k = self.k_proj(x).view(B, T, self.n_kv_head, hs).transpose(1, 2)  # (B, nkv, T, hs)\n"
# the student's own attention core in GroupedQueryAttention.forward (CausalSelfAttention's is given code)
SCALE = ("        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))          "
         "# (B, nh, T, past+T): grouped scores\n")
MASK = "        att = att.masked_fill(mask == 0, float('-inf'))                   # no query sees a later key\n"
SOFTMAX = "        att = F.softmax(att, dim=-1)                                      # each query row sums to 1\n"
CROP = "            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]\n"
GQA_MERGE = "        y = y.transpose(1, 2).contiguous().view(B, T, C)\n"   # GQA's head merge (CSA's carries a comment)
MASK_ROWS = "    mask = bias[:, :, past:past + T, :past + T]\n"
WINDOW = "    w = window // 2 + 1\n"   # sliding_window_mask and banded_attention
CACHE_SLICE = ("        cos = self.cos_cached[offset:T]                 # (T, d)\n"
               "        sin = self.sin_cached[offset:T]                 # (T, d)\n")
TOP_K = ("            if top_k is not None:\n                v, _ = torch.topk(logits, top_k)\n"
         "                logits[logits < v[:, [-1]]] = -float('Inf')\n")


@dataclass
class KnownBug:
    id: str
    description: str                      # what the student is told
    patches: List[Tuple[str, str, int]]  # (old, new, expected number of occurrences)
    note: str = ''                        # told after the description: what else the bug explains


# attention is relative: shifting every position leaves every query-key distance, and so attention, unchanged
SHIFT_NOTE = ('Attention tests with RoPE may still pass: attention scores with RoPE depend only on the distance m - n '
              'between a query\'s and a key\'s positions, which a shift of every position leaves unchanged; RoPE\'s '
              'own outputs show the shift.')


def _rope_outside_heads(q_line, k_line, view_q, view_k):
    """RoPE over the whole n_embd-wide projection before the head split (d = n_embd)."""
    return [
        (q_line, q_line.replace('self.q_proj(x)%s' % view_q,
                                'self.query_rotary_pe(self.q_proj(x).unsqueeze(1)).squeeze(1)%s' % view_q), 1),
        (k_line, k_line.replace('self.k_proj(x)%s' % view_k,
                                'self.key_rotary_pe(self.k_proj(x).unsqueeze(1)).squeeze(1)%s' % view_k), 1),
    ]


KNOWN_BUGS = [
    KnownBug('rope-positions-from-0', 'RoPE positions start at 0; the handout numbers them 1..T',
                [("m = torch.arange(1, T + 1, dtype=torch.float64", "m = torch.arange(0, T, dtype=torch.float64", 1)],
                SHIFT_NOTE),
    KnownBug('rope-positions-reversed', 'RoPE positions run backwards (T..1); the handout numbers them 1..T',
                [("m = torch.arange(1, T + 1, dtype=torch.float64",
                  "m = torch.arange(T, 0, -1, dtype=torch.float64", 1)]),
    KnownBug('rope-cache-wrong-end', 'the cos/sin cache is sliced from its end (cache[-T:]): once a longer call has '
                                        'built it, a shorter call gets the positions of the cache\'s last rows; '
                                        'positions 1..T are its first T rows (cache[:T])',
                [(CACHE_SLICE, "        n = self.cos_cached.shape[0]\n"
                               "        cos = self.cos_cached[n - (T - offset):]\n"
                               "        sin = self.sin_cached[n - (T - offset):]\n", 1)]),
    KnownBug('rope-interleaved', 'RoPE rotates adjacent pairs (x0, x1), (x2, x3), ...; the handout rotates '
                                    'feature i with feature i + d/2 (rotate-half: [Y1 | Y2] and [-Y2 | Y1])',
                [("C = torch.cat([C, C], dim=-1)", "C = C.repeat_interleave(2, dim=-1)", 1),
                 ("x1, x2 = x.chunk(2, dim=-1)", "x1, x2 = x[..., 0::2], x[..., 1::2]", 1),
                 ("rotated = torch.cat([-x2, x1], dim=-1)",
                  "rotated = torch.stack([-x2, x1], dim=-1).flatten(-2)", 1)]),
    KnownBug('rope-sign', 'sign error in the rotate-half term: it must be [-Y2 | Y1]',
                [("rotated = torch.cat([-x2, x1], dim=-1)", "rotated = torch.cat([x2, -x1], dim=-1)", 1)]),
    KnownBug('rope-theta-pow2', 'theta uses 2**i in the exponent; it must be 2(i-1): theta_i = base^(-2(i-1)/d)',
                [("theta = self.base ** (-i / self.d)", "theta = self.base ** (-(2.0 ** (i / 2)) / self.d)", 1)]),
    KnownBug('rope-theta-i', 'theta uses i instead of i-1: theta_1 must be base^0 = 1',
                [("theta = self.base ** (-i / self.d)", "theta = self.base ** (-(i + 2) / self.d)", 1)]),
    KnownBug('rope-base-1000', 'RoPE base is 1000; the handout uses 10000',
                [("theta = self.base ** (-i / self.d)", "theta = 1000 ** (-i / self.d)", 1)]),
    KnownBug('rope-sin-cos-swapped', 'cos and sin are swapped: Y*cos(C) + rotate_half(Y)*sin(C)',
                [("return x * cos + rotated * sin", "return x * sin + rotated * cos", 1)]),
    KnownBug('rope-d-n-embd', 'RoPE is built with d = n_embd and applied before splitting heads; '
                                 'it must rotate each head with d = head_dim = n_embd // n_query_head',
                [("head_dim = config.n_embd // config.n_query_head\n            self.query_rotary_pe",
                  "head_dim = config.n_embd\n            self.query_rotary_pe", 1),
                 ("self.query_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)",
                  "self.query_rotary_pe = RotaryPositionalEmbeddings(config.n_embd)", 1),
                 ("self.key_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)",
                  "self.key_rotary_pe = RotaryPositionalEmbeddings(config.n_embd)", 1),
                 (ROPE_APPLY_Q, "            pass\n", 2), (ROPE_APPLY_K, "", 2)]
                + _rope_outside_heads(CSA_Q, CSA_K, '.view(B, T, self.n_head, hs)', '.view(B, T, self.n_head, hs)')
                + _rope_outside_heads(GQA_Q, GQA_K, '.view(B, T, self.n_head, hs)', '.view(B, T, self.n_kv_head, hs)')),
    KnownBug('rope-on-values', 'RoPE is applied to the values too; only queries and keys are rotated',
                [(ROPE_APPLY_K, ROPE_APPLY_K + "            v = self.key_rotary_pe(v, offset=past)\n", 2)]),
    KnownBug('rope-q-only', 'RoPE is applied to the queries only; the keys must be rotated too',
                [(ROPE_APPLY_K, "", 2)]),
    KnownBug('gqa-tiled', 'KV heads are tiled (repeat) instead of repeat_interleave: query heads '
                             'i*g .. i*g+g-1 must share KV head i',
                [("k = k.repeat_interleave(g, dim=1)", "k = k.repeat(1, g, 1, 1)", 1),
                 ("v = v.repeat_interleave(g, dim=1)", "v = v.repeat(1, g, 1, 1)", 1)]),
    KnownBug('gqa-group-sum', 'attention scores are summed over the query group; each query head '
                                 'needs its own scores S(i,j) = Q(i,j) K(i)^T / sqrt(d)',
                [(SCALE, SCALE + "        att = att.view(B, self.n_kv_head, g, T, -1).sum(2, keepdim=True)"
                             ".expand(-1, -1, g, -1, -1).reshape(B, self.n_head, T, -1)\n", 1)]),
    KnownBug('gqa-no-scale', 'the scores are not divided by sqrt(head_dim)',
                [(SCALE, "        att = q @ k.transpose(-2, -1)\n", 1)]),
    KnownBug('gqa-scaled-twice', 'the scores are divided by sqrt(head_dim) twice (by head_dim): scaled twice? '
                                    'F.scaled_dot_product_attention already divides by sqrt(head_dim) unless its '
                                    'scale= says otherwise, so q must not be scaled before it',
                [(SCALE, "        att = ((q * (1.0 / math.sqrt(hs))) @ k.transpose(-2, -1))"
                         " * (1.0 / math.sqrt(hs))\n", 1)]),
    KnownBug('gqa-scale-n-embd', 'the scores are divided by sqrt(n_embd); the handout divides by '
                                 'sqrt(d_k) = sqrt(head_dim)',
                [(SCALE, "        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.n_embd))\n", 1)]),
    KnownBug('gqa-no-mask', 'no causal mask: queries attend to future tokens',
                [(MASK, "", 1)]),
    KnownBug('gqa-mask-off-by-one', 'the causal mask is off by one: each query also sees the next token',
                [(MASK, "        att = att.masked_fill(torch.ones_like(att).tril(1) == 0, float('-inf'))\n", 1)]),
    KnownBug('gqa-softmax-dim', 'softmax over the wrong dimension (dim=-2); each query row must sum to 1 (dim=-1)',
                [(SOFTMAX, "        att = F.softmax(att, dim=-2)\n", 1)]),
    KnownBug('heads-merged-d-h', 'the heads are merged in the other order: feature j of head h must land at '
                                    'h * head_dim + j ((h d), as y.transpose(1, 2).reshape(B, T, C)); it lands at '
                                    'j * n_head + h (einops \'(d h)\' for \'(h d)\'?)',
                [(GQA_MERGE, "        y = y.permute(0, 2, 3, 1).reshape(B, T, C)\n", 1)]),
    # the KV cache's mask: F.scaled_dot_product_attention(is_causal=True) aligns it top-left, and ignores an
    # attn_mask passed beside it (torch 2.13), so with fewer queries than keys a query sees the first keys only
    KnownBug('kv-cache-mask-top-left', 'with a KV cache the causal mask is aligned top-left (SDPA\'s is_causal=True, '
                                          'which also wins over an attn_mask passed with it): a cached step\'s query '
                                          'sees only the first key; queries at positions past .. past+T-1 must see '
                                          'every key up to their own (mask rows past .. past+T-1)',
                [(MASK_ROWS, "    mask = bias[:, :, :T, :past + T]\n", 1)]),
    KnownBug('sw-window-narrower', 'the sliding window holds window//2 tokens, one fewer than the handout\'s '
                                      'w\' = window//2 + 1 (keys t-w\'+1 .. t: the query\'s own and window//2 '
                                      'before it)',
                [(WINDOW, "    w = window // 2\n", 2)]),
    KnownBug('sw-window-wider', 'the sliding window holds window//2 + 2 tokens, one more than the handout\'s '
                                   'w\' = window//2 + 1 (keys t-w\'+1 .. t: the query\'s own and window//2 before it)',
                [(WINDOW, "    w = window // 2 + 2\n", 2)]),
    # GPT.generate: given code in the course's starter, but a student may rewrite it (the KV cache)
    KnownBug('generate-top-k-ignored', 'generate samples from every token: top_k does not crop the logits '
                                          'to the k largest before sampling',
                [(TOP_K, "", 1)]),
    KnownBug('generate-crop-first-block', 'past block_size, generate feeds the FIRST block_size tokens; the model '
                                             'must see the last ones (idx[:, -block_size:])',
                [(CROP, CROP.replace("idx[:, -self.block_size:]", "idx[:, :self.block_size]"), 1)]),
]

BY_ID = {f.id: f for f in KNOWN_BUGS}


PatchError = source_patches.PatchError


def apply(known_bug, source):
    return source_patches.apply(source, known_bug.patches, 'known bug %s' % known_bug.id)
