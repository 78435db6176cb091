"""
What a regeneration changed in the fixtures, judged against what the grader accepts, so that
`regenerate` rewrites autograder/fixtures/<profile>/ only when a change matters.

Each float array belongs to one graded test (its key's first part); its change is measured in
units of that test's own tolerance, elementwise |new - old| / (atol + rtol * |old|), the same
bound the judge applies to a submission. A change is NOISE below NOISE_FLOOR of that unit:

NOISE_FLOOR = 0.25: the reference's float32 outputs move by a few ulps between runs on different
CPUs (oneDNN/MKL pick other kernels for AVX2 and AVX-512); on one machine two runs are
bit-identical (the .npz bytes too: numpy stamps its zip members 1980-01-01). Measured between
the committed fixtures (made on another host) and this 2-core AMD EPYC: at most 0.046 of the
tolerance on the reference's outputs (gqa-rope, ~1e-6 on values of size ~1), 0.098 on a known
bug's (gqa-group-sum, larger values), 0.0003 for held-out logits: the floor sits 2.5x above the
largest. Correct styles of the corpus differ from the reference by a few hundredths of the
tolerance (3.1: ~2e-6 against ~1.1e-4 at |x| ~ 1), so a reference moved by less than 0.25 leaves
each of them at least 0.7 of its margin, and brings no known bug, hundreds of tolerances away
(printed for each change that matters), measurably nearer.

Integers (tokens, byte counts, cache lengths) are exact: any change matters. Floats of a test
without a tolerance (generate's logits, against which nothing is compared: the judge uses the
submission's own) fall under an absolute floor of NO_TOLERANCE_FLOOR. Test 10.1 judges a number
derived from its arrays, the held-out loss computed from the reference's logits: that loss is
compared with 10.1's atol instead of the logits themselves.
"""

from dataclasses import dataclass, field
from typing import List

import numpy as np

NOISE_FLOOR = 0.25
NO_TOLERANCE_FLOOR = 1e-4   # absolute: 8.1's atol for the same model's logits; host noise measured 1.0e-6 there


@dataclass
class Changes:
    matters: List[str] = field(default_factory=list)   # one line per change a grade could feel
    noise: int = 0                                      # arrays that moved, all below the floor
    worst_noise: float = 0.0                            # the largest of those, in units of its tolerance
    worst_key: str = ''

    def lines(self):
        out = list(self.matters) if self.matters else ['no change that matters']
        if self.noise:
            out.append('%d array(s) moved by less than the noise floor (%.2g of their test\'s tolerance; largest %.3g '
                       'at %s): float32 rounding, not a change' % (self.noise, NOISE_FLOOR, self.worst_noise,
                                                                     self.worst_key))
        return out


def _allowance(grading, key, old):
    test_id = key.split('::')[-1].split('/')[0]
    try:
        tol = grading.test(test_id).tolerance
    except (KeyError, ValueError):
        tol = None
    if tol is None:
        return None, '%s, which has no tolerance (unit: %g absolute)' % (test_id, NO_TOLERANCE_FLOOR)
    number = grading.test(test_id).number
    return tol.atol + tol.rtol * np.abs(old), '%s %s (atol %g + rtol %g |x|)' % (number, test_id, tol.atol, tol.rtol)


def _ratio(old, new, allowance):
    """max |new - old| in units of the allowance (or of NO_TOLERANCE_FLOOR when None)."""
    # positions that are NaN in both (11.2 keeps only the rows its judge compares, NaN elsewhere) never move
    d = np.nan_to_num(np.abs(new.astype(np.float64) - old.astype(np.float64)), nan=0.0)
    if allowance is None:
        return float(d.max()) / NO_TOLERANCE_FLOOR if d.size else 0.0
    return float(np.max(d / np.maximum(allowance, 1e-30))) if d.size else 0.0


def nearest_fingerprint(key, reference, fingerprints, allowance):
    """(fingerprint id, distance in tolerances) of the known bug nearest to the reference on this array."""
    best = None
    for fp, arrays in fingerprints.items():
        if key in arrays and arrays[key].shape == reference.shape:
            r = _ratio(reference, arrays[key], allowance)
            if best is None or r < best[1]:
                best = (fp, r)
    return best


def _heldout_loss(grading, profile, logits):
    from autograder.checks.training import cross_entropy, heldout_targets
    return cross_entropy(logits, heldout_targets(profile, grading))


def compare(old, new, old_fps, new_fps, grading, profile):
    """Changes between two sets of fixtures: expected {key: array}, fingerprints {fp: {key: array}}."""
    ch = Changes()
    flat_old = dict(old, **{'%s::%s' % (fp, k): v for fp, a in old_fps.items() for k, v in a.items()})
    flat_new = dict(new, **{'%s::%s' % (fp, k): v for fp, a in new_fps.items() for k, v in a.items()})
    atol_10_1 = grading.test('loss-curve').tolerance.atol if 'loss-curve' in {t.id for t in grading.tests} else None
    for key in sorted(set(flat_old) | set(flat_new)):
        a, b = flat_old.get(key), flat_new.get(key)
        if a is None or b is None:
            ch.matters.append('%s %s' % ('+' if a is None else '-', key) + (' (new)' if a is None else ' (removed)'))
            continue
        if a.shape != b.shape or a.dtype.kind != b.dtype.kind:
            ch.matters.append('~ %s: shape/dtype %s %s -> %s %s' % (key, a.shape, a.dtype, b.shape, b.dtype))
            continue
        if a.dtype.kind not in 'fc':
            if not np.array_equal(a, b):
                ch.matters.append('~ %s: %d of %d exact values changed (integers are judged exactly)'
                                  % (key, int(np.sum(a != b)), a.size))
            continue
        if np.array_equal(a, b, equal_nan=True):
            continue
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            ch.matters.append('~ %s: %d values became or stopped being NaN (the rows a judge compares moved?)'
                              % (key, int(np.sum(np.isnan(a) != np.isnan(b)))))
            continue
        if key.endswith('/heldout_logits') and '::' not in key and atol_10_1 is not None:
            la, lb = _heldout_loss(grading, profile, a), _heldout_loss(grading, profile, b)
            r = abs(lb - la) / atol_10_1
            line = ('~ %s: the reference\'s held-out loss %.6f -> %.6f, |change| %.2g = %.3g of 10.1\'s atol %g'
                    % (key, la, lb, abs(lb - la), r, atol_10_1))
        else:
            allowance, unit = _allowance(grading, key, a)
            r = _ratio(a, b, allowance)
            d = float(np.nanmax(np.abs(b.astype(np.float64) - a.astype(np.float64))))
            line = '~ %s: max |change| %.2g = %.3g of the tolerance of %s' % (key, d, r, unit)
            if '::' not in key:
                near = nearest_fingerprint(key, b, new_fps, allowance)
                if near:
                    line += '; nearest known bug %s at %.3g tolerances' % near
        if r >= NOISE_FLOOR:
            ch.matters.append(line)
        else:
            ch.noise += 1
            if r > ch.worst_noise:
                ch.worst_noise, ch.worst_key = r, key
    return ch
