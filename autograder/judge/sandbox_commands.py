"""
`python -m autograder sandbox {check|cleanup|scan}`: the sandbox's own commands
(autograder/sandbox/cli.py), given the settings of grading.yaml, which the sandbox never reads
itself, and the probe job `check`'s import check reads, built here as for any grading
(judge/probe_job.py).
"""

from autograder import GRADING_YAML
from autograder.contract import report_schema
from autograder.judge import config, probe_job
from autograder.sandbox import cli


def check_job(grading):
    """What `check`'s import check process reads: the cpu profile's job (Gradescope's profile)."""
    return probe_job.process_job(probe_job.job(grading.profiles['cpu']), report_schema.IMPORT)


def check(grading):
    """The isolation a grading gets here, self-test included (SandboxRefused: it would refuse)."""
    return cli.check(grading.sandbox, check_job(grading))


def main(argv):
    grading = config.load(GRADING_YAML)
    return cli.main(argv, grading.sandbox, check_job(grading))
