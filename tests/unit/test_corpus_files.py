"""
The corpus of tests/submissions is read by `evaluate` (must_fail is exact): every expected.yaml
must parse, name a verdict, only known test ids, known known bugs, and tests of optional
parts under not_implemented; every entry has its model.py. Cheap: nothing is graded here.
"""

import os

import yaml

from autograder import REPO_ROOT
from autograder.judge import config, registry
from autograder.judge.known_bugs import BY_ID as KNOWN_BUGS

CORPUS = os.path.join(REPO_ROOT, 'tests', 'submissions')
OPTIONAL = {t.id for t in config.load().tests if t.optional_part}


def entries():
    for kind in ('correct', 'buggy'):
        for name in sorted(os.listdir(os.path.join(CORPUS, kind))):
            yield kind, name, os.path.join(CORPUS, kind, name)


def test_every_expected_yaml_is_well_formed():
    problems = []
    for kind, name, folder in entries():
        if not os.path.isfile(os.path.join(folder, 'model.py')):
            problems.append('%s/%s has no model.py' % (kind, name))
        with open(os.path.join(folder, 'expected.yaml')) as f:
            exp = yaml.safe_load(f)
        if exp.get('verdict') != kind:
            problems.append('%s/%s: verdict %r' % (kind, name, exp.get('verdict')))
        unknown = set(exp.get('must_fail') or []) - set(registry.IDS)
        if unknown or (kind == 'buggy') != bool(exp.get('must_fail')):
            problems.append('%s/%s: must_fail %r' % (kind, name, exp.get('must_fail')))
        if kind == 'buggy' and exp.get('known_bug') not in (None,) + tuple(KNOWN_BUGS):
            problems.append('%s/%s: unknown known bug %r' % (kind, name, exp['known_bug']))
        if not set(exp.get('not_implemented') or []) <= OPTIONAL:
            problems.append('%s/%s: not_implemented %r' % (kind, name, exp['not_implemented']))
    assert problems == []
