"""
`python -m autograder batch` on a realistic synthetic Gradescope export (tests/helpers/
synthetic_export.py, invented students): the reference (115: 100 plus 15 of extra credit), the untouched template (0), a
syntax error (not graded, 0), RoPE positions counted from 0 (100: only the two RoPE-module tests see it,
attention is invariant to a shift of every position; the bug is named), a zip upload of a correct solution by a
group of two (115 each), a PDF-only upload (not graded, with a note) and a metadata entry whose
folder is missing (a `missing` row, exit 1).

The export is given as the .zip as downloaded, then as the folder it unzips to, then as the
inner assignment_<id>_export/ folder: the first run is interrupted after its first
results.json, the second resumes, the third and fourth have nothing to grade, and all write
the same CSV. A changed submission is graded again; the class report follows each regrade. A
regrade after a tolerance change is refused until --compare keeps the old CSV, and then lists
exactly the one student whose score moved. A grader crash costs one error row.
"""

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import synthetic_export

from grader_runs import grading_text

from autograder import REPO_ROOT
from autograder.judge import config
from autograder.staff.regrade import batch, gradebook, plots

TOTALS = {s: t for s, t in synthetic_export.TOTALS.items() if t is not None}
HAS_FOLDER = sorted(TOTALS)
N = len(HAS_FOLDER)


def _batch(export, *extra, cwd=REPO_ROOT):
    return subprocess.Popen([sys.executable, '-m', 'autograder', 'batch', str(export), '--jobs', '2'] + list(extra),
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _finished(inner):
    return {s: open(os.path.join(inner, s, 'results.json'), 'rb').read() for s in TOTALS
            if os.path.isfile(os.path.join(inner, s, 'results.json'))}


def _rows(path):
    with open(path, newline='', encoding='utf-8') as f:
        return list(csv.DictReader(f))


@pytest.mark.lockdown   # step 6 grades from an AUTOGRADER_ROOT's source/, open to the sandbox users until it is locked
def test_batch_grades_the_export_as_zip_outer_and_inner_folder_resumes_and_writes_one_row_per_student(tmp_path,
                                                                                                      ag_root):
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
    assert '0/%d   0%% | 0:00 elapsed, ETA ?' % N in err   # the progress bar (not a terminal: one line per event)
    assert not csv_path.exists()
    done_before = _finished(inner)
    assert 1 <= len(done_before) < N
    assert ('interrupted; %d of %d submissions have results. Run the same command again to resume.'
            % (len(done_before), N)) in err
    assert not [f for s in HAS_FOLDER for f in os.listdir(inner / s) if f.startswith('.')]   # no half-written files

    # 2. the outer folder: resumes, skips what was graded, grades the rest; exit 1 for the missing folder
    proc = _batch(outer)
    stdout, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    assert '%d to grade, %d already graded' % (N - len(done_before), len(done_before)) in err
    assert ('graded %d, skipped %d already graded, errors 0, missing 1'
            % (N - len(done_before), len(done_before))) in stdout
    assert 'submission_1000006 is listed in submission_metadata.yml but has no folder in the export' in err
    assert '1 submission(s) not graded (0 errors, 1 missing folders)' in err
    for sub, blob in done_before.items():
        assert _finished(inner)[sub] == blob, '%s was graded again' % sub
    results_bytes_1 = _finished(inner)['submission_1000001']
    results = {s: batch.worker_pool.load(str(inner / s / 'results.json')) for s in TOTALS}
    stamp = batch.stamp_for('cpu')
    for sub, res in results.items():
        assert res.total == TOTALS[sub] and res.extra_data['points']['required_max'] == 100, sub
        got = res.extra_data['batch']
        assert {k: got[k] for k in stamp} == stamp
        assert got['submission_sha256'] == batch.gradescope_export.submission_sha256(str(inner / sub))
    assert 'syntax' in results['submission_1000003']['submission'].output.lower()
    assert 'hw1_submission.zip' in results['submission_1000005'].output

    rows = _rows(csv_path)
    assert [r['name'] for r in rows] == ['Alice Example', 'Bob Placeholder', 'Dan Dummy', 'Erin Fictional',
                                         'Frank Madeup', 'Gina Nofolder', 'Hugo Pdfonly', 'Zoë Ångström-Núñez']
    by_name = {r['name']: r for r in rows}
    for r in rows:
        assert r['max'] == '100'
        status, bugs = synthetic_export.STATUS.get(r['submission'], ('graded', ''))
        assert (r['status'], r['bugs']) == (status, bugs), r
        assert (r['note'] != '') == (status != 'graded'), r       # every row that is not graded says why
        if r['name'] == 'Gina Nofolder':
            assert (r['total'], r['2.1 rope'], r['seconds']) == ('', '', '') and 'no folder' in r['note']
            continue
        # every graded row records its grading's seconds; an upload refused before any probe (a syntax error)
        # takes ~0.01 s now that a batch worker keeps the fixtures loaded, so 0.00 is a true figure there
        assert float(r['total']) == TOTALS[r['submission']] and r['seconds'] != '' and float(r['seconds']) >= 0
        assert float(r['seconds']) > 0 or r['status'] != 'graded', r
        assert sum(float(v) for k, v in r.items() if k[:1].isdigit()) == float(r['total'])
    assert by_name['Hugo Pdfonly']['note'] == ('no model.py in the submission: upload your mingpt/model.py '
                                               '(the upload holds hw1_writeup.pdf)')
    assert by_name['Zoë Ångström-Núñez']['note'].startswith('syntax error in model.py line ')
    meta = json.load(open(gradebook.meta_path(str(csv_path))))
    assert meta['inputs'] == {k: stamp[k] for k in gradebook.INPUT_KEYS} and sorted(meta['submissions']) == HAS_FOLDER
    report = (inner / 'grades-report' / 'report.md').read_text(encoding='utf-8')
    assert re.search(r'\| rope-positions-from-0 +\| +1 \| Dan Dummy +\|', report), report
    assert 'Hugo Pdfonly' in report.split('## Not graded')[1] and (inner / 'grades-report' / 'report.html').is_file()
    dan = by_name['Dan Dummy']
    assert (dan['email'], dan['sid'], dan['gradescope_score']) == ('dan.dummy@example.edu', '', '55')
    # RoPE positions from 0: only the RoPE-module tests lose; training (10.1) keeps its full weight
    loss_weight = '%g' % config.load().test('loss-curve').weight
    assert (dan['2.1 rope'], dan['2.2 rope-cache'], dan['4.1 gqa'],
            dan['10.1 loss-curve']) == ('0', '0', '15', loss_weight)
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
        assert 'graded 0, skipped %d already graded, errors 0, missing 1' % N in stdout
        assert csv_path.read_bytes() == first_csv

    # 5. a student's files changed since: that submission alone is graded again (resume is keyed by content),
    # and the change against the CSV it replaces is said, with its cause
    shutil.copyfile(str(inner / 'submission_1000003' / 'model.py'), str(inner / 'submission_1000002' / 'model.py'))
    proc = _batch(inner, '--png')
    stdout, err = proc.communicate(timeout=300)
    assert '1 to grade, %d already graded' % (N - 1) in err and 'graded 1, skipped %d' % (N - 1) in stdout, err
    assert 'syntax' in batch.worker_pool.load(
        str(inner / 'submission_1000002' / 'results.json'))['submission'].output
    assert ("Bob Placeholder (submission_1000002): 0 -> 0 [graded -> not graded] (the submission's files changed)"
            in stdout)
    # ... and the generation it replaces is kept, never overwritten: the diff is between the two (issue 41)
    rerun_kept = [p for p in os.listdir(inner) if re.fullmatch(r'grades\.\d{8}T\d{6}\.csv', p)]
    assert len(rerun_kept) == 1 and (inner / rerun_kept[0]).read_bytes() == first_csv, os.listdir(inner)
    assert 'diff: %s (8 rows) -> %s (8 rows)' % (inner / rerun_kept[0], csv_path) in stdout, stdout
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert 'pip install matplotlib' in err
    else:
        for sub in HAS_FOLDER:   # a curve for every submission whose model ran; none where no model did (PDF, syntax)
            ran = synthetic_export.STATUS.get(sub, ('graded',))[0] == 'graded' and sub != 'submission_1000002'
            assert (inner / sub / 'loss_curve.png').is_file() == ran, sub
            if ran:
                assert (inner / sub / 'loss_curve.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'

    # 6. a tolerance change (2.1's atol, far wider, and the RoPE evidence's with it: Dan's RoPE, positions from 0, is
    # otherwise charged from the GPT cases, where it runs right, since a shift of every position changes no score):
    # the default regrade refuses to replace the CSV ...
    def wider(d):
        next(t for t in d['tests'] if t['id'] == 'rope')['tolerance'].update(atol=10.0)
        d['evidence']['rope'].update(atol=10.0)
    root = ag_root(grading_text(edit=wider))
    before = csv_path.read_bytes()
    proc = _batch(inner, cwd=root.source)
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and 'refused, nothing graded' in err and 'graded with other grader inputs' in err, err
    assert csv_path.read_bytes() == before and _finished(inner)['submission_1000001'] == results_bytes_1
    # ... and --compare keeps it as grades.<date>.csv, regrades, and lists exactly the student whose score moved
    proc = _batch(inner, '--compare', str(csv_path), cwd=root.source)
    stdout, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err                       # still the missing folder
    moved = re.findall(r'^  (.+ \(submission_\d+\)): (.*)$', stdout, re.M)
    assert moved == [('Dan Dummy (submission_1000004)', '100 -> 110; 2.1 rope 0 -> 10')], stdout
    assert 'grading.yaml CHANGED' in stdout and '2.1 rope: atol 1e-05 -> 10.0' in stdout
    assert 'scores: 1 of 8 students changed' in stdout and 'NOT REPRODUCIBLE' not in stdout
    kept = [p for p in os.listdir(inner) if re.fullmatch(r'grades\.\d{8}T\d{6}\.csv', p) and p not in rerun_kept]
    assert len(kept) == 1 and (inner / kept[0]).read_bytes() == before, os.listdir(inner)
    # the students' earlier feedback is kept beside it, and the diff names both results.json
    first_kept = inner / (kept[0][:-len('.csv')] + '.results')
    assert sorted(os.listdir(first_kept)) == HAS_FOLDER
    assert (first_kept / 'submission_1000001' / 'results.json').read_bytes() == results_bytes_1
    assert batch.worker_pool.load(str(first_kept / 'submission_1000004' / 'results.json')).total == 100
    assert batch.worker_pool.load(str(inner / 'submission_1000004' / 'results.json')).total == 110
    assert '    feedback before: %s; now: %s' % (first_kept / 'submission_1000004' / 'results.json',
                                                 inner / 'submission_1000004' / 'results.json') in stdout, stdout

    # 7. --compare again, with the grader as it was: Dan moves back, and the three generations all exist
    time.sleep(1.1)   # the kept copies are named by the second their CSV was written
    proc = _batch(inner, '--compare', str(csv_path))
    stdout, err = proc.communicate(timeout=600)
    assert proc.returncode == 1, err
    moved = re.findall(r'^  (.+ \(submission_\d+\)): (.*)$', stdout, re.M)
    assert moved == [('Dan Dummy (submission_1000004)', '110 -> 100; 2.1 rope 10 -> 0')], stdout
    # after step 5's
    kept = sorted(p for p in os.listdir(inner) if re.fullmatch(r'grades\.\d{8}T\d{6}\.results', p))[1:]
    assert len(kept) == 2 and kept[0] == first_kept.name, os.listdir(inner)
    totals = [batch.worker_pool.load(str(inner / k / 'submission_1000004' / 'results.json')).total for k in kept]
    last = batch.worker_pool.load(str(inner / 'submission_1000004' / 'results.json')).total
    assert totals + [last] == [100, 110, 100]
    assert 'feedback before: %s' % (inner / kept[1] / 'submission_1000004' / 'results.json') in stdout


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
    assert 'ERROR submission_2: the grader crashed (exit 1): IsADirectoryError' in err
    assert '1 submission(s) not graded (1 errors, 0 missing folders)' in err
    rows = {r['submission']: r for r in _rows(out)}
    assert rows['submission_1']['status'] == 'not graded' and rows['submission_1']['total'] == '0'
    assert rows['submission_1']['note'].startswith('syntax error in model.py line 1')
    bad = rows['submission_2']
    assert bad['status'] == 'error' and bad['total'] == '' and bad['2.1 rope'] == ''
    assert 'IsADirectoryError' in bad['note']
    assert bad['name'] == ''                                  # no metadata file: the row still exists


@pytest.mark.alone   # a fresh worker must start and answer within the 3 s of wall-clock time: no busy neighbour
def test_a_timeout_costs_one_error_row_and_a_fresh_worker_grades_the_next(tmp_path):
    export = tmp_path / 'export'
    os.makedirs(export / 'submission_1')
    os.makedirs(export / 'submission_2')
    shutil.copyfile(os.path.join(REPO_ROOT, 'reference', 'mingpt', 'model.py'),
                    str(export / 'submission_1' / 'model.py'))
    (export / 'submission_2' / 'model.py').write_text('def broken(:\n    pass\n')
    out = tmp_path / 'grades.csv'
    # one worker: the reference's grading (seconds of training) outlives 3 s, the syntax error takes a fraction of one
    proc = subprocess.Popen([sys.executable, '-m', 'autograder', 'batch', str(export), '--jobs', '1', '--timeout', '3',
                             '--out', str(out), '--no-report'], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stdout, err = proc.communicate(timeout=180)
    assert proc.returncode == 1, err
    assert 'ERROR submission_1: the grader ran longer than 3 s and was stopped' in err
    rows = {r['submission']: r for r in _rows(out)}
    assert rows['submission_1']['status'] == 'error' and 'longer than 3 s' in rows['submission_1']['note']
    assert rows['submission_2']['status'] == 'not graded' and rows['submission_2']['note'].startswith('syntax error')
    assert not os.path.exists(export / 'submission_1' / 'results.json')


def test_the_csv_is_not_written_into_the_checkout_by_default(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(batch, 'REPO_ROOT', str(tmp_path))   # as if tmp_path were the checkout
    os.makedirs(tmp_path / 'export' / 'submission_1')
    assert batch.main(['batch', str(tmp_path / 'export')]) == 2
    err = capsys.readouterr().err
    assert 'would be written inside this checkout' in err and 'give --out' in err
    assert not (tmp_path / 'export' / 'grades.csv').exists()
    assert not (tmp_path / 'export' / 'submission_1' / 'results.json').exists()
    ignore = subprocess.run(['git', 'check-ignore', 'grades.csv', 'export/grades-fall.csv'], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert ignore.stdout.split() == ['grades.csv', 'export/grades-fall.csv'], 'grades*.csv must be git-ignored'


def test_unreadable_exports_fail_with_one_sentence(tmp_path):
    bad_yaml = tmp_path / 'bad'
    os.makedirs(bad_yaml / 'submission_1')
    (bad_yaml / 'submission_metadata.yml').write_text('submission_1:\n  :submitters:\n  - :name: "unclosed\n')
    notzip = tmp_path / 'export.zip'
    notzip.write_text('not a zip')
    twice = tmp_path / 'twice'
    os.makedirs(twice / 'submission_1')
    (twice / 'submission_metadata.yml').write_text('submission_1:\n  :score: 1\nsubmission_1:\n  :score: 2\n')
    for target, words in ((bad_yaml, 'is not valid YAML'), (notzip, 'neither a folder nor a zip'),
                          (twice, 'lists submission_1 twice (line 3); download the export again'),
                          (tmp_path / 'nothing', 'does not exist'),
                          (tmp_path / 'bad' / 'submission_1', 'no Gradescope export in')):
        proc = subprocess.run([sys.executable, '-m', 'autograder', 'batch', str(target)], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (target, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith('batch: ') and words in lines[0], proc.stderr
        assert 'Traceback' not in proc.stderr


def test_duplicate_students_and_a_gradebook_of_another_assignment_are_one_sentence_each(tmp_path):
    export = tmp_path / 'assignment_11_export'
    for sub in ('submission_1', 'submission_2'):          # quick gradings: code that does not parse
        os.makedirs(export / sub)
        (export / sub / 'model.py').write_text('def broken(:\n    pass\n')
    (export / 'submission_metadata.yml').write_text(
        'submission_1:\n  :submitters:\n  - :name: Ann\n    :email: ann@example.edu\n'
        'submission_2:\n  :submitters:\n  - :name: Ann B.\n    :email: ANN@example.edu\n')
    out = tmp_path / 'grades.csv'
    proc = _batch(export, '--out', str(out), '--no-report')
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert ('batch: ann@example.edu is a submitter of 2 submissions (submission_1, submission_2): each is graded and '
            'has its row; keep the one Gradescope counts') in err
    assert '1 student(s) have several rows (see above)' in err and len(_rows(out)) == 2

    # the gradebook of another assignment: refused before anything is graded, nothing earlier touched
    other = tmp_path / 'other.csv'
    header = open(out, encoding='utf-8').readline()
    other.write_text(header + 'Zed,zed@example.edu,1,submission_99,,graded' + ',0' * (header.count(',') - 5) + '\n')
    before = {p: open(p, 'rb').read() for p in (out, export / 'submission_1' / 'results.json')}
    proc = _batch(export, '--out', str(out), '--compare', str(other), '--force')
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.strip().splitlines() == [
        'batch: refused: %s shares no submission with this export (it lists submission_99, ...): it is the gradebook '
        'of another assignment or export' % other], err
    assert {p: open(p, 'rb').read() for p in before} == before
    # a damaged download of the export, given as the zip: one sentence, nothing unpacked
    damaged = tmp_path / 'assignment_12_export.zip'
    data = bytearray(open(synthetic_export.build_zip(tmp_path / 'good.zip'), 'rb').read())
    for i in range(len(data) // 3, len(data) // 3 + 2000):
        data[i] ^= 0x5A
    damaged.write_bytes(bytes(data))
    proc = _batch(damaged)
    stdout, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and len(err.strip().splitlines()) == 1 and 'is a damaged zip' in err, err
    assert not (tmp_path / 'assignment_12_export').exists()


def test_loss_curve_picture_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, 'matplotlib', None)   # import matplotlib now raises ImportError
    curves, band = plots.reference_curves('cpu'), plots.heldout_band('cpu')
    lc = config.load().profiles['cpu'].loss_curve
    # the reference seeds' curves and the reference trained at the student's seed (the held-out loss's yardstick)
    assert curves.shape == (len(set(lc.reference_seeds) | {lc.student_seed}), lc.iters)
    atol = config.load().test('loss-curve').tolerance.atol
    assert band[1] == pytest.approx(band[0] - atol) and band[2] == pytest.approx(band[0] + atol)
    path = tmp_path / 'curve.png'
    assert plots.draw(str(path), list(curves[0]), curves, band, band[0]) is False
    assert capsys.readouterr().out.strip() == plots.MISSING and 'pip install matplotlib' in plots.MISSING
    assert not path.exists()


def test_loss_curve_picture_with_matplotlib(tmp_path):
    pytest.importorskip('matplotlib')
    curves, band = plots.reference_curves('cpu'), plots.heldout_band('cpu')
    path = tmp_path / 'curve.png'
    student = np.concatenate([curves.mean(axis=0)[:-1], [np.nan]])   # a curve that blows up at the end
    assert plots.draw(str(path), [None if np.isnan(v) else float(v) for v in student], curves, band, None, 'x')
    assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
