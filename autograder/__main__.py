"""
Command line of the autograder: `python -m autograder COMMAND ...`.

    grade PATH            grade a model.py, a folder or a zip and print the table
    regenerate            rebuild fixtures from the reference (staff; --device cuda on the grader's GPU)
    build-template        regenerate student_template/hw1 from the reference
    build-handout         write dist/hw1_handout.zip
    build-zip             write dist/autograder.zip for Gradescope
    batch EXPORT_DIR      regrade a Gradescope export in parallel (writes grades.csv and the class report)
    report EXPORT_OR_CSV  the class report of a regrade: score histogram, tests, named bugs, errors
    plot RESULTS PNG      staff: the loss curve of one graded submission (its results.json) over the reference band
    diff OLD NEW          whose score changed between two regrades, and which grader inputs changed
    evaluate DIR          discrimination report over a corpus of submissions
    experiments           staff: reference answers to the handout's empirical and written questions
    sandbox CMD           the sandbox: check (defences in force, self-test), cleanup (sweep idle users), scan
"""

import difflib
import importlib
import sys

COMMANDS = {
    'grade': 'autograder.judge.grade',
    'regenerate': 'autograder.staff.fixtures.regenerate',
    'build-template': 'autograder.staff.handout.build',
    'build-handout': 'autograder.staff.handout.build',
    'build-zip': 'autograder.staff.deploy.build_zip',
    'batch': 'autograder.staff.regrade.batch',
    'report': 'autograder.staff.regrade.class_report',
    'diff': 'autograder.staff.regrade.regrade_diff',
    'plot': 'autograder.staff.regrade.plots',
    'evaluate': 'autograder.staff.evaluation.evaluate',
    'experiments': 'autograder.staff.experiments.main',
    'sandbox': 'autograder.judge.sandbox_commands',
}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ('-h', '--help'):
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in COMMANDS:
        near = difflib.get_close_matches(argv[0], COMMANDS, n=1) if argv else []
        print(('autograder: unknown command %r%s\n\n' % (argv[0], '; did you mean %r?' % near[0] if near else '')
               if argv else 'autograder: no command given\n\n') + __doc__.strip(), file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[argv[0]])
    return module.main(argv)


if __name__ == '__main__':
    sys.exit(main())
