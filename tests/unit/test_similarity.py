"""
The similarity leads of the class report (autograder/staff/regrade/{text_match,behaviour_match,
shards}.py), without grading: the text pass over the 28 correct files of the corpus with the
planted copies of tests/helpers/planted_copies.py added, the behaviour matcher on prints made
here, and the shard arithmetic.
"""

import difflib
import itertools
import os

import pytest

import planted_copies
from grader_runs import REPO

from autograder.staff.regrade import behaviour_match, gradebook, shards, text_match

CORRECT = os.path.join(REPO, 'tests', 'submissions', 'correct')
EDIT = 0.15   # two files of which at most 15% of the lines differ are one file edited, not two written alone


def _changed_share(a, b):
    la, lb = a.splitlines(), b.splitlines()
    changed = sum(1 for l in difflib.unified_diff(la, lb, n=0, lineterm='') if l[:1] in '+-' and l[:3] not in ('+++', '---'))
    return changed / max(len(la), len(lb))


def test_text_flags_every_planted_copy_and_no_pair_of_files_written_apart():
    pytest.importorskip('copydetect')
    sources = {n: planted_copies.corpus(n) for n in sorted(os.listdir(CORRECT)) if os.path.isdir(os.path.join(CORRECT, n))}
    origin = {n: n for n in sources}
    for what, original, copy in planted_copies.planted():
        name = next((n for n, text in sources.items() if text == original), None)
        if name is None:   # the copied bug: its original is itself a planted edit of a corpus file
            name = 'planted bug'
            sources[name], origin[name] = original, 'course_einops_given_loader'
        sources['copy: ' + what], origin['copy: ' + what] = copy, origin[name]
    flagged = {(p.a, p.b): p for p in text_match.pairs(sources)}

    def derived(a, b):   # the same origin, or origins that are edits of one another
        oa, ob = origin[a], origin[b]
        return oa == ob or _changed_share(sources[oa], sources[ob]) <= EDIT
    planted = [('copy: renamed variables', 'per_head_loop'), ('complex_rope_group_loop', 'copy: reordered methods'),
               ('copy: a copied bug, renamed and reordered', 'planted bug')]   # each pair in name order, as pairs() gives
    for pair in planted:
        assert pair in flagged, (pair, sorted(flagged))
    assert flagged[planted[0]].identical                              # names normalised: the same code
    assert min(flagged[p].score for p in planted) >= 0.75
    pairs = list(itertools.combinations(sorted(sources), 2))
    apart = [p for p in pairs if not derived(*p)]
    assert [p for p in apart if p in flagged] == []                  # no pair of files written apart
    # what is flagged besides: the corpus's own edits of one file (README: "X without its optional code", the
    # reclassified memory styles, the course's region variants), each with at most 15% of its lines changed
    corpus_flagged = [p for p in flagged if origin[p[0]] == p[0] and origin[p[1]] == p[1]]
    assert len(apart) == 455 and len(corpus_flagged) == 21, (len(apart), len(corpus_flagged))


def test_renaming_and_reordering_keep_the_code_runnable_python():
    for what, original, copy in planted_copies.planted():
        compile(copy, what, 'exec')
        assert copy != original
    renamed = planted_copies.renamed(planted_copies.corpus('per_head_loop'))
    assert 'my_' in renamed and 'def forward(self, x)' in renamed    # locals renamed, parameters kept


def _print(values, at=(3, 7, 11), wrong=3, shape=(4, 4)):
    return {'shape': list(shape), 'wrong': wrong, 'at': list(at), 'got': list(values), 'reference': [0.0] * len(at)}


def _prints(input_set, tests):
    return {'input_set': input_set, 'shared': ['loss-curve', 'memory'], 'tests': tests}


def test_behaviour_pairs_need_the_same_inputs_and_the_same_wrong_values():
    wrong = [0.5, -1.25, 2.0]
    prints = {
        's1': _prints(0, {'loss-curve': {'seed7': _print(wrong)}, 'model': {'gqa/logits': _print(wrong)}}),
        # another input set: the shared 10.1 compares, 8.1 (inputs of its own set) does not
        's2': _prints(1, {'loss-curve': {'seed7': _print([v * (1 + 3e-7) for v in wrong])},
                          'model': {'gqa/logits': _print(wrong)}}),
        's3': _prints(0, {'model': {'gqa/logits': _print([0.5, -1.25, 2.01])}}),     # 8.1 off by 0.5%: no
        's4': _prints(0, {'model': {'gqa/logits': _print(wrong, at=(3, 7, 11, 12), wrong=9)}}),   # more elements wrong
    }
    found = {(p.a, p.b): p for p in behaviour_match.pairs(prints)}
    assert sorted(found) == [('s1', 's2')]
    assert sorted(found[('s1', 's2')].tests) == ['loss-curve']
    assert found[('s1', 's2')].tests['loss-curve'][0].startswith('`seed7`[3] = 0.5 in both (reference 0.0)')


def test_a_wrong_output_many_share_is_a_common_mistake_not_a_lead():
    same = _print([1.0, 2.0, 3.0])
    n = behaviour_match.common_limit(7) + 1
    prints = {'s%d' % i: _prints(0, {'model': {'gqa/logits': same}}) for i in range(n)}
    prints['t1'] = prints['t2'] = _prints(0, {'gqa': {'out': _print([9.0, 9.0, 9.0])}})
    found = behaviour_match.pairs(prints)
    assert {(p.a, p.b) for p in found if not p.common} == {('t1', 't2')}
    assert behaviour_match.clusters([p for p in found if p.common]) == [sorted('s%d' % i for i in range(n))]


def test_shards_are_a_fixed_partition_and_a_set_must_be_whole(tmp_path):
    subs = ['submission_%d' % i for i in range(200)]
    parts = [shards.share(subs, k, 3) for k in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(subs) and min(len(p) for p in parts) > 50
    assert shards.share(subs[:20] + ['submission_new'], 2, 3) == [s for s in parts[1] if s in subs[:20]] + \
        (['submission_new'] if shards.owner('submission_new', 3) == 2 else [])
    assert shards.parse('2/3') == (2, 3)
    for bad in ('0/3', '4/3', '3', 'a/b'):
        with pytest.raises(ValueError, match='K/N'):
            shards.parse(bad)
    assert shards.csv_name('/x/grades.csv', 2, 3) == '/x/grades.shard-2-of-3.csv'
    header = gradebook.LEADING + ['2.1 rope'] + gradebook.TRAILING
    for k in (1, 3):
        meta = {'assignment': 'assignment_1_export', 'inputs': {'profile': 'cpu'}, 'shard': [k, 3], 'written_at': ''}
        gradebook.write(str(tmp_path / ('grades.shard-%d-of-3.csv' % k)), header,
                        [['A%d' % k, '', '', 'submission_%d' % k, '', 'graded', '1', '1', '1', '', '', '', '']], meta)
    with pytest.raises(gradebook.GradebookError, match='missing 2/3'):
        shards.read(str(tmp_path))


def test_the_numpy_candidates_of_a_large_class_find_what_comparing_every_pair_finds(monkeypatch):
    pytest.importorskip('copydetect')
    names = ['per_head_loop', 'complex_rope_group_loop', 'course_einops_given_loader', 'course_starter_required_only',
             'reference_clean', 'kv_repeat_outside_measure', 'memory_partial_course_style', 'hf_rope_persistent_inv_freq']
    sources = {n: planted_copies.corpus(n) for n in names}
    for what, _, copy in planted_copies.planted():
        sources['copy: ' + what] = copy
    every = {(p.a, p.b) for p in text_match.pairs(sources)}
    monkeypatch.setattr(text_match, 'ALL_PAIRS', 0)   # as above ALL_PAIRS files: shared windows counted first
    assert {(p.a, p.b) for p in text_match.pairs(sources)} == every and len(every) == 9, sorted(every)
