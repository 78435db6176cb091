"""
Probe of the handout's train-then-extend workflow (judge/areas/pretrained.py): a block-16 model saved
the way chargpt.py saves it (model.pt and config.json), loaded into a block-256 model by the
student's own GPT.load_pretrained, then a forward at T=256; in words (`facts`), the tensors whose
shapes or values tell why it failed. It records plain arrays and judges nothing.
"""

import os
import tempfile

import numpy as np
import torch

from . import adapter
from autograder.contract.configs import MODEL_CONFIGS


def _fmt(shape):
    return '(%s)' % ', '.join(str(int(n)) for n in shape)


def _tensors(module):
    return {k: v.detach().to('cpu') for k, v in module.state_dict().items() if isinstance(v, torch.Tensor)}


def _corner(big, small):
    """`big` cut to `small`'s size along every dimension (the rows of wpe, the corner of a mask), or None."""
    if big.dim() != small.dim() or any(b < s for b, s in zip(big.shape, small.shape)):
        return None
    return big[tuple(slice(0, n) for n in small.shape)]


def _shape_facts(saved, fresh, block):
    """The tensors of model.pt whose shape differs in a fresh model of `block`: what a loader must fit."""
    return ['model.pt holds %s of shape %s; a fresh block-%d model has %s' % (k, _fmt(v.shape), block,
            _fmt(fresh[k].shape)) for k, v in saved.items() if k in fresh and tuple(v.shape) != tuple(fresh[k].shape)]


def _copied_corner(v, fresh, small):
    """True when `v` holds `small` in its corner and equals `fresh` elsewhere (how a mask grows)."""
    corner = _corner(v, small)
    if corner is None or corner.dtype != small.dtype or not torch.equal(corner, small):
        return False
    outside = torch.ones(v.shape, dtype=torch.bool)
    outside[tuple(slice(0, n) for n in small.shape)] = False
    return torch.equal(v[outside], fresh[outside])


def _load_facts(saved, fresh, after, params):
    """After load_pretrained: shapes it changed, saved parameters it did not copy, buffers unlike a fresh model's."""
    facts = []
    for k, v in after.items():
        if k in fresh and tuple(v.shape) != tuple(fresh[k].shape):
            facts += [f'after load_pretrained, {k} has shape {_fmt(v.shape)}; a fresh model has {_fmt(fresh[k].shape)}']
    for k, v in saved.items():
        part = _corner(after[k], v) if k in after and k in params else None
        if part is not None and part.dtype == v.dtype and not torch.equal(part, v):
            where = '' if part.shape == after[k].shape else ' (its first %s entries)' % _fmt(v.shape)
            facts.append('after load_pretrained, %s%s is not what model.pt holds (max |difference| %.3g)'
                         % (k, where, float((part.double() - v.double()).abs().max())))
    for k, v in after.items():
        same = k in fresh and k not in params and tuple(v.shape) == tuple(fresh[k].shape) and v.dtype == fresh[k].dtype
        if same and not torch.equal(v, fresh[k]) and not (k in saved and _copied_corner(v, fresh[k], saved[k])):
            facts.append("after load_pretrained, buffer %s differs from a fresh model's" % k)
    return facts


def probe_load_pretrained(ctx):
    m, wf = ctx.profile['model'], ctx.profile['workflow']
    short, long_ = wf['block_from'], wf['block_to']
    warm, idx = ctx.t('workflow/idx_short'), ctx.t('workflow/idx')
    for label, kv, rope in MODEL_CONFIGS:
        stage, facts = {'n': 0}, []

        def config(block, kv=kv, rope=rope):
            return adapter.make_config(n_layer=m['n_layer'], n_embd=m['n_embd'], n_query_head=m['n_query_head'],
                                       n_kv_head=kv or m['n_query_head'], vocab_size=m['vocab_size'],
                                       block_size=block, rope=rope)

        def compute(label=label, stage=stage, facts=facts, config=config):
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
            saved = _tensors(model)
            stage['n'] = 1
            big = adapter.gpt(config(long_))
            fresh = {k: v.clone() for k, v in _tensors(big).items()}
            facts += _shape_facts(saved, fresh, long_)
            if not hasattr(big, 'load_pretrained'):
                raise adapter.AdapterError('no_load_pretrained')
            big.load_pretrained(folder)              # as chargpt.py does for --model.pretrained_folder
            stage['n'] = 2
            facts[:] = _load_facts(saved, fresh, _tensors(big), dict(big.named_parameters()))
            big = big.to(ctx.device).eval()
            wpe = getattr(getattr(big, 'transformer', None), 'wpe', None)
            if isinstance(wpe, torch.nn.Embedding) and wpe.weight.shape[0] == long_:
                with torch.no_grad():                # rows past block 16 keep a random init: fix them
                    wpe.weight[short:].copy_(ctx.t('workflow/wpe_tail')[:long_ - short])
            with torch.no_grad():
                logits = adapter.call_gpt(big, idx)[0]   # (1, 256, vocab)
            stage['n'] = 3
            return {'logits': logits}
        ctx.case(label, compute)
        ctx.arrays['%s/stage' % label] = np.array(stage['n'], dtype=np.int64)
        if facts:
            ctx.info.setdefault('facts', {})[label] = facts[:12]


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
