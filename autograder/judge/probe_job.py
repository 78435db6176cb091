"""
The probe job of one run in the sandbox, built here alone for the grading (grade.py) and for
regenerate (the reference and every known bug): the job every probe process reads (its
profile, the loss-curve seeds, the resource limits), the inputs of each probe's process, and
the handlers of the harness link.
"""

from autograder.judge import inputs, set_aside
from autograder.judge.judges import memory


def job(profile, loss_curve_seeds=None):
    """What every probe process of the run reads: the profile (as the plain dict the child reads), its limits and
    (when given) the loss-curve seeds."""
    out = {'profile': profile.as_json(), 'limits': memory.probe_limits(profile)}
    if loss_curve_seeds is not None:
        out['loss_curve_seeds'] = list(loss_curve_seeds)
    return out


def link_handlers(profile, rope_for=()):
    """
    {probe id: handler of its harness link}: the memory probe's torch.cuda queries are answered
    from the kernel's figures of the asking process and logged here (contract/memory_readings.py),
    the only readings 9.1 believes (ProbeResult.harness['link']); the probes of `rope_for` (the
    cascade set their RoPE aside) get the grader's RoPE (judge/set_aside.py), every call logged.
    """
    from autograder.contract.memory_readings import Readings
    handler = Readings(forwarded=profile.device == 'cuda')

    def memory(payload, pid):
        before = len(handler.log)
        reply = handler(payload, pid)
        return reply, handler.log[before:]   # the entries this query added (memory_stats adds two)
    handlers = {'memory': memory}
    handlers.update({pid: set_aside.rope_handler() for pid in rope_for})
    return handlers


def run(sandbox, model_py, profile, probe_ids, timeouts, import_timeout, loss_curve_seeds=None, arrays=None,
        probe_inputs=None, probe_jobs=None, **options):
    """
    Sandbox.run of `probe_ids` on `model_py` with the job, the inputs cut per probe (`probe_inputs`
    as inputs.for_submission cut them, else from `arrays`, default inputs.build(profile)) and the
    link handlers; `probe_jobs` ({probe id: what that probe alone is told}, e.g. the parts the cascade
    set aside: judge/cascade.Plan.job) go into each probe's job; `options` go to Sandbox.run
    (expected, private, on_result, skip, budget_end).
    """
    if probe_inputs is None:
        probe_inputs = inputs.per_probe(profile, probe_ids, arrays)
    probe_jobs = probe_jobs or {}
    rope_for = [pid for pid, extra in probe_jobs.items() if 'rope' in extra.get('set_aside', ())]
    return sandbox.run(model_py, job(profile, loss_curve_seeds), probe_ids, probe_inputs, timeouts,
                       import_timeout=import_timeout, handlers=link_handlers(profile, rope_for),
                       need_data='loss-curve' in probe_ids, probe_jobs=probe_jobs, **options)
