"""
One run in the sandbox, planned and driven here alone for the grading (grade.py) and for
regenerate (the reference and every known bug): the job every probe process reads (its
profile, the loss-curve seeds, the resource limits), the inputs of each probe's process, the
services of the harness link (a RunPlan), and the loop over the probes (execute), which drives
the sandbox's session one process at a time, answers what each process asks over its link, and
decides what runs.
"""

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

from autograder.contract import report_schema
from autograder.judge import inputs, messages, rope_service
from autograder.judge.areas import memory
from autograder.sandbox import LinkAnswer, ProbeJob, ProbeResult


def job(profile, loss_curve_seeds=None):
    """What every probe process of the run reads: the profile (as the plain dict the child reads), its limits and
    (when given) the loss-curve seeds."""
    out = {'profile': profile.as_json(), 'limits': memory.probe_limits(profile)}
    if loss_curve_seeds is not None:
        out['loss_curve_seeds'] = list(loss_curve_seeds)
    return out


def link_services(profile, rope_for=(), rope_budget=None):
    """
    {probe id: service(payload, pid) -> (reply, log entries) answering what its process asks over
    its harness link (execute calls it; the sandbox only hands the questions over)}: the memory
    probe's torch.cuda queries are answered from the kernel's figures of the asking process and
    logged here (contract/memory_readings.py),
    the only readings 9.1 believes (ProbeResult.harness['link']); the probes of `rope_for` (whose
    RoPE judge/set_aside.py set aside) get the grader's RoPE (judge/rope_service.py), every call logged, each
    request counted against `rope_budget` (the grading's rope_service.Budget: what an honest submission needs,
    with margin; None: no cap, for staff tools).
    """
    from autograder.contract.memory_readings import Readings
    readings = Readings(forwarded=profile.device == 'cuda')

    def memory(payload, pid):
        before = len(readings.log)
        reply = readings(payload, pid)
        return reply, readings.log[before:]   # the entries this query added (memory_stats adds two)
    services = {'memory': memory}
    services.update({pid: rope_service.for_probe(rope_budget) for pid in rope_for})
    return services


@dataclass
class RunResult:
    """One run in the sandbox as the harness's loop assembled it: the import check, every probe (one
    not run says why), and what staff read of the session."""
    import_result: ProbeResult
    probes: Dict[str, ProbeResult]
    stdout_tail: str = ''
    sandboxed_as: Optional[str] = None
    wall_seconds: float = 0.0
    isolation: dict = field(default_factory=dict)


@dataclass(frozen=True)
class RunPlan:
    """
    One run in the sandbox, as values (execute runs it). job: what every probe process reads (job()
    below); its 'limits' ({probe id: limit}) are cut so that each process reads its own alone.
    inputs: {probe id: {key: array}} (inputs.per_probe); timeouts: {probe id: CPU seconds};
    expected: {probe id: {key: reference shape}} (None: any); link_services: {probe id: what answers
    its harness link (link_services())}; probe_jobs: {probe id: what that probe alone is told} (e.g.
    judge/plans.Plan.job); private: paths student code must not read; budget_end: the time.time()
    past which no probe starts (a second run of one grading keeps the first's; None: the sandbox's
    total_seconds from now); second: a second run (its import check is a repeat: a failure of it is
    said so in its probes' messages); exits: whether model.py names a way to exit (submission.names_exit), the
    only case in which a process that exited without results is told its code may have called it.
    """
    model_py: str
    job: dict
    probe_ids: Tuple[str, ...]
    import_timeout: float
    timeouts: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    expected: Optional[dict] = None
    link_services: dict = field(default_factory=dict)
    probe_jobs: dict = field(default_factory=dict)
    private: tuple = ()
    need_data: bool = False
    budget_end: Optional[float] = None
    second: bool = False
    # model.py names sys.exit, os._exit or the like (submission.names_exit): the words may blame them
    exits: bool = True


def plan(model_py, profile, probe_ids, timeouts, import_timeout, loss_curve_seeds=None, arrays=None,
         probe_inputs=None, probe_jobs=None, **options):
    """
    The RunPlan of `probe_ids` on `model_py` with the job, the inputs cut per probe (`probe_inputs`
    as inputs.for_submission cut them, else from `arrays`, default inputs.build(profile)) and the
    link services; `probe_jobs` ({probe id: what that probe alone is told}, e.g. the parts judge/set_aside.py
    set aside: judge/plans.Plan.job) go into each probe's job; `rope_budget`: what the grader's RoPE may
    answer in the whole grading (rope_service.Budget, shared by its runs; None: no cap); `options`: RunPlan's other
    fields (expected, private, budget_end, second).
    """
    rope_budget = options.pop('rope_budget', None)
    if probe_inputs is None:
        probe_inputs = inputs.per_probe(profile, probe_ids, arrays)
    probe_jobs = probe_jobs or {}
    rope_for = [pid for pid, extra in probe_jobs.items() if 'rope' in extra.get('set_aside', ())]
    return RunPlan(model_py, job(profile, loss_curve_seeds), tuple(probe_ids), import_timeout,
                   timeouts, probe_inputs, link_services=link_services(profile, rope_for, rope_budget),
                   need_data='loss-curve' in probe_ids, probe_jobs=probe_jobs, **options)


def process_job(job, probe_id, extra=None):
    """What the process of `probe_id` reads: the run's `job` with what it alone is told (`extra`),
    and of the run's 'limits' its own alone (keyed by nothing that names it)."""
    whole = dict(job, **(extra or {}))
    out = {k: v for k, v in whole.items() if k != 'limits'}
    out['limit'] = whole.get('limits', {}).get(probe_id)
    return out


def execute(sandbox, run_plan, skip=None, on_result=None):
    """
    Run `run_plan` (a RunPlan) in one grading session of `sandbox`: the import check, then each
    probe the harness does not skip while the grading's budget lasts, each told what it needs as a
    value. skip(probe id, {probe id: ProbeResult} so far) -> str | None, asked before each probe: a
    string, and the probe is not run (status 'skipped', that message). on_result(probe id,
    ProbeResult): called as each ends (results.json written as it goes); its failure never stops the
    grading. Every message a student reads of how a process ended is worded here (with messages'
    section "how a process ended").
    Returns a RunResult; never raises for anything the student's code does (SandboxRefused: no
    student code ran).
    """
    started = time.time()
    settings, results = sandbox.cfg, {}
    with sandbox.grading(run_plan.model_py, run_plan.private, run_plan.need_data,
                         run_plan.budget_end) as session:
        services = run_plan.link_services
        check = session.import_check(process_job(run_plan.job, report_schema.IMPORT), run_plan.import_timeout,
                                     report_schema.IMPORT in services)
        imported = worded(report_schema.IMPORT, served(check, services.get(report_schema.IMPORT)), settings,
                          run_plan.exits)
        _tell(on_result, report_schema.IMPORT, imported)
        for pid in run_plan.probe_ids if imported.status == 'ok' else ():
            skipped = skip(pid, dict(results)) if skip is not None else None
            if skipped is not None:
                results[pid] = ProbeResult('skipped', str(skipped))
            elif session.budget_spent():
                results[pid] = ProbeResult('timeout', budget_spent(settings))
            else:
                result = served(session.probe(_probe_job(run_plan, pid)), services.get(pid))
                results[pid] = worded(pid, result, settings, run_plan.exits)
            _tell(on_result, pid, results[pid])
    missing = messages.second_import_failed(imported.message) if run_plan.second \
        else messages.NOT_IMPORTED
    for pid in run_plan.probe_ids:
        results.setdefault(pid, ProbeResult('missing', missing))
    report = session.report
    return RunResult(imported, results, report.stdout_tail, report.sandboxed_as,
                     time.time() - started, report.isolation)


def served(run, service):
    """The ProbeRun `run` driven to its end, each question its process asks over the harness link
    answered by `service` (link_services()); its ProbeResult. A service's failure costs that probe's
    link (an empty reply, the error a fact in harness['link_errors']), never the grading."""
    with run:
        for request in run:
            run.answer(_answer(service, request))
    return run.result


def _answer(service, request):
    """`service`'s LinkAnswer to `request` (a sandbox LinkRequest)."""
    try:
        reply = service(request.payload, request.pid)
    except Exception as e:  # noqa: BLE001  a service's bug costs this probe's link, not the grading
        return LinkAnswer(error='%s: %s' % (type(e).__name__, str(e)[:300]))
    if isinstance(reply, LinkAnswer):   # the service's own answer: a stop past its cap (rope_service.for_probe)
        return reply
    reply, log = reply if isinstance(reply, tuple) else (reply, None)
    entries = log if isinstance(log, list) else [] if log is None else [log]
    return LinkAnswer(bytes(reply or b''), tuple(entries))


def describe(h, settings, exits=True):
    """How the process of harness dict `h` ended, in words (`settings`: the sandbox's; `exits`: RunPlan.exits)."""
    return messages.process_ended(h, settings.total_seconds, settings.cgroup_memory_mb, exits)


def ending_message(probe_id, h, settings, exits=True):
    """The message of a process whose outputs were not read: the import check's, one that exited
    leaving no results, or one stopped or killed."""
    text = describe(h, settings, exits)
    if probe_id == report_schema.IMPORT:
        return messages.import_unfinished(text)
    if h['ended'] == 'exit':
        return messages.ended_without_results(text)
    return text


def worded(probe_id, result, settings, exits=True):
    """`result` as the judges read it: outputs refused (readback's fact), or an unread process's
    ending, put into words (`exits`: RunPlan.exits)."""
    if result.refusal:
        return dataclasses.replace(result, message=messages.output_refused(result.refusal))
    if not result.unread:
        return result
    return dataclasses.replace(result, message=ending_message(probe_id, result.harness, settings, exits))


def budget_spent(settings):
    """The message of a probe not started because the grading's time budget was used up."""
    return messages.not_run(describe({'ended': 'budget'}, settings))


def _probe_job(run_plan, probe_id):
    """The ProbeJob of `probe_id` in `run_plan`: a new value, nothing shared with the next one."""
    expected = None if run_plan.expected is None else run_plan.expected.get(probe_id, {})
    job_of = process_job(run_plan.job, probe_id, run_plan.probe_jobs.get(probe_id))
    return ProbeJob(probe_id, job_of, dict(run_plan.inputs.get(probe_id, {})),
                    run_plan.timeouts.get(probe_id, 60), expected, probe_id in run_plan.link_services)


def _tell(on_result, probe_id, result):
    """The caller's progress callback (partial results.json): its failure never stops a grading."""
    if on_result is not None:
        try:
            on_result(probe_id, result)
        except Exception:  # noqa: BLE001
            pass
