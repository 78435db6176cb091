"""
Reference outputs the checks compare against, one folder per profile under a fixtures root:
expected.npz (the reference's probe outputs), known_bugs.npz (the outputs of known wrong
variants) and manifest.json (what they were made from), all made from the root's draw key,
which seeds the input sets and draws one per submission (inputs.set_seed, inputs.draw).
They are written only by `python -m autograder regenerate`; the grader refuses stale ones.

Two roots (root()): the committed autograder/fixtures/, made with PUBLIC_TEST_KEY (no key file:
the project's own tests and CI; build-zip refuses it), and a course's COURSE_DIR (course/,
git-ignored, owner-only), made by `regenerate --course` with draw.key, 32 random bytes made
there at deploy time. A checkout holding course/draw.key grades with course/ only. In the
Gradescope zip the course's root is autograder/fixtures/, with its draw.key.

Input sets: the arrays of set i are stored under 'set<i>:<probe>/<key>'; the shared probes'
(inputs.SHARED_PROBES) once, unprefixed. `Fixtures.view(i)` is what a judge sees: set i's
arrays and the shared ones under their plain '<probe>/<key>' names.
"""

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

from autograder import COURSE_DIR, DATA_FILE, FIXTURES_DIR, PACKAGE_DIR, REFERENCE_DIR, TEMPLATE_DIR
from autograder.judge import inputs, registry

# code whose change changes what the probes compute
CHILD_DIR = os.path.join(PACKAGE_DIR, 'child')
# the child modules that only carry a probe to its process and back: the zygote, the harness link and the
# sandbox's self-test compute nothing a probe returns, so changing them leaves the fixtures valid
PROBE_TRANSPORT = ('zygote.py', 'socket_link.py', 'selftest.py')
# what the fixtures depend on besides the reference: the child package, the inputs and the known bugs
PROBE_CODE = sorted(os.path.join(CHILD_DIR, f) for f in os.listdir(CHILD_DIR)
                    if f.endswith('.py') and f not in PROBE_TRANSPORT) + \
    [os.path.join(PACKAGE_DIR, 'contract', f) for f in ('configs.py', 'memory_readings.py', 'report_schema.py')] + \
    [os.path.join(PACKAGE_DIR, 'judge', f) for f in ('inputs.py', 'known_bugs.py', 'source_patches.py')]
REFERENCE_CODE = [os.path.join(REFERENCE_DIR, f) for f in
                  ('chargpt.py', 'mingpt/model.py', 'mingpt/preflight.py', 'mingpt/trainer.py', 'mingpt/utils.py')]
HANDOUT_CODE = [os.path.join(TEMPLATE_DIR, f) for f in
                ('chargpt.py', 'mingpt/preflight.py', 'mingpt/trainer.py', 'mingpt/utils.py')]


class StaleFixtures(RuntimeError):
    """The fixtures do not match the code or grading.yaml; staff must regenerate them."""


def sha256_files(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(os.path.relpath(p, os.path.dirname(PACKAGE_DIR)).encode())
        with open(p, 'rb') as f:
            h.update(f.read())
    return h.hexdigest()


def probe_code_sha256():
    """
    The manifest's `probe_code_sha256`: the PROBE_CODE files (sha256_files) and the probes' declared
    inputs (registry.declared_inputs, as sorted JSON). registry.py itself is not hashed (its other
    flags change no probe's output); a changed declaration changes what a probe's process receives,
    so it makes the fixtures stale. Profile-free, as the files are: the placeholders' values are the
    profile's, which profile_hash covers.
    """
    declared = json.dumps(registry.declared_inputs(), sort_keys=True, separators=(',', ':'))
    h = hashlib.sha256(sha256_files(PROBE_CODE).encode())
    h.update(b'\ndeclared inputs: ' + declared.encode())
    return h.hexdigest()


def sha256_file(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


KEY_FILE = 'draw.key'   # a course's key: 32 random bytes, hex, at the top of its fixtures root; made once, kept
# The key of the committed fixtures: public on purpose (every reader of the repository has it), so that the
# project's tests and CI have fixtures; no course may grade with it (build_zip refuses it). Its bytes say so.
PUBLIC_TEST_KEY = b'hw1 PUBLIC TEST KEY, not secret!'
SET_PREFIX = re.compile(r'^set(\d+):')


@dataclass
class Fixtures:
    profile_name: str
    expected: Dict[str, np.ndarray]                  # of one input set (set_index), shared arrays included
    known_bugs: Dict[str, Dict[str, np.ndarray]]   # known bug id -> {key: array}, of the same set
    manifest: dict
    set_index: int = 0
    input_seed: Optional[int] = None                 # the seed of that set's inputs; None: the profile's own
    key: bytes = field(default=b'', repr=False)      # the draw key
    shared_seed: Optional[int] = None                # the seed of the shared probes' inputs (inputs.shared_seed)
    sets: tuple = field(default=(), repr=False)      # ((expected, known bugs, seed), ...) of every set

    @property
    def set_count(self):
        return max(1, len(self.sets))

    def view(self, index):
        """The fixtures of input set `index`, as the judges read them."""
        if not self.sets:
            return self
        expected, bugs, seed = self.sets[index]
        return dataclasses.replace(self, expected=expected, known_bugs=bugs, set_index=index, input_seed=seed)

    def probe(self, probe_id):
        prefix = probe_id + '/'
        return {k[len(prefix):]: v for k, v in self.expected.items() if k.startswith(prefix)}

    def set_aside_in(self, probe_id, unit):
        """The parts the judged outputs of a unit were computed without: none here (judge/plans.PlanView)."""
        return ()

    def excluded(self, probe_id, unit):
        """Whether set_aside.py left a unit of this probe out of its test: never here (judge/plans.PlanView)."""
        return False

    def known_bug_outputs(self, probe_id):
        prefix = probe_id + '/'
        return {bug: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
                for bug, arrays in self.known_bugs.items()}


def root():
    """The fixtures root this checkout grades with: the course's once it holds a key, else the committed one."""
    return COURSE_DIR if os.path.isfile(os.path.join(COURSE_DIR, KEY_FILE)) else FIXTURES_DIR


def folder(profile_name, base=None):
    return os.path.join(base or root(), profile_name)


def regenerate_command(profile_name, base=None):
    """The command that remakes the fixtures of `profile` in `base` (default: root())."""
    course = os.path.realpath(base or root()) == os.path.realpath(COURSE_DIR)
    return 'python -m autograder regenerate%s%s' % (' --device cuda' if profile_name == 'gpu' else '',
                                                    ' --course' if course else '')


def _load_npz(path):
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def read_key(base=None):
    """The draw key of a fixtures root (default root()): its draw.key, PUBLIC_TEST_KEY where it has none, b'' if
    unreadable."""
    path = os.path.join(base or root(), KEY_FILE)
    if not os.path.exists(path):
        return PUBLIC_TEST_KEY
    try:
        with open(path) as f:
            return bytes.fromhex(f.read().strip())
    except (OSError, ValueError):
        return b''


def key_kind(key):
    """What the manifest records of a key (its bytes are never recorded: only their sha256)."""
    if key == PUBLIC_TEST_KEY:
        return 'public test key (fixtures.PUBLIC_TEST_KEY): the project\'s own tests only; build-zip refuses it'
    return 'course key (draw.key of the fixtures root, made at deploy time, never committed)'


def make_course_key():
    """
    regenerate --course: COURSE_DIR (owner-only, 0700) and its draw.key (0600), 32 random bytes made
    here only when there is none; an existing key is kept, so that a regrade draws the same sets.
    """
    os.makedirs(COURSE_DIR, mode=0o700, exist_ok=True)
    os.chmod(COURSE_DIR, 0o700)
    path = os.path.join(COURSE_DIR, KEY_FILE)
    if not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, 'w') as f:
            f.write(os.urandom(32).hex() + '\n')
    key = read_key(COURSE_DIR)
    if len(key) != 32 or key == PUBLIC_TEST_KEY:
        raise StaleFixtures('%s holds no course key (32 bytes, hex, not the public test key): move it aside and run '
                            '`python -m autograder regenerate --course` again' % path)
    return key


def split_sets(flat, count):
    """[{plain key: array} of set i, shared arrays included] from stored keys ('set<i>:...' or shared)."""
    shared = {k: v for k, v in flat.items() if not SET_PREFIX.match(k)}
    sets = [dict(shared) for _ in range(count)]
    for k, v in flat.items():
        m = SET_PREFIX.match(k)
        if m and int(m.group(1)) < count:
            sets[int(m.group(1))][k[m.end():]] = v
    return sets


def load(grading, profile_name, check=True, base=None):
    """The fixtures of `profile` in the root `base` (default root()), checked against the code unless `check` is
    False."""
    base = base or root()
    where = folder(profile_name, base)
    manifest_path = os.path.join(where, 'manifest.json')
    if not os.path.isfile(manifest_path):
        raise StaleFixtures("no fixtures for profile %r in %s: run `%s`"
                            % (profile_name, where, regenerate_command(profile_name, base)))
    with open(manifest_path) as f:
        manifest = json.load(f)
    if check:
        problems = staleness(grading, profile_name, manifest, base)
        if problems:
            raise StaleFixtures("fixtures for profile %r are stale: %s. Run `%s`."
                                % (profile_name, '; '.join(problems), regenerate_command(profile_name, base)))
    count = int(manifest.get('input_sets', 1))
    key = read_key(base)
    by_bug = {}
    for flat_key, value in _load_npz(os.path.join(where, 'known_bugs.npz')).items():
        bug, rest = flat_key.split('::', 1)
        by_bug.setdefault(bug, {})[rest] = value
    bug_sets = {bug: split_sets(arrays, count) for bug, arrays in by_bug.items()}
    expected_sets = split_sets(_load_npz(os.path.join(where, 'expected.npz')), count)
    prof = grading.profiles.get(profile_name) if hasattr(grading, 'profiles') else None
    seeds = [inputs.set_seed(prof, key, i) if prof is not None else None for i in range(count)]
    shared = inputs.shared_seed(prof, key) if prof is not None else None
    sets = tuple((expected_sets[i], {bug: s[i] for bug, s in bug_sets.items()}, seeds[i]) for i in range(count))
    return Fixtures(profile_name, sets[0][0], sets[0][1], manifest, 0, seeds[0], key, shared, sets)


_LOADED = {}   # one entry per profile: (signature, Fixtures), see load_for_grading


def _signature(grading, profile_name):
    """What a loaded copy depends on: the profile, and the stat of every file load() and staleness() read."""
    base = root()
    stats = [base]
    paths = [os.path.join(base, profile_name, n) for n in ('manifest.json', 'expected.npz', 'known_bugs.npz')]
    paths.append(os.path.join(base, KEY_FILE))
    for path in paths + [DATA_FILE] + PROBE_CODE + REFERENCE_CODE + HANDOUT_CODE:   # what staleness() reads
        try:
            st = os.stat(path)
            stats.append((path, st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            stats.append((path, None))
    return grading.profile_hash(profile_name), tuple(stats)


def load_for_grading(grading, profile_name):
    """
    load(grading, profile) kept for the next grading of this process while neither grading.yaml's
    profile nor any fixture file changes: a batch worker grades many submissions, and reading and
    checking ~9 MB of npz took ~0.2 CPU-s of every grading. The arrays are made read-only, so that no
    judge can change what the next grading compares against (it would raise instead).
    """
    signature = _signature(grading, profile_name)
    kept = _LOADED.get(profile_name)
    if kept is not None and kept[0] == signature:
        return kept[1]
    fx = load(grading, profile_name)
    for expected, by_bug, _seed in fx.sets or ((fx.expected, fx.known_bugs, None),):
        for array in list(expected.values()) + [a for arrays in by_bug.values() for a in arrays.values()]:
            array.setflags(write=False)
    _LOADED[profile_name] = (signature, fx)
    return fx


def staleness(grading, profile_name, manifest, base=None):
    problems = []
    if manifest.get('profile_hash') != grading.profile_hash(profile_name):
        problems.append("grading.yaml's profiles.%s changed" % profile_name)
    if manifest.get('probe_code_sha256') != probe_code_sha256():
        problems.append("the probe code (child/, contract/, judge/inputs.py, judge/known_bugs.py, "
                        "judge/source_patches.py) or a probe's declared inputs (registry.py) changed")
    # the reference and the handout are not shipped to Gradescope; check them where they exist
    if (all(os.path.isfile(p) for p in REFERENCE_CODE)
            and manifest.get('reference_sha256') != sha256_files(REFERENCE_CODE)):
        problems.append("the reference solution changed")
    if all(os.path.isfile(p) for p in HANDOUT_CODE) and manifest.get('handout_sha256') != sha256_files(HANDOUT_CODE):
        problems.append("the handout's chargpt.py/trainer.py/utils.py changed")
    key = read_key(base)
    if len(key) < 32 or manifest.get('draw_key_sha256') != hashlib.sha256(key).hexdigest():
        problems.append("the draw key (%s) is missing or is not the one the input sets were made with"
                        % os.path.join(base or root(), KEY_FILE))
    if os.path.isfile(DATA_FILE) and manifest.get('corpus_sha256') != sha256_file(DATA_FILE):
        problems.append("data/input.txt is not the corpus the reference was trained and scored on (10.1)")
    return problems


def stored_keys(sets, shared_probes):
    """{stored key: array} of [{plain key: array} per set]: shared probes' arrays once (set 0's), the rest per set."""
    out = {}
    for i, arrays in enumerate(sets):
        for k, v in arrays.items():
            if k.split('/')[0].split('~')[0] in shared_probes:   # 'loss-curve~gqa' is shared as 'loss-curve' is
                if i == 0:
                    out[k] = v
            else:
                out['set%d:%s' % (i, k)] = v
    return out


def write(profile_name, sets, manifest, base=None):
    """sets: [(expected, known bugs)] per input set, each under plain keys (a view's); into the root `base`."""
    base = folder(profile_name, base)
    os.makedirs(base, exist_ok=True)
    shared = inputs.SHARED_PROBES
    expected = stored_keys([e for e, _ in sets], shared)
    bug_ids = sorted({bug for _, bugs in sets for bug in bugs})
    flat = {'%s::%s' % (bug, k): v for bug in bug_ids
            for k, v in stored_keys([bugs.get(bug, {}) for _, bugs in sets], shared).items()}
    for name, arrays in (('expected.npz', expected), ('known_bugs.npz', flat)):
        tmp = os.path.join(base, '.' + name)
        with open(tmp, 'wb') as f:
            np.savez_compressed(f, **dict(sorted(arrays.items())))
        os.replace(tmp, os.path.join(base, name))
    with open(os.path.join(base, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write('\n')
