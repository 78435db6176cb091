"""
pytest setup for the tests of the staff reference (reference/): puts reference/ first on
sys.path so that `import mingpt.model` and `import chargpt` load the staff solution, and
this folder too so that the independent formulas in ref_formulas.py can be imported.

Tensors here are tiny, so torch runs on one thread: with two threads on a loaded 2-core
machine each small op can wait milliseconds for the other OpenMP thread.

student_template/hw1 holds another package called `mingpt`; both must never be imported
in one process, so we refuse to run if a different `mingpt` is already loaded.
"""

import os
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REFERENCE = os.path.join(REPO, 'reference')

for path in (HERE, REFERENCE):
    if path not in sys.path:
        sys.path.insert(0, path)

_loaded = sys.modules.get('mingpt')
if _loaded is not None:
    _where = os.path.dirname(os.path.abspath(getattr(_loaded, '__file__', None) or next(iter(_loaded.__path__))))
    assert os.path.dirname(_where) == REFERENCE, \
        "another mingpt (%s) is already imported in this process; run tests/reference on its own" % _where

torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope='session')
def _reference_mingpt_loaded():
    """Fail loudly if some other test module got its own mingpt imported first."""
    import mingpt.model
    where = os.path.dirname(os.path.dirname(os.path.abspath(mingpt.model.__file__)))
    assert where == REFERENCE, "tests/reference imported mingpt from %s, not reference/" % where
