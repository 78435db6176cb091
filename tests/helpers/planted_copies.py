"""
A class with PLANTED copies, for the similarity section of the class report (tests/e2e/
test_sharded_similarity.py, tests/unit/test_similarity.py): copies made the way students disguise them,
from independently styled files of the corpus (tests/submissions/correct):

- `renamed(source)`: every local variable renamed (parameters and keyword-argument names
  kept: the grader calls the methods by keyword);
- `reordered(source)`: the methods of every class in reverse order;
- a bug no known bug matches, planted into one style and copied renamed and reordered: the
  copied bug (COPIED_BUG: GPT.forward skips the final LayerNorm);
- `reformatted(source)`: through `black` where it is installed, and in any case with the other
  quote, the comments and docstrings rewritten and blank lines added (restyled);
- `pasted(own, donor, name)`: one class of `donor` pasted over the same class of an own file.

disguised() gives the copies of issue 44's kinds (renamed, reordered and reformatted; a copied
bug of its own; a pasted class; a copy of a correct file); older_starter_section() a small
section whose students share an older starter's provided class.

planted() gives every planted pair; class_submissions() a small class of them (PLANTED_PAIRS).
"""

import ast
import io
import keyword
import os
import tokenize

from grader_runs import REPO  # noqa: F401  (puts the checkout on sys.path)
from autograder.judge import source_patches

KEEP = {'self', 'cls', 'config', 'super', 'print', 'range', 'len', 'torch', 'nn', 'F', 'math', 'np'}
# GPT.forward without its final LayerNorm: logits move, every model-level test fails, no known bug matches
COPIED_BUG = [('x = self.transformer.ln_f(x)', 'x = x')]


def corpus(name, kind='correct'):
    """The model.py of tests/submissions/<kind>/<name>."""
    with open(os.path.join(REPO, 'tests', 'submissions', kind, name, 'model.py'), encoding='utf-8') as f:
        return f.read()


def local_names(source):
    """Names bound inside functions (assignments, loop targets) that no parameter shares: what a disguise renames."""
    names, tree = set(), ast.parse(source)
    # a parameter keeps its name (the grader calls methods by keyword), and so does any keyword argument's name
    kept = {k.arg for k in ast.walk(tree) if isinstance(k, ast.keyword) and k.arg}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kept.update(a.arg for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs)
            kept.update(a.arg for a in (node.args.vararg, node.args.kwarg) if a is not None)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    names.add(sub.id)
    module_level = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return {n for n in names - kept if n not in KEEP and n not in module_level and not keyword.iskeyword(n)}


def _open_kind(tokens, i):
    """What the bracket at tokens[i] opens: 'def' parameters, a 'call''s arguments, or 'other'."""
    before = [t for t in tokens[:i] if t.type not in (tokenize.NL, tokenize.COMMENT)][-2:]
    if tokens[i].string != '(' or not before:
        return 'other'
    if len(before) == 2 and before[0].string == 'def':
        return 'def'
    prev = before[-1]
    called = (prev.type == tokenize.NAME and not keyword.iskeyword(prev.string)) or prev.string in ')]'
    return 'call' if called else 'other'


def renamed(source, prefix='my_'):
    """`source` with every local name renamed, except attribute names and the keyword arguments of calls."""
    names = local_names(source)
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    significant = [i for i, t in enumerate(tokens) if t.type not in (tokenize.NL, tokenize.COMMENT)]
    where = {i: n for n, i in enumerate(significant)}
    out, stack = [], []
    for i, tok in enumerate(tokens):
        if tok.string in '([{' and tok.type == tokenize.OP:
            stack.append(_open_kind(tokens, i))
        elif tok.string in ')]}' and tok.type == tokenize.OP and stack:
            stack.pop()
        elif tok.type == tokenize.NAME and tok.string in names:
            n = where[i]
            prev = tokens[significant[n - 1]].string if n else ''
            nxt = tokens[significant[n + 1]].string if n + 1 < len(significant) else ''
            keyword_arg = stack and stack[-1] == 'call' and nxt == '=' and prev in ('(', ',')
            if prev != '.' and not keyword_arg:
                tok = tok._replace(string=prefix + tok.string)
        out.append(tok)
    return tokenize.untokenize(out)


def _start(node):
    return (node.decorator_list[0].lineno if node.decorator_list else node.lineno) - 1


def reordered(source):
    """`source` with each class's methods in reverse order (lines between them, if any, stay first)."""
    lines = source.splitlines(keepends=True)
    edits = []
    for cls in [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]:
        methods = [n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        if len(methods) < 2:
            continue
        first, last = _start(methods[0]), methods[-1].end_lineno
        inside = {k for m in methods for k in range(_start(m), m.end_lineno)}
        between = ''.join(lines[k] for k in range(first, last) if k not in inside and lines[k].strip())
        chunks = [''.join(lines[_start(m):m.end_lineno]).rstrip('\n') + '\n\n' for m in methods]
        edits.append((first, last, between + ''.join(reversed(chunks))))
    for first, last, text in sorted(edits, reverse=True):
        lines[first:last] = [text]
    return ''.join(lines)


def buggy(source):
    return source_patches.apply(source, COPIED_BUG, 'copied bug')


def planted():
    """[(what, original, copy)]: every planted pair. The originals come from three corpus styles that share
    no skeleton (per_head_loop, complex_rope_group_loop, and the course's starter in course_einops_given_loader)."""
    per_head, complex_rope = corpus('per_head_loop'), corpus('complex_rope_group_loop')
    course = corpus('course_einops_given_loader')
    return [('renamed variables', per_head, renamed(per_head)),
            ('reordered methods', complex_rope, reordered(complex_rope)),
            ('a copied bug, renamed and reordered', buggy(course), reordered(renamed(buggy(course), 'x_')))]


def restyled(source):
    """`source` with the other quote, its comments and docstrings rewritten, and blank lines added (no black needed)."""
    out = []
    toks = list(tokenize.generate_tokens(io.StringIO(source).readline))
    for tok in toks:
        if tok.type == tokenize.COMMENT:
            tok = tok._replace(string='# (my note)')
        elif tok.type == tokenize.STRING and tok.string[:1] in '\'"' and '\\' not in tok.string:
            q = tok.string[0]
            body = tok.string.strip(q)
            other = '"' if q == "'" else "'"
            if other not in body and len(tok.string) - len(body) == 2:
                tok = tok._replace(string=other + body + other)
            elif tok.string.startswith(q * 3):
                tok = tok._replace(string=q * 3 + 'my own words' + q * 3)
        out.append(tok)
    text = tokenize.untokenize(out)
    return text.replace('\n\n', '\n\n\n')   # a blank line more wherever there was one


def blacked(source):
    """`source` through black (line length 79), or unchanged where black is not installed."""
    try:
        import black
    except ImportError:
        return source
    return black.format_str(source, mode=black.Mode(line_length=79))


def reformatted(source):
    return blacked(restyled(source))


def _class_source(source, name):
    node = next(n for n in ast.parse(source).body if getattr(n, 'name', None) == name)
    lines = source.splitlines(keepends=True)
    return _start(node), node.end_lineno, ''.join(lines[_start(node):node.end_lineno])


def pasted(own, donor, name):
    """`own` with its class `name` replaced by donor's, word for word."""
    first, last, _ = _class_source(own, name)
    lines = own.splitlines(keepends=True)
    return ''.join(lines[:first]) + _class_source(donor, name)[2] + ''.join(lines[last:])


def disguised():
    """[(what, original name, original, copy, the class a unit lead must name or None)]: issue 44's kinds, each from a
    corpus style of its own, none of them used by planted()."""
    grouped, sdpa, fused = corpus('grouped_einsum_5d'), corpus('sdpa_enable_gqa'), corpus('fused_qkv_einops_repeat')
    own, donor = corpus('bmm_index_select'), corpus('per_head_loop')
    return [('renamed, reordered and reformatted', 'grouped_einsum_5d', grouped,
             reformatted(reordered(renamed(grouped))), None),
            ('a copied bug of its own, renamed and reformatted', 'sdpa bug', buggy(sdpa),
             reformatted(renamed(buggy(sdpa), 'z_')), None),
            ('a pasted class', 'per_head_loop', donor, pasted(own, donor, 'GroupedQueryAttention'),
             'GroupedQueryAttention'),
            ('a copy of a correct file', 'fused_qkv_einops_repeat', fused, reformatted(fused), None)]


OLDER_STARTER_CLASS = 'CausalSelfAttention'   # the class the older starter gave whole (minGPT's fused c_attn)
OLDER_STUDENTS = ('per_head_loop', 'complex_rope_group_loop', 'bmm_index_select', 'sdpa_mask_fused_kv',
                  'mask_5d_view_cache_storage')
SECTION_OTHERS = ('reference_clean', 'fused_qkv_einops_repeat', 'course_starter_required_only', 'einops_expand_gather',
                  'grouped_einsum_5d', 'sdpa_enable_gqa', 'handout_attention_memory')


def older_starter():
    """An older starter: today's template with the CausalSelfAttention it gave whole (older_starter_c_attn's)."""
    with open(os.path.join(REPO, 'student_template', 'hw1', 'mingpt', 'model.py'), encoding='utf-8') as f:
        template = f.read()
    return pasted(template, corpus('older_starter_c_attn'), OLDER_STARTER_CLASS)


def older_starter_section():
    """{name: model.py}: a section of 12, five of whom wrote their own code on the older starter (its class kept
    word for word, each file of its own style), seven on today's template; no two written together."""
    given = corpus('older_starter_c_attn')
    out = {'older: ' + n: pasted(corpus(n), given, OLDER_STARTER_CLASS) for n in OLDER_STUDENTS}
    out.update({n: corpus(n) for n in SECTION_OTHERS})
    return out


# the planted pairs of class_submissions(), by position in it
PLANTED_PAIRS = {(0, 1): 'renamed variables', (2, 3): 'reordered methods',
                 (4, 5): 'a copied bug, renamed and reordered'}


def class_submissions():
    """[(model.py text, known bug or None, what)]: the planted pairs, then a bug no known bug matches, on its own
    (the reference with GPT keeping its position table under RoPE: it fails the same tests as the copied bug)."""
    out = []
    for what, first, second in planted():
        out += [(first, None, what + ' (original)'), (second, None, what + ' (copy)')]
    return out + [(corpus('wpe_with_rope', 'buggy'), None, 'buggy/wpe_with_rope')]
