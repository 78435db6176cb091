"""
A failed test's output as Gradescope Markdown (autograder/judge/markdown.py): the rows of the table
of expected against got are the judges' own data (Verdict.rows: areas.compare's cells, generate's
tokens), never read back from the lines; the lines stay literal whatever they hold, and the staff
tools read the plain lines (and the rows) back.
"""

import numpy as np

from autograder.judge import config, fixtures, markdown, results
from autograder.judge.areas import compare, row
from autograder.judge.areas.generate import judge_generate
from autograder.judge.student_text import Budget
from autograder.judge.verdicts import verdict_for
from autograder.sandbox import ProbeResult

GRADING = config.load()
FORGED = ('raise ValueError("x\nFAIL rope: max abs error 9 (allowed 1e-05 + 1e-05*|expected|); worst at [0]: '
          'expected 1, got 2\n## heading\n| a | b |")')


def _values_line(case='gqa/logits'):
    ok, desc = compare(np.array([[0.0, 1.0], [2.0, 3.5]], np.float32), np.array([[0.0, 1.0], [2.0, 3.0]], np.float32),
                       1e-5, 1e-5)
    assert not ok
    return 'FAIL %s: %s' % (case, desc), row(case, desc)


def test_a_row_per_comparison_with_the_judges_own_numbers():
    line, values = _values_line()
    assert values == ('gqa/logits', '[1, 1]', '3', '3.5', '0.5 (1e-05 + 1e-05*|expected|)')
    assert line.endswith('worst at [1, 1]: expected 3, got 3.5')   # the line says what the row says
    text = '\n'.join(['1 of 3 cases match the reference.', line, 'ok   rope'])
    md = markdown.render(text, [values])
    assert md.startswith('```\n' + text + '\n```\n')
    assert '| ` gqa/logits ` | ` [1, 1] ` | ` 3 ` | ` 3.5 ` | ` 0.5 (1e-05 + 1e-05*\\|expected\\|) ` |' in md
    assert markdown.plain(md) == text
    assert row('rope', compare(np.zeros(3), np.zeros(3), 1e-5, 1e-5)[1]) is None   # a match makes no row
    assert row('rope', compare(np.zeros(2), np.zeros(3), 1e-5, 1e-5)[1]) is None   # nor a shape without values


def test_generate_gives_its_token_row_as_data():
    fx = fixtures.load(GRADING, 'cpu').view(0)
    arrays = {k: v.copy() for k, v in fx.probe('generate').items()}
    arrays['greedy'][0, -1] = (arrays['greedy'][0, -1] + 1) % 65
    verdict = judge_generate(GRADING.test('generate'), ProbeResult('ok', arrays=arrays), fx, GRADING, {})
    t = arrays['greedy'].shape[1] - 1
    assert verdict.rows == [('greedy decoding', 'batch 0, token %d' % t,
                             str(int(fx.probe('generate')['greedy'][0, -1])), str(int(arrays['greedy'][0, -1])),
                             'token ids')]


def test_a_students_text_never_makes_a_row_a_heading_or_a_table():
    # an error message with a newline and a line in the judges' comparison format, as the probe reported it
    fx = fixtures.load(GRADING, 'cpu').view(0)
    arrays = {k: v for k, v in fx.probe('rope').items()}
    case = sorted(arrays)[0]
    wrong = dict(arrays, **{sorted(arrays)[1]: arrays[sorted(arrays)[1]] + 1.0})
    del wrong[case]
    raw = ProbeResult('ok', arrays=wrong, info={'case_errors': {case: {'status': 'error', 'message': FORGED,
                                                                       'where': ['model.py line 9\n| x | y |']}}})
    taken = Budget(240, 2000).result(raw)
    verdict = verdict_for(GRADING.test('rope'), taken, fx, GRADING)
    assert [r[0] for r in verdict.rows] == [sorted(arrays)[1]]   # the one real comparison; not the forged line
    data = results.Results({'rope': results.TestResult('rope', 'RoPE', 0.0, 10.0, 'failed', '2.1',
                                                       '\n'.join(verdict.lines), rows=verdict.rows)}).to_json()
    out = data['tests'][0]
    assert out['output_format'] == 'md' and 'FAIL rope' not in out['output'].split(markdown.TABLE_TITLE)[1]
    lines = markdown.plain(out['output']).splitlines()
    assert not [l for l in lines if l.lstrip().startswith(('FAIL rope', '## heading', '| a |', '| x |'))], lines
    assert any('\\nFAIL rope: max abs error 9' in l and l.startswith('FAIL %s: your code raised an error' % case)
               for l in lines), lines
    # even unflattened (a judge given the raw text), lines never make rows: the table is Verdict.rows alone
    raw_verdict = verdict_for(GRADING.test('rope'), raw, fx, GRADING)
    assert raw_verdict.rows == verdict.rows


def test_the_code_block_holds_whatever_the_lines_hold():
    line, values = _values_line()
    text = line + '\nFAIL rope: your code raised an error: ```` **bold** [link](http://x) | ![i](http://y) <b>`'
    md = markdown.render(text, [values])
    fence = md.splitlines()[0]
    assert fence == '`````' and md.count('\n' + fence + '\n') == 1   # longer than any run of backticks in the text
    assert markdown.plain(md) == text


def test_without_rows_the_output_stays_plain_text():
    assert markdown.render('not run: GroupedQueryAttention.forward did not return in test 4.1', []) is None
    assert markdown.render(_values_line()[0], []) is None   # a comparison line alone is not a row
    assert markdown.plain('plain text\nok') == 'plain text\nok'


def test_results_json_carries_md_and_staff_tools_read_the_lines_and_rows_back():
    line, values = _values_line()
    failed = results.TestResult('gqa', 'GQA', 0.0, 15.0, 'failed', '4.1', '0 of 1 cases match the reference.\n' + line,
                                rows=[values])
    passed = results.TestResult('rope', 'RoPE', 10.0, 10.0, 'passed', '2.1', '4 of 4 cases match the reference.')
    data = results.Results({'gqa': failed, 'rope': passed}).to_json()
    by_number = {t['number']: t for t in data['tests']}
    assert by_number['4.1']['output_format'] == 'md'
    assert '| case | where | expected | got |' in by_number['4.1']['output']
    assert by_number['4.1']['extra_data']['rows'] == [list(values)]
    assert 'output_format' not in by_number['2.1'] and 'rows' not in by_number['2.1']['extra_data']
    back = results.Results.from_json(data)
    assert back['gqa'].output == failed.output and back['rope'].output == passed.output
    assert back['gqa'].rows == [values] and back.to_json() == data   # written again (finish_partial): the same table
    data['tests'][0]['extra_data']['rows'] = [['a', 'b']]   # not five texts: no table, never an error
    assert results.Results.from_json(data)['gqa'].rows == []
