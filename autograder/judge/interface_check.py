"""
Test 1.1's interface check, read from the source without running it: the classes and methods
of the handout's fixed interface must be defined in model.py (directly, by assignment, or
inherited from another class of the file). A model.py that lost a class fails 1.1 with the
names it lacks; one with nothing to grade at all (empty, only comments, none of the classes)
is refused with one sentence (nothing_to_grade). A base class from outside the file (other
than torch.nn.Module, which provides none of these) is given the benefit of the doubt.
Standard library only: build-template copies this module's functions into the public tests.
"""

import ast

# the fixed interface students depend on (the handout; CONTEXT of the project)
INTERFACE = {
    'RotaryPositionalEmbeddings': ('_build_cache', 'forward'),
    'CausalSelfAttention': ('forward',),
    'GroupedQueryAttention': ('forward',),
    'Block': ('forward',),
    'GPT': ('forward', 'generate'),
}
_MODULE_BASES = {'Module', 'nn.Module', 'torch.nn.Module', 'object'}


def _names_defined(body):
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split('.')[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):  # definitions under `if`/`try` at the same level count
            names |= _names_defined(node.body + getattr(node, 'orelse', []) + getattr(node, 'finalbody', []))
            for handler in getattr(node, 'handlers', []):
                names |= _names_defined(handler.body)
    return names


def _classes(tree):
    return {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}


def _has_method(name, method, classes, seen=()):
    """True when class `name` of the file defines `method` or may inherit it."""
    node = classes.get(name)
    if node is None or name in seen:
        return False
    if method in _names_defined(node.body):
        return True
    for base in node.bases:
        text = ast.unparse(base) if hasattr(ast, 'unparse') else ''
        if text in _MODULE_BASES:
            continue
        if text in classes:
            if _has_method(text, method, classes, seen + (name,)):
                return True
        else:
            return True   # a base from elsewhere (a mixin, a library class): it may provide the method
    return False


def missing(source):
    """missing_in() of a source text; [] when it does not parse (the syntax check reports that)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []   # reported by submission.static_problems
    return missing_in(tree)


def missing_in(tree):
    """The parts of the fixed interface the parsed file lacks ('Class' or 'Class.method')."""
    top = _names_defined(tree.body)
    classes = _classes(tree)
    lacks = []
    for cls, methods in INTERFACE.items():
        if cls not in top:
            lacks.append(cls)
        elif cls in classes:  # a class defined here must carry its methods; an alias or import is trusted
            lacks += ['%s.%s' % (cls, m) for m in methods if not _has_method(cls, m, classes)]
    return lacks


def nothing_to_grade(source):
    """nothing_to_grade_in() of a source text, parsed here."""
    try:
        tree = ast.parse(source) if source.strip() else None
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        tree = None   # the static check reports it
    return nothing_to_grade_in(source, tree)


def nothing_to_grade_in(source, tree):
    """
    One sentence when the decoded file holds nothing to grade: empty, only comments, or none
    of the handout's classes (the wrong file uploaded). None otherwise: a file that lacks only
    some of them is graded, and test 1.1 names what is missing. `tree`: ast.parse(source), None
    when it does not parse (the static check reports it).
    """
    if not source.strip():
        return 'model.py is empty: there is nothing to grade. Upload the file with your code (was it saved?)'
    if tree is None:
        return None
    if all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in tree.body):
        return 'model.py holds no code, only comments or text: upload the file with your code'
    lacks = missing_in(tree)
    if all(cls in lacks for cls in INTERFACE):
        return ("model.py defines none of the handout's classes (%s): is it the right file? Upload your "
                "mingpt/model.py" % ', '.join(INTERFACE))
    return None


# The optional parts' code, by grading.yaml's `optional_part`: the functions or classes that hold it. A part
# whose every one of these is absent or only raises NotImplementedError (the handout's TODO) is untouched: its
# tests read "Not attempted" whatever else fails (a required part failing does not make it attempted).
OPTIONAL_CODE = {'sliding_window': ('sliding_window_mask', 'banded_attention'), 'kv_cache': ('KVCache',)}


def _only_raises_not_implemented(node):
    """A def whose body (less a docstring and `pass`) is one `raise NotImplementedError(...)`; a class whose methods
    all are."""
    if isinstance(node, ast.ClassDef):
        methods = [n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        return all(_only_raises_not_implemented(m) for m in methods)
    body = [n for n in node.body if not isinstance(n, ast.Pass)
            and not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc.func if isinstance(body[0].exc, ast.Call) else body[0].exc
    return isinstance(exc, ast.Name) and exc.id == 'NotImplementedError'


def untouched_optional(tree):
    """The optional parts (OPTIONAL_CODE) the parsed file leaves as the handout's TODO or lacks."""
    if tree is None:
        return set()
    defined = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = node
    assigned = _names_defined(tree.body) - set(defined)   # a name bound another way (an import, an alias): touched
    return {part for part, names in OPTIONAL_CODE.items()
            if all(n not in assigned and (n not in defined or _only_raises_not_implemented(defined[n])) for n in names)}
