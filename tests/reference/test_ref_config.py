"""
Command-line configuration of reference/chargpt.py: every flag of the handout's Table 1
parses to the right type, unknown keys and unparsable values are refused with a clear
message (exit status 2, "error: ..." on stderr), and a missing corpus says to run setup.sh.
"""

import os
import subprocess
import sys

import pytest

import chargpt
from chargpt import get_config
from mingpt.utils import ConfigError

REFERENCE = os.path.dirname(os.path.abspath(chargpt.__file__))

HANDOUT_FLAGS = {
    '--data.block_size=16': ('data', 'block_size', 16),
    '--system.work_dir=out/new_chargpt': ('system', 'work_dir', 'out/new_chargpt'),
    '--model.n_query_head=6': ('model', 'n_query_head', 6),
    '--model.n_kv_head=3': ('model', 'n_kv_head', 3),
    '--model.pretrained_folder=out/chargpt3': ('model', 'pretrained_folder', 'out/chargpt3'),
    '--model.rope=True': ('model', 'rope', True),
    '--trainer.max_iters=200': ('trainer', 'max_iters', 200),
    '--trainer.device=cpu': ('trainer', 'device', 'cpu'),
    '--model.sliding_window=32': ('model', 'sliding_window', 32),
    '--trainer.learning_rate=1': ('trainer', 'learning_rate', 1.0),  # an int where a float is expected
}


def test_handout_flags_parse():
    config = get_config()
    config.merge_from_args(list(HANDOUT_FLAGS))
    for flag, (section, key, expected) in HANDOUT_FLAGS.items():
        value = getattr(getattr(config, section), key)
        assert value == expected and type(value) is type(expected), "%s gave %r" % (flag, value)


@pytest.mark.parametrize("arg, words", [
    ('--model.n_heads=6', ["unknown config key", "model.n_heads", "n_query_head"]),
    ('--modle.rope=True', ["unknown config section", "modle"]),
    ('--data.block_size=sixteen', ["block_size", "int"]),
    ('--model.rope=yes', ["rope", "bool"]),
    ('--trainer.max_iters=1.5', ["max_iters", "int"]),
    ('--model.n_kv_head=2.0', ["n_kv_head", "int"]),
    ('--data.block_size', ["has no value", "--data.block_size=VALUE"]),
    ('data.block_size=16', ["--section.key=value"]),
])
def test_bad_arguments_refused(arg, words):
    config = get_config()
    with pytest.raises(ConfigError) as err:
        config.merge_from_args([arg])
    for word in words:
        assert word in str(err.value), "message %r should mention %r" % (str(err.value), word)


def run_chargpt(args):
    env = dict(os.environ, OMP_NUM_THREADS='1')
    return subprocess.run([sys.executable, os.path.join(REFERENCE, 'chargpt.py')] + args, cwd=REFERENCE,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, words", [
    (['--model.n_heads=6'], ["model.n_heads"]),
    (['--data.block_size=abc'], ["block_size"]),
    (['--data.input_file=/nonexistent'], ["/nonexistent", "setup.sh"]),
])
def test_chargpt_exits_2_with_one_clear_line(args, words, tmp_path):
    proc = run_chargpt(args + ['--system.work_dir=%s' % tmp_path])
    assert proc.returncode == 2, "expected exit status 2, got %d\n%s" % (proc.returncode, proc.stderr[-2000:])
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith('error: '), "want one 'error: ...' line, got:\n%s" % proc.stderr
    for word in words:
        assert word in lines[0], "%r should mention %r" % (lines[0], word)
    assert not os.listdir(tmp_path), "nothing may be written before the arguments are checked"
