"""
model.py as the grader takes it: located in the upload (locating.py: a file, a folder, a zip; its
names are re-exported here, where their callers find them), then read once and checked statically,
in the trusted process, without running it: a syntax error reports its line. Imports are never
refused here: a module the grader lacks costs only what its failing import costs when model.py runs
(the child reports it), and a module a model has no use for (subprocess, socket, ...) is a warning in
test 1.1. The OS sandbox is the wall, not this check.

Source is decoded the way Python does (PEP 263 coding line), and the static check never crashes: what
it cannot parse is a clear refusal in test 1.1.
"""

import ast
import io
import sys
import tokenize
import warnings
from dataclasses import dataclass
from typing import List, Optional, Tuple

from autograder.judge import messages
from autograder.judge.locating import (MAX_LISTED, MAX_MODEL_BYTES, MAX_ZIP_MEMBERS, NAME, Located, choose,  # noqa: F401
                                       locate, too_large, what_the_zip_holds, what_was_found)

THIRD_PARTY = {'torch', 'einops', 'numpy', 'mingpt'}
# standard-library modules a model has no use for: a warning in test 1.1, NEVER a refusal nor a defence
# (__import__('so' + 'cket') passes any such list). The OS sandbox stops what matters.
UNUSUAL = {'subprocess', 'socket', 'multiprocessing', 'ctypes', 'pty', 'urllib', 'http', 'ftplib', 'smtplib',
          'telnetlib', 'webbrowser', 'signal', 'resource', 'shutil', 'pickle', 'marshal', 'importlib', 'builtins'}

# ----------------------------------------------------------------------------- the static check

def _line_of(raw, offset):
    """'line L, column C' of a byte offset (columns count bytes, from 1)."""
    line_start = raw.rfind(b'\n', 0, offset) + 1
    return 'line %d, column %d' % (raw.count(b'\n', 0, offset) + 1, offset - line_start + 1)


def not_utf8(raw, start, end):
    """
    Where the first byte that is not UTF-8 sits, what it most likely is (editors that do not
    save UTF-8 mostly write Windows-1252: curly quotes, dashes, accented letters), and the fix.
    """
    bad = raw[start:max(end, start + 1)]
    try:
        guess = bad.decode('cp1252')
        likely = ", which is %r in the Windows-1252 encoding" % guess
    except UnicodeDecodeError:
        likely = ''
    line_start = raw.rfind(b'\n', 0, start) + 1
    line_end = raw.find(b'\n', start)
    text = raw[line_start:line_end if line_end >= 0 else len(raw)].decode('cp1252', errors='replace').strip()
    return ('model.py is not UTF-8 text: %s holds the byte %s%s. Save the file as UTF-8 (in most editors: Save with '
            'Encoding, UTF-8), or replace that character (a straight quote \' or " for a curly one)\n    %s'
            % (_line_of(raw, start), ' '.join('0x%02x' % b for b in bad), likely, text[:200]))


def read_source(path):
    """(text, None) decoded as Python would (PEP 263), or (None, the reason it cannot be)."""
    with open(path, 'rb') as f:
        return decode(f.read(MAX_MODEL_BYTES + 1))


def decode(raw):
    """(text, None): model.py's bytes decoded as Python would (PEP 263), or (None, why not)."""
    if len(raw) > MAX_MODEL_BYTES:
        return None, 'model.py is more than %d bytes' % MAX_MODEL_BYTES
    if b'\0' in raw:
        return None, ('model.py contains a NUL byte (at byte %d, %s), which Python source cannot contain: save it '
                      'again as plain text' % (raw.index(b'\0'), _line_of(raw, raw.index(b'\0'))))
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
            return None, not_utf8(raw, e.start, e.end)
        return None, 'model.py is not valid %s text, as its coding line says (byte %d)' % (encoding, e.start)
    except LookupError as e:
        return None, 'model.py has a coding line Python does not accept: %s' % e


@dataclass(frozen=True)
class Upload:
    """
    model.py as every check after `locate` takes it: read once and parsed once (read_upload). The
    static check, test 1.1's import notes and interface, the optional parts' TODOs, set_aside.py's
    function lines and the input set drawn for these bytes all read this value, never the file.
    """
    path: str
    raw: bytes                       # at most MAX_MODEL_BYTES + 1: more is refused (decode)
    text: Optional[str]              # decoded as Python would (PEP 263); None when it cannot be
    tree: Optional[ast.Module]       # ast.parse(text); None when it does not parse
    problems: Tuple[str, ...] = ()   # the static check's reasons not to run it: decoding, syntax


def read_upload(path) -> Upload:
    """The Upload of the located model.py at `path`: the one place that opens and parses it."""
    with open(path, 'rb') as f:
        raw = f.read(MAX_MODEL_BYTES + 1)
    text, problem = decode(raw)
    if problem:
        return Upload(path, raw, None, None, (problem,))
    tree, problem = parse(text)
    return Upload(path, raw, text, tree, (problem,) if problem else ())


def static_problems(upload) -> List[str]:
    """Reasons not to run the file at all: undecodable, or a syntax error. Imports are judged by running them."""
    return list(upload.problems)


TOO_DEEP = messages.TOO_DEEP   # why one sentence: see messages.TOO_DEEP

EXIT_NAMES = frozenset({'exit', '_exit', 'quit', 'SystemExit', 'abort', 'kill', 'killpg'})


def names_exit(tree):
    """Whether model.py's tree names a way to end its own process (sys.exit, os._exit, exit, quit, SystemExit,
    os.abort, os.kill: a name, an attribute or an imported name): only then may a process that exited without
    results be told that its code may have ended it. The harness's own reading of the source, never the child's
    words; None (no tree) names none."""
    for node in ast.walk(tree) if tree is not None else ():
        if isinstance(node, ast.Name) and node.id in EXIT_NAMES or \
                isinstance(node, ast.Attribute) and node.attr in EXIT_NAMES or \
                isinstance(node, ast.alias) and node.name in EXIT_NAMES:
            return True
    return False


def parse(text):
    """
    (ast.parse's tree or None, the static check's problem or None). The source is also compiled,
    as importing model.py compiles it: a file is refused here exactly when Python refuses it, on
    3.10 as on 3.11. (The source, not the tree: compile(tree) refuses ~1,000 terms that import
    accepts.) The tree is kept when only the compile fails: 'nothing to grade' reads it.
    """
    try:
        tree = ast.parse(text, filename='model.py')
    except Exception as e:  # noqa: BLE001  (RecursionError, MemoryError...: no internal error)
        return None, _refusal(e)
    try:
        with warnings.catch_warnings():   # a SyntaxWarning ('is' with a literal) is the import's to show, not ours
            warnings.simplefilter('ignore')
            compile(text, 'model.py', 'exec', dont_inherit=True)
    except Exception as e:  # noqa: BLE001
        return tree, _refusal(e)
    return tree, None


def _refusal(e):
    """The static check's sentence for what parsing or compiling model.py raised."""
    if isinstance(e, SyntaxError):
        line = (e.text or '').rstrip('\n')
        shown = ('\n    ' + line[:200]) if line else ''
        return messages.syntax_error(e.lineno, e.msg, shown)
    if isinstance(e, RecursionError):
        return TOO_DEEP
    if isinstance(e, (MemoryError, ValueError, OverflowError)):
        return messages.not_parsed(type(e).__name__, str(e)[:200])
    return messages.not_checked(type(e).__name__, str(e)[:200])


def interface_tree(upload):
    """
    The tree test 1.1 reads the handout interface from (interface_check.missing_in), None when there
    is none. 1.1 has always read it from the bytes decoded as UTF-8 (bad bytes replaced, universal
    newlines), not as Python decodes them. For a UTF-8 file, with a byte-order mark or without
    (utf-8-sig: a file saved with one is read like any other, issue 41; before, that reading could
    not parse it and nothing was reported missing), that is the same text, so the upload's own tree.
    Under a non-UTF-8 coding line it is that reading's own parse, as before (docs/notes/values-34.md).
    """
    as_utf8 = _newlines(upload.raw.decode('utf-8-sig', errors='replace'))
    if upload.text is not None and as_utf8 == _newlines(upload.text):
        return upload.tree
    try:
        return ast.parse(as_utf8)
    except (SyntaxError, ValueError):
        return None


def _newlines(text):
    """`text` with universal newlines, as open() in text mode reads it."""
    return text.replace('\r\n', '\n').replace('\r', '\n')


def imported_names(tree):
    """(import node, module name, its top-level package) of every absolute import in the tree, in walk order."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            yield node, name, name.split('.')[0]


def import_warnings(upload) -> List[str]:
    """
    Lines for test 1.1 about imports that cost nothing now: modules a model has no use for, and
    modules the grader may lack that model.py imports only inside a function or a try/except
    ImportError (a top-level import of a missing module fails when model.py runs, and says so).
    """
    if upload.tree is None or upload.problems:   # static_problems reports it
        return []
    tree = upload.tree
    stdlib = set(getattr(sys, 'stdlib_module_names', ()))
    optional = guarded_imports(tree)
    top_level = {n for stmt in tree.body for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))
                 and not _inside_def(stmt, n)}
    warnings = []
    for node, name, top in imported_names(tree):
        if top in UNUSUAL:
            warnings.append(messages.unusual_import(node.lineno, name))
        elif top not in THIRD_PARTY and top not in stdlib and (node in optional or node not in top_level):
            warnings.append(messages.guarded_import(node.lineno, name, node in optional))
    return warnings[:MAX_LISTED]


def _inside_def(stmt, node):
    """True when `node` (within top-level statement `stmt`) sits in a function or class body."""
    for inner in ast.walk(stmt):
        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and \
                any(n is node for n in ast.walk(inner)):
            return True
    return False


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
    be missing in the sandbox, where the import fails and the code falls back.
    """
    guarded = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            for stmt in node.body:
                guarded |= {n for n in ast.walk(stmt) if isinstance(n, (ast.Import, ast.ImportFrom))}
    return guarded
