"""
One store of gradings for the whole test run (issue 43): a test that needs a grading only to assert things on it
asks here, and the same upload graded in the same mode by the same grader is graded once, whichever test (and
whichever xdist worker) asks first; the others read what it wrote. A results.json of the grader's own error (a
refused sandbox, a crash) is not kept: the next asker grades again. Tests that must grade on their own (timing,
neighbours, memory, the hostile cases themselves, a determinism test's repeats) never ask.

The key: the sha256 of the upload's bytes, the grader's hash (every file of autograder/, fixtures included, the
reference, grading.yaml and run_autograder as they are now: a change mid-run is a new key) and the mode (how it
is graded, the profile, the grading.yaml text it runs with, the sandbox defences turned off, tests skipped).
What is stored is results.json as the grader wrote it, read back by each asker and checked there
(results.validate, as grader_runs.load_results), so every test that asks still asserts, and can fail, on its own.

Across workers: tests/conftest.py points ROOT at a folder of this run (the parent of the workers' basetemp,
0700, root's), one file per key with a lock beside it: a second asker waits for the grading in flight instead
of grading it again. A grading that fails (its produce raises) stores nothing: the next asker grades again.
Outside pytest (ROOT None) the store lives in this process only.
"""

import fcntl
import hashlib
import json
import os

from grader_runs import REPO, AutograderRoot, grading_text
from autograder.judge import results

ROOT = None        # set by tests/conftest.py
_MEMORY = {}       # key -> stored value, this process
_GRADER = []       # the grader's hash, computed once per process
GRADER_PARTS = ('autograder', 'reference', 'grading.yaml', 'run_autograder')


def grader_sha256():
    """sha256 over every file of the grader (GRADER_PARTS), by relative path, caches left out."""
    if not _GRADER:
        h = hashlib.sha256()
        for part in GRADER_PARTS:
            top = os.path.join(REPO, part)
            paths = [top] if os.path.isfile(top) else sorted(
                os.path.join(root, name) for root, dirs, files in os.walk(top)
                if '__pycache__' not in root.split(os.sep) for name in files if not name.endswith('.pyc'))
            for path in paths:
                h.update(os.path.relpath(path, REPO).encode() + b'\0')
                with open(path, 'rb') as f:
                    h.update(hashlib.sha256(f.read()).digest())
        _GRADER.append(h.hexdigest())
    return _GRADER[0]


def key_of(upload, mode):
    """The store's key of `upload` (bytes or str) graded in `mode` (a JSON-able dict) by this grader."""
    data = upload.encode('utf-8') if isinstance(upload, str) else upload
    text = json.dumps(mode, sort_keys=True)
    return hashlib.sha256(b'\0'.join([hashlib.sha256(data).digest(), grader_sha256().encode(), text.encode()])
                          ).hexdigest()


def ask(upload, mode, produce, keep=lambda value: True):
    """
    The stored value for (upload, mode), made by `produce()` (a JSON-able value) once for the whole run.
    Returns (value, fresh): fresh is True where this call graded it. A value `keep` refuses (a grading the grader
    could not make: a refused sandbox, the grader's own error) is returned to this asker only: the next grades again,
    as it would have without the store (such a refusal can be a neighbour's passing state, not the grader's).
    """
    key = key_of(upload, mode)
    if key in _MEMORY:
        return _MEMORY[key], False
    if ROOT is None:
        value = produce()
        if keep(value):
            _MEMORY[key] = value
        return value, True
    os.makedirs(ROOT, mode=0o700, exist_ok=True)
    path = os.path.join(ROOT, key + '.json')
    fresh = False
    with open(path + '.lock', 'a') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # a grading of this key in flight elsewhere: wait for it
        try:
            if os.path.exists(path):
                with open(path, encoding='utf-8') as f:
                    value = json.load(f)
            else:
                value, fresh = produce(), True
                if not keep(value):
                    return value, fresh
                with open(path + '.part', 'w', encoding='utf-8') as f:
                    json.dump(value, f)
                os.replace(path + '.part', path)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _MEMORY[key] = value
    return value, fresh


def graded_by_the_grader(value):
    """Whether a stored results.json is a grading (not the grader's error or a refused sandbox: those it writes with
    extra_data.grader_error)."""
    try:
        return 'grader_error' not in (json.loads(value['results']).get('extra_data') or {})
    except (ValueError, KeyError, AttributeError):
        return False


# ----------------------------------------------------------------------------- the shared gradings

def _results_of(path):
    with open(path, encoding='utf-8') as f:
        return f.read()


def through_run_autograder(text, grading=None, env=None, source=None, ag_root=None):
    """
    `text` as model.py, graded by ./run_autograder in an AUTOGRADER_ROOT with `grading` (grading.yaml's text;
    None: as committed), `env` (extra variables: HW1_SANDBOX_DISABLE) and HW1_SOURCE=`source` (None: the root's
    own copy). Returns (results dict, results.json text). The asker opens a grader copy: it is `lockdown`
    (tests/conftest.py), and `gradescope_mode` where `env` turns namespaces off.
    """
    grading = grading_text() if grading is None else grading
    disable = {k: v for k, v in os.environ.items() if k == 'HW1_SANDBOX_DISABLE'}   # what root.run passes on
    mode = {'route': 'run_autograder', 'source': 'checkout' if source else 'copy', 'profile': 'cpu',
            'grading_yaml': hashlib.sha256(grading.encode()).hexdigest(),
            'env': sorted(dict(disable, **(env or {})).items())}

    def produce():
        root = ag_root(grading) if ag_root is not None else AutograderRoot(grading)
        try:
            root.submit('model.py', text)
            root.run(source=source, env=env)
            return {'results': _results_of(root.results_path)}
        finally:
            if ag_root is None:
                root.cleanup()
    value, _ = ask(text, mode, produce, graded_by_the_grader)
    return load_checked(value['results']), value['results']


def through_grade(text, profile='cpu'):
    """`text` as model.py graded in this process by grade.grade_results with grading.yaml as committed (all defences
    this machine gives, less HW1_SANDBOX_DISABLE's), in a temporary folder. Returns (results dict, results.json
    text)."""
    import tempfile
    from autograder import GRADING_YAML
    from autograder.judge import grade
    with open(GRADING_YAML, 'rb') as f:
        mode = {'route': 'grade', 'profile': profile, 'grading_yaml': hashlib.sha256(f.read()).hexdigest(),
                'env': sorted({k: v for k, v in os.environ.items() if k == 'HW1_SANDBOX_DISABLE'}.items())}

    def produce():
        with tempfile.TemporaryDirectory(prefix='hw1-store-') as folder:
            path, results_path = os.path.join(folder, 'model.py'), os.path.join(folder, 'results.json')
            with open(path, 'w') as f:
                f.write(text)
            grade.grade_results(path, profile, results_path)
            return {'results': _results_of(results_path)}
    value, _ = ask(text, mode, produce, graded_by_the_grader)
    return load_checked(value['results']), value['results']


def load_checked(raw):
    """results.json text as a dict, validated as every grading's is (grader_runs.load_results)."""
    out = json.loads(raw)
    results.validate(out)
    return out


REFERENCE_MODEL = os.path.join(REPO, 'reference', 'mingpt', 'model.py')
TEMPLATE_MODEL = os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py')


def reference():
    """The reference graded by ./run_autograder with HW1_SOURCE at this checkout, grading.yaml as committed, every
    defence: tests/e2e/test_grading.py's, and the honest scores of test_hostile and test_policy_agreement.
    Returns (results dict, results.json text). The asker is `lockdown`."""
    with open(REFERENCE_MODEL) as f:
        return through_run_autograder(f.read(), source=REPO)


def template():
    """The untouched template graded in this process (through_grade): tests/e2e/test_grading.py's, and the honest
    control of test_hostile's borrow_grader_rope. Returns (results dict, results.json text)."""
    with open(TEMPLATE_MODEL) as f:
        return through_grade(f.read())
