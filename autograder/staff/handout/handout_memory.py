"""
The students' memory helper (handout `tests/_support/memory_check.py`), generated from the grader's one
source of the memory contract: the CUDA view (child/cuda_view.py), the readings handler
(contract/memory_readings.py) and the rules of test 9.1 (memory_rules.py).

The grader's code is copied as code only: `ast` keeps the top-level definitions the public
tests use, drops docstrings and comments (they speak of the grader's machinery, not of the
homework) and renames the few identifiers whose names are grader words. The hand-written part
for students (student_template/templates/tests/_support/memory_check.py: the docstring, the patching that is
undone after the memory test, the one call test_model.py makes) is placed around it. A
generated module that still holds a grader word is refused, so the handout cannot drift into
them.
"""

import ast
import io
import os
import re
import tokenize

from autograder import REPO_ROOT

# {module path: top-level names NOT copied (the gpu forwarder and the batch rule: the public tests run neither)}
MEMORY_SOURCES = {'autograder/child/cuda_view.py': {'Forward'},
                  'autograder/contract/memory_readings.py': set(),
                  'autograder/contract/memory_rules.py': {'judge_calls'}}
# identifiers and message words of the grader that students should read in the homework's terms
RENAMES = {'judge_call': 'memory_verdict'}
MESSAGE_WORDS = (("'the harness has no record of this call (the probe\\'s start/end marks are missing from its '",
                  "'the test has no record of this call (its start/end marks are missing from the '"),
                 ("'log): the process ended or replaced the probe before the call finished'",
                  "'log): the process ended before the call finished'"))
# words of the grader's machinery that nothing a student reads may contain
GRADER_WORDS = re.compile(r'harness|probe|judges/|judge|fixtures|profile|sandbox', re.IGNORECASE)
CODE_PLACEHOLDER = "# the grader's memory code: filled in by build-template\n"


def _docstring_lines(node):
    """Line numbers (1-based) of every docstring inside node."""
    lines = set()
    for child in ast.walk(node):
        body = getattr(child, 'body', None)
        if isinstance(child, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and body and \
                isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], 'value', None), ast.Constant) and \
                isinstance(body[0].value.value, str):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def _without_comments(text):
    """text with its comments removed: a line that held only a comment goes, a trailing comment is cut off."""
    lines = text.splitlines()
    for token in reversed(list(tokenize.generate_tokens(io.StringIO(text).readline))):
        if token.type == tokenize.COMMENT:
            row, col = token.start
            lines[row - 1] = lines[row - 1][:col].rstrip() or None
    return '\n'.join(line for line in lines if line is not None)


def code_only(text):
    """Top-level definitions without their docstrings and comments: the handout copies the grader's code, not its
    words."""
    dropped = _docstring_lines(ast.parse(text))
    kept = '\n'.join(line for i, line in enumerate(text.splitlines(), 1) if i not in dropped) + '\n'
    return _without_comments(kept) + '\n'


def grader_memory_code(repo_root=REPO_ROOT):
    """(imports, definitions): the copied grader code as it is written there, without docstrings and comments."""
    imports, definitions = [], []
    for rel, left_out in MEMORY_SOURCES.items():
        with open(os.path.join(repo_root, rel), encoding='utf-8') as f:
            source = f.read()
        tree, lines = ast.parse(source), source.splitlines()
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                text = ast.get_source_segment(source, node)
                if text not in imports:
                    imports.append(text)
            elif isinstance(node, ast.Expr) and isinstance(getattr(node, 'value', None), ast.Constant):
                continue   # the module's docstring
            elif getattr(node, 'name', None) not in left_out:
                first = min([node.lineno] + [d.lineno for d in getattr(node, 'decorator_list', [])])
                dropped = _docstring_lines(node)
                kept = [lines[i - 1] for i in range(first, node.end_lineno + 1) if i not in dropped]
                definitions.append(_without_comments('\n'.join(kept) + '\n'))
    return imports, definitions


def memory_module(template_text, repo_root=REPO_ROOT):
    """The handout's memory_check.py: the template with the grader's code in place of its placeholder."""
    if template_text.count(CODE_PLACEHOLDER) != 1:
        raise ValueError('student_template/templates/tests/_support/memory_check.py must contain the line %r '
                         'exactly once' % CODE_PLACEHOLDER.strip())
    imports, definitions = grader_memory_code(repo_root)
    imports = [line for line in imports if '\n%s\n' % line not in template_text]
    code = '\n'.join(sorted(line for line in imports if 'torch' not in line) + [''] +
                     sorted((line for line in imports if 'torch' in line),
                            key=lambda line: (line.startswith('from'), line))) + '\n'
    previous_was_code = True
    for text in definitions:   # two blank lines around functions and classes, none between constants
        block = text.startswith(('def ', 'class ', '@'))
        code += ('\n\n' if block or previous_was_code else '') + text.rstrip('\n') + '\n'
        previous_was_code = block
    for old, new in RENAMES.items():
        code = re.sub(r'\b%s\b' % old, new, code)
    for old, new in MESSAGE_WORDS:
        code = code.replace(old, new)
    text = template_text.replace(CODE_PLACEHOLDER, code)
    found = sorted(set(m.group(0).lower() for m in GRADER_WORDS.finditer(text)))
    if found:
        raise ValueError('the generated memory_check.py would show students the grader words %s: add them to '
                         'handout_memory.MESSAGE_WORDS or RENAMES' % ', '.join(found))
    return text
