"""
Probes of the training path (judge/areas/training.py), run inside the sandbox like every probe: they
record plain arrays and judge nothing.

- gradients: forward + a loss the probe computes itself (cross-entropy of the student's logits,
  never the loss GPT.forward returns) + backward on fixed weights; every parameter's gradient
  by the handout's names (nothing else: the student's other parameters and buffers are theirs).
- loss-curve: training with the handout's Trainer from fixed initial weights; the per-iteration
  losses (staff plots), the gradients of the first step (judged by 10.2: the gradients the
  training really used) and the trained model's logits on held-out text chosen by the harness.
"""

import os

import numpy as np
import torch
import torch.nn.functional as F

from . import adapter
from autograder.contract.configs import MODEL_CONFIGS

# held-out sequences whose logits at the initial weights show the model's own forward (judge/set_aside.py: a failed
# part is set aside in 10.1 only where that forward is wrong); 8 x 16 positions are enough to see any part's bug
INITIAL_SEQS = 8


def probe_gradients(ctx):
    m = ctx.profile['model']
    idx, targets = ctx.t('model/idx'), ctx.t('model/targets')
    for label, kv, rope in MODEL_CONFIGS:
        def compute(label=label, kv=kv, rope=rope):
            model = ctx.model(label, kv or m['n_query_head'], rope).train()  # dropout p = 0: train mode is exact
            logits = adapter.call_gpt(model, idx)[0]                        # (B, T, vocab)
            # the probe's own loss: a student's loss (scaled, detached) must not change the gradients judged
            if isinstance(logits, torch.Tensor) and logits.requires_grad:
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))
                loss.backward()
            grads = adapter.gpt_gradients(model, ctx.state(label), m['n_embd'])
            out = {k: g for k, g in grads.items() if g is not None}   # a missing key: that parameter got no gradient
            out['logits'] = logits   # the same model's forward: where it is right, a failed part is not set aside here
            return out
        ctx.case(label, compute)


def probe_loss_curve(ctx):
    import chargpt
    from mingpt.trainer import Trainer
    from mingpt.utils import set_seed
    lc = ctx.profile['loss_curve']
    with open(os.path.join(ctx.scratch, 'input.txt')) as f:
        text = f.read()
    heldout = ctx.t('heldout/idx') if 'heldout/idx' in ctx.inputs.files else None
    n_kv_head, rope, init_label = lc['n_kv_head'], lc['rope'], 'lc-init'
    instead = ctx.gqa_set_aside(n_kv_head, rope, lc['n_query_head'])   # the student's GQA set aside (set_aside.py)
    if instead == 'gqa':   # train the MHA model instead
        n_kv_head, init_label = lc['n_query_head'], 'lc-init-mha'
    elif instead == 'gqa_rope':   # train their GQA without RoPE (positions from wpe)
        rope, init_label = False, 'lc-init-norope'
    init = ctx.state(init_label)
    for seed in ctx.job.get('loss_curve_seeds', [lc['student_seed']]):
        first = {}   # the student's seed: the gradients of step 0 as the Trainer computed them

        def record_first_step(trainer, model, first=first):
            if trainer.iter_num != 0 or first:
                return
            try:   # after backward and clipping, before the next zero_grad: what the optimizer used
                grads = adapter.gpt_gradients(model, init, lc['n_embd'])
                first['grads'] = {k: g.detach().clone() for k, g in grads.items() if g is not None}
            except Exception as e:  # reported as the error of case seed<N>/step0
                first['error'] = e

        def compute(seed=seed, first=first):
            set_seed(seed)
            data_cfg = chargpt.CharDataset.get_default_config()
            data_cfg.block_size = lc['block_size']
            dataset = chargpt.CharDataset(data_cfg, text)
            cfg = adapter.make_config(n_layer=lc['n_layer'], n_embd=lc['n_embd'], n_query_head=lc['n_query_head'],
                                      n_kv_head=n_kv_head, rope=rope, vocab_size=dataset.get_vocab_size(),
                                      block_size=lc['block_size'])
            if init and heldout is not None and seed == lc['student_seed']:
                out = {'initial_logits': _initial_logits(cfg, init, heldout, lc['n_embd'])}
            else:
                out = {}
            set_seed(seed)   # as before that forward: the training sees the same random state with or without it
            model = adapter.gpt(cfg)
            if init:   # every submission starts from the same weights (inputs.training_init)
                ctx.note(*adapter.load_gpt(model, init, lc['n_embd']))
            tcfg = Trainer.get_default_config()
            tcfg.device, tcfg.max_iters, tcfg.batch_size = ctx.profile['device'], lc['iters'], lc['batch_size']
            tcfg.learning_rate, tcfg.num_workers = lc['learning_rate'], 0
            trainer = Trainer(tcfg, model, dataset)
            losses = []
            trainer.add_callback('on_batch_end', lambda t: losses.append(float(t.loss.item())))
            if init and seed == lc['student_seed']:
                trainer.add_callback('on_batch_end', lambda t: record_first_step(t, model))
            trainer.run()
            out[''] = np.array(losses, dtype=np.float64)   # key 'seed<N>': the curve, for staff plots only
            if heldout is not None and seed == lc['student_seed']:   # the reference's run at this seed is the yardstick
                model.eval()
                with torch.no_grad():   # logits only: the harness computes the loss that is graded
                    out['heldout_logits'] = adapter.call_gpt(model, heldout)[0].float()
            return out
        ctx.case('seed%d' % seed, compute)
        if init and seed == lc['student_seed'] and ('seed%d' % seed) not in ctx.info.get('case_errors', {}):
            ctx.case('seed%d/step0' % seed, lambda first=first: _first_step(first))


def _initial_logits(cfg, init, heldout, n_embd):
    """The logits of a model of its own, at the initial weights, before any training (judge/set_aside.py sets a failed
    part aside in 10.1 only where this forward is wrong): the trained model's first forward stays inside the Trainer,
    so a part that makes parameters lazily at its first call trains exactly as it would without this check."""
    model = adapter.gpt(cfg)
    adapter.load_gpt(model, init, n_embd)
    model.eval()
    with torch.no_grad():
        return adapter.call_gpt(model, heldout[:INITIAL_SEQS])[0].float()


def _first_step(first):
    if 'error' in first:
        raise first['error']
    if 'grads' not in first:
        raise adapter.AdapterError('no_training_step')
    return first['grads']
