"""
`python -m autograder batch EXPORT [--jobs N] [--out grades.csv] [--profile cpu] [--png] [--force] [--shard K/N]`:
regrades a Gradescope "Export Submissions" download: the .zip as downloaded (unpacked once,
beside it), the folder it unzips to, or the inner assignment_<id>_export/ folder, which holds
one folder per submission (submission_<id>/) and submission_metadata.yml naming the students.

Each submission is graded in its own process by the regrade engine (worker_pool.py: a crash or a
timeout costs one error row, never the batch; N at a time; a progress bar with an ETA on
stderr). Each submission's results.json is written beside it (EXPORT/<sub>/results.json,
atomically), stamped with what it was graded from: the submission's files, the grader's code
(autograder/ without the staff tools), the fixtures' manifest and grading.yaml. A rerun skips
submissions whose stamp still matches, so an interrupted batch resumes where it stopped and a
changed submission or grader is graded again (`--force` regrades everything). A rerun that grades
anything again never overwrites the CSV it replaces: that generation is kept as grades.<date>.csv (with
each submission's results.json of it), and the diff between the two is printed.

The CSV has one row per student (a group submission gives one row per member): name, email,
sid, submission, created_at, status, the points of every test (by number and id), total, max,
the score Gradescope had and a note. It goes to EXPORT/grades.csv unless --out says otherwise,
and is refused inside this checkout unless --out names it (it holds names, emails and SIDs).
Metadata entries without a folder get a row with status `missing`. The exit code is 0 when
every submission was graded, 1 when some errored or are missing (the count is printed), 2
when the export cannot be read, 130 when interrupted.

Beside each results.json the worker keeps behaviour.json, a print of the submission's wrong
outputs (behaviour_prints.py), and beside the CSV `<csv>.behaviour.json` gathers them: the class
report's similarity section reads it; no student sees it. `--shard K/N` grades shard K of N of
the export only (shards.py) into grades.shard-K-of-N.csv and writes no report: `report` merges
the N shards into one.
"""

import argparse
import os
import shutil
import sys
import time

from autograder import GRADING_YAML, PACKAGE_DIR, REPO_ROOT
from autograder.judge import config, fixtures
from autograder.judge.results import points
from autograder.staff.regrade import behaviour_prints, worker_pool, gradescope_export, gradebook, regrade_diff, shards

RESULTS = 'results.json'
PNG = 'loss_curve.png'
CSV_NAME = 'grades.csv'


# ----------------------------------------------------------------------------- stamps and resume


def grader_sha256():
    """The grader's version: every .py of autograder/ (the harness and the child), staff tools left out."""
    paths = []
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ('staff', '__pycache__', 'fixtures') and not d.startswith('.'))
        paths += [os.path.join(root, f) for f in sorted(files) if f.endswith('.py')]
    return fixtures.sha256_files(sorted(paths))


def stamp_for(profile_name, grading_path=GRADING_YAML):
    """What a results.json must carry to count as graded by this grader (the submission's hash is added per job)."""
    return {'profile': profile_name,
            'fixtures_sha256': fixtures.sha256_file(os.path.join(fixtures.folder(profile_name), 'manifest.json')),
            'grading_yaml_sha256': fixtures.sha256_file(grading_path),
            'grader_sha256': grader_sha256()}


def already_graded(sub_dir, stamp):
    """The stamped results.json in sub_dir matches `stamp` (grader, fixtures, grading.yaml, submission)."""
    out = worker_pool.load(os.path.join(sub_dir, RESULTS))
    if out is None or out.is_error:
        return False
    got = out.extra_data.get('batch') or {}
    return all(got.get(k) == v for k, v in stamp.items())


def inside_checkout(path):
    root = os.path.realpath(REPO_ROOT) + os.sep
    return (os.path.realpath(os.path.abspath(path)) + os.sep).startswith(root)


# ----------------------------------------------------------------------------- the batch


class Batch:
    def __init__(self, export_path, jobs=1, profile_name='cpu', png=False, force=False, timeout=None, log=None,
                 shard=None):
        self.log = log or (lambda msg: print(msg, file=sys.stderr, flush=True))
        self.grading = config.load()
        if profile_name not in self.grading.profiles:
            raise config.GradingConfigError('unknown profile %r (grading.yaml has %s)'
                                            % (profile_name, ', '.join(self.grading.profiles)))
        fixtures.load(self.grading, profile_name)  # refuse stale fixtures before grading anything
        self.export = gradescope_export.read(export_path)
        self.folder = self.export.folder
        self.shard = shard   # (K, N): grade shard K of N only (shards.py); None: the whole export
        self.submissions, self.missing = ((shards.share(self.export.submissions, *shard),
                                           shards.share(self.export.missing, *shard))
                                          if shard else (self.export.submissions, self.export.missing))
        self.profile_name, self.png, self.force = profile_name, png, force
        self.stamp = stamp_for(profile_name)
        self.engine = worker_pool.Engine(profile_name, jobs, timeout or worker_pool.default_timeout(self.grading),
                                    lambda msg: self.log('batch: ' + msg))
        self.outcomes = {}           # submission -> ('graded' | 'skipped' | 'error' | 'missing', message)

    def job(self, sub):
        sub_dir = os.path.join(self.folder, sub)
        stamp = dict(self.stamp, submission_sha256=gradescope_export.submission_sha256(sub_dir))
        return worker_pool.Job(sub, sub_dir, os.path.join(sub_dir, RESULTS), stamp,
                               behaviour_path=os.path.join(sub_dir, behaviour_prints.FILE))

    def to_grade(self, jobs=None):
        """The jobs this run grades: every one with --force, else those not already graded by this grader."""
        jobs = [self.job(s) for s in self.submissions] if jobs is None else jobs
        return [j for j in jobs if self.force or not already_graded(j.path, j.stamp)]

    def grade_all(self):
        ex = self.export
        jobs = [self.job(s) for s in self.submissions]
        if self.shard:
            self.log('batch: shard %d/%d: %d of the export\'s %d submission folders' % (
                self.shard + (len(jobs), len(ex.submissions))))
        todo = self.to_grade(jobs)
        for j in jobs:
            if j not in todo:
                self.outcomes[j.key] = ('skipped', 'already graded by this grader')
        self.log('batch: %d submissions in %s; %d to grade, %d already graded by this grader (fixtures %s), '
                 '%d worker(s)'
                 % (len(jobs), ex.folder, len(todo), len(jobs) - len(todo), self.stamp['fixtures_sha256'][:12],
                    self.engine.jobs))
        for sub in self.missing:
            self.outcomes[sub] = ('missing', 'listed in %s but the export has no folder %s/'
                                  % (gradescope_export.METADATA, sub))
            self.log('batch: %s is listed in %s but has no folder in the export: reported as missing'
                     % (sub, gradescope_export.METADATA))
        for who, subs in sorted(ex.duplicates.items()):
            self.log('batch: %s is a submitter of %d submissions (%s): each is graded and has its row; keep the one '
                     'Gradescope counts' % (who, len(subs), ', '.join(subs)))
        if ex.unlisted:
            self.log('batch: %d folder(s) not in %s, graded without names: %s'
                     % (len(ex.unlisted), gradescope_export.METADATA, ', '.join(ex.unlisted)))
        if not jobs and self.shard and ex.submissions:   # the export has folders, none of them this shard's
            self.log('batch: shard %d/%d is empty: none of the %d submission folders of %s falls in it (a '
                     'folder\'s shard is fixed by its name, shards.py); its CSV has no rows, and `report` merges it '
                     'with the others'
                     % (self.shard + (len(ex.submissions), ex.folder)))
        elif not jobs:
            self.log('batch: no submission_<id>/ folder in %s' % ex.folder)
        if todo:
            worker_pool.check_parallelism(self.grading, min(self.engine.jobs, len(todo)),
                                          lambda m: self.log('batch: ' + m))
        done = self.engine.grade(todo, len(jobs), len(jobs) - len(todo))
        if done is None:
            finished = sum(already_graded(j.path, j.stamp) for j in jobs)
            self.log('batch: interrupted; %d of %d submissions have results. Run the same command again to resume.'
                     % (finished, len(jobs)))
            return False
        self.outcomes.update(done)
        for sub, (status, message) in sorted(self.outcomes.items()):
            if status == 'error':
                self.log('batch: ERROR %s: %s' % (sub, message))
        if self.png:
            self.draw_pngs()
        return True

    def draw_pngs(self):
        from autograder.staff.regrade import plots
        try:
            import matplotlib  # noqa: F401  (optional staff extra)
        except ImportError:
            print(plots.MISSING, file=sys.stderr)
            return
        for sub in self.submissions:
            out = worker_pool.load(os.path.join(self.folder, sub, RESULTS))
            path = os.path.join(self.folder, sub, PNG)
            if out is None or (os.path.isfile(path) and self.outcomes.get(sub, ('',))[0] == 'skipped'):
                continue
            if gradebook.classify(out, os.path.join(self.folder, sub))[0] == 'not graded':
                if os.path.isfile(path):   # no model ran (no model.py, code that does not parse): no curve to show
                    os.remove(path)
                continue
            meta = self.export.metadata.get(sub)
            names = ', '.join(p.name for p in meta.submitters) if meta else ''
            plots.loss_curve_png(out.to_json(), path, self.profile_name, title='%s %s' % (sub, names),
                                 grading=self.grading)

    def rows(self):
        """(header, rows, meta) of the gradebook (gradebook.py): one row per student, sorted by name."""
        specs = self.grading.enabled_tests()
        # the assignment's maximum: extra-credit tests count on top of it (grading.yaml handout.extra_credit)
        possible = points(sum(s.weight for s in specs if not self.grading.is_extra_credit(s)))
        rows, records = [], {}
        for sub in sorted(set(self.submissions) | set(self.missing)):
            meta = self.export.metadata.get(sub) or gradescope_export.Entry(sub)
            status, message = self.outcomes.get(sub, ('error', 'not graded'))
            sub_dir = os.path.join(self.folder, sub)
            out = worker_pool.load(os.path.join(sub_dir, RESULTS)) if status in ('graded', 'skipped') else None
            if out is not None:
                status, note = gradebook.classify(out, sub_dir)
                records[sub] = dict(out.extra_data.get('batch') or {}, not_attempted=gradebook.not_attempted(out))
            elif status == 'error':
                note = message or 'the grader failed'
            else:
                status, note = 'missing', message
            cells, total, bugs, seconds, note = gradebook.row_cells(specs, out, status, note)
            if out is None and sub in self.engine.seconds:
                seconds = '%.1f' % self.engine.seconds[sub]   # how long an error took (a timeout is slow too)
            for person in meta.submitters or [gradescope_export.Person()]:
                rows.append([person.name, person.email, person.sid, sub, meta.created_at, status] + cells +
                            [total, possible, meta.score, bugs, seconds, note])
        rows.sort(key=lambda r: (r[0].lower(), r[3], r[2]))
        book_meta = gradebook.new_meta(os.path.basename(self.folder), self.folder, self.stamp, self.grading, records)
        if self.shard:
            book_meta['shard'] = list(self.shard)
        return gradebook.header(specs), rows, book_meta

    def behaviour(self):
        """{submission: its prints} of this regrade (behaviour_prints.py), where they match its results.json."""
        out = {}
        for sub in self.submissions:
            res = worker_pool.load(os.path.join(self.folder, sub, RESULTS))
            stamp = res.extra_data.get('batch') if res is not None else None
            prints = (behaviour_prints.read(os.path.join(self.folder, sub, behaviour_prints.FILE), stamp)
                      if stamp else None)
            if prints is not None:
                out[sub] = prints
        return out

    def counts(self):
        counts = {}
        for status, _ in self.outcomes.values():
            counts[status] = counts.get(status, 0) + 1
        return counts


def _refuse_overwrite(out, previous, assignment, stamp, compare):
    """One sentence when writing `out` would replace an earlier regrade made with other grader inputs, else None."""
    if previous is None:
        return None
    same = previous.assignment == assignment and previous.inputs == gradebook.grader_inputs(stamp)
    if same or (compare and os.path.realpath(compare) == os.path.realpath(out)):
        return None
    why = 'written by an older batch, without %s' % os.path.basename(gradebook.meta_path(out)) if not previous.meta \
        else 'graded with other grader inputs' if previous.assignment == assignment else 'of %s' % previous.assignment
    return ('%s holds an earlier regrade (%s) and would be replaced: give --compare %s to keep it as %s and list '
            'every score that changes, --out to write elsewhere, or --overwrite'
            % (out, why, out, backup_name(out, previous)))


def backup_name(out, previous):
    """grades.csv -> grades.<when it was written>.csv (still matched by .gitignore's grades*.csv)."""
    when = ((previous.meta or {}).get('written_at') or
            time.strftime('%Y-%m-%dT%H:%M:%S', time.localtime(os.path.getmtime(out))))
    stem, ext = os.path.splitext(out)
    return '%s.%s%s' % (stem, when.replace(':', '').replace('-', ''), ext or '.csv')


def keep_previous(out, previous, folder, submissions):
    """
    Copy the previous CSV (and its meta) aside before anything is graded, and each submission's
    results.json (and loss_curve.png) with it, into grades.<date>.results/<submission>/: the
    feedback students saw before the regrade. The kept meta names that folder (`results`), so
    that `diff` shows both generations. Returns the kept CSV's path.
    """
    target = backup_name(out, previous)
    for src, dst in ((out, target), (gradebook.meta_path(out), gradebook.meta_path(target)),
                     (behaviour_prints.side_path(out), behaviour_prints.side_path(target))):
        if os.path.isfile(src):
            shutil.copy2(src, dst)
    kept = os.path.splitext(target)[0] + gradebook.RESULTS_SUFFIX
    for sub in submissions:
        for name in (RESULTS, PNG):
            src = os.path.join(folder, sub, name)
            if os.path.isfile(src):
                os.makedirs(os.path.join(kept, sub), exist_ok=True)
                shutil.copy2(src, os.path.join(kept, sub, name))
    if previous.meta is not None and os.path.isdir(kept):
        gradebook.write_meta(gradebook.meta_path(target), dict(previous.meta, results=os.path.abspath(kept)))
    return target


def _parser():
    """The command line of `python -m autograder batch`."""
    ap = argparse.ArgumentParser(prog='python -m autograder batch', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('export',
                    help='the Gradescope export: the .zip, the folder it unzips to, or assignment_<id>_export/')
    ap.add_argument('--jobs', '-j', type=int, default=1,
                    help='submissions graded at once (default 1; about one per core)')
    ap.add_argument('--out', help='the CSV to write (default EXPORT/grades.csv, beside the results)')
    ap.add_argument('--profile', default='cpu', help='grading.yaml profile (default cpu; gpu on a GPU machine)')
    ap.add_argument('--png', action='store_true', help='draw <submission>/loss_curve.png for each (needs matplotlib)')
    ap.add_argument('--force', action='store_true', help='regrade submissions already graded by this grader')
    ap.add_argument('--timeout', type=int, default=None,
                    help='seconds one submission may take before it is stopped (default: sum of the test timeouts)')
    ap.add_argument('--compare', metavar='OLD.csv',
                    help='after the regrade, list every student whose score changed since OLD.csv and why (when '
                         'OLD.csv is the CSV being replaced, it is first kept as grades.<date>.csv)')
    ap.add_argument('--overwrite', action='store_true',
                    help='replace an earlier CSV made with other grader inputs without keeping it')
    ap.add_argument('--no-report', action='store_true', help='do not write the class report beside the CSV')
    ap.add_argument('--shard', metavar='K/N',
                    help='grade only shard K of N (a fixed share of the export, the same on every machine) into '
                         'grades.shard-K-of-N.csv; `report` and `diff` merge the N shards (docs/STAFF.md)')
    return ap


def _open(args, ap):
    """(Batch, None) for the command line, or (None, exit code) after one sentence on stderr."""
    try:
        shard = shards.parse(args.shard) if args.shard else None
    except ValueError as e:
        ap.error(str(e))
    if shard and args.compare:
        ap.error('--compare and --shard do not go together: merge the shards, then `python -m autograder diff OLD.csv '
                 'FOLDER` compares the whole regrade')
    try:
        return Batch(args.export, args.jobs, args.profile, args.png, args.force, args.timeout, shard=shard), None
    except gradescope_export.ExportError as e:
        print('batch: %s' % e, file=sys.stderr)
    except (fixtures.StaleFixtures, config.GradingConfigError, OSError) as e:
        print('batch: refused: %s' % e, file=sys.stderr)
    return None, 2


def _previous(args, batch, out):
    """(previous gradebook at `out`, --compare's gradebook) or None after a refusal: nothing graded or touched."""
    assignment = os.path.basename(batch.folder)
    try:
        previous = gradebook.read(out) if os.path.exists(out) else None
        old = gradebook.read(args.compare) if args.compare else None
        if old is not None:
            regrade_diff.same_assignment(old, assignment, batch.export.submissions + batch.export.missing)
    except gradebook.GradebookError as e:
        print('batch: refused: %s' % e, file=sys.stderr)
        return None
    problem = None if args.overwrite else _refuse_overwrite(out, previous, assignment, batch.stamp, args.compare)
    if problem:
        print('batch: refused, nothing graded: %s' % problem, file=sys.stderr)
        return None
    # a rerun that grades anything again (a changed submission, --force) makes a new generation: the one it replaces
    # is kept under its date, with the results.json students saw, and the diff between the two is printed after
    rerun = old is None and previous is not None and not args.overwrite and batch.to_grade()
    if rerun or (old is not None and previous is not None and os.path.realpath(args.compare) == os.path.realpath(out)):
        old = gradebook.read(keep_previous(out, previous, batch.folder, batch.export.submissions))
        print('batch: the previous %s is kept as %s (each submission\'s results.json of it in %s)'
              % (out, old.path, os.path.splitext(old.path)[0] + gradebook.RESULTS_SUFFIX), file=sys.stderr)
    return previous, old


def main(argv):
    ap = _parser()
    args = ap.parse_args(argv[1:])
    if args.jobs < 1:
        ap.error('--jobs must be at least 1')
    batch, code = _open(args, ap)
    if batch is None:
        return code
    out = args.out or os.path.join(batch.folder, CSV_NAME)
    if batch.shard:
        out = shards.csv_name(out, *batch.shard)
    if args.out is None and inside_checkout(out):
        print('batch: the CSV would be written inside this checkout (%s) and holds names, emails and SIDs; '
              'give --out to write it there anyway' % out, file=sys.stderr)
        return 2
    earlier = _previous(args, batch, out)
    if earlier is None:
        return 2
    previous, old = earlier
    started = time.time()
    if not batch.grade_all():
        return 130
    header, rows, meta = batch.rows()
    gradebook.write(out, header, rows, meta)
    gradebook.write_meta(behaviour_prints.side_path(out), batch.behaviour())
    c = batch.counts()
    print('batch: %d submissions (graded %d, skipped %d already graded, errors %d, missing %d) in %.1f s; '
          '%d rows written to %s' % (len(batch.submissions) + len(batch.missing), c.get('graded', 0),
                                     c.get('skipped', 0), c.get('error', 0), c.get('missing', 0),
                                     time.time() - started, len(rows), out))
    code = _compare_regrades(out, old, previous)
    if batch.shard:
        print('batch: shard %d/%d written; once every shard is, `python -m autograder report %s` writes the class '
              'report of the whole regrade' % (batch.shard + (os.path.dirname(os.path.abspath(out)),)))
    elif not args.no_report:
        write_report(out)
    return _exit_code(batch, rows, c, out, code)


def _exit_code(batch, rows, c, out, code):
    """1 when some submission is not graded or a student has several rows (each said on stderr), else `code`."""
    not_graded = sum(r[5] == 'not graded' for r in rows)
    failed = c.get('error', 0) + c.get('missing', 0)
    if failed:
        print('batch: %d submission(s) not graded (%d errors, %d missing folders): see the note column of %s'
              % (failed, c.get('error', 0), c.get('missing', 0), out), file=sys.stderr)
        return 1
    if batch.export.duplicates:
        print('batch: %d student(s) have several rows (see above): the CSV needs a choice before upload'
              % len(batch.export.duplicates), file=sys.stderr)
        return 1
    if not_graded:
        print('batch: %d student row(s) "not graded" (no model.py, or code that cannot run): see the note column'
              % not_graded, file=sys.stderr)
    return code


def _compare_regrades(out, old, previous):
    """1 when a score moved that the same grader inputs should have reproduced, else 0; prints the diffs.
    The same grader must give the same grades: checked against the CSV replaced (same inputs) and --compare's."""
    code = 0
    for label, earlier in (('--compare', old), ('previous', previous if old is None else None)):
        if earlier is None:
            continue
        d = regrade_diff.compare(earlier, gradebook.read(out))
        if label == '--compare' or d.changes:
            print('\n'.join(d.lines()))
        if d.unreproducible:
            code = 1
    return code


def write_report(csv_path):
    """The class report beside the CSV; skipped with one line when pandas/matplotlib are missing."""
    try:
        from autograder.staff.regrade import class_report
    except ImportError as e:
        print('batch: class report skipped: %s (pip install -r requirements-staff.txt)' % e, file=sys.stderr)
        return None
    try:
        paths = class_report.write(csv_path)
    except class_report.ReportError as e:
        print('batch: class report skipped: %s' % e, file=sys.stderr)
        return None
    print('batch: class report written to %s' % paths['html'])
    return paths
