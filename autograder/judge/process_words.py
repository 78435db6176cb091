"""
What a student reads of how a process in the sandbox ended. The sandbox reports facts
(ProbeResult.harness: ended, cpu_limit, cpu_seconds, idle_seconds, wall_seconds, signal,
exit_code, link_errors) and leaves `message` empty where it read no outputs (ProbeResult.unread);
the judge's loop (probe_job.execute) words them here.
"""

import dataclasses

from autograder.contract import report_schema

FLOODED = 'your code flooded or stopped reading the grader\'s channel (descriptor 3)'
NOT_IMPORTED = 'this test did not run because the submission could not be imported'
SIGNAL_HINTS = {'SIGKILL': ' (out of memory, or a limit was hit)', 'SIGXCPU': ' (CPU time limit)',
                'SIGXFSZ': ' (wrote or printed more than the file-size limit)',
                'SIGSEGV': ' (crashed)', 'SIGSYS': ' (a forbidden system call)'}


def link_problem(fact):
    """One thing a process did to the harness link (a harness['link_errors'] entry), in words."""
    kind = fact.get('kind')
    if kind == 'unread_replies':
        return '%s: %d replies it did not read' % (FLOODED, fact['count'])
    if kind == 'messages':
        return '%s: more than %d messages' % (FLOODED, fact['count'])
    if kind == 'foreign_sender':
        return ('a process other than the test\'s own (pid %s, not %d: a forked helper, or '
                'something that inherited descriptor 3) wrote to the grader\'s channel'
                % (fact['sender'], fact['pid']))
    return fact.get('error', '')


def describe(h, settings):
    """How the process of harness dict `h` ended, for a student (`settings`: the sandbox's)."""
    kind = h['ended']
    if kind == 'timeout':
        return ('it ran longer than the %g s allowed (%.1f s of CPU time: an infinite loop or a '
                'very slow forward?) and was stopped' % (h['cpu_limit'], h.get('cpu_seconds', 0)))
    if kind == 'wall' and h.get('idle_seconds'):
        return ('it used almost no CPU for %g s (sleeping, or waiting for something that never '
                'comes?) and was stopped' % h['idle_seconds'])
    if kind == 'wall':
        return ('it ran longer than the %g s allowed (%.0f s of wall-clock time while using '
                'little CPU: sleeping or waiting forever?) and was stopped'
                % (h['cpu_limit'], h['wall_seconds']))
    if kind == 'budget':
        return ('the grading time budget of %g s was used up (earlier tests timed out: look for an '
                'infinite loop or a very slow forward)' % settings.total_seconds)
    if kind == 'link':
        problems = [link_problem(p) for p in h.get('link_errors') or []]
        default = ['it misused the grader\'s channel']
        return 'it was stopped: %s' % '; '.join(problems or default)[:600]
    if kind == 'oom':
        return ('the process ran out of memory and was killed by SIGKILL (the grading\'s memory '
                'limit is %d MB; allocating more than the test needs?)' % settings.cgroup_memory_mb)
    if h.get('signal'):
        return 'the process was killed by %s%s' % (h['signal'], SIGNAL_HINTS.get(h['signal'], ''))
    return 'the process exited with code %d (sys.exit or os._exit in your code?)' % h['exit_code']


def ending_message(probe_id, h, settings):
    """The message of a process whose outputs were not read: the import check's, one that exited
    leaving no results, or one stopped or killed."""
    text = describe(h, settings)
    if probe_id == report_schema.IMPORT:
        return 'importing your model.py did not finish: %s' % text
    if h['ended'] == 'exit':
        return 'its process ended without leaving results: %s' % text
    return text


def worded(probe_id, result, settings):
    """`result` as the judges read it: an unread process's ending put into words."""
    if not result.unread:
        return result
    return dataclasses.replace(result, message=ending_message(probe_id, result.harness, settings))


def budget_spent(settings):
    """The message of a probe not started because the grading's time budget was used up."""
    return 'not run: ' + describe({'ended': 'budget'}, settings)


def second_import_failed(message):
    """The message of a probe of the second run when that run's own import check failed (its first
    run imported model.py: only the second run's repeat did not)."""
    return 'not run in the second run: model.py\'s import check in that run failed: %s' % message
