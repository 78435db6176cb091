"""
The handout's plot_logs.py (student_template/hw1/plot_logs.py) on real run folders of the
reference chargpt.py: a run continued with --model.pretrained_folder extends its parent's
curve (also after the folders were moved), attention times are read per n_kv_head from the
resolved config.json, and a missing matplotlib gives one clear line. The data functions need
no matplotlib; only the drawing test is skipped without it.
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
        '--trainer.device=cpu', '--trainer.batch_size=4', '--data.input_file=' + DATA_FILE]
# the reference chargpt with its 500-character samples cut to 5: only the run folders matter here
DRIVER = ('import sys\n'
          'sys.path.insert(0, %r)\n'
          'import mingpt.model as m\n'
          'full = m.GPT.generate\n'
          'm.GPT.generate = lambda self, idx, n, **kw: full(self, idx, min(n, 5), **kw)\n'
          'import chargpt\n'
          'sys.exit(chargpt.main(sys.argv[1:]))\n' % REFERENCE_DIR)


def _load_plot_logs():
    spec = importlib.util.spec_from_file_location('plot_logs', os.path.join(TEMPLATE_DIR, 'plot_logs.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


plot_logs = _load_plot_logs()


def _chargpt(cwd, args):
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'HW1_DATA')}
    env.update(OMP_NUM_THREADS='1', PYTHONDONTWRITEBYTECODE='1')
    proc = subprocess.run([sys.executable, '-c', DRIVER] + TINY + args, cwd=str(cwd), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """out/p16 (4 iterations at N=16), out/p32 continuing it at N=32, out/kv1 (n_kv_head=1), as a student runs them."""
    root = tmp_path_factory.mktemp('runs')
    _chargpt(root, ['--trainer.max_iters=4', '--system.work_dir=out/p16'])
    _chargpt(root, ['--trainer.max_iters=3', '--data.block_size=32', '--model.pretrained_folder=out/p16',
                    '--system.work_dir=out/p32'])
    _chargpt(root, ['--trainer.max_iters=3', '--model.n_kv_head=1', '--system.work_dir=out/kv1'])
    return root


def _logs(folder):
    with open(os.path.join(str(folder), 'train_logs.json')) as f:
        return json.load(f)


def test_continuation_extends_its_parents_curve(runs, monkeypatch):
    monkeypatch.chdir(runs)  # where chargpt ran: pretrained_folder=out/p16 is relative to it
    curves = plot_logs.loss_curves(['out/p16', 'out/p32', 'out/kv1'])
    joined = _logs(runs / 'out' / 'p16')['train_losses'] + _logs(runs / 'out' / 'p32')['train_losses']
    assert curves == [('p16+p32', list(range(7)), joined),
                      ('kv1', [0, 1, 2], _logs(runs / 'out' / 'kv1')['train_losses'])]


def test_moved_runs_are_joined_by_folder_name(runs, tmp_path, monkeypatch):
    for name in ('p16', 'p32'):
        shutil.copytree(str(runs / 'out' / name), str(tmp_path / 'downloaded' / name))
    monkeypatch.chdir(tmp_path)
    curves = plot_logs.loss_curves(['downloaded/p32', 'downloaded/p16'])
    assert [(label, xs) for label, xs, _ in curves] == [('p16+p32', list(range(7)))]
    # without its parent the continuation is drawn on its own, from 0
    assert [(label, xs) for label, xs, _ in plot_logs.loss_curves(['downloaded/p32'])] == [('p32', [0, 1, 2])]


def test_attention_times_per_n_kv_head(runs):
    points = plot_logs.attention_times([str(runs / 'out' / 'p16'), str(runs / 'out' / 'kv1')])
    # config.json records the resolved n_kv_head: 3 (= n_query_head) for the run that did not set it
    mean_ms = {name: 1000.0 * sum(times) / len(times)
               for name, times in ((n, _logs(runs / 'out' / n)['attn_times']) for n in ('kv1', 'p16'))}
    expected = [(1, mean_ms['kv1'], 'kv1'), (3, mean_ms['p16'], 'p16')]
    assert points == expected
    assert all(ms > 0 for _, ms, _ in points)


def test_not_a_run_folder_is_one_clear_error(tmp_path, capsys):
    assert plot_logs.main(['loss', str(tmp_path), '-o', str(tmp_path / 'x.png')]) == 2
    assert 'has no config.json' in capsys.readouterr().err


def test_missing_matplotlib_says_how_to_install(runs, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)  # import matplotlib now raises ImportError
    with pytest.raises(SystemExit) as exit_info:
        plot_logs.main(['loss', str(runs / 'out' / 'p16'), '-o', str(tmp_path / 'loss.png')])
    assert 'pip install matplotlib' in str(exit_info.value.code)


def test_drawing(runs, tmp_path):
    pytest.importorskip('matplotlib')
    for kind in ('loss', 'attn'):
        output = tmp_path / (kind + '.png')
        assert plot_logs.main([kind, str(runs / 'out' / 'p16'), str(runs / 'out' / 'kv1'), '-o', str(output)]) == 0
        assert output.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
