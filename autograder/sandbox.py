"""
Runs untrusted student code in a child process and brings back only plain data.

The scratch folder holds the handout (chargpt.py, mingpt/{__init__,trainer,utils}.py), the
submission as mingpt/model.py, the probe runner, the job and its inputs: nothing of the
reference, the fixtures or the hidden tests. Under root the child runs as an unprivileged
user of a pool (one per concurrent grading), in a scratch folder only that user can enter,
owning only the folders results and temporary files go to. Limits: address space, CPU
seconds, file size, processes, and a wall-clock deadline per probe enforced here. A probe
that hangs or kills the process is recorded and the child is restarted for the probes after
it. OS-level isolation (seccomp, namespaces, private /tmp, clean-up) is autograder/isolation.py.

Results are read back by autograder/readback.py, which trusts no byte of them (regular files
only, never followed links, stored .npz checked against the expected keys and shapes, reports
against child/wire.py's schema and caps). The harness owns every deadline: readback.Deadlines.
"""

import json
import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

from autograder import DATA_FILE, PACKAGE_DIR, TEMPLATE_DIR, isolation, readback
from autograder.child import wire
from autograder.readback import ProbeResult  # noqa: F401  (re-exported: the result type of every probe)
from autograder.sandbox_users import (  # noqa: F401  (the pool; tests and engine reach them through sandbox)
    _pool_size, child_python, _sandbox_user, _user_can_access, protect_source, _lock_path, _try_lock, _claim_user, _kill_user_processes, _sweep, cleanup_stale)

HANDOUT_FILES = ('chargpt.py', 'mingpt/__init__.py', 'mingpt/trainer.py', 'mingpt/utils.py')
CHILD_PACKAGE = os.path.join(PACKAGE_DIR, 'child')   # copied whole into the scratch folder as _grader/child


@dataclass
class RunResult:
    import_result: ProbeResult
    probes: Dict[str, ProbeResult]
    stdout_tail: str = ''
    sandboxed_as: Optional[str] = None
    wall_seconds: float = 0.0
    isolation: dict = field(default_factory=dict)


class GradingStopped(BaseException):
    """SIGTERM (run_autograder's watchdog): stop the child, clean up, and let the caller end."""


def _on_sigterm(signum, frame):
    raise GradingStopped('stopped by SIGTERM')


class Sandbox:
    def __init__(self, sandbox_cfg, handout_dir=TEMPLATE_DIR, data_file=DATA_FILE):
        self.cfg = sandbox_cfg
        self.handout_dir = handout_dir
        self.data_file = data_file
        # self.user is the (uid, gid) in use, claimed from the pool for the length of one run
        self.pool, self.user_note = _sandbox_user(sandbox_cfg['user'], sandbox_cfg['pool_size'],
                                                  sandbox_cfg['python_copy'])
        self.user = self.pool[0] if self.pool else None
        self.python, self.python_env = sys.executable, {}
        if self.user:
            self.python, self.python_env = child_python(self.user[0], self.user[1], sandbox_cfg['python_copy'])
        self.seccomp = isolation.Seccomp()
        self.found = isolation.probe(*(self.user or (None, None)), seccomp=self.seccomp)
        # staff and tests only (Gradescope never sets it): exercise the weaker set-ups, e.g. "namespaces,tmpfs"
        for name in filter(None, os.environ.get('HW1_SANDBOX_DISABLE', '').split(',')):
            if name in self.found:
                self.found[name] = 'disabled by HW1_SANDBOX_DISABLE'
        self.isolation = isolation.describe(self.found, bool(self.user))
        self.isolation['python'] = self.python
        self._mounts = []   # the child's writable folders (out/, home/) while they are tmpfs mounts
        self._files_removed = 0

    # ------------------------------------------------------------------ scratch

    def _prepare(self, model_py, job, inputs, need_data):
        scratch = tempfile.mkdtemp(prefix='hw1-sandbox-', dir=isolation.scratch_base(bool(self.user)))
        if self.user:
            os.chown(scratch, 0, self.user[1])   # at once: a sweep after a killed grading finds it by this group
        os.makedirs(os.path.join(scratch, 'mingpt'))
        for rel in HANDOUT_FILES:
            src = os.path.join(self.handout_dir, rel)
            if not os.path.isfile(src):
                raise FileNotFoundError("handout file %s is missing: run `python -m autograder build-template`" % src)
            shutil.copyfile(src, os.path.join(scratch, rel))
        shutil.copyfile(model_py, os.path.join(scratch, 'mingpt', 'model.py'))
        shutil.copytree(CHILD_PACKAGE, os.path.join(scratch, '_grader', 'child'),
                        ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
        if need_data:
            if not os.path.isfile(self.data_file):
                raise FileNotFoundError("corpus %s is missing: run ./setup.sh" % self.data_file)
            shutil.copyfile(self.data_file, os.path.join(scratch, 'input.txt'))
        job_dir = os.path.join(scratch, 'job')
        os.makedirs(job_dir)
        with open(os.path.join(job_dir, 'inputs.npz'), 'wb') as f:
            np.savez(f, **inputs)
        for sub in ('out', 'home'):
            os.makedirs(os.path.join(job_dir, sub))
        # inside: everything readable, nothing writable by the child except out/ and home/ (its TMPDIR);
        # the folder itself is root:<the user's own group> 0750, so no other sandbox user (another
        # grading of a batch) can enter it
        for root, dirs, files in os.walk(scratch):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o755)
            for f in files:
                os.chmod(os.path.join(root, f), 0o644)
        if self.user:
            os.chown(scratch, 0, self.user[1])
            os.chmod(scratch, 0o750)
            for sub in ('out', 'home'):
                path = os.path.join(job_dir, sub)
                if self.found.get('tmpfs') is True:
                    # each a size-limited file system of its own: the child cannot fill the disk or the
                    # inode table, and filling its temp folder (home/ = TMPDIR = /tmp) leaves out/ working
                    isolation.mount('hw1-sandbox', path, 'tmpfs', isolation.MS_NOSUID | isolation.MS_NODEV,
                                    'size=%dm,nr_inodes=%d' % (self.cfg['scratch_mb'], self.cfg['scratch_inodes']))
                    self._mounts.append(path)
                os.chown(path, *self.user)
                os.chmod(path, 0o700)
        else:
            os.chmod(scratch, 0o700)
        return scratch, job_dir

    def _write_job(self, job_dir, job, probes):
        with open(os.path.join(job_dir, 'job.json'), 'w') as f:
            json.dump(dict(job, probes=probes), f)
        os.chmod(os.path.join(job_dir, 'job.json'), 0o644)

    # ------------------------------------------------------------------ child

    def _preexec(self, job_dir):
        """In the forked child, before exec: isolation first, then limits, then the user, then seccomp."""
        cfg = self.cfg
        mb = 1024 * 1024
        os.umask(0o077)   # what the child writes is readable by its own user (and root) only
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            with open('/proc/self/oom_score_adj', 'w') as f:
                f.write('1000')   # under memory pressure the kernel kills the child, never the grader first
        except OSError:
            pass
        if self.user and self.found.get('namespaces') is True:
            isolation.enter_namespaces(os.path.join(job_dir, 'home'))   # returns in the namespaces' first process
        resource.setrlimit(resource.RLIMIT_AS, (cfg['address_space_mb'] * mb,) * 2)
        resource.setrlimit(resource.RLIMIT_CPU, (cfg['cpu_seconds'], cfg['cpu_seconds'] + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (cfg['max_file_mb'] * mb,) * 2)
        if self.user:
            resource.setrlimit(resource.RLIMIT_NPROC, (cfg['max_processes'],) * 2)
            uid, gid = self.user
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        if self.found.get('seccomp') is True:
            self.seccomp.install()

    def _env(self, job_dir):
        home = os.path.join(job_dir, 'home')
        env = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': home, 'TMPDIR': home, 'LANG': 'C.UTF-8',
               'PYTHONHASHSEED': '0', 'PYTHONDONTWRITEBYTECODE': '1', 'PYTHONUNBUFFERED': '1',
               'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1'}
        env.update(self.python_env)
        if 'CUDA_VISIBLE_DEVICES' in os.environ:  # the gpu profile needs to see the staff's GPU choice
            env['CUDA_VISIBLE_DEVICES'] = os.environ['CUDA_VISIBLE_DEVICES']
        return env

    def _launch(self, scratch, job_dir):
        log = open(os.path.join(scratch, 'child.log'), 'ab')
        # os._exit right after the last probe: a thread the submission started cannot keep the child alive
        boot = ('import os, sys\nsys.path.insert(0, %r)\nfrom child.runner import main\ntry:\n    main()\n'
                'except BaseException:\n    import traceback\n    traceback.print_exc(file=sys.__stderr__)\n'
                '    sys.__stderr__.flush()\n    os._exit(1)\nos._exit(0)\n' % os.path.join(scratch, '_grader'))
        cmd = [self.python, '-I', '-c', boot, job_dir]
        proc = subprocess.Popen(cmd, cwd=os.path.join(job_dir, 'home'), env=self._env(job_dir),
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=lambda: self._preexec(job_dir), start_new_session=True, close_fds=True)
        log.close()
        return proc

    def _kill(self, proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()  # escaped processes of the sandbox user are killed by _run_child right after

    # ------------------------------------------------------------------ reading back

    def _read(self, job_dir, probe_id, expected):
        """The probe's result as readback.read_probe reads it (never raises), or None when it left none."""
        spec = None if expected is None else expected.get(probe_id, {})
        return readback.read_probe(job_dir, probe_id, spec, self.cfg['max_json_kb'] * 1024,
                                   self.cfg['max_file_mb'] * 1024 * 1024)

    # ------------------------------------------------------------------ main loop

    def run(self, model_py, job, probes, inputs, timeouts, import_timeout, need_data=False, expected=None):
        """
        Run the probes named in `probes` on `model_py`. `timeouts` maps probe id -> seconds.
        `expected`: {probe id: {key: reference shape}}, the arrays each probe may return (keys
        outside it make the probe invalid; None accepts any key, for the reference at regenerate).
        Returns a RunResult; never raises for anything the student's code does.
        """
        lock = None
        previous = None
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            previous = signal.signal(signal.SIGTERM, _on_sigterm)   # a handler of the caller's (batch) is kept
        try:
            if self.pool:
                self.user, lock = _claim_user(self.pool)
                self._files_removed += _sweep(*self.user)   # left by an earlier grading that was killed
            return self._run_locked(model_py, job, probes, inputs, timeouts, import_timeout, need_data, expected)
        finally:
            if lock is not None:
                os.close(lock)
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _run_locked(self, model_py, job, probes, inputs, timeouts, import_timeout, need_data, expected):
        started = time.time()
        results, remaining = {}, list(probes)
        import_result = None
        scratch = None
        if expected is not None:
            expected = dict(expected, **{wire.IMPORT: {}})
        try:
            scratch, job_dir = self._prepare(model_py, job, inputs, need_data)
            # Gradescope kills the whole run at its own timeout and then shows no results at all, so
            # the sum of per-probe timeouts (a hang in RoPE times out every test that uses it) is capped
            budget_end = started + self.cfg['total_seconds']
            while remaining:
                got, ended = self._run_child(scratch, job_dir, job, remaining, timeouts, import_timeout,
                                             budget_end, expected)
                first_import = got.pop(wire.IMPORT, None)
                if import_result is None:
                    import_result = first_import or self._import_failure(ended)
                    if import_result.status != 'ok':
                        break
                new = {pid: r for pid, r in got.items() if pid in remaining}
                results.update(new)
                if not new:
                    # the child ended without finishing anything new: do not relaunch forever
                    for pid in remaining:
                        results[pid] = ProbeResult('crashed', 'not run: the process ended early, %s'
                                                   % self._describe_end(ended))
                remaining = [p for p in remaining if p not in results]
                if remaining and ended[0] == 'budget':
                    for pid in remaining:
                        results[pid] = ProbeResult('timeout', 'not run: %s' % self._describe_end(ended))
                    remaining = []
            stdout_tail = self._child_log(scratch)
        finally:
            for path in self._mounts:
                isolation.umount(path)   # drops every file at once
            self._mounts = []
            if scratch:
                shutil.rmtree(scratch, ignore_errors=True)
        for pid in probes:
            results.setdefault(pid, ProbeResult('missing', 'this test did not run because the submission '
                                                           'could not be imported'))
        return RunResult(import_result, results, stdout_tail,
                         pwd.getpwuid(self.user[0]).pw_name if self.user else None, time.time() - started,
                         dict(self.isolation, files_removed=self._files_removed))

    NO_RESULTS = ('its process announced the end of this test without leaving results (was the progress file '
                  'written by your code?)')

    def _run_child(self, scratch, job_dir, job, probes, timeouts, import_timeout, budget_end, expected):
        """
        One child over [import] + `probes`. Returns ({probe id: ProbeResult} of the probes this child
        ended, import included, and how the child ended). Each probe's result is read once, when the
        harness's clock (readback.Deadlines) closes its slot, and is final; the probe whose slot was open
        when the child died or was stopped gets its result if the child exited, else a failure.
        Probes it never reached are left out (the caller runs them in a new child).
        """
        self._write_job(job_dir, job, probes)
        readback.clear_outputs(job_dir, [wire.IMPORT] + list(probes))  # a fresh progress file, no stale outputs
        proc = self._launch(scratch, job_dir)
        try:
            return self._watch(proc, job_dir, probes, timeouts, import_timeout, budget_end, expected)
        except BaseException:   # the grader itself is stopping: the child must not outlive it
            self._kill(proc)
            raise
        finally:
            if self.user:
                # everything the child left: its processes (any namespace), then its files in the shared temp folders
                _kill_user_processes(self.user[0])
                self._files_removed += isolation.remove_user_files(*self.user)

    def _watch(self, proc, job_dir, probes, timeouts, import_timeout, budget_end, expected):
        clock = readback.Deadlines([wire.IMPORT] + list(probes),
                                   [import_timeout] + [timeouts.get(p, 60) for p in probes], time.time())
        got = {}
        while True:
            code = proc.poll()  # before reading progress: the lines of a child that has exited are all there
            now = time.time()
            for pid in clock.advance(readback.read_progress(job_dir), now):
                got[pid] = self._read(job_dir, pid, expected) or ProbeResult('invalid', self.NO_RESULTS)
            if code is not None:
                ended = ('exit', code)
                break
            if clock.expired(now):
                ended = ('timeout', clock.timeout)
                self._kill(proc)
                break
            if now > budget_end:
                self._kill(proc)
                ended = ('budget', self.cfg['total_seconds'])
                break
            time.sleep(0.05)
        if self.user:
            _kill_user_processes(self.user[0])   # nothing of the child may still write while its last result is read
        current = clock.current
        if current is not None:
            result = self._read(job_dir, current, expected) if ended[0] == 'exit' else None
            got[current] = result or (self._import_failure(ended) if current == wire.IMPORT
                                      else self._probe_failure(ended))
        return got, ended

    @staticmethod
    def _describe_end(ended):
        kind, value = ended
        if kind == 'timeout':
            return 'it ran longer than the %g s allowed (infinite loop?) and was stopped' % value
        if kind == 'budget':
            return ('the grading time budget of %g s was used up (earlier tests timed out: look for an infinite '
                    'loop or a very slow forward)' % value)
        if value < 0:
            sig = signal.Signals(-value).name if -value in signal.Signals._value2member_map_ else str(-value)
            hint = {'SIGKILL': ' (out of memory, or a limit was hit)', 'SIGXCPU': ' (CPU time limit)',
                    'SIGXFSZ': ' (wrote or printed more than the file-size limit)',
                    'SIGSEGV': ' (crashed)'}.get(sig, '')
            return 'the process was killed by %s%s' % (sig, hint)
        return 'the process exited with code %d (sys.exit or os._exit in your code?)' % value

    def _import_failure(self, ended):
        status = 'timeout' if ended[0] in ('timeout', 'budget') else 'crashed'
        return ProbeResult(status, 'importing your model.py did not finish: %s' % self._describe_end(ended))

    def _probe_failure(self, ended):
        status = 'timeout' if ended[0] in ('timeout', 'budget') else 'crashed'
        return ProbeResult(status, self._describe_end(ended))

    @staticmethod
    def _child_log(scratch):
        path = os.path.join(scratch, 'child.log')
        try:
            with open(path, 'rb') as f:
                f.seek(max(0, os.path.getsize(path) - 4000))
                return f.read().decode('utf-8', 'replace')
        except OSError:
            return ''
