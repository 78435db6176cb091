"""
Each test of a grading is judged once (issue 34): the verdict a test's probes earned as they ended
is the one the partial results.json shows and the final one keeps; test 1.1 is judged once, as the
import check ends (grade.import_verdict), and its final verdict only adds what the probes noted.
"""

import collections
import os

from autograder import REFERENCE_DIR
from autograder.judge import config, fixtures, grade, submission, verdicts
from autograder.judge import judging as judging_module
from autograder.sandbox import ProbeResult, Settings
from tests.helpers.scripted_session import ScriptedSandbox, ScriptedSession

GRADING = config.load()
NOTE = 'parameters the reference does not have kept their initial values: extra.weight'


class Noting(ScriptedSession):
    """The import check passes, every probe reports a note and no arrays."""

    def probed(self, work):
        return ProbeResult('ok', info={'notes': [NOTE]})


def test_every_test_is_judged_once_and_the_partial_shows_the_verdicts_kept(tmp_path, monkeypatch):
    calls = collections.Counter()
    real_judge, real_import = verdicts.verdict_for, judging_module.import_verdict

    def verdict_for(spec, *args):
        calls[spec.id] += 1
        return real_judge(spec, *args)

    def import_verdict(*args):
        calls['submission'] += 1
        return real_import(*args)
    monkeypatch.setattr(verdicts, 'verdict_for', verdict_for)
    monkeypatch.setattr(judging_module, 'import_verdict', import_verdict)   # as Judging reads it
    partials = []
    located = submission.locate(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), str(tmp_path))
    judging = grade.Judging(GRADING, 'cpu', located, fixtures.load(GRADING, 'cpu'), ScriptedSandbox(Noting()),
                            progress=partials.append).run_probes()
    final = {spec.id: judging.verdict(spec) for spec in judging.specs}
    assert {spec.id: judging.verdict(spec) for spec in judging.specs} == final   # asked again: kept
    assert calls and max(calls.values()) == 1, calls
    shown = partials[-1]
    assert len(shown) > 3 and all(shown[k] is final[k] for k in shown if k != 'submission')
    # 1.1: the partial shows it as the import check left it; the final adds the probes' note once
    assert NOTE not in '\n'.join(shown['submission'].lines)
    assert '\n'.join(final['submission'].lines).count(NOTE) == 1
    assert final['submission'].passed and shown['submission'].passed


class Hanging(ScriptedSession):
    """Test 6.1's process is stopped at its wall cap after 60 s (its report never read); the others report 0.25 s."""

    def probed(self, work):
        if work.probe_id == 'dropout':
            return ProbeResult('timeout', unread=True,
                               harness={'ended': 'wall', 'wall_seconds': 60.004, 'cpu_seconds': 0.1, 'cpu_limit': 60})
        return ProbeResult('ok', seconds=0.25)


def test_probe_seconds_of_a_hang_are_the_seconds_it_ran(tmp_path):
    """Issue 41: extra_data.probe_seconds read 0.0 for a probe that ran 60 s (its own report never came)."""
    located = submission.locate(os.path.join(REFERENCE_DIR, 'mingpt', 'model.py'), str(tmp_path))
    judging = grade.Judging(GRADING, 'cpu', located, fixtures.load(GRADING, 'cpu'),
                            ScriptedSandbox(Hanging(), Settings.from_mapping(GRADING.sandbox))).run_probes()
    seconds = judging.info['probe_seconds']
    assert seconds['dropout'] == 60.0 and seconds['rope'] == 0.25, seconds
