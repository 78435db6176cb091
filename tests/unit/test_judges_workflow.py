"""
Judges on synthetic probe results: memory measured the course's
way, the sliding window (optional) and extra credit. Fast: no sandbox, no student code.
Causality, generation and the KV cache: test_judges_evidence.py.
"""

import numpy as np
import pytest

from autograder.judge import config, grade, results
from autograder.judge.areas import sliding_window, memory
from autograder.judge.fixtures import Fixtures
from autograder.sandbox import ProbeResult

GRADING = config.load()


def fixtures(probe_id, arrays):
    return Fixtures('cpu', {'%s/%s' % (probe_id, k): v for k, v in arrays.items()}, {}, {})


def ok(arrays, **info):
    return ProbeResult('ok', arrays=arrays, info=info)


# ----------------------------------------------------------------------------- memory (9.1)

FLOORS = {kv: memory.memory_floor(GRADING.profiles['cpu'], kv)[0] for kv in (6, 3, 2, 1)}   # (4, kv, 256, 256) float32
LABELS = memory.memory_labels(GRADING.profiles['cpu'])


def memory_result(figures, readings, pid=41):
    """A memory probe's result: figures {label: value}, readings {label: [(kind, value)]} between the call's marks."""
    log = []
    for label in LABELS:
        log.append({'kind': 'mark', 'value': 0, 'pid': pid, 'label': 'start ' + label})
        log += [{'kind': kind, 'value': value, 'pid': pid} for kind, value in readings.get(label, [])]
        log.append({'kind': 'mark', 'value': 0, 'pid': pid, 'label': 'end ' + label})
    for i, e in enumerate(log):
        e['i'] = i
    arrays = {label + '/figure': np.array([0, v], np.float64) for label, v in figures.items()}
    r = ok(arrays)
    r.harness = {'link': log}
    return r


def judged_memory(figures, readings, **kw):
    return memory.judge_memory(GRADING.test('memory'), memory_result(figures, readings, **kw),
                                  Fixtures('cpu', {}, {}, {}), GRADING)


def test_memory_judges_the_harness_log_and_each_style_may_allocate_its_own_amount():
    # more with fewer KV heads, as styles that skip the K/V copy at g = 1 do: no ordering between calls is judged
    nets = dict(zip(LABELS, (19_345_408, 26_820_608, 26_685_440, 39_596_032)))
    readings = {label: [('allocated', 200_000_000), ('allocated', 200_000_000 + n)] for label, n in nets.items()}
    v = judged_memory(nets, readings)
    assert v.fraction == 1.0, v.lines
    # the same readings written by the child itself are no evidence: only the harness's log of the link counts
    r = memory_result(nets, readings)
    r.arrays['log'], r.harness = np.zeros((8, 5), np.int64), {}
    v = memory.judge_memory(GRADING.test('memory'), r, Fixtures('cpu', {}, {}, {}), GRADING)
    assert v.fraction == 0.0, v.lines


def test_memory_figures_without_the_readings_behind_them_fail():
    readings = {label: [('allocated', 200_000_000), ('allocated', 219_345_408)] for label in LABELS}
    v = judged_memory(dict.fromkeys(LABELS, 250_000), readings)
    assert v.fraction == 0.0 and 'the same figure for every call (a constant?)' in v.lines[1], v.lines
    half = dict(dict.fromkeys(LABELS, 19_345_408), **{LABELS[0]: 300_000})
    v = judged_memory(half, dict(readings, **{LABELS[0]: [('allocated', 10), ('allocated', 300_010)]}))
    assert v.fraction == (len(LABELS) - 1) / len(LABELS) and 'misses part of the attention core' in v.lines[1]


def test_memory_floor_is_one_head_per_kv_head_so_a_gqa_value_bug_costs_only_its_own_tests():
    # a core that sums the scores over each query group keeps (B, n_kv_head, T, T) weights: 4.1 catches that bug,
    # 9.1 must not; a region of the projections alone stays far below even the n_kv_head=1 floor
    assert FLOORS[6] == 4 * 6 * 256 * 256 * 4 and FLOORS[1] == 4 * 1 * 256 * 256 * 4
    grouped = dict(zip(LABELS, (20_922_368, 10_895_360, 7_548_928, 3_948_544)))   # measured on gqa_group_sum
    readings = {label: [('allocated', 200_000_000), ('allocated', 200_000_000 + n)] for label, n in grouped.items()}
    assert judged_memory(grouped, readings).fraction == 1.0
    projections = dict(grouped, **{LABELS[-1]: 589_824})   # the largest projections-only region measured
    readings[LABELS[-1]] = [('allocated', 200_000_000), ('allocated', 200_589_824)]
    v = judged_memory(projections, readings)
    assert v.fraction == (len(LABELS) - 1) / len(LABELS) and 'misses part of the attention core' in v.lines[-1], v.lines


def test_memory_readings_of_another_process_or_outside_the_call_are_not_evidence():
    r = memory_result(dict.fromkeys(LABELS, 19_345_408), {})
    r.harness['link'] = [dict(e, pid=99) if e['kind'] != 'mark' else e for e in r.harness['link']]
    r.harness['link'].insert(0, {'i': -1, 'kind': 'allocated', 'value': 0, 'pid': 41})
    r.harness['link'].insert(1, {'i': -1, 'kind': 'allocated', 'value': 19_345_408, 'pid': 41})
    v = memory.judge_memory(GRADING.test('memory'), r, Fixtures('cpu', {}, {}, {}), GRADING)
    assert v.fraction == 0.0 and 'took no memory reading during the call' in v.lines[1], v.lines


def test_memory_a_call_that_raised_in_the_cuda_view_names_the_line():
    r = memory_result(dict.fromkeys(LABELS[1:], 19_345_408),
                      {label: [('allocated', 0), ('allocated', 19_345_408)] for label in LABELS})
    r.info['case_errors'] = {LABELS[0]: {'status': 'error', 'message': "AttributeError: module 'torch._C' has no "
                                         "attribute '_cuda_getDeviceCount'",
                                         'where': ['model.py line 251, in forward: torch._C._cuda_getDeviceCount()']}}
    v = memory.judge_memory(GRADING.test('memory'), r, Fixtures('cpu', {}, {}, {}), GRADING)
    assert v.fraction == (len(LABELS) - 1) / len(LABELS)
    assert 'model.py line 251' in v.lines[1] and 'CUDA view' in v.lines[1]


# causality (7.1), generate (8.2) and the KV cache (12.1): tests/unit/test_judges_evidence.py


# ----------------------------------------------------------------------------- sliding window (11.1, 11.2)

def sw_arrays():
    rng = np.random.default_rng(3)
    out = {}
    for kind in ('mha', 'gqa'):
        out[kind + '/window'] = rng.standard_normal((2, 24, 48)).astype(np.float32)
        out[kind + '/no_window'] = rng.standard_normal((2, 24, 48)).astype(np.float32)
    out['banded/w6'] = rng.standard_normal((2, 6, 24, 8)).astype(np.float32)
    return out


def test_sliding_window_ignored_is_not_implemented_optional():
    ref = sw_arrays()
    fx = fixtures('sliding-window', ref)
    assert sliding_window.judge_sliding_window(GRADING.test('sliding-window'), ok(dict(ref)), fx,
                                               GRADING).fraction == 1.0
    ignored = {k: ref[k.split('/')[0] + '/no_window'] for k in ref if not k.startswith('banded')}
    todo = {'status': 'not_implemented', 'message': 'NotImplementedError: TODO (optional)'}
    v = sliding_window.judge_sliding_window(GRADING.test('sliding-window'),
                                            ok(ignored, case_errors={'banded/w6': todo}), fx, GRADING)
    assert v.not_implemented and v.fraction == 0.0
    v = sliding_window.judge_sliding_window(GRADING.test('sliding-window'), ok(
        {'gqa/window': ref['gqa/window'], 'banded/w6': ref['banded/w6']}, case_errors={'mha/window': todo}),
        fx, GRADING)
    assert not v.not_implemented and 0 < v.fraction < 1


def window_fixture():
    prof = GRADING.profiles['cpu']
    sw = prof.sliding_window
    out = np.random.default_rng(4).standard_normal((1, sw.memory_heads, sw.memory_seq, sw.memory_head_dim))
    out = out.astype(np.float32)
    kept = memory.keep_window_rows({'sliding-window-memory/N=%d/out' % sw.memory_seq: out}, {}, prof)
    return out, Fixtures('cpu', kept, {}, {}), 'N=%d/out' % sw.memory_seq


def test_window_memory_fixtures_keep_only_the_picked_rows_and_the_judge_compares_them():
    out, fx, key = window_fixture()
    kept = fx.probe('sliding-window-memory')[key]
    rows = memory.judged_rows(kept)
    sw = GRADING.profiles['cpu'].sliding_window
    assert len(rows) == sw.memory_rows and rows[0] == 0 and rows[-1] == sw.memory_seq - 1
    assert np.isnan(kept).sum() == kept.size - len(rows) * 2 * 8
    again = memory.keep_window_rows({'sliding-window-memory/' + key: out}, fx.expected, GRADING.profiles['cpu'])
    assert np.array_equal(memory.judged_rows(again['sliding-window-memory/' + key]), rows)   # stable
    spec = GRADING.test('sliding-window-memory')
    assert memory.judge_window_memory(spec, ok({key: out}), fx, GRADING).fraction == 1.0
    wrong = out.copy()
    wrong[:, :, rows[7]] += 1.0       # one judged query differs
    v = memory.judge_window_memory(spec, ok({key: wrong}), fx, GRADING)
    assert v.fraction == 0.0 and '(query %d)' % rows[7] in v.lines[0] and 'at 1 of the 48 queries' in v.lines[0]
    between = out.copy()
    between[:, :, [r for r in range(out.shape[2]) if r not in set(rows)][:100]] += 1.0   # unjudged rows
    assert memory.judge_window_memory(spec, ok({key: between}), fx, GRADING).fraction == 1.0


def test_window_memory_out_of_memory_and_untouched_template_say_so():
    _, fx, key = window_fixture()
    spec = GRADING.test('sliding-window-memory')
    case = key.split('/')[0]
    oom = {'status': 'error', 'message': 'RuntimeError: DefaultCPUAllocator: can\'t allocate memory: you tried to '
                                         'allocate 1073741824 bytes',
           'where': ['model.py line 99, in banded_attention']}
    v = memory.judge_window_memory(spec, ok({}, case_errors={case: oom}), fx, GRADING)
    assert v.fraction == 0.0 and 'ran out of memory' in v.lines[0] and 'model.py line 99' in v.lines[1]
    todo = {'status': 'not_implemented', 'message': 'NotImplementedError: TODO (optional)'}
    v = memory.judge_window_memory(spec, ok({}, case_errors={case: todo}), fx, GRADING)
    assert v.not_implemented and v.lines[0].startswith('not implemented (optional)')


# ----------------------------------------------------------------------------- extra credit

def test_required_weights_sum_to_100_and_optional_parts_are_extra():
    required = sum(t.weight for t in GRADING.tests if not GRADING.is_extra_credit(t))
    extra = [t.id for t in GRADING.tests if GRADING.is_extra_credit(t)]
    assert required == 100 and set(extra) == {'sliding-window', 'sliding-window-memory', 'kv-cache'}


def test_points_split_required_and_extra_credit():
    from autograder.judge.results import Results, TestResult
    out = Results({tid: TestResult(tid, tid, score, max_score, number=num) for tid, score, max_score, num in (
        ('a', 60.0, 60.0, '1'), ('b', 40.0, 40.0, '2'), ('sliding-window', 5.0, 0.0, '11.1'),
        ('kv-cache', 0.0, 0.0, '12.1'))}, execution_time=1.0)
    results.add_points(out, {'sliding-window': 5.0, 'kv-cache': 5.0})
    assert out.to_json()['score'] == 105.0
    assert out.extra_data['points'] == {'required': 100.0, 'required_max': 100.0, 'extra_credit': 5.0,
                                        'extra_credit_max': 10.0}
    assert 'total: 100 / 100 (+ 5 of 10 extra credit)' in grade.table(out)


def test_extra_credit_switch_makes_a_part_required(tmp_path):
    text = open(GRADING.path).read()
    p = tmp_path / 'grading.yaml'
    p.write_text(text.replace('  extra_credit:\n    sliding_window: true',
                              '  extra_credit:\n    sliding_window: false'))
    g = config.load(str(p))
    assert not g.is_extra_credit(g.test('sliding-window')) and g.is_extra_credit(g.test('kv-cache'))
    p.write_text(text.replace('  extra_credit:\n    sliding_window: true', '  extra_credit:\n    flash: true'))
    with pytest.raises(config.GradingConfigError, match='unknown optional part'):
        config.load(str(p))


def test_negated_optional_blocks_replace_the_part_when_it_is_off():
    from autograder.staff.handout.build import strip_markers
    text = ('x = 1\n# BEGIN OPTIONAL kv_cache\ncached = True\n# END OPTIONAL\n'
            '# BEGIN OPTIONAL !kv_cache\n# BEGIN PROMPT\n# cached = False\n# END PROMPT\n# END OPTIONAL\n')
    on = strip_markers(text, 't.py', {'sliding_window': True, 'kv_cache': True})
    off = strip_markers(text, 't.py', {'sliding_window': True, 'kv_cache': False})
    assert 'cached = True' in on and 'cached = False' not in on
    assert 'cached = False' in off and 'cached = True' not in off
