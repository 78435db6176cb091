"""
The regrade engine of `batch` and `evaluate`: every submission is graded in its own process
(`python -c ... worker JOB`), N at a time, with a per-submission timeout; a crash or a timeout
costs that submission an error outcome, never the run. Under root each grading claims a free
sandbox user of the pool setup.sh creates (hw1student, hw1student1..3), so N above the pool
size queues. A progress bar with an ETA goes to stderr. SIGTERM/Ctrl-C stops the workers
(and their sandboxed children) cleanly; what finished stays finished.

A worker grades with grade.grade_results (optionally skipping tests, for evaluate), stamps
the results (extra_data.batch) and writes them atomically to the job's results path; for
evaluate it also runs the course's public tests (course_tests.py) and writes their JSON.
"""

import datetime
import io
import json
import os
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

from autograder import REPO_ROOT, results


@dataclass
class Job:
    key: str                     # what the progress line and the outcome are called (a submission folder name)
    path: str                    # the model.py, folder or zip to grade
    results_path: str            # where the stamped results.json goes
    stamp: Dict = field(default_factory=dict)   # extra_data.batch of a successful grading
    skip: Tuple[str, ...] = ()   # test ids not run (evaluate: loss-curve for mutants that do not involve it)
    course_path: str = ''        # also run the course's public tests and write their JSON here


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


def worker(argv):
    """argv: PROFILE JOB_JSON. Grades one submission, writes its stamped results; prints its score."""
    from autograder import grade
    profile, job = argv[0], Job(**json.loads(argv[1]))
    scratch = tempfile.mkdtemp(prefix='hw1-batch-')

    def on_term(signum, frame):  # the run is stopping: stop the sandboxed child too, leave no student code, then go
        _kill_children()
        grade.remove_upload_scratch()
        shutil.rmtree(scratch, ignore_errors=True)
        os._exit(143)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the engine, which stops the workers cleanly
    try:
        out = grade.grade_results(job.path, profile, os.path.join(scratch, 'results', 'results.json'),
                                  skip=tuple(job.skip))
        if job.stamp and not out.is_error:
            out.extra_data['batch'] = dict(job.stamp, graded_at=datetime.datetime.now().isoformat(timespec='seconds'))
        out.write(job.results_path)
        if job.course_path:
            from autograder.staff import course_tests
            model = grade.submission.locate(job.path, os.path.join(scratch, 'upload')).path
            course = course_tests.run(model) if model else {'checks': {}, 'passed': False}
            with open(job.course_path, 'w') as f:
                json.dump(course, f)
        print(out.summary())
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


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

    def __init__(self, profile, jobs=1, timeout=600, log=None, progress=True):
        self.profile, self.jobs, self.timeout, self.progress = profile, max(1, int(jobs)), timeout, progress
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.running = {}            # Popen -> key
        self.running_lock = threading.Lock()
        self.stopping = False
        self.outcomes = {}           # key -> ('graded' | 'error', message)
        self.seconds = {}            # key -> wall seconds of its worker

    def grade_one(self, job: Job):
        if self.stopping:
            return 'cancelled', ''
        cmd = [sys.executable, '-c', 'import sys; from autograder.staff.engine import worker; sys.exit(worker(sys.argv[1:]))',
               self.profile, json.dumps(asdict(job))]
        started = time.time()
        with self.running_lock:
            if self.stopping:
                return 'cancelled', ''
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.running[proc] = job.key
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            return 'error', 'the grader ran longer than %d s and was stopped' % self.timeout
        finally:
            self.seconds[job.key] = time.time() - started
            with self.running_lock:
                self.running.pop(proc, None)
        if self.stopping:
            return 'cancelled', ''
        if proc.returncode != 0:
            tail = (stderr or stdout or '').strip().splitlines()
            return 'error', 'the grader crashed (exit %d): %s' % (proc.returncode, tail[-1] if tail else 'no output')
        out = load(job.results_path)
        if out is None:
            return 'error', 'the grader wrote no readable results.json'
        if out.is_error:
            return 'error', 'the grader failed: %s' % str(out.extra_data.get('grader_error') or
                                                          next(iter(out.tests.values())).output)[:300].replace('\n', ' ')
        return 'graded', (stdout or '').strip().splitlines()[-1] if (stdout or '').strip() else out.summary()

    def stop(self, signum=None, frame=None):
        with self.running_lock:
            self.stopping = True
            procs = list(self.running)
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except OSError:
                pass

    def run(self, todo, total=None, skipped=0, on_done=None):
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
    from autograder.sandbox import _sandbox_user
    pool, note = _sandbox_user(grading.sandbox['user'])
    if pool is None:
        log(note)
    elif len(pool) < jobs:
        log('only %d sandbox user(s): at most %d submission(s) are graded at once (./setup.sh creates %s1..3)'
            % (len(pool), len(pool), grading.sandbox['user']))


def default_timeout(grading):
    """The longest one submission may take: every test's timeout, plus start-up."""
    return sum(t.timeout for t in grading.tests) + 120
