"""
Staff pictures: the student's training loss over the reference band. The band is the
min..max of the reference seeds' losses at each iteration (fixtures/<profile>/expected.npz),
the curve is what the loss-curve probe recorded for the student's seed (results.json
extra_data.loss_curve). The box over the last `window` iterations is what test 10.1 judges:
the mean of those iterations must lie in [min, max] of the reference seeds' means +- atol.

matplotlib is an optional staff extra: it is imported here, lazily, and never by grading.
Without it a single line says how to install it and nothing else happens.
"""

import os

import numpy as np

MISSING = 'loss-curve PNG skipped: matplotlib is not installed (pip install matplotlib)'


def reference_band(profile, grading=None):
    """(reference curves as a 2-D array seeds x iterations, window, (lo, hi) of the judged final mean)."""
    from autograder import config, fixtures
    from autograder.checks.training import final_loss
    grading = grading or config.load()
    fx = fixtures.load(grading, profile, check=False)
    lc = grading.profiles[profile]['loss_curve']
    refs = {k: v for k, v in fx.probe('loss-curve').items() if '/' not in k}   # the curves, not the held-out logits
    curves = np.stack([refs[k] for k in sorted(refs)])
    atol = grading.test('loss-curve').tolerance.atol
    finals = [final_loss(c, lc['window']) for c in curves]
    return curves, lc['window'], (min(finals) - atol, max(finals) + atol)


def draw(path, losses, curves, window, band, title=''):
    """Write the PNG. Returns True, or False (with one printed line) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print(MISSING)
        return False
    iters = np.arange(1, curves.shape[1] + 1)
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=100)
    ax.fill_between(iters, curves.min(axis=0), curves.max(axis=0), color='tab:blue', alpha=0.25, linewidth=0,
                    label='reference band (%d seeds, min..max)' % curves.shape[0])
    ax.plot(iters, curves.mean(axis=0), color='tab:blue', linewidth=1, linestyle='--', label='reference mean')
    lo, hi = band
    x0 = curves.shape[1] - window + 0.5
    ax.add_patch(plt.Rectangle((x0, lo), window, hi - lo, fill=False, edgecolor='tab:green', linewidth=1.5,
                               label='accepted final mean (last %d iterations)' % window))
    verdict = 'no loss curve recorded'
    finite = list(curves[np.isfinite(curves)])
    if losses is not None and len(losses):
        y = np.array([np.nan if v is None else v for v in losses], dtype=float)
        ax.plot(np.arange(1, len(y) + 1), y, color='tab:orange', linewidth=1.5, label='submission')
        finite += list(y[np.isfinite(y)])  # a curve far outside the band must stay in view
        tail = y[-window:]
        if np.all(np.isfinite(tail)):
            final = float(tail.mean())
            ax.hlines(final, x0, x0 + window, color='tab:red', linewidth=2, label='submission final mean %.3f' % final)
            verdict = 'final %.3f %s [%.3f, %.3f]' % (final, 'inside' if lo <= final <= hi else 'OUTSIDE', lo, hi)
        else:
            verdict = 'loss became non-finite'
    ax.set_ylim(max(0.0, min(finite) - 0.3), max(finite) + 0.3)
    ax.set_xlabel('iteration')
    ax.set_ylabel('training loss (nats)')
    ax.set_title('%s%s' % (title + ': ' if title else '', verdict), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc='upper right')
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return True


def loss_curve_png(results, path, profile='cpu', title='', grading=None):
    """Draw the PNG for one graded submission (a results.json dict). Never raises; returns True if written."""
    try:
        curves, window, band = reference_band(profile, grading)
        losses = (results.get('extra_data') or {}).get('loss_curve')
        ok = draw(path, losses, curves, window, band, title)
        if ok:
            print('loss curve written to %s' % path)
        return ok
    except Exception as e:  # a picture must never cost a grade
        print('loss-curve PNG skipped: %s: %s' % (type(e).__name__, e))
        return False
