"""
A scripted grading session for the tests of the harness's loop (probe_job.execute, judging.Judging): the
interface of sandbox.GradingSession and of the Sandbox that makes it, without a process. A test says what
the import check and each probe report (imported, probed); every call returns a ProbeRun that has ended.
"""

import contextlib

from autograder.sandbox import ProbeResult, ProbeRun, SessionReport


def ended_run(result):
    """A ProbeRun whose process asks nothing and ends with `result` (a ProbeResult)."""
    def steps():
        return result
        yield   # unreachable: makes this a generator that ends at once
    return ProbeRun(steps())


class ScriptedSession:
    """GradingSession's interface: the import check reports imported(job), each probe probed(work)."""
    budget_end, report = float('inf'), SessionReport('', None, {})

    def budget_spent(self):
        return False

    def imported(self, job):
        return ProbeResult('ok', info={'stdout': ''})

    def probed(self, work):
        return ProbeResult('ok')

    def import_check(self, job, cpu_limit, serves_link=False):
        return ended_run(self.imported(job))

    def probe(self, work):
        return ended_run(self.probed(work))


class ScriptedSandbox:
    """Sandbox's interface as the harness's loop drives it: every grading is `session`."""
    user_note = 'scripted'

    def __init__(self, session, cfg=None):
        self.session, self.cfg = session, cfg

    @contextlib.contextmanager
    def grading(self, model_py, private=(), need_data=False, budget_end=None):
        yield self.session
