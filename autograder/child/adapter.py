"""
The one thin layer between the probes and the student's mingpt/model.py: it builds configs
and modules, loads fixed weights, and calls forward, so that nothing else depends on the
names students chose. Runs INSIDE the sandboxed child only (it imports torch and student code).

Weights load by the handout's names (q_proj, k_proj, v_proj, out_proj). Older starter code
used other names (c_attn, q_attn, ...): then the projections are found by shape and the
report says so, so the math is graded anyway.
"""

import re

import torch
import torch.nn as nn
from autograder.contract import report_schema
from . import evidence, set_aside

HANDOUT_PROJECTIONS = ('q_proj', 'k_proj', 'v_proj', 'out_proj')


class AdapterError(report_schema.FactError):
    """The submission lacks something the handout's interface requires; its fact says what."""


def model_module():
    import mingpt.model as m
    return m


def make_config(**fields):
    """A model config as the student's GPT.get_default_config() makes it, with `fields` set."""
    m = model_module()
    if not hasattr(m, 'GPT') or not hasattr(m.GPT, 'get_default_config'):
        raise AdapterError('no_default_config')
    cfg = m.GPT.get_default_config()
    cfg.model_type = None
    defaults = dict(embd_pdrop=0.0, resid_pdrop=0.0, attn_pdrop=0.0, rope=False, sliding_window=None,
                    pretrained_folder=None)
    defaults.update(fields)
    for k, v in defaults.items():
        setattr(cfg, k, v)
    return cfg


def _class(name):
    m = model_module()
    cls = getattr(m, name, None)
    if cls is None:
        raise AdapterError('no_class', name)
    return cls


# the parts the harness set aside in this process (runner.py sets it from job['set_aside']): 'rope' is built as
# set_aside.GraderRoPE, computed by the grader; 'gqa' runs the probe's GPT cases at n_kv_head = n_query_head
SET_ASIDE = set()


def rope(d):
    obj = _class('RotaryPositionalEmbeddings')(d)   # the RoPE tests judge the student's own, always
    evidence.watch(obj, None, model_module(), attention_weights)   # hooked as everywhere (child/evidence.py)
    return obj


KEPT = set()   # parts set aside that the student's code still used (a RoPE built another way, or inlined)


def _build(cls, cfg):
    """cls(cfg), with the grader's RoPE in place of the student's class when RoPE is set aside; a RoPE the result
    still holds, or one no class provides (written inside the attention), is recorded in KEPT: the harness then
    says it could not be set aside."""
    module = model_module()
    if 'rope' not in SET_ASIDE:
        obj = cls(cfg)
        evidence.watch(obj, cfg, module, attention_weights)   # the first run's records (child/evidence.py)
        return obj
    own = getattr(module, set_aside.CLASS_NAME, None)
    built_before = set(set_aside.BUILT)
    set_aside.BUILT.clear()
    try:
        with set_aside.swapped(module, SET_ASIDE):
            obj = cls(cfg)
        evidence.watch(obj, cfg, module, attention_weights)
        if isinstance(own, type) and any(isinstance(m, own) for m in obj.modules()):
            KEPT.add('rope')
        if getattr(cfg, 'rope', False) and 'rope' not in set_aside.BUILT:
            KEPT.add('rope')
    finally:
        set_aside.BUILT.update(built_before)
    return obj


def attention(kind, cfg):
    """The student's attention module of `kind` (its RoPE the grader's when RoPE is set aside)."""
    return _build(_class({'mha': 'CausalSelfAttention', 'gqa': 'GroupedQueryAttention'}[kind]), cfg)


def gpt(cfg):
    """The student's GPT (its RoPE the grader's when RoPE is set aside)."""
    return _build(_class('GPT'), cfg)


# ----------------------------------------------------------------------------- weights

def _linears(module):
    """(name, Linear) of the attention module's own linear layers, in registration order."""
    return [(n, m) for n, m in module.named_modules() if isinstance(m, nn.Linear) and n]


def _copy(linear, weight, bias):
    if tuple(linear.weight.shape) != tuple(weight.shape):
        raise AdapterError('shape_mismatch')
    with torch.no_grad():
        linear.weight.copy_(weight)
        if linear.bias is not None:
            linear.bias.copy_(bias)
        elif bias.abs().max() > 0:
            raise AdapterError('no_bias')


def load_attention(module, weights, n_embd):
    """
    Load {q_proj.weight, q_proj.bias, ...} into an attention module. Returns notes for the report.
    Raises AdapterError when no consistent assignment exists.
    """
    w = {k: torch.as_tensor(v) for k, v in weights.items()}
    if all(isinstance(getattr(module, n, None), nn.Linear) for n in HANDOUT_PROJECTIONS):
        for n in HANDOUT_PROJECTIONS:
            lin = getattr(module, n)
            if tuple(lin.weight.shape) != tuple(w[n + '.weight'].shape):
                raise AdapterError('linear_shape', type(module).__name__, n, '%d' % lin.in_features,
                                   '%d' % lin.out_features, '%d' % w[n + '.weight'].shape[1],
                                   '%d' % w[n + '.weight'].shape[0])
            _copy(lin, w[n + '.weight'], w[n + '.bias'])
        return []
    return _load_by_shape(module, w, n_embd)


def _role_hint(name):
    """What a layer's own name says it is: 'qkv', 'kv', 'q', 'k', 'v', 'out' or None."""
    last = name.split('.')[-1].lower()
    tokens = set(re.split(r'[^a-z]+', last)) | {last}
    if 'qkv' in last or last == 'c_attn':
        return 'qkv'
    if 'kv' in last:
        return 'kv'
    for role, words in (('q', {'q', 'query', 'wq', 'queries'}), ('k', {'k', 'key', 'wk', 'keys'}),
                        ('v', {'v', 'value', 'wv', 'values'})):
        if tokens & words or last.startswith(role + '_'):
            return role
    if tokens & {'out', 'o', 'wo', 'c_proj', 'o_proj', 'proj'} or last.startswith('out'):
        return 'out'  # checked after q/k/v: 'q_proj' is a query projection, a bare 'proj' an output one
    return None


def plan_projections(layers, n_embd, kv_dim):
    """
    Which of an attention module's Linear(n_embd -> *) layers plays which projection when the
    handout's names are missing. `layers`: [(name, out_features)] in registration order.
    Returns ({role: layer name}, [roles not found]); the roles are 'out' and either 'qkv' or
    'q' with 'kv' or with 'k' and 'v'. Shapes decide, names only where shapes are ambiguous (a
    fused [k; v] layer is n_embd wide when n_kv_head = n_query_head / 2); fused layers are
    assumed to stack [q; k; v] or [k; v] along the output. Torch-free on purpose:
    build-template copies this source into the students' grader_rules.py, so that the public
    tests and the grader match layers the same way.
    """
    free = list(layers)
    plan = {}

    def take(role, out_features):
        fits = [l for l in free if l[1] == out_features]
        named = [l for l in fits if _role_hint(l[0]) == role]
        unnamed = [l for l in fits if _role_hint(l[0]) is None]  # a layer named for another role is never taken
        if named or unnamed:
            # without a telling name the output projection is the last square layer, any other role the first
            pick = named[0] if named else unnamed[-1] if role == 'out' else unnamed[0]
            plan[role] = pick[0]
            free.remove(pick)

    take('qkv', n_embd + 2 * kv_dim)
    take('out', n_embd)
    if 'qkv' not in plan:
        fused_kv = [l for l in free if l[1] == 2 * kv_dim and (_role_hint(l[0]) == 'kv' or 2 * kv_dim != n_embd)]
        if fused_kv:
            plan['kv'] = fused_kv[0][0]
            free.remove(fused_kv[0])
        take('q', n_embd)
        if 'kv' not in plan:
            take('k', kv_dim)
            take('v', kv_dim)
    need = ['out'] + (['qkv'] if 'qkv' in plan else ['q'] + (['kv'] if 'kv' in plan else ['k', 'v']))
    return plan, [r for r in need if r not in plan]


def module_plan(module, n_embd, kv_dim):
    """{role: (layer name, Linear)} of an attention module without the handout names (see plan_projections)."""
    linears = dict((n, m) for n, m in _linears(module) if m.in_features == n_embd)
    names, missing = plan_projections([(n, m.out_features) for n, m in linears.items()], n_embd, kv_dim)
    if missing:
        raise AdapterError('projections_not_found', '/'.join(missing), type(module).__name__,
                           ', '.join('%s %d->%d' % (n, m.in_features, m.out_features)
                                     for n, m in _linears(module)))
    return {role: (name, linears[name]) for role, name in names.items()}


def _load_by_shape(module, w, n_embd):
    """Fallback for renamed or fused projections: plan_projections decides which layer is which."""
    plan = module_plan(module, n_embd, w['k_proj.weight'].shape[0])
    cat = lambda *names: (torch.cat([w[n + '.weight'] for n in names]), torch.cat([w[n + '.bias'] for n in names]))
    try:
        if 'qkv' in plan:
            _copy(plan['qkv'][1], *cat('q_proj', 'k_proj', 'v_proj'))
        else:
            _copy(plan['q'][1], w['q_proj.weight'], w['q_proj.bias'])
            if 'kv' in plan:
                _copy(plan['kv'][1], *cat('k_proj', 'v_proj'))
            else:
                _copy(plan['k'][1], w['k_proj.weight'], w['k_proj.bias'])
                _copy(plan['v'][1], w['v_proj.weight'], w['v_proj.bias'])
        _copy(plan['out'][1], w['out_proj.weight'], w['out_proj.bias'])
    except AdapterError as e:
        raise AdapterError('by_shape', *getattr(e, 'fact', ()))
    roles = ('qkv', 'kv', 'q', 'k', 'v', 'out')   # the note's figures: the class, then the name of
    # the layer that plays each role ('' where none does); judge/messages.py words them
    return [('matched_by_shape', type(module).__name__) + tuple(
        plan[r][0] if r in plan else ''
        for r in roles)]


def load_gpt(model, state, n_embd):
    """Load a reference-named state_dict into the student's GPT; attention blocks may fall back by shape."""
    own = dict(model.named_parameters())
    notes = []
    attn_prefixes = sorted({k.split('attn.')[0] + 'attn' for k in state if '.attn.' in k})
    for prefix in attn_prefixes:
        module = model.get_submodule(prefix)
        weights = {k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + '.')}
        notes += load_attention(module, weights, n_embd)
    with torch.no_grad():
        for k, v in state.items():
            if '.attn.' in k:
                continue
            if k not in own:
                raise AdapterError('no_parameter', k)
            if tuple(own[k].shape) != tuple(v.shape):
                raise AdapterError('parameter_shape', k, str(tuple(own[k].shape)), str(tuple(v.shape)))
            own[k].copy_(torch.as_tensor(v))
    extra = sorted(k for k in own if k not in state and '.attn.' not in k)
    if extra:
        notes.append(('kept_initial',) + tuple(extra[:6]))
    return list(dict.fromkeys(notes))


def attention_weights(module, cfg):
    """{handout name: tensor} of an attention module's projections (q_proj.weight, ..., out_proj.bias; a bias
    absent is zeros), fused or renamed layers split as attention_gradients splits them."""
    n_embd = int(cfg.n_embd)
    kv_dim = n_embd // int(cfg.n_query_head) * int(cfg.n_kv_head)
    if all(isinstance(getattr(module, n, None), nn.Linear) for n in HANDOUT_PROJECTIONS):
        layers = {n: getattr(module, n) for n in HANDOUT_PROJECTIONS}
        parts = {n: (l.weight, l.bias) for n, l in layers.items()}
    else:
        rows = {'qkv': (('q_proj', n_embd), ('k_proj', kv_dim), ('v_proj', kv_dim)),
                'kv': (('k_proj', kv_dim), ('v_proj', kv_dim))}
        parts = {}
        for role, (_name, linear) in module_plan(module, n_embd, kv_dim).items():
            if role not in rows:
                parts[role + '_proj'] = (linear.weight, linear.bias)   # q, k, v or out: q_proj, ..., out_proj
                continue
            start = 0
            for handout, n in rows[role]:
                parts[handout] = (linear.weight[start:start + n],
                                  None if linear.bias is None else linear.bias[start:start + n])
                start += n
    out = {}
    for n, (w, b) in parts.items():
        out[n + '.weight'] = w
        out[n + '.bias'] = b if b is not None else torch.zeros(w.shape[0], dtype=w.dtype, device=w.device)
    return out


def attention_gradients(module, n_embd, kv_dim):
    """
    {handout name: gradient or None} of an attention module's projections, after a backward:
    q_proj.weight, ..., out_proj.bias. Fused layers are split back along their output rows in
    the order load_attention filled them ([q; k; v] or [k; v]).
    """
    def grads(linear):
        w, b = linear.weight.grad, linear.bias.grad if linear.bias is not None else None
        return w, b
    if all(isinstance(getattr(module, n, None), nn.Linear) for n in HANDOUT_PROJECTIONS):
        parts = {n: grads(getattr(module, n)) for n in HANDOUT_PROJECTIONS}
    else:
        plan = module_plan(module, n_embd, kv_dim)
        parts = {}
        rows = {'qkv': (('q_proj', n_embd), ('k_proj', kv_dim), ('v_proj', kv_dim)),
                'kv': (('k_proj', kv_dim), ('v_proj', kv_dim))}
        for role, (name, linear) in plan.items():
            w, b = grads(linear)
            if role in rows:
                at = 0
                for handout, n in rows[role]:
                    parts[handout] = (None if w is None else w[at:at + n], None if b is None else b[at:at + n])
                    at += n
            else:
                parts[{'q': 'q_proj', 'k': 'k_proj', 'v': 'v_proj', 'out': 'out_proj'}[role]] = (w, b)
    out = {}
    for n, (w, b) in parts.items():
        out[n + '.weight'], out[n + '.bias'] = w, b
    return out


def gpt_gradients(model, state, n_embd):
    """{reference parameter name: gradient or None} of the student's GPT after a backward, for every
    name of the reference `state`; attention parameters through attention_gradients, so fused or
    renamed projections map back to the handout's names."""
    own = dict(model.named_parameters())
    out = {}
    for prefix in sorted({k.split('attn.')[0] + 'attn' for k in state if '.attn.' in k}):
        kv_dim = state[prefix + '.k_proj.weight'].shape[0]
        for k, g in attention_gradients(model.get_submodule(prefix), n_embd, kv_dim).items():
            out[prefix + '.' + k] = g
    for k in state:
        if '.attn.' not in k:
            if k not in own:
                raise AdapterError('no_parameter', k)
            out[k] = own[k].grad
    return out


# ----------------------------------------------------------------------------- calls

def call_attention(module, x):
    """forward(x) -> (y, mem_bytes); a bare tensor is accepted with mem None."""
    out = module(x)
    if isinstance(out, torch.Tensor):
        return out, None
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        mem = out[1] if len(out) > 1 else None
        return out[0], mem
    raise AdapterError('attention_returned', type(module).__name__, type(out).__name__)


def call_gpt(model, idx, targets=None):
    out = model(idx, targets)
    if not isinstance(out, (tuple, list)) or len(out) < 2:
        raise AdapterError('gpt_returned', type(out).__name__)
    return out[0], out[1]


def generate(model, idx, max_new_tokens, **kw):
    out = model.generate(idx, max_new_tokens, **kw)
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    raise AdapterError('generate_returned', type(out).__name__)
