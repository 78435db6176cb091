"""
The verdict of each graded test: the judge function that judges it (JUDGES, one per probed test
of registry.py) and `judge`, which hands a judge its probe's result, shape-guarded, and the
results of the other probes it reads as evidence.
"""

from autograder.judge import messages
from autograder.judge.judges import Verdict, behaviour, generate, guard_shapes, memory, pretrained, probe_failure, \
    sliding_window, training, values
from autograder.judge.registry import BY_ID, PROBED

JUDGES = {   # test id -> (spec, probe result, fixtures, grading[, evidence]) -> Verdict
    'rope': values.judge_values,
    'rope-cache': values.judge_rope_cache,
    'mha-rope': values.judge_values,
    'gqa': values.judge_values,
    'gqa-rope': values.judge_values,
    'dropout': behaviour.judge_dropout,
    'causality': behaviour.judge_causality,
    'model': values.judge_model,
    'generate': generate.judge_generate,
    'memory': memory.judge_memory,
    'loss-curve': training.judge_loss_curve,
    'gradients': training.judge_gradients,
    'load-pretrained': pretrained.judge_load_pretrained,
    'sliding-window': sliding_window.judge_sliding_window,
    'sliding-window-memory': memory.judge_window_memory,
    'kv-cache': generate.judge_kv_cache,
}
if set(JUDGES) != set(PROBED):
    raise ImportError('verdicts.JUDGES and registry.py disagree: %s' % sorted(set(JUDGES) ^ set(PROBED)))


def judge(test, result, fixtures, grading, probes=None):
    """
    Verdict of one graded test from the probe result of the same id (its judge is in JUDGES).
    `probes` ({probe id: result}) holds the grading's other results; a judge that declares
    `evidence` in the registry gets those it names, shape-guarded like its own, as a fifth argument.
    """
    failed = probe_failure(result)
    if failed:
        return failed
    try:
        result = guard_shapes(test.id, result, fixtures)
        entry = BY_ID[test.id]
        judge_of = JUDGES[test.id]
        if not entry.evidence:
            return judge_of(test, result, fixtures, grading)
        probes = probes or {}
        evidence = {pid: guard_shapes(pid, probes[pid], fixtures) if probes[pid].status == 'ok' else probes[pid]
                    for pid in entry.evidence if pid in probes}
        return judge_of(test, result, fixtures, grading, evidence)
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError, MemoryError, RecursionError) as e:
        # the arrays come from student code (which can also write the output files itself): NaN where an
        # integer belongs, a wrong rank or dtype must cost this test, not crash the whole grading
        return Verdict(0.0, [messages.not_judgeable(type(e).__name__, str(e)[:300])])
