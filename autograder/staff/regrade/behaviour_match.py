"""
Similarity by behaviour for the class report (staff only): pairs of submissions whose WRONG
outputs agree (behaviour_prints.py keeps them per submission). Two prints of one array compare
when their submissions ran the same inputs: the same input set, or a probe every set shares
(inputs.SHARED_PROBES: 10.1's training), or the staff-only inputs the whole class ran
(shared_inputs.py: one print per part, keyed 'shared:<part>', whatever sets the two drew). They
agree when the same elements are wrong (the same count within NOISE_COUNT, at least half of the sampled positions
in common) and the values there are equal within float noise (|a - b| <= ATOL + RTOL |b|; float32 in another
order of operations moves a value by about 1e-7 of itself). A pair agrees on a test when one of its arrays agrees and
none disagrees.

Submissions linked by agreement form clusters; a cluster larger than common_limit(n) is a
mistake many made (or a wide ring): it is listed on its own, its pairs are not ranked as leads.
"""

import itertools
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

ATOL, RTOL = 1e-5, 1e-4
NOISE_COUNT = 0.01     # wrong counts may differ by 1% (at least 2): an element at the tolerance's edge
SHOWN = 2              # agreeing values kept per test, to show
SHARED_PREFIX = 'shared:'   # BehaviourPair.tests keys of a part's outputs on the class's shared inputs


@dataclass
class BehaviourPair:
    a: str
    b: str
    # test id (or 'shared:<part>') -> agreeing values, in words
    tests: Dict[str, List[str]] = field(default_factory=dict)
    common: bool = False    # inside a cluster too large to be a lead


def common_limit(n):
    """A wrong output shared by more submissions than this is a common mistake: 5, or 2% of a large class."""
    return max(5, n // 50)


def _numbers(values):
    return np.array([float(v) for v in values], dtype=np.float64)


def agree(pa, pb):
    """[(flat index, value a, value b, reference)] where two prints of one array agree, [] when they do not."""
    if pa['shape'] != pb['shape'] \
            or abs(pa['wrong'] - pb['wrong']) > max(2, NOISE_COUNT * max(pa['wrong'], pb['wrong'])):
        return []
    at_a = {i: n for n, i in enumerate(pa['at'])}
    common = [(at_a[i], n, i) for n, i in enumerate(pb['at']) if i in at_a]
    if len(common) * 2 < min(len(pa['at']), len(pb['at'])):
        return []
    va = _numbers([pa['got'][n] for n, _, _ in common])
    vb = _numbers([pb['got'][n] for _, n, _ in common])
    close = (np.abs(va - vb) <= ATOL + RTOL * np.abs(vb)) | ((va == vb) | (np.isnan(va) & np.isnan(vb)))
    if not close.all():
        return []
    ref = pa.get('reference') or [None] * len(pa['at'])
    return [(i, pa['got'][na], pb['got'][nb], ref[na]) for na, nb, i in common]


def _groups(prints):
    """{(test, key, inputs): [(submission, print)]}: the prints that ran the same inputs."""
    groups = {}
    for sub, p in sorted(prints.items()):
        shared = set(p.get('shared') or ())
        for tid, arrays in (p.get('tests') or {}).items():
            scope = 'every set' if tid in shared else 'set %s' % p.get('input_set')
            for key, print_ in arrays.items():
                groups.setdefault((tid, key, scope), []).append((sub, print_))
        for part, arrays in (p.get('shared_inputs') or {}).items():   # the whole class ran these inputs
            for key, print_ in arrays.items():
                groups.setdefault((SHARED_PREFIX + part, key, 'the class'), []).append((sub, print_))
    return groups


def shared_part(test):
    """The part a key of BehaviourPair.tests names where it is one of the class's shared inputs, else None."""
    return test[len(SHARED_PREFIX):] if test.startswith(SHARED_PREFIX) else None


def _words(key, found):
    shown = ['`%s`[%d] = %s in both' % (key, i, a) + (' (reference %s)' % ref if ref is not None else '')
             for i, a, _, ref in found[:SHOWN]]
    return '; '.join(shown)


def pairs(prints):
    """BehaviourPairs of {submission: its prints}, the most tests in agreement first."""
    verdicts = {}   # (a, b) -> test -> [words of agreeing arrays, number of disagreeing arrays]
    for (tid, key, _), members in _groups(prints).items():
        for (a, pa), (b, pb) in itertools.combinations(members, 2):
            found = agree(pa, pb)
            slot = verdicts.setdefault((a, b), {}).setdefault(tid, [[], 0])
            if found:
                slot[0].append(_words(key, found))
            else:
                slot[1] += 1
    out = []
    for (a, b), tests in verdicts.items():
        agreed = {tid: words for tid, (words, against) in tests.items() if words and not against}
        if agreed:
            out.append(BehaviourPair(a, b, agreed))
    _mark_common(out, len(prints))
    return sorted(out, key=lambda p: (p.common, -len(p.tests), p.a, p.b))


def clusters(found):
    """[[submissions]] linked by agreement, largest first."""
    parent = {}

    def root(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for p in found:
        parent[root(p.a)] = root(p.b)
    groups = {}
    for x in parent:
        groups.setdefault(root(x), []).append(x)
    return sorted((sorted(g) for g in groups.values()), key=lambda g: (-len(g), g))


def _mark_common(found, n):
    for group in clusters(found):
        if len(group) > common_limit(n):
            members = set(group)
            for p in found:
                p.common = p.common or p.a in members
