"""
The judges: each graded test turns the probe outputs of the submission and the fixtures of
the reference into a Verdict (a fraction of the test's weight and the lines the student
reads). Pure numpy; nothing here imports torch or the student's code.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import List, Tuple

import numpy as np


Row = Tuple[str, str, str, str, str]   # case, where, expected, got, error (allowed)


@dataclass
class Verdict:
    fraction: float
    lines: List[str] = field(default_factory=list)
    summary: str = ''   # one-line numeric summary (loss curve), shown first
    not_implemented: bool = False   # an optional part left untouched: reported as "not implemented (optional)"
    not_judged: bool = False   # an optional test that builds on a failed required part: 0 / 0, not red
    # the table of expected against got (judge/markdown.py): one row per failing comparison, from the judge's own
    # numbers (compare's cells, generate's tokens), never read back from the lines, which may hold student text
    rows: List['Row'] = field(default_factory=list)

    @property
    def passed(self):
        return self.fraction >= 1.0


STATUS_WORDS = {
    'not_implemented': 'not implemented yet',
    'not_implemented_optional': 'not implemented (optional)',
    'error': 'your code raised an error',
    'timeout': 'timed out',
    'crashed': 'the test process died',
    'missing': 'not run',
    'invalid': 'the output could not be read',
    'shape': 'wrong output shape',
}

# one case's several outputs: 'mha/future', 'mha/again', 'rope-gqa/step/lengths'
SUB_OUTPUTS = ('logits', 'loss', 'base', 'future', 'again', 'tokens', 'prefill', 'lengths', 'plain', 'altered')


def case_of(key):
    """The case an output key belongs to, as the probe named it: 'vanilla/logits' -> 'vanilla'."""
    head, _, last = key.rpartition('/')
    return head if head and last in SUB_OUTPUTS else key


def evidence_output(evidence, probe_id, key):
    """
    (array, None) of another probe's output (a test's evidence), or (None, why it is missing) in
    the student's terms.
    """
    result = evidence.get(probe_id)
    if result is None:
        return None, 'that test did not run'
    if result.status != 'ok':
        return None, '%s: %s' % (result.status, result.message)
    case = key.rsplit('/', 1)[0] if key.endswith('/logits') else key
    err = result.info.get('case_errors', {}).get(case)
    if err is not None:
        return None, err.get('message', 'an error')
    array = result.arrays.get(key)
    return (array, None) if array is not None else (None, 'no output')


def probe_failure(result):
    """A Verdict of 0 when the whole probe did not produce results, else None."""
    if result.status == 'ok':
        return None
    lines = ['%s: %s' % (STATUS_WORDS.get(result.status, result.status), result.message)]
    lines += ['  at ' + w for w in result.info.get('where', [])[-3:]]
    return Verdict(0.0, lines)


def case_error_line(name, err):
    word = STATUS_WORDS.get(err.get('status'), 'error')
    where = err.get('where') or []
    return '%s: %s: %s%s' % (name, word, err.get('message', ''), ('\n    at ' + where[-1]) if where else '')


def fmt_index(idx):
    return '[' + ', '.join(str(int(i)) for i in idx) + ']'


class Compared(str):
    """compare()'s description; `cells` (where, expected, got, error) when values differ, for the table's row."""
    cells = None


def row(case, desc):
    """The table row (a Row) of a failed comparison of `case` described by compare's `desc`, or None."""
    cells = getattr(desc, 'cells', None)
    return (str(case),) + cells if cells else None


def compare(observed, expected, atol, rtol):
    """(ok, description) of observed vs expected: shape, dtype kind, finiteness, max error and where (a Compared
    whose cells are the row of the table where values differ)."""
    if observed is None:
        return False, 'no output'
    if observed.shape != expected.shape:
        return False, 'shape %s, expected %s' % (tuple(observed.shape), tuple(expected.shape))
    if expected.dtype.kind == 'f' and observed.dtype.kind not in 'fiub':
        return False, 'dtype %s, expected %s' % (observed.dtype, expected.dtype)
    obs = observed.astype(np.float64)
    exp = expected.astype(np.float64)
    if obs.size == 0:
        return True, 'empty'
    if not np.all(np.isfinite(obs)):
        bad = np.argwhere(~np.isfinite(obs))[0]
        return False, 'non-finite value %r at %s (NaN/inf: a fully masked row, or a division by zero?)' % (
            float(obs[tuple(bad)]), fmt_index(bad))
    err = np.abs(obs - exp)
    excess = err - (atol + rtol * np.abs(exp))
    where = np.unravel_index(int(np.argmax(excess)), err.shape)
    ok = bool(np.all(excess <= 0))
    error, allowed = '%.3g' % float(err.max()), '%.1g + %.1g*|expected|' % (atol, rtol)
    cells = (fmt_index(where), '%.6g' % float(exp[where]), '%.6g' % float(obs[where]), '%s (%s)' % (error, allowed))
    desc = Compared('max abs error %s (allowed %s); worst at %s: expected %s, got %s' % (error, allowed, *cells[:3]))
    desc.cells = None if ok else cells
    return ok, desc


def close(a, b, atol, rtol):
    return a is not None and b is not None and a.shape == b.shape and bool(
        np.allclose(a.astype(np.float64), b.astype(np.float64), atol=atol, rtol=rtol))


def guard_shapes(test_id, result, fixtures):
    """
    The result with every array whose shape differs from the reference's array of that key (or,
    for keys the fixtures lack, any array larger than the largest of them) taken out and turned
    into a failure of its case, "KEY has shape X, expected Y": judges then only ever compute on
    arrays of the reference's shapes, so an oversized output cannot make them slow.
    """
    expected = fixtures.probe(test_id)
    largest = max([a.size for a in expected.values()] + [1])
    errors = dict(result.info.get('case_errors', {}))
    arrays, problems = {}, dict(result.refused)
    for key, a in result.arrays.items():
        exp = expected.get(key)
        if exp is not None and a.shape != exp.shape:
            problems[key] = 'has shape %s, expected %s' % (tuple(a.shape), tuple(exp.shape))
        elif exp is None and a.size > 8 * largest:
            problems[key] = 'has shape %s, far larger than any output of this test' % (tuple(a.shape),)
        else:
            arrays[key] = a
    if not problems:
        return result
    for key, why in sorted(problems.items()):
        errors.setdefault(case_of(key), {'status': 'shape', 'message': '%s %s' % (key, why)})
    return dataclasses.replace(result, arrays=arrays, info=dict(result.info, case_errors=errors), refused={})

