"""
What a batch regrade keeps of each submission's WRONG outputs, for the similarity section of the
class report (staff only; similarity.py). A batch worker calls `observer` through
grade.grade_results(observe=...) and writes the prints to `<submission>/behaviour.json`, beside
its results.json; batch gathers them into `<csv>.behaviour.json`. Nothing of it goes into
results.json, which is what a student sees.

A print is kept for a test that lost points, whose output names no known bug (a known bug is
already named in the report), and whose judge compares the probe's arrays with the reference's
values. Per array of the test's own probe: the elements the harness's bound calls wrong
(|got - reference| > atol + rtol |reference|, exact for tokens; a wrong shape makes every
element wrong), their number, and up to array_prints.SAMPLE of them (evenly spaced by rank) with their flat
index, the student's value and the reference's. Elements a correct submission gets right are
left out by construction: outputs every correct submission shares are no evidence.

Not kept: 6.1 dropout (its random masks differ between correct styles), 7.1 causality (judged
against the same model's other answers), 9.1 memory (kernel readings, no reference values).
The input set is kept with the prints: arrays of different sets compare only for the probes
every set shares (inputs.SHARED_PROBES). Beside them, `shared_inputs`: the prints of the WRONG
outputs of the staff-only probe of inputs the whole class shares (shared_inputs.py), by part.
"""

import json
import os

from autograder.judge import inputs, registry
from autograder.staff.regrade import gradebook, shared_inputs
from autograder.staff.regrade.array_prints import array_print

FILE = 'behaviour.json'
NOT_COMPARED = ('dropout', 'causality')
COMPARED = tuple(t.id for t in registry.TESTS if t.probed and t.values_in_fixtures and t.id not in NOT_COMPARED)


def test_prints(judging, out):
    """{test id: {array key: print}} of the failing tests that name no known bug."""
    prints = {}
    probes = judging.run_result.probes if judging.run_result is not None else {}
    for tid in COMPARED:
        result = probes.get(tid)
        if tid not in out or not out[tid].lost or result is None or gradebook.NAMED_BUG.search(out[tid].output or ''):
            continue
        tolerance = judging.grading.test(tid).tolerance
        expected = judging.fx.probe(tid)
        arrays = {}
        for key in sorted(result.arrays):
            if key in expected:
                p = array_print(result.arrays[key], expected[key], tolerance)
                if p is not None:
                    arrays[key] = p
        if arrays:
            prints[tid] = arrays
    return prints


def observer(keep):
    """The grade_results(observe=...) callback: keep({'input_set', 'shared', 'tests'}) or keep({'error'})."""
    def observe(judging, out):
        try:
            keep({'input_set': judging.info.get('input_set'), 'shared': list(inputs.SHARED_PROBES),
                  'tests': test_prints(judging, out)})
        except Exception as e:  # noqa: BLE001  a staff extra must never cost the grading
            keep({'error': '%s: %s' % (type(e).__name__, e)})
        try:   # after every verdict is made: the probe of the class's shared inputs (shared_inputs.py)
            found, seconds = shared_inputs.prints(judging, out, judging.grading.evidence)
            keep({'shared_inputs': found, 'shared_inputs_seconds': seconds})
        except Exception as e:  # noqa: BLE001
            keep({'shared_inputs_error': '%s: %s' % (type(e).__name__, e)})
    return observe


def write(path, stamp, prints):
    """<submission>/behaviour.json: the prints, stamped as its results.json is (gather() checks the two agree)."""
    tmp = os.path.join(os.path.dirname(path), '.%s.tmp' % os.path.basename(path))
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(dict(prints, stamp=stamp), f, sort_keys=True)
    os.replace(tmp, path)


def read(path, stamp):
    """The prints at `path` when they were made with the grading stamped `stamp`, else None."""
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.pop('stamp', None) != stamp:
        return None
    return data


def side_path(csv_path):
    """The CSV's behaviour file: every submission's prints of this regrade, beside its meta file."""
    return str(csv_path) + '.behaviour.json'


def gathered(book):
    """{submission: prints} of every CSV a Gradebook was read from (a merged one: each shard's)."""
    prints = {}
    for part in book.pieces():
        try:
            with open(side_path(part.path), encoding='utf-8') as f:
                prints.update(json.load(f))
        except (OSError, ValueError):
            continue
    return prints
