"""
A grading's judging (Judging): the submission built into a plan, run in the sandbox (the first run,
then judge/set_aside.py's second) and judged one test at a time, once each; with the helpers it
reads: the tests graded, the arrays each probe may return, a probe's seconds for staff.
grade.py's pipeline builds one per grading and hands its verdicts to results.py.
"""

import dataclasses
import math
import time

from autograder.contract import report_schema
from autograder.judge import (evidence, inputs, interface_check, messages, probe_job, registry, rope_service, set_aside,
                              student_text, submission, verdicts)
from autograder.judge.areas import Verdict
from autograder.judge.imported import import_verdict, static_findings, submission_verdict, upload_problems
from autograder.judge.known_bugs import BY_ID as KNOWN_BUGS
from autograder.judge.probe_job import RunResult


def _probe_ids(specs):
    """The probes to run: those of the graded tests and the other probes their judges read as evidence."""
    return registry.probes_for([s.id for s in specs if s.id != 'submission'])


def first_line(text):
    return text.strip().splitlines()[0] if text.strip() else text


def expected_outputs(fx, probe_ids, profile):
    """{probe id: {key: shape}} of the arrays each probe may return: the reference's, from the fixtures."""
    spec = {}
    for pid in probe_ids:
        arrays = fx.probe(pid)
        if pid.split('~')[0] == 'loss-curve' and arrays:  # the reference trains on other seeds than the student's
            # every array of one reference seed ('seed1' or 'seed1/<name>'), renamed for the student's seed
            # (the fixtures' own arrays for the student's seed when regenerate ran it, e.g. held-out logits)
            student = 'seed%d' % profile.loss_curve.student_seed
            own = {k: v for k, v in arrays.items() if k.split('/')[0] == student}
            first = sorted(arrays)[0].split('/')[0]
            arrays = own or {student + k[len(first):]: v for k, v in arrays.items() if k.split('/')[0] == first}
        spec[pid] = {k: v.shape for k, v in arrays.items()}
    return spec


def probe_seconds(result):
    """A probe's seconds for staff (extra_data.probe_seconds): its own compute as its report gives it, and for a
    process whose report was never read (stopped at a deadline or wall cap, killed) the wall seconds the harness
    measured, not the 0.0 of a report that does not exist (a hang of 60 s read 0.0)."""
    wall = (result.harness or {}).get('wall_seconds')
    return round(float(wall) if result.unread and isinstance(wall, (int, float)) else result.seconds, 2)


def graded_specs(grading, skip=()):
    """The tests graded: those enabled in grading.yaml, less any the caller skips (never on Gradescope)."""
    return [s for s in grading.enabled_tests() if s.id not in skip or s.id == 'submission']


class Judging:
    """
    The submission built into a plan (__init__), run in the sandbox (run_probes), and judged one
    test at a time, once each: `verdict(spec)` (`final(spec)` for results.Results.from_verdicts)
    returns the verdict kept when the test was judged, as its probes ended
    (the partial results.json) or at the end. The run is a straight line of two: every probe on the
    student's own code, then (judge/set_aside.py) the cases that a failed part spoiled, again without
    that part; the judges read the two merged.
    """

    def __init__(self, grading, profile_name, located, fx, sandbox, skip=(), private=(), progress=None):
        self.grading, self.fx, self.located = grading, fx, located
        self.sandbox, self.private, self.progress = sandbox, private, progress
        self.specs = graded_specs(grading, skip)
        self.verdicts = {}
        self.import_judged = None   # test 1.1 as the import check left it (ImportVerdict), judged once
        self.run_result = None
        # model.py read and parsed once: every check below takes this value (submission.Upload)
        self.upload = submission.read_upload(located.path) if located.path else None
        self.problems = upload_problems(self.upload) if self.upload is not None else []
        self.info = {'sandbox': 'not run'}
        self.aside = None
        self.static = None
        # the student's own text of this grading, one budget for all tests (judge/student_text.py)
        self.text = student_text.Budget(grading.sandbox['student_text_chars'], grading.sandbox['student_text_budget'])
        self.taken = {}   # probe id -> (the result as the sandbox gave it, as the judges read it)
        self.records = {}   # probe id -> what its first run recorded of the student's parts (judge/evidence.take)
        if located.problem or self.problems:
            return
        self.static = static_findings(self.upload)
        profile = self.profile = grading.profiles[profile_name]
        self.profile_name = profile_name
        self.untouched = interface_check.untouched_optional(self.upload.tree)
        self.probe_ids = _probe_ids(self.specs)
        # the input set drawn for these bytes (inputs.for_submission)
        self.drawn = inputs.for_submission(fx, profile, self.probe_ids, self.upload.raw)
        self.fx = self.drawn.fixtures
        self.aside = set_aside.SetAside(grading, self.fx, self.upload.tree, self.specs, profile.model.n_query_head)

    def run_probes(self):
        """
        The first run (every probe on the student's own code, each test judged as soon as its probes
        have ended and no second run may judge them again) and the second run; nothing to
        run where the upload could not be run at all. Returns self.
        """
        if self.aside is None:
            return self
        sandbox, profile, fx, drawn = self.sandbox, self.profile, self.fx, self.drawn
        probe_ids, started = self.probe_ids, time.time()
        options = dict(probe_inputs=drawn.inputs, expected=expected_outputs(fx, probe_ids, profile),
                       private=self.private,
                       budget_end=started + self.grading.sandbox['total_seconds'],
                       exits=submission.names_exit(self.upload.tree),
                       # one budget of the grader's RoPE for the whole grading, both runs (judge/rope_service.py)
                       rope_budget=rope_service.Budget(self.grading.sandbox['rope_service_calls'][self.profile_name],
                                                       self.grading.sandbox['rope_service_mb'][self.profile_name]),
                       loss_curve_seeds=[profile.loss_curve.student_seed])
        # the first run records what the student's parts do inside each case (judge/evidence.py)
        recorded = [pid for pid in probe_ids if pid in registry.RECORDS]
        expected = dict(options['expected'])
        expected.update({pid: dict(expected.get(pid, {}), **evidence.slots()) for pid in recorded})
        first = self._run(probe_ids, on_result=self._on_result(self.progress), skip=self.aside.skip,
                          probe_jobs={pid: {'record': True} for pid in recorded}, **dict(options, expected=expected))
        second = {}
        if first.import_result is not None and first.import_result.status == 'ok':
            # the second run (judge/set_aside.py): first the part tests a failed RoPE spoiled (whether their own part
            # fails waits for them), then every later case a failed part spoiled
            second.update(self._second(self.aside.part_tests_again(), options))
            self.aside.settle_parts(second)
            second.update(self._second(self.aside.plan_later(), options))
        probes, self.fx = self.aside.merge(first.probes, second)
        self.run_result = dataclasses.replace(first, probes=probes)
        self.info = {'input_set': drawn.set_index,
                     'sandboxed_as': first.sandboxed_as or 'same user (%s)' % sandbox.user_note,
                     'probe_seconds': {k: probe_seconds(v) for k, v in first.probes.items()},
                     # each process's own memory at its most, as the harness read it (sandbox.probe_memory_mb)
                     'probe_memory_mb': {k: round((v.harness or {}).get('memory_peak_bytes', 0) / 2 ** 20, 1)
                                         for k, v in first.probes.items() if isinstance(v.harness, dict)},
                     'wall_seconds': round(time.time() - started, 2), 'child_log_tail': first.stdout_tail[-2000:],
                     'import_seconds': {k: (first.import_result.harness or {}).get(k + '_seconds')
                                        for k in ('cpu', 'wall')} if first.import_result is not None else None,
                     'isolation': first.isolation, 'student_text': self.text.report()}
        self.info['evidence'] = {'records': {k: v if isinstance(v, int) else len(v) for k, v in self.records.items()},
                                 'charged': dict(self.aside.charged)}
        if second:   # staff: what the second run did, and how many calls of the grader's RoPE it answered
            self.info['second_run'] = {pid: dict(self.aside.plans[pid].job(), seconds=probe_seconds(r),
                                                 rope_calls=rope_service.calls_of((r.harness or {}).get('link')),
                                                 rope_mb=rope_service.mb_of((r.harness or {}).get('link')))
                                       for pid, r in second.items()}
        # the student's per-iteration losses, for staff pictures (autograder/staff/regrade/plots.py)
        curve = first.probes['loss-curve'].arrays.get('seed%d' % profile.loss_curve.student_seed) \
            if 'loss-curve' in first.probes else None
        if curve is not None and curve.ndim == 1 and curve.dtype.kind in 'iuf':
            self.info['loss_curve'] = [round(float(x), 5) if math.isfinite(x) else None for x in curve[:100000]]
        return self

    def _second(self, plans, options):
        """{probe id: result} of one stage of the second run: the probes of `plans`, each told what is set aside."""
        if not plans:
            return {}
        jobs = {pid: plan.job() for pid, plan in plans.items()}
        # a probe run in another configuration returns its arrays ('<probe>~gqa', '<probe>~gqa_rope' fixtures)
        other = {pid: pid for pid in plans}
        for pid in plans:
            other[pid] += ''.join('~' + c for c in jobs[pid]['set_aside'] if c in registry.OTHER_CONFIGURATIONS)
        shapes = expected_outputs(self.fx, list(other.values()), self.profile)
        expected = {pid: shapes[alt] for pid, alt in other.items()}
        run_result = self._run(list(plans), second=True, skip=self.aside.skip_second, probe_jobs=jobs,
                               **dict(options, expected=expected))
        return run_result.probes

    def _run(self, probe_ids, second=False, skip=None, on_result=None, **options):
        """One run of `probe_ids` in the sandbox (probe_job.execute), every text its processes wrote
        taken from the grading's budget (a second run's results apart from the first's; its import
        check, a repeat, is not read: its failure is said in that run's probes)."""
        timeouts = {pid: self.grading.test(pid).timeout for pid in probe_ids}   # evidence probes keep their own
        run_plan = probe_job.plan(self.located.path, self.profile, probe_ids, timeouts,
                                  self.grading.test('submission').timeout, second=second, **options)
        run_result = probe_job.execute(self.sandbox, run_plan, skip=skip, on_result=on_result)
        if second:
            return dataclasses.replace(run_result, probes={k: self._student_text(k + ' (second run)', v)
                                                           for k, v in run_result.probes.items()})
        return self._clipped(run_result)

    def _on_result(self, progress):
        """
        The callback called as each probe of the first run ends: set_aside.py learns which parts
        failed or hung (and plans that probe's second run); with `progress`, each test is judged as
        soon as its probes have ended and none of them waits for the second run (its verdict kept:
        verdict() returns it), and the verdicts so far are handed to it. Test 1.1 is judged once, as
        the import check ends (judge_import), and shown there as that left it (what a watchdog stop
        keeps); its final verdict adds every probe's notes, and whether any stalled importing model.py.
        """
        seen, done = {}, {}
        needs = {spec.id: ((report_schema.IMPORT,) if spec.id == 'submission' else registry.probes_for([spec.id]))
                 for spec in self.specs}

        def on_result(probe_id, result):
            seen[probe_id] = self._student_text(probe_id, result)
            self.aside.observe(probe_id, seen[probe_id], {k: v for k, v in seen.items() if k != report_schema.IMPORT},
                               self.records.get(probe_id, ()))
            if probe_id in self.records:   # weighed: only the count is kept (staff's extra_data.evidence)
                self.records[probe_id] = len(self.records[probe_id])
            if probe_id == report_schema.IMPORT:
                self.judge_import(seen[probe_id])
            if progress is None:
                return
            self.run_result = RunResult(seen.get(report_schema.IMPORT),
                                        {k: v for k, v in seen.items() if k != report_schema.IMPORT})
            for spec in self.specs:   # a test whose probes a second run may judge again waits for the final judging
                if spec.id not in done and all(p in seen for p in needs[spec.id]) \
                        and not set(registry.CASE_PARTS) & set(needs[spec.id]):
                    try:
                        done[spec.id] = submission_verdict(self.import_judged, {}, self.import_hang) \
                            if spec.id == 'submission' else self.verdict(spec)
                    except Exception:  # noqa: BLE001  the final judging reports it
                        pass
            progress(dict(done))
        return on_result

    def _student_text(self, probe_id, result):
        """`result` with its student text taken from the grading's one budget (student_text.Budget), once per
        probe: probes end in test order, so the budget is spent in test order. The import check's process gets
        no inputs: its texts are shown whole, and counted."""
        raw, taken = self.taken.get(probe_id, (None, None))
        if raw is not result:
            bare, records = evidence.take(result)   # the records never reach a judge or the student's text
            if records:
                self.records[probe_id] = records
            taken = self.text.result(bare, whole=probe_id == report_schema.IMPORT)
            self.taken[probe_id] = (result, taken)
        return taken

    def _clipped(self, run_result):
        """The run as the judges read it: every probe's result through _student_text, in test order (those the
        judge's loop told on_result of were taken as they ended)."""
        imported = self._student_text(report_schema.IMPORT, run_result.import_result)
        return dataclasses.replace(run_result, import_result=imported,
                                   probes={k: self._student_text(k, v) for k, v in run_result.probes.items()})

    @property
    def import_hang(self):
        """The sentence for model.py's import that did not finish (SetAside.import_hang); None where it did or nothing
        ran."""
        return self.aside.import_hang if self.aside is not None else None

    def judge_import(self, imported):
        """Test 1.1 as the import check (`imported`, its ProbeResult; None where the file could not be run)
        left it: judged once and kept (ImportVerdict)."""
        if self.import_judged is None:
            self.import_judged = import_verdict(self.located, self.problems, imported, self.import_hang, self.static)
        return self.import_judged

    def verdict(self, spec):
        """The test's verdict, judged once and kept: as its probes ended (_on_result) or now, at the
        end (1.1 at the end, from what the import check left, judge_import, and the probes' notes)."""
        if spec.id not in self.verdicts:
            self.verdicts[spec.id] = self._verdict(spec)
        return self.verdicts[spec.id]

    def _verdict(self, spec):
        located, run_result = self.located, self.run_result
        if spec.id == 'submission':
            judged = self.judge_import(run_result.import_result if run_result is not None else None)
            return submission_verdict(judged, run_result.probes if run_result is not None else {},
                                      self.import_hang)
        number = self.grading.test('submission').number   # the import test, that the lines below point to
        if located.problem or self.problems:
            return Verdict(0.0, [messages.not_graded_test(first_line(located.problem or self.problems[0]), number)])
        if run_result.import_result.status != 'ok':
            if self.import_hang:
                return Verdict(0.0, [messages.not_run_import(self.import_hang, number)])
            return Verdict(0.0, [messages.not_graded_import_test(run_result.import_result.message, number)])
        result = run_result.probes[spec.id]
        if spec.optional_part:
            return self._optional_verdict(spec, result)
        if result.status == 'skipped':
            return Verdict(0.0, [result.message])
        nothing = self.aside.nothing_left(spec.id)
        if nothing:
            return Verdict(0.0, [nothing] + self._part_causes(spec.id))
        verdict = verdicts.verdict_for(spec, result, self.fx, self.grading, run_result.probes)
        verdict.lines[:0] = self.aside.lines(spec.id, result)
        if spec.id == 'loss-curve' and not verdict.passed:
            verdict.lines += self._gradients_cause()
        return verdict

    def final(self, spec):
        """The test's verdict in the final results.json: its kept verdict, at 0 where it is a part's own test and
        that part was shown wrong, or hung, where a later test ran it (SetAside.charge; known only once every probe
        ended, so a partial results.json shows the part's own verdict)."""
        verdict = self.verdict(spec)
        charged = self.aside.charge(spec.id) if self.aside is not None and self.run_result is not None else None
        if charged:
            return dataclasses.replace(verdict, fraction=0.0,
                                       lines=[charged] + self._sibling_causes(spec) + list(verdict.lines))
        return verdict

    def _sibling_causes(self, spec):
        """What the charged part's other own tests named as its cause: their known bug and their hints."""
        part = next(p for p, tests in registry.PART_TESTS.items() if spec.id in tests)
        lines = []
        for other in self.specs:
            if other.id == spec.id or other.id not in registry.PART_TESTS[part]:
                continue
            judged = self.verdict(other)
            if judged.known_bug in KNOWN_BUGS:
                lines.append(messages.part_likely_bug(part, other.number, KNOWN_BUGS[judged.known_bug].description,
                                                      judged.known_bug))
            hints = [h.strip() for line in judged.lines for h in line.split('\n') if h.strip().startswith('hint: ')]
            lines += [messages.sibling_hint(other.number, h[len('hint: '):]) for h in dict.fromkeys(hints)]
        return lines

    def _gradients_cause(self):
        """10.1's training follows the gradients 10.2 judges: where 10.2 finds some missing or wrong, 10.1 says so."""
        gradients = [t for t in self.specs if t.id == 'gradients']
        if not gradients or self.run_result.probes.get('gradients') is None:
            return []
        judged = self.verdict(gradients[0])
        return [messages.training_follows_gradients(gradients[0].number)] if judged.training_gradients_differ else []

    def _part_causes(self, probe_id):
        """The known bug each failed part's own test named (Verdict.known_bug), said where a test has nothing left."""
        lines = []
        for part, number in self.aside.left_out_by(probe_id) or ():
            judged = [self.verdict(t) for t in self.specs if t.number == number and t.id != probe_id]
            for bug_id in sorted({v.known_bug for v in judged if v.known_bug}):
                lines.append(messages.part_likely_bug(part, number, KNOWN_BUGS[bug_id].description, bug_id))
        return lines

    def _optional_verdict(self, spec, result):
        """An untouched optional part reads "Not attempted" whatever else fails (unless its tests pass anyway: code
        written elsewhere); an attempted one is judged by the optional rules of judge/set_aside.py."""
        untouched = spec.optional_part in self.untouched
        try:
            verdict = self.aside.optional_verdict(spec, result, self.run_result.probes, self.specs, self.fx)
        except Exception:  # noqa: BLE001  judged in full below, where it is not the handout's TODO
            if not untouched:
                raise
            verdict = Verdict(0.0)
        if untouched and not verdict.passed:
            return Verdict(0.0, [messages.optional_todo(interface_check.OPTIONAL_CODE[spec.optional_part])],
                           not_implemented=True)
        return verdict
