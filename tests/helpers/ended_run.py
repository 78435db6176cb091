"""A ProbeRun that has already ended, for the tests' scripted grading sessions: what
GradingSession.import_check and .probe return, without a process."""

from autograder.sandbox import ProbeRun


def ended_run(result):
    """A ProbeRun whose process asks nothing and ends with `result` (a ProbeResult)."""
    def steps():
        return result
        yield   # unreachable: makes this a generator that ends at once
    return ProbeRun(steps())
