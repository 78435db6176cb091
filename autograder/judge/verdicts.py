"""
The verdict of each graded test: the harness function that judges it (JUDGES, one per probed test,
derived from the `judge` each registry.py entry names) and `verdict_for`, which hands a judge its
probe's result, shape-guarded, and the results of the other probes it reads as evidence.
"""

import importlib

from autograder.judge import messages
from autograder.judge.areas import Verdict, guard_shapes, probe_failure
from autograder.judge.registry import BY_ID, TESTS

JUDGES_PACKAGE = 'autograder.judge.areas'


def resolve(name):
    """The harness function a registry entry names ('<area>:<function>' of areas/<area>.py)."""
    area, _, function = name.partition(':')
    try:
        return getattr(importlib.import_module('%s.%s' % (JUDGES_PACKAGE, area)), function)
    except (ImportError, AttributeError) as e:
        raise ImportError('registry.py names a judge that is not there: %r (%s)' % (name, e)) from e


def _judges():
    """{test id: judge} of every probed test, from the registry (one judge may serve several)."""
    missing = [t.id for t in TESTS if t.probe and not t.judge]
    if missing:
        raise ImportError('registry.py: probed tests without a judge: %s' % missing)
    return {t.id: resolve(t.judge) for t in TESTS if t.probe}


JUDGES = _judges()   # test id -> (spec, probe result, fixtures, grading[, evidence]) -> Verdict


def verdict_for(test, result, fixtures, grading, probes=None):
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
