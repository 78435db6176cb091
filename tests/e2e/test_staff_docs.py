"""
docs/STAFF.md cannot drift from the code: every `python -m autograder COMMAND --flag` it
quotes exists; the fixtures hash, the number of arrays and fingerprints, the zip's file count,
the CSV header, the test table and the batch summary lines it shows are what the code gives
now; the grading times it quotes are those docs/BENCHMARKS.md measured.
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from autograder import FIXTURES_DIR, REPO_ROOT, config, fingerprints, fixtures
from autograder.__main__ import COMMANDS
from autograder.staff import build_zip

STAFF = os.path.join(REPO_ROOT, 'docs', 'STAFF.md')
with open(STAFF, encoding='utf-8') as _f:
    TEXT = _f.read()
GRADING = config.load()


def _help(command):
    proc = subprocess.run([sys.executable, '-m', 'autograder', command, '--help'], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_every_quoted_command_and_flag_exists():
    quoted = re.findall(r'python -m autograder ([a-z-]+)((?: +(?:--?[a-z-]+|[A-Z_]+|\[[^\]]*\]|[\w./<>{}-]+))*)', TEXT)
    assert len(quoted) >= 8
    helps = {}
    for command, rest in quoted:
        assert command in COMMANDS, 'STAFF.md quotes an unknown command: %s' % command
        helps.setdefault(command, _help(command))
        for flag in re.findall(r'(?<![\w-])(--[a-z][a-z-]*)', rest):
            assert flag in helps[command], 'STAFF.md quotes `%s %s`, which the command does not have' % (command, flag)


def test_fixtures_hash_arrays_and_fingerprints_are_current():
    current = fixtures.sha256_file(os.path.join(fixtures.folder('cpu'), 'manifest.json'))[:12]
    quoted = re.findall(r'fixtures ([0-9a-f]{12})', TEXT)
    assert quoted and set(quoted) == {current}, 'STAFF.md quotes fixtures %s; they are %s now' % (quoted, current)
    arrays = len(np.load(os.path.join(FIXTURES_DIR, 'cpu', 'expected.npz')).files)
    assert re.search(r'\n +%d arrays in [\d.]+ s\n' % arrays, TEXT)
    n = len(fingerprints.FINGERPRINTS)
    assert '[3/4] %d fingerprints (known bugs)' % n in TEXT and '%d/%d gqa-softmax-dim' % (n, n) in TEXT


def test_zip_file_count_is_current():
    m = re.search(r'wrote \S+autograder\.zip: (\d+) files', TEXT)
    assert m and int(m.group(1)) == len(build_zip.collect())


def test_csv_header_and_test_table_follow_grading_yaml():
    specs = GRADING.enabled_tests()
    header = ','.join(['name', 'email', 'sid', 'submission', 'created_at', 'status'] +
                      ['%s %s' % (s.number, s.id) for s in specs] + ['total', 'max', 'gradescope_score', 'note'])
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
    patterns = [r'batch: \d+ submissions in \S+; \d+ to grade, \d+ already graded by this grader \(fixtures [0-9a-f]{12}\), '
                r'\d+ worker\(s\)',
                r'batch: \d+ submissions \(graded \d+, skipped \d+ already graded, errors \d+, missing \d+\) in [\d.]+ s; '
                r'\d+ rows written to \S+',
                r'batch: \S+ is listed in submission_metadata.yml but has no folder in the export: reported as missing',
                r'batch: \d+ submission\(s\) not graded \(\d+ errors, \d+ missing folders\): see the note column of \S+']
    for line in lines:
        assert any(re.fullmatch(p, line) for p in patterns), 'STAFF.md shows a batch line the code no longer prints: ' + line


def test_quoted_grading_times_are_those_benchmarks_md_measured():
    with open(os.path.join(REPO_ROOT, 'docs', 'BENCHMARKS.md'), encoding='utf-8') as f:
        bench = f.read()
    median = re.search(r'Median wall time \*\*([\d.]+) s\*\*', bench).group(1)   # as bench/bench_grading.py writes it
    loaded = re.search(r'took ([\d.]+-[\d.]+) s wall', bench).group(1)
    quoted = re.search(r'a grading takes a median of ([\d.]+) s \(docs/BENCHMARKS.md[^)]*\), and ([\d.]+-[\d.]+) s', TEXT)
    assert quoted, 'STAFF.md must quote the grading time that docs/BENCHMARKS.md measured'
    assert quoted.groups() == (median, loaded), 'STAFF.md quotes %s; BENCHMARKS.md measured %s' % (quoted.groups(), (median, loaded))
    assert re.search(r'total: [\d.]+ / [\d.]+ (\(\+ [\d.]+ of [\d.]+ extra credit\) +)?\([\d.]+ s\)', TEXT)


@pytest.mark.parametrize('name', ['grades.csv'])
def test_the_regrade_csv_is_git_ignored(name):
    assert subprocess.run(['git', 'check-ignore', '-q', name], cwd=REPO_ROOT).returncode == 0
