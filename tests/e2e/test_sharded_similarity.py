"""
A class with planted copies (tests/helpers/planted_copies.py: a renamed copy, a copy with its
methods reordered, and a bug no known bug matches copied renamed and reordered; plus the
reference with another unknown bug) regraded twice from the same files: once by one
`batch --jobs 2`, once by `batch --shard K/3` for K = 1, 2, 3. The shards give the same CSV as
the one run (but for the seconds each grading took) and, merged by `report`, the same report and
the same similarity leads; `diff` reads the shards as one gradebook. The similarity section
names the three planted pairs (and the classes and functions the corpus's styles share by construction), the
copied bug with the tests whose wrong outputs agree, and nothing of it is in any results.json.
"""

import csv
import json
import os
import re
import subprocess
import sys

import class_export
import planted_copies

from autograder import REPO_ROOT

PAIRS = {('submission_3000001', 'submission_3000002'), ('submission_3000003', 'submission_3000004'),
         ('submission_3000005', 'submission_3000006')}
COPIED_BUG = ('submission_3000005', 'submission_3000006')


def _run(*args, timeout=900):
    proc = subprocess.run([sys.executable, '-m', 'autograder'] + list(args), cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, (args, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc.stdout


def _rows(path):
    with open(path, newline='', encoding='utf-8') as f:
        return [{k: v for k, v in r.items() if k != 'seconds'} for r in csv.DictReader(f)]


def _report(folder):
    """report.md without its first lines (the CSV it was read from, when) and the slowest gradings (timings)."""
    with open(os.path.join(folder, 'report.md'), encoding='utf-8') as f:
        text = f.read()
    return re.sub(r'^From .*$', '', text.split('## Slowest gradings')[0], count=1, flags=re.M)


def test_one_run_and_three_shards_give_the_same_grades_and_the_planted_copies(tmp_path):
    one, _, _ = class_export.build(tmp_path / 'one', planted_copies.class_submissions())
    split, _, _ = class_export.build(tmp_path / 'split', planted_copies.class_submissions())
    _run('batch', one, '--jobs', '2')
    graded = set()
    for k in (1, 2, 3):
        out = _run('batch', split, '--jobs', '2', '--shard', '%d/3' % k)
        assert 'shard %d/3 written' % k in out
        graded |= {r['submission'] for r in _rows(os.path.join(split, 'grades.shard-%d-of-3.csv' % k))}
    assert len(graded) == 7 and not os.path.exists(os.path.join(split, 'grades-report'))   # no report of a part
    merged_csv = os.path.join(split, 'grades.csv')
    out = _run('report', split, '--write-csv', merged_csv)
    assert 'merged gradebook of 3 shard(s)' in out
    assert _rows(merged_csv) == _rows(os.path.join(one, 'grades.csv'))
    assert _report(os.path.join(split, 'grades-report')) == _report(os.path.join(one, 'grades-report'))
    leads = [open(os.path.join(f, 'grades-report', 'similarity.csv'), encoding='utf-8').read() for f in (one, split)]
    assert leads[0] == leads[1]
    diff = _run('diff', os.path.join(one, 'grades.csv'), split)   # the shards' folder, read as one gradebook
    assert 'scores: no score changed (7 students in both)' in diff and 'NOT REPRODUCIBLE' not in diff, diff

    rows = list(csv.DictReader(leads[0].splitlines()))
    found = [tuple(r['submissions'].split(' / ')) for r in rows]
    assert PAIRS <= set(found) and found[0] == COPIED_BUG, found   # both kinds of evidence rank first
    by_pair = dict(zip(found, rows))
    # besides: the classes and functions the corpus's styles share by construction (one author's banded_attention,
    # the reference's GPT), leads by a unit of their own, never by the file
    assert all(re.match(r'(banded_attention|GPT)\b.*points above the closest pair', by_pair[p]['text'])
               for p in set(found) - PAIRS), [by_pair[p]['text'] for p in set(found) - PAIRS]
    bug = by_pair[COPIED_BUG]['tests whose wrong outputs agree']
    sets = [json.load(open(os.path.join(one, sub, 'behaviour.json')))['input_set'] for sub in COPIED_BUG]
    # 10.1 trains on inputs every set shares: it compares whatever the sets; 8.1's inputs are its set's own
    assert '10.1 loss-curve: `seed7`' in bug and 'in both (reference' in bug, bug
    assert ('8.1 model' in bug) == (sets[0] == sets[1]), (sets, bug)
    assert by_pair[('submission_3000001', 'submission_3000002')]['text'].startswith(
        'the same code once names and formatting are normalised; +')
    assert all(by_pair[p]['tests whose wrong outputs agree'] == '' for p in PAIRS - {COPIED_BUG})
    assert '## Similarity (staff only: leads to read, not verdicts)' in _report(os.path.join(one, 'grades-report'))
    for sub in sorted(graded):   # the prints sit beside results.json, never in it
        with open(os.path.join(one, sub, 'results.json'), encoding='utf-8') as f:
            results = json.load(f)
        assert not [k for k in results['extra_data'] if 'behaviour' in k or 'print' in k], results['extra_data'].keys()
        with open(os.path.join(one, sub, 'behaviour.json'), encoding='utf-8') as f:
            prints = json.load(f)
        assert prints['stamp'] == results['extra_data']['batch']
        assert bool(prints['tests']) == (sub in COPIED_BUG + ('submission_3000007',)), (sub, sorted(prints['tests']))
