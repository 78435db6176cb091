"""
A staff regrade's grading answers the class's shared inputs (autograder/staff/regrade/shared_inputs.py)
after the grading is done: its wrong outputs go to behaviour only (the observer's keep), and
results.json is byte for byte what the grading had made before the probe ran (bar its duration), so
nothing of them reaches the student's text. One grading of a RoPE bug no known bug names.
"""

import json

from autograder.judge import grade, source_patches
from autograder.staff.regrade import behaviour_prints

ROPE_BUG = (('    def __init__(self, d: int, base: int = 10_000):\n',
             '    def __init__(self, d: int, base: int = 5_000):  # the bug: no known bug names it\n'),)


def _visible(results):
    """Every text a student reads in results.json."""
    return '\n'.join([results.get('output', '')] + [t.get('output', '') for t in results.get('tests', [])] +
                     [t.get('name', '') for t in results.get('tests', [])])


def test_a_regrade_keeps_the_shared_outputs_in_behaviour_only(tmp_path):
    path = tmp_path / 'model.py'
    path.write_text(source_patches.patched_reference(ROPE_BUG, 'tests/e2e/test_shared_inputs_grading.py'))
    kept, before = {}, {}
    behaviour = behaviour_prints.observer(kept.update)

    def observe(judging, out):
        before.update(json.loads(json.dumps(out.to_json())))   # results.json as the grading made it
        behaviour(judging, out)
    grade.grade_results(str(path), 'cpu', str(tmp_path / 'results.json'), observe=observe)
    with open(tmp_path / 'results.json') as f:
        written = json.load(f)
    assert 'shared_inputs_error' not in kept, kept.get('shared_inputs_error')
    assert list(kept['shared_inputs']) == ['rope'], kept['shared_inputs']   # the attentions are judged with it
    got = kept['shared_inputs']['rope']['rope']
    assert got['shape'] == [1, 2, 12, 8] and got['wrong'] > 0
    assert written['tests'] and any(t['score'] < t['max_score'] for t in written['tests'])
    for results in (before, written):
        results.pop('execution_time', None)
    assert written == before
    text = json.dumps(written)
    assert 'shared' not in _visible(written).lower() and 'staff-shared' not in text
    assert not [v for v in got['got'] + got['reference'] if isinstance(v, float) and str(v) in text]
