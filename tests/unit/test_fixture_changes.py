"""
regenerate writes the fixtures only when a change matters (autograder/staff/fixtures/fixture_changes.py):
float32 noise below the stated floor leaves every file byte for byte, a real change is written
and stated in units of its test's tolerance with the nearest known bug's distance, integers are
exact, and 10.1's logits are judged through the held-out loss they give.
"""

import os
import shutil

import numpy as np
import pytest

from autograder.judge import config, fixtures
from autograder.staff.fixtures import fixture_changes, regenerate

GRADING = config.load()


@pytest.fixture(scope='module')
def current():
    return fixtures.load(GRADING, 'cpu')


def _nudged(arrays, key, units):
    """A copy of `arrays` with `key` moved by `units` of its test's tolerance (elementwise, at the bound)."""
    out = dict(arrays)
    tol = GRADING.test(key.split('/')[0]).tolerance
    moved = arrays[key].astype(np.float64) + units * (tol.atol + tol.rtol * np.abs(arrays[key]))
    out[key] = moved.astype(arrays[key].dtype)
    return out


def test_noise_below_the_floor_is_not_a_change(current):
    new = _nudged(current.expected, 'gqa/n_kv_head=2', fixture_changes.NOISE_FLOOR / 2)
    ch = fixture_changes.compare(current.expected, new, current.known_bugs, current.known_bugs, GRADING, 'cpu')
    assert ch.matters == [] and ch.noise == 1 and ch.worst_key == 'gqa/n_kv_head=2'
    assert ch.lines()[0] == 'no change that matters'


def test_a_change_that_matters_is_stated_against_the_tolerance_and_the_nearest_bug(current):
    new = _nudged(current.expected, 'gqa/n_kv_head=2', 0.5)
    new['generate/greedy'] = current.expected['generate/greedy'].copy()
    new['generate/greedy'][0, -1] += 1
    ch = fixture_changes.compare(current.expected, new, current.known_bugs, current.known_bugs, GRADING, 'cpu')
    assert len(ch.matters) == 2, ch.matters
    gqa = next(l for l in ch.matters if l.startswith('~ gqa/n_kv_head=2'))
    assert ' = 0.5' in gqa
    assert ' of the tolerance of 4.1 gqa (atol 1e-05 + rtol 0.0001 |x|); nearest known bug gqa-' in gqa
    assert float(gqa.rsplit(' at ', 1)[1].split()[0]) > 100          # hundreds of tolerances away
    assert any('generate/greedy: 1 of' in l and 'exactly' in l for l in ch.matters)


def test_heldout_logits_are_judged_through_the_heldout_loss(current):
    key = next(k for k in current.expected if k.endswith('/heldout_logits'))
    new = dict(current.expected, **{key: current.expected[key] * np.float32(1.5)})
    ch = fixture_changes.compare(current.expected, new, {}, {}, GRADING, 'cpu')
    assert len(ch.matters) == 1 and "held-out loss" in ch.matters[0] and "of 10.1's atol" in ch.matters[0]


def test_write_if_changed_leaves_the_tree_clean_when_nothing_matters(tmp_path, monkeypatch, current):
    shutil.copytree(fixtures.folder('cpu'), str(tmp_path / 'cpu'))
    monkeypatch.setattr(fixtures, 'FIXTURES_DIR', str(tmp_path))
    monkeypatch.setattr(fixtures, 'COURSE_DIR', str(tmp_path / 'no-course'))   # a course's key would be used first
    names = ('expected.npz', 'known_bugs.npz', 'manifest.json', 'DIFF.txt')
    before = {n: (tmp_path / 'cpu' / n).read_bytes() for n in names}

    def sets(first):   # every input set as it is, set 0's expected arrays replaced by `first`
        return [(first, current.known_bugs)] + [(e, f) for e, f, _ in current.sets[1:]]
    manifest = dict(current.manifest, sandboxed_as='hw1student3')   # another pool user ran it: not a change
    noisy = _nudged(current.expected, 'model/rope/logits', fixture_changes.NOISE_FLOOR / 3)
    lines = regenerate.write_if_changed(GRADING, 'cpu', sets(noisy), manifest)
    assert lines[-1] == 'fixtures left untouched' and lines[0] == 'set 0: no change that matters'
    assert {n: (tmp_path / 'cpu' / n).read_bytes() for n in names} == before

    moved = _nudged(current.expected, 'model/rope/logits', 2.0)
    lines = regenerate.write_if_changed(GRADING, 'cpu', sets(moved), current.manifest)
    diff = (tmp_path / 'cpu' / 'DIFF.txt').read_text()
    assert 'set 0: ~ model/rope/logits: ' in diff and 'noise floor %g' % fixture_changes.NOISE_FLOOR in diff
    assert 'set 1: no change that matters' in diff
    after = {n: (tmp_path / 'cpu' / n).read_bytes() for n in names}
    # the same arrays again: nothing written, the DIFF of the last real change stays
    regenerate.write_if_changed(GRADING, 'cpu', sets(moved), current.manifest)
    assert {n: (tmp_path / 'cpu' / n).read_bytes() for n in names} == after
    assert os.path.isfile(tmp_path / 'cpu' / 'expected.npz')
    reloaded = fixtures.load(GRADING, 'cpu')
    assert reloaded.set_count == current.set_count and np.array_equal(reloaded.expected['model/rope/logits'],
                                                                       moved['model/rope/logits'])
    assert all(np.array_equal(reloaded.view(1).expected[k], v, equal_nan=v.dtype.kind == "f")
               for k, v in current.view(1).expected.items())
