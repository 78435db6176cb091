"""
What `batch` says and keeps on a rerun, without grading anything (the engine is replaced by one that writes
a stamped results.json whose score follows the submission's bytes), issue 41:
- a shard that got no submission of an export says it is empty, not that the export has no folder;
- a rerun after one submission changed (grader inputs unchanged) regrades it and keeps the generation it
  replaces (grades.<date>.csv, with the results.json students saw), and prints the diff between the two.
"""

import json
import os

import synthetic_export

from autograder.staff.regrade import batch, gradebook, gradescope_export, shards, worker_pool


def _fake_grade(engine, todo, total=None, skipped=0, on_done=None):
    """Each job 'graded': 2.1 scores 10 unless model.py holds 'WRONG' (then 0), stamped as the worker stamps."""
    done = {}
    for job in todo:
        model = os.path.join(job.path, 'model.py')
        with open(model if os.path.isfile(model) else os.devnull, encoding='utf-8', errors='replace') as f:
            score = 0 if 'WRONG' in f.read() else 10
        out = {'execution_time': 1.0, 'extra_data': {'batch': job.stamp},
               'tests': [{'name': '2.1 RoPE', 'number': '2.1', 'score': score, 'max_score': 10, 'status': 'passed',
                          'extra_data': {'id': 'rope'}}]}
        with open(job.results_path, 'w') as f:
            json.dump(out, f)
        done[job.key] = ('graded', '')
    return done


def _export(tmp_path):
    inner = synthetic_export.build(tmp_path / 'x')
    return inner, gradescope_export.read(inner).submissions


def test_an_empty_shard_says_so(tmp_path, monkeypatch):
    inner, subs = _export(tmp_path)
    count = 4 * len(subs)   # more shards than folders: some shard gets none
    k = next(k for k in range(1, count + 1) if not shards.share(subs, k, count))
    said = []
    monkeypatch.setattr(worker_pool.Engine, 'grade', _fake_grade)
    b = batch.Batch(inner, shard=(k, count), log=said.append)
    assert b.grade_all()
    text = '\n'.join(said)
    assert 'shard %d/%d is empty: none of the %d submission folders' % (k, count, len(subs)) in text, text
    assert 'no submission_<id>/ folder' not in text, text


def test_a_rerun_keeps_the_generation_it_replaces_and_prints_the_diff_between_them(tmp_path, monkeypatch, capsys):
    inner, subs = _export(tmp_path)
    monkeypatch.setattr(worker_pool.Engine, 'grade', _fake_grade)
    out = str(tmp_path / 'grades.csv')
    assert batch.main(['batch', inner, '--out', out, '--no-report']) in (0, 1)
    first = gradebook.read(out)
    capsys.readouterr()
    changed = 'submission_1000001'   # the reference's model.py
    with open(os.path.join(inner, changed, 'model.py'), 'a') as f:
        f.write('\n# WRONG\n')
    assert batch.main(['batch', inner, '--out', out, '--no-report']) in (0, 1)
    printed = capsys.readouterr()
    kept = [p for p in os.listdir(tmp_path) if p.startswith('grades.') and p.endswith('.csv') and p != 'grades.csv']
    assert len(kept) == 1, os.listdir(tmp_path)
    kept_path = str(tmp_path / kept[0])
    assert gradebook.read(kept_path).rows == first.rows                      # the old generation, whole
    new = {r['submission']: r for r in gradebook.read(out).rows}
    assert new[changed]['total'] in ('0', '0.0'), new[changed]
    with open(os.path.join(os.path.splitext(kept_path)[0] + gradebook.RESULTS_SUFFIX, changed, 'results.json')) as f:
        assert json.load(f)['tests'][0]['score'] == 10                       # the feedback the student saw
    assert 'diff: %s' % kept_path in printed.out and '-> %s' % out in printed.out, printed.out
    assert '1 of' in printed.out and "the submission's files changed" in printed.out, printed.out
    assert 'is kept as %s' % kept_path in printed.err, printed.err
