"""
The memory contract of test 9.1 as a pure function: is the figure an attention module's
forward returned an honest measurement of a region that contains the attention core?

Evidence: the readings log (contract/memory_readings.py: every torch.cuda memory query the code
made, with its kind, value, asking pid and order, taken by the harness from the kernel) and the
figure itself. A figure passes when it is exactly end - start of two readings the code took
during that call (two allocated readings; or a peak reading minus an allocated one, with
reset_peak_memory_stats() earlier in the call; or the drop of mem_get_info's free bytes) and is
at least `floor` bytes, what a region containing the core must leave allocated (one float32
(B, nh, T, T) tensor: the attention weights autograd keeps for backward). Every other figure
fails with one sentence that names what it is, in the student's terms.

Standard library only: the harness's judge (areas/memory.py) calls it, and build-template
copies its code into the students' memory_check.py so that the public tests apply the same rules.
"""

import math

HUGE = 1 << 40          # bytes (1 TiB): no attention call of the tests allocates anywhere near this
UNITS = (('KiB (bytes / 1024)', 1024.0), ('kB (bytes / 1000)', 1e3), ('MiB (bytes / 2**20)', 2.0 ** 20),
         ('MB (bytes / 10**6)', 1e6), ('GiB (bytes / 2**30)', 2.0 ** 30), ('GB (bytes / 10**9)', 1e9))


def _kb(n):
    return '%d bytes (%.1f KiB)' % (n, n / 1024.0)


def call_entries(log, label):
    """
    The readings of one measured call: the log entries strictly between the marks 'start LABEL'
    and 'end LABEL', from the process that sent them. Returns (entries, problem or None).
    """
    marks = [(k, e.get('label')) for k, e in enumerate(log) if e.get('kind') == 'mark']
    # the first end after the last start before it: marks sent by other code only narrow the window
    end = next((k for k, text in marks if text == 'end ' + label), None)
    start = max((k for k, text in marks if text == 'start ' + label and end is not None and k < end), default=None)
    if start is None or end is None:
        return [], ('the harness has no record of this call (the probe\'s start/end marks are missing from its '
                    'log): the process ended or replaced the probe before the call finished')
    pid = log[start].get('pid')
    return [e for e in log[start + 1:end] if e.get('pid') == pid and e.get('kind') != 'mark'], None


def differences(entries):
    """
    (honest, peak_without_reset): every end - start the code could have computed from its
    readings, in order. honest: allocated - earlier allocated, free drop, and peak - earlier
    allocated when a reset came before the peak reading; the latter without that reset.
    """
    honest, no_reset = set(), set()
    allocated, free, reset_seen = [], [], False
    for e in entries:
        kind, value = e.get('kind'), int(e.get('value', 0))
        if kind == 'reset':
            reset_seen = True
        elif kind == 'allocated':
            honest.update(value - a for a in allocated)
            allocated.append(value)
        elif kind == 'free':
            honest.update(f - value for f in free)
            free.append(value)
        elif kind == 'peak':
            (honest if reset_seen else no_reset).update(value - a for a in allocated)
    return honest, no_reset


def _unit(value, diffs):
    """The unit a figure was written in, when it is one of the differences divided by 1024, 10**6, ..."""
    for d in sorted(diffs, reverse=True):
        for unit, div in UNITS:
            # an int from // or round() is within 1 of the quotient; a float rounded to a few digits within 0.5 %
            slack = 1.0 if value == int(value) else 0.005 * d / div
            if d / div >= 1 and abs(value - d / div) <= slack:
                return unit, d
    return None


def judge_call(figure, entries, floor, weights='the attention weights'):
    """
    (ok, sentence) for one call. figure: {'type': 'int'|'float'|'tensor'|'str'|'none'|'bool'|'other',
    'value': number or None} (memory_readings.describe_figure); entries: call_entries(...)[0];
    floor: the bytes of `weights`, what a region containing the core leaves allocated at least.
    """
    kind, value = figure.get('type'), figure.get('value')
    wrong = _not_a_byte_count(kind, value, entries)
    if wrong:
        return False, wrong
    return _measured_or_why_not(int(value), entries, floor, weights)


def _not_a_byte_count(kind, value, entries):
    """The sentence when the figure is no whole number of bytes (None, text, a tensor, NaN, a fraction...),
    else None."""
    if kind == 'none':
        return ('forward returned None as its memory figure: return end - start, the bytes '
                       'torch.cuda.memory_allocated() grew by over the attention (an int)')
    if kind == 'str':
        return 'forward returned text as its memory figure: return the number of bytes (an int), not a string'
    if kind == 'tensor':
        return ('forward returned a tensor as its memory figure: return a Python int '
                       '(torch.cuda.memory_allocated() - start is one; a tensor cannot be written to '
                       "chargpt.py's attention_computation_memory.json)")
    if kind not in ('int', 'float') or value is None:
        return 'forward returned a %s as its memory figure: return the number of bytes (an int)' % (
            'bool' if kind == 'bool' else 'value that is not a number')
    if isinstance(value, float) and math.isnan(value):
        return ('forward returned NaN: your measuring code did not run, although on the grader the attention '
                       "runs as on a GPU (x.is_cuda and torch.cuda.is_available() are True, x.device is 'cuda:0'); "
                       'measure with torch.cuda.memory_allocated() whenever the code runs on CUDA')
    if isinstance(value, float) and math.isinf(value):
        return 'forward returned an infinite memory figure: report end - start in bytes'
    if abs(value) > HUGE:
        return ('forward reported %.4g bytes, more than a terabyte for one attention call: not a measurement '
                       '(report end - start in bytes)' % value)
    if value != int(value):
        unit = _unit(value, differences(entries)[0])
        if unit:
            return ('forward reported %g, which is the %s your code measured in %s: report bytes, unscaled'
                           % (value, _kb(unit[1]), unit[0]))
        return 'forward reported %g, a fraction of a byte: report end - start in bytes (an int)' % value
    return None


def _measured_or_why_not(value, entries, floor, weights):
    """(ok, sentence) of a whole number of bytes against the readings the call took."""
    honest, no_reset = differences(entries)
    readings = [e for e in entries if e.get('kind') in ('allocated', 'peak', 'free')]
    if value in honest:
        if value >= floor:
            return True, ('%s = end - start of two readings your code took during the call, at least the %s of %s'
                          % (_kb(value), _kb(floor), weights))
        return False, ('forward reported %s, a real difference of two readings your code took, but %s alone keep %s '
                       'allocated: the measured region misses part of the attention core (scores, mask, softmax, '
                       'dropout, att @ v). Take the start reading before the scores and the end reading after '
                       'y = att @ v; measuring only the projections or only the output is not the attention\'s memory'
                       % (_kb(value), weights, _kb(floor)))
    if value in no_reset:
        return False, ('forward reported %s = max_memory_allocated() - start, but the peak was not reset in this '
                       'call: on a GPU it is the peak since the process started or since the last '
                       'reset_peak_memory_stats() (here a larger warm-up call), not this attention\'s. Call '
                       'torch.cuda.reset_peak_memory_stats() before taking start' % _kb(value))
    if readings and value in {int(e['value']) for e in readings if e.get('kind') == 'peak'}:
        return False, ('forward reported max_memory_allocated() itself (%s): the peak counts every tensor alive '
                       'on the device (parameters, inputs, other layers), not the attention; report '
                       'max_memory_allocated() - start, after reset_peak_memory_stats()' % _kb(value))
    if readings and value in {int(e['value']) for e in readings if e.get('kind') == 'allocated'}:
        return False, ('forward reported a raw torch.cuda.memory_allocated() reading (%s): it counts every tensor '
                       'alive on the device, not the attention; report end - start' % _kb(value))
    if value < 0 and -value in (honest | no_reset):
        return False, ('forward reported %d bytes = start - end: start and end are swapped (report the later '
                       'reading minus the earlier one)' % value)
    unit = _unit(value, honest | no_reset)
    if unit:
        return False, ('forward reported %d, which is the %s your code measured in %s: report bytes, unscaled'
                       % (value, _kb(unit[1]), unit[0]))
    if not readings:
        if value == 0:
            return False, ('forward reported 0 bytes and took no memory reading during the call: the memory is not '
                           'measured (torch.cuda.memory_allocated() before and after the attention)')
        return False, ('forward reported %s but took no memory reading during the call: the figure is not a '
                       'measurement (a constant?); report torch.cuda.memory_allocated() after the attention minus '
                       'before it' % _kb(value))
    if value < 0:
        return False, ('forward reported %d bytes: a negative figure, no difference of the readings your code took'
                       % value)
    scale = [value / d for d in sorted(honest, reverse=True) if d >= floor and 1 / 64 <= value / d <= 64]
    if scale:
        return False, ('forward reported %s, %.3g times the difference of readings your code took in this call: '
                       'report end - start itself, unscaled' % (_kb(value), scale[0]))
    if len(readings) == 1:
        return False, ('forward reported %s, but your code took only one memory reading during the call (%d): the '
                       'figure is not end - start of two readings (a constant?)'
                       % (_kb(value), int(readings[0]['value'])))
    shown = ', '.join(str(d) for d in sorted(d for d in honest if d > 0)[-4:]) or 'none above 0'
    return False, ('forward reported %s, which is no difference of two readings your code took during the call '
                   '(the largest: %s): the figure is not a measurement of this call' % (_kb(value), shown))


def judge_calls(calls, floor, weights='the attention weights'):
    """
    [(ok, sentence)] for several calls of the same module [(figure, entries)], plus one thing
    only several calls show: the same figure for every call while the readings differ (a constant).
    `floor` and `weights` are one value for every call or a list with one per call.
    """
    floors = floor if isinstance(floor, (list, tuple)) else [floor] * len(calls)
    names = weights if isinstance(weights, (list, tuple)) else [weights] * len(calls)
    verdicts = [judge_call(f, e, fl, w) for (f, e), fl, w in zip(calls, floors, names)]
    values = [f.get('value') for f, _ in calls]
    if len(calls) > 1 and len(set(values)) == 1 and not any(ok for ok, _ in verdicts) \
            and isinstance(values[0], (int, float)) and values[0] == values[0]:
        verdicts = [(False, s if 'constant' in s or 'no memory reading' in s
                     else s + '; it is the same figure for every call (a constant?)') for _, s in verdicts]
    return verdicts
