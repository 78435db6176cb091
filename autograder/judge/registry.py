"""
The one registry of graded tests. Each test id is spelled here once, with what it is made of:
its judge (`judge='<area>:<function>'`, a function of areas/<area>.py; verdicts.JUDGES is
derived from these names), its inputs (`inputs`, below), its probe (the function `probe_<id>`,
dashes as underscores, in child/probes_<area>.py, the same area), and its flags. Its weight,
visibility, timeout and tolerance are its entry in grading.yaml. Standard library only, and the
judge only named, never imported: config.py reads this table to check grading.yaml without
loading any judge. Every other list of ids (config's known ids, the probes regenerate runs, the
probes known bugs cover, verdicts.JUDGES, inputs.probe_inputs) is derived from this table;
tests/unit/test_registry.py holds grading.yaml, the probes and the judges to it, both ways.

Its inputs are plain data: the keys of inputs.build's arrays its probe's process receives, or
prefixes ending in '/', with placeholders '{kv}' (each of the profile's kv_heads) and '{model}'
(each GPT configuration) that inputs.probe_inputs(profile) expands. inputs.build still makes the
arrays. This file is not in the fixtures' probe-code hash (its other flags change no probe's
output), but the declarations are: fixtures.probe_code_sha256 covers them, so changing a probe's
inputs makes the fixtures stale until `regenerate`.

A judge may also read what OTHER probes of the same grading returned (`evidence`): the same
model's answers given in another process, e.g. 7.1 compares the prefix outputs of its own probe
with the outputs 3.1, 5.1 and 8.1 produced for the original input. Those probes then run
whenever the harness runs, even if their own tests are skipped or switched off.

Each probe also declares the parts of model.py it runs (`calls`), those it judges as the
student's own (`owns`), and per case which parts that case runs (CASE_PARTS):
judge/set_aside.py judges a case again with a failed part set aside only where that part's own
values are wrong in the case, and skips a probe that would run a part that already hung.

Adding a graded test (docs/ARCHITECTURE.md, "Adding a graded test"): an entry here naming its
judge and its inputs, its probe in child/probes_<area>.py, its entry in grading.yaml (and a judge
in areas/<area>.py only where no existing one fits; new input arrays, where the existing ones do
not serve, in inputs.build), then `python -m autograder regenerate`.
"""

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class GradedTest:
    id: str
    # '<area>:<function>': its judge, a function of areas/<area>.py (verdicts.py resolves it); its
    # probe is then probe_<id> in child/probes_<area>.py. None only where no probe runs.
    judge: str = None
    # the inputs its probe's process receives: keys of inputs.build's arrays, or prefixes ending in
    # '/'; '{kv}' stands for each of the profile's kv_heads, '{model}' for each GPT configuration
    # (contract.configs.model_configs). inputs.probe_inputs expands them; () where no probe runs.
    inputs: Tuple[str, ...] = ()
    probed: bool = True             # False: no probe runs; grade.py judges it (the upload itself)
    needs_tolerance: bool = True    # compares numbers, so grading.yaml must say how close is close enough
    compares_known_bugs: bool = False     # its outputs are compared against the known bugs of known_bugs.py
    values_in_fixtures: bool = True  # False: the harness reads only the keys and shapes of the reference's outputs
    evidence: Tuple[str, ...] = ()  # other probes whose results its judge reads: judge(..., evidence={id: result})
    calls: Tuple[str, ...] = ()     # the parts of model.py (PARTS) its probe runs: a part that hung is not run again
    owns: Tuple[str, ...] = ()      # the parts it judges as the student's own: never set aside here

    @property
    def probe(self):
        """The name of its probe function in child/probes_<area>.py, or None when it runs no probe."""
        return 'probe_' + self.id.replace('-', '_') if self.probed else None

    @property
    def area(self):
        """Its area: areas/<area>.py holds its judge, child/probes_<area>.py its probe."""
        return self.judge.split(':')[0] if self.judge else None


# The parts of model.py a probe can run, as the student reads them (hang messages and set_aside.py name them).
# 'generate' and 'load_pretrained' are GPT's own methods: a hang there is placed apart from GPT.forward's.
PARTS = {'rope': 'RotaryPositionalEmbeddings', 'mha': 'CausalSelfAttention', 'gqa': 'GroupedQueryAttention',
         'gpt': 'GPT', 'banded': 'banded_attention', 'generate': 'GPT.generate',
         'load_pretrained': 'GPT.load_pretrained'}
# the handout's TODOs among them: a case in which every one of these it runs is set aside judges nothing of the
# student's (the GPT, its methods and the Block are given code)
STUDENT_PARTS = ('rope', 'mha', 'gqa', 'banded')
GPT_PARTS = ('gpt', 'mha', 'gqa', 'rope')
# The order matters: the tests that decide whether a part fails (PART_TESTS) run before any probe that builds on it.
TESTS = (
    GradedTest('submission', probed=False, needs_tolerance=False),
    GradedTest('rope', 'values:judge_values', ('rope/',), compares_known_bugs=True,
               calls=('rope',), owns=('rope',)),
    GradedTest('rope-cache', 'values:judge_rope_cache', ('rope-cache/',), compares_known_bugs=True,
               calls=('rope',), owns=('rope',)),
    GradedTest('mha-rope', 'values:judge_values', ('attn/x', 'w/mha-rope/'),
               compares_known_bugs=True, calls=('mha', 'rope'), owns=('mha',)),
    GradedTest('gqa', 'values:judge_values', ('attn/x', 'w/gqa-kv{kv}/'), compares_known_bugs=True,
               calls=('gqa',), owns=('gqa',)),
    GradedTest('gqa-rope', 'values:judge_values', ('attn/x', 'w/gqa-rope-kv{kv}/'),
               compares_known_bugs=True, calls=('gqa', 'rope'), owns=('gqa',)),
    # its module: GroupedQueryAttention with n_kv_head = 2 (inputs.DROPOUT_KV)
    GradedTest('dropout', 'behaviour:judge_dropout',
               ('attn/x', 'w/gqa-kv2/', 'dropout/x', 'w/dropout/'),
               evidence=('gqa',), calls=('gqa',), owns=('gqa',)),
    # the attention cases run the student's modules (never replaced: their masks are judged), the
    # GPT case the same parts set aside as 8.1, whose outputs it is compared with. Its inputs are the
    # "future" ones only, never the originals 3.1, 5.1 and 8.1 answer (inputs.probe_inputs);
    # 'model/rope/', 'model/gqa/': the GPT case at n_kv_head = n_query_head, or without RoPE, when
    # set_aside.py sets the student's GQA aside (judge/set_aside.py)
    GradedTest('causality', 'behaviour:judge_causality',
               ('attn/x_future', 'model/idx_future', 'w/mha-rope/', 'w/gqa-rope-kv2/',
                'model/rope-gqa/', 'model/rope/', 'model/gqa/'),
               evidence=('mha-rope', 'gqa-rope', 'model'), calls=GPT_PARTS),
    GradedTest('model', 'values:judge_model', ('model/idx', 'model/targets', 'model/{model}/'),
               compares_known_bugs=True, calls=GPT_PARTS),
    GradedTest('generate', 'generate:judge_generate',
               ('generate/prompt', 'model/rope-gqa/', 'model/rope/', 'model/gqa/'),
               needs_tolerance=False, compares_known_bugs=True, evidence=('model',),
               calls=('gpt', 'gqa', 'rope', 'generate')),
    # 9.1 judges the harness's kernel readings, never the reference's figures (which move by
    # kilobytes between runs)
    GradedTest('memory', 'memory:judge_memory', ('memory/x', 'w/gqa-kv{kv}/'),
               values_in_fixtures=False, calls=('gqa',), owns=('gqa',)),
    GradedTest('loss-curve', 'training:judge_loss_curve',
               ('heldout/idx', 'model/lc-init/', 'model/lc-init-mha/', 'model/lc-init-norope/'),
               calls=('gpt', 'gqa', 'rope')),
    GradedTest('gradients', 'training:judge_gradients',
               ('model/idx', 'model/targets', 'model/{model}/'),
               evidence=('loss-curve',), calls=GPT_PARTS),
    GradedTest('load-pretrained', 'pretrained:judge_load_pretrained',
               ('workflow/', 'model/{model}/'), calls=GPT_PARTS + ('load_pretrained',)),
    GradedTest('sliding-window', 'sliding_window:judge_sliding_window',
               ('sw/', 'w/mha/', 'w/gqa-rope-kv2/'), compares_known_bugs=True,
               calls=('mha', 'gqa', 'rope', 'banded')),
    GradedTest('sliding-window-memory', 'memory:judge_window_memory', ('swmem/',),
               calls=('banded',)),
    GradedTest('kv-cache', 'generate:judge_kv_cache',
               ('generate/prompt', 'kv-cache/step', 'model/rope-gqa/', 'model/gqa/'), compares_known_bugs=True,
               calls=('gpt', 'gqa', 'rope', 'generate')),
)
# Probes that are no graded test (no entry above, no judge, no fixtures): run only by a staff regrade once a grading
# is done, their outputs kept for staff alone (staff/regrade/shared_inputs.py: the class's shared inputs)
STAFF_PROBES = ('staff-shared',)
# part -> the tests that judge it as the student's own: failing one of them makes it a failed part
PART_TESTS = {'rope': ('rope', 'rope-cache'), 'mha': ('mha-rope',), 'gqa': ('gqa', 'gqa-rope')}


# The parts each case of a probe runs, by the case's first name ('rope-gqa/step' is case 'rope-gqa'; '' names
# every case). Within the case, `owned` parts are the student's under test and are never set aside.
_MODEL_CASES = {'rope': ('gpt', 'mha', 'rope'), 'gqa': ('gpt', 'gqa'), 'rope-gqa': ('gpt', 'gqa', 'rope')}
CASE_PARTS = {
    'mha-rope': {'': ('mha', 'rope')},
    'gqa-rope': {'': ('gqa', 'rope')},
    'causality': {'mha': ('mha', 'rope'), 'gqa': ('gqa', 'rope'), 'gpt': ('gpt', 'gqa', 'rope')},
    'model': _MODEL_CASES, 'gradients': _MODEL_CASES, 'load-pretrained': _MODEL_CASES,
    'generate': {'': ('gpt', 'gqa', 'rope')},
    'loss-curve': {'': ('gpt', 'gqa', 'rope')},
    'sliding-window': {'mha': ('mha',), 'gqa': ('gqa', 'rope'), 'banded': ('banded',)},
    'kv-cache': {'rope-gqa': ('gpt', 'gqa', 'rope'), 'gqa': ('gpt', 'gqa')},
}
CASE_OWNS = {'causality': {'mha': ('mha',), 'gqa': ('gqa',)},   # their masks are what these cases judge
             'sliding-window': {'mha': ('mha',), 'gqa': ('gqa',)}}
# The probes whose first run records what the student's RoPE and attention modules did inside each case
# (child/evidence.py), which the harness checks itself (judge/evidence.py): a part is set aside in a case only
# where that case showed it wrong. Not 11.1: its modules run windowed, which the check does not recompute.
RECORDS = ('mha-rope', 'gqa-rope', 'causality', 'model', 'generate', 'loss-curve', 'gradients', 'load-pretrained',
           'kv-cache')
# The probes that train: a part that raises there (and nowhere in a forward-only probe before) is not shown wrong by
# it, since a training-only bug could raise on purpose to have the grader's part run in its place.
TRAINING = ('loss-curve', 'gradients', 'load-pretrained')
# Probes whose GroupedQueryAttention case (their only GPT configuration) can run in another configuration when the
# student's GQA fails: at n_kv_head = n_query_head, where the given Block builds their CausalSelfAttention
# ('gqa': fixtures '<probe>~gqa'), or, where their GQA fails only with RoPE (5.1, not 4.1), without RoPE
# ('gqa_rope': fixtures '<probe>~gqa_rope'). Elsewhere a GQA case is set aside with nothing in its place: a test
# with other configurations is judged on those.
GQA_SET_ASIDE = {'causality': ('gpt',), 'generate': ('',), 'loss-curve': ('',)}
OTHER_CONFIGURATIONS = ('gqa', 'gqa_rope')   # the parts set aside by running another configuration
# The outputs that show a case's own forward values (the last name of their keys), where they are not all of
# the case's outputs: a training case is judged again without a failed part only where the same model's forward
# at its fixed weights is wrong (a training-only bug stays the student's); causality's values are relative, so
# only a case that could not run at all is.
FORWARD_KEYS = {'loss-curve': ('initial_logits',), 'gradients': ('logits',), 'causality': ()}


def case_name(test_id, case):
    """The entry of CASE_PARTS[test_id] a case belongs to ('' when the probe's cases all run the same parts)."""
    table = CASE_PARTS.get(test_id, {})
    if '' in table:
        return ''
    head = case.split('/')[0]
    return head if head in table else None


def case_parts(test_id, case):
    """(parts the case runs, parts it owns) of one case of a probe; a case the table does not know runs all the
    probe's `calls` and owns its `owns`."""
    entry, name = BY_ID[test_id], case_name(test_id, case)
    if name is None:
        return entry.calls, entry.owns
    return CASE_PARTS[test_id][name], entry.owns + CASE_OWNS.get(test_id, {}).get(name, ())


BY_ID = {t.id: t for t in TESTS}
IDS = tuple(t.id for t in TESTS)
PROBED = tuple(t.id for t in TESTS if t.probe)                  # what regenerate runs on the reference
COMPARES_KNOWN_BUGS = tuple(t.id for t in TESTS if t.compares_known_bugs)   # what regenerate runs on each known bug
NEEDS_TOLERANCE = tuple(t.id for t in TESTS if t.needs_tolerance)
SHAPES_ONLY = tuple(t.id for t in TESTS if not t.values_in_fixtures)     # regenerate stores zeros of their shapes


def declared_inputs():
    """
    {probe id: its entry's `inputs`, placeholders unexpanded}, in the registry's order: what
    inputs.probe_inputs expands per profile, and what the fixtures' probe-code hash covers
    (fixtures.probe_code_sha256). Read from TESTS when called.
    """
    return {t.id: t.inputs for t in TESTS if t.probe}


def probes_for(test_ids):
    """The probes a grading of `test_ids` runs: each test's own, then the evidence its judge reads, in order."""
    out = []
    for tid in test_ids:
        t = BY_ID[tid]
        for pid in ((tid,) if t.probe else ()) + t.evidence:
            if pid not in out:
                out.append(pid)
    return out

