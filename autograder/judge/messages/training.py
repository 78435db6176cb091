"""
The words of the training tests (areas/training.py): the loss curve and the gradients. A sentence that
names another test takes its number from its caller (grading.yaml's `number`, by id).
"""

# ------------------------------------------------------------------------ training (10.1, 10.2)

GRAD_HINTS = {
    'q_proj': 'is q detached, computed under torch.no_grad(), or its weight used through .data?',
    'k_proj': 'is k detached, computed under torch.no_grad(), or its weight used through .data?',
    'v_proj': 'is v detached, computed under torch.no_grad(), or its weight used through .data?',
    'out_proj': 'is the attention output detached or computed under torch.no_grad()?',
}
GRAD_HINT_OTHER = 'is it detached, computed under torch.no_grad(), or used through .data?'


def gradients_ok(what, count):
    return 'ok   %s: all %d parameter gradients match the reference' % (what, count)


def gradients_failed(what, missing, total, wrong):
    return ('FAIL %s: %d of %d parameters get no gradient, %d get '
            'a wrong one' % (what, missing, total, wrong))


def training_follows_gradients(number):
    """After 10.1's failure, where test `number` (10.2) finds parameters with a missing or wrong gradient."""
    return ('Test %s finds the gradients of this very training run (its first step) missing or wrong for some '
            'parameters, and names them: training follows those gradients, so its logits differ.' % number)


def no_gradient(name, hint_):
    return '     %s gets no gradient: %s' % (name, hint_)


def wrong_gradient(name, desc):
    return '     %s has a wrong gradient: %s' % (name, desc)


def and_more(count):
    return '     ... and %d more' % count


def training_run(number):
    """`number`: the test whose training run this is (10.1)."""
    return 'training run (step 0 of test %s\'s training)' % number
NO_TRAINING_FIXTURES = ('FAIL the fixtures hold no gradients of the reference\'s training run: '
                        'regenerate them')
IT_DID_NOT_RUN = 'it did not run'


def training_no_gradients(what, why):
    return 'FAIL %s: the training gave no gradients (%s)' % (what, why)


TRAINING_GRADIENTS_WRONG = ('The gradients the training used are wrong, so this test earns nothing '
                            '(the gradients of its own probe are shown above for diagnosis).')


def gradient_checks(passed, total):
    return '%d of %d gradient checks pass.' % (passed, total)


def no_heldout_fixtures(seed):
    return ('FAIL the fixtures hold no held-out logits of the reference at seed %d: '
            'regenerate them' % seed)


TRAINING = 'training'


def heldout_shape(got, expected):
    return ('FAIL after training, the logits on held-out text have shape %s, '
            'expected %s' % (got, expected))


HELDOUT_NON_FINITE = ('FAIL after training, the logits on held-out text are not finite (NaN/inf): '
                      'the training diverged or a fully masked row divided by zero')


def reported_curve(start, window, mean):
    return ('; training loss as your process reported it (not graded): start %.3f, last %d '
            'mean %.3f' % (start, window, mean))


def loss_summary(loss, sequences, iters, seed, expected, curve):
    return ('held-out loss %.4f (computed by the grader on %d held-out sequences after %d '
            'iterations from fixed initial weights, seed %d), reference %.4f from the same start '
            'and seed%s'
            % (loss, sequences, iters, seed, expected, curve))


def training_same(loss, expected):
    return ('ok   after the same training from the same start, the held-out logits are the '
            'reference\'s (held-out loss %.4f, reference %.4f)' % (loss, expected))


def training_differs(iters, seed, desc, loss, expected):
    return ('FAIL after %d iterations from the reference\'s initial weights at seed %d, the logits '
            'on held-out text differ from the reference\'s run (%s); held-out loss %.4f, the '
            'reference\'s %.4f'
            % (iters, seed, desc, loss, expected))


def training_steps(steps, iters):
    return '     the training ran %d iterations, not %d' % (steps, iters)


def first_step_differs(number):
    """`number`: the test of the gradients (10.2)."""
    return ('     the gradients of the first training step already differ from the '
            'reference\'s (test %s)' % number)
FIRST_STEP_SAME = ('     the gradients of the first step are the reference\'s, so the training '
                   'parts ways later: with what the optimizer does with them '
                   '(configure_optimizers: every parameter in one of its two groups) or with what '
                   'changes between steps')
