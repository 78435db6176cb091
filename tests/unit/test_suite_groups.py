"""
How tests/conftest.py puts the suite's tests in groups (what tests/helpers/suite_schedule.py deals to the workers),
without running any: `alone` and `gradescope_mode` win over `lockdown`, a `lockdown` test is in its module's
lockdown group, and a module of LOCKDOWN_PARTS is dealt round-robin into that many parts, each of which the
scheduler names (a part it does not name would go by its size, after every named group).
"""

import conftest
import suite_schedule


class Item:
    def __init__(self, nodeid, *marks):
        self.nodeid, self.marks = nodeid, marks

    def get_closest_marker(self, name):
        return name if name in self.marks else None


def test_alone_and_gradescope_mode_win_over_lockdown():
    assert conftest.group_of(Item('tests/x.py::t', 'lockdown', 'alone')) == conftest.ALONE
    assert conftest.group_of(Item('tests/x.py::t', 'lockdown', 'gradescope_mode')) == conftest.GRADESCOPE
    assert conftest.group_of(Item('tests/x.py::t', 'lockdown'), 5) == 'lockdown:tests/x.py'
    assert conftest.group_of(Item('tests/x.py::t'), 3) == 'tests/x.py'


def test_a_split_module_is_dealt_round_robin_into_named_parts():
    for module, parts in conftest.LOCKDOWN_PARTS.items():
        groups = [conftest.group_of(Item(module + '::t[%d]' % i, 'lockdown'), i) for i in range(2 * parts)]
        assert groups[:parts] == groups[parts:] and len(set(groups)) == parts, groups
        assert groups[0] == conftest.LOCKDOWN + module
        assert set(groups) <= set(suite_schedule.FIRST), set(groups) - set(suite_schedule.FIRST)
        assert all(suite_schedule.kind(g) == suite_schedule.LOCKDOWN for g in groups)
