"""
Judges of memory: GQA's attention memory must fall as n_kv_head falls and be measured
around the whole attention; sliding-window attention memory must grow linearly in N.
Numbers come from the handout's AttentionMemory meter, run by the probe around the
student's forward.
"""

from autograder.checks import Verdict, case_error_line

NET, PEAK, ALLOCATED, REPORTED = range(4)


def _mb(n):
    return '%.1f KB' % (n / 1024.0)


def judge_memory(test, result, fixtures, grading):
    rtol = test.tolerance.rtol
    errors = result.info.get('case_errors', {})
    expected = fixtures.probe('memory')
    kvs = sorted((int(k.split('=')[1]) for k in expected), reverse=True)
    full = kvs[0]
    lines, checks, passed = [], 0, 0
    got = {kv: result.arrays.get('n_kv_head=%d' % kv) for kv in kvs}
    for kv in kvs:
        if 'n_kv_head=%d' % kv in errors:
            lines.append('FAIL ' + case_error_line('n_kv_head=%d' % kv, errors['n_kv_head=%d' % kv]))
    # 1. the saving from fewer KV heads
    for kv in kvs[1:]:
        checks += 1
        if got[kv] is None or got[full] is None or got[kv].shape != (4,) or got[full].shape != (4,):
            lines.append('FAIL n_kv_head=%d: no memory figures' % kv)
            continue
        ref_saving = int(expected['n_kv_head=%d' % full][ALLOCATED] - expected['n_kv_head=%d' % kv][ALLOCATED])
        saving = int(got[full][ALLOCATED] - got[kv][ALLOCATED])
        if saving >= (1 - rtol) * ref_saving:
            passed += 1
            lines.append('ok   n_kv_head %d -> %d allocates %s less (reference: %s less)'
                         % (full, kv, _mb(saving), _mb(ref_saving)))
        else:
            lines.append('FAIL n_kv_head %d -> %d: expected the attention to allocate at least %s less, observed %s '
                         'less (%s vs %s): are k_proj/v_proj Linear(n_embd, n_kv_head * head_dim)?'
                         % (full, kv, _mb((1 - rtol) * ref_saving), _mb(saving), _mb(got[kv][ALLOCATED]),
                            _mb(got[full][ALLOCATED])))
    # 2. the figure the module reports covers the attention
    for kv in kvs:
        checks += 1
        g = got[kv]
        if g is None or g.shape != (4,):
            continue
        reported, net = int(g[REPORTED]), int(g[NET])
        if reported <= 0:
            lines.append('FAIL n_kv_head=%d: forward reported %s bytes; measure the attention with '
                         'AttentionMemory (as CausalSelfAttention does) and return mem.net_bytes'
                         % (kv, 'no' if reported < 0 else reported))
        elif reported < (1 - rtol) * net:
            lines.append('FAIL n_kv_head=%d: forward reported %s, but the attention leaves %s allocated: part of '
                         'the computation (the KV repeat?) is outside the measured region'
                         % (kv, _mb(reported), _mb(net)))
        else:
            passed += 1
            lines.append('ok   n_kv_head=%d reports %s (attention leaves %s allocated)' % (kv, _mb(reported), _mb(net)))
    return Verdict(passed / checks if checks else 0.0, ['%d of %d memory checks pass.' % (passed, checks)] + lines)


def judge_window_memory(test, result, fixtures, grading):
    rtol = test.tolerance.rtol
    errors = result.info.get('case_errors', {})
    seqs = sorted(int(k.split('=')[1]) for k in fixtures.probe('sliding-window-memory'))
    peaks = {}
    lines = []
    for n in seqs:
        key = 'N=%d' % n
        if key in errors:
            return Verdict(0.0, ['FAIL ' + case_error_line(key, errors[key])])
        a = result.arrays.get(key)
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
