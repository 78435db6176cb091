"""
Reference outputs the checks compare against, one folder per profile under
autograder/fixtures/: expected.npz (the reference's probe outputs), known_bugs.npz (the
outputs of known wrong variants) and manifest.json (what they were made from). They are
written only by `python -m autograder regenerate`; the grader refuses stale ones.
"""

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Dict

import numpy as np

from autograder import DATA_FILE, FIXTURES_DIR, PACKAGE_DIR, REFERENCE_DIR, TEMPLATE_DIR

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
                  ('chargpt.py', 'mingpt/model.py', 'mingpt/trainer.py', 'mingpt/utils.py')]
HANDOUT_CODE = [os.path.join(TEMPLATE_DIR, f) for f in ('chargpt.py', 'mingpt/trainer.py', 'mingpt/utils.py')]


class StaleFixtures(RuntimeError):
    """The fixtures do not match the code or grading.yaml; staff must regenerate them."""


def sha256_files(paths):
    h = hashlib.sha256()
    for p in paths:
        h.update(os.path.relpath(p, os.path.dirname(PACKAGE_DIR)).encode())
        with open(p, 'rb') as f:
            h.update(f.read())
    return h.hexdigest()


def sha256_file(path):
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


@dataclass
class Fixtures:
    profile: str
    expected: Dict[str, np.ndarray]
    known_bugs: Dict[str, Dict[str, np.ndarray]]   # known bug id -> {key: array}
    manifest: dict

    def probe(self, probe_id):
        prefix = probe_id + '/'
        return {k[len(prefix):]: v for k, v in self.expected.items() if k.startswith(prefix)}

    def known_bug_outputs(self, probe_id):
        prefix = probe_id + '/'
        return {fp: {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
                for fp, arrays in self.known_bugs.items()}


def folder(profile):
    return os.path.join(FIXTURES_DIR, profile)


def _load_npz(path):
    with np.load(path, allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def load(grading, profile, check=True):
    base = folder(profile)
    manifest_path = os.path.join(base, 'manifest.json')
    if not os.path.isfile(manifest_path):
        raise StaleFixtures("no fixtures for profile %r in %s: run `python -m autograder regenerate%s`"
                            % (profile, base, ' --device cuda' if profile == 'gpu' else ''))
    with open(manifest_path) as f:
        manifest = json.load(f)
    if check:
        problems = staleness(grading, profile, manifest)
        if problems:
            raise StaleFixtures("fixtures for profile %r are stale: %s. Run `python -m autograder regenerate%s`."
                                % (profile, '; '.join(problems), ' --device cuda' if profile == 'gpu' else ''))
    fps = {}
    for key, value in _load_npz(os.path.join(base, 'known_bugs.npz')).items():
        fp, rest = key.split('::', 1)
        fps.setdefault(fp, {})[rest] = value
    return Fixtures(profile, _load_npz(os.path.join(base, 'expected.npz')), fps, manifest)


def staleness(grading, profile, manifest):
    problems = []
    if manifest.get('profile_hash') != grading.profile_hash(profile):
        problems.append("grading.yaml's profiles.%s changed" % profile)
    if manifest.get('probe_code_sha256') != sha256_files(PROBE_CODE):
        problems.append("the probe code (child/, contract/, judge/inputs.py, judge/known_bugs.py, judge/source_patches.py) changed")
    # the reference and the handout are not shipped to Gradescope; check them where they exist
    if all(os.path.isfile(p) for p in REFERENCE_CODE) and manifest.get('reference_sha256') != sha256_files(REFERENCE_CODE):
        problems.append("the reference solution changed")
    if all(os.path.isfile(p) for p in HANDOUT_CODE) and manifest.get('handout_sha256') != sha256_files(HANDOUT_CODE):
        problems.append("the handout's chargpt.py/trainer.py/utils.py changed")
    if os.path.isfile(DATA_FILE) and manifest.get('corpus_sha256') != sha256_file(DATA_FILE):
        problems.append("data/input.txt is not the corpus the reference was trained and scored on (10.1)")
    return problems


def write(profile, expected, known_bugs, manifest):
    base = folder(profile)
    os.makedirs(base, exist_ok=True)
    flat = {'%s::%s' % (fp, k): v for fp, arrays in known_bugs.items() for k, v in arrays.items()}
    for name, arrays in (('expected.npz', expected), ('known_bugs.npz', flat)):
        tmp = os.path.join(base, '.' + name)
        with open(tmp, 'wb') as f:
            np.savez_compressed(f, **dict(sorted(arrays.items())))
        os.replace(tmp, os.path.join(base, name))
    with open(os.path.join(base, 'manifest.json'), 'w') as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write('\n')
