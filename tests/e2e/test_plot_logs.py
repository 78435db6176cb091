"""
The handout's plot_logs.py on real run folders, made by the real `python chargpt.py` of the
template (with the reference's model.py, as a student who finished): a run continued with
--model.pretrained_folder extends its parent's curve (also after the folders were moved)
and the 16 -> 256 switch is marked; runs that cannot be compared are refused with the
setting that differs; attention times are read per n_kv_head from the resolved config.json;
a missing matplotlib gives one clear line. The data functions need no matplotlib; only the
drawing test is skipped without it.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest

from autograder import DATA_FILE, REFERENCE_DIR, TEMPLATE_DIR

pytestmark = pytest.mark.skipif(not os.path.isfile(DATA_FILE), reason='corpus missing: run ./setup.sh')

TINY = ['--model.model_type=None', '--model.n_layer=1', '--model.n_query_head=3', '--model.n_embd=48',
        '--trainer.device=cpu', '--trainer.batch_size=4']


def _load_plot_logs():
    spec = importlib.util.spec_from_file_location('plot_logs', os.path.join(TEMPLATE_DIR, 'plot_logs.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plot_logs = _load_plot_logs()


def _env():
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'HW1_DATA')}
    env.update(OMP_NUM_THREADS='1', PYTHONDONTWRITEBYTECODE='1')
    return env


def _chargpt(hw1, args):
    proc = subprocess.run([sys.executable, 'chargpt.py'] + TINY + args, cwd=str(hw1), env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]


def _plot(hw1, args):
    return subprocess.run([sys.executable, 'plot_logs.py'] + args, cwd=str(hw1), env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=120)


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """In a template copy: out/p16 (4 iterations at N=16) and out/p32 continuing it at N=32; the same with RoPE;
    out/kv1 (n_kv_head=1, 3 iterations at N=16), as a student runs them."""
    hw1 = tmp_path_factory.mktemp('runs') / 'hw1'
    shutil.copytree(TEMPLATE_DIR, str(hw1), ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    shutil.copy(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), str(hw1 / 'mingpt' / 'model.py'))
    os.symlink(DATA_FILE, str(hw1 / 'input.txt'))
    for prefix, extra in (('p', []), ('r', ['--model.rope=True'])):
        _chargpt(hw1, extra + ['--trainer.max_iters=4', '--system.work_dir=out/%s16' % prefix])
        _chargpt(hw1, extra + ['--trainer.max_iters=3', '--data.block_size=32', '--model.pretrained_folder=out/%s16'
                               % prefix, '--system.work_dir=out/%s32' % prefix])
    _chargpt(hw1, ['--trainer.max_iters=3', '--model.n_kv_head=1', '--system.work_dir=out/kv1'])
    return hw1


def _losses(folder):
    with open(os.path.join(str(folder), 'train_losses.json')) as f:
        return json.load(f)


def test_continuation_extends_its_parents_curve_and_marks_the_switch(runs, monkeypatch):
    monkeypatch.chdir(runs)  # where chargpt ran: pretrained_folder=out/p16 is relative to it
    curves = plot_logs.loss_curves(['out/p16', 'out/p32', 'out/r16', 'out/r32'])
    out = runs / 'out'
    assert curves == [('p16+p32', list(range(7)), _losses(out / 'p16') + _losses(out / 'p32'), [(4, 16, 32)]),
                      ('r16+r32', list(range(7)), _losses(out / 'r16') + _losses(out / 'r32'), [(4, 16, 32)])]


def test_moved_runs_are_joined_by_folder_name(runs, tmp_path, monkeypatch):
    for name in ('p16', 'p32'):
        shutil.copytree(str(runs / 'out' / name), str(tmp_path / 'downloaded' / name))
    monkeypatch.chdir(tmp_path)
    curves = plot_logs.loss_curves(['downloaded/p32', 'downloaded/p16'])
    assert [(label, xs, switches) for label, xs, _, switches in curves] == [('p16+p32', list(range(7)), [(4, 16, 32)])]
    # without its parent the continuation is drawn on its own, from 0, with nothing to mark
    assert [(label, xs, s) for label, xs, _, s in plot_logs.loss_curves(['downloaded/p32'])] == [('p32', [0, 1, 2], [])]


def test_runs_it_cannot_compare_are_refused_with_what_differs(runs):
    # a 16 -> 32 chain beside a run at 16 only: another block-size schedule
    proc = _plot(runs, ['loss', 'out/p16', 'out/p32', 'out/kv1', '-o', 'mixed.png'])
    assert proc.returncode == 2 and proc.stdout == '' and not (runs / 'mixed.png').exists()
    lines = proc.stderr.strip().splitlines()
    assert lines == ['error: these runs cannot share one plot: their block-size schedule differs (p16+p32: 4 at block '
                     '16, then 3 at block 32; kv1: 3 at block 16); plot them separately, or rerun them with the same '
                     'settings'], proc.stderr
    # attention times of runs at other block sizes do not measure n_kv_head alone
    proc = _plot(runs, ['attn', 'out/kv1', 'out/p32', '-o', 'mixed.png'])
    assert proc.returncode == 2 and 'their data.block_size differs (kv1: 16; p32: 32)' in proc.stderr
    proc = _plot(runs, ['attn', 'out/kv1', 'out/r16', '-o', 'mixed.png'])
    assert proc.returncode == 2 and 'their model.rope differs' in proc.stderr


def test_attention_times_per_n_kv_head(runs):
    points = plot_logs.attention_times([str(runs / 'out' / 'p16'), str(runs / 'out' / 'kv1')])
    # config.json records the resolved n_kv_head: 3 (= n_query_head) for the run that did not set it
    mean_ms = {}
    for name in ('kv1', 'p16'):
        with open(str(runs / 'out' / name / 'attention_computation_time.json')) as f:
            times = json.load(f)
        mean_ms[name] = 1000.0 * sum(times) / len(times)
    assert points == [(1, mean_ms['kv1'], 'kv1'), (3, mean_ms['p16'], 'p16')]
    assert all(ms > 0 for _, ms, _ in points)


def test_not_a_run_folder_is_one_clear_error(runs, tmp_path):
    proc = _plot(runs, ['loss', str(tmp_path), '-o', str(tmp_path / 'x.png')])
    assert proc.returncode == 2 and proc.stderr.strip() == ('error: %s has no config.json: is it a run folder of '
                                                            'chargpt.py (--system.work_dir)?' % tmp_path)


def test_missing_matplotlib_says_how_to_install(runs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # import matplotlib now raises ImportError
    with pytest.raises(SystemExit) as exit_info:
        plot_logs.main(['loss', str(runs / 'out' / 'p16'), '-o', str(tmp_path / 'loss.png')])
    assert 'pip install matplotlib' in str(exit_info.value.code)


def test_drawing(runs):
    pytest.importorskip('matplotlib')
    for args in (['loss', 'out/p16', 'out/p32', 'out/r16', 'out/r32'], ['attn', 'out/p16', 'out/kv1']):
        proc = _plot(runs, args + ['-o', args[0] + '.png'])
        assert proc.returncode == 0 and proc.stdout.strip() == 'wrote %s.png' % args[0], proc.stderr
        assert (runs / (args[0] + '.png')).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_count_axes_show_whole_numbers(runs, tmp_path):
    # n_kv_head (1 and 3 here) and iterations are counts: no 1.5 or 2.5 tick between them
    pytest.importorskip('matplotlib')
    fig = plot_logs.plot_attention_times([str(runs / 'out' / 'p16'), str(runs / 'out' / 'kv1')],
                                         str(tmp_path / 'attn.png'))
    ticks = fig.axes[0].get_xticks()
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
    fig = plot_logs.plot_losses([str(runs / 'out' / 'p16')], str(tmp_path / 'loss.png'))
    assert all(float(t).is_integer() for t in fig.axes[0].get_xticks())
