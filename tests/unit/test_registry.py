"""
The one registry of graded tests (autograder/judge/registry.py) against everything that names a
test id, and the trust boundary: the child package imports nothing of the harness.
"""

import ast
import os

from autograder import GRADING_YAML, PACKAGE_DIR
from autograder.judge import config, registry
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


def test_every_judge_is_a_function_of_checks():
    for t in registry.TESTS:
        if t.judge is not None:
            assert t.judge.__module__.startswith('autograder.judge.judges.'), t.id


def test_tolerances_follow_the_registry():
    grading = config.load(GRADING_YAML)
    for spec in grading.tests:
        assert (spec.tolerance is not None) == registry.BY_ID[spec.id].needs_tolerance, spec.id


def _imports(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            yield ('.' * node.level) + (node.module or ''), node.lineno
        elif isinstance(node, ast.Call) and getattr(node.func, 'id', '') == '__import__' and node.args \
                and isinstance(node.args[0], ast.Constant):
            yield str(node.args[0].value), node.lineno


def test_the_child_package_imports_nothing_of_the_harness():
    names = sorted(n for n in os.listdir(CHILD_DIR) if n.endswith('.py'))
    assert {'runner.py', 'probes.py', 'adapter.py', 'report_schema.py', 'configs.py'} <= set(names)
    for name in names:
        for module, line in _imports(os.path.join(CHILD_DIR, name)):
            assert not module.split('.')[0] == 'autograder', 'child/%s:%d imports %s' % (name, line, module)


def test_the_harness_side_modules_of_the_child_need_no_torch():
    # the harness imports these without torch (768 MB on Gradescope): only the standard library
    for name in ('report_schema.py', 'configs.py'):
        for module, line in _imports(os.path.join(CHILD_DIR, name)):
            assert module.split('.')[0] not in ('torch', 'numpy', 'autograder') and not module.startswith('.'), \
                'child/%s:%d imports %s' % (name, line, module)


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
