"""
One mistake costs its own part (grading.yaml `set_aside`), without any answer in the student's process.

A grading runs every probe on the student's own code first (the first run), recording what the student's
RoPE and attention modules received and returned inside each case (child/evidence.py); the harness checks
those values itself (judge/evidence.py). A part fails when a test that decides it fails
(registry.PART_TESTS: 2.1 and 2.2 decide RoPE, 3.1 CausalSelfAttention, 4.1 and 5.1 GroupedQueryAttention).
A part SHOWN WRONG in a case it does not own, or that hung, is charged: its own tests score 0 (charge()).
A case is judged again without a part (the second run, one case at a time: registry.CASE_PARTS) only where
that case showed the part wrong (or the part hung before) and the case's own forward values are wrong
(registry.FORWARD_KEYS). Failing a part's test on purpose therefore changes nothing, and a part wrong only
inside the model costs its own tests alone. Without the part:
- RoPE is computed by the grader, outside the process (judge/rope_service.py answers over the link);
- GroupedQueryAttention: the probes of registry.GQA_SET_ASIDE run that case at n_kv_head =
  n_query_head, where the given Block builds the student's CausalSelfAttention (fixtures
  '<probe>~gqa'); elsewhere the case is set aside with nothing in its place;
- a case left with no part of the student's (registry.STUDENT_PARTS) is not judged: it counts
  neither way, and a test with no case left earns nothing ("Not judged").

Hangs are placed from the harness's own knowledge only: the parts the timed-out probe runs
(registry `calls`) less those that other probes proved return. What the process's stack dump
says is shown as its own account and decides nothing. A probe process stopped before it said
model.py was imported (sandbox/probe.py's `imported_after`) stops the grading's probes: the import
is named once, and no part is blamed.
"""

from autograder.judge import evidence, messages, registry
from autograder.judge.areas import Verdict
from autograder.judge.hangs import MODEL_FRAME, functions_of, stopped_words, where_said
from autograder.judge.plans import Plan, PlanView, case_units, forward_ok, merge_result
from autograder.judge.verdicts import verdict_for

# where a probe was stopped at its deadline, as its own process said (the public tests say the same)
STOPPED_IN, STOPPED_AT, OWN_ACCOUNT = messages.STOPPED_IN, messages.STOPPED_AT, messages.OWN_ACCOUNT
# a later test that would run the part that hung again (the public tests say the same, naming their own test)
NOT_RUN, SHORT = messages.NOT_RUN, messages.SHORT


class SetAside:
    """The failed and hung parts of one grading, the second run they call for, and the words."""

    def __init__(self, grading, fx, tree, specs, n_head=None):
        self.grading, self.fx = grading, fx
        # the harness's own figure for reading the records: the profiles' n_query_head (module and model alike)
        self.n_head = n_head or grading.profiles['cpu'].model.n_query_head
        self.on_evidence = grading.set_aside == 'on_evidence'
        self.graded = {s.id for s in specs}
        self.functions = functions_of(tree)   # model.py's parsed tree (submission.Upload.tree)
        self.failed = {}     # part -> number of the first test of it that failed
        self.hung = {}       # part -> the sentence a test that would run it again reads
        self.proven = set()  # parts a probe that ended in time ran: a later hang is placed among the others
        self.stopped = {}    # probe id -> where its process said it was stopped (words only)
        self.import_hang = None    # the sentence when model.py's import did not finish (import check or a probe)
        self.plans = {}      # probe id -> Plan of its second run (part tests as they end, the rest in plan_later)
        self.native = {}     # probe id -> its first run's result
        self.pending = {}    # part -> the part tests whose verdict waits for the second run
        self._settled = set()   # probes the first stage of the second run already ran
        self.wrong = {}      # probe id -> {unit: {part: evidence.Shown}}: parts its first run showed wrong there
        self.charged = {}    # part -> why (part_reason): shown wrong or hung outside its own tests; its tests score 0

    def number(self, test_id):
        return self.grading.test(test_id).number

    # ------------------------------------------------------------------ the first run, as probes end

    def observe(self, probe_id, result, results, records=()):
        """Learn from a finished probe of the first run (the import check included); `records`: what its parts did
        inside its cases (judge/evidence.take)."""
        said = stopped_words(result.harness.get('hang'), self.functions) if isinstance(result.harness, dict) else ''
        if probe_id == 'import':
            if result.status == 'timeout':
                self.import_hang = messages.import_hang(self._said_at(result))
            return
        if self._stalled_at_import(result):
            self.import_hang = self.import_hang or messages.import_hang_in_test(
                self.number(probe_id), self._said_at(result))
            return
        if said:
            self.stopped[probe_id] = said
        if result.status == 'timeout' and isinstance(result.harness, dict) and result.harness.get('ended'):
            self._place_hang(probe_id, self._said_at(result))
        elif result.status not in ('skipped', 'missing', 'timeout'):
            self.proven.update(registry.BY_ID[probe_id].calls)
        self.native[probe_id] = result
        self.weigh(probe_id, result, records)
        for part, tests in registry.PART_TESTS.items():
            if probe_id in tests and part not in self.failed and not self._passes(probe_id, result, results):
                # 3.1 and 5.1 also run RoPE: whether their own part fails is known once a RoPE that failed is set
                # aside in them (the second run's first stage: part_tests_again, settle_parts)
                plan = self.plan(probe_id, result) if self.on_evidence and probe_id in registry.CASE_PARTS else None
                if plan is not None and plan.runs:
                    self.plans[probe_id] = plan
                    self.pending.setdefault(part, []).append(probe_id)
                else:
                    self.failed[part] = self.number(probe_id)

    def weigh(self, probe_id, result, records):
        """The parts the first run of `probe_id` showed wrong in each case; one shown wrong outside its own tests
        is charged (its own tests score 0: charge())."""
        if probe_id not in registry.RECORDS or result.status == 'skipped':
            return
        errors = result.info.get('case_errors') if isinstance(result.info.get('case_errors'), dict) else {}
        shown = evidence.shown_wrong(probe_id, records, errors, self.n_head, self.grading.evidence)
        for case, error in errors.items():   # an error raised in a part's own code where no hook saw it (__init__)
            part = self._raised_in(error)
            unit = registry.case_name(probe_id, case)
            if part and unit is not None and part in registry.case_parts(probe_id, case)[0]:
                shown.setdefault(unit, {}).setdefault(part, evidence.Shown(case, 'raised'))
        if probe_id in registry.TRAINING:   # a raise in training alone shows nothing (registry.TRAINING)
            shown = {u: {p: w for p, w in parts.items() if w.what != 'raised' or p in self.charged}
                     for u, parts in shown.items()}
        self.wrong[probe_id] = shown
        for unit, parts in shown.items():
            owns = registry.case_parts(probe_id, unit)[1]
            for part, where in sorted(parts.items()):
                if part not in owns:
                    self.charged.setdefault(part, messages.shown_where(
                        part, self.number(probe_id), where.case, where.what, where.position, where.detail))

    def _raised_in(self, error):
        """The part whose code (model.py's own lines, mapped by the harness: functions_of) raised a case's error,
        from its innermost model.py frame; None where none is a part's."""
        where = error.get('where') if isinstance(error, dict) else None
        for line in reversed(where if isinstance(where, list) else []):
            match = MODEL_FRAME.match(line) if isinstance(line, str) else None
            if match:
                names = [name for first, last, name in self.functions if first <= int(match.group(1)) <= last]
                return evidence.CLASS_PARTS.get(names[-1].split('.')[0]) if names else None
        return None

    def charge(self, test_id):
        """The line of a part's own test when that part was shown wrong or hung elsewhere (it then scores 0), else
        None."""
        for part, tests in registry.PART_TESTS.items():
            if test_id in tests and part in self.charged:
                return messages.part_charged(part, self.charged[part])
        return None

    def reason(self, part):
        """Why a part is set aside or blocks a test, in words: it fails its test, was shown wrong, or hung."""
        if part in self.failed:
            return messages.part_reason_failed(self.failed[part])
        return self.charged.get(part) or messages.part_reason_failed('?')

    def _said_at(self, result):
        said = where_said(result.harness.get('hang'), self.functions) if isinstance(result.harness, dict) else None
        if not said:
            return ''
        return messages.said_at(said[1], said[0])

    @staticmethod
    def _stalled_at_import(result):
        """A probe process stopped at its deadline (or its memory cap: a hang that allocates) that never said
        model.py was imported."""
        h = result.harness if isinstance(result.harness, dict) else {}
        return h.get('ended') in ('timeout', 'wall', 'memory') and 'imported_after' not in h

    def _passes(self, probe_id, result, results):
        try:
            return verdict_for(self.grading.test(probe_id), result, self.fx, self.grading, results).passed
        except Exception:  # noqa: BLE001  a judge's failure here only means: nothing decided from it
            return True

    def _place_hang(self, probe_id, said=''):
        """The part that hung: the probe's only part, else the one of its parts no finished probe ran (`said`: where
        the process said it was, words only)."""
        calls = registry.BY_ID[probe_id].calls
        candidates = list(calls) if len(calls) == 1 else [p for p in calls if p not in self.proven]
        if len(candidates) == 1:
            part = candidates[0]
            self.hung.setdefault(part, NOT_RUN % (registry.PARTS[part], self.number(probe_id), said))
            # a part that hung is charged like one shown wrong (its own tests score 0), and set aside in later cases
            self.charged.setdefault(part, messages.hung_reason(self.number(probe_id)))

    def skip(self, probe_id, results=None):
        """The sandbox's skip hook (first run): the sentence of a part that hung and that this probe would run
        again, or of an import that did not finish."""
        if self.import_hang:
            return messages.not_run_import(self.import_hang, self.number('submission'))
        entry = registry.BY_ID.get(probe_id)
        for part, sentence in self.hung.items():
            if entry is not None and part in entry.calls:
                return sentence
        return None

    def skip_second(self, probe_id, results=None):
        return messages.not_run_import(self.import_hang, self.number('submission')) if self.import_hang else None

    # ------------------------------------------------------------------ the plan of the second run

    def plan(self, probe_id, native):
        plan = Plan({})
        for unit, keys in case_units(self.fx, probe_id).items():
            parts, owns = registry.case_parts(probe_id, unit)
            hung = [p for p in parts if p in self.hung and p in owns]
            # set aside only on evidence from this case (judge/evidence.py), or where the part hung before
            here = self.wrong.get(probe_id, {}).get(unit, {})
            failed = [p for p in parts if p not in owns and (p in here or p in self.hung)]
            ran = native.status != 'skipped'
            if hung:
                plan.units[unit], plan.why[unit] = 'not_run', self.hung[hung[0]]
            elif not failed:
                plan.units[unit] = 'native' if ran else 'second'
            elif ran and forward_ok(self.grading, self.fx, probe_id, unit, keys, native):
                plan.units[unit] = 'native'
                plan.why[unit] = self._works_here(failed)
            else:
                aside, why = self._aside(probe_id, unit, parts, failed)
                plan.units[unit] = 'excluded' if aside is None else 'second'
                plan.why[unit] = why
                if aside is not None:
                    plan.aside[unit] = aside
        return plan

    # 7.1's cases and the unit of the test whose outputs each is compared with: each case runs in that unit's world
    CAUSALITY_MIRRORS = {'mha': ('mha-rope', ''), 'gqa': ('gqa-rope', ''), 'gpt': ('model', 'rope-gqa')}

    def mirrored_causality(self, native):
        """7.1's plan: each case is run as the case it is compared with was (first run, or second run without the
        same parts); its GPT case, where 8.1's GQA case is set aside, at n_kv_head = n_query_head against 8.1's MHA
        case. Its values are relative, so its own first run cannot tell a wrong part: its evidence does."""
        plan = Plan({})
        for unit, (pid, their_unit) in self.CAUSALITY_MIRRORS.items():
            parts, owns = registry.case_parts('causality', unit)
            hung = [p for p in parts if p in self.hung and p in owns]
            theirs = self.plans.get(pid)
            decision = theirs.units.get(their_unit, 'native') if theirs is not None else 'native'
            if hung:
                plan.units[unit], plan.why[unit] = 'not_run', self.hung[hung[0]]
                continue
            if unit == 'gpt' and decision == 'excluded':
                decision = self._gpt_fallback(plan, theirs)
            elif decision == 'second':
                plan.aside[unit] = theirs.aside.get(their_unit, ())
            elif decision in ('excluded', 'not_run'):
                plan.why[unit] = theirs.why.get(their_unit, '')
            if decision == 'native' and native.status == 'skipped':   # the first run skipped it: run it now
                decision = 'second'
            plan.units[unit] = decision
        return plan

    def _gpt_fallback(self, plan, model_plan):
        """7.1's GPT case where 8.1's GQA case is set aside: as 8.1's MHA case, at n_kv_head = n_query_head."""
        mha_case = model_plan.units.get('rope') if model_plan is not None else None
        if self._bad('gqa') and not self._bad('mha') and mha_case in ('native', 'second'):
            plan.aside['gpt'] = tuple(sorted({'gqa'} | set(model_plan.aside.get('rope', ()) if mha_case == 'second'
                                                            else ())))
            return 'second'
        gqa_case = model_plan.units.get('gqa') if model_plan is not None else None
        if self.failed.get('gqa') == self.number('gqa-rope') and gqa_case in ('native', 'second'):
            plan.aside['gpt'] = ('gqa_rope',)   # as 8.1's GQA case without RoPE
            return 'second'
        plan.why['gpt'] = model_plan.why.get('rope-gqa', '') if model_plan is not None else ''
        return 'excluded'

    def _bad(self, part):
        return part in self.failed or part in self.hung or part in self.charged

    def _works_here(self, failed):
        return messages.works_here(failed, [self.reason(p) for p in failed])

    def _aside(self, probe_id, unit, parts, failed):
        """(parts set aside, words) for a unit judged without its failed parts; (None, why) when nothing of the
        student's would be left or a failed part has nothing to stand in its place here."""
        aside, parts = [], list(parts)
        for p in failed:
            if p == 'gqa' and unit in registry.GQA_SET_ASIDE.get(probe_id, ()):
                instead = self._gqa_instead(parts)
                if instead is None:
                    return None, self._not_judged(failed)
                aside.append(instead)   # their MHA instead of their GQA, or their GQA without RoPE
                parts = [q for q in parts if q != 'gqa'] + ['mha'] if instead == 'gqa' else \
                    [q for q in parts if q != 'rope']
            elif p != 'rope':
                return None, self._not_judged(failed)
        if 'rope' in failed and 'rope' in parts:
            aside.append('rope')
        if not [p for p in parts if p in registry.STUDENT_PARTS and p not in aside]:
            return None, self._not_judged(failed)
        return tuple(sorted(aside)), ''

    def _gqa_instead(self, parts):
        """How a GPT case runs without the student's failed GQA: 'gqa' (their MHA, n_kv_head = n_query_head) where
        their MHA works, 'gqa_rope' (their GQA without RoPE) where it failed only with RoPE; None: no way."""
        if not self._bad('mha'):
            return 'gqa'
        if 'rope' in parts and self.failed.get('gqa') == self.number('gqa-rope'):
            return 'gqa_rope'
        return None

    def _not_judged(self, failed):
        return messages.unit_not_judged([messages.part_fails(p, self.reason(p)) for p in failed])

    def part_tests_again(self):
        """{probe id: Plan} of the second run's first stage: the part tests (3.1, 5.1) that failed only where a
        RoPE that fails ran in them."""
        return {pid: plan for pid, plan in self.plans.items() if plan.runs and pid in self._pending_tests()}

    def _pending_tests(self):
        return {pid for pids in self.pending.values() for pid in pids}

    def settle_parts(self, second):
        """After the first stage: a pending part fails when its test fails again without the failed RoPE."""
        self._settled |= set(second)
        merged, view = self.merge(self.native, second)
        for part, pids in sorted(self.pending.items()):
            for pid in pids:
                if part not in self.failed and not self._passes_merged(pid, merged, view):
                    self.failed[part] = self.number(pid)
        self.pending = {}

    def _passes_merged(self, probe_id, merged, view):
        try:
            return verdict_for(self.grading.test(probe_id), merged[probe_id], view, self.grading, merged).passed
        except Exception:  # noqa: BLE001
            return True

    def plan_later(self):
        """{probe id: Plan} of the second run's second stage: every later probe that a failed part spoiled. 7.1
        follows the tests whose outputs it is compared with (planned first: 3.1, 5.1, 8.1)."""
        if not self.on_evidence:
            return {}
        for pid, result in self.native.items():
            if pid in registry.CASE_PARTS and pid not in self.plans and pid != 'causality':
                self.plans[pid] = self.plan(pid, result)
        if 'causality' in self.native:
            self.plans['causality'] = self.mirrored_causality(self.native['causality'])
        return {pid: plan for pid, plan in self.plans.items() if plan.runs and pid not in self._settled}

    def second_run(self):
        """{probe id: Plan} of every probe the second run runs (both stages)."""
        return {pid: plan for pid, plan in self.plans.items() if plan.runs}

    # ------------------------------------------------------------------ the two runs, merged

    def merge(self, native, second):
        """({probe id: the result the judges read}, the fixtures they read it against): per unit the first or the
        second run's outputs, without the units set aside."""
        merged, view = dict(native), {}
        for pid, plan in self.plans.items():
            if all(d == 'native' for d in plan.units.values()):
                continue
            merged[pid] = merge_result(pid, plan, native.get(pid), second.get(pid))
            view[pid] = plan
        return merged, PlanView(self.fx, view)

    # ------------------------------------------------------------------ the words

    def lines(self, probe_id, merged):
        """What the student reads first in a test whose probe was planned (and where its process was stopped)."""
        out = [self.stopped[probe_id]] if probe_id in self.stopped else []
        plan = self.plans.get(probe_id)
        if plan is None:
            return out
        report = merged.info.get('set_aside') if isinstance(merged.info.get('set_aside'), dict) else {}
        built = 'rope' in (report.get('built') or [])   # words only: a claim the harness did not ask for is ignored
        kept = 'rope' in (report.get('kept') or []) and not built
        several = len(plan.units) > 1
        for unit, decision in plan.units.items():
            head = messages.case_head(unit) if several else ''
            if decision == 'second':
                out += [head + s for s in self._second_words(plan.aside.get(unit, ()), built, kept)]
            elif plan.why.get(unit) and decision != 'native':
                out.append(head + plan.why[unit])
        return out

    def _second_words(self, aside, built, kept):
        words = []
        if 'gqa' in aside:
            words.append(messages.gqa_aside(self.reason('gqa')))
        if 'gqa_rope' in aside:
            words.append(messages.gqa_rope_aside(self.reason('gqa'), self.number('gqa')))
        if 'rope' in aside and kept:
            words.append(messages.rope_kept(self.reason('rope')))
        elif 'rope' in aside and built:
            words.append(messages.rope_aside(self.reason('rope')))
        elif 'rope' in aside:   # the code failed before it built a RoPE at all: the lines below say where
            words.append(messages.rope_run_again(self.reason('rope')))
        return words

    def nothing_left(self, probe_id):
        """The sentence of a test none of whose units is judged (all set aside), else None."""
        failed = self.left_out_by(probe_id)
        return None if failed is None else messages.nothing_left([messages.part_fails(p, self.reason(p))
                                                                  for p, _ in failed])

    def left_out_by(self, probe_id):
        """[(part, number of the test it fails, or None where it was shown wrong elsewhere)] of a test none of whose
        units is judged (all set aside), else None."""
        plan = self.plans.get(probe_id)
        if plan is None or not plan.units or any(d != 'excluded' for d in plan.units.values()):
            return None
        failed = sorted({p for u in plan.units for p in registry.case_parts(probe_id, u)[0] if self._bad(p)})
        return [(p, self.failed.get(p)) for p in failed]   # the number of the test it fails (None: shown wrong)

    def blocked(self, spec):
        """Why an optional test cannot be judged: a required part it builds on fails (its number), else None."""
        entry = registry.BY_ID[spec.id]
        for part, number in sorted(self.failed.items(), key=lambda kv: kv[1]):
            if part in entry.calls:
                return messages.builds_on_failed(registry.PARTS[part], self.reason(part))
        for part in sorted(self.charged):
            if part in entry.calls and part not in self.hung:
                return messages.builds_on_failed(registry.PARTS[part], self.reason(part))
        return None

    def optional_verdict(self, spec, result, probes, specs, fixtures):
        """An optional test the student attempted (grade.py says "Not attempted" first, from the source): judged as
        any test, where it passes; "not judged" (0 / 0, not red) where a required part it builds on fails or hung,
        or a required test did not finish either; otherwise its verdict."""
        if result.status == 'not_implemented':
            return Verdict(0.0, [messages.optional_not_implemented(result.message)], not_implemented=True)
        verdict = None if result.status in ('skipped', 'timeout') \
            else verdict_for(spec, result, fixtures, self.grading, probes)
        if verdict is not None and (verdict.passed or verdict.not_implemented):
            if not verdict.not_implemented:
                verdict.lines[:0] = self.lines(spec.id, result)
            return verdict
        reason = self.blocked(spec)
        if result.status == 'skipped':
            reason = reason or result.message
        elif result.status == 'timeout' and reason is None:
            late = [s for s in specs if not s.optional_part and s.id in probes and probes[s.id].status == 'timeout']
            if late:
                reason = messages.did_not_finish_either(late[0].number)
        if reason:
            return Verdict(0.0, [messages.not_judged_line(reason)], not_judged=True)
        return verdict if verdict is not None else verdict_for(spec, result, fixtures, self.grading, probes)
