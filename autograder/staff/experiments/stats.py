"""
Numbers of the experiments report, from the run folders: loss curves per configuration and
seed, attention times, and the small pure helpers that turn them into the report's tables
(final loss, spread across seeds, how many seeds show the expected ordering, log-log slopes).
"""

import math
import statistics

from autograder.staff.experiments.runs import read_logs, seconds_per_iteration


def moving_average(values, width):
    """Trailing mean over up to `width` values: same length as `values`, no look-ahead."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= width:
            total -= values[i - width]
        out.append(total / min(i + 1, width))
    return out


def window_mean(losses, end, width):
    """Mean loss of iterations end-width+1 .. end (1-based, as the handout counts iterations)."""
    chunk = losses[max(0, end - width):end]
    return sum(chunk) / len(chunk)


def spread(values):
    """mean, std (sample, 0 for one value), min, max and n of one number per seed."""
    values = list(values)
    return {'mean': statistics.fmean(values), 'std': statistics.stdev(values) if len(values) > 1 else 0.0,
            'min': min(values), 'max': max(values), 'n': len(values)}


def format_spread(s, digits=3):
    if s['n'] == 1:
        return '%.*f (1 seed)' % (digits, s['mean'])
    return '%.*f ± %.*f (%.*f–%.*f)' % (digits, s['mean'], digits, s['std'], digits, s['min'], digits, s['max'])


def count_below(a, b):
    """How many seeds have a[seed] < b[seed], out of the seeds both have: (count, n)."""
    seeds = sorted(set(a) & set(b))
    return sum(1 for s in seeds if a[s] < b[s]), len(seeds)


def loglog_slope(xs, ys):
    """Least-squares slope of log(y) against log(x): the exponent p of y ~ x^p."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-12)) for y in ys]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def collect(plan, runs_dir):
    """
    {'curves': {config: {seed: losses of both phases}}, 'gqa': {kv: {seed: losses}},
     'attn_ms': {kv: {seed: mean attention ms per iteration}}, 'iter_seconds': {block: median s/iter}}
    """
    curves, gqa, attn_ms, iter_seconds = {}, {}, {}, {}
    for (name, seed), (short, long) in plan.phases.items():
        logs = [read_logs(run.folder(runs_dir)) for run in (short, long)]
        curves.setdefault(name, {})[seed] = logs[0]['train_losses'] + logs[1]['train_losses']
    for (kv, seed), run in plan.gqa.items():
        logs = read_logs(run.folder(runs_dir))
        gqa.setdefault(kv, {})[seed] = logs['train_losses']
        # the handout's "average time taken to compute attention per iteration": the trainer
        # logs, per iteration, the attention seconds averaged over the layers
        attn_ms.setdefault(kv, {})[seed] = 1000 * statistics.fmean(logs['attn_times'])
    for run in plan.runs:
        dt = seconds_per_iteration(run.folder(runs_dir))
        if dt is not None:
            iter_seconds.setdefault(run.block_size, []).append(dt)
    return {'curves': curves, 'gqa': gqa, 'attn_ms': attn_ms,
            'iter_seconds': {b: statistics.median(v) for b, v in sorted(iter_seconds.items())}}


def phase_numbers(curves, short_iters, window):
    """
    Per configuration and seed: loss at the end of phase 1, loss just after the switch to the
    long block (first `window` iterations of phase 2), and at the end.
    """
    out = {}
    for name, by_seed in curves.items():
        end1 = {s: window_mean(c, short_iters, window) for s, c in by_seed.items()}
        after = {s: window_mean(c, min(len(c), short_iters + window), window) for s, c in by_seed.items()}
        final = {s: window_mean(c, len(c), window) for s, c in by_seed.items()}
        out[name] = {'end_short': end1, 'after_switch': after, 'final': final,
                     'jump': {s: after[s] - end1[s] for s in by_seed}}
    return out
