"""
The results object (autograder/judge/results.py): scores keyed by test id, each entry as
gradescope-utils' runner would write it (its oracle below), totals rounded for people, strict
JSON (no NaN, outputs truncated, numpy scalars printed as numbers), written and read back validated.
"""

import json
import math
import os
import re

import pytest

from autograder import GRADING_YAML, REPO_ROOT
from autograder.judge import config, messages, results
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
    assert out['loss-curve'].status == 'failed' \
        and out['loss-curve'].max_score == {s.id: s.weight for s in specs}['loss-curve']
    assert out.output == 'Grading was stopped after 570 s. 2 test(s) had finished and are kept; the others did not run.'
    assert not results.finish_partial(path, 'again')   # only a partial file is finished, once
    Results.error('x', 'y', 1.0).write(path)
    assert not results.finish_partial(path, 'the final results of a grading are never touched')


def test_a_stopped_grading_keeps_each_finished_test_as_the_final_results_json_shows_it(tmp_path):
    """
    The watchdog's results.json (a partial one, finished by finish_partial) shows every finished test as the
    final one would: an untouched optional part "Not attempted", 0 / 0 and passed (it read "failed", without
    those words, when the partial file had rules of its own), one not judged because a required part it builds
    on fails likewise, a failed required test with its share of the points, a test worth none with its lines.
    """
    extra = {s.id: s.weight for s in SPECS if s.optional_part}
    untouched, blocked = sorted(extra)[:2]
    finished = {
        untouched: Verdict(0.0, ['not implemented (optional): NotImplementedError: TODO (optional)', 'FAIL case 1'],
                           not_implemented=True),
        blocked: Verdict(0.0, ['not judged: 2.1 fails'], not_judged=True),
        'rope': Verdict(0.5, ['FAIL 2 of 4 cases'], rows=[('a', 'b', '1', '2', '0.1')]),
        'submission': Verdict(0.0, ['no model.py in the submission']),
    }
    final = Results.from_verdicts(SPECS, lambda spec: finished.get(spec.id), extra_credit=extra).to_json()
    path = str(tmp_path / 'results.json')
    results.partial(SPECS, finished, 0, extra_credit=extra).write(path)
    assert results.finish_partial(path, 'Grading was stopped after 570 s.', 572.0)
    kept = {t['extra_data']['id']: t for t in results.load(path).to_json()['tests']}
    shown = {t['extra_data']['id']: t for t in final['tests']}
    assert all(kept[tid] == shown[tid] for tid in finished), [tid for tid in finished if kept[tid] != shown[tid]]
    assert (kept[untouched]['score'], kept[untouched]['max_score'], kept[untouched]['status']) == (0, 0, 'passed')
    assert kept[untouched]['output'].startswith('Not attempted:') and 'FAIL' not in kept[untouched]['output']
    assert results.load(path)['rope'].output.endswith('\n\n' + messages.scored(kept['rope']['name'], 50))
    # the tests that had not finished: 0, failed, saying why (an extra-credit one keeps its max_score 0)
    others = [s for s in SPECS if s.id not in finished]
    assert others and all(kept[s.id]['output'] == 'did not run: Grading was stopped after 570 s.'
                          and kept[s.id]['status'] == 'failed' and kept[s.id]['score'] == 0
                          and kept[s.id]['max_score'] == (0 if s.id in extra else s.weight) for s in others)


def _gradescope_utils_suite(specs, verdict_of, extra_credit):
    """
    The same tests written the gradescope-utils way (the oracle of result_of, not the grader's path): one
    unittest method per spec, decorated from grading.yaml, whose body prints what the student reads, sets
    its score and fails where the test failed; JSONTestRunner writes their entries.
    """
    import unittest

    from gradescope_utils.autograder_utils.decorators import number, partial_credit, tags, visibility

    class HW1Autograder(unittest.TestCase):
        pass

    for i, spec in enumerate(specs):
        def test(self, set_score=None, spec=spec):
            try:
                verdict = verdict_of(spec)
            except Exception as e:  # noqa: BLE001
                set_score(0.0)
                self.fail(messages.judge_failed(type(e).__name__))
            extra = spec.id in extra_credit
            if verdict.not_implemented and extra:
                print(results.NOT_ATTEMPTED % points(spec.weight))
                print('\n'.join(l for l in verdict.lines if not l.lstrip().startswith('FAIL')))
                set_score(0.0)
                return
            if verdict.not_judged and extra:
                print('\n'.join(verdict.lines))
                set_score(0.0)
                return
            if verdict.summary:
                print(verdict.summary)
            print('\n'.join(verdict.lines))
            set_score(round(verdict.fraction * spec.weight, results.SCORE_DIGITS))
            if verdict.not_implemented:
                self.fail(messages.NOT_IMPLEMENTED_OPTIONAL)
            if not verdict.passed:
                self.fail(messages.scored(spec.name, 100 * verdict.fraction) if spec.weight and not extra
                          else '' if verdict.lines or verdict.summary else 'failed')
        test.__doc__ = spec.name
        test = partial_credit(0.0 if spec.id in extra_credit else spec.weight)(test)
        test = number(spec.number)(test)
        test = visibility(spec.visibility)(test)
        test = tags(*spec.tags)(test)
        setattr(HW1Autograder, 'test_%02d_%s' % (i, spec.id.replace('-', '_')), test)
    return unittest.defaultTestLoader.loadTestsFromTestCase(HW1Autograder)


@pytest.mark.parametrize('extra_credit', [False, True])
def test_each_entry_is_what_gradescope_utils_runner_writes_for_the_same_test(extra_credit):
    """result_of against the oracle: every kind of verdict (passed, partial, 0 with and without lines, a summary,
    untouched and not judged optional parts, a judge's bug, text with a lone surrogate or a trailing newline)."""
    import io

    from gradescope_utils.autograder_utils.json_test_runner import JSONTestRunner
    kinds = [
        lambda s: Verdict(1.0, ['line \u00e9 %s' % s.id, '\udc80']),
        lambda s: Verdict(1 / 3, ['FAIL one', 'two\n'], summary='s', rows=[('a', 'b', '1', '2', '0.1')]),
        lambda s: Verdict(0.0, []),
        lambda s: Verdict(0.0, ['FAIL x']),
        lambda s: Verdict(0.0, [], summary='loss 3.1'),
        lambda s: Verdict(0.0, ['not implemented (optional): TODO', 'FAIL y'], not_implemented=True),
        lambda s: Verdict(0.0, ['builds on 2.1, which fails'], not_judged=True),
        lambda s: Verdict(1.0, []),
    ]

    def judge(spec):
        i = [s.id for s in SPECS].index(spec.id)
        if i % (len(kinds) + 1) == len(kinds):
            raise RuntimeError('a bug of the grader')
        return kinds[i % (len(kinds) + 1)](spec)
    extra = {s.id: s.weight for s in SPECS} if extra_credit else {}   # every branch of either kind of test
    stream = io.StringIO()
    JSONTestRunner(stream=stream, stdout_visibility='hidden', failure_prefix='').run(
        _gradescope_utils_suite(SPECS, judge, extra))
    written = json.loads(stream.getvalue())['tests']
    ours = Results.from_verdicts(SPECS, judge, extra_credit=extra)
    assert len(written) == len(ours.tests) == len(SPECS)
    for w, (tid, t) in zip(written, ours.tests.items()):
        assert (t.name, t.score, t.max_score, t.status, t.number, t.visibility, t.tags) == \
            (w['name'], w['score'], w['max_score'], w['status'], w['number'], w.get('visibility', 'visible'),
             list(w.get('tags', []))), tid
        assert t.output == w.get('output', '').rstrip('\n'), tid
    assert set(ours.extra_data['judge_errors']) == {s.id for i, s in enumerate(SPECS)
                                                    if i % (len(kinds) + 1) == len(kinds)}
