"""
The import contract: one folder per zone, one rule per zone, read from every import statement
of the package (function-level imports, `__import__` and `importlib.import_module` of a constant
included). Nothing runs back up:

    autograder/contract/   standard library only; loaded by both sides of the wall
    autograder/child/      behind the wall: itself, the contract, torch/numpy/einops and the student's code
    autograder/sandbox/    the wall: itself, the contract, the package's path constants; never torch,
                           never grading.yaml (its caller hands it its settings)
    autograder/judge/      the harness: itself, the sandbox, the contract; never torch, child or staff
    autograder/staff/      staff tools: anything; nothing outside staff/ imports them

and within the harness, loading grading.yaml (config) loads no judge, and the module graph has no
cycle; no module imports a private name (one starting with `_`) of another.
"""

import ast
import os
import subprocess
import sys

import pytest

from autograder import PACKAGE_DIR, REPO_ROOT

STDLIB = set(sys.stdlib_module_names)
ROOT_CONSTANTS = {'PACKAGE_DIR', 'REPO_ROOT', 'REFERENCE_DIR', 'TEMPLATE_DIR', 'FIXTURES_DIR', 'COURSE_DIR',
                  'GRADING_YAML', 'DATA_FILE'}
# zone -> (the zones of autograder it may import, the third-party packages it may import)
ZONES = {
    'contract': ({'contract'}, set()),
    'child': ({'child', 'contract'}, {'torch', 'numpy', 'einops', 'mingpt', 'chargpt'}),
    'sandbox': ({'sandbox', 'contract', 'root'}, {'numpy'}),
    'judge': ({'judge', 'sandbox', 'contract', 'root'}, {'numpy', 'yaml'}),   # gradescope-utils: tests' oracle only
}
ALL_ZONES = {'contract', 'child', 'sandbox', 'judge', 'staff', 'root'}


def _module_name(path):
    rel = os.path.relpath(path, REPO_ROOT)[:-3].replace(os.sep, '.')
    return rel[:-len('.__init__')] if rel.endswith('.__init__') else rel


def package_modules():
    """{dotted name: path} of every module of the autograder package."""
    out = {}
    for root, dirs, files in os.walk(PACKAGE_DIR):
        dirs[:] = sorted(d for d in dirs if d not in ('__pycache__', 'fixtures') or root != PACKAGE_DIR)
        for f in files:
            if f.endswith('.py'):
                out[_module_name(os.path.join(root, f))] = os.path.join(root, f)
    return out


MODULES = package_modules()


def imports_of(name, path):
    """(imported dotted name, line) of every import in a module, relative ones resolved."""
    with open(path, encoding='utf-8') as f:
        tree = ast.parse(f.read())
    package = name if path.endswith('__init__.py') else name.rpartition('.')[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                base = '.'.join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            for a in node.names:   # `from pkg import submodule` imports the submodule
                yield (base + '.' + a.name if base + '.' + a.name in MODULES else base), node.lineno
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and (getattr(node.func, 'id', '') == '__import__' or getattr(node.func, 'attr', '') == 'import_module'):
            yield str(node.args[0].value), node.lineno


def zone_of(dotted):
    parts = dotted.split('.')
    if parts[0] != 'autograder':
        return None
    if len(parts) == 1 or parts[1] in ('__main__',):
        return 'root'
    return parts[1] if parts[1] in ALL_ZONES else 'root'


@pytest.mark.parametrize('zone', sorted(ZONES))
def test_each_zone_imports_only_what_its_rule_allows(zone):
    may, third_party = ZONES[zone]
    wrong = []
    for name, path in sorted(MODULES.items()):
        if zone_of(name) != zone:
            continue
        for imported, line in imports_of(name, path):
            target = zone_of(imported)
            top = imported.split('.')[0]
            if target is None:
                ok = top in STDLIB or top in third_party
            else:
                ok = target in may
            if ok and target == 'root' and imported == 'autograder':
                ok = True   # the path constants of autograder/__init__.py (resolved submodules are zones)
            if not ok:
                wrong.append('%s:%d imports %s' % (os.path.relpath(path, REPO_ROOT), line, imported))
    assert not wrong, 'zone %s breaks its import rule:\n  %s' % (zone, '\n  '.join(wrong))


def test_the_package_root_holds_only_path_constants_and_the_command_line():
    assert {n for n in MODULES if zone_of(n) == 'root'} == {'autograder', 'autograder.__main__'}
    with open(os.path.join(PACKAGE_DIR, '__init__.py')) as f:
        tree = ast.parse(f.read())
    assigned = {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}
    assert assigned == ROOT_CONSTANTS


def test_nothing_outside_staff_imports_the_staff_tools():
    wrong = ['%s imports %s' % (name, imported) for name, path in MODULES.items()
             if zone_of(name) not in ('staff', 'root') for imported, _ in imports_of(name, path)
             if zone_of(imported) == 'staff']
    assert not wrong, wrong


def test_the_sandbox_imports_nothing_of_the_judge():
    # the zone rule above says so too; named here: the harness drives the sandbox, never the reverse
    wrong = ['%s:%d imports %s' % (name, line, imported) for name, path in MODULES.items()
             if zone_of(name) == 'sandbox' for imported, line in imports_of(name, path)
             if zone_of(imported) == 'judge']
    assert not wrong, wrong


def test_the_sandbox_calls_back_into_nothing():
    """The harness drives a grading session one process at a time (its loop: probe_job.execute): no
    public method of Sandbox, GradingSession or ProbeRun takes a callable, and no ProbeJob field is
    one. What a process asks over its harness link is handed to the harness (ProbeRun yields each
    LinkRequest, takes a LinkAnswer), so the sandbox calls none of the harness's code."""
    import dataclasses
    import inspect
    from autograder.sandbox import GradingSession, LinkAnswer, LinkRequest, ProbeJob, ProbeRun, Sandbox
    taken = {}
    for cls in (Sandbox, GradingSession, ProbeRun):
        for name, member in vars(cls).items():
            if callable(member) and (not name.startswith('_') or name == '__init__'):
                params = inspect.signature(member).parameters.values()
                taken['%s.%s' % (cls.__name__, name)] = [
                    p.name for p in params if p.name != 'self' and (
                        p.default is not p.empty and callable(p.default)
                        or p.name in CALLBACK_NAMES or p.name.startswith('on_'))]
    assert {k: v for k, v in taken.items() if v} == {}, taken
    for value in (ProbeJob, LinkRequest, LinkAnswer):
        typed = [f.name for f in dataclasses.fields(value) if 'Callable' in str(f.type)]
        assert typed == [], (value.__name__, typed)


def test_the_sandbox_package_names_no_callable_of_the_judge():
    # the link's questions go up, answers come down as values: nothing of the sandbox's source holds a handler
    offenders = ['%s:%d' % (name, n) for name, path in MODULES.items() if zone_of(name) == 'sandbox'
                 for n, line in enumerate(open(path, encoding='utf-8'), 1) if 'handler(' in line
                 and 'signal' not in line and 'faulthandler' not in line]
    assert offenders == [], offenders


CALLBACK_NAMES = {'handler', 'service', 'answer', 'skip', 'progress', 'callback', 'observe', 'on_result'}


def test_the_contract_modules_stand_alone():
    # the students' memory helper and the zygote load them one by one: no import of each other either
    for name, path in MODULES.items():
        if zone_of(name) == 'contract':
            for imported, line in imports_of(name, path):
                assert imported.split('.')[0] in STDLIB, '%s:%d imports %s' % (name, line, imported)


def test_loading_grading_yaml_loads_no_judge_and_the_judge_loads_no_torch():
    code = ('import sys; from autograder.judge import config; config.load(); a = set(sys.modules); '
            'from autograder.judge import grade; b = set(sys.modules); '
            'print(sorted(m for m in a if m.startswith("autograder.judge.areas"))); '
            'print(sorted(m for m in b if m == "torch" or m.startswith(("autograder.staff", "autograder.child"))))')
    proc = subprocess.run([sys.executable, '-c', code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split('\n')[:2] == ['[]', '[]'], proc.stdout


def test_the_registry_is_standard_library_only():
    # config.py reads it: its entries only name their judges ('values:judge_values'); verdicts.py
    # imports them
    path = MODULES['autograder.judge.registry']
    for imported, line in imports_of('autograder.judge.registry', path):
        assert imported.split('.')[0] in STDLIB, 'registry.py:%d imports %s' % (line, imported)


def test_the_package_has_no_import_cycle():
    graph = {name: {i for i, _ in imports_of(name, path) if i in MODULES and i != name}
             for name, path in MODULES.items()}
    # a package's __init__ re-exporting its own modules is not a cycle of code
    for name in graph:
        graph[name] = {i for i in graph[name] if not (name.startswith(i + '.') and MODULES[i].endswith('__init__.py'))}
    state, stack = {}, []

    def visit(n):
        state[n] = 'open'
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 'open':
                raise AssertionError('import cycle: ' + ' -> '.join(stack[stack.index(m):] + [m]))
            if m not in state:
                visit(m)
        stack.pop()
        state[n] = 'done'

    for n in sorted(graph):
        if n not in state:
            visit(n)


def test_no_private_name_crosses_a_module():
    # a name starting with '_' is its module's own: another module that needs it gets a public name
    wrong = []
    for name, path in sorted(MODULES.items()):
        with open(path, encoding='utf-8') as f:
            tree = ast.parse(f.read())
        package = name if path.endswith('__init__.py') else name.rpartition('.')[0]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ''
            if node.level:
                parts = package.split('.')
                base = '.'.join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            if zone_of(base) is None or base == name:
                continue
            where = '%s:%d' % (os.path.relpath(path, REPO_ROOT), node.lineno)
            wrong += ['%s imports %s from %s' % (where, a.name, base)
                      for a in node.names if a.name.startswith('_') and not a.name.endswith('__')]
    assert not wrong, 'private names imported from another module:\n  ' + '\n  '.join(wrong)
