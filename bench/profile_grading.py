"""
Where one grading's CPU goes, as a batch worker spends it (one process, one Sandbox and zygote
kept across gradings, every probe a fresh walled process as always). Run by hand, under root
for the real wall:

    python bench/profile_grading.py tests/submissions/correct/per_head_loop --repeat 2
    python bench/profile_grading.py reference/mingpt/model.py --cprofile /tmp/harness.prof

For each grading (the first of each submission is a warm-up when --repeat > 1: the zygote's
start is the worker's, not the grading's) it prints CPU seconds, never wall, so that a loaded
machine moves the figures little:

- harness: this process (the harness: set-up, inputs, reading back, judging, results.json);
- zygote: the forking interpreter (its own work between forks);
- probes: the grading cgroup's CPU (every probe process, the self-test and the import check),
  and per probe the CPU the harness measured for it (ProbeResult.harness['cpu_seconds']).

--cprofile FILE writes the harness's profile (pstats) over all gradings.
"""

import argparse
import cProfile
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from autograder.judge import config, grade, probe_job  # noqa: E402
from autograder.sandbox import Sandbox, cgroups  # noqa: E402


def _proc_cpu(pid):
    """utime + stime of a live process, seconds (/proc/PID/stat), or 0.0."""
    try:
        with open('/proc/%d/stat' % pid) as f:
            fields = f.read().rsplit(')', 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')
    except (OSError, ValueError, IndexError):
        return 0.0


class Recorder:
    """Catches what one grading's runs in the sandbox (probe_job.execute) and its cgroup saw."""

    def __init__(self):
        self.runs, self.cgroup_cpu = [], []
        run, remove = probe_job.execute, cgroups.Cgroup.remove
        recorder = self

        def recorded_run(sandbox, *args, **kwargs):
            out = run(sandbox, *args, **kwargs)
            recorder.runs.append(out)
            return out

        def recorded_remove(cgroup):
            recorder.cgroup_cpu.append(cgroup.cpu_seconds() or 0.0)
            return remove(cgroup)
        probe_job.execute, cgroups.Cgroup.remove = recorded_run, recorded_remove


def grade_once(path, box, recorder, profiler):
    zygote_pid = box.zygote.proc.pid if box.zygote.proc is not None else None
    before_zygote = _proc_cpu(zygote_pid) if zygote_pid else 0.0
    t = os.times()
    wall = time.time()
    with tempfile.TemporaryDirectory(prefix='hw1-profile-') as tmp:
        if profiler:
            profiler.enable()
        out = grade.grade_results(path, 'cpu', os.path.join(tmp, 'results', 'results.json'), sandbox=box)
        if profiler:
            profiler.disable()
    u = os.times()
    harness = (u.user - t.user) + (u.system - t.system)
    zygote_pid = box.zygote.proc.pid if box.zygote.proc is not None else None
    zygote = _proc_cpu(zygote_pid) - before_zygote if zygote_pid else float('nan')
    run_result = recorder.runs[-1] if recorder.runs else None
    probes = run_result.probes.items() if run_result else []
    per_probe = {k: (v.harness or {}).get('cpu_seconds') or 0.0 for k, v in probes}
    if run_result is not None and run_result.import_result is not None:
        per_probe['(import check)'] = (run_result.import_result.harness or {}).get('cpu_seconds') or 0.0
    cg = recorder.cgroup_cpu[-1] if recorder.cgroup_cpu else float('nan')
    return out, harness, zygote, cg, per_probe, time.time() - wall


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('paths', nargs='+', help='model.py files or folders holding one')
    ap.add_argument('--repeat', type=int, default=2, help='gradings of each (the first is a warm-up when > 1)')
    ap.add_argument('--cprofile', metavar='FILE', help="write the harness's cProfile (pstats) here")
    args = ap.parse_args()
    recorder = Recorder()
    profiler = cProfile.Profile() if args.cprofile else None
    box = Sandbox(config.load().sandbox)
    try:
        for path in args.paths:
            for i in range(args.repeat):
                out, harness, zygote, cg, per_probe, wall = grade_once(path, box, recorder, profiler)
                warm = ' (warm-up)' if args.repeat > 1 and i == 0 else ''
                print('%s #%d%s: total %s; CPU s: harness %.2f, zygote %.2f, probes (cgroup) %.2f, sum %.2f; '
                      'wall %.1f s'
                      % (path, i + 1, warm, out.total, harness, zygote, cg, harness + zygote + cg, wall))
                print('    per probe CPU s: ' + ', '.join('%s %.2f' % kv for kv in
                                                         sorted(per_probe.items(), key=lambda kv: -kv[1])))
                print('    sum of probes %.2f; outside them in the cgroup (self-test, set-up) %.2f'
                      % (sum(per_probe.values()), cg - sum(per_probe.values())), flush=True)
    finally:
        box.close()
    if profiler:
        profiler.dump_stats(args.cprofile)
    return 0


if __name__ == '__main__':
    sys.exit(main())
