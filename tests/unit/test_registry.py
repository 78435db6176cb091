"""
The one registry of graded tests (autograder/judge/registry.py) against everything that names a
test id (the zones' imports are tests/unit/test_import_contract.py's), and the report schema.
"""

import ast
import os

from autograder import GRADING_YAML, PACKAGE_DIR
from autograder.judge import config, registry, verdicts
from autograder.contract import report_schema

CHILD_DIR = os.path.join(PACKAGE_DIR, 'child')


def _functions(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}


def test_grading_yaml_ids_equal_the_registry():
    grading = config.load(GRADING_YAML)
    assert [t.id for t in grading.tests] == list(registry.IDS)


def test_every_probed_test_has_its_probe_and_no_probe_is_orphaned():
    probes = set()
    for name in os.listdir(CHILD_DIR):
        if name.startswith('probes') and name.endswith('.py'):
            found = {f for f in _functions(os.path.join(CHILD_DIR, name)) if f.startswith('probe_')}
            assert not found & probes, 'a probe is defined twice: %s' % sorted(found & probes)
            probes |= found
    wanted = {t.probe for t in registry.TESTS if t.probe}
    assert probes == wanted, 'probes without a registry entry: %s; registry entries without a probe: %s' % (
        sorted(probes - wanted), sorted(wanted - probes))


def test_every_probed_test_has_one_judge_function_of_judges():
    assert set(verdicts.JUDGES) == {t.id for t in registry.TESTS if t.probed}
    for tid, judge in verdicts.JUDGES.items():
        assert judge.__module__.startswith('autograder.judge.judges.'), tid


def test_tolerances_follow_the_registry():
    grading = config.load(GRADING_YAML)
    for spec in grading.tests:
        assert (spec.tolerance is not None) == registry.BY_ID[spec.id].needs_tolerance, spec.id


def test_report_schema_refuses_wrong_types_and_non_finite_numbers():
    report_schema.check_report({'status': 'ok', 'seconds': 1.5, 'notes': ['a'], 'has_wpe': {'rope': False}})
    for bad in ({'seconds': float('inf')}, {'seconds': float('nan')}, {'seconds': True}, {'notes': 'a'},
                {'where': [1]}, {'has_wpe': {'x': 1}}, {'case_errors': {'c': {'message': 3}}}):
        try:
            report_schema.check_report(bad)
        except ValueError:
            continue
        raise AssertionError('accepted %r' % (bad,))
    try:
        report_schema.check_report([])
    except ValueError:
        pass
    else:
        raise AssertionError('a list is not a report')
