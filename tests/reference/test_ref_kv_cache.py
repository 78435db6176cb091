"""
KV-cache generation of the reference: GPT.generate(..., use_kv_cache=True) gives exactly
the tokens of the uncached loop (greedy), for vanilla, RoPE, GQA and RoPE+GQA+sliding
window, also once generation runs past block_size, and it really feeds one token per step.
"""

import pytest
import torch

from mingpt.model import GPT
from ref_formulas import attention_config, fan_in_init_

VARIANTS = {
    'vanilla': dict(),
    'rope': dict(rope=True),
    'gqa': dict(n_kv_head=2),
    'rope+gqa+window': dict(rope=True, n_kv_head=3, sliding_window=6),
    'rope+mqa+window': dict(rope=True, n_kv_head=1, sliding_window=4),
}


@pytest.mark.parametrize("name", VARIANTS)
@pytest.mark.parametrize("new_tokens", [9, 30])  # 3 + 9 = block_size exactly; 3 + 30 runs past it
def test_cached_tokens_equal_uncached(name, new_tokens):
    model = GPT(attention_config(block_size=12, **VARIANTS[name]))
    # fan-in weights give peaked logits, so greedy choices are far from float32 ties
    fan_in_init_(model, seed=50).eval()
    prompt = torch.randint(0, 65, (2, 3), generator=torch.Generator().manual_seed(51))
    plain, _ = model.generate(prompt, new_tokens, do_sample=False)
    cached, _ = model.generate(prompt, new_tokens, do_sample=False, use_kv_cache=True)
    assert plain.shape == (2, 3 + new_tokens)
    assert torch.equal(cached, plain), "KV cache changed the tokens:\n%s\n%s" % (cached, plain)
    assert len(set(plain[0, 3:].tolist())) > 1, "a constant sequence would make this check weak"


def test_cache_feeds_one_token_per_step():
    model = fan_in_init_(GPT(attention_config(block_size=32, rope=True, n_kv_head=2)), seed=52).eval()
    lengths = []
    model.register_forward_pre_hook(lambda m, args, kwargs: lengths.append(args[0].size(1)), with_kwargs=True)
    model.generate(torch.zeros(1, 5, dtype=torch.long), 6, do_sample=False, use_kv_cache=True)
    assert lengths == [5, 1, 1, 1, 1, 1], "prompt once, then one new token per step: %s" % lengths
