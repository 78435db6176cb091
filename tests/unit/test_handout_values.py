"""
The handout's tolerances come from grading.yaml (staff/handout/grader_values.py): every public output and
check resolves to the graded test it mirrors, and a tolerance changed in grading.yaml is the one the public
tests then use. tests/e2e/test_template.py holds the committed template to a fresh generation.
"""

import dataclasses

import pytest

from autograder import GRADING_YAML
from autograder.judge import config
from autograder.judge.areas import values
from autograder.staff.handout import grader_values


def test_a_tolerance_changed_in_grading_yaml_is_the_handouts():
    grading = config.load(GRADING_YAML)
    spec = grading.test('gqa')
    spec.tolerance = dataclasses.replace(spec.tolerance, atol=3e-5, rtol=2e-4)
    found = grader_values.tolerances(['gqa_kv1', 'gqa_rope_kv2', 'rope_cache_T9', 'generate_greedy'], grading)
    assert found['gqa_kv1'] == [3e-5, 2e-4]
    rope_cache = grading.test('rope-cache').tolerance
    assert found['rope_cache_T9'] == [rope_cache.atol, rope_cache.rtol]
    assert found['gqa_rope_kv2'] == [grading.test('gqa-rope').tolerance.atol, grading.test('gqa-rope').tolerance.rtol]
    assert found['generate_greedy'] == [0.0, 0.0]   # tokens: grading.yaml gives 4.2 no tolerance, they are exact
    assert set(found) >= set(grader_values.CHECKS)


def test_a_public_output_that_mirrors_no_graded_test_is_refused():
    with pytest.raises(ValueError, match='mirrors no graded test'):
        grader_values.graded_test('attention_sinks_T4')


def test_the_known_bug_rules_are_the_graders():
    rules = grader_values.rules()
    assert (rules['known_bug_slack'], rules['known_bug_min_values']) == (values.KNOWN_BUG_SLACK,
                                                                         values.KNOWN_BUG_MIN_VALUES)


def test_a_bug_output_is_kept_only_where_the_public_test_fails_it():
    assert grader_values.fails([1.0, 2.0002], [1.0, 2.0], (1e-5, 1e-5))
    assert not grader_values.fails([1.0, 2.00001], [1.0, 2.0], (1e-5, 1e-5))   # within atol + rtol * |2|
    assert not grader_values.fails([1.0], [1.0, 2.0], (1e-5, 1e-5))            # another shape: its own message
    assert grader_values.fails([3.0, 4.0], [3.0, 5.0], (0.0, 0.0))              # tokens: one differs
