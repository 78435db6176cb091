"""
The set-aside plans (judge/set_aside.py decides them): what the second run does for one probe, per unit
(a registry.CASE_PARTS entry), whether a unit's own forward values in the first run are already the
reference's, the one ProbeResult the judges read from the two runs, and the fixtures as they read them.
"""

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Dict, Tuple

import numpy as np

from autograder.judge import registry
from autograder.judge.areas import case_of, compare
from autograder.sandbox.readback import ProbeResult


@dataclass
class Plan:
    """What the second run does for one probe: per unit (a CASE_PARTS entry) 'native', 'second', 'excluded' or
    'not_run', the parts set aside there, and the words."""
    units: Dict[str, str]
    aside: Dict[str, Tuple[str, ...]] = field(default_factory=dict)    # unit -> parts set aside in the second run
    why: Dict[str, str] = field(default_factory=dict)                  # unit -> sentence (excluded, not run, kept)

    @property
    def runs(self):
        return any(d == 'second' for d in self.units.values())

    def job(self):
        """What the probe's process of the second run is told: the parts set aside, the units not to run."""
        parts = sorted({p for u, d in self.units.items() if d == 'second' for p in self.aside.get(u, ())})
        return {'set_aside': parts, 'skip_cases': sorted(u for u, d in self.units.items() if d != 'second' and u)}


def case_units(fx, probe_id):
    """{unit: [fixture keys]} of a probe: its CASE_PARTS entries, with the reference's output keys of each."""
    out = {u: [] for u in registry.CASE_PARTS[probe_id]}
    for key in fx.probe(probe_id):
        unit = registry.case_name(probe_id, case_of(key))
        if unit is None:
            unit = registry.case_name(probe_id, key)
        if unit in out:
            out[unit].append(key)
    return out


def forward_ok(grading, fx, probe_id, unit, keys, native):
    """Whether a unit's own forward values in the first run are the reference's (registry.FORWARD_KEYS)."""
    if native.status != 'ok':
        return False
    errors = native.info.get('case_errors', {}) if isinstance(native.info.get('case_errors'), dict) else {}
    if any(registry.case_name(probe_id, c) == unit for c in errors):
        return False
    wanted = registry.FORWARD_KEYS.get(probe_id)
    if wanted is not None:
        keys = [k for k in keys if k.rsplit('/', 1)[-1] in wanted]
    expected = fx.probe(probe_id)
    tol = grading.test('model' if probe_id in registry.FORWARD_KEYS else probe_id).tolerance
    for key in keys:
        got, exp = native.arrays.get(key), expected[key]
        if got is None or got.shape != exp.shape:
            return False
        if tol is None or exp.dtype.kind in 'iub':
            if not np.array_equal(got, exp):
                return False
        elif not compare(got, exp, tol.atol, tol.rtol)[0]:
            return False
    return True


def unit_of(probe_id, name):
    unit = registry.case_name(probe_id, case_of(name))
    return registry.case_name(probe_id, name) if unit is None else unit


def _distinct(notes):
    """Each note once, in order: texts, or (in a result not yet taken: settle_parts) the child's
    facts, dicts (report_schema.FACT_NOTES), told apart by their JSON."""
    out = {}
    for n in notes:
        out.setdefault(json.dumps(n, sort_keys=True) if isinstance(n, dict) else n, n)
    return list(out.values())


def merge_result(probe_id, plan, native, second):
    """One ProbeResult from the first run's units, the second run's and the units not run (as case errors)."""
    runs = {'native': native, 'second': second}
    if list(plan.units) == [''] or all(d in ('not_run', 'excluded') for d in plan.units.values()):
        # one unit (or none judged): the run it came from, whole; a probe the first run skipped keeps its sentence
        chosen = runs.get(next(iter(plan.units.values()))) if list(plan.units) == [''] else None
        return chosen if chosen is not None else native if native is not None else ProbeResult('missing', 'not run')
    arrays, errors, info = {}, {}, {}
    for unit, decision in plan.units.items():
        run = runs.get(decision)
        if decision == 'not_run':
            errors[unit or probe_id] = {'status': 'missing', 'message': plan.why.get(unit, 'not run')}
            continue
        if run is None or decision == 'excluded':
            continue
        if run.status != 'ok':
            errors[unit or probe_id] = {'status': run.status if run.status in ('timeout', 'crashed', 'missing',
                                                                               'invalid') else 'error',
                                        'message': run.message, 'where': run.info.get('where', [])[-3:]}
            continue
        arrays.update({k: v for k, v in run.arrays.items() if unit_of(probe_id, k) == unit})
        run_errors = run.info.get('case_errors') if isinstance(run.info.get('case_errors'), dict) else {}
        errors.update({k: v for k, v in run_errors.items() if unit_of(probe_id, k) == unit})
        for name in ('facts', 'dtypes', 'has_wpe'):
            entries = run.info.get(name) if isinstance(run.info.get(name), dict) else {}
            info.setdefault(name, {}).update({k: v for k, v in entries.items() if unit_of(probe_id, k) == unit})
    base = second if second is not None and native is None else native or second or ProbeResult('missing', 'not run')
    notes = [n for r in (native, second) if r is not None for n in r.info.get('notes', [])]
    info.update(case_errors=errors, notes=_distinct(notes))
    if second is not None and isinstance(second.info.get('set_aside'), dict):
        info['set_aside'] = second.info['set_aside']
    harness = dict(base.harness or {}, second=(second.harness if second is not None else None))
    return dataclasses.replace(base, status='ok', message='', arrays=arrays, info=info, harness=harness, refused={})


class PlanView:
    """The fixtures as the judges of a merged grading read them: a unit set aside is left out, and a unit the
    second run judged at n_kv_head = n_query_head is compared with that configuration's fixtures ('<probe>~gqa')."""

    def __init__(self, fx, plans):
        self._fx, self._plans = fx, plans

    def __getattr__(self, name):
        return getattr(self._fx, name)

    def _source(self, probe_id, key):
        plan = self._plans.get(probe_id)
        if plan is None:
            return probe_id
        unit = unit_of(probe_id, key)
        if plan.units.get(unit) == 'excluded':
            return None
        other = [p for p in plan.aside.get(unit, ()) if p in registry.OTHER_CONFIGURATIONS] \
            if plan.units.get(unit) == 'second' else []
        return probe_id + '~' + other[0] if other else probe_id

    def probe(self, probe_id):
        out = {}
        for key, value in self._fx.probe(probe_id).items():
            source = self._source(probe_id, key)
            if source == probe_id:
                out[key] = value
            elif source is not None:
                alt = self._fx.probe(source)
                if key in alt:
                    out[key] = alt[key]
        return out

    def known_bug_outputs(self, probe_id):
        return {fp: {k: v for k, v in arrays.items() if self._source(probe_id, k) == probe_id}
                for fp, arrays in self._fx.known_bug_outputs(probe_id).items()}

    def excluded(self, probe_id, unit):
        plan = self._plans.get(probe_id)
        return plan is not None and plan.units.get(unit) == 'excluded'

    def set_aside_in(self, probe_id, unit):
        """The parts the judged outputs of this unit were computed without."""
        plan = self._plans.get(probe_id)
        return plan.aside.get(unit, ()) if plan is not None and plan.units.get(unit) == 'second' else ()
