"""Pure helpers of `python -m autograder experiments`: cache keys, completeness, ETA, statistics."""

import json
import os

import pytest

from autograder.staff.experiments.main import CONFIGS, Plan, chargpt_flags, get_sizes
from autograder.staff.experiments.runs import Progress, Run, is_complete, run_key
from autograder.staff.experiments.stats import (count_below, format_spread, loglog_slope, moving_average,
                                                phase_numbers, spread, window_mean)

FLAGS = {'model.rope': True, 'model.n_query_head': 6, 'model.n_kv_head': 2, 'data.block_size': 16,
         'trainer.max_iters': 600, 'trainer.device': 'cpu', 'system.seed': 3407}


def test_run_key_ignores_flag_order_but_not_values_parent_or_code():
    key = run_key(FLAGS, None, 'abc')
    assert key == run_key(dict(reversed(list(FLAGS.items()))), None, 'abc')
    assert len(key) == 12
    others = {run_key(dict(FLAGS, **{'system.seed': 3408}), None, 'abc'),
              run_key(dict(FLAGS, **{'data.block_size': 256}), None, 'abc'),
              run_key(FLAGS, 'parentkey', 'abc'),
              run_key(FLAGS, None, 'abd')}
    assert key not in others and len(others) == 4


def test_long_phase_argv_continues_its_parent_folder(tmp_path):
    short = Run(FLAGS)
    long = Run(dict(FLAGS, **{'data.block_size': 256}), parent=short)
    argv = long.argv(str(tmp_path))
    assert '--data.block_size=256' in argv and '--model.rope=True' in argv and '--trainer.device=cpu' in argv
    assert '--model.pretrained_folder=%s' % short.folder(str(tmp_path)) in argv
    assert '--system.work_dir=%s' % long.folder(str(tmp_path)) in argv


def _write_logs(folder, losses):
    """The three per-iteration lists chargpt.py writes (the course's file names); memory not measured (CPU)."""
    for name, values in (('train_losses.json', losses), ('attention_computation_time.json', [0.1] * len(losses)),
                         ('attention_computation_memory.json', [None] * len(losses))):
        with open(os.path.join(folder, name), 'w') as f:
            json.dump(values, f)


def test_a_run_is_complete_only_with_every_iteration_and_its_model(tmp_path):
    run = Run(dict(FLAGS, **{'trainer.max_iters': 3}))
    folder = run.folder(str(tmp_path))
    os.makedirs(folder)
    assert not is_complete(run, str(tmp_path))
    _write_logs(folder, [4.2, 4.1])  # interrupted
    open(os.path.join(folder, 'model.pt'), 'wb').close()
    assert not is_complete(run, str(tmp_path))
    _write_logs(folder, [4.2, 4.1, 4.0])
    assert is_complete(run, str(tmp_path))
    os.remove(os.path.join(folder, 'model.pt'))
    assert not is_complete(run, str(tmp_path))


def test_plan_shares_equal_runs_and_orders_parents_first():
    sizes = get_sizes('quick')  # gqa_iters == short_iters: 5.5's kv=2 and kv=6 runs are 5.7's first phases
    plan = Plan(sizes, 2, 'cpu', 'code')
    per_seed = 2 * len(CONFIGS) + 2  # two phases per configuration, plus n_kv_head 1 and 3
    assert len(plan.runs) == 2 * per_seed
    assert plan.gqa[6, 3407] is plan.phases['vanilla', 3407][0]
    assert plan.gqa[2, 3407] is plan.phases['GQA', 3407][0]
    seen = set()
    for run in plan.runs:
        assert run.parent is None or run.parent.key in seen
        seen.add(run.key)
    full = Plan(get_sizes('full'), 1, 'cuda', 'code')
    assert len(full.runs) == 2 * len(CONFIGS) + 4  # 200-iteration runs differ from 600-iteration ones
    short, long = full.phases['RoPE+GQA', 3407]
    assert (short.flags['model.n_kv_head'], short.flags['model.rope'], short.block_size,
            short.iters) == (2, True, 16, 600)
    assert (long.block_size, long.iters, long.parent) == (256, 600, short)
    assert chargpt_flags(get_sizes('full'), 'cuda', 1, False, 6, 16, 200, None) == {
        'model.rope': False, 'model.n_query_head': 6, 'model.n_kv_head': 6, 'data.block_size': 16,
        'trainer.max_iters': 200, 'trainer.device': 'cuda', 'system.seed': 1}


def test_eta_scales_by_iterations_and_block_size():
    a, b, c = (Run(dict(FLAGS, **{'data.block_size': blk, 'trainer.max_iters': n}))
               for blk, n in ((16, 100), (16, 50), (64, 50)))
    progress = Progress()
    assert progress.eta([b, c]) is None  # nothing measured yet
    progress.record(a, 10.0)
    assert progress.estimate(b) == pytest.approx(5.0)
    assert progress.estimate(c) == pytest.approx(20.0)  # 4x the block, linear guess
    assert progress.eta([b, c]) == pytest.approx(25.0)


def test_statistics_of_seeds():
    s = spread([2.5, 2.7, 2.6])
    assert (s['mean'], s['std'], s['min'], s['max'], s['n']) == (pytest.approx(2.6), pytest.approx(0.1), 2.5, 2.7, 3)
    assert format_spread(s) == '2.600 ± 0.100 (2.500–2.700)'
    assert format_spread(spread([1.25])) == '1.250 (1 seed)'
    assert count_below({1: 2.0, 2: 3.0, 3: 1.0}, {1: 2.5, 2: 2.9, 3: 1.5, 4: 0.0}) == (2, 3)
    assert moving_average([1.0, 2.0, 3.0, 4.0], 2) == [1.0, 1.5, 2.5, 3.5]
    assert window_mean([1.0, 2.0, 3.0, 4.0, 5.0], 4, 2) == 3.5
    assert loglog_slope([1, 2, 4, 8], [3, 12, 48, 192]) == pytest.approx(2.0)
    assert loglog_slope([256, 512], [7.0, 7.0]) == pytest.approx(0.0)


def test_phase_numbers_find_the_jump_at_the_switch():
    # phase 1: 4 iterations ending at 2.0; phase 2 starts at 3.0 (vanilla-like) or 2.1 (RoPE-like)
    curves = {'vanilla': {1: [4.0, 3.0, 2.0, 2.0, 3.0, 3.0, 2.5, 2.2]},
              'RoPE': {1: [4.0, 3.0, 2.0, 2.0, 2.1, 2.1, 2.0, 1.9]}}
    n = phase_numbers(curves, short_iters=4, window=2)
    assert n['vanilla']['end_short'][1] == 2.0 and n['vanilla']['after_switch'][1] == 3.0
    assert n['vanilla']['jump'][1] == pytest.approx(1.0) and n['RoPE']['jump'][1] == pytest.approx(0.1)
    assert n['RoPE']['final'][1] == pytest.approx(1.95)
    assert count_below(n['RoPE']['final'], n['vanilla']['final']) == (1, 1)
