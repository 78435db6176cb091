"""
`python -m autograder regenerate [--device cuda] [--skip-reference-tests]`: the only way
fixtures are made. Runs the reference through the same sandboxed probes students get, runs
every fingerprint (known bug) the same way, trains the reference on several seeds for the
loss band, and writes autograder/fixtures/<profile>/ with a manifest and a diff report
against the fixtures it replaces. Refuses when the reference fails its own tests.

Progress is printed as it goes: [1/4] the reference's own tests, [2/4] the reference through
every probe (with the loss-curve seeds), [3/4] each fingerprint with how many arrays it
changes, [4/4] writing. The diff report (which arrays changed and by how much, and how the
loss band moved) is printed last and saved to autograder/fixtures/<profile>/DIFF.txt, to be
committed with the fixtures.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from importlib import metadata

import numpy as np

from autograder import DATA_FILE, REFERENCE_DIR, REPO_ROOT, config, fingerprints, fixtures, inputs, registry
from autograder.checks import resources
from autograder.sandbox import Sandbox



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
    result = sandbox.run(model_py, job, probes, inp, timeouts, import_timeout=300, need_data='loss-curve' in probes)
    if result.import_result.status != 'ok':
        raise RuntimeError("import failed: %s" % result.import_result.message)
    return result


def flatten(result):
    out = {}
    for pid, r in result.probes.items():
        for key, value in r.arrays.items():
            out['%s/%s' % (pid, key)] = value
    return out


def diff_report(old, new, window):
    """Which arrays changed and by how much, and how the loss band moved (final loss = mean of the
    last `window` iterations, as the loss-curve test judges it)."""
    lines = []
    for key in sorted(set(old) | set(new)):
        if key not in old:
            lines.append("  + %s (new)" % key)
        elif key not in new:
            lines.append("  - %s (removed)" % key)
        elif old[key].shape != new[key].shape:
            lines.append("  ~ %s shape %s -> %s" % (key, old[key].shape, new[key].shape))
        elif old[key].dtype.kind in 'fc':
            d = float(np.max(np.abs(old[key].astype(np.float64) - new[key].astype(np.float64)))) if old[key].size else 0.0
            if d > 0:
                lines.append("  ~ %s max |change| %.3g" % (key, d))
        elif not np.array_equal(old[key], new[key]):
            lines.append("  ~ %s changed (%d of %d entries)" % (key, int(np.sum(old[key] != new[key])), old[key].size))

    def band(arrays):
        finals = [v[-window:].mean() for k, v in arrays.items() if k.startswith('loss-curve/') and k.count('/') == 1]
        return (min(finals), max(finals)) if finals else None
    ob, nb = band(old), band(new)
    if ob and nb:
        lines.append("  loss band (mean of last %d iterations): [%.4f, %.4f] -> [%.4f, %.4f]" % ((window,) + ob + nb))
    return lines or ["  no array changed"]


def regenerate(profile_name, skip_tests=False):
    grading = config.load()
    profile = grading.profiles[profile_name]
    if not skip_tests:
        run_reference_tests()
    sandbox = Sandbox(grading.sandbox)
    inp = inputs.build(profile)
    ref_model = os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')

    log("[2/4] reference through the probes (profile %s, device %s, %d loss-curve seeds) ..."
        % (profile_name, profile['device'], len(profile['loss_curve']['reference_seeds'])))
    t0 = time.time()
    # the student's seed too: the reference's run at that seed, from the same initial weights, is what 10.1 judges against
    lc_seeds = sorted(set(profile['loss_curve']['reference_seeds']) | {profile['loss_curve']['student_seed']})
    result = run_probes(sandbox, ref_model, profile, list(registry.PROBED), inp, seeds=lc_seeds)
    bad = {pid: (r.status, r.message, r.info.get('case_errors')) for pid, r in result.probes.items()
           if r.status != 'ok' or r.info.get('case_errors')}
    if bad:
        raise SystemExit("the reference failed probes; fixtures were NOT overwritten: %s" % bad)
    expected = flatten(result)
    log("      %d arrays in %.1f s" % (len(expected), time.time() - t0))

    log("[3/4] %d fingerprints (known bugs) ..." % len(fingerprints.FINGERPRINTS))
    with open(ref_model) as f:
        source = f.read()
    fp_outputs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, fp in enumerate(fingerprints.FINGERPRINTS, 1):
            path = os.path.join(tmp, 'model.py')
            with open(path, 'w') as f:
                f.write(fingerprints.apply(fp, source))
            r = run_probes(sandbox, path, profile, list(registry.FINGERPRINTED), inp)
            arrays = flatten(r)
            differing = {k: v for k, v in arrays.items()
                         if k in expected and (v.shape != expected[k].shape or not np.allclose(v, expected[k], atol=1e-4))}
            fp_outputs[fp.id] = differing
            log("      %2d/%d %-24s differs from the reference on %d of %d arrays"
                % (i, len(fingerprints.FINGERPRINTS), fp.id, len(differing), len(arrays)))
            if not differing:
                raise SystemExit("fingerprint %s is indistinguishable from the reference on every probe" % fp.id)

    log("[4/4] writing %s" % fixtures.folder(profile_name))
    try:
        old = fixtures.load(grading, profile_name, check=False).expected
    except fixtures.StaleFixtures:
        old = {}
    expected = resources.keep_window_rows(expected, old, profile)   # 11.2: only the rows the judge compares
    manifest = {
        'profile': profile_name,
        'profile_hash': grading.profile_hash(profile_name),
        'device': profile['device'],
        'torch': metadata.version('torch'),
        'python': sys.version.split()[0],
        'seeds': {'inputs': profile['seed'], 'loss_curve_reference': profile['loss_curve']['reference_seeds'],
                  'loss_curve_student': profile['loss_curve']['student_seed']},
        'corpus_sha256': fixtures.sha256_file(DATA_FILE),
        'grading_yaml_sha256': fixtures.sha256_file(grading.path),
        'probe_code_sha256': fixtures.sha256_files(fixtures.PROBE_CODE),
        'reference_sha256': fixtures.sha256_files(fixtures.REFERENCE_CODE),
        'handout_sha256': fixtures.sha256_files(fixtures.HANDOUT_CODE),
        'fingerprints': sorted(fp_outputs),
        'sandboxed_as': result.sandboxed_as,
    }
    fixtures.write(profile_name, expected, fp_outputs, manifest)
    report = diff_report(old, expected, profile['loss_curve']['window'])
    with open(os.path.join(fixtures.folder(profile_name), 'DIFF.txt'), 'w') as f:
        f.write('diff of expected.npz against the previous fixtures (torch %s, %s):\n%s\n'
                % (manifest['torch'], profile['device'], '\n'.join(report)))
    log("diff against the previous fixtures:")
    for line in report:
        log(line)
    return expected


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
