"""
The harness's loop over a grading session (judge/probe_job.execute) and the words it gives a process
whose outputs the sandbox did not read (probe_job.ending_message, in messages.py's words): the
sandbox reports facts, the harness words them; a probe is told its job as a value of its own.
"""

from autograder.contract import report_schema
from autograder.judge import config, probe_job
from autograder.sandbox import ProbeResult, Settings
from tests.helpers.scripted_session import ScriptedSandbox, ScriptedSession

SETTINGS = Settings.from_mapping(config.load().sandbox)


class Session(ScriptedSession):
    """The import check's result as given, then every probe ok; the jobs each call was told."""

    def __init__(self, imported):
        self.result, self.jobs = imported, []

    def imported(self, job):
        self.jobs.append((report_schema.IMPORT, job))
        return self.result

    def probed(self, work):
        self.jobs.append((work.probe_id, dict(work.job)))
        work.job['changed by the sandbox'] = True   # its own value: none of it reaches the next
        return ProbeResult('ok')


def plan(**kwargs):
    job = {'profile': {}, 'limits': {'gqa': {'address_space_margin_mb': 5}}}
    return probe_job.RunPlan('model.py', job, ('gqa', 'rope'), 10, **kwargs)


def test_each_probe_reads_its_own_job_and_its_own_limit():
    session = Session(ProbeResult('ok'))
    probe_job.execute(ScriptedSandbox(session, SETTINGS), plan(probe_jobs={'rope': {'set_aside': ['gqa']}}))
    assert session.jobs == [(report_schema.IMPORT, {'profile': {}, 'limit': None}),
                            ('gqa', {'profile': {}, 'limit': {'address_space_margin_mb': 5}}),
                            ('rope', {'profile': {}, 'set_aside': ['gqa'], 'limit': None})]


def test_a_failed_import_check_leaves_every_probe_missing_with_why():
    stopped = ProbeResult('timeout', unread=True,
                          harness={'ended': 'timeout', 'cpu_limit': 10, 'cpu_seconds': 10.4})
    first = probe_job.execute(ScriptedSandbox(Session(stopped), SETTINGS), plan())
    assert first.import_result.message == (
        'importing your model.py did not finish: it ran longer than the 10 s allowed (10.4 s of '
        'CPU time: an infinite loop or a very slow forward?) and was stopped')
    missing = 'this test did not run because the submission could not be imported'
    assert {p: (r.status, r.message) for p, r in first.probes.items()} == {
        p: ('missing', missing) for p in ('gqa', 'rope')}
    # a second run's import check is a repeat (its first run imported model.py): said as such
    why = "the probe's output could not be read safely: x.npz: array 'a' is compressed"
    second = probe_job.execute(ScriptedSandbox(Session(ProbeResult('invalid', why)), SETTINGS), plan(second=True))
    assert second.probes['gqa'].message == (
        "not run in the second run: model.py's import check in that run failed: " + why)


def test_the_words_of_each_ending():
    words = {
        'exit': (dict(exit_code=3), 'its process ended without leaving results: the process '
                                    'exited with code 3 (sys.exit or os._exit in your code?)'),
        'signal': (dict(signal='SIGSEGV'), 'the process was killed by SIGSEGV (crashed)'),
        'wall': (dict(idle_seconds=20), 'it used almost no CPU for 20 s (sleeping, or waiting for '
                                        'something that never comes?) and was stopped'),
        'oom': ({}, "the process ran out of memory and was killed by SIGKILL (the grading's memory "
                    "limit is %d MB; allocating more than the test needs?)"
                % SETTINGS.cgroup_memory_mb),
        'link': (dict(link_errors=[{'kind': 'unread_replies', 'count': 17}]),
                 "it was stopped: your code flooded or stopped reading the grader's channel "
                 "(descriptor 3): 17 replies it did not read"),
    }
    for ended, (facts, text) in words.items():
        h = dict({'ended': ended, 'cpu_limit': 5, 'wall_seconds': 30, 'signal': None,
                  'exit_code': None}, **facts)
        assert probe_job.ending_message('gqa', h, SETTINGS) == text
    assert probe_job.budget_spent(SETTINGS) == (
        'not run: the grading time budget of %g s was used up (earlier tests timed out: look for '
        'an infinite loop or a very slow forward)' % SETTINGS.total_seconds)
