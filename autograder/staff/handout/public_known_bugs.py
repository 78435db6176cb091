"""
Signatures of the known bugs for the public tests (build-template).

The grader names the known bugs of autograder/judge/known_bugs.py (source patches of
the reference). build-template applies the same patches, runs the public tests' own cases
on every patched reference (float64, in one fresh interpreter), and keeps, for each case an
output fails, the short signature that the public tests' `public_checks.signature()` computes. Only the
public inputs are ever run, so nothing of the grader's hidden inputs reaches the handout.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

from autograder import REFERENCE_DIR
from autograder.judge import known_bugs, messages
from autograder.staff.handout import grader_values

# the modules the public tests import from their support folder (build.SUPPORT_DIR): each variant imports them afresh
SUPPORT_MODULES = ('public_checks', 'grader_rules', 'memory_check')

# signatures are written with 7 significant digits, like EXPECTED
_DIGITS = '%.7g'

_VARIANTS_SCRIPT = '''
import contextlib, importlib.util, io, json, sys
import torch
torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)
test_path, variants, out_path = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
result = {}
for n, (variant_id, folder) in enumerate(variants):
    # each variant imports its own mingpt package, and the tests' machinery afresh (it holds the imported model)
    for name in [m for m in sys.modules if m == 'mingpt' or m.startswith('mingpt.') or m in %r]:
        del sys.modules[name]
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location('hw1_public_tests_%%d' %% n, test_path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    tests = sys.modules['public_checks']
    outputs = {}
    for case in tests.CASES.values():
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                produced = case(torch.float64)
        except Exception:
            continue  # a variant that crashes on a case has no signature there
        for name, (out, _) in produced.items():
            outputs[name] = {'values': out.detach().double().flatten().tolist(),
                             'signature': tests.signature(out)}
    result[variant_id] = outputs
    sys.path.remove(folder)
with open(out_path, 'w') as f:
    json.dump(result, f)
''' % (SUPPORT_MODULES,)


def _variant_folder(root, known_bug, reference_dir):
    """A copy of reference/mingpt with the known bug's patch applied to model.py."""
    folder = os.path.join(root, known_bug.id)
    shutil.copytree(os.path.join(reference_dir, 'mingpt'), os.path.join(folder, 'mingpt'),
                    ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    model = os.path.join(folder, 'mingpt', 'model.py')
    with open(model, encoding='utf-8') as f:
        source = f.read()
    with open(model, 'w', encoding='utf-8') as f:
        f.write(known_bugs.apply(known_bug, source))
    return folder


def run_variants(test_source, reference_dir=REFERENCE_DIR, beside=None):
    """
    {known bug id: {case name: {'values': [...], 'signature': [...]}}} on the public cases.
    `beside`: {relative path: text} of the files the tests import from their own folder.
    """
    with tempfile.TemporaryDirectory(prefix='hw1_bugs_') as tmp:
        for rel, text in (beside or {}).items():
            path = os.path.join(tmp, *rel.split('/'))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, 'w', encoding='utf-8') as f:
                f.write(text)
        variants = [(f.id, _variant_folder(tmp, f, reference_dir)) for f in known_bugs.KNOWN_BUGS]
        test_path, out_path = os.path.join(tmp, 'public_tests.py'), os.path.join(tmp, 'variants.json')
        with open(test_path, 'w', encoding='utf-8') as f:
            f.write(test_source)
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
        env.update(PYTHONDONTWRITEBYTECODE='1', OMP_NUM_THREADS='1')
        proc = subprocess.run([sys.executable, '-c', _VARIANTS_SCRIPT, test_path, json.dumps(variants), out_path],
                              cwd=tmp, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)
        if proc.returncode != 0:
            raise RuntimeError('running the known bug variants on the public cases failed:\n%s' % proc.stderr)
        with open(out_path) as f:
            return json.load(f)


def bug_signatures(test_source, expected, tolerances, reference_dir=REFERENCE_DIR, beside=None):
    """
    (likely_bugs, signatures): {known bug id: the grader's sentence naming it (messages.likely_bug)} and
    {case name: [(known bug id, signature)]} for every variant output the public test fails at its
    tolerance (grader_values.tolerances), of at least as many values as the grader names a bug from.
    """
    by_case, fewest = {}, grader_values.rules()['known_bug_min_values']
    for variant_id, outputs in run_variants(test_source, reference_dir, beside).items():
        for name, output in outputs.items():
            if name in expected and len(expected[name][1]) >= fewest and \
                    grader_values.fails(output['values'], expected[name][1], tolerances[name]):
                signature = [float(_DIGITS % v) for v in output['signature']]
                by_case.setdefault(name, []).append((variant_id, signature))
    used = sorted({variant_id for entries in by_case.values() for variant_id, _ in entries})
    likely = {variant_id: messages.likely_bug(known_bugs.BY_ID[variant_id].description, variant_id,
                                              known_bugs.BY_ID[variant_id].note or '') for variant_id in used}
    ordered = {name: by_case[name] for name in expected if name in by_case}
    return likely, ordered
