"""
A model.py saved with a byte-order mark is read like any other file (issue 41): it passed 1.1's interface
check while it lacked a method (the grader's reading could not parse it, so nothing was missing), and the
public tests could not place a hang in it. Both read it as utf-8-sig now; the grader's side is in
tests/unit/test_upload.py (interface_tree), the public tests' here.
"""

import importlib.util
import os

from torch_free import needs_torch
from autograder import REPO_ROOT
from autograder.judge import grade, submission

RULES = os.path.join(REPO_ROOT, 'student_template', 'hw1', 'tests', '_support', 'grader_rules.py')
SOURCE = ('class GPT:\n    def __init__(self, config):\n        pass\n\n'
          '    def generate(self, idx):\n        return idx\n')


def _saved_with_bom(tmp_path):
    path = tmp_path / 'mingpt' / 'model.py'
    path.parent.mkdir()
    path.write_bytes(b'\xef\xbb\xbf' + SOURCE.encode('utf-8'))
    return str(path)


def test_the_grader_finds_what_a_bom_file_lacks(tmp_path):
    upload = submission.read_upload(_saved_with_bom(tmp_path))
    assert 'GPT.forward' in grade.static_findings(upload)[1]


def test_the_public_tests_read_a_bom_file_like_any_other(tmp_path):
    needs_torch()
    spec = importlib.util.spec_from_file_location('hw1_grader_rules_bom', RULES)
    rules = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rules)
    path = _saved_with_bom(tmp_path)
    assert rules.function_at(6, path) == 'GPT.generate'                    # where a hang is placed
    problems, _ = rules.upload_findings(None, path)
    assert any('GPT.forward' in p for p in problems), problems               # what 1.1 says it lacks
