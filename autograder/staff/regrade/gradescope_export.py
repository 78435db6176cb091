"""
Reads a Gradescope "Export Submissions" download in every form a TA may hand to `batch`:
the .zip as downloaded, the folder it unzips to, or the inner `assignment_<id>_export/`
folder, which holds one `submission_<id>/` folder per submission and `submission_metadata.yml`.

The metadata is YAML written by Ruby: keys are symbols (`:submitters:`, `:name:`, `:sid:`,
`:email:`, `:created_at:`, `:score:`, `:results:`, `:history:`). It is read leniently (unknown
`!ruby/...` tags become plain values, SIDs may be numbers, empty or null, names carry accents,
a group submission lists several submitters) and strictly where it matters: a file that is
not YAML, or not a mapping of submissions, is refused with one sentence naming the line.
Entries without a folder, and folders without an entry, are reported, never dropped.
"""

import hashlib
import os
import shutil
import zipfile
import zlib
from dataclasses import dataclass, field
from typing import Dict, List

import yaml

METADATA = 'submission_metadata.yml'
MAX_UNZIPPED_BYTES = 4 * 2 ** 30
UNZIPPED_MARK = '.hw1-unzipped-from'


class ExportError(ValueError):
    """The export cannot be read; the message is one sentence for the person who ran the command."""


@dataclass
class Person:
    name: str = ''
    email: str = ''
    sid: str = ''


@dataclass
class Entry:
    """One submission of the metadata."""
    submission: str
    submitters: List[Person] = field(default_factory=list)
    created_at: str = ''
    score: str = ''


# ----------------------------------------------------------------------------- locating the export


def _looks_like_export(folder):
    return os.path.isfile(os.path.join(folder, METADATA)) or any(
        n.startswith('submission_') and os.path.isdir(os.path.join(folder, n)) for n in os.listdir(folder))


def find_export(path):
    """The folder holding submission_*/ and the metadata: `path` itself, or its one export folder inside."""
    if not os.path.isdir(path):
        raise ExportError('%s is not a folder or a .zip' % path)
    if _looks_like_export(path):
        return path
    inner = [os.path.join(path, n) for n in sorted(os.listdir(path))
             if os.path.isdir(os.path.join(path, n)) and not n.startswith(('.', '__MACOSX'))
             and _looks_like_export(os.path.join(path, n))]
    if len(inner) == 1:
        return inner[0]
    if len(inner) > 1:
        raise ExportError('%s holds several exports (%s); give one of them'
                          % (path, ', '.join(os.path.basename(p) for p in inner)))
    raise ExportError('no Gradescope export in %s: expected %s and submission_<id>/ folders, or one '
                      'assignment_<id>_export/ folder holding them' % (path, METADATA))


def _sha256(path):
    h = hashlib.sha256()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            h.update(block)
    return h.hexdigest()


def unzip(zip_path):
    """
    Unpack the downloaded zip beside it (EXPORT.zip -> EXPORT/) once; a later run reuses the folder
    (its results.json files are what resume needs). Returns the folder.
    """
    target = os.path.splitext(os.path.abspath(zip_path))[0]
    mark = os.path.join(target, UNZIPPED_MARK)
    digest = _sha256(zip_path)
    if os.path.isdir(target):
        if os.path.isfile(mark) and open(mark).read().strip() == digest:
            return target
        raise ExportError('%s already exists and was not unpacked from this zip; move it away or give the folder'
                          % target)
    try:
        with zipfile.ZipFile(zip_path) as z:
            infos = z.infolist()
            if sum(i.file_size for i in infos) > MAX_UNZIPPED_BYTES:
                raise ExportError('%s unpacks to more than %d GB' % (zip_path, MAX_UNZIPPED_BYTES >> 30))
            tmp = target + '.partial'
            shutil.rmtree(tmp, ignore_errors=True)
            for info in infos:
                parts = info.filename.replace('\\', '/').split('/')
                if info.filename.startswith('/') or '..' in parts:
                    raise ExportError('%s holds an unsafe path %r' % (zip_path, info.filename))
                if info.is_dir():
                    continue
                dest = os.path.join(tmp, *[p for p in parts if p])
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with z.open(info) as src, open(dest, 'wb') as dst:
                    while True:
                        block = src.read(1 << 20)
                        if not block:
                            break
                        dst.write(block)
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
        # a truncated or damaged download: nothing half-unpacked is left, nothing earlier is touched
        shutil.rmtree(target + '.partial', ignore_errors=True)
        raise ExportError('%s is a damaged zip (%s); download the export again' % (zip_path, e))
    os.makedirs(tmp, exist_ok=True)
    with open(os.path.join(tmp, UNZIPPED_MARK), 'w') as f:
        f.write(digest + '\n')
    os.replace(tmp, target)
    return target


def open_export(path):
    """The inner export folder for a zip, an outer folder or the inner folder itself."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        if not zipfile.is_zipfile(path):
            raise ExportError('%s is neither a folder nor a zip (a download cut short reads like this too)' % path)
        path = unzip(path)
    elif not os.path.exists(path):
        raise ExportError('%s does not exist' % path)
    return find_export(path)


# ----------------------------------------------------------------------------- the metadata


class _LenientLoader(yaml.SafeLoader):
    """safe_load that turns tags it does not know (Ruby objects, symbols) into plain values."""


def _untagged(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


class _Duplicate(Exception):
    """A submission key written twice in the metadata (key, line)."""


def _mapping_without_duplicates(loader, node, deep=False):
    """A mapping; a key written twice (a damaged or hand-edited export) is refused, never silently dropped."""
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (str, int)) and key in seen and node is loader._top:
            raise _Duplicate(key, key_node.start_mark.line + 1)
        if isinstance(key, (str, int)):
            seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


class _TopTracking(_LenientLoader):
    """Remembers the document's top node, where a duplicate key is a duplicate submission."""

    def construct_document(self, node):
        self._top = node
        return super().construct_document(node)


_LenientLoader.add_multi_constructor('!', _untagged)
_LenientLoader.add_multi_constructor('tag:', _untagged)


def _plain(value):
    """Ruby symbols as keys (':submitters') become plain names; nested values too."""
    if isinstance(value, dict):
        return {str(k).lstrip(':'): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def text(value):
    """A cell for the CSV: None -> '', 900000001 -> '900000001', 9.0e8 -> '900000000', strings stripped."""
    if value is None:
        return ''
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def number(value):
    try:
        return '%g' % round(float(value), 2)
    except (TypeError, ValueError):
        return text(value)


def _person(raw):
    if not isinstance(raw, dict):
        return Person(name=text(raw))
    return Person(text(raw.get('name')), text(raw.get('email')), text(raw.get('sid')))


_TopTracking.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def parse_metadata(source, where=METADATA):
    """{submission folder: Entry} from the YAML text; ExportError with one sentence when it is unusable."""
    try:
        data = yaml.load(source, Loader=_TopTracking)
    except _Duplicate as e:
        raise ExportError('%s lists %s twice (line %d); download the export again' % ((where,) + e.args))
    except yaml.YAMLError as e:
        mark = getattr(e, 'context_mark', None) or getattr(e, 'problem_mark', None)  # where the bad part starts
        at = ' line %d' % (mark.line + 1) if mark is not None else ''
        problem = '; '.join(x for x in (getattr(e, 'context', None), getattr(e, 'problem', None)) if x) \
            or str(e).splitlines()[0]
        raise ExportError('%s%s is not valid YAML (%s); download the export again' % (where, at, problem))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ExportError('%s is not a mapping of submission folders to their submitters' % where)
    entries = {}
    for key, raw in data.items():
        raw = _plain(raw) if isinstance(raw, dict) else {}
        submitters = raw.get('submitters')
        if isinstance(submitters, dict):      # a single submitter written as a mapping
            submitters = [submitters]
        people = [_person(p) for p in submitters or [] if p is not None]
        name = text(key).lstrip(':')
        entries[name] = Entry(name, people, text(raw.get('created_at')), number(raw.get('score')))
    return entries


def read_metadata(export_dir):
    """{submission folder: Entry}; {} when the export has no metadata file."""
    path = os.path.join(export_dir, METADATA)
    if not os.path.isfile(path):
        return {}
    with open(path, 'rb') as f:
        raw = f.read()
    try:
        source = raw.decode('utf-8-sig')
    except UnicodeDecodeError as e:
        raise ExportError('%s is not UTF-8 text (byte %d); download the export again' % (path, e.start))
    return parse_metadata(source, path)


@dataclass
class Export:
    folder: str                          # the inner export folder (submission_*/ and the metadata)
    metadata: Dict[str, Entry]
    submissions: List[str]               # folders to grade
    missing: List[str]                   # metadata entries without a folder
    unlisted: List[str]                  # folders without a metadata entry
    duplicates: Dict[str, List[str]] = field(default_factory=dict)   # a student (email or SID) -> their submissions


def duplicate_students(metadata):
    """{student: [submissions]} for every student (by email, else SID) who is a submitter of several submissions."""
    seen = {}
    for sub, entry in sorted(metadata.items()):
        for p in entry.submitters:
            who = p.email.lower() or p.sid
            if who and sub not in seen.setdefault(who, []):
                seen[who].append(sub)
    return {who: subs for who, subs in seen.items() if len(subs) > 1}


def read(path):
    """The export at `path` (zip, outer folder or inner folder), its metadata and what does not match."""
    folder = open_export(path)
    metadata = read_metadata(folder)
    folders = sorted(n for n in os.listdir(folder)
                     if os.path.isdir(os.path.join(folder, n)) and not n.startswith(('.', '__MACOSX')))
    listed = [n for n in folders if n in metadata]
    unlisted = [n for n in folders if n not in metadata and n.startswith('submission_')]
    missing = sorted(n for n in metadata if n not in folders)
    return Export(folder, metadata, sorted(listed + unlisted), missing, unlisted if metadata else [],
                  duplicate_students(metadata))


def submission_sha256(sub_dir, ignore=('results.json', 'loss_curve.png', 'behaviour.json')):
    """Hash of what the student submitted (every file but the grader's own outputs and dot files)."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(sub_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith('.'))
        for name in sorted(files):
            if name.startswith('.') or (root == sub_dir and name in ignore):
                continue
            path = os.path.join(root, name)
            h.update(os.path.relpath(path, sub_dir).encode() + b'\0' + _sha256(path).encode() + b'\n')
    return h.hexdigest()
