"""
Fast tests of what the harness refuses to trust, without running student code: the reading of
probe outputs (autograder/sandbox/readback.py: bounded bytes read once), the report schema and caps
(child/report_schema.py), the judges' shape guard, and the checks of an upload and of its source
(autograder/judge/submission.py). tests/corpora/test_hostile.py runs the same attacks end to end.
"""

import io
import json
import os
import stat
import struct
import sys
import zipfile

import numpy as np
import pytest

from grader_runs import REPO
from autograder.judge import messages, probe_job, submission
from autograder.judge.areas import guard_shapes
from autograder.judge.verdicts import verdict_for
from autograder.contract import report_schema
from autograder.sandbox import readback
from autograder.sandbox.readback import ProbeResult

REFERENCE_MODEL = os.path.join(REPO, 'reference', 'mingpt', 'model.py')
SPEC = {'a': (2, 3), 'b/logits': (4,)}


# ----------------------------------------------------------------------------- helpers

def out_dir(tmp_path):
    out = tmp_path / 'job' / 'out'
    out.mkdir(parents=True)
    return str(out), str(out)


def npy_bytes(array):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def write_npz(path, members, compression=zipfile.ZIP_STORED):
    """members: {name: bytes} written as they are (the child can write any zip)."""
    with zipfile.ZipFile(path, 'w', compression) as z:
        for name, data in members.items():
            z.writestr(name, data)


def write_probe(out, pid='p', report=None, raw_report=None):
    with open(os.path.join(out, pid + '.json'), 'w') as f:
        f.write(raw_report if raw_report is not None else json.dumps(report or {'status': 'ok', 'seconds': 0.5}))


def read_probe(*args, **kw):
    """readback's result as the judges read it: readback reports a refusal as a fact, the harness's
    loop words it (messages.py)."""
    return probe_job.worded('p', readback.read_probe(*args, **kw), None)


def read(job, pid='p', spec=SPEC):
    return read_probe(job, pid, spec)


# ----------------------------------------------------------------------------- reading files

def test_honest_outputs_are_read(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out)
    with open(os.path.join(out, 'p.npz'), 'wb') as f:
        np.savez(f, a=np.arange(6, dtype=np.float32).reshape(2, 3), **{'b/logits': np.ones(4)})
    r = read(job)
    assert r.status == 'ok' and r.seconds == 0.5 and r.refused == {}
    assert r.arrays['a'].tolist() == [[0, 1, 2], [3, 4, 5]] and r.arrays['b/logits'].dtype == np.float64


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    job, out = out_dir(tmp_path)
    os.mkfifo(os.path.join(out, 'p.json'))
    r = read(job)
    assert r.status == 'invalid' and 'not a regular file' in r.message
    os.unlink(os.path.join(out, 'p.json'))
    write_probe(out)
    os.mkfifo(os.path.join(out, 'p.npz'))
    assert 'p.npz is not a regular file' in read(job).message


def test_a_link_is_not_followed(tmp_path):
    job, out = out_dir(tmp_path)
    secret = tmp_path / 'secret.json'
    secret.write_text('{"status": "ok"}')
    os.symlink(str(secret), os.path.join(out, 'p.json'))
    r = read(job)
    assert r.status == 'invalid' and 'link' in r.message


def test_a_file_is_read_once_and_never_past_its_cap_whatever_fstat_says(tmp_path, monkeypatch):
    job, out = out_dir(tmp_path)
    write_probe(out, raw_report='{"status": "ok", "message": "%s"}' % ('x' * 5000))
    r = read_probe(job, 'p', SPEC, max_report_bytes=1024)
    assert r.status == 'invalid' and 'more than the 1024 allowed' in r.message
    # a size check that lies (a file grown after it, as an inotify-timed append would): the read stops at the cap
    real_fstat = os.fstat
    monkeypatch.setattr(readback.os, 'fstat',
                        lambda fd: os.stat_result((stat.S_IFREG | 0o600,) + tuple(real_fstat(fd))[1:6]
                                                  + (10,) + tuple(real_fstat(fd))[7:]))
    r = read_probe(job, 'p', SPEC, max_report_bytes=1024)
    assert r.status == 'invalid' and 'grew past 1024 bytes' in r.message
    reads = []
    monkeypatch.setattr(readback, 'read_npz', lambda f, size, expected: reads.append(size) or ({}, {}))
    write_probe(out)
    with open(os.path.join(out, 'p.npz'), 'wb') as f:
        f.write(b'z' * 3000)
    assert read_probe(job, 'p', SPEC).status == 'ok' and reads == [3000]   # the parser sees the copy's size


# ----------------------------------------------------------------------------- arrays

@pytest.mark.parametrize('make, words', [
    (lambda p: write_npz(p, {'a.npy': npy_bytes(np.zeros((2, 3)))}, zipfile.ZIP_DEFLATED), 'arrays must be stored'),
    (lambda p: write_npz(p, {'c.npy': npy_bytes(np.zeros(3))}), "unexpected array 'c'"),
    (lambda p: write_npz(p, {'a.txt': b'hello'}), "unexpected member 'a.txt'"),
    (lambda p: write_npz(p, {'a.npy': npy_bytes(np.array([['x', 'y', 'z']] * 2))}), 'only numbers'),
    (lambda p: write_npz(p, {'a.npy': npy_bytes(np.zeros((2, 3), complex))}), 'only numbers'),
    (lambda p: write_npz(p, {'a.npy': npy_bytes(np.zeros((2, 3)))[:-8]}), 'but stores'),
    (lambda p: open(p, 'wb').write(b'PK\x03\x04 not a zip at all'), 'not a zip archive'),
], ids=['deflated', 'unknown-key', 'not-npy', 'strings', 'complex', 'short-data', 'not-a-zip'])
def test_malformed_arrays_make_the_probe_invalid(tmp_path, make, words):
    job, out = out_dir(tmp_path)
    write_probe(out)
    make(os.path.join(out, 'p.npz'))
    r = read(job)
    assert r.status == 'invalid' and words in r.message, r.message


def write_bomb(path, mib):
    """One member that inflates to `mib` MiB of zeros after a valid .npy header, from a tiny file."""
    header = npy_bytes(np.zeros(0, np.uint8)).replace(b"'shape': (0,)", b"'shape': (%d,)" % (mib << 20))
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as z:
        with z.open('a.npy', 'w') as m:
            m.write(header)
            chunk = bytes(1 << 20)
            for _ in range(mib):
                m.write(chunk)


def test_a_decompression_bomb_is_never_inflated(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out)
    write_bomb(os.path.join(out, 'p.npz'), 64)
    assert os.path.getsize(os.path.join(out, 'p.npz')) < 1 << 20
    r = read(job)
    assert r.status == 'invalid' and 'arrays must be stored' in r.message, r.message


def test_a_corrupt_stream_is_invalid_not_an_error(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out)
    path = os.path.join(out, 'p.npz')
    for compression in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED):
        write_npz(path, {'a.npy': npy_bytes(np.arange(6.0).reshape(2, 3))}, compression)
        blob = bytearray(open(path, 'rb').read())
        start = 30 + len('a.npy') + (0 if compression == zipfile.ZIP_DEFLATED else 128)
        blob[start:start + 8] = b'\xff' * 8  # the deflate stream, or the stored data (its CRC no longer matches)
        open(path, 'wb').write(bytes(blob))
        r = read(job, spec=None if compression == zipfile.ZIP_DEFLATED else SPEC)
        assert r.status == 'invalid', r


def test_an_npy_header_declaring_8_tib_is_refused(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out)
    real = npy_bytes(np.zeros(4))
    fake = real.replace(b"'shape': (4,)", b"'shape': (1099511627776,)")
    header_len = struct.unpack('<H', fake[8:10])[0]
    fake = (fake[:8] + struct.pack('<H', header_len) + fake[10:10 + header_len].ljust(header_len)
            + fake[10 + header_len:])
    write_npz(os.path.join(out, 'p.npz'), {'b/logits.npy': fake})
    r = read(job)
    assert r.status == 'invalid' and 'declares shape (1099511627776,)' in r.message, r.message


def test_too_many_members_are_refused_before_parsing(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out)
    write_npz(os.path.join(out, 'p.npz'), {'x%d.npy' % i: b'' for i in range(report_schema.MAX_ARRAYS + 1)})
    r = read(job, spec=None)
    assert r.status == 'invalid' and 'at most %d are allowed' % report_schema.MAX_ARRAYS in r.message


def test_an_oversized_array_of_a_known_key_is_not_read_but_named(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out)
    with open(os.path.join(out, 'p.npz'), 'wb') as f:
        np.savez(f, a=np.zeros((2, 3), np.float32), **{'b/logits': np.zeros(100_000, np.int8)})
    r = read(job)
    assert r.status == 'ok' and list(r.arrays) == ['a']
    assert r.refused == {'b/logits': {'shape': (100000,), 'count': 100000, 'expected': (4,)}}
    assert messages.array_not_read(r.refused['b/logits']) == \
        'has shape (100000,) (100000 values), expected (4,): far too large, not read'


# ----------------------------------------------------------------------------- reports

@pytest.mark.parametrize('raw, words', [
    ('{"status": "ok", "seconds": 1e400}', 'out of range'),
    ('{"status": "ok", "seconds": NaN}', 'NaN'),
    ('{"status": "ok", "seconds": -Infinity}', '-Infinity'),
    ('{"status": "ok", "seconds": -3}', "field 'seconds'"),
    ('{"status": "ok", "notes": [%s]}' % ','.join('"n%d"' % i for i in range(50_000)), "field 'notes'"),
    ('{"status": "ok", "message": "%s"}' % ('m' * (report_schema.MAX_MESSAGE_CHARS + 1)), "field 'message'"),
    ('{"status": "ok", "stdout": "%s"}' % ('s' * (report_schema.MAX_STDOUT_CHARS + 1)), "field 'stdout'"),
    ('{"status": "ok", "where": [%s]}' % ','.join(['"x"'] * (report_schema.MAX_WHERE + 1)), "field 'where'"),
    ('{"status": "ok", "case_errors": {%s}}'
     % ','.join('"c%d": {}' % i for i in range(report_schema.MAX_CASE_ERRORS + 1)),
     "field 'case_errors'"),
    ('[' * 100_000 + ']' * 100_000, 'RecursionError'),
    ('{"status": "ok"', 'JSONDecodeError'),
    ('{"status": "ok", "seconds": %s}' % ('9' * 5000), 'ValueError'),
], ids=['1e400', 'nan', 'inf', 'negative', '50k-notes', 'message', 'stdout', 'where', 'case-errors', 'nesting',
        'truncated', 'huge-int'])
def test_reports_outside_the_schema_are_invalid(tmp_path, raw, words):
    job, out = out_dir(tmp_path)
    write_probe(out, raw_report=raw)
    r = read_probe(job, 'p', SPEC, max_report_bytes=1 << 20)
    assert r.status == 'invalid' and words in r.message, r.message


def test_unknown_report_fields_are_dropped_and_unknown_statuses_refused(tmp_path):
    job, out = out_dir(tmp_path)
    write_probe(out, report={'status': 'ok', 'score': 100})
    assert read(job).info == {'status': 'ok'}
    write_probe(out, report={'status': 'passed'})
    r = read(job)
    assert r.status == 'invalid' and 'unknown status' in r.message


def test_the_child_clips_its_own_report_to_the_caps():
    info = {'status': 'error', 'message': 'm' * 10_000, 'stdout': 's' * 100_000, 'where': ['w' * 1000] * 1000,
            'notes': [('kept_initial', 'n%d' % i) for i in range(100)], 'seconds': float('inf'),
            'case_errors': {'c%d' % i: {'status': 'error', 'message': 'x' * 9000, 'where': ['y'] * 500}
                            for i in range(200)}}
    clipped = report_schema.clip_report(info)
    assert report_schema.check_report(json.loads(json.dumps(clipped, allow_nan=False))) == clipped


# ----------------------------------------------------------------------------- the judges' guard

class FakeFixtures:
    profile_name = 'cpu'

    def __init__(self, expected):
        self.expected = expected

    def probe(self, probe_id):
        return self.expected

    def known_bug_outputs(self, probe_id):
        return {}


def test_guard_turns_wrong_and_oversized_shapes_into_case_failures():
    fx = FakeFixtures({'mha/base': np.zeros((2, 3)), 'mha/future': np.zeros((2, 3)), 'gqa/base': np.zeros((2, 3))})
    result = ProbeResult('ok', arrays={'mha/base': np.zeros((2, 3)), 'mha/future': np.zeros((2, 4)),
                                       'extra': np.zeros(1000)},
                         refused={'gqa/base': {'shape': (9999999,), 'count': 9999999, 'expected': (2, 3)}})
    guarded = guard_shapes('causality', result, fx)
    assert list(guarded.arrays) == ['mha/base']
    errors = guarded.info['case_errors']
    assert errors['mha']['message'] == 'mha/future has shape (2, 4), expected (2, 3)'
    assert errors['gqa']['status'] == 'shape' and 'expected (2, 3)' in errors['gqa']['message']
    assert 'far larger than any output' in errors['extra']['message']


def test_judging_a_huge_generate_output_is_fast():
    """top-k over millions of positions used to loop in Python: the guard keeps it from the harness."""
    import time
    from autograder import GRADING_YAML
    from autograder.judge import config, fixtures
    grading = config.load(GRADING_YAML)
    fx = fixtures.load(grading, 'cpu', check=False)
    n = 5_000_000
    result = ProbeResult('ok', arrays={'greedy': np.zeros((2, n + 1), np.int64),
                                       'top_k=5/tokens': np.zeros((2, n + 1), np.int8),
                                       'top_k=5/logits': np.zeros((2, n, 1), np.float16)})
    started = time.time()
    verdict = verdict_for(grading.test('generate'), result, fx, grading)
    assert time.time() - started < 2
    assert verdict.fraction == 0 and 'shape (2, 5000001), expected (2, 17)' in '\n'.join(verdict.lines)


# ----------------------------------------------------------------------------- uploads

def write(path, text='x = 1\n', mode='w'):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, mode) as f:
        f.write(text)
    return path


def locate(tmp_path, target=None):
    return submission.locate(target or str(tmp_path / 'up'), str(tmp_path / 'scratch'))


def test_a_symlink_to_the_reference_is_refused(tmp_path):
    os.makedirs(str(tmp_path / 'up' / 'mingpt'))
    os.symlink(REFERENCE_MODEL, str(tmp_path / 'up' / 'mingpt' / 'model.py'))
    got = locate(tmp_path)
    assert got.path is None
    assert got.problem == 'mingpt/model.py is a symbolic link; upload the file itself, not a link to it'


def test_a_hard_link_a_fifo_and_a_linked_folder_are_refused(tmp_path):
    other = write(str(tmp_path / 'elsewhere.py'))
    os.makedirs(str(tmp_path / 'up'))
    os.link(other, str(tmp_path / 'up' / 'model.py'))
    assert 'is a hard link' in locate(tmp_path).problem
    os.unlink(str(tmp_path / 'up' / 'model.py'))
    os.mkfifo(str(tmp_path / 'up' / 'model.py'))
    assert 'is not a regular file' in locate(tmp_path).problem
    os.unlink(str(tmp_path / 'up' / 'model.py'))
    os.symlink(os.path.dirname(REFERENCE_MODEL), str(tmp_path / 'up' / 'mingpt'))
    assert 'mingpt is a symbolic link to a folder' in locate(tmp_path).problem
    os.symlink(REFERENCE_MODEL, str(tmp_path / 'link.py'))
    assert 'is a symbolic link' in locate(tmp_path, str(tmp_path / 'link.py')).problem


def test_zip_members_that_are_links_or_too_large_are_refused(tmp_path):
    z = str(tmp_path / 'up' / 'hw1.zip')
    os.makedirs(os.path.dirname(z))
    with zipfile.ZipFile(z, 'w') as f:
        info = zipfile.ZipInfo('mingpt/model.py')
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        f.writestr(info, REFERENCE_MODEL)
    assert 'mingpt/model.py is a symbolic link inside the zip' in locate(tmp_path).problem
    with zipfile.ZipFile(z, 'w', zipfile.ZIP_DEFLATED) as f:
        f.writestr('mingpt/model.py', '#' * (submission.MAX_MODEL_BYTES + 1))
    assert ('mingpt/model.py is 1048577 bytes; a model.py may have at most 1048576 bytes (1 MB; '
            in locate(tmp_path).problem)
    with zipfile.ZipFile(z, 'w') as f:
        f.writestr('/abs/model.py', 'x = 1\n')
    assert 'no model.py' in locate(tmp_path).problem


def test_a_zip_of_20000_model_py_grades_one_and_names_few(tmp_path):
    z = str(tmp_path / 'hw1.zip')
    with zipfile.ZipFile(z, 'w') as f:
        f.writestr('hw1/mingpt/model.py', 'x = 1\n')
        for i in range(20_000):
            f.writestr('junk/%d/model.py' % i, '')
    got = locate(tmp_path, z)
    assert got.problem is None and open(got.path).read() == 'x = 1\n'
    assert 'NOT graded, with other content: hw1.zip/junk/0/model.py, ' in got.note and ' and 19995 more.' in got.note
    assert len(got.note) < 400
    assert sum(len(files) for _, _, files in os.walk(str(tmp_path / 'scratch'))) == 1


def test_source_is_decoded_as_python_does(tmp_path):
    p = write(str(tmp_path / 'latin1.py'), '# -*- coding: latin-1 -*-\n# caf\xe9\nimport torch\n'.encode('latin-1'),
              'wb')
    assert submission.static_problems(submission.read_upload(p)) == []
    p = write(str(tmp_path / 'bad.py'), b'# -*- coding: klingon -*-\nx = 1\n', 'wb')
    problems = submission.static_problems(submission.read_upload(p))
    assert 'coding line Python does not accept' in problems[0]
    p = write(str(tmp_path / 'nul.py'), b'import torch\n# \0\n', 'wb')
    problems = submission.static_problems(submission.read_upload(p))
    assert problems == ['model.py contains a NUL byte (at byte 15, line 2, column 3), which Python '
                        'source cannot contain: save it again as plain text']


@pytest.mark.parametrize('terms, refused', [(10_000, True), (2_000, False)])
def test_a_10000_term_expression_is_a_clear_refusal_on_every_python(tmp_path, terms, refused):
    # Python 3.11 refuses 10,000 terms in ast.parse; 3.10 parses them and refuses them only in compile(), as its
    # import does (CI's Python 3.10 step runs this test there). 2,000 terms import on both and are graded.
    text = 'import torch\nx = ' + '+'.join(['1'] * terms) + '\n'
    p = write(str(tmp_path / 'deep.py'), text)
    try:
        compile(text, 'model.py', 'exec', dont_inherit=True)
        imports = True
    except RecursionError:
        imports = False
    assert imports != refused, sys.version
    problems = submission.static_problems(submission.read_upload(p))
    assert problems == ([submission.TOO_DEEP] if refused else [])
    assert submission.TOO_DEEP.startswith('model.py could not be parsed (RecursionError): it nests too deeply')


def test_results_json_refuses_nan_and_caps_the_top_level_output(tmp_path):
    from autograder.judge import results
    out = results.Results.error('boom', 'trace', 1.0).to_json()
    results.validate(out)
    with pytest.raises(ValueError):
        results.validate(dict(out, execution_time=float('nan')))
    path = str(tmp_path / 'results.json')
    r = results.Results.error('boom', 'trace', 1.0)
    r.output = 'x' * 100_000   # the top-level output is truncated too, not only each test's
    r.write(path)
    with open(path) as f:
        assert len(json.load(f, parse_constant=lambda c: 1 / 0)['output']) < r.max_output_chars + 100
