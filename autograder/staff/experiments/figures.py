"""
Figures of the experiments report, one PNG per question, drawn the way the handout asks
(same axes, all configurations of a question on one plot) with the seeds as a shaded band.

matplotlib is an optional staff extra (requirements-staff.txt), imported lazily: without it
available() says why and the report is written without figures.
"""

import os

from autograder.staff.experiments.stats import moving_average

COLORS = {'vanilla': 'tab:blue', 'RoPE': 'tab:orange', 'GQA': 'tab:green', 'RoPE+GQA': 'tab:red',
          'MHA': 'tab:blue', 'dense': 'tab:blue', 'banded': 'tab:orange'}


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None when matplotlib is not installed."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def available():
    return pyplot() is not None


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    fig.clf()
    pyplot().close(fig)
    return os.path.basename(path)


def loss_plot(path, curves, smooth, title, switch=None, blocks=None):
    """
    curves: {label: {seed: losses}}. Each seed's curve is smoothed by a trailing moving
    average, then the band is min..max across seeds and the line their mean.
    """
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for index, (label, by_seed) in enumerate(curves.items()):
        smoothed = [moving_average(c, smooth) for c in by_seed.values()]
        n = min(len(c) for c in smoothed)
        iters = range(1, n + 1)
        lo = [min(c[i] for c in smoothed) for i in range(n)]
        hi = [max(c[i] for c in smoothed) for i in range(n)]
        mean = [sum(c[i] for c in smoothed) / len(smoothed) for i in range(n)]
        # band and line of one label share a colour; GQA dashed, as it often lies on its MHA twin
        color = COLORS.get(label.split(' ')[0], 'C%d' % index)
        style = '--' if 'GQA' in label else '-'
        ax.fill_between(iters, lo, hi, color=color, alpha=0.25, linewidth=0)
        ax.plot(iters, mean, color=color, linestyle=style, linewidth=1.3,
                label='%s (%d seed%s)' % (label, len(smoothed), 's' if len(smoothed) > 1 else ''))
    if switch is not None:
        ax.axvline(switch + 0.5, color='gray', linestyle='--', linewidth=1)
        ax.text(switch + 0.5, ax.get_ylim()[0], ' block %d → %d' % blocks, va='bottom', ha='left', fontsize=8,
                color='gray')  # at the bottom: the legend sits top right
    ax.set_xlabel('iteration')
    ax.set_ylabel('training loss (nats), %d-iteration moving average' % smooth)
    ax.set_title(title + '\nline: mean of seeds, band: min–max of seeds', fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc='upper right')
    return _save(fig, path)


def attention_time_plot(path, attn_ms, title):
    """attn_ms: {n_kv_head: {seed: ms}}: every seed as a dot, the mean as a line."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    kvs = sorted(attn_ms)
    means = [sum(attn_ms[k].values()) / len(attn_ms[k]) for k in kvs]
    for k in kvs:
        ax.scatter([k] * len(attn_ms[k]), list(attn_ms[k].values()), color='tab:blue', alpha=0.5, s=18)
    ax.plot(kvs, means, color='tab:blue', marker='o', label='mean of %d seed(s) (dots: each seed)'
            % len(attn_ms[kvs[0]]))
    ax.set_xticks(kvs)
    ax.set_xlabel('n_kv_head (6 query heads; 6 = multi-head attention)')
    ax.set_ylabel('attention time per iteration (ms)')
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def scaling_plot(path, scaling, fixed_w, fixed_N):
    """2 x 2 log-log panels: time and peak memory of dense and banded, against N and against w."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(9, 7))
    for col, (key, x, xlabel) in enumerate((('vs_N', 'N', 'sequence length N (w = %d)' % fixed_w),
                                             ('vs_w', 'w', 'window w (N = %d)' % fixed_N))):
        rows = scaling[key]
        xs = [r[x] for r in rows]
        for row, (suffix, ylabel, scale) in enumerate((('_seconds', 'CPU time (ms, one thread)', 1e3),
                                                        ('_bytes', 'peak memory (MiB, AttentionMemory)', 2 ** -20))):
            ax = axes[row][col]
            for form in ('dense', 'banded'):
                ax.plot(xs, [r[form + suffix] * scale for r in rows], marker='o', color=COLORS[form], label=form)
            ax.set_xscale('log', base=2)
            ax.set_yscale('log')
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3, which='both')
            ax.legend(fontsize=8)
    fig.suptitle('Questions 4.1 / 4.2: sliding-window attention, dense masked product (eq. 1) vs banded', fontsize=10)
    return _save(fig, path)
