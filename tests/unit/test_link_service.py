"""
The harness link turned up (issue 34): the sandbox hands each question a probe process asks to the
judge as a LinkRequest and takes a LinkAnswer back (sandbox.ProbeRun); the harness's loop answers with
the probe's service (probe_job.served). A service's failure costs that probe's link, not the grading,
and a run left early is closed, so that its process is killed.
"""

import pytest

from autograder.judge import probe_job
from autograder.sandbox import LinkAnswer, LinkRequest, ProbeResult, ProbeRun


def scripted(questions, log):
    """What sandbox.session._probe is to a ProbeRun: a generator asking `questions`, keeping the answers."""
    try:
        for payload in questions:
            log.append((yield LinkRequest(payload, 4242)))
        return ProbeResult('ok')
    finally:
        log.append('closed')


def test_each_question_goes_to_the_service_and_its_answer_comes_back_as_a_value():
    log = []
    result = probe_job.served(ProbeRun(scripted([b'one', b'two'], log)),
                              lambda payload, pid: (payload.upper() + b'@%d' % pid, {'asked': payload.decode()}))
    assert result.status == 'ok'
    assert log == [LinkAnswer(b'ONE@4242', ({'asked': 'one'},)), LinkAnswer(b'TWO@4242', ({'asked': 'two'},)),
                   'closed']


def test_a_service_that_fails_costs_an_empty_answer_and_a_fact():
    log = []
    result = probe_job.served(ProbeRun(scripted([b'x'], log)), lambda payload, pid: 1 / 0)
    assert result.status == 'ok' and log[0].reply == b'' and log[0].log == ()
    assert log[0].error.startswith('ZeroDivisionError: ')


def test_a_run_left_early_is_closed():
    log = []

    def stopping(payload, pid):
        raise KeyboardInterrupt   # what SIGTERM's GradingStopped is: not the service's failure, the grader's stop
    with pytest.raises(KeyboardInterrupt):
        probe_job.served(ProbeRun(scripted([b'x', b'y'], log)), stopping)
    assert log == ['closed']


def test_a_run_whose_link_is_not_served_asks_nothing():
    assert ProbeRun(scripted([], [])).finish().status == 'ok'
