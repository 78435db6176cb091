"""
What a run of reference/chargpt.py leaves in its folder: the default model is the
handout's (gpt-mini at N = 16), config.json records the sizes the model really used (not
the None placeholders of the defaults), and the per-iteration lists (the course's
train_losses.json, attention_computation_time.json, attention_computation_memory.json) are
kept up to date, so that a run stopped with Ctrl-C (SIGINT) still leaves complete, equally
long lists to plot.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

import chargpt
from mingpt.model import GPT

REFERENCE = os.path.dirname(os.path.abspath(chargpt.__file__))
CORPUS = os.path.join(os.path.dirname(REFERENCE), 'data', 'input.txt')
TINY = ['--model.model_type=None', '--model.n_layer=1', '--model.n_query_head=3', '--model.n_embd=48',
        '--trainer.device=cpu', '--trainer.batch_size=8']

needs_corpus = pytest.mark.skipif(not os.path.isfile(CORPUS), reason="corpus missing: run ./setup.sh")


def test_defaults_are_the_handouts_model():
    # handout: 6 layers, h = 6 heads, N = 16, d_model = 192, d_k = 32
    config = chargpt.get_config()
    assert config.data.block_size == 16
    assert config.model.model_type == 'gpt-mini'
    config.model.vocab_size, config.model.block_size = 65, config.data.block_size
    GPT(config.model)  # fills in the sizes from model_type, as chargpt does before writing config.json
    model = config.model
    assert (model.n_layer, model.n_query_head, model.n_kv_head, model.n_embd) == (6, 6, 6, 192)
    assert model.n_embd // model.n_query_head == 32


@needs_corpus
def test_config_json_records_the_resolved_model(tmp_path, monkeypatch, capsys):
    # in process, with sampling cut to 5 tokens: only the bookkeeping is under test here
    full = GPT.generate
    monkeypatch.setattr(GPT, 'generate', lambda self, idx, n, **kw: full(self, idx, min(n, 5), **kw))
    monkeypatch.setattr(sys, 'argv', ['chargpt.py'])
    assert chargpt.main(['--trainer.max_iters=2', '--trainer.device=cpu', '--trainer.batch_size=2',
                         '--model.n_kv_head=2', '--system.work_dir=%s' % tmp_path]) == 0
    with open(tmp_path / 'config.json') as f:
        model = json.load(f)['model']
    vocab = len(set(open(CORPUS).read()))
    assert (model['n_layer'], model['n_query_head'], model['n_kv_head'], model['n_embd']) == (6, 6, 2, 192)
    assert (model['block_size'], model['vocab_size']) == (16, vocab)
    out = capsys.readouterr().out
    assert 'data has %d characters, %d unique.' % (os.path.getsize(CORPUS), vocab) in out
    if vocab != 65:  # the bundled corpus: say why the handout's 65 is not what the run shows
        assert 'the handout quotes 65 for tinyshakespeare; the model uses vocab_size=%d' % vocab in out


def _wait_for_line(proc, pattern, timeout):
    """Lines of proc's stdout up to the first containing `pattern` (fails after `timeout` s)."""
    deadline, lines = time.time() + timeout, []
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if pattern in line:
            return lines
    pytest.fail('no %r within %ds; output:\n%s' % (pattern, timeout, ''.join(lines)[-3000:]))


@needs_corpus
def _read_lists(folder):
    lists = {}
    for key, name in chargpt.LOG_FILES:
        with open(os.path.join(str(folder), name)) as f:
            lists[key] = json.load(f)
    return lists


def test_ctrl_c_leaves_usable_train_logs(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONUNBUFFERED='1')
    proc = subprocess.Popen([sys.executable, os.path.join(REFERENCE, 'chargpt.py')] + TINY +
                            ['--trainer.max_iters=100000', '--system.work_dir=%s' % tmp_path],
                            cwd=REFERENCE, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        before = ''.join(_wait_for_line(proc, 'iter 20:', timeout=240))
        # written every chargpt.LOG_EVERY iterations while the run goes on
        assert len(_read_lists(tmp_path)['train_losses']) >= 20
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, rest[-3000:]
    assert 'interrupted by Ctrl-C' in rest and 'Traceback' not in rest, rest[-3000:]
    logs = _read_lists(tmp_path)
    lengths = {key: len(values) for key, values in logs.items()}
    assert len(set(lengths.values())) == 1 and lengths['train_losses'] > 20, lengths
    assert 'wrote train_losses.json, attention_computation_time.json, attention_computation_memory.json ' \
           '(%d iterations)' % lengths['train_losses'] in rest
    # memory is measured with torch.cuda.memory_allocated(): on a CPU each figure is null, never a 0
    assert set(logs['attn_mem']) == {None} and 'attention memory is not measured on cpu' in before
    # a tiny model falls well below ln(73) ~ 4.3 within 20 iterations at lr 5e-4
    assert logs['train_losses'][-1] < logs['train_losses'][0] - 0.3
    assert not [name for name in os.listdir(tmp_path) if name.endswith('.tmp')], 'temporary file left behind'
