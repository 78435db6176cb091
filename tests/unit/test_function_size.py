"""
No hand-written function over MAX_LINES lines (its def through its last line, docstring included)
under autograder/ and reference/: a function that long does several things, and each deserves a
name. ALLOWED lists the few still over, each with who removes it; the list only shrinks.
"""

import ast
import os

from autograder import REPO_ROOT

MAX_LINES = 80
ROOTS = ('autograder', 'reference')
# 'path:function' -> who removes it (the lead deletes the entry once their branch is merged)
ALLOWED = {}


def long_functions():
    found = {}
    for top in ROOTS:
        for root, dirs, files in os.walk(os.path.join(REPO_ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != '__pycache__')
            for f in sorted(files):
                if not f.endswith('.py'):
                    continue
                path = os.path.join(root, f)
                with open(path, encoding='utf-8') as fh:
                    tree = ast.parse(fh.read())
                for node in ast.walk(tree):
                    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        lines = node.end_lineno - node.lineno + 1
                        if lines > MAX_LINES:
                            found['%s:%s' % (os.path.relpath(path, REPO_ROOT), node.name)] = lines
    return found


def test_no_hand_written_function_is_over_the_limit():
    over = {k: v for k, v in long_functions().items() if k not in ALLOWED}
    assert not over, 'functions over %d lines (split them): %s' % (MAX_LINES, over)


def test_the_allow_list_names_only_functions_still_over_the_limit():
    stale = sorted(set(ALLOWED) - set(long_functions()))
    assert not stale, 'no longer over %d lines, delete from ALLOWED: %s' % (MAX_LINES, stale)
