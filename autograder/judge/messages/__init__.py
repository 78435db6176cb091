"""
The sentences a student reads, in one package. The code that decides a verdict calls a function
(or reads a constant) here with the figures the sentence shows (numbers, names, test numbers, and
arrays already formatted where formatting is the decision's logic) and gets back the exact text; no
sentence a student reads is written anywhere else in the modules that use this one
(tests/unit/test_messages.py keeps that rule). The child and the wall report facts; they are
worded here, by the harness. Callers read every name as `messages.<name>`; the words live in one
module per audience, and this package gathers them (each name is defined in one module only):
- common.py: the status of a probe or a case (STATUS_WORDS) and the lines of a probe that did not
  finish; the child's facts (an error's kind, the grader's own errors, CHILD_ERRORS, and notes); the
  student's own text past the grading's budget; comparisons and shape guards; the line naming a known
  bug (the descriptions sit beside their patches in known_bugs.py: the handout build copies them); the
  Markdown table; a verdict that could not be judged; a probe's outputs refused;
- one module per area of judge/areas/ (registry.py's `<area>:<function>`): values.py, behaviour.py
  (dropout, causality), generate.py (generation, the KV cache), memory.py (the attention's memory,
  banded_attention at a long sequence), sliding_window.py, training.py, pretrained.py;
- process.py: how a process in the sandbox ended (the wall's facts: ProbeResult.harness, worded by
  probe_job.execute);
- set_aside.py: hangs and the second run (judge/set_aside.py): where a process was stopped, what a hang
  leaves unrun, a part charged, a test judged with a failed part set aside, an optional test not judged;
- results.py: test 1.1, results.json's top line (grade.py), the grader's own failures, and results.json's
  frame (results.py): the "Autograder error" test, Not attempted, a cut output, a results.json written
  while the grading runs;
- upload.py: the upload (submission.py): which model.py was graded and why, why an upload is refused.

A sentence that names another graded test takes that test's number as an argument, which its caller
reads from grading.yaml by the test's id (`grading.test('gqa').number`): renumbering a test there
renumbers every sentence that names it.

Not here, on purpose: the sentences of the functions the handout build
(staff/handout/build.py) copies word for word into the students' tests/_support/grader_rules.py,
so that the students' own check says what the grader says: submission.too_large, _line_of,
not_utf8, read_source, decode, imported_names and interface_check._names_defined, _classes,
_has_method, missing, missing_in, nothing_to_grade, nothing_to_grade_in. Their words travel with
the copied code (a copy cannot import this module). Staff-only text (SandboxRefused's messages,
extra_data, results.json's validation errors, stderr for the person at the command line) is not
the student's and stays where it is written.

Line markers: a verdict's lines start with OK ('ok   ') or FAIL ('FAIL '); a detail under a
line is indented by DETAIL (five spaces). Where a sentence is built from pieces, the pieces
are joined here exactly as they always were: results.json must not change by a byte. These
modules import nothing but each other's common.py, so any module of the harness may word through them.
"""

from autograder.judge.messages.common import *  # noqa: F401,F403
from autograder.judge.messages.values import *  # noqa: F401,F403
from autograder.judge.messages.behaviour import *  # noqa: F401,F403
from autograder.judge.messages.generate import *  # noqa: F401,F403
from autograder.judge.messages.memory import *  # noqa: F401,F403
from autograder.judge.messages.sliding_window import *  # noqa: F401,F403
from autograder.judge.messages.training import *  # noqa: F401,F403
from autograder.judge.messages.pretrained import *  # noqa: F401,F403
from autograder.judge.messages.process import *  # noqa: F401,F403
from autograder.judge.messages.set_aside import *  # noqa: F401,F403
from autograder.judge.messages.results import *  # noqa: F401,F403
from autograder.judge.messages.upload import *  # noqa: F401,F403
