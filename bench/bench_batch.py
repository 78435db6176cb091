"""
Batch regrading throughput, run by hand (never by pytest):

    python bench/bench_batch.py                      # --jobs 1 and --jobs 2 on the synthetic export, once each
    python bench/bench_batch.py --jobs 1 2 4 --repeat 2 --copies 2

Each measurement regrades a fresh copy of the synthetic export of tests/helpers/synthetic_export.py
(5 submissions: reference, template, syntax error, RoPE-from-0 bug, zip upload; --copies K
repeats each of them K times) with `python -m autograder batch DIR --jobs N`, and reports
wall-clock seconds and submissions per minute. The job counts are interleaved round-robin
over the repeats so that a change in machine load hits all of them alike; the load average
is printed because on a shared machine it moves the numbers. Prints a markdown table.
"""

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time

from machine import cpu_model  # bench/machine.py, beside this script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'tests', 'helpers'))
import synthetic_export  # noqa: E402  (tests/helpers: the realistic synthetic export)


def make_export(target, copies):
    """The synthetic export (no missing folder) with each submission repeated `copies` times; returns its size."""
    with tempfile.TemporaryDirectory() as tmp:
        source = synthetic_export.build(tmp, metadata=False)
        os.makedirs(target)
        n = 0
        for k in range(copies):
            for d in sorted(os.listdir(source)):
                if d.startswith('submission_') and os.path.isdir(os.path.join(source, d)):
                    shutil.copytree(os.path.join(source, d), os.path.join(target, '%s%d' % (d, k)))
                    n += 1
    return n


def measure(jobs, copies):
    with tempfile.TemporaryDirectory(prefix='hw1-bench-batch-') as tmp:
        export = os.path.join(tmp, 'export')
        n = make_export(export, copies)
        cmd = [sys.executable, '-m', 'autograder', 'batch', export, '--jobs', str(jobs),
               '--out', os.path.join(tmp, 'grades.csv')]
        load = os.getloadavg()[0]
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.time() - t0
        if proc.returncode != 0 or 'errors 0' not in proc.stdout:
            raise SystemExit('batch failed:\n%s\n%s' % (proc.stdout[-2000:], proc.stderr[-2000:]))
        return n, wall, load


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--jobs', type=int, nargs='+', default=[1, 2])
    ap.add_argument('--repeat', type=int, default=1)
    ap.add_argument('--copies', type=int, default=1, help='replicate the 5 submissions K times')
    args = ap.parse_args()
    print('machine: %s, nproc %d, %s; python %s' % (platform.node() or '?', os.cpu_count() or 0, cpu_model(),
                                                    platform.python_version()))
    rows = []
    for r in range(args.repeat):
        for jobs in args.jobs:
            n, wall, load = measure(jobs, args.copies)
            rows.append((jobs, r + 1, n, wall, load))
            print('  --jobs %d run %d: %d submissions in %.1f s (%.2f / min), load average at start %.1f'
                  % (jobs, r + 1, n, wall, 60 * n / wall, load), flush=True)
    print()
    print('| --jobs | run | submissions | wall (s) | submissions / min | load avg (1 min) at start |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: |')
    for jobs, r, n, wall, load in rows:
        print('| %d | %d | %d | %.1f | %.2f | %.1f |' % (jobs, r, n, wall, 60 * n / wall, load))
    best = {}
    for jobs, _, n, wall, _ in rows:
        best[jobs] = max(best.get(jobs, 0), 60 * n / wall)
    if 1 in best:
        print()
        for jobs in sorted(best):
            print('best --jobs %d: %.2f submissions / min (x%.2f of --jobs 1)' % (jobs, best[jobs], best[jobs] / best[1]))


if __name__ == '__main__':
    main()
