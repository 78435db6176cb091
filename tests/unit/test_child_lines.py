"""
The line numbers of the child's code do not move. A probe's traceback shows the student the grader's own
frames when none is in model.py (runner.student_frames: "at adapter.py line 125, in load_attention"), so
any line of autograder/child/*.py can be a line a student reads; results.json must stay byte-identical
when the child changes its words (issue 34: its errors and notes became facts, edited in place).

child_lines.json holds, per file, its line count and, per function or class (by qualified name), the
line of its def and the lines of its statements (every statement's first line: what a frame points at)
and of its raise statements. Changing a line in place keeps them; adding or removing one moves them.
A change that must move lines (and the lines students read with it) rewrites the table on purpose:
`python tests/unit/test_child_lines.py > tests/unit/child_lines.json`.
"""

import ast
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TABLE = os.path.join(HERE, 'child_lines.json')
CHILD = os.path.join(HERE, '..', '..', 'autograder', 'child')


def _scopes(node, prefix=''):
    """(qualified name, node) of every function and class under `node`, nested ones included."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield prefix + child.name, child
            yield from _scopes(child, prefix + child.name + '.')
        else:
            yield from _scopes(child, prefix)


def lines_of(source):
    """[line count, {qualified name: [def line, [statement lines], [raise lines]]}] of a module."""
    tree = ast.parse(source)
    scopes = {}
    for name, node in _scopes(tree):
        inner = [n for n in ast.walk(node) if n is not node]
        scopes[name] = [node.lineno, sorted({n.lineno for n in inner if isinstance(n, ast.stmt)}),
                        sorted({n.lineno for n in inner if isinstance(n, ast.Raise)})]
    return [len(source.splitlines()), scopes]


def child_table():
    out = {}
    for f in sorted(os.listdir(CHILD)):
        if f.endswith('.py'):
            with open(os.path.join(CHILD, f), encoding='utf-8') as fh:
                out[f] = lines_of(fh.read())
    return out


def test_the_childs_lines_have_not_moved():
    with open(TABLE, encoding='utf-8') as f:
        stored = json.load(f)
    now = child_table()
    assert set(now) == set(stored), 'child files added or removed: %s' % sorted(set(now) ^ set(stored))
    moved = []
    for name in sorted(stored):
        (count, scopes), (count_now, scopes_now) = stored[name], now[name]
        if count != count_now:
            moved.append('%s: %d lines, was %d' % (name, count_now, count))
        for scope in sorted(set(scopes) | set(scopes_now)):
            if scopes.get(scope) != scopes_now.get(scope):
                moved.append('%s %s: def, statement or raise lines %s, were %s'
                             % (name, scope, scopes_now.get(scope), scopes.get(scope)))
    assert not moved, 'lines of autograder/child moved (edit lines in place):\n  ' + '\n  '.join(moved)


def test_the_check_sees_a_moved_line():
    source = 'def f(x):\n    y = x\n    raise ValueError(y)\n'
    table = lines_of(source)
    assert table == [3, {'f': [1, [2, 3], [3]]}]
    assert lines_of(source.replace('    y = x\n', '    y = x\n    z = y\n')) != table   # one line added
    assert lines_of(source.replace('y = x', 'y = x + 1')) == table                     # edited in place


if __name__ == '__main__':
    json.dump(child_table(), sys.stdout, sort_keys=True, indent=1)
    sys.stdout.write('\n')
