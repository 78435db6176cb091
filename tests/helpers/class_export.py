"""
Classes as Gradescope exports (the format of synthetic_export.py), with KNOWN, planted bugs,
for bench/bench_batch.py and the slow report test. `build()`, the corpus class:

- every submission of the corpus tests/submissions (12 correct styles, 52 mutants with one
  bug each; expected.yaml names the known bug a mutant must be told, or none);
- the reference with a known bug planted by known_bugs.py's own patch, EXTRA times each
  (so that the report has bugs with counts above one);
- the untouched template, a syntax error and a PDF-only upload.

`build_realistic(folder, n)`, a class as they come (bench_batch.py --class realistic): at least
72% correct styles of tests/submissions/correct (each style submitted by several invented
students), single-bug mutants of the corpus for the rest, and the template, a syntax error and a
PDF-only upload.

Each submission has an invented student in submission_metadata.yml. Both return the export
folder and the truth: {submission: planted known bug id or None}, and the submissions
expected `not graded`.
"""

import os

import yaml

from grader_runs import REPO  # noqa: F401  (puts the checkout on sys.path)
from autograder.judge import known_bugs

CORPUS = os.path.join(REPO, 'tests', 'submissions')
REFERENCE = os.path.join(REPO, 'reference', 'mingpt', 'model.py')
TEMPLATE = os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py')
EXTRA = {'rope-sign': 3, 'gqa-tiled': 2, 'rope-positions-from-0': 2}
ASSIGNMENT = 'assignment_5151_export'


def _read(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def submissions():
    """[(model.py text or None, planted bug id or None, what it is)] in a fixed order."""
    out = []
    for kind in ('correct', 'buggy'):
        for name in sorted(os.listdir(os.path.join(CORPUS, kind))):
            folder = os.path.join(CORPUS, kind, name)
            if not os.path.isfile(os.path.join(folder, 'expected.yaml')):
                continue
            with open(os.path.join(folder, 'expected.yaml')) as f:
                exp = yaml.safe_load(f) or {}
            out.append((_read(os.path.join(folder, 'model.py')), exp.get('known_bug'), '%s/%s' % (kind, name)))
    reference = _read(REFERENCE)
    for fp, n in sorted(EXTRA.items()):
        for i in range(n):
            out.append((known_bugs.apply(known_bugs.BY_ID[fp], reference), fp, 'reference + %s #%d' % (fp, i + 1)))
    out.append((_read(TEMPLATE), None, 'untouched template'))
    out.append((reference.replace('        T = x.shape[-2] + offset\n', '        T = x.shape[-2] + offset +\n', 1),
                None, 'syntax error'))
    out.append((None, None, 'PDF only'))
    return out


def build(folder, chosen=None):
    """
    (the inner export folder, {submission: planted bug or None}, [submissions expected 'not graded']);
    `chosen`: the [(model.py text or None, bug, what)] to write (default: submissions()).
    """
    inner = os.path.join(str(folder), ASSIGNMENT)
    planted, not_graded, meta = {}, [], {}
    for i, (source, bug, what) in enumerate(submissions() if chosen is None else chosen):
        sub = 'submission_%d' % (3000001 + i)
        os.makedirs(os.path.join(inner, sub))
        if source is None:
            with open(os.path.join(inner, sub, 'writeup.pdf'), 'wb') as f:
                f.write(b'%PDF-1.4\n%%EOF\n')
        else:
            with open(os.path.join(inner, sub, 'model.py'), 'w', encoding='utf-8') as f:
                f.write(source)
        if source is None or what == 'syntax error':
            not_graded.append(sub)
        planted[sub] = bug
        meta[sub] = {':submitters': [{':name': 'Student %03d' % (i + 1), ':sid': str(910000000 + i),
                                      ':email': 'student%03d@example.edu' % (i + 1)}],
                     ':created_at': '2024-10-01 12:00:00.000000000 -07:00', ':score': 0.0, ':history': []}
    with open(os.path.join(inner, 'submission_metadata.yml'), 'w') as f:
        yaml.safe_dump(meta, f, sort_keys=True)
    return inner, planted, not_graded


# ----------------------------------------------------------------------------- a class that is mostly correct

# the share of each kind in realistic(): a real class is mostly correct or nearly so
CORRECT_SHARE, BROKEN = 0.72, ('untouched template', 'syntax error', 'PDF only')


def realistic_submissions(n):
    """
    [(model.py text or None, planted bug id or None, what it is)] for a class of `n`: at least 72%
    correct styles (tests/submissions/correct, each submitted by several invented students), then
    single-bug mutants of the corpus (tests/submissions/buggy, one each in turn), then one each of
    the template, a syntax error and a PDF-only upload.
    """
    corpus = submissions()
    correct = [s for s in corpus if s[2].startswith('correct/')]
    buggy = [s for s in corpus if s[2].startswith('buggy/')]
    broken = [s for s in corpus if s[2] in BROKEN]
    n_correct = max(int(round(CORRECT_SHARE * n)), n - len(broken) - len(buggy))
    n_buggy = max(0, n - n_correct - len(broken))
    out = [correct[i % len(correct)] for i in range(n_correct)]
    out += [buggy[i % len(buggy)] for i in range(n_buggy)]
    return out + broken[:max(0, n - n_correct - n_buggy)]


def build_realistic(folder, n=50):
    """build() for realistic_submissions(n): (inner export folder, {submission: planted bug or None}, not graded)."""
    return build(folder, realistic_submissions(n))
