"""
The words of the values tests (areas/values.py: RoPE, its cache, the attention modules, the GPT's logits).
"""

from autograder.judge.messages.common import DETAIL, FAIL, OK


# ------------------------------------------------------------------------- values (2.1-5.1, 8.1)

def cases_match(passed, total):
    return '%d of %d cases match the reference.' % (passed, total)


def output_differs(key, desc):
    return '%s: %s' % (key, desc)


def case_ok(case):
    return OK + case


def case_failed(details):
    """A failed case: its outputs' descriptions, one per line."""
    return FAIL + ('\n' + DETAIL).join(details)


def hint(text):
    return DETAIL + 'hint: ' + text


def rope_cache_dtype(input_dtype, output_dtype):
    return ('output dtype %s for a %s input: the cos/sin cache must be rebuilt (or cast) '
            'when another dtype or device arrives' % (output_dtype, input_dtype))


ROPE_CACHE_LONGER = ('the first call (T=8) is right and this longer one is not: a longer T than '
                     'the first call needs a longer cache')
WPE_WITH_ROPE = ('Note: with rope=True your GPT still has transformer.wpe; RoPE replaces the '
                 'absolute position embedding, so wpe must exist only when rope=False.')
