"""
DEV STAND-IN for the harness link, to be deleted when the sandbox branch is merged (its
child/link.py, job.json's `link_fd`, and Sandbox.run(..., handlers=...) filling
ProbeResult.harness['link']).

`connect(job)` gives the memory probe its `ask(payload) -> reply`:
  - when the job names a link (`link_fd`): the real link's ask; the harness's handler answers
    and keeps the log (evidence);
  - otherwise (this branch, until the merge): the same handler, memory_readings.Readings, called
    in this process on this process's own pid; the probe then copies the handler's log into its
    results as the 'log' array (rows(), read back by entries()). That copy is written by the
    child, so it is NOT evidence the student's code cannot forge: the judge reads it only when a
    result has no harness['link'].
Standard library only (the harness imports entries() to read the copy back).
"""

import os

from . import memory_readings

KINDS = ('allocated', 'peak', 'reset', 'free', 'mark')


def connect(job):
    """(ask, handler): handler is None on the real link, else the in-process Readings whose log the probe copies."""
    if job.get('link_fd') is not None:
        from . import link   # the sandbox branch's module
        return link.ask, None
    handler = memory_readings.Readings(forwarded=job['profile']['device'] == 'cuda')
    pid = os.getpid()
    return (lambda payload: handler(payload, pid)), handler


def rows(log, labels):
    """The log as int rows [i, kind, value, pid, mark]: mark is +k / -k for 'start'/'end' of labels[k - 1]."""
    code = {}
    for k, label in enumerate(labels, 1):
        code['start ' + label], code['end ' + label] = k, -k
    return [[e['i'], KINDS.index(e['kind']), e['value'], e['pid'], code.get(e.get('label'), 0)] for e in log]


def entries(table, labels):
    """rows() read back into log entries (what harness['link'] holds on the real link)."""
    out = []
    for i, kind, value, pid, mark in (list(map(int, r)) for r in table):
        e = {'i': i, 'kind': KINDS[kind] if 0 <= kind < len(KINDS) else 'unknown', 'value': value, 'pid': pid}
        if mark and 0 < abs(mark) <= len(labels):
            e['label'] = ('start ' if mark > 0 else 'end ') + labels[abs(mark) - 1]
        out.append(e)
    return out
