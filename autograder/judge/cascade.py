"""
One mistake costs its own part (grading.yaml `cascade`). While a grading runs, the harness
judges the tests that decide each part (registry.PART_TESTS: 2.1 and 2.2 decide RoPE, 3.1
CausalSelfAttention, 4.1 and 5.1 GroupedQueryAttention) as soon as their probes end, and tells
each later probe which failed parts to build from a stand-in (job['stand_ins'], read by
child/adapter.py). It also remembers a part that did not return (a hang: the stack the harness
dumped at the deadline, ProbeResult.harness['hang']) and has the sandbox skip the later probes
that would run that part again. Everything it reads from a probe is untrusted: it only decides
which harness code runs and which words the student reads.
"""

import ast

import inspect

from autograder.judge import registry
from autograder.judge.judges import Verdict
from autograder.judge.verdicts import judge

# where a probe was stopped at its deadline, as the student reads it (the public tests say the same)
STOPPED_IN = 'Your code was stopped in %s (model.py line %d): a loop that never ends?'
STOPPED_AT = 'Your code was stopped at model.py line %d: a loop that never ends?'
# a later test that would run the part that hung again (the public tests say the same, naming their own test)
NOT_RUN = 'not run: %s did not return in test %s%s'
STAND_IN_NAMES = {'rope': 'RoPE', 'mha': 'CausalSelfAttention', 'gqa': 'GroupedQueryAttention'}
# probes that also run these parts outside a GPT (the student's modules are judged there): never replaced
DIRECT = {'causality': ('mha', 'gqa'), 'sliding-window': ('mha', 'gqa', 'banded')}


def functions_of(source):
    """[(first line, last line, 'Class.method' or 'function')] of model.py's functions, innermost last."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []

    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((child.lineno, getattr(child, 'end_lineno', child.lineno),
                            '%s.%s' % (owner, child.name) if owner else child.name))
                visit(child, owner)
    visit(tree, None)
    return out


def where_hung(hang, functions):
    """(part or None, 'Class.method', line) of the innermost model.py frame of a hang dump, or None."""
    frames = hang.get('frames') if isinstance(hang, dict) else None
    if not isinstance(frames, list):
        return None
    located = []
    for frame in frames[-20:]:
        line = frame.get('line') if isinstance(frame, dict) else None
        if not isinstance(line, int) or isinstance(line, bool) or line <= 0:
            continue
        names = [name for first, last, name in functions if first <= line <= last]
        located.append((names[-1] if names else None, line))
    if not located:
        return None
    by_name = {v: k for k, v in registry.PARTS.items()}
    for name, line in reversed(located):   # the innermost frame that belongs to a part names the part
        owner = (name or '').split('.')[0]
        if owner in by_name:
            return by_name[owner], name, line
        if owner == 'Block':
            return 'gpt', name, line
    name, line = located[-1]
    return None, name or 'model.py', line


class Cascade:
    """The failed and hung parts of one grading, and what each later probe is told."""

    def __init__(self, grading, fx, source, specs):
        self.grading, self.fx = grading, fx
        self.insulate = grading.cascade == 'insulate'
        self.graded = {s.id for s in specs}
        self.functions = functions_of(source or '')
        self.failed = {}     # part -> number of the first test of it that failed
        self.hung = {}       # part -> the sentence a skipped test reads
        self.sent = {}       # probe id -> {part: number} of the stand-ins it was told to use
        self.stopped = {}    # probe id -> where its process was stopped at the deadline, in words
        self.import_hang = None

    def number(self, test_id):
        return self.grading.test(test_id).number

    # ------------------------------------------------------------------ as probes end

    def observe(self, probe_id, result, results):
        """Learn from a finished probe (the import check included): a failed part, a part that hung."""
        if probe_id == 'import':
            found = where_hung(result.harness.get('hang'), self.functions)
            if found or result.status == 'timeout':
                self.import_hang = 'model.py did not finish importing%s' % (
                    ' (model.py line %d%s)' % (found[2], ', in ' + found[1] if found[1] != 'model.py' else '')
                    if found else '')
            return
        self._note_hang(probe_id, result)
        for part, tests in registry.PART_TESTS.items():
            if probe_id in tests and part not in self.failed and not self._passes(probe_id, result, results):
                self.failed[part] = self.number(probe_id)

    def _passes(self, probe_id, result, results):
        try:
            return judge(self.grading.test(probe_id), result, self.fx, self.grading, results).passed
        except Exception:  # noqa: BLE001  a judge's failure here only means: no stand-in decided from it
            return True

    def _note_hang(self, probe_id, result):
        if result.status != 'timeout':
            return
        found = where_hung(result.harness.get('hang'), self.functions)
        calls = registry.BY_ID[probe_id].calls
        if found:
            self.stopped[probe_id] = STOPPED_IN % (found[1], found[2]) if found[1] != 'model.py' else \
                STOPPED_AT % found[2]
        if found and found[0]:
            part, name, line = found
            if part == 'gpt' and name.split('.')[-1] != 'forward':
                part = name   # a GPT method of its own (load_pretrained, generate): probes that never call it run
        elif len(calls) == 1:   # no dump: a probe that runs one part of model.py can only have hung there
            part, name, line = calls[0], registry.PARTS[calls[0]], None
        else:
            return
        self.hung.setdefault(part, NOT_RUN % (name, self.number(probe_id), ' (model.py line %d)' % line if line else ''))

    # ------------------------------------------------------------------ before a probe

    def stand_ins(self, probe_id):
        """{part: number of the test it fails} to replace in this probe (empty under `cascade: charge`)."""
        if not self.insulate:
            return {}
        entry = registry.BY_ID[probe_id]
        out = {p: n for p, n in self.failed.items() if p in entry.calls and p not in entry.owns}
        # stand-ins never earn points alone: a probe whose every part with a stand-in would be one would judge
        # only the given code (the untouched template would pass 8.1-10.3), so it runs the student's code as is
        if out and all(p in out for p in entry.calls if p in STAND_IN_NAMES):
            out = {}
        self.sent[probe_id] = out
        return out

    def skip(self, probe_id, results):
        """The sandbox's skip hook: the sentence of a part that hung and that this probe would run again."""
        entry = registry.BY_ID.get(probe_id)
        if entry is None:
            return None
        replaced = self.stand_ins(probe_id) if self.insulate else {}
        for part, sentence in self.hung.items():
            if part in entry.calls and (part not in replaced or part in DIRECT.get(probe_id, ())):
                return sentence
        return None

    # ------------------------------------------------------------------ the words

    def lines(self, probe_id, result):
        """What the student reads first in a test whose probe ran with stand-ins."""
        sent = self.sent.get(probe_id) or {}
        report = result.info.get('stand_ins') if isinstance(result.info.get('stand_ins'), dict) else {}
        built = {p for p in report.get('built', []) if p in sent}
        kept = {p for p in report.get('kept', []) if p in sent}
        out = [self.stopped[probe_id]] if probe_id in self.stopped else []
        for part, number in sorted(sent.items()):
            name = STAND_IN_NAMES[part]
            if part in kept:
                out.append('Your %s, which fails %s, could not be set aside in this test (your code does not build '
                           'the class %s by that name where it uses it), so this test ran it.'
                           % (name, number, registry.PARTS[part]))
            elif part in built:
                out.append('Judged with the reference %s in place of yours, which fails %s.' % (name, number))
        return out

    def blocked(self, spec):
        """Why an optional test cannot be judged: a required part it builds on fails (its number), else None."""
        entry = registry.BY_ID[spec.id]
        for part, number in sorted(self.failed.items(), key=lambda kv: kv[1]):
            if part in entry.calls:
                return 'not judged: it builds on your %s, which fails %s' % (registry.PARTS[part], number)
        return None

    def optional_verdict(self, spec, result, probes, specs):
        """An optional test: "Not attempted" when untouched, "not judged" (0 / 0, not red) when a required part it
        builds on fails, hung, or a required test did not finish either; otherwise judged as any test."""
        if result.status == 'not_implemented':
            return Verdict(0.0, ['not implemented (optional): %s' % result.message], not_implemented=True)
        verdict = None if result.status in ('skipped', 'timeout') else judge(spec, result, self.fx, self.grading, probes)
        reason = self.blocked(spec)
        # a stand-in keeps no KV cache and has no window: "not implemented" there is the stand-in's, not the student's
        if verdict is not None and (verdict.passed or (verdict.not_implemented and not (reason and self.sent.get(spec.id)))):
            if not verdict.not_implemented:
                verdict.lines[:0] = self.lines(spec.id, result)
            return verdict
        if result.status == 'skipped':
            reason = reason or result.message
        elif result.status == 'timeout' and reason is None:
            late = [s for s in specs if not s.optional_part and s.id in probes and probes[s.id].status == 'timeout']
            if late:
                reason = 'not judged: test %s did not finish in time, so this one could not finish either' \
                         % late[0].number
        if reason:
            return Verdict(0.0, [reason[0].upper() + reason[1:] + '.'], not_judged=True)
        return verdict if verdict is not None else judge(spec, result, self.fx, self.grading, probes)


def sandbox_skips(sandbox):
    """Whether this Sandbox.run takes the `skip` hook (the hang interface; a sandbox without it runs every probe)."""
    try:
        return 'skip' in inspect.signature(sandbox.run).parameters
    except (TypeError, ValueError):
        return False
