"""
The harness's side of the zygote (the child's side is autograder/child/zygote.py): one
interpreter per Zygote, started as root with torch and the child package imported, that forks
one fresh process per probe. Reusable across gradings: a batch worker makes ONE Zygote (or one
Sandbox, which makes it) and grades every submission with it; nothing of a grading is loaded in
it, and every probe process builds the wall around itself before the probe runs.

    z = Zygote(python, env)          # started on first use (about 2 s: Python and torch)
    pid = z.spawn(spec, log_fd, link_fd)
    event = z.next_event(timeout)    # {'op': 'exit', 'pid', 'status', 'rusage'} of every process it reaps
    events = z.sync()                # the exit events not handled yet, every one up to now
    z.close()
"""

import json
import os
import select
import socket
import subprocess
import tempfile
import time
from collections import deque

from autograder import PACKAGE_DIR

WALL_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'wall.py')
BOOT = '''import sys
sys.path[:] = [p for p in sys.path if p not in ('', '.')]
import importlib.util
spec = importlib.util.spec_from_file_location('hw1_wall', %r)
wall = importlib.util.module_from_spec(spec)
spec.loader.exec_module(wall)
package = importlib.util.module_from_spec(importlib.util.spec_from_loader('autograder', None, is_package=True))
package.__path__ = [%r]
sys.modules['autograder'] = package
from autograder.child import zygote
zygote.main(int(sys.argv[1]), wall, %r)
'''
# The interpreter's flags: -s (no user site) without -I, which also ignores every PYTHON* variable,
# PYTHONHASHSEED among them, so that str and bytes hashing was random per grading (a student's set printed in
# an AssertionError read differently every time). The environment is the grader's own (start()), so no
# variable reaches it that -I would have kept out; BOOT drops the folder -c puts first on sys.path (-I's -P).
FLAGS = ('-s',)
# probe processes are forks of the zygote: its hash seed, fixed at its start, is theirs
ENV = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'LANG': 'C.UTF-8', 'PYTHONHASHSEED': '0',
       'PYTHONDONTWRITEBYTECODE': '1', 'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1',
       'OPENBLAS_NUM_THREADS': '1'}
START_SECONDS = 180          # Python + torch import on a slow, shared core; a zygote slower than this is broken
MAX_MESSAGE = 1 << 20


class ZygoteFailed(RuntimeError):
    """The zygote could not start or died: no probe can run (a grader problem, never the student's)."""


class Zygote:
    def __init__(self, python, env=None):
        self.python, self.env = python, dict(env or {})
        self.proc = self.control = None
        self.info = {}
        self.events = deque()
        self._next_id = 0
        self._log = None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        if self.running:
            return
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile(prefix='hw1-zygote-')
        env = dict(ENV, **self.env)
        started = time.time()
        self.proc = subprocess.Popen([self.python, *FLAGS, '-c', BOOT % (WALL_FILE, PACKAGE_DIR, PACKAGE_DIR),
                                      str(theirs.fileno())], pass_fds=(theirs.fileno(),), env=env, cwd='/',
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        theirs.close()
        self.control = ours
        message = self._receive(START_SECONDS)
        if message is None or message.get('op') != 'ready':
            self.close()
            raise ZygoteFailed('the zygote (%s) did not start: %s' % (self.python, self.log_tail() or 'no output'))
        # one thread is expected (OMP_NUM_THREADS=1, no op run): a fork of a multithreaded interpreter may inherit
        # a held lock. More is recorded (results.json extra_data.isolation.zygote), not refused: an idle
        # thread holds none, and a probe that deadlocks anyway is stopped by its deadline like any hang.
        self.info = dict(message, start_seconds=round(time.time() - started, 2))

    def log_tail(self, limit=3000):
        if self._log is None:
            return ''
        try:
            self._log.seek(0, os.SEEK_END)
            size = self._log.tell()
            self._log.seek(max(0, size - limit))
            return self._log.read(limit).decode('utf-8', 'replace')
        except (OSError, ValueError):
            return ''

    def _receive(self, timeout):
        """One message from the zygote, or None at the timeout; ZygoteFailed when it is gone."""
        ready, _, _ = select.select([self.control], [], [], timeout)
        if not ready:
            return None
        data = self.control.recv(MAX_MESSAGE)
        if not data:
            raise ZygoteFailed('the zygote died: %s' % (self.log_tail() or 'no output'))
        return json.loads(data.decode())

    def fileno(self):
        return self.control.fileno()

    def spawn(self, spec, log_fd, link_fd):
        """Fork one probe process with this spec (wall.enter's) and these two descriptors; returns its pid."""
        self.start()
        self._next_id += 1
        request = json.dumps({'op': 'spawn', 'id': self._next_id, 'spec': spec}).encode()
        socket.send_fds(self.control, [request], [log_fd, link_fd])
        end = time.time() + 60
        while time.time() < end:
            message = self._receive(max(0.0, end - time.time()))
            if message is None:
                break
            if message.get('op') == 'exit':
                self.events.append(message)
            elif message.get('id') == self._next_id and message.get('op') == 'spawned':
                return message['pid']
            elif message.get('id') == self._next_id:
                raise ZygoteFailed('the zygote could not fork a probe process: %s' % message.get('error'))
        raise ZygoteFailed('the zygote did not answer a fork request')

    def sync(self, timeout=30):
        """Every exit event not handled yet, up to now: the zygote reaps first and then answers. Between two
        probes, once every process of the last one is gone, these are its orphans and nobody else's."""
        self.start()
        self._next_id += 1
        self.control.send(json.dumps({'op': 'sync', 'id': self._next_id}).encode())
        events, self.events = list(self.events), deque()
        end = time.time() + timeout
        while time.time() < end:
            message = self._receive(max(0.0, end - time.time()))
            if message is None:
                break
            if message.get('op') == 'exit':
                events.append(message)
            elif message.get('op') == 'synced' and message.get('id') == self._next_id:
                return events
        raise ZygoteFailed('the zygote did not answer a sync request')

    def next_event(self, timeout):
        """The next exit event, or None after `timeout` seconds."""
        if self.events:
            return self.events.popleft()
        message = self._receive(timeout)
        return message if message and message.get('op') == 'exit' else None

    def pending(self):
        return bool(self.events)

    def close(self):
        if self.control is not None:
            self.control.close()   # the zygote kills what it started and ends
            self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
