"""
Judge of the loss curve: the student's model, trained with a fixed seed, must end inside
the band spanned by the reference's seeds. Too high fails, and so does too low: a model
that sees future tokens drives the training loss far below what a causal model can reach.
"""

import numpy as np

from autograder.checks import Verdict, case_error_line


def final_loss(losses, window):
    return float(np.mean(losses[-window:]))


def judge_loss_curve(test, result, fixtures, grading):
    lc = grading.profiles[fixtures.profile]['loss_curve']
    window, atol = lc['window'], test.tolerance.atol
    refs = [final_loss(v, window) for v in fixtures.probe('loss-curve').values()]
    lo, hi = min(refs) - atol, max(refs) + atol
    key = 'seed%d' % lc['student_seed']
    errors = result.info.get('case_errors', {})
    if key in errors:
        return Verdict(0.0, ['FAIL ' + case_error_line('training', errors[key])])
    losses = result.arrays.get(key)
    if losses is None or losses.ndim != 1 or len(losses) != lc['iters']:
        return Verdict(0.0, ['FAIL training recorded %s losses, expected %d'
                             % (None if losses is None else len(losses), lc['iters'])])
    if not np.all(np.isfinite(losses)):
        first = int(np.argmax(~np.isfinite(losses)))
        return Verdict(0.0, ['FAIL the training loss became %r at iteration %d' % (float(losses[first]), first)])
    final = final_loss(losses, window)
    summary = 'loss curve: start %.3f, final %.3f (mean of last %d of %d iterations), reference band [%.3f, %.3f]' % (
        float(losses[0]), final, window, len(losses), lo, hi)
    if final > hi:
        return Verdict(0.0, ['FAIL the final loss %.3f is above the reference band [%.3f, %.3f]: the model learns '
                             'worse than the reference' % (final, lo, hi)], summary)
    if final < lo:
        return Verdict(0.0, ['FAIL the final loss %.3f is below the reference band [%.3f, %.3f]: suspiciously low, '
                             'as when the model can see future tokens (check the causal mask)' % (final, lo, hi)], summary)
    return Verdict(1.0, ['ok   the final loss lies within the reference band'], summary)
