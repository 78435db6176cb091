"""
Judges of memory, on evidence the student's process cannot forge.

9.1: the figure GroupedQueryAttention.forward returned must be end - start of two memory
readings its code took during that call, and at least the bytes a region containing the
attention core keeps allocated (autograder/contract/memory_rules.py). The readings are the harness's
log of the link (contract/memory_readings.py: RssAnon, VmHWM and clear_refs of the asking
process, read from the kernel while the child waits); the probe only returns the figure.

11.2: banded_attention at a long sequence must give the reference's output at rows the harness
picked (only the fixtures hold them) while the kernel holds the process to an address-space
limit in which one N x N float32 matrix cannot fit.
"""

import math
import secrets

import numpy as np

from autograder.contract import memory_rules
from autograder.judge import messages
from autograder.judge.areas import Verdict, case_error_line
from autograder.contract.report_schema import FIGURE_TYPES


# ----------------------------------------------------------------------------- 9.1

def memory_floor(profile, n_kv_head):
    """
    (bytes, what they are): the least a region containing the attention core leaves allocated
    (grading.yaml 9.1). With weights, one float32 (B, n_kv_head, T, T) tensor: every correct style
    keeps n_query_head heads of weights, and n_kv_head of them is still far above a region without
    the core; a core that wrongly shares weights within a group (a GQA value bug, which 4.1 catches)
    keeps only n_kv_head heads and must not lose 9.1 for it.
    """
    mem, mod = profile.memory, profile.module
    B, nh, T, hs = mem.batch, mod.n_query_head, mem.seq, mod.n_embd // mod.n_query_head
    if mem.floor == 'output':
        return B * nh * T * hs * 4, messages.floor_output(B, nh, T, hs)
    # GQA's weights are (B, n_query_head, T, T); the floor is n_kv_head of those heads (see the docstring)
    heads = messages.floor_heads(n_kv_head, nh)
    return B * n_kv_head * T * T * 4, messages.floor_weights(heads, B, nh, T)


def memory_labels(profile):
    """The measured calls in the probe's order (child/probes_memory.probe_memory)."""
    return ['n_kv_head=%d' % kv for kv in sorted(profile.kv_heads, reverse=True)]


def readings_log(result):
    """The harness's log of the probe's link (autograder/sandbox/probe.py): the only readings 9.1 believes."""
    return (getattr(result, 'harness', None) or {}).get('link', [])


def figure_of(a):
    """The {'type', 'value'} the probe recorded ([type code, value]), or None when unreadable."""
    if a is None or a.shape != (2,) or a.dtype.kind != 'f' or not math.isfinite(a[0]) \
            or not 0 <= int(a[0]) < len(FIGURE_TYPES):
        return None
    kind, value = FIGURE_TYPES[int(a[0])], float(a[1])
    if kind in ('none', 'str', 'other') or (kind == 'tensor' and math.isnan(value)):
        value = None
    return {'type': kind, 'value': value}


def judge_memory(test, result, fixtures, grading):
    profile = grading.profiles[fixtures.profile_name]
    labels = memory_labels(profile)
    log = readings_log(result)
    errors = result.info.get('case_errors', {})
    lines, calls, where, floors = [], [], [], []
    for label in labels:
        fig = figure_of(result.arrays.get(label + '/figure'))
        entries, problem = memory_rules.call_entries(log, label)
        if label in errors:
            err = errors[label]   # an error where the code measures on a GPU: the view is why it ran here
            lines.append(messages.memory_case_error(case_error_line(label, err),
                                                    err.get('status') == 'error'))
        elif fig is None:
            lines.append(messages.memory_no_figure(label))
        elif problem:
            lines.append(messages.what_failed(label, problem))
        else:
            calls.append((fig, entries))
            floors.append(memory_floor(profile, int(label.split('=')[1])))
            where.append(len(lines))
            lines.append(label)
    judged = memory_rules.judge_calls(calls, [f for f, _ in floors], [w for _, w in floors])
    for k, (ok, sentence) in zip(where, judged):
        lines[k] = messages.memory_call(ok, lines[k], sentence)
    passed = sum(line.startswith('ok') for line in lines)
    return Verdict(passed / len(labels) if labels else 0.0,
                   [messages.memory_figures(passed, len(labels))] + lines)


# ----------------------------------------------------------------------------- 11.2

def probe_limits(profile):
    """job['limits']: what the sandbox applies in a probe's process before model.py is imported (11.2's
    address-space margin: child/runner.apply_limits)."""
    return {'sliding-window-memory': {'address_space_margin_mb': profile.sliding_window.memory_margin_mb}}


def window_key(profile):
    return 'N=%d' % profile.sliding_window.memory_seq


def pick_rows(n, count, window):
    """Rows of 11.2's output the harness compares: the first rows (a window cut by the sequence start), the
    last, and random ones drawn here (regenerate), which nothing in the child can know."""
    w = window // 2 + 1
    rows = {0, w - 2, w - 1, w, n - 1}
    draw = secrets.SystemRandom()
    while len(rows) < count:
        rows.add(draw.randrange(n))
    return np.array(sorted(r for r in rows if 0 <= r < n), dtype=np.int64)


def keep_window_rows(expected, old, profile):
    """
    regenerate: the fixtures keep the reference's 11.2 output only at the picked rows; every other
    row is NaN (the array keeps the output's shape, which the reader checks, and compresses to
    almost nothing). The rows of the previous fixtures are kept while the sizes allow, so that the
    fixtures change only when the reference does.
    """
    sw = profile.sliding_window
    key = 'sliding-window-memory/%s/out' % window_key(profile)
    out = expected.get(key)
    if out is None:
        return expected
    rows = judged_rows(old.get(key))
    if len(rows) != sw.memory_rows or old[key].shape != out.shape:
        rows = pick_rows(out.shape[2], sw.memory_rows, sw.memory_window)
    kept = np.full_like(out, np.nan)
    kept[:, :, rows] = out[:, :, rows]
    expected[key] = kept
    return expected


def judged_rows(kept):
    """The rows (queries) of 11.2's fixture that hold values."""
    if kept is None or kept.ndim != 4:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.isfinite(kept).all(axis=(0, 1, 3)))


def judge_window_memory(test, result, fixtures, grading):
    profile = grading.profiles[fixtures.profile_name]
    sw = profile.sliding_window
    key = window_key(profile)
    kept = fixtures.probe(test.id)[key + '/out']
    rows = judged_rows(kept)
    want = kept[:, :, rows]
    size = messages.window_size(sw.memory_seq, sw.memory_window)
    err = result.info.get('case_errors', {}).get(key)
    if err is not None:
        if err.get('status') == 'not_implemented':
            return Verdict(0.0,
                           [messages.not_implemented_optional(case_error_line(messages.BANDED, err))],
                           not_implemented=True)
        if 'allocate' in err.get('message', '') or err.get('message', '').startswith('MemoryError'):
            return Verdict(0.0, [messages.banded_out_of_memory(size, sw.memory_margin_mb,
                                                               sw.memory_seq ** 2 * 4 >> 20),
                                 case_error_line(messages.BANDED, err)])
        return Verdict(0.0, [messages.FAIL + case_error_line(messages.BANDED, err)])
    out = result.arrays.get(key + '/out')
    if out is None or out.shape != kept.shape:
        returned = messages.banded_returned(None if out is None else tuple(out.shape))
        return Verdict(0.0, [messages.banded_shape(size, returned, kept.shape)])
    tol = test.tolerance
    got = out[:, :, rows].astype(np.float64)
    excess = np.abs(got - want) - (tol.atol + tol.rtol * np.abs(want))
    excess[~np.isfinite(got)] = np.inf
    if (excess > 0).any():
        b, h, r, d = np.unravel_index(int(np.argmax(excess)), excess.shape)
        return Verdict(0.0, [messages.banded_differs(size, int((excess > 0).any(axis=(0, 1, 3)).sum()),
                                                     len(rows), (b, h, rows[r], d), rows[r],
                                                     want[b, h, r, d], got[b, h, r, d], (tol.atol, tol.rtol),
                                                     grading.test('sliding-window').number)])
    return Verdict(1.0, [messages.banded_ok(size, len(rows), sw.memory_margin_mb,
                                            sw.memory_seq ** 2 * 4 >> 20)])
