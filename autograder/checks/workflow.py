"""
Judge of the handout's train-then-extend workflow (handout 5.2 and 5.7): a model trained at
block_size 16 is saved as chargpt.py saves it, loaded by the student's own
GPT.load_pretrained into a block-256 model, and run at T=256. The logits must match the
reference's; a failure names the stage (loading or the long forward) and its likely cause.
"""

from autograder.checks import Verdict, case_error_line, compare

# stage reached by the probe (child/probes_training.py): 0 building/saving the short model,
# 1 saved, 2 load_pretrained returned, 3 forward at the long T done
STAGE_WORDS = {0: 'building, loading fixed weights into or saving the block-%d model',
               1: 'GPT.load_pretrained(folder) into a block-%d model',
               2: 'the forward at T=%d after load_pretrained'}


def _saved_buffers(notes, label):
    """The buffers the child found in model.pt besides the parameters (a note of probes_training.py)."""
    head = 'load-pretrained %s: model.pt holds buffers besides the parameters: ' % label
    return [n[len(head):] for n in notes if isinstance(n, str) and n.startswith(head)][:1]


def judge_load_pretrained(test, result, fixtures, grading):
    tol = test.tolerance
    wf = grading.profiles[fixtures.profile]['workflow']
    short, long_ = wf['block_from'], wf['block_to']
    expected = fixtures.probe(test.id)
    errors = result.info.get('case_errors', {})
    labels = sorted(k.split('/')[0] for k in expected if k.endswith('/logits'))
    lines, passed = [], 0
    for label in labels:
        stage = result.arrays.get(label + '/stage')
        stage = int(stage) if stage is not None and stage.shape == () and stage.dtype.kind in 'iu' else 0
        if label in errors:
            what = STAGE_WORDS.get(stage, STAGE_WORDS[0]) % (short if stage == 0 else long_)
            lines.append('FAIL ' + case_error_line('%s: %s' % (label, what), errors[label]))
            buffers = _saved_buffers(result.info.get('notes', []), label)
            if stage == 1 and buffers:
                lines.append('     hint: model.pt holds buffers besides the parameters: %s. A buffer registered '
                             'with persistent=True (the default) is saved at block_size %d and does not fit a '
                             'block-%d model: register the causal mask (and the RoPE tables) with '
                             'persistent=False' % (', '.join(buffers[:4]), short, long_))
            elif stage == 1:
                lines.append('     hint: model.pt must hold only what a block-%d model also has, at the same shapes: '
                             'tables whose size follows T or block_size (RoPE cos/sin as parameters or persistent '
                             'buffers, a persistent causal mask) do not fit; keep them out of the state_dict'
                             % long_)
            elif stage == 2:
                lines.append('     hint: is the RoPE cos/sin cache rebuilt when a longer T arrives than the one it '
                             'was first built for, and the causal mask sized by block_size?')
            continue
        observed, exp = result.arrays.get(label + '/logits'), expected[label + '/logits']
        ok, desc = compare(observed, exp, tol.atol, tol.rtol)
        if ok:
            passed += 1
            lines.append('ok   %s: block %d -> %d, logits at T=%d match the reference' % (label, short, long_, long_))
            continue
        lines.append('FAIL %s: logits at T=%d after load_pretrained: %s' % (label, long_, desc))
        if observed is not None and observed.shape == exp.shape:
            early, _ = compare(observed[:, :short], exp[:, :short], tol.atol, tol.rtol)
            if early:
                lines.append('     hint: positions < %d match, later ones do not: is the RoPE cache extended '
                             'past the length it was first built for?' % short)
            else:
                lines.append('     hint: even positions < %d differ: does load_pretrained copy every tensor '
                             '(wpe: its %d trained rows into the larger table)?' % (short, short))
    return Verdict(passed / len(labels) if labels else 0.0,
                   ['%d of %d models load from block %d into block %d and match the reference.'
                    % (passed, len(labels), short, long_)] + lines)
