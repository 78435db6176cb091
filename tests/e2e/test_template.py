"""
The student handout as a build product of the reference (autograder/staff/handout/build.py):
the committed student_template/hw1 is what the generator makes, no solution text leaks,
marker mistakes are reported with file and line, the public tests pass on the reference
and report every TODO on the untouched template, a chargpt.py flag that needs a TODO names
it (and leaves no folder), and the handout zip is complete and reproducible.
"""

import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from autograder import DATA_FILE, REFERENCE_DIR, TEMPLATE_DIR
from autograder.staff.handout import build
from autograder.staff.handout.build import MarkerError, strip_markers

TINY = ['--trainer.max_iters=5', '--trainer.device=cpu', '--model.n_layer=1', '--model.n_embd=48',
        '--trainer.batch_size=8', '--data.block_size=16']
SUMMARY = re.compile(r'(\d+) passed, (\d+) failed, (\d+) not implemented yet, (\d+) errors, '
                     r'(\d+) not attempted \(optional\) \(of (\d+)\)')


@pytest.fixture(scope='module')
def generated():
    return build.generate()


def _run(args, cwd, timeout=300, **env):
    full_env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'HW1_DATA')}
    full_env.update(PYTHONDONTWRITEBYTECODE='1', **env)
    return subprocess.run(args, cwd=str(cwd), env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout)


def _template_copy(tmp_path, model=None, with_data=True):
    """A copy of the committed template, optionally with another model.py and input.txt beside chargpt.py."""
    hw1 = tmp_path / 'hw1'
    shutil.copytree(TEMPLATE_DIR, str(hw1), ignore=shutil.ignore_patterns('__pycache__', '*.pyc'))
    if model is not None:
        shutil.copy(model, str(hw1 / 'mingpt' / 'model.py'))
    if with_data:
        os.symlink(DATA_FILE, str(hw1 / 'input.txt'))
    return hw1

# ----------------------------------------------------------------------------- generation


def test_committed_template_is_up_to_date(generated):
    # the committed tree was written by an earlier process: equal bytes also show determinism
    stale = build.diff_files(generated, TEMPLATE_DIR)
    assert stale == [], 'student_template/hw1 is stale (%s): run `python -m autograder build-template`' % stale


def test_handout_values_are_grading_yamls_and_the_graders(generated):
    # the tolerances, known-bug rules and words of the public tests are generated (grader_values), never written
    # in the handout's code: a tolerance changed in grading.yaml makes the committed template stale (above)
    import json
    from autograder import GRADING_YAML
    from autograder.judge import config
    from autograder.judge.areas import values
    from autograder.staff.handout import grader_values
    data, grading = json.loads(generated[build.EXPECTED_FILE]), config.load(GRADING_YAML)
    assert set(data['tolerances']) == set(data['expected']) | set(grader_values.CHECKS)
    for name, tolerance in data['tolerances'].items():
        tol = grading.test(grader_values.graded_test(name)).tolerance
        assert tolerance == ([tol.atol, tol.rtol] if tol is not None else [0.0, 0.0]), name
    assert data['rules']['known_bug_slack'] == values.KNOWN_BUG_SLACK
    assert all(len(data['expected'][name][1]) >= values.KNOWN_BUG_MIN_VALUES for name in data['bug_signatures'])
    for rel in (build.PUBLIC_CHECKS, 'test_model.py'):
        assert not re.search(r'\b(ATOL\w*|SIGNATURE_ATOL|MIN_GRID|GRID_SHARE|GRID_RTOL)\s*=|atol=\d',
                             generated[rel]), rel


def test_shipped_files(generated):
    assert sorted(generated) == ['README.md', 'chargpt.py',
                                 'mingpt/__init__.py', 'mingpt/model.py', 'mingpt/preflight.py', 'mingpt/trainer.py',
                                 'mingpt/utils.py',
                                 'plot_logs.py', 'requirements.txt', 'test_model.py',
                                 'tests/_support/grader_rules.py', 'tests/_support/memory_check.py',
                                 'tests/_support/public_checks.py', 'tests/_support/test_model_expected.json']
    with open(os.path.join(REFERENCE_DIR, 'mingpt', 'utils.py')) as f:
        assert generated['mingpt/utils.py'] == f.read(), 'the grader provides utils.py: ship it unchanged'
    requirements = [l for l in generated['requirements.txt'].splitlines() if l and not l.startswith('#')]
    assert {'torch', 'einops'} <= set(requirements)
    assert 'pytest' in requirements and 'python -m pytest test_model.py' in generated['README.md']
    assert 'upload only `mingpt/model.py`' in generated['README.md'].replace('Upload', 'upload')
    # the root holds what the course's starter holds and one public test file; the README says where the rest is
    assert '`tests/_support/`' in generated['README.md']


def test_readme_gives_the_public_tests_time_limit(generated):
    # a student whose test hangs learns the limit and how to change it where they read
    default = re.search(r"'HW1_TEST_SECONDS', '(\d+)'", generated['tests/_support/grader_rules.py']).group(1)
    assert 'still running after **%s s**' % default in generated['README.md']
    assert 'HW1_TEST_SECONDS=' in generated['README.md']


def test_no_solution_text_or_markers_leak(generated):
    for rel in build.REFERENCE_FILES:
        with open(os.path.join(REFERENCE_DIR, rel)) as f:
            text = f.read()
        solution = set(build.solution_lines(text))
        outside = {l.strip() for l in strip_markers(text, rel, build.load_optional_parts()).splitlines()}
        secret = solution - outside
        for out_rel, out_text in generated.items():
            leaked = sorted(secret & {l.strip() for l in out_text.splitlines()})
            assert leaked == [], 'solution lines of reference/%s appear in %s: %s' % (rel, out_rel, leaked[:5])
    for rel, text in generated.items():
        assert not re.search(r'\b(BEGIN|END) (SOLUTION|PROMPT|OPTIONAL)\b', text), rel
        assert not any(re.search(r'#\s*SOLUTION\s*$', l) for l in text.splitlines()), rel


def test_model_stubs_read_well(generated):
    model = generated['mingpt/model.py']
    stubs = re.findall(r'raise NotImplementedError\("(TODO[^"]*)"\)', model)
    # RoPE x3, RoPE in CausalSelfAttention x2, GroupedQueryAttention x2; sliding window x2 and
    # KV cache x4 (KVCache x3, generate) when those optional parts are on
    parts = build.load_optional_parts()
    assert len(stubs) == 7 + 2 * parts['sliding_window'] + 4 * parts['kv_cache'], stubs
    for name in ('q_proj', 'k_proj', 'v_proj', 'out_proj', 'query_rotary_pe', 'key_rotary_pe'):
        assert any(name in l and 'Do NOT rename' in l for l in model.splitlines()), name
    # every required TODO names its handout section; every optional one says it is optional
    assert all('handout section' in s or s.startswith('TODO (optional)') for s in stubs), stubs
    assert sum(not s.startswith('TODO (optional)') for s in stubs) == 7
    assert model.startswith('"""'), 'model.py keeps its docstring first: students edit this file'


def test_optional_part_off(tmp_path):
    files = build.generate(dict(build.load_optional_parts(), sliding_window=False))
    for rel in ('mingpt/model.py', 'test_model.py', 'tests/_support/public_checks.py', 'README.md'):
        assert 'banded_attention' not in files[rel] and 'sliding_window_mask' not in files[rel], rel
    assert 'TODO (optional, handout 4' not in files['mingpt/model.py']
    assert 'sliding_window_mask' not in files['test_model.py']
    assert '\n\n\n\n' not in files['mingpt/model.py']
    build.write_tree(files, str(tmp_path / 'hw1'))
    # trains vanilla minGPT a few steps with the shipped Trainer (sampling is tested below)
    script = ('from mingpt.model import GPT\n'
              'from mingpt.trainer import Trainer\n'
              'import torch\n'
              'c = GPT.get_default_config(); c.model_type = None; c.n_layer = 1; c.n_query_head = 6\n'
              'c.n_embd = 48; c.vocab_size = 11; c.block_size = 8\n'
              'data = [(torch.arange(8) % 11, (torch.arange(8) + 1) % 11)] * 16\n'
              't = Trainer.get_default_config(); t.max_iters = 3; t.device = "cpu"; t.batch_size = 4\n'
              'trainer = Trainer(t, GPT(c), data)\n'
              'trainer.run()\n'
              'assert len(trainer.losses) == 3\n')
    proc = _run([sys.executable, '-c', script], tmp_path / 'hw1', timeout=120)
    assert proc.returncode == 0, proc.stdout

# ----------------------------------------------------------------------------- markers


def test_markers_are_processed():
    source = ('def f(x):\n'
              '    # BEGIN PROMPT\n'
              '    # # TODO: write f\n'
              '    # raise NotImplementedError("TODO: f")\n'
              '    #\n'
              '    # END PROMPT\n'
              '    # BEGIN SOLUTION\n'
              '    return x + 1\n'
              '    # END SOLUTION\n'
              'SECRET = 1  # SOLUTION\n'
              '\n'
              '\n'
              '# BEGIN OPTIONAL sliding_window\n'
              'def g():\n'
              '    # BEGIN SOLUTION\n'
              '    return 2\n'
              '    # END SOLUTION\n'
              '# END OPTIONAL\n'
              '\n'
              '\n'
              'h = 3\n')
    on = strip_markers(source, 'x.py', {'sliding_window': True})
    # the PROMPT's bare "#" became a blank line; blank runs around removals keep at most two
    assert on == 'def f(x):\n    # TODO: write f\n    raise NotImplementedError("TODO: f")\n\n\ndef g():\n\n\nh = 3\n'
    off = strip_markers(source, 'x.py', {'sliding_window': False})
    assert off == 'def f(x):\n    # TODO: write f\n    raise NotImplementedError("TODO: f")\n\n\nh = 3\n'


@pytest.mark.parametrize('source, line, words', [
    ('a\n# BEGIN SOLUTION\nb\n', 2, 'never closed'),
    ('a\n# END SOLUTION\n', 2, 'without BEGIN'),
    ('# BEGIN SOLUTION\n# BEGIN SOLUTION\n# END SOLUTION\n# END SOLUTION\n', 2, 'do not nest'),
    ('# BEGIN PROMPT\n# BEGIN SOLUTION\n# END SOLUTION\n# END PROMPT\n', 2, 'do not nest'),
    ('# BEGIN PROMPT\n# x = 1  # SOLUTION\n# END PROMPT\n', 2, 'inside the PROMPT'),
    ('# BEGIN SOLUTION\nx\n# END PROMPT\n', 3, 'without BEGIN'),
    ('# BEGIN OPTIONAL sliding_window\n# BEGIN OPTIONAL sliding_window\n', 2, 'do not nest'),
    ('# BEGIN OPTIONAL nonsense\n# END OPTIONAL\n', 1, 'unknown optional part'),
    ('x = 1  # BEGIN SOLUTION\n', 1, 'malformed marker'),
    ('    # BEGIN PROMPT\n    raise ValueError\n    # END PROMPT\n', 2, 'must be a comment'),
])
def test_marker_errors_name_file_and_line(source, line, words):
    with pytest.raises(MarkerError) as info:
        strip_markers(source, 'reference/mingpt/model.py', {'sliding_window': True})
    assert str(info.value).startswith('reference/mingpt/model.py:%d: ' % line)
    assert words in str(info.value)

# ----------------------------------------------------------------------------- public tests


def test_public_tests_pass_on_the_reference(tmp_path):
    hw1 = _template_copy(tmp_path, model=os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), with_data=False)
    proc = _run([sys.executable, 'test_model.py'], hw1)
    summary = SUMMARY.search(proc.stdout)
    assert proc.returncode == 0 and summary, proc.stdout[-3000:]
    passed, failed, todo, errors, skipped, total = map(int, summary.groups())
    assert (passed, failed, todo, errors, skipped) == (total, 0, 0, 0, 0) and total >= 13
    proc = _run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_model.py'], hw1)
    assert proc.returncode == 0 and '%d passed' % total in proc.stdout, proc.stdout[-3000:]


def _optional_tests(source):
    return re.findall(r'(test_\d+_optional_\w+)\b', source)


def test_public_tests_report_each_todo_on_the_untouched_template(tmp_path, generated):
    hw1 = _template_copy(tmp_path, with_data=False)
    proc = _run([sys.executable, 'test_model.py'], hw1)
    summary = SUMMARY.search(proc.stdout)
    assert proc.returncode != 0 and summary, proc.stdout[-3000:]
    passed, failed, todo, errors, skipped, total = map(int, summary.groups())
    optional = len(_optional_tests(generated['test_model.py']))
    assert optional == 2 * build.load_optional_parts()['sliding_window']
    # the untouched file passes the grader's upload rules (test_00); every other required test meets its TODO
    assert (passed, failed, errors, todo, skipped) == (1, 0, 0, total - optional - 1, optional), proc.stdout[-3000:]
    assert 'Traceback' not in proc.stdout
    report = proc.stdout.split('Summary of the public tests')[1]
    assert '  PASS  Upload rules: mingpt/model.py as the grader reads it' in report
    messages = re.findall(r'not implemented yet: (TODO[^\n]*)', report)
    assert len(messages) == total - optional - 1 and all('handout section' in m for m in messages)
    assert len(re.findall(r'NOT ATTEMPTED Optional: [^\n]*\n +Not attempted: this optional part', report)) == optional


def test_pytest_shows_the_message_not_the_checking_code(tmp_path):
    # RoPE positions 0..T-1: a value mismatch, reported by compare() deep in test_model.py
    with open(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')) as f:
        source = f.read().replace('m = torch.arange(1, T + 1, dtype=torch.float64',
                                  'm = torch.arange(0, T, dtype=torch.float64')
    hw1 = _template_copy(tmp_path, with_data=False)
    (hw1 / 'mingpt' / 'model.py').write_text(source)
    proc = _run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'test_model.py', '-k', 'rope_d8'],
                hw1)
    assert proc.returncode == 1 and '1 failed' in proc.stdout, proc.stdout[-3000:]
    assert 'CheckFailed: rope_d8_T7: max abs error' in proc.stdout
    assert 'Likely bug: RoPE positions start at 0' in proc.stdout
    for code in ('def compare(', 'raise CheckFailed(', 'self.check_case(', 'return test(self)'):
        assert code not in proc.stdout, 'pytest printed test_model.py\'s code %r:\n%s' % (code, proc.stdout[-3000:])

# ----------------------------------------------------------------------------- chargpt out of the box

# the untouched template trains vanilla minGPT out of the box: tests/e2e/test_chargpt_tool.py runs it


@pytest.mark.parametrize('flag, message', [
    ('--model.rope=True', 'TODO: create query_rotary_pe and key_rotary_pe in CausalSelfAttention.__init__'),
    ('--model.n_kv_head=2', 'TODO: implement GroupedQueryAttention.__init__'),
])
def test_rope_and_gqa_flags_name_their_todo(tmp_path, flag, message):
    hw1 = _template_copy(tmp_path)
    proc = _run([sys.executable, 'chargpt.py'] + TINY + [flag, '--system.work_dir=%s' % (tmp_path / 'out')], hw1)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert 'error: ' + message in proc.stdout and 'Traceback' not in proc.stdout
    assert not (tmp_path / 'out').exists(), 'a run that cannot start must leave no folder behind'


@pytest.mark.slow
def test_real_chargpt_command_out_of_the_box(tmp_path):
    hw1 = _template_copy(tmp_path)
    proc = _run([sys.executable, 'chargpt.py', '--trainer.max_iters=50', '--trainer.device=cpu',
                 '--system.work_dir=%s' % (tmp_path / 'out')], hw1, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:]

# ----------------------------------------------------------------------------- handout zip


def test_build_handout_zip(tmp_path, generated, monkeypatch):
    assert os.path.isfile(DATA_FILE), 'data/input.txt is missing: CI runs ./setup.sh first'
    monkeypatch.setattr(build, 'generate', lambda optional_parts=None: generated)
    first, second = tmp_path / 'a.zip', tmp_path / 'b.zip'
    names = build.build_handout(str(first))
    build.build_handout(str(second))
    assert first.read_bytes() == second.read_bytes(), 'the zip must be byte-for-byte reproducible'
    expected = sorted(['hw1/' + rel for rel in generated] + ['hw1/input.txt'])
    with zipfile.ZipFile(str(first)) as zf:
        assert zf.namelist() == expected == names
        with open(DATA_FILE, 'rb') as f:
            assert zf.read('hw1/input.txt') == f.read()
        assert zf.read('hw1/mingpt/model.py').decode() == generated['mingpt/model.py']


def test_build_handout_without_corpus_says_run_setup(tmp_path):
    with pytest.raises(FileNotFoundError, match=r'run \./setup\.sh'):
        build.build_handout(str(tmp_path / 'x.zip'), data_file=str(tmp_path / 'missing.txt'))


def test_check_lists_differing_files(tmp_path, generated, monkeypatch, capsys):
    monkeypatch.setattr(build, 'generate', lambda optional_parts=None: generated)
    hw1 = tmp_path / 'hw1'
    build.write_tree(generated, str(hw1))
    assert build.main(['build-template', '--check', '--output', str(hw1)]) == 0
    (hw1 / 'mingpt' / 'model.py').write_text('edited by hand\n')
    (hw1 / 'stray.txt').write_text('x')
    assert build.main(['build-template', '--check', '--output', str(hw1)]) == 1
    err = capsys.readouterr().err
    assert 'mingpt/model.py' in err and 'stray.txt' in err and 'README.md' not in err


def test_student_files_are_short_generated_and_free_of_grader_words(generated):
    # the public tests read like the course's (one short file at the root; its machinery, the values and the
    # grader's rules in tests/_support/), and what students read speaks of the homework: build.generate refuses
    # a grader word, this shows the committed files agree
    assert len(generated['test_model.py'].splitlines()) <= 210
    # 500: it also carries the grader's words for the causes an output or an error shows (a low-precision grid,
    # a device written into the code), which the public tests say as the grader does (issue 41)
    assert len(generated['tests/_support/public_checks.py'].splitlines()) <= 500
    assert len(generated['tests/_support/memory_check.py'].splitlines()) <= 650
    # the whole support folder, ratcheted (1,854 lines before issue 42; its aim is fewer than the ~1,076 the
    # student reads: model.py, chargpt.py, README.md, test_model.py). 1,863: the same code wrapped at ruff's 120
    # columns (E501), 15 lines more than the 1,848 of merge-r6's, not a word added
    assert sum(len(text.splitlines()) for rel, text in generated.items() if rel.startswith(build.SUPPORT_DIR)) <= 1863
    from autograder.staff.handout import handout_memory
    template = open(os.path.join(build.TEMPLATES_DIR, 'tests', '_support', 'memory_check.py'), encoding='utf-8').read()
    assert generated['tests/_support/memory_check.py'] == handout_memory.memory_module(template)
    for rel in build.STUDENT_READS:
        assert not handout_memory.GRADER_WORDS.search(generated[rel]), rel


def test_importing_the_public_tests_leaves_torch_cuda_alone(tmp_path):
    hw1 = _template_copy(tmp_path, model=os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), with_data=False)
    probe = ('import torch, torch.cuda.memory as m\nbefore = {n: getattr(torch.cuda, n) for n in ("memory_allocated", '
             '"synchronize", "max_memory_allocated")}\nbefore_m = m.memory_allocated\nimport test_model\n'
             'assert all(getattr(torch.cuda, n) is f for n, f in before.items()), "torch.cuda patched at import"\n'
             'assert m.memory_allocated is before_m\nprint("untouched")\n')
    proc = _run([sys.executable, '-c', probe], hw1)
    assert proc.returncode == 0 and 'untouched' in proc.stdout, proc.stdout[-2000:]
