"""
Similarity by text for the class report (staff only), with copydetect (PyPI: offline, in
process). Each model.py is tokenised and normalised by copydetect (names become V, F, O; strings
S; comments dropped), cut into every K-character window (copydetect's default noise threshold,
window 1: every window kept, so the figures do not depend on Python's per-process string hash
seed), and the handout's template (student_template/hw1/mingpt/model.py) is removed as
boilerplate: starter code every student got is no evidence. A passage found in more than
common_limit(n) submissions is removed too (MOSS's -m rule: code that many share is an idiom or
a hint, not a copy).

A pair is flagged when the code it shares covers at least FLAG of one file's own code (what is
left after the removals; copydetect's similarity, the larger of the pair's two): reordering the
methods of a copy adds new windows at each seam, so the copy's share of the original stays high
while the original's share of the copy drops. Files identical
after normalisation (renamed variables, changed comments) form one group with similarity 1.
Pairs of a large class are first narrowed by counting shared windows with numpy, so the pass
costs about one copydetect fingerprint per submission.
"""

import collections
import hashlib
import io
import itertools
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from autograder import REPO_ROOT

K = 25
FLAG = 0.75
MIN_OWN = 200          # characters of own code (after the removals) below which a file is not compared
ALL_PAIRS = 150        # up to this many distinct files every pair is compared; above, candidates first
TEMPLATE = REPO_ROOT + '/student_template/hw1/mingpt/model.py'


def common_limit(n):
    """Submissions a passage may appear in before it counts as common code: 10, or 5% of a large class."""
    return max(10, n // 20)


@dataclass
class TextPair:
    a: str
    b: str
    similarity: Tuple[float, float]   # the share of each file's own code that the other holds
    lines: Tuple[str, str]             # the longest shared passage, as line ranges of each file
    identical: bool = False            # the same code once names are normalised

    @property
    def score(self):
        return max(self.similarity)


def fingerprint(code, boilerplate=()):
    from copydetect import CodeFingerprint
    return CodeFingerprint('model.py', K, 1, boilerplate=list(boilerplate), language='python', fp=io.StringIO(code))


def without(fp, common):
    """The fingerprint with the `common` hashes removed (as if they were boilerplate)."""
    from copydetect.utils import get_token_coverage
    fp.hashes = fp.hashes - common
    fp.hash_idx = {h: i for h, i in fp.hash_idx.items() if h in fp.hashes}
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code))
    return fp


def _line_range(code, start, end):
    return '%d-%d' % (code.count('\n', 0, start) + 1, code.count('\n', 0, max(start, end - 1)) + 1)


def compare(fa, fb):
    """(similarity of a, of b, longest shared passage as line ranges) of two fingerprints."""
    from copydetect import compare_files
    _, sims, (sa, sb) = compare_files(fa, fb)
    if not len(sa) or not len(sa[0]):
        return 0.0, 0.0, ('', '')
    ia, ib = int(np.argmax(sa[1] - sa[0])), int(np.argmax(sb[1] - sb[0]))
    return (float(sims[0]), float(sims[1]), (_line_range(fa.raw_code, sa[0][ia], sa[1][ia]),
                                             _line_range(fb.raw_code, sb[0][ib], sb[1][ib])))


def _candidates(fps, limit):
    """Pairs of indices sharing at least a third of the smaller file's windows, counted with numpy."""
    n = len(fps)
    if n <= ALL_PAIRS:
        return list(itertools.combinations(range(n), 2))
    hashes = [np.fromiter(fp.hashes, dtype=np.int64, count=len(fp.hashes)) for fp in fps]
    ids = np.concatenate([np.full(len(h), i, dtype=np.int64) for i, h in enumerate(hashes)])
    flat = np.concatenate(hashes)
    order = np.argsort(flat, kind='stable')
    flat, ids = flat[order], ids[order]
    starts = np.flatnonzero(np.r_[True, flat[1:] != flat[:-1]])
    sizes = np.diff(np.r_[starts, len(flat)])
    shared = np.zeros(n * n, dtype=np.int64)
    for m in np.unique(sizes[(sizes >= 2) & (sizes <= limit)]):
        block = ids[starts[sizes == m][:, None] + np.arange(m)]
        a, b = np.triu_indices(m, 1)
        shared += np.bincount((block[:, a] * n + block[:, b]).ravel(), minlength=n * n)
    shared = shared.reshape(n, n)
    size = np.array([len(h) for h in hashes])
    need = np.minimum(size[:, None], size[None, :]) / 3.0
    a, b = np.nonzero(np.triu(shared >= np.maximum(need, 1), 1))
    return list(zip(a.tolist(), b.tolist()))


def groups(sources, template=TEMPLATE):
    """({normalised code's sha256: (its fingerprint, [submissions])} of the files with enough own code, the
    number of submissions a passage may be in before it is common: the same for the removal and the candidates)."""
    with open(template, encoding='utf-8') as f:
        boilerplate = fingerprint(f.read()).hashes
    by_code = {}
    for sub, code in sorted(sources.items()):
        fp = fingerprint(code, boilerplate)
        key = hashlib.sha256(fp.filtered_code.encode('utf-8')).hexdigest()
        by_code.setdefault(key, (fp, []))[1].append(sub)
    counts = collections.Counter(h for fp, _ in by_code.values() for h in fp.hashes)
    limit = common_limit(len(by_code))
    common = {h for h, c in counts.items() if c > limit}
    kept = {key: (without(fp, common), subs) for key, (fp, subs) in by_code.items()}
    return {key: (fp, subs) for key, (fp, subs) in kept.items() if fp.token_coverage >= MIN_OWN}, limit


def pairs(sources, template=TEMPLATE, flag=FLAG):
    """The flagged TextPairs of {submission: model.py text}, most similar first."""
    found, limit = groups(sources, template)
    out = []
    for fp, subs in found.values():   # the same code under other names: every pair of the group
        out += [TextPair(a, b, (1.0, 1.0), ('all', 'all'), identical=True) for a, b in itertools.combinations(subs, 2)]
    reps = list(found.values())
    for i, j in _candidates([fp for fp, _ in reps], limit):
        sa, sb, lines = compare(reps[i][0], reps[j][0])
        if max(sa, sb) >= flag:
            out += [TextPair(a, b, (sa, sb), lines) if a < b else TextPair(b, a, (sb, sa), lines[::-1])
                    for a in reps[i][1] for b in reps[j][1]]
    return sorted(out, key=lambda p: (-p.score, p.a, p.b))
