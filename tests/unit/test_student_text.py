"""
The student's own text in the grader's output (autograder/judge/student_text.py): one line each, cut
to sandbox.student_text_chars, and one budget per grading (sandbox.student_text_budget) spent in test
order by the harness whatever the probes report; past it the grader's sentence, never the text.
"""

import dataclasses
import os

from autograder import REFERENCE_DIR
from autograder.judge import config, fixtures, grade, registry, submission
from autograder.judge.student_text import DTYPE_CHARS, WITHHELD, Budget, flatten
from autograder.sandbox import ProbeResult
from tests.helpers.scripted_session import ScriptedSandbox, ScriptedSession

GRADING = config.load()
PER_TEXT = GRADING.sandbox['student_text_chars']
BUDGET = GRADING.sandbox['student_text_budget']


def error(message, where=()):
    return {'status': 'error', 'message': message, 'where': list(where)}


def test_a_text_is_one_line_whatever_it_holds():
    text = 'a\nFAIL x: ok\r\n## h\x1b[31m\u2028| t |\x85\tend'
    assert flatten(text) == 'a\\nFAIL x: ok\\r\\n## h\\x1b[31m\\u2028| t |\\x85\tend'
    assert len(flatten(text).splitlines()) == 1
    taken = Budget(PER_TEXT, BUDGET).result(ProbeResult('error', message=text, info={
        'case_errors': {'c': error(text, ['line 1\nline 2'])}, 'notes': [text], 'facts': {'c': [text]}}))
    texts = [taken.message, taken.info['case_errors']['c']['message'], *taken.info['case_errors']['c']['where'],
             *taken.info['notes'], *taken.info['facts']['c']]
    assert all(len(t.splitlines()) == 1 for t in texts), texts


def test_format_characters_are_escaped_like_control_characters():
    # issue 40: bidi overrides and isolates, zero-width characters and a BOM (category Cf) reached results.json raw
    # and could reorder the grader's own line on screen; every Cf is shown escaped, other non-ASCII text is kept
    import sys
    import unicodedata
    text = 'ok \u202eFAIL\u202c \u2066x\u2069 a\u200bb\u200d \ufeffc \u00ad \U000e0041 \u061c caf\u00e9 \u4e2d \u2192'
    assert flatten(text) == ('ok \\u202eFAIL\\u202c \\u2066x\\u2069 a\\u200bb\\u200d \\ufeffc \\xad \\U000e0041 '
                             '\\u061c caf\u00e9 \u4e2d \u2192')
    every = ''.join(chr(c) for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == 'Cf')
    assert len(every) > 100 and flatten(every).isascii()
    assert not [ch for ch in flatten(every) if unicodedata.category(ch) in ('Cf', 'Cc')]
    taken = Budget(PER_TEXT, BUDGET).result(ProbeResult('error', message='x\u202ey', info={'notes': ['\u2067n']}))
    assert (taken.message, taken.info['notes']) == ('x\\u202ey', ['\\u2067n'])


def test_past_the_budget_a_text_is_the_graders_sentence_and_a_repeat_costs_nothing():
    budget = Budget(100, 250)
    first, second, third = ('%d' % i * 100 for i in range(3))
    assert budget.take(first) == first and budget.take(second) == second
    assert budget.take(third) == WITHHELD % 250 and budget.take(first) == first   # shown once: no new text
    assert budget.take('short') == 'short'   # what still fits is shown
    assert budget.report() == {'budget': 250, 'shown_chars': 205, 'withheld_texts': 1}
    cut = Budget(100, 250).take('x' * 150)
    assert cut == 'x' * 100 + ' [... 50 more characters not shown]'   # the cut text is what is charged


def test_the_import_checks_text_is_whole_but_counted():
    budget = Budget(100, 250)
    imp = budget.result(ProbeResult('error', message='m' * 300, info={'where': ['w' * 300], 'stdout': 'p\n' * 800}),
                        whole=True)
    assert imp.message == 'm' * 300 and imp.info['where'] == ['w' * 300]
    assert imp.info['stdout'] == 'p\\n' * 500   # what 1.1 shows of it (1,000 characters), one line
    assert budget.left == 0 and budget.take('later') == WITHHELD % 250
    probe = budget.result(ProbeResult('ok', info={'stdout': 'x', 'dtypes': {'c': ['torch.float32', 'y' * 90]}}))
    assert 'stdout' not in probe.info   # no judge shows a probe's printed output
    assert probe.info['dtypes']['c'] == ['torch.float32', 'y' * DTYPE_CHARS + ' [... 66 more characters not shown]']
    harness = ProbeResult('timeout', message='x' * 1000)   # the harness's own words: whole, never charged
    assert budget.result(harness).message == 'x' * 1000


class ErrorsEverywhere(ScriptedSession):
    """Every probe reports errors in every case, one distinct message each (all of one length, so that
    once one is withheld every later one is)."""

    def probed(self, work):
        pid = work.probe_id
        return ProbeResult('ok', info={'case_errors': {
            'case%d' % i: error(('%s %d' % (pid, i)).ljust(30, '.') + 'z' * 200,
                                ['model.py line 1, in forward: x\ny'])
            for i in range(3)}})


def test_the_harness_spends_the_budget_in_test_order_in_one_place(tmp_path):
    model = os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')
    located = submission.locate(model, str(tmp_path))
    # set_aside: never: one run, every probe of it told as it ends (a second run would take its texts after it)
    charge = dataclasses.replace(GRADING, set_aside='never')
    judging = grade.Judging(charge, 'cpu', located, fixtures.load(GRADING, 'cpu'),
                            ScriptedSandbox(ErrorsEverywhere())).run_probes()
    probes = list(judging.run_result.probes)
    assert probes == registry.probes_for([s.id for s in judging.specs if s.id != 'submission'])
    shown = [pid for pid in probes for e in judging.run_result.probes[pid].info['case_errors'].values()
             if e['message'] != WITHHELD % BUDGET]
    order = [probes.index(pid) for pid in shown]
    assert shown and order == sorted(order) and set(shown) != set(probes)   # the first tests keep their text
    assert set(shown) == set(probes[:len(set(shown))])
    report = judging.info['student_text']
    assert report['budget'] == BUDGET and report['shown_chars'] <= BUDGET and report['withheld_texts'] > 0
    where = judging.run_result.probes[probes[0]].info['case_errors']['case0']['where']
    assert where == ['model.py line 1, in forward: x\\ny']
