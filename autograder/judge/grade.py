"""
`python -m autograder grade PATH [--profile cpu|gpu] [--results FILE]`: grades a model.py,
a folder or a zip, prints a table and writes results.json (default ./results/results.json).
Exits 0 whenever grading completed, whatever the score; when it could not grade (a missing
path, an unknown profile, stale fixtures, a grader failure) it still writes results.json
(run_autograder relies on it), prints one sentence for the person who ran it on stderr and
exits 2. run_autograder calls the same code and ignores the exit code.

The pipeline (this module): lock down, locate the file, build a Judging (judging.py: check it
statically, run the probes in the sandbox, judge each test against the fixtures; test 1.1 in
imported.py), turn each verdict into its results.json entry (results.result_of) and write it.
Any failure of the grader itself still produces a valid results.json.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback

from autograder import GRADING_YAML
from autograder.judge import config, fixtures, messages, submission
from autograder.judge import grading_log   # HW1_GRADING_LOG: staff's tally of gradings (issue 43)
# test 1.1's functions, re-exported: tests and bench read them as grade.*
from autograder.judge.imported import import_verdict, static_findings, upload_problems  # noqa: F401
from autograder.judge.judging import Judging, first_line, graded_specs
from autograder.judge.results import Results, add_points, partial, points
from autograder.sandbox import GradingStopped, Sandbox, SandboxRefused, protect_source

DEFAULT_RESULTS = os.path.join('results', 'results.json')
UPLOAD_SCRATCH = set()   # folders holding unpacked copies of student code while a grading runs


def remove_upload_scratch(*folders):
    """Remove the unpacked uploads (all of this process's when none is named: a batch worker being stopped)."""
    for folder in folders or list(UPLOAD_SCRATCH):
        shutil.rmtree(folder, ignore_errors=True)
        UPLOAD_SCRATCH.discard(folder)


def top_output(located, problems, judging=None):
    """results.json's top-level message: what was graded, or in one sentence why nothing was (no internal words:
    the profile is in extra_data)."""
    if located.problem or problems:
        return messages.not_graded_top(first_line(located.problem or problems[0]))
    run_result = judging.run_result if judging is not None else None
    if run_result is not None and run_result.import_result is not None and run_result.import_result.status != 'ok':
        return messages.not_graded_import_top(judging.import_hang, judging.grading.test('submission').number)
    return messages.located_top(located.note) if located.note else ''


def progress_writer(grading, skip, started, results_path):
    """The callback that writes the partial results.json (results.partial) as each test finishes."""
    specs = graded_specs(grading, skip)
    extra_credit = {s.id for s in specs if grading.is_extra_credit(s)}

    def progress(done):
        try:
            partial(specs, done, started, grading.sandbox['max_output_chars'], extra_credit).write(results_path)
        except (OSError, ValueError, TypeError):
            pass   # the final results.json still comes; a partial one is only for the watchdog
    return progress


def _peak_rss_mb():
    """The grader process's own peak resident memory (Linux reports ru_maxrss in KB); children excluded."""
    import resource
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)


def private_paths(path, autograder_root=None):
    """
    What student code must not read besides the grader's own files (the sandbox's self-test checks each).
    On Gradescope (`autograder_root`): that root's submission_metadata.json (earlier submissions' results),
    source/, results/ and submission/. Elsewhere, the neighbours of a submission folder or zip: in a batch
    export, the classmates' submissions.
    """
    out = [fixtures.folder('')]   # the reference's outputs: the sandbox locked them (sandbox.lock_own_copy)
    if autograder_root:
        return out + [os.path.join(autograder_root, n) for n in ('submission_metadata.json', 'source', 'results',
                                                                 'submission')]
    path = os.path.abspath(path)
    if os.path.isdir(path) or path.endswith('.zip'):
        parent = os.path.dirname(path)
        try:
            out += [os.path.join(parent, n) for n in sorted(os.listdir(parent))[:50] if os.path.join(parent, n) != path]
        except OSError:
            pass
    return out


def lockdown(sandbox, results_path, autograder_root=None):
    """
    Under root with a sandbox user: nothing of the grader is readable by student code, for good (a lock given
    back at the end left them open to the next reader, or to a grading still running beside it). The grader's
    own copy (its fixtures and key, reference/, tests/, ...) is locked by the sandbox (Sandbox.lock_grader),
    here and again before each grading's self-test. Here also: a results/ folder of its own, and Gradescope's
    /autograder (AUTOGRADER_ROOT): its submission/, results/ and submission_metadata.json (earlier submissions' results)
    root-only, then /autograder itself listable by nobody (0711), once what is inside is closed.
    """
    if not sandbox.user:
        return []
    locked = sandbox.lock_grader()   # at once: the sandbox does it again before its self-test
    paths = []
    results_dir = os.path.dirname(os.path.abspath(results_path))
    # only a folder of its own (Gradescope's /autograder/results); never a shared one such as /tmp
    if os.path.basename(results_dir) == 'results':
        paths.append(results_dir)
    if autograder_root and os.path.isdir(autograder_root):
        paths += [os.path.join(autograder_root, n) for n in ('submission', 'results', 'submission_metadata.json')]
    locked += protect_source(paths)
    if autograder_root and os.path.isdir(autograder_root):
        os.chmod(autograder_root, 0o711)
    return locked


def grade_results(path, profile_name='cpu', results_path=DEFAULT_RESULTS, grading_path=GRADING_YAML, skip=(),
                  sandbox=None, autograder_root=None, observe=None):
    """
    Grade and write results.json. Returns the Results. Never raises for a bad submission.
    `skip`: test ids not to run at all (the evaluation of the bug corpus skips the loss-curve
    training where a mutant's expected verdict does not involve it); they are left out of results.
    `sandbox`: a Sandbox to reuse (a batch worker grades many submissions with one zygote);
    None makes one for this grading. `autograder_root`: Gradescope's /autograder, locked down.
    `observe(judging, results)`: called once every test is judged (a staff regrade keeps a fingerprint
    of the failing outputs for its similarity report, staff/regrade/behaviour_prints.py); what it keeps
    never goes into results.json, and it must not raise.
    results.json is written after each finished test too (extra_data.partial), so that a grading
    stopped by run_autograder's watchdog keeps what had finished.
    """
    started = time.time()
    own_sandbox = sandbox is None
    upload_scratch = tempfile.mkdtemp(prefix='hw1-upload-')
    UPLOAD_SCRATCH.add(upload_scratch)
    try:
        grading = config.load(grading_path)
        if profile_name not in grading.profiles:
            raise config.GradingConfigError('unknown profile %r (grading.yaml has %s)'
                                            % (profile_name, ', '.join(grading.profiles)))
        os.makedirs(os.path.dirname(os.path.abspath(results_path)), exist_ok=True)
        if sandbox is None:
            sandbox = Sandbox(grading.sandbox)  # finds the sandbox users once for the whole grading
        lockdown(sandbox, results_path, autograder_root)
        fx = fixtures.load_for_grading(grading, profile_name)
        located = submission.locate(path, upload_scratch)
        judging = Judging(grading, profile_name, located, fx, sandbox, skip, private_paths(path, autograder_root),
                          progress_writer(grading, skip, started, results_path)).run_probes()
        # extra credit: optional parts count on top of the required 100 (see results.add_points)
        extra_credit = {s.id: s.weight for s in judging.specs if grading.is_extra_credit(s)}
        out = Results.from_verdicts(judging.specs, judging.final, grading.sandbox['max_output_chars'], extra_credit)
        out.output = top_output(located, judging.problems, judging)
        summary = judging.verdicts.get('loss-curve')
        if summary is not None and summary.summary:
            out.output += ' ' + summary.summary + '.'
        out.extra_data.update(judging.info, profile=profile_name, fixtures_torch=fx.manifest.get('torch'),
                              grader_peak_rss_mb=_peak_rss_mb())
        add_points(out, extra_credit)
        if observe is not None:
            observe(judging, out)
    except SandboxRefused as e:   # fail closed: no student code ran
        out = Results.error(messages.SANDBOX_UNSAFE, str(e),
                            time.time() - started, reason='sandbox refused: %s' % e)
    except Exception as e:  # the grader's own failure: still a valid results.json
        staff = traceback.format_exc()
        known = isinstance(e, (fixtures.StaleFixtures, config.GradingConfigError))
        message = messages.could_not_run(e) if known else messages.failed_internally(type(e).__name__)
        out = Results.error(message, staff, time.time() - started,
                            reason=str(e) if known else '%s: %s' % (type(e).__name__, e))
    finally:
        remove_upload_scratch(upload_scratch)
        if own_sandbox and sandbox is not None:
            sandbox.close()
    out.execution_time = time.time() - started
    grading_log.record(path, profile_name, grading_path, skip, autograder_root, not own_sandbox, out.execution_time)
    try:
        out.write(results_path)
    except (ValueError, TypeError) as e:
        out = Results.error(messages.INVALID_RESULTS, repr(e), time.time() - started,
                            reason='invalid results.json: %s' % e)
        out.write(results_path)
    return out


def table(out):
    rows = [('#', 'test', 'score', 'status', 'message')]
    for t in out.tests.values():
        first = next((l for l in t.output.splitlines() if l.strip()), '')
        rows.append((t.number, t.name[:58], '%s/%s' % (points(t.score), points(t.max_score)), t.status, first[:70]))
    widths = [max(len(str(r[i])) for r in rows) for i in range(4)]
    lines = ['  '.join(str(r[i]).ljust(widths[i]) for i in range(4)) + '  ' + r[4] for r in rows]
    lines.insert(1, '-' * min(160, sum(widths) + 80))
    split = out.extra_data.get('points')
    if split:  # extra-credit tests count on top of the required maximum
        total = '%s / %s (+ %s of %s extra credit)' % (points(split['required']), points(split['required_max']),
                                                       points(split['extra_credit']), points(split['extra_credit_max']))
    else:
        total = '%s / %s' % (points(out.total), points(out.possible))
    lines.append('total: %s   (%.1f s)   %s' % (total, out.execution_time, out.output))
    return '\n'.join(lines)


def staff_problem(path, out):
    """The one sentence for the person at the command line when grading could not do its job, else None."""
    if out.is_error:
        return 'grade: could not grade %s: %s' % (path, out.extra_data.get('grader_error') or 'see results.json')
    if not os.path.exists(path):
        return 'grade: %s does not exist (give a model.py, a folder holding one, or a zip)' % path
    return None


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder grade', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('path', help='a model.py, a folder holding one, or a zip')
    ap.add_argument('--profile', default='cpu', help='cpu (default, Gradescope) or gpu (the handout sizes)')
    ap.add_argument('--out', '--results', dest='results', metavar='FILE', default=DEFAULT_RESULTS,
                    help='where to write results.json (default results/results.json)')
    ap.add_argument('--verbose', '-v', action='store_true', help='print every test output, not just the table')
    ap.add_argument('--autograder-root', metavar='DIR', help="Gradescope's /autograder: locked down before grading "
                                                             "(run_autograder passes it)")
    args = ap.parse_args(argv[1:])
    started = time.time()
    try:
        # always writes results.json (run_autograder relies on it)
        out = grade_results(args.path, args.profile, args.results, autograder_root=args.autograder_root)
    except GradingStopped:   # SIGTERM (run_autograder's watchdog) while a probe ran: one line, not a traceback
        print('grade: stopped by SIGTERM after %.0f s; %s keeps the tests that had finished'
              % (time.time() - started, args.results), file=sys.stderr)
        return 143

    problem = staff_problem(args.path, out)
    if problem:  # the student-facing text is in results.json; the person here gets one sentence and an exit code
        print(problem, file=sys.stderr)
        return 2
    print(table(out))
    if args.verbose:
        for t in out.tests.values():
            print('\n== %s %s (%s/%s)\n%s' % (t.number, t.name, points(t.score), points(t.max_score), t.output))
    print('results written to %s' % args.results)
    return 0
