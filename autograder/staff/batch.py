"""
`python -m autograder batch EXPORT_DIR [--jobs N] [--out grades.csv] [--profile cpu] [--png]`:
regrades a Gradescope "Export Submissions" folder (one folder per submission, e.g.
submission_123456/, and submission_metadata.yml naming the students of each).

Each submission is graded in its own process (a crash costs one row, never the batch), N
at a time; under root each grading claims a free sandbox user of the pool setup.sh creates
(hw1student, hw1student1..3), so N above the pool size queues. A progress bar with an ETA
goes to stderr. Each submission's results.json is written
beside it (EXPORT_DIR/<sub>/results.json, atomically), stamped with the sha256 of the fixtures'
manifest.json and of grading.yaml; a rerun skips submissions already stamped with the current
ones, so an interrupted batch resumes where it stopped (`--force` regrades everything).
The CSV has one row per student: name, email, sid, submission, status, the points of every
test (by number and id), total and the score Gradescope had. `--png` also draws each
submission's loss curve over the reference band into EXPORT_DIR/<sub>/loss_curve.png.
"""

import argparse
import csv
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

from autograder import GRADING_YAML, REPO_ROOT, config, fixtures

METADATA = 'submission_metadata.yml'
RESULTS = 'results.json'
PNG = 'loss_curve.png'


# ----------------------------------------------------------------------------- export


def _strip_colons(value):
    """Gradescope writes Ruby symbols as keys (':submitters', ':name'); plain names are easier to use."""
    if isinstance(value, dict):
        return {str(k).lstrip(':'): _strip_colons(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_colons(v) for v in value]
    return value


def read_metadata(export_dir):
    path = os.path.join(export_dir, METADATA)
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        data = yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ValueError('%s is not a mapping of submission folders' % path)
    return {str(k): _strip_colons(v) or {} for k, v in data.items()}


def submissions(export_dir, metadata):
    """The submission folders to grade: those in the metadata, and any other submission_* folder."""
    names = {n for n in metadata if os.path.isdir(os.path.join(export_dir, n))}
    names |= {n for n in os.listdir(export_dir)
              if n.startswith('submission_') and os.path.isdir(os.path.join(export_dir, n))}
    return sorted(names)


# ----------------------------------------------------------------------------- stamps and resume


def stamp_for(profile, grading_path=GRADING_YAML):
    """What a results.json must carry to count as graded by this grader."""
    return {'profile': profile,
            'fixtures_sha256': fixtures.sha256_file(os.path.join(fixtures.folder(profile), 'manifest.json')),
            'grading_yaml_sha256': fixtures.sha256_file(grading_path)}


def load_results(sub_dir):
    try:
        with open(os.path.join(sub_dir, RESULTS)) as f:
            out = json.load(f)
        return out if isinstance(out, dict) and isinstance(out.get('tests'), list) else None
    except (OSError, ValueError):
        return None


def is_error_result(results):
    return any(t.get('name', '').startswith('Autograder error') for t in results.get('tests', []))


def already_graded(sub_dir, stamp):
    out = load_results(sub_dir)
    if out is None or is_error_result(out):
        return False
    got = (out.get('extra_data') or {}).get('batch') or {}
    return all(got.get(k) == v for k, v in stamp.items())


# ----------------------------------------------------------------------------- one submission (child process)


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
    """
    Runs in its own process: grade one submission folder, stamp and write its results.json.
    argv: SUB_DIR PROFILE STAMP_JSON
    """
    from autograder import grade
    sub_dir, profile, stamp = argv[0], argv[1], json.loads(argv[2])
    scratch = tempfile.mkdtemp(prefix='hw1-batch-')

    def on_term(signum, frame):  # the batch is stopping: stop the sandboxed child too, then go
        _kill_children()
        shutil.rmtree(scratch, ignore_errors=True)
        os._exit(143)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the batch, which stops the workers cleanly
    try:
        out = grade.grade(sub_dir, profile, os.path.join(scratch, 'results', RESULTS))
        if not is_error_result(out):
            out.setdefault('extra_data', {})['batch'] = dict(
                stamp, graded_at=datetime.datetime.now().isoformat(timespec='seconds'))
        tmp = os.path.join(sub_dir, '.%s.tmp' % RESULTS)
        with open(tmp, 'w') as f:
            json.dump(out, f, indent=2)
        os.replace(tmp, os.path.join(sub_dir, RESULTS))
        total = sum(t['score'] for t in out['tests'])
        possible = sum(t['max_score'] for t in out['tests'])
        print('%g/%g' % (total, possible))
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_parallelism(grading, jobs, log):
    """Parallel gradings need one sandbox user each (setup.sh creates hw1student, hw1student1..3)."""
    if jobs > (os.cpu_count() or 1):
        log('batch: --jobs %d is more than the %d cores here; gradings will compete for CPU' % (jobs, os.cpu_count() or 1))
    if os.geteuid() != 0:
        return
    from autograder.sandbox import _sandbox_user
    pool, note = _sandbox_user(grading.sandbox['user'])
    if pool is None:
        log('batch: %s' % note)
    elif len(pool) < jobs:
        log('batch: only %d sandbox user(s): at most %d submission(s) are graded at once (./setup.sh creates %s1..3)'
            % (len(pool), len(pool), grading.sandbox['user']))


# ----------------------------------------------------------------------------- progress


def _clock(seconds):
    seconds = int(round(seconds))
    return '%d:%02d:%02d' % (seconds // 3600, seconds % 3600 // 60, seconds % 60) if seconds >= 3600 \
        else '%d:%02d' % (seconds // 60, seconds % 60)


class Progress:
    """A one-line bar with an ETA on stderr; one line per event when stderr is not a terminal."""

    def __init__(self, total, skipped, jobs, stream=sys.stderr, width=30):
        self.total, self.done, self.graded, self.errors = total, skipped, 0, 0
        self.to_grade = total - skipped
        self.jobs, self.stream, self.width = jobs, stream, width
        self.started = time.time()
        self.tty = hasattr(stream, 'isatty') and stream.isatty()
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
        if self.tty:
            self.stream.write('\r\033[K' + text)
        else:
            self.stream.write(text + '\n')
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


# ----------------------------------------------------------------------------- the batch


class Batch:
    def __init__(self, export_dir, jobs=1, profile='cpu', png=False, force=False, timeout=None, log=None):
        self.export_dir = os.path.abspath(export_dir)
        self.jobs = max(1, int(jobs))
        self.profile, self.png, self.force = profile, png, force
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.grading = config.load()
        if profile not in self.grading.profiles:
            raise config.GradingConfigError('unknown profile %r (grading.yaml has %s)' % (profile, ', '.join(self.grading.profiles)))
        fixtures.load(self.grading, profile)  # refuse stale fixtures before grading anything
        self.stamp = stamp_for(profile)
        # the longest one submission may take: every test's timeout, plus start-up
        self.timeout = timeout or sum(t.timeout for t in self.grading.tests) + 120
        self.running = {}            # Popen -> submission
        self.running_lock = threading.Lock()
        self.stopping = False
        self.outcomes = {}           # submission -> ('graded' | 'skipped' | 'error', message)

    def grade_one(self, sub):
        if self.stopping:
            return 'cancelled', ''
        cmd = [sys.executable, '-c', 'import sys; from autograder.staff.batch import worker; sys.exit(worker(sys.argv[1:]))',
               os.path.join(self.export_dir, sub), self.profile, json.dumps(self.stamp)]
        with self.running_lock:
            if self.stopping:
                return 'cancelled', ''
            proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.running[proc] = sub
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
            with self.running_lock:
                self.running.pop(proc, None)
        if self.stopping:
            return 'cancelled', ''
        if proc.returncode != 0:
            tail = (stderr or stdout or '').strip().splitlines()
            return 'error', 'the grader crashed (exit %d): %s' % (proc.returncode, tail[-1] if tail else 'no output')
        out = load_results(os.path.join(self.export_dir, sub))
        if out is None:
            return 'error', 'the grader wrote no readable results.json'
        if is_error_result(out):
            return 'error', out['tests'][0].get('output', 'autograder error')[:300].replace('\n', ' ')
        return 'graded', (stdout or '').strip().splitlines()[-1] if (stdout or '').strip() else ''

    def stop(self, signum=None, frame=None):
        with self.running_lock:
            self.stopping = True
            procs = list(self.running)
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except OSError:
                pass

    def run(self):
        metadata = read_metadata(self.export_dir)
        subs = submissions(self.export_dir, metadata)
        todo = [s for s in subs if self.force or not already_graded(os.path.join(self.export_dir, s), self.stamp)]
        for s in subs:
            if s not in todo:
                self.outcomes[s] = ('skipped', 'already graded with these fixtures')
        self.log('batch: %d submissions in %s; %d to grade, %d already graded with these fixtures (%s), %d worker(s)'
                 % (len(subs), self.export_dir, len(todo), len(subs) - len(todo), self.stamp['fixtures_sha256'][:12], self.jobs))
        if todo:
            check_parallelism(self.grading, min(self.jobs, len(todo)), self.log)
        progress = Progress(len(subs), len(subs) - len(todo), self.jobs)
        progress.show()
        old = {s: signal.signal(s, self.stop) for s in (signal.SIGTERM, signal.SIGINT)} \
            if threading.current_thread() is threading.main_thread() else {}
        try:
            with ThreadPoolExecutor(self.jobs) as pool:
                futures = {pool.submit(self.grade_one, s): s for s in todo}
                for fut in _as_completed(futures):
                    sub = futures[fut]
                    try:
                        status, message = fut.result()
                    except Exception as e:  # a bug here must not stop the other submissions
                        status, message = 'error', 'batch failed on this submission: %s: %s' % (type(e).__name__, e)
                    if status == 'cancelled':
                        continue
                    self.outcomes[sub] = (status, message)
                    progress.advance('%s %s' % (sub, message if status == 'graded' else 'ERROR'), status == 'error')
        finally:
            progress.close()
            for s, handler in old.items():
                signal.signal(s, handler)
        if self.stopping:
            self.log('batch: interrupted; %d of %d submissions have results. Run the same command again to resume.'
                     % (sum(1 for s in subs if already_graded(os.path.join(self.export_dir, s), self.stamp)), len(subs)))
            return None
        for sub, (status, message) in sorted(self.outcomes.items()):
            if status == 'error':
                self.log('batch: ERROR %s: %s' % (sub, message))
        if self.png:
            self.draw_pngs(subs, metadata)
        return metadata, subs

    def draw_pngs(self, subs, metadata):
        from autograder.staff import plots
        try:
            import matplotlib  # noqa: F401  (optional staff extra)
        except ImportError:
            print(plots.MISSING, file=sys.stderr)
            return
        for sub in subs:
            out = load_results(os.path.join(self.export_dir, sub))
            path = os.path.join(self.export_dir, sub, PNG)
            if out is None or (os.path.isfile(path) and self.outcomes.get(sub, ('',))[0] == 'skipped'):
                continue
            names = ', '.join(s.get('name', '') for s in (metadata.get(sub) or {}).get('submitters') or [])
            plots.loss_curve_png(out, path, self.profile, title='%s %s' % (sub, names), grading=self.grading)

    def rows(self, metadata, subs):
        specs = self.grading.enabled_tests()
        test_cols = ['%s %s' % (s.number, s.id) for s in specs]
        header = ['name', 'email', 'sid', 'submission', 'created_at', 'status'] + test_cols + \
                 ['total', 'max', 'gradescope_score', 'note']
        rows = []
        for sub in subs:
            meta = metadata.get(sub) or {}
            status, message = self.outcomes.get(sub, ('error', 'not graded'))
            out = load_results(os.path.join(self.export_dir, sub)) if status != 'error' else None
            scores = {}
            if out is not None:
                scores = {t.get('number'): t['score'] for t in out['tests']}
            cells = ['%g' % scores[s.number] if s.number in scores else '' for s in specs]
            total = '%g' % sum(t['score'] for t in out['tests']) if out else ''
            possible = '%g' % sum(s.weight for s in specs)
            note = message if status == 'error' else ''
            submitters = meta.get('submitters') or [{}]
            for person in submitters:
                rows.append([str(person.get('name', '') or ''), str(person.get('email', '') or ''),
                             str(person.get('sid', '') or ''), sub, str(meta.get('created_at', '') or ''),
                             'error' if status == 'error' else 'graded'] + cells +
                            [total, possible, _number(meta.get('score')), note])
        rows.sort(key=lambda r: (r[0].lower(), r[3]))
        return header, rows


def _number(value):
    try:
        return '%g' % float(value)
    except (TypeError, ValueError):
        return '' if value is None else str(value)


def _as_completed(futures):
    from concurrent.futures import as_completed
    return as_completed(futures)


def write_csv(path, header, rows):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = os.path.join(os.path.dirname(os.path.abspath(path)), '.%s.tmp' % os.path.basename(path))
    with open(tmp, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder batch', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('export_dir', help='the unzipped Gradescope "Export Submissions" folder')
    ap.add_argument('--jobs', '-j', type=int, default=1, help='submissions graded at once (default 1; about one per core)')
    ap.add_argument('--out', default='grades.csv', help='the CSV to write (default grades.csv)')
    ap.add_argument('--profile', default='cpu', help='grading.yaml profile (default cpu; gpu on a GPU machine)')
    ap.add_argument('--png', action='store_true', help='draw <submission>/loss_curve.png for each (needs matplotlib)')
    ap.add_argument('--force', action='store_true', help='regrade submissions already graded with these fixtures')
    ap.add_argument('--timeout', type=int, default=None,
                    help='seconds one submission may take before it is stopped (default: sum of the test timeouts)')
    args = ap.parse_args(argv[1:])
    if not os.path.isdir(args.export_dir):
        print('batch: %s is not a folder' % args.export_dir, file=sys.stderr)
        return 2
    try:
        batch = Batch(args.export_dir, args.jobs, args.profile, args.png, args.force, args.timeout)
    except (fixtures.StaleFixtures, config.GradingConfigError, OSError) as e:
        print('batch: refused: %s' % e, file=sys.stderr)
        return 1
    started = time.time()
    done = batch.run()
    if done is None:
        return 130
    header, rows = batch.rows(*done)
    write_csv(args.out, header, rows)
    counts = {}
    for status, _ in batch.outcomes.values():
        counts[status] = counts.get(status, 0) + 1
    print('batch: %d submissions (graded %d, skipped %d already graded, errors %d) in %.1f s; %d rows written to %s'
          % (len(done[1]), counts.get('graded', 0), counts.get('skipped', 0), counts.get('error', 0),
             time.time() - started, len(rows), args.out))
    return 0
