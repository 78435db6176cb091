"""
End to end: `python -m autograder experiments --quick` into a temporary folder, twice. The
report must have every question of handout sections 4 and 5 with its table and figure,
numbers that show training happened, the section 4 pseudocode equal to the dense form, and
the second run must train nothing (every run cached). Timings are not checked.
"""

import json
import math
import subprocess
import sys

import pytest

from autograder import REPO_ROOT

QUESTIONS = ['4.1', '4.2', '5.1', '5.2', '5.3', '5.4', '5.5', '5.6', '5.7']
FIGURES = {'4.2': 'fig_4_scaling.png', '5.4': 'fig_5_4.png', '5.5': 'fig_5_5.png', '5.6': 'fig_5_6.png',
           '5.7': 'fig_5_7.png'}
TABLES = ['4.1', '4.2', '5.4', '5.5', '5.6', '5.7']  # questions whose section holds a markdown table
LN_VOCAB = math.log(73)  # initial loss of an untrained model over the corpus's 73 characters


def have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def run_quick(out):
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'experiments', '--quick', '--seeds', '2',
                           '--jobs', '2', '--out', str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=3600)  # generous: minutes on a quiet machine, far more on a loaded one
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.fixture(scope='module')
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp('experiments')
    first = run_quick(out)
    with open(out / 'report.md') as f:
        report_first = f.read()
    second = run_quick(out)
    with open(out / 'report.md') as f:
        report = f.read()
    with open(out / 'summary.json') as f:
        summary = json.load(f)
    return {'out': out, 'first': first, 'second': second, 'report': report, 'report_first': report_first,
            'summary': summary}


def sections(report):
    """{question: text of its '## Question q: ...' section}."""
    out, current = {}, None
    for line in report.splitlines():
        if line.startswith('## '):
            current = line.split()[2].rstrip(':')
            out[current] = []
        elif current:
            out[current].append(line)
    return {q: '\n'.join(lines) for q, lines in out.items()}


def test_every_question_has_its_section_table_rubric_and_figure(quick):
    secs = sections(quick['report'])
    assert list(secs) == QUESTIONS
    for q in TABLES:
        assert '\n|---|' in secs[q], 'no table in %s' % q
    for q in QUESTIONS:
        assert '**Rubric (' in secs[q] or q == '4.1', 'no rubric note in %s' % q  # 4.1 and 4.2 share one note
    if have_matplotlib():
        for q, name in FIGURES.items():
            assert '](%s)' % name in secs[q]
            with open(quick['out'] / name, 'rb') as f:
                assert f.read(8) == b'\x89PNG\r\n\x1a\n'
        assert sorted(quick['summary']['figures']) == sorted(FIGURES.values())
    else:
        assert 'matplotlib is not installed' in quick['report']


def test_losses_are_finite_and_fall_below_the_initial_loss(quick):
    s = quick['summary']
    assert LN_VOCAB - 0.3 < s['initial_loss']['min'] <= s['initial_loss']['max'] < LN_VOCAB + 0.5
    finals = [v for q in ('5.4', '5.7') for config in s[q].values() for v in config['final'].values()]
    finals += [v for config in s['5.6'].values() for v in config.values()]
    assert len(finals) == 2 * 2 + 4 * 2 + 2 * 2  # configurations x seeds
    for v in finals:
        assert math.isfinite(v) and v < s['initial_loss']['min'] - 0.1
    # 5.4's numbers are 5.7's first two configurations: the same runs
    assert s['5.4']['RoPE'] == s['5.7']['RoPE']
    assert sorted(s['5.5']) == ['1', '2', '3', '6'] and all(len(v) == 2 for v in s['5.5'].values())


def test_pseudocode_matches_the_dense_form_and_memory_scales_as_answered(quick):
    s4 = quick['summary']['section4']
    assert s4['max_loop_vs_dense'] < 1e-5 and s4['max_banded_vs_dense'] < 1e-5
    slopes = s4['slopes']
    # peak bytes are exact counts, so these are behaviour, not timing: O(N^2) dense, O(N w) banded
    assert slopes['vs_N/dense/bytes'] > 1.7
    assert slopes['vs_N/banded/bytes'] < 1.3
    assert abs(slopes['vs_w/dense/bytes']) < 0.2
    assert slopes['vs_w/banded/bytes'] > 0.5
    secs = sections(quick['report'])
    assert "`-inf`" in secs['4.2'] and "`j - w' + 1 + i`" in secs['4.2']
    assert 'O(N²)' in secs['4.1'] and 'O(N w)' in secs['4.2'] and 'O(N + w)' in secs['4.2']


def test_samples_continue_the_prompt(quick):
    secs = sections(quick['report'])
    for q in ('5.1', '5.2'):
        sample = secs[q].split('```text\n', 1)[1].split('\n```', 1)[0]
        assert sample.startswith('Now is the winter of our discontent')
        assert len(sample) == len('Now is the winter of our discontent') + 500


def test_second_run_trains_nothing_and_writes_the_same_report(quick):
    assert 'training runs: 20 planned, 0 cached, 20 to run' in quick['first']
    assert 'training runs: 20 planned, 20 cached, 0 to run' in quick['second']
    assert quick['second'].count(': cached') == 3  # two samples and section 4
    assert quick['summary']['runs'] == {'planned': 20, 'trained_now': 0}
    assert quick['report'] == quick['report_first']
