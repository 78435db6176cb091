"""python -m autograder.sandbox {check|cleanup|scan}: see cli.py."""

import sys

from autograder.sandbox.cli import main

sys.exit(main(sys.argv))
