"""
A failed test's output in Gradescope's Markdown format (results.json `output_format: md`): the
lines the student reads, unchanged, in a code block (so nothing in them is ever read as Markdown,
whatever the student's own error messages hold), then one small table of expected against got,
one row per failing output, where a row reads better than the line it comes from.

The rows are the judges' own data (Verdict.rows: areas.compare's cells, areas/generate.py's
tokens), handed over beside the lines, never read back from the lines: those hold the student's
own texts (error messages, traceback lines), which therefore can never form a row, a heading or
a table. A test without rows stays plain text. `plain(md)` gives the lines back, so that staff
tools read every results.json alike.
"""

import re

from autograder.judge import messages

FORMAT = 'md'
HEADER = messages.TABLE_HEADER
TABLE_TITLE = messages.TABLE_TITLE
MAX_ROWS = 12


def _fence(text):
    """A code fence longer than any run of backticks in `text`, so that the text cannot close it."""
    longest = max((len(run) for run in re.findall(r'`+', text)), default=0)
    return '`' * max(3, longest + 1)


def _cell(text):
    """One table cell as literal text: a code span (nothing inside is Markdown) with its pipes escaped."""
    text = str(text).replace('\n', ' ').replace('|', '\\|')
    ticks = '`' * (max((len(r) for r in re.findall(r'`+', text)), default=0) + 1)
    return '%s %s %s' % (ticks, text, ticks)


def render(text, rows):
    """`text` as Markdown with the table of `rows` (at most MAX_ROWS of them), or None when there are none."""
    table = [tuple(r) for r in rows or ()][:MAX_ROWS]
    if not table:
        return None
    fence = _fence(text)
    out = [fence, text, fence, '', TABLE_TITLE, '', '| ' + ' | '.join(HEADER) + ' |',
           '|' + '---|' * len(HEADER)]
    out += ['| ' + ' | '.join(_cell(c) for c in row) + ' |' for row in table]
    return '\n'.join(out) + '\n'


def plain(md):
    """The lines `render` was given, from its Markdown (anything else comes back as it is)."""
    first, sep, rest = md.partition('\n')
    if not sep or not re.fullmatch(r'`{3,}', first):
        return md
    end = rest.rfind('\n' + first + '\n')
    return rest[:end] if end >= 0 else md
