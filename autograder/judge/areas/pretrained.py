"""
Judge of the handout's train-then-extend workflow (handout 5.2 and 5.7): a model trained at
block_size 16 is saved as chargpt.py saves it (model.pt and config.json), loaded by the
student's own GPT.load_pretrained (the course's given loader or their own) into a block-256
model, and run at T=256. The grade rests on the logits matching the reference's. A failure
names the stage that failed (its error, where in model.py) and the facts the probe observed
about the student's tensors: which of model.pt's tensors do not fit the block-256 model, which
the loader left unlike model.pt, so that the message holds for any loader.
"""

from autograder.judge import messages
from autograder.judge.areas import Verdict, case_error_line, compare, row

MAX_FACTS = 6


def _facts(result, label):
    facts = result.info.get('facts', {}).get(label, [])
    return [messages.fact(f) for f in facts[:MAX_FACTS]] + (
        [messages.and_more(len(facts) - MAX_FACTS)] if len(facts) > MAX_FACTS else [])


def _about_shapes(message, facts):
    """True when an error speaks of sizes or shapes, or names one of the tensors the facts are about:
    then those facts are its cause; a missing file or a typo is not about them."""
    words = ('size', 'shape', 'dimension')
    names = [f.split()[2] for f in facts if f.startswith('model.pt holds ')]
    return any(w in message.lower() for w in words) or any(n in message for n in names)


def judge_load_pretrained(test, result, fixtures, grading):
    tol = test.tolerance
    wf = grading.profiles[fixtures.profile_name].workflow
    short, long_ = wf.block_from, wf.block_to
    expected = fixtures.probe(test.id)
    errors = result.info.get('case_errors', {})
    labels = sorted(k.split('/')[0] for k in expected if k.endswith('/logits'))
    lines, rows, passed = [], [], 0
    for label in labels:
        stage = result.arrays.get(label + '/stage')
        stage = int(stage) if stage is not None and stage.shape == () and stage.dtype.kind in 'iu' else 0
        if label in errors:
            what = messages.STAGE_WORDS.get(stage, messages.STAGE_WORDS[0]) % (short if stage == 0 else long_)
            lines.append(messages.FAIL + case_error_line(messages.stage_case(label, what),
                                                         errors[label]))
            facts = _facts(result, label)
            if not _about_shapes(errors[label].get('message', ''), result.info.get('facts', {}).get(label, [])):
                facts = []
            if facts and stage == 1:
                lines.append(messages.pretrained_shapes_differ(short, long_))
            elif facts:
                lines.append(messages.pretrained_left(long_))
            lines += facts
            continue
        observed, exp = result.arrays.get(label + '/logits'), expected[label + '/logits']
        ok, desc = compare(observed, exp, tol.atol, tol.rtol)
        if ok:
            passed += 1
            lines.append(messages.pretrained_ok(label, short, long_))
            continue
        lines.append(messages.pretrained_logits(label, long_, desc))
        rows.append(row(label, desc))
        facts = _facts(result, label)
        if facts:
            lines.append(messages.pretrained_left(long_))
            lines += facts
        elif observed is not None and observed.shape == exp.shape:
            early, _ = compare(observed[:, :short], exp[:, :short], tol.atol, tol.rtol)
            lines.append(messages.pretrained_copied(early, short, long_))
    return Verdict(passed / len(labels) if labels else 0.0,
                   [messages.pretrained_models(passed, len(labels), short, long_)] + lines,
                   rows=[r for r in rows if r])
