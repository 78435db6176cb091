"""
The one registry of graded tests. Each test id is spelled here once, with its judge; its
probe is the function `probe_<id>` (dashes as underscores) in a child/probes*.py module, and its
weight, visibility, timeout and tolerance are in grading.yaml. Every other list of ids
(config's known ids, the probes regenerate runs, the probes known bugs cover) is derived
from this table, and a unit test holds grading.yaml's ids equal to it.

A judge may also read what OTHER probes of the same grading returned (`evidence`): the same
model's answers given in another process, e.g. 7.1 compares the prefix outputs of its own probe
with the outputs 3.1, 5.1 and 8.1 produced for the original input. Those probes then run
whenever the judge runs, even if their own tests are skipped or switched off.

Adding a graded test: an entry here, a probe in child/probes_<area>.py, a judge in judges/<area>.py, the
inputs it needs in inputs.py (build and its probe_inputs entry), its entry in
grading.yaml, then `python -m autograder regenerate`.
"""

from dataclasses import dataclass
from typing import Callable, Optional, Tuple

from autograder.judge.judges import Verdict, guard_shapes, probe_failure
from autograder.judge.judges import behaviour, generate, sliding_window, memory, training, values, pretrained


@dataclass(frozen=True)
class GradedTest:
    id: str
    judge: Optional[Callable]       # (spec, probe result, fixtures, grading) -> Verdict; None: judged by grade.py
    needs_tolerance: bool = True    # compares numbers, so grading.yaml must say how close is close enough
    compares_known_bugs: bool = False     # its outputs are compared against the known bugs of known_bugs.py
    values_in_fixtures: bool = True  # False: the judge reads only the keys and shapes of the reference's outputs
    evidence: Tuple[str, ...] = ()  # other probes whose results its judge reads: judge(..., evidence={id: result})

    @property
    def probe(self):
        """The name of its probe function in child/probes*.py, or None when it runs no probe."""
        return None if self.judge is None else 'probe_' + self.id.replace('-', '_')


TESTS = (
    GradedTest('submission', None, needs_tolerance=False),
    GradedTest('rope', values.judge_values, compares_known_bugs=True),
    GradedTest('rope-cache', values.judge_rope_cache, compares_known_bugs=True),
    GradedTest('mha-rope', values.judge_values, compares_known_bugs=True),
    GradedTest('gqa', values.judge_values, compares_known_bugs=True),
    GradedTest('gqa-rope', values.judge_values, compares_known_bugs=True),
    GradedTest('dropout', behaviour.judge_dropout, evidence=('gqa',)),
    GradedTest('causality', behaviour.judge_causality, evidence=('mha-rope', 'gqa-rope', 'model')),
    GradedTest('model', values.judge_model, compares_known_bugs=True),
    GradedTest('generate', generate.judge_generate, needs_tolerance=False, compares_known_bugs=True, evidence=('model',)),
    # 9.1 judges the harness's kernel readings, never the reference's figures (which move by kilobytes between runs)
    GradedTest('memory', memory.judge_memory, values_in_fixtures=False),
    GradedTest('loss-curve', training.judge_loss_curve),
    GradedTest('gradients', training.judge_gradients, evidence=('loss-curve',)),
    GradedTest('load-pretrained', pretrained.judge_load_pretrained),
    GradedTest('sliding-window', sliding_window.judge_sliding_window),
    GradedTest('sliding-window-memory', memory.judge_window_memory),
    GradedTest('kv-cache', generate.judge_kv_cache),
)

BY_ID = {t.id: t for t in TESTS}
IDS = tuple(t.id for t in TESTS)
PROBED = tuple(t.id for t in TESTS if t.probe)                  # what regenerate runs on the reference
COMPARES_KNOWN_BUGS = tuple(t.id for t in TESTS if t.compares_known_bugs)   # what regenerate runs on each known bug
NEEDS_TOLERANCE = tuple(t.id for t in TESTS if t.needs_tolerance)
SHAPES_ONLY = tuple(t.id for t in TESTS if not t.values_in_fixtures)     # regenerate stores zeros of their shapes


def probes_for(test_ids):
    """The probes a grading of `test_ids` runs: each test's own, then the evidence its judge reads, in order."""
    out = []
    for tid in test_ids:
        t = BY_ID[tid]
        for pid in ((tid,) if t.probe else ()) + t.evidence:
            if pid not in out:
                out.append(pid)
    return out


def judge(test, result, fixtures, grading, probes=None):
    """
    Verdict of one graded test from the probe result of the same id (its judge is in the table above).
    `probes` ({probe id: result}) holds the grading's other results; a judge that declares
    `evidence` in the registry gets those it names, shape-guarded like its own, as a fifth argument.
    """
    failed = probe_failure(result)
    if failed:
        return failed
    try:
        result = guard_shapes(test.id, result, fixtures)
        entry = BY_ID[test.id]
        if not entry.evidence:
            return entry.judge(test, result, fixtures, grading)
        probes = probes or {}
        evidence = {pid: guard_shapes(pid, probes[pid], fixtures) if probes[pid].status == 'ok' else probes[pid]
                    for pid in entry.evidence if pid in probes}
        return entry.judge(test, result, fixtures, grading, evidence)
    except (ValueError, TypeError, IndexError, OverflowError, ZeroDivisionError, MemoryError, RecursionError) as e:
        # the arrays come from student code (which can also write the output files itself): NaN where an
        # integer belongs, a wrong rank or dtype must cost this test, not crash the whole grading
        return Verdict(0.0, ['FAIL your outputs could not be judged (wrong dtype, shape or non-finite values?): '
                             '%s: %s' % (type(e).__name__, str(e)[:300])])
