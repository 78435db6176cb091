"""
The words of test 1.1 and of results.json (grade.py, results.py): the submission's test, the line a test
shows when nothing of it could run, results.json's top line, the grader's own failures, and results.json's frame
(the test that stands for a failed grading, Not attempted, a cut output, a results.json written while grading runs).
"""

# ---------------------------------------------------------------------- test 1.1, the top line
# grade.py: the submission's test (1.1), the line a test shows when nothing of it could run, and
# results.json's top-level output.

INTERFACE_OK = 'model.py imports and exposes the handout interface.'
NOT_IMPORTED_SHORT = 'your model.py could not be imported'
SANDBOX_UNSAFE = ('Your code was not run: the autograder\'s sandbox is not working safely on this '
                  'machine. This is not your fault; course staff have been notified.')
INVALID_RESULTS = 'The autograder produced an invalid results.json.'


def import_hang_hint(hang):
    """1.1: the import check itself did not finish (`hang`: import_hang's words)."""
    return ('%s: code at the top level of model.py runs when it is imported (a loop, a sleep, a '
            'training run?); put it under `if __name__ == "__main__":` or remove it.' % hang)


def not_imported(message):
    """1.1: the import check failed (`message`: the probe's own)."""
    return NOT_IMPORTED_SHORT + ': %s' % message


def import_hang_in_tests(hang):
    """1.1: imported in the import check, then stalled importing in a test's process."""
    return ('%s: code at the top level of model.py runs when it is imported (a loop, a sleep, a '
            'training run?), and no later test could run; put it under `if __name__ == '
            '"__main__":` or remove it.' % (hang[0].upper() + hang[1:]))


def note(text):
    """A note of a probe's, or of the grader's, on 1.1."""
    return 'Note: ' + text


def slow_import(wall, cpu):
    return note('importing model.py took %.1f s (%.1f s of CPU time), and every test imports it '
                'again: keep work out of the top level of model.py.' % (wall, cpu))


def printed_at_import(printed):
    """1.1: what model.py printed at import (`printed`: already cut to what is shown)."""
    return 'model.py printed at import:\n' + printed


def interface_lacks(names):
    return ('model.py does not define the handout interface: %s is missing. Keep the handout\'s '
            'class and method names.' % ', '.join(names))


INTERFACE_OK_BUT_READ = (INTERFACE_OK + ' This test is marked failed (it is worth no points) only '
                         'so that you read the line above: the upload holds more than one model.py '
                         'and only the first one named was graded.')


def not_graded_top(why):
    """results.json's output when nothing was graded (`why`: the first line of the reason)."""
    return 'Not graded: %s.' % why.rstrip('.')


def not_graded_import_top(hang, number):
    """results.json's output when model.py did not import (`hang`: import_hang's words, or None; `number`: the
    import test's)."""
    return 'Not graded: %s (see test %s).' % (hang or NOT_IMPORTED_SHORT, number)


def located_top(note_text):
    """results.json's output: the note of where model.py was found, as a sentence."""
    return '%s.' % (note_text[0].upper() + note_text[1:])


def not_graded_test(why, number):
    """A test's line when the upload cannot be graded (`why`: the first line of the reason; `number`: the import
    test's)."""
    return 'not graded: %s (see test %s)' % (why, number)


def not_graded_import_test(message, number):
    return 'not graded: your model.py could not be imported (see test %s): %s' % (number, message)


def optional_todo(names):
    """An optional part the student left as the handout's TODO (`names`: its code names)."""
    return ('model.py leaves %s as the handout\'s TODO (or does not define it).'
            % ' and '.join(names))


def could_not_run(error):
    """The grader could not run (stale fixtures, a bad grading.yaml)."""
    return 'Grading could not run: %s' % error


def failed_internally(kind):
    return 'The autograder failed internally (%s).' % kind


# ----------------------------------------------------------------------------- results.json's frame
# results.py: the test that stands for a failed grading, a test the grader failed to judge, an
# untouched optional part, the marks of a cut output, and a results.json written while grading runs.

ERROR_NAME = 'Autograder error'
INTERNAL_ERROR = ('The autograder hit an internal error; this is not your fault. Course staff can '
                  'see the details.')
# what an untouched optional part reads on Gradescope: a test worth 0 that is not a failure
NOT_ATTEMPTED = ('Not attempted: this optional part (extra credit) is not in your model.py '
                 '(missing, a TODO that raises NotImplementedError, or a setting your code never '
                 'reads), so it was not graded and costs nothing. Implement it for up to %s extra '
                 'points.')
NOT_IMPLEMENTED_OPTIONAL = 'not implemented (optional)'
PENDING = 'not run yet: the grading was still running when this file was written'


def truncated(more):
    """The tail of an output cut at the limit (`more`: the characters cut)."""
    return '\n[... output truncated: %d more characters]' % more


def judge_failed(kind):
    """A test the grader failed to judge (`kind`: the exception's type name)."""
    return ('the autograder failed while judging this test (%s); this is not your fault, course '
            'staff can see the details' % kind)


def scored(name, percent):
    return '%s scored %.0f%% of its points' % (name, percent)


def in_progress(finished, total):
    return 'Grading in progress: %d of %d tests finished.' % (finished, total)


def did_not_run(message):
    """A test the stopped grading had not finished (`message`: run_autograder's why)."""
    return 'did not run: %s' % message


def stopped_kept(message, kept):
    return '%s %d test(s) had finished and are kept; the others did not run.' % (message, kept)
