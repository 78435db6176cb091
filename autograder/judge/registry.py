"""
The one registry of graded tests. Each test id is spelled here once; its probe is the function
`probe_<id>` (dashes as underscores) in a child/probes_<area>.py module, its judge is named in
verdicts.py (JUDGES, checked against this table on import), and its weight, visibility, timeout
and tolerance are in grading.yaml. Standard library only: config.py reads it to check
grading.yaml without loading any judge. Every other list of ids
(config's known ids, the probes regenerate runs, the probes known bugs cover) is derived
from this table, and a unit test holds grading.yaml's ids equal to it.

A judge may also read what OTHER probes of the same grading returned (`evidence`): the same
model's answers given in another process, e.g. 7.1 compares the prefix outputs of its own probe
with the outputs 3.1, 5.1 and 8.1 produced for the original input. Those probes then run
whenever the judge runs, even if their own tests are skipped or switched off.

Adding a graded test: an entry here, a probe in child/probes_<area>.py, a judge in judges/<area>.py named in verdicts.py, the
inputs it needs in inputs.py (build and its probe_inputs entry), its entry in
grading.yaml, then `python -m autograder regenerate`.
"""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class GradedTest:
    id: str
    probed: bool = True             # False: no probe runs; grade.py judges it (the upload itself)
    needs_tolerance: bool = True    # compares numbers, so grading.yaml must say how close is close enough
    compares_known_bugs: bool = False     # its outputs are compared against the known bugs of known_bugs.py
    values_in_fixtures: bool = True  # False: the judge reads only the keys and shapes of the reference's outputs
    evidence: Tuple[str, ...] = ()  # other probes whose results its judge reads: judge(..., evidence={id: result})

    @property
    def probe(self):
        """The name of its probe function in child/probes_<area>.py, or None when it runs no probe."""
        return 'probe_' + self.id.replace('-', '_') if self.probed else None


TESTS = (
    GradedTest('submission', probed=False, needs_tolerance=False),
    GradedTest('rope', compares_known_bugs=True),
    GradedTest('rope-cache', compares_known_bugs=True),
    GradedTest('mha-rope', compares_known_bugs=True),
    GradedTest('gqa', compares_known_bugs=True),
    GradedTest('gqa-rope', compares_known_bugs=True),
    GradedTest('dropout', evidence=('gqa',)),
    GradedTest('causality', evidence=('mha-rope', 'gqa-rope', 'model')),
    GradedTest('model', compares_known_bugs=True),
    GradedTest('generate', needs_tolerance=False, compares_known_bugs=True, evidence=('model',)),
    # 9.1 judges the harness's kernel readings, never the reference's figures (which move by kilobytes between runs)
    GradedTest('memory', values_in_fixtures=False),
    GradedTest('loss-curve'),
    GradedTest('gradients', evidence=('loss-curve',)),
    GradedTest('load-pretrained'),
    GradedTest('sliding-window'),
    GradedTest('sliding-window-memory'),
    GradedTest('kv-cache'),
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

