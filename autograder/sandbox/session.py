"""
Sandbox.grading: the student's model.py behind the wall, one fresh process per call of the session
the harness drives, and only plain data back. See autograder/sandbox/__init__.py for the package's
map. The loop over probes, what each is told and the words a student reads are the harness's
(judge/probe_job.py, worded in judge/messages.py): the sandbox reports facts (how a process ended).

For each grading: claim a sandbox user (lock), make the grading's cgroup, copy the code into a
scratch folder, run the self-test (a process forked exactly like a probe, checking every defence
in force; any failure stops the grading before student code runs), then the import check and
each probe in its own process. Between processes every process of the user and the cgroup is
killed and confirmed gone, the user's files and IPC objects and keys are removed, and only then
are the probe's outputs read (readback.py: bounded bytes read once, parsed from the copy).
"""

import json
import os
import pwd
import shutil
import signal
import sys
import threading
import time
from contextlib import contextmanager

from autograder import DATA_FILE, TEMPLATE_DIR
from autograder.contract import report_schema
from autograder.sandbox import cgroups, copies, defences, leftovers, probe, readback, scratch, seccomp, users, wall
from autograder.sandbox.probe import HUNG, LinkAnswer
from autograder.sandbox.defences import SandboxRefused
from autograder.sandbox.readback import ProbeResult
from autograder.sandbox.runs import ProbeJob, ProbeRun, SessionReport, ending_status  # noqa: F401 (the package's names)
from autograder.sandbox.settings import Settings
from autograder.sandbox.zygote_handle import Zygote

LOG_TAIL = 1000              # characters of each process's stdout/stderr kept for staff


class GradingStopped(BaseException):
    """SIGTERM (run_autograder's watchdog): stop the probe, clean up, and let the caller end."""


def _on_sigterm(signum, frame):
    raise GradingStopped('stopped by SIGTERM')


def _status(pid):
    try:
        with open('/proc/%d/status' % pid) as f:
            return dict(line.split(':', 1) for line in f.read().splitlines() if ':' in line)
    except OSError:
        return {}


class Sandbox:
    """One per worker process: `grading` may be entered any number of times; close() ends it."""

    def __init__(self, settings, handout_dir=TEMPLATE_DIR, data_file=DATA_FILE, zygote=None):
        """`settings`: a Settings (settings.py), or grading.yaml's `sandbox:` section, checked into one."""
        sandbox_cfg = self.cfg = Settings.from_mapping(settings)
        self.handout_dir, self.data_file = handout_dir, data_file
        self.pool, self.user_note = users.sandbox_pool(sandbox_cfg.user, sandbox_cfg.pool_size,
                                                       sandbox_cfg.python_copy)
        self.caps = defences.capabilities(self.user_note)
        self.plan = defences.plan(sandbox_cfg.defences, self.caps)   # SandboxRefused: nothing runs
        self.on = {name: self.plan[name][0] for name in defences.NAMES}
        if not self.on['user']:
            self.pool = None
        self.user = self.pool[0] if self.pool else None
        self.python, self.python_env = sys.executable, {}
        if self.user:
            self.python, self.python_env = users.child_python(self.user[0], self.user[1], sandbox_cfg.python_copy)
        self.program = seccomp.program() if self.on['seccomp'] else None
        self.zygote = zygote or Zygote(self.python, self.python_env)
        self._own_zygote = zygote is None
        self.isolation = defences.describe(self.plan)
        if self.on['landlock'] and not self.on['namespaces']:
            self.isolation['landlock_abi'] = wall.landlock_abi()
        self.isolation['python'] = self.python

    def close(self):
        if self._own_zygote:
            self.zygote.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ one grading

    @contextmanager
    def grading(self, model_py, private=(), need_data=False, budget_end=None):
        """
        One grading of `model_py` as a session the harness drives (GradingSession: one call per
        process): the pool user claimed (lock), the grading's cgroup made, the code copied into
        scratch and the self-test run on entry; every process, file and folder of it removed on
        exit, and only then session.report set. private: paths student code must not be able to read
        (the self-test checks each). need_data: the handout's data file is copied too (the
        loss-curve probe trains on it). budget_end: the time.time() past which no process may run (a
        second run of one grading keeps the first's); default now + total_seconds. SandboxRefused
        when a defence is missing or fails its self-test: then no student code has run. SIGTERM
        (run_autograder's watchdog) raises GradingStopped.
        """
        lock, previous = None, None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            previous = signal.signal(signal.SIGTERM, _on_sigterm)   # a handler of the caller's (batch) is kept
        try:
            if self.pool:
                self.user, lock = users.claim(self.pool)
            session = GradingSession(self, budget_end or time.time() + self.cfg.total_seconds)
            self.budget_end = session.budget_end   # every process of it, the self-test's included
            try:
                self._begin(model_py, private, need_data)
                yield session
            finally:
                self._end_grading()
            session.report = self._report()
        finally:
            if lock is not None:
                os.close(lock)
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _begin(self, model_py, private, need_data):
        """A killed grading's leftovers removed, the cgroup made, the code copied, the self-test."""
        self.folders = 0
        self.landed = {'files_removed': 0, 'ipc_removed': 0}
        self.cgroup, self.scratch, self.logs = None, None, []
        self._clean(whole=True)   # what a killed grading of this user left
        if self.on['cgroups']:
            self.cgroup = cgroups.Cgroup(self.cfg.cgroup_memory_mb, self.cfg.max_processes + 8)
        self.scratch = scratch.make_grading(model_py, self.handout_dir, self.data_file, self.user,
                                            need_data)
        self.landed['selftest'] = self._selftest(private, self._grader_copies())

    def _report(self):
        """The session's SessionReport: the log tails, the user, the defences as they landed."""
        isolation = dict(self.isolation, **self.landed)
        if self.cgroup is not None:
            isolation['cgroup'] = dict(self.cgroup.limits, name=self.cgroup.name)
        isolation['zygote'] = {k: self.zygote.info.get(k) for k in ('start_seconds', 'threads', 'executable')}
        return SessionReport('\n'.join(self.logs)[-4000:],
                             pwd.getpwuid(self.user[0]).pw_name if self.user else None, isolation)

    # ------------------------------------------------------------------ between processes

    def _kill(self, pid=None):
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        if self.cgroup is not None:
            self.cgroup.kill()
        if self.user:
            users.kill_as(self.user[0])

    def _clean(self, whole=False, meter=None):
        """
        Every process of the user and the cgroup killed and confirmed gone, zombies reaped, and the zygote's
        reports of them charged to `meter` (the process that just ended: never to the next one); its files
        removed (after every process: they could be read by the next). Kernel keys and SysV IPC objects,
        which seccomp keeps a probe from making, are removed before and after the whole grading (`whole`),
        should a set-up lack it.
        """
        users.kill_and_confirm(self.user[0] if self.user else None, self.cgroup)
        if self.user:
            users.wait_reaped(self.user[0])
        if self.zygote.running:
            for event in self.zygote.sync():
                if meter is not None:
                    meter.reaped(event['pid'], event['rusage']['utime'] + event['rusage']['stime'])
        if self.user:
            if not self.on['namespaces']:
                self.landed['files_removed'] += leftovers.remove_user_files(*self.user)
            if whole or not self.on['seccomp']:
                self.landed['ipc_removed'] += leftovers.remove_ipc(self.user[0])
                self.landed['keys_left'] = leftovers.clear_keys(*self.user)

    def _end_grading(self):
        try:
            self._clean(whole=True)
        finally:
            if self.cgroup is not None:
                self.cgroup.remove()
            if self.scratch:
                shutil.rmtree(self.scratch, ignore_errors=True)

    # ------------------------------------------------------------------ one process

    def _spec(self, kind, folder, paths, cpu_limit):
        cfg, mb = self.cfg, 1 << 20
        env = dict(scratch.ENV, HOME=paths['home'], TMPDIR=paths['home'], **self.python_env)
        if 'CUDA_VISIBLE_DEVICES' in os.environ:   # the gpu profile needs to see the staff's GPU choice
            env['CUDA_VISIBLE_DEVICES'] = os.environ['CUDA_VISIBLE_DEVICES']
        rlimits = {'CORE': 0, 'AS': cfg.address_space_mb * mb, 'FSIZE': cfg.max_file_mb * mb,
                   'CPU': [int(min(cfg.cpu_seconds, cpu_limit + 10)), int(min(cfg.cpu_seconds, cpu_limit + 10)) + 5]}
        if self.user:
            rlimits['NPROC'] = cfg.max_processes
        spec = {'kind': kind, 'namespaces': self.on['namespaces'], 'uid': self.user[0] if self.user else None,
                'gid': self.user[1] if self.user else None, 'cwd': paths['home'], 'job_dir': paths['job'],
                'cgroup_procs': self.cgroup.procs_files() if self.cgroup else [], 'rlimits': rlimits,
                'seccomp': self.program.hex() if self.program else None, 'env': env}
        if self.on['namespaces']:
            self.zygote.start()
            devices, extra = scratch.gpu_extras()
            spec['root'] = scratch.root_spec(self.scratch, folder, scratch.interpreter_dirs(self.zygote.info),
                                             self.user, pwd.getpwuid(self.user[0]).pw_name, devices, extra)
        elif self.on['landlock']:   # the same allow-list, at its real places: the wall without a new root
            self.zygote.start()
            devices, extra = scratch.gpu_extras()
            spec['landlock'] = scratch.landlock_rules(self.scratch, folder, scratch.interpreter_dirs(self.zygote.info),
                                                      devices, extra)
        return spec

    def _check_ready(self, pid):
        """The process as seen from outside at its wall-up frame: in the cgroup, as the user, under seccomp."""
        if self.cgroup is not None and not self.cgroup.contains(pid):
            return 'the probe process is not in the grading cgroup %s' % self.cgroup.name
        status = _status(pid)
        if self.user and status.get('Uid', '').split() != [str(self.user[0])] * 4:
            return 'the probe process runs as uid %s' % status.get('Uid', '?').strip()
        if self.program and (status.get('Seccomp', '').strip() != '2' or status.get('NoNewPrivs', '').strip() != '1'):
            return 'the probe process has no seccomp filter (Seccomp: %s)' % status.get('Seccomp', '?').strip()
        return None

    def _cpu_meter(self):
        if self.cgroup is not None:
            return cgroups.Meter(self.cgroup)
        if self.user:   # no cgroup: every process the user ever had in this probe, zombies and reaped ones included
            return users.CpuMeter(self.user[0])
        return cgroups.Meter(None)

    def _process(self, kind, folder, job, cpu_limit, serve_link):
        """Fork, watch and end one process; every process of it is dead when this returns. A generator
        (probe.watch's questions pass through, where `serve_link`) returning the harness dict.
        `kind` (the probe's id) reaches the process through the zygote, in memory: no file it can read names it."""
        paths = scratch.inside_paths(folder, self.on['namespaces'], os.path.join(self.scratch, 'code'))
        folder.write_job(dict(job, link_fd=wall.LINK_FD, paths=paths))
        spec = self._spec(kind, folder, paths, cpu_limit)
        spec['probe'] = kind
        if kind == 'selftest':
            spec['selftest'] = job['selftest']
        oom_before = self.cgroup.oom_kills() if self.cgroup else None
        if self.cgroup:
            self.cgroup.reset_peak()
        wall_limit = cpu_limit * self.cfg.wall_factor + 10
        meter = self._cpu_meter()
        try:
            memory = self.cfg.probe_memory_mb << 20 if self.cfg.probe_memory_mb and kind != 'selftest' else None
            deadlines = probe.Deadlines(cpu_limit, wall_limit, self.budget_end, self.cfg.idle_seconds, memory)
            h = yield from probe.watch(
                self.zygote, spec, folder.log, deadlines, serve_link=serve_link, check_ready=self._check_ready,
                meter=meter, kill=self._kill,
                dump_path=None if kind == 'selftest' else os.path.join(folder.out, report_schema.HANG_DUMP))
        finally:
            self._clean(meter=meter)   # nothing of the process is alive, nothing left, before anything of it is read
        h['cpu_seconds'] = round(max(h['cpu_seconds'], meter.sample()), 3)   # with what its orphans did to the end
        if h['ended'] in ('exit', 'signal') and h['cpu_seconds'] > cpu_limit:
            h['ended'] = 'timeout'
        if self.cgroup is not None:
            h['cgroup_peak_bytes'] = self.cgroup.memory_peak()
            # the kernel's OOM kill is the fact, even where the harness had just stopped the process past its memory
            # cap (one allocation that grew faster than the harness reads /proc: a blow-up, not a loop)
            if (self.cgroup.oom_kills() or 0) > (oom_before or 0) \
                    and h['ended'] in ('signal', 'exit', 'wall', 'memory'):
                h['ended'] = 'oom'
        h.update(cpu_limit=cpu_limit, wall_limit=wall_limit)
        self._keep_log(kind, folder.log)
        if h['ended'] == 'wall_failed':
            raise SandboxRefused('the sandbox wall could not be built around a probe process: %s. Student code '
                                 'did not run past this point.' % h.get('wall_error'))
        return h

    def _keep_log(self, kind, path):
        try:
            with open(path, 'rb') as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - LOG_TAIL))
                text = f.read(LOG_TAIL).decode('utf-8', 'replace')
        except OSError:
            return
        if text.strip():
            self.logs.append('[%s] %s' % (kind, text))

    def _probe(self, work, import_check=False):
        """One process of `work` (a ProbeJob) to its end, a generator (its link's questions pass through,
        where work.serves_link) returning its outputs read when it exited by itself, else a ProbeResult
        whose status and harness say how it ended (`unread`: the harness words it).
        """
        tmpfs = (self.cfg.scratch_mb, self.cfg.scratch_inodes) if self.on['namespaces'] else None
        self.folders += 1   # a folder name that says nothing of the test (without namespaces its path is visible)
        folder = scratch.ProbeFolder(self.scratch, 'p%d' % self.folders, dict(work.inputs),
                                     self.user, tmpfs)
        try:
            h = yield from self._process(work.probe_id, folder, dict(work.job), work.cpu_limit, work.serves_link)
            result = None
            if h['ended'] == 'exit':   # exited by itself: its outputs are final, and nothing can change them now
                result = readback.read_probe(folder.out, work.probe_id, work.expected,
                                             self.cfg.max_json_kb * 1024,
                                             self.cfg.max_file_mb << 20)
            elif h['ended'] in HUNG:
                # where model.py was (none: no dump, or not in model.py)
                hang = readback.read_hang(folder.out)
                if hang:
                    h['hang'] = hang
            if result is None:
                result = ProbeResult(ending_status(h, import_check), unread=True)
            result.harness = h
            return result
        finally:
            folder.remove()

    # ------------------------------------------------------------------ self-test

    def _grader_copies(self):
        """
        With a sandbox user: this copy of the grader locked for good (copies.lock_own_copy), then every copy on
        the machine found (copies.find), each grading afresh: a copy opened, or another grading's started,
        since the last one counts. {copy: its secrets}, for the self-test to prove closed.
        """
        if not self.user:
            return {}   # student code runs as the grader's own user: nothing of the machine is closed to it
        started = time.perf_counter()
        self.lock_grader()
        scan = {}
        found = copies.find(report=scan)
        self.landed['grader_copies'] = len(found)
        self.landed['copy_scan_ms'] = round((time.perf_counter() - started) * 1000, 1)
        self.landed['copy_scan_entries'] = scan['entries']
        if 'incomplete' in scan and not (self.on['namespaces'] or self.on['landlock']):
            # no wall: the search is the only defence, and it could not finish
            raise SandboxRefused('the search for copies of the grader listed %d entries and stopped in %s; without '
                                 'namespaces or Landlock it is the only defence of the file system, so no student '
                                 'code was run. Empty the shared folders (/tmp, /var/tmp, /dev/shm), or grade where '
                                 'Landlock or namespaces are available' % (scan['entries'], scan['incomplete']))
        return found

    def lock_grader(self):
        """This copy of the grader closed to other users for good (copies.lock_own_copy), where there is a sandbox
        user; the interpreter it runs stays reachable. Returns the paths changed."""
        return copies.lock_own_copy(keep=(self.python, sys.prefix, sys.executable)) if self.user else []

    def _selftest(self, private, found=None):
        """A process forked and walled exactly like a probe checks every defence in force from inside; `found`:
        the copies of the grader on the machine ({copy: its secrets}), each secret of which it must not read."""
        from autograder import REPO_ROOT
        found = found or {}
        decoy_tops = []
        folder = scratch.ProbeFolder(self.scratch, 'selftest', {}, self.user,
                                     (1, 64) if self.on['namespaces'] else None)
        got = {}

        def answer(request):
            if request.payload.startswith(b'selftest '):
                got.update(json.loads(request.payload[len(b'selftest '):].decode()))
            return LinkAnswer(b'ok')
        try:
            paths = scratch.inside_paths(folder, self.on['namespaces'], os.path.join(self.scratch, 'code'))
            hidden = [p for p in private if p] + [p for secrets in found.values() for p in secrets]
            readonly = [paths['code'], os.path.dirname(paths['inputs'])]
            if self.on['namespaces']:
                hidden += [REPO_ROOT, scratch.BASE, '/root', '/var/lib', '/home', '/etc/shadow']
                readonly += ['/', '/usr', '/etc', '/dev', paths['job']]
            elif self.on['landlock']:   # decoys open to everyone, which only the wall keeps out of reach
                files, folders, decoy_tops = scratch.decoys('hw1-landlock-decoy')
                hidden += files + ['/', REPO_ROOT, scratch.BASE, '/root', '/home']
                readonly += folders
                self.landed['landlock_decoys'] = len(files)
            expect = {'uid': self.user[0] if self.user else None, 'gid': self.user[1] if self.user else None,
                      'seccomp': self.on['seccomp'], 'namespaces': self.on['namespaces'], 'hidden': hidden,
                      'writable': [paths['out'], paths['home']], 'readonly': readonly,
                      'rlimits': self._spec('selftest', folder, paths, 30)['rlimits']}
            with ProbeRun(self._process('selftest', folder, {'selftest': expect}, 30, True)) as run:
                for request in run:   # the self-test's own link: the sandbox answers it (no judge code runs)
                    run.answer(answer(request))
            h = run.result
        finally:
            folder.remove()
            scratch.remove_decoys(decoy_tops)
        failed = {k: v for k, v in got.items() if v is not True}
        if h['ended'] != 'exit' or h['exit_code'] != 0 or not got or failed:
            advice = self._advice(failed.get('filesystem'), private, found)
            raise SandboxRefused('the sandbox self-test failed, so no student code was run: %s%s'
                                 % ('; '.join('%s: %s' % kv for kv in failed.items()) if failed
                                    else 'the self-test process ended with %s (exit %s, signal %s)'
                                    % (h['ended'], h['exit_code'], h['signal']), advice))
        return {k: True for k in got}

    def _advice(self, problem, private, found):
        """What staff can do about a self-test that read what it must not: the open copies of the grader first."""
        if not isinstance(problem, str):
            return ''
        open_copies = [c for c, secrets in found.items() if any('%s is readable' % p in problem for p in secrets)]
        if open_copies:
            return ('. Open copies of the grader (their draw key, fixtures and reference solution within reach of '
                    'student code): %s. Close each to other users (chmod 700 %s, or chmod -R o-rwx on it), or '
                    'remove it' % (', '.join(open_copies), open_copies[0]))
        if not self.on['namespaces'] and any(p in problem for p in private):
            return ('. Without namespaces student code can read whatever the sandbox user can: make these '
                    'private to root (chmod 700, e.g. the folder of a batch export), or grade where namespaces '
                    'are available')
        return ''


class GradingSession:
    """
    One grading's processes, one call each, as the harness asks for them (Sandbox.grading makes it):
    the import check, then whichever probes the harness decides to run, each told all it needs as a
    value. Every process of the last call is dead and its user's files gone before a call returns.
    `budget_end`: the time.time() past which no process may run (a process running then is
    stopped, ended 'budget'); `report` (a SessionReport) once the grading has ended.
    """

    def __init__(self, sandbox, budget_end):
        self._sandbox, self.budget_end, self.report = sandbox, budget_end, None

    def budget_spent(self):
        """Whether the grading's time budget is used up (no process should start)."""
        return time.time() > self.budget_end

    def import_check(self, job, cpu_limit, serves_link=False):
        """model.py imported in a process of its own (report_schema.IMPORT), as a ProbeRun like probe()'s
        (its link answered by the harness where `serves_link`: the harness serves none today, tests do)."""
        work = ProbeJob(report_schema.IMPORT, job, {}, cpu_limit, {}, serves_link)
        return ProbeRun(self._sandbox._probe(work, import_check=True))

    def probe(self, work):
        """The probe `work` (a ProbeJob) in a fresh process, as a ProbeRun the harness drives to its end
        (answering the questions of its link, where work.serves_link), then reads `result` of. Never
        raises for anything the student's code does."""
        return ProbeRun(self._sandbox._probe(work))
