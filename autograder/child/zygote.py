"""
The zygote: an interpreter that has imported torch, numpy, einops and every module of this
package, and never runs a torch op (a fork after torch ran multithreaded ops can deadlock), nor
any student code. The harness starts it once per Sandbox, as root, and asks it over a control
socket to fork one fresh process per probe (and one for the import check, and the self-test);
each fork builds the wall around itself (autograder/sandbox/wall.py, handed in by the boot code)
and only then runs one probe. Nothing of a grading is ever loaded here: a batch worker grades
many submissions with one zygote.

Protocol (SOCK_SEQPACKET, one JSON object per message):
  harness -> zygote   {"op": "spawn", "id": n, "spec": {...}} with two descriptors (log, link)
  zygote -> harness   {"op": "ready", ...} once; {"op": "spawned", "id": n, "pid": p} or
                      {"op": "error", "id": n, "error": "..."}; {"op": "exit", "pid": p, "status": s,
                      "rusage": {...}} for every child it reaps (it is their subreaper);
  harness -> zygote   {"op": "sync", "id": n}: it reaps what it can, then answers {"op": "synced", "id": n}
                      (every exit event of a process that is gone now comes before that answer).
When the control socket closes, the zygote kills what it started and ends.

Imports nothing of `autograder` but its contract (autograder/contract/): the wall arrives as an argument.
"""

import json
import os
import select
import signal
import socket
import sys

MAX_MESSAGE = 1 << 20


def preload():
    """Everything a probe imports before student code, so that a fork starts warm (10-25 ms)."""
    import einops  # noqa: F401
    import numpy  # noqa: F401
    import torch
    torch.set_num_threads(1)   # a setting, not an op: no thread pool exists yet
    # what every probe sets first (runner.run_probe): here it costs once the ~1 CPU-s import of torch._dynamo it
    # triggers, instead of in every fork; it starts no thread (the zygote checks it runs one)
    torch.use_deterministic_algorithms(True, warn_only=True)
    from autograder.contract import configs, report_schema  # noqa: F401
    from . import adapter, cuda_view, runner, selftest, socket_link  # noqa: F401
    runner.load_probes()
    import gc
    gc.collect()
    gc.freeze()   # every object so far out of the collector's reach: a fork's collections copy none of its pages


def _send(control, message):
    control.send(json.dumps(message).encode())


def _reap(control, children):
    while True:
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        children.discard(pid)
        _send(control, {'op': 'exit', 'pid': pid, 'status': status,
                        'rusage': {'utime': ru.ru_utime, 'stime': ru.ru_stime, 'maxrss_kb': ru.ru_maxrss}})


def _child(wall, spec, log_fd, link_fd):
    """In the fork: the wall, then one probe (or the self-test). Never returns."""
    code = wall.WALL_FAILED
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        state = {}
        try:
            wall.enter(spec, log_fd, link_fd, state)
        except BaseException as e:
            message = wall.FAILED + ('%s: %s' % (type(e).__name__, e)).encode()[:4000]
            os.write(wall.LINK_FD if state.get('fds') else link_fd, message)
            os._exit(wall.WALL_FAILED)
        os.write(wall.LINK_FD, wall.READY)
        if os.read(wall.LINK_FD, 16) != b'go':   # the harness checked this process from outside first
            os._exit(wall.WALL_FAILED)
        import tempfile
        os.environ.clear()
        os.environ.update(spec['env'])
        tempfile.tempdir = None
        sys.argv = ['hw1-probe', spec['job_dir']]
        from . import runner, selftest
        if spec.get('kind') == 'selftest':
            code = selftest.main(spec['selftest'])
        else:
            code = runner.run_probe(spec['job_dir'], spec['probe'])
    except BaseException:
        import traceback
        try:
            traceback.print_exc()
        except BaseException:
            pass
        code = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        pass
    os._exit(code)   # threads student code left behind cannot keep the process alive


def main(control_fd, wall, drop_path=None):
    preload()
    package = sys.modules.get('autograder')
    if package is not None and drop_path in package.__path__:
        package.__path__.remove(drop_path)   # the harness's package folder: no later import may come from it
    wall.prctl(wall.PR_SET_CHILD_SUBREAPER, 1)   # orphans of a probe come back here to be reaped
    wall.prctl(wall.PR_SET_PDEATHSIG, signal.SIGKILL)   # the harness's death ends the zygote
    control = socket.socket(fileno=control_fd)
    pidns = os.open('/proc/self/ns/pid', os.O_RDONLY | os.O_CLOEXEC)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *a: None)
    children = set()
    _send(control, {'op': 'ready', 'pid': os.getpid(), 'threads': len(os.listdir('/proc/self/task')),
                    'executable': sys.executable, 'prefixes': sorted({sys.prefix, sys.exec_prefix, sys.base_prefix,
                                                                     sys.base_exec_prefix}),
                    'path': [p for p in sys.path if p and os.path.isdir(p)]})
    sys.stdout.flush()
    sys.stderr.flush()
    while True:
        readable, _, _ = select.select([control, wake_r], [], [])
        if wake_r in readable:
            os.read(wake_r, 4096)
            _reap(control, children)
        if control not in readable:
            continue
        try:
            data, fds, _flags, _addr = socket.recv_fds(control, MAX_MESSAGE, 2)
        except OSError:
            data, fds = b'', []
        if not data:   # the harness is gone: nothing started here may outlive it
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            os._exit(0)
        request = json.loads(data.decode())
        if request.get('op') == 'sync' and not fds:   # every exit so far reported before the answer
            _reap(control, children)
            _send(control, {'op': 'synced', 'id': request.get('id')})
            continue
        if request.get('op') != 'spawn' or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            _send(control, {'op': 'error', 'id': request.get('id'), 'error': 'malformed request'})
            continue
        spec = request['spec']
        try:
            pid = wall.fork(bool(spec.get('namespaces')), pidns)
        except OSError as e:
            pid = None
            _send(control, {'op': 'error', 'id': request['id'], 'error': 'fork: %s' % e})
        if pid == 0:
            control.detach()
            _child(wall, spec, fds[0], fds[1])
        for fd in fds:
            os.close(fd)
        if pid:
            children.add(pid)
            _send(control, {'op': 'spawned', 'id': request['id'], 'pid': pid})
