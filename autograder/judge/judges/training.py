"""
Judges of the training path:
- gradients: every parameter's gradient on fixed weights matches the reference's, in the
  gradients probe and at step 0 of the training run of 10.1 (the student's other parameters
  and buffers, persistent or not, are theirs and cost nothing);
- loss-curve: the student's model, trained with a fixed seed, is scored by the harness
  (cross-entropy in numpy of its logits on held-out text) and must land inside the band of the
  reference's seeds. The loss the student's process reports is kept for staff plots only.
"""

import numpy as np

from autograder.judge.judges import STATUS_WORDS, Verdict, case_error_line, compare, row

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
    """{config label: [parameter names]} of the gradient fixtures ('<label>/logits', the same model's forward, is
    for the cascade only: judge/cascade.py sets a failed part aside only where the forward is wrong)."""
    cases = {}
    for key in expected:
        label, _, name = key.partition('/')
        if name != 'logits':
            cases.setdefault(label, []).append(name)
    return cases


def _gradient_lines(what, names, observed, expected, tol, rows):
    """(ok, lines) of one set of gradients: `observed` and `expected` map parameter names to arrays; the table's
    row of each wrong gradient shown is added to `rows`."""
    # absent, or all zeros where the reference's is not (K/V rows of a fused layer used through .data)
    missing = [n for n in names if n not in observed or _all_zero(observed[n], expected[n], tol.atol)]
    wrong = []
    for n in names:
        if n not in missing:
            ok, desc = compare(observed[n], expected[n], tol.atol, tol.rtol)
            if not ok:
                wrong.append((n, desc))
    if not missing and not wrong:
        return True, ['ok   %s: all %d parameter gradients match the reference' % (what, len(names))]
    lines = ['FAIL %s: %d of %d parameters get no gradient, %d get a wrong one' % (what, len(missing), len(names), len(wrong))]
    detail = ['     %s gets no gradient: %s' % (n, _hint(n)) for n in missing]
    detail += ['     %s has a wrong gradient: %s' % (n, desc) for n, desc in wrong]
    lines += detail[:MAX_LINES_PER_CASE]
    rows += [r for r in (row(n, desc) for n, desc in wrong[:max(0, MAX_LINES_PER_CASE - len(missing))]) if r]
    if len(detail) > MAX_LINES_PER_CASE:
        lines.append('     ... and %d more' % (len(detail) - MAX_LINES_PER_CASE))
    return False, lines


def _training_gradients(evidence, fixtures, grading, tol, rows):
    """(ok, lines) of the gradients at step 0 of 10.1's training run against the reference's run at the same seed."""
    lc = grading.profiles[fixtures.profile].loss_curve
    case = 'seed%d' % lc.student_seed
    prefix = case + '/step0/'
    expected = {k[len(prefix):]: v for k, v in fixtures.probe('loss-curve').items() if k.startswith(prefix)}
    what = 'training run (step 0 of test 10.1\'s training)'
    if not expected:
        return False, ['FAIL the fixtures hold no gradients of the reference\'s training run: regenerate them']
    run = evidence.get('loss-curve')
    if run is None or run.status != 'ok':
        why = 'it did not run' if run is None else '%s: %s' % (STATUS_WORDS.get(run.status, run.status), run.message)
        return False, ['FAIL %s: the training gave no gradients (%s)' % (what, why)]
    errors = run.info.get('case_errors', {})
    for name in (case, prefix.rstrip('/')):
        if name in errors:
            return False, ['FAIL ' + case_error_line(what, errors[name])]
    observed = {k[len(prefix):]: v for k, v in run.arrays.items() if k.startswith(prefix)}
    return _gradient_lines(what, sorted(expected), observed, expected, tol, rows)


def judge_gradients(test, result, fixtures, grading, evidence):
    """
    Every parameter's gradient, per configuration of the gradients probe, and at step 0 of the
    training run of 10.1 (another process, the handout's Trainer on real text). The training's
    gradients are what the model really learns from: when they are wrong the test earns nothing,
    so answering the gradients probe differently from the training gains nothing.
    """
    tol = test.tolerance
    expected = fixtures.probe(test.id)
    errors = result.info.get('case_errors', {})
    lines, rows, passed = [], [], 0
    cases = _split_gradient_keys(expected)
    for label, names in sorted(cases.items()):
        if label in errors:
            lines.append('FAIL ' + case_error_line(label, errors[label]))
            continue
        observed = {n: result.arrays['%s/%s' % (label, n)] for n in names if '%s/%s' % (label, n) in result.arrays}
        ok, case_lines = _gradient_lines(label, names, observed, {n: expected['%s/%s' % (label, n)] for n in names}, tol,
                                          rows)
        passed += ok
        lines += case_lines
    train_ok, train_lines = _training_gradients(evidence, fixtures, grading, tol, rows)
    lines += train_lines
    if not train_ok:
        lines.append('The gradients the training used are wrong, so this test earns nothing (the gradients of its own '
                     'probe are shown above for diagnosis).')
        return Verdict(0.0, ['%d of %d gradient checks pass.' % (passed, len(cases) + 1)] + lines, rows=rows)
    # the configurations the cascade set aside are not here: the training's gradients are then the whole test
    return Verdict(passed / len(cases) if cases else 1.0,
                   ['%d of %d gradient checks pass.' % (passed + 1, len(cases) + 1)] + lines, rows=rows)


# ----------------------------------------------------------------------------- loss curve

def heldout_targets(profile_name, grading, seed):
    """The held-out targets, rebuilt by the harness from the corpus (never shipped back by the child); `seed`:
    the fixtures' shared_seed, which picked the positions (None: the profile's own, which no grading uses)."""
    from autograder.judge import inputs
    return inputs.heldout(grading.profiles[profile_name], seed=seed)[1]


def cross_entropy(logits, targets):
    """Mean cross-entropy in nats of logits (N, T, V) against targets (N, T), in float64."""
    x = logits.astype(np.float64)
    top = x.max(axis=-1, keepdims=True)
    lse = top[..., 0] + np.log(np.exp(x - top).sum(axis=-1))
    picked = np.take_along_axis(x, targets[..., None].astype(np.int64), axis=-1)[..., 0]
    return float(np.mean(lse - picked))


def _first_step_matches(arrays, ref, key, tol):
    """True/False: the training's step-0 gradients against the reference run's; None when there are none."""
    prefix = key + '/step0/'
    names = [k for k in ref if k.startswith(prefix)]
    if not names or any(k not in arrays for k in names):
        return None
    return all(compare(arrays[k], ref[k], tol.atol, tol.rtol)[0] for k in names)


def judge_loss_curve(test, result, fixtures, grading):
    """
    The held-out logits after the training (from the fixed initial weights, at the student's
    seed, with the handout's Trainer) against the reference's run at the same seed, elementwise:
    a correct model retraces that run to float32 noise, so a model that learns otherwise, a
    patched trainer or one step more or less all land outside. The loss is computed here from
    the logits, for the summary and the message.
    """
    lc = grading.profiles[fixtures.profile].loss_curve
    tol = test.tolerance
    key = 'seed%d' % lc.student_seed
    ref = fixtures.probe('loss-curve')
    if key + '/heldout_logits' not in ref:
        return Verdict(0.0, ['FAIL the fixtures hold no held-out logits of the reference at seed %d: regenerate them'
                             % lc.student_seed])
    targets = heldout_targets(fixtures.profile, grading, getattr(fixtures, 'shared_seed', None))
    ref_logits = ref[key + '/heldout_logits']
    expected = cross_entropy(ref_logits, targets)
    errors = result.info.get('case_errors', {})
    if key in errors:
        return Verdict(0.0, ['FAIL ' + case_error_line('training', errors[key])])
    losses, logits = result.arrays.get(key), result.arrays.get(key + '/heldout_logits')
    if logits is None or logits.shape != ref_logits.shape:
        return Verdict(0.0, ['FAIL after training, the logits on held-out text have shape %s, expected %s'
                             % (None if logits is None else tuple(logits.shape), tuple(ref_logits.shape))])
    if not np.all(np.isfinite(logits)):
        return Verdict(0.0, ['FAIL after training, the logits on held-out text are not finite (NaN/inf): the '
                             'training diverged or a fully masked row divided by zero'])
    loss = cross_entropy(logits, targets)
    steps = len(losses) if losses is not None and losses.ndim == 1 else None
    curve = ''
    if steps and steps >= lc.window and np.all(np.isfinite(losses)):
        curve = '; training loss as your process reported it (not graded): start %.3f, last %d mean %.3f' % (
            float(losses[0]), lc.window, final_loss(losses, lc.window))
    summary = ('held-out loss %.4f (computed by the grader on %d held-out sequences after %d iterations from fixed '
               'initial weights, seed %d), reference %.4f from the same start and seed%s'
               % (loss, targets.shape[0], lc.iters, lc.student_seed, expected, curve))
    same, desc = compare(logits, ref_logits, tol.atol, tol.rtol)
    if same:
        return Verdict(1.0, ['ok   after the same training from the same start, the held-out logits are the '
                             'reference\'s (held-out loss %.4f, reference %.4f)' % (loss, expected)], summary)
    lines = ['FAIL after %d iterations from the reference\'s initial weights at seed %d, the logits on held-out text '
             'differ from the reference\'s run (%s); held-out loss %.4f, the reference\'s %.4f'
             % (lc.iters, lc.student_seed, desc, loss, expected)]
    first = _first_step_matches(result.arrays, ref, key, grading.test('gradients').tolerance)
    if steps is not None and steps != lc.iters:
        lines.append('     the training ran %d iterations, not %d' % (steps, lc.iters))
    elif first is False:
        lines.append('     the gradients of the first training step already differ from the reference\'s (test 10.2)')
    elif first:
        lines.append('     the gradients of the first step are the reference\'s, so the training parts ways later: '
                     'with what the optimizer does with them (configure_optimizers: every parameter in one of its '
                     'two groups) or with what changes between steps')
    return Verdict(0.0, lines, summary)
