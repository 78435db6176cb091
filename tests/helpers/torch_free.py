"""
The torch-free run of the unit tests: CI's Python 3.10 step (.ci/py310_unit_tests) runs tests/unit in a
small venv without torch, with HW1_WITHOUT_TORCH=1. A test or module that needs torch calls
`needs_torch()` first: there it is skipped, naming why; in every other run it gets torch, and a missing
torch is an error, never a skip, so the main (Python 3.11) run loses nothing.
"""

import os

import pytest

ENV = 'HW1_WITHOUT_TORCH'


def torch_free_run():
    return os.environ.get(ENV) == '1'


def needs_torch():
    """torch, or (in the torch-free run only) a skip of the calling test, or of its module at import."""
    if torch_free_run():
        pytest.skip('needs torch: %s=1 (the torch-free Python 3.10 run of .ci/run)' % ENV, allow_module_level=True)
    import torch
    return torch
