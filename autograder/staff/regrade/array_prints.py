"""
The print of a wrong array, shared by the class's behaviour (behaviour_prints.py) and the staff-only probe of
its shared inputs (shared_inputs.py): its shape, how many elements are wrong and a sample of them, at float32's
precision, never the whole array.
"""

import math

import numpy as np

SAMPLE = 48   # elements kept per wrong array: enough to tell two bugs apart, little enough for a class of 1,000


def number(x):
    """A JSON-safe number at float32's precision (NaN and infinities as strings)."""
    x = float(x)
    return float('%.7g' % x) if math.isfinite(x) else repr(x)


def wrong_mask(got, expected, tolerance):
    """Boolean mask over `got` of the elements the harness's bound calls wrong (NaN in the reference: not judged)."""
    if got.shape != expected.shape:
        return np.ones(got.shape, dtype=bool)
    if tolerance is None or got.dtype.kind in 'biu' or expected.dtype.kind in 'biu':
        return got != expected
    g, e = got.astype(np.float64), expected.astype(np.float64)
    judged = np.isfinite(e)
    close = np.abs(g - e) <= tolerance.atol + tolerance.rtol * np.abs(e)
    return judged & ~close


def array_print(got, expected, tolerance):
    """The print of one array, or None when nothing in it is wrong."""
    got = np.asarray(got)
    if got.dtype.kind not in 'biuf' or got.size == 0:
        return None
    wrong = np.flatnonzero(wrong_mask(got, expected, tolerance))
    if not wrong.size:
        return None
    picks = wrong[np.unique(np.linspace(0, wrong.size - 1, min(SAMPLE, wrong.size)).round().astype(int))]
    same_shape = got.shape == expected.shape
    return {'shape': list(got.shape), 'wrong': int(wrong.size), 'at': [int(i) for i in picks],
            'got': [number(v) for v in got.ravel()[picks]],
            'reference': [number(v) for v in expected.ravel()[picks]] if same_shape else None}
