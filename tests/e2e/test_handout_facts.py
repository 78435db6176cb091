"""
The course handout (shared/docs/handout.md, beside the clone) against the generated student
template: the default model is the handout's (N = 16, 6 layers, 6 heads, d_model 192), every
flag of Table 1 is accepted by the template's chargpt.py, the handout's file list ships, the
README's example runs stop after the handout's iteration counts, and where the handout calls
test_model.py "the same tests used on Gradescope" the template says it is a subset.
Every expected value is read from the handout text, not typed here.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from autograder import DATA_FILE, REPO_ROOT, TEMPLATE_DIR
from autograder.staff.handout import build

# CI checks out ../shared beside the clone; HW1_HANDOUT_MD points elsewhere (a worktree)
HANDOUT_MD = os.environ.get('HW1_HANDOUT_MD') or os.path.join(REPO_ROOT, os.pardir, 'shared', 'docs', 'handout.md')

# run in the template folder: the template's default config, resolved by its GPT, and which
# of the given flags its config accepts ({flag: error or None})
CONFIG_SCRIPT = r'''
import contextlib, json, sys
with contextlib.redirect_stdout(sys.stderr):  # chargpt and GPT print as they go
    import chargpt
    from mingpt.model import GPT
    from mingpt.utils import ConfigError
    config = chargpt.get_config()
    config.model.vocab_size, config.model.block_size = 65, config.data.block_size
    GPT(config.model)
    accepted = {}
    for flag in json.loads(sys.argv[1]):
        try:
            chargpt.get_config().merge_from_args([flag])
            accepted[flag] = None
        except ConfigError as e:
            accepted[flag] = str(e)
print(json.dumps({'config': config.to_dict(), 'accepted': accepted}))
'''


@pytest.fixture(scope='module')
def text():
    if not os.path.isfile(HANDOUT_MD):
        pytest.fail('the course handout is missing at %s: CI checks out the shared folder beside the clone '
                    '(../shared/docs/handout.md); set HW1_HANDOUT_MD to its path elsewhere'
                    % os.path.abspath(HANDOUT_MD))
    with open(HANDOUT_MD, encoding='utf-8') as f:
        return f.read()


@pytest.fixture(scope='module')
def generated():
    """The committed template (test_template.py checks it is what build-template makes)."""
    files = {}
    for rel in build._tree_files(TEMPLATE_DIR):
        with open(os.path.join(TEMPLATE_DIR, *rel.split('/')), encoding='utf-8') as f:
            files[rel] = f.read()
    return files


def _number(pattern, text):
    found = re.search(pattern, text)
    assert found, 'the handout no longer says %r' % pattern
    return int(found.group(1))


def _table_flags(text):
    return re.findall(r'<code>(--[a-z_]+\.[a-z_]+=[^<]*)</code>', text)


@pytest.fixture(scope='module')
def template_config(text):
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    env.update(PYTHONDONTWRITEBYTECODE='1', OMP_NUM_THREADS='1')
    proc = subprocess.run([sys.executable, '-c', CONFIG_SCRIPT, json.dumps(_table_flags(text))], cwd=TEMPLATE_DIR,
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_default_model_is_the_handouts(text, template_config):
    model, data = template_config['config']['model'], template_config['config']['data']
    assert data['block_size'] == _number(r'maximum sequence length is \$N = (\d+)\$', text)
    assert model['n_layer'] == _number(r'GPT model with (\d+) transformer layers', text)
    assert model['n_query_head'] == model['n_kv_head'] == _number(r'uses \$h = (\d+)\$ attention heads', text)
    assert model['n_embd'] == _number(r'd_\{model\} = (\d+)\$', text)
    assert model['n_embd'] // model['n_query_head'] == _number(r'd_k = d_\{model\}/h = (\d+)\$', text)


def test_every_table_flag_is_accepted(text, template_config):
    flags = _table_flags(text)
    named = {flag.split('=')[0] for flag in flags}
    assert {'--model.rope', '--model.n_query_head', '--model.n_kv_head', '--model.pretrained_folder',
            '--data.block_size', '--trainer.max_iters', '--trainer.device', '--system.work_dir'} <= named
    refused = {flag: error for flag, error in template_config['accepted'].items() if error is not None}
    assert refused == {}


def test_handouts_file_list_ships(text, generated):
    listing = re.search(r'Ours contains the following files:\s*```(.*?)```', text, re.S)
    assert listing, 'the handout no longer lists its files'
    lines = [line.rstrip() for line in listing.group(1).splitlines() if line.strip()]
    assert lines[0].strip() == 'hw1/'
    files, folder = set(), ''
    for line in lines[1:]:
        name = line.strip()
        if name.endswith('/'):
            folder = name
        else:
            # a file indented deeper than the folder line belongs to it
            files.add(folder + name if folder and line.startswith('    ') else name)
    shipped = set(generated) | {'input.txt'}  # build-handout adds the corpus
    assert files <= shipped, 'listed by the handout but not shipped: %s' % sorted(files - shipped)
    extras = shipped - files
    # ours adds: its README, the plotting script, the package marker, chargpt.py's checks before a run
    # (mingpt/preflight.py), and, out of the way in tests/_support/, what test_model.py imports: its machinery,
    # the public tests' reference values and the grader's own rules (upload rules, layer matching, the 9.1
    # memory contract)
    assert extras == {'README.md', 'plot_logs.py', 'mingpt/__init__.py', 'mingpt/preflight.py',
                      'tests/_support/public_checks.py', 'tests/_support/test_model_expected.json',
                      'tests/_support/grader_rules.py', 'tests/_support/memory_check.py'}
    for name in ('plot_logs.py', 'test_model.py', 'input.txt', 'tests/_support/', 'public_checks.py',
                 'test_model_expected.json', 'grader_rules.py', 'memory_check.py'):
        assert '`%s`' % name in generated['README.md'], 'the README does not describe %s' % name


def test_public_tests_are_called_a_subset(text, generated):
    # the handout claims the Gradescope tests; the template must correct that where students read
    assert 'the same ones used on Gradescope' in text
    docstring = generated['test_model.py'].split('"""')[1]
    readme = generated['README.md']
    assert 'SUBSET' in docstring and '**subset**' in readme
    # what only Gradescope grades (the public tests do run GPT.generate and the memory figure)
    for graded_only in ('loss curve', 'gradients', 'load_pretrained', 'chargpt.py'):
        assert graded_only in docstring and graded_only in readme, graded_only


def test_readme_runs_stop_after_the_handouts_iterations(text, generated):
    counts = {int(n) for n in re.findall(r'\*\*(\d+) (?:total training )?iterations\*\*', text)}
    counts |= {int(n) for n in re.findall(r'(\d+) iterations with a \*\*sequence length', text)}
    commands = re.findall(r'python chargpt\.py(?:[^\n\\]|\\\n)*', generated['README.md'])
    assert len(commands) >= 8
    for command in commands:
        found = re.search(r'--trainer\.max_iters=(\d+)', command)
        assert found, 'this README run never stops: %s' % command
        assert int(found.group(1)) in counts, (command, sorted(counts))


@pytest.mark.skipif(not os.path.isfile(DATA_FILE), reason='corpus missing: run ./setup.sh')
def test_readme_explains_the_vocabulary_size(text, generated):
    with open(DATA_FILE, encoding='utf-8') as f:
        vocab = len(set(f.read()))
    stated = _number(r'vocabulary size is only (\d+)', text)
    if vocab != stated:
        assert re.search(r'\b%d\b' % stated, generated['README.md']) and re.search(r'\b%d\b' % vocab,
                                                                                  generated['README.md'])
