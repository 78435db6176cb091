"""
The gradebook of a regrade: `grades.csv` (one row per student) and, beside it,
`grades.csv.meta.json` (what graded it). `batch` writes both; `report` and `diff` read them.

The CSV: name, email, sid, submission, created_at, status, the points of every test (by number
and id), total, max, the score Gradescope had, the named bugs, the grading's seconds and a
note. Status is one of
    graded      the submission's code ran through the tests (whatever its score)
    not graded  it could not run: no model.py in the upload (a PDF only), an upload refused, a
                model.py that does not parse or imports what the sandbox lacks; the note says which
    error       the grader itself crashed or ran past its timeout (note: how)
    missing     listed in submission_metadata.yml but the export has no folder for it
Every row that is not `graded` carries a note. `bugs` lists the known bugs (known_bugs.py ids)
the judges named in any test's output ("... known wrong variant: <id>").

The meta file records the grader inputs (sha256 of grading.yaml, of the fixtures' manifest and
of the grader's code, the profile), each test's weight and tolerance, and per submission the
hash of its files and the inputs its results.json was stamped with: what `diff` needs to say
why a score moved, or that it moved without a reason.
"""

import csv
import datetime
import json
import os
import re

from autograder.judge.results import points

LEADING = ['name', 'email', 'sid', 'submission', 'created_at', 'status']
TRAILING = ['total', 'max', 'gradescope_score', 'bugs', 'seconds', 'note']
STATUSES = ('graded', 'not graded', 'error', 'missing')
META_SUFFIX = '.meta.json'
RESULTS_SUFFIX = '.results'   # grades.<date>.results/<submission>/results.json: the feedback of a kept regrade
INPUT_KEYS = ('profile', 'grading_yaml_sha256', 'fixtures_sha256', 'grader_sha256')
# the judges' wording when a failing case matches a known bug (autograder/judge/areas/values.py); a unit test
# runs that judge on a known bug's own outputs and holds this pattern to what it prints
NAMED_BUG = re.compile(r'known wrong variant: ([a-z0-9][a-z0-9-]*)\)')
TEST_COLUMN = re.compile(r'^(\d+(?:\.\d+)*) (\S+)$')
NOT_GRADED = 'not graded: '   # grade.py's first line for every test when the code never ran
GRADER_OUTPUTS = ('results.json', 'loss_curve.png', 'behaviour.json')   # what batch writes into a submission's folder


class GradebookError(ValueError):
    """A CSV or meta file that cannot be used; the message is one sentence for the person at the terminal."""


def meta_path(csv_path):
    return str(csv_path) + META_SUFFIX


def test_column(spec):
    return '%s %s' % (spec.number, spec.id)


def header(specs):
    return LEADING + [test_column(s) for s in specs] + TRAILING


def named_bugs(out):
    """The known bug ids named anywhere in a Results' test outputs, in test order, each once."""
    found = []
    for t in out.tests.values():
        for bug in NAMED_BUG.findall(t.output or ''):
            if bug not in found:
                found.append(bug)
    return found


SEE_1_1 = ' (see test 1.1)'


def _first_line(text):
    return next((l.strip() for l in (text or '').splitlines() if l.strip()), '')


def classify(out, sub_dir=None):
    """(status, note) of a results.json the grader completed: `not graded` when no test ran the code."""
    scored = [t for t in out.tests.values() if t.max_score > 0]
    first = out.tests.get('submission')
    if scored and all(_first_line(t.output).startswith(NOT_GRADED) for t in scored):
        # the problem grade.py found (the same for every test)
        reason = _first_line(scored[0].output)[len(NOT_GRADED):]
        if reason.endswith(SEE_1_1):   # the student's pointer to the test that explains it; staff read the reason
            reason = reason[:-len(SEE_1_1)]
        if reason.startswith('no model.py') and 'the upload holds' not in reason and sub_dir and os.path.isdir(sub_dir):
            uploaded = sorted(f for f in os.listdir(sub_dir) if not f.startswith('.') and f not in GRADER_OUTPUTS)
            reason += ' (the upload holds %s)' % (', '.join(uploaded[:5]) + (' ...' if len(uploaded) > 5 else '')
                                                  if uploaded else 'no file')
        return 'not graded', reason
    if first is not None and first.score < first.max_score:   # never the case today (1.1 weighs 0), said anyway
        return 'graded', _first_line(first.output)
    return 'graded', ''


def not_attempted(out):
    """The optional tests this Results left untouched (their TODO still raises NotImplementedError)."""
    from autograder.judge.results import NOT_ATTEMPTED
    lead = NOT_ATTEMPTED.split(':')[0] + ':'
    return sorted(tid for tid, t in out.tests.items() if (t.output or '').startswith(lead))


def row_cells(specs, out, status, note):
    """The cells after LEADING for one submission: points per test, total, then bugs, seconds and note."""
    if out is None:
        return [''] * len(specs), '', '', '', note
    cells = [points(out.score(s.id)) if s.id in out else '' for s in specs]
    return cells, points(out.total), ';'.join(named_bugs(out)), '%.2f' % out.execution_time, note


def grader_inputs(stamp):
    return {k: stamp.get(k) for k in INPUT_KEYS}


def tests_snapshot(grading):
    """Per test: what a regrade can change in grading.yaml without touching the fixtures."""
    snap = {}
    for s in grading.enabled_tests():
        entry = {'number': s.number, 'weight': s.weight, 'extra_credit': bool(grading.is_extra_credit(s)),
                 'timeout': s.timeout}
        if s.tolerance is not None:
            entry.update(atol=s.tolerance.atol, rtol=s.tolerance.rtol)
        snap[s.id] = entry
    return snap


def write(csv_path, header_row, rows, meta):
    """The CSV and its meta file, each written atomically (a crash leaves the previous pair whole)."""
    folder = os.path.dirname(os.path.abspath(csv_path))
    os.makedirs(folder, exist_ok=True)
    for path, dump in ((csv_path, lambda f: _write_rows(f, header_row, rows)),
                       (meta_path(csv_path), lambda f: (json.dump(meta, f, indent=2, sort_keys=True), f.write('\n')))):
        tmp = os.path.join(folder, '.%s.tmp' % os.path.basename(path))
        with open(tmp, 'w', newline='', encoding='utf-8') as f:
            dump(f)
        os.replace(tmp, path)


def write_meta(path, meta):
    """One meta file, written atomically."""
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as f:
        json.dump(meta, f, indent=2, sort_keys=True)
        f.write('\n')
    os.replace(tmp, path)


def _write_rows(f, header_row, rows):
    w = csv.writer(f)
    w.writerow(header_row)
    w.writerows(rows)


def new_meta(assignment, export_folder, stamp, grading, submissions):
    return {'format': 1, 'assignment': assignment, 'export': export_folder, 'inputs': grader_inputs(stamp),
            'tests': tests_snapshot(grading), 'submissions': submissions,
            'written_at': datetime.datetime.now().isoformat(timespec='seconds')}


# ----------------------------------------------------------------------------- reading back


class Gradebook:
    """A grades CSV read back: rows (dicts of strings), its test columns {id: column}, and its meta (or None)."""

    def __init__(self, path, rows, columns, meta):
        self.path, self.rows, self.columns, self.meta = path, rows, columns, meta
        self.parts = None   # the shard Gradebooks a merged one was made of (shards.merge)
        self.tests = {}
        for col in columns:
            m = TEST_COLUMN.match(col)
            if m:
                self.tests[m.group(2)] = col

    @property
    def assignment(self):
        return (self.meta or {}).get('assignment')

    @property
    def inputs(self):
        return (self.meta or {}).get('inputs')

    def submission_record(self, sub):
        return ((self.meta or {}).get('submissions') or {}).get(sub) or {}

    def pieces(self):
        """The CSVs this gradebook was read from: itself, or its shards."""
        return self.parts or [self]

    def export_of(self, sub):
        """The export folder that holds `sub` (its shard's, for a merged gradebook), or None."""
        for part in self.pieces():
            if part is self or any(r['submission'] == sub for r in part.rows):
                return (part.meta or {}).get('export')
        return None

    def results_path(self, sub):
        """Where this regrade's results.json of `sub` is (its kept folder, else the export), or None."""
        if self.parts:
            part = next((p for p in self.parts if any(r['submission'] == sub for r in p.rows)), None)
            return part.results_path(sub) if part is not None else None
        folder = (self.meta or {}).get('results') or (self.meta or {}).get('export')
        path = os.path.join(folder, sub, 'results.json') if folder and sub else None
        return path if path and os.path.isfile(path) else None


def locate(path):
    """The grades CSV for `path`: the CSV itself, or the grades.csv of an export folder (any of its forms)."""
    path = str(path)
    if os.path.isdir(path):
        candidates = [os.path.join(path, 'grades.csv')]
        candidates += [os.path.join(path, d, 'grades.csv') for d in sorted(os.listdir(path))
                       if os.path.isdir(os.path.join(path, d))]
        found = [c for c in candidates if os.path.isfile(c)]
        if not found:
            raise GradebookError('%s holds no grades.csv: run `python -m autograder batch %s` first' % (path, path))
        return found[0]
    if path.lower().endswith('.zip') and os.path.isdir(os.path.splitext(path)[0]):
        return locate(os.path.splitext(path)[0])
    if not os.path.isfile(path):
        raise GradebookError('%s does not exist' % path)
    return path


def read(path):
    """The Gradebook at `path` (a CSV, or an export folder holding grades.csv); GradebookError when unusable."""
    path = locate(path)
    try:
        with open(path, newline='', encoding='utf-8-sig') as f:
            reader = csv.DictReader(f)
            columns = list(reader.fieldnames or [])
            rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as e:
        raise GradebookError('%s is not a readable CSV (%s)' % (path, e))
    lacking = [c for c in ('submission', 'status', 'total') if c not in columns]
    if lacking:
        raise GradebookError('%s is not a grades CSV written by `python -m autograder batch` (no %s column)'
                             % (path, ', '.join(lacking)))
    meta = None
    if os.path.isfile(meta_path(path)):
        try:
            with open(meta_path(path), encoding='utf-8') as f:
                meta = json.load(f)
        except (OSError, ValueError) as e:
            raise GradebookError('%s is not readable JSON (%s)' % (meta_path(path), e))
        if not isinstance(meta, dict):
            raise GradebookError('%s is not a JSON object' % meta_path(path))
    book = Gradebook(path, rows, columns, meta)
    if not book.tests:
        raise GradebookError('%s has no test columns ("2.1 rope", ...): not a grades CSV of this autograder' % path)
    return book
