"""
Judges of memory. 9.1: the figure GroupedQueryAttention.forward reports must be a real
measurement of the whole attention: compared, per n_kv_head, with what the harness's own meter
saw for the same call (and, on CPU, with the readings the student's code took through the
torch.cuda stand-ins of child/cuda_meter.py or the handout's AttentionMemory). How much memory a
correct style allocates is not judged: fewer KV heads may cost more in some correct styles.
11.2: sliding-window attention memory must grow linearly in N, credited only when the
windowed outputs of the measured calls are the reference's.
"""

from autograder.checks import Verdict, case_error_line, compare

# figures of the memory probe (child/probes_workflow.py)
NET, PEAK, REPORTED, FORCED, EXACT = range(5)
ALLOCATED_READING = 0   # cuda_meter.ALLOCATED: a memory_allocated()-like reading (a possible start)


def _mb(n):
    return '%.1f KB' % (n / 1024.0)


def measured_figures(readings, meters):
    """
    Every figure the student's code could have measured in this call: a later reading minus an
    earlier memory_allocated() reading (end - start, or max_memory_allocated() - start), and
    the net or peak bytes of a handout AttentionMemory it used.
    """
    figures, starts = set(), []
    for kind, value in (readings if readings is not None else []):
        figures.update(int(value) - s for s in starts)
        if int(kind) == ALLOCATED_READING:
            starts.append(int(value))
    for row in (meters if meters is not None else []):
        figures.update(int(v) for v in row)
    return figures


def judge_memory_case(kv, fig, readings, meters, rtol):
    """(ok, line) for one n_kv_head."""
    net, peak, reported, forced, exact = (int(v) for v in fig)
    name = 'n_kv_head=%d' % kv
    how = ' (your code measures only when x.is_cuda; it was run again with is_cuda forced on)' if forced == 1 else ''
    if reported <= 0:
        if forced == -1:
            return True, ('ok   %s: forward reports no figure on CPU and its CUDA-only branch cannot run here, so '
                          'the figure cannot be judged on this grader (not docked)' % name)
        return False, ('FAIL %s: forward reported %s: the memory is not measured%s. Measure the whole attention: '
                       'torch.cuda.memory_allocated() before and after it (it reports real bytes on the CPU grader) '
                       'or the handout\'s AttentionMemory, and return the difference in bytes'
                       % (name, 'no figure' if reported < 0 else '0 bytes', how))
    if reported > (1 + rtol) * peak:
        return False, ('FAIL %s: forward reported %s, but at most %s were ever allocated during the call: the figure '
                       'is not a measurement (a constant? another unit? scaled?)%s' % (name, _mb(reported), _mb(peak), how))
    if reported < (1 - rtol) * net:
        return False, ('FAIL %s: forward reported %s, but the attention leaves %s allocated: part of the attention '
                       '(the K/V projections or repeat? the output projection?) is outside the measured region%s'
                       % (name, _mb(reported), _mb(net), how))
    if exact == 1:
        figures = measured_figures(readings, meters)
        if reported not in figures:
            seen = sorted(figures)[:6]
            return False, ('FAIL %s: forward reported %d bytes, which is no difference of two memory readings your '
                           'code took (%s): report end - start in bytes, unscaled%s'
                           % (name, reported, ', '.join(str(f) for f in seen) if seen else 'it took none', how))
    return True, 'ok   %s reports %s (the harness saw %s left allocated, %s at peak)%s' % (
        name, _mb(reported), _mb(net), _mb(peak), how)


def judge_memory(test, result, fixtures, grading):
    rtol = test.tolerance.rtol
    errors = result.info.get('case_errors', {})
    kvs = sorted({int(k.split('/')[0].split('=')[1]) for k in fixtures.probe('memory')}, reverse=True)
    lines, passed = [], 0
    for kv in kvs:
        key = 'n_kv_head=%d' % kv
        fig = result.arrays.get(key + '/figures')
        if key in errors:
            lines.append('FAIL ' + case_error_line(key, errors[key]))
        elif fig is None or fig.shape != (5,) or fig.dtype.kind not in 'iu':
            lines.append('FAIL %s: no memory figures' % key)
        else:
            ok, line = judge_memory_case(kv, fig, result.arrays.get(key + '/readings'),
                                         result.arrays.get(key + '/meters'), rtol)
            passed += ok
            lines.append(line)
    return Verdict(passed / len(kvs) if kvs else 0.0,
                   ['%d of %d memory figures are measurements of the whole attention.' % (passed, len(kvs))] + lines)


def judge_window_memory(test, result, fixtures, grading):
    rtol = test.tolerance.rtol
    errors = result.info.get('case_errors', {})
    expected = fixtures.probe('sliding-window-memory')
    seqs = sorted({int(k.split('/')[0].split('=')[1]) for k in expected})
    values_tol = grading.test('sliding-window').tolerance  # the outputs are judged as in 11.1
    peaks = {}
    lines = []
    for n in seqs:
        key = 'N=%d' % n
        if key in errors:
            untouched = errors[key].get('status') == 'not_implemented'   # the template's banded_attention TODO
            return Verdict(0.0, [('not implemented (optional): ' if untouched else 'FAIL ')
                                 + case_error_line(key, errors[key])], not_implemented=untouched)
        # memory is credited only for the windowed attention: ignoring the window can be linear too (SDPA)
        ok, desc = compare(result.arrays.get(key + '/y'), expected[key + '/y'], values_tol.atol, values_tol.rtol)
        if not ok:
            return Verdict(0.0, ['FAIL %s: the banded output is not the windowed attention (%s), so its memory is not '
                                 'credited; see test 11.1' % (key, desc)])
        a = result.arrays.get(key + '/peak')
        if a is None or a.shape != (1,) or a[0] <= 0:
            return Verdict(0.0, ['FAIL %s: no peak memory figure' % key])
        peaks[n] = int(a[0])
        lines.append('     N=%d: peak %s' % (n, _mb(peaks[n])))
    lo, hi = seqs[0], seqs[-1]
    growth, allowed = peaks[hi] / peaks[lo], (1 + rtol) * hi / lo
    if growth <= allowed:
        return Verdict(1.0, ['ok   peak memory grows %.1fx for %dx longer sequences (linear allows %.1fx)'
                             % (growth, hi // lo, allowed)] + lines)
    return Verdict(0.0, ['FAIL peak memory grows %.1fx for %dx longer sequences; linear would be %dx and at most '
                         '%.1fx is allowed: the banded path seems to build an N x N tensor'
                         % (growth, hi // lo, hi // lo, allowed)] + lines)
