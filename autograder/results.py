"""
Builds results.json the way Gradescope specifies it. The graded tests run as a unittest
suite through gradescope-utils' JSONTestRunner, with each test's weight, number,
visibility and tags set on its method from grading.yaml, so no test code carries a number.
The runner's gaps are closed here: execution_time becomes a number, outputs are truncated,
and any internal error still yields a valid file (a visible "autograder error" test at 0
and a hidden traceback for staff). The file is written atomically, by the harness only.
"""

import io
import json
import os
import unittest

from gradescope_utils.autograder_utils.decorators import number, partial_credit, tags, visibility
from gradescope_utils.autograder_utils.json_test_runner import JSONTestRunner


def _truncate(text, limit):
    if len(text) <= limit:
        return text
    return text[:limit] + '\n[... output truncated: %d more characters]' % (len(text) - limit)


def build_suite(specs, verdicts):
    """A TestCase class with one test per spec, decorated from grading.yaml; the bodies only report verdicts."""
    class HW1Autograder(unittest.TestCase):
        pass

    for i, spec in enumerate(specs):
        def test(self, set_score=None, spec=spec):
            verdict = verdicts[spec.id]
            if verdict.summary:
                print(verdict.summary)
            print('\n'.join(verdict.lines))
            set_score(round(verdict.fraction * spec.weight, 4))
            if not verdict.passed:
                self.fail('%s scored %.0f%% of its points' % (spec.name, 100 * verdict.fraction))
        test.__doc__ = spec.name
        test = partial_credit(spec.weight)(test)
        test = number(spec.number)(test)
        test = visibility(spec.visibility)(test)
        test = tags(*spec.tags)(test)
        setattr(HW1Autograder, 'test_%02d_%s' % (i, spec.id.replace('-', '_')), test)
    return unittest.defaultTestLoader.loadTestsFromTestCase(HW1Autograder)


def run_suite(specs, verdicts, max_output_chars):
    stream = io.StringIO()
    JSONTestRunner(stream=stream, stdout_visibility='hidden', failure_prefix='').run(build_suite(specs, verdicts))
    results = json.loads(stream.getvalue())
    for t in results['tests']:
        if 'output' in t:
            t['output'] = _truncate(t['output'].rstrip('\n'), max_output_chars)
    return results


def error_results(message, staff_detail, execution_time):
    """What students see when the grader itself failed: a visible 0 and a hidden traceback for staff."""
    return {
        'score': 0.0,
        'execution_time': float(execution_time),
        'output': 'The autograder hit an internal error; this is not your fault. Course staff can see the details.',
        'stdout_visibility': 'hidden',
        'tests': [
            {'name': 'Autograder error', 'number': '0.1', 'score': 0.0, 'max_score': 0.0, 'status': 'failed',
             'output': message[:2000], 'visibility': 'visible', 'tags': ['submission']},
            {'name': 'Autograder error: details for staff', 'number': '0.2', 'score': 0.0, 'max_score': 0.0,
             'status': 'failed', 'output': staff_detail[-20000:], 'visibility': 'hidden'},
        ],
        'leaderboard': [],
    }


def validate(results):
    """Raise ValueError unless `results` follows Gradescope's results.json specification."""
    if not isinstance(results.get('execution_time'), (int, float)):
        raise ValueError('execution_time must be a number')
    if not isinstance(results.get('tests'), list):
        raise ValueError('tests must be a list')
    for t in results['tests']:
        for key in ('name', 'score', 'max_score', 'status'):
            if key not in t:
                raise ValueError('a test lacks %r' % key)
        if t['status'] not in ('passed', 'failed'):
            raise ValueError('status must be passed or failed')
        if not isinstance(t['score'], (int, float)) or not isinstance(t['max_score'], (int, float)):
            raise ValueError('scores must be numbers')
        if t.get('visibility', 'visible') not in ('hidden', 'after_due_date', 'after_published', 'visible'):
            raise ValueError('bad visibility %r' % t.get('visibility'))
        if len(t.get('output', '')) > 50_000:
            raise ValueError('an output is too long')
    json.dumps(results, allow_nan=False)  # NaN/Infinity are not JSON: Gradescope would refuse the file


MAX_TOP_OUTPUT_CHARS = 10_000


def write(results, path):
    if len(results.get('output', '')) > MAX_TOP_OUTPUT_CHARS:
        results = dict(results, output=_truncate(results['output'], MAX_TOP_OUTPUT_CHARS))
    validate(results)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, '.results.json.tmp')
    with open(tmp, 'w') as f:
        json.dump(results, f, indent=2, allow_nan=False)
        f.write('\n')
    os.replace(tmp, path)
