"""
`python -m autograder build-zip [--out FILE] [--no-verify] [--update-listing]`: writes
dist/autograder.zip, the file staff upload to Gradescope.

The zip holds setup.sh and run_autograder at its root (Gradescope's requirement, exec bits
kept), the autograder package with the course's fixtures (course/, made by `regenerate
--course`: its draw.key and every profile present, as autograder/fixtures/), grading.yaml,
requirements.txt, data/build_corpus.py (setup.sh builds the corpus when the image is built)
and the handout files the sandbox puts next to the student's model.py. The reference
solution, tests/, docs/ and bench/ stay out. Entries are sorted and carry a fixed timestamp,
so the same sources give the same bytes.

Before writing, the build refuses (exit 1, nothing written) when:
  - the fixtures are the committed ones, made with the public test key, which every reader of
    the repository holds (run `python -m autograder regenerate --course`);
  - the fixtures of a profile are stale (run `python -m autograder regenerate --course`);
  - the file list differs from the golden listing autograder/staff/deploy/zip_listing.txt (a diff is
    printed; `--update-listing` accepts the new list);
  - unless --no-verify: the unpacked zip's own run_autograder, run in a temporary
    AUTOGRADER_ROOT, does not give the reference every point (the required 100 and the extra
    credit) and the untouched template 0 on every test (read back as a validated Results).
"""

import argparse
import difflib
import io
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import zipfile

from autograder import COURSE_DIR, DATA_FILE, PACKAGE_DIR, REFERENCE_DIR, REPO_ROOT, TEMPLATE_DIR
from autograder.judge import config, fixtures, results
from autograder.judge.results import points
from autograder.sandbox import lock_own_copy

DEFAULT_OUT = os.path.join(REPO_ROOT, 'dist', 'autograder.zip')
LISTING = os.path.join(PACKAGE_DIR, 'staff', 'deploy', 'zip_listing.txt')
LEFT_OUT = ('__pycache__', 'fixtures', 'staff')   # fixtures are added per profile below; staff tools never ship
ROOT_FILES = ('setup.sh', 'run_autograder')                 # must sit at the root of the zip, executable
TOP_FILES = ('grading.yaml', 'requirements.txt', 'data/build_corpus.py')
HANDOUT_FILES = ('chargpt.py', 'mingpt/__init__.py', 'mingpt/preflight.py', 'mingpt/trainer.py', 'mingpt/utils.py')
FIXTURE_FILES = ('manifest.json', 'expected.npz', 'known_bugs.npz')   # per profile; the root's draw.key beside them
FIXED_TIME = (2020, 1, 1, 0, 0, 0)


class BuildError(RuntimeError):
    """The zip must not be written; the message says why."""


def collect():
    """{path in the zip: path on disk} of everything grading needs."""
    files = {name: os.path.join(REPO_ROOT, name) for name in ROOT_FILES + TOP_FILES}
    for rel in HANDOUT_FILES:
        files['student_template/hw1/' + rel] = os.path.join(TEMPLATE_DIR, *rel.split('/'))
    for root, dirs, names in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if not (root == PACKAGE_DIR and d in LEFT_OUT) and d != '__pycache__'
                         and not d.startswith('.'))
        for name in names:
            if name.endswith('.py'):
                path = os.path.join(root, name)
                files[os.path.relpath(path, REPO_ROOT).replace(os.sep, '/')] = path
    base = fixtures.root()
    files['autograder/fixtures/' + fixtures.KEY_FILE] = os.path.join(base, fixtures.KEY_FILE)
    for profile_name in profiles_present():
        for name in FIXTURE_FILES:
            files['autograder/fixtures/%s/%s' % (profile_name, name)] = os.path.join(base, profile_name, name)
    missing = sorted(arc for arc, path in files.items() if not os.path.isfile(path))
    if missing:
        raise BuildError('files the zip needs are missing: %s' % ', '.join(missing))
    return dict(sorted(files.items()))


def profiles_present():
    base = fixtures.root()
    if not os.path.isdir(base):
        return []
    return sorted(p for p in os.listdir(base) if os.path.isfile(os.path.join(base, p, 'manifest.json')))


def public_key_problem():
    """Why the fixtures may not ship: made with the public test key (fixtures.PUBLIC_TEST_KEY), else None."""
    key = fixtures.read_key()
    if key != fixtures.PUBLIC_TEST_KEY:
        return None
    return ('the fixtures in %s are made with the public test key, which every reader of the repository holds: '
            'anyone could compute every input set and its answers. Make the course\'s key and its fixtures with '
            '`python -m autograder regenerate --course` (%s, git-ignored, owner-only; keep a copy of its draw.key), '
            'then build the zip again' % (fixtures.root(), COURSE_DIR))


def check_fixtures(grading):
    """Every profile shipped must have fresh fixtures of a course's key; the cpu profile (Gradescope's) must exist."""
    problem = public_key_problem()
    if problem:
        raise BuildError(problem)
    present = profiles_present()
    if 'cpu' not in present:
        raise BuildError('no cpu fixtures in %s: run `python -m autograder regenerate --course`' % fixtures.root())
    for profile_name in present:
        try:
            fixtures.load(grading, profile_name)
        except fixtures.StaleFixtures as e:
            raise BuildError(str(e))
    return present


def build_bytes(files):
    """The zip as bytes: sorted entries, fixed timestamps, exec bits where the file is executable."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, 'w', zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for arc, path in sorted(files.items()):
            executable = arc in ROOT_FILES or bool(os.stat(path).st_mode & stat.S_IXUSR)
            info = zipfile.ZipInfo(arc, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so that external_attr holds the mode
            info.external_attr = ((stat.S_IFREG | (0o755 if executable else 0o644)) << 16)
            with open(path, 'rb') as f:
                z.writestr(info, f.read(), compresslevel=9)
    return buf.getvalue()


def read_listing(path=None):
    path = path or LISTING
    if not os.path.isfile(path):
        return None
    with open(path) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith('#')]


def write_listing(names, path=None):
    with open(path or LISTING, 'w') as f:
        f.write('# Golden listing of dist/autograder.zip, one path per line. The build fails when the zip\n'
                '# differs; after an intended change run `python -m autograder build-zip --update-listing`.\n')
        f.write(''.join(n + '\n' for n in names))


def listing_diff(expected, actual):
    return list(difflib.unified_diff(expected, actual, 'autograder/staff/deploy/zip_listing.txt', 'the zip',
                                     lineterm='', n=0))


def unpack(zip_path, source):
    """Unpack like Gradescope does, keeping the exec bits stored in external_attr."""
    with zipfile.ZipFile(zip_path) as z:
        for info in z.infolist():
            target = os.path.join(source, *info.filename.split('/'))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, 'wb') as dst:
                shutil.copyfileobj(src, dst)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode)


def run_unpacked(zip_path, model_py, root, python=sys.executable, data_file=DATA_FILE, timeout=900):
    """
    Grade `model_py` with the zip's own run_autograder in a Gradescope-like layout under `root`:
    root/source (the unpacked zip), root/submission/model.py, root/results/results.json.
    The corpus is copied in (on Gradescope setup.sh builds it). Returns the validated Results.
    """
    source = os.path.join(root, 'source')
    unpack(zip_path, source)
    if not os.path.isfile(data_file):
        raise BuildError('%s is missing: run ./setup.sh (the loss-curve test needs the corpus)' % data_file)
    shutil.copyfile(data_file, os.path.join(source, 'data', 'input.txt'))
    os.makedirs(os.path.join(root, 'submission'))
    shutil.copyfile(model_py, os.path.join(root, 'submission', 'model.py'))
    env = dict(os.environ, AUTOGRADER_ROOT=root, PYTHON=python)
    env.pop('HW1_SOURCE', None)
    proc = subprocess.run(['bash', os.path.join(source, 'run_autograder')], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)
    path = os.path.join(root, 'results', 'results.json')
    if not os.path.isfile(path):
        raise BuildError('run_autograder wrote no results.json (exit %d):\n%s'
                         % (proc.returncode, proc.stdout[-2000:] + proc.stderr[-2000:]))
    try:
        return results.load(path)
    except ValueError as e:
        raise BuildError('run_autograder wrote an invalid results.json: %s' % e)


def verify(zip_path, log=print):
    """Reference every point (100 and the extra credit), untouched template 0 on every test, both graded by the
    unpacked zip.
    The gradings refuse while a copy of the grader on this machine is open to the sandbox users: this checkout is
    closed first, as any sandboxed run closes its own (sandbox.lock_own_copy)."""
    lock_own_copy()
    cases = [('reference', os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')),
             ('template', os.path.join(TEMPLATE_DIR, 'mingpt', 'model.py'))]
    for label, path in cases:
        if not os.path.isfile(path):
            raise BuildError('cannot verify: %s is missing (use --no-verify to skip)' % path)
    with tempfile.TemporaryDirectory(prefix='hw1-verify-') as tmp:
        procs = {}
        # both gradings at once, each in its own AUTOGRADER_ROOT (their sandbox runs queue on the user lock)
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(len(cases)) as pool:
            for label, path in cases:
                root = os.path.join(tmp, label)
                os.makedirs(root)
                procs[label] = pool.submit(run_unpacked, zip_path, path, root)
            got = {label: f.result() for label, f in procs.items()}
    ref, tpl = got['reference'], got['template']
    split = ref.extra_data.get('points') or {'required': ref.total, 'required_max': ref.possible,
                                             'extra_credit': 0, 'extra_credit_max': 0}
    log('verify: reference scores %s / %s (+ %s of %s extra credit) with the unpacked zip'
        % tuple(points(split[k]) for k in ('required', 'required_max', 'extra_credit', 'extra_credit_max')))
    # every point, required and extra credit: extra-credit tests carry max_score 0 (results.result_of)
    if split['required_max'] <= 0 or split['required'] != split['required_max'] or \
            split['extra_credit'] != split['extra_credit_max'] or any(t.lost for t in ref.tests.values()):
        failed = ['%s %s: %s/%s %s' % (t.number, t.name, points(t.score), points(t.max_score), t.status)
                  for t in ref.tests.values() if t.lost]
        raise BuildError('the reference does not score every point with the zip (%s / %s + %s of %s extra credit): %s'
                         % (points(split['required']), points(split['required_max']), points(split['extra_credit']),
                            points(split['extra_credit_max']), '; '.join(failed)))
    scored = [t for t in tpl.tests.values() if t.score != 0]
    log('verify: untouched template scores %s / %s with the unpacked zip' % (points(tpl.total), points(tpl.possible)))
    if scored or tpl.possible <= 0:
        raise BuildError('the untouched template earns points: %s'
                         % '; '.join('%s %s: %s' % (t.number, t.name, points(t.score)) for t in scored))


def build(out=DEFAULT_OUT, do_verify=True, update_listing=False, log=print):
    grading = config.load()
    present = check_fixtures(grading)
    log('fixtures fresh for profile(s): %s' % ', '.join(present))
    files = collect()
    names = list(files)
    golden = read_listing()
    if update_listing:
        write_listing(names)
        log('wrote %s (%d paths)' % (os.path.relpath(LISTING, REPO_ROOT), len(names)))
    elif golden is None:
        raise BuildError('%s is missing: run `python -m autograder build-zip --update-listing`' % LISTING)
    elif golden != names:
        raise BuildError('the zip contents differ from the golden listing (+ would be added, - is missing):\n%s\n'
                         'If this change is intended, run `python -m autograder build-zip --update-listing` and commit '
                         'autograder/staff/deploy/zip_listing.txt.' % '\n'.join(listing_diff(golden, names)))
    data = build_bytes(files)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = os.path.join(os.path.dirname(os.path.abspath(out)), '.%s.%d.tmp' % (os.path.basename(out), os.getpid()))
    with open(tmp, 'wb') as f:
        f.write(data)
    try:
        if do_verify:
            t0 = time.time()
            verify(tmp, log)
            log('verify: done in %.0f s' % (time.time() - t0))
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    log('wrote %s: %d files, %d bytes%s'
        % (out, len(names), len(data), '' if do_verify else ' (not verified: --no-verify)'))
    return out


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder build-zip', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--out', default=DEFAULT_OUT, help='where to write the zip (default dist/autograder.zip)')
    ap.add_argument('--no-verify', action='store_true',
                    help='skip grading the reference and the template with the unpacked zip (~30 s)')
    ap.add_argument('--update-listing', action='store_true',
                    help='rewrite autograder/staff/deploy/zip_listing.txt from the files collected instead of '
                         'failing on a difference')
    args = ap.parse_args(argv[1:])
    try:
        build(args.out, not args.no_verify, args.update_listing)
    except (BuildError, fixtures.StaleFixtures, config.GradingConfigError) as e:
        print('build-zip: refused, nothing written: %s' % e, file=sys.stderr)
        return 1
    return 0
