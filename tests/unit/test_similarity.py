"""
The similarity leads of the class report (autograder/staff/regrade/{text_match,behaviour_match,
shards}.py), without grading: the text pass over the 28 correct files of the corpus with the
planted copies of tests/helpers/planted_copies.py added, the behaviour matcher on prints made
here, and the shard arithmetic.
"""

import ast
import difflib
import itertools
import os
import re

import pytest

import planted_copies
from grader_runs import REPO

from autograder.staff.regrade import behaviour_match, gradebook, shards, text_match

CORRECT = os.path.join(REPO, 'tests', 'submissions', 'correct')
UNIT_EDIT = 0.5   # two classes or functions of which fewer than half the lines differ share a scaffold
EDIT = 0.15   # two files of which at most 15% of the lines differ are one file edited, not two written alone


def _changed_share(a, b):
    la, lb = a.splitlines(), b.splitlines()
    changed = sum(1 for l in difflib.unified_diff(la, lb, n=0, lineterm='')
                  if l[:1] in '+-' and l[:3] not in ('+++', '---'))
    return changed / max(len(la), len(lb))


def _unit(source, name):
    node = next((n for n in ast.parse(source).body if getattr(n, 'name', None) == name), None)
    return ast.get_source_segment(source, node) if node is not None else ''


def _class_with_copies():
    """(sources, origin, unit_origin, the planted leads): the corpus's correct files with every planted copy added."""
    sources = {n: planted_copies.corpus(n) for n in sorted(os.listdir(CORRECT))
               if os.path.isdir(os.path.join(CORRECT, n))}
    origin = {n: n for n in sources}
    for what, original, copy in planted_copies.planted():
        name = next((n for n, text in sources.items() if text == original), None)
        if name is None:   # the copied bug: its original is itself a planted edit of a corpus file
            name = 'planted bug'
            sources[name], origin[name] = original, 'course_einops_given_loader'
        sources['copy: ' + what], origin['copy: ' + what] = copy, origin[name]
    unit_origin = {}
    for what, name, original, copy, unit in planted_copies.disguised():
        if name not in sources:   # the second copied bug's original: an edit of sdpa_enable_gqa
            sources[name], origin[name] = original, 'sdpa_enable_gqa'
        sources['copy: ' + what], origin['copy: ' + what] = copy, origin[name]
        if unit:   # the pasted class: the rest of the file is bmm_index_select's
            origin['copy: ' + what], unit_origin[('copy: ' + what, unit)] = 'bmm_index_select', name
    planted = {('copy: renamed variables', 'per_head_loop'): None,
               ('complex_rope_group_loop', 'copy: reordered methods'): None,
               ('copy: a copied bug, renamed and reordered', 'planted bug'): None,
               ('copy: renamed, reordered and reformatted', 'grouped_einsum_5d'): None,
               ('copy: a copied bug of its own, renamed and reformatted', 'sdpa bug'): None,
               ('copy: a pasted class', 'per_head_loop'): 'GroupedQueryAttention',
               ('copy: a copy of a correct file', 'fused_qkv_einops_repeat'): None}   # each pair in name order
    return sources, origin, unit_origin, planted


def _written_apart(lead, sources, origin, unit_origin=None):
    """Whether a lead joins two files written apart: neither is an edit of the other (at most EDIT of the lines), and
    for a unit lead, a named unit of the one shares fewer than half its lines with the other's. The corpus's entries
    were written around one author's GPT, banded_attention and KVCache (most lines alike, load_pretrained apart):
    such a unit is shared by construction, not written twice."""
    unit_origin = unit_origin or {}
    oa, ob = origin[lead.a], origin[lead.b]
    if lead.kind == 'file':
        return not (oa == ob or _changed_share(sources[oa], sources[ob]) <= EDIT)
    for na, nb, _, _ in lead.units:
        ua, ub = unit_origin.get((lead.a, na), oa), unit_origin.get((lead.b, nb), ob)
        if ua != ub and _changed_share(_unit(sources[ua], na), _unit(sources[ub], nb)) > UNIT_EDIT:
            return True
    return False


def test_text_flags_every_planted_copy_and_no_pair_of_files_written_apart():
    sources, origin, unit_origin, planted = _class_with_copies()
    found, background = text_match.leads(sources)
    flagged = {(p.a, p.b): p for p in found}
    for pair, unit in planted.items():
        assert pair in flagged, (pair, sorted(flagged))
        lead = flagged[pair]
        assert lead.kind == ('unit' if unit else 'file') and lead.score >= 0.75, lead
        assert unit is None or lead.units[0][0] == lead.units[0][1] == unit, lead.units
        # each stands clear of the closest pair of the class that is not a lead
        assert lead.margin == lead.score - background[lead.kind][0] and lead.margin >= 0.15, (pair, lead.margin)
    assert flagged[('copy: renamed variables', 'per_head_loop')].identical     # names normalised: the same code
    assert flagged[('copy: a copy of a correct file', 'fused_qkv_einops_repeat')].identical   # black, quotes, comments
    assert [(p.a, p.b, p.units) for p in found if _written_apart(p, sources, origin, unit_origin)] == []
    assert background['file'][1] not in flagged and background['unit'][1] not in flagged
    # what is flagged besides: the corpus's own edits of one file and the units its entries share by design
    corpus = [p for p in found if origin[p.a] == p.a and origin[p.b] == p.b]
    assert len(corpus) == 12, [(p.a, p.b) for p in corpus]


def test_formatting_never_turns_the_template_into_own_code():
    template = open(text_match.TEMPLATE, encoding='utf-8').read()
    given = text_match.boilerplate_hashes()
    for variant in (planted_copies.restyled(template), planted_copies.reformatted(template)):
        assert variant != template
        fp = text_match.Fingerprint(variant)
        fp.remove(given)
        assert fp.own_count == 0
    # and a file's own code is the same count of tokens however it is formatted
    own = text_match.Fingerprint(planted_copies.corpus('sdpa_enable_gqa'))
    again = text_match.Fingerprint(planted_copies.reformatted(planted_copies.corpus('sdpa_enable_gqa')))
    for fp in (own, again):
        fp.remove(given)
    assert own.own_count == again.own_count > 1000 and own.key == again.key


def test_an_older_starter_given_as_boilerplate_leaves_its_section_without_false_leads(tmp_path):
    section = planted_copies.older_starter_section()
    older = sorted(n for n in section if n.startswith('older: '))
    origin = {n: n.replace('older: ', '') for n in section}
    texts = dict(section, **{o: planted_copies.corpus(o) for o in list(origin.values()) + ['older_starter_c_attn']})
    unit_origin = {(n, planted_copies.OLDER_STARTER_CLASS): 'older_starter_c_attn' for n in older}
    starter = tmp_path / 'older_starter' / 'model.py'
    starter.parent.mkdir()
    starter.write_text(planted_copies.older_starter(), encoding='utf-8')
    without = {(p.a, p.b): p for p in text_match.pairs(section)}
    # without it, the class the older starter gave is every older pair's lead: the test can fail
    assert all(any(u[0] == planted_copies.OLDER_STARTER_CLASS for u in without[pair].units)
               for pair in itertools.combinations(older, 2)), sorted(without)
    given = text_match.pairs(section, boilerplate=[str(starter.parent)])
    assert [p for p in given if p.a in older and p.b in older and
            any(u[0] == planted_copies.OLDER_STARTER_CLASS for u in p.units)] == []
    assert [(p.a, p.b, p.units) for p in given if _written_apart(p, texts, origin, unit_origin)] == []
    assert text_match.common_limit(12) == text_match.common_limit(30) == 5 < text_match.common_limit(300) == 15


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
    names = ['per_head_loop', 'complex_rope_group_loop', 'course_einops_given_loader', 'course_starter_required_only',
             'reference_clean', 'kv_repeat_outside_measure', 'memory_partial_course_style',
             'hf_rope_persistent_inv_freq']
    sources = {n: planted_copies.corpus(n) for n in names}
    for what, _, copy in planted_copies.planted():
        sources['copy: ' + what] = copy
    every = {(p.a, p.b) for p in text_match.pairs(sources)}
    monkeypatch.setattr(text_match, 'ALL_PAIRS', 0)   # as above ALL_PAIRS files: shared windows counted first
    assert {(p.a, p.b) for p in text_match.pairs(sources)} == every and len(every) == 22, sorted(every)


def test_the_report_names_a_pasted_class_and_takes_boilerplate_from_its_command_line(tmp_path):
    from autograder.staff.regrade import class_report, similarity
    sources, _, _, _ = _class_with_copies()
    pair = ('copy: a pasted class', 'per_head_loop')
    ranked, _, _ = similarity.leads({}, sources)
    lead = next(lead for lead in ranked if (lead.a, lead.b) == pair)
    words = similarity._text_words(lead)
    assert re.match(r'GroupedQueryAttention: 98% of each \(lines [0-9-]+ / [0-9-]+\); \+\d+ points above the closest '
                    r'pair not flagged$', words), words
    donor = tmp_path / 'given.py'
    donor.write_text(sources['per_head_loop'], encoding='utf-8')   # as if staff had handed that file out
    assert pair not in {(lead.a, lead.b) for lead in similarity.leads({}, sources, boilerplate=[str(donor)])[0]}
    args = class_report._parser().parse_args(['grades.csv', '--boilerplate', 'a.py', '--boilerplate', 'old/'])
    assert args.boilerplate == ['a.py', 'old/']
