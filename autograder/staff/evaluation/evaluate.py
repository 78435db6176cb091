"""
`python -m autograder evaluate DIR [--jobs 2] [--out docs/DISCRIMINATION.md] [--profile cpu]`:
discrimination report over a corpus of submissions (tests/submissions).

DIR/correct/<name>/ and DIR/buggy/<name>/ each hold a model.py and an expected.yaml
(verdict: correct | buggy; for buggy ones must_fail: [test ids], known bug: id or null, and cause:
a phrase or phrases the failing must-fail messages must hold).
Every submission is graded on batch's regrade engine (worker_pool.py: one process per submission,
--jobs at a time, a per-submission timeout, a crash or timeout becomes that submission's error,
a progress bar), a temporary results.json each, and run through the course's current public
tests (autograder/staff/evaluation/course_tests.py), the baseline. Every test runs for every submission.

must_fail is exact: a buggy submission must lose points on exactly those tests, no more and no
fewer (one bug costs the tests that see it; grading.yaml's `sees` says why a test sees another
part's bug). Printed: one row per submission, one cell per test ("ok"/"lost", with "!" where that
is not what expected.yaml says: a correct variant losing points, a must_fail test keeping them, or
a test outside must_fail losing them), and the totals with their targets:
    false failures on correct variants (any test below max_score)   target 0
    bugs caught exactly (the tests that lost points == must_fail)    target 100%
    known bugs named (the expected id appears in a test's output)  target >= 90%
    failing must-fail messages that name the cause (expected.yaml's cause or known_bug; NAMED_CAUSES
    says which other causes a message can name: one not the submission's is wrong)  target >= 90%, 0 wrong
    points lost beyond each bug's own part (tests outside must_fail)  target 0
    red optional tests where expected.yaml says not_implemented      target 0
Exits 1 when a target is missed or a submission could not be graded, 2 when there is no
corpus at DIR. --out writes the same as a markdown report.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import re

import yaml

from autograder.judge import config, fixtures, results
from autograder.staff.evaluation import course_tests
from autograder.staff.regrade import worker_pool

KNOWN_BUG_TARGET = 0.90
CAUSE_TARGET = 0.90   # failing must-fail messages that name their submission's cause
# The causes a message can name, as the harness words them: a known bug by its id ("... wrong variant: ID)"), a
# low-precision grid (messages.low_precision, dropout_on_grid), a device written into the code (ERROR_CAUSES).
# A message naming one of these that is not its submission's cause names a wrong one.
NAMED_CAUSES = [(re.compile(r'wrong variant: ([a-z0-9-]+)\)'), None),
                (re.compile(r'\b(b?float16) number'), None),
                (re.compile(r'the grader has no GPU'), 'the grader has no GPU')]


def load_corpus(root):
    subs = []
    for kind in ('correct', 'buggy'):
        folder = os.path.join(root, kind)
        if not os.path.isdir(folder):
            continue
        for name in sorted(os.listdir(folder)):
            d = os.path.join(folder, name)
            exp_path = os.path.join(d, 'expected.yaml')
            if not (os.path.isfile(os.path.join(d, 'model.py')) and os.path.isfile(exp_path)):
                continue
            with open(exp_path) as f:
                exp = yaml.safe_load(f) or {}
            subs.append({'name': name, 'kind': kind, 'path': os.path.join(d, 'model.py'),
                         'verdict': exp.get('verdict', kind), 'must_fail': list(exp.get('must_fail') or []),
                         'known_bug': exp.get('known_bug'), 'bug': exp.get('bug', ''),
                         # what each failing must_fail test's message must name: `cause` (a phrase, or a list of
                         # phrases any of which will do), else the known bug's id; none declared: not counted
                         'causes': _causes(exp),
                         # optional parts (extra credit) this submission leaves untouched: their tests must say
                         # "not implemented (optional)", and their 0 is then not a false failure
                         'not_implemented': list(exp.get('not_implemented') or [])})
    return subs


def _causes(exp):
    cause = exp.get('cause')
    phrases = [cause] if isinstance(cause, str) else list(cause or [])
    return phrases + ([exp['known_bug']] if exp.get('known_bug') else [])


def named_causes(output):
    """The causes a test's output names (NAMED_CAUSES): known bug ids, dtypes, phrases."""
    found = set()
    for pattern, fixed in NAMED_CAUSES:
        found.update(fixed or m for m in pattern.findall(output))
    return found


def cause_cells(r):
    """{test id: 'named' | 'NOT NAMED' | 'WRONG (...)'} of a submission's failing must-fail tests (buggy) or of any
    test naming a cause (correct: every cause named there is wrong)."""
    cells = {}
    for tid, t in r['tests'].items():
        said = named_causes(t['output'])
        if r['verdict'] == 'correct':
            if said:
                cells[tid] = 'WRONG (%s)' % ', '.join(sorted(said))
            continue
        if tid not in r['must_fail'] or tid not in r['lost']:
            continue
        wrong = sorted(c for c in said if c not in r['causes'])
        if wrong:
            cells[tid] = 'WRONG (%s)' % ', '.join(wrong)
        elif r['causes']:
            cells[tid] = 'named' if any(c in t['output'] for c in r['causes']) else 'NOT NAMED'
        else:
            cells[tid] = 'undeclared'
    return cells


def skipped_tests(sub):
    """Nothing is skipped: must_fail is exact, and 10.2's judge reads the training run of 10.1 anyway."""
    return ()


def row(sub, out, course, seconds):
    """One submission's row: its expected.yaml, its Results and the course tests' verdict."""
    tests = {tid: {'score': t.score, 'max_score': t.max_score, 'output': t.output, 'status': t.status}
             for tid, t in out.tests.items()}
    # grade_seconds: the whole job, the course's tests included; execution_time: the grading's own (results.json)
    return dict(sub, tests=tests, skipped=list(skipped_tests(sub)), grade_seconds=round(seconds, 1), course=course,
                grader_output=out.output, execution_time=round(out.execution_time, 1))


def error_row(sub, message, seconds):
    """A submission the engine could not grade: every test counts as missing, and the analysis says so."""
    checks = {n: {'ok': False, 'message': 'not run: %s' % message} for n in course_tests.CHECKS}
    return dict(sub, tests={}, skipped=list(skipped_tests(sub)), grade_seconds=round(seconds, 1),
                course={'checks': checks, 'passed': False}, grader_output=message, engine_error=message)


def analyse(rows, test_ids):
    for r in rows:
        # an optional part left untouched is not lost where a correct variant declares it (not_implemented) or a
        # mutant's must_fail does not list it: the mutant left that part alone, its bug costs other tests.
        # Extra-credit tests are worth max_score 0: a wrong one is 'failed', an untouched one 'passed' (not attempted).
        excused = lambda tid: tid in r.get('not_implemented', ()) or (r['verdict'] != 'correct'
                                                                      and tid not in r['must_fail'])
        untouched = lambda t: t['output'].startswith(('not implemented (optional)', 'Not attempted'))
        lost = {tid for tid, t in r['tests'].items() if (t['score'] < t['max_score'] or t.get('status') == 'failed')
                and not (excused(tid) and untouched(t))}
        r['lost'] = lost
        # points lost on tests outside the bug's own part (must_fail): what one mistake costs beyond its part
        r['beyond_own_part'] = round(sum(max(0.0, t['max_score'] - t['score']) for tid, t in r['tests'].items()
                                         if tid in lost and tid not in r['must_fail']), 4) \
            if r['verdict'] != 'correct' else 0.0
        # optional tests shown red (failed) although the submission does not attempt that part
        r['red_optional'] = sorted(tid for tid, t in r['tests'].items()
                                   if tid in r.get('not_implemented', ()) and t.get('status') == 'failed')
        # a test skipped on purpose (loss-curve for mutants not expected to fail it) is not missing
        r['missing_tests'] = [tid for tid in test_ids if tid not in r['tests'] and tid not in r.get('skipped', ())]
        if r['verdict'] == 'correct':
            r['false_failure'] = bool(lost) or bool(r['missing_tests'])
        else:
            r['caught'] = lost == set(r['must_fail']) and bool(r['must_fail'])
            bug = r['known_bug']
            r['bug_named'] = bool(bug) and any(bug in t['output'] for t in r['tests'].values())
        r['cause_cells'] = cause_cells(r)
        r['disagreements'] = []
        for tid in test_ids:
            t = r['tests'].get(tid)
            if t is None:
                continue
            expected_lost = tid in r['must_fail'] if r['verdict'] != 'correct' else False
            if r['verdict'] == 'correct' and tid in lost:
                r['disagreements'].append((tid, 'full marks', 'lost'))
            elif expected_lost and tid not in lost:
                r['disagreements'].append((tid, 'lost', 'full marks'))
            elif r['verdict'] != 'correct' and not expected_lost and tid in lost:
                r['disagreements'].append((tid, 'full marks (not in must_fail)', 'lost'))
    correct = [r for r in rows if r['verdict'] == 'correct']
    buggy = [r for r in rows if r['verdict'] != 'correct']
    with_known = [r for r in buggy if r['known_bug']]
    s = {
        'n_correct': len(correct), 'n_buggy': len(buggy), 'n_known': len(with_known),
        'false_failures': sum(r['false_failure'] for r in correct),
        'caught': sum(r['caught'] for r in buggy),
        'bug_named': sum(r['bug_named'] for r in with_known),
        'course_false_failures': sum(not r['course']['passed'] for r in correct),
        'course_caught': sum(not r['course']['passed'] for r in buggy),
    }
    cells = [c for r in rows for c in r['cause_cells'].values()]
    s['cause_named'] = cells.count('named')
    s['cause_judged'] = sum(c in ('named', 'NOT NAMED') or c.startswith('WRONG') for c in cells)
    s['cause_wrong'] = sum(c.startswith('WRONG') for c in cells)
    s['cause_undeclared'] = cells.count('undeclared')
    s['cause_rate'] = s['cause_named'] / s['cause_judged'] if s['cause_judged'] else 1.0
    s['beyond_own_part'] = round(sum(r.get('beyond_own_part', 0.0) for r in buggy), 4)
    s['beyond_own_part_subs'] = sum(r.get('beyond_own_part', 0.0) > 0 for r in buggy)
    s['red_optional'] = sum(len(r.get('red_optional', ())) for r in rows)
    s['caught_rate'] = s['caught'] / len(buggy) if buggy else 1.0
    s['known_rate'] = s['bug_named'] / len(with_known) if with_known else 1.0
    s['course_rate'] = s['course_caught'] / len(buggy) if buggy else 1.0
    s['errors'] = sum(bool(r.get('engine_error')) for r in rows)
    s['ok'] = s['errors'] == 0 and s['false_failures'] == 0 and s['caught'] == len(buggy) and \
        s['known_rate'] >= KNOWN_BUG_TARGET and s['beyond_own_part'] == 0 and s['red_optional'] == 0 and \
        s['cause_rate'] >= CAUSE_TARGET and s['cause_wrong'] == 0
    return s


def _cell(r, tid):
    t = r['tests'].get(tid)
    if t is None:
        return '-'
    lost = tid in r['lost']
    expected = (tid in r['must_fail']) if r['verdict'] != 'correct' else False
    text = 'lost' if lost else 'ok'
    return text + '!' if lost != expected else text   # '!': contradicts expected.yaml


def table_rows(rows, test_ids):
    header = ['submission', 'verdict'] + test_ids + ['result', 'known_bug', 'course tests']
    body = []
    for r in rows:
        if r['verdict'] == 'correct':
            result = 'FALSE FAILURE' if r['false_failure'] else 'full marks'
            bug = ''
        else:
            result = 'caught' if r['caught'] else 'MISSED'
            bug = (('named' if r['bug_named'] else 'NOT NAMED') + ' (%s)' % r['known_bug']) if r['known_bug'] else ''
        failed = [n for n in course_tests.CHECKS if not r['course']['checks'].get(n, {}).get('ok')]
        course = 'pass' if not failed else 'fail (%s)' % ','.join(failed)
        body.append([r['name'], r['verdict']] + [_cell(r, t) for t in test_ids] + [result, bug, course])
    return header, body


def text_table(header, body):
    widths = [max(len(str(x[i])) for x in [header] + body) for i in range(len(header))]
    fmt = lambda row: '  '.join(str(c).ljust(w) for c, w in zip(row, widths))
    return '\n'.join([fmt(header), '-' * (sum(widths) + 2 * len(widths))] + [fmt(b) for b in body])


def summary_lines(s):
    pct = lambda x: '%.0f%%' % (100 * x)
    return [
        'false failures on correct variants: %d / %d (target 0)' % (s['false_failures'], s['n_correct']),
        'bugs caught exactly (lost == must_fail): %d / %d = %s (target 100%%)' % (s['caught'], s['n_buggy'],
                                                                                  pct(s['caught_rate'])),
        'known bugs named: %d / %d = %s (target >= %s)' % (s['bug_named'], s['n_known'], pct(s['known_rate']),
                                                            pct(KNOWN_BUG_TARGET)),
        'failing must-fail messages that name the cause: %d / %d = %s (target >= %s), naming a wrong one: %d '
        '(target 0); on submissions that declare none: %d' % (
            s['cause_named'], s['cause_judged'], pct(s['cause_rate']), pct(CAUSE_TARGET), s['cause_wrong'],
            s['cause_undeclared']),
        'points lost beyond the bug\'s own part (tests outside must_fail): %s on %d submissions (target 0)' % (
            s['beyond_own_part'], s['beyond_own_part_subs']),
        'red optional tests on submissions that do not attempt the part: %d (target 0)' % s['red_optional'],
        "course's current public tests: catch %d / %d = %s of the bugs, false failures %d / %d" % (
            s['course_caught'], s['n_buggy'], pct(s['course_rate']), s['course_false_failures'], s['n_correct']),
    ] + (['submissions the engine could not grade (crash or timeout): %d (target 0)' % s['errors']]
         if s.get('errors') else []) + ['targets: %s' % ('MET' if s['ok'] else 'MISSED')]


def disagreement_lines(rows):
    lines = []
    for r in rows:
        for tid, exp, got in r['disagreements']:
            out = r['tests'][tid]['output']
            first = ' | '.join(l.strip() for l in out.splitlines() if l.strip())[:300]
            lines.append('%s/%s  %s: expected %s, got %s.  %s' % (r['kind'], r['name'], tid, exp, got, first))
        for tid, cell in sorted(r.get('cause_cells', {}).items()):
            if cell == 'NOT NAMED' or cell.startswith('WRONG'):
                lines.append('%s/%s  %s: cause %s: %s' % (r['kind'], r['name'], tid, cell,
                                                          ' or '.join(r['causes']) or 'none declared'))
        if r['verdict'] != 'correct' and r['known_bug'] and not r['bug_named']:
            lines.append('%s/%s  known bug %s not named in any output' % (r['kind'], r['name'], r['known_bug']))
        if r.get('engine_error'):
            lines.append('%s/%s  not graded: %s' % (r['kind'], r['name'], r['engine_error']))
        if r.get('missing_tests'):
            lines.append('%s/%s  tests missing from the results: %s'
                         % (r['kind'], r['name'], ', '.join(r['missing_tests'])))
    return lines


def _torch_version():
    try:
        out = subprocess.run([sys.executable, '-c', 'import torch; print(torch.__version__)'],
                             capture_output=True, text=True, timeout=120)
        return out.stdout.strip() or '?'
    except Exception:
        return '?'


def markdown(rows, s, test_ids, tests_meta, command, seconds, jobs):
    header, body = table_rows(rows, test_ids)
    md = ['# Discrimination report', '',
          'Generated by `%s` on %s UTC; machine: %d CPUs (`nproc`), Python %s, torch %s; %d jobs; %.0f s wall.'
          % (command, datetime.datetime.utcnow().strftime('%Y-%m-%d %H:%M'), os.cpu_count() or 0,
             sys.version.split()[0], _torch_version(), jobs, seconds), '',
          'Corpus: `tests/submissions` (correct variants must get full marks; every buggy one must lose '
          'points on exactly the tests of its `must_fail`). "course tests" is '
          '`autograder/staff/evaluation/course_tests.py`, a '
          're-implementation of what the course\'s current public test_model.py checks (GQA output, RoPE '
          'd=2, dropout layers, rotary d): the baseline. A failing must-fail message "names the cause" when it holds '
          'its submission\'s `cause` or `known_bug` (expected.yaml); it names a wrong one when it names another known '
          'bug, a low-precision dtype or the no-GPU cause (evaluate.NAMED_CAUSES); the causes not named are listed '
          'under the disagreements.', '', '## Totals', '']
    md += ['- ' + l for l in summary_lines(s)]
    md += ['', '## Per submission', '',
           'Cells: `ok` full marks, `lost` points lost, `-` not run; `!` contradicts expected.yaml. Tests: ' +
           ', '.join('%s = %s' % (t.number, t.id) for t in tests_meta), '']
    md.append('| ' + ' | '.join(header) + ' |')
    md.append('|' + '---|' * len(header))
    for b in body:
        md.append('| ' + ' | '.join(str(c) for c in b) + ' |')
    dis = disagreement_lines(rows)
    md += ['', '## Disagreements with expected.yaml', '']
    md += ['- ' + l.replace('|', '/') for l in dis] if dis else ['None.']
    md += ['', '## Course tests: failures', '']
    for r in rows:
        failed = {n: c['message'] for n, c in r['course']['checks'].items() if not c.get('ok')}
        if failed:
            md.append('- %s/%s: %s' % (r['kind'], r['name'],
                                       '; '.join('%s: %s' % (n, m[:150].replace('|', '/')) for n, m in failed.items())))
    return '\n'.join(md) + '\n'


def evaluate(root, jobs=2, profile_name='cpu', progress=True, timeout=None):
    """Grade the corpus on the regrade engine; returns (rows, summary, test_ids, tests_meta, seconds)."""
    grading = config.load()
    if profile_name not in grading.profiles:
        raise config.GradingConfigError('unknown profile %r (grading.yaml has %s)'
                                        % (profile_name, ', '.join(grading.profiles)))
    tests_meta = [t for t in grading.enabled_tests()]
    test_ids = [t.id for t in tests_meta]
    subs = load_corpus(root)
    if not subs:
        raise CorpusError('no submission in %s: expected %s/correct/<name>/ and %s/buggy/<name>/, each with a '
                          'model.py and an expected.yaml' % (root, root, root))
    started = time.time()
    scratch = tempfile.mkdtemp(prefix='hw1-eval-')
    try:
        jobs_todo = []
        for i, sub in enumerate(subs):
            base = os.path.join(scratch, '%03d' % i)
            jobs_todo.append(worker_pool.Job('%s/%s' % (sub['kind'], sub['name']), sub['path'],
                                             base + '-results.json', skip=skipped_tests(sub),
                                             course_path=base + '-course.json'))
        eng = worker_pool.Engine(profile_name, jobs, timeout or worker_pool.default_timeout(grading),
                            lambda msg: print('evaluate: ' + msg, file=sys.stderr, flush=True), progress=progress)
        outcomes = eng.grade(jobs_todo)
        if outcomes is None:
            raise KeyboardInterrupt('evaluate interrupted')
        rows = []
        for sub, job in zip(subs, jobs_todo):
            status, message = outcomes.get(job.key, ('error', 'not graded'))
            seconds = eng.seconds.get(job.key, 0.0)
            if status != 'graded':
                rows.append(error_row(sub, message, seconds))
                continue
            with open(job.course_path) as f:
                course = json.load(f)
            rows.append(row(sub, results.load(job.results_path), course, seconds))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    seconds = time.time() - started
    return rows, analyse(rows, test_ids), test_ids, tests_meta, seconds


class CorpusError(ValueError):
    """The corpus folder holds no submission; the message says what was expected."""


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder evaluate', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('dir', help='the corpus: DIR/correct/<name>/ and DIR/buggy/<name>/')
    ap.add_argument('--jobs', type=int, default=2, help='gradings at once (default 2)')
    ap.add_argument('--profile', default='cpu')
    ap.add_argument('--out', help='also write the markdown report here (e.g. docs/DISCRIMINATION.md)')
    ap.add_argument('--timeout', type=int, default=None,
                    help='seconds one submission may take before it is stopped (default: sum of the test timeouts)')
    args = ap.parse_args(argv[1:])
    try:
        rows, s, test_ids, tests_meta, seconds = evaluate(args.dir, args.jobs, args.profile, timeout=args.timeout)
    except (CorpusError, config.GradingConfigError, fixtures.StaleFixtures) as e:
        print('evaluate: %s' % e, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print('evaluate: interrupted; nothing written', file=sys.stderr)
        return 130
    header, body = table_rows(rows, test_ids)
    print(text_table(header, body))
    print()
    for l in summary_lines(s):
        print(l)
    dis = disagreement_lines(rows)
    if dis:
        print('\ndisagreements with expected.yaml:')
        for l in dis:
            print('  ' + l)
    print('\n%d submissions in %.0f s with %d jobs' % (len(rows), seconds, args.jobs))
    if args.out:
        command = 'python -m autograder ' + ' '.join(argv)
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as f:
            f.write(markdown(rows, s, test_ids, tests_meta, command, seconds, args.jobs))
        print('report written to %s' % args.out)
    return 0 if s['ok'] else 1
