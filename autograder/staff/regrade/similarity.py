"""
The similarity section of the class report (staff only): pairs of submissions ranked by
evidence, each with why. By behaviour (behaviour_match.py): the tests on which their WRONG
outputs agree, with the values; by text (text_match.py): how much of each file's own code the
other holds, and where, or a class or function the two share beyond the template and the
boilerplate staff gave (`report --boilerplate PATH`), each with its margin over the closest pair
of the class that is not a lead. Pairs with both kinds of evidence come first, then the most tests in
agreement, then the most similar text. These are leads for a person to read, never verdicts:
two students can make the same mistake on their own, and a hint in the handout can make
answers alike. Nothing here reaches a student: it reads the regrade's side files and the
export, and writes only into the report folder (similarity.csv, every pair; the report shows
the first SHOWN).
"""

import csv
import os
import shutil
import tempfile
from dataclasses import dataclass
from typing import Optional

from autograder.judge import registry
from autograder.staff.regrade import behaviour_match, behaviour_prints, text_match

SHOWN = 40
CSV_NAME = 'similarity.csv'


@dataclass
class Lead:
    a: str
    b: str
    behaviour: Optional[behaviour_match.BehaviourPair] = None
    text: Optional[text_match.TextPair] = None

    def rank(self):
        both = self.behaviour is not None and self.text is not None
        tests = len(self.behaviour.tests) if self.behaviour else 0
        return (not both, -tests, -(self.text.score if self.text else 0.0), self.a, self.b)


def read_sources(book):
    """{submission: model.py text} of the submissions whose upload holds one, from the export folder(s)."""
    from autograder.judge import submission
    sources, scratch = {}, tempfile.mkdtemp(prefix='hw1-similarity-')
    try:
        for sub in sorted({r['submission'] for r in book.rows if r['status'] in ('graded', 'not graded')}):
            export = book.export_of(sub)
            sub_dir = os.path.join(export, sub) if export else None
            located = (submission.locate(sub_dir, os.path.join(scratch, sub))
                       if sub_dir and os.path.isdir(sub_dir) else None)
            if located is not None and located.path and not located.problem:
                text, _ = submission.read_source(located.path)
                if text is not None:
                    sources[sub] = text
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return sources


def leads(prints, sources, boilerplate=()):
    """(the ranked Leads, the common behaviour clusters, a note when the text pass could not run); `boilerplate`:
    files or folders of code staff gave (older starters, provided code), removed like the template."""
    found = {}
    by_behaviour = behaviour_match.pairs(prints)
    for p in by_behaviour:
        if not p.common:
            found[(p.a, p.b)] = Lead(p.a, p.b, behaviour=p)
    for t in text_match.pairs(sources, boilerplate=boilerplate):
        found.setdefault((t.a, t.b), Lead(t.a, t.b)).text = t
    common = [g for g in behaviour_match.clusters([p for p in by_behaviour if p.common])]
    return sorted(found.values(), key=Lead.rank), common, None


def _test_words(test, number):
    """A test as the section names it: '5.1 gqa-rope', or a part's outputs on the class's shared inputs."""
    part = behaviour_match.shared_part(test)
    if part is not None:
        return 'shared inputs, %s' % registry.PARTS.get(part, part)
    return '%s %s' % (number.get(test, ''), test)


def _behaviour_words(lead, number):
    if lead.behaviour is None:
        return ''
    return '<br>'.join('%s: %s' % (_test_words(t, number), words[0]) for t, words in
                       sorted(lead.behaviour.tests.items(), key=lambda kv: (number.get(kv[0], '~'), kv[0])))


def _text_words(lead):
    t = lead.text
    if t is None:
        return ''
    margin = '' if t.margin is None else '; %+.0f points above the closest pair not flagged' % (100 * t.margin)
    if t.identical:
        return 'the same code once names and formatting are normalised' + margin
    if t.kind == 'unit':
        return '; '.join(('%s: %.0f%% of each' % (na, 100 * min(sa, sb))) if na == nb and abs(sa - sb) < 0.01 else
                         '%s / %s: %.0f%% / %.0f%%' % (na, nb, 100 * sa, 100 * sb)
                         for na, nb, sa, sb in t.units) + ' (lines %s / %s)' % t.lines + margin
    return '%.0f%% / %.0f%% of their own code; longest shared passage: lines %s / %s' % (
        100 * t.similarity[0], 100 * t.similarity[1], t.lines[0], t.lines[1]) + margin


def _table(leads_, names, number):
    rows = []
    for lead in leads_:
        rows.append({'submissions': '%s / %s' % (lead.a, lead.b),
                     'students': '%s / %s' % (names.get(lead.a, ''), names.get(lead.b, '')),
                     'tests whose wrong outputs agree': _behaviour_words(lead, number),
                     'text': _text_words(lead)})
    return rows


def write_csv(path, leads_, names, number):
    with open(path, 'w', newline='', encoding='utf-8') as f:
        w = csv.DictWriter(f, fieldnames=['submissions', 'students', 'tests whose wrong outputs agree', 'text'])
        w.writeheader()
        for row in _table(leads_, names, number):
            w.writerow({k: v.replace('<br>', '; ') for k, v in row.items()})


def section(book, folder, md_table, boilerplate=()):
    """The report's lines for this section; writes folder/similarity.csv with every pair."""
    names = {}
    for r in book.rows:
        names[r['submission']] = ', '.join(n for n in (names.get(r['submission']), r['name']) if n)
    number = {tid: col.split(' ')[0] for tid, col in book.tests.items()}
    prints = behaviour_prints.gathered(book)
    ranked, common, note = leads(prints, read_sources(book), boilerplate)
    write_csv(os.path.join(folder, CSV_NAME), ranked, names, number)
    given = (' and the boilerplate given (%s)' % ', '.join('`%s`' % os.path.basename(b) for b in boilerplate)
             if boilerplate else '')
    lines = ['## Similarity (staff only: leads to read, not verdicts)', '',
             'Pairs whose WRONG outputs agree on a test where no known bug is named (same inputs, equal within '
             'float noise; outputs a correct submission gets right are never counted), or on the inputs the whole '
             'class ran beside its grading ("shared inputs, <part>": never graded, never shown), and pairs whose code '
             'outside the handout template%s is alike (Python tokens, names and formatting normalised; '
             'at least %d%% of one file\'s own code in the other, or a class or function at least %d%% of each). '
             'Each text lead says by how '
             'many points it stands above the closest pair of this class that is not flagged. Two students can make '
             'the same mistake on their own: read both files before anything else. %d pair(s); the first %d below, '
             'every one in `%s`.' % (given, 100 * text_match.FLAG, 100 * text_match.UNIT_FLAG, len(ranked),
                                     min(SHOWN, len(ranked)), CSV_NAME), '']
    if note:
        lines += [note + '.', '']
    import pandas as pd
    lines += [md_table(pd.DataFrame(_table(ranked[:SHOWN], names, number),
                                    columns=['submissions', 'students', 'tests whose wrong outputs agree',
                                             'text'])), '']
    if common:
        lines += ['Wrong outputs shared by more than %d submissions (a common mistake, worth a known bug, or a wide '
                  'ring): %s.' % (behaviour_match.common_limit(len(prints)),
                                  '; '.join(', '.join(g) for g in common)), '']
    return lines
