"""pytest fixtures of the autograder's own tests; the helpers live in ag_helpers.py."""

import pytest

from ag_helpers import AutograderRoot


@pytest.fixture
def ag_root():
    """Factory of temporary AUTOGRADER_ROOT layouts, removed after the test."""
    roots = []

    def make(grading=None):
        roots.append(AutograderRoot(grading))
        return roots[-1]
    yield make
    for r in roots:
        r.cleanup()
