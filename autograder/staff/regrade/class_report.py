"""
`python -m autograder report EXPORT_OR_CSV... [--out DIR] [--write-csv PATH]`: the class report of
a regrade, which `batch` also writes after every regrade. Read from the grades CSV and its meta
file (gradebook.py), or from the N CSVs of `batch --shard K/N` merged into one (shards.py);
written to `<csv stem>-report/` beside the CSV (or --out) as report.md and
report.html (the same text; open the HTML in a browser), with the pictures scores.png and
tests.png:

- the score distribution of the graded submissions (histogram, and its summary numbers);
- per test: mean points, pass rate (share of graded submissions with the test's full
  points) and discrimination, the corrected point-biserial correlation (below);
- the named bugs (the known bugs of known_bugs.py the judges named) ranked by the number
  of submissions that have each (a submission told of several counts under its earliest
  test's, and is listed apart), with their students;
- similarity, for staff only (similarity.py): pairs of submissions whose wrong outputs agree
  or whose code is alike, ranked, each with why; leads to read, never verdicts;
- every row that is not `graded` (errors, timeouts, uploads without a model.py, missing
  folders) with its note; the slowest gradings.

Statistics are over submissions (a group of two counts once). Discrimination of test i is
Pearson's r between X = 1 when the submission has test i's full points (else 0) and Y = the
total of the OTHER tests, which for a 0/1 X is the point-biserial correlation
r_pb = (M1 - M0) / s_Y * sqrt(p q) (M1, M0: mean Y of those who pass and fail, p = 1 - q the
pass rate, s_Y Y's population standard deviation). Leaving the test out of Y ("corrected") keeps a heavy
test from correlating with itself. Near 0: the test does not separate strong from weak
submissions; undefined when everyone or no one passes.

pandas builds every table, matplotlib draws, python-markdown turns the Markdown into HTML:
staff extras (requirements-staff.txt), never needed by the Gradescope zip.
"""

import argparse
import os
import re
import sys

from autograder import REPO_ROOT
from autograder.staff.regrade import gradebook, shards, similarity

SLOWEST = 10
FORMULA = ('discrimination: corrected point-biserial r = Pearson r between "full points on this test" (0/1) and the '
           'total of the other tests, over graded submissions; r_pb = (M1 - M0) / s * sqrt(p q)')


class ReportError(ValueError):
    """The report cannot be written; one sentence."""


def _libs():
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        import markdown
        import pandas as pd
    except ImportError as e:
        raise ReportError('%s (pip install -r requirements-staff.txt)' % e)
    return pd, plt, markdown


def frames(book):
    """(students, submissions): the CSV as a DataFrame, and one row per submission with its students' names."""
    pd, _, _ = _libs()
    students = pd.DataFrame(book.rows, columns=book.columns).fillna('')
    numeric = list(book.tests.values()) + ['total', 'max'] + (['seconds'] if 'seconds' in students else [])
    for col in numeric:
        students[col] = pd.to_numeric(students[col], errors='coerce')
    for col in ('bugs', 'note', 'seconds'):
        if col not in students:
            students[col] = '' if col != 'seconds' else float('nan')
    people = students.groupby('submission', sort=True)['name'].agg(
        lambda s: ', '.join(n for n in s if n) or '(no name)')
    subs = students.drop_duplicates('submission').set_index('submission').sort_index()
    subs['students'] = people
    return students, subs


def test_table(book, subs):
    """
    Per test: weight, the graded submissions that attempted it (an optional part left untouched
    is not attempted), mean points, pass rate and the corrected point-biserial discrimination,
    all over those that attempted it.
    """
    pd, _, _ = _libs()
    graded = subs[subs['status'] == 'graded']
    tests = (book.meta or {}).get('tests') or {}
    rows = []
    for tid, col in book.tests.items():
        weight = tests.get(tid, {}).get('weight')
        if weight is None:   # an older CSV without meta: the best score seen stands in for the weight
            weight = graded[col].max()
        attempted = [tid not in book.submission_record(sub).get('not_attempted', ()) for sub in graded.index]
        tried = graded.loc[pd.Series(attempted, index=graded.index, dtype=bool)]
        scores = tried[col]
        passed = (scores >= weight).astype(float) if weight else pd.Series(float('nan'), index=scores.index)
        rest = tried['total'] - scores.fillna(0)
        r = passed.corr(rest) if weight and 0 < passed.mean() < 1 else float('nan')
        rows.append({'test': col, 'weight': '%g' % weight,
                     'optional': 'yes' if tests.get(tid, {}).get('extra_credit') else '',
                     'attempted': len(tried), 'mean points': scores.mean(),
                     'pass rate': passed.mean() if weight else float('nan'),
                     'discrimination r_pb': r,
                     'note': _test_note(weight, passed, r, len(graded))})
    return pd.DataFrame(rows)


def _test_note(weight, passed, r, graded):
    if not weight:
        return 'no points'
    rate = passed.mean()
    if rate != rate:
        return 'no graded submission' if not graded else 'no one attempted it'
    if rate == 1:
        return 'everyone who attempted it passes' if len(passed) < graded else 'everyone passes'
    if rate == 0:
        return 'no one passes'
    return 'separates weakly' if r < 0.2 else ''


def bug_table(subs):
    """
    Named bugs by number of submissions, with the students of each and what the harness told them.
    A submission counts once, under the bug named by its earliest test: the lower-numbered tests
    run smaller units (2.x the RoPE module alone), which tell more bugs apart than attention or the
    whole model do (RoPE with sin and cos swapped looks like a sign error once inside attention).
    """
    pd, _, _ = _libs()
    from autograder.judge.known_bugs import BY_ID
    named = subs[subs['bugs'] != ''][['bugs', 'students']].copy()
    if named.empty:
        return pd.DataFrame(columns=['bug', 'submissions', 'students', 'what it is'])
    named['bug'] = named['bugs'].str.split(';').str[0]
    table = named.groupby('bug').agg(submissions=('students', 'size'), students=('students', '; '.join)).reset_index()
    table['what it is'] = table['bug'].map(lambda b: BY_ID[b].description if b in BY_ID else '(no longer a known bug)')
    return table.sort_values(['submissions', 'bug'], ascending=[False, True]).reset_index(drop=True)


def several_bugs_table(subs):
    """Submissions whose tests named more than one known bug (the first is the one counted above)."""
    several = subs[subs['bugs'].str.contains(';')]
    return several.reset_index()[['submission', 'students', 'bugs']]


def problem_table(students):
    rows = students[students['status'] != 'graded']
    return rows[['name', 'submission', 'status', 'note']].sort_values(['status', 'submission'])


def slowest_table(subs):
    timed = subs.dropna(subset=['seconds']).sort_values('seconds', ascending=False).head(SLOWEST)
    return timed.reset_index()[['submission', 'students', 'status', 'total', 'seconds']]


def draw(subs, tests, folder, required_max):
    """scores.png (histogram of totals) and tests.png (pass rate per test)."""
    _, plt, _ = _libs()
    graded = subs[subs['status'] == 'graded']['total'].dropna()
    top = max([required_max] + list(graded))
    fig, ax = plt.subplots(figsize=(8, 4), dpi=100)
    ax.hist(graded, bins=20, range=(0, top if top > 0 else 1), color='tab:blue', edgecolor='white')
    ax.axvline(required_max, color='tab:red', linestyle='--',
               label='required maximum %g (extra credit above)' % required_max)
    ax.set_xlabel('total points')
    ax.set_ylabel('submissions')
    ax.yaxis.get_major_locator().set_params(integer=True)   # counts of submissions, never 1.25
    ax.set_title('Score distribution: %d graded submissions' % len(graded))
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(folder, 'scores.png'))
    plt.close(fig)
    shown = tests[tests['attempted'] > 0]   # a test nobody attempted has no pass rate (listed apart)
    fig, ax = plt.subplots(figsize=(8, 0.35 * len(shown) + 1.2), dpi=100)
    ax.barh(shown['test'][::-1], shown['pass rate'].fillna(0)[::-1], color='tab:green')
    ax.set_xlim(0, 1)
    ax.set_xlabel('pass rate (full points), graded submissions that attempted the test')
    fig.tight_layout()
    fig.savefig(os.path.join(folder, 'tests.png'))
    plt.close(fig)


def _md(df, floatfmt='.2f'):
    # an undefined number (a test without points, a pass rate of 0 or 1) reads as a dash, not 'nan'
    if not len(df):
        return '(none)'
    return df.astype(object).where(df.notna(), None).to_markdown(index=False, floatfmt=floatfmt, missingval='-')


def _summary(totals):
    """describe() of the totals, its count an integer (a number of submissions)."""
    pd, _, _ = _libs()
    d = totals.describe()
    return pd.DataFrame([dict({'submissions': int(d['count'])}, **{k: d[k] for k in d.index if k != 'count'})])


def render(book, extra=()):
    """(markdown text, submissions frame, tests frame, required maximum); `extra`: lines of more sections
    (the similarity section), placed before the rows that are not graded."""
    students, subs = frames(book)
    tests = test_table(book, subs)
    graded = subs[subs['status'] == 'graded']
    required_max = float(subs['max'].dropna().iloc[0]) if subs['max'].notna().any() else 0.0
    counts = subs['status'].value_counts()
    untried = tests[tests['attempted'] == 0] if len(graded) else tests.iloc[0:0]
    inputs = book.inputs or {}
    md = ['# Class report: %s' % (book.assignment or os.path.basename(os.path.dirname(book.path))), '',
          'From `%s`%s. %d students in %d submissions; of the submissions: %s.' % (
              book.path, ' (written %s)' % book.meta['written_at'] if book.meta else '', len(students), len(subs),
              ', '.join('%d %s' % (n, s) for s, n in counts.items())),
          'Grader inputs: %s.' % (', '.join('%s %s' % (k, str(v)[:12]) for k, v in sorted(inputs.items()))
                                  if inputs else 'unknown (no meta file beside the CSV)'), '',
          '## Score distribution', '', '![score histogram](scores.png)', '',
          'Totals of the %d graded submissions (required maximum %g; extra credit counts on top):'
          % (len(graded), required_max),
          '', _md(_summary(graded['total'])), '',
          '## Tests', '', '![pass rate per test](tests.png)', '',
          'Over the graded submissions that attempted each test (an optional part whose TODO still raises '
          'NotImplementedError is not attempted: it costs nothing and is counted apart).', '',
          _md(tests[~tests.index.isin(untried.index)], '.2f'), '', FORMULA + '.', '',
          'Optional tests no graded submission attempted: %s.'
          % (', '.join(untried['test']) if len(untried) else 'none'),
          '',
          '## Named bugs', '', 'Known bugs (autograder/judge/known_bugs.py) that a judge named in a test output, by '
          'number of submissions (each counted once, under the bug its earliest test named):', '',
          _md(bug_table(subs)), '', 'Submissions whose tests named several known bugs (in test order):', '',
          _md(several_bugs_table(subs)), ''] + list(extra) + [
          '## Not graded: errors, timeouts, missing uploads', '', _md(problem_table(students)), '',
          '## Slowest gradings', '', _md(slowest_table(subs), '.1f'), '']
    return '\n'.join(md), subs, tests, required_max


def default_folder(csv_path):
    """<csv stem>-report/ beside the CSV; for shards, that of the CSV one run would have written."""
    stem = os.path.splitext(os.path.abspath(csv_path))[0]
    return re.sub(r'\.shard-(\*|\d+)-of-\d+$', '', stem) + '-report'


def write(csv_path, folder=None, similar=True, boilerplate=()):
    """Write report.md, report.html, scores.png and tests.png (and similarity.csv); returns their paths.
    `csv_path`: a CSV, an export folder, or a list of them (shards, merged); `boilerplate`: code staff gave besides
    the template (files or folders), no evidence of copying. ReportError when it cannot."""
    _, _, markdown = _libs()
    try:
        book = shards.read(csv_path)
    except gradebook.GradebookError as e:
        raise ReportError(str(e))
    folder = folder or default_folder(book.path)
    os.makedirs(folder, exist_ok=True)
    missing = [b for b in boilerplate if not os.path.exists(b)]
    if missing:
        raise ReportError('--boilerplate: no such file or folder: %s' % ', '.join(missing))
    extra = similarity.section(book, folder, _md, boilerplate) if similar else ()
    text, subs, tests, required_max = render(book, extra)
    draw(subs, tests, folder, required_max)
    body = markdown.markdown(text, extensions=['tables'])
    title = text.splitlines()[0].lstrip('# ')
    html = ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>%s</title><style>body{font-family:sans-serif;'
            'max-width:70em;margin:auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}'
            '</style></head><body>\n%s\n</body></html>\n' % (title, body))
    paths = {'md': os.path.join(folder, 'report.md'), 'html': os.path.join(folder, 'report.html'),
             'scores': os.path.join(folder, 'scores.png'), 'tests': os.path.join(folder, 'tests.png')}
    for key, content in (('md', text), ('html', html)):
        with open(paths[key], 'w', encoding='utf-8') as f:
            f.write(content)
    return paths


def _parser():
    ap = argparse.ArgumentParser(prog='python -m autograder report', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('sources', nargs='+', metavar='source',
                    help='a grades CSV written by batch, or the export folder holding it; several, or a folder of '
                         '`batch --shard K/N` CSVs: the shards are merged into one report')
    ap.add_argument('--out', help='the report folder (default: <csv stem>-report/ beside the CSV)')
    ap.add_argument('--write-csv', metavar='PATH',
                    help='also write the merged gradebook (CSV and its meta and behaviour files) to PATH: the one CSV '
                         'of a sharded regrade, for the upload and for `diff`')
    ap.add_argument('--no-similarity', action='store_true', help='leave out the similarity section (staff leads)')
    ap.add_argument('--boilerplate', action='append', default=[], metavar='PATH',
                    help='code staff gave besides the handout template (an older starter, provided code): a .py file '
                         'or a folder of them, removed from every model.py before the similarity section compares '
                         'them; repeatable')
    return ap


def main(argv):
    args = _parser().parse_args(argv[1:])
    try:
        book = shards.read(args.sources)
        folder = args.out or default_folder(book.path)
        root = os.path.realpath(REPO_ROOT) + os.sep
        if args.out is None and (os.path.realpath(folder) + os.sep).startswith(root):
            print('report: the report would be written inside this checkout (%s) and names students; give --out to '
                  'write it there anyway' % folder, file=sys.stderr)
            return 2
        if args.write_csv:
            shards.write_merged(book, args.write_csv)
            print('report: the merged gradebook of %d shard(s) written to %s' % (len(book.pieces()), args.write_csv))
        paths = write(args.sources, folder, similar=not args.no_similarity, boilerplate=args.boilerplate)
    except (gradebook.GradebookError, ReportError) as e:
        print('report: %s' % e, file=sys.stderr)
        return 2
    print('report: %s and %s (pictures scores.png, tests.png)' % (paths['html'], paths['md']))
    return 0
