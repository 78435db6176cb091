"""
Where a probe's process said it was when it was stopped: model.py's functions by line (from the parse
submission.Upload.tree holds) and the innermost model.py frame of the stack dump the harness read back
(ProbeResult.harness['hang']). Words only: judge/set_aside.py places a hang from the harness's
own knowledge, never from what the process said.
"""

import ast
import re

from autograder.judge import messages

MODEL_FRAME = re.compile(r'^model\.py line (\d+), in ')   # a case error's frame in model.py (runner.student_frames)


def functions_of(tree):
    """
    [(first line, last line, 'Class.method' or 'function')] of model.py's functions, innermost
    last; `tree` is its parse (submission.Upload.tree), None when there is none.
    """
    if tree is None:
        return []
    out = []

    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((child.lineno, getattr(child, 'end_lineno', child.lineno),
                            '%s.%s' % (owner, child.name) if owner else child.name))
                visit(child, owner)
    visit(tree, None)
    return out


def where_said(hang, functions):
    """('Class.method' or 'model.py', line) of the innermost model.py frame of a stack dump, or None: words only."""
    frames = hang.get('frames') if isinstance(hang, dict) else None
    if not isinstance(frames, list):
        return None
    for frame in reversed(frames[-20:]):
        line = frame.get('line') if isinstance(frame, dict) else None
        if isinstance(line, int) and not isinstance(line, bool) and line > 0:
            names = [name for first, last, name in functions if first <= line <= last]
            return (names[-1] if names else 'model.py'), line
    return None


def stopped_words(hang, functions):
    """The sentence of where a process said it was stopped, marked as its own account; '' without a dump."""
    said = where_said(hang, functions)
    if said is None:
        return ''
    return messages.stopped(*said)
