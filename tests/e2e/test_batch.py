"""
`python -m autograder batch` on the synthetic Gradescope export in tests/export (invented
students): the reference (100), the untouched template (0), a syntax error (0), RoPE
positions counted from 0 (85: only the two RoPE-module tests see it, attention is invariant
to a shift of every position) and a zip upload of a correct solution by a group of two (100
each). The batch is interrupted after its first results.json and resumed; a grader crash
costs one error row; the loss-curve picture needs matplotlib only when asked for.
"""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from autograder import REPO_ROOT
from autograder.staff import batch, plots

EXPORT = os.path.join(REPO_ROOT, 'tests', 'export')
TOTALS = {'submission_1000001': 100, 'submission_1000002': 0, 'submission_1000003': 0,
          'submission_1000004': 85, 'submission_1000005': 100}


def _batch(export, out, *extra):
    return subprocess.Popen([sys.executable, '-m', 'autograder', 'batch', str(export), '--jobs', '2', '--out', str(out)]
                            + list(extra), cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finished(export):
    return {s: open(os.path.join(export, s, 'results.json'), 'rb').read() for s in TOTALS
            if os.path.isfile(os.path.join(export, s, 'results.json'))}


def _rows(path):
    with open(path, newline='') as f:
        return list(csv.DictReader(f))


def test_batch_grades_the_export_resumes_after_a_kill_and_writes_one_row_per_student(tmp_path):
    export = tmp_path / 'export'
    shutil.copytree(EXPORT, str(export))
    out = tmp_path / 'grades.csv'

    # first run: stopped as soon as one submission has its results.json
    proc = _batch(export, out)
    deadline = time.time() + 240
    while not _finished(export) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    done_before = _finished(export)
    assert done_before and proc.poll() is None, 'the batch ended before it could be interrupted'
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert '0/5   0% | 0:00 elapsed, ETA ?' in err   # the progress bar (not a terminal: one line per event)
    assert not out.exists()
    done_before = _finished(export)              # anything that completed while stopping counts too
    assert 1 <= len(done_before) < 5
    assert 'interrupted; %d of 5 submissions have results. Run the same command again to resume.' % len(done_before) in err
    assert not [f for s in TOTALS for f in os.listdir(export / s) if f.startswith('.')]   # no half-written files

    # second run: resumes, skips what was graded, grades the rest
    proc = _batch(export, out)
    stdout, err = proc.communicate(timeout=400)
    assert proc.returncode == 0, err
    assert '%d to grade, %d already graded' % (5 - len(done_before), len(done_before)) in err
    assert 'graded %d, skipped %d already graded, errors 0' % (5 - len(done_before), len(done_before)) in stdout
    for sub, blob in done_before.items():
        assert _finished(export)[sub] == blob, '%s was graded again' % sub
    results = {s: json.loads(b) for s, b in _finished(export).items()}
    assert set(results) == set(TOTALS)
    for sub, res in results.items():
        assert sum(t['score'] for t in res['tests']) == TOTALS[sub], sub
        stamp = res['extra_data']['batch']
        assert stamp['profile'] == 'cpu' and stamp['fixtures_sha256'] == batch.stamp_for('cpu')['fixtures_sha256']
    assert 'syntax' in results['submission_1000003']['tests'][0]['output'].lower()
    assert 'hw1_submission.zip' in results['submission_1000005']['output']

    rows = _rows(out)
    assert [r['name'] for r in rows] == ['Alice Example', 'Bob Placeholder', 'Carol Sample', 'Dan Dummy',
                                         'Erin Fictional', 'Frank Madeup']
    by_name = {r['name']: r for r in rows}
    for r in rows:
        assert r['status'] == 'graded' and r['max'] == '100' and r['note'] == ''
        assert float(r['total']) == TOTALS[r['submission']]
        assert sum(float(v) for k, v in r.items() if k[:1].isdigit()) == float(r['total'])
    dan = by_name['Dan Dummy']
    assert (dan['email'], dan['sid'], dan['gradescope_score']) == ('dan.dummy@example.edu', '900000004', '55')
    assert (dan['2.1 rope'], dan['2.2 rope-cache'], dan['4.1 gqa'], dan['10.1 loss-curve']) == ('0', '0', '15', '10')
    assert by_name['Erin Fictional']['submission'] == by_name['Frank Madeup']['submission'] == 'submission_1000005'
    assert by_name['Alice Example']['created_at'].startswith('2024-09-30 20:01:12')

    # third run: nothing to do, same CSV; --png draws the pictures it lacks
    first_csv = out.read_bytes()
    proc = _batch(export, out, '--png')
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert 'graded 0, skipped 5 already graded, errors 0' in stdout
    assert out.read_bytes() == first_csv
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert 'pip install matplotlib' in err
    else:
        for sub in TOTALS:
            with open(export / sub / 'loss_curve.png', 'rb') as f:
                assert f.read(8) == b'\x89PNG\r\n\x1a\n'


def test_a_grader_crash_costs_one_error_row(tmp_path):
    export = tmp_path / 'export'
    for sub in ('submission_1', 'submission_2'):
        os.makedirs(export / sub)
        (export / sub / 'model.py').write_text('def broken(:\n    pass\n')
    os.makedirs(export / 'submission_2' / 'results.json')   # the worker cannot write its results: it crashes
    out = tmp_path / 'grades.csv'
    proc = _batch(export, out)
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert 'graded 1, skipped 0 already graded, errors 1' in stdout
    assert 'ERROR submission_2: the grader crashed (exit 1)' in err and 'IsADirectoryError' in err
    rows = {r['submission']: r for r in _rows(out)}
    assert rows['submission_1']['status'] == 'graded' and rows['submission_1']['total'] == '0'
    bad = rows['submission_2']
    assert bad['status'] == 'error' and bad['total'] == '' and bad['2.1 rope'] == '' and 'IsADirectoryError' in bad['note']
    assert bad['name'] == ''                                  # no metadata file: the row still exists


def test_metadata_symbols_are_read_as_plain_keys():
    meta = batch.read_metadata(EXPORT)
    assert sorted(meta) == sorted(TOTALS)
    group = meta['submission_1000005']
    assert [p['name'] for p in group['submitters']] == ['Erin Fictional', 'Frank Madeup']
    assert group['score'] == 100.0 and str(group['created_at']).startswith('2024-09-30 21:15:03')
    assert batch.submissions(EXPORT, meta) == sorted(TOTALS)


def test_loss_curve_picture_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)   # import matplotlib now raises ImportError
    curves, window, band = plots.reference_band('cpu')
    assert curves.shape == (6, 120) and window == 20 and band[0] < band[1]
    path = tmp_path / 'curve.png'
    assert plots.draw(str(path), list(curves[0]), curves, window, band) is False
    assert capsys.readouterr().out.strip() == plots.MISSING and 'pip install matplotlib' in plots.MISSING
    assert not path.exists()


def test_loss_curve_picture_with_matplotlib(tmp_path):
    pytest.importorskip('matplotlib')
    curves, window, band = plots.reference_band('cpu')
    path = tmp_path / 'curve.png'
    student = np.concatenate([curves.mean(axis=0)[:-1], [np.nan]])   # a curve that blows up at the end
    assert plots.draw(str(path), [None if np.isnan(v) else float(v) for v in student], curves, window, band, 'x')
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
