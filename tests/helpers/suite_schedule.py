"""
How pytest-xdist deals the suite's groups of tests to its workers (tests/conftest.py puts each test in a group):
`--dist loadgroup` (every test of a group on one worker, in collection order) with three kinds of group kept
apart, and the longest groups first.

- GRADESCOPE, the tests that grade without namespaces (Gradescope's mode), one group: never while a worker has a
  LOCKDOWN group.
- LOCKDOWN groups ('lockdown:<module>'), the tests that open a copy of the grader to the sandbox users (or look at
  what any pool user left in the shared folders): side by side with each other and with any other group, never
  while a worker has the GRADESCOPE group.
- ALONE, the timing-sensitive tests: last, with nothing beside them. The first worker to run out of other work
  keeps it; every other worker is told to finish what it has and stop, and ALONE is sent once they all have.

A worker "has" a group from the moment it is sent until its last test has finished. An xdist worker runs the last
test it was given only once it is sent another one (or told to stop): a group is sent only where that releases
nothing forbidden, which holds because no worker is ever sent a group that clashes with what another worker has.
After every finished test every worker is offered work, so that one waiting for a clash to end gets it then.
"""

from xdist.scheduler import LoadGroupScheduling

ALONE, GRADESCOPE, LOCKDOWN = 'alone', 'gradescope', 'lockdown:'
# the longest groups first (measured: `--durations`), GRADESCOPE at once so that the LOCKDOWN groups are free to
# spread over both workers after it; a group not named here goes by its number of tests, the most first
FIRST = (GRADESCOPE,
         'tests/corpora/test_discrimination.py',          # evaluate on the whole corpus, two jobs: ~5 minutes
         LOCKDOWN + 'tests/corpora/test_hostile.py',
         LOCKDOWN + 'tests/corpora/test_hostile.py part 2',   # tests/conftest.py LOCKDOWN_PARTS
         'tests/e2e/test_public_tests.py',
         LOCKDOWN + 'tests/corpora/test_hostile_os.py',
         'tests/e2e/test_experiments.py',
         'tests/e2e/test_sharded_similarity.py',
         LOCKDOWN + 'tests/e2e/test_batch.py',
         LOCKDOWN + 'tests/e2e/test_policy_agreement.py',
         LOCKDOWN + 'tests/corpora/test_hostile_os_wall.py',
         'tests/corpora/test_hostile_memory.py',
         LOCKDOWN + 'tests/e2e/test_sandbox_process.py')


def kind(scope):
    if scope in (ALONE, GRADESCOPE):
        return scope
    return LOCKDOWN if scope.startswith(LOCKDOWN) else None


def clashes(a, b):
    """Whether groups of kinds a and b may never run side by side (ALONE is dealt with apart)."""
    return {a, b} == {GRADESCOPE, LOCKDOWN} or a == b == GRADESCOPE


class SuiteScheduling(LoadGroupScheduling):
    def __init__(self, config, log=None):
        super().__init__(config, log)
        self.alone_node = None

    def _kinds_elsewhere(self, node):
        return {kind(scope) for other, work in self.assigned_work.items() if other is not node
                for scope, unit in work.items() if not all(unit.values())}

    def _send(self, node, scope):
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    def _assign_work_unit(self, node):
        """The first group by FIRST (then by the queue's order) that clashes with nothing another worker has;
        ALONE once nothing else is left; nothing, for now, when every group left clashes."""
        elsewhere = self._kinds_elsewhere(node)
        order = list(self.workqueue)
        allowed = [s for s in order if s != ALONE and not any(clashes(kind(s), k) for k in elsewhere)]
        if allowed:
            self._send(node, min(allowed, key=lambda s: (FIRST.index(s) if s in FIRST else len(FIRST), order.index(s))))
        elif order == [ALONE]:
            self._alone_once_the_others_stop(node)

    def _alone_once_the_others_stop(self, node):
        if self.alone_node not in self.assigned_work:   # none yet, or it went away (a crash): this one takes over
            self.alone_node = node
        for other in self.nodes:
            if other is not self.alone_node and not other.shutting_down:
                other.shutdown()   # it runs what it was given, then stops
        if self.nodes == [self.alone_node] and list(self.workqueue) == [ALONE]:
            self._send(self.alone_node, ALONE)

    def mark_test_complete(self, node, item_index, duration=0):
        super().mark_test_complete(node, item_index, duration)   # offers work to this worker
        for other in self.nodes:                                  # and to one that waits for a clash to end
            if other is not node:
                self._reschedule(other)

    def remove_node(self, node):
        crashitem = super().remove_node(node)   # a crash puts the node's unfinished group back in the queue
        if list(self.workqueue) == [ALONE]:
            left = [n for n in self.nodes if n is self.alone_node or not n.shutting_down]
            if left:
                self._alone_once_the_others_stop(left[0])
        return crashitem
