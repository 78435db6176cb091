"""
The values a grading session trades with the harness (session.py's GradingSession): ProbeJob, what one probe
process is told; ProbeRun, that process while it runs (its link's questions up, LinkAnswers down, its
ProbeResult at the end); SessionReport, what staff read of a grading's session once it has ended; and
ending_status, the status of a process whose outputs were not read. Plain values and a driver: nothing here
starts, walls or kills a process (session.py does).
"""

from dataclasses import dataclass
from typing import Optional

from autograder.sandbox.probe import HUNG


@dataclass(frozen=True)
class ProbeJob:
    """One probe process, as the harness decided it: a value, never kept or reread by the sandbox."""
    probe_id: str
    job: dict                          # what the process reads (profile, limit, what is set aside)
    inputs: dict                       # {key: array}: the inputs of its process
    cpu_limit: float                   # CPU seconds
    expected: Optional[dict] = None    # {key: reference shape} of what it may return (None: any)
    serves_link: bool = False          # the harness answers what it asks over its harness link (ProbeRun)


@dataclass(frozen=True)
class SessionReport:
    """What staff read of one grading's session once it has ended (results.json extra_data)."""
    stdout_tail: str
    sandboxed_as: Optional[str]
    isolation: dict


class ProbeRun:
    """
    One probe process while it runs (GradingSession.probe). Iterate it: each item is a question the
    process asked over its harness link (a LinkRequest), answered with answer(LinkAnswer) before the
    next is asked for (an unanswered one gets an empty reply); a probe whose job does not serve its
    link asks none. Once the iteration ends, `result` is its ProbeResult. Use it in a `with`: leaving
    early (the grading is stopping) kills the process and cleans up before anything else runs.
    """

    def __init__(self, steps):
        self._steps, self._reply, self.result = steps, None, None

    def __iter__(self):
        return self

    def __next__(self):
        reply, self._reply = self._reply, None
        try:
            return self._steps.send(reply)
        except StopIteration as end:
            self.result = end.value
            raise StopIteration from None

    def answer(self, link_answer):
        """The reply to the question just yielded (a LinkAnswer)."""
        self._reply = link_answer

    def finish(self):
        """Run to the end, every question it asks answered empty: its ProbeResult."""
        with self:
            for _ in self:
                pass
        return self.result

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._steps.close()
        return False


def ending_status(h, import_check):
    """The status of a process whose outputs were not read: stopped (a hang, whether it spun, slept or kept
    allocating: status 'timeout', ProbeResult.hung), crashed, or exited without."""
    if h['ended'] in HUNG:
        return 'timeout'
    return 'invalid' if h['ended'] == 'exit' and not import_check else 'crashed'
