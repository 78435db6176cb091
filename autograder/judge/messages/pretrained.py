"""
The words of the pretrained workflow (areas/pretrained.py): train at one block size, load at another.
"""

from autograder.judge.messages.common import DETAIL


# ----------------------------------------------------------------------------- pretrained workflow

# stage reached by the probe (child/probes_training.py): 0 building/saving the short model,
# 1 saved, 2 load_pretrained returned, 3 forward at the long T done
STAGE_WORDS = {0: 'building, loading fixed weights into or saving the block-%d model',
               1: 'GPT.load_pretrained(folder) into a block-%d model',
               2: 'the forward at T=%d after load_pretrained'}


def fact(text):
    """One fact the probe observed, under its case."""
    return DETAIL + text


def stage_case(label, what):
    return '%s: %s' % (label, what)


def pretrained_shapes_differ(short, long_):
    return ('     model.pt, saved at block %d, holds tensors whose shape differs in the block-%d '
            'model; load_pretrained must fit each into it, or the module keep it out of model.pt '
            '(register_buffer(..., persistent=False)):' % (short, long_))


def pretrained_left(long_):
    return '     what load_pretrained left in the block-%d model:' % long_


def pretrained_ok(label, short, long_):
    return ('ok   %s: block %d -> %d, logits at T=%d match the '
            'reference' % (label, short, long_, long_))


def pretrained_logits(label, long_, desc):
    return 'FAIL %s: logits at T=%d after load_pretrained: %s' % (label, long_, desc)


def pretrained_copied(early, short, long_):
    """Every tensor was copied: `early` True when positions before the old block size match."""
    return '     load_pretrained copied every tensor of model.pt; %s' % (
        'positions < %d match, later ones do not: what the model computes past the old block size '
        'differs (RoPE tables, the causal mask)' % short if early else
        'even positions < %d differ: the forward of the block-%d model differs from the '
        'reference\'s'
        % (short, long_))


def pretrained_models(passed, total, short, long_):
    return ('%d of %d models load from block %d into block %d and '
            'match the reference.' % (passed, total, short, long_))
