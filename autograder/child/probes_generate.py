"""
Probes of GPT.generate (8.2) and of the optional KV cache (12.1), run inside the sandbox like
every probes*.py module: they record tokens and logits and judge nothing.

- generate: greedy tokens, and tokens sampled with top_k=1 and top_k=5 at torch.manual_seed(0),
  short and past block_size. The harness compares them with the reference's tokens; no logits of
  the student's model are recorded (they would be the student's own yardstick).
- kv-cache, per configuration: one cached step through the KVCache interface (the logits of the
  prompt and of one more token fed alone, and each cache's length after both); the greedy tokens
  of generate(use_kv_cache=True) past block_size; and a short cached generation twice, as is and
  with every value handed to KVCache.append negated. Only an attention that really uses what the
  cache holds gives the reference's tokens under that change; a generate that ignores
  use_kv_cache gives the same tokens both times.
"""

import contextlib

import numpy as np
import torch

from . import adapter
from autograder.contract.configs import GENERATE_NEW, KV_CACHE_CONFIGS


def _model_holder(ctx, label, kv, rope):
    holder = {}

    def model():
        if 'm' not in holder:
            holder['m'] = ctx.model(label, kv, rope)
        return holder['m']
    return model


def probe_generate(ctx):
    prompt = ctx.t('generate/prompt')
    model = _model_holder(ctx, 'rope-gqa', 3, True)
    long_new = 2 * ctx.profile['model']['block_size']   # the context must be cropped to its LAST block_size tokens

    def sampled(k):
        def compute():
            torch.manual_seed(0)   # the reference sampled from the same generator state
            return adapter.generate(model(), prompt, GENERATE_NEW, temperature=1.0, do_sample=True, top_k=k)
        return compute
    ctx.case('greedy', lambda: adapter.generate(model(), prompt, GENERATE_NEW))
    ctx.case('top_k=1', sampled(1))
    ctx.case('top_k=5', sampled(5))
    ctx.case('greedy_past_block', lambda: adapter.generate(model(), prompt, long_new))


# ----------------------------------------------------------------------------- KV cache (optional part)

def _cache_class():
    cls = getattr(adapter.model_module(), 'KVCache', None)
    if not isinstance(cls, type):
        raise adapter.report_schema.NotImplementedFact('no_kv_cache_class')
    return cls


def _unknown_keyword(e, name):
    """A TypeError saying that `name` is not an argument: the optional part is not there."""
    return isinstance(e, TypeError) and ("'%s'" % name) in str(e) and 'argument' in str(e)


def _forward_cached(model, idx, caches):
    try:
        out = model(idx, kv_caches=caches)
    except TypeError as e:
        if _unknown_keyword(e, 'kv_caches'):
            raise adapter.report_schema.NotImplementedFact('no_kv_caches_argument')
        raise
    logits = out[0] if isinstance(out, (tuple, list)) and out else out
    if not isinstance(logits, torch.Tensor):
        raise adapter.AdapterError('cached_forward_returned',
                                   type(out).__name__)
    return logits


def _generate_cached(model, prompt, n):
    try:
        return adapter.generate(model, prompt, n, use_kv_cache=True)
    except TypeError as e:
        if _unknown_keyword(e, 'use_kv_cache'):
            raise adapter.report_schema.NotImplementedFact('no_use_kv_cache_argument')
        raise


@contextlib.contextmanager
def _appended_values_negated(cls):
    """
    Within: cls.append is given the values negated (the keys as they are), so the cache holds -v
    wherever it keeps what it was given. Attention that uses the cache then computes -y at every
    cached step, whether it reads what append returns or the cache's own storage; attention that
    does not use the cache is unaffected. The reference under the same change is the yardstick.
    """
    own = cls.__dict__.get('append')
    original = cls.append

    def append(self, k, v):
        return original(self, k, -v)
    cls.append = append
    try:
        yield
    finally:
        if own is None:
            del cls.append
        else:
            cls.append = own


def probe_kv_cache(ctx):
    prompt, step = ctx.t('generate/prompt'), ctx.t('kv-cache/step')
    m = ctx.profile['model']
    long_new = 2 * m['block_size']
    for label, kv, rope in KV_CACHE_CONFIGS:
        model = _model_holder(ctx, label, kv, rope)

        def one_step(model=model):
            cls = _cache_class()
            caches = [cls() for _ in range(m['n_layer'])]
            with torch.no_grad():
                prefill = _forward_cached(model(), prompt, caches)
                after_prompt = [int(c.length) for c in caches]
                logits = _forward_cached(model(), step, caches)   # one token the model has not produced itself
                after_step = [int(c.length) for c in caches]
            return {'prefill': prefill, 'logits': logits, 'lengths': np.array([after_prompt, after_step], np.int64)}

        def uses_cache(model=model):
            _cache_class()   # no KVCache: the optional part is not there, whatever else fails
            plain = _generate_cached(model(), prompt, GENERATE_NEW)
            with _appended_values_negated(_cache_class()):
                altered = _generate_cached(model(), prompt, GENERATE_NEW)
            return {'plain': plain, 'altered': altered}

        ctx.case(label + '/step', one_step)
        ctx.case(label + '/generate', lambda m=model: _cache_class() and _generate_cached(m(), prompt, long_new))
        ctx.case(label + '/uses_cache', uses_cache)
