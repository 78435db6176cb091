"""
How pytest-xdist deals the suite's tests to its workers (tests/conftest.py says which test is in which group):
xdist's own `--dist loadgroup` (every test of one group on one worker, in collection order), with one group held
back: ALONE, the timing-sensitive tests, runs last and with nothing beside it.

The first worker to run out of other work keeps ALONE; every other worker is told to finish what it was given and
stop, and ALONE is sent once they all have. An xdist worker runs the last test it was given only once it is sent
another one (or told to stop), so the worker that waits holds its last test back until then: that test, too, then
runs with nothing beside it.
"""

from xdist.scheduler import LoadGroupScheduling

ALONE = 'alone'


class AloneLastScheduling(LoadGroupScheduling):
    def __init__(self, config, log=None):
        super().__init__(config, log)
        self.alone_node = None

    def _send(self, node, scope):
        work_unit = self.workqueue.pop(scope)
        self.assigned_work.setdefault(node, {})[scope] = work_unit
        collection = self.registered_collections[node]
        node.send_runtest_some([collection.index(nodeid) for nodeid, done in work_unit.items() if not done])

    def _assign_work_unit(self, node):
        """The next group in the queue that is not ALONE; ALONE only once nothing else is left."""
        scope = next((s for s in self.workqueue if s != ALONE), None)
        if scope is not None:
            self._send(node, scope)
        else:
            self._alone_once_the_others_stop(node)

    def _alone_once_the_others_stop(self, node):
        if self.alone_node not in self.assigned_work:   # none yet, or it went away (a crash): this one takes over
            self.alone_node = node
        for other in self.nodes:
            if other is not self.alone_node and not other.shutting_down:
                other.shutdown()   # it runs what it was given, then stops
        if self.nodes == [self.alone_node] and list(self.workqueue) == [ALONE]:
            self._send(self.alone_node, ALONE)

    def remove_node(self, node):
        crashitem = super().remove_node(node)   # a crash puts the node's unfinished group back in the queue
        if list(self.workqueue) == [ALONE]:
            left = [n for n in self.nodes if n is self.alone_node or not n.shutting_down]
            if left:
                self._alone_once_the_others_stop(left[0])
        return crashitem
