"""
Finds the student's model.py in what they uploaded (a file, a folder, a zip; also
mingpt/model.py, Model.py or "model (1).py"): the first half of submission.py's work, which then
reads and checks the file statically (submission.read_upload).

The upload is untrusted too. The file graded must be a regular file of the upload with a
single name: symbolic links (a link to the staff reference would earn its score, a link to a
root-only file would print it), hard links, devices and FIFOs are refused, and so is a path
that resolves outside the upload. From a zip only the chosen member is unpacked, never a
link, an absolute path or one with '..', and never more than MAX_MODEL_BYTES.
"""

import os
import re
import stat
import tempfile
import zipfile
from dataclasses import dataclass
from typing import Optional

from autograder.judge import messages
from autograder.sandbox import readback

NAME = re.compile(r'^model(\s*\(\d+\)|[-_ ]\d+|[-_ ]?copy)?\.py$', re.IGNORECASE)
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
        return messages.symlink(rel)
    if not stat.S_ISREG(st.st_mode):
        return messages.not_regular(rel)
    if in_upload and st.st_nlink > 1:
        return messages.hard_link(rel, st.st_nlink)
    if max_bytes is not None and st.st_size > max_bytes:
        return too_large(rel, st.st_size, max_bytes)
    return None


def too_large(rel, size, max_bytes=MAX_MODEL_BYTES):
    """The refusal of an oversized model.py, in units people read (bytes where they tell the sizes apart)."""
    shown = '%.1f MB' % (size / 1024 ** 2) if size >= 10 * 1024 ** 2 else '%d bytes' % size
    return ('%s is %s; a model.py may have at most %d bytes (%g MB; the handout\'s is about 30 KB): upload the source '
            'file alone, without saved weights or data in it' % (rel, shown, max_bytes, max_bytes / 1024 ** 2))


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


def choose(names, same_as_best):
    """
    (best name, why, also, problem) among the candidate names (relative paths), given
    `same_as_best(name)`: whether that file's content equals the best one's. Identical copies
    are harmless. A different file is refused when nothing but the alphabet would decide
    (same place in the ranking: mingpt/model.py, then model.py, then other names; shallower
    first); otherwise `why` says why the best one was graded and `also` names the others,
    each marked as the same content or not graded.
    """
    ranked = sorted(names, key=_rank)
    best, others = ranked[0], ranked[1:]
    differing = [n for n in others if not same_as_best(n)]
    tied = [n for n in differing if _rank(n)[:3] == _rank(best)[:3]]
    if tied:
        listed = [best] + tied[:MAX_LISTED - 1]
        more = len(tied) + 1 - len(listed)
        return None, None, '', messages.several_models(len(tied) + 1, listed,
                                                       messages.and_others(more) if more > 0 else '')
    also = ''
    for group, words in (([n for n in others if n not in differing], messages.ALSO_SAME),
                         (differing, messages.ALSO_DIFFERENT)):
        if group:
            more = len(group) - MAX_LISTED
            also += words % (', '.join(group[:MAX_LISTED]) + (messages.and_others(more) if more > 0 else ''))
    # why it won, by its class (_rank's first two fields)
    why = messages.WHY_GRADED[_rank(best)[:2]] if differing else None
    return best, why, also, None


def _same_file_content(paths):
    """same(name) for candidate files on disk: equal sizes, then equal bytes (each at most MAX_MODEL_BYTES read)."""
    def read(path):
        try:
            with open(path, 'rb') as f:
                return f.read(MAX_MODEL_BYTES + 1)
        except OSError:
            return None
    cache = {}

    def same(best, name):
        if best not in cache:
            cache[best] = read(paths[best])
        try:
            if os.lstat(paths[name]).st_size != os.lstat(paths[best]).st_size:
                return False
        except OSError:
            return False
        return read(paths[name]) == cache[best]
    return same


def _zip_members(zip_path):
    """
    (candidate names, unsafe names, {name: (crc, size)}, names of zips inside) of a zip, from its
    directory alone; refuses oversized directories.
    """
    with open(zip_path, 'rb') as f:
        readback.check_zip_directory(f, os.fstat(f.fileno()).st_size, MAX_ZIP_MEMBERS, os.path.basename(zip_path))
        with zipfile.ZipFile(f) as z:
            found, unsafe, digests, inner = [], [], {}, []
            for info in z.infolist():
                name = info.filename
                parts = name.split('/')
                if info.is_dir() or any(p.startswith('__MACOSX') for p in parts):
                    continue
                if parts[-1].lower().endswith('.zip'):
                    inner.append(name)
                if not NAME.match(parts[-1]):
                    continue
                if name.startswith('/') or '..' in parts or '\\' in name or ':' in parts[0]:
                    unsafe.append(name)
                    continue
                found.append(name)
                digests[name] = (info.CRC, info.file_size)
    return found, unsafe, digests, inner


def _extract(zip_path, name, into):
    """Unpack the one member `name` (a regular file of at most MAX_MODEL_BYTES) to `into`/name."""
    with zipfile.ZipFile(zip_path) as z:
        info = z.getinfo(name)
        kind = stat.S_IFMT(info.external_attr >> 16)
        if kind == stat.S_IFLNK:
            raise ValueError(messages.zip_symlink(name))
        if kind not in (0, stat.S_IFREG):
            raise ValueError(messages.zip_not_regular(name))
        if info.file_size > MAX_MODEL_BYTES:
            raise ValueError(too_large(name, info.file_size))
        with z.open(info) as src:
            data = src.read(MAX_MODEL_BYTES + 1)
        if len(data) > MAX_MODEL_BYTES:
            raise ValueError(messages.zip_unpacks_too_large(name, MAX_MODEL_BYTES))
    target = os.path.join(into, *name.split('/'))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, 'wb') as dst:
        dst.write(data)
    return target


def _from_zips(zips, folder, scratch):
    """The best model.py over all zips, unpacked alone; (Located, or None when the zips hold none)."""
    found, unsafe, digests, inner = {}, [], {}, []
    for z in zips:
        label = os.path.relpath(z, folder) if os.path.isdir(folder) else os.path.basename(z)
        problem = _unsafe(z, label, in_upload=True, max_bytes=None) if os.path.isdir(folder) else None
        if problem:
            return Located(None, '', problem)
        try:
            names, bad, crcs, zips_inside = _zip_members(z)
        except readback.Unreadable as e:   # its directory refused: a fact, worded here
            return Located(None, '', messages.could_not_read(os.path.basename(z),
                                                             messages.unreadable(e.reason, e.figures)))
        except (zipfile.BadZipFile, ValueError, OSError) as e:
            return Located(None, '', messages.could_not_read(os.path.basename(z), e))
        for n in names:
            found[os.path.basename(z) + '/' + n] = (z, n)
            digests[os.path.basename(z) + '/' + n] = crcs[n]
        unsafe += bad
        inner += ['%s/%s' % (os.path.basename(z), n) for n in zips_inside]
    if not found:
        if inner:
            return Located(None, '', messages.zip_in_zip(inner[0]))
        return None
    first = sorted(found, key=_rank)[0]   # the one choose() ranks first
    best, why, also, problem = choose(list(found), lambda name: digests[name] == digests[first])
    if problem:
        return Located(None, '', problem)
    zip_path, member = found[best]
    try:
        path = _extract(zip_path, member, os.path.join(scratch, os.path.basename(zip_path)))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        return Located(None, '', messages.could_not_read(os.path.basename(zip_path), e))
    note = messages.graded_from_zip(best, why, also)
    if unsafe:
        note += messages.unsafe_members(unsafe, unsafe[:MAX_LISTED])
    return Located(path, note)


def locate(path, scratch=None):
    """The model.py to grade and a sentence saying what was picked; a problem when the upload is refused."""
    if not os.path.lexists(path):
        return Located(None, '', messages.no_submission(path))
    if os.path.islink(path):
        return Located(None, '', messages.submission_symlink(os.path.basename(path)))
    scratch = scratch or tempfile.mkdtemp(prefix='hw1-upload-')
    if not os.path.isdir(path):
        if path.lower().endswith('.zip'):
            return _from_zips([path], path, scratch) or Located(
                None, '', messages.no_model(what_the_zip_holds(path)))
        problem = _unsafe(path, os.path.basename(path), in_upload=False)
        return Located(None, '', problem) if problem else Located(path, messages.graded(os.path.basename(path)))
    found, linked_dirs = _candidates(path)
    if found:
        paths = {os.path.relpath(p, path).replace(os.sep, '/'): p for p in found}
        best_path_rel = sorted(paths, key=_rank)[0]   # the one choose() ranks first
        best, best_path = best_path_rel, paths[best_path_rel]
        problem = _unsafe(best_path, best, in_upload=True)
        if problem is None and not _inside(best_path, path):
            problem = messages.outside_upload(best)
        if problem:
            return Located(None, '', problem)
        same = _same_file_content(paths)
        best, why, also, problem = choose(list(paths), lambda name: same(best_path_rel, name))
        if problem:
            return Located(None, '', problem)
        return Located(best_path, messages.graded(best, why, also))
    zips = sorted(os.path.join(r, f) for r, _, fs in os.walk(path) for f in fs if f.lower().endswith('.zip'))
    located = _from_zips(zips, path, scratch) if zips else None
    if located is not None:
        return located
    if linked_dirs:
        return Located(None, '', messages.linked_folder(os.path.relpath(linked_dirs[0], path)))
    return Located(None, '', messages.no_model(what_was_found(path)))


def what_was_found(folder):
    """'the upload holds writeup.pdf, notes.txt': the first few files of an upload without a model.py, in words."""
    names = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.'))[:20]
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(root, f), folder).replace(os.sep, '/')
            if rel.isprintable() and not rel.startswith('.'):
                names.append(rel[:80])
        if len(names) > MAX_LISTED:
            break
    return _holds('the upload', names)


def what_the_zip_holds(zip_path):
    """'the zip holds hw1/writeup.pdf': the first few files of an uploaded zip without a model.py, from its
    directory."""
    try:
        with zipfile.ZipFile(zip_path) as z:
            names = [i.filename[:80] for i in z.infolist()[:MAX_ZIP_MEMBERS] if not i.is_dir()
                     and not i.filename.startswith('__MACOSX') and i.filename.isprintable()]
    except (zipfile.BadZipFile, OSError, ValueError):
        return messages.NOT_A_ZIP
    return _holds('the zip', names)


def _holds(what, names):
    return messages.holds(what, names, names[:MAX_LISTED], len(names) > MAX_LISTED)
