"""
What the student's RoPE and attention modules received and returned inside each case of a probe
(the first run only: job['record']), so that the harness can check those values itself
(judge/evidence.py) and set a part aside in a case only on evidence from that case. Runs INSIDE the
sandboxed child. It judges nothing, and whatever it writes can only cost the student: a record that
shows a part wrong charges that part (its own tests), a missing or forged one only keeps a case
judged as it ran.

Per case and per attention module, its first plain call (x only): x, the output, the module's
projection weights in the handout's layout, and every call of a student RoPE inside it (input,
output, offset). The batch is cut to its first EVIDENCE_BATCH rows (attention and RoPE are per row).
A call that raised is kept with raised = 'self' or 'rope' (where the case's error came from) and no output.
Hooks never raise into student code.
"""

import weakref

import torch
import torch.nn as nn

from autograder.contract import report_schema as rs

EVIDENCE_BATCH = 2
CLASSES = (('gqa', 'GroupedQueryAttention'), ('mha', 'CausalSelfAttention'), ('rope', 'RotaryPositionalEmbeddings'))

ON = False
_case = None
_open = []        # frames of hooked calls now running, innermost last: [part, module, record or None]
_records = []     # finished records: dicts with tensors (collect() packs them)
_done = {}        # id -> module recorded in this case, kept alive so that no new module takes its id
_hooked = weakref.WeakSet()   # modules with hooks (by identity: an id is reused once a module is freed)


def start(job):
    """Whether this process records (the harness asks in the first run of the probes it reads evidence of)."""
    global ON
    ON = bool(job.get('record'))
    return ON


def begin(case):
    global _case
    _case = case
    del _open[:]
    _done.clear()   # each case is run once: its first call of each module is recorded


def failed(case):
    """The case raised: the innermost hooked call still open is where. The attention call it is in (the call
    itself, or the one whose RoPE raised) is kept with raised = 'self' or 'rope': its record, or where that call
    was not recorded (a later call of the case), a record of the raise alone. Frames: [part, module, record,
    plain] for an attention call, ['rope', module, None, call] for a RoPE call."""
    try:
        if not _open or _case is None:
            return
        inner = _open[-1]
        frame = next((f for f in reversed(_open) if f[0] != 'rope'), None)
        if frame is None or not frame[3]:   # only plain calls (x alone): a KV-cache call is the optional part's
            return
        record = frame[2] if frame[2] is not None else {
            'case': _case, 'part': frame[0], 'dropout': False, 'raised': '', 'ropes': [], 'weights': {}}
        record['raised'] = 'rope' if inner[0] == 'rope' else 'self'
        if not any(r is record for r in _records) and len(_records) < rs.MAX_EVIDENCE:
            _records.append(record)
    except Exception:  # noqa: BLE001
        pass


def end():
    global _case
    _case = None
    del _open[:]


def _part_of(module, classes):
    for part, cls in classes:
        if isinstance(cls, type) and type(module) is cls:
            return part
    for part, cls in classes:
        if isinstance(cls, type) and isinstance(module, cls):
            return part
    return None


def watch(obj, cfg, model_module, weights_of):
    """Hook the student's RoPE and attention modules of `obj` (built by adapter._build from `cfg`);
    `weights_of(module, cfg)`: their projections in the handout's layout (adapter.attention_weights). Every probe
    process of both runs hooks them alike, recording or not: code that looks for hooks learns nothing."""
    classes = [(part, getattr(model_module, name, None)) for part, name in CLASSES]
    try:
        subs = list(obj.modules())
    except Exception:  # noqa: BLE001  never an error of the student's: no evidence
        return
    for sub in subs:
        try:
            part = _part_of(sub, classes)
            if part is None or sub in _hooked:
                continue
            _hooked.add(sub)
            if part == 'rope':
                sub.register_forward_pre_hook(_rope_before, with_kwargs=True)
                sub.register_forward_hook(_rope_after, with_kwargs=True)
            else:
                sub.register_forward_pre_hook(_attention_before(part, cfg, weights_of), with_kwargs=True)
                sub.register_forward_hook(_attention_after, with_kwargs=True)
        except Exception:  # noqa: BLE001  (a module that cannot be hashed or hooked): no evidence
            continue


def _cut(t):
    return t.detach()[:EVIDENCE_BATCH].to('cpu', torch.float64).clone()


def _attention_before(part, cfg, weights_of):
    def hook(module, args, kwargs):
        if not ON:
            return
        try:
            record = None
            plain = len(args) == 1 and isinstance(args[0], torch.Tensor) and args[0].dim() == 3 and \
                all(v is None for v in kwargs.values())
            key = id(module)
            if _case is not None and plain and key not in _done and len(_records) < rs.MAX_EVIDENCE \
                    and getattr(cfg, 'sliding_window', None) is None:
                _done[key] = module
                dropout = module.training and (any(isinstance(m, nn.Dropout) and m.p > 0 for m in module.modules())
                                               or float(getattr(cfg, 'attn_pdrop', 0) or 0) > 0)
                weights = weights_of(module, cfg)
                record = {'case': _case, 'part': part, 'dropout': bool(dropout), 'raised': '', 'ropes': [],
                          'x': _cut(args[0]), 'weights': {k: v.detach().to('cpu', torch.float64).clone()
                                                          for k, v in weights.items()}}
            _open.append([part, module, record, plain and getattr(cfg, 'sliding_window', None) is None])
        except Exception:  # noqa: BLE001  no evidence, never an error of the student's
            _open.append([part, module, None, False])
    return hook


def _pop(module):
    for i in range(len(_open) - 1, -1, -1):
        if _open[i][1] is module:
            return _open.pop(i)
    return None


def _attention_after(module, args, kwargs, output):
    try:
        frame = _pop(module)
        record = frame[2] if frame is not None else None
        if record is None:
            return
        y = output[0] if isinstance(output, (tuple, list)) and output else output
        if isinstance(y, torch.Tensor):
            record['y'] = _cut(y)
        _records.append(record)
    except Exception:  # noqa: BLE001
        pass


def _owner():
    for frame in reversed(_open):
        if frame[0] != 'rope':
            return frame[2]
    return None


def _rope_before(module, args, kwargs):
    if not ON:
        return
    try:
        owner = _owner()
        keep = owner is not None and len(owner['ropes']) < rs.MAX_EVIDENCE_ROPES and args and \
            isinstance(args[0], torch.Tensor)
        offset = 0
        extra = list(args[1:]) + list(kwargs.values())
        if len(extra) == 1 and isinstance(extra[0], int) and not isinstance(extra[0], bool):
            offset = extra[0]
        call = {'x': _cut(args[0]), 'offset': offset} if keep else None
        if call is not None:
            owner['ropes'].append(call)
        _open.append(['rope', module, None, call])
    except Exception:  # noqa: BLE001
        _open.append(['rope', module, None, None])


def _rope_after(module, args, kwargs, output):
    try:
        frame = _pop(module)
        call = frame[3] if frame is not None and len(frame) > 3 else None
        if call is not None and isinstance(output, torch.Tensor):
            call['y'] = _cut(output)
    except Exception:  # noqa: BLE001
        pass


def collect(arrays, info):
    """The records into the probe's arrays ('evidence/<slot>': one flat float64 array each) and its report
    ('evidence': what each slot holds), within report_schema's caps."""
    if not ON:
        return
    entries, total = [], 0
    for record in _records[:rs.MAX_EVIDENCE]:
        try:
            parts = [(name, record[name]) for name in ('x', 'y') if name in record]
            parts += sorted(record['weights'].items())
            offsets = []
            for i, call in enumerate(record['ropes']):
                parts.append(('rope_x%d' % i, call['x']))
                if 'y' in call:
                    parts.append(('rope_y%d' % i, call['y']))
                offsets.append(int(call['offset']))
            size = sum(t.numel() for _, t in parts)
            if size > rs.MAX_EVIDENCE_SLOT or total + size > rs.MAX_EVIDENCE_ELEMENTS:
                continue
            total += size
            slot = len(entries)
            arrays[rs.evidence_key(slot)] = torch.cat([t.reshape(-1) for _, t in parts]).numpy() if parts \
                else torch.zeros(0, dtype=torch.float64).numpy()
            entries.append({'case': str(record['case'])[:rs.MAX_KEY_CHARS], 'part': record['part'], 'slot': slot,
                            'layout': [[name, list(t.shape)] for name, t in parts], 'offsets': offsets,
                            'dropout': record['dropout'], 'raised': record['raised']})
        except Exception:  # noqa: BLE001
            continue
    if entries:
        info['evidence'] = entries
    del _records[:]
