"""
The student handout as a build product of the staff reference.

    python -m autograder build-template [--check] [--out DIR]
    python -m autograder build-handout [--out ZIP]

build-template turns reference/ into student_template/hw1/: solution markers are stripped
(see strip_markers), the hand-written files of student_template/templates/ are added, and
the public tests get their expected values, computed from the reference in a subprocess so that
the reference's `mingpt` package never meets the template's, and the signatures of the grader's
known bugs on the same public inputs (public_known_bugs.py), in the data file
test_model_expected.json. grader_rules.py and memory_check.py (handout_memory.py) receive the
grader's own code for the upload rules, the layer matching and the memory contract.

The handout's root holds what the course's starter holds (mingpt/, chargpt.py, a README,
requirements.txt, the plotting helper) and one short public test file, test_model.py; what exists
only to carry the grader's rules sits in tests/_support/ (SUPPORT_DIR): public_checks.py (the
tests' inputs, cases, comparisons and runner wrapper), grader_rules.py, memory_check.py and
test_model_expected.json. test_model.py puts that folder on sys.path and imports from it.
--check regenerates into a temporary folder and fails if the committed template differs.

build-handout zips the generated template plus the corpus into dist/hw1_handout.zip.
"""

import argparse
import inspect
import io
import json
import os
import subprocess
import sys
import tempfile
import zipfile

from autograder import DATA_FILE, GRADING_YAML, REFERENCE_DIR, REPO_ROOT, TEMPLATE_DIR
from autograder.staff.handout import grader_values, handout_memory, public_known_bugs
from autograder.staff.handout.markers import (OPTIONAL_PARTS, MarkerError, has_markers, solution_lines,  # noqa: F401
                                              strip_markers)

TEMPLATES_DIR = os.path.join(REPO_ROOT, 'student_template', 'templates')
HANDOUT_ZIP = os.path.join(REPO_ROOT, 'dist', 'hw1_handout.zip')

# reference files shipped to students, processed for markers (copied verbatim if they have none)
REFERENCE_FILES = ['chargpt.py', 'mingpt/__init__.py', 'mingpt/model.py', 'mingpt/preflight.py', 'mingpt/trainer.py',
                   'mingpt/utils.py']
# where the public tests' machinery and the grader's rules sit in the handout, out of the student's way
SUPPORT_DIR = 'tests/_support/'
GRADER_RULES = SUPPORT_DIR + 'grader_rules.py'
MEMORY_CHECK = SUPPORT_DIR + 'memory_check.py'
PUBLIC_CHECKS = SUPPORT_DIR + 'public_checks.py'
# the public tests' reference values, written beside the machinery that reads them
EXPECTED_FILE = SUPPORT_DIR + 'test_model_expected.json'
# hand-written files of student_template/templates/ (the same paths there), also processed for markers
TEMPLATE_FILES = ['README.md', 'plot_logs.py', 'requirements.txt', 'test_model.py', GRADER_RULES, PUBLIC_CHECKS]
# what students read, kept free of the grader's words (handout_memory.GRADER_WORDS)
STUDENT_READS = ('README.md', 'test_model.py', GRADER_RULES, MEMORY_CHECK, PUBLIC_CHECKS, EXPECTED_FILE)

# the placeholders in templates/tests/_support/grader_rules.py that the generator fills in with the grader's own code
PLAN_PLACEHOLDER = "PROJECTION_PLAN = None  # filled in by build-template: the grader's layer matching\n"
RULES_PLACEHOLDER = ('UPLOAD_RULES = None  # filled in by build-template: the grader\'s own checks '
                     '(submission.py, interface_check.py)\n')


def _upload_rules_source():
    """
    The grader's own upload checks, copied so that the public tests and test 1.1 say the same:
    size (locating.py) and decoding (submission.py), the handout interface and 'nothing to grade' (interface_check.py).
    """
    from autograder.judge import interface_check, locating, submission
    parts = ["# copied by build-template from the grader's submission.py and interface_check.py: do not edit here",
             'MAX_MODEL_BYTES = %d' % submission.MAX_MODEL_BYTES,
             'INTERFACE = %r' % (interface_check.INTERFACE,),
             '_MODULE_BASES = frozenset(%r)' % sorted(interface_check._MODULE_BASES)]
    functions = (locating.too_large, submission._line_of, submission.not_utf8,
                 submission.read_source, submission.decode, submission.imported_names,
                 interface_check._names_defined, interface_check._classes,
                 interface_check._has_method, interface_check.missing, interface_check.missing_in,
                 interface_check.nothing_to_grade, interface_check.nothing_to_grade_in)
    return '\n'.join(parts) + '\n\n\n' + '\n\n'.join(handout_memory.code_only(inspect.getsource(f)) for f in functions)


def _projection_plan_source():
    """The grader's own layer matching (autograder/child/adapter.py), copied so public tests and grader agree."""
    from autograder.child import adapter
    body = '\n\n'.join(handout_memory.code_only(inspect.getsource(f))
                       for f in (adapter._role_hint, adapter.plan_projections))
    return '# copied by build-template from autograder/child/adapter.py: do not edit here\n' + body

# ----------------------------------------------------------------------------- configuration


def load_optional_parts(path=GRADING_YAML):
    """grading.yaml handout.optional_parts (config.load validates it), each known part defaulting to on."""
    from autograder.judge import config
    parts = dict.fromkeys(OPTIONAL_PARTS, True)
    parts.update(config.load(path).handout['optional_parts'])
    return parts

# ----------------------------------------------------------------------------- generation


def _read(path):
    with open(path, encoding='utf-8', newline='') as f:
        return f.read()


def _rounded(values):
    # 7 significant digits of float64 results: far below the tests' 1e-5 tolerance, and float64
    # noise (~1e-16) practically never crosses a rounding boundary, so the file is the same on every CPU
    return [float('%.7g' % v) for v in values]


def expected_data(computed, likely, signatures, tolerances, rules):
    """
    test_model_expected.json: one line per case, parameter, tolerance and known bug, so that a change reads as a
    small diff; the tolerances and rules are the grader's (grader_values), never written by hand in the handout.
    """
    sections = {'expected': [(name, [shape, _rounded(values)])
                             for name, (shape, values) in computed['expected'].items()],
                'gpt_parameters': None, 'tolerances': list(tolerances.items()), 'rules': list(rules.items()),
                'words': list(grader_values.words().items()), 'likely_bugs': list(likely.items()),
                'bug_signatures': list(signatures.items())}
    parts = []
    for key, items in sections.items():
        if items is None:
            rows = ',\n'.join('  ' + json.dumps(row) for row in computed['parameters'])
            parts.append(' %s: [\n%s\n ]' % (json.dumps(key), rows))
        else:
            rows = ',\n'.join('  %s: %s' % (json.dumps(k), json.dumps(v)) for k, v in items)
            parts.append(' %s: {\n%s\n }' % (json.dumps(key), rows))
    return '{\n' + ',\n'.join(parts) + '\n}\n'


# loads the public tests as a student runs them (they put SUPPORT_DIR on the path), then asks their machinery
_EXPECTED_SCRIPT = '''
import importlib.util, json, sys
import torch
torch.set_num_threads(1)
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location('hw1_public_tests', sys.argv[2])
tests = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tests)
json.dump(sys.modules['public_checks'].compute_expected(), sys.stdout)
'''


def compute_expected(test_source, reference_dir=REFERENCE_DIR, beside=None):
    """
    Run the public tests' cases on the reference in a fresh interpreter (float64) and return
    {'expected': {name: (shape, values)}, 'parameters': [(name, shape)]}. `beside`: {relative
    path: text} of the files the tests import from SUPPORT_DIR (public_checks.py, grader_rules.py, memory_check.py).
    """
    with tempfile.TemporaryDirectory(prefix='hw1_expected_') as tmp:
        write_tree(beside or {}, tmp)
        path = os.path.join(tmp, 'public_tests.py')
        with open(path, 'w', encoding='utf-8') as f:
            f.write(test_source)
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
        env.update(PYTHONDONTWRITEBYTECODE='1', OMP_NUM_THREADS='1')
        proc = subprocess.run([sys.executable, '-c', _EXPECTED_SCRIPT, reference_dir, path], cwd=tmp, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if proc.returncode != 0:
        raise RuntimeError('computing the public tests\' expected values on the reference failed:\n%s' % proc.stderr)
    result = json.loads(proc.stdout)
    for name, (_, values) in result['expected'].items():
        if not all(abs(v) < float('inf') for v in values):
            raise RuntimeError('the reference gives non-finite values for public test case %r' % name)
    return result


def generate(optional_parts=None):
    """The student template as {relative path: text}, in a fixed order."""
    optional_parts = load_optional_parts() if optional_parts is None else optional_parts
    files = {}
    for rel in REFERENCE_FILES:
        text = _read(os.path.join(REFERENCE_DIR, rel))
        files[rel] = strip_markers(text, 'reference/' + rel, optional_parts) if has_markers(text) else text
    for rel in TEMPLATE_FILES:
        text = _read(os.path.join(TEMPLATES_DIR, *rel.split('/')))
        files[rel] = strip_markers(text, 'student_template/templates/' + rel, optional_parts)

    rules = files[GRADER_RULES]
    for placeholder in (PLAN_PLACEHOLDER, RULES_PLACEHOLDER):
        if rules.count(placeholder) != 1:
            raise ValueError('student_template/templates/%s must contain the line %r exactly once'
                             % (GRADER_RULES, placeholder.strip()))
    rules = rules.replace(PLAN_PLACEHOLDER, _projection_plan_source())
    files[GRADER_RULES] = rules.replace(RULES_PLACEHOLDER, _upload_rules_source())
    files[MEMORY_CHECK] = handout_memory.memory_module(_read(os.path.join(TEMPLATES_DIR, *MEMORY_CHECK.split('/'))))
    beside = {rel: files[rel] for rel in (PUBLIC_CHECKS, GRADER_RULES, MEMORY_CHECK)}
    computed = compute_expected(files['test_model.py'], beside=beside)
    tolerances = grader_values.tolerances(computed['expected'])
    likely, signatures = public_known_bugs.bug_signatures(files['test_model.py'], computed['expected'], tolerances,
                                                          beside=beside)
    files[EXPECTED_FILE] = expected_data(computed, likely, signatures, tolerances, grader_values.rules())
    for rel in STUDENT_READS:
        found = sorted({m.group(0).lower() for m in handout_memory.GRADER_WORDS.finditer(files[rel])})
        if found:
            raise ValueError('the handout\'s %s would show students the grader words %s' % (rel, ', '.join(found)))
    return files


def write_tree(files, out_dir):
    for rel, text in files.items():
        path = os.path.join(out_dir, *rel.split('/'))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w', encoding='utf-8', newline='') as f:
            f.write(text)


def _tree_files(root):
    """Relative paths of the files under root, minus caches a test run leaves behind."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ('__pycache__', '.pytest_cache'))
        for name in filenames:
            if not name.endswith('.pyc'):
                found.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, '/'))
    return sorted(found)


def diff_files(files, directory):
    """Paths where `directory` differs from the generated `files` (missing, extra or other bytes)."""
    on_disk = set(_tree_files(directory)) if os.path.isdir(directory) else set()
    differing = set(on_disk ^ set(files))
    for rel in on_disk & set(files):
        with open(os.path.join(directory, *rel.split('/')), 'rb') as f:
            if f.read() != files[rel].encode('utf-8'):
                differing.add(rel)
    return sorted(differing)


def build_template(out_dir=TEMPLATE_DIR, optional_parts=None):
    """Regenerate the template into out_dir, removing files the generator no longer writes."""
    files = generate(optional_parts)
    if os.path.isdir(out_dir):
        for rel in _tree_files(out_dir):
            if rel not in files:
                os.remove(os.path.join(out_dir, *rel.split('/')))
    write_tree(files, out_dir)
    return sorted(files)


def check_template(template_dir=TEMPLATE_DIR, optional_parts=None):
    """Paths of template_dir that differ from a fresh generation (empty when up to date)."""
    return diff_files(generate(optional_parts), template_dir)

# ----------------------------------------------------------------------------- handout zip


def build_handout(output=HANDOUT_ZIP, data_file=DATA_FILE, template_dir=TEMPLATE_DIR):
    """
    Write the handout zip: hw1/<template files> and hw1/input.txt, byte-for-byte reproducible.
    It is built from a fresh generation and refused if the committed template is stale, so
    what students download is always what the repository shows.
    """
    if not os.path.isfile(data_file):
        raise FileNotFoundError('%s is missing: run ./setup.sh to build the Shakespeare corpus first.' % data_file)
    files = generate()
    stale = diff_files(files, template_dir)
    if stale:
        raise RuntimeError('student_template/hw1 differs from the reference (%s): run `python -m autograder '
                           'build-template` and commit the result before building the handout.' % ', '.join(stale))
    entries = {'hw1/' + rel: text.encode('utf-8') for rel, text in files.items()}
    with open(data_file, 'rb') as f:
        entries['hw1/input.txt'] = f.read()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, 'w', zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # fixed time: same bytes every build
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # unix, whatever machine builds it
            zf.writestr(info, entries[name])
    with open(output, 'wb') as f:
        f.write(buffer.getvalue())
    return sorted(entries)

# ----------------------------------------------------------------------------- command line


def main(argv):
    command, args = argv[0], argv[1:]
    parser = argparse.ArgumentParser(prog='python -m autograder %s' % command)
    try:
        if command == 'build-template':
            parser.description = 'Regenerate student_template/hw1 from reference/ and student_template/templates/.'
            parser.add_argument('--check', action='store_true', help='regenerate into a temporary folder and '
                                'exit 1 listing the files that differ from the committed template')
            parser.add_argument('--out', '--output', dest='output', default=TEMPLATE_DIR,
                                help='folder to write (default: %(default)s)')
            opts = parser.parse_args(args)
            if opts.check:
                differing = check_template(opts.output)
                if differing:
                    print('student_template is out of date with the reference; differing files:', file=sys.stderr)
                    for rel in differing:
                        print('  ' + rel, file=sys.stderr)
                    print('run `python -m autograder build-template` and commit the result', file=sys.stderr)
                    return 1
                print('student_template/hw1 is up to date')
                return 0
            written = build_template(opts.output)
            print('wrote %d files to %s' % (len(written), opts.output))
            return 0
        if command == 'build-handout':
            parser.description = 'Write the student handout zip (generated template plus input.txt).'
            parser.add_argument('--out', '--output', dest='output', default=HANDOUT_ZIP,
                                help='zip to write (default: %(default)s)')
            opts = parser.parse_args(args)
            names = build_handout(opts.output)
            print('wrote %s (%d files)' % (opts.output, len(names)))
            return 0
    except (MarkerError, FileNotFoundError, RuntimeError, ValueError) as e:
        print('error: %s' % e, file=sys.stderr)
        return 1
    parser.error('unknown command %r' % command)
