"""
pytest fixtures of the autograder's own tests (the helpers live in ag_helpers.py), and how the suite runs on two
workers (pytest-xdist: `-n 2 --dist loadgroup` in pyproject.toml's addopts; `-n 0` runs it in one process).

Gradings run side by side as a batch's do (each claims its own user of the sandbox pool, its own cgroup and
scratch folder), and every test runs with its module's other tests (module fixtures are made once), except:

- `lockdown`: all in one group, one at a time. A test that opens a copy of the grader to the sandbox users (every
  AUTOGRADER_ROOT of ag_helpers is world-readable until its grading locks it, as /autograder is on Gradescope; an
  open copy planted on purpose; the checkout opened by hand), or that grades without namespaces (Gradescope's
  mode). Without namespaces a grading's self-test refuses to run student code while any copy of the grader on the
  machine is open to the sandbox user: such a grading beside an open copy would be refused for a reason that is
  not its own. With namespaces (every other grading) the open copy is out of the probe's reach and nothing clashes.
  ag_helpers.needs_lockdown() fails a test that does either outside this group.
- `alone`: timing-sensitive (a wall-clock budget or limit that a busy neighbour could eat into, CPU starvation by
  design): run last, with nothing beside them (tests/helpers/suite_schedule.py).

A test that acts as a sandbox user itself holds that user's lock meanwhile (ag_helpers.pool_user), as a grading
does: no grading beside it kills its processes, sweeps its files or claims the user.
"""

import pytest

import ag_helpers
from ag_helpers import AutograderRoot

LOCKDOWN, ALONE = 'lockdown', 'alone'


def group_of(item):
    if item.get_closest_marker(ALONE):
        return ALONE
    if item.get_closest_marker(LOCKDOWN):
        return LOCKDOWN
    return item.nodeid.split('::')[0]   # the module: its tests (and its module fixtures) on one worker


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook, which reads the marks into the node ids
def pytest_collection_modifyitems(config, items):
    for item in items:
        item.stash[GROUP] = group_of(item)
        if config.pluginmanager.hasplugin('xdist'):
            item.add_marker(pytest.mark.xdist_group(item.stash[GROUP]))


GROUP = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    ag_helpers.RUNNING_GROUP = item.stash.get(GROUP, None)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption('dist') == 'loadgroup':
        from suite_schedule import AloneLastScheduling
        return AloneLastScheduling(config, log)
    return None


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
