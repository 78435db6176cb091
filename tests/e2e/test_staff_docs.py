"""
docs/STAFF.md cannot drift from the code: every `python -m autograder COMMAND --flag` it
quotes exists; the fixtures hash, the number of arrays and known bugs, the zip's file count,
the CSV header, the test table and the batch summary lines it shows are what the code gives
now; the grading times it quotes are those docs/BENCHMARKS.md measured.
"""

import csv
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from autograder import FIXTURES_DIR, REPO_ROOT
from autograder.judge import config, known_bugs, fixtures
from autograder.__main__ import COMMANDS
from autograder.staff.deploy import build_zip

STAFF = os.path.join(REPO_ROOT, 'docs', 'STAFF.md')
with open(STAFF, encoding='utf-8') as _f:
    TEXT = _f.read()
GRADING = config.load()


def _help(command):
    proc = subprocess.run([sys.executable, '-m', 'autograder', command, '--help'], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


DOCS = ['README.md'] + sorted(os.path.join('docs', f) for f in os.listdir(os.path.join(REPO_ROOT, 'docs'))
                               if f.endswith('.md'))


def test_every_quoted_command_and_flag_exists():
    helps, count = {}, 0
    for doc in DOCS:
        with open(os.path.join(REPO_ROOT, doc), encoding='utf-8') as f:
            text = f.read()
        quoted = re.findall(r'python -m autograder ([a-z-]+)((?: +(?:--?[a-z-]+|[A-Z_]+|\[[^\]]*\]|[\w./<>{}-]+))*)',
                            text)
        count += len(quoted)
        for command, rest in quoted:
            assert command in COMMANDS, '%s quotes an unknown command: %s' % (doc, command)
            if command == 'sandbox':   # its subcommands are words, not flags: cli.py's docstring lists them
                continue
            helps.setdefault(command, _help(command))
            for flag in re.findall(r'(?<![\w-])(--[a-z][a-z-]*)', rest):
                assert flag in helps[command], \
                    '%s quotes `%s %s`, which the command does not have' % (doc, command, flag)
    assert count >= 20


def test_the_words_students_read_are_the_graders():
    # STAFF.md quotes what an untouched test and an untouched optional part read
    from autograder.judge import results
    from autograder.judge.areas import STATUS_WORDS
    assert '"not implemented yet"' in TEXT and STATUS_WORDS['not_implemented'] == 'not implemented yet'
    assert 'reads "Not attempted"' in TEXT and results.NOT_ATTEMPTED.startswith('Not attempted:')


def test_fixtures_hash_arrays_and_known_bugs_are_current():
    current = fixtures.sha256_file(os.path.join(fixtures.folder('cpu'), 'manifest.json'))[:12]
    quoted = re.findall(r'fixtures ([0-9a-f]{12})', TEXT)
    assert quoted and set(quoted) == {current}, 'STAFF.md quotes fixtures %s; they are %s now' % (quoted, current)
    arrays = len(np.load(os.path.join(FIXTURES_DIR, 'cpu', 'expected.npz')).files)
    assert re.search(r'\n +%d arrays in [\d.]+ s\n' % arrays, TEXT)
    n = len(known_bugs.KNOWN_BUGS)
    last = known_bugs.KNOWN_BUGS[-1].id
    assert '[3/4] %d known bugs' % n in TEXT and '%d/%d %s' % (n, n, last) in TEXT


def test_zip_file_count_is_current(tmp_path, monkeypatch):
    """A course's zip (STAFF.md builds one): a course root holding what the committed one holds, and its draw.key."""
    course = tmp_path / 'course'
    shutil.copytree(FIXTURES_DIR, str(course))
    (course / fixtures.KEY_FILE).write_text(fixtures.PUBLIC_TEST_KEY.hex() + '\n')
    monkeypatch.setattr(fixtures, 'COURSE_DIR', str(course))
    m = re.search(r'wrote \S+autograder\.zip: (\d+) files', TEXT)
    assert m and int(m.group(1)) == len(build_zip.collect())


def test_csv_header_and_test_table_follow_grading_yaml():
    specs = GRADING.enabled_tests()
    from autograder.staff.regrade import gradebook
    header = ','.join(gradebook.header(specs))
    assert '\n%s\n' % header in TEXT
    rows = re.findall(r'\n(\d+\.\d+) +(.{10,58}?) +(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) +(passed|failed)', TEXT)
    by_number = {s.number: s for s in specs}
    assert len(rows) >= 3
    for number, name, score, weight, status in rows:
        spec = by_number[number]
        worth = 0 if GRADING.is_extra_credit(spec) else spec.weight   # extra credit: max_score 0, points on top
        assert spec.name.startswith(name.strip()) and float(weight) == worth, (number, name)
    # optional parts count on top of the required total (grading.yaml handout.extra_credit)
    required = sum(s.weight for s in specs if not GRADING.is_extra_credit(s))
    extra = sum(s.weight for s in specs if GRADING.is_extra_credit(s))
    assert re.search(r'total: %g / %g \(\+ %g of %g extra credit\)' % (required, required, extra, extra), TEXT)


def test_batch_lines_have_the_current_format():
    lines = [l.strip() for l in TEXT.splitlines() if l.strip().startswith('batch: ')]
    assert lines
    patterns = [r'batch: \d+ submissions in \S+; \d+ to grade, \d+ already graded by this grader '
                r'\(fixtures [0-9a-f]{12}\), \d+ worker\(s\)',
                r'batch: \d+ submissions \(graded \d+, skipped \d+ already graded, errors \d+, missing \d+\) '
                r'in [\d.]+ s; \d+ rows written to \S+',
                r'batch: \S+ is listed in submission_metadata.yml but has no folder in the export: '
                r'reported as missing',
                r'batch: \d+ submission\(s\) not graded \(\d+ errors, \d+ missing folders\): '
                r'see the note column of \S+',
                r'batch: class report written to \S+/grades-report/report\.html',
                r'batch: the previous \S+ is kept as \S+\.\d{8}T\d{6}\.csv \(each submission\'s results\.json of it in '
                r'\S+\.\d{8}T\d{6}\.results\)',
                r'batch: refused, nothing graded: \S+ holds an earlier regrade \(graded with other grader inputs\) and '
                r'would be replaced: give --compare \S+ to keep it as \S+ and list every score that changes, --out to '
                r'write elsewhere, or --overwrite',
                r'batch: ERROR submission_\.\.\.: \.\.\.',
                r'batch: shard \d+/\d+: \d+ of the export\'s \d+ submission folders',
                r'batch: shard \d+/\d+ written; once every shard is, `python -m autograder report \S+` writes the '
                r'class report of the whole regrade']
    for line in lines:
        assert any(re.fullmatch(p, line) for p in patterns), \
            'STAFF.md shows a batch line the code no longer prints: ' + line


def test_quoted_grading_times_are_those_benchmarks_md_measured():
    with open(os.path.join(REPO_ROOT, 'docs', 'BENCHMARKS.md'), encoding='utf-8') as f:
        bench = f.read()
    median = re.search(r'Median wall time \*\*([\d.]+) s\*\*', bench).group(1)   # as bench/bench_grading.py writes it
    loaded = re.search(r'took ([\d.]+-[\d.]+) s wall', bench).group(1)
    quoted = re.search(r'a grading takes a median of ([\d.]+) s \(docs/BENCHMARKS.md[^)]*\), and ([\d.]+-[\d.]+) s',
                       TEXT)
    assert quoted, 'STAFF.md must quote the grading time that docs/BENCHMARKS.md measured'
    assert quoted.groups() == (median, loaded), \
        'STAFF.md quotes %s; BENCHMARKS.md measured %s' % (quoted.groups(), (median, loaded))
    assert re.search(r'total: [\d.]+ / [\d.]+ (\(\+ [\d.]+ of [\d.]+ extra credit\) +)?\([\d.]+ s\)', TEXT)


def test_the_documented_metadata_example_is_what_batch_reads(tmp_path):
    section = TEXT.split('### What `batch` reads: the export layout and submission_metadata.yml')[1].split('\n### ')[0]
    example = re.search(r'```yaml\n# submission_metadata.yml\n(.*?)```', section, re.S).group(1)
    fields = re.findall(r'^\| `(:[a-z_]+:)` \|', section, re.M)
    assert fields == [':submitters:', ':created_at:', ':score:'] and all(f in example for f in fields)
    export = tmp_path / 'assignment_77_export'
    for sub in ('submission_1', 'submission_2'):      # quick gradings: code that does not parse
        os.makedirs(export / sub / 'mingpt')
        (export / sub / 'mingpt' / 'model.py').write_text('def broken(:\n    pass\n')
    (export / 'submission_metadata.yml').write_text(example, encoding='utf-8')
    out = tmp_path / 'grades.csv'
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'batch', str(export), '--out', str(out), '--no-report'],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    with open(out, newline='', encoding='utf-8') as f:
        rows = {r['submission']: r for r in csv.DictReader(f)}
    ada, ben = rows['submission_1'], rows['submission_2']
    assert (ada['name'], ada['email'], ada['sid'],
            ada['gradescope_score']) == ('Ada Example', 'ada@example.edu', '1001', '0')
    assert ada['created_at'].startswith('2024-09-30 20:01:12') and ada['status'] == 'not graded'
    assert (ben['name'], ben['email'], ben['sid'], ben['created_at'], ben['gradescope_score']) == \
        ('Ben Example', 'ben@example.edu', '', '', '')


@pytest.mark.parametrize('name', ['grades.csv', 'grades.shard-2-of-3.csv', 'grades.csv.behaviour.json',
                                  'grades.shard-2-of-3.csv.behaviour.json'])
def test_the_regrade_csv_is_git_ignored(name):
    assert subprocess.run(['git', 'check-ignore', '-q', name], cwd=REPO_ROOT).returncode == 0


def test_discrimination_report_lists_every_graded_test_of_the_registry():
    """docs/DISCRIMINATION.md is `evaluate --out`'s output: its test list and columns are grading.yaml's tests."""
    with open(os.path.join(REPO_ROOT, 'docs', 'DISCRIMINATION.md'), encoding='utf-8') as f:
        doc = f.read()
    listed = re.search(r'Tests: (.+)\n', doc).group(1)
    pairs = re.findall(r'(\d+(?:\.\d+)+) = ([a-z-]+)', listed)
    assert pairs == [(s.number, s.id) for s in GRADING.enabled_tests()], \
        'DISCRIMINATION.md lists %s; regenerate it: python -m autograder evaluate tests/submissions --jobs 2 ' \
        '--out docs/DISCRIMINATION.md' % pairs
    header = next(l for l in doc.splitlines() if l.startswith('| submission | verdict |'))
    assert header.split(' | ')[2:-3] == [s.id for s in GRADING.enabled_tests()]
    from autograder.staff.evaluation import evaluate
    corpus = evaluate.load_corpus(os.path.join(REPO_ROOT, 'tests', 'submissions'))
    n_correct = sum(s['verdict'] == 'correct' for s in corpus)
    assert 'false failures on correct variants: 0 / %d' % n_correct in doc
    assert ('bugs caught exactly (lost == must_fail): %d / %d'
            % (len(corpus) - n_correct, len(corpus) - n_correct)) in doc


def test_reference_answers_name_the_current_reference():
    from autograder.staff.experiments import runs
    with open(os.path.join(REPO_ROOT, 'docs', 'reference_answers', 'report.md'), encoding='utf-8') as f:
        named = re.search(r'reference solution \(reference/, sha256 ([0-9a-f]{12})', f.read()).group(1)
    current = runs.reference_code_hash()[:12]
    assert named == current, (
        'docs/reference_answers/report.md was made from reference %s, the reference is %s now: run python -m '
        'autograder experiments --sizes cpu --seeds 1 --jobs 2 --out docs/reference_answers --runs '
        'out/experiments-cpu/runs' % (named, current))


def test_the_count_of_the_reference_tests_regenerate_runs_is_current():
    # regenerate's step 1 runs tests/reference (run_reference_tests): STAFF.md says how many
    quoted = re.search(r"runs the reference's own tests, `tests/reference`, (\d+) of them", TEXT)
    assert quoted, 'STAFF.md must say how many of the reference\'s own tests regenerate runs first'
    command = [sys.executable, '-m', 'pytest', '--collect-only', '-q', '-p', 'no:cacheprovider',
               os.path.join('tests', 'reference')]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    collected = re.search(r'^(\d+) tests? collected', proc.stdout, re.MULTILINE)
    assert collected, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert quoted.group(1) == collected.group(1), 'STAFF.md says %s; tests/reference holds %s' % (
        quoted.group(1), collected.group(1))
