"""
A failed test's output as Gradescope Markdown (autograder/judge/markdown.py): the rows of the table
of expected against got come from the judges' own sentences (judges.compare, generate's token line),
the lines stay literal whatever they hold, and the staff tools read the plain lines back.
"""

import numpy as np

from autograder.judge import markdown
from autograder.judge.judges import compare
from autograder.judge.judges.generate import first_difference
from autograder.judge import results


def _values_line(case='gqa/logits'):
    ok, desc = compare(np.array([[0.0, 1.0], [2.0, 3.5]], np.float32), np.array([[0.0, 1.0], [2.0, 3.0]], np.float32),
                       1e-5, 1e-5)
    assert not ok
    return 'FAIL %s: %s' % (case, desc)


def test_a_row_per_comparison_with_the_judges_own_numbers():
    tokens = first_difference(np.array([[5, 7, 9, 40]]), np.array([[5, 7, 9, 12]]))[2]
    text = '\n'.join(['1 of 3 cases match the reference.', _values_line(), 'ok   rope',
                      "FAIL greedy decoding: tokens differ from the reference's %s" % tokens])
    assert markdown.rows(text) == [
        ('gqa/logits', '[1, 1]', '3', '3.5', '0.5 (1e-05 + 1e-05*|expected|)'),
        ('greedy decoding', 'batch 0, token 3', '12', '40', 'token ids')]
    md = markdown.render(text)
    assert md.startswith('```\n' + text + '\n```\n')
    assert '| ` gqa/logits ` | ` [1, 1] ` | ` 3 ` | ` 3.5 ` | ` 0.5 (1e-05 + 1e-05*\\|expected\\|) ` |' in md
    assert markdown.plain(md) == text


def test_a_students_text_neither_makes_a_row_nor_leaves_the_code_block():
    # the judges put a student's error message after "FAIL case: status:", where no row can start
    forged = 'FAIL mha: your code raised an error: x: max abs error 1 (allowed 1); worst at [0]: expected 1, got 2'
    assert markdown.rows(forged) == [] and markdown.render(forged) is None
    text = _values_line() + '\nFAIL rope: your code raised an error: ```` **bold** [link](http://x) | `'
    md = markdown.render(text)
    fence = md.splitlines()[0]
    assert fence == '`````' and md.count('\n' + fence + '\n') == 1   # longer than any run of backticks in the text
    assert markdown.plain(md) == text


def test_without_a_comparison_the_output_stays_plain_text():
    assert markdown.render('not run: GroupedQueryAttention.forward did not return in test 4.1') is None
    assert markdown.plain('plain text\nok') == 'plain text\nok'


def test_results_json_carries_md_and_staff_tools_read_the_plain_lines_back():
    failed = results.TestResult('gqa', 'GQA', 0.0, 15.0, 'failed', '4.1', '0 of 1 cases match the reference.\n' + _values_line())
    passed = results.TestResult('rope', 'RoPE', 10.0, 10.0, 'passed', '2.1', '4 of 4 cases match the reference.')
    data = results.Results({'gqa': failed, 'rope': passed}).to_json()
    by_number = {t['number']: t for t in data['tests']}
    assert by_number['4.1']['output_format'] == 'md' and '| case | where | expected | got |' in by_number['4.1']['output']
    assert 'output_format' not in by_number['2.1']
    back = results.Results.from_json(data)
    assert back['gqa'].output == failed.output and back['rope'].output == passed.output
