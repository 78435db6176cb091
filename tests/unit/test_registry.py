"""
The one registry of graded tests (autograder/judge/registry.py) against everything that names a
test id (the zones' imports are tests/unit/test_import_contract.py's), and the report schema.
Every graded test has its three places and nothing else names a test: a registry entry (whose
judge resolves and whose declared inputs exist among inputs.build's arrays), a probe_<id> in the
child module of its area, and a grading.yaml entry; and no probe, judge, inputs or grading.yaml
test without a registry entry. The inputs it declares are inputs.probe_inputs's (expanded per
profile) and the fixtures' probe-code hash covers them.
"""

import ast
import dataclasses
import inspect
import json
import os

import pytest

from autograder import FIXTURES_DIR, GRADING_YAML, PACKAGE_DIR
from autograder.judge import config, fixtures, inputs, registry, verdicts
from autograder.contract import report_schema

CHILD_DIR = os.path.join(PACKAGE_DIR, 'child')
JUDGES_DIR = os.path.join(PACKAGE_DIR, 'judge', 'areas')
JUDGE_PARAMETERS = ['test', 'result', 'fixtures', 'grading']   # then `evidence` where it reads some


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
    wanted = {t.probe for t in registry.TESTS if t.probe} | \
        {'probe_' + p.replace('-', '_') for p in registry.STAFF_PROBES}   # staff-only, no graded test
    assert probes == wanted, 'probes without a registry entry: %s; registry entries without a probe: %s' % (
        sorted(probes - wanted), sorted(wanted - probes))


def test_every_probed_test_has_one_judge_function_of_areas():
    assert set(verdicts.JUDGES) == {t.id for t in registry.TESTS if t.probed}
    for tid, judge in verdicts.JUDGES.items():
        assert judge.__module__.startswith('autograder.judge.areas.'), tid


def test_each_probe_is_in_the_child_module_of_its_area():
    for t in registry.TESTS:
        if t.probe:
            path = os.path.join(CHILD_DIR, 'probes_%s.py' % t.area)
            assert os.path.isfile(path) and t.probe in _functions(path), \
                '%s: no %s in child/probes_%s.py (its judge: %s)' % (t.id, t.probe, t.area, t.judge)


def test_each_probed_test_names_a_judge_that_resolves_with_its_evidence():
    for t in registry.TESTS:
        if not t.probe:
            assert t.judge is None, '%s runs no probe: grade.py judges it' % t.id
            continue
        judge = verdicts.resolve(t.judge)
        assert verdicts.JUDGES[t.id] is judge, t.id
        assert judge.__module__ == '%s.%s' % (verdicts.JUDGES_PACKAGE, t.area), t.id
        wanted = JUDGE_PARAMETERS + (['evidence'] if t.evidence else [])
        assert list(inspect.signature(judge).parameters) == wanted, \
            '%s: %s takes %s' % (t.id, t.judge, list(inspect.signature(judge).parameters))


def test_a_missing_judge_is_refused_by_name():
    with pytest.raises(ImportError, match='values:judge_nothing'):
        verdicts.resolve('values:judge_nothing')
    with pytest.raises(ImportError, match='no_area:judge_values'):
        verdicts.resolve('no_area:judge_values')


def test_every_judge_function_is_named_by_a_registry_entry():
    # a judge: a top-level function of areas/<area>.py taking (test, result, fixtures, grading[,
    # evidence]); judge_cases and the other helpers take other arguments
    named = {t.judge for t in registry.TESTS if t.judge}
    found = set()
    for name in sorted(os.listdir(JUDGES_DIR)):
        if not name.endswith('.py') or name == '__init__.py':
            continue
        with open(os.path.join(JUDGES_DIR, name)) as f:
            tree = ast.parse(f.read())
        for node in tree.body:
            takes = [a.arg for a in node.args.args] if isinstance(node, ast.FunctionDef) else []
            if takes[:4] == JUDGE_PARAMETERS:
                found.add('%s:%s' % (name[:-3], node.name))
    assert found == named, 'judges no entry names: %s; entries naming no judge: %s' % (
        sorted(found - named), sorted(named - found))


@pytest.mark.parametrize('profile', ['cpu', 'gpu'])
def test_each_probe_has_declared_inputs_that_exist_and_no_others(profile):
    prof = config.load(GRADING_YAML).profiles[profile]
    for t in registry.TESTS:   # evidence-only probes are probed entries too: they declare theirs
        assert bool(t.inputs) == bool(t.probe), \
            '%s: %s' % (t.id, 'a probed test declares its inputs' if t.probe else 'runs no probe')
        for pattern in t.inputs:
            assert inputs.expand(pattern, prof), '%s: %r stands for nothing' % (t.id, pattern)
    assert set(registry.PROBED) >= {e for t in registry.TESTS for e in t.evidence}
    declared = inputs.probe_inputs(prof)
    probed = set(registry.PROBED)
    assert set(declared) == probed, 'inputs without a registry entry: %s; entries without ' \
        'inputs: %s' % (sorted(set(declared) - probed), sorted(probed - set(declared)))
    arrays = inputs.build(prof)
    for pid, patterns in declared.items():
        for pattern in patterns:
            found = any(inputs.wanted(k, (pattern,)) for k in arrays)
            assert found, '%s declares %s: no input of inputs.build is that' % (pid, pattern)


# inputs.probe_inputs as b580195's inputs.py wrote it out by hand (its kv_heads (1, 2, 3, 6) and
# model configurations rope, gqa, rope-gqa are the cpu and the gpu profiles'), before it was derived
# from the registry's declarations: the derivation must give exactly this, keys and order
FROZEN_PROBE_INPUTS = {
    'rope': ('rope/',),
    'rope-cache': ('rope-cache/',),
    'mha-rope': ('attn/x', 'w/mha-rope/'),
    'gqa': ('attn/x', 'w/gqa-kv1/', 'w/gqa-kv2/', 'w/gqa-kv3/', 'w/gqa-kv6/'),
    'gqa-rope': ('attn/x', 'w/gqa-rope-kv1/', 'w/gqa-rope-kv2/', 'w/gqa-rope-kv3/',
                 'w/gqa-rope-kv6/'),
    'dropout': ('attn/x', 'w/gqa-kv2/', 'dropout/x', 'w/dropout/'),
    'causality': ('attn/x_future', 'model/idx_future', 'w/mha-rope/', 'w/gqa-rope-kv2/',
                  'model/rope-gqa/', 'model/rope/', 'model/gqa/'),
    'model': ('model/idx', 'model/targets', 'model/rope/', 'model/gqa/', 'model/rope-gqa/'),
    'generate': ('generate/prompt', 'model/rope-gqa/', 'model/rope/', 'model/gqa/'),
    'memory': ('memory/x', 'w/gqa-kv1/', 'w/gqa-kv2/', 'w/gqa-kv3/', 'w/gqa-kv6/'),
    'loss-curve': ('heldout/idx', 'model/lc-init/', 'model/lc-init-mha/',
                   'model/lc-init-norope/'),
    'gradients': ('model/idx', 'model/targets', 'model/rope/', 'model/gqa/', 'model/rope-gqa/'),
    'load-pretrained': ('workflow/', 'model/rope/', 'model/gqa/', 'model/rope-gqa/'),
    'sliding-window': ('sw/', 'w/mha/', 'w/gqa-rope-kv2/'),
    'sliding-window-memory': ('swmem/',),
    'kv-cache': ('generate/prompt', 'kv-cache/step', 'model/rope-gqa/', 'model/gqa/'),
}


@pytest.mark.parametrize('profile', ['cpu', 'gpu'])
def test_probe_inputs_derived_from_the_registry_are_the_hand_written_table(profile):
    prof = config.load(GRADING_YAML).profiles[profile]
    derived = inputs.probe_inputs(prof)
    assert list(derived.items()) == list(FROZEN_PROBE_INPUTS.items())


def test_placeholders_expand_per_profile_and_an_unknown_one_is_refused():
    prof = {'kv_heads': (1, 4), 'model': {'n_query_head': 4}}
    assert inputs.expand('w/gqa-kv{kv}/', prof) == ('w/gqa-kv1/', 'w/gqa-kv4/')
    assert inputs.expand('model/{model}/', prof) == ('model/rope/', 'model/gqa/', 'model/rope-gqa/')
    assert inputs.expand('attn/x', prof) == ('attn/x',)
    with pytest.raises(ValueError, match='nkv'):
        inputs.expand('w/gqa-kv{nkv}/', prof)


def _fresh_manifest():
    """The committed cpu manifest, its probe-code hash the one this checkout computes."""
    with open(os.path.join(FIXTURES_DIR, 'cpu', 'manifest.json')) as f:
        manifest = json.load(f)
    return dict(manifest, probe_code_sha256=fixtures.probe_code_sha256())


def _with_entry(monkeypatch, test_id, **changes):
    """registry.TESTS with one entry changed (what probe_inputs and the hash read when called)."""
    tests = tuple(dataclasses.replace(t, **changes) if t.id == test_id else t
                  for t in registry.TESTS)
    monkeypatch.setattr(registry, 'TESTS', tests)


def test_changing_a_probes_declared_inputs_makes_the_fixtures_stale(monkeypatch):
    grading = config.load(GRADING_YAML)
    manifest = _fresh_manifest()
    assert fixtures.staleness(grading, 'cpu', manifest) == []
    _with_entry(monkeypatch, 'gqa', inputs=('attn/x', 'w/gqa-rope-kv{kv}/'))
    assert inputs.probe_inputs(grading.profiles['cpu'])['gqa'][1] == 'w/gqa-rope-kv1/'
    problems = fixtures.staleness(grading, 'cpu', manifest)
    assert len(problems) == 1 and "declared inputs (registry.py)" in problems[0], problems


@pytest.mark.parametrize('changes', [dict(compares_known_bugs=False), dict(evidence=('rope',)),
                                     dict(needs_tolerance=False), dict(calls=('gqa', 'rope'))])
def test_changing_another_flag_leaves_the_fixtures_fresh(monkeypatch, changes):
    grading = config.load(GRADING_YAML)
    manifest = _fresh_manifest()
    _with_entry(monkeypatch, 'gqa', **changes)
    assert fixtures.staleness(grading, 'cpu', manifest) == []


def test_tolerances_follow_the_registry():
    grading = config.load(GRADING_YAML)
    for spec in grading.tests:
        assert (spec.tolerance is not None) == registry.BY_ID[spec.id].needs_tolerance, spec.id


def test_report_schema_refuses_wrong_types_and_non_finite_numbers():
    note = {'fact': 'kept_initial', 'figures': ['a'], 'cut': 0}   # notes are facts (FACT_NOTES)
    report_schema.check_report({'status': 'ok', 'seconds': 1.5, 'notes': [note], 'has_wpe': {'rope': False}})
    for bad in ({'seconds': float('inf')}, {'seconds': float('nan')}, {'seconds': True}, {'notes': 'a'},
                {'notes': ['a']},
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
