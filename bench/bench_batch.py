"""
Batch regrading throughput and the class report's truth, run by hand (never by pytest):

    python bench/bench_batch.py --class realistic     # THE figure: a class as they come (50), --jobs 2, once
    python bench/bench_batch.py --class realistic --size 200 --jobs 1 2 --repeat 2
    python bench/bench_batch.py --class realistic --size 20 --against HEAD~3   # CPU ratio against other code
    python bench/bench_batch.py --class corpus        # the corpus class (74 submissions, mostly mutants)
    python bench/bench_batch.py --class synthetic --copies 2   # the small synthetic export, each copied twice

Each measurement regrades a fresh copy of an export with `python -m autograder batch DIR --jobs N`
and reports wall-clock seconds, submissions per minute, the time 1,000 such submissions would
take, that time over the floor (the probes' own compute, second runs included, spread over the jobs: issue
43's ratio), and the CPU seconds per submission (every process of the batch: workers, zygotes and
probes, from getrusage of the finished batch), which a loaded machine moves far less than the
wall. The realistic class (tests/helpers/class_export.py build_realistic) is at least 72%
correct styles (tests/submissions/correct, each sent by several invented students), single-bug
mutants for the rest, and the template, a syntax error and a PDF-only upload. The corpus class
is the corpus of tests/submissions (12 correct styles, 52 mutants), the reference with a known
bug planted 7 more times, the template, a syntax error and a PDF-only upload. After each batch
the class report must name every planted bug with its true count (asserted, the difference
printed) and list the uploads that cannot run as `not graded`.

--against REF grades the same class, in the same run, with the code of git revision REF (a
temporary worktree; interleaved with this checkout's runs), and prints the CPU ratio: the
comparison that holds on a machine others are loading.

Job counts are interleaved round-robin over the repeats so that a change in machine load hits
them alike; the load average is printed because on a shared machine it moves the numbers.
"""

import argparse
import collections
import csv
import os
import platform
import resource
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
    problems += ['%s: status %s, expected not graded' % (s, status.get(s))
                 for s in not_graded if status.get(s) != 'not graded']
    problems += ['%s: %s (%s)' % (s, status[s], row['note']) for s, row in subs.iterrows()
                 if status[s] == 'error']
    md = open(os.path.join(class_report.default_folder(csv_path), 'report.md'), encoding='utf-8').read()
    problems += ['report.md does not name %s' % b for b in truth if '| %s ' % b not in md]
    return problems


def measure(jobs, kind, copies, size=50, repo=REPO):
    with tempfile.TemporaryDirectory(prefix='hw1-bench-batch-') as tmp:
        if kind == 'corpus':   # --size: every k-th of the corpus class, its mix kept
            chosen = class_export.submissions()
            step = max(1, len(chosen) // size) if size else 1
            export, planted, not_graded = class_export.build(tmp, chosen[::step][:size] if size else None)
        elif kind == 'realistic':
            export, planted, not_graded = class_export.build_realistic(tmp, size)
        else:
            export, planted, not_graded = make_synthetic(tmp, copies)
        n = len([d for d in os.listdir(export)
                 if d.startswith('submission_') and os.path.isdir(os.path.join(export, d))])
        out = os.path.join(tmp, 'grades.csv')
        cmd = [sys.executable, '-m', 'autograder', 'batch', export, '--jobs', str(jobs), '--out', out]
        load = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
        wall = time.time() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        if proc.returncode not in (0, 1) or 'errors 0' not in proc.stdout:
            raise SystemExit('batch failed:\n%s\n%s' % (proc.stdout[-2000:], proc.stderr[-2000:]))
        with open(out, newline='', encoding='utf-8') as f:
            seconds = sorted(float(r['seconds']) for r in csv.DictReader(f) if r['seconds'])
        problems = check_report(out, planted, not_graded) if planted is not None else []
        line, compute = breakdown(export)
        print('    where a grading\'s time goes (means over %s)' % line, flush=True)
        return n, wall, load, seconds, problems, cpu, compute


def worktree(ref, tmp):
    """A checkout of git revision `ref` under tmp (this checkout's data/input.txt linked in); its path."""
    path = os.path.join(tmp, 'against')
    subprocess.run(['git', 'worktree', 'add', '--detach', '-q', path, ref], cwd=REPO, check=True)
    os.symlink(os.path.join(REPO, 'data', 'input.txt'), os.path.join(path, 'data', 'input.txt'))
    return path


def breakdown(export):
    """(the line: mean seconds per graded submission: whole grading, the sandbox run, the probes' own compute inside
    it; the probes' own compute summed over the class, second runs included). A probe's compute is the seconds its
    process reports for its own work (ProbeResult.seconds: results.json's probe_seconds and second_run), the floor no
    harness can go under."""
    import json
    whole, sandbox, probes, second = [], [], [], []
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
            second.append(sum(v.get('seconds') or 0.0 for v in (extra.get('second_run') or {}).values()))
    mean = lambda xs: sum(xs) / len(xs) if xs else float('nan')
    return ('%d that ran: grading %.1f s, of which the sandbox run %.1f s, of which the probes themselves %.1f s '
            '(and %.1f s in second runs, %d of them); the rest of the sandbox run (child start, import torch, job '
            'set-up) %.1f s' % (len(whole), mean(whole), mean(sandbox), mean(probes), mean(second),
                                sum(1 for x in second if x), mean(sandbox) - mean(probes)),
            sum(probes) + sum(second))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--jobs', type=int, nargs='+', default=[2])
    ap.add_argument('--repeat', type=int, default=1)
    ap.add_argument('--class', '--export', dest='kinds', nargs='+', choices=('realistic', 'corpus', 'synthetic'),
                    default=['realistic'], help='the class(es) to grade, interleaved (default realistic)')
    ap.add_argument('--size', type=int, default=None,
                    help='submissions in the class (realistic: default 50; corpus: every k-th of its 102, mix kept)')
    ap.add_argument('--copies', type=int, default=1, help='synthetic only: replicate its 6 submissions K times')
    ap.add_argument('--against', metavar='REF',
                    help='also grade with the code of git revision REF; print the CPU ratio')
    args = ap.parse_args()
    print('machine: %s, nproc %d, %s; python %s; class %s%s' % (
        platform.node() or '?', os.cpu_count() or 0, cpu_model(), platform.python_version(), ' '.join(args.kinds),
        ' (size %s)' % args.size if args.size else ''))
    rows, failed = [], False
    tmp = tempfile.mkdtemp(prefix='hw1-bench-against-') if args.against else None
    codes = [('this checkout', REPO)] + ([(args.against, worktree(args.against, tmp))] if args.against else [])
    cpu_by_code = collections.defaultdict(list)
    try:
        for r in range(args.repeat):
            for jobs, kind in [(j, k) for j in args.jobs for k in args.kinds]:
                size = args.size or (50 if kind == 'realistic' else None)
                for label, repo in codes:
                    if len(args.kinds) > 1:
                        label = '%s, %s class' % (label.split(',')[0], kind)
                    n, wall, load, seconds, problems, cpu, compute = measure(jobs, kind, args.copies, size, repo)
                    median = seconds[len(seconds) // 2] if seconds else float('nan')
                    # the floor: the probes' own compute spread over the jobs; the ratio is the wall over it
                    ratio = wall * jobs / compute if compute else float('nan')
                    rows.append((label, jobs, r + 1, n, wall, load, median, cpu, ratio))
                    cpu_by_code[label.split(',')[0]].append(cpu / n)
                    print('  %s --jobs %d run %d: %d submissions in %.1f s (%.2f / min; 1,000 would take %.0f min, '
                          '%.2f times the probes\' own compute of %.2f s per submission over %d jobs), '
                          'CPU %.2f s per submission, median grading %.1f s, load average at start %.1f'
                          % (label, jobs, r + 1, n, wall, 60 * n / wall, 1000 * wall / n / 60, ratio, compute / n, jobs,
                             cpu / n, median, load), flush=True)
                    if kind != 'synthetic':
                        print('    class report vs planted bugs: %s' % ('every planted bug named with its true count'
                                                                        if not problems else 'DIFFERS'))
                        for p in problems:
                            print('      ' + p)
                        failed |= bool(problems)
    finally:
        if tmp:
            subprocess.run(['git', 'worktree', 'remove', '--force', codes[1][1]], cwd=REPO)
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print('| code | --jobs | run | submissions | wall (s) | submissions / min | 1,000 submissions (min) | '
          "x the probes' compute | CPU s / submission | median grading (s) | load avg (1 min) at start |")
    print('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
    for label, jobs, r, n, wall, load, median, cpu, ratio in rows:
        print('| %s | %d | %d | %d | %.1f | %.2f | %.0f | %.2f | %.2f | %.1f | %.1f |' % (
            label, jobs, r, n, wall, 60 * n / wall, 1000 * wall / n / 60, ratio, cpu / n, median, load))
    if args.against:
        mine, theirs = (sum(cpu_by_code[k]) / len(cpu_by_code[k]) for k in ('this checkout', args.against))
        print('\nCPU per submission: this checkout %.2f s, %s %.2f s: ratio %.3f' % (mine, args.against, theirs,
                                                                                   mine / theirs))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
