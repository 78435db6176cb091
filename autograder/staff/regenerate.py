"""
`python -m autograder regenerate [--device cuda] [--skip-reference-tests]`: the only way
fixtures are made. Runs the reference through the same sandboxed probes students get, runs
every fingerprint (known bug) the same way, each on every input set (the profile's
`input_sets`, seeded from the draw key it makes once: fixtures.make_key; the shared probes of
inputs.SHARED_PROBES run on set 0 only), trains the reference on several seeds (the
student's seed gives 10.1's held-out logits), and writes autograder/fixtures/<profile>/ with
a manifest, but only where something changed that a grade can feel. Refuses when the
reference fails its own tests.

Progress is printed as it goes: [1/4] the reference's own tests, [2/4] the reference through
every probe (with the loss-curve seeds), [3/4] each fingerprint with how many arrays it
changes, [4/4] comparing with the fixtures in place (autograder/staff/fixture_changes.py):
each changed array in units of its test's tolerance, with the nearest known bug's distance.
Below the stated noise floor nothing is written ("no change that matters ... fixtures left
untouched": two runs in a row leave the tree clean); otherwise the fixtures are written and
the list of what matters is saved to autograder/fixtures/<profile>/DIFF.txt, to be committed
with them.
"""

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata

import numpy as np

from autograder import DATA_FILE, REFERENCE_DIR, REPO_ROOT, config, fingerprints, fixtures, inputs, registry
from autograder.checks import resources
from autograder.grade import probe_handlers
from autograder.sandbox import Sandbox
from autograder.staff import fixture_changes


def log(msg):
    print(msg, flush=True)


def run_reference_tests():
    log("[1/4] running the reference's own tests (tests/reference) ...")
    proc = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-x', os.path.join('tests', 'reference')],
                          cwd=REPO_ROOT, capture_output=True, text=True)
    tail = '\n'.join(proc.stdout.strip().splitlines()[-3:])
    if proc.returncode != 0:
        raise SystemExit("the reference fails its own tests; fixtures were NOT overwritten:\n%s" % proc.stdout[-3000:])
    log("      " + tail.replace('\n', '\n      '))


def run_probes(sandbox, model_py, profile, probes, inp, seeds=None):
    job = {'profile': profile, 'limits': resources.probe_limits(profile)}
    if seeds is not None:
        job['loss_curve_seeds'] = seeds
    timeouts = {p: 900 for p in probes}
    result = sandbox.run(model_py, job, probes, inputs.per_probe(profile, probes, inp), timeouts, import_timeout=300, need_data='loss-curve' in probes,
                         handlers=probe_handlers(profile))
    if result.import_result.status != 'ok':
        raise RuntimeError("import failed: %s" % result.import_result.message)
    return result


def flatten(result):
    out = {}
    for pid, r in result.probes.items():
        for key, value in r.arrays.items():
            out['%s/%s' % (pid, key)] = value
    return out


# informational: which pool user ran the probes depends on which was free, never on what they computed
VOLATILE_MANIFEST_KEYS = ('sandboxed_as',)


def manifest_changes(old, new):
    """The manifest fields that differ (volatile ones left out), as 'key: old -> new' lines."""
    keys = sorted((set(old) | set(new)) - set(VOLATILE_MANIFEST_KEYS))
    return ['%s: %s -> %s' % (k, str(old.get(k))[:16], str(new.get(k))[:16]) for k in keys if old.get(k) != new.get(k)]


def write_if_changed(grading, profile_name, sets, manifest):
    """
    Write the fixtures only where something changed that a grade can feel (fixture_changes.py):
    arrays of any input set beyond the noise floor, or inputs recorded in the manifest. `sets`:
    [(expected, fingerprints)] per input set. Returns the report lines. Below the floor the
    previous arrays are kept byte for byte, so a second run leaves the tree clean.
    """
    try:
        previous = fixtures.load(grading, profile_name, check=False)
    except (fixtures.StaleFixtures, OSError, ValueError, KeyError):
        previous = None
    if previous is None or previous.set_count != len(sets) or not previous.sets:
        fixtures.write(profile_name, sets, manifest)
        lines = ['no previous fixtures of %d input sets: all %d arrays written'
                 % (len(sets), sum(len(e) for e, _ in sets))]
    else:
        lines, matters = [], False
        for i, (expected, fp_outputs) in enumerate(sets):
            old = previous.view(i)
            changes = fixture_changes.compare(old.expected, expected, old.fingerprints, fp_outputs, grading,
                                              profile_name)
            lines += ['set %d: %s' % (i, l) for l in changes.lines()]
            matters = matters or bool(changes.matters)
        inputs_changed = manifest_changes(previous.manifest, manifest)
        lines += ['manifest ' + l for l in inputs_changed]
        if matters:
            fixtures.write(profile_name, sets, manifest)
        elif inputs_changed:    # the same numbers from changed inputs: keep the arrays, record the inputs
            fixtures.write(profile_name, [(e, f) for e, f, _ in previous.sets],
                           dict(manifest, sandboxed_as=previous.manifest.get('sandboxed_as')))
        else:
            return lines + ['fixtures left untouched']
    with open(os.path.join(fixtures.folder(profile_name), 'DIFF.txt'), 'w') as f:
        f.write('what the last regeneration changed (torch %s, %s; noise floor %g of each test\'s tolerance, '
                'autograder/staff/fixture_changes.py):\n%s\n'
                % (manifest['torch'], manifest['device'], fixture_changes.NOISE_FLOOR, '\n'.join('  ' + l for l in lines)))
    return lines


def reference_set(sandbox, ref_model, profile, seed, index, lc_seeds):
    """The reference's outputs on input set `index` (every probe on set 0; the shared ones only there)."""
    probes = [p for p in registry.PROBED if index == 0 or p not in inputs.SHARED_PROBES]
    result = run_probes(sandbox, ref_model, profile, probes, inputs.build(profile, seed),
                        seeds=lc_seeds if 'loss-curve' in probes else None)
    bad = {pid: (r.status, r.message, r.info.get('case_errors')) for pid, r in result.probes.items()
           if r.status != 'ok' or r.info.get('case_errors')}
    if bad:
        raise SystemExit("the reference failed probes on input set %d; fixtures were NOT overwritten: %s" % (index, bad))
    return result


def fingerprint_set(sandbox, tmp, source, profile, seed, index, expected):
    """{fingerprint id: the arrays where it differs from the reference} on input set `index`."""
    fp_outputs = {}
    inp = inputs.build(profile, seed)
    for i, fp in enumerate(fingerprints.FINGERPRINTS, 1):
        path = os.path.join(tmp, 'model.py')
        with open(path, 'w') as f:
            f.write(fingerprints.apply(fp, source))
        arrays = flatten(run_probes(sandbox, path, profile, list(registry.FINGERPRINTED), inp))
        differing = {k: v for k, v in arrays.items()
                     if k in expected and (v.shape != expected[k].shape or not np.allclose(v, expected[k], atol=1e-4))}
        fp_outputs[fp.id] = differing
        log("      set %d %2d/%d %-24s differs from the reference on %d of %d arrays"
            % (index, i, len(fingerprints.FINGERPRINTS), fp.id, len(differing), len(arrays)))
        if not differing:
            raise SystemExit("fingerprint %s is indistinguishable from the reference on input set %d" % (fp.id, index))
    return fp_outputs


def regenerate(profile_name, skip_tests=False):
    grading = config.load()
    profile = grading.profiles[profile_name]
    count = profile['input_sets']
    if not skip_tests:
        run_reference_tests()
    sandbox = Sandbox(grading.sandbox)
    key = fixtures.make_key(profile_name)
    seeds = [inputs.set_seed(profile, key, i) for i in range(count)]
    ref_model = os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')

    log("[2/4] reference through the probes (profile %s, device %s, %d input sets, %d loss-curve seeds) ..."
        % (profile_name, profile['device'], count, len(profile['loss_curve']['reference_seeds'])))
    t0 = time.time()
    # the student's seed too: the reference's run at that seed, from the same initial weights, is what 10.1 judges against
    lc_seeds = sorted(set(profile['loss_curve']['reference_seeds']) | {profile['loss_curve']['student_seed']})
    results = [reference_set(sandbox, ref_model, profile, seeds[i], i, lc_seeds) for i in range(count)]
    shared = {k: v for k, v in flatten(results[0]).items() if k.split('/')[0] in inputs.SHARED_PROBES}
    expected_sets = [dict(flatten(r), **shared) for r in results]
    stored = fixtures.stored_keys(expected_sets, inputs.SHARED_PROBES)
    log("      %d per input set, %d of them shared by every set" % (len(expected_sets[0]), len(shared)))
    log("      %d arrays in %.1f s" % (len(stored), time.time() - t0))

    log("[3/4] %d fingerprints (known bugs) on %d input sets ..." % (len(fingerprints.FINGERPRINTS), count))
    with open(ref_model) as f:
        source = f.read()
    with tempfile.TemporaryDirectory() as tmp:
        fp_sets = [fingerprint_set(sandbox, tmp, source, profile, seeds[i], i, expected_sets[i]) for i in range(count)]

    log("[4/4] comparing with %s" % fixtures.folder(profile_name))
    try:
        old = fixtures.load(grading, profile_name, check=False)
    except fixtures.StaleFixtures:
        old = None
    for i in range(count):
        old_i = old.view(i).expected if old is not None and i < old.set_count and old.sets else {}
        expected_sets[i] = resources.keep_window_rows(expected_sets[i], old_i, profile)   # 11.2: only the rows judged
        # what a judge never compares is kept as its shape only: kernel readings would otherwise churn the fixtures
        expected_sets[i] = {k: np.zeros_like(v) if k.split('/')[0] in registry.SHAPES_ONLY else v
                            for k, v in expected_sets[i].items()}
    manifest = {
        'profile': profile_name,
        'profile_hash': grading.profile_hash(profile_name),
        'device': profile['device'],
        'torch': metadata.version('torch'),
        'python': sys.version.split()[0],
        'seeds': {'inputs': 'per set, from the draw key (inputs.set_seed)', 'shared_inputs': profile['seed'],
                  'loss_curve_reference': profile['loss_curve']['reference_seeds'],
                  'loss_curve_student': profile['loss_curve']['student_seed']},
        'input_sets': count,
        'draw_key_sha256': hashlib.sha256(key).hexdigest(),
        'corpus_sha256': fixtures.sha256_file(DATA_FILE),
        'grading_yaml_sha256': fixtures.sha256_file(grading.path),
        'probe_code_sha256': fixtures.sha256_files(fixtures.PROBE_CODE),
        'reference_sha256': fixtures.sha256_files(fixtures.REFERENCE_CODE),
        'handout_sha256': fixtures.sha256_files(fixtures.HANDOUT_CODE),
        'fingerprints': sorted(fp_sets[0]),
        'sandboxed_as': results[0].sandboxed_as,
    }
    report = write_if_changed(grading, profile_name, list(zip(expected_sets, fp_sets)), manifest)
    log("against the previous fixtures:")
    for line in report:
        log('  ' + line)
    return expected_sets[0]


def main(argv):
    ap = argparse.ArgumentParser(prog='python -m autograder regenerate', description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--device', choices=('cpu', 'cuda'), default='cpu',
                    help='cpu regenerates the cpu profile, cuda the gpu profile (run it on the grader\'s GPU)')
    ap.add_argument('--skip-reference-tests', action='store_true',
                    help='do not run tests/reference first (for iterating; never for fixtures you commit)')
    args = ap.parse_args(argv[1:])
    if args.device == 'cuda':
        problem = cuda_problem()
        if problem:
            print('regenerate: --device cuda needs a CUDA GPU: %s; nothing was changed' % problem, file=sys.stderr)
            return 2
    try:
        regenerate('gpu' if args.device == 'cuda' else 'cpu', skip_tests=args.skip_reference_tests)
    except config.GradingConfigError as e:
        print('regenerate: %s' % e, file=sys.stderr)
        return 2
    except SystemExit as e:  # the refusals above say why in one message
        if isinstance(e.code, str):
            print('regenerate: %s' % e.code, file=sys.stderr)
            return 1
        raise
    return 0


def cuda_problem():
    """Why torch sees no usable CUDA device here (asked in a subprocess, so the grader never imports torch), or None."""
    proc = subprocess.run([sys.executable, '-c', 'import torch; print(torch.cuda.is_available(), torch.version.cuda)'],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return 'torch could not be imported (%s)' % ((proc.stderr.strip().splitlines() or ['?'])[-1])
    available, built = (proc.stdout.split() + ['?', '?'])[:2]
    if available == 'True':
        return None
    return 'this torch is a CPU-only build' if built == 'None' else 'torch %s sees no CUDA device' % built
