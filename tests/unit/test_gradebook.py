"""
The regrade's gradebook without grading anything: the named-bug pattern follows what the
judges print; the class report counts named bugs per submission and computes the corrected
point-biserial; `diff` lists exactly the students whose scores moved and shouts when an
identical grader on identical files gave another score; a CSV of another assignment is refused.
"""

import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from autograder import REPO_ROOT
from autograder.judge import config, fixtures
from autograder.judge.areas import values
from autograder.sandbox import ProbeResult
from autograder.judge import results
from autograder.staff.regrade import gradebook, regrade_diff

GRADING = config.load()
SPECS = GRADING.enabled_tests()
INPUTS = {'profile': 'cpu', 'grading_yaml_sha256': 'y' * 64, 'fixtures_sha256': 'f' * 64, 'grader_sha256': 'g' * 64}


def test_the_named_bug_pattern_reads_what_the_value_judge_prints():
    fx = fixtures.load(GRADING, 'cpu')
    spec = GRADING.test('rope')
    for bug in ('rope-sign', 'rope-base-1000'):
        arrays = dict(fx.probe('rope'), **fx.known_bug_outputs('rope')[bug])   # the bug's own outputs
        verdict = values.judge_values(spec, ProbeResult('ok', arrays=arrays), fx, GRADING)
        out = results.Results({'rope': results.TestResult('rope', spec.name, 0.0, spec.weight, 'failed', spec.number,
                                          '\n'.join(verdict.lines))})
        assert gradebook.named_bugs(out) == [bug], verdict.lines


def test_a_single_number_names_no_bug():
    """A loss agreeing with a wrong variant's within 10x the tolerance is chance (the realistic class showed two)."""
    fx = fixtures.load(GRADING, 'cpu')
    tol = GRADING.test('model').tolerance
    bugs = fx.known_bug_outputs('model')
    bug, arrays = next((bug, a) for bug, a in bugs.items() if 'rope/loss' in a and 'rope/logits' in a)
    assert values.known_bug_matches('rope/loss', arrays['rope/loss'], bugs, tol) == []
    assert bug in values.known_bug_matches('rope/logits', arrays['rope/logits'], bugs, tol)


def test_a_pdf_only_upload_is_not_graded_with_its_reason():
    lines = {'submission': 'no model.py in the submission: upload your mingpt/model.py'}
    tests = {s.id: results.TestResult(s.id, s.name, 0.0, s.weight, 'failed', s.number,
                                      lines.get(s.id)
                                      or 'not graded: no model.py in the submission: upload your mingpt/model.py')
             for s in SPECS}
    status, note = gradebook.classify(results.Results(tests))
    assert status == 'not graded' and note.startswith('no model.py in the submission')


# ----------------------------------------------------------------------------- a fabricated class


def _class(tmp_path, name, scores, bugs=None, inputs=INPUTS, sha=None, tests=None, assignment='assignment_4242_export',
           status=None, untried=None):
    """A grades CSV + meta: scores {submission: {test id: points}} (missing tests: full points); status
    {submission: CSV status} (default graded), untried {submission: [optional test ids not attempted]}."""
    header = gradebook.header(SPECS)
    rows, records = [], {}
    for i, (sub, given) in enumerate(sorted(scores.items())):
        cells = [given.get(s.id, s.weight) for s in SPECS]
        total = sum(cells)
        rows.append(['Student %s' % sub, '%s@example.edu' % sub, str(i), sub, '', (status or {}).get(sub, 'graded')] +
                    ['%g' % c for c in cells] + ['%g' % total, '100', '', (bugs or {}).get(sub, ''), '%.1f' % (10 + i),
                     ''])
        records[sub] = dict(inputs, submission_sha256=(sha or {}).get(sub, 's' + sub),
                            not_attempted=(untried or {}).get(sub, []))
    path = tmp_path / name
    meta = {'assignment': assignment, 'inputs': inputs, 'submissions': records, 'written_at': '2024-10-01T10:00:00',
            'tests': tests or gradebook.tests_snapshot(GRADING)}
    gradebook.write(str(path), header, rows, meta)
    return str(path)


def _planted(n=60):
    """60 submissions: 30 correct, 12 rope-sign (lose 2.1), 10 gqa-tiled (lose 4.1), 8 both."""
    scores, bugs = {}, {}
    for i in range(n):
        sub = 'submission_%d' % (2000 + i)
        kind = ['ok'] * 30 + ['rope-sign'] * 12 + ['gqa-tiled'] * 10 + ['both'] * 8
        k = kind[i]
        scores[sub] = {'kv-cache': 0} if i % 3 == 0 else {}
        if k in ('rope-sign', 'both'):
            scores[sub].update(rope=0, **{'mha-rope': 0})
        if k in ('gqa-tiled', 'both'):
            scores[sub].update(gqa=0)
        bugs[sub] = {'ok': '', 'both': 'rope-sign;gqa-tiled'}.get(k, k)
    return scores, bugs


def test_the_report_counts_planted_bugs_and_computes_the_corrected_point_biserial(tmp_path):
    pytest.importorskip('pandas')
    from autograder.staff.regrade import class_report
    scores, bugs = _planted()
    path = _class(tmp_path, 'grades.csv', scores, bugs)
    book = gradebook.read(path)
    students, subs = class_report.frames(book)
    table = class_report.bug_table(subs)
    # each submission once, under its earliest test's bug; the 8 told of both are listed apart
    assert dict(zip(table['bug'], table['submissions'])) == {'rope-sign': 20, 'gqa-tiled': 10}
    assert table['bug'].tolist() == ['rope-sign', 'gqa-tiled']              # ranked by count
    assert len(class_report.several_bugs_table(subs)) == 8
    assert 'Student submission_2030' in table.set_index('bug').loc['rope-sign', 'students']

    tests = class_report.test_table(book, subs).set_index('test')
    x = np.array([0.0 if scores[s].get('gqa') == 0 else 1.0 for s in sorted(scores)])
    total = np.array([sum(scores[s].get(t.id, t.weight) for t in SPECS) for s in sorted(scores)])
    rest = total - 15 * x
    m1, m0, p = rest[x == 1].mean(), rest[x == 0].mean(), x.mean()
    r_pb = (m1 - m0) / rest.std() * np.sqrt(p * (1 - p))               # the textbook formula
    row = tests.loc['4.1 gqa']
    assert row['pass rate'] == pytest.approx(42 / 60) and row['discrimination r_pb'] == pytest.approx(r_pb)
    assert np.isnan(tests.loc['8.1 model', 'discrimination r_pb'])
    assert tests.loc['8.1 model', 'note'] == 'everyone passes'

    proc = subprocess.run([sys.executable, '-m', 'autograder', 'report', path], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    folder = class_report.default_folder(path)
    assert proc.returncode == 0 and proc.stdout.startswith('report: %s/report.html and ' % folder), proc.stderr
    paths = {k: os.path.join(folder, f) for k, f in (('md', 'report.md'), ('html', 'report.html'),
                                                     ('scores', 'scores.png'), ('tests', 'tests.png'))}
    md = open(paths['md'], encoding='utf-8').read()
    assert '| rope-sign ' in md and 'corrected point-biserial' in md
    for key in ('scores', 'tests'):
        assert open(paths[key], 'rb').read(8) == b'\x89PNG\r\n\x1a\n'
    assert '<table>' in open(paths['html'], encoding='utf-8').read()


def test_the_report_counts_submissions_in_integers_and_sets_untried_optional_tests_apart(tmp_path):
    pytest.importorskip('pandas')
    from autograder.staff.regrade import class_report
    optional = [s.id for s in SPECS if GRADING.is_extra_credit(s)]
    assert len(optional) >= 2
    nobody, some = optional[0], optional[1]
    scores = {'submission_%d' % i: {nobody: 0} for i in range(6)}
    for i in range(4):                            # 4 of the 5 graded leave `some` untouched (0 points), 1 passes it
        scores['submission_%d' % i][some] = 0
    untried = {sub: [nobody] + ([some] if int(sub[-1]) < 4 else []) for sub in scores}
    path = _class(tmp_path, 'grades.csv', scores, status={'submission_5': 'not graded'}, untried=untried)
    md, subs, tests, _ = class_report.render(gradebook.read(path))
    assert '6 students in 6 submissions; of the submissions: 5 graded, 1 not graded.' in md
    assert 'Totals of the 5 graded submissions' in md
    summary = md.split('Totals of the 5 graded submissions')[1].split('## Tests')[0]
    assert re.search(r'^\| +5 \|', summary.split('\n')[4], re.M), summary         # the count reads 5, not 5.00
    column = {s.id: gradebook.test_column(s) for s in SPECS}
    rows = tests.set_index('test')
    assert rows.loc[column[some], 'attempted'] == 1 and rows.loc[column[some], 'pass rate'] == 1.0
    assert rows.loc[column[some], 'note'] == 'everyone who attempted it passes'
    assert rows.loc[column[nobody], 'attempted'] == 0 and rows.loc[column[nobody], 'note'] == 'no one attempted it'
    table = md.split('## Tests')[1].split(class_report.FORMULA)[0]
    assert column[nobody] not in table and column[some] in table and 'no one passes' not in md
    assert 'Optional tests no graded submission attempted: %s.' % column[nobody] in md
    # a class where nothing could be graded still has its report
    path = _class(tmp_path, 'none.csv', {'submission_1': {}}, status={'submission_1': 'not graded'})
    md, _, tests, _ = class_report.render(gradebook.read(path))
    assert 'of the submissions: 1 not graded.' in md and 'Totals of the 0 graded submissions' in md
    assert set(tests['note']) <= {'no graded submission', 'no points'}


def test_diff_lists_exactly_the_students_whose_scores_moved(tmp_path):
    before = {'submission_1': {}, 'submission_2': {'loss-curve': 0}, 'submission_3': {'rope': 0}}
    after = {'submission_1': {}, 'submission_2': {}, 'submission_3': {'rope': 0}}
    tests = gradebook.tests_snapshot(GRADING)
    tests['loss-curve'] = dict(tests['loss-curve'], atol=0.5)
    old = _class(tmp_path, 'old.csv', before)
    new = _class(tmp_path, 'new.csv', after, inputs=dict(INPUTS, grading_yaml_sha256='z' * 64), tests=tests)
    d = regrade_diff.compare(gradebook.read(old), gradebook.read(new))
    assert [c.who for c in d.changes] == ['Student submission_2 (submission_2)']
    assert d.changes[0].moved == ['10.1 loss-curve 0 -> 5'] and not d.unreproducible
    text = '\n'.join(d.lines())
    assert 'grading.yaml CHANGED' in text and 'atol %g -> 0.5' % GRADING.test('loss-curve').tolerance.atol in text
    assert 'fixtures (manifest.json) unchanged' in text

    # the same grader on the same files: a moved score is NOT REPRODUCIBLE, and diff exits 1
    same = _class(tmp_path, 'same.csv', after)
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'diff', old, same], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert 'NOT REPRODUCIBLE: 1 student(s)' in proc.stdout and 'submission_2' in proc.stdout


def test_diff_refuses_a_gradebook_of_another_assignment(tmp_path):
    mine = _class(tmp_path, 'mine.csv', {'submission_1': {}})
    other = _class(tmp_path, 'other.csv', {'submission_9': {}}, assignment='assignment_77_export')
    older = tmp_path / 'older.csv'    # an older CSV without meta, sharing no submission
    with open(other, newline='') as f, open(older, 'w', newline='') as g:
        csv.writer(g).writerows(csv.reader(f))
    for bad, words in ((other, 'is the gradebook of assignment_77_export, not of assignment_4242_export'),
                       (str(older), 'shares no submission with this export')):
        proc = subprocess.run([sys.executable, '-m', 'autograder', 'diff', bad, mine], cwd=REPO_ROOT,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and words in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    (tmp_path / 'notes.csv').write_text('a,b\n1,2\n')
    with pytest.raises(gradebook.GradebookError, match='not a grades CSV'):
        gradebook.read(str(tmp_path / 'notes.csv'))
    assert json.load(open(gradebook.meta_path(mine)))['assignment'] == 'assignment_4242_export'
    assert os.path.isfile(mine)


def test_the_loss_curve_picture_reads_the_number_10_1_grades():
    from autograder.judge.areas import training
    from autograder.staff.regrade import plots
    fx = fixtures.load(GRADING, 'cpu')
    spec, seed = GRADING.test('loss-curve'), 'seed%d' % GRADING.profiles['cpu'].loss_curve.student_seed
    ref = fx.probe('loss-curve')
    for scale in (1.0, 1.3):    # the reference's own logits (inside the band), and logits that land outside
        arrays = {seed: ref[seed], seed + '/heldout_logits': ref[seed + '/heldout_logits'] * np.float32(scale)}
        verdict = training.judge_loss_curve(spec, ProbeResult('ok', arrays=arrays), fx, GRADING)
        loss = training.cross_entropy(arrays[seed + '/heldout_logits'],
                                      training.heldout_targets('cpu', GRADING, fx.shared_seed))
        output = '\n'.join(([verdict.summary] if verdict.summary else []) + verdict.lines)
        as_json = {'tests': [{'number': spec.number, 'output': output, 'extra_data': {'id': 'loss-curve'}}]}
        assert plots.graded_heldout_loss(as_json) == pytest.approx(loss, abs=5e-4)
        expected, lo, hi = plots.heldout_band('cpu', GRADING)
        assert verdict.passed == (lo <= loss <= hi)


def test_the_loss_curve_legend_never_hides_the_submissions_dot():
    pytest.importorskip('matplotlib')
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from autograder.staff.regrade import plots
    curves, band = plots.reference_curves('cpu', GRADING), plots.heldout_band('cpu', GRADING)
    expected, lo, hi = band
    # the dot inside the band, on its edges, and far outside on either side
    for heldout in (expected, lo, hi, expected + 5 * (hi - lo), expected - 5 * (hi - lo)):
        fig = plots.figure(plt, list(curves[0]), curves, band, heldout)
        fig.canvas.draw()
        right = fig.axes[1]
        dot = right.transData.transform((0.5, heldout))
        for ax in fig.axes:
            box = ax.get_legend().get_window_extent()
            assert not box.expanded(1.05, 1.05).contains(*dot), (heldout, box, dot)
        assert right.get_window_extent().contains(*dot)      # and the dot is in its panel
        plt.close(fig)
