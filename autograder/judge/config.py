"""
Loads and validates grading.yaml, the single source of truth for every number of the grading.
Unknown keys, missing tolerances and values of the wrong type are refused with the line of
the file they are on, so a typo never silently changes a grade.
"""

import copy
import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import yaml

from autograder import GRADING_YAML
from autograder.judge import registry
from autograder.judge.profiles import Profile, schema as profile_schema

VISIBILITIES = ('hidden', 'after_due_date', 'after_published', 'visible')
TAGS = registry.IDS  # a test's tags name the parts it checks, by test id
# the known test ids and those that must carry a tolerance come from the one registry
NEEDS_TOLERANCE = registry.NEEDS_TOLERANCE
TEST_IDS = registry.IDS
# the optional parts of the handout (the `# BEGIN OPTIONAL <part>` markers of reference/mingpt/model.py)
OPTIONAL_PARTS = ('sliding_window', 'kv_cache')


class GradingConfigError(ValueError):
    """grading.yaml is malformed; the message names the file and line."""


@dataclass
class Tolerance:
    atol: float
    rtol: float
    why: str
    # a share of random events (6.1's dropped elements) may differ from p by this many sd
    binomial_sigmas: Optional[float] = None


@dataclass
class TestSpec:
    id: str
    name: str
    number: str
    weight: float
    visibility: str
    tags: List[str]
    timeout: float
    tolerance: Optional[Tolerance] = None
    optional_part: Optional[str] = None
    # why this test also loses points for bugs of other parts (evaluate's must_fail is exact)
    sees: Optional[str] = None


@dataclass
class Grading:
    path: str
    version: int
    handout: dict
    sandbox: dict
    profiles: Dict[str, Profile]   # grading.yaml's profiles: cpu, gpu (judge/profiles.py)
    tests: List[TestSpec] = field(default_factory=list)
    # 'on_evidence': a case that showed a part wrong runs again without it (judge/set_aside.py); 'never': never
    set_aside: str = 'on_evidence'
    # how close a recorded call must be to the harness's own recomputation: {'rope': {atol, rtol}, 'attention': ...}
    # (grading.yaml `evidence`, judge/evidence.py)
    evidence: Dict[str, dict] = field(default_factory=lambda: {k: {'atol': 1e-3, 'rtol': 1e-3}
                                                               for k in ('rope', 'attention')})

    def test(self, test_id):
        for t in self.tests:
            if t.id == test_id:
                return t
        raise KeyError(test_id)

    def is_extra_credit(self, spec):
        """A test of an optional part counts on top of the required total unless handout.extra_credit says false."""
        return spec.optional_part is not None and self.handout.get('extra_credit', {}).get(spec.optional_part, True)

    def enabled_tests(self):
        """Tests of optional parts that staff switched off are not graded."""
        parts = self.handout.get('optional_parts', {})
        return [t for t in self.tests if t.optional_part is None or parts.get(t.optional_part, False)]

    def profile_hash(self, profile_name):
        """What the fixtures of `profile` depend on: its sizes and seeds, not weights or tolerances."""
        blob = json.dumps(self.profiles[profile_name].as_json(), sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()


# ----------------------------------------------------------------------------- validation

SANDBOX_KEYS = {'user': str, 'total_seconds': int, 'address_space_mb': int, 'cpu_seconds': int, 'max_processes': int,
                'max_file_mb': int, 'max_json_kb': int, 'max_output_chars': int,
                'pool_size': int, 'python_copy': str, 'scratch_mb': int, 'scratch_inodes': int, 'watchdog_seconds': int,
                'defences': dict, 'cgroup_memory_mb': int, 'wall_factor': (int, float), 'student_text_chars': int,
                'student_text_budget': int,
                'idle_seconds': (int, float), 'probe_memory_mb': int, 'rope_service_calls': dict,
                'rope_service_mb': dict}
# the inside of a profile, from the fields of judge/profiles.py: every key, its YAML type, every key of every
# section with its kind (a type, or ('list', kind): a list whose items are each of that kind), and the list keys
PROFILE_KEYS, PROFILE_SECTIONS, PROFILE_LISTS = profile_schema()
TEST_KEYS = {'id': str, 'name': str, 'number': str, 'weight': (int, float), 'visibility': str,
             'tags': list, 'timeout': (int, float), 'tolerance': dict, 'optional_part': str, 'sees': str}
TOLERANCE_KEYS = {'atol': (int, float), 'rtol': (int, float), 'why': str, 'binomial_sigmas': (int, float)}


class _Validator:
    def __init__(self, path):
        self.path = path

    def fail(self, node, message):
        line = node.start_mark.line + 1 if node is not None else '?'
        raise GradingConfigError("%s:%s: %s" % (self.path, line, message))

    def mapping(self, node, what):
        if not isinstance(node, yaml.MappingNode):
            self.fail(node, "%s must be a mapping" % what)
        out = {}
        for key_node, value_node in node.value:
            if key_node.value in out:
                self.fail(key_node, "duplicate key %r in %s" % (key_node.value, what))
            out[key_node.value] = (key_node, value_node)
        return out

    def check_keys(self, entries, allowed, what, required=()):
        for key, (key_node, _) in entries.items():
            if key not in allowed:
                self.fail(key_node, "unknown key %r in %s (allowed: %s)" % (key, what, ', '.join(sorted(allowed))))
        for key in required:
            if key not in entries:
                first = next(iter(entries.values()))[0] if entries else None
                self.fail(first, "%s is missing %r" % (what, key))

    def typed(self, value_node, expected, what):
        value = yaml.safe_load(yaml.serialize(value_node))
        if isinstance(value, bool) and bool not in (expected if isinstance(expected, tuple) else (expected,)):
            self.fail(value_node, "%s must be %s, not a boolean" % (what, _name(expected)))
        if not isinstance(value, expected):
            self.fail(value_node, "%s must be %s, got %r" % (what, _name(expected), value))
        return value


    def check_value(self, node, kind, what):
        """A value of a profile: a type, or ('list', kind) for a list whose items are each of that kind."""
        if isinstance(kind, tuple) and kind and kind[0] == 'list':
            if not isinstance(node, yaml.SequenceNode):
                self.fail(node, "%s must be a list" % what)
            for i, item in enumerate(node.value):
                self.check_value(item, kind[1], '%s[%d]' % (what, i))
            return
        value = self.typed(node, kind, what)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            self.fail(node, "%s must be >= 0" % what)


def _name(expected):
    types = expected if isinstance(expected, tuple) else (expected,)
    return ' or '.join({int: 'an integer', float: 'a number', str: 'a string', list: 'a list',
                        dict: 'a mapping', bool: 'true/false'}[t] for t in types)


_LOADED = {}   # (path, text) -> Grading: a batch worker reads the same grading.yaml for every grading


def load(path=GRADING_YAML):
    """grading.yaml read and validated: a Grading, or GradingConfigError naming the file and line; a fresh copy on
    every call."""
    with open(path) as f:
        text = f.read()
    key = (os.path.abspath(path), text)
    if key not in _LOADED:
        _LOADED.clear()
        _LOADED[key] = _parse(path, text)
    grading = copy.deepcopy(_LOADED[key])
    # a second interpreter's copy beside the first (staff grading under Gradescope's Python 3.10 on a machine
    # whose 3.11 uses the yaml's path); setup.sh reads the same variable. Read on each load, never cached.
    grading.sandbox['python_copy'] = os.environ.get('HW1_PYTHON_COPY') or grading.sandbox['python_copy']
    return grading


def _parse(path, text):
    try:
        root = yaml.compose(text)
    except yaml.YAMLError as e:
        raise GradingConfigError("%s: not valid YAML: %s" % (path, e))
    v = _Validator(path)
    top = v.mapping(root, 'grading.yaml')
    v.check_keys(top, {'version', 'handout', 'sandbox', 'profiles', 'tests', 'set_aside', 'evidence'}, 'grading.yaml',
                 required=('version', 'handout', 'sandbox', 'profiles', 'tests'))
    set_aside = v.typed(top['set_aside'][1], str, 'set_aside') if 'set_aside' in top else 'on_evidence'
    if set_aside not in ('on_evidence', 'never'):
        v.fail(top['set_aside'][1], "set_aside %r is not one of on_evidence, never" % set_aside)

    version = v.typed(top['version'][1], int, 'version')
    if version != 1:
        v.fail(top['version'][1], "version %d is not supported (expected 1)" % version)
    handout = _handout(v, top['handout'][1])
    sandbox, profiles = _sandbox(v, top['sandbox'][1]), _profiles(v, top['profiles'][1])
    if not isinstance(top['tests'][1], yaml.SequenceNode):
        v.fail(top['tests'][1], "tests must be a list")
    tests, seen = [], set()
    for node in top['tests'][1].value:
        spec = _test(v, node, handout['optional_parts'])
        if spec.id in seen:
            v.fail(node, "test id %r appears twice" % spec.id)
        seen.add(spec.id)
        tests.append(spec)
    evidence = _evidence(v, top['evidence'][1]) if 'evidence' in top else Grading.__dataclass_fields__[
        'evidence'].default_factory()
    return Grading(path=path, version=version, handout=handout, sandbox=sandbox, profiles=profiles, tests=tests,
                   set_aside=set_aside, evidence=evidence)


def _evidence(v, node):
    """evidence: {rope: tolerance, attention: tolerance}, each with its why (judge/evidence.py)."""
    entries = v.mapping(node, 'evidence')
    v.check_keys(entries, {'rope', 'attention'}, 'evidence', required=('rope', 'attention'))
    out = {}
    for key, (_, n) in entries.items():
        tol = _tolerance(v, n, 'evidence.' + key)
        out[key] = {'atol': tol.atol, 'rtol': tol.rtol}
    return out


def _handout(v, node):
    """handout: which optional parts are graded and whether they count as extra credit."""
    handout = v.typed(node, dict, 'handout')
    entries = v.mapping(node, 'handout')
    v.check_keys(entries, {'optional_parts', 'extra_credit'}, 'handout')
    for section in ('optional_parts', 'extra_credit'):
        if section not in entries:
            continue
        for key, (key_node, value_node) in v.mapping(entries[section][1], section).items():
            if key not in OPTIONAL_PARTS:
                v.fail(key_node, "unknown optional part %r (known: %s)" % (key, ', '.join(OPTIONAL_PARTS)))
            v.typed(value_node, bool, '%s.%s' % (section, key))
    return {'optional_parts': handout.get('optional_parts', {}) or {},
            'extra_credit': handout.get('extra_credit', {}) or {}}


def _sandbox(v, node):
    """sandbox: every key typed, and each defence given one of the sandbox's levels."""
    entries = v.mapping(node, 'sandbox')
    v.check_keys(entries, SANDBOX_KEYS, 'sandbox', required=tuple(SANDBOX_KEYS))
    sandbox = {k: v.typed(n, SANDBOX_KEYS[k], 'sandbox.%s' % k) for k, (_, n) in entries.items()}
    from autograder.sandbox.defences import LEVELS, NAMES
    defences = v.mapping(entries['defences'][1], 'sandbox.defences')
    v.check_keys(defences, NAMES, 'sandbox.defences', required=NAMES)
    for key, (_, value_node) in defences.items():
        if v.typed(value_node, str, 'sandbox.defences.%s' % key) not in LEVELS:
            v.fail(value_node, 'sandbox.defences.%s must be one of %s' % (key, ', '.join(LEVELS)))
    return sandbox


def _profiles(v, node):
    """profiles: cpu and gpu at least, each with every section of PROFILE_SECTIONS typed; a Profile each."""
    profiles = {}
    for name, (_, value_node) in v.mapping(node, 'profiles').items():
        entries = v.mapping(value_node, 'profile %r' % name)
        v.check_keys(entries, PROFILE_KEYS, 'profile %r' % name, required=tuple(PROFILE_KEYS))
        profiles[name] = {k: v.typed(n, PROFILE_KEYS[k], 'profiles.%s.%s' % (name, k)) for k, (_, n) in entries.items()}
        for section, schema in PROFILE_SECTIONS.items():
            where = 'profiles.%s.%s' % (name, section)
            inner = v.mapping(entries[section][1], where)
            v.check_keys(inner, schema, where, required=tuple(schema))
            for key, (_, item) in inner.items():
                v.check_value(item, schema[key], '%s.%s' % (where, key))
        for key, kind in PROFILE_LISTS.items():
            v.check_value(entries[key][1], kind, 'profiles.%s.%s' % (name, key))
        if any(len(case) != 4 for case in profiles[name]['rope_cases']):
            v.fail(entries['rope_cases'][1], "profiles.%s.rope_cases: each case is [B, nh, T, d]" % name)
        if profiles[name]['device'] not in ('cpu', 'cuda'):
            v.fail(entries['device'][1], "device must be cpu or cuda")
    for required in ('cpu', 'gpu'):
        if required not in profiles:
            v.fail(node, "profile %r is required" % required)
    return {name: Profile.from_mapping(values) for name, values in profiles.items()}


def _test(v, node, parts):
    """One entry of tests: a known id, its weight, visibility, tags, timeout and (when it compares numbers)
    tolerance."""
    entries = v.mapping(node, 'a test')
    v.check_keys(entries, TEST_KEYS, 'a test',
                 required=('id', 'name', 'number', 'weight', 'visibility', 'tags', 'timeout'))
    values = {k: v.typed(n, TEST_KEYS[k], k) for k, (_, n) in entries.items() if k != 'tolerance'}
    tid = values['id']
    if tid not in TEST_IDS:
        v.fail(entries['id'][1], "unknown test id %r (known: %s)" % (tid, ', '.join(TEST_IDS)))
    if values['weight'] < 0:
        v.fail(entries['weight'][1], "weight must be >= 0")
    if values['timeout'] <= 0:
        v.fail(entries['timeout'][1], "timeout must be > 0 seconds")
    if values['visibility'] not in VISIBILITIES:
        v.fail(entries['visibility'][1], "visibility must be one of %s" % ', '.join(VISIBILITIES))
    for tag in values['tags']:
        if tag not in TAGS:
            v.fail(entries['tags'][1], "unknown tag %r (known: %s)" % (tag, ', '.join(TAGS)))
    if values.get('optional_part') not in (None,) + tuple(parts):
        v.fail(entries['optional_part'][1], "optional_part %r is not listed under handout.optional_parts"
               % values['optional_part'])
    if 'tolerance' in entries:
        tolerance = _tolerance(v, entries['tolerance'][1], tid)
    elif tid in NEEDS_TOLERANCE:
        v.fail(node, "test %r compares numbers and needs a tolerance (atol, rtol, why)" % tid)
    else:
        tolerance = None
    return TestSpec(id=tid, name=values['name'], number=values['number'], weight=float(values['weight']),
                    visibility=values['visibility'], tags=list(values['tags']), timeout=float(values['timeout']),
                    tolerance=tolerance, optional_part=values.get('optional_part'), sees=values.get('sees'))


def _tolerance(v, node, tid):
    entries = v.mapping(node, 'tolerance of %s' % tid)
    v.check_keys(entries, TOLERANCE_KEYS, 'tolerance of %s' % tid, required=('atol', 'rtol', 'why'))
    tol = {k: v.typed(n, TOLERANCE_KEYS[k], 'tolerance.%s' % k) for k, (_, n) in entries.items()}
    for key in ('atol', 'rtol'):
        if tol[key] < 0:
            v.fail(entries[key][1], "tolerances must be >= 0 (%s of %s)" % (key, tid))
    if not tol['why'].strip():
        v.fail(entries['why'][1], "every tolerance needs its reason in `why`")
    return Tolerance(float(tol['atol']), float(tol['rtol']), tol['why'],
                     float(tol['binomial_sigmas']) if 'binomial_sigmas' in tol else None)
