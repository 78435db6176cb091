"""
The results of one grading as an object: tests keyed by id, `total`, `possible`, written as
Gradescope's results.json and read back (validated) by the staff tools.

Each graded test's entry comes from one pure function, result_of(spec, verdict): its score,
status and output (an untouched or unjudged optional part, a test the grader failed to judge, one
not run yet) are decided there, for the final results.json (Results.from_verdicts), the one written
while grading runs (partial) and the one the watchdog keeps (finish_partial). Weight, number,
visibility and tags come from grading.yaml through the spec, so no code carries a number. The entries
are those gradescope-utils' JSONTestRunner would write for the same test (tests/unit/test_results.py
holds that runner as the oracle), with its gaps closed here: every output is truncated, numbers are
plain JSON (no NaN), each test carries its id in extra_data, and an internal error still yields a
valid file (a visible "autograder error" test at 0 and a hidden traceback for staff).
The file is written atomically, by the harness only.
"""

import json
import math
import os
import re
import traceback
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from autograder.judge import markdown, messages

MAX_OUTPUT_CHARS = 20_000      # per test and top level, unless grading.yaml says less; Gradescope cuts at ~100k
SCORE_DIGITS = 4               # stored; totals are shown with at most 2 decimals
ERROR_NAME = messages.ERROR_NAME
VISIBILITIES = ('hidden', 'after_due_date', 'after_published', 'visible')
OUTPUT_FORMATS = ('text', 'html', 'simple_format', 'md', 'ansi')   # Gradescope's
# numpy scalars printed by repr (numpy >= 2): 'np.int64(0)', 'np.float32(1.5)' -> '0', '1.5'
_NP_SCALAR = re.compile(r"\bnp\.(?:u?int\d*|float\d*|bool_?|str_)\((-?[^()]*)\)")


def truncate(text, limit=MAX_OUTPUT_CHARS):
    text = _NP_SCALAR.sub(r'\1', str(text))
    if len(text) <= limit:
        return text
    return text[:limit] + messages.truncated(len(text) - limit)


def points(x):
    """A score for people: 67.4999 -> '67.5', 10.0 -> '10'."""
    return '%g' % round(float(x), 2)


@dataclass
class TestResult:
    id: str
    name: str
    score: float
    max_score: float
    status: str = 'passed'
    number: str = ''
    output: str = ''
    visibility: str = 'visible'
    tags: List[str] = field(default_factory=list)
    rows: List[tuple] = field(default_factory=list)   # the harness's table of expected against got (Verdict.rows)

    @property
    def lost(self):
        """Points lost, or a failure worth none (an extra-credit test carries max_score 0: see result_of)."""
        return self.score < self.max_score or self.status == 'failed'

    def to_json(self, limit):
        out = {'name': self.name, 'score': round(float(self.score), SCORE_DIGITS),
               'max_score': round(float(self.max_score), SCORE_DIGITS), 'status': self.status}
        if self.number:
            out['number'] = self.number
        if self.output:
            out['output'] = truncate(self.output, limit)
            md = markdown.render(out['output'], self.rows)   # the harness's table of expected against got, if any
            if md is not None:
                out['output'], out['output_format'] = md, markdown.FORMAT
        out['visibility'] = self.visibility
        if self.tags:
            out['tags'] = list(self.tags)
        out['extra_data'] = {'id': self.id}
        if self.rows and self.output:   # kept as data, so that a results.json read back renders the same table
            out['extra_data']['rows'] = [list(r) for r in self.rows[:markdown.MAX_ROWS]]
        return out


class Results:
    """tests: {id: TestResult} in the order graded; output: the top-level message."""

    def __init__(self, tests=None, output='', execution_time=0.0, extra_data=None, max_output_chars=MAX_OUTPUT_CHARS):
        self.tests: Dict[str, TestResult] = dict(tests or {})
        self.output = output
        self.execution_time = float(execution_time)
        self.extra_data = dict(extra_data or {})
        self.max_output_chars = max_output_chars

    # ------------------------------------------------------------------ the numbers
    @property
    def total(self):
        return round(sum(t.score for t in self.tests.values()), SCORE_DIGITS)

    @property
    def possible(self):
        return round(sum(t.max_score for t in self.tests.values()), SCORE_DIGITS)

    @property
    def is_error(self):
        """The grader itself failed (not the submission)."""
        return any(t.name.startswith(ERROR_NAME) for t in self.tests.values())

    def score(self, test_id):
        return self.tests[test_id].score if test_id in self.tests else None

    def __getitem__(self, test_id):
        return self.tests[test_id]

    def __contains__(self, test_id):
        return test_id in self.tests

    def summary(self):
        return '%s/%s' % (points(self.total), points(self.possible))

    # ------------------------------------------------------------------ building
    @classmethod
    def from_verdicts(cls, specs, verdict_of, max_output_chars=MAX_OUTPUT_CHARS, extra_credit=()):
        """
        One TestResult per spec (result_of), in order; `verdict_of(spec)` returns its Verdict. A bug of
        the grader while judging one test costs that test only: the student reads that it was not their
        fault, the traceback goes to extra_data.judge_errors (staff only). Tests whose id is in
        `extra_credit` carry max_score 0 (see result_of).
        """
        failures, tests = {}, {}
        for spec in specs:
            try:
                verdict, missing = verdict_of(spec), None
            except Exception as e:  # noqa: BLE001  a bug of the grader, not of the submission
                failures[spec.id] = traceback.format_exc()[-5000:]
                verdict, missing = None, messages.judge_failed(type(e).__name__)
            tests[spec.id] = result_of(spec, verdict, spec.id in extra_credit, missing)
        return cls(tests, extra_data={'judge_errors': failures} if failures else None,
                   max_output_chars=max_output_chars)

    @classmethod
    def error(cls, message, staff_detail, execution_time, reason=''):
        """What students see when the grader itself failed: a visible 0 and a hidden traceback for staff."""
        tests = {
            'autograder-error': TestResult('autograder-error', ERROR_NAME, 0.0, 0.0, 'failed', '0.1', message[:2000],
                                           'visible', ['submission']),
            'autograder-error-detail': TestResult('autograder-error-detail', ERROR_NAME + ': details for staff',
                                                  0.0, 0.0, 'failed', '0.2', staff_detail[-20000:], 'hidden'),
        }
        return cls(tests, messages.INTERNAL_ERROR, execution_time, {'grader_error': str(reason or message)[:2000]})

    # ------------------------------------------------------------------ JSON
    def to_json(self):
        out = {'score': round(self.total, 2), 'execution_time': round(self.execution_time, 2),
               'output': truncate(self.output, self.max_output_chars), 'stdout_visibility': 'hidden',
               'tests': [t.to_json(self.max_output_chars) for t in self.tests.values()], 'leaderboard': []}
        if self.extra_data:
            out['extra_data'] = self.extra_data
        validate(out)
        return out

    def dumps(self):
        return json.dumps(self.to_json(), indent=2, allow_nan=False) + '\n'

    def write(self, path):
        text = self.dumps()
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, '.%s.%d.tmp' % (os.path.basename(path), os.getpid()))
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, path)

    @classmethod
    def from_json(cls, data, ids_by_number=None):
        """A Results from results.json's content; ValueError unless it follows Gradescope's specification.
        Tests written before ids were stored are keyed through `ids_by_number` (else by number or name)."""
        validate(data)
        tests = {}
        for t in data['tests']:
            tid = (t.get('extra_data') or {}).get('id') or (ids_by_number or {}).get(str(t.get('number', ''))) \
                or str(t.get('number') or t['name'])
            output = t.get('output', '')
            if t.get('output_format') == markdown.FORMAT:
                output = markdown.plain(output)
            tests[tid] = TestResult(tid, t['name'], float(t['score']), float(t['max_score']), t['status'],
                                    str(t.get('number', '')), output, t.get('visibility', 'visible'),
                                    list(t.get('tags') or []), _rows((t.get('extra_data') or {}).get('rows')))
        return cls(tests, data.get('output', ''), data['execution_time'], data.get('extra_data'))


def load(path, ids_by_number=None) -> Optional[Results]:
    """The Results in `path`; ValueError when it is not a valid results.json, OSError when unreadable."""
    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError('%s is not a JSON object' % path)
    return Results.from_json(data, ids_by_number)


def add_points(out, extra_credit):
    """
    Extra credit (grading.yaml handout.extra_credit): the tests in `extra_credit` ({id: weight})
    carry max_score 0 (result_of), so the tests' maxima sum to the required total (100) and an
    untouched part costs nothing; a test's score (up to its weight) counts on top. results.json's
    `score` (which Gradescope takes over the sum of the tests) is every test's score, so it may
    exceed the required maximum; staff set the assignment's total points to 100.
    extra_data.points spells the split out for the table, build-zip's check and staff.
    """
    extra = [t for tid, t in out.tests.items() if tid in extra_credit]
    required = [t for tid, t in out.tests.items() if tid not in extra_credit]
    out.extra_data['points'] = {
        'required': round(sum(t.score for t in required), SCORE_DIGITS),
        'required_max': round(sum(t.max_score for t in required), SCORE_DIGITS),
        'extra_credit': round(sum(t.score for t in extra), SCORE_DIGITS),
        'extra_credit_max': round(sum(extra_credit[t.id] for t in extra), SCORE_DIGITS)}
    return out


# what an untouched optional part reads on Gradescope: a test worth 0 that is not a failure
NOT_ATTEMPTED = messages.NOT_ATTEMPTED


def _rows(data):
    """The table rows a results.json stored (TestResult.to_json), or [] when they are not five texts each."""
    ok = isinstance(data, list) and all(isinstance(r, list) and len(r) == len(markdown.HEADER)
                                        and all(isinstance(c, str) for c in r) for r in data)
    return [tuple(r) for r in data] if ok else []


def result_of(spec, verdict, extra_credit=False, missing=None):
    """
    The one rule of a test's entry: `spec` (grading.yaml's test: id, name, number, weight, visibility,
    tags) and its `verdict` (areas.Verdict) make its TestResult; the final results.json, the partial one
    written while grading runs and the watchdog's (finish_partial) all take it from here.

    A test without a verdict (`verdict` None) scores 0 and fails, its output the one line `missing`
    says: the grader failed judging it (messages.judge_failed), it has not run yet (PENDING), or the
    grading stopped before it (messages.did_not_run).

    A test in `extra_credit` is worth max_score 0 and scores up to its weight on top: an untouched
    optional part (Verdict.not_implemented) then reads "0 / 0", status passed, "Not attempted"
    (Gradescope has no neutral status; a failed 0 / 5 would show red for work nobody asked for), and an
    implemented one "5 / 0"; one a required part it builds on fails (Verdict.not_judged) reads its lines
    at 0 / 0, passed: not its fault. A wrong implementation still fails (red), with what is wrong.
    A failed test's output ends with a line on its share of the points (messages.scored), after a blank
    line, where it is worth points; `rows` keeps the harness's table of a test whose lines are shown whole.
    """
    most = 0.0 if extra_credit else float(spec.weight)
    if verdict is None:
        return _made(spec, 0.0, most, [], missing or PENDING)
    if verdict.not_implemented and extra_credit:   # which TODO was met, without the FAIL lines
        lines = [NOT_ATTEMPTED % points(spec.weight)] + [l for l in verdict.lines if not l.lstrip().startswith('FAIL')]
        return _made(spec, 0.0, most, ['\n'.join(lines)])
    if verdict.not_judged and extra_credit:
        return _made(spec, 0.0, most, ['\n'.join(verdict.lines)])
    shown = ([verdict.summary] if verdict.summary else []) + ['\n'.join(verdict.lines)]
    score, failure = round(verdict.fraction * spec.weight, SCORE_DIGITS), None
    if verdict.not_implemented:   # an untouched optional part that counts in the 100: said plainly
        failure = messages.NOT_IMPLEMENTED_OPTIONAL
    elif not verdict.passed:   # a test worth no points has no share to report: its lines say it all
        failure = messages.scored(spec.name, 100 * verdict.fraction) if spec.weight and not extra_credit \
            else '' if verdict.lines or verdict.summary else 'failed'
    return _made(spec, score, most, shown, failure, list(verdict.rows))


def _made(spec, score, most, shown, failure=None, rows=()):
    """The TestResult of `spec`: `shown`, its lines of output, then `failure` (None: none) after a blank line; it
    fails on a failure or where it scores less than `most`."""
    output = ''.join(line + '\n' for line in shown)
    if failure is not None:
        output += ('\n' if output else '') + failure
    output = output.rstrip('\n')
    status = 'failed' if failure is not None or score < most else 'passed'
    return TestResult(spec.id, spec.name, float(score), most, status, str(spec.number), output,
                      spec.visibility or 'visible', list(spec.tags or ()), list(rows))


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def validate(results):
    """Raise ValueError unless `results` follows Gradescope's results.json specification."""
    if not isinstance(results, dict):
        raise ValueError('results must be a JSON object')
    if not _number(results.get('execution_time')):
        raise ValueError('execution_time must be a number')
    if 'score' in results and not _number(results['score']):
        raise ValueError('score must be a number')
    if not isinstance(results.get('output', ''), str) or len(results.get('output', '')) > 50_000:
        raise ValueError('the top-level output must be a string under 50000 characters')
    if not isinstance(results.get('tests'), list):
        raise ValueError('tests must be a list')
    for t in results['tests']:
        if not isinstance(t, dict):
            raise ValueError('a test is not a JSON object')
        for key in ('name', 'score', 'max_score', 'status'):
            if key not in t:
                raise ValueError('a test lacks %r' % key)
        if t['status'] not in ('passed', 'failed'):
            raise ValueError('status must be passed or failed')
        if not _number(t['score']) or not _number(t['max_score']):
            raise ValueError('scores must be finite numbers')
        if t.get('visibility', 'visible') not in VISIBILITIES:
            raise ValueError('bad visibility %r' % t.get('visibility'))
        if not isinstance(t.get('output', ''), str) or len(t.get('output', '')) > 50_000:
            raise ValueError('an output is too long or not a string')
        if t.get('output_format', 'text') not in OUTPUT_FORMATS:
            raise ValueError('bad output_format %r' % t.get('output_format'))
    json.dumps(results, allow_nan=False)


# ---------------------------------------------------------------------- results.json while grading runs

PENDING = messages.PENDING


def partial(specs, verdicts, started_at, max_output_chars=MAX_OUTPUT_CHARS, extra_credit=()):
    """
    The results.json written after each finished test while the grading runs (atomically, like the
    final one): finished tests as the final results.json would show their verdicts (result_of), the
    others at 0 saying they have not run (PENDING). If the watchdog stops the grading, run_autograder
    keeps this file and finish_partial() says what did not run.
    """
    import time
    tests = {spec.id: result_of(spec, verdicts.get(spec.id), spec.id in extra_credit) for spec in specs}
    return Results(tests, messages.in_progress(len(verdicts), len(specs)),
                   time.time() - started_at, {'partial': True}, max_output_chars)


@dataclass(frozen=True)
class _Kept:
    """A test of a partial results.json as a spec for result_of: its max_score is its weight (0 for extra credit)."""
    id: str
    name: str
    number: str
    weight: float
    visibility: str
    tags: tuple


def finish_partial(path, message, execution_time=None):
    """
    run_autograder after its watchdog or a killed grader: keep the tests the grader had finished in
    `path`, mark every other one as not run with `message` (result_of without a verdict), and give
    the whole run's `execution_time` (seconds, as run_autograder measured it; the file holds the time
    of its last finished test). Returns False when there is nothing to keep.
    """
    try:
        out = load(path)
    except (OSError, ValueError):
        return False
    if not (out.extra_data or {}).get('partial'):
        return False
    kept = 0
    for tid, t in out.tests.items():
        if t.output == PENDING:
            spec = _Kept(t.id, t.name, t.number, t.max_score, t.visibility, tuple(t.tags))
            out.tests[tid] = result_of(spec, None, missing=messages.did_not_run(message))
        else:
            kept += 1
    out.output = messages.stopped_kept(message, kept)
    out.extra_data = dict(out.extra_data, partial=False, stopped=message)
    if execution_time is not None:
        out.execution_time = float(execution_time)
    out.write(path)
    return True
