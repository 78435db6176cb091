"""
Training runs of `python -m autograder experiments`: each run is one call of
reference/chargpt.py with the handout's flags (the code path students use), in its own
folder under the runs directory, named after a key of its flags.

Caching: a run is complete when its train_losses.json holds max_iters losses and model.pt is
there; complete runs are skipped, anything else is deleted and run again from scratch. The
key covers the flags, the parent run a --model.pretrained_folder run continues, and the
sha256 of the reference code, so a changed reference never reuses stale runs.
"""

import concurrent.futures
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

from autograder import REFERENCE_DIR

CHARGPT = os.path.join(REFERENCE_DIR, 'chargpt.py')
REFERENCE_CODE = ('chargpt.py', 'mingpt/model.py', 'mingpt/trainer.py', 'mingpt/utils.py')


def reference_code_hash():
    h = hashlib.sha256()
    for rel in REFERENCE_CODE:
        with open(os.path.join(REFERENCE_DIR, *rel.split('/')), 'rb') as f:
            h.update(rel.encode() + b'\0' + f.read())
    return h.hexdigest()


def format_flag(key, value):
    """`--key=value` the way chargpt's CfgNode parses it back (True, 6, 'x' -> x)."""
    return '--%s=%s' % (key, value)


def run_key(flags, parent_key=None, code_hash=''):
    """12 hex digits naming a run: its flags (order does not matter), its parent and the code."""
    blob = json.dumps({'flags': sorted(flags.items()), 'parent': parent_key, 'code': code_hash},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


class Run:
    """One chargpt.py invocation. `flags` maps config keys ('model.rope') to values."""

    def __init__(self, flags, parent=None, code_hash=''):
        self.flags = dict(flags)
        self.parent = parent
        self.key = run_key(self.flags, parent.key if parent else None, code_hash)

    @property
    def iters(self):
        return self.flags['trainer.max_iters']

    @property
    def block_size(self):
        return self.flags['data.block_size']

    @property
    def label(self):
        f = self.flags
        return '%s kv=%s block %d x %d seed %s' % ('rope' if f['model.rope'] else 'vanilla', f['model.n_kv_head'],
                                                  self.block_size, self.iters, f['system.seed'])

    def folder(self, runs_dir):
        f = self.flags
        name = '%s-kv%s-b%d-i%d-s%s-%s' % ('rope' if f['model.rope'] else 'vanilla', f['model.n_kv_head'],
                                          self.block_size, self.iters, f['system.seed'], self.key)
        return os.path.join(runs_dir, name)

    def argv(self, runs_dir):
        args = [format_flag(k, v) for k, v in sorted(self.flags.items())]
        args.append(format_flag('system.work_dir', self.folder(runs_dir)))
        if self.parent is not None:
            args.append(format_flag('model.pretrained_folder', self.parent.folder(runs_dir)))
        return [sys.executable, CHARGPT] + args


# the per-iteration lists chargpt.py writes to a run folder (the course's file names)
LOG_FILES = {'train_losses': 'train_losses.json', 'attn_times': 'attention_computation_time.json',
             'attn_mem': 'attention_computation_memory.json'}


def read_logs(folder):
    """The per-iteration lists of a run folder ({'train_losses', 'attn_times', 'attn_mem'}), or None."""
    logs = {}
    try:
        for key, name in LOG_FILES.items():
            with open(os.path.join(folder, name)) as f:
                logs[key] = json.load(f)
    except (OSError, ValueError):
        return None
    return logs


def is_complete(run, runs_dir):
    folder = run.folder(runs_dir)
    logs = read_logs(folder)
    return (logs is not None and len(logs.get('train_losses', [])) == run.iters
            and os.path.isfile(os.path.join(folder, 'model.pt')))


def seconds_per_iteration(folder):
    """Median of the iter_dt chargpt prints every 10 iterations (startup and sampling excluded)."""
    try:
        with open(os.path.join(folder, 'stdout.txt')) as f:
            dts = [float(m) / 1000 for m in re.findall(r'iter_dt ([0-9.]+)ms; iter [1-9]', f.read())]
    except OSError:
        return None
    return statistics.median(dts) if dts else None


class RunFailed(RuntimeError):
    pass


def format_duration(seconds):
    seconds = int(round(seconds))
    return '%d:%02d:%02d' % (seconds // 3600, seconds // 60 % 60, seconds % 60) if seconds >= 3600 \
        else '%d:%02d' % (seconds // 60, seconds % 60)


class Progress:
    """
    ETA from this invocation's own runs: wall seconds per iteration per block size (startup
    included), a new block size scaled linearly from the nearest one measured.
    """

    def __init__(self):
        self.rate = {}  # block size -> [seconds, iterations]
        self.start = time.time()

    def record(self, run, seconds):
        s = self.rate.setdefault(run.block_size, [0.0, 0])
        s[0] += seconds
        s[1] += run.iters

    def estimate(self, run):
        if not self.rate:
            return None
        if run.block_size in self.rate:
            seconds, iters = self.rate[run.block_size]
            return seconds / iters * run.iters
        near = min(self.rate, key=lambda b: abs(b - run.block_size))
        seconds, iters = self.rate[near]
        return seconds / iters * run.iters * run.block_size / near

    def eta(self, remaining):
        guesses = [self.estimate(r) for r in remaining]
        return None if any(g is None for g in guesses) else sum(guesses)


def run_env(run):
    """
    chargpt's environment: one torch thread per CPU run unless the caller set OMP_NUM_THREADS,
    because on a shared, oversubscribed machine two spinning threads per run are slower than one.
    """
    env = dict(os.environ)
    if run.flags.get('trainer.device') == 'cpu':
        env.setdefault('OMP_NUM_THREADS', '1')
    return env


def train(run, runs_dir):
    """Run one chargpt.py from scratch; returns wall seconds, raises RunFailed with the log tail."""
    folder = run.folder(runs_dir)
    shutil.rmtree(folder, ignore_errors=True)  # an interrupted run starts over
    os.makedirs(folder)
    t0 = time.time()
    with open(os.path.join(folder, 'stdout.txt'), 'w') as out:
        proc = subprocess.run(run.argv(runs_dir), stdout=out, stderr=subprocess.STDOUT, env=run_env(run))
    if proc.returncode != 0 or not is_complete(run, runs_dir):
        with open(os.path.join(folder, 'stdout.txt')) as f:
            tail = f.read()[-2000:]
        raise RunFailed('run %s failed (exit %d) in %s:\n%s' % (run.label, proc.returncode, folder, tail))
    return time.time() - t0


def run_all(runs, runs_dir, log=print, jobs=1):
    """
    Run every incomplete run, `jobs` at a time; a run that continues another
    (--model.pretrained_folder) starts only once its parent is complete. Returns the number run.
    """
    todo = [r for r in runs if not is_complete(r, runs_dir)]
    log('training runs: %d planned, %d cached, %d to run, %d at a time (in %s)'
        % (len(runs), len(runs) - len(todo), len(todo), jobs, runs_dir))
    progress = Progress()
    pending, running, done = list(todo), {}, 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        while pending or running:
            for run in [r for r in pending if r.parent is None or is_complete(r.parent, runs_dir)]:
                if len(running) >= jobs:
                    break
                pending.remove(run)
                running[pool.submit(train, run, runs_dir)] = run
            if not running:
                raise RunFailed('runs wait for parents that are not planned: %s' % [r.label for r in pending])
            finished, _ = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
            for future in finished:
                run = running.pop(future)
                seconds = future.result()  # RunFailed propagates; completed runs stay cached
                progress.record(run, seconds)
                done += 1
                eta = progress.eta(pending + list(running.values()))
                log('  [%d/%d] %-36s %6.1f s | elapsed %s, ETA %s' % (
                    done, len(todo), run.label, seconds, format_duration(time.time() - progress.start),
                    'done' if done == len(todo) else ('?' if eta is None else format_duration(eta / jobs))))
    return len(todo)
