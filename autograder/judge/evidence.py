"""
The harness's own check of what the student's parts did inside each case of the first run
(child/evidence.py recorded it): every RoPE call is recomputed here (judge/rope_service.rotate: the
handout's rotation at positions offset+1..offset+T), and every attention call from its input, its
own projection weights and its own RoPE's outputs (causal softmax attention, scale 1/sqrt(head
size), key/value head h // (n_query_head / n_kv_head) for query head h). numpy only, float64.

What it decides (judge/set_aside.py reads it): the parts SHOWN WRONG in a case. A record can only
show a part wrong: a RoPE whose output is not the rotation of its input (or not its shape), an
attention whose output is not what its own weights and its own RoPE's outputs give, or a part
whose own code raised the case's error (unless a RoPE it called returned wrong values first: then
the RoPE is the cause). A record that cannot be read, a call with dropout active, or expected values
that are not finite, is no evidence either way: the case is then judged as it ran. Student code can forge or drop
records; a forged one only charges its own part, a dropped one only keeps the case judged as it ran.
"""

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from autograder.contract import report_schema as rs
from autograder.judge import registry
from autograder.judge.rope_service import rotate

BASE = 10_000   # the handout's RoPE base (RotaryPositionalEmbeddings(d, base=10_000))
# the adapter's errors in a case that place it in an attention class (figure: the class's name at this index)
CLASS_FACTS = {'linear_shape': 0, 'projections_not_found': 1, 'attention_returned': 0}
CLASS_PARTS = {'CausalSelfAttention': 'mha', 'GroupedQueryAttention': 'gqa', 'RotaryPositionalEmbeddings': 'rope'}


@dataclass(frozen=True)
class Shown:
    """Where a part was shown wrong: the probe's case and what the harness saw there, in words' figures."""
    case: str
    what: str          # 'values', 'shape', 'raised'
    position: int = 0  # the first position (1..T) where its values differ, for 'values'
    detail: str = ''


def slots():
    """{key: shape} the first run's probes that record may return besides the reference's outputs."""
    return {rs.evidence_key(i): (rs.MAX_EVIDENCE_SLOT // 8,) for i in range(rs.MAX_EVIDENCE)}


def take(result):
    """(the result without its evidence, [records]): each record a dict of its report entry and its arrays by
    name, those whose layout does not fit their array dropped."""
    entries = result.info.get('evidence') if isinstance(result.info, dict) else None
    keys = [k for k in result.arrays if k.startswith('evidence/')]
    if not entries and not keys:
        return result, []
    records = []
    for e in entries or []:
        flat = result.arrays.get(rs.evidence_key(e['slot']))
        if flat is None or flat.ndim != 1:
            continue
        sizes = [math.prod(shape) for _, shape in e['layout']]
        if sum(sizes) != flat.size:
            continue
        arrays, start = {}, 0
        for (name, shape), n in zip(e['layout'], sizes):
            arrays[name] = flat[start:start + n].astype(np.float64).reshape(shape)
            start += n
        records.append(dict(e, arrays=arrays))
    info = {k: v for k, v in result.info.items() if k != 'evidence'}
    arrays = {k: v for k, v in result.arrays.items() if not k.startswith('evidence/')}
    return dataclasses.replace(result, arrays=arrays, info=info), records


def _close(got, exp, tol):
    return got.shape == exp.shape and bool(np.all(np.abs(got - exp) <= tol['atol'] + tol['rtol'] * np.abs(exp)))


def _first_position(got, exp, tol):
    """The first position (1..T, axis -2) where got and exp differ."""
    bad = np.abs(got - exp) > tol['atol'] + tol['rtol'] * np.abs(exp)
    rows = np.nonzero(bad.reshape(-1, got.shape[-2], got.shape[-1]).any(axis=(0, 2)))[0]
    return int(rows[0]) + 1 if rows.size else 0


def check_rope(x, y, offset, tol, case):
    """None where a RoPE call is right (or no evidence), else Shown."""
    if y is None:
        return None
    if y.shape != x.shape:
        return Shown(case, 'shape', detail='%s for an input of %s' % (tuple(y.shape), tuple(x.shape)))
    if x.ndim < 2 or x.shape[-1] % 2 or x.shape[-2] == 0:
        return None
    exp = rotate(x.reshape(-1, x.shape[-2], x.shape[-1]), offset, BASE).reshape(x.shape)
    if not np.all(np.isfinite(exp)) or _close(y, exp, tol):
        return None
    if offset:   # a second argument the harness read as an offset may mean something else to their RoPE
        at_one = rotate(x.reshape(-1, x.shape[-2], x.shape[-1]), 0, BASE).reshape(x.shape)
        if _close(y, at_one, tol):
            return None
    return Shown(case, 'values', _first_position(y, exp, tol))


def _heads(t, n):
    """(B, T, n*hs) -> (B, n, T, hs)"""
    b, length, width = t.shape
    return t.reshape(b, length, n, width // n).transpose(0, 2, 1, 3)


def _match(ropes, want):
    """The output of the RoPE call whose input is `want` (within float32 noise), else None."""
    for x, y in ropes:
        if y is not None and x.shape == want.shape and y.shape == want.shape and \
                np.allclose(x, want, atol=1e-4, rtol=1e-3):
            return y
    return None


def _rotated(t):
    """(B, nh, T, d) rotated the handout's way at positions 1..T."""
    return rotate(t.reshape(-1, t.shape[-2], t.shape[-1]), 0, BASE).reshape(t.shape)


def expected_attention(a, n_head, with_rope):
    """What an attention call should have returned from its own input, weights and RoPE outputs (None where its
    shapes do not fit n_head). Where the case runs RoPE, its queries and keys are its own RoPE's outputs, matched
    to them by value; a query or key that no RoPE call of its own rotated (RoPE forgotten, applied elsewhere or
    inlined) is rotated the handout's way here: the attention is then judged with the RoPE it should have used."""
    x = a['x']
    q = x @ a['q_proj.weight'].T + a['q_proj.bias']
    k = x @ a['k_proj.weight'].T + a['k_proj.bias']
    v = x @ a['v_proj.weight'].T + a['v_proj.bias']
    width = q.shape[-1]
    if width % n_head or k.shape[-1] % (width // n_head):
        return None
    hs = width // n_head
    n_kv = k.shape[-1] // hs
    if n_kv == 0 or n_head % n_kv or hs % 2 and with_rope:
        return None
    q, k, v = _heads(q, n_head), _heads(k, n_kv), _heads(v, n_kv)
    group = n_head // n_kv
    if with_rope:
        ropes = [(a.get('rope_x%d' % i), a.get('rope_y%d' % i)) for i in range(rs.MAX_EVIDENCE_ROPES)
                 if ('rope_x%d' % i) in a]
        q_rot, k_rot = _match(ropes, q), _match(ropes, k)
        if k_rot is None:   # code that rotates the keys after repeating them for each query head
            k_wide = _match(ropes, np.repeat(k, group, axis=1))
            k_rot = None if k_wide is None else k_wide[:, ::group]
        q = q_rot if q_rot is not None else _rotated(q)
        k = k_rot if k_rot is not None else _rotated(k)
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    length = q.shape[-2]
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    scores = np.where(np.tril(np.ones((length, length), dtype=bool)), scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    y = (scores / scores.sum(axis=-1, keepdims=True)) @ v
    y = y.transpose(0, 2, 1, 3).reshape(x.shape[0], length, width)
    return y @ a['out_proj.weight'].T + a['out_proj.bias']


def _record_shows(record, parts, n_head, tolerances):
    """{part: Shown} of one record (an attention call and the RoPE calls inside it)."""
    out, a, case = {}, record['arrays'], record['case']
    ropes_wrong = None
    if 'rope' in parts:
        for i, offset in enumerate(record['offsets']):
            if ('rope_x%d' % i) in a:
                shown = check_rope(a['rope_x%d' % i], a.get('rope_y%d' % i), offset, tolerances['rope'], case)
                if shown is not None and ropes_wrong is None:
                    ropes_wrong = shown
        if record['raised'] == 'rope' and ropes_wrong is None:
            ropes_wrong = Shown(case, 'raised')
    if ropes_wrong is not None:
        out['rope'] = ropes_wrong
    part = record['part']
    if part not in parts or record['dropout'] or ropes_wrong is not None:
        return out   # an attention that failed after its RoPE did is not shown wrong by it
    if record['raised'] == 'self':
        out[part] = Shown(case, 'raised')
        return out
    names = ('q_proj', 'k_proj', 'v_proj', 'out_proj')
    if 'y' not in a or not all(n + '.weight' in a and n + '.bias' in a for n in names):
        return out
    try:
        with np.errstate(all='ignore'):
            exp = expected_attention(a, n_head, 'rope' in parts)
    except (ValueError, IndexError):
        exp = None
    if exp is None or not np.all(np.isfinite(exp)):
        return out
    if a['y'].shape != exp.shape:
        out[part] = Shown(case, 'shape', detail='%s for an input of %s' % (tuple(a['y'].shape), tuple(a['x'].shape)))
    elif not _close(a['y'], exp, tolerances['attention']):
        out[part] = Shown(case, 'values', _first_position(a['y'], exp, tolerances['attention']))
    return out


def shown_wrong(probe_id, records, case_errors, n_head, tolerances):
    """{unit: {part: Shown}}: the parts each case of `probe_id` showed wrong (records: take()'s; case_errors: the
    probe's; tolerances: config's Grading.evidence). Only parts the case runs (registry.case_parts) count."""
    out = {}
    for record in records:
        unit = registry.case_name(probe_id, record['case'])
        if unit is None:
            continue
        parts = registry.case_parts(probe_id, record['case'])[0]
        for part, shown in _record_shows(record, parts, n_head, tolerances).items():
            out.setdefault(unit, {}).setdefault(part, shown)
    for case, error in (case_errors or {}).items():
        index = CLASS_FACTS.get(error.get('fact')) if isinstance(error, dict) else None
        figures = (error.get('figures') or []) if index is not None else []
        part = CLASS_PARTS.get(figures[index]) if index is not None and len(figures) > index else None
        unit = registry.case_name(probe_id, case)
        if part is not None and unit is not None and part in registry.case_parts(probe_id, case)[0]:
            out.setdefault(unit, {}).setdefault(part, Shown(case, 'raised'))
    return out
