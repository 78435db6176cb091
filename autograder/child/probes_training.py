"""
Probes of the training path and of the handout's train-then-extend workflow, run inside the
sandbox like those of probes.py: they record plain arrays and judge nothing.

- gradients: forward + a loss the probe computes itself (cross-entropy of the student's logits,
  never the loss GPT.forward returns) + backward on fixed weights; every parameter's gradient
  by the handout's names, and what RotaryPositionalEmbeddings holds as parameters or state.
- load-pretrained: a block-16 model saved the way chargpt.py saves it, loaded into a block-256
  model by the student's own GPT.load_pretrained, then a forward at T=256.
- loss-curve: training with the handout's Trainer; the per-iteration losses (staff plots) and
  the trained model's logits on held-out text chosen by the harness, which computes the loss.
"""

import os
import re
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

from . import adapter
from .configs import MODEL_CONFIGS


def _name(s):
    """A parameter or buffer name as an array key: plain characters only, bounded length."""
    return re.sub(r'[^A-Za-z0-9_.]', '_', str(s))[:200]


def _rope_holdings(module, prefix=''):
    """{'param/<name>': numel, 'state/<name>': numel} of every RotaryPositionalEmbeddings inside `module`."""
    rope_cls = getattr(adapter.model_module(), 'RotaryPositionalEmbeddings', None)
    out = {}
    for mname, m in module.named_modules():
        if rope_cls is None or not isinstance(m, rope_cls):
            continue
        full = prefix + mname + ('.' if mname else '')
        for pname, p in m.named_parameters():
            out['param/' + _name(full + pname)] = np.array(p.numel(), dtype=np.int64)
        for sname, t in m.state_dict().items():
            out['state/' + _name(full + sname)] = np.array(t.numel() if isinstance(t, torch.Tensor) else 0,
                                                           dtype=np.int64)
    return out


def probe_gradients(ctx):
    m = ctx.profile['model']
    idx, targets = ctx.t('model/idx'), ctx.t('model/targets')
    for label, kv, rope in MODEL_CONFIGS:
        def run(label=label, kv=kv, rope=rope):
            model = ctx.model(label, kv or m['n_query_head'], rope).train()  # dropout p = 0: train mode is exact
            logits = adapter.call_gpt(model, idx)[0]                        # (B, T, vocab)
            # the probe's own loss: a student's loss (scaled, detached) must not change the gradients judged
            if isinstance(logits, torch.Tensor) and logits.requires_grad:
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), targets.reshape(-1))
                loss.backward()
            grads = adapter.gpt_gradients(model, ctx.state(label), m['n_embd'])
            out = {k: g for k, g in grads.items() if g is not None}   # a missing key: that parameter got no gradient
            if rope:
                out.update({'rope/' + k: v for k, v in _rope_holdings(model).items()})
            return out
        ctx.case(label, run)

    def standalone():
        rope = adapter.rope(8).to(ctx.device)
        rope(ctx.t('rope-cache/x8'))   # the tables exist only after a forward when built lazily
        return dict(_rope_holdings(rope, 'RotaryPositionalEmbeddings(8).'), modules=np.array(1))
    ctx.case('rope-module', standalone)


def probe_load_pretrained(ctx):
    m, wf = ctx.profile['model'], ctx.profile['workflow']
    short, long_ = wf['block_from'], wf['block_to']
    warm, idx = ctx.t('workflow/idx_short'), ctx.t('workflow/idx')
    for label, kv, rope in MODEL_CONFIGS:
        stage = {'n': 0}

        def config(block, kv=kv, rope=rope):
            return adapter.make_config(n_layer=m['n_layer'], n_embd=m['n_embd'], n_query_head=m['n_query_head'],
                                       n_kv_head=kv or m['n_query_head'], vocab_size=m['vocab_size'],
                                       block_size=block, rope=rope)

        def run(label=label, kv=kv, rope=rope, stage=stage):
            state = ctx.state(label)
            if 'transformer.wpe.weight' in state:   # the fixed weights are sized for the model test's block
                state['transformer.wpe.weight'] = state['transformer.wpe.weight'][:short]
            model = adapter.gpt(config(short))
            ctx.note(*adapter.load_gpt(model, state, m['n_embd']))
            model = model.to(ctx.device).train()
            adapter.call_gpt(model, warm)            # training at block 16 builds every lazy cache at T = 16
            model.eval()
            folder = tempfile.mkdtemp(prefix='pretrained-')   # under TMPDIR, the job's writable home
            _save_run(folder, model, config(short))           # model.pt and config.json, as chargpt.py writes them
            # buffers saved besides the parameters, named in a note if loading fails (arrays may only be
            # the reference's keys, so this travels as text)
            saved = ['%s %s' % (k, tuple(v.shape)) for k, v in model.state_dict().items()
                     if isinstance(v, torch.Tensor) and k not in dict(model.named_parameters())]
            stage['n'], stage['saved'] = 1, saved
            big = adapter.gpt(config(long_))
            if not hasattr(big, 'load_pretrained'):
                raise adapter.AdapterError("GPT has no load_pretrained(folder); keep the handout's method")
            big.load_pretrained(folder)              # as chargpt.py does for --model.pretrained_folder
            stage['n'] = 2
            big = big.to(ctx.device).eval()
            wpe = getattr(getattr(big, 'transformer', None), 'wpe', None)
            if isinstance(wpe, torch.nn.Embedding) and wpe.weight.shape[0] == long_:
                with torch.no_grad():                # rows past block 16 keep a random init: fix them
                    wpe.weight[short:].copy_(ctx.t('workflow/wpe_tail')[:long_ - short])
            with torch.no_grad():
                logits = adapter.call_gpt(big, idx)[0]   # (1, 256, vocab)
            stage['n'] = 3
            return {'logits': logits}
        ctx.case(label, run)
        ctx.arrays['%s/stage' % label] = np.array(stage['n'], dtype=np.int64)
        if stage['n'] == 1 and stage.get('saved'):
            ctx.note('%s %s: model.pt holds buffers besides the parameters: %s'
                     % (SAVED_NOTE, label, ', '.join(stage['saved'][:4])))


SAVED_NOTE = 'load-pretrained'   # the judge finds the buffer list by this prefix


def _save_run(folder, model, model_config):
    """
    What chargpt.py leaves in its work dir for --model.pretrained_folder: model.pt (the
    state_dict) and config.json (the whole configuration, nested system/data/model/trainer,
    indented by 4, with data.block_size the block size trained at). The course's given
    load_pretrained reads both.
    """
    import json
    import chargpt
    cfg = chargpt.get_config()
    cfg.model = model_config
    cfg.data.block_size = model_config.block_size
    with open(os.path.join(folder, 'config.json'), 'w') as f:
        f.write(json.dumps(cfg.to_dict(), indent=4))
    torch.save(model.state_dict(), os.path.join(folder, 'model.pt'))


def probe_loss_curve(ctx):
    import chargpt
    from mingpt.trainer import Trainer
    from mingpt.utils import set_seed
    lc = ctx.profile['loss_curve']
    with open(os.path.join(ctx.scratch, 'input.txt')) as f:
        text = f.read()
    heldout = ctx.t('heldout/idx') if 'heldout/idx' in ctx.inputs.files else None
    init = ctx.state('lc-init')
    for seed in ctx.job.get('loss_curve_seeds', [lc['student_seed']]):
        def run(seed=seed):
            set_seed(seed)
            data_cfg = chargpt.CharDataset.get_default_config()
            data_cfg.block_size = lc['block_size']
            dataset = chargpt.CharDataset(data_cfg, text)
            cfg = adapter.make_config(n_layer=lc['n_layer'], n_embd=lc['n_embd'], n_query_head=lc['n_query_head'],
                                      n_kv_head=lc['n_kv_head'], rope=lc['rope'], vocab_size=dataset.get_vocab_size(),
                                      block_size=lc['block_size'])
            model = adapter.gpt(cfg)
            if init:   # every submission starts from the same weights (inputs.training_init)
                ctx.note(*adapter.load_gpt(model, init, lc['n_embd']))
            tcfg = Trainer.get_default_config()
            tcfg.device, tcfg.max_iters, tcfg.batch_size = ctx.profile['device'], lc['iters'], lc['batch_size']
            tcfg.learning_rate, tcfg.num_workers = lc['learning_rate'], 0
            trainer = Trainer(tcfg, model, dataset)
            losses = []
            trainer.add_callback('on_batch_end', lambda t: losses.append(float(t.loss.item())))
            trainer.run()
            out = {'': np.array(losses, dtype=np.float64)}   # key 'seed<N>': the curve, for staff plots only
            if heldout is not None and seed == lc['student_seed']:   # the reference's run at the same seed is the yardstick
                model.eval()
                with torch.no_grad():   # logits only: the harness computes the loss that is graded
                    out['heldout_logits'] = adapter.call_gpt(model, heldout)[0].float()
            return out
        ctx.case('seed%d' % seed, run)
