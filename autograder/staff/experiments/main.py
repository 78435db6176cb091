"""
`python -m autograder experiments [--device cuda] [--quick] [--sizes full|cpu|quick] [--jobs N]
[--seeds N] [--out DIR] [--runs DIR]`: reference answers for the handout's empirical and
written questions, for the TAs who grade them by hand.

It trains the reference through reference/chargpt.py with the handout's own flags, one
subprocess per run (the code path students use), for every experiment of handout section 5
and several seeds; samples the RoPE model after 600 and 1200 iterations (5.1, 5.2);
executes the filled-in sliding-window pseudocode of section 4 against the dense form and
measures its time and memory scaling; then writes OUT/report.md with one figure, table and
rubric note per question.

Sizes: `full` is the handout's (gpt-mini, batch 64, 600 + 600 iterations, 200 for GQA): on a
GPU about the handout's half hour per seed, hours on a CPU. `cpu` is a smaller model and
shorter second phase for a CPU; `quick` (= --quick) is a smoke run of the same pipeline in a
couple of minutes of CPU time. Runs are cached under --runs (default OUT/runs) keyed by their flags:
rerunning skips what is complete, so an interrupted report continues where it stopped.
"""

import argparse
import json
import os
import subprocess
import sys
import time

from autograder import REPO_ROOT
from autograder.staff.experiments import report, runs, stats
from autograder.staff.experiments.runs import Run, format_duration

WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'worker.py')

# first line of Richard III; the handout asks for a play's first line, not chargpt's default "O God, O God!"
PROMPT = 'Now is the winter of our discontent'
FIRST_SEED = 3407  # chargpt's default system.seed; further seeds count up from it


def get_sizes(name):
    """
    The sizes of one preset. Keys:
      model_flags       extra chargpt flags for the model (empty: the handout's gpt-mini)
      n_query_head      query heads (the handout's 6); kv_heads the n_kv_head of 5.5
      gqa_kv            n_kv_head of the GQA runs of 5.6 and 5.7 (the handout's 2)
      short_block, long_block, short_iters, long_iters, short_batch, long_batch
                        the two phases of 5.1, 5.2, 5.4, 5.7 (batch None: chargpt's 64)
      gqa_iters         iterations of 5.5 and 5.6, at short_block with short_batch
      final_window      iterations averaged into a "final loss"
      smooth            moving-average width of the plotted curves
      sample_tokens     max_new_tokens of the samples (chargpt's 500, which 5.1 says not to change)
      section4          sizes of the sliding-window scaling measurement
      measure_full_speed  also time the handout's model on this device (s/iter at both blocks)
    """
    full = dict(model_flags={}, n_query_head=6, kv_heads=[1, 2, 3, 6], gqa_kv=2,
                short_block=16, long_block=256, short_iters=600, long_iters=600,
                short_batch=None, long_batch=None, gqa_iters=200, final_window=20, smooth=10,
                sample_tokens=500, measure_full_speed=False,
                section4=dict(d_k=32, fixed_w=64, Ns=[256, 512, 1024, 2048, 4096],
                              fixed_N=2048, ws=[8, 16, 32, 64, 128, 256, 512], repeats=3))
    if name == 'full':
        return full
    if name == 'cpu':
        # a 2-layer, 96-wide model; the second phase shortened and on smaller batches because
        # block 256 costs ~16x block 16 per sequence (numbers in the report)
        return dict(full, model_flags={'model.n_layer': 2, 'model.n_embd': 96},
                    short_batch=32, long_batch=8, short_iters=300, long_iters=60, measure_full_speed=True)
    if name == 'quick':
        return dict(full, model_flags={'model.n_layer': 1, 'model.n_embd': 24},
                    short_batch=8, long_batch=4, long_block=64, short_iters=20, long_iters=20, gqa_iters=20,
                    final_window=5, smooth=3,
                    section4=dict(d_k=8, fixed_w=8, Ns=[64, 128, 256, 512], fixed_N=256, ws=[8, 16, 32, 64, 128],
                                  repeats=1))
    raise ValueError('unknown sizes %r' % name)


# the four configurations of 5.7 (5.4 is the first two): (name, rope, GQA?)
CONFIGS = [('vanilla', False, False), ('RoPE', True, False), ('GQA', False, True), ('RoPE+GQA', True, True)]


def chargpt_flags(sizes, device, seed, rope, n_kv_head, block_size, iters, batch):
    """Every flag explicit, so that equal experiments get equal keys and no default matters."""
    flags = {'model.rope': rope, 'model.n_query_head': sizes['n_query_head'], 'model.n_kv_head': n_kv_head,
             'data.block_size': block_size, 'trainer.max_iters': iters, 'trainer.device': device,
             'system.seed': seed}
    flags.update(sizes['model_flags'])
    if batch is not None:
        flags['trainer.batch_size'] = batch
    return flags


class Plan:
    """All runs of one report: two-phase runs per configuration and seed, and the 200-iteration GQA runs."""

    def __init__(self, sizes, seeds, device, code_hash):
        self.seeds = [FIRST_SEED + i for i in range(seeds)]
        self.phases = {}   # (config name, seed) -> (short run, long run)
        self.gqa = {}      # (n_kv_head, seed) -> run
        runs = {}

        def add(run):
            return runs.setdefault(run.key, run)  # equal flags: one run serves several questions
        S = sizes
        for seed in self.seeds:
            for name, rope, gqa in CONFIGS:
                kv = S['gqa_kv'] if gqa else S['n_query_head']
                short = add(Run(chargpt_flags(S, device, seed, rope, kv, S['short_block'], S['short_iters'],
                                              S['short_batch']), code_hash=code_hash))
                long = add(Run(chargpt_flags(S, device, seed, rope, kv, S['long_block'], S['long_iters'],
                                             S['long_batch']), parent=short, code_hash=code_hash))
                self.phases[name, seed] = (short, long)
            for kv in S['kv_heads']:
                self.gqa[kv, seed] = add(Run(chargpt_flags(S, device, seed, False, kv, S['short_block'],
                                                           S['gqa_iters'], S['short_batch']), code_hash=code_hash))
        self.runs = list(runs.values())  # insertion order: a parent always precedes its child


def run_worker(task, params, cache_path, log):
    """One worker.py call (reference code, own process), cached in cache_path as JSON."""
    if os.path.isfile(cache_path):
        with open(cache_path) as f:
            cached = json.load(f)
        if cached.get('params') == params:
            log('%s: cached (%s)' % (task, cache_path))
            return cached['result']
    t0 = time.time()
    env = dict(os.environ)
    env.setdefault('OMP_NUM_THREADS', '1')  # as for the training runs: one thread is faster on a shared machine
    proc = subprocess.run([sys.executable, WORKER, task, json.dumps(params)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise runs.RunFailed('%s failed (exit %d):\n%s' % (task, proc.returncode, proc.stderr[-3000:]))
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(cache_path, 'w') as f:
        json.dump({'params': params, 'result': result}, f)
    log('%s: %.1f s' % (task, time.time() - t0))
    return result


def run_experiments(sizes_name, seeds, device, out, runs_dir, jobs=1, log=print):
    sizes = get_sizes(sizes_name)
    code_hash = runs.reference_code_hash()
    plan = Plan(sizes, seeds, device, code_hash)
    os.makedirs(runs_dir, exist_ok=True)
    t0 = time.time()
    ran = runs.run_all(plan.runs, runs_dir, log, jobs)

    first = plan.seeds[0]
    samples = {}
    for question, run in (('5.1', plan.phases['RoPE', first][0]), ('5.2', plan.phases['RoPE', first][1])):
        params = {'folder': run.folder(runs_dir), 'prompt': PROMPT, 'tokens': sizes['sample_tokens'],
                  'seed': first, 'device': device, 'run': run.key}
        samples[question] = run_worker('sample', params, os.path.join(run.folder(runs_dir), 'sample.json'),
                                       lambda m, q=question: log('%s %s' % (q, m)))
    s4_params = dict(sizes['section4'], code=code_hash)
    section4 = run_worker('section4', s4_params, os.path.join(runs_dir, 'section4-%s.json' % sizes_name), log)
    speed = None
    if sizes['measure_full_speed']:
        speed = run_worker('speed', {'device': device, 'blocks': [16, 256], 'batch': 64, 'code': code_hash},
                           os.path.join(runs_dir, 'speed-%s.json' % device), log)

    results = stats.collect(plan, runs_dir)
    meta = {'sizes_name': sizes_name, 'sizes': sizes, 'full_sizes': get_sizes('full'), 'device': device,
            'seeds': plan.seeds, 'prompt': PROMPT, 'code_hash': code_hash, 'runs_dir': runs_dir,
            'configs': [c[0] for c in CONFIGS], 'speed': speed, 'n_runs': len(plan.runs), 'ran': ran}
    path = report.write(out, results, samples, section4, meta, log)
    log('report: %s (%s, %d runs trained now, %d cached)' % (
        path, format_duration(time.time() - t0), ran, len(plan.runs) - ran))
    return path


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder experiments', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', choices=('cpu', 'cuda'), default='cpu')
    ap.add_argument('--sizes', choices=('full', 'cpu', 'quick'), default='full',
                    help="full: the handout's sizes (meant for a GPU); cpu: smaller, for a CPU; quick: a smoke run")
    ap.add_argument('--quick', action='store_true', help='tiny smoke run of the whole pipeline (--sizes quick)')
    ap.add_argument('--seeds', type=int, default=None, help='seeds per experiment (default 3; 2 with --quick)')
    ap.add_argument('--out', default=None, help='report folder (default out/experiments[-SIZES])')
    ap.add_argument('--runs', default=None, help='run cache (default OUT/runs)')
    ap.add_argument('--jobs', type=int, default=1,
                    help='training runs at a time (default 1: more perturbs the attention timings of 5.5)')
    args = ap.parse_args(argv[1:])
    sizes = 'quick' if args.quick else args.sizes
    seeds = args.seeds if args.seeds is not None else (2 if sizes == 'quick' else 3)
    if seeds < 1:   # 0 used to fall back to the default silently
        print('experiments: --seeds must be at least 1 (got %d); nothing was run' % seeds, file=sys.stderr)
        return 2
    if args.device == 'cuda':   # asked before any run starts, in a subprocess (as regenerate does)
        from autograder.staff.fixtures.regenerate import cuda_problem
        problem = cuda_problem()
        if problem:
            print('experiments: --device cuda needs a CUDA GPU: %s; nothing was run' % problem, file=sys.stderr)
            return 2
    out = os.path.abspath(args.out or os.path.join(REPO_ROOT, 'out', 'experiments' if sizes == 'full'
                                                   else 'experiments-' + sizes))
    runs_dir = os.path.abspath(args.runs or os.path.join(out, 'runs'))
    try:
        run_experiments(sizes, seeds, args.device, out, runs_dir, max(1, args.jobs), log=lambda m: print(m, flush=True))
    except runs.RunFailed as e:
        print('experiments: %s' % e, file=sys.stderr)
        print('completed runs stay cached; run the same command again to continue', file=sys.stderr)
        return 1
    return 0
