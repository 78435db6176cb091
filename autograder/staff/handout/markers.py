"""
The solution markers of reference/ and student_template/templates/ (strip_markers), which
build-template turns into the student's version of each file: SOLUTION blocks and lines removed,
PROMPT blocks uncommented, OPTIONAL blocks kept or removed by grading.yaml handout.optional_parts.
"""

import re

# optional parts known to the markers; grading.yaml handout.optional_parts switches them
OPTIONAL_PARTS = ('sliding_window', 'kv_cache')

_MARKER = re.compile(r'^(?P<indent>[ \t]*)# (?P<kind>BEGIN|END) (?P<block>SOLUTION|PROMPT|OPTIONAL)'
                     r'(?: (?P<name>\S+))?[ \t]*$')
# any mention of a block marker that is not a well-formed marker line is refused, so a typo
# ("#BEGIN SOLUTION", "# END SOLUTION here") cannot silently ship solution code
_MARKER_WORDS = re.compile(r'\b(BEGIN|END) (SOLUTION|PROMPT|OPTIONAL)\b')
_LINE_SOLUTION = re.compile(r'#\s*SOLUTION[ \t]*$')


class MarkerError(ValueError):
    """A malformed, unpaired or wrongly nested solution marker, with its file and line."""

    def __init__(self, filename, lineno, message):
        super().__init__('%s:%d: %s' % (filename, lineno, message))
        self.filename, self.lineno = filename, lineno


def has_markers(text):
    return bool(_MARKER_WORDS.search(text) or any(_LINE_SOLUTION.search(l) for l in text.splitlines()))


class _Stripper:
    """The state of strip_markers while it reads one file: the open blocks and what is being dropped."""

    def __init__(self, filename, optional_parts):
        self.filename, self.optional_parts = filename, optional_parts
        self.stack = []      # open blocks: (block, lineno, indent, name)
        self.dropping = 0    # > 0 while inside a removed region (SOLUTION, or a switched-off OPTIONAL)

    def error(self, lineno, message):
        return MarkerError(self.filename, lineno, message)

    def kept(self, name):
        # `# BEGIN OPTIONAL !part`: kept only when the part is OFF, for the code the part replaces (the
        # course starter's generate without a KV cache); its lines are PROMPT comments in the reference
        return self.optional_parts[name.lstrip('!')] != name.startswith('!')

    def removes(self, block, name):
        return block == 'SOLUTION' or (block == 'OPTIONAL' and not self.kept(name))

    def begin(self, lineno, block, name, indent):
        stack = self.stack
        if stack and (stack[-1][0] != 'OPTIONAL' or block == 'OPTIONAL'):
            raise self.error(lineno, 'BEGIN %s inside %s opened at line %d: these blocks do not nest'
                             % (block, stack[-1][0], stack[-1][1]))
        if block == 'OPTIONAL':
            if name is None or name.lstrip('!') not in self.optional_parts:
                raise self.error(lineno, 'unknown optional part %r (known: %s)'
                                 % (name, ', '.join(sorted(self.optional_parts))))
        elif name is not None:
            raise self.error(lineno, 'BEGIN %s takes no name' % block)
        stack.append((block, lineno, indent, name))
        self.dropping += self.removes(block, name)

    def end(self, lineno, block, name):
        stack = self.stack
        if not stack or stack[-1][0] != block:
            where = 'no block is open' if not stack else '%s opened at line %d is still open' % stack[-1][:2]
            raise self.error(lineno, 'END %s without BEGIN %s: %s' % (block, block, where))
        if name is not None:
            raise self.error(lineno, 'END %s takes no name' % block)
        opened = stack.pop()
        self.dropping -= self.removes(block, opened[3])

    def prompt_line(self, lineno, line):
        """A line of a PROMPT block: `<indent># text` becomes `<indent>text`."""
        indent = self.stack[-1][2]
        body = line.rstrip('\r\n')
        ending = line[len(body):]
        if body.strip() == '' or body == indent + '#':
            return ending
        if body.startswith(indent + '# '):
            return indent + body[len(indent) + 2:] + ending
        raise self.error(lineno, 'line in a PROMPT block must be a comment "%s# ..." at the indentation of its '
                         'BEGIN PROMPT' % indent)


def strip_markers(text, filename='<text>', optional_parts=None):
    """
    The student version of `text`:
      - `# BEGIN SOLUTION` .. `# END SOLUTION`: removed with the markers;
      - a line ending in `# SOLUTION`: removed;
      - `# BEGIN PROMPT` .. `# END PROMPT`: every line is a comment `<indent># ...` in the
        reference and becomes `<indent>...` (its leading `# ` removed);
      - `# BEGIN OPTIONAL name` .. `# END OPTIONAL`: kept (markers removed, inner markers
        processed) when optional_parts[name] is true, removed entirely when false;
        `# BEGIN OPTIONAL !name` the other way round (what the part replaces when it is off).
    SOLUTION and PROMPT blocks may sit inside an OPTIONAL one; no other nesting is allowed.
    Blank lines around a removed region are collapsed to at most two.
    """
    state = _Stripper(filename, dict.fromkeys(OPTIONAL_PARTS, True) if optional_parts is None else optional_parts)
    out, removed_at = [], []   # removed_at: indices into `out` where something was dropped
    for lineno, line in enumerate(text.splitlines(keepends=True), 1):
        m = _MARKER.match(line.rstrip('\r\n'))
        if m is None and _MARKER_WORDS.search(line):
            raise state.error(lineno, 'malformed marker %r: a marker is alone on its line, as "# BEGIN SOLUTION", '
                              '"# END PROMPT" or "# BEGIN OPTIONAL <name>"' % line.strip())
        if m is not None:
            if m.group('kind') == 'BEGIN':
                state.begin(lineno, m.group('block'), m.group('name'), m.group('indent'))
            else:
                state.end(lineno, m.group('block'), m.group('name'))
            removed_at.append(len(out))
            continue
        if _LINE_SOLUTION.search(line):
            if any(b == 'PROMPT' for b, _, _, _ in state.stack):
                raise state.error(lineno, '"# SOLUTION" line inside the PROMPT block opened at line %d'
                                  % state.stack[-1][1])
            removed_at.append(len(out))
        elif state.dropping:
            removed_at.append(len(out))
        else:
            out.append(state.prompt_line(lineno, line) if state.stack and state.stack[-1][0] == 'PROMPT' else line)
    if state.stack:
        block, lineno, _, _ = state.stack[-1]
        raise state.error(lineno, 'BEGIN %s is never closed (END %s missing before the end of the file)'
                          % (block, block))
    return ''.join(_collapse_blank_runs(out, set(removed_at)))


def _collapse_blank_runs(lines, removed_at):
    """At most two blank lines where a region was removed, none at the end of the file."""
    result, i = [], 0
    while i < len(lines):
        if lines[i].strip():
            result.append(lines[i])
            i += 1
            continue
        j = i
        while j < len(lines) and not lines[j].strip():
            j += 1
        run = lines[i:j]
        if any(i <= k <= j for k in removed_at):
            run = run[:2] if j < len(lines) else []
        result.extend(run)
        i = j
    return result


def solution_lines(text):
    """Stripped non-blank lines inside SOLUTION blocks or ending in `# SOLUTION` (for leak checks)."""
    inside, lines = False, []
    for line in text.splitlines():
        m = _MARKER.match(line)
        if m and m.group('block') == 'SOLUTION':
            inside = m.group('kind') == 'BEGIN'
        elif (inside or _LINE_SOLUTION.search(line)) and line.strip() and not m:
            lines.append(line.strip())
    return lines
