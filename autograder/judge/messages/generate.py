"""
The words of generation and of the optional KV cache (areas/generate.py). A sentence that names another
test takes its number from its caller (grading.yaml's `number`, by id).
"""

# ----------------------------------------------------------------------------- generation (8.2)

GENERATE_CASES = (('greedy', 'greedy decoding'), ('top_k=1', 'do_sample=True, top_k=1 at seed 0'),
                  ('top_k=5', 'do_sample=True, top_k=5 at seed 0'),
                  ('greedy_past_block', 'greedy decoding past block_size'))


def first_token_difference(b, t, expected, got, expected_ids, got_ids):
    """Where two token arrays first differ; the ids from there on formatted ('[3, 4, ...]')."""
    return ('first at batch %d, position %d (expected %d, got %d): from there, expected %s, '
            'got %s' % (b, t, expected, got, expected_ids, got_ids))


NO_TOKENS = 'no tokens returned'


def tokens_shape(got, expected):
    return 'returned shape %s, expected %s (batch, prompt + new tokens)' % (got, expected)


def tokens_dtype(dtype):
    return 'returned %s values, expected integer token ids' % dtype


def tokens_ok(what, new):
    return 'ok   %s: the %d new tokens are the reference\'s' % (what, new)


def tokens_differ(what, where):
    return 'FAIL %s: tokens differ from the reference\'s %s' % (what, where)


def token_row_where(b, t):
    """The 'where' cell of generation's table row."""
    return 'batch %d, token %d' % (b, t)


TOKEN_IDS = 'token ids'


def generate_past_block(block):
    return ('; they match until the sequence outgrows block_size=%d: from then on the model must '
            'be fed the last block_size tokens (idx[:, -block_size:])' % block)


def generate_logits_differ(label, number):
    """`number`: the test of the model's logits (8.1)."""
    return ('Generation runs the %s model, whose logits differ from the reference\'s in test %s: '
            'with other logits it generates other tokens.' % (label, number))


def generation_checks(passed, total):
    return '%d of %d generation checks pass.' % (passed, total)


# ----------------------------------------------------------------------------- KV cache (12.1)

def kv_lengths_wrong(label, prompt_len, got, expected):
    return ('FAIL %s: KVCache.length of each layer after the prompt of %d tokens, then after one '
            'more token, is %s; expected %s' % (label, prompt_len, got, expected))


NONE = 'none'


def kv_step_ok(label, prompt_len):
    return ('ok   %s: with empty caches the prompt\'s logits, then one more token fed alone, match '
            'the reference; KVCache.length is %d, then %d' % (label, prompt_len, prompt_len + 1))


def kv_prefill_wrong(label, desc):
    return ('FAIL %s: GPT.forward(prompt, kv_caches=empty caches): the logits differ from the '
            'reference\'s (%s)' % (label, desc))


def kv_step_wrong(label, desc, prompt_len):
    return ('FAIL %s: the prompt\'s logits match, but those of the next token fed alone with the '
            'filled caches do not (%s): that token sits at position %d = KVCache.length and '
            'attends to all %d cached keys'
            % (label, desc, prompt_len, prompt_len + 1))


def kv_generate_problem(label, problem):
    return 'FAIL %s: generate(use_kv_cache=True): %s' % (label, problem)


def kv_cache_unused(label):
    return ('FAIL %s: generate(use_kv_cache=True) does not use the cache: with every value handed '
            'to KVCache.append negated it gives the same tokens as without that change' % label)


KV_PLAIN_RIGHT = 'its tokens without the change are the reference\'s'


def kv_plain_wrong(where):
    return 'without the change they differ too (%s)' % where


def kv_altered_wrong(label, where, cached):
    return ('FAIL %s: with every value handed to KVCache.append negated, '
            'generate(use_kv_cache=True) gives other tokens than the reference under the same '
            'change (%s); %s: at each step the attention must use all the keys and values the '
            'cache holds, the new token\'s included, as append returns '
            'them' % (label, where, cached))


def kv_long_problem(label, problem):
    return 'FAIL %s: generate(use_kv_cache=True) past block_size: %s' % (label, problem)


def kv_past_block(block):
    return ('; they match until the sequence outgrows block_size=%d: from then on the tokens must '
            'still be those of generation without a cache' % block)


def kv_long_wrong(label, where, late):
    return ('FAIL %s: generate(use_kv_cache=True) past block_size: tokens differ from the '
            'reference\'s (its tokens without a cache) %s%s' % (label, where, late))


def kv_generate_ok(label, tokens):
    return ('ok   %s: generate(use_kv_cache=True) uses the cache (the reference\'s tokens when the '
            'cached values are negated) and gives the reference\'s %d tokens '
            'past block_size' % (label, tokens))


KV_NONE_JUDGED = 'no configuration of this test could be judged'


def kv_step_case(label):
    return '%s: one cached step' % label


def kv_generate_case(label):
    return '%s: generate(use_kv_cache=True)' % label


KV_NOT_IMPLEMENTED = ('not implemented (optional): no KVCache or no kv_caches argument, and '
                      'generate does not use a cache.')


def kv_checks(passed, total):
    return '%d of %d KV-cache checks pass.' % (passed, total)
