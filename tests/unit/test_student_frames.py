"""
The traceback line a student reads for an error raised inside torch because of their code (issue 41): torch
raises its own error over theirs (a property of theirs that failed with AttributeError becomes
nn.Module.__getattr__'s "has no attribute"), whose traceback holds only torch's frames and the grader's, so
the line shown was torch's module.py. runner.describe_exception now shows model.py's frames of the error it
was raised from (the chain), else the property or class of model.py's whose object torch raised on, and a
traceback with a model.py frame still shows that one.
"""

import importlib.util
import sys

from torch_free import needs_torch

needs_torch()   # the runner imports torch: skipped in the torch-free Python 3.10 run
from autograder.child import runner  # noqa: E402

MODEL = '''import torch.nn as nn


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(2, 2)

    @property
    def head_dim(self):
        return self.config.n_embd // 2      # line 11: no self.config


def direct():
    return Attention().get_submodule('nope')   # line 15
'''


def _model(tmp_path):
    path = tmp_path / 'mingpt' / 'model.py'
    path.parent.mkdir()
    path.write_text(MODEL)
    spec = importlib.util.spec_from_file_location('issue41_model', str(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # as the runner's import of mingpt.model leaves it
    spec.loader.exec_module(module)
    return module


def _where(call):
    try:
        call()
    except Exception as e:   # noqa: BLE001  what the runner catches
        return runner.describe_exception(e)[1]
    raise AssertionError('no error')


def test_an_error_torch_raises_over_the_students_own_shows_the_students_line(tmp_path):
    needs_torch()
    model = _model(tmp_path)
    error = _where(lambda: model.Attention().head_dim)   # as a probe reads an attribute of the student's module
    assert "has no attribute 'head_dim'" in error['message'], error
    assert error['where'] == ['model.py line 10, in Attention.head_dim: def head_dim(self):'], error['where']


def test_a_model_py_frame_in_the_traceback_itself_is_still_the_one_shown(tmp_path):
    needs_torch()
    error = _where(_model(tmp_path).direct)
    assert error['where'] == ["model.py line 15, in direct: return Attention().get_submodule('nope')   # line 15"], \
        error


def test_an_error_raised_from_the_students_shows_the_students_line(tmp_path):
    needs_torch()
    model = _model(tmp_path)

    def grader_call():
        try:
            model.direct()
        except AttributeError as e:
            raise RuntimeError('the grader could not go on') from e
    assert _where(grader_call)['where'][-1].startswith('model.py line 15, in direct')


def test_an_error_in_torch_on_a_students_object_names_its_class(tmp_path):
    needs_torch()
    error = _where(lambda: _model(tmp_path).Attention().get_submodule('proj.nope'))   # torch's module.py line 728
    assert error['where'] == ['model.py line 4, in Attention: class Attention(nn.Module):'], error


def test_nothing_of_model_py_behind_an_error_shows_the_frames_as_before():
    needs_torch()
    import torch
    error = _where(lambda: torch.nn.Linear(2, 2).get_submodule('nope'))
    assert error['where'][-1].startswith('module.py line ') and len(error['where']) == 3, error
