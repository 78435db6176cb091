"""
Similarity by text for the class report (staff only), on Python tokens (standard library and
numpy: no third-party matcher). Each model.py is tokenised (`tokenize`) and normalised into a
form `black`, quote style, blank lines, line breaks and comments do not change: comments, line
breaks, indentation and docstrings dropped; every string one token S; every name V except an
attribute's (`.transpose`, `.q_proj`: API and structure, which renaming locals leaves); a
comma before a closing bracket dropped (black's magic trailing comma) and every bracket that
is not a call's, a subscript's or a definition's dropped (black adds and removes grouping
parentheses). Every run of K tokens is hashed. The handout's template
(student_template/hw1/mingpt/model.py) and every `--boilerplate` file are tokenised the SAME
way and their K-grams removed before anything is compared: starter code every student got is
no evidence, however it was reformatted. A K-gram found in more than common_limit(n) files is
removed too (MOSS's -m rule: code that many share is an idiom or a hint, not a copy); the limit
is a share of the class with a floor, so a section of 30 and a class of 300 treat it alike.

Two kinds of lead (TextPair.kind):
- `file`: the code one file shares with the other covers at least FLAG of one file's own code
  (the larger of the two shares: reordering methods cuts K-grams at each seam, so the copy's
  share of the original stays high while the original's share of the copy drops). Files equal
  once normalised form one group with similarity 1.
- `unit`: a class or a module-level function of each file (ast) whose own code is shared at
  least UNIT_FLAG both ways, each holding at least MIN_UNIT_OWN own tokens: a class pasted into
  an otherwise own file ("GroupedQueryAttention: 96% of each").
Each lead carries its margin: how far its score stands above the closest pair of the same
class that is not a lead (margin()), so a TA sees how much the top of the list stands out.
Pairs are first narrowed by counting shared K-grams with numpy (an inverted index), so the
pass costs about one tokenisation per file plus one set comparison per candidate pair.
"""

import ast
import collections
import hashlib
import io
import itertools
import keyword
import math
import os
import re
import tokenize
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from autograder import REPO_ROOT

K = 12                 # tokens per K-gram (12 normalised tokens: about one statement)
FLAG = 0.75            # a file lead: at least this share of one file's own code in the other
UNIT_FLAG = 0.8        # a unit lead: at least this share of EACH unit's own code in the other
MIN_OWN = 60           # own tokens (after the removals) below which a file is not compared
MIN_UNIT_OWN = 100     # own tokens (~8 lines) below which a unit is no lead: short completions of a TODO coincide
COMMON_SHARE = 0.05    # a K-gram in more than this share of the class is common code ...
COMMON_FLOOR = 5       # ... and in more than this many files whatever the class's size
ALL_PAIRS = 150        # up to this many distinct files every pair is compared; above, candidates first
TEMPLATE = REPO_ROOT + '/student_template/hw1/mingpt/model.py'

_SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
         tokenize.ENCODING, tokenize.ENDMARKER}
_FSTRING = tuple(getattr(tokenize, n) for n in ('FSTRING_START', 'FSTRING_MIDDLE', 'FSTRING_END')
                 if hasattr(tokenize, n))
_WORD = re.compile(r'[A-Za-z_]\w*|\d[\w.]*|\S')


def common_limit(n):
    """Files a K-gram may appear in before it counts as common code: COMMON_SHARE of the class, at least
    COMMON_FLOOR."""
    return max(COMMON_FLOOR, math.ceil(COMMON_SHARE * n))


@dataclass
class TextPair:
    a: str
    b: str
    similarity: Tuple[float, float]   # the share of each file's (each unit's) own code that the other holds
    lines: Tuple[str, str]             # the shared passage (the units), as line ranges of each file
    identical: bool = False            # the same code once names and formatting are normalised
    kind: str = 'file'                 # 'file' or 'unit'
    units: tuple = ()                  # kind 'unit': ((name in a, name in b, share a, share b), ...), best first
    margin: Optional[float] = None     # score less the best score of a pair of the class that is not a lead

    @property
    def score(self):
        return max(self.similarity) if self.kind == 'file' else min(self.similarity)


def _fallback_tokens(code):
    """Tokens of code `tokenize` refuses (bad indentation): words and single characters, per line."""
    out = []
    for n, line in enumerate(code.splitlines(), 1):
        if not line.lstrip().startswith('#'):
            out += [(tokenize.NAME if w[0].isalpha() or w[0] == '_' else tokenize.OP, w, n)
                    for w in _WORD.findall(line)]
    return out


def _raw_tokens(code):
    """[(type, string, line)] of the significant tokens; docstrings (a string that is a statement) left out."""
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return _fallback_tokens(code)
    out, statement_start, depth = [], True, 0
    for i, t in enumerate(toks):
        if t.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            statement_start = True
            continue
        if t.type in _SKIP:
            continue
        if t.type == tokenize.STRING and statement_start and depth == 0:
            nxt = next((u for u in toks[i + 1:] if u.type not in (tokenize.NL, tokenize.COMMENT)), None)
            if nxt is None or nxt.type in (tokenize.NEWLINE, tokenize.ENDMARKER):
                continue   # a docstring or a bare string statement: prose, and black re-indents it
        statement_start = False
        if t.type == tokenize.OP and t.string in '([{':
            depth += 1
        elif t.type == tokenize.OP and t.string in ')]}':
            depth = max(0, depth - 1)
        out.append((t.type, t.string, t.start[0]))
    return out


def normalised(code):
    """([normalised token], [line of each]) of `code`: the form every comparison reads."""
    raw = _raw_tokens(code)
    out, lines, stack = [], [], []
    for i, (typ, s, line) in enumerate(raw):
        prev = raw[i - 1] if i else (None, '', 0)
        if typ == tokenize.OP and s in '([{':
            # a call's, a subscript's, a definition's bracket is structure; a grouping one black may add or drop
            kept = s != '(' or (prev[0] == tokenize.NAME and not keyword.iskeyword(prev[1])) or prev[1] in (')', ']')
            stack.append(kept)
            if not kept:
                continue
        elif typ == tokenize.OP and s in ')]}':
            kept = stack.pop() if stack else True
            if out and out[-1] == ',':   # black's magic trailing comma
                out.pop()
                lines.pop()
            if not kept:
                continue
        if typ == tokenize.STRING or typ in _FSTRING:
            s = 'S'
            if out and out[-1] == 'S':   # implicit concatenation and f-string parts: one string
                continue
        elif typ == tokenize.NAME and not keyword.iskeyword(s) and prev[1] != '.':
            s = 'V'
        elif typ == tokenize.NUMBER:
            s = s.lower().replace('_', '')
        out.append(s)
        lines.append(line)
    return out, lines


_IDS = {}


def _ids(toks):
    return np.array([_IDS.setdefault(t, len(_IDS) + 1) for t in toks], dtype=np.uint64)


def kgrams(ids):
    """The hash of every run of K token ids (a polynomial over uint64: wraps, deterministic)."""
    n = len(ids) - K + 1
    if n <= 0:
        return np.zeros(0, dtype=np.uint64)
    h = np.zeros(n, dtype=np.uint64)
    with np.errstate(over='ignore'):
        for j in range(K):
            h = h * np.uint64(1000003) + ids[j:j + n]
    return h


def _coverage(starts, n_tokens):
    """Boolean mask of the tokens covered by the K-grams starting at `starts`."""
    d = np.zeros(n_tokens + 1, dtype=np.int64)
    np.add.at(d, starts, 1)
    np.add.at(d, np.minimum(starts + K, n_tokens), -1)
    return np.cumsum(d)[:n_tokens] > 0


class Fingerprint:
    """One file: its normalised tokens' K-gram hashes, which of them are its own, and its units (classes, functions)."""

    def __init__(self, code):
        self.code = code
        toks, lines = normalised(code)
        self.key = hashlib.sha256('\x00'.join(toks).encode('utf-8')).hexdigest()
        self.lines = np.array(lines, dtype=np.int64)
        self.n = len(toks)
        self.hashes = kgrams(_ids(toks))
        self.own = np.ones(len(self.hashes), dtype=bool)
        self.units = self._units()

    def _units(self):
        """[(name, first token, end token)] of the module-level classes and functions."""
        try:
            tree = ast.parse(self.code)
        except (SyntaxError, ValueError):
            return []
        out = []
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                first = node.decorator_list[0].lineno if node.decorator_list else node.lineno
                lo, hi = np.searchsorted(self.lines, [first, node.end_lineno + 1])
                if hi - lo >= K:
                    out.append((node.name, int(lo), int(hi)))
        return out

    def remove(self, hashes):
        """Mark the K-grams in the sorted array `hashes` (template, boilerplate, common) as not own."""
        if len(hashes):
            self.own &= ~np.isin(self.hashes, hashes)
        self.own_hashes = np.unique(self.hashes[self.own])
        self.own_tokens = _coverage(np.flatnonzero(self.own), self.n)
        self.own_count = int(self.own_tokens.sum())

    def unit_hashes(self, lo, hi):
        starts = np.flatnonzero(self.own[lo:max(lo, hi - K + 1)]) + lo
        return starts, np.unique(self.hashes[starts])

    def line_range(self, mask):
        idx = np.flatnonzero(mask)
        return '%d-%d' % (self.lines[idx[0]], self.lines[idx[-1]]) if len(idx) else ''


def _shared_mask(fa, starts, other):
    """Tokens of fa covered by its own K-grams at `starts` that `other` (a sorted hash array) holds too."""
    hit = starts[np.isin(fa.hashes[starts], other, assume_unique=False)]
    return _coverage(hit, fa.n)


def _longest_run(mask):
    """The mask of the longest run of True in `mask`."""
    d = np.diff(np.r_[0, mask.astype(np.int8), 0])
    starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
    out = np.zeros_like(mask)
    if len(starts):
        k = int(np.argmax(ends - starts))
        out[starts[k]:ends[k]] = True
    return out


def compare(fa, fb):
    """(share of a's own code that b holds, of b's that a holds, the longest shared passage as line ranges)."""
    ma = _shared_mask(fa, np.flatnonzero(fa.own), fb.own_hashes) & fa.own_tokens
    mb = _shared_mask(fb, np.flatnonzero(fb.own), fa.own_hashes) & fb.own_tokens
    sa, sb = ma.sum() / max(1, fa.own_count), mb.sum() / max(1, fb.own_count)
    return float(sa), float(sb), (fa.line_range(_longest_run(ma)), fb.line_range(_longest_run(mb)))


def unit_pairs(fa, fb):
    """[(name a, name b, share a, share b, lines a, lines b)] of each unit of a with the unit of b holding most of
    it."""
    out = []
    ub = []
    for name, lo, hi in fb.units:
        starts, hashes = fb.unit_hashes(lo, hi)
        own = fb.own_tokens.copy()
        own[:lo], own[hi:] = False, False
        ub.append((name, lo, hi, starts, hashes, own))
    for name, lo, hi in fa.units:
        starts, hashes = fa.unit_hashes(lo, hi)
        own_a = fa.own_tokens.copy()
        own_a[:lo], own_a[hi:] = False, False
        if own_a.sum() < MIN_UNIT_OWN or not len(hashes):
            continue
        best = None
        for nb, lb, hb, sb_, hashes_b, own_b in ub:
            common = np.intersect1d(hashes, hashes_b, assume_unique=True).size
            if common and (best is None or common > best[0]):
                best = (common, nb, lb, hb, sb_, hashes_b, own_b)
        if best is None:
            continue
        _, nb, lb, hb, starts_b, hashes_b, own_b = best
        if own_b.sum() < MIN_UNIT_OWN:
            continue
        sa = (_shared_mask(fa, starts, hashes_b) & own_a).sum() / own_a.sum()
        sb = (_shared_mask(fb, starts_b, hashes) & own_b).sum() / own_b.sum()
        out.append((name, nb, float(sa), float(sb), fa.line_range(own_a), fb.line_range(own_b)))
    return out


def _candidates(prints, limit, least):
    """Pairs of indices sharing at least `least` own K-grams (or a third of the smaller file's), counted with numpy."""
    n = len(prints)
    if n <= ALL_PAIRS:
        return list(itertools.combinations(range(n), 2))
    ids = np.concatenate([np.full(len(fp.own_hashes), i, dtype=np.int64) for i, fp in enumerate(prints)])
    flat = np.concatenate([fp.own_hashes for fp in prints])
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
    size = np.array([len(fp.own_hashes) for fp in prints])
    need = np.minimum(np.minimum(size[:, None], size[None, :]) / 3.0, least)
    a, b = np.nonzero(np.triu(shared >= np.maximum(need, 1), 1))
    return list(zip(a.tolist(), b.tolist()))


def _read_boilerplate(paths):
    """The code of every boilerplate path: a file, or every .py file under a folder."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            for root, dirs, files in os.walk(p):
                dirs.sort()
                out += [os.path.join(root, f) for f in sorted(files) if f.endswith('.py')]
        else:
            out.append(p)
    codes = []
    for path in out:
        with open(path, encoding='utf-8', errors='replace') as f:
            codes.append(f.read())
    return codes


def boilerplate_hashes(template=TEMPLATE, boilerplate=()):
    """The sorted K-gram hashes of the template and the boilerplate files, normalised as submissions are."""
    codes = ([] if template is None else _read_boilerplate([template])) + _read_boilerplate(boilerplate)
    return np.unique(np.concatenate([Fingerprint(c).hashes for c in codes] or [np.zeros(0, dtype=np.uint64)]))


def groups(sources, template=TEMPLATE, boilerplate=()):
    """({normalised code's sha256: (its Fingerprint, [submissions])} of the files with enough own code, the number
    of files a K-gram may be in before it is common: the same for the removal and the candidates)."""
    by_code = {}
    for sub, code in sorted(sources.items()):
        fp = Fingerprint(code)
        by_code.setdefault(fp.key, (fp, []))[1].append(sub)
    given = boilerplate_hashes(template, boilerplate)
    counts = collections.Counter()
    for fp, _ in by_code.values():
        counts.update(np.unique(fp.hashes).tolist())
    limit = common_limit(len(by_code))
    common = np.array(sorted(h for h, c in counts.items() if c > limit), dtype=np.uint64)
    removed = np.union1d(given, common)
    for fp, _ in by_code.values():
        fp.remove(removed)
    return {key: (fp, subs) for key, (fp, subs) in by_code.items() if fp.own_count >= MIN_OWN}, limit


def _named(lead, a, b):
    """The lead with its submissions in name order (a < b), each figure following its file."""
    if a < b:
        return lead
    return TextPair(b, a, lead.similarity[::-1], lead.lines[::-1], lead.identical, lead.kind,
                    tuple((nb, na, sb, sa) for na, nb, sa, sb in lead.units), lead.margin)


def leads(sources, template=TEMPLATE, boilerplate=(), flag=FLAG, unit_flag=UNIT_FLAG):
    """(the TextPairs that are leads, most similar first, each with its margin; {kind: (the best score of a pair
    that is no lead of either kind, that pair)}: a lead's margin is its score less its kind's)."""
    found, limit = groups(sources, template, boilerplate)
    out = []
    for fp, subs in found.values():   # the same code under other names and formatting: every pair of the group
        out += [TextPair(a, b, (1.0, 1.0), ('all', 'all'), identical=True) for a, b in itertools.combinations(subs, 2)]
    reps = list(found.values())
    apart = []   # (kind, score, pair) of the compared pairs that are not leads: the class's background

    for i, j in _candidates([fp for fp, _ in reps], limit, MIN_UNIT_OWN // 2):
        (fa, subs_a), (fb, subs_b) = reps[i], reps[j]
        sa, sb, lines = compare(fa, fb)
        if max(sa, sb) >= flag:
            out += [_named(TextPair(a, b, (sa, sb), lines), a, b) for a in subs_a for b in subs_b]
            continue
        units = sorted(unit_pairs(fa, fb), key=lambda u: -min(u[2], u[3]))
        hits = [u for u in units if min(u[2], u[3]) >= unit_flag]
        if hits:
            out += [_named(TextPair(a, b, hits[0][2:4], hits[0][4:6], kind='unit', units=tuple(h[:4] for h in hits)),
                           a, b) for a in subs_a for b in subs_b]
            continue
        apart += [('file', max(sa, sb), (subs_a[0], subs_b[0])),
                  ('unit', max([min(u[2], u[3]) for u in units] or [0.0]), (subs_a[0], subs_b[0]))]
    background = {kind: max([(score, pair) for k, score, pair in apart if k == kind] or [(0.0, None)])
                  for kind in ('file', 'unit')}
    for p in out:
        p.margin = p.score - background[p.kind][0]
    return sorted(out, key=lambda p: (p.kind != 'file', -p.score, p.a, p.b)), background


def pairs(sources, template=TEMPLATE, boilerplate=(), flag=FLAG, unit_flag=UNIT_FLAG):
    """The TextPairs that are leads of {submission: model.py text}, most similar first (leads(), without the
    background)."""
    return leads(sources, template, boilerplate, flag, unit_flag)[0]
