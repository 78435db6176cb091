"""
End-to-end runs of reference/chargpt.py on the corpus with a tiny model: 50 iterations
lower the loss and log one entry per iteration, and --model.pretrained_folder continues a
block-16 run at block 256 (with and without RoPE) from exactly the saved weights: the course's
load_pretrained reads model.pt and config.json, grows wpe and the causal masks.
"""

import json
import math
import os
import subprocess
import sys

import pytest
import torch

import mingpt.model

REFERENCE = os.path.dirname(os.path.dirname(os.path.abspath(mingpt.model.__file__)))
CORPUS = os.path.join(os.path.dirname(REFERENCE), 'data', 'input.txt')
TINY = ['--model.model_type=None', '--model.n_layer=2', '--model.n_query_head=3', '--model.n_embd=48',
        '--trainer.device=cpu', '--trainer.batch_size=16']

pytestmark = pytest.mark.skipif(not os.path.isfile(CORPUS), reason="corpus missing: run ./setup.sh")


def run_chargpt(args):
    """Run chargpt.py in its own process (one torch thread: tiny model, shared machine)."""
    env = dict(os.environ, OMP_NUM_THREADS='1', MKL_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, os.path.join(REFERENCE, 'chargpt.py')] + args, cwd=REFERENCE,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, "chargpt failed (%d):\n%s" % (proc.returncode, proc.stderr[-3000:])
    return proc


def read_logs(work_dir):
    """The per-iteration lists chargpt.py writes, under the trainer's names."""
    import chargpt
    logs = {}
    for key, name in chargpt.LOG_FILES:
        with open(os.path.join(work_dir, name)) as f:
            logs[key] = json.load(f)
    return logs


@pytest.fixture(scope='module')
def block16_runs(tmp_path_factory):
    """50 iterations at block 16, vanilla and RoPE+GQA; their folders seed the block-256 runs."""
    runs = {}
    for name, extra in (('vanilla', []), ('rope', ['--model.rope=True', '--model.n_kv_head=1'])):
        work_dir = str(tmp_path_factory.mktemp('chargpt_%s_16' % name))
        run_chargpt(TINY + extra + ['--data.block_size=16', '--trainer.max_iters=50',
                                    '--system.work_dir=' + work_dir])
        runs[name] = (work_dir, extra)
    return runs


@pytest.mark.parametrize("name", ['vanilla', 'rope'])
def test_fifty_iterations_lower_the_loss(block16_runs, name):
    work_dir, _ = block16_runs[name]
    logs = read_logs(work_dir)
    for key in ('train_losses', 'attn_times', 'attn_mem'):
        assert len(logs[key]) == 50, "%s must have one entry per iteration, has %d" % (key, len(logs[key]))
    losses = logs['train_losses']
    first, last10 = losses[0], sum(losses[-10:]) / 10
    vocab = torch.load(os.path.join(work_dir, 'model.pt'), weights_only=True)['transformer.wte.weight'].shape[0]
    # an untrained model sits near ln(vocab) nats; 50 steps at lr 5e-4 take ~1 nat off, and
    # a model that does not learn stays within ~0.1 of where it started
    assert abs(first - math.log(vocab)) < 0.3, "initial loss %.3f should be about ln(%d)" % (first, vocab)
    assert last10 < first - 0.4, "loss did not fall: first %.3f, mean of last 10 %.3f" % (first, last10)
    # attention memory is measured with torch.cuda.memory_allocated(): on a CPU it is null, "not measured"
    assert all(t > 0 for t in logs['attn_times']) and all(m is None for m in logs['attn_mem'])


@pytest.mark.parametrize("name", ['vanilla', 'rope'])
def test_pretrained_folder_continues_at_block_256(block16_runs, tmp_path, name):
    src, extra = block16_runs[name]
    saved = torch.load(os.path.join(src, 'model.pt'), weights_only=True)
    # one step at learning rate 0 saves exactly the weights the run started from
    run_chargpt(TINY + extra + ['--data.block_size=256', '--trainer.max_iters=1', '--trainer.learning_rate=0.0',
                                '--model.pretrained_folder=' + src, '--system.work_dir=' + str(tmp_path)])
    loaded = torch.load(os.path.join(tmp_path, 'model.pt'), weights_only=True)
    assert set(loaded) == set(saved), "checkpoint keys changed: %s" % (set(loaded) ^ set(saved))
    for key, value in saved.items():
        if key == 'transformer.wpe.weight':
            assert loaded[key].shape == (256, 48), "wpe must grow to the new block size"
            assert torch.equal(loaded[key][:16], value), "trained position rows 0..15 must be copied"
            assert not torch.equal(loaded[key][16:32], torch.zeros(16, 48)), "new rows must be initialised"
        elif key.endswith('.attn.bias'):
            assert loaded[key].shape == (1, 1, 256, 256), "the causal mask grows to the new block size"
            assert torch.equal(loaded[key][..., :16, :16], value), "the old mask fills the upper-left corner"
            assert torch.equal(loaded[key][0, 0], torch.tril(torch.ones(256, 256))), "and stays causal"
        else:
            assert torch.equal(loaded[key], value), "%s was not loaded from the pretrained folder" % key
    assert ('transformer.wpe.weight' in saved) == (name == 'vanilla'), "RoPE models carry no wpe"
    # the continued run starts from the trained loss, not from ln(vocab) ~ 4.3
    start = read_logs(str(tmp_path))['train_losses'][0]
    trained = sum(read_logs(src)['train_losses'][-10:]) / 10
    assert start < trained + 0.3, "block-256 run starts at %.3f, block-16 run ended at %.3f" % (start, trained)


def test_in_process_load_pretrained(block16_runs):
    # the same loading, called directly: h.0 weights equal, wpe rows 0..15 copied
    from mingpt.model import GPT
    from ref_formulas import attention_config
    src, _ = block16_runs['vanilla']
    saved = torch.load(os.path.join(src, 'model.pt'), weights_only=True)
    cfg = attention_config(n_embd=48, n_query_head=3, block_size=256)
    cfg.vocab_size = saved['transformer.wte.weight'].shape[0]
    model = GPT(cfg)
    model.load_pretrained(src)
    state = model.state_dict()
    for key in saved:
        if key.startswith('transformer.h.0.') and not key.endswith('.attn.bias'):
            assert torch.equal(state[key], saved[key]), key
    assert torch.equal(state['transformer.h.0.attn.bias'][..., :16, :16], saved['transformer.h.0.attn.bias'])
    assert torch.equal(state['transformer.wpe.weight'][:16], saved['transformer.wpe.weight'])
    # the course's loader copies what both models have: a RoPE model (no wpe) takes everything else
    cfg.rope = True
    rope_model = GPT(cfg)
    rope_model.load_pretrained(src)
    assert torch.equal(rope_model.state_dict()['transformer.h.1.mlp.c_fc.weight'],
                       saved['transformer.h.1.mlp.c_fc.weight'])


def test_training_on_a_cpu_runs_no_memory_tracker(monkeypatch):
    # 5.5 times the attention: on a CPU nothing may run inside it but the attention (the course's
    # torch.cuda.memory_allocated() region measures nothing there and costs nothing)
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    from mingpt.model import GPT
    from mingpt.trainer import Trainer
    from mingpt.utils import _CpuAllocationTracker
    from ref_formulas import attention_config
    made = []
    monkeypatch.setattr(_CpuAllocationTracker, '__init__', lambda self: made.append(self))
    cfg = attention_config(n_embd=48, n_query_head=6, block_size=16)
    cfg.n_layer, cfg.n_kv_head, cfg.rope, cfg.vocab_size = 2, 2, True, 11
    model = GPT(cfg)
    modes = []
    for block in model.transformer.h:
        block.attn.register_forward_pre_hook(lambda module, args: modes.append(_get_current_dispatch_mode()))
    tcfg = Trainer.get_default_config()
    tcfg.device, tcfg.max_iters, tcfg.batch_size = 'cpu', 2, 4
    data = [(torch.arange(16) % 11, (torch.arange(16) + 1) % 11)] * 8
    trainer = Trainer(tcfg, model, data)
    trainer.run()
    assert made == [] and modes == [None] * 4
    assert all(math.isnan(m) for m in trainer.attn_mem) and all(t > 0 for t in trainer.attn_times)
