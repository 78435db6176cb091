"""
One probe process, from the zygote's fork to its end, watched by the harness, which never waits
on it:

- the harness link: an AF_UNIX SOCK_SEQPACKET socketpair per process; the harness end has
  SO_PASSCRED, so every message carries the sender's pid from the kernel (SCM_CREDENTIALS, in
  the harness's PID namespace: /proc/<pid> is that process). The first frame is the wall's own
  ("wall up", before any probe code runs); the harness checks the process from outside (cgroup,
  user, seccomp) and answers "go". Every later message must come from the probe process itself
  (the pid the zygote forked): one from any other process (a forked helper, anything that
  inherited descriptor 3) stops the probe. The others are the caller's to answer, where the
  caller serves the link: watch() is a generator that yields each as a LinkRequest and takes a
  LinkAnswer back (its reply, and log entries that become harness['link']); the sandbox calls
  nothing of the caller's. Where the caller does not serve it, every question gets an empty reply.
- never blocking: the link is read and written with MSG_DONTWAIT, a bounded batch of messages per
  turn of the loop; replies wait in a queue of at most MAX_QUEUED_REPLIES (an honest probe asks one
  question at a time), and a process that floods the link or stops reading its replies is stopped
  (ended 'link'). The loop checks the deadlines at least every TICK whatever the child does.
- the deadline counts CPU time (the grading cgroup's, else the sandbox user's processes from
  /proc), with a wall-clock cap only against sleeping, an idle cap (almost no CPU for idle_seconds:
  asleep or waiting), and the whole grading's budget;
- its memory, from outside: the probe process's own anonymous and shared pages (RssAnon + RssShmem, less
  what it had when its wall was up, i.e. the zygote's pages it shares) read from /proc every turn; past
  Deadlines.memory_bytes it is stopped like a process past its deadline (ended 'memory', its stack asked
  for), before the cgroup's OOM killer or RLIMIT_AS end it in a way that differs between the modes: a loop
  that grows without end is a hang, whichever resource it runs out of first;
- the stop: at a deadline, wall cap, memory cap or budget the process is first asked for its Python stack
  (report_schema.HANG_SIGNAL: runner.arm_hang_dump writes it to out/), given at most DUMP_WAIT seconds,
  then killed;
- the end: exit code or signal and rusage from the zygote (which reaps it), or the harness's own
  stop (timeout, wall, budget, link). OOM is decided by the caller from the cgroup's counter.
"""

import os
import select
import signal
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass
from typing import Optional, Tuple

from autograder.contract import report_schema
from autograder.sandbox import wall
from autograder.sandbox.zygote_handle import ZygoteFailed

MAX_MESSAGE = 1 << 16            # bytes of one link message (child/socket_link.py's cap)
MAX_LINK_MESSAGES = 100_000      # per probe: the memory probe asks a few hundred; past this the probe is stopped
MAX_QUEUED_REPLIES = 16          # replies the child has not read yet; an honest probe has at most one outstanding
READ_BATCH = 64                  # link messages handled per turn of the loop, between two deadline checks
TICK = 0.05                      # seconds between deadline checks (and the longest a reply waits for one)
DUMP_WAIT = 1.0                  # seconds a stopped process has to write its stack before SIGKILL
IDLE_CPU = 0.1                   # CPU seconds: a process that used less over its idle window is asleep (stopped)
KILL_GRACE = 30.0                # a process that is not reaped this long after SIGKILL means a broken machine
UCRED = struct.Struct('3i')      # struct ucred: pid, uid, gid
# how a process that did not finish was stopped: a hang, whether it spun (timeout), slept (wall), kept allocating
# (memory) or ran into the grading's budget; its stack is asked for, and the harness charges it alike (status 'timeout')
HUNG = ('timeout', 'wall', 'budget', 'memory')


@dataclass(frozen=True)
class Deadlines:
    """When a probe process is stopped: past `cpu_limit` CPU seconds, `wall_limit` wall seconds (against
    sleeping), the grading's `budget_end` (a time.time()), asleep for `idle_seconds` (None: never), or holding
    more than `memory_bytes` of its own memory (None: never; memory_of)."""
    cpu_limit: float
    wall_limit: float
    budget_end: float
    idle_seconds: Optional[float] = None
    memory_bytes: Optional[int] = None


@dataclass(frozen=True)
class LinkRequest:
    """A question a probe process asked over its harness link: its bytes, and its sender's pid (the kernel's)."""
    payload: bytes
    pid: int


@dataclass(frozen=True)
class LinkAnswer:
    """The caller's answer to a LinkRequest: the reply's bytes (cut to MAX_MESSAGE), the log entries it adds to
    harness['link'], or `error`: why the caller could not answer (a fact, harness['link_errors'], empty reply),
    or `stop`: a fact (a dict with its 'kind') for which the caller will answer this process no more, e.g. a
    service past its cap: the process is stopped (ended 'link', the fact in harness['link_errors']), unanswered."""
    reply: bytes = b''
    log: Tuple[dict, ...] = ()
    error: Optional[str] = None
    stop: Optional[dict] = None


def memory_of(pid):
    """RssAnon + RssShmem of process `pid` in bytes (memory_readings' memory_allocated: the pages a tensor,
    a list or a shared mapping holds, not the files it maps), or None when it cannot be read."""
    try:
        with open('/proc/%d/status' % pid, 'rb') as f:
            text = f.read(8192)
    except OSError:
        return None
    total = 0
    for line in text.split(b'\n'):
        if line.startswith((b'RssAnon:', b'RssShmem:')):
            total += int(line.split()[1]) * 1024
    return total


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


class _Watch:
    """The harness's side of one probe process while it runs (see the module's docstring)."""

    def __init__(self, zygote, link, pid, serve_link, check_ready, kill, dump_path):
        self.zygote, self.link, self.pid = zygote, link, pid
        self.serve_link, self.check_ready, self.kill, self.dump_path = serve_link, check_ready, kill, dump_path
        self.out = {'pid': pid, 'ended': None, 'exit_code': None, 'signal': None, 'link': [], 'link_messages': 0}
        self.ready, self.link_open = False, True
        self.replies = deque()
        self.stopped_at = self.killed_at = None
        self.dump_sizes = []
        self.cpu_history = deque()   # (time, CPU seconds) over the last idle window
        self.status = self.rusage = None
        self.meter = None
        self.memory_base = None   # memory_of(pid) when its wall was up: the zygote's pages, before any probe code

    # ------------------------------------------------------------------ the stop

    def stop(self, reason, problem=None, dump=False):
        """`problem`: what the process did to the link, a fact (a harness['link_errors'] entry)."""
        if self.stopped_at is not None:
            return
        self.out['ended'], self.stopped_at = reason, time.time()
        if problem:
            self.out.setdefault('link_errors', []).append(problem)
        self.link_open = False   # nothing the process says now is heard
        if dump and self.dump_path:
            try:
                # its stack into out/ (runner.arm_hang_dump), then the kill
                os.kill(self.pid, report_schema.HANG_SIGNAL)
                return
            except OSError:
                pass
        self._kill()

    def _kill(self):
        self.killed_at = time.time()
        self.kill(self.pid)

    def _dump_written(self):
        """The dump's size has stayed the same, and not 0, for two ticks (faulthandler writes it in one go)."""
        try:
            size = os.lstat(self.dump_path).st_size
        except OSError:
            size = 0
        self.dump_sizes.append(size)
        return size > 0 and self.dump_sizes[-3:] == [size] * 3

    def _idle(self, now, cpu, started, idle_seconds):
        """Whether the process used less than IDLE_CPU seconds of CPU over the last `idle_seconds` of wall time."""
        self.cpu_history.append((now, cpu))
        while len(self.cpu_history) > 1 and self.cpu_history[1][0] <= now - idle_seconds:
            self.cpu_history.popleft()
        then, cpu_then = self.cpu_history[0]
        return now - started > idle_seconds and then <= now - idle_seconds and cpu - cpu_then < IDLE_CPU

    def own_memory(self):
        """The process's own memory now (memory_of less its base), its peak kept in out['memory_peak_bytes']."""
        if self.memory_base is None:
            return 0
        own = max(0, (memory_of(self.pid) or 0) - self.memory_base)
        self.out['memory_peak_bytes'] = max(self.out.get('memory_peak_bytes', 0), own)
        return own

    def check_time(self, cpu, limits, started, memory=0):
        """Stop the process at the first of its Deadlines `limits` it passed (its stack asked for first);
        `memory`: its own memory now (own_memory)."""
        now = time.time()
        if self.stopped_at is None:
            if cpu > limits.cpu_limit:
                self.stop('timeout', dump=True)
            elif limits.memory_bytes and memory > limits.memory_bytes:
                self.out.update(memory_limit_bytes=limits.memory_bytes, memory_bytes=memory)
                self.stop('memory', dump=True)
            elif now - started > limits.wall_limit:
                self.stop('wall', dump=True)
            elif limits.idle_seconds and self._idle(now, cpu, started, limits.idle_seconds):
                self.out['idle_seconds'] = limits.idle_seconds
                self.stop('wall', dump=True)
            elif now > limits.budget_end:
                self.stop('budget', dump=True)
        elif self.killed_at is None:
            if now - self.stopped_at > DUMP_WAIT or self._dump_written():
                self._kill()
        elif now - self.killed_at > KILL_GRACE:
            raise ZygoteFailed('probe process %d did not end %g s after SIGKILL' % (self.pid, KILL_GRACE))
        elif now - self.killed_at > 1.0:
            self.kill(self.pid)

    # ------------------------------------------------------------------ the link

    def _send_queued(self):
        while self.replies:
            try:
                self.link.send(self.replies[0], socket.MSG_DONTWAIT)
            except BlockingIOError:
                return   # its buffer is full: the rest waits for the next turn
            except OSError:
                self.replies.clear()   # the process is gone: nothing to answer
                return
            self.replies.popleft()

    def _reply(self, data):
        self.replies.append(data)
        if len(self.replies) > MAX_QUEUED_REPLIES:
            self.stop('link', {'kind': 'unread_replies', 'count': len(self.replies)})
        else:
            self._send_queued()

    def _first(self, data, sender):
        if sender == self.pid and data == wall.READY:
            problem = self.check_ready(self.pid)
            self.memory_base = memory_of(self.pid)
            if problem:
                self.out['wall_error'] = problem
                self.stop('wall_failed')
            else:
                self.ready = True
                self._reply(b'go')
        else:
            self.out['wall_error'] = (data[len(wall.FAILED):].decode('utf-8', 'replace')[:2000]
                                      if data.startswith(wall.FAILED) else 'an unexpected first message')
            self.stop('wall_failed')

    def _serve(self, data, sender, truncated):
        """A generator: yields the question the caller answers (LinkRequest), if any, and takes its LinkAnswer."""
        self.out['link_messages'] += 1
        if sender != self.pid:
            self.stop('link', {'kind': 'foreign_sender', 'sender': sender, 'pid': self.pid})
            return
        if self.out['link_messages'] > MAX_LINK_MESSAGES:   # a flood costs the harness's time, not the probe's CPU
            self.stop('link', {'kind': 'messages', 'count': MAX_LINK_MESSAGES})
            return
        if data[1:] == report_schema.IMPORTED and 'imported_after' not in self.out:
            # the runner's word that model.py is imported: a stop after it is not the import's (a forged early one
            # only makes a hang at import read as the test's own)
            self.out['imported_after'] = round(time.time() - self.started, 3)
            self._reply(b'\x01')
            return
        if truncated or not self.serve_link:
            self._reply(b'\x01')   # an empty answer: too long, or nobody to ask
            return
        answer = yield LinkRequest(bytes(data[1:]), sender)
        answer = answer if isinstance(answer, LinkAnswer) else LinkAnswer()   # none: an empty reply
        if answer.stop is not None:   # the caller answers this process no more: it fails closed, stopped here
            self.out['link'].extend(answer.log)
            self.stop('link', dict(answer.stop))
            return
        if answer.error is not None:   # the caller's failure costs this probe's link, not the grading
            self.out.setdefault('link_errors', []).append({'kind': 'service_error', 'error': str(answer.error)})
        self.out['link'].extend(answer.log)
        self._reply(b'\x01' + bytes(answer.reply or b'')[:MAX_MESSAGE])

    def read_link(self):
        """At most READ_BATCH messages, none waited for (a generator: _serve's questions pass through)."""
        for _ in range(READ_BATCH):
            if not self.link_open:
                return
            try:
                data, anc, flags, _ = self.link.recvmsg(MAX_MESSAGE + 1, socket.CMSG_SPACE(UCRED.size) + 64,
                                                        socket.MSG_DONTWAIT)
            except BlockingIOError:
                return
            except OSError:
                self.link_open = False
                return
            sender = _sender(anc)
            if not data:
                self.link_open = False   # every copy of the child's end is closed
            elif not self.ready:
                self._first(data, sender)
            else:
                yield from self._serve(data, sender, flags & socket.MSG_TRUNC)

    # ------------------------------------------------------------------ one turn

    def turn(self):
        """Wait at most TICK for the link or the zygote, and handle what came (a generator, as read_link)."""
        if self.zygote.pending():
            readable, writable = [self.zygote], []
        else:
            listen = [self.link] if self.link_open else []
            readable, writable, _ = select.select([self.zygote] + listen, listen if self.replies else [], [], TICK)
        if self.link in writable:
            self._send_queued()
        if self.link in readable:
            yield from self.read_link()
        if self.zygote in readable:
            event = self.zygote.next_event(0)
            if event and event['pid'] == self.pid:
                self.status, self.rusage = event['status'], event['rusage']
            elif event:   # an orphan of the probe (no PID namespace), reaped by the zygote: its exact total
                self.meter.reaped(event['pid'], event['rusage']['utime'] + event['rusage']['stime'])


def watch(zygote, spec, log_path, deadlines, *, serve_link, check_ready, meter, kill, dump_path=None):
    """
    Fork the probe process and watch it to its end: a generator that yields each question the process
    asks over its harness link (a LinkRequest, where `serve_link`) and takes the caller's LinkAnswer
    back through send(), and returns (StopIteration.value) the harness dict:
    pid, ended (exit | signal | timeout | wall | memory | budget | link | wall_failed), exit_code, signal,
    cpu_seconds, wall_seconds, max_rss_bytes, memory_peak_bytes (its own memory, the most seen; memory_of),
    memory_limit_bytes and memory_bytes (where it ended 'memory'), link (the answers' log), link_messages,
    link_errors (facts:
    {'kind': unread_replies | messages (with 'count') | foreign_sender ('sender', 'pid') |
    service_error ('error': the caller's LinkAnswer.error)}, worded by the harness, judge/messages.py), wall_error,
    imported_after (wall seconds to the runner's report_schema.IMPORTED frame; absent: it never came).
    `check_ready(pid)`: None, or why the process is not walled as it must be (it is then stopped).
    `meter`: sample() -> CPU seconds of every process of the probe so far; reaped(pid, seconds): the zygote
    reaped an orphan of it (users.CpuMeter; the cgroup's counter, which needs neither, in session.py).
    `dump_path`: the harness's path of the process's out/<report_schema.HANG_DUMP>; None: killed at once.
    `deadlines` (Deadlines): its idle_seconds: a process that used less than IDLE_CPU of CPU over this much
    wall time sleeps or waits forever: it is stopped like one past its wall cap (ended 'wall',
    harness['idle_seconds'] says why).
    Closing the generator before its end (the caller is stopping) kills the process.
    """
    link, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    link.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    link.setblocking(False)
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    started = time.time()
    try:
        pid = zygote.spawn(spec, log_fd, theirs.fileno())
    finally:
        os.close(log_fd)
        theirs.close()
    w = _Watch(zygote, link, pid, serve_link, check_ready, kill, dump_path)
    w.meter, w.started = meter, started
    cpu = 0.0
    try:
        while w.status is None:
            yield from w.turn()
            if w.status is not None:
                break
            memory = 0
            if w.stopped_at is None:
                cpu, memory = meter.sample(), w.own_memory()
            w.check_time(cpu, deadlines, started, memory)
    except BaseException:   # GeneratorExit too: the caller closed the generator before the end
        kill(pid)   # the grader itself is stopping (SIGTERM): the probe must not outlive it
        raise
    finally:
        link.close()
    return _ending(w, started, max(cpu, meter.sample()))


def _ending(w, started, cpu):
    out, status, rusage = w.out, w.status, w.rusage
    out['wall_seconds'] = round(time.time() - started, 3)
    own = rusage['utime'] + rusage['stime']
    out['cpu_seconds'] = round(max(cpu, own), 3)
    out['max_rss_bytes'] = int(rusage['maxrss_kb']) * 1024   # the process and the children it reaped
    if os.WIFSIGNALED(status):
        out['signal'] = signal.Signals(os.WTERMSIG(status)).name if os.WTERMSIG(status) in \
            signal.Signals._value2member_map_ else str(os.WTERMSIG(status))
    else:
        out['exit_code'] = os.WEXITSTATUS(status)
    if out['ended'] is None:
        if not w.ready:
            out['ended'] = 'wall_failed'
            out.setdefault('wall_error', 'the process ended before its wall was up (exit %s, signal %s)'
                           % (out['exit_code'], out['signal']))
        else:
            out['ended'] = 'signal' if out['signal'] else 'exit'
    return out
