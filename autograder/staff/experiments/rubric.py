"""
The written part of the experiments report: the section 4 answer key (blanks and
complexities), the 5.3 answer, and one rubric note per question telling the TAs what a
correct answer shows, what variation to accept, and what usually signals a bug.
"""

# 4.2: (blank, answer, why), in the order of the handout's pseudocode; w' = w // 2 + 1
SECTION4_BLANKS = [
    ['(1a) shape of a', "`(w',)`, one score per token of the window, w' = w//2 + 1",
     'the window holds the current token and the w/2 before it (handout 4.1)'],
    ['(1b) init value of a', '`-inf`',
     'slots left unfilled (before the first token) must get weight e^-inf = 0 after the softmax; 0 would give them '
     'weight'],
    ['(2) loop range', "`range(0, w')`", "one local index per window slot, i = 0 .. w'-1"],
    ['(3) token_idx', "`j - w' + 1 + i`",
     "local slot i is token j-w'+1+i: slot 0 the oldest, slot w'-1 token j itself"],
    ['(4) bounds test', '`token_idx >= 0`',
     "token_idx <= j always holds (i <= w'-1), so only the start of the sequence can fall outside; "
     '`0 <= token_idx < N` is also right'],
    ['(5) score a_i', '`Q_j · K_token_idx / sqrt(d_k)`',
     'the scaled dot product of equation 1 for one (query, key) pair'],
    ['(6) accumulated term', '`a_i * V_token_idx`', "the softmax weight times that token's value row"],
]

SECTION4_COMPLEXITY = {
    '4.1': [
        '- **4.1.a time: O(N²)** (O(N² d_k) with d_k). QKᵀ multiplies (N × d_k)(d_k × N), the softmax and the '
        'mask touch N² entries and the product with V is (N × N)(N × d_k). The mask only sets entries to −∞; '
        'every one of the N² scores is still computed, so **w does not appear** (w only changes which entries are '
        'kept). An answer of O(N² + N w) or O(N² d_k) is right; O(N w) is not.',
        '- **4.1.b space: O(N²)**: the N × N score matrix (and the N × N mask M). Also independent of w.',
    ],
    '4.2': [
        "- **4.2.h space: O(N + w)** (O(N d_k + w) with d_k): the output X' is N × d_k and the score vector a holds "
        "w' = w/2 + 1 entries, reused for every j (the `del a`). The handout asks for both N and w, so O(N + w) or "
        'O(N d_k + w); an answer of O(w) that states it counts only the working memory beyond the output is '
        'defensible. O(N w) or O(N²) is wrong.',
        "- **4.2.i time: O(N w)** (O(N w d_k)): N queries × w' window slots × one d_k dot product, twice (scores and "
        'weighted sum), plus an O(w) softmax per query.',
    ],
}

SECTION5_3 = [
    "**Answer key.** The handout's `generate()` has a KV cache only behind its `use_kv_cache` argument, and "
    "chargpt.py calls it without, so **the default path has none**: each of the max_new_tokens steps crops the "
    'sequence to its last block_size tokens (`idx_cond`), runs the whole model on it and keeps only the logits '
    'of the last position (`logits[:, -1, :]`). The keys and values of every earlier token are recomputed at '
    'every step; the causal mask makes the last position attend to all of them, so attention costs O(T²) per '
    'generated token (O(T) with a cache).',
    '',
    'With `use_kv_cache=True` (the optional path): one `KVCache` per layer stores the keys and values already '
    'computed; after the first full forward each step feeds only the newest token (`idx[:, -1:]`), '
    '`KVCache.append` concatenates its key and value to the stored ones along the time axis, and the query '
    'attends to all of them. RoPE rotates the new query and key at their true position through `offset=past`. '
    'When the context would outgrow block_size the caches are rebuilt from the cropped window.',
    '',
    '**Rubric (5.3).** Accept "no" with a correct account of the recomputation (full forward of the cropped '
    'context every step, only the last logits used), or "yes, optionally" naming the cache, the single-token '
    'feed and the concatenation. A bare "yes" pointing at the loop, or "the model caches because of the causal '
    'mask", is wrong.',
]

NOTES = {
    '4': "4.1: O(N²) for both time and space, with a reason (N × N scores; the mask does not skip work). "
         "4.2: each blank can be phrased differently but must execute to the dense result: the "
         "common wrong answers above show which slips change X' (initialising a with 0, a window of w instead of "
         "w/2+1 tokens, a window that looks ahead) and which are equivalent (iterating the window backwards). "
         "4.2.h/i must be linear in N and in w (O(N + w) space, O(N w) time); an answer in N² means the student "
         "still forms the full score matrix.",
    '5.1': "Any sample conditioned on the first line of a play other than chargpt's default \"O God, O God!\", "
           "with max_new_tokens left at 500. After 600 iterations at block 16 expect Shakespeare-like formatting "
           "(speaker names in capitals or followed by a period, line breaks, mostly real short words) but little "
           "sense. Signals a bug: random characters or one character repeated (RoPE broken, or the model did "
           "not train), or text identical to the corpus for hundreds of characters.",
    '5.2': "Same conditions; after 600 more iterations at block 256 the sample should look at least as good as "
           "5.1 (more real words, more consistent speaker/line structure). Signals a bug: a sample much worse "
           "than 5.1, which points at the second phase (model not loaded from --model.pretrained_folder, or "
           "RoPE positions wrong beyond 16 so the long context hurts).",
    '5.4': "Both curves on one plot over 1200 iterations, with the switch to block 256 at iteration 600. "
           "Expected: the curves fall together during the first 600 iterations (RoPE often a little lower); at "
           "the switch vanilla's loss jumps up, because its position table has never trained rows 16..255, "
           "while RoPE's barely moves (relative positions carry over), and RoPE stays below vanilla for the rest "
           "of training. Signals a bug: RoPE's curve above vanilla's after the switch or with a bigger jump "
           "(positions counted wrongly, a cos/sin cache not rebuilt for the longer block, rotating the wrong "
           "halves), RoPE clearly worse in the first 600 iterations, a curve restarting near 4.2 at iteration "
           "600 (the pretrained folder was not loaded), or only 600 points.",
    '5.5': "A plot of average attention time (ms) against n_kv_head ∈ {1, 2, 3, 6} at block 16, 200 iterations. "
           "At this size attention is tiny and timings are dominated by launch/Python overhead, so accept a flat "
           "or gently decreasing trend toward fewer KV heads, with any honest explanation (smaller K/V "
           "projections vs. the cost of repeating K/V across the group). Signals a bug: time growing steeply as "
           "n_kv_head falls (e.g. a Python loop over query heads or groups), missing points, or times in "
           "seconds labelled ms. n_kv_head=6 runs the plain CausalSelfAttention.",
    '5.6': "Both curves on one plot over 200 iterations at block 16. Expected: nearly on top of each other; GQA "
           "with 2 KV heads equal or slightly higher (fewer K/V parameters), within the seed spread shown "
           "above. Signals a bug: GQA far above MHA or not decreasing (K/V heads paired with the wrong query "
           "heads, softmax over the wrong dimension, a mask not applied), or GQA far below MHA (information "
           "leaking from the future).",
    '5.7': "Four curves on one plot, 600 + 600 iterations. Expected: the two RoPE configurations below the two "
           "absolute-position ones after the switch to block 256, each GQA curve close to its multi-head "
           "counterpart (RoPE+GQA near RoPE, GQA near vanilla). Signals a bug: the same patterns as 5.4 and 5.6; "
           "in particular RoPE+GQA well above RoPE means RoPE is not applied (or wrongly) inside "
           "GroupedQueryAttention.",
}
