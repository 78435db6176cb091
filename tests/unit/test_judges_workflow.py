"""
The judges of issue 10 (accuracy-a) on synthetic probe results: memory measured the course's
way, the sliding window (optional) and extra credit. Fast: no sandbox, no student code.
Causality, generation and the KV cache: test_judges_evidence.py.
"""

import numpy as np
import pytest

from autograder import config, grade, results
from autograder.checks import optional, resources
from autograder.fixtures import Fixtures
from autograder.sandbox import ProbeResult

GRADING = config.load()
KVS = (6, 3, 2, 1)


def fixtures(probe_id, arrays):
    return Fixtures('cpu', {'%s/%s' % (probe_id, k): v for k, v in arrays.items()}, {}, {})


def ok(arrays, **info):
    return ProbeResult('ok', arrays=arrays, info=info)


# ----------------------------------------------------------------------------- memory (9.1)

NET, PEAK = 222208, 295936
TOL = GRADING.test('memory').tolerance.rtol


def fig(reported, net=NET, peak=PEAK, forced=0, exact=1):
    return np.array([net, peak, reported, forced, exact], dtype=np.int64)


def case(reported, readings=(), meters=(), **kw):
    return resources.judge_memory_case(6, fig(reported, **kw), np.array(readings, np.int64).reshape(-1, 2),
                                       np.array(meters, np.int64).reshape(-1, 2), TOL)


def test_memory_course_style_readings_pass():
    # start, end of memory_allocated(): end - start is a measurement of the whole attention
    good, line = case(246784, readings=[(0, 0), (0, 246784)])
    assert good, line


def test_memory_attention_memory_figure_passes():
    good, line = case(246784, meters=[(246784, 295936)])
    assert good, line


def test_memory_peak_reading_minus_start_passes():
    good, line = case(PEAK - 1000, readings=[(0, 1000), (1, PEAK)])
    assert good, line


@pytest.mark.parametrize('reported, words', [
    (0, 'not measured'), (-1, 'no figure'), (10 ** 9, 'not a measurement'), (250000 * 2, 'not a measurement'),
    (NET // 2, 'outside the measured region')])
def test_memory_bad_figures_fail_and_say_which(reported, words):
    good, line = case(reported, readings=[(0, 0), (0, reported)])
    assert not good and words in line, line


def test_memory_scaled_figure_inside_the_bounds_fails_as_no_reading():
    good, line = case(int(246784 * 1.1), meters=[(246784, 295936)])
    assert not good and 'no difference of two memory readings' in line, line


def test_memory_constant_without_readings_fails():
    good, line = case(250000)
    assert not good and 'took none' in line, line


def test_memory_is_cuda_guard_is_judged_with_is_cuda_forced():
    good, line = case(246784, readings=[(0, 0), (0, 246784)], forced=1)
    assert good and 'is_cuda' in line, line
    good, line = case(0, forced=1)
    assert not good and 'not measured' in line and 'is_cuda' in line, line


def test_memory_cuda_only_branch_that_cannot_run_is_not_docked():
    good, line = case(0, forced=-1)
    assert good and 'not docked' in line, line


def test_memory_gpu_profile_judges_bounds_only():
    assert case(240000, exact=0)[0]
    assert not case(10 ** 9, exact=0)[0]


def test_memory_styles_that_allocate_more_with_fewer_kv_heads_get_full_marks():
    # skipping the K/V copy at g = 1: multi-head attention allocates least; no "falls with n_kv_head" rule
    arrays, expected = {}, {}
    for i, kv in enumerate(KVS):
        net, peak = 150000 + 20000 * i, 200000 + 20000 * i
        reported = net + 1000
        arrays['n_kv_head=%d/figures' % kv] = fig(reported, net=net, peak=peak)
        arrays['n_kv_head=%d/readings' % kv] = np.array([[0, 5], [0, reported + 5]], np.int64)
        arrays['n_kv_head=%d/meters' % kv] = np.zeros((0, 2), np.int64)
        expected['n_kv_head=%d/figures' % kv] = fig(246784)
    v = resources.judge_memory(GRADING.test('memory'), ok(arrays), fixtures('memory', expected), GRADING)
    assert v.fraction == 1.0, v.lines


# causality (7.1), generate (8.2) and the KV cache (12.1): tests/unit/test_judges_evidence.py


# ----------------------------------------------------------------------------- sliding window (11.1, 11.2)

def sw_arrays():
    rng = np.random.default_rng(3)
    out = {}
    for kind in ('mha', 'gqa'):
        win = rng.standard_normal((2, 24, 48)).astype(np.float32)
        out[kind + '/dense'], out[kind + '/banded'] = win, win.copy()
        out[kind + '/no_window'] = rng.standard_normal((2, 24, 48)).astype(np.float32)
    return out


def test_sliding_window_ignored_is_not_implemented_optional():
    ref = sw_arrays()
    fx = fixtures('sliding-window', ref)
    assert optional.judge_sliding_window(GRADING.test('sliding-window'), ok(dict(ref)), fx, GRADING).fraction == 1.0
    ignored = {k: ref[k.split('/')[0] + '/no_window'] for k in ref}
    v = optional.judge_sliding_window(GRADING.test('sliding-window'), ok(ignored), fx, GRADING)
    assert v.not_implemented and v.fraction == 0.0
    todo = {'status': 'not_implemented', 'message': 'NotImplementedError: TODO (optional)'}
    v = optional.judge_sliding_window(GRADING.test('sliding-window'), ok(
        {'gqa/dense': ignored['gqa/dense'], 'gqa/banded': ignored['gqa/banded']},
        case_errors={'mha/dense': todo, 'mha/banded': todo}), fx, GRADING)
    assert v.not_implemented


def test_window_memory_is_credited_only_for_windowed_outputs():
    rng = np.random.default_rng(4)
    ref = {}
    for n, peak in ((128, 1000), (256, 2000), (512, 4000)):
        ref['N=%d/peak' % n] = np.array([peak])
        ref['N=%d/y' % n] = rng.standard_normal((1, n, 48)).astype(np.float32)
    fx = fixtures('sliding-window-memory', ref)
    spec = GRADING.test('sliding-window-memory')
    assert resources.judge_window_memory(spec, ok(dict(ref)), fx, GRADING).fraction == 1.0
    wrong = dict(ref, **{'N=512/y': ref['N=512/y'] + 1.0})
    v = resources.judge_window_memory(spec, ok(wrong), fx, GRADING)
    assert v.fraction == 0.0 and 'not the windowed attention' in v.lines[0]


# ----------------------------------------------------------------------------- extra credit

def test_required_weights_sum_to_100_and_optional_parts_are_extra():
    required = sum(t.weight for t in GRADING.tests if not GRADING.is_extra_credit(t))
    extra = [t.id for t in GRADING.tests if GRADING.is_extra_credit(t)]
    assert required == 100 and set(extra) == {'sliding-window', 'sliding-window-memory', 'kv-cache'}


def test_points_split_required_and_extra_credit():
    from autograder.results import Results, TestResult
    out = Results({tid: TestResult(tid, tid, score, max_score, number=num) for tid, score, max_score, num in (
        ('a', 60.0, 60.0, '1'), ('b', 40.0, 40.0, '2'), ('sliding-window', 5.0, 5.0, '11.1'),
        ('kv-cache', 0.0, 5.0, '12.1'))}, execution_time=1.0)
    results.add_points(out, {'sliding-window', 'kv-cache'})
    assert out.to_json()['score'] == 105.0
    assert out.extra_data['points'] == {'required': 100.0, 'required_max': 100.0, 'extra_credit': 5.0,
                                        'extra_credit_max': 10.0}
    assert 'total: 100 / 100 (+ 5 of 10 extra credit)' in grade.table(out)


def test_extra_credit_switch_makes_a_part_required(tmp_path):
    text = open(GRADING.path).read()
    p = tmp_path / 'grading.yaml'
    p.write_text(text.replace('  extra_credit:\n    sliding_window: true', '  extra_credit:\n    sliding_window: false'))
    g = config.load(str(p))
    assert not g.is_extra_credit(g.test('sliding-window')) and g.is_extra_credit(g.test('kv-cache'))
    p.write_text(text.replace('  extra_credit:\n    sliding_window: true', '  extra_credit:\n    flash: true'))
    with pytest.raises(config.GradingConfigError, match='unknown optional part'):
        config.load(str(p))


def test_negated_optional_blocks_replace_the_part_when_it_is_off():
    from autograder.staff.handout import strip_markers
    text = ('x = 1\n# BEGIN OPTIONAL kv_cache\ncached = True\n# END OPTIONAL\n'
            '# BEGIN OPTIONAL !kv_cache\n# BEGIN PROMPT\n# cached = False\n# END PROMPT\n# END OPTIONAL\n')
    on = strip_markers(text, 't.py', {'sliding_window': True, 'kv_cache': True})
    off = strip_markers(text, 't.py', {'sliding_window': True, 'kv_cache': False})
    assert 'cached = True' in on and 'cached = False' not in on
    assert 'cached = False' in off and 'cached = True' not in off
