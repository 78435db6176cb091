"""
Runs INSIDE the sandbox: imports the student's mingpt/model.py, runs the probes a job asks
for on the inputs the harness wrote, and hands back plain arrays (.npz) and small JSON. It
judges nothing: every comparison happens in the harness, after this process has ended.

    python probes.py JOB_DIR      # JOB_DIR holds job.json and inputs.npz; results go to JOB_DIR/out

The scratch folder above JOB_DIR holds the handout (chargpt.py, mingpt/{trainer,utils}.py),
the student's mingpt/model.py and input.txt. Progress lines ("start ID" / "end ID") let the
harness time each probe and restart after the one that hung or killed the process.
"""

import gc
import io
import json
import os
import sys
import time
import traceback

JOB_DIR = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.getcwd()
SCRATCH = os.path.dirname(JOB_DIR)
OUT = os.path.join(JOB_DIR, 'out')
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [SCRATCH, HERE]
STDOUT_CAP = 20_000  # characters of student output kept per probe

import numpy as np  # noqa: E402
import torch  # noqa: E402

import adapter  # noqa: E402


class CappedStream(io.TextIOBase):
    """Keeps the first STDOUT_CAP characters of what student code prints; drops the rest."""

    def __init__(self):
        self.parts, self.size, self.dropped = [], 0, 0

    def writable(self):
        return True

    def write(self, s):
        s = str(s)
        keep = max(0, STDOUT_CAP - self.size)
        self.parts.append(s[:keep])
        self.size += min(len(s), keep)
        self.dropped += len(s) - min(len(s), keep)
        return len(s)

    def take(self):
        text = ''.join(self.parts) + ('\n[... %d more characters dropped]' % self.dropped if self.dropped else '')
        self.parts, self.size, self.dropped = [], 0, 0
        return text


def student_frames(tb):
    """The traceback lines that point into the student's model.py (what they can act on)."""
    frames = traceback.extract_tb(tb)
    mine = [f for f in frames if f.filename.endswith(os.path.join('mingpt', 'model.py'))]
    return ['%s line %d, in %s: %s' % ('model.py' if f in mine else os.path.basename(f.filename), f.lineno, f.name,
                                      (f.line or '').strip()) for f in (mine or frames[-3:])]


def describe_exception(e):
    kind = 'not_implemented' if isinstance(e, NotImplementedError) else 'error'
    if isinstance(e, SystemExit):
        message = 'your code called sys.exit(%r)' % (e.code,)
    else:
        message = '%s: %s' % (type(e).__name__, str(e)[:1500])
    return kind, message, student_frames(e.__traceback__)


class Context:
    def __init__(self, job):
        self.job = job
        self.profile = job['profile']
        self.device = torch.device(self.profile['device'])
        self.inputs = np.load(os.path.join(JOB_DIR, 'inputs.npz'), allow_pickle=False)
        self.arrays, self.info = {}, {}

    def t(self, key):
        return torch.from_numpy(self.inputs[key].copy()).to(self.device)

    def weights(self, label):
        prefix = 'w/%s/' % label
        return {k[len(prefix):]: torch.from_numpy(self.inputs[k].copy()) for k in self.inputs.files if k.startswith(prefix)}

    def state(self, label):
        prefix = 'model/%s/' % label
        return {k[len(prefix):]: torch.from_numpy(self.inputs[k].copy()) for k in self.inputs.files if k.startswith(prefix)}

    def case(self, name, fn):
        """Run one case; its failure is recorded and the probe goes on with the next case."""
        try:
            torch.manual_seed(0)
            out = fn()
        except BaseException as e:  # SystemExit too: student code must not end the probe
            if isinstance(e, KeyboardInterrupt):
                raise
            kind, message, frames = describe_exception(e)
            self.info.setdefault('case_errors', {})[name] = {'status': kind, 'message': message, 'where': frames}
            return
        for key, value in (out if isinstance(out, dict) else {'': out}).items():
            full = name + ('/' + key if key else '')
            if isinstance(value, torch.Tensor):
                self.arrays[full] = value.detach().to('cpu').numpy() if value.dtype != torch.bfloat16 \
                    else value.detach().float().cpu().numpy()
            elif value is not None:
                self.arrays[full] = np.asarray(value)

    def note(self, *notes):
        for n in notes:
            if n and n not in self.info.setdefault('notes', []):
                self.info['notes'].append(n)

    def attention(self, kind, label, n_kv_head, **fields):
        mod, m = self.profile['module'], adapter
        cfg = m.make_config(n_layer=1, n_embd=mod['n_embd'], n_query_head=mod['n_query_head'], n_kv_head=n_kv_head,
                            vocab_size=self.profile['model']['vocab_size'], block_size=fields.pop('block_size', mod['block_size']),
                            **fields)
        module = m.attention(kind, cfg)
        self.note(*m.load_attention(module, self.weights(label), mod['n_embd']))
        return module.to(self.device)

    def model(self, label, n_kv_head, rope):
        m = self.profile['model']
        cfg = adapter.make_config(n_layer=m['n_layer'], n_embd=m['n_embd'], n_query_head=m['n_query_head'],
                                  n_kv_head=n_kv_head, vocab_size=m['vocab_size'], block_size=m['block_size'], rope=rope)
        model = adapter.gpt(cfg)
        self.info.setdefault('has_wpe', {})[label] = any('wpe' in n for n, _ in model.named_parameters())
        self.note(*adapter.load_gpt(model, self.state(label), m['n_embd']))
        return model.to(self.device).eval()


# ----------------------------------------------------------------------------- probes

def probe_rope(ctx):
    for i, (B, nh, T, d) in enumerate(ctx.profile['rope_cases']):
        def run(i=i, d=d):
            with torch.no_grad():
                return adapter.rope(d).to(ctx.device)(ctx.t('rope/x%d' % i))
        ctx.case('d%d_T%d' % (d, T), run)


def probe_rope_cache(ctx):
    module = {}

    def call(key, dtype=None):
        def run():
            if 'm' not in module:
                module['m'] = adapter.rope(8).to(ctx.device)
            x = ctx.t(key)
            with torch.no_grad():
                y = module['m'](x)
            ctx.info.setdefault('dtypes', {})[name] = [str(x.dtype).replace('torch.', ''), str(y.dtype).replace('torch.', '')]
            return y
        return run
    for name, key in (('call0_T8', 'rope-cache/x8'), ('call1_T24', 'rope-cache/x24'), ('call2_T8', 'rope-cache/x8'),
                      ('call3_T8_float64', 'rope-cache/x8_f64'), ('call4_T8_float32', 'rope-cache/x8')):
        ctx.case(name, call(key))


def _attention_cases(ctx, kind, label_fmt, rope, kv_heads):
    x = ctx.t('attn/x')
    for kv in kv_heads:
        def run(kv=kv):
            module = ctx.attention(kind, label_fmt % kv, kv, rope=rope).eval()
            with torch.no_grad():
                y, _ = adapter.call_attention(module, x)
            return y
        ctx.case('n_kv_head=%d' % kv, run)


def probe_mha_rope(ctx):
    nh = ctx.profile['module']['n_query_head']
    _attention_cases(ctx, 'mha', 'mha-rope%.0s', True, [nh])  # one weight set, whatever n_kv_head


def probe_gqa(ctx):
    _attention_cases(ctx, 'gqa', 'gqa-kv%d', False, ctx.profile['kv_heads'])


def probe_gqa_rope(ctx):
    _attention_cases(ctx, 'gqa', 'gqa-rope-kv%d', True, ctx.profile['kv_heads'])


def probe_dropout(ctx):
    # GQA only: CausalSelfAttention's dropout is given code, and a test credits the student's own work
    x = ctx.t('attn/x')
    for kind, label, kv in (('gqa', 'gqa-kv2', 2),):
        for case, attn_p, resid_p, train in (('attn_p1_train', 1.0, 0.0, True), ('resid_p1_train', 0.0, 1.0, True),
                                             ('both_p1_eval', 1.0, 1.0, False)):
            def run(kind=kind, label=label, kv=kv, attn_p=attn_p, resid_p=resid_p, train=train):
                module = ctx.attention(kind, label, kv, attn_pdrop=attn_p, resid_pdrop=resid_p)
                module.train(train)
                with torch.no_grad():
                    y, _ = adapter.call_attention(module, x)
                return y
            ctx.case('%s/%s' % (kind, case), run)


def probe_causality(ctx):
    nh = ctx.profile['module']['n_query_head']
    for kind, label, kv in (('mha', 'mha-rope', nh), ('gqa', 'gqa-rope-kv2', 2)):
        def run(kind=kind, label=label, kv=kv):
            module = ctx.attention(kind, label, kv, rope=True).eval()
            with torch.no_grad():
                return {'base': adapter.call_attention(module, ctx.t('attn/x'))[0],
                        'future': adapter.call_attention(module, ctx.t('attn/x_future'))[0]}
        ctx.case(kind, run)

    def run_gpt():
        model = ctx.model('rope-gqa', 3, True)
        with torch.no_grad():
            return {'base': adapter.call_gpt(model, ctx.t('model/idx'))[0],
                    'future': adapter.call_gpt(model, ctx.t('model/idx_future'))[0]}
    ctx.case('gpt', run_gpt)


# no vanilla configuration: it runs only given code, and a test credits the student's own work
MODEL_CONFIGS = (('rope', None, True), ('gqa', 2, False), ('rope-gqa', 3, True))


def probe_model(ctx):
    nh = ctx.profile['model']['n_query_head']
    for label, kv, rope in MODEL_CONFIGS:
        def run(label=label, kv=kv, rope=rope):
            model = ctx.model(label, kv or nh, rope)
            with torch.no_grad():
                logits, loss = adapter.call_gpt(model, ctx.t('model/idx'), ctx.t('model/targets'))
            return {'logits': logits, 'loss': loss.reshape(1) if loss is not None else None}
        ctx.case(label, run)


def probe_generate(ctx):
    prompt = ctx.t('generate/prompt')
    n_new = 12
    holder = {}

    def model():
        if 'm' not in holder:
            holder['m'] = ctx.model('rope-gqa', 3, True)
        return holder['m']

    def greedy():
        return adapter.generate(model(), prompt, n_new)

    def top_k(k):
        def run():
            torch.manual_seed(0)
            seq = adapter.generate(model(), prompt, n_new, temperature=1.0, do_sample=True, top_k=k)
            out = {'tokens': seq}
            if seq.dim() == 2 and seq.size(1) > prompt.size(1):
                with torch.no_grad():  # the student's own logits, to check each sample lies in its top k
                    out['logits'] = adapter.call_gpt(model(), seq[:, :-1])[0]
            return out
        return run
    ctx.case('greedy', greedy)
    ctx.case('top_k=1', top_k(1))
    ctx.case('top_k=5', top_k(5))


def probe_memory(ctx):
    from mingpt.utils import AttentionMemory  # the handout's own meter, not the student's
    x = ctx.t('memory/x')
    for kv in sorted(ctx.profile['kv_heads'], reverse=True):
        def run(kv=kv):
            module = ctx.attention('gqa', 'gqa-kv%d' % kv, kv).train()
            adapter.call_attention(module, x)  # warm-up: lazily built caches are not the attention's cost
            gc.collect()  # garbage of earlier cases must not die inside the measured region
            with AttentionMemory(ctx.device) as mem:
                y, reported = adapter.call_attention(module, x)
            del y
            # [net, peak, allocated] as the handout's meter sees the whole forward, then what the module reported
            return np.array([mem.net_bytes, mem.peak_bytes, mem.allocated_bytes, adapter.mem_as_int(reported)],
                            dtype=np.int64)
        ctx.case('n_kv_head=%d' % kv, run)


def probe_loss_curve(ctx):
    import chargpt
    from mingpt.trainer import Trainer
    from mingpt.utils import set_seed
    lc = ctx.profile['loss_curve']
    with open(os.path.join(SCRATCH, 'input.txt')) as f:
        text = f.read()
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
            tcfg = Trainer.get_default_config()
            tcfg.device, tcfg.max_iters, tcfg.batch_size = ctx.profile['device'], lc['iters'], lc['batch_size']
            tcfg.learning_rate, tcfg.num_workers = lc['learning_rate'], 0
            trainer = Trainer(tcfg, model, dataset)
            losses = []
            trainer.add_callback('on_batch_end', lambda t: losses.append(float(t.loss.item())))
            trainer.run()
            return np.array(losses, dtype=np.float64)
        ctx.case('seed%d' % seed, run)


def probe_sliding_window(ctx):
    sw, mod = ctx.profile['sliding_window'], ctx.profile['module']
    x = ctx.t('sw/x')
    block = max([sw['seq']] + sw['memory_seqs'])
    for kind, label, kv, rope in (('mha', 'mha', mod['n_query_head'], False), ('gqa', 'gqa-rope-kv2', 2, True)):
        for impl in ('dense', 'banded'):
            def run(kind=kind, label=label, kv=kv, rope=rope, impl=impl):
                module = ctx.attention(kind, label, kv, rope=rope, sliding_window=sw['window'],
                                       sliding_window_impl=impl, block_size=block).eval()
                with torch.no_grad():
                    return adapter.call_attention(module, x)[0]
            ctx.case('%s/%s' % (kind, impl), run)


def probe_sliding_window_memory(ctx):
    from mingpt.utils import AttentionMemory
    sw, mod = ctx.profile['sliding_window'], ctx.profile['module']
    block = max(sw['memory_seqs'])
    for n in sw['memory_seqs']:
        def run(n=n):
            module = ctx.attention('mha', 'mha', mod['n_query_head'], sliding_window=sw['memory_window'],
                                   sliding_window_impl='banded', block_size=block).eval()
            x = ctx.t('swmem/x%d' % n)
            with torch.no_grad():
                adapter.call_attention(module, x)
                gc.collect()
                with AttentionMemory(ctx.device) as mem:
                    adapter.call_attention(module, x)
            return np.array([mem.peak_bytes], dtype=np.int64)
        ctx.case('N=%d' % n, run)


PROBES = {
    'rope': probe_rope, 'rope-cache': probe_rope_cache, 'mha-rope': probe_mha_rope, 'gqa': probe_gqa,
    'gqa-rope': probe_gqa_rope, 'dropout': probe_dropout, 'causality': probe_causality, 'model': probe_model,
    'generate': probe_generate, 'memory': probe_memory, 'loss-curve': probe_loss_curve,
    'sliding-window': probe_sliding_window, 'sliding-window-memory': probe_sliding_window_memory,
}

# ----------------------------------------------------------------------------- main


def write_result(probe_id, arrays, info):
    tmp = os.path.join(OUT, '.%s.tmp' % probe_id)
    with open(tmp + '.npz', 'wb') as f:
        np.savez(f, **arrays)
    os.replace(tmp + '.npz', os.path.join(OUT, probe_id + '.npz'))
    with open(tmp, 'w') as f:
        json.dump(info, f)
    os.replace(tmp, os.path.join(OUT, probe_id + '.json'))


def progress(line):
    with open(os.path.join(OUT, 'progress'), 'a') as f:
        f.write(line + '\n')
        f.flush()
        os.fsync(f.fileno())


def main():
    with open(os.path.join(JOB_DIR, 'job.json')) as f:
        job = json.load(f)
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    real_stdout = sys.stdout
    captured = CappedStream()
    sys.stdout = sys.stderr = captured

    progress('start import')
    t0 = time.time()
    try:
        import mingpt.model  # noqa: F401  (the student's file)
        info = {'status': 'ok'}
    except BaseException as e:
        kind, message, frames = describe_exception(e)
        if isinstance(e, ModuleNotFoundError):
            message = "model.py imports %r, which the autograder does not provide (only torch, einops, numpy " \
                      "and the standard library are available)" % (e.name,)
        info = {'status': 'error', 'message': message, 'where': frames}
    info.update(seconds=time.time() - t0, stdout=captured.take())
    write_result('import', {}, info)
    progress('end import')
    if info['status'] != 'ok':
        return

    for probe_id in job['probes']:
        progress('start ' + probe_id)
        ctx = Context(job)
        t0 = time.time()
        try:
            PROBES[probe_id](ctx)
            ctx.info['status'] = 'ok'
        except BaseException as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            kind, message, frames = describe_exception(e)
            ctx.info.update(status=kind, message=message, where=frames)
        ctx.info.update(seconds=time.time() - t0, stdout=captured.take())
        write_result(probe_id, ctx.arrays, ctx.info)
        progress('end ' + probe_id)
    sys.stdout = real_stdout


if __name__ == '__main__':
    main()
