"""
Finds the student's model.py in what they uploaded (a file, a folder, a zip; also
mingpt/model.py, Model.py or "model (1).py") and checks it statically, in the trusted
process, without running it: a syntax error reports its line, and imports outside what the
autograder provides are refused with a clear message.

The upload is untrusted too. The file graded must be a regular file of the upload with a
single name: symbolic links (a link to the staff reference would earn its score, a link to a
root-only file would print it), hard links, devices and FIFOs are refused, and so is a path
that resolves outside the upload. From a zip only the chosen member is unpacked, never a
link, an absolute path or one with '..', and never more than MAX_MODEL_BYTES. Source is
decoded the way Python does (PEP 263 coding line), and the static check never crashes: what
it cannot parse is a clear refusal in test 1.1.
"""

import ast
import io
import os
import re
import stat
import sys
import tempfile
import tokenize
import zipfile
from dataclasses import dataclass
from typing import List, Optional

from autograder.sandbox import readback

NAME = re.compile(r'^model(\s*\(\d+\)|[-_ ]\d+|[-_ ]?copy)?\.py$', re.IGNORECASE)
THIRD_PARTY = {'torch', 'einops', 'numpy', 'mingpt'}
# standard-library modules a model has no business importing inside a grader. A friendly message only,
# NEVER a defence: __import__('so' + 'cket') passes it. The OS stops what matters (autograder/isolation.py).
DENIED = {'subprocess', 'socket', 'multiprocessing', 'ctypes', 'pty', 'urllib', 'http', 'ftplib', 'smtplib',
          'telnetlib', 'webbrowser', 'signal', 'resource', 'shutil', 'pickle', 'marshal', 'importlib', 'builtins'}
MAX_MODEL_BYTES = 1024 * 1024     # the reference is ~30 KB
MAX_ZIP_MEMBERS = 50_000
MAX_LISTED = 5                    # other model.py files named in the note


@dataclass
class Located:
    path: Optional[str]
    note: str
    problem: Optional[str] = None


def _unsafe(path, rel, in_upload, max_bytes=MAX_MODEL_BYTES):
    """Why `path` may not be graded, or None: a link, not a regular file, several names, too large."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return '%s is a symbolic link; upload the file itself, not a link to it' % rel
    if not stat.S_ISREG(st.st_mode):
        return '%s is not a regular file (a device, FIFO or socket); upload your model.py itself' % rel
    if in_upload and st.st_nlink > 1:
        return '%s is a hard link (one file with %d names); upload a plain copy of the file' % (rel, st.st_nlink)
    if max_bytes is not None and st.st_size > max_bytes:
        return '%s is %d bytes, more than the %d a model.py may have' % (rel, st.st_size, max_bytes)
    return None


def _inside(path, folder):
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def _candidates(folder):
    """Files named like model.py (links and special files included, to be refused by name) and linked folders."""
    found, linked_dirs = [], []
    for root, dirs, files in os.walk(folder):  # never follows links to folders
        linked_dirs += [os.path.join(root, d) for d in dirs if os.path.islink(os.path.join(root, d))]
        dirs[:] = sorted(d for d in dirs if not d.startswith(('.', '__MACOSX', '__pycache__'))
                         and not os.path.islink(os.path.join(root, d)))
        for f in sorted(files):
            if NAME.match(f):
                found.append(os.path.join(root, f))
    return found, linked_dirs


def _rank(rel):
    parts = rel.split('/')
    exact = parts[-1] == 'model.py'
    in_mingpt = len(parts) >= 2 and parts[-2] == 'mingpt'
    return (not in_mingpt, not exact, len(parts), rel)


def _also(names, best):
    others = [n for n in names if n != best]
    if not others:
        return ''
    shown = ', '.join(others[:MAX_LISTED])
    more = len(others) - MAX_LISTED
    return '; also found %s%s' % (shown, ' and %d more (not graded)' % more if more > 0 else '')


def _zip_members(zip_path):
    """(candidate names, unsafe names) of a zip, from its directory alone; refuses oversized directories."""
    with open(zip_path, 'rb') as f:
        readback.check_zip_directory(f, os.fstat(f.fileno()).st_size, MAX_ZIP_MEMBERS, os.path.basename(zip_path))
        with zipfile.ZipFile(f) as z:
            found, unsafe = [], []
            for info in z.infolist():
                name = info.filename
                parts = name.split('/')
                if info.is_dir() or not NAME.match(parts[-1]) or any(p.startswith('__MACOSX') for p in parts):
                    continue
                if name.startswith('/') or '..' in parts or '\\' in name or ':' in parts[0]:
                    unsafe.append(name)
                    continue
                found.append(name)
    return found, unsafe


def _extract(zip_path, name, into):
    """Unpack the one member `name` (a regular file of at most MAX_MODEL_BYTES) to `into`/name."""
    with zipfile.ZipFile(zip_path) as z:
        info = z.getinfo(name)
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind == stat.S_IFLNK:
            raise ValueError('%s is a symbolic link inside the zip; zip the file itself' % name)
        if kind not in (0, stat.S_IFREG):
            raise ValueError('%s is not a regular file inside the zip' % name)
        if info.file_size > MAX_MODEL_BYTES:
            raise ValueError('%s unpacks to %d bytes, more than the %d a model.py may have'
                             % (name, info.file_size, MAX_MODEL_BYTES))
        with z.open(info) as src:
            data = src.read(MAX_MODEL_BYTES + 1)
        if len(data) > MAX_MODEL_BYTES:
            raise ValueError('%s unpacks to more than %d bytes' % (name, MAX_MODEL_BYTES))
    target = os.path.join(into, *name.split('/'))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, 'wb') as dst:
        dst.write(data)
    return target


def _from_zips(zips, folder, scratch):
    """The best model.py over all zips, unpacked alone; (Located, or None when the zips hold none)."""
    found, unsafe = [], []
    for z in zips:
        label = os.path.relpath(z, folder) if os.path.isdir(folder) else os.path.basename(z)
        problem = _unsafe(z, label, in_upload=True, max_bytes=None) if os.path.isdir(folder) else None
        if problem:
            return Located(None, '', problem)
        try:
            names, bad = _zip_members(z)
        except (zipfile.BadZipFile, ValueError, OSError) as e:
            return Located(None, '', 'could not read %s: %s' % (os.path.basename(z), e))
        found += [(os.path.basename(z), z, n) for n in names]
        unsafe += bad
    if not found:
        return None
    found.sort(key=lambda f: _rank(f[0] + '/' + f[2]))
    zip_name, zip_path, member = found[0]
    try:
        path = _extract(zip_path, member, os.path.join(scratch, zip_name))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        return Located(None, '', 'could not read %s: %s' % (zip_name, e))
    best = zip_name + '/' + member
    note = 'graded %s (from the zip you uploaded)' % best
    note += _also([f[0] + '/' + f[2] for f in found], best)
    if unsafe:
        note += '; ignored %d zip member%s with an unsafe path (absolute or with ..): %s' % (
            len(unsafe), 's' if len(unsafe) > 1 else '', ', '.join(unsafe[:MAX_LISTED]))
    return Located(path, note)


def locate(path, scratch=None):
    """The model.py to grade and a sentence saying what was picked; a problem when the upload is refused."""
    if not os.path.lexists(path):
        return Located(None, '', 'no submission found at %s' % path)
    if os.path.islink(path):
        return Located(None, '', 'the submission %s is a symbolic link; upload the file itself'
                       % os.path.basename(path))
    scratch = scratch or tempfile.mkdtemp(prefix='hw1-upload-')
    if not os.path.isdir(path):
        if path.lower().endswith('.zip'):
            return _from_zips([path], path, scratch) or Located(
                None, '', 'no model.py in the submission: upload your mingpt/model.py')
        problem = _unsafe(path, os.path.basename(path), in_upload=False)
        return Located(None, '', problem) if problem else Located(path, 'graded %s' % os.path.basename(path))
    found, linked_dirs = _candidates(path)
    if found:
        rels = [os.path.relpath(p, path).replace(os.sep, '/') for p in found]
        best = sorted(rels, key=_rank)[0]
        best_path = os.path.join(path, *best.split('/'))
        problem = _unsafe(best_path, best, in_upload=True)
        if problem is None and not _inside(best_path, path):
            problem = '%s resolves outside the upload' % best
        if problem:
            return Located(None, '', problem)
        return Located(best_path, 'graded %s%s' % (best, _also(sorted(rels, key=_rank), best)))
    zips = sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs if f.lower().endswith('.zip'))
    located = _from_zips(zips, path, scratch) if zips else None
    if located is not None:
        return located
    if linked_dirs:
        return Located(None, '', 'no model.py in the submission: %s is a symbolic link to a folder, which the '
                                 'autograder does not follow; upload the files themselves'
                       % os.path.relpath(linked_dirs[0], path))
    return Located(None, '', 'no model.py in the submission: upload your mingpt/model.py')


# ----------------------------------------------------------------------------- the static check

def read_source(path):
    """(text, None) decoded as Python would (PEP 263), or (None, the reason it cannot be)."""
    with open(path, 'rb') as f:
        raw = f.read(MAX_MODEL_BYTES + 1)
    if len(raw) > MAX_MODEL_BYTES:
        return None, 'model.py is more than %d bytes' % MAX_MODEL_BYTES
    if b'\0' in raw:
        return None, ('model.py contains a NUL byte (at byte %d), which Python source cannot contain: save it '
                      'again as plain text' % raw.index(b'\0'))
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    except SyntaxError as e:
        if 'invalid or missing encoding' in str(e):  # not UTF-8 in the first two lines, and no coding line
            encoding = 'utf-8'
        else:
            return None, 'model.py has a coding line Python does not accept: %s' % e
    try:
        return raw.decode(encoding), None
    except UnicodeDecodeError as e:
        if encoding in ('utf-8', 'utf-8-sig'):
            return None, 'model.py is not UTF-8 text (byte %d)' % e.start
        return None, 'model.py is not valid %s text, as its coding line says (byte %d)' % (encoding, e.start)
    except LookupError as e:
        return None, 'model.py has a coding line Python does not accept: %s' % e


def static_problems(path) -> List[str]:
    """Reasons not to run the file at all: undecodable, a syntax error, or an import the grader refuses."""
    try:
        return _static_problems(path)
    except Exception as e:  # noqa: BLE001  (RecursionError, MemoryError...: never an internal error)
        return ['model.py could not be checked (%s: %s): simplify the file, e.g. very long or deeply nested '
                'expressions' % (type(e).__name__, str(e)[:200])]


def _static_problems(path):
    source, problem = read_source(path)
    if problem:
        return [problem]
    try:
        tree = ast.parse(source, filename='model.py')
    except SyntaxError as e:
        line = (e.text or '').rstrip('\n')
        return ['syntax error in model.py line %s: %s%s' % (e.lineno, e.msg, ('\n    ' + line[:200]) if line else '')]
    except (RecursionError, MemoryError, ValueError, OverflowError) as e:
        return ['model.py could not be parsed (%s: %s): it nests too deeply for Python (a very long expression?)'
                % (type(e).__name__, str(e)[:200])]
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
