"""
Small pure pieces of the staff tools, checked in seconds: the one helper that patches the
reference by anchor, test 1.1's interface check, the static check's treatment of guarded
optional imports, and the command line's answers to a wrong command or an empty corpus.
"""

import subprocess
import sys

import pytest

from autograder import REPO_ROOT
from autograder.judge import known_bugs, interface_check, source_patches, submission
from autograder.__main__ import main as cli


def test_patching_needs_each_anchor_exactly_as_often_as_said():
    assert source_patches.apply('a b a', [('b', 'c'), ('a', 'x', 2)]) == 'x c x'
    with pytest.raises(source_patches.PatchError, match="expected 1 occurrence.*'a'.*found 2"):
        source_patches.apply('a b a', [('a', 'x')], 'demo')
    with pytest.raises(source_patches.PatchError, match="found 0"):
        source_patches.patched_reference([('no such anchor in the reference', '')])


def test_every_known_bug_patches_the_reference_through_the_helper():
    source = source_patches.reference_source()
    for fp in known_bugs.KNOWN_BUGS:
        assert known_bugs.apply(fp, source) != source, fp.id
    assert known_bugs.PatchError is source_patches.PatchError


def test_interface_check_names_what_is_missing():
    assert interface_check.missing(source_patches.reference_source()) == []
    assert interface_check.missing('') == list(interface_check.INTERFACE)
    source = source_patches.patched_reference([('    def generate(self, idx', '    def generate_text(self, idx')])
    assert interface_check.missing(source) == ['GPT.generate']
    aliased = 'from torch import nn\nclass Base(nn.Module):\n    def forward(self, x):\n        return x\n' \
              'class RotaryPositionalEmbeddings(Base):\n    def _build_cache(self, x):\n        pass\n' \
              'class CausalSelfAttention(Base):\n    pass\nGroupedQueryAttention = CausalSelfAttention\n' \
              'class Block(Base):\n    pass\nclass GPT(Base):\n    forward = Base.forward\n    generate = forward\n'
    assert interface_check.missing(aliased) == []
    assert interface_check.missing('class GPT(torch.nn.Module):\n    pass\n')[:1] == ['RotaryPositionalEmbeddings']
    assert 'GPT.forward' in interface_check.missing('class GPT(torch.nn.Module):\n    pass\n')


def _static(tmp_path, source):
    path = tmp_path / 'model.py'
    path.write_text(source)
    return submission.static_problems(submission.read_upload(str(path)))


@pytest.mark.parametrize('guard', ['except ImportError:', 'except ModuleNotFoundError:',
                                   'except (ImportError, OSError):', 'except Exception:', 'except:'])
def test_a_guarded_optional_import_is_allowed(tmp_path, guard):
    assert _static(tmp_path, 'try:\n    import wandb\n    from tqdm import tqdm\n%s\n    wandb = None\n' % guard) == []


def test_no_import_is_refused_statically_and_the_guarded_ones_are_said_to_cost_nothing(tmp_path):
    # a missing module fails only if importing model.py runs its import (the child reports that); a module a
    # model has no use for is a warning in test 1.1, never a refusal: the OS sandbox is the wall
    for source in ('import wandb\n', 'try:\n    import wandb\nexcept ValueError:\n    pass\n',
                   'try:\n    import socket\nexcept ImportError:\n    socket = None\n', 'import subprocess\n'):
        assert _static(tmp_path, source) == [], source
    path = tmp_path / 'model.py'
    path.write_text('try:\n    pass\nexcept ImportError:\n    import wandb\n')
    # a top-level import: it fails when it runs, with its message
    assert submission.import_warnings(submission.read_upload(str(path))) == []
    path.write_text('try:\n    import socket\nexcept ImportError:\n    socket = None\n')
    assert "imports 'socket', which a model has no use for; it costs nothing" in \
        submission.import_warnings(submission.read_upload(str(path)))[0]


def test_unknown_command_is_named(capsys):
    assert cli(['evalute']) == 2
    err = capsys.readouterr().err
    assert err.startswith("autograder: unknown command 'evalute'; did you mean 'evaluate'?") and 'grade PATH' in err
    assert cli([]) == 2 and 'no command given' in capsys.readouterr().err
    assert cli(['--help']) == 0 and 'grade PATH' in capsys.readouterr().out


def test_evaluate_without_a_corpus_fails_clearly(tmp_path):
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'evaluate', str(tmp_path / 'nonexistent')],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and 'MET' not in proc.stdout
    assert proc.stderr.strip().splitlines() == ['evaluate: no submission in %s: expected %s/correct/<name>/ and '
                                                '%s/buggy/<name>/, each with a model.py and an expected.yaml'
                                                % ((tmp_path / 'nonexistent',) * 3)]


def test_regenerate_on_cuda_without_a_gpu_says_so_at_once():
    from autograder.staff.fixtures import regenerate
    if regenerate.cuda_problem() is None:
        pytest.skip('this machine has a CUDA GPU')
    proc = subprocess.run([sys.executable, '-m', 'autograder', 'regenerate', '--device', 'cuda'], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ''
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('regenerate: --device cuda needs a CUDA GPU: ') \
        and lines[0].endswith('nothing was changed'), proc.stderr
