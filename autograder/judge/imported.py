"""
Test 1.1, "Submission found, parses and imports": the upload's static findings (import warnings, the
interface it lacks), why a file cannot be run at all, the verdict the import check leaves
(ImportVerdict, judged once, when that check ends) and the final verdict, which adds the notes the
probes made and whether a test's process later stalled importing model.py. judging.Judging calls them.
"""

from dataclasses import dataclass
from typing import Tuple

from autograder.contract import report_schema
from autograder.judge import interface_check, messages, submission
from autograder.judge.areas import Verdict

SLOW_IMPORT_SECONDS = 5.0   # an import slower than this (wall) is noted in 1.1: after torch, an honest one takes < 1 s


@dataclass(frozen=True)
class ImportVerdict:
    """
    Test 1.1 as the import check left it, judged once, when that check ends (Judging.judge_import):
    `final` where the file could not be run or did not import (no probe runs after that); else the
    lines before (`head`) and after (`tail`) the notes the probes will add, and its fraction, which
    stands unless a test's process later stalls importing model.py (submission_verdict adds both).
    """
    fraction: float
    head: Tuple[str, ...]
    tail: Tuple[str, ...] = ()
    warnings: Tuple[str, ...] = ()
    final: bool = False


def import_verdict(located, problems, imp, import_hang, static):
    """The ImportVerdict of test 1.1. `imp`: the import check's ProbeResult (None where `located` or
    `problems` refuse the file); `static`: static_findings of model.py, computed once by Judging;
    `import_hang`: where the import check stalled (set_aside.py's), if it did."""
    head = (located.note,) if located.note else ()
    if located.problem or problems:
        return ImportVerdict(0.0, head + tuple(problems or [located.problem]), final=True)
    warnings, lacks = static
    if imp.status != 'ok':
        detail = ['  at ' + w for w in imp.info.get('where', [])[-3:]]
        where = [messages.import_hang_hint(import_hang)] if import_hang else []
        return ImportVerdict(0.0, head + tuple([messages.not_imported(imp.message)] + where + detail + warnings),
                             final=True)
    tail = list(warnings)
    cpu, wall = (imp.harness or {}).get('cpu_seconds'), (imp.harness or {}).get('wall_seconds')
    if isinstance(wall, (int, float)) and wall > SLOW_IMPORT_SECONDS:   # measured by the harness, not the child
        tail.append(messages.slow_import(wall, cpu or 0.0))
    printed = imp.info.get('stdout', '')
    if printed.strip():
        tail.append(messages.printed_at_import(printed[:1000]))
    if lacks:
        return ImportVerdict(0.0, head, tuple(tail + [messages.interface_lacks(lacks)]), tuple(warnings))
    if 'NOT graded' in (located.note or ''):   # another model.py with other content: red, so that it is read
        return ImportVerdict(0.0, head, tuple(tail + [messages.INTERFACE_OK_BUT_READ]), tuple(warnings))
    return ImportVerdict(1.0, head, tuple(tail + [messages.INTERFACE_OK]), tuple(warnings))


def submission_verdict(judged, probes, import_hang):
    """Test 1.1's Verdict: the ImportVerdict `judged`, with the distinct notes of the probes so far
    (`probes`: {probe id: ProbeResult}), or failed where a test's process stalled importing model.py
    after the import check passed (`import_hang`: named once, here)."""
    if judged.final:
        return Verdict(judged.fraction, list(judged.head + judged.tail))
    if import_hang:
        return Verdict(0.0, list(judged.head) + [messages.import_hang_in_tests(import_hang)] + list(judged.warnings))
    notes = {}  # distinct notes in order (a dict: each probe brings at most report_schema.MAX_NOTES)
    for r in probes.values():
        notes.update(dict.fromkeys(r.info.get('notes', [])))
    lines = [messages.note(n) for n in list(notes)[:report_schema.MAX_NOTES]]
    return Verdict(judged.fraction, list(judged.head) + lines + list(judged.tail))


def static_findings(upload):
    """(import warnings, missing parts of the interface) of the Upload; ([], []) without one."""
    if upload is None:
        return [], []
    tree = submission.interface_tree(upload)
    lacks = interface_check.missing_in(tree) if tree is not None else []
    return submission.import_warnings(upload), lacks


def upload_problems(upload):
    """Why the file cannot be run at all: nothing to grade in it (one sentence), or the static check's reasons."""
    text, tree = upload.text, upload.tree
    blank = None if text is None else interface_check.nothing_to_grade_in(text, tree)
    return [blank] if blank else submission.static_problems(upload)
