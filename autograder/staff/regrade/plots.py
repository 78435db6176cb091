"""
`python -m autograder plot RESULTS_JSON PNG [--profile cpu|gpu]`, and batch --png: staff
pictures of test 10.1, drawn from what the harness grades (autograder/judge/areas/training.py):
the held-out loss, the cross-entropy the grader computes from the trained model's logits on
held-out text, against the band [reference - atol, reference + atol], where the reference is
the same computation on the reference's logits after training from the same start at the
student's seed and atol is 10.1's tolerance in grading.yaml (both read at run time, never
copied). That is the right-hand panel and the title.

The left-hand panel is context only: the training loss the student's process reported
(results.json extra_data.loss_curve; never graded) over the reference seeds' curves
(fixtures), min..max shaded.

matplotlib is an optional staff extra: it is imported here, lazily, and never by grading.
Without it a single line says how to install it and nothing else happens.
"""

import argparse
import json
import os
import re

import numpy as np

MISSING = 'loss-curve PNG skipped: matplotlib is not installed (pip install matplotlib)'
# the harness's wording for the number it grades ("held-out loss 2.509 (computed by the grader ..."); a test
# holds this pattern to judge_loss_curve's output
HELDOUT = re.compile(r'held-out loss (-?\d+\.\d+|nan|inf)')


def heldout_band(profile_name, grading=None):
    """(reference held-out loss, lo, hi): exactly what judge_loss_curve accepts, from the fixtures and grading.yaml."""
    from autograder.judge import config, fixtures
    from autograder.judge.areas.training import cross_entropy, heldout_targets
    grading = grading or config.load()
    fx = fixtures.load(grading, profile_name, check=False)
    lc = grading.profiles[profile_name].loss_curve
    logits = fx.probe('loss-curve')['seed%d/heldout_logits' % lc.student_seed]
    expected = cross_entropy(logits, heldout_targets(profile_name, grading, fx.shared_seed))
    atol = grading.test('loss-curve').tolerance.atol
    return expected, expected - atol, expected + atol


def reference_curves(profile_name, grading=None):
    """The reference seeds' training curves (seeds x iterations), for context."""
    from autograder.judge import config, fixtures
    grading = grading or config.load()
    curves = fixtures.load(grading, profile_name, check=False).probe('loss-curve')
    refs = {k: v for k, v in curves.items() if '/' not in k}
    return np.stack([refs[k] for k in sorted(refs)])


def graded_heldout_loss(results):
    """The held-out loss 10.1 graded, as its output states it (results.json dict), or None."""
    for t in results.get('tests', []):
        if (t.get('extra_data') or {}).get('id') == 'loss-curve' or str(t.get('number')) == '10.1':
            m = HELDOUT.search(t.get('output', '')) or HELDOUT.search(results.get('output', ''))
            return float(m.group(1)) if m else None
    return None


def draw(path, losses, curves, band, heldout=None, title=''):
    """Write the PNG. Returns True, or False (with one printed line) when matplotlib is missing."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print(MISSING)
        return False
    fig = figure(plt, losses, curves, band, heldout, title)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, bbox_inches='tight')   # the legends sit below the panels: keep them in the picture
    plt.close(fig)
    return True


def figure(plt, losses, curves, band, heldout=None, title=''):
    """The two panels (a matplotlib Figure). Each legend sits below its panel, so it hides no point of it."""
    expected, lo, hi = band
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.5), dpi=100, gridspec_kw={'width_ratios': [3, 1]})
    iters = np.arange(1, curves.shape[1] + 1)
    left.fill_between(iters, curves.min(axis=0), curves.max(axis=0), color='tab:blue', alpha=0.25, linewidth=0,
                      label='reference seeds (%d, min..max)' % curves.shape[0])
    finite = list(curves[np.isfinite(curves)])
    if losses is not None and len(losses):
        y = np.array([np.nan if v is None else v for v in losses], dtype=float)
        left.plot(np.arange(1, len(y) + 1), y, color='tab:orange', linewidth=1.5, label='submission (as reported)')
        finite += list(y[np.isfinite(y)])   # a curve far outside must stay in view
    left.set_ylim(max(0.0, min(finite) - 0.3), max(finite) + 0.3)
    left.set_xlabel('iteration')
    left.set_ylabel('training loss (nats)')
    left.set_title('training loss the process reported: context, NOT graded', fontsize=9)
    left.grid(alpha=0.3)
    left.legend(fontsize=8, loc='upper center', bbox_to_anchor=(0.5, -0.14), ncol=2)

    right.axhspan(lo, hi, color='tab:green', alpha=0.25, label='10.1 band [%.3f, %.3f]' % (lo, hi))
    right.axhline(expected, color='tab:green', linestyle='--', linewidth=1, label='reference %.3f' % expected)
    if heldout is not None and np.isfinite(heldout):
        inside = lo <= heldout <= hi
        right.plot([0.5], [heldout], marker='o', markersize=9, color='tab:blue' if inside else 'tab:red',
                   linestyle='none', label='submission %.3f' % heldout)
        verdict = 'held-out loss %.3f %s [%.3f, %.3f]' % (heldout, 'inside' if inside else 'OUTSIDE', lo, hi)
        span = max(hi - lo, abs(heldout - expected)) * 1.3
    else:
        verdict = 'no held-out loss (the model did not train or its logits were unusable)'
        span = (hi - lo) * 1.3
    right.set_ylim(expected - span, expected + span)
    right.set_xlim(0, 1)
    right.set_xticks([])
    right.set_ylabel('held-out loss (nats), computed by the grader')
    right.set_title('what 10.1 grades', fontsize=9)
    right.legend(fontsize=7, loc='upper center', bbox_to_anchor=(0.5, -0.02))
    fig.suptitle('%s10.1: %s' % (title + ': ' if title else '', verdict), fontsize=10)
    fig.tight_layout()
    return fig


def loss_curve_png(results, path, profile_name='cpu', title='', grading=None):
    """Draw the PNG for one graded submission (a results.json dict). Never raises; returns True if written."""
    try:
        band = heldout_band(profile_name, grading)
        curves = reference_curves(profile_name, grading)
        losses = (results.get('extra_data') or {}).get('loss_curve')
        ok = draw(path, losses, curves, band, graded_heldout_loss(results), title)
        if ok:
            print('loss curve written to %s' % path)
        return ok
    except Exception as e:  # a picture must never cost a grade
        print('loss-curve PNG skipped: %s: %s' % (type(e).__name__, e))
        return False


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder plot', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('results', help="a results.json written by `grade` (default place: results/results.json)")
    ap.add_argument('png', help='the PNG to write')
    ap.add_argument('--profile', default='cpu', help='the profile it was graded with: cpu (default) or gpu')
    args = ap.parse_args(argv[1:])
    with open(args.results, encoding='utf-8') as f:
        results = json.load(f)
    return 0 if loss_curve_png(results, args.png, args.profile) else 1
