"""
How a process in the sandbox ended: the wall reports facts (ProbeResult.harness: ended, cpu_limit,
cpu_seconds, idle_seconds, wall_seconds, signal, exit_code, link_errors), and the harness's loop
(probe_job.execute) words them with these.
"""

# ----------------------------------------------------------------------------- how a process ended
# The sandbox reports how a process ended as facts (ProbeResult.harness: ended, cpu_limit,
# cpu_seconds, idle_seconds, wall_seconds, signal, exit_code, link_errors); the harness's loop
# (probe_job.execute) words them with these.

FLOODED = 'your code flooded or stopped reading the grader\'s channel (descriptor 3)'
NOT_IMPORTED = 'this test did not run because the submission could not be imported'
SIGNAL_HINTS = {'SIGKILL': ' (out of memory, or a limit was hit)', 'SIGXCPU': ' (CPU time limit)',
                'SIGXFSZ': ' (wrote or printed more than the file-size limit)',
                'SIGSEGV': ' (crashed)', 'SIGSYS': ' (a forbidden system call)'}
LINK_MISUSED = 'it misused the grader\'s channel'


def link_problem(fact):
    """One thing a process did to the harness link (a harness['link_errors'] entry), in words."""
    kind = fact.get('kind')
    if kind == 'unread_replies':
        return '%s: %d replies it did not read' % (FLOODED, fact['count'])
    if kind == 'messages':
        return '%s: more than %d messages' % (FLOODED, fact['count'])
    if kind == 'rope_cap':
        return ('your code asked the grader\'s RoPE for more than a grading needs (%d calls and %.1f MB of values; '
                'a grading gets at most %d calls and %d MB) and got no more answers'
                % (fact['calls'], fact['mb'], fact['cap_calls'], fact['cap_mb']))
    if kind == 'foreign_sender':
        return ('a process other than the test\'s own (pid %s, not %d: a forked helper, or '
                'something that inherited descriptor 3) wrote to the grader\'s channel'
                % (fact['sender'], fact['pid']))
    return fact.get('error', '')


def process_ended(h, budget_seconds, memory_mb, exits=True):
    """How the process of harness dict `h` ended (`budget_seconds`: the grading's time budget,
    `memory_mb`: its memory limit; `exits`: whether model.py names sys.exit, os._exit or the like,
    submission.names_exit: an exit code is blamed on them only then)."""
    kind = h['ended']
    if kind == 'timeout':
        return ('it ran longer than the %g s allowed (%.1f s of CPU time: an infinite loop or a '
                'very slow forward?) and was stopped' % (h['cpu_limit'], h.get('cpu_seconds', 0)))
    if kind == 'memory':
        return ('its memory kept growing past the %d MB a test\'s process may use (%d MB of its own after %.1f s '
                'of CPU time: a loop that never ends, allocating as it goes?) and it was stopped'
                % (h['memory_limit_bytes'] >> 20, h.get('memory_bytes', 0) >> 20, h.get('cpu_seconds', 0)))
    if kind == 'wall' and h.get('idle_seconds'):
        return ('it used almost no CPU for %g s (sleeping, or waiting for something that never '
                'comes?) and was stopped' % h['idle_seconds'])
    if kind == 'wall':
        return ('it ran longer than the %g s allowed (%.0f s of wall-clock time while using '
                'little CPU: sleeping or waiting forever?) and was stopped'
                % (h['cpu_limit'], h['wall_seconds']))
    if kind == 'budget':
        return ('the grading time budget of %g s was used up (earlier tests timed out: look for an '
                'infinite loop or a very slow forward)' % budget_seconds)
    if kind == 'link':
        problems = [link_problem(p) for p in h.get('link_errors') or []]
        return 'it was stopped: %s' % '; '.join(problems or [LINK_MISUSED])[:600]
    if kind == 'oom':
        return ('the process ran out of memory and was killed by SIGKILL (the grading\'s memory '
                'limit is %d MB; allocating more than the test needs?)' % memory_mb)
    if h.get('signal'):
        return 'the process was killed by %s%s' % (h['signal'], SIGNAL_HINTS.get(h['signal'], ''))
    if exits:
        return 'the process exited with code %d (sys.exit or os._exit in your code?)' % h['exit_code']
    return 'the process exited with code %d' % h['exit_code']


def import_unfinished(ending):
    """The import check's process ended without results (`ending`: process_ended's words)."""
    return 'importing your model.py did not finish: %s' % ending


def ended_without_results(ending):
    """A probe's process exited (no signal, no limit) leaving no results."""
    return 'its process ended without leaving results: %s' % ending


def not_run(ending):
    """A probe not started (the grading's time budget was used up)."""
    return 'not run: ' + ending


def second_import_failed(message):
    """A probe of the second run when that run's own import check failed (its first run imported
    model.py: only the second run's repeat did not)."""
    return 'not run in the second run: model.py\'s import check in that run failed: %s' % message
