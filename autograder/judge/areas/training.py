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

from autograder.judge import messages
from autograder.judge.areas import Verdict, case_error_line, compare, row

MAX_LINES_PER_CASE = 6



def _hint(name):
    for key, hint in messages.GRAD_HINTS.items():   # attention layer -> its question
        if '.attn.%s.' % key in name:
            return hint
    return messages.GRAD_HINT_OTHER


def _all_zero(observed, expected, atol):
    return observed.size > 0 and observed.dtype.kind in 'fiu' and not np.any(observed) \
        and float(np.max(np.abs(expected))) > 10 * atol


def final_loss(losses, window):
    return float(np.mean(losses[-window:]))


def _split_gradient_keys(expected):
    """{config label: [parameter names]} of the gradient fixtures ('<label>/logits', the same model's forward, is
    for set_aside.py only: judge/set_aside.py sets a failed part aside only where the forward is wrong)."""
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
        return True, [messages.gradients_ok(what, len(names))]
    lines = [messages.gradients_failed(what, len(missing), len(names), len(wrong))]
    detail = [messages.no_gradient(n, _hint(n)) for n in missing]
    detail += [messages.wrong_gradient(n, desc) for n, desc in wrong]
    lines += detail[:MAX_LINES_PER_CASE]
    rows += [r for r in (row(n, desc) for n, desc in wrong[:max(0, MAX_LINES_PER_CASE - len(missing))]) if r]
    if len(detail) > MAX_LINES_PER_CASE:
        lines.append(messages.and_more(len(detail) - MAX_LINES_PER_CASE))
    return False, lines


def _training_gradients(evidence, fixtures, grading, tol, rows):
    """(ok, lines, differ) of the gradients at step 0 of 10.1's training run against the reference's run at the same
    seed; differ: they were compared and some are missing or wrong (what 10.1's failure then follows)."""
    lc = grading.profiles[fixtures.profile_name].loss_curve
    case = 'seed%d' % lc.student_seed
    prefix = case + '/step0/'
    expected = {k[len(prefix):]: v for k, v in fixtures.probe('loss-curve').items() if k.startswith(prefix)}
    what = messages.training_run(grading.test('loss-curve').number)
    if not expected:
        return False, [messages.NO_TRAINING_FIXTURES], False
    run = evidence.get('loss-curve')
    if run is None or run.status != 'ok':
        why = messages.IT_DID_NOT_RUN if run is None else \
            messages.status_words_and_message(run.status, run.message)
        return False, [messages.training_no_gradients(what, why)], False
    errors = run.info.get('case_errors', {})
    for name in (case, prefix.rstrip('/')):
        if name in errors:
            return False, [messages.FAIL + case_error_line(what, errors[name])], False
    observed = {k[len(prefix):]: v for k, v in run.arrays.items() if k.startswith(prefix)}
    ok, lines = _gradient_lines(what, sorted(expected), observed, expected, tol, rows)
    return ok, lines, not ok   # compared, and some missing or wrong


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
            lines.append(messages.FAIL + case_error_line(label, errors[label]))
            continue
        observed = {n: result.arrays['%s/%s' % (label, n)] for n in names if '%s/%s' % (label, n) in result.arrays}
        ok, case_lines = _gradient_lines(label, names, observed, {n: expected['%s/%s' % (label, n)] for n in names},
                                          tol, rows)
        passed += ok
        lines += case_lines
    train_ok, train_lines, differ = _training_gradients(evidence, fixtures, grading, tol, rows)
    lines += train_lines
    if not train_ok:
        lines.append(messages.TRAINING_GRADIENTS_WRONG)
        return Verdict(0.0, [messages.gradient_checks(passed, len(cases) + 1)] + lines, rows=rows,
                       training_gradients_differ=differ)
    # the configurations set_aside.py set aside are not here: the training's gradients are then the whole test
    return Verdict(passed / len(cases) if cases else 1.0,
                   [messages.gradient_checks(passed + 1, len(cases) + 1)] + lines, rows=rows)


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
    lc = grading.profiles[fixtures.profile_name].loss_curve
    tol = test.tolerance
    key = 'seed%d' % lc.student_seed
    ref = fixtures.probe('loss-curve')
    if key + '/heldout_logits' not in ref:
        return Verdict(0.0, [messages.no_heldout_fixtures(lc.student_seed)])
    targets = heldout_targets(fixtures.profile_name, grading, getattr(fixtures, 'shared_seed', None))
    ref_logits = ref[key + '/heldout_logits']
    expected = cross_entropy(ref_logits, targets)
    errors = result.info.get('case_errors', {})
    if key in errors:
        return Verdict(0.0, [messages.FAIL + case_error_line(messages.TRAINING, errors[key])])
    losses, logits = result.arrays.get(key), result.arrays.get(key + '/heldout_logits')
    if logits is None or logits.shape != ref_logits.shape:
        return Verdict(0.0, [messages.heldout_shape(None if logits is None else tuple(logits.shape),
                                                    tuple(ref_logits.shape))])
    if not np.all(np.isfinite(logits)):
        return Verdict(0.0, [messages.HELDOUT_NON_FINITE])
    loss = cross_entropy(logits, targets)
    steps = len(losses) if losses is not None and losses.ndim == 1 else None
    curve = ''
    if steps and steps >= lc.window and np.all(np.isfinite(losses)):
        curve = messages.reported_curve(float(losses[0]), lc.window, final_loss(losses, lc.window))
    summary = messages.loss_summary(loss, targets.shape[0], lc.iters, lc.student_seed, expected,
                                    curve)
    same, desc = compare(logits, ref_logits, tol.atol, tol.rtol)
    if same:
        return Verdict(1.0, [messages.training_same(loss, expected)], summary)
    lines = [messages.training_differs(lc.iters, lc.student_seed, desc, loss, expected)]
    first = _first_step_matches(result.arrays, ref, key, grading.test('gradients').tolerance)
    if steps is not None and steps != lc.iters:
        lines.append(messages.training_steps(steps, lc.iters))
    elif first is False:
        lines.append(messages.first_step_differs(grading.test('gradients').number))
    elif first:
        lines.append(messages.FIRST_STEP_SAME)
    return Verdict(0.0, lines, summary)
