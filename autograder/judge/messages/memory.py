"""
The words of the memory tests (areas/memory.py): the attention's memory figure, and banded_attention's
values and memory at a long sequence. A sentence that names another test takes its number from its caller.
"""

# ----------------------------------------------------------------------------- memory (9.1)

MEMORY_VIEW = ('on the grader the attention runs in a CUDA view for this test (tensors say is_cuda '
               'and device cuda:0, torch.cuda.is_available() is True), so the code your guard runs '
               'on a GPU runs here')


def floor_output(B, nh, T, hs):
    """What 9.1's floor is when it is the attention output."""
    return 'the attention output y (one float32 (%d, %d, %d, %d) tensor)' % (B, nh, T, hs)


def floor_heads(n_kv_head, nh):
    return 'all %d heads' % nh if n_kv_head == nh else '%d of the %d heads' % (n_kv_head, nh)


def floor_weights(heads, B, nh, T):
    """What 9.1's floor is when it is the attention weights (`heads` from floor_heads)."""
    return ('%s of the attention weights, a float32 (B, n_query_head, T, T) = '
            '(%d, %d, %d, %d) tensor that autograd keeps for backward' % (heads, B, nh, T, T))


def memory_case_error(line, raised):
    """A measured call that raised: its case error line, with why it ran on a CUDA view."""
    return 'FAIL %s%s' % (line, ' (%s)' % MEMORY_VIEW if raised else '')


def memory_no_figure(label):
    return 'FAIL %s: the probe recorded no memory figure' % label


def memory_call(ok, label, sentence):
    """A judged call: memory_rules' sentence (contract/memory_rules.py words it, as the handout's
    check does)."""
    return '%s %s: %s' % ('ok  ' if ok else 'FAIL', label, sentence)


def memory_figures(passed, total):
    return '%d of %d memory figures are measurements of the attention.' % (passed, total)
BANDED = 'banded_attention'


def window_size(n, window):
    return 'N=%d, window %d' % (n, window)


def not_implemented_optional(line):
    return 'not implemented (optional): ' + line


def banded_out_of_memory(size, margin_mb, matrix_mb):
    return ('FAIL banded_attention ran out of memory at %s: it may use %d MB more than the process '
            'held before, and one N x N float32 matrix alone is %d MB. Compute only the band '
            '(scores of each query with its w//2 + 1 keys): never an N x N tensor, whether '
            'scores, mask or weights.' % (size, margin_mb, matrix_mb))


def banded_shape(size, returned, expected):
    """`returned`: banded_returned(...)."""
    return 'FAIL banded_attention at %s returned %s, expected shape %s' % (size, returned, expected)


def banded_returned(shape):
    return 'nothing' if shape is None else 'shape %s' % (shape,)


def banded_differs(size, bad, checked, index, query, expected, got, tolerance, number):
    """`tolerance`: (atol, rtol); `number`: the test of banded_attention's values at the profile's size (11.1)."""
    figures = (size, bad, checked) + tuple(index) + (query, expected, got) + tuple(tolerance) + (number,)
    return ('FAIL banded_attention at %s differs from the windowed attention at %d of the %d '
            'queries checked; worst at [%d, %d, %d, %d] (query %d): expected %.6g, got %.6g '
            '(allowed %.1g + %.1g*|expected|); see test %s' % figures)


def banded_ok(size, rows, margin_mb, matrix_mb):
    return ('ok   banded_attention at %s matches the reference at %d queries the grader picked, '
            'within %d MB of memory (one N x N float32 '
            'matrix would need %d MB)' % (size, rows, margin_mb, matrix_mb))
