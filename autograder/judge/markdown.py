"""
A failed test's output in Gradescope's Markdown format (results.json `output_format: md`): the
lines the student reads, unchanged, in a code block (so nothing in them is ever read as Markdown,
whatever the student's own error messages hold), then one small table of expected against got,
one row per failing output, where a row reads better than the line it comes from.

The rows are read from the judges' own words (judges.compare's "max abs error ... worst at [i]:
expected E, got G" and judges/generate.py's "first at batch b, position t (expected x, got y)"),
not from the student's own texts, which the judges put after "FAIL <case>: <status word>:", where
no row can start. (An error message of the student's that holds a newline followed by such a line
would make a row of it: the student would read, as a row, what they wrote themselves.) A test
without such a line stays plain text. `plain(md)` gives the lines back, so that staff tools read
every results.json alike.
"""

import re

FORMAT = 'md'
_CASE = r'(?:FAIL )?\s*(?P<case>[\w./\-=\[\], ]+?)'
# judges.compare: 'KEY: max abs error E (allowed A + R*|expected|); worst at [i, j]: expected X, got Y'
# (a gradient's line: 'NAME has a wrong gradient: ...'; 10.3's: 'FAIL LABEL: logits at T=N after load_pretrained: ...')
_VALUES = re.compile(_CASE + r'(?: has a wrong gradient|: logits at T=\d+ after load_pretrained)?: max abs error (?P<err>\S+) \(allowed (?P<allowed>[^)]*)\); worst at '
                     r'(?P<at>\[[\d, ]*\]): expected (?P<expected>\S+), got (?P<got>\S+?)$')
# judges/generate.py: 'FAIL WHAT: tokens differ from the reference's first at batch b, position t (expected x, got y)'
_TOKENS = re.compile(_CASE + r": tokens differ from the reference's first at batch (?P<b>\d+), position (?P<t>\d+) "
                     r'\(expected (?P<expected>-?\d+), got (?P<got>-?\d+)\)')
HEADER = ('case', 'where', 'expected', 'got', 'error (allowed)')
TABLE_TITLE = 'Expected against got (for each output that differs, its worst element):'
MAX_ROWS = 12


def rows(text):
    """[(case, where, expected, got, error)] of the comparison lines in `text`, at most MAX_ROWS."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        m = _VALUES.match(line)
        if m:
            out.append((m['case'], m['at'], m['expected'], m['got'], '%s (%s)' % (m['err'], m['allowed'])))
        else:
            m = _TOKENS.match(line)
            if m:
                out.append((m['case'], 'batch %s, token %s' % (m['b'], m['t']), m['expected'], m['got'], 'token ids'))
        if len(out) == MAX_ROWS:
            break
    return out


def _fence(text):
    """A code fence longer than any run of backticks in `text`, so that the text cannot close it."""
    longest = max((len(run) for run in re.findall(r'`+', text)), default=0)
    return '`' * max(3, longest + 1)


def _cell(text):
    """One table cell as literal text: a code span (nothing inside is Markdown) with its pipes escaped."""
    text = str(text).replace('\n', ' ').replace('|', '\\|')
    ticks = '`' * (max((len(r) for r in re.findall(r'`+', text)), default=0) + 1)
    return '%s %s %s' % (ticks, text, ticks)


def render(text):
    """`text` as Markdown with its table of expected against got, or None when it holds no comparison line."""
    table = rows(text)
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
