"""
The expensive CI test (~40 submissions x ~15 s / 2 jobs, about 5 minutes): grade the whole
corpus of tests/submissions once (module scope) and check the autograder's discrimination:
no false failure on a correct variant, every bug losing points on exactly its must_fail tests
(no more, no fewer), and the expected known bug named for at least 90% of the mutants that have one.
"""

import os

import pytest

from autograder import REPO_ROOT
from autograder.staff.evaluation import evaluate

CORPUS = os.path.join(REPO_ROOT, 'tests', 'submissions')


@pytest.fixture(scope='module')
def report():
    if not evaluate.load_corpus(CORPUS):
        pytest.skip('no corpus under tests/submissions')
    rows, summary, test_ids, _, _ = evaluate.evaluate(CORPUS, jobs=2, progress=False)
    return rows, summary


def test_no_false_failures_on_correct_variants(report):
    rows, s = report
    bad = ['%s: lost %s' % (r['name'], sorted(r['lost']) or r['missing_tests'])
           for r in rows if r['verdict'] == 'correct' and r['false_failure']]
    assert not bad, bad


def test_every_bug_caught_on_exactly_its_must_fail_tests(report):
    rows, s = report
    missed = ['%s: must_fail %s, lost %s' % (r['name'], r['must_fail'], sorted(r['lost']))
              for r in rows if r['verdict'] != 'correct' and not r['caught']]
    assert not missed, missed


def test_known_bugs_named(report):
    rows, s = report
    unnamed = [(r['name'], r['known_bug']) for r in rows
               if r['verdict'] != 'correct' and r['known_bug'] and not r['fp_named']]
    assert s['fp_rate'] >= evaluate.KNOWN_BUG_TARGET, unnamed


def test_beats_the_course_tests(report):
    rows, s = report
    assert s['caught'] >= s['course_caught']
