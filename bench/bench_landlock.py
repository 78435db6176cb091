"""
What Landlock costs a probe without namespaces (docs/BENCHMARKS.md, "The Landlock wall"):

- restrict: wall.restrict_landlock with a probe's real allow-list (scratch.landlock_rules: the system folders, the
  interpreter's installation as the zygote reports it, /proc, a scratch code/ and job/ folder), in a fresh fork,
  as the wall does it once per probe process;
- opens: 2,000 open()+close() of a file in the interpreter's installation, in a fork with and without Landlock
  (every path a probe opens is checked against the wall);
- decoys: scratch.decoys + remove_decoys, once per grading (the self-test's proof).

    python bench/bench_landlock.py [--repeat N]

Run as the grader runs (root is not needed: Landlock is unprivileged). Prints one line per figure, in ms.
"""

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from autograder.sandbox import scratch, wall  # noqa: E402
from machine import cpu_model  # noqa: E402


def in_fork(fn):
    """fn() in a fork; its result (seconds, a float) through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(w, repr(fn()).encode())
        finally:
            os._exit(0)
    os.close(w)
    data = os.read(r, 100)
    os.close(r)
    os.waitpid(pid, 0)
    return float(data)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--repeat', type=int, default=30)
    args = parser.parse_args()
    abi = wall.landlock_abi()
    if abi < 1:
        sys.exit('no Landlock on this kernel (%d)' % abi)
    base = tempfile.mkdtemp(prefix='hw1-bench-landlock-')
    os.makedirs(os.path.join(base, 'code'))
    folder = scratch.ProbeFolder(base, 'p1', {}, None)
    interpreter = scratch.interpreter_dirs({'prefixes': sorted({sys.prefix, sys.base_prefix}),
                                            'path': [p for p in sys.path if p and os.path.isdir(p)]})
    rules = scratch.landlock_rules(base, folder, interpreter)
    target = os.__file__

    def restrict():
        started = time.perf_counter()
        wall.restrict_landlock(rules)
        return time.perf_counter() - started

    def opens(walled):
        if walled:
            wall.restrict_landlock(rules)
        started = time.perf_counter()
        for _ in range(2000):
            os.close(os.open(target, os.O_RDONLY))
        return time.perf_counter() - started

    def decoys():
        started = time.perf_counter()
        _, _, tops = scratch.decoys('hw1-bench-decoy')
        scratch.remove_decoys(tops)
        return time.perf_counter() - started

    restrict_ms = [in_fork(restrict) * 1000 for _ in range(args.repeat)]
    plain = [in_fork(lambda: opens(False)) * 1000 for _ in range(5)]
    walled = [in_fork(lambda: opens(True)) * 1000 for _ in range(5)]
    decoy_ms = [decoys() * 1000 for _ in range(10)]
    folder.remove()
    os.rmdir(os.path.join(base, 'code'))
    os.rmdir(base)
    print('machine: %s, nproc %d, kernel %s, Landlock ABI %d, Python %s' % (
        cpu_model(), os.cpu_count(), platform.release(), abi, platform.python_version()))
    print('allow-list: %d read, %d write, %d devices'
          % (len(rules['read']), len(rules['write']), len(rules['devices'])))
    print('restrict_landlock per probe: median %.2f ms, max %.2f ms (%d forks)' % (
        statistics.median(restrict_ms), max(restrict_ms), len(restrict_ms)))
    print('2,000 opens: %.1f ms without, %.1f ms with Landlock (medians of 5): %.2f us more per open' % (
        statistics.median(plain), statistics.median(walled),
        (statistics.median(walled) - statistics.median(plain)) / 2000 * 1000))
    print('decoys planted and removed per grading: median %.2f ms' % statistics.median(decoy_ms))


if __name__ == '__main__':
    main()
