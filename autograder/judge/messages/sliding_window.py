"""
The words of sliding-window attention (areas/sliding_window.py).
"""

def window_ignored(keys):
    """Sliding-window cases that returned plain causal attention."""
    return ('Likely bug: %s returned plain causal attention: the window is '
            'ignored there.' % ', '.join(keys))


# ------------------------------------------------------------------ sliding window (11.1, 11.2)

SLIDING_NOT_IMPLEMENTED = ('not implemented (optional): banded_attention is missing or raises '
                           'NotImplementedError, and the attention modules ignore '
                           'config.sliding_window.')
