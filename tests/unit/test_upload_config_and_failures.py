"""
Fast tests of the grader's parts that run no student code: finding model.py in an upload,
validating grading.yaml (each refusal names the file's line), the results.json writer, and
the failures of the grader itself (malformed grading.yaml, stale or corrupt fixtures), which
must still leave a valid results.json with a visible "Autograder error" at 0 and a hidden
traceback for staff.
"""

import json
import os
import re
import subprocess
import zipfile

import numpy as np
import pytest
import yaml

from grader_runs import REPO, AutograderRoot, grading_text, load_results
from autograder import GRADING_YAML
from autograder.judge import config, grade, results, submission
from torch_free import needs_torch

REFERENCE_MODEL = os.path.join(REPO, 'reference', 'mingpt', 'model.py')


def write(path, text='x = 1\n'):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    return path


# ----------------------------------------------------------------------------- submission.locate

@pytest.mark.parametrize('rel', ['mingpt/model.py', 'Model.py', 'model (1).py', 'hw1/mingpt/model.py', 'model_2.py',
                                 'model copy.py'])
def test_locate_finds_model_py_under_other_names(tmp_path, rel):
    write(str(tmp_path / 'up' / rel))
    write(str(tmp_path / 'up' / 'notes.py'))
    got = submission.locate(str(tmp_path / 'up'), str(tmp_path / 'scratch'))
    assert got.problem is None
    assert os.path.samefile(got.path, str(tmp_path / 'up' / rel))
    assert got.note == 'graded %s' % rel


def test_locate_prefers_mingpt_model_py_and_reports_the_others(tmp_path):
    for rel in ('model.py', 'mingpt/model.py', 'old/Model (2).py'):
        write(str(tmp_path / 'up' / rel))
    got = submission.locate(str(tmp_path / 'up'), str(tmp_path / 'scratch'))
    assert got.path == str(tmp_path / 'up' / 'mingpt' / 'model.py')
    # all three hold the same text: copies are harmless, and said so
    assert got.note == 'graded mingpt/model.py; also found, with the same content: model.py, old/Model (2).py'


def test_locate_a_single_file(tmp_path):
    path = write(str(tmp_path / 'whatever.py'))
    got = submission.locate(path, str(tmp_path / 'scratch'))
    assert got.path == path and got.note == 'graded whatever.py'


def test_locate_inside_a_zip(tmp_path):
    z = str(tmp_path / 'up' / 'hw1.zip')
    os.makedirs(os.path.dirname(z))
    with zipfile.ZipFile(z, 'w') as f:
        f.writestr('hw1/mingpt/model.py', 'x = 1\n')
        f.writestr('hw1/chargpt.py', 'y = 2\n')
        f.writestr('__MACOSX/hw1/mingpt/._model.py', 'junk')
        f.writestr('../escape/model.py', 'evil = 1\n')  # never written outside the scratch folder
    scratch = str(tmp_path / 'scratch')
    for target in (z, str(tmp_path / 'up')):  # the zip itself, or a folder holding it
        got = submission.locate(target, scratch)
        assert got.problem is None
        assert got.note == ('graded hw1.zip/hw1/mingpt/model.py (from the zip you uploaded); ignored 1 zip member '
                            'with an unsafe path (absolute or with ..): ../escape/model.py')
        with open(got.path) as f:
            assert f.read() == 'x = 1\n'
    assert not os.path.exists(str(tmp_path / 'escape'))


def test_locate_reports_what_is_missing(tmp_path):
    os.makedirs(str(tmp_path / 'empty'))
    write(str(tmp_path / 'empty' / 'chargpt.py'))
    assert 'no model.py in the submission' in submission.locate(str(tmp_path / 'empty'), str(tmp_path / 's')).problem
    assert 'no submission found' in submission.locate(str(tmp_path / 'nothing'), str(tmp_path / 's')).problem
    bad = write(str(tmp_path / 'bad' / 'hw1.zip'), 'not a zip')
    assert 'could not read hw1.zip' in submission.locate(bad, str(tmp_path / 's')).problem


def test_static_problems():
    assert submission.static_problems(submission.read_upload(REFERENCE_MODEL)) == []


def test_static_problems_name_the_line(tmp_path):
    p = write(str(tmp_path / 'model.py'), 'import torch\n\n\ndef f(:\n    pass\n')
    (msg,) = submission.static_problems(submission.read_upload(p))
    assert msg.startswith('syntax error in model.py line 4')
    p = write(str(tmp_path / 'model.py'), 'import torch\nimport os, socket\nfrom requests import get\n')
    # imports are judged by running them, never refused here
    assert submission.static_problems(submission.read_upload(p)) == []
    p = str(tmp_path / 'latin1.py')
    with open(p, 'wb') as f:
        f.write(b'# caf\xe9\n')
    # where the byte is, what it most likely is, and the fix, then the line itself
    problems = submission.static_problems(submission.read_upload(p))
    assert problems == ['model.py is not UTF-8 text: line 1, column 6 holds the byte 0xe9, which '
                        "is 'é' in the Windows-1252 encoding. Save the file as UTF-8 (in most "
                        'editors: Save with Encoding, UTF-8), or replace that character (a '
                        'straight quote \' or " for a curly one)\n    # café']


def test_import_warnings_cost_nothing_and_say_when_the_import_would_run(tmp_path):
    p = write(str(tmp_path / 'model.py'), 'import torch\nimport subprocess\nimport wandb\n\n'
                                          'def plot():\n    import matplotlib.pyplot as plt\n\n'
                                          'try:\n    import tensorboard\nexcept ImportError:\n    tensorboard = None\n')
    w = submission.import_warnings(submission.read_upload(p))
    assert len(w) == 3, w
    assert w[0].startswith("Warning: model.py line 2 imports 'subprocess', which a model has no use for; it costs "
                           "nothing")
    assert "line 6 imports 'matplotlib.pyplot' inside a function" in w[1]
    assert "line 9 imports 'tensorboard' inside a try/except ImportError" in w[2]
    # a top-level import of a missing module is not a warning: it fails when model.py runs, with its own message
    assert not any('wandb' in line for line in w)
    assert submission.import_warnings(submission.read_upload(REFERENCE_MODEL)) == []


# ----------------------------------------------------------------------------- grading.yaml validation

def lines_of_grading():
    with open(GRADING_YAML) as f:
        return f.read().splitlines(keepends=True)


def yaml_node(lines, *path):
    """(its key node or None, its node) at `path` in grading.yaml's `lines`, found by key, never by value: mapping
    keys, a test by its id, a list item by its index (('tests', 'gqa', 'weight'),
    ('profiles', 'cpu', 'kv_heads', 2))."""
    key, node = None, yaml.compose(''.join(lines))
    for part in path:
        if isinstance(node, yaml.SequenceNode):
            key, node = None, node.value[part] if isinstance(part, int) else next(
                item for item in node.value if any(k.value == 'id' and v.value == part for k, v in item.value))
        else:
            key, node = next((k, v) for k, v in node.value if k.value == part)
    return key, node


def key_line(lines, *path):
    """0-based index of the line of the key at `path` (of a test's first line, for a test)."""
    key, node = yaml_node(lines, *path)
    return (key or node).start_mark.line


def set_value(lines, path, text):
    """The scalar at `path` replaced by `text` where it stands (its line keeps its number); returns that line's
    index."""
    start, end = yaml_node(lines, *path)[1].start_mark, yaml_node(lines, *path)[1].end_mark
    assert start.line == end.line, path
    line = lines[start.line]
    lines[start.line] = line[:start.column] + text + line[end.column:]
    return start.line


def edited(tmp_path, edit):
    """grading.yaml with `edit(lines)` applied; returns (path, the 1-based line `edit` returns)."""
    lines = lines_of_grading()
    line = edit(lines)
    path = str(tmp_path / 'grading.yaml')
    with open(path, 'w') as f:
        f.writelines(lines)
    return path, line


def refused(path):
    with pytest.raises(config.GradingConfigError) as e:
        config.load(path)
    return str(e.value)


def test_the_committed_grading_yaml_loads():
    g = config.load(GRADING_YAML)
    assert {t.id for t in g.tests} == set(config.TEST_IDS)
    assert all(t.tolerance and t.tolerance.why.strip() for t in g.tests if t.id in config.NEEDS_TOLERANCE)


def _unknown_test_key(lines):
    i = key_line(lines, 'tests', 'rope', 'weight')
    lines.insert(i + 1, '    wieght: 5\n')
    return i + 2


def _unknown_top_key(lines):
    lines.append('extras: {colour: red}\n')
    return len(lines)


def _unknown_sandbox_key(lines):
    i = key_line(lines, 'sandbox')
    lines.insert(i + 1, '  gpu_seconds: 10\n')
    return i + 2


def _missing_tolerance(lines):
    start = key_line(lines, 'tests', 'rope')
    tol = key_line(lines, 'tests', 'rope', 'tolerance')
    end = key_line(lines, 'tests', 'rope-cache')
    del lines[tol:end - 1]
    return start + 1


def _missing_why(lines):
    first = yaml_node(lines, 'tests', 'gqa', 'tolerance')[1].value[0][0].start_mark.line   # reported at its first key
    why = key_line(lines, 'tests', 'gqa', 'tolerance', 'why')
    assert why > first and why == yaml_node(lines, 'tests', 'gqa', 'tolerance', 'why')[1].end_mark.line   # one line
    del lines[why]
    return first + 1


def _weight_not_a_number(lines):
    return set_value(lines, ('tests', 'gqa', 'weight'), 'fifteen') + 1


def _timeout_boolean(lines):
    return set_value(lines, ('tests', 'loss-curve', 'timeout'), 'yes') + 1


def _sandbox_limit_a_string(lines):
    return set_value(lines, ('sandbox', 'address_space_mb'), '"lots"') + 1


def _negative_tolerance(lines):
    rtol = yaml_node(lines, 'tests', 'model', 'tolerance', 'rtol')[1].value
    return set_value(lines, ('tests', 'model', 'tolerance', 'rtol'), '-' + rtol) + 1


def _unknown_test_id(lines):
    return set_value(lines, ('tests', 'memory', 'id'), 'memroy') + 1


def _profile_key_typo(lines):
    key = yaml_node(lines, 'profiles', 'cpu', 'loss_curve', 'window')[0]
    i, column = key.start_mark.line, key.start_mark.column
    lines[i] = lines[i][:column] + 'windw' + lines[i][key.end_mark.column:]
    return i + 1


def _profile_value_wrong_type(lines):
    return set_value(lines, ('profiles', 'cpu', 'memory', 'seq'), 'many') + 1


def _profile_key_missing(lines):
    key, value = yaml_node(lines, 'profiles', 'cpu', 'sliding_window', 'memory_margin_mb')
    i = key.start_mark.line
    head = lines[i][:key.start_mark.column].rstrip()
    assert head.endswith(',') and value.end_mark.line == i   # the last key of a flow mapping, after others
    lines[i] = head[:-1] + lines[i][value.end_mark.column:]
    return key_line(lines, 'profiles', 'cpu', 'sliding_window') + 1   # reported at the section's first line


def _profile_list_item(lines):
    return set_value(lines, ('profiles', 'cpu', 'kv_heads', 2), 'three') + 1


@pytest.mark.parametrize('edit, words', [
    (_profile_key_typo, "unknown key 'windw' in profiles.cpu.loss_curve"),
    (_profile_value_wrong_type, "profiles.cpu.memory.seq must be an integer, got 'many'"),
    (_profile_key_missing, "profiles.cpu.sliding_window is missing 'memory_margin_mb'"),
    (_profile_list_item, "profiles.cpu.kv_heads[2] must be an integer, got 'three'"),
    (_unknown_test_key, "unknown key 'wieght' in a test"),
    (_unknown_top_key, "unknown key 'extras' in grading.yaml"),
    (_unknown_sandbox_key, "unknown key 'gpu_seconds' in sandbox"),
    (_missing_tolerance, "test 'rope' compares numbers and needs a tolerance"),
    (_missing_why, "tolerance of gqa is missing 'why'"),
    (_weight_not_a_number, "weight must be an integer or a number, got 'fifteen'"),
    (_timeout_boolean, 'timeout must be an integer or a number, not a boolean'),
    (_sandbox_limit_a_string, "sandbox.address_space_mb must be an integer, got 'lots'"),
    (_negative_tolerance, 'tolerances must be >= 0 (rtol of model)'),
    (_unknown_test_id, "unknown test id 'memroy'"),
], ids=lambda v: v.__name__.strip('_') if callable(v) else None)
def test_config_refuses_with_the_line(tmp_path, edit, words):
    path, line = edited(tmp_path, edit)
    msg = refused(path)
    assert msg.startswith('%s:%d: ' % (path, line)), msg
    assert words in msg, msg


def test_config_refuses_yaml_that_does_not_parse(tmp_path):
    path = write(str(tmp_path / 'grading.yaml'), 'version: 1\ntests: [\n')
    assert 'not valid YAML' in refused(path)


# ----------------------------------------------------------------------------- results.json

def test_error_results_are_valid_and_hide_the_traceback():
    out = results.Results.error('Grading could not run: boom', 'Traceback ...\nValueError: boom', 1.5).to_json()
    results.validate(out)
    visible, staff = out['tests']
    assert (visible['name'], visible['score'], visible['visibility']) == ('Autograder error', 0.0, 'visible')
    assert staff['visibility'] == 'hidden' and 'Traceback' in staff['output']
    assert out['score'] == 0 and isinstance(out['execution_time'], float)


@pytest.mark.parametrize('bad', [
    {'execution_time': '3.2', 'tests': []},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': 1, 'max_score': 1}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': '1', 'max_score': 1, 'status': 'passed'}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': 1, 'max_score': 1, 'status': 'ok'}]},
    {'execution_time': 1, 'tests': [{'name': 'a', 'score': 1, 'max_score': 1, 'status': 'passed', 'visibility': 'x'}]},
    {'execution_time': 1,
     'tests': [{'name': 'a', 'score': 1, 'max_score': 1, 'status': 'passed', 'output': 'x' * 60000}]},
])
def test_validate_refuses(bad):
    with pytest.raises(ValueError):
        results.validate(bad)


def assert_grader_error(out, words):
    results.validate(out)
    assert [t['name'] for t in out['tests']] == ['Autograder error', 'Autograder error: details for staff']
    visible, staff = out['tests']
    assert visible['score'] == 0 and visible['visibility'] == 'visible'
    assert staff['visibility'] == 'hidden' and 'Traceback (most recent call last)' in staff['output']
    assert words in visible['output'], visible['output']
    assert out['score'] == 0


def test_malformed_grading_yaml_still_writes_results(tmp_path):
    lines = grading_text().splitlines(keepends=True)
    set_value(lines, ('tests', 'gqa', 'weight'), '[15')   # no longer YAML
    bad = write(str(tmp_path / 'grading.yaml'), ''.join(lines))
    path = str(tmp_path / 'results' / 'results.json')
    out = grade.grade_results(REFERENCE_MODEL, 'cpu', path, grading_path=bad).to_json()
    assert_grader_error(out, 'Grading could not run')
    assert load_results(path) == json.loads(json.dumps(out))


def test_unknown_profile_still_writes_results(tmp_path):
    path = str(tmp_path / 'results.json')
    out = grade.grade_results(REFERENCE_MODEL, 'tpu', path).to_json()
    assert_grader_error(out, "unknown profile 'tpu'")
    load_results(path)


def test_stale_fixtures_are_refused_with_regenerate(tmp_path):
    needs_torch()   # the grading reaches the zygote's torch
    def change_seed(data):
        data['profiles']['cpu']['seed'] += 1
    yaml_path = write(str(tmp_path / 'grading.yaml'), grading_text(edit=change_seed))
    out = grade.grade_results(REFERENCE_MODEL, 'cpu', str(tmp_path / 'results.json'), grading_path=yaml_path).to_json()
    assert_grader_error(out, "grading.yaml's profiles.cpu changed")
    assert re.search(r'Run `python -m autograder regenerate`', out['tests'][0]['output'])
    load_results(str(tmp_path / 'results.json'))


def test_timeouts_and_weights_change_without_regenerating(tmp_path):
    def edit(data):
        for t in data['tests']:
            t['timeout'] = 7
            t['weight'] = t['weight'] * 2
    g = config.load(write(str(tmp_path / 'grading.yaml'), grading_text(edit=edit)))
    assert g.profile_hash('cpu') == config.load(GRADING_YAML).profile_hash('cpu')


@pytest.mark.lockdown   # an AUTOGRADER_ROOT, open to the sandbox users until its grading locks it (tests/conftest.py)
def test_corrupt_fixtures_through_run_autograder():
    needs_torch()   # the grading reaches the zygote's torch
    root = AutograderRoot()
    try:
        with open(os.path.join(root.source, 'autograder', 'fixtures', 'cpu', 'expected.npz'), 'wb') as f:
            f.write(b'PK\x03\x04 this is no longer a zip')
        root.submit('model.py', open(REFERENCE_MODEL).read())
        out, proc = root.run(timeout=120)
        assert_grader_error(out, 'The autograder failed internally')
        assert 'expected.npz' in out['tests'][1]['output'] or 'zip' in out['tests'][1]['output'].lower()
    finally:
        root.cleanup()


@pytest.mark.lockdown   # an AUTOGRADER_ROOT that no grading ever locks (tests/conftest.py)
def test_run_autograder_last_resort_when_python_cannot_start():
    root = AutograderRoot()
    try:
        root.submit('model.py', 'x = 1\n')
        env = dict(os.environ, AUTOGRADER_ROOT=root.path, PYTHON='/nonexistent/python3')
        env.pop('HW1_SOURCE', None)
        proc = subprocess.run(['bash', os.path.join(REPO, 'run_autograder')], env=env, cwd=root.path,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        assert proc.returncode == 0
        out = load_results(root.results_path)
        assert out['tests'][0]['name'] == 'Autograder error' and out['score'] == 0
    finally:
        root.cleanup()


def test_fixture_arrays_are_plain_numbers():
    base = os.path.join(REPO, 'autograder', 'fixtures', 'cpu')
    for name in ('expected.npz', 'known_bugs.npz'):
        with np.load(os.path.join(base, name), allow_pickle=False) as npz:
            assert all(npz[k].dtype.kind in 'biuf' for k in npz.files)


# ----------------------------------------------------------------------------- the overall time limit

GRADESCOPE_TIMEOUT_S = 600   # the default; past it the student gets no results at all
RESTART_S = 5                # a child restart after a timeout: Python + torch import on a slow core
HARNESS_S = 60               # start-up, fixtures, judging and results around the sandbox, with room to spare


def test_every_probe_hanging_still_fits_gradescopes_timeout():
    """Per-test timeouts add up (a hang in RoPE alone trips nine tests); sandbox.total_seconds caps the sum."""
    g = config.load(GRADING_YAML)
    probes = [t for t in g.enabled_tests() if t.id != 'submission']
    uncapped = sum(t.timeout + RESTART_S for t in probes)
    worst = min(uncapped, g.sandbox['total_seconds'] + RESTART_S)
    assert worst + HARNESS_S <= GRADESCOPE_TIMEOUT_S, 'worst case %d s in the sandbox' % worst
