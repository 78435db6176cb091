"""
`python -m autograder sandbox {check|cleanup|scan}`: the sandbox's own commands
(autograder/sandbox/cli.py), given the settings of grading.yaml, which the sandbox never reads itself.
"""

from autograder import GRADING_YAML
from autograder.judge import config
from autograder.sandbox import cli


def main(argv):
    return cli.main(argv, config.load(GRADING_YAML))
