"""
The results of one grading as an object: tests keyed by id, `total`, `possible`, written as
Gradescope's results.json and read back (validated) by the staff tools.

The graded tests run as a unittest suite through gradescope-utils (run_suite): each test's body
judges its probe result (the sandboxed run happened before, like any fixture), prints what the
student reads and sets its score; weight, number, visibility and tags come from grading.yaml
through the decorators, so no test code carries a number. gradescope-utils' JSONTestResult builds
each test's entry as its JSONTestRunner would write it; the entries are taken as objects (never
written as JSON text and parsed back). Its gaps are closed here: every output is truncated,
numbers are plain JSON (no NaN), each test carries its id in extra_data, and an internal error
still yields a valid file (a visible "autograder error" test at 0 and a hidden traceback for staff).
The file is written atomically, by the harness only.
"""

import json
import math
import os
import re
import traceback
import unittest
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from gradescope_utils.autograder_utils.decorators import number, partial_credit, tags, visibility
from gradescope_utils.autograder_utils.json_test_runner import JSONTestResult

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
    rows: List[tuple] = field(default_factory=list)   # the judge's table of expected against got (Verdict.rows)

    @property
    def lost(self):
        """Points lost, or a failure worth none (an extra-credit test carries max_score 0: see build_suite)."""
        return self.score < self.max_score or self.status == 'failed'

    def to_json(self, limit):
        out = {'name': self.name, 'score': round(float(self.score), SCORE_DIGITS),
               'max_score': round(float(self.max_score), SCORE_DIGITS), 'status': self.status}
        if self.number:
            out['number'] = self.number
        if self.output:
            out['output'] = truncate(self.output, limit)
            md = markdown.render(out['output'], self.rows)   # the judge's table of expected against got, if any
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
        Run one gradescope-utils test per spec; `verdict_of(spec)` returns its Verdict (called inside the test).
        Tests whose id is in `extra_credit` carry max_score 0 (see build_suite).
        """
        failures, rows = {}, {}
        by_number = {str(s.number): s for s in specs}
        tests = {}
        for t in run_suite(build_suite(specs, verdict_of, failures, extra_credit, rows)):
            spec = by_number[str(t['number'])]
            tests[spec.id] = TestResult(spec.id, t['name'], float(t['score']), float(t['max_score']), t['status'],
                                        str(t['number']), t.get('output', '').rstrip('\n'),
                                        t.get('visibility', 'visible'), list(t.get('tags') or []),
                                        rows.get(spec.id, []))
        return cls(tests, extra_data={'judge_errors': failures} if failures else None, max_output_chars=max_output_chars)

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
    carry max_score 0 (build_suite), so the tests' maxima sum to the required total (100) and an
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


def build_suite(specs, verdict_of, failures=None, extra_credit=(), rows=None):
    """
    A TestCase class with one test per spec, decorated from grading.yaml; each body judges its test.
    A bug of the grader while judging one test costs that test only: the student reads that it was
    not their fault, the traceback goes to `failures` (extra_data, staff only).

    A test in `extra_credit` is worth max_score 0 and scores up to its weight on top: an untouched
    optional part then reads "0 / 0", status passed, "Not attempted" (Gradescope has no neutral
    status; a failed 0 / 5 would show red for work nobody asked for), and an implemented one
    "5 / 0". A wrong implementation still fails (red), with what is wrong. `rows` ({id: Verdict.rows})
    receives the table of each test whose lines are printed whole.
    """
    class HW1Autograder(unittest.TestCase):
        pass

    for i, spec in enumerate(specs):
        def test(self, set_score=None, spec=spec):
            try:
                verdict = verdict_of(spec)
            except Exception as e:
                if failures is not None:
                    failures[spec.id] = traceback.format_exc()[-5000:]
                set_score(0.0)
                self.fail(messages.judge_failed(type(e).__name__))
            if verdict.not_implemented and spec.id in extra_credit:
                print(NOT_ATTEMPTED % points(spec.weight))
                print('\n'.join(l for l in verdict.lines if not l.lstrip().startswith('FAIL')))   # which TODO was met
                set_score(0.0)
                return
            if verdict.not_judged and spec.id in extra_credit:   # a required part it builds on fails: not its fault
                print('\n'.join(verdict.lines))
                set_score(0.0)
                return
            if verdict.summary:
                print(verdict.summary)
            print('\n'.join(verdict.lines))
            if rows is not None and verdict.rows:
                rows[spec.id] = list(verdict.rows)
            set_score(round(verdict.fraction * spec.weight, SCORE_DIGITS))
            if verdict.not_implemented:   # an untouched optional part that counts in the 100: said plainly
                self.fail(messages.NOT_IMPLEMENTED_OPTIONAL)
            if not verdict.passed:   # a test worth no points has no share to report: its lines say it all
                self.fail(messages.scored(spec.name, 100 * verdict.fraction) if spec.weight
                          and spec.id not in extra_credit else '' if verdict.lines or verdict.summary else 'failed')
        test.__doc__ = spec.name
        test = partial_credit(0.0 if spec.id in extra_credit else spec.weight)(test)
        test = number(spec.number)(test)
        test = visibility(spec.visibility)(test)
        test = tags(*spec.tags)(test)
        setattr(HW1Autograder, 'test_%02d_%s' % (i, spec.id.replace('-', '_')), test)
    return unittest.defaultTestLoader.loadTestsFromTestCase(HW1Autograder)


def run_suite(suite):
    """
    Each test's entry as gradescope-utils' JSONTestResult builds it (name, score, max_score,
    status, tags, output, visibility, number), in the order run: what JSONTestRunner would put in
    results.json's `tests`, taken as objects (no JSON text written and read back). Set as the
    runner sets it: printed output captured per test (buffer), no failure prefix, every test run.
    """
    entries = []
    result = JSONTestResult(None, True, 1, entries, [], '')
    result.buffer, result.failfast = True, False
    result.startTestRun()
    try:
        suite(result)
    finally:
        result.stopTestRun()
    return entries


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
    final one): finished tests with their verdicts, the others at 0 saying they have not run. If the
    watchdog stops the grading, run_autograder keeps this file and finish_partial() says what did not run.
    """
    import time
    tests = {}
    for spec in specs:
        v = verdicts.get(spec.id)
        most = 0.0 if spec.id in extra_credit else float(spec.weight)   # as in build_suite
        if v is None:
            tests[spec.id] = TestResult(spec.id, spec.name, 0.0, most, 'failed', str(spec.number),
                                        PENDING, spec.visibility, list(spec.tags))
            continue
        text = '\n'.join(([v.summary] if v.summary else []) + list(v.lines))
        tests[spec.id] = TestResult(spec.id, spec.name, round(v.fraction * spec.weight, SCORE_DIGITS),
                                    most, 'passed' if v.passed else 'failed', str(spec.number), text,
                                    spec.visibility, list(spec.tags), list(v.rows))
    return Results(tests, messages.in_progress(len(verdicts), len(specs)),
                   time.time() - started_at, {'partial': True}, max_output_chars)


def finish_partial(path, message, execution_time=None):
    """
    run_autograder after its watchdog or a killed grader: keep the tests the grader had finished in
    `path`, mark every other one as not run with `message`, and give the whole run's `execution_time`
    (seconds, as run_autograder measured it; the file holds the time of its last finished test).
    Returns False when there is nothing to keep.
    """
    try:
        out = load(path)
    except (OSError, ValueError):
        return False
    if not (out.extra_data or {}).get('partial'):
        return False
    kept = 0
    for t in out.tests.values():
        if t.output == PENDING:
            t.output, t.score, t.status = messages.did_not_run(message), 0.0, 'failed'
        else:
            kept += 1
    out.output = messages.stopped_kept(message, kept)
    out.extra_data = dict(out.extra_data, partial=False, stopped=message)
    if execution_time is not None:
        out.execution_time = float(execution_time)
    out.write(path)
    return True


# ---------------------------------------------------------------------- the dict interface older callers use

def error_results(message, staff_detail, execution_time):
    return Results.error(message, staff_detail, execution_time).to_json()


def write(results, path):
    """Write a results dict (validated) or a Results."""
    (results if isinstance(results, Results) else Results.from_json(results)).write(path)
