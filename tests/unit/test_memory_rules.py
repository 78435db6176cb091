"""
The memory contract of test 9.1 (autograder/contract/memory_rules.py) on readings logs shaped like the
ones the grader records. The numbers are those of a real call of the reference on the cpu
profile (B=4, nh=6, T=256, train, attention dropout 0.1): its region leaves 19,345,408 bytes
allocated, the floor is one float32 (4, 6, 256, 256) tensor, 6,291,456 bytes.
"""

import pytest

from autograder.contract.memory_rules import call_entries, differences, judge_call, judge_calls

FLOOR = 4 * 6 * 256 * 256 * 4
START, END = 171_233_280, 171_233_280 + 19_345_408          # RssAnon before the scores and after y
PEAK = START + 25_042_944                                   # VmHWM-based peak of the same region
NET = END - START


def e(kind, value, pid=11, **extra):
    return dict(kind=kind, value=value, pid=pid, **extra)


COURSE = [e('allocated', START), e('allocated', END)]                      # the course's starter region
PEAK_STYLE = [e('reset', START), e('allocated', START), e('peak', PEAK)]    # reset, start, ..., max - start
NO_RESET = [e('allocated', START), e('peak', PEAK)]


def fig(value, kind='int'):
    return {'type': kind, 'value': value}


def judged(value, entries, kind='int'):
    return judge_call(fig(value, kind), entries, FLOOR)


def test_the_course_region_and_the_reset_peak_style_pass():
    ok, line = judged(NET, COURSE)
    assert ok and line.startswith('19345408 bytes (18892.0 KiB) = end - start of two readings')
    assert judged(PEAK - START, PEAK_STYLE)[0]
    assert judged(float(NET), COURSE, 'float')[0]                          # float(end - start) is still bytes
    free = [e("free", (80 << 30) - START), e("free", (80 << 30) - END)]    # mem_get_info()[0] before - after
    assert judged(NET, free)[0]


def test_a_wider_region_passes_whatever_else_the_code_reads_in_between():
    wide = [e('allocated', START - 400_000), e('allocated', START), e('allocated', END), e('allocated', END + 300_000)]
    assert judged(END + 300_000 - (START - 400_000), wide)[0]
    assert judged(NET, wide)[0]


@pytest.mark.parametrize('value, entries, words', [
    (300_000, [e('allocated', START), e('allocated', START + 300_000)],
     'a real difference of two readings your code took, but (x) alone keep 6291456 bytes'),
    (-NET, COURSE, 'start and end are swapped'),
    (END, COURSE, 'a raw torch.cuda.memory_allocated() reading'),
    (PEAK, NO_RESET, 'max_memory_allocated() itself'),
    (PEAK - START, NO_RESET, 'the peak was not reset in this call'),
    (NET // 1024, COURSE, 'in KiB (bytes / 1024)'),
    (NET / 2 ** 20, COURSE, 'in MiB (bytes / 2**20)'),
    (round(NET / 1e6, 2), COURSE, 'in MB (bytes / 10**6)'),
    (int(1.2 * NET), COURSE, '1.2 times the difference of readings your code took'),
    (250_000, COURSE, 'no difference of two readings your code took during the call'),
    (250_000, [], 'took no memory reading during the call: the figure is not a measurement'),
    (0, [], 'forward reported 0 bytes and took no memory reading'),
    (10 ** 15, COURSE, 'more than a terabyte'),
    (12.5, COURSE, 'a fraction of a byte'),
    (float('nan'), [], 'your measuring code did not run'),
    (-5, [e('allocated', START)], 'a negative figure'),
    (250_000, [e('allocated', START)], 'took only one memory reading during the call'),
])
def test_each_wrong_figure_gets_its_own_sentence(value, entries, words):
    ok, line = judge_call(fig(value, 'float' if isinstance(value, float) else 'int'), entries, FLOOR, '(x)')
    assert not ok
    assert words in line, line


@pytest.mark.parametrize('figure, words', [
    ({'type': 'tensor', 'value': NET}, 'forward returned a tensor as its memory figure'),
    ({'type': 'str', 'value': None}, 'returned text'),
    ({'type': 'none', 'value': None}, 'returned None'),
    ({'type': 'bool', 'value': 1}, 'returned a bool'),
    ({'type': 'other', 'value': None}, 'not a number'),
])
def test_figures_that_are_not_numbers_fail_with_a_sentence(figure, words):
    ok, line = judge_call(figure, COURSE, FLOOR)
    assert not ok and words in line


def test_a_constant_is_named_when_every_call_reports_it():
    calls = [(fig(250_000), [e('allocated', 1000), e('allocated', 1000 + d)]) for d in (19_345_408, 19_349_504)]
    verdicts = judge_calls(calls, FLOOR)
    assert [ok for ok, _ in verdicts] == [False, False]
    assert all('the same figure for every call (a constant?)' in s for _, s in verdicts)
    honest = [(fig(d), [e('allocated', 1000), e('allocated', 1000 + d)]) for d in (19_345_408, 19_349_504)]
    assert [ok for ok, _ in judge_calls(honest, FLOOR)] == [True, True]


def test_only_the_readings_between_the_calls_marks_and_of_its_process_count():
    log = [e('allocated', 5), e('mark', 0, label='start n_kv_head=2'), e('allocated', START),
           e('allocated', 999, pid=12), e('allocated', END), e('mark', 0, label='end n_kv_head=2'), e('allocated', 7)]
    entries, problem = call_entries(log, 'n_kv_head=2')
    assert problem is None and [x['value'] for x in entries] == [START, END]
    assert differences(entries) == ({NET}, set())
    entries, problem = call_entries(log, 'n_kv_head=1')
    assert entries == [] and 'no record of this call' in problem
