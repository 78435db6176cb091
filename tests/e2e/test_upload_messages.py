"""
What a student reads when the upload itself is the problem, from the real
`python -m autograder grade` on each upload: every message is one true sentence in the
student's terms, said once in test 1.1 and at the top; the other tests only point to 1.1.

  - two different model.py: explained (which was graded, why, which was not) or refused when
    nothing but the alphabet would decide; identical copies are harmless;
  - a zip inside the zip: named, with what to upload instead;
  - no model.py at all: what the upload (a folder or a zip) holds instead;
  - a file that is not UTF-8: its line and column, the likely character, the fix;
  - an empty model.py: one sentence, not the grader's stack frames per case;
  - a 100 MB file: its size in MB at the top, not "no model.py found".
None of these runs the student's code, so each grading takes about a second.
"""

import json
import os
import subprocess
import sys
import zipfile

import pytest

from autograder import REFERENCE_DIR, REPO_ROOT

REFERENCE = open(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), 'rb').read()


def _grade(upload, tmp_path):
    results = tmp_path / 'results.json'
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'grade', str(upload), '--results', str(results)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr   # grading completed: the upload was judged, not the grader
    with open(str(results)) as f:
        out = json.load(f)
    return out, {t['number']: t for t in out['tests']}


def _write(path, data):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(str(path), 'wb') as f:
        f.write(data)


def _only_pointers(tests):
    """Every test but 1.1 scores 0 and says only 'not graded: <the same first line> (see test 1.1)'."""
    first = None
    for number, t in tests.items():
        if number == '1.1':
            continue
        assert t['score'] == 0, t
        line = t['output'].splitlines()[0]
        assert line.startswith('not graded: ') and line.endswith(' (see test 1.1)'), t['output']
        assert 'Traceback' not in t['output'] and 'adapter.py' not in t['output'], t['output']
        first = first or line
        assert line == first, 'every test points to 1.1 with the same sentence'
    return first


def test_an_empty_model_py_is_one_sentence(tmp_path):
    _write(tmp_path / 'up' / 'model.py', b'')
    out, tests = _grade(tmp_path / 'up', tmp_path)
    sentence = 'model.py is empty: there is nothing to grade. Upload the file with your code (was it saved?)'
    assert out['output'] == 'Not graded: %s.' % sentence
    assert tests['1.1']['output'].splitlines()[:2] == ['graded model.py', sentence]
    assert _only_pointers(tests) == 'not graded: %s (see test 1.1)' % sentence
    assert out['score'] == 0


def test_a_100_mb_file_is_named_with_its_size_at_the_top(tmp_path):
    _write(tmp_path / 'up' / 'mingpt' / 'model.py', b'# ' + b'x' * (100 * 1024 * 1024) + b'\n')
    out, tests = _grade(tmp_path / 'up', tmp_path)
    assert out['output'].startswith('Not graded: mingpt/model.py is 100.0 MB; a model.py may have at most 1048576 '
                                    "bytes (1 MB; the handout's is about 30 KB): upload the source file alone"), \
        out['output']
    assert 'no model.py' not in out['output']
    assert tests['1.1']['output'].startswith('mingpt/model.py is 100.0 MB')
    _only_pointers(tests)


def test_a_file_that_is_not_utf8_names_its_line_and_the_fix(tmp_path):
    # a comment typed in an editor that saves Windows-1252: the curly apostrophe is byte 0x92
    source = REFERENCE.replace(b'# calculate query, key, values', b'# it\x92s the query, key, values', 1)
    line = source[:source.index(b'\x92')].count(b'\n') + 1
    _write(tmp_path / 'model.py', source)
    out, tests = _grade(tmp_path / 'model.py', tmp_path)
    message = tests['1.1']['output']
    assert ('model.py is not UTF-8 text: line %d, column 13 holds the byte 0x92, which is \'\u2019\' in the '
            'Windows-1252 encoding. Save the file as UTF-8' % line) in message, message
    # the line itself, as the student typed it
    assert '    # it\u2019s the query, key, values for all heads' in message
    assert out['output'].startswith('Not graded: model.py is not UTF-8 text: line %d' % line)
    _only_pointers(tests)


def test_a_zip_inside_the_zip_is_named(tmp_path):
    inner = tmp_path / 'hw1.zip'
    with zipfile.ZipFile(str(inner), 'w') as z:
        z.writestr('hw1/mingpt/model.py', REFERENCE)
    with zipfile.ZipFile(str(tmp_path / 'submission.zip'), 'w') as z:
        z.write(str(inner), 'downloads/hw1.zip')
    out, tests = _grade(tmp_path / 'submission.zip', tmp_path)
    sentence = ('no model.py in the submission: submission.zip/downloads/hw1.zip is a zip inside the zip you uploaded, '
                'and the autograder opens only the zip itself, not zips within it: upload your mingpt/model.py, or a '
                'zip that holds it directly')
    assert tests['1.1']['output'].splitlines()[0] == sentence
    assert out['output'] == 'Not graded: %s.' % sentence
    _only_pointers(tests)


@pytest.mark.parametrize('kind', ['folder', 'zip', 'empty folder'])
def test_no_model_py_says_what_the_upload_holds(tmp_path, kind):
    # 1.1 says what was found instead, and nothing more: it is worth no points, so no "0%" and no pointer to
    # lines that are not there (Gradescope unpacks a zip into a folder; `grade` also takes the zip itself)
    files = {} if kind == 'empty folder' else {'hw1/writeup.pdf': b'%PDF', 'hw1/mingpt/modle.py': REFERENCE}
    up = tmp_path / 'up'
    up.mkdir()
    for name, data in files.items():
        _write(up / name, data)
    if kind == 'zip':
        with zipfile.ZipFile(str(tmp_path / 'hw1.zip'), 'w') as z:
            for name, data in files.items():
                z.writestr(name, data)
        up = tmp_path / 'hw1.zip'
    out, tests = _grade(up, tmp_path)
    holds = {'folder': 'the upload holds hw1/writeup.pdf, hw1/mingpt/modle.py',
             'zip': 'the zip holds hw1/writeup.pdf, hw1/mingpt/modle.py',
             'empty folder': 'the upload holds no file'}[kind]
    sentence = 'no model.py in the submission: upload your mingpt/model.py (%s)' % holds
    assert tests['1.1']['output'] == sentence and tests['1.1']['status'] == 'failed'
    assert out['output'] == 'Not graded: %s.' % sentence
    _only_pointers(tests)


# the graded file has a syntax error on purpose: the choice is shown in 1.1 without running any code
BROKEN = b'def forward(:\n'


def test_two_different_model_py_the_choice_is_explained(tmp_path):
    _write(tmp_path / 'up' / 'mingpt' / 'model.py', BROKEN)
    _write(tmp_path / 'up' / 'model (1).py', REFERENCE)      # a browser's name for a second download
    _write(tmp_path / 'up' / 'backup' / 'model.py', BROKEN)  # an identical copy is harmless
    out, tests = _grade(tmp_path / 'up', tmp_path)
    assert tests['1.1']['output'].splitlines()[0] == (
        'graded mingpt/model.py (mingpt/model.py is where the handout keeps it); also found, with the same content: '
        'backup/model.py; NOT graded, with other content: model (1).py. To have one of these graded, upload it alone')
    assert tests['1.1']['status'] == 'failed' and tests['1.1']['max_score'] == 0   # it stands out, and costs nothing


def test_two_different_model_py_that_nothing_ranks_are_refused(tmp_path):
    _write(tmp_path / 'up' / 'old' / 'mingpt' / 'model.py', BROKEN)
    _write(tmp_path / 'up' / 'new' / 'mingpt' / 'model.py', REFERENCE)
    out, tests = _grade(tmp_path / 'up', tmp_path)
    sentence = ('found 2 different files that could be your model.py (new/mingpt/model.py, old/mingpt/model.py); the '
                'autograder will not guess which one you mean: upload only one (your mingpt/model.py)')
    assert tests['1.1']['output'].splitlines()[0] == sentence
    assert out['output'] == 'Not graded: %s.' % sentence
    _only_pointers(tests)


@pytest.mark.parametrize('kind', ['folder', 'zip'])
def test_identical_copies_are_graded_without_fuss(tmp_path, kind):
    files = {'hw1/mingpt/model.py': BROKEN, 'hw1/mingpt/model copy.py': BROKEN}
    if kind == 'folder':
        for rel, data in files.items():
            _write(tmp_path / 'up' / rel, data)
        upload, prefix = tmp_path / 'up', ''
    else:
        upload, prefix = tmp_path / 'hw1.zip', 'hw1.zip/'
        with zipfile.ZipFile(str(upload), 'w') as z:
            for rel, data in files.items():
                z.writestr(rel, data)
    out, tests = _grade(upload, tmp_path)
    note = tests['1.1']['output'].splitlines()[0]
    assert note.startswith('graded %shw1/mingpt/model.py' % prefix)
    assert note.endswith('; also found, with the same content: %shw1/mingpt/model copy.py' % prefix), note
