"""
pytest fixtures of the autograder's own tests (the helpers live in grader_runs.py), and how the suite runs on two
workers (pytest-xdist: `-n 2 --dist loadgroup` in pyproject.toml's addopts; `-n 0` runs it in one process).

Gradings run side by side as a batch's do: each claims its own user of the sandbox pool, its own cgroup and
scratch folder. Every test runs in its module's group (its module fixtures are made once, on one worker),
except those marked:

- `gradescope_mode`: it grades without namespaces (Gradescope's mode), where a grading's self-test refuses to run
  student code while any copy of the grader on the machine is open to the sandbox user. All in one group
  ('gradescope'), never beside a `lockdown` test.
- `lockdown`: it opens a copy of the grader to the sandbox users (every AUTOGRADER_ROOT of grader_runs is
  world-readable until its grading locks it, as /autograder is on Gradescope; a copy planted on purpose; the
  checkout opened by hand), or it looks at what any pool user left in the shared folders, which a grading without
  namespaces writes to. Its module's 'lockdown:<module>' group runs beside anything but the 'gradescope' group
  (a module of LOCKDOWN_PARTS has that many such groups, 'lockdown:<module> part <n>' after the first).
  With namespaces the open copy is out of the probe's reach: gradings with namespaces run beside it.
- `alone`: timing-sensitive (a wall-clock budget or limit that a busy neighbour would eat into, CPU starvation or
  a race by design): group 'alone', run last with nothing beside it.

A test that only needs a grading to assert things on it asks the run's store (tests/helpers/grading_store.py: keyed by
the upload's sha256, the grader's hash and the mode, one folder shared by both workers), so that the same upload in
the same mode is graded once in the run; tests that must grade on their own (timing, neighbours, memory, the hostile
cases, a determinism test's repeats) do not ask. HW1_GRADING_LOG=<file> logs every grading (bench/grading_log.py
counts the repeats).

tests/helpers/suite_schedule.py deals the groups to the workers. grader_runs.needs_lockdown() and
needs_gradescope_mode() fail a test that opens a copy or grades without namespaces outside its group. A test that
acts as a sandbox user itself holds that user's lock meanwhile (grader_runs.pool_user), as a grading does: no
grading beside it kills its processes, sweeps its files or claims the user.
"""

import os

import pytest

import grader_runs
import grading_store
from grader_runs import AutograderRoot

# the groups (suite_schedule.py: ALONE, GRADESCOPE, LOCKDOWN)
ALONE, GRADESCOPE, LOCKDOWN = 'alone', 'gradescope', 'lockdown:'
GROUP = pytest.StashKey[str]()
# `lockdown` modules whose tests are dealt round-robin (in collection order) into this many groups, so that both
# workers share them once the Gradescope-mode group is done (issue 43): one group was one worker's serial chain of
# ~6 minutes, which no Gradescope-mode test may run beside. Safe where the module has no module-scope fixture and
# its tests share gradings only through the run's store (tests/helpers/grading_store.py: one lock per key, across
# workers). suite_schedule.FIRST names each part.
LOCKDOWN_PARTS = {'tests/corpora/test_hostile.py': 2}


def group_of(item, index=0):
    """The group of `item`; `index`: its place among its module's `lockdown` tests (LOCKDOWN_PARTS)."""
    if item.get_closest_marker('alone'):
        return ALONE
    if item.get_closest_marker('gradescope_mode'):
        return GRADESCOPE
    module = item.nodeid.split('::')[0]
    if not item.get_closest_marker('lockdown'):
        return module
    part = index % LOCKDOWN_PARTS.get(module, 1)
    return LOCKDOWN + module + (' part %d' % (part + 1) if part else '')


@pytest.hookimpl(tryfirst=True)   # before xdist's own hook, which reads the marks into the node ids
def pytest_collection_modifyitems(config, items):
    xdist = config.pluginmanager.hasplugin('xdist')
    seen = {}   # module -> its lockdown tests so far
    for item in items:
        module = item.nodeid.split('::')[0]
        index = seen.get(module, 0)
        item.stash[GROUP] = group_of(item, index)
        if item.stash[GROUP].startswith(LOCKDOWN):
            seen[module] = index + 1
        if xdist:
            item.add_marker(pytest.mark.xdist_group(item.stash[GROUP]))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    grader_runs.RUNNING_GROUP = item.stash.get(GROUP, None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """HW1_SUITE_TIMELINE=<file>: one line per test (worker, group, start, end, test) appended to that file, to
    see how the groups filled the two workers (bench/suite_timeline.py reads it); nothing otherwise."""
    import os
    import time
    path, started = os.environ.get('HW1_SUITE_TIMELINE'), time.time()
    yield
    if path:
        worker = os.environ.get('PYTEST_XDIST_WORKER', 'main')
        with open(path, 'a', encoding='utf-8') as f:
            f.write('%s\t%s\t%.2f\t%.2f\t%s\n' % (worker, item.stash.get(GROUP, ''), started, time.time(),
                                                  item.nodeid))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getoption('dist') == 'loadgroup':
        from suite_schedule import SuiteScheduling
        return SuiteScheduling(config, log)
    return None


@pytest.fixture(scope='session', autouse=True)
def grading_store_root(tmp_path_factory):
    """The run's store of shared gradings (tests/helpers/grading_store.py): one folder for every xdist worker of
    this run (the parent of the workers' own basetemp), the run's basetemp without xdist."""
    base = tmp_path_factory.getbasetemp()
    grading_store.ROOT = str((base.parent if os.environ.get('PYTEST_XDIST_WORKER') else base) / 'grading-store')
    yield grading_store.ROOT
    grading_store.ROOT = None


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
