"""
Reads back what a probe process left in its out/ folder, trusting no byte of it (the child is
student code, which can write those files itself, or put links, FIFOs and bombs where they
belong).

- The harness calls this only after every process of the sandbox user and of the grading's
  cgroup is dead (users.kill_and_confirm): nothing can change a file while it is read.
- Files are opened with O_NOFOLLOW|O_NONBLOCK relative to the out/ folder; only regular files
  are read (a FIFO or a link is refused, never waited on), and each is read ONCE, at most its
  cap plus one byte, whatever fstat says; everything below parses that copy in memory.
- Reports are JSON without NaN/Infinity, checked against child/report_schema.py's schema and caps.
- Arrays come from a .npz whose members must be STORED (no decompression, so no bomb), with
  a central directory of capped size, members named after the keys the probe may return,
  and .npy headers (numeric dtype, rank, declared size matching the stored bytes) checked
  before a byte of data is read. An array much larger than the expected one of its key is
  not read at all: it is reported as a wrong shape of that case, not loaded.
- Any exception while reading one probe (MemoryError, RecursionError, zip/struct/Value/OS
  errors...) makes that probe 'invalid'; it never reaches the grading.
- Nothing here is worded for the student: a refusal is a fact (ProbeResult.refusal, an array's
  in ProbeResult.refused: a reason code and its figures) that the harness words
  (judge/messages.py, section "a probe's outputs refused").
"""

import io
import json
import math
import os
import re
import stat
import struct
import zipfile
from dataclasses import dataclass, field
from typing import Dict

import numpy as np

from autograder.contract import report_schema

UNCHECKED_MAX_ELEMENTS = 1 << 24   # per array when no expected shapes are given (regenerate, on the reference)


def element_bound(expected_size):
    """The most elements read for a key whose reference array has `expected_size`; larger is a wrong shape."""
    return max(8 * int(expected_size), 4096)


@dataclass
class ProbeResult:
    status: str                      # ok | error | not_implemented | timeout | crashed | missing | invalid | skipped
    message: str = ''
    arrays: Dict[str, np.ndarray] = field(default_factory=dict)
    info: dict = field(default_factory=dict)
    seconds: float = 0.0
    # key -> why its array was not read (too large): {'shape', 'count', 'expected' (None: no bound given)}
    refused: Dict[str, dict] = field(default_factory=dict)
    # facts the harness measured from outside the probe's process (trusted): cpu_seconds, wall_seconds,
    # max_rss_bytes, ended (exit | signal | timeout | wall | memory | oom | budget | link), exit_code, signal,
    # link (the handler's log),
    # hang ({'frames': [...]}: where model.py was when a deadline or wall cap stopped it; absent without a dump)
    harness: dict = field(default_factory=dict)
    # True: the process's outputs were not read (it was stopped, crashed, or exited leaving none);
    # `harness` says how it ended and the harness words it (judge/messages.py), `message` is
    # empty until then
    unread: bool = False
    # why the outputs the process left were refused, as facts ({} when they were read): 'reason' (a
    # code of Unreadable, 'folder', 'status', or 'error' for any other exception) and its figures;
    # `message` is empty until the harness words it (judge/messages.py)
    refusal: dict = field(default_factory=dict)

    @property
    def hung(self):
        """The process did not finish: stopped past its CPU deadline, its wall cap, its memory cap or the grading's
        budget (probe.HUNG), or not started because that budget was spent. One status for all of them, so that a
        loop that allocates as it goes is placed, named and charged like one that only spins."""
        return self.status == 'timeout'


class Unreadable(ValueError):
    """A file of the child's that the harness refuses to read: `reason` (a code) and its `figures`, which
    the harness words (judge/messages.py); `error`: the exception name the wording gives (default its own)."""

    def __init__(self, reason, error=None, **figures):
        super().__init__(reason)
        self.reason, self.error, self.figures = reason, error or type(self).__name__, figures

    def fact(self):
        """The refusal as ProbeResult.refusal holds it."""
        return dict(self.figures, reason=self.reason, error=self.error)


# ----------------------------------------------------------------------------- files

def open_out(out_dir):
    return os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def open_regular(dir_fd, name, limit):
    """A binary file object of out/<name>, or None when it does not exist; Unreadable unless a regular file
    (its size is checked here for a clear message only: read_bytes never reads more than `limit` + 1)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:  # ELOOP: a symbolic link; EACCES, ENXIO...
        raise Unreadable('link', name=name, strerror=e.strerror)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable('not_regular', name=name)
        if st.st_size > limit:
            raise Unreadable('too_large', name=name, size=st.st_size, limit=limit)
        f = os.fdopen(fd, 'rb')
    except BaseException:
        os.close(fd)
        raise
    return f


def read_bytes(dir_fd, name, limit):
    f = open_regular(dir_fd, name, limit)
    if f is None:
        return None
    with f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise Unreadable('grew', name=name, limit=limit)
    return data


# ----------------------------------------------------------------------------- reports

def _refuse_constant(name):
    raise Unreadable('constant', 'ValueError', name=name)


def _finite_float(text):
    x = float(text)
    if not math.isfinite(x):
        raise Unreadable('out_of_range', 'ValueError', number=text[:40])
    return x


def parse_report(raw):
    info = json.loads(raw.decode('utf-8'), parse_constant=_refuse_constant, parse_float=_finite_float)
    return report_schema.check_report(info)


# ----------------------------------------------------------------------------- arrays

EOCD = struct.Struct('<4s4H2LH')       # end of central directory record
EOCD_SIG, ZIP64_LOCATOR_SIG = b'PK\x05\x06', b'PK\x06\x07'


def check_zip_directory(f, size, max_members, what=None):
    """
    Refuse a zip before zipfile parses it (which holds its whole central directory in memory):
    more than `max_members` members, more than 1 KB of directory per member, or a zip64 archive.
    `what`: the file's name in a refusal (None: the probe's arrays file).
    """
    if size < EOCD.size:
        raise Unreadable('not_zip', what=what)
    # the same search as zipfile._EndRecData: the record at the very end, else the last signature
    f.seek(size - EOCD.size)
    last = f.read(EOCD.size)
    if last[:4] == EOCD_SIG and last[-2:] == b'\0\0':
        pos, record = size - EOCD.size, last
    else:
        start = max(0, size - EOCD.size - 65535)
        f.seek(start)
        tail = f.read(size - start)
        i = tail.rfind(EOCD_SIG)
        if i < 0 or len(tail) - i < EOCD.size:
            raise Unreadable('not_zip', what=what)
        pos, record = start + i, tail[i:i + EOCD.size]
    _, _, _, _, count, cd_size, _, _ = EOCD.unpack(record)
    if count > max_members or cd_size > max_members * 1024:
        raise Unreadable('zip_directory', what=what, count=count, directory_bytes=cd_size,
                         most=max_members)
    if pos >= 20:
        f.seek(pos - 20)
        if f.read(4) == ZIP64_LOCATOR_SIG:
            raise Unreadable('zip64', what=what)
    f.seek(0)


def _header(member):
    version = np.lib.format.read_magic(member)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(member)
    if version == (2, 0):
        return np.lib.format.read_array_header_2_0(member)
    raise Unreadable('npy_version', version=version)


def read_npz(f, size, expected=None):
    """
    ({key: array}, {key: why it was not read}) from an open .npz of `size` bytes. `expected`:
    {key: reference shape} of the keys the probe may return (None: any key, generic bound).
    Raises (Unreadable, zipfile.BadZipFile, ValueError, ...) for anything outside the format.
    """
    check_zip_directory(f, size, report_schema.MAX_ARRAYS)
    arrays, refused = {}, {}
    with zipfile.ZipFile(f) as z:
        infos = z.infolist()
        if len(infos) > report_schema.MAX_ARRAYS:
            raise Unreadable('members', count=len(infos), most=report_schema.MAX_ARRAYS)
        for info in infos:
            if not info.filename.endswith('.npy'):
                raise Unreadable('member', name=info.filename[:100])
            key = info.filename[:-len('.npy')]
            if key in arrays or key in refused:
                raise Unreadable('twice', key=key[:100])
            if expected is not None and key not in expected:
                raise Unreadable('unexpected_array', key=key[:100], keys=sorted(expected))
            if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size or info.flag_bits & 0x1:
                raise Unreadable('compressed', key=key[:100])
            with z.open(info) as member:
                shape, fortran, dtype = _header(member)
                if dtype.kind not in report_schema.NUMERIC_KINDS or dtype.fields is not None \
                        or dtype.subdtype is not None or dtype.itemsize > report_schema.MAX_ITEMSIZE:
                    raise Unreadable('dtype', key=key[:100], dtype=str(dtype))
                if len(shape) > report_schema.MAX_NDIM or not all(isinstance(n, int) and n >= 0 for n in shape):
                    raise Unreadable('rank', key=key[:100], shape=str(shape)[:100])
                count = math.prod(shape)
                nbytes = count * dtype.itemsize
                if nbytes != info.file_size - member.tell():
                    raise Unreadable('stored', key=key[:100], shape=tuple(shape), nbytes=nbytes,
                                     stored=info.file_size - member.tell())
                bound = UNCHECKED_MAX_ELEMENTS if expected is None else element_bound(math.prod(expected[key]))
                if count > bound:
                    refused[key] = {'shape': tuple(shape), 'count': count,
                                    'expected': None if expected is None else tuple(expected[key])}
                    continue
                data = member.read(nbytes)
                if len(data) != nbytes:
                    raise Unreadable('truncated', key=key[:100])
                flat = np.frombuffer(data, dtype=dtype, count=count)
                arrays[key] = np.array(flat.reshape(shape, order='F' if fortran else 'C'), order='C')
    return arrays, refused


# ----------------------------------------------------------------------------- where a hang was

MAX_HANG_FRAMES = 20
_FRAME = re.compile(r'^\s*File "(.*)", line (\d+) in (\S{1,200})\s*$')


def parse_hang(text):
    """
    {'frames': [{'file': 'model.py', 'line': N, 'function': name}, ...]} (innermost LAST, at most
    MAX_HANG_FRAMES) from a faulthandler dump, or None. Only the frames of the submission's model.py
    are kept, of the thread that ran the probe (the one whose stack holds runner.py's `run`; else the
    first thread with a frame of model.py). Untrusted text: used for a message only.
    """
    threads, frames = [], None
    for line in text.splitlines():
        if line.startswith(('Current thread', 'Thread', 'Stack')):
            frames = []
            threads.append(frames)
            continue
        m = _FRAME.match(line)
        if m and frames is not None:
            frames.append((m.group(1), int(m.group(2)), m.group(3)))
    main = [t for t in threads if any(f.endswith('runner.py') and fn == 'run' for f, _, fn in t)]
    mine = [[f for f in t if f[0].replace('\\', '/').endswith('mingpt/model.py')] for t in main + threads]
    mine = [t for t in mine if t]
    if not mine:
        return None
    innermost_last = list(reversed(mine[0]))[-MAX_HANG_FRAMES:]   # faulthandler writes the most recent call first
    return {'frames': [{'file': 'model.py', 'line': line, 'function': fn} for _, line, fn in innermost_last]}


def read_hang(out_dir):
    """The hang location from out/<report_schema.HANG_DUMP> (read once, capped, never followed), or None."""
    try:
        dir_fd = open_out(out_dir)
    except OSError:
        return None
    try:
        raw = read_bytes(dir_fd, report_schema.HANG_DUMP, report_schema.MAX_HANG_DUMP)
        return parse_hang(raw.decode('utf-8', 'replace')) if raw else None
    except Exception:  # noqa: BLE001  a bad dump only costs the line in the message
        return None
    finally:
        os.close(dir_fd)


# ----------------------------------------------------------------------------- one probe

def read_probe(out_dir, probe_id, expected=None, max_report_bytes=256 * 1024, max_arrays_bytes=64 << 20):
    """
    The probe's ProbeResult, or None when it left no report. Never raises. Each file is read once
    into memory (bounded) and parsed from that copy: a writer still alive could not change what is
    parsed, and none is (the caller killed them all first).
    """
    try:
        dir_fd = open_out(out_dir)
    except OSError as e:
        return ProbeResult('invalid', refusal={'reason': 'folder', 'strerror': e.strerror})
    try:
        raw = read_bytes(dir_fd, report_schema.report_name(probe_id), max_report_bytes)
        if raw is None:
            return None
        info = parse_report(raw)
        arrays, refused = {}, {}
        data = read_bytes(dir_fd, report_schema.arrays_name(probe_id), max_arrays_bytes)
        if data is not None:
            arrays, refused = read_npz(io.BytesIO(data), len(data), expected)
    except Exception as e:  # noqa: BLE001  whatever the child's files do, only this probe is lost
        return ProbeResult('invalid', refusal=refusal(e))
    finally:
        os.close(dir_fd)
    status = info.get('status', 'invalid')
    if status not in report_schema.STATUSES:
        return ProbeResult('invalid', '', arrays, info, float(info.get('seconds', 0.0)), refused,
                           refusal={'reason': 'status', 'status': status[:50]})
    return ProbeResult(status, info.get('message', ''), arrays, info,
                       float(info.get('seconds', 0.0)), refused)


def refusal(error):
    """An exception met while reading a probe's outputs, as a fact (ProbeResult.refusal): an
    Unreadable's code and figures, else the exception's name and text (cut: it may be the child's)."""
    if isinstance(error, Unreadable):
        return error.fact()
    return {'reason': 'error', 'error': type(error).__name__, 'text': str(error)[:300]}
