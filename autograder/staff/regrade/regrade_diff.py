"""
`python -m autograder diff OLD NEW`: what changed between two regrades of one assignment.
OLD and NEW are grades CSVs written by `batch` (or export folders holding one); a folder of
`batch --shard K/N` CSVs, or one shard CSV, stands for the whole set, merged (shards.py); `batch
--compare OLD.csv` prints the same after a regrade.

It lists every student whose score changed (old total, new total, and each test that moved),
the students present in only one of the two, and which grader inputs changed between them
(grading.yaml, with the weights and tolerances that moved; the fixtures; the grader's code;
the profile), read from each CSV's meta file (gradebook.py). An identical grader on identical
submission files must give identical scores: a student whose score moved although the
submission's hash and every grader input are the same is reported as NOT REPRODUCIBLE and
the exit code is 1. Exit 0 otherwise (changes or none), 2 when a file cannot be used or the
two are not regrades of the same assignment (no submission in common, or other assignment ids).
"""

import argparse
import os
import sys
from dataclasses import dataclass, field
from typing import List, Optional

from autograder.staff.regrade import gradebook, shards

INPUT_NAMES = {'grading_yaml_sha256': 'grading.yaml', 'fixtures_sha256': 'fixtures (manifest.json)',
               'grader_sha256': "grader code (autograder/ without staff tools)", 'profile': 'profile'}


@dataclass
class Change:
    who: str                       # "Name (submission)"
    old_total: str
    new_total: str
    moved: List[str]               # "10.1 loss-curve 5 -> 0"
    old_status: str = ''
    new_status: str = ''
    same_submission: Optional[bool] = None   # None: a hash is missing on one side
    same_inputs: Optional[bool] = None
    feedback: tuple = ()          # (earlier results.json, current results.json) when the two are kept apart

    @property
    def unreproducible(self):
        return bool(self.same_submission and self.same_inputs)

    def line(self):
        status = '' if self.old_status == self.new_status else ' [%s -> %s]' % (self.old_status, self.new_status)
        why = ''
        if self.same_submission is False:
            why = ' (the submission\'s files changed)'
        elif self.unreproducible:
            why = ' NOT REPRODUCIBLE: same submission files, same grader inputs'
        return '%s: %s -> %s%s%s%s' % (self.who, self.old_total or '-', self.new_total or '-', status,
                                       ('; ' + ', '.join(self.moved)) if self.moved else '', why)


@dataclass
class Diff:
    old: gradebook.Gradebook
    new: gradebook.Gradebook
    inputs: List[str] = field(default_factory=list)
    changes: List[Change] = field(default_factory=list)
    only_old: List[str] = field(default_factory=list)
    only_new: List[str] = field(default_factory=list)
    students: int = 0

    @property
    def unreproducible(self):
        return [c for c in self.changes if c.unreproducible]

    def lines(self):
        out = ['diff: %s (%d rows) -> %s (%d rows)'
               % (self.old.path, len(self.old.rows), self.new.path, len(self.new.rows)),
               'grader inputs:'] + ['  ' + l for l in self.inputs]
        out.append('scores: %d of %d students changed' % (len(self.changes), self.students) if self.changes
                   else 'scores: no score changed (%d students in both)' % self.students)
        for c in self.changes:
            out.append('  ' + c.line())
            if c.feedback:
                out.append('    feedback before: %s; now: %s' % c.feedback)
        if self.only_old:
            out.append('only in %s (%d): %s' % (self.old.path, len(self.only_old), '; '.join(self.only_old)))
        if self.only_new:
            out.append('only in %s (%d): %s' % (self.new.path, len(self.only_new), '; '.join(self.only_new)))
        bad = self.unreproducible
        if bad:
            out += ['', '!' * 78,
                    '!! NOT REPRODUCIBLE: %d student(s) got another score from an identical grader (grading.yaml, '
                    'fixtures and grader code unchanged) on identical submission files:' % len(bad)]
            out += ['!!   ' + c.who for c in bad]
            out += ['!! A grade must not depend on the run: report this with both CSVs and the results.json files.',
                    '!' * 78]
        return out


def _person_key(row):
    """A student across two exports: by email, else SID, else name, else (no metadata) the submission folder."""
    for col in ('email', 'sid', 'name'):
        if row.get(col):
            return col, row[col].strip().lower()
    return 'submission', row.get('submission', '')


def _who(row):
    return '%s (%s)' % (row.get('name') or row.get('email') or 'no name', row.get('submission', ''))


def _num(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def same_assignment(old, assignment, submissions):
    """GradebookError unless `old` (a Gradebook) is a regrade of `assignment` holding `submissions`."""
    if old.assignment and assignment and old.assignment != assignment and \
            old.assignment.startswith('assignment_') and assignment.startswith('assignment_'):
        raise gradebook.GradebookError('%s is the gradebook of %s, not of %s: compare regrades of one assignment'
                                       % (old.path, old.assignment, assignment))
    theirs = {r['submission'] for r in old.rows}
    if submissions and theirs and not theirs & set(submissions):
        raise gradebook.GradebookError('%s shares no submission with this export (it lists %s, ...): it is the '
                                       'gradebook of another assignment or export' % (old.path, sorted(theirs)[0]))


def input_lines(old, new):
    """What changed among the grader inputs, one line each, with the tests whose weight or tolerance moved."""
    a, b = old.inputs, new.inputs
    if not a or not b:
        missing = [book.path for book, x in ((old, a), (new, b)) if not x]
        return ['unknown for %s (no %s beside it: written by an older batch); scores are compared, causes cannot be'
                % (' and '.join(missing), gradebook.META_SUFFIX)]
    lines = []
    for key, name in INPUT_NAMES.items():
        if a.get(key) == b.get(key):
            lines.append('%s unchanged (%s)' % (name, str(a.get(key))[:12]))
        else:
            lines.append('%s CHANGED (%s -> %s)' % (name, str(a.get(key))[:12], str(b.get(key))[:12]))
    ta, tb = (old.meta or {}).get('tests') or {}, (new.meta or {}).get('tests') or {}
    for tid in sorted(set(ta) | set(tb), key=lambda t: [int(x) for x in (tb.get(t) or ta.get(t))['number'].split('.')]):
        if tid not in ta or tid not in tb:
            lines.append('  test %s %s' % (tid, 'added' if tid not in ta else 'removed'))
            continue
        moved = ['%s %s -> %s' % (k, ta[tid].get(k), tb[tid].get(k)) for k in sorted(set(ta[tid]) | set(tb[tid]))
                 if ta[tid].get(k) != tb[tid].get(k)]
        if moved:
            lines.append('  %s %s: %s' % (tb[tid]['number'], tid, ', '.join(moved)))
    return lines


def compare(old, new):
    """The Diff of two Gradebooks (students matched by email, SID or name)."""
    d = Diff(old, new, inputs=input_lines(old, new))
    olds = {_person_key(r): r for r in old.rows}
    news = {_person_key(r): r for r in new.rows}
    d.only_old = [_who(olds[k]) for k in olds if k not in news]
    d.only_new = [_who(news[k]) for k in news if k not in olds]
    same_inputs_global = bool(old.inputs and new.inputs) and \
        gradebook.grader_inputs(old.inputs) == gradebook.grader_inputs(new.inputs)
    for key in [k for k in news if k in olds]:
        o, n = olds[key], news[key]
        d.students += 1
        moved = []
        for tid, col in new.tests.items():
            a, b = o.get(old.tests.get(tid, ''), ''), n.get(col, '')
            if _num(a) != _num(b) or (a == '') != (b == ''):
                moved.append('%s %s -> %s' % (col, a or '-', b or '-'))
        for tid, col in old.tests.items():
            if tid not in new.tests and o.get(col):
                moved.append('%s %s -> (no longer graded)' % (col, o[col]))
        if not moved and _num(o.get('total')) == _num(n.get('total')) and o.get('status') == n.get('status'):
            continue
        ro, rn = old.submission_record(o['submission']), new.submission_record(n['submission'])
        ho, hn = ro.get('submission_sha256'), rn.get('submission_sha256')
        same_sub = None if not (ho and hn) else ho == hn
        same_inp = None
        if ro and rn:
            same_inp = gradebook.grader_inputs(ro) == gradebook.grader_inputs(rn)
        elif same_inputs_global and same_sub:
            same_inp = True
        change = Change(_who(n), o.get('total', ''), n.get('total', ''), moved, o.get('status', ''),
                        n.get('status', ''), same_sub, same_inp)
        before, now = old.results_path(o['submission']), new.results_path(n['submission'])
        if before and now and os.path.realpath(before) != os.path.realpath(now):
            change.feedback = (before, now)
        d.changes.append(change)
    return d


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder diff', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('old', help='the earlier grades CSV (or the export folder holding it; a folder of `batch --shard` '
                                'CSVs, or one of them, stands for the whole set, merged)')
    ap.add_argument('new', help='the later grades CSV (or the export folder holding it, or its shards, as for OLD)')
    args = ap.parse_args(argv[1:])
    try:
        old, new = shards.read(args.old), shards.read(args.new)
        same_assignment(old, new.assignment, [r['submission'] for r in new.rows])
    except gradebook.GradebookError as e:
        print('diff: %s' % e, file=sys.stderr)
        return 2
    d = compare(old, new)
    print('\n'.join(d.lines()))
    return 1 if d.unreproducible else 0
