"""
The words of the upload (submission.py): which model.py was graded and why, and why an upload is refused
before it runs. The sentences of the functions the handout build copies word for word into the students'
tests/_support/grader_rules.py stay in those functions (see messages/__init__.py).
"""

# ----------------------------------------------------------------------------- the upload
# submission.py: which model.py was graded and why, and why an upload is refused before it runs.
# (The sentences of the functions the handout build copies word for word into the students'
# tests/_support/grader_rules.py stay in those functions: see the module docstring.)

def symlink(rel):
    return '%s is a symbolic link; upload the file itself, not a link to it' % rel


def not_regular(rel):
    return '%s is not a regular file (a device, FIFO or socket); upload your model.py itself' % rel


def hard_link(rel, links):
    return ('%s is a hard link (one file with %d names); upload a plain copy of the file'
            % (rel, links))


# why the best-ranked candidate won, by its class (submission._rank's first two fields)
WHY_GRADED = {(False, False): 'mingpt/model.py is where the handout keeps it',
              (True, False): 'it is named exactly model.py',
              (False, True): 'it is in a mingpt folder',
              (True, True): 'it is the least deeply nested'}
ALSO_SAME = '; also found, with the same content: %s'
ALSO_DIFFERENT = ('; NOT graded, with other content: %s. To have one of these graded, upload it '
                  'alone')


def and_others(more):
    return ' and %d more' % more


def several_models(count, listed, more):
    """Several different files could be model.py (`more`: and_others' words, or '')."""
    return ('found %d different files that could be your model.py (%s%s); the autograder will not '
            'guess which one you mean: upload only one (your mingpt/model.py)'
            % (count, ', '.join(listed), more))


def zip_symlink(name):
    return '%s is a symbolic link inside the zip; zip the file itself' % name


def zip_not_regular(name):
    return '%s is not a regular file inside the zip' % name


def zip_unpacks_too_large(name, limit):
    return '%s unpacks to more than %d bytes' % (name, limit)


def could_not_read(name, error):
    return 'could not read %s: %s' % (name, error)


def zip_in_zip(inner):
    return ('no model.py in the submission: %s is a zip inside the zip you uploaded, and the '
            'autograder opens only the zip itself, not zips within it: upload your '
            'mingpt/model.py, or a zip that holds it directly' % inner)


def graded_from_zip(best, why, also):
    return 'graded %s (from the zip you uploaded%s)%s' % (best, '; ' + why if why else '', also)


def unsafe_members(names, shown):
    """Zip members ignored for their path (`shown`: the first few names)."""
    return '; ignored %d zip member%s with an unsafe path (absolute or with ..): %s' % (
        len(names), 's' if len(names) > 1 else '', ', '.join(shown))


def no_submission(path):
    return 'no submission found at %s' % path


def submission_symlink(name):
    return 'the submission %s is a symbolic link; upload the file itself' % name


def no_model(holds):
    """No model.py in the upload (`holds`: what it holds, in words)."""
    return 'no model.py in the submission: upload your mingpt/model.py (%s)' % holds


def graded(name, why='', also=''):
    return 'graded %s%s%s' % (name, ' (%s)' % why if why else '', also)


def outside_upload(name):
    return '%s resolves outside the upload' % name


def linked_folder(rel):
    return ('no model.py in the submission: %s is a symbolic link to a folder, which the '
            'autograder does not follow; upload the files themselves' % rel)


NOT_A_ZIP = 'it could not be read as a zip'


def holds(what, names, shown, more):
    """'the upload holds a, b ...' (`shown`: the first few names, `more`: whether there are
    others)."""
    if not names:
        return '%s holds no file' % what
    return '%s holds %s%s' % (what, ', '.join(shown), ' ...' if more else '')


# one sentence on every Python: 3.11 fails in ast.parse ("during ast construction"), 3.10 parses
# such a file and fails only in compile() ("during compilation"), as importing model.py would
TOO_DEEP = ('model.py could not be parsed (RecursionError): it nests too deeply for Python to '
            'compile (a very long expression?): split it into shorter statements')


def syntax_error(line, msg, shown):
    """`shown`: the line's text on its own line, or ''."""
    return 'syntax error in model.py line %s: %s%s' % (line, msg, shown)


def not_parsed(kind, text):
    return ('model.py could not be parsed (%s: %s): it nests too deeply for Python (a very '
            'long expression?)' % (kind, text))


def not_checked(kind, text):
    return ('model.py could not be checked (%s: %s): simplify the file, e.g. very long or deeply '
            'nested expressions' % (kind, text))


def unusual_import(line, name):
    return ("Warning: model.py line %d imports %r, which a model has no use for; it costs nothing, "
            "but the grader's sandbox may refuse what it does" % (line, name))


def guarded_import(line, name, in_try):
    """A module the grader may lack, imported inside a try/except ImportError or a function."""
    return ("Note: model.py line %d imports %r %s; the autograder provides only torch, einops, "
            "numpy and the standard library, so that code must not run during grading"
            % (line, name, 'inside a try/except ImportError' if in_try else 'inside a function'))
