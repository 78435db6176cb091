"""
The judges: each graded test turns the probe outputs of the submission and the fixtures of
the reference into a Verdict (a fraction of the test's weight and the lines the student
reads). Pure numpy; nothing here imports torch or the student's code.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import List, Tuple

import numpy as np

from autograder.judge import messages


Row = Tuple[str, str, str, str, str]   # case, where, expected, got, error (allowed)


@dataclass
class Verdict:
    fraction: float
    lines: List[str] = field(default_factory=list)
    summary: str = ''   # one-line numeric summary (loss curve), shown first
    not_implemented: bool = False   # an optional part left untouched: reported as "not implemented (optional)"
    not_judged: bool = False   # an optional test that builds on a failed required part: 0 / 0, not red
    # the table of expected against got (judge/markdown.py): one row per failing comparison, from the harness's own
    # numbers (compare's cells, generate's tokens), never read back from the lines, which may hold student text
    rows: List['Row'] = field(default_factory=list)
    known_bug: str = ''   # the known bug (known_bugs.py) its outputs match, where the harness named one
    training_gradients_differ: bool = False   # 10.2: the gradients of 10.1's own training run are missing or wrong

    @property
    def passed(self):
        return self.fraction >= 1.0


STATUS_WORDS = messages.STATUS_WORDS   # the words of a probe's or a case's status

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
        return None, messages.THAT_TEST_DID_NOT_RUN
    if result.status != 'ok':
        return None, messages.status_and_message(result.status, result.message)
    case = key.rsplit('/', 1)[0] if key.endswith('/logits') else key
    err = result.info.get('case_errors', {}).get(case)
    if err is not None:
        return None, err.get('message', messages.AN_ERROR)
    array = result.arrays.get(key)
    return (array, None) if array is not None else (None, messages.NO_OUTPUT)


# words of an error's text -> the cause it shows (messages.ERROR_CAUSES): torch's own messages, stable across
# its versions. 'Torch not compiled with CUDA enabled' and 'Found no NVIDIA driver' are what a device
# written into the code gives on the grader's CPU; the SDPA one is older torch's refusal of both arguments.
ERROR_CAUSE_MARKS = (('Torch not compiled with CUDA enabled', 'cuda'), ('Found no NVIDIA driver', 'cuda'),
                     ('No CUDA GPUs are available', 'cuda'),
                     ('attn_mask should not be set when is_causal=True', 'is_causal_with_mask'))


def error_cause(message):
    """The sentence naming the cause that an error's text shows, else ''."""
    for mark, cause in ERROR_CAUSE_MARKS:
        if isinstance(message, str) and mark in message:
            return messages.ERROR_CAUSES[cause]
    return ''


def probe_failure(result):
    """A Verdict of 0 when the whole probe did not produce results, else None."""
    if result.status == 'ok':
        return None
    cause = error_cause(result.message)
    return Verdict(0.0, messages.probe_failed(result.status, result.message + cause if cause else result.message,
                                              result.info.get('where', [])[-3:]))


def case_error_line(name, err):
    """The line of a case the child reported failed (`err`: its status, message and traceback)."""
    message = err.get('message', '')
    return messages.case_error(name, err.get('status'), message + error_cause(message),
                               err.get('where') or [])


def fmt_index(idx):
    return '[' + ', '.join(str(int(i)) for i in idx) + ']'


class Compared(str):
    """compare()'s description; `cells` (where, expected, got, error) when values differ, for the table's row."""
    cells = None


def row(case, desc):
    """The table row (a Row) of a failed comparison of `case` described by compare's `desc`, or None."""
    cells = getattr(desc, 'cells', None)
    return (str(case),) + cells if cells else None


# A float32 value lies on bfloat16's grid (its low 16 bits zero) by chance once in 65536, on float16's (in its
# range, its low 13 bits zero) once in 8192: outputs that all do, where the reference's do not, ran in that dtype.
# MIN_GRID distinct values are needed before that is said (a few could be chance, or exact values such as 0 and 0.5).
MIN_GRID = 16
GRID_SHARE = 0.98   # of those values; a bias added in float32 after a low-precision layer leaves the grid


def _on_grid(values, dtype):
    if dtype == 'bfloat16':
        f32 = values.astype(np.float32)
        return (f32.astype(np.float64) == values) & ((f32.view(np.uint32) & 0xFFFF) == 0)
    with np.errstate(over='ignore', invalid='ignore'):
        return np.isfinite(values) & (values.astype(np.float16).astype(np.float64) == values)


def low_precision_grid(observed, expected=None):
    """
    'bfloat16' or 'float16' when the output's values are those of that dtype (all but a few of at least
    MIN_GRID finite values the reference's output does not itself have on that grid), else None: the evidence
    that the code computed in low precision (autocast left on, .half()). Nothing is said otherwise.
    """
    if observed is None or observed.dtype.kind != 'f':
        return None
    if observed.dtype == np.float16:
        return 'float16'
    obs = observed.astype(np.float64).ravel()
    exp = None if expected is None or expected.shape != observed.shape else expected.astype(np.float64).ravel()
    for dtype in ('bfloat16', 'float16'):
        judged = np.isfinite(obs) & (obs != 0)
        if exp is not None:
            judged &= ~_on_grid(np.where(np.isfinite(exp), exp, 0.0), dtype)
        # distinct values: a constant or a few round numbers (0.5, 1, 2) lie on every grid by construction
        n = len(np.unique(obs[judged]))
        if n >= MIN_GRID and float(_on_grid(obs[judged], dtype).mean()) >= GRID_SHARE:
            return dtype
    return None


def compare(observed, expected, atol, rtol):
    """(ok, description) of observed vs expected: shape, dtype kind, finiteness, max error and where (a Compared
    whose cells are the row of the table where values differ)."""
    if observed is None:
        return False, messages.NO_OUTPUT
    if observed.shape != expected.shape:
        return False, messages.wrong_shape(tuple(observed.shape), tuple(expected.shape))
    if expected.dtype.kind == 'f' and observed.dtype.kind not in 'fiub':
        return False, messages.wrong_dtype(observed.dtype, expected.dtype)
    obs = observed.astype(np.float64)
    exp = expected.astype(np.float64)
    if obs.size == 0:
        return True, messages.EMPTY
    if not np.all(np.isfinite(obs)):
        bad = np.argwhere(~np.isfinite(obs))[0]
        return False, messages.non_finite(float(obs[tuple(bad)]), fmt_index(bad))
    err = np.abs(obs - exp)
    excess = err - (atol + rtol * np.abs(exp))
    where = np.unravel_index(int(np.argmax(excess)), err.shape)
    ok = bool(np.all(excess <= 0))
    error, allowed = '%.3g' % float(err.max()), messages.allowed(atol, rtol)
    cells = (fmt_index(where), '%.6g' % float(exp[where]), '%.6g' % float(obs[where]),
             messages.error_allowed(error, allowed))
    grid = None if ok else low_precision_grid(observed, expected)
    desc = Compared(messages.max_error(error, allowed, *cells[:3]) + (messages.low_precision(grid) if grid else ''))
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
    arrays = {}
    problems = {key: messages.array_not_read(fact) for key, fact in result.refused.items()}
    for key, a in result.arrays.items():
        exp = expected.get(key)
        if exp is not None and a.shape != exp.shape:
            problems[key] = messages.guarded_shape(tuple(a.shape), tuple(exp.shape))
        elif exp is None and a.size > 8 * largest:
            problems[key] = messages.guarded_oversize(tuple(a.shape))
        else:
            arrays[key] = a
    if not problems:
        return result
    for key, why in sorted(problems.items()):
        errors.setdefault(case_of(key), {'status': 'shape',
                                         'message': messages.output_problem(key, why)})
    return dataclasses.replace(result, arrays=arrays, info=dict(result.info, case_errors=errors), refused={})

