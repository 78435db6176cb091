"""
Behaviour on shared inputs (staff only; issue 44 item 2). A submission's graded inputs are drawn from
its bytes, so two copies that differ by one byte run different input sets and their wrong outputs
cannot be compared (behaviour_match.py compares only the same set). Here, after a staff regrade has
graded a submission, one more probe (child/probes_staff.py: 'staff-shared') runs its RoPE, both
attention classes (RoPE on) and banded_attention where it exists on a small set of inputs that is
the SAME for the whole class: drawn from HMAC(course key, "hw1 staff shared"), a label no graded
set or shared probe uses. The harness decides right or wrong by recomputing each output in numpy
(judge/evidence.py's RoPE rotation and attention; an attention is judged from the weights its own
call recorded and its own RoPE's outputs, so a copied RoPE bug is a lead on RoPE, not on every
attention), and keeps a print (array_prints.array_print) of each WRONG output: a pair whose
prints agree shares a wrong output on inputs neither was graded on, whatever sets they drew.

Never graded, never shown: the probe runs only through grade_results(observe=...) in a staff regrade
(never on Gradescope), after every verdict and the results.json text are made; what it returns
goes to behaviour.json alone. Why this does not make memorising graded answers easier:
docs/ARCHITECTURE.md, "Shared inputs (staff only)".
"""

import hashlib
import hmac
import math
import time
from types import SimpleNamespace

import numpy as np

from autograder.judge import evidence, inputs, probe_job, registry
from autograder.judge.rope_service import rotate
from autograder.staff.regrade import array_prints

PROBE = registry.STAFF_PROBES[0]   # child/probes_staff.py: probe_staff_shared
# part -> the graded tests that judge it as the student's own: a part one of them named a known bug of is left
# out (the report names known bugs already; two students making the same known mistake are no lead)
OWN_TESTS = {'rope': ('rope', 'rope-cache'), 'mha': ('mha-rope',), 'gqa': ('gqa', 'gqa-rope'),
             'banded': ('sliding-window',)}
# cases a hung part would run again (SetAside.hung): not run, so a hang costs the regrade nothing more
CASE_PARTS = {'rope': ('rope',), 'mha': ('mha', 'rope'), 'gqa': ('gqa', 'rope'), 'banded': ('banded',)}
GQA_KV = 2
SEQ = 12        # positions of every input: past the banded window (cpu 6 -> w' = 4; gpu 32 -> 17 cuts at 12)
TIMEOUT = 10.0  # CPU seconds of the probe's process: its four calls on these sizes take milliseconds


def seed(profile, key):
    """The shared inputs' seed: HMAC(course key, "hw1 staff shared", profile seed); no graded input set
    (inputs.set_seed) or shared probe (inputs.shared_seed) is drawn from this label."""
    digest = hmac.new(key, b'hw1 staff shared %d' % profile['seed'], hashlib.sha256).digest()
    return int.from_bytes(digest[:8], 'big') >> 1


def build(profile, key):
    """{input key: array} of the probe's process: the same for every submission graded with this key."""
    s = seed(profile, key)
    mod = profile['module']
    C, nh = mod['n_embd'], mod['n_query_head']
    hs = C // nh
    rng = inputs._rng(s, 'staff-shared')
    out = {'staff/rope/x': rng.standard_normal((1, 2, SEQ, hs)).astype(np.float32),
           'staff/attn/x': rng.standard_normal((1, SEQ, C)).astype(np.float32)}
    for name in 'qkv':
        out['staff/banded/' + name] = rng.standard_normal((1, 2, SEQ, hs)).astype(np.float32)
    for kind, kv in (('mha', nh), ('gqa', GQA_KV)):
        out.update({'w/staff-%s/%s' % (kind, k): v
                    for k, v in inputs.attention_weights(s, 'staff-' + kind, C, nh, kv).items()})
    return out


def shapes(arrays, profile):
    """{output key: shape} the probe returns (readback's bound), the evidence slots included."""
    attn = arrays['staff/attn/x'].shape
    out = {'rope': arrays['staff/rope/x'].shape, 'mha': attn, 'gqa': attn, 'banded': arrays['staff/banded/q'].shape}
    return dict(out, **evidence.slots())


def banded(q, k, v, window):
    """The handout's banded attention in numpy (float64): query t sees keys t - w' + 1 .. t, w' = window // 2 + 1."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    T, w = q.shape[-2], window // 2 + 1
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    lag = np.arange(T)[:, None] - np.arange(T)[None, :]
    scores = np.where((lag >= 0) & (lag < w), scores, -np.inf)
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return (scores / scores.sum(axis=-1, keepdims=True)) @ v


def _attention_expected(kind, arrays, records, n_head, rope_tol):
    """What the attention case should have returned, or None where it is no evidence: from the weights and RoPE
    outputs its own call recorded (a RoPE wrong inside it: None, the lead is RoPE's), else from the inputs given."""
    record = next((r for r in records if r.get('case') == kind and r.get('part') == kind and not r.get('dropout')
                   and 'y' in r['arrays']), None)
    if record is None:
        a = dict({'x': arrays['staff/attn/x'].astype(np.float64)},
                 **{k.split('/')[-1]: v.astype(np.float64) for k, v in arrays.items()
                    if k.startswith('w/staff-%s/' % kind)})
        return evidence.expected_attention(a, n_head, True)
    a = record['arrays']
    for i, offset in enumerate(record.get('offsets') or ()):
        if ('rope_x%d' % i) in a and evidence.check_rope(a['rope_x%d' % i], a.get('rope_y%d' % i), offset,
                                                          rope_tol, kind) is not None:
            return None
    return evidence.expected_attention(a, n_head, True)


def expected(arrays, records, profile, tolerances):
    """{part: what its case should have returned} for the parts this run can judge."""
    nh = profile['module']['n_query_head']
    x = arrays['staff/rope/x']
    out = {'rope': rotate(x.reshape(-1, x.shape[-2], x.shape[-1]), 0, evidence.BASE).reshape(x.shape),
           'banded': banded(*(arrays['staff/banded/' + n] for n in 'qkv'), profile['sliding_window']['window'])}
    for kind in ('mha', 'gqa'):
        try:
            with np.errstate(all='ignore'):
                out[kind] = _attention_expected(kind, arrays, records, nh, tolerances['rope'])
        except (ValueError, IndexError, KeyError):
            out[kind] = None
    return {part: e for part, e in out.items() if e is not None and np.all(np.isfinite(e))}


def run_probe(judging):
    """(the shared inputs, the probe's ProbeResult without its records, the records: evidence.take), or None where
    nothing may run: a file not graded, not imported, or stopped importing. Parts that hung in the grading are not
    run again. Its own sandbox session, after the grading's: it can take no time or budget from a graded probe."""
    aside, run_result = judging.aside, judging.run_result
    if aside is None or run_result is None or aside.import_hang or run_result.import_result is None \
            or run_result.import_result.status != 'ok':
        return None
    profile = judging.profile
    arrays = build(profile, judging.fx.key)
    skip = [case for case, parts in CASE_PARTS.items() if any(p in aside.hung for p in parts)]
    plan = probe_job.plan(judging.located.path, profile, [PROBE], {PROBE: TIMEOUT},
                          judging.grading.test('submission').timeout, probe_inputs={PROBE: arrays},
                          expected={PROBE: shapes(arrays, profile)},
                          probe_jobs={PROBE: {'record': True, 'skip_cases': skip}}, private=judging.private)
    result = probe_job.execute(judging.sandbox, plan).probes[PROBE]
    return (arrays,) + evidence.take(result)


def wrong_outputs(outputs, arrays, records, profile, tolerances, left_out=()):
    """{part: {output key: print}} of the parts whose outputs (`outputs`: the probe's arrays) are wrong on the shared
    inputs `arrays`, by the harness's own recomputation (expected); `left_out`: parts not kept."""
    found = {}
    for part, exp in expected(arrays, records, profile, tolerances).items():
        got = outputs.get(part)
        if part in left_out or got is None:
            continue
        tol = tolerances['rope' if part == 'rope' else 'attention']
        p = array_prints.array_print(got, exp, SimpleNamespace(atol=tol['atol'], rtol=tol['rtol']))
        if p is not None:
            found[part] = {part: p}
    return found


def prints(judging, out, tolerances):
    """({part: {output key: print}} of the parts whose shared outputs are wrong, seconds it took); ({}, s) where
    none is or the probe could not run. `out`: the grading's Results (a part whose own test named a known bug is
    left out)."""
    from autograder.staff.regrade import gradebook
    started = time.time()
    ran = run_probe(judging)
    if ran is None:
        return {}, round(time.time() - started, 2)
    arrays, result, records = ran
    named = {part for part, tests in OWN_TESTS.items()
             if any(t in out and out[t].lost and gradebook.NAMED_BUG.search(out[t].output or '') for t in tests)}
    found = wrong_outputs(result.arrays, arrays, records, judging.profile, tolerances, named)
    return found, round(time.time() - started, 2)
