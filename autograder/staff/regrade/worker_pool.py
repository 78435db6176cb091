"""
The regrade engine of `batch` and `evaluate`: N long-lived worker processes (`python -c ...
serve PROFILE`), each grading one submission at a time, in-process (the harness imports no
torch: numpy, yaml, gradescope-utils), many submissions in turn, so that a grading costs no
interpreter start or harness import. Student code still runs only in the sandboxed children
that grade.grade_results starts for each grading, as its own sandbox user. A worker that
crashes, raises, or runs past the per-submission timeout costs that submission an error
outcome, never the run: it is stopped (with its sandboxed children) and a fresh worker takes
the next job. Under root each grading claims a free sandbox user of the pool setup.sh creates
(hw1student, hw1student1..3), so N above the pool size queues. A progress bar with an ETA goes
to stderr. SIGTERM/Ctrl-C stops the workers (and their sandboxed children) cleanly; what
finished stays finished.

The link: the engine writes one JSON job per line on the worker's stdin; the worker answers
one JSON line per job on its own copy of stdout (anything else printed during a grading goes to
stderr, which is kept for the crash message). A worker grades with grade.grade_results
(optionally skipping tests, for evaluate), stamps the results (extra_data.batch) and writes
them atomically to the job's results path; for evaluate it also runs the course's public tests
(course_tests.py) and writes their JSON. After MAX_JOBS_PER_WORKER jobs a worker is replaced,
so that nothing a long run accumulates (memory, open files) grows without bound.

One Sandbox, and so one zygote (an interpreter with torch imported that never runs student
code, autograder/sandbox/zygote_handle.py), lives in each worker across its gradings: every probe of
every submission is still a fresh fork of it, walled in as a pool user of its own, so nothing of
one student's run reaches another's, and a grading costs no torch import. A worker replaced
after a crash or a timeout starts a fresh zygote with its fresh Sandbox.
"""

import datetime
import io
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Tuple

from autograder import REPO_ROOT
from autograder.judge import results


@dataclass
class Job:
    key: str                     # what the progress line and the outcome are called (a submission folder name)
    path: str                    # the model.py, folder or zip to grade
    results_path: str            # where the stamped results.json goes
    stamp: Dict = field(default_factory=dict)   # extra_data.batch of a successful grading
    skip: Tuple[str, ...] = ()   # test ids not run (evaluate: loss-curve for mutants that do not involve it)
    course_path: str = ''        # also run the course's public tests and write their JSON here
    behaviour_path: str = ''     # also keep the failing outputs' prints here (behaviour_prints.py; staff only)


# ----------------------------------------------------------------------------- the worker (its own process)


def _kill_children():
    """Stop the sandboxed children this process started (each leads its own process group)."""
    me = str(os.getpid())
    for entry in os.listdir('/proc') if os.path.isdir('/proc') else []:
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                ppid = f.read().rsplit(')', 1)[1].split()[1]
        except (OSError, IndexError):
            continue
        if ppid == me:
            pid = int(entry)
            for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    kill()
                    break
                except OSError:
                    continue


MAX_JOBS_PER_WORKER = 200


def grade_job(profile_name, job, scratch, sandbox=None):
    """Grade one Job in this process: the stamped results.json (and the course tests' JSON); returns its summary."""
    from autograder.judge import grade
    from autograder.staff.regrade import behaviour_prints
    kept = {}
    observe = behaviour_prints.observer(kept.update) if job.behaviour_path else None
    out = grade.grade_results(job.path, profile_name, os.path.join(scratch, 'results', 'results.json'),
                              skip=tuple(job.skip), sandbox=sandbox, observe=observe)
    if job.stamp and not out.is_error:
        out.extra_data['batch'] = dict(job.stamp, graded_at=datetime.datetime.now().isoformat(timespec='seconds'))
    if kept and not out.is_error:   # beside results.json, never in it, and first: a results.json stamped
        behaviour_prints.write(job.behaviour_path, out.extra_data.get('batch'), kept)   # as graded has its prints
    out.write(job.results_path)
    if job.course_path:
        from autograder.staff.evaluation import course_tests
        model = grade.submission.locate(job.path, os.path.join(scratch, 'upload')).path
        course = course_tests.check_model(model) if model else {'checks': {}, 'passed': False}
        with open(job.course_path, 'w') as f:
            json.dump(course, f)
    return out.summary()


def serve(profile_name):
    """The worker's main loop: one JSON Job per line on stdin, one JSON answer per job on the original stdout."""
    from autograder.judge import grade
    answers = os.fdopen(os.dup(1), 'w', buffering=1)
    os.dup2(2, 1)                 # whatever a grading prints goes to stderr, never into the answers
    sys.stdout = sys.stderr
    scratch = [None]

    def on_term(signum, frame):  # the run is stopping: stop the sandboxed child too, leave no student code, then go
        _kill_children()
        grade.remove_upload_scratch()
        if scratch[0]:
            shutil.rmtree(scratch[0], ignore_errors=True)
        os._exit(143)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the engine, which stops the workers cleanly
    box = [None]
    for line in sys.stdin:
        job = Job(**json.loads(line))
        scratch[0] = tempfile.mkdtemp(prefix='hw1-batch-')
        try:
            if box[0] is None:   # the worker's one zygote; SandboxRefused here is this job's error, as in a grading
                from autograder.judge import config
                from autograder.sandbox import Sandbox
                box[0] = Sandbox(config.load().sandbox)
            answer = {'key': job.key, 'summary': grade_job(profile_name, job, scratch[0], box[0])}
        except Exception as e:   # this submission's error; the engine replaces a worker that raised
            answer = {'key': job.key, 'error': '%s: %s' % (type(e).__name__, e)}
        finally:
            shutil.rmtree(scratch[0], ignore_errors=True)
            scratch[0] = None
        answers.write(json.dumps(answer) + '\n')
        if 'error' in answer:
            return 1   # the zygote goes with this process (_kill_children on the engine's side, or its own exit)
    if box[0] is not None:
        box[0].close()
    return 0


class Worker:
    """One long-lived worker process and its pipes; `grade(job, timeout)` -> (status, message)."""

    def __init__(self, profile_name):
        cmd = [sys.executable, '-c',
               'import sys; from autograder.staff.regrade.worker_pool import serve; sys.exit(serve(sys.argv[1]))',
               profile_name]
        self.stderr = tempfile.TemporaryFile(mode='w+')   # read only after a crash: no pipe to fill up
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, bufsize=1)
        self.jobs = 0
        self.answers = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.answers.put(line)
        self.answers.put(None)   # EOF: the worker is gone

    def grade(self, job, timeout):
        self.jobs += 1
        try:
            self.proc.stdin.write(json.dumps(asdict(job)) + '\n')
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass   # the worker died; its exit is read below
        try:
            line = self.answers.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            return 'error', 'the grader ran longer than %d s and was stopped' % timeout
        if line is None:
            code = self.proc.wait()
            return 'error', 'the grader crashed (exit %d): %s' % (code, self._last_error() or 'no output')
        answer = json.loads(line)
        if 'error' in answer:
            self.proc.wait()
            return 'error', 'the grader crashed (exit %d): %s' % (self.proc.returncode, answer['error'])
        return 'answered', answer['summary']

    def _last_error(self):
        self.stderr.seek(0)
        lines = self.stderr.read()[-20000:].strip().splitlines()
        return lines[-1] if lines else ''

    @property
    def alive(self):
        return self.proc.poll() is None and self.jobs < MAX_JOBS_PER_WORKER

    def stop(self, now=True, grace=30):
        """End the worker: at once with SIGTERM (it stops its sandboxed children), or (now=False) by closing its
        job pipe and letting it finish; SIGKILL after `grace` seconds either way."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=0 if now else grace)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        self.stderr.close()


# ----------------------------------------------------------------------------- progress


def _clock(seconds):
    seconds = int(round(seconds))
    return '%d:%02d:%02d' % (seconds // 3600, seconds % 3600 // 60, seconds % 60) if seconds >= 3600 \
        else '%d:%02d' % (seconds // 60, seconds % 60)


class Progress:
    """A one-line bar with an ETA on stderr; one line per event when stderr is not a terminal."""

    def __init__(self, total, skipped, jobs, stream=None, width=30):
        self.total, self.done, self.graded, self.errors = total, skipped, 0, 0
        self.to_grade = total - skipped
        self.jobs, self.stream, self.width = jobs, stream or sys.stderr, width
        self.started = time.time()
        self.tty = hasattr(self.stream, 'isatty') and self.stream.isatty()
        self.lock = threading.Lock()

    def line(self, last=''):
        frac = self.done / self.total if self.total else 1.0
        filled = int(round(self.width * frac))
        elapsed = time.time() - self.started
        left = self.to_grade - self.graded
        if left == 0:
            eta = 'done'
        elif self.graded:
            eta = 'ETA ' + _clock(elapsed / self.graded * left)
        else:
            eta = 'ETA ?'
        return '[%s%s] %d/%d %3d%% | %s elapsed, %s | errors %d%s' % (
            '#' * filled, '.' * (self.width - filled), self.done, self.total, round(100 * frac),
            _clock(elapsed), eta, self.errors, (' | ' + last) if last else '')

    def show(self, last=''):
        text = self.line(last)
        self.stream.write(('\r\033[K' + text) if self.tty else (text + '\n'))
        self.stream.flush()

    def advance(self, last, error=False):
        with self.lock:
            self.done += 1
            self.graded += 1
            self.errors += bool(error)
            self.show(last)

    def close(self):
        if self.tty:
            self.stream.write('\n')
            self.stream.flush()


# ----------------------------------------------------------------------------- the engine


class Engine:
    """Runs Jobs in worker processes, `jobs` at a time. outcomes: {key: (status, message)}."""

    def __init__(self, profile_name, jobs=1, timeout=600, log=None, progress=True):
        self.profile_name, self.jobs, self.timeout, self.progress = profile_name, max(1, int(jobs)), timeout, progress
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.workers = set()         # every live Worker
        self.local = threading.local()   # each pool thread's own Worker
        self.running_lock = threading.Lock()
        self.stopping = False
        self.outcomes = {}           # key -> ('graded' | 'error', message)
        self.seconds = {}            # key -> wall seconds of its worker

    def _worker(self):
        """This thread's worker, started (or replaced) when it has none that can take a job."""
        w = getattr(self.local, 'worker', None)
        if w is None or not w.alive:
            if w is not None:
                w.stop(now=False)
            with self.running_lock:
                if self.stopping:
                    return None
                w = self.local.worker = Worker(self.profile_name)
                self.workers.add(w)
        return w

    def grade_one(self, job: Job):
        if self.stopping:
            return 'cancelled', ''
        started = time.time()
        worker = self._worker()
        if worker is None:
            return 'cancelled', ''
        try:
            status, message = worker.grade(job, self.timeout)
        finally:
            self.seconds[job.key] = time.time() - started
        if self.stopping:
            return 'cancelled', ''
        if status == 'error':
            with self.running_lock:
                self.workers.discard(worker)
            worker.stop()
            self.local.worker = None
            return status, message
        out = load(job.results_path)
        if out is None:
            return 'error', 'the grader wrote no readable results.json'
        if out.is_error:
            cause = out.extra_data.get('grader_error') or next(iter(out.tests.values())).output
            return 'error', 'the grader failed: %s' % str(cause)[:300].replace('\n', ' ')
        return 'graded', message or out.summary()

    def stop(self, signum=None, frame=None):
        with self.running_lock:
            self.stopping = True
            workers = list(self.workers)
        for w in workers:
            try:
                w.proc.send_signal(signal.SIGTERM)
            except OSError:
                pass

    def grade(self, todo, total=None, skipped=0, on_done=None):
        """Grade every Job of `todo`; returns the outcomes, or None when interrupted (SIGTERM, Ctrl-C)."""
        total = len(todo) + skipped if total is None else total
        progress = Progress(total, skipped, self.jobs, None if self.progress else io.StringIO())
        progress.show()
        old = {s: signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)} \
            if threading.current_thread() is threading.main_thread() else {}
        try:
            with ThreadPoolExecutor(self.jobs) as pool:
                futures = {pool.submit(self.grade_one, job): job for job in todo}
                for fut in as_completed(futures):
                    job = futures[fut]
                    try:
                        status, message = fut.result()
                    except Exception as e:  # a bug here must not stop the other submissions
                        status, message = 'error', 'the run failed on this submission: %s: %s' % (type(e).__name__, e)
                    if status == 'cancelled':
                        continue
                    self.outcomes[job.key] = (status, message)
                    progress.advance('%s %s' % (job.key, message if status == 'graded' else 'ERROR'), status == 'error')
                    if on_done:
                        on_done(job, status, message)
        finally:
            progress.close()
            for s, handler in old.items():
                signal.signal(s, handler)
            with self.running_lock:
                workers, self.workers = list(self.workers), set()
            for w in workers:   # no job left: each worker reads the end of its pipe and goes (or is stopped)
                w.stop(now=self.stopping, grace=5 if self.stopping else 30)
        return None if self.stopping else self.outcomes


def load(path) -> Optional[results.Results]:
    """The Results at `path`, or None when missing or not a valid results.json."""
    try:
        return results.load(path)
    except (OSError, ValueError):
        return None


def check_parallelism(grading, jobs, log):
    """Parallel gradings need one sandbox user each (setup.sh creates hw1student, hw1student1..3)."""
    if jobs > (os.cpu_count() or 1):
        log('--jobs %d is more than the %d cores here; gradings will compete for CPU' % (jobs, os.cpu_count() or 1))
    if os.geteuid() != 0:
        return
    from autograder.sandbox.users import sandbox_pool
    pool, note = sandbox_pool(grading.sandbox['user'], grading.sandbox['pool_size'])
    if pool is None:
        log(note)
    elif len(pool) < jobs:
        log('only %d sandbox user(s): at most %d submission(s) are graded at once (./setup.sh creates %s1..3)'
            % (len(pool), len(pool), grading.sandbox['user']))


def default_timeout(grading):
    """The longest one submission may take: every test's timeout, plus start-up."""
    return sum(t.timeout for t in grading.tests) + 120
