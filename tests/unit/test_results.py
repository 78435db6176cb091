"""
The results object (autograder/judge/results.py): scores keyed by test id through gradescope-utils'
runner, totals rounded for people, strict JSON (no NaN, outputs truncated, numpy scalars
printed as numbers), written and read back validated.
"""

import json
import math
import os
import re

import pytest

from autograder import GRADING_YAML, REPO_ROOT
from autograder.judge import config, results
from autograder.judge.areas import Verdict
from autograder.judge.results import Results, points

SPECS = config.load(GRADING_YAML).enabled_tests()


def _run(fractions, lines=None, limit=results.MAX_OUTPUT_CHARS):
    return Results.from_verdicts(SPECS, lambda spec: Verdict(fractions.get(spec.id, 1.0),
                                                             (lines or {}).get(spec.id, ['ok'])), limit)


def test_scores_are_keyed_by_id_and_totals_add_up():
    out = _run({'rope': 0.5, 'gqa': 0.0})
    assert list(out.tests) == [s.id for s in SPECS]
    weights = {s.id: s.weight for s in SPECS}
    assert out['rope'].score == 0.5 * weights['rope'] and out['rope'].status == 'failed'
    assert out['gqa'].score == 0 and out['gqa'].lost and not out['mha-rope'].lost
    # without extra credit every test is worth its weight
    assert out.possible == sum(weights.values())
    assert out.total == out.possible - 0.5 * weights['rope'] - weights['gqa']
    assert out['rope'].number == '2.1' and not out.is_error


def test_json_round_trip_keeps_ids_scores_and_outputs(tmp_path):
    out = _run({'rope': 1 / 3}, {'rope': ['expected 1, observed 2']})
    out.output, out.extra_data = 'graded model.py.', {'profile': 'cpu'}
    path = tmp_path / 'results.json'
    out.write(str(path))
    data = json.loads(path.read_text())
    assert data['score'] == round(out.total, 2) and isinstance(data['execution_time'], float)
    assert [t['extra_data']['id'] for t in data['tests']] == list(out.tests)
    back = results.load(str(path))
    assert list(back.tests) == list(out.tests) and back.total == out.total and back.possible == out.possible
    assert back['rope'].output.startswith('expected 1, observed 2') and back.extra_data['profile'] == 'cpu'
    # results.json written before ids were stored: keyed through the numbers of grading.yaml
    for t in data['tests']:
        del t['extra_data']
    old = Results.from_json(data, {str(s.number): s.id for s in SPECS})
    assert list(old.tests) == list(out.tests)


def test_totals_and_messages_are_shown_as_people_expect():
    assert points(67.4999) == '67.5' and points(10.0) == '10' and points(2 / 3 * 5) == '3.33'
    out = _run({}, {'rope': ['observed np.int64(0) of np.float32(1.5) cases; shape (np.int64(2),)']})
    text = out.to_json()['tests'][1]['output']
    assert 'np.' not in text and 'observed 0 of 1.5 cases; shape (2,)' in text


def test_outputs_are_truncated_per_test_and_at_the_top():
    out = _run({}, {'rope': ['x' * 5000]}, limit=1000)
    out.output = 'y' * 5000
    data = out.to_json()
    assert len(data['tests'][1]['output']) < 1100
    assert 'output truncated: 4000 more characters' in data['tests'][1]['output']
    assert len(data['output']) < 1100 and 'truncated' in data['output']


def test_a_judge_bug_costs_one_test_and_tells_staff():
    def judge(spec):
        if spec.id == 'gqa':
            raise KeyError('boom')
        return Verdict(1.0, ['ok'])
    out = Results.from_verdicts(SPECS, judge)
    assert out['gqa'].score == 0 and 'not your fault' in out['gqa'].output and 'KeyError' in out['gqa'].output
    assert 'boom' not in out['gqa'].output and "KeyError: 'boom'" in out.extra_data['judge_errors']['gqa']
    assert out['rope'].score == out['rope'].max_score


def test_error_results_are_valid_and_hide_the_traceback():
    out = Results.error('Grading could not run: boom', 'Traceback ...\nValueError: boom', 1.5, reason='boom')
    data = out.to_json()
    visible, staff = data['tests']
    assert (visible['name'], visible['score'], visible['visibility']) == ('Autograder error', 0.0, 'visible')
    assert staff['visibility'] == 'hidden' and 'Traceback' in staff['output']
    assert out.is_error and data['score'] == 0 and out.extra_data['grader_error'] == 'boom'
    assert Results.from_json(data).is_error


@pytest.mark.parametrize('bad', [
    {'execution_time': '3.2', 'tests': []},
    {'execution_time': math.nan, 'tests': []},
    {'execution_time': 1, 'score': math.inf, 'tests': []},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': 1, 'max_score': 1}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': '1', 'max_score': 1, 'status': 'passed'}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': math.nan, 'max_score': 1, 'status': 'passed'}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': 1, 'max_score': 1, 'status': 'ok'}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': 1, 'max_score': 1, 'status': 'passed', 'visibility': 'x'}]},
    {'execution_time': 1,
     'tests': [{'name': 'a', 'score': 1, 'max_score': 1, 'status': 'passed', 'output': 'x' * 60000}]},
    {'execution_time': 1, 'output': 'x' * 60000, 'tests': []},
    ['not', 'an', 'object'],
])
def test_validate_refuses(bad, tmp_path):
    with pytest.raises(ValueError):
        results.validate(bad)
    path = tmp_path / 'results.json'
    path.write_text(json.dumps(bad))
    with pytest.raises(ValueError):
        results.load(str(path))


def _extra_credit_run():
    """(Results, their tests as results.json holds them, {id: weight} of the extra-credit tests, and three of
    those: one done right, one wrong, one untouched)."""
    extra = {s.id: s.weight for s in SPECS if s.optional_part}
    assert extra, 'grading.yaml has no optional part'
    done, wrong, untouched = sorted(extra)[:3]

    def judge(spec):
        if spec.id == wrong:
            return Verdict(0.0, ['FAIL the window is one token too wide'])
        if spec.id == untouched:
            return Verdict(0.0, ['not implemented (optional): NotImplementedError: TODO (optional)'],
                           not_implemented=True)
        return Verdict(1.0, ['ok'])
    out = Results.from_verdicts(SPECS, judge, extra_credit=extra)
    results.add_points(out, extra)
    return out, {t['extra_data']['id']: t for t in out.to_json()['tests']}, extra, (done, wrong, untouched)


def test_extra_credit_tests_are_worth_0_and_an_untouched_one_is_not_a_failure():
    out, data, extra, (done, wrong, untouched) = _extra_credit_run()
    assert (data[done]['score'], data[done]['max_score'], data[done]['status']) == (extra[done], 0, 'passed')
    assert (data[wrong]['score'], data[wrong]['max_score'], data[wrong]['status']) == (0, 0, 'failed')
    assert (data[untouched]['score'], data[untouched]['max_score'], data[untouched]['status']) == (0, 0, 'passed')
    assert data[untouched]['output'].startswith('Not attempted: this optional part (extra credit) is not in your '
                                                'model.py (missing, a TODO that raises NotImplementedError, or a '
                                                'setting your code never reads), so it was not graded and costs '
                                                'nothing.')
    assert 'TODO (optional)' in data[untouched]['output']   # which TODO was met
    assert out[wrong].lost and not out[untouched].lost and not out[done].lost
    # the maxima sum to the required 100; results.json's score adds the extra credit earned
    assert out.possible == 100 and out.to_json()['score'] == 100 + extra[done]
    assert out.extra_data['points'] == {'required': 100.0, 'required_max': 100.0, 'extra_credit': extra[done],
                                        'extra_credit_max': sum(extra.values())}


def test_readme_staff_md_and_grading_yaml_say_what_results_json_holds_on_extra_credit():
    """What each of the three says of an extra-credit test (its max_score, what it scores, how an untouched one
    reads) is read from its text and compared with the results.json above, so a change of either shows."""
    _, data, extra, (done, _, untouched) = _extra_credit_run()
    said_max = '%g' % data[done]['max_score']
    assert data[done]['score'] == extra[done]   # "scores up to its weight"
    untouched_reads = ('%g' % data[untouched]['score'], '%g' % data[untouched]['max_score'], data[untouched]['status'])
    for doc in ('README.md', 'docs/STAFF.md', 'grading.yaml'):
        with open(os.path.join(REPO_ROOT, doc), encoding='utf-8') as f:
            text = re.sub(r'\s*\n\s*#?\s*', ' ', f.read())   # wrapped lines and YAML comments as one text
        assert re.findall(r'max_score (\d+)', text) == [said_max], doc
        assert re.search(r'worth max_score \d+ in results\.json and scores up to its weight', text), doc
        assert re.findall(r'"Not attempted" \((\d+) / (\d+), (?:status )?(passed|failed)', text) == [untouched_reads], \
            doc
        assert 'own max_score' not in text, doc


def test_a_failure_worth_no_points_ends_with_its_own_lines():
    # 1.1 is worth no points: no "0%" and no "see the lines above" under the one line that says what was found
    out = Results.from_verdicts(SPECS, lambda spec: Verdict(0.0 if spec.id == 'submission' else 1.0,
                                                  ['no model.py in the submission: upload your mingpt/model.py '
                                                   '(the upload holds notes.txt)']))
    assert out['submission'].status == 'failed'
    assert out['submission'].output == ('no model.py in the submission: upload your mingpt/model.py '
                                        '(the upload holds notes.txt)')


def test_partial_results_and_what_the_watchdog_keeps(tmp_path):
    """Written after each finished test while grading runs; run_autograder's watchdog keeps those, the rest did not
    run."""
    specs = config.load(GRADING_YAML).enabled_tests()
    path = str(tmp_path / 'results.json')
    results.partial(specs, {'rope': Verdict(1.0, ['4 of 4 cases match']), 'gqa': Verdict(0.5, ['half'])}, 0).write(path)
    out = results.load(path)
    assert out.extra_data['partial'] is True and out.score('rope') == out['rope'].max_score
    assert out.score('gqa') == out['gqa'].max_score / 2 and out['loss-curve'].output == results.PENDING
    assert results.finish_partial(path, 'Grading was stopped after 570 s.', 572.0)
    out = results.load(path)
    assert out.execution_time == 572.0   # the whole run's, not the last finished test's
    assert out.extra_data['partial'] is False and out.score('rope') == out['rope'].max_score
    assert out['loss-curve'].score == 0 and out['loss-curve'].output == 'did not run: Grading was stopped after 570 s.'
    assert out.output == 'Grading was stopped after 570 s. 2 test(s) had finished and are kept; the others did not run.'
    assert not results.finish_partial(path, 'again')   # only a partial file is finished, once
    Results.error('x', 'y', 1.0).write(path)
    assert not results.finish_partial(path, 'the final results of a grading are never touched')


def test_the_tests_are_gradescope_utils_entries_as_its_runner_writes_them():
    # run_suite takes JSONTestResult's entries as objects; JSONTestRunner writes them as JSON text
    import io
    from gradescope_utils.autograder_utils.json_test_runner import JSONTestRunner

    def judge(spec):
        if spec.id == 'gqa':
            raise RuntimeError('a bug of the grader')
        fraction = {'rope': 1 / 3, 'mha': 0.0}.get(spec.id, 1.0)
        lines = ['line \u00e9 %s' % spec.id, '\udc80']   # a lone surrogate survives either way
        return Verdict(fraction, lines, summary='s' if spec.id == 'mha' else '')
    extra = {s.id for s in SPECS if s.optional_part}
    stream = io.StringIO()
    JSONTestRunner(stream=stream, stdout_visibility='hidden', failure_prefix='').run(
        results.build_suite(SPECS, judge, {}, extra, {}))
    entries = results.run_suite(results.build_suite(SPECS, judge, {}, extra, {}))
    # tags are the decorator's tuple (Results.from_verdicts lists them)
    assert [dict(e, tags=list(e['tags'])) if 'tags' in e else e for e in entries] == \
        json.loads(stream.getvalue())['tests']
