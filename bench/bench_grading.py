"""
Benchmark of one full grading with the cpu profile, as Gradescope runs it (0.5 vCPU, 768 MB),
run by hand, never by pytest:

    python bench/bench_grading.py                 # 3 gradings of the reference, pinned to CPU 0
    python bench/bench_grading.py --repeat 1 --submission path/to/model.py

Each repeat runs `taskset -c 0 python -m autograder grade SUBMISSION --results TMP` and reports

- wall time of the whole command (target <= 120 s);
- peak memory of the whole process tree (the harness, the zygote, the probe process of the
  moment and anything it starts), sampled from /proc every 50 ms (target <= 768 MB): the sum
  of PSS (smaps_rollup: a page shared by k processes counts 1/k in each, which is what the
  container's memory is charged), and the sum of VmRSS beside it, which counts the pages the
  zygote shares with each fork (torch, ~220 MB) twice; also the largest single process
  (getrusage RUSAGE_CHILDREN ru_maxrss);
- harness overhead = wall time / the probes' own compute (the sum of results.json's
  extra_data.probe_seconds): Python and torch start-up, child restarts, fixtures and judging.

Prints a markdown section for docs/BENCHMARKS.md ("Grading time and memory (cpu profile)").
"""

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from machine import cpu_model  # bench/machine.py, beside this script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WALL_TARGET_S = 120
RSS_TARGET_MB = 768
SAMPLE_S = 0.05


def children_map():
    """{ppid: [pid, ...]} of every process now."""
    kids = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rpartition(')')[2].split()
            kids.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    return kids


def tree(root):
    kids, out, todo = children_map(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def _proc_kb(path, field):
    """The kB value of `field:` in a /proc file, or None (the process is gone, or the file lacks it)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_kb(pid):
    return _proc_kb('/proc/%d/status' % pid, 'VmRSS') or 0   # 0: gone, or a kernel thread / zombie without VmRSS


def pss_kb(pid):
    """Proportional set size (shared pages split between the processes that map them), or VmRSS without smaps_rollup."""
    pss = _proc_kb('/proc/%d/smaps_rollup' % pid, 'Pss')
    return rss_kb(pid) if pss is None else pss


class TreeSampler(threading.Thread):
    """Samples the summed PSS and VmRSS of a process tree every SAMPLE_S seconds; keeps the peaks."""

    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.peak_rss_kb, self.peak_procs, self.samples = pid, 0, 0, 0, 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            pids = tree(self.pid)
            total = sum(pss_kb(p) for p in pids)
            self.peak_rss_kb = max(self.peak_rss_kb, sum(rss_kb(p) for p in pids))
            self.samples += 1
            if total > self.peak_kb:
                self.peak_kb, self.peak_procs = total, len(pids)
            self.stop.wait(SAMPLE_S)


def one_grading(submission, cpu, python):
    out_dir = tempfile.mkdtemp(prefix='hw1-bench-grading-')
    results_path = os.path.join(out_dir, 'results.json')
    cmd = ['taskset', '-c', str(cpu), python, '-m', 'autograder', 'grade', submission, '--results', results_path]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    output = proc.communicate()[0].decode('utf-8', 'replace')
    wall = time.perf_counter() - started
    sampler.stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit('grading failed (exit %d):\n%s' % (proc.returncode, output[-3000:]))
    with open(results_path) as f:
        res = json.load(f)
    shutil.rmtree(out_dir, ignore_errors=True)
    extra = res.get('extra_data', {})
    probe_s = sum(extra.get('probe_seconds', {}).values())
    return {
        'wall_s': wall,
        'score': sum(t['score'] for t in res['tests']),
        'possible': sum(t['max_score'] for t in res['tests']),
        'peak_tree_mb': sampler.peak_kb / 1024.0,          # PSS
        'peak_tree_rss_mb': sampler.peak_rss_kb / 1024.0,  # VmRSS, shared pages counted in every process
        'peak_tree_procs': sampler.peak_procs,
        'samples': sampler.samples,
        # ru_maxrss of RUSAGE_CHILDREN: the largest single waited-for descendant so far (KB on Linux)
        'max_single_mb': after.ru_maxrss / 1024.0,
        'cpu_s': (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        'probe_s': probe_s,
        'sandbox_wall_s': extra.get('wall_seconds'),
        'overhead': wall / probe_s if probe_s else float('nan'),
        'probe_seconds': extra.get('probe_seconds', {}),
        'sandboxed_as': extra.get('sandboxed_as'),
    }


def loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return (float('nan'),) * 3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--submission', default=os.path.join(REPO, 'reference', 'mingpt', 'model.py'))
    ap.add_argument('--repeat', type=int, default=3)
    ap.add_argument('--cpu', type=int, default=0, help='the core taskset pins the grading to (default 0)')
    ap.add_argument('--python', default=sys.executable)
    args = ap.parse_args(argv)
    if shutil.which('taskset') is None:
        raise SystemExit('taskset (util-linux) is needed to pin the grading to one core')

    load_before = loadavg()
    runs = []
    for i in range(args.repeat):
        r = one_grading(os.path.abspath(args.submission), args.cpu, args.python)
        runs.append(r)
        print('run %d: %.1f s wall, score %g/%g, peak tree PSS %.0f MB (RSS sum %.0f MB, %d processes), largest '
              'process %.0f MB, probes %.1f s, overhead %.2fx' % (
                  i + 1, r['wall_s'], r['score'], r['possible'], r['peak_tree_mb'], r['peak_tree_rss_mb'],
                  r['peak_tree_procs'], r['max_single_mb'], r['probe_s'], r['overhead']), file=sys.stderr)
    load_after = loadavg()

    med = lambda k: statistics.median(r[k] for r in runs)  # noqa: E731
    wall, peak, overhead = med('wall_s'), max(r['peak_tree_mb'] for r in runs), med('overhead')
    slowest = max(r['wall_s'] for r in runs)
    import torch  # noqa: E402  (only for the version line)
    rel = os.path.relpath(os.path.abspath(args.submission), REPO)
    probes = runs[len(runs) // 2]['probe_seconds']
    top = sorted(probes.items(), key=lambda kv: -kv[1])[:3]
    lines = [
        '## Grading time and memory (cpu profile)',
        '',
        'One full grading of `%s` with the cpu profile, the whole grader pinned to one core as on' % rel,
        "Gradescope's default container (0.5 vCPU, 768 MB), from",
        '',
        '    python bench/bench_grading.py        # %d gradings of' % args.repeat,
        '    taskset -c %d python -m autograder grade %s --results TMP' % (args.cpu, rel),
        '',
        '- Machine: `nproc` = %d, CPU "%s", torch %s, Python %s; load average %.1f before and %.1f after '
        '(shared with other jobs).' % (os.cpu_count(), cpu_model(), torch.__version__, platform.python_version(),
                                       load_before[0], load_after[0]),
        '- Student code ran as `%s`.' % runs[0]['sandboxed_as'],
        '- Peak tree memory is the sum of PSS over the process tree (harness, zygote, the probe process of the '
        'moment) sampled every 50 ms: pages the zygote shares with its fork count once, as the container is '
        'charged; the sum of VmRSS (shared pages counted in each process) is beside it. "largest process" is '
        '`getrusage(RUSAGE_CHILDREN).ru_maxrss`.',
        '- Harness overhead = wall time / the sum of the probes\' own compute (`extra_data.probe_seconds`); '
        '"sandbox s" is `extra_data.wall_seconds`, the part spent in the sandbox (scratch folder, child start-up '
        'with its torch import, probes, reading back).',
        '',
        '| run | wall s | sandbox s | score | peak tree PSS MB | (RSS sum MB) | largest process MB | probes s '
        '| overhead |',
        '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ]
    for i, r in enumerate(runs, 1):
        lines.append('| %d | %.1f | %.1f | %g/%g | %.0f | %.0f | %.0f | %.1f | %.2fx |' % (
            i, r['wall_s'], r['sandbox_wall_s'] or float('nan'), r['score'], r['possible'], r['peak_tree_mb'],
            r['peak_tree_rss_mb'], r['max_single_mb'], r['probe_s'], r['overhead']))
    lines += [
        '',
        'Median wall time **%.1f s** (slowest %.1f s; target <= %d s: **%s**). Peak tree PSS **%.0f MB** '
        '(target <= %d MB: **%s**). Harness overhead **%.2fx** the probes\' compute; the probes themselves: %s.' % (
            wall, slowest, WALL_TARGET_S, 'met' if slowest <= WALL_TARGET_S else 'NOT met', peak, RSS_TARGET_MB,
            'met' if peak <= RSS_TARGET_MB else 'NOT met', overhead,
            ', '.join('%s %.2f s' % kv for kv in top) + ', the other %d together %.2f s' % (
                len(probes) - len(top), sum(probes.values()) - sum(v for _, v in top))),
    ]
    print('\n'.join(lines))
    return 0 if slowest <= WALL_TARGET_S and peak <= RSS_TARGET_MB else 1


if __name__ == '__main__':
    sys.exit(main())
