"""
Where one grading's WALL time goes, stage by stage (issue 43, item 1), run by hand on one core:

    taskset -c 0 python bench/grading_stages.py reference/mingpt/model.py --repeat 3
    taskset -c 0 python bench/grading_stages.py reference/mingpt/model.py --repeat 3 --batch   # one Sandbox kept

Each grading is grade.grade_results as run_autograder calls it (its own Sandbox, so the zygote starts in it), or
with --batch as a batch worker does (one Sandbox and zygote for every grading: the first grading pays the start).
The harness's functions below are wrapped with a clock (nothing else changes: every probe is its own fresh,
walled process as always). A stage's "own" seconds leave out the stages it calls, so the own column sums to the
grading's wall time; "harness, the rest" is what no stage names (the harness's loop, link answers, waiting on a
probe process). Each probe process (self-test, import check, probes; second run included) is split by the
harness's own clock: fork to its wall-up frame (the zygote's fork, namespaces, mounts, pivot_root, rlimits, user,
seccomp, and the harness's outside check), wall-up to "model.py imported", and the rest to its exit (the probe's
own compute and writing its outputs). CPU: this process (the harness), and its reaped children (the zygote and,
once it exits, every probe process it reaped: only without --batch).

bench/profile_grading.py splits CPU seconds per process instead.
"""

import argparse
import collections
import os
import resource
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from autograder.judge import config, fixtures, grade, results, submission  # noqa: E402
from autograder.sandbox import Sandbox, leftovers, probe, readback, scratch, session, users, zygote_handle  # noqa: E402

# (owner, attribute, stage): each a plain function or method (never a generator), timed where it is called
STAGES = [
    (zygote_handle.Zygote, 'start', 'zygote start (interpreter + import torch)'),
    (Sandbox, '__init__', 'Sandbox set-up (pool users, child python, seccomp program)'),
    (fixtures, 'load_for_grading', 'fixture loading'),
    (submission, 'locate', 'upload located'),
    (grade.Judging, '__init__', 'upload read, parsed, checked; inputs drawn; set-aside planned'),
    (session.Sandbox, '_begin', 'grading set-up (cgroup, scratch copy of the code)'),
    (session.Sandbox, '_grader_copies', 'copies check (copies of the grader on the machine)'),
    (session.Sandbox, '_selftest', 'self-test process (fork, wall, its checks)'),
    (session.Sandbox, '_spec', "process spec (the walled root's plan)"),
    (scratch.ProbeFolder, '__init__', "probe folder made (its inputs, tmpfs)"),
    (scratch.ProbeFolder, 'remove', 'probe folder removed'),
    (zygote_handle.Zygote, 'spawn', 'fork asked of the zygote (spawn)'),
    (session.Sandbox, '_clean', 'between processes: the rest of _clean'),
    (users, 'kill_and_confirm', 'kill-and-confirm'),
    (users, 'wait_reaped', 'zombies reaped'),
    (zygote_handle.Zygote, 'sync', "zygote sync (its orphans' reports)"),
    (leftovers, 'remove_user_files', 'sweep of shared folders (no namespaces)'),
    (leftovers, 'remove_ipc', 'SysV IPC removed'),
    (leftovers, 'clear_keys', 'kernel keys cleared'),
    (readback, 'read_probe', 'read-back of outputs'),
    (readback, 'read_hang', 'read-back of a hang dump'),
    (grade.Judging, 'verdict', 'judging (verdicts)'),
    (results.Results, 'write', 'results.json written (each finished test, and the end)'),
    (session.Sandbox, '_end_grading', 'grading end (cgroup and scratch removed)'),
    (Sandbox, 'close', 'Sandbox closed (zygote stopped)'),
]
INCLUSIVE = [(grade.Judging, '_second', 'second run (inclusive: its processes and all)')]
TOP = 'harness, the rest (judge loop, link answers, waiting on probe processes)'


class Clock:
    def __init__(self):
        self.own, self.calls, self.inclusive = collections.Counter(), collections.Counter(), collections.Counter()
        self.stack, self.processes = [], []

    def timed(self, fn, label):
        clock = self

        def wrapper(*args, **kwargs):
            clock.stack.append([label, time.perf_counter(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                name, start, inner = clock.stack.pop()
                took = time.perf_counter() - start
                clock.own[name] += took - inner
                clock.calls[name] += 1
                if clock.stack:
                    clock.stack[-1][2] += took
        return wrapper

    def inclusive_timed(self, fn, label):
        clock = self

        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                clock.inclusive[label] += time.perf_counter() - start
        return wrapper

    def install(self):
        for owner, attr, label in STAGES:
            setattr(owner, attr, self.timed(getattr(owner, attr), label))
        for owner, attr, label in INCLUSIVE:
            setattr(owner, attr, self.inclusive_timed(getattr(owner, attr), label))
        first, ending, clock = probe._Watch._first, probe._ending, self

        def first_frame(w, data, sender):
            w.ready_after = time.time() - w.started
            return first(w, data, sender)

        def ended(w, started, cpu):
            out = ending(w, started, cpu)
            clock.processes.append(dict(out, ready_after=getattr(w, 'ready_after', None)))
            return out
        probe._Watch._first, probe._ending = first_frame, ended

    def reset(self):
        self.own.clear(), self.calls.clear(), self.inclusive.clear()
        self.processes = []


def process_split(processes):
    """Sums over the grading's processes: fork to wall-up, wall-up to model.py imported, imported to exit; CPU."""
    fork_wall = sum(p['ready_after'] or 0.0 for p in processes)
    imported = sum(max(0.0, (p.get('imported_after') or p['ready_after'] or 0.0) - (p['ready_after'] or 0.0))
                   for p in processes)
    whole = sum(p['wall_seconds'] for p in processes)
    return fork_wall, imported, whole - fork_wall - imported, sum(p['cpu_seconds'] for p in processes)


def report(clock, wall, cpu_self, cpu_children, n_tests):
    print('  wall %.2f s; CPU: harness %.2f s, reaped children %.2f s' % (wall, cpu_self, cpu_children))
    print('  %-80s %7s %6s' % ('stage', 'own s', 'calls'))
    rest = clock.own.pop(TOP, 0.0)
    for label, secs in sorted(clock.own.items(), key=lambda kv: -kv[1]):
        print('  %-80s %7.3f %6d' % (label, secs, clock.calls[label]))
    print('  %-80s %7.3f' % (TOP, rest))
    fork_wall, imported, rest_of_life, cpu = process_split(clock.processes)
    print('  of which in probe processes (%d, self-test included: %d s wall in all):' % (
        len(clock.processes), round(fork_wall + imported + rest_of_life)))
    print('      fork to wall-up frame %.3f s; wall-up to model.py imported %.3f s; imported to exit %.3f s; '
          'their CPU %.3f s' % (fork_wall, imported, rest_of_life, cpu))
    for label, secs in clock.inclusive.items():
        print('  %s: %.3f s' % (label, secs))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('path', help='model.py (or a folder or zip holding one)')
    ap.add_argument('--repeat', type=int, default=2)
    ap.add_argument('--batch', action='store_true', help='one Sandbox (and zygote) for every grading')
    args = ap.parse_args(argv)
    clock = Clock()
    clock.install()
    box = Sandbox(config.load().sandbox) if args.batch else None
    top = clock.timed(grade.grade_results, TOP)
    print('%s, %s, affinity %s, load average %s' % (args.path, 'one Sandbox kept (--batch)' if args.batch
          else 'a Sandbox per grading (run_autograder)', sorted(os.sched_getaffinity(0)), os.getloadavg()))
    try:
        for i in range(args.repeat):
            clock.reset()
            before, children = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
            started = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix='hw1-stages-') as tmp:
                out = top(args.path, 'cpu', os.path.join(tmp, 'results.json'), sandbox=box)
            wall = time.perf_counter() - started
            after, children_after = os.times(), resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu_self = (after.user - before.user) + (after.system - before.system)
            cpu_children = (children_after.ru_utime - children.ru_utime) + (children_after.ru_stime - children.ru_stime)
            print('\ngrading %d: total %s' % (i + 1, out.total))
            report(clock, wall, cpu_self, cpu_children, len(out.tests))
    finally:
        if box is not None:
            box.close()
    return 0


if __name__ == '__main__':
    sys.exit(main())
