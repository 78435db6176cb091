"""
Batch regrading throughput and the class report's truth, run by hand (never by pytest):

    python bench/bench_batch.py                       # the realistic class (74 submissions), --jobs 2, once
    python bench/bench_batch.py --jobs 1 2 --repeat 2
    python bench/bench_batch.py --export synthetic --copies 2   # the small synthetic export, each copied twice

Each measurement regrades a fresh copy of an export with `python -m autograder batch DIR --jobs N`
and reports wall-clock seconds, submissions per minute and the time 1,000 such submissions
would take. The realistic class (tests/helpers/class_export.py) is the corpus of
tests/submissions (12 correct styles, 52 mutants), the reference with a known bug planted 7
more times, the template, a syntax error and a PDF-only upload, each with an invented student:
after the batch its class report must name every planted bug with its true count (asserted,
the difference printed) and list the two uploads that cannot run as `not graded`.

Job counts are interleaved round-robin over the repeats so that a change in machine load hits
them alike; the load average is printed because on a shared machine it moves the numbers.
"""

import argparse
import collections
import csv
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
sys.path.insert(0, REPO)
import class_export  # noqa: E402  (tests/helpers: the realistic class with planted bugs)
import synthetic_export  # noqa: E402


def make_synthetic(tmp, copies):
    """The synthetic export (no metadata) with each submission repeated `copies` times; (folder, None, [])."""
    target = os.path.join(tmp, 'export')
    source = synthetic_export.build(os.path.join(tmp, 'src'), metadata=False)
    os.makedirs(target)
    for k in range(copies):
        for d in sorted(os.listdir(source)):
            if d.startswith('submission_') and os.path.isdir(os.path.join(source, d)):
                shutil.copytree(os.path.join(source, d), os.path.join(target, '%s%d' % (d, k)))
    return target, None, []


def check_report(csv_path, planted, not_graded):
    """Compare the gradebook and its class report with the truth; returns a list of discrepancies."""
    from autograder.staff.regrade import gradebook, class_report
    book = gradebook.read(csv_path)
    _, subs = class_report.frames(book)
    named = dict(zip(*[class_report.bug_table(subs)[c] for c in ('bug', 'submissions')]))
    truth = collections.Counter(b for b in planted.values() if b)
    problems = ['%s: report %d, planted %d' % (b, named.get(b, 0), truth.get(b, 0))
                for b in sorted(set(named) | set(truth)) if named.get(b, 0) != truth.get(b, 0)]
    for sub, row in subs.iterrows():
        expected = {planted[sub]} if planted.get(sub) else set()
        got = set(row['bugs'].split(';')[:1]) - {''}     # the bug the report counts: the earliest test's
        if got != expected:
            problems.append('%s: named %s, planted %s' % (sub, sorted(got) or '-', sorted(expected) or '-'))
    status = {sub: row['status'] for sub, row in subs.iterrows()}
    problems += ['%s: status %s, expected not graded' % (s, status.get(s)) for s in not_graded if status.get(s) != 'not graded']
    problems += ['%s: %s (%s)' % (s, status[s], row['note']) for s, row in subs.iterrows()
                 if status[s] == 'error']
    md = open(os.path.join(class_report.default_folder(csv_path), 'report.md'), encoding='utf-8').read()
    problems += ['report.md does not name %s' % b for b in truth if '| %s ' % b not in md]
    return problems


def measure(jobs, kind, copies):
    with tempfile.TemporaryDirectory(prefix='hw1-bench-batch-') as tmp:
        if kind == 'realistic':
            export, planted, not_graded = class_export.build(tmp)
        else:
            export, planted, not_graded = make_synthetic(tmp, copies)
        n = len([d for d in os.listdir(export) if d.startswith('submission_') and os.path.isdir(os.path.join(export, d))])
        out = os.path.join(tmp, 'grades.csv')
        cmd = [sys.executable, '-m', 'autograder', 'batch', export, '--jobs', str(jobs), '--out', out]
        load = os.getloadavg()[0]
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        wall = time.time() - t0
        if proc.returncode not in (0, 1) or 'errors 0' not in proc.stdout:
            raise SystemExit('batch failed:\n%s\n%s' % (proc.stdout[-2000:], proc.stderr[-2000:]))
        with open(out, newline='', encoding='utf-8') as f:
            seconds = sorted(float(r['seconds']) for r in csv.DictReader(f) if r['seconds'])
        problems = check_report(out, planted, not_graded) if planted is not None else []
        print('    where a grading\'s time goes (means over %s)' % breakdown(export), flush=True)
        return n, wall, load, seconds, problems


def breakdown(export):
    """Mean seconds per graded submission: whole grading, the sandbox run, the probes' own compute inside it."""
    import json
    whole, sandbox, probes = [], [], []
    for d in sorted(os.listdir(export)):
        path = os.path.join(export, d, 'results.json')
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            r = json.load(f)
        extra = r.get('extra_data') or {}
        if 'wall_seconds' in extra:
            whole.append(r['execution_time'])
            sandbox.append(extra['wall_seconds'])
            probes.append(sum(extra.get('probe_seconds', {}).values()))
    mean = lambda xs: sum(xs) / len(xs) if xs else float('nan')
    return ('%d that ran: grading %.1f s, of which the sandbox run %.1f s, of which the probes themselves %.1f s; '
            'the rest of the sandbox run (child start, import torch, job set-up) %.1f s'
            % (len(whole), mean(whole), mean(sandbox), mean(probes), mean(sandbox) - mean(probes)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--jobs', type=int, nargs='+', default=[2])
    ap.add_argument('--repeat', type=int, default=1)
    ap.add_argument('--export', choices=('realistic', 'synthetic'), default='realistic')
    ap.add_argument('--copies', type=int, default=1, help='synthetic only: replicate its 6 submissions K times')
    args = ap.parse_args()
    print('machine: %s, nproc %d, %s; python %s' % (platform.node() or '?', os.cpu_count() or 0, cpu_model(),
                                                    platform.python_version()))
    rows, failed = [], False
    for r in range(args.repeat):
        for jobs in args.jobs:
            n, wall, load, seconds, problems = measure(jobs, args.export, args.copies)
            median = seconds[len(seconds) // 2] if seconds else float('nan')
            rows.append((jobs, r + 1, n, wall, load, median))
            print('  --jobs %d run %d: %d submissions in %.1f s (%.2f / min; 1,000 would take %.0f min), median '
                  'grading %.1f s, load average at start %.1f' % (jobs, r + 1, n, wall, 60 * n / wall,
                                                                  1000 * wall / n / 60, median, load), flush=True)
            if args.export == 'realistic':
                print('    class report vs planted bugs: %s' % ('every planted bug named with its true count'
                                                                if not problems else 'DIFFERS'))
                for p in problems:
                    print('      ' + p)
                failed |= bool(problems)
    print()
    print('| --jobs | run | submissions | wall (s) | submissions / min | 1,000 submissions (min) | median grading (s) '
          '| load avg (1 min) at start |')
    print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for jobs, r, n, wall, load, median in rows:
        print('| %d | %d | %d | %.1f | %.2f | %.0f | %.1f | %.1f |' % (jobs, r, n, wall, 60 * n / wall, 1000 * wall / n / 60,
                                                                      median, load))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
