"""
One probe process, from the zygote's fork to its end, watched by the harness:

- the harness link: an AF_UNIX SOCK_SEQPACKET socketpair per process; the harness end has
  SO_PASSCRED, so every message carries the sender's pid from the kernel (SCM_CREDENTIALS, in
  the harness's PID namespace: /proc/<pid> is that process). The first frame is the wall's own
  ("wall up", before any probe code runs); the harness checks the process from outside (cgroup,
  user, seccomp) and answers "go". Every later message goes to the caller's handler
  `handler(payload, pid) -> reply` (or `-> (reply, log entry or list of them)`), served while the process runs;
  the entries become harness['link'].
- the deadline counts CPU time (the grading cgroup's, else the sandbox user's processes from
  /proc), with a wall-clock cap only against sleeping, and the whole grading's budget;
- the end: exit code or signal and rusage from the zygote (which reaps it), or the harness's own
  stop (timeout, wall, budget). OOM is decided by the caller from the cgroup's counter.
"""

import os
import select
import signal
import socket
import struct
import time

from autograder.sandbox import wall
from autograder.sandbox.zygote import ZygoteFailed

MAX_MESSAGE = 1 << 16            # bytes of one link message (child/socket_link.py's cap)
MAX_LINK_MESSAGES = 100_000      # per probe: the memory probe asks a few hundred; past this the link is closed
TICK = 0.05                      # seconds between deadline checks (and the longest a reply waits for one)
KILL_GRACE = 30.0                # a process that is not reaped this long after SIGKILL means a broken machine
UCRED = struct.Struct('3i')      # struct ucred: pid, uid, gid


def _sender(ancdata):
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(data) >= UCRED.size:
            return UCRED.unpack(data[:UCRED.size])[0]
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:   # descriptors sent to the harness: closed
            for fd in struct.unpack('%di' % (len(data) // 4), data[:len(data) // 4 * 4]):
                try:
                    os.close(fd)
                except OSError:
                    pass
    return None


def _reply(link, data):
    try:
        link.send(data)
    except OSError:
        pass   # the process is gone or stopped reading: nothing to answer


def run(zygote, spec, log_path, *, handler, check_ready, cpu_used, kill, cpu_limit, wall_limit, budget_end):
    """
    Fork the probe process and watch it to its end. Returns the harness dict:
    pid, ended (exit | signal | timeout | wall | budget | wall_failed), exit_code, signal,
    cpu_seconds, wall_seconds, max_rss_bytes, link (handler log), link_messages, and wall_error.
    `check_ready(pid)`: None, or why the process is not walled as it must be (it is then stopped).
    """
    link, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    link.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    started = time.time()
    try:
        pid = zygote.spawn(spec, log_fd, theirs.fileno())
    finally:
        os.close(log_fd)
        theirs.close()
    out = {'pid': pid, 'ended': None, 'exit_code': None, 'signal': None, 'link': [], 'link_messages': 0}
    ready, link_open, stopped_at, orphans_cpu = False, True, None, 0.0
    status = rusage = None
    cpu = 0.0

    def stop(reason):
        nonlocal stopped_at
        out['ended'], stopped_at = reason, time.time()
        kill(pid)

    try:
        while status is None:
            waiting = [zygote] + ([link] if link_open else [])
            readable = [zygote] if zygote.pending() else select.select(waiting, [], [], TICK)[0]
            if link in readable:
                data, anc, flags, _ = link.recvmsg(MAX_MESSAGE + 1, socket.CMSG_SPACE(UCRED.size) + 64)
                sender = _sender(anc)
                if not data:
                    link_open = False   # every copy of the child's end is closed
                elif not ready:
                    if sender == pid and data == wall.READY:
                        problem = check_ready(pid)
                        if problem:
                            out['wall_error'] = problem
                            stop('wall_failed')
                        else:
                            ready = True
                            _reply(link, b'go')
                    else:
                        out['wall_error'] = (data[len(wall.FAILED):].decode('utf-8', 'replace')[:2000]
                                             if data.startswith(wall.FAILED) else 'an unexpected first message')
                        stop('wall_failed')
                elif stopped_at is None:
                    out['link_messages'] += 1
                    if out['link_messages'] > MAX_LINK_MESSAGES:   # a flood costs the harness's time, not the probe's CPU
                        out.setdefault('link_errors', []).append('more than %d messages: the link was closed'
                                                                 % MAX_LINK_MESSAGES)
                        link.shutdown(socket.SHUT_RDWR)
                        link_open = False
                    elif flags & socket.MSG_TRUNC or handler is None:
                        _reply(link, b'\x01')   # an empty answer: too long, or nobody to ask
                    else:
                        try:
                            answer = handler(data[1:], sender)
                        except Exception as e:  # noqa: BLE001  a handler's bug costs this probe's link, not the grading
                            out.setdefault('link_errors', []).append('%s: %s' % (type(e).__name__, str(e)[:300]))
                            answer = b''
                        if isinstance(answer, tuple):
                            answer, entry = answer
                            if isinstance(entry, list):
                                out['link'].extend(entry)
                            elif entry is not None:
                                out['link'].append(entry)
                        _reply(link, b'\x01' + bytes(answer or b'')[:MAX_MESSAGE])
            if zygote in readable:
                event = zygote.next_event(0)
                if event and event['pid'] == pid:
                    status, rusage = event['status'], event['rusage']
                elif event:   # an orphan of the probe (no PID namespace), reaped by the zygote
                    orphans_cpu += event['rusage']['utime'] + event['rusage']['stime']
            if status is not None:
                break
            now = time.time()
            if stopped_at is None:
                cpu = cpu_used() + orphans_cpu
                if cpu > cpu_limit:
                    stop('timeout')
                elif now - started > wall_limit:
                    stop('wall')
                elif now > budget_end:
                    stop('budget')
            elif now - stopped_at > KILL_GRACE:
                raise ZygoteFailed('probe process %d did not end %g s after SIGKILL' % (pid, KILL_GRACE))
            elif now - stopped_at > 1.0:
                kill(pid)
    except BaseException:
        kill(pid)   # the grader itself is stopping (SIGTERM): the probe must not outlive it
        raise
    finally:
        link.close()
    out['wall_seconds'] = round(time.time() - started, 3)
    own = rusage['utime'] + rusage['stime']
    out['cpu_seconds'] = round(max(cpu, own + orphans_cpu, cpu_used() + orphans_cpu), 3)
    out['max_rss_bytes'] = int(rusage['maxrss_kb']) * 1024   # the process and the children it reaped
    if os.WIFSIGNALED(status):
        out['signal'] = signal.Signals(os.WTERMSIG(status)).name if os.WTERMSIG(status) in \
            signal.Signals._value2member_map_ else str(os.WTERMSIG(status))
    else:
        out['exit_code'] = os.WEXITSTATUS(status)
    if out['ended'] is None:
        if not ready:
            out['ended'] = 'wall_failed'
            out.setdefault('wall_error', 'the process ended before its wall was up (exit %s, signal %s)'
                           % (out['exit_code'], out['signal']))
        else:
            out['ended'] = 'signal' if out['signal'] else 'exit'
    return out
