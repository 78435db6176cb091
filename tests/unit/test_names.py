"""
Names say what things are, one name per idea (issue 34): the module names of the sandbox say
what they hold, `run` names no function of the package (each says what it runs), and a
profile's name (the string 'cpu' or 'gpu') is `profile_name` where a `profile` is the Profile.
Read from the source (ast) and the signatures, so that a later change keeps them.
"""

import ast
import inspect
import os

import re

import pytest

from autograder import PACKAGE_DIR, REPO_ROOT

# functions or methods of autograder/ that may be named exactly `run`, each with the outside API
# that demands the name; none does today (minGPT's Trainer.run and subprocess.run are not ours)
RUN_ALLOWED = {}


def _sources():
    """{path relative to the package: parsed module} of every module of autograder/."""
    out = {}
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        for f in sorted(files):
            if f.endswith('.py'):
                path = os.path.join(root, f)
                with open(path, encoding='utf-8') as fh:
                    out[os.path.relpath(path, PACKAGE_DIR)] = ast.parse(fh.read(), path)
    return out


SOURCES = _sources()


def _functions():
    """(module, function name, node) of every function and method of the package."""
    for rel, tree in SOURCES.items():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield rel, node.name, node


@pytest.mark.parametrize('old', ['sandbox/grading.py', 'sandbox/zygote.py', 'judge/judges'])
def test_the_renamed_modules_stay_renamed(old):
    # sandbox/session.py holds Sandbox and its GradingSession; sandbox/zygote_handle.py is the
    # harness's handle on the zygote (child/zygote.py is the zygote itself); judge/areas/ holds
    # one module of verdict functions per area
    assert not os.path.exists(os.path.join(PACKAGE_DIR, *old.split('/'))), old


def test_no_function_is_named_run_where_no_outside_api_demands_it():
    found = sorted('%s:%d' % (rel, node.lineno) for rel, name, node in _functions()
                   if name == 'run')
    assert found == sorted(RUN_ALLOWED), 'functions named `run` (say what they run): %s' % found


def test_no_parameter_named_profile_holds_a_profile_name():
    # a `profile` parameter with a string default ('cpu') is a profile's name: call it profile_name
    found = []
    for rel, name, node in _functions():
        args = node.args.posonlyargs + node.args.args
        names = [a.arg for a in args][len(args) - len(node.args.defaults):]
        defaults = dict(zip(names, node.args.defaults))
        defaults.update((a.arg, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults)
                        if d)
        d = defaults.get('profile')
        if isinstance(d, ast.Constant) and isinstance(d.value, str):
            found.append('%s:%s' % (rel, name))
    assert found == []


def test_the_grading_entry_points_take_a_profile_name():
    from autograder.judge import fixtures, grade
    from autograder.staff.evaluation import evaluate
    from autograder.staff.regrade import batch, plots, worker_pool
    takers = [grade.grade_results, grade.Judging.__init__, fixtures.load,
              fixtures.load_for_grading, fixtures.folder, evaluate.evaluate, batch.Batch.__init__,
              plots.loss_curve_png, worker_pool.grade_job, worker_pool.Engine.__init__]
    for f in takers:
        params = inspect.signature(f).parameters
        assert 'profile_name' in params and 'profile' not in params, f.__qualname__


def test_one_name_each_for_what_was_called_run_and_judge():
    from autograder.judge import grade, results, verdicts
    from autograder.sandbox import probe
    # the child's runner imports torch: read its functions from the source (this file runs torch-free
    # under Python 3.10 too, .ci/py310_unit_tests)
    with open(os.path.join(PACKAGE_DIR, 'child', 'runner.py')) as f:
        runner_functions = {n.name for n in ast.parse(f.read()).body if isinstance(n, ast.FunctionDef)}
    assert callable(probe.watch) and 'run_probe' in runner_functions and 'run' not in runner_functions
    assert callable(results.Results.from_verdicts) and callable(verdicts.verdict_for)
    assert not hasattr(verdicts, 'judge') and not hasattr(results.Results, 'run')
    assert 'verdict_of' in inspect.signature(results.Results.from_verdicts).parameters
    # Judging's RunResult is `run_result`; `run_probes` is the method that makes it
    source = inspect.getsource(grade.Judging)
    assert 'self.run_result = ' in source and 'self.run = ' not in source


def test_no_function_takes_a_dozen_parameters():
    """The issue found Sandbox.run, _run_locked and probe.run taking 12 each: a value (ProbeJob, Deadlines,
    RunPlan) says what belongs together. At most 9 (self not counted); the most today: probe.watch, probe_job.plan."""
    most = []
    for folder, _, files in os.walk(PACKAGE_DIR):
        for name in [f for f in files if f.endswith('.py')]:
            with open(os.path.join(folder, name), encoding='utf-8') as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    a = node.args
                    count = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
                    count -= bool(a.args and a.args[0].arg in ('self', 'cls'))
                    if count > 9:
                        most.append('%s: %s (%d)' % (name, node.name, count))
    assert most == [], most


# One name for each thing (docs/ARCHITECTURE.md, "Names"): the retired words stay out of the code,
# grading.yaml, the docs and the handout. Student code (the corpora's submissions, the hostile attacks) is
# left out: an attack may look for names the grader no longer has.
# word -> the name that replaced it (what the failure says)
RETIRED = {
    r'[Ss]tand-?[Ii]ns?(?![a-z])': 'the grader\'s RoPE / set aside (stand-ins were removed)',
    r'(?i)\bcascade': 'set aside (judge/set_aside.py; grading.yaml set_aside)',
    r'(?i)\binsulat': 'set aside (grading.yaml set_aside: on_evidence)',
    r'GQA_FALLBACK|(?i:\bGQA fallback)': 'GQA_SET_ASIDE',
    r'part_reruns': 'part_tests_again',
    r'\bfp_|\bfps\b': 'known bug (bug, bug_outputs)',
    r'\b[Tt]he judge\b(?! of\b)(?!/)': 'the harness (a test\'s judge is "the judge of test N")',
}
ROOTS = ('autograder', 'docs', 'bench', 'tests', 'reference', 'student_template', 'grading.yaml', 'README.md')
SKIP = ('tests/submissions/', 'tests/hostile/', 'tests/unit/test_names.py')
SUFFIXES = ('.py', '.md', '.yaml', '.yml', '.txt', '.json', '.cfg', '.toml', '.sh')


def texts():
    for root in ROOTS:
        path = os.path.join(REPO_ROOT, root)
        walk = [(os.path.dirname(path), [], [os.path.basename(path)])] if os.path.isfile(path) else os.walk(path)
        for folder, _, files in walk:
            for name in files:
                full = os.path.join(folder, name)
                rel = os.path.relpath(full, REPO_ROOT)
                if rel.endswith(SUFFIXES) and not rel.startswith(SKIP) and '__pycache__' not in rel:
                    with open(full, encoding='utf-8', errors='replace') as f:
                        yield rel, f.read()


def test_no_retired_word_is_left():
    found = []
    for rel, text in texts():
        for word, instead in RETIRED.items():
            for m in re.finditer(word, text):
                line = text.count('\n', 0, m.start()) + 1
                if rel == 'docs/ARCHITECTURE.md' and text.split('\n')[line - 1].startswith('| **'):
                    continue   # the glossary's rows name the words they retire
                found.append('%s:%d: %r (say: %s)' % (rel, line, m.group(0), instead))
    assert not found, '%d retired words:\n' % len(found) + '\n'.join(found[:60])


def test_the_check_finds_each_retired_word():
    # each pattern matches the word it retires, and not the words that stay
    samples = {'stand-in': True, "stand-ins' code": True, 'StandInRoPE': True, 'standing': False,
               'stands in for': False,
               'the cascade': True, 'Cascade.plan': True, 'insulate': True, 'GQA_FALLBACK': True,
               'part_reruns': True, 'fp_outputs': True, 'the judge decides': True,
               'the judge of test 4.1': False, 'judge/grade.py': False, 'the harness': False}
    for text, retired in samples.items():
        hit = any(re.search(w, text) for w in RETIRED)
        assert hit == retired, text
