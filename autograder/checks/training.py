"""
Judges of the training path:
- gradients: every parameter's gradient on fixed weights matches the reference's, and
  RotaryPositionalEmbeddings holds no trainable parameter and no persistent state;
- loss-curve: the student's model, trained with a fixed seed, is scored by the harness
  (cross-entropy in numpy of its logits on held-out text) and must land inside the band of the
  reference's seeds. The loss the student's process reports is kept for staff plots only.
"""

import numpy as np

from autograder.checks import Verdict, case_error_line, compare

MAX_LINES_PER_CASE = 6

GRAD_HINTS = {
    'q_proj': 'is q detached, computed under torch.no_grad(), or its weight used through .data?',
    'k_proj': 'is k detached, computed under torch.no_grad(), or its weight used through .data?',
    'v_proj': 'is v detached, computed under torch.no_grad(), or its weight used through .data?',
    'out_proj': 'is the attention output detached or computed under torch.no_grad()?',
}


def _hint(name):
    for key, hint in GRAD_HINTS.items():
        if '.attn.%s.' % key in name:
            return hint
    return 'is it detached, computed under torch.no_grad(), or used through .data?'


def _all_zero(observed, expected, atol):
    return observed.size > 0 and observed.dtype.kind in 'fiu' and not np.any(observed) \
        and float(np.max(np.abs(expected))) > 10 * atol


def final_loss(losses, window):
    return float(np.mean(losses[-window:]))


def _split_gradient_keys(expected):
    """{config label: [parameter names]} of the gradient fixtures (rope-module and rope/ keys aside)."""
    cases = {}
    for key in expected:
        label, _, name = key.partition('/')
        if label != 'rope-module' and not name.startswith('rope/'):
            cases.setdefault(label, []).append(name)
    return cases


def _rope_findings(arrays):
    """(trainable parameter names, persistent state names) RoPE modules reported, without duplicates."""
    params, state = [], []
    for key in sorted(arrays):
        parts = key.split('/')
        if len(parts) >= 3 and parts[-2] in ('param', 'state') and (parts[0] == 'rope-module' or parts[1] == 'rope'):
            (params if parts[-2] == 'param' else state).append(parts[-1])
    return list(dict.fromkeys(params)), list(dict.fromkeys(state))


def judge_gradients(test, result, fixtures, grading):
    tol = test.tolerance
    expected = fixtures.probe(test.id)
    errors = result.info.get('case_errors', {})
    lines, passed = [], 0
    cases = _split_gradient_keys(expected)
    for label, names in sorted(cases.items()):
        if label in errors:
            lines.append('FAIL ' + case_error_line(label, errors[label]))
            continue
        # absent, or all zeros where the reference's is not (K/V rows of a fused layer used through .data)
        missing = [n for n in names if ('%s/%s' % (label, n)) not in result.arrays
                   or _all_zero(result.arrays['%s/%s' % (label, n)], expected['%s/%s' % (label, n)], tol.atol)]
        wrong = []
        for n in names:
            if n in missing:
                continue
            ok, desc = compare(result.arrays['%s/%s' % (label, n)], expected['%s/%s' % (label, n)], tol.atol, tol.rtol)
            if not ok:
                wrong.append((n, desc))
        if not missing and not wrong:
            passed += 1
            lines.append('ok   %s: all %d parameter gradients match the reference' % (label, len(names)))
            continue
        lines.append('FAIL %s: %d of %d parameters get no gradient, %d get a wrong one'
                     % (label, len(missing), len(names), len(wrong)))
        detail = ['     %s gets no gradient: %s' % (n, _hint(n)) for n in missing]
        detail += ['     %s has a wrong gradient: %s' % (n, desc) for n, desc in wrong]
        lines += detail[:MAX_LINES_PER_CASE]
        if len(detail) > MAX_LINES_PER_CASE:
            lines.append('     ... and %d more' % (len(detail) - MAX_LINES_PER_CASE))

    # RoPE: cos/sin tables are constants of the positions, neither learnt nor saved
    params, state = _rope_findings(result.arrays)
    rope_lines = []
    if 'rope-module' in errors:
        rope_lines.append('FAIL ' + case_error_line('RotaryPositionalEmbeddings(8)', errors['rope-module']))
    if 'rope-module/modules' not in result.arrays and 'rope-module' not in errors:
        rope_lines.append('FAIL RotaryPositionalEmbeddings(8) could not be inspected')
    if params:
        rope_lines.append('FAIL RotaryPositionalEmbeddings has trainable parameters: %s. The cos/sin tables are '
                          'fixed functions of the positions: keep them as tensors or buffers, not nn.Parameter'
                          % ', '.join(params[:6]))
    if state:
        rope_lines.append('FAIL RotaryPositionalEmbeddings keeps persistent state in state_dict: %s. Register the '
                          'cos/sin tables with register_buffer(..., persistent=False): a model.pt saved at one '
                          'block_size must load into a model of another' % ', '.join(state[:6]))
    if rope_lines:
        lines += rope_lines
    else:
        passed += 1
        lines.append('ok   RotaryPositionalEmbeddings has no trainable parameters and no persistent state')
    total = len(cases) + 1
    return Verdict(passed / total, ['%d of %d gradient checks pass.' % (passed, total)] + lines)


# ----------------------------------------------------------------------------- loss curve

def heldout_targets(profile_name, grading):
    """The held-out targets, rebuilt by the harness from the corpus (never shipped back by the child)."""
    from autograder import inputs
    return inputs.heldout(grading.profiles[profile_name])[1]


def cross_entropy(logits, targets):
    """Mean cross-entropy in nats of logits (N, T, V) against targets (N, T), in float64."""
    x = logits.astype(np.float64)
    top = x.max(axis=-1, keepdims=True)
    lse = top[..., 0] + np.log(np.exp(x - top).sum(axis=-1))
    picked = np.take_along_axis(x, targets[..., None].astype(np.int64), axis=-1)[..., 0]
    return float(np.mean(lse - picked))


def judge_loss_curve(test, result, fixtures, grading):
    lc = grading.profiles[fixtures.profile]['loss_curve']
    window, atol = lc['window'], test.tolerance.atol
    key = 'seed%d' % lc['student_seed']
    ref = fixtures.probe('loss-curve')
    if key + '/heldout_logits' not in ref:
        return Verdict(0.0, ['FAIL the fixtures hold no held-out logits of the reference at seed %d: regenerate them'
                             % lc['student_seed']])
    targets = heldout_targets(fixtures.profile, grading)
    expected = cross_entropy(ref[key + '/heldout_logits'], targets)
    lo, hi = expected - atol, expected + atol
    errors = result.info.get('case_errors', {})
    if key in errors:
        return Verdict(0.0, ['FAIL ' + case_error_line('training', errors[key])])
    losses, logits = result.arrays.get(key), result.arrays.get(key + '/heldout_logits')
    curve = ''
    if losses is not None and losses.ndim == 1 and len(losses) >= window and np.all(np.isfinite(losses)):
        curve = '; training loss as your process reported it (not graded): start %.3f, last %d mean %.3f' % (
            float(losses[0]), window, final_loss(losses, window))
    shape = ref[key + '/heldout_logits'].shape
    if logits is None or logits.shape != shape:
        return Verdict(0.0, ['FAIL after training, the logits on held-out text have shape %s, expected %s'
                             % (None if logits is None else tuple(logits.shape), tuple(shape))])
    if not np.all(np.isfinite(logits)):
        return Verdict(0.0, ['FAIL after training, the logits on held-out text are not finite (NaN/inf): the '
                             'training diverged or a fully masked row divided by zero'])
    loss = cross_entropy(logits, targets)
    summary = ('held-out loss %.3f (computed by the grader on %d held-out sequences after %d iterations from fixed '
               'initial weights, seed %d), reference %.3f, band [%.3f, %.3f]%s'
               % (loss, targets.shape[0], lc['iters'], lc['student_seed'], expected, lo, hi, curve))
    if loss > hi:
        return Verdict(0.0, ['FAIL the held-out loss %.3f is above the reference band [%.3f, %.3f]: the model '
                             'learns worse than the reference from the same start (a projection that gets no '
                             'gradient or is left out of the optimizer? see the gradients test)' % (loss, lo, hi)],
                       summary)
    if loss < lo:
        return Verdict(0.0, ['FAIL the held-out loss %.3f is below the reference band [%.3f, %.3f]: suspiciously '
                             'low (check the causal mask)' % (loss, lo, hi)], summary)
    return Verdict(1.0, ['ok   the held-out loss after training lies within the reference band'], summary)
