"""
model.py is read once and parsed once per grading (submission.Upload): every check after `locate`
(the static check, test 1.1's import notes and interface, the optional parts' TODOs, set_aside.py's
function lines, the input set drawn for its bytes) takes the value, never the file.
"""

import ast
import builtins
import os
import shutil

import pytest

from autograder import REFERENCE_DIR
from autograder.judge import config, fixtures, grade, interface_check, submission

GRADING = config.load()


class SandboxReached(Exception):
    """Raised by the fake sandbox: everything before the sandboxed run has been done."""


class StopAtTheSandbox:
    """Any call on it stops the grading where the sandbox would start running probes."""
    user_note = 'fake'

    def __getattr__(self, name):
        def stop(*args, **kwargs):
            raise SandboxReached(name)
        return stop


def counting(monkeypatch, model_py):
    """{'open': opens of model_py, 'parse': ast.parse calls} from now on."""
    counts = {'open': 0, 'parse': 0}
    real_open, real_parse = builtins.open, ast.parse

    def open_(file, *args, **kwargs):
        if isinstance(file, (str, bytes, os.PathLike)) and os.path.realpath(file) == model_py:
            counts['open'] += 1
        return real_open(file, *args, **kwargs)

    def parse(*args, **kwargs):
        counts['parse'] += 1
        return real_parse(*args, **kwargs)
    monkeypatch.setattr(builtins, 'open', open_)
    monkeypatch.setattr(ast, 'parse', parse)
    return counts


def test_grading_one_submission_opens_model_py_once_and_parses_it_once(tmp_path, monkeypatch):
    model_py = str(tmp_path / 'upload' / 'model.py')
    os.makedirs(os.path.dirname(model_py))
    shutil.copy(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), model_py)
    located = submission.locate(os.path.dirname(model_py), str(tmp_path / 'scratch'))
    assert os.path.realpath(located.path) == os.path.realpath(model_py)
    fx = fixtures.load_for_grading(GRADING, 'cpu')
    counts = counting(monkeypatch, os.path.realpath(model_py))
    judging = grade.Judging(GRADING, 'cpu', located, fx, StopAtTheSandbox())   # builds only
    assert counts == {'open': 1, 'parse': 1}
    with pytest.raises(SandboxReached):   # the run reads nothing of model.py again before the sandbox
        judging.run_probes()
    assert counts == {'open': 1, 'parse': 1}


def test_the_upload_holds_bytes_text_tree_and_problems(tmp_path):
    path = tmp_path / 'model.py'
    path.write_bytes(b'import torch\n\n\ndef f(:\n    pass\n')
    upload = submission.read_upload(str(path))
    assert upload.raw == path.read_bytes() and upload.text == path.read_text()
    assert upload.tree is None and len(upload.problems) == 1
    assert upload.problems[0].startswith('syntax error in model.py line 4')
    path.write_bytes(b'# caf\xe9\n')
    upload = submission.read_upload(str(path))
    assert upload.text is None and upload.tree is None and 'not UTF-8' in upload.problems[0]
    # parses, does not compile: the tree is kept for 'nothing to grade'
    path.write_text('return 1\n')
    upload = submission.read_upload(str(path))
    assert upload.tree is not None and 'outside function' in upload.problems[0]
    assert grade.upload_problems(upload) == [interface_check.nothing_to_grade('return 1\n')]


REFERENCE_SOURCE = open(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')).read()


SOURCES = ['', '# only a comment\n', '"""text"""\n', 'class GPT:\n    pass\n', 'x = (\n',
           REFERENCE_SOURCE]


@pytest.mark.parametrize('source', SOURCES)
def test_the_tree_functions_say_what_the_source_functions_say(source):
    # the public tests call the source functions (build-template copies them), the grader these
    try:
        tree = ast.parse(source) if source.strip() else None
    except SyntaxError:
        tree = None
    said = interface_check.nothing_to_grade(source)
    assert interface_check.nothing_to_grade_in(source, tree) == said
    if tree is not None:
        assert interface_check.missing_in(tree) == interface_check.missing(source)


def test_interface_tree_reads_as_test_1_1_always_did(tmp_path):
    # a byte-order mark is read like any other file (issue 41: it passed 1.1's interface check lacking a method)
    path = tmp_path / 'model.py'
    path.write_bytes(b'\xef\xbb\xbfclass GPT:\n    pass\n')
    upload = submission.read_upload(str(path))
    assert upload.problems == () and upload.tree is not None
    assert submission.interface_tree(upload) is upload.tree and 'GPT.forward' in grade.static_findings(upload)[1]
    path.write_bytes(b'class GPT:\r\n    pass\r\n')   # Windows line ends: the upload's own tree
    upload = submission.read_upload(str(path))
    assert submission.interface_tree(upload) is upload.tree
    assert 'GPT.forward' in grade.static_findings(upload)[1]
