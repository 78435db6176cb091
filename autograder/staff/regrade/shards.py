"""
A regrade split across machines: `batch EXPORT --shard K/N` grades shard K of N, a fixed share of
the export (a submission belongs to shard 1 + sha256(its folder name) mod N: the same folder is
always in the same shard, whatever else the export holds or which machine runs it), and writes
`grades.shard-K-of-N.csv` with its meta and behaviour files. `report` and `diff` read a complete
set of shards as one gradebook (`read`): every shard of one N, once, of one assignment and
graded with the same grader inputs, else one sentence says what is wrong. The merged rows are
sorted as one batch sorts them, so one run and N shards give the same CSV but for the seconds.
"""

import glob
import hashlib
import os
import re

from autograder.staff.regrade import gradebook

SHARD_FILE = re.compile(r'^(?P<stem>.+)\.shard-(?P<k>\d+)-of-(?P<n>\d+)\.csv$')


def parse(text):
    """'K/N' -> (K, N), 1 <= K <= N; ValueError with one sentence otherwise."""
    m = re.fullmatch(r'\s*(\d+)\s*/\s*(\d+)\s*', text or '')
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError('--shard takes K/N with 1 <= K <= N (e.g. 2/3), not %r' % text)
    return int(m.group(1)), int(m.group(2))


def owner(submission, count):
    """The shard (1..count) that grades `submission` (a folder name)."""
    return 1 + int(hashlib.sha256(submission.encode('utf-8')).hexdigest()[:16], 16) % count


def share(submissions, k, count):
    return [s for s in submissions if owner(s, count) == k]


def csv_name(path, k, count):
    """grades.csv -> grades.shard-K-of-N.csv (still matched by .gitignore's grades*.csv)."""
    stem, ext = os.path.splitext(str(path))
    return '%s.shard-%d-of-%d%s' % (stem, k, count, ext or '.csv')


def siblings(path):
    """Every shard CSV of the set `path` belongs to, found beside it (sorted by K)."""
    m = SHARD_FILE.match(os.path.basename(path))
    pattern = os.path.join(os.path.dirname(path), '%s.shard-*-of-%s.csv' % (glob.escape(m.group('stem')), m.group('n')))
    return sorted(glob.glob(pattern), key=lambda p: int(SHARD_FILE.match(os.path.basename(p)).group('k')))


def expand(paths):
    """The CSVs that `paths` (CSVs, export folders) stand for: a folder without grades.csv gives its shard CSVs, a
    shard CSV given alone gives its whole set."""
    out = []
    for path in paths:
        path = str(path)
        if os.path.isdir(path) or (path.lower().endswith('.zip') and os.path.isdir(os.path.splitext(path)[0])):
            folder = os.path.splitext(path)[0] if not os.path.isdir(path) else path
            found = _shards_in(folder)
            out += found if found else [gradebook.locate(folder)]
        elif SHARD_FILE.match(os.path.basename(path)) and len(paths) == 1:
            out += siblings(path)
        else:
            out.append(path)
    return list(dict.fromkeys(out))


def _shards_in(folder):
    """The shard CSVs of a folder that holds no grades.csv (or of its one inner export folder)."""
    for place in [folder] + [os.path.join(folder, d) for d in sorted(os.listdir(folder))
                             if os.path.isdir(os.path.join(folder, d))]:
        if os.path.isfile(os.path.join(place, 'grades.csv')):
            return []
        found = sorted(p for p in glob.glob(os.path.join(place, '*.shard-*-of-*.csv'))
                       if SHARD_FILE.match(os.path.basename(p)))
        if found:
            return siblings(found[0])
    return []


def read(paths):
    """One Gradebook from CSVs or folders (shards merged); GradebookError with one sentence when unusable."""
    csvs = expand(paths if isinstance(paths, (list, tuple)) else [paths])
    books = [gradebook.read(p) for p in csvs]
    return books[0] if len(books) == 1 and not _shard_of(books[0]) else merge(books)


def _shard_of(book):
    shard = (book.meta or {}).get('shard')
    return tuple(shard) if isinstance(shard, list) and len(shard) == 2 else None


def _check_set(books):
    """GradebookError unless `books` are every shard of one set, once, of one assignment and grader."""
    shards = [_shard_of(b) for b in books]
    if None in shards:
        plain = books[shards.index(None)].path
        raise gradebook.GradebookError('%s is not a shard (no `shard` in its meta file): give the shards of one '
                                       '`batch --shard K/N` set' % plain)
    counts = {n for _, n in shards}
    if len(counts) != 1:
        raise gradebook.GradebookError('the shards come from different splits (of %s)'
                                       % ', '.join(map(str, sorted(counts))))
    n = counts.pop()
    have = sorted(k for k, _ in shards)
    if have != list(range(1, n + 1)):
        lacking = sorted(set(range(1, n + 1)) - set(have))
        raise gradebook.GradebookError('shards of %d: %s; every shard 1..%d is needed once' % (
            n, ('missing %s' % ', '.join('%d/%d' % (k, n) for k in lacking)) if lacking else 'one given twice', n))
    for b in books[1:]:
        if b.assignment != books[0].assignment or b.inputs != books[0].inputs or b.columns != books[0].columns:
            raise gradebook.GradebookError('%s and %s are not shards of one regrade (assignment, grader inputs or '
                                           'tests differ)' % (books[0].path, b.path))


def merge(books):
    """The Gradebook of a whole regrade from its shards: rows as one batch sorts them, meta merged."""
    _check_set(books)
    rows = sorted((r for b in books for r in b.rows), key=lambda r: (r['name'].lower(), r['submission'], r['sid']))
    meta = dict(books[0].meta)
    meta.pop('shard', None)
    meta['submissions'] = {s: rec for b in books for s, rec in ((b.meta or {}).get('submissions') or {}).items()}
    meta['written_at'] = max(b.meta.get('written_at', '') for b in books)
    meta['shards'] = [b.path for b in books]
    merged = gradebook.Gradebook(SHARD_FILE.sub(r'\g<stem>.shard-*-of-\g<n>.csv', books[0].path), rows,
                                 books[0].columns, meta)
    merged.parts = books
    return merged


def write_merged(book, path):
    """The merged gradebook as one CSV with its meta file and behaviour file (batch's three files)."""
    from autograder.staff.regrade import behaviour_prints
    gradebook.write(path, book.columns, [[r.get(c, '') for c in book.columns] for r in book.rows], book.meta)
    gradebook.write_meta(behaviour_prints.side_path(path), behaviour_prints.gathered(book))
