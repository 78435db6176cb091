"""
The answers do not leak and cannot be memorised, on the real fixtures:
- every judge, given failing outputs (the reference's shifted, and each known bug's), writes
  messages that hold at most MAX_SHOWN values of any fixture array (where, by how much, a few
  values; never a whole expected tensor);
- text the student's process wrote (error messages, traceback lines, notes, facts) reaches a
  message cut to grading.yaml's sandbox.student_text_chars (the budget of them all:
  tests/unit/test_student_text.py);
- the input sets: the same bytes draw the same set, other bytes spread over the sets, no set is
  the profile's own seed (the inputs every grading used before), and for_submission hands the
  sandbox the inputs and the judges the fixtures of one and the same set.
"""

import re

import numpy as np
import pytest

from autograder.judge import config, fixtures, inputs, registry
from autograder.judge.student_text import Budget
from autograder.judge.verdicts import verdict_for
from autograder.sandbox import ProbeResult

GRADING = config.load()
PROFILE = GRADING.profiles['cpu']
MAX_SHOWN = 2       # values of one fixture array a judge's message may hold (compare() shows the worst one)
NUMBER = re.compile(r'-?\d+\.\d+(?:e[-+]?\d+)?|-?\d+e[-+]?\d+')


@pytest.fixture(scope='module')
def fx():
    return fixtures.load(GRADING, 'cpu')


def shifted(array):
    """A wrong output of the reference's shape: every value moved (NaN rows of 11.2 made finite first)."""
    if array.dtype.kind == 'f':   # far from every fixture value, so a "got" value never matches one by chance
        return (-1000.5 - np.nan_to_num(array)).astype(array.dtype)
    return array + 1


def failing_results(view, outputs=None):
    """{probe id: ProbeResult} with every array wrong: `outputs` per probe, or the reference's shifted."""
    return {pid: ProbeResult('ok', arrays=(outputs or {}).get(pid)
                             or {k: shifted(v) for k, v in view.probe(pid).items()})
            for pid in registry.PROBED}


def judged_text(view, results):
    texts = {}
    for spec in GRADING.enabled_tests():
        if spec.id == 'submission':
            continue
        verdict = verdict_for(spec, results[spec.id], view, GRADING, results)
        texts[spec.id] = '\n'.join(verdict.lines)
    return texts


def significant_digits(token):
    return len(token.split('e')[0].lstrip('-').replace('.', '').lstrip('0')) or 1


def shown_values(text, values):
    """
    How many distinct numbers of `text` are among `values` (sorted): a value is shown when it is within a
    relative 5e-6 of the number (the 6 significant digits messages print) and rounds to it at the number's own
    digits; the first alone let 10.1's 133k held-out logits meet a gradient printed elsewhere by chance.
    """
    if values.size == 0:
        return 0
    count = 0
    for token in set(NUMBER.findall(text)):
        n = float(token)
        if n == 0:
            continue
        i = np.searchsorted(values, n)
        near = values[max(0, i - 1):i + 1]
        digits = significant_digits(token)
        count += any(abs(v - n) <= 5e-6 * abs(n) and float('%.*g' % (digits, v)) == n for v in near)
    return count


def sorted_values(array):
    values = np.unique(array[np.isfinite(array)].astype(np.float64).ravel())
    return values[values != 0]


def fixture_arrays(view):
    """{fixture array: its distinct nonzero values, sorted}, the known bugs' arrays included."""
    out = {k: sorted_values(v) for k, v in view.expected.items() if v.dtype.kind == 'f'}
    for fp, arrays in view.known_bugs.items():
        out.update({'%s::%s' % (fp, k): sorted_values(v) for k, v in arrays.items() if v.dtype.kind == 'f'})
    return out


def leaks(view, texts, arrays=None):
    """[(test, fixture array, values shown)] past MAX_SHOWN."""
    arrays = fixture_arrays(view) if arrays is None else arrays
    found = []
    for tid, text in texts.items():
        read = (tid,) + registry.BY_ID[tid].evidence   # the fixtures a judge reads: its own probe's and its evidence's
        for key, array in arrays.items():
            if key.split('::')[-1].split('/')[0] not in read:
                continue
            shown = shown_values(text, array)
            if shown > MAX_SHOWN:
                found.append((tid, key, shown))
    return found


def test_failure_messages_show_a_few_expected_values_never_a_tensor(fx):
    view = fx.view(1)
    texts = judged_text(view, failing_results(view))
    assert any('expected' in t for t in texts.values())   # the messages do show where and by how much
    assert leaks(view, texts) == []


def test_a_known_bug_named_in_a_message_leaks_no_more(fx):
    view = fx.view(0)
    found, values = [], fixture_arrays(view)
    for fp, arrays in sorted(view.known_bugs.items())[::4]:   # one of each family of bugs: RoPE, GQA, generate
        outputs = {}
        for key, value in arrays.items():
            pid = key.split('/')[0]
            outputs.setdefault(pid, {k: v for k, v in view.probe(pid).items()})[key[len(pid) + 1:]] = value
        found += leaks(view, judged_text(view, failing_results(view, outputs)), values)
    assert found == []


def test_text_of_the_students_process_is_cut():
    limit = GRADING.sandbox['student_text_chars']
    long = 'ValueError: ' + ' '.join('%.6g' % x for x in np.random.default_rng(0).standard_normal(2000))
    result = ProbeResult('error', message=long, info={
        'case_errors': {'d2_T5': {'status': 'error', 'message': long, 'where': [long] * 3}},
        'notes': [long], 'where': [long], 'facts': {'a': [long] * 12}})
    clipped = Budget(limit, 10 ** 6).result(result)
    texts = [clipped.message, clipped.info['case_errors']['d2_T5']['message'],
             *clipped.info['case_errors']['d2_T5']['where'], *clipped.info['notes'], *clipped.info['where'],
             *clipped.info['facts']['a']]
    assert all(t.startswith(long[:limit]) and len(t.split(' [... ')[0]) == limit for t in texts)
    assert len(clipped.info['facts']['a']) < 12
    harness = ProbeResult('timeout', message='x' * 1000)   # the harness's own words stay whole
    assert Budget(limit, 10 ** 6).result(harness).message == 'x' * 1000
    verdict = verdict_for(GRADING.test('rope'), Budget(limit, 10 ** 6).result(ProbeResult('ok', info=result.info)),
                    fixtures.load(GRADING, 'cpu'), GRADING)
    assert max(len(line) for line in '\n'.join(verdict.lines).splitlines()) < limit + 100


def test_the_same_bytes_draw_the_same_set_and_other_bytes_spread(fx):
    k = fx.set_count
    assert k == PROFILE.input_sets >= 2
    a = inputs.for_submission(fx, PROFILE, ['rope'], b'print(1)\n')
    b = inputs.for_submission(fx, PROFILE, ['rope'], b'print(1)\n')
    assert a.set_index == b.set_index
    assert all(np.array_equal(a.inputs['rope'][key], b.inputs['rope'][key]) for key in a.inputs['rope'])
    drawn = [inputs.draw(fx.key, b'# submission %d\n' % i, k) for i in range(400)]
    counts = np.bincount(drawn, minlength=k)
    assert counts.min() > 400 / k / 2, counts          # every set is drawn, roughly evenly
    # without the key the draw is another function of the bytes
    assert [inputs.draw(b'\0' * 32, b'# submission %d\n' % i, k) for i in range(400)] != drawn


def test_no_set_has_the_inputs_every_grading_used_before(fx):
    public = inputs.build(PROFILE)
    seeds = [fx.view(i).input_seed for i in range(fx.set_count)]
    assert len(set(seeds)) == fx.set_count and PROFILE.seed not in seeds
    assert fx.shared_seed not in seeds + [PROFILE.seed]
    sets = [inputs.build(PROFILE, seeds[i], fx.view(i).shared_seed) for i in range(fx.set_count)]
    shared = [k for k in public if k.startswith(('heldout/', 'model/lc-init/', 'memory/'))]
    assert len(shared) > 10
    for built in sets:
        assert not np.array_equal(built['rope/x0'], public['rope/x0'])
        # the shared probes' inputs (10.1's held-out positions and initial weights, 9.1's input) are the same in
        # every set, and follow the key too: none is the public one
        assert all(np.array_equal(built[k], sets[0][k]) for k in shared)
        assert not any(np.array_equal(built[k], public[k]) for k in shared if public[k].std() > 0)


def test_the_shared_inputs_follow_the_key():
    """Who knew 10.1's initial weights and held-out positions could train the reference offline and carry its
    trained weights or held-out logits in model.py: another key, other ones."""
    one, other = inputs.shared_seed(PROFILE, b'\1' * 32), inputs.shared_seed(PROFILE, b'\2' * 32)
    a, b = inputs.build(PROFILE, 1, one), inputs.build(PROFILE, 1, other)
    assert np.array_equal(a['rope/x0'], b['rope/x0'])
    assert not np.array_equal(a['heldout/idx'], b['heldout/idx'])
    assert not np.array_equal(a['model/lc-init/transformer.wte.weight'], b['model/lc-init/transformer.wte.weight'])
    targets = inputs.heldout(PROFILE, seed=one)[1]   # what the harness rebuilds from the corpus, at the same positions
    assert np.array_equal(targets[:, :-1], a['heldout/idx'][:, 1:])


def test_the_drawn_inputs_and_fixtures_are_of_one_set(fx):
    """The reference's 2.1 output of the drawn set is RoPE of that set's inputs, not of another set's."""
    for payload in (b'a', b'b', b'c', b'd', b'e', b'f'):
        drawn = inputs.for_submission(fx, PROFILE, ['rope'], payload)
        x = drawn.inputs['rope']['rope/x1'].astype(np.float64)
        d, T = x.shape[-1], x.shape[-2]
        theta = 10000.0 ** (-np.arange(0, d, 2) / d)
        C = np.outer(np.arange(1, T + 1), theta)
        C = np.concatenate([C, C], axis=-1)
        y = x * np.cos(C) + np.concatenate([-x[..., d // 2:], x[..., :d // 2]], axis=-1) * np.sin(C)
        assert np.allclose(drawn.fixtures.probe('rope')['d%d_T%d' % (d, T)], y, atol=1e-5)
        others = [i for i in range(fx.set_count) if i != drawn.set_index]
        assert not any(np.allclose(fx.view(i).probe('rope')['d%d_T%d' % (d, T)], y, atol=1e-2) for i in others)


def test_the_key_is_part_of_the_fixtures_and_a_changed_key_makes_them_stale(fx, monkeypatch):
    assert len(fx.key) == 32 and fixtures.staleness(GRADING, 'cpu', fx.manifest) == []
    monkeypatch.setattr(fixtures, 'read_key', lambda profile: b'\1' * 32)
    assert any('draw key' in p for p in fixtures.staleness(GRADING, 'cpu', fx.manifest))
