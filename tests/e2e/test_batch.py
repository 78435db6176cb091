"""
`python -m autograder batch` on a realistic synthetic Gradescope export (tests/helpers/
synthetic_export.py, invented students): the reference (115: 100 plus 15 of extra credit), the untouched template (0), a
syntax error (0), RoPE positions counted from 0 (100: only the two RoPE-module tests see it,
attention is invariant to a shift of every position), a zip upload of a correct solution by a
group of two (115 each), and a metadata entry whose folder is missing (a `missing` row, exit 1).

The export is given as the .zip as downloaded, then as the folder it unzips to, then as the
inner assignment_<id>_export/ folder: the first run is interrupted after its first
results.json, the second resumes, the third and fourth have nothing to grade, and all write
the same CSV. A changed submission is graded again; a grader crash costs one error row.
"""

import csv
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import synthetic_export

from autograder import REPO_ROOT, config
from autograder.staff import batch, plots

TOTALS = {s: t for s, t in synthetic_export.TOTALS.items() if t is not None}
HAS_FOLDER = sorted(TOTALS)


def _batch(export, *extra):
    return subprocess.Popen([sys.executable, '-m', 'autograder', 'batch', str(export), '--jobs', '2'] + list(extra),
                            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finished(inner):
    return {s: open(os.path.join(inner, s, 'results.json'), 'rb').read() for s in TOTALS
            if os.path.isfile(os.path.join(inner, s, 'results.json'))}


def _rows(path):
    with open(path, newline='', encoding='utf-8') as f:
        return list(csv.DictReader(f))


def test_batch_grades_the_export_as_zip_outer_and_inner_folder_resumes_and_writes_one_row_per_student(tmp_path):
    download = tmp_path / 'Downloads'
    download.mkdir()
    zip_path = synthetic_export.build_zip(download / 'assignment_4242_export.zip')
    outer = download / 'assignment_4242_export'              # what unzipping the download gives
    inner = outer / synthetic_export.ASSIGNMENT              # the export folder inside it
    csv_path = inner / 'grades.csv'                          # the default: beside the results, outside the checkout

    # 1. the zip as downloaded: unpacked beside it, stopped as soon as one submission has its results.json
    proc = _batch(zip_path)
    deadline = time.time() + 300
    while not (inner.is_dir() and _finished(inner)) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, 'the batch ended before it could be interrupted: %s' % (proc.communicate()[1],)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert '0/5   0% | 0:00 elapsed, ETA ?' in err   # the progress bar (not a terminal: one line per event)
    assert not csv_path.exists()
    done_before = _finished(inner)
    assert 1 <= len(done_before) < 5
    assert 'interrupted; %d of 5 submissions have results. Run the same command again to resume.' % len(done_before) in err
    assert not [f for s in HAS_FOLDER for f in os.listdir(inner / s) if f.startswith('.')]   # no half-written files

    # 2. the outer folder: resumes, skips what was graded, grades the rest; exit 1 for the missing folder
    proc = _batch(outer)
    stdout, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert '%d to grade, %d already graded' % (5 - len(done_before), len(done_before)) in err
    assert 'graded %d, skipped %d already graded, errors 0, missing 1' % (5 - len(done_before), len(done_before)) in stdout
    assert 'submission_1000006 is listed in submission_metadata.yml but has no folder in the export' in err
    assert '1 submission(s) not graded (0 errors, 1 missing folders)' in err
    for sub, blob in done_before.items():
        assert _finished(inner)[sub] == blob, '%s was graded again' % sub
    results = {s: batch.engine.load(str(inner / s / 'results.json')) for s in TOTALS}
    stamp = batch.stamp_for('cpu')
    for sub, res in results.items():
        assert res.total == TOTALS[sub] and res.extra_data['points']['required_max'] == 100, sub
        got = res.extra_data['batch']
        assert {k: got[k] for k in stamp} == stamp
        assert got['submission_sha256'] == batch.export.submission_sha256(str(inner / sub))
    assert 'syntax' in results['submission_1000003']['submission'].output.lower()
    assert 'hw1_submission.zip' in results['submission_1000005'].output

    rows = _rows(csv_path)
    assert [r['name'] for r in rows] == ['Alice Example', 'Bob Placeholder', 'Dan Dummy', 'Erin Fictional',
                                         'Frank Madeup', 'Gina Nofolder', 'Zoë Ångström-Núñez']
    by_name = {r['name']: r for r in rows}
    for r in rows:
        assert r['max'] == '100'
        if r['name'] == 'Gina Nofolder':
            assert (r['status'], r['total'], r['2.1 rope']) == ('missing', '', '') and 'no folder' in r['note']
            continue
        assert r['status'] == 'graded' and r['note'] == ''
        assert float(r['total']) == TOTALS[r['submission']]
        assert sum(float(v) for k, v in r.items() if k[:1].isdigit()) == float(r['total'])
    dan = by_name['Dan Dummy']
    assert (dan['email'], dan['sid'], dan['gradescope_score']) == ('dan.dummy@example.edu', '', '55')
    # RoPE positions from 0: only the RoPE-module tests lose; training (10.1) keeps its full weight
    loss_weight = '%g' % config.load().test('loss-curve').weight
    assert (dan['2.1 rope'], dan['2.2 rope-cache'], dan['4.1 gqa'], dan['10.1 loss-curve']) == ('0', '0', '15', loss_weight)
    assert by_name['Bob Placeholder']['sid'] == '900000002'                    # a number in the YAML
    assert by_name['Zoë Ångström-Núñez']['gradescope_score'] == ''             # :score: left empty
    assert by_name['Erin Fictional']['submission'] == by_name['Frank Madeup']['submission'] == 'submission_1000005'
    assert by_name['Frank Madeup']['sid'] == ''
    assert by_name['Alice Example']['created_at'].startswith('2024-09-30 20:01:12')

    # 3. the inner folder and 4. the zip again: nothing to grade, the same CSV
    first_csv = csv_path.read_bytes()
    for form in (inner, zip_path):
        proc = _batch(form)
        stdout, err = proc.communicate(timeout=120)
        assert proc.returncode == 1, err
        assert 'graded 0, skipped 5 already graded, errors 0, missing 1' in stdout
        assert csv_path.read_bytes() == first_csv

    # 5. a student's files changed since: that submission alone is graded again (resume is keyed by content)
    shutil.copyfile(str(inner / 'submission_1000003' / 'model.py'), str(inner / 'submission_1000002' / 'model.py'))
    proc = _batch(inner, '--png')
    stdout, err = proc.communicate(timeout=300)
    assert '1 to grade, 4 already graded' in err and 'graded 1, skipped 4' in stdout, err
    assert 'syntax' in batch.engine.load(str(inner / 'submission_1000002' / 'results.json'))['submission'].output
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert 'pip install matplotlib' in err
    else:
        for sub in HAS_FOLDER:
            with open(inner / sub / 'loss_curve.png', 'rb') as f:
                assert f.read(8) == b'\x89PNG\r\n\x1a\n'


def test_a_grader_crash_costs_one_error_row_and_exits_1(tmp_path):
    export = tmp_path / 'export'
    for sub in ('submission_1', 'submission_2'):
        os.makedirs(export / sub)
        (export / sub / 'model.py').write_text('def broken(:\n    pass\n')
    os.makedirs(export / 'submission_2' / 'results.json')   # the worker cannot write its results: it crashes
    out = tmp_path / 'grades.csv'
    proc = _batch(export, '--out', str(out))
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert 'graded 1, skipped 0 already graded, errors 1, missing 0' in stdout
    assert 'ERROR submission_2: the grader crashed (exit 1)' in err and 'IsADirectoryError' in err
    assert '1 submission(s) not graded (1 errors, 0 missing folders)' in err
    rows = {r['submission']: r for r in _rows(out)}
    assert rows['submission_1']['status'] == 'graded' and rows['submission_1']['total'] == '0'
    bad = rows['submission_2']
    assert bad['status'] == 'error' and bad['total'] == '' and bad['2.1 rope'] == '' and 'IsADirectoryError' in bad['note']
    assert bad['name'] == ''                                  # no metadata file: the row still exists


def test_the_csv_is_not_written_into_the_checkout_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(batch, 'REPO_ROOT', str(tmp_path))   # as if tmp_path were the checkout
    os.makedirs(tmp_path / 'export' / 'submission_1')
    assert batch.main(['batch', str(tmp_path / 'export')]) == 2
    err = capsys.readouterr().err
    assert 'would be written inside this checkout' in err and 'give --out' in err
    assert not (tmp_path / 'export' / 'grades.csv').exists() and not (tmp_path / 'export' / 'submission_1' / 'results.json').exists()
    ignore = subprocess.run(['git', 'check-ignore', 'grades.csv', 'export/grades-fall.csv'], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert ignore.stdout.split() == ['grades.csv', 'export/grades-fall.csv'], 'grades*.csv must be git-ignored'


def test_unreadable_exports_fail_with_one_sentence(tmp_path):
    bad_yaml = tmp_path / 'bad'
    os.makedirs(bad_yaml / 'submission_1')
    (bad_yaml / 'submission_metadata.yml').write_text('submission_1:\n  :submitters:\n  - :name: "unclosed\n')
    notzip = tmp_path / 'export.zip'
    notzip.write_text('not a zip')
    for target, words in ((bad_yaml, 'is not valid YAML'), (notzip, 'neither a folder nor a zip'),
                          (tmp_path / 'nothing', 'does not exist'), (tmp_path / 'bad' / 'submission_1', 'no Gradescope export in')):
        proc = subprocess.run([sys.executable, '-m', 'autograder', 'batch', str(target)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (target, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith('batch: ') and words in lines[0], proc.stderr
        assert 'Traceback' not in proc.stderr


def test_loss_curve_picture_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)   # import matplotlib now raises ImportError
    curves, window, band = plots.reference_band('cpu')
    lc = config.load().profiles['cpu']['loss_curve']
    # the reference seeds' curves and the reference trained at the student's seed (the held-out loss's yardstick)
    seeds = set(lc['reference_seeds']) | {lc['student_seed']}
    assert curves.shape == (len(seeds), lc['iters']) and window == lc['window'] and band[0] < band[1]
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
