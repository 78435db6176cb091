"""
Finds the student's model.py in what they uploaded (a file, a folder, a zip; also
mingpt/model.py, Model.py or "model (1).py") and checks it statically, in the trusted
process, without running it: a syntax error reports its line, and imports outside what the
autograder provides are refused with a clear message.
"""

import ast
import os
import re
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from typing import List, Optional

NAME = re.compile(r'^model(\s*\(\d+\)|[-_ ]\d+|[-_ ]?copy)?\.py$', re.IGNORECASE)
THIRD_PARTY = {'torch', 'einops', 'numpy', 'mingpt'}
# standard-library modules a model has no business importing inside a grader
DENIED = {'subprocess', 'socket', 'multiprocessing', 'ctypes', 'pty', 'urllib', 'http', 'ftplib', 'smtplib',
          'telnetlib', 'webbrowser', 'signal', 'resource', 'shutil', 'pickle', 'marshal', 'importlib', 'builtins'}
MAX_ZIP_BYTES = 20 * 1024 * 1024


@dataclass
class Located:
    path: Optional[str]
    note: str
    problem: Optional[str] = None


def _candidates(folder):
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith(('.', '__MACOSX', '__pycache__')))
        for f in sorted(files):
            if NAME.match(f):
                found.append(os.path.join(root, f))
    return found


def _rank(path, folder):
    rel = os.path.relpath(path, folder)
    parts = rel.split(os.sep)
    exact = parts[-1] == 'model.py'
    in_mingpt = len(parts) >= 2 and parts[-2] == 'mingpt'
    return (not in_mingpt, not exact, len(parts), rel)


def _extract(zip_path, into):
    with zipfile.ZipFile(zip_path) as z:
        total = 0
        for info in z.infolist():
            name = info.filename
            if name.startswith('/') or '..' in name.split('/') or info.is_dir():
                continue
            total += info.file_size
            if total > MAX_ZIP_BYTES:
                raise ValueError('the zip unpacks to more than %d MB' % (MAX_ZIP_BYTES // 2 ** 20))
            if NAME.match(os.path.basename(name)):
                target = os.path.join(into, *name.split('/'))
                os.makedirs(os.path.dirname(target), exist_ok=True)
                with z.open(info) as src, open(target, 'wb') as dst:
                    dst.write(src.read())


def locate(path, scratch=None):
    """The model.py to grade and a sentence saying what was picked."""
    if not os.path.exists(path):
        return Located(None, '', 'no submission found at %s' % path)
    if os.path.isfile(path) and not path.lower().endswith('.zip'):
        return Located(path, 'graded %s' % os.path.basename(path))
    scratch = scratch or tempfile.mkdtemp(prefix='hw1-upload-')
    folder = path
    zips = [path] if os.path.isfile(path) else sorted(
        os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs if f.lower().endswith('.zip'))
    found = _candidates(path) if os.path.isdir(path) else []
    if not found and zips:
        for z in zips:
            try:
                _extract(z, os.path.join(scratch, os.path.basename(z)))
            except (zipfile.BadZipFile, ValueError, OSError) as e:
                return Located(None, '', 'could not read %s: %s' % (os.path.basename(z), e))
        folder = scratch
        found = _candidates(scratch)
    if not found:
        return Located(None, '', 'no model.py in the submission: upload your mingpt/model.py')
    best = sorted(found, key=lambda p: _rank(p, folder))[0]
    rel = os.path.relpath(best, folder)
    note = 'graded %s%s' % (rel, ' (from the zip you uploaded)' if folder == scratch else '')
    if len(found) > 1:
        note += '; also found %s' % ', '.join(os.path.relpath(p, folder) for p in found if p != best)
    return Located(best, note)


def static_problems(path) -> List[str]:
    """Reasons not to run the file at all: a syntax error, or an import the grader refuses."""
    with open(path, 'rb') as f:
        raw = f.read()
    try:
        source = raw.decode('utf-8')
    except UnicodeDecodeError as e:
        return ['model.py is not UTF-8 text (byte %d)' % e.start]
    try:
        tree = ast.parse(source, filename='model.py')
    except SyntaxError as e:
        line = (e.text or '').rstrip('\n')
        return ['syntax error in model.py line %s: %s%s' % (e.lineno, e.msg, ('\n    ' + line) if line else '')]
    stdlib = set(getattr(sys, 'stdlib_module_names', ()))
    optional = guarded_imports(tree)
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split('.')[0]
            if top in DENIED:
                problems.append("model.py line %d imports %r, which the autograder does not allow in a model"
                                % (node.lineno, name))
            elif top not in THIRD_PARTY and top not in stdlib and node not in optional:
                problems.append("model.py line %d imports %r, which the autograder does not provide: only torch, "
                                "einops, numpy and the Python standard library are available" % (node.lineno, name))
    return problems


_IMPORT_ERRORS = {'ImportError', 'ModuleNotFoundError', 'Exception', 'BaseException'}


def _catches_import_error(handler):
    """`except ImportError`, `except (ModuleNotFoundError, ...)`, `except Exception` or a bare `except`."""
    if handler.type is None:
        return True
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any((k.id if isinstance(k, ast.Name) else getattr(k, 'attr', None)) in _IMPORT_ERRORS for k in kinds)


def guarded_imports(tree):
    """
    Import statements inside a `try:` whose handler catches ImportError (`try: import wandb` /
    `except ImportError: wandb = None`, as the handout's optional logging suggests): the module may
    be missing in the sandbox, where the import fails and the code falls back. Denied modules are
    refused wherever they appear.
    """
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for stmt in node.body:
                guarded |= {n for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return guarded
