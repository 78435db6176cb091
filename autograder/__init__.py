"""
hw1-autograder: grades a student's mingpt/model.py (RoPE, GQA, sliding-window attention)
against the staff reference. The trusted harness lives here; student code only ever runs
in sandboxed probe processes (see the sandbox/ and child/ packages); staff tools are in
staff/ and never ship in the Gradescope zip. docs/ARCHITECTURE.md draws the parts.
"""

import os

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(PACKAGE_DIR)
REFERENCE_DIR = os.path.join(REPO_ROOT, 'reference')
TEMPLATE_DIR = os.path.join(REPO_ROOT, 'student_template', 'hw1')
FIXTURES_DIR = os.path.join(PACKAGE_DIR, 'fixtures')   # committed: made with the public test key
COURSE_DIR = os.path.join(REPO_ROOT, 'course')           # git-ignored, owner-only: a course's key and fixtures
GRADING_YAML = os.path.join(REPO_ROOT, 'grading.yaml')
DATA_FILE = os.path.join(REPO_ROOT, 'data', 'input.txt')
