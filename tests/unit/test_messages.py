"""
What a student reads lives in one module of the harness (the package autograder/judge/messages/): the judges and
the harness's modules around them call it for every sentence they show, and the modules listed here
hold no string that reads as a sentence to the student. The heuristic is narrow on purpose (words a
verdict line uses: "your", "expected", "must", "the reference", a line marker...), and a test plants
a sentence to show it does fail.
"""

import ast
import os
import re

from autograder import PACKAGE_DIR
from autograder.judge import areas, markdown, messages, student_text

# the modules whose sentences moved to messages/ (known_bugs.py keeps each bug's description beside its
# patches: the handout build copies them, and the file is in the fixtures' probe-code hash)
MOVED = ['judge/areas/%s' % f for f in sorted(os.listdir(os.path.join(PACKAGE_DIR, 'judge', 'areas')))
         if f.endswith('.py')] + ['judge/verdicts.py', 'judge/markdown.py', 'judge/student_text.py',
                                  'judge/rope_service.py', 'judge/set_aside.py', 'judge/grade.py', 'judge/judging.py',
                                  'judge/imported.py',
                                  'judge/probe_job.py', 'judge/results.py', 'judge/submission.py',
                                  'judge/locating.py',
                                  'judge/interface_check.py',
                                  # the sandbox reports facts: readback's refusals are worded by the harness
                                  'sandbox/readback.py']
# text in these functions is not the student's: results.json's validation errors go to extra_data
# (staff), grade.py's staff_problem and main speak to the person at the command line (stderr, --help)
STAFF_ONLY = {'judge/results.py': {'validate'}, 'judge/grade.py': {'staff_problem', 'main'}}


def copied_by_the_handout():
    """{module: names} of the functions staff/handout/build.py copies word for word into the
    students' tests/_support/grader_rules.py: their sentences travel with the code, so they stay."""
    with open(os.path.join(PACKAGE_DIR, 'staff', 'handout', 'build.py'), encoding='utf-8') as f:
        tree = ast.parse(f.read())
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and [getattr(t, 'id', None) for t in node.targets] == ['functions']:
            for attr in node.value.elts:
                out.setdefault('judge/%s.py' % attr.value.id, set()).add(attr.attr)
    return out
# words that make a string a sentence the student reads (a verdict line, a reason, a hint)
SENTENCE = re.compile(r"\byour?\b|\bexpected\b|\bmust\b|\bthe reference|\bcannot\b|\bcould not\b|\bdiffers?\b"
                      r"|not implemented|^(ok   |FAIL )|Likely bug|\bgot\b", re.IGNORECASE)


def _docstrings(tree):
    """The ids of the docstring nodes of a module: prose for the reader of the code, not the student."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _inside(tree, names):
    """The ids of every node inside the top-level functions `names` of a module."""
    return {id(n) for f in tree.body if isinstance(f, ast.FunctionDef) and f.name in names for n in ast.walk(f)}


def sentences_in(source, exempt=()):
    """(line, text) of every string literal of `source` (f-string parts included) that reads as a sentence,
    outside the top-level functions named in `exempt`."""
    tree = ast.parse(source)
    skip = _docstrings(tree) | _inside(tree, set(exempt))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
            and len(n.value.split()) >= 2 and SENTENCE.search(n.value)]


def test_the_heuristic_finds_a_planted_sentence():
    planted = ('def judge(x):\n    """Docstrings are not read by the student: your code, expected."""\n'
               "    return 'FAIL %s: the output differs from the reference' % x\n"
               "def other():\n    return f'your code returned {1} values, expected 2'\n")
    found = sentences_in(planted)
    assert sorted({line for line, _ in found}) == [3, 5], found
    assert sentences_in("KEYS = ('vanilla/logits', 'n_kv_head=%d')\n") == []
    # an exempt function (copied by the handout, or staff-only) keeps its text; the others do not
    assert sorted({line for line, _ in sentences_in(planted, exempt={'judge'})}) == [5]


def test_the_exemptions_name_real_functions():
    # the handout's list as build.py has it (13 functions), and every exempt name defined where it is said to be
    copied = copied_by_the_handout()
    assert sum(len(v) for v in copied.values()) == 13 and set(copied) == {'judge/submission.py', 'judge/locating.py',
                                                                       'judge/interface_check.py'}
    for rel, names in list(copied.items()) + list(STAFF_ONLY.items()):
        with open(os.path.join(PACKAGE_DIR, rel), encoding='utf-8') as f:
            defined = {n.name for n in ast.parse(f.read()).body if isinstance(n, ast.FunctionDef)}
        assert names <= defined and rel in MOVED, (rel, names - defined)


def test_the_moved_modules_hold_no_student_sentence():
    found, copied = [], copied_by_the_handout()
    for rel in MOVED:
        exempt = STAFF_ONLY.get(rel, set()) | copied.get(rel, set())
        with open(os.path.join(PACKAGE_DIR, rel), encoding='utf-8') as f:
            found += ['%s:%d %r' % (rel, line, text[:80]) for line, text in sentences_in(f.read(), exempt)]
    assert not found, 'sentences a student reads belong in autograder/judge/messages/:\n  ' + '\n  '.join(found)


WORDS = os.path.dirname(messages.__file__)   # the package: one module per area and audience


def words_modules():
    """{file name: its parse} of the messages package's modules, its __init__ included."""
    out = {}
    for name in sorted(os.listdir(WORDS)):
        if name.endswith('.py'):
            with open(os.path.join(WORDS, name), encoding='utf-8') as f:
                out[name] = ast.parse(f.read())
    return out


def test_messages_imports_nothing_of_the_package():
    # any module of the harness may word through it without an import cycle: its modules import only each other
    imports = {name: [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
               for name, tree in words_modules().items()}
    assert len(imports) >= 10 and imports['__init__.py']
    for name, found in imports.items():
        assert all(isinstance(n, ast.ImportFrom) and n.module.startswith('autograder.judge.messages.')
                   for n in found), name


def test_the_modules_read_their_words_from_messages():
    assert areas.STATUS_WORDS is messages.STATUS_WORDS and student_text.WITHHELD is messages.WITHHELD
    assert markdown.TABLE_TITLE is messages.TABLE_TITLE and markdown.HEADER is messages.TABLE_HEADER


def test_a_few_sentences_word_for_word():
    # the pieces' joins, exactly as results.json has always shown them
    assert messages.case_error('mha', 'error', 'boom', ['a', 'b']) == 'mha: your code raised an error: boom\n    at b'
    assert messages.case_error('mha', 'odd', 'boom', []) == 'mha: error: boom'
    assert messages.probe_failed('timeout', 'hung', ['x']) == ['timed out: hung', '  at x']
    assert messages.case_failed(['a: 1', 'b: 2']) == 'FAIL a: 1\n     b: 2'
    assert messages.likely_bug('d', 'rope-sign', '') == 'Likely bug: d (your outputs match a known wrong variant: ' \
                                                         'rope-sign).'
    assert messages.memory_call(True, 'n_kv_head=2', 's') == 'ok   n_kv_head=2: s'
    assert messages.memory_call(False, 'n_kv_head=2', 's') == 'FAIL n_kv_head=2: s'


def test_readback_refusals_word_for_word():
    # sandbox/readback.py's facts, worded as it used to word them itself
    from autograder.sandbox import readback
    fact = readback.Unreadable('compressed', key='a').fact()
    assert messages.output_refused(fact) == ("the probe's output could not be read safely: Unreadable: "
                                             "array 'a' is compressed or encrypted; arrays must be stored "
                                             "(np.savez)")
    fact = readback.refusal(readback.Unreadable('constant', 'ValueError', name='NaN'))
    assert messages.output_refused(fact) == ("the probe's output could not be read safely: ValueError: "
                                             "the report contains NaN, which is not a number JSON allows")
    long = readback.refusal(readback.Unreadable('member', name='m' * 400))
    assert messages.output_refused(long) == ("the probe's output could not be read safely: "
                                             "Unreadable: unexpected member '" + 'm' * 281)   # cut at 300
    assert messages.output_refused(readback.refusal(KeyError('x'))) == (
        "the probe's output could not be read safely: KeyError: 'x'")
    assert messages.output_refused({'reason': 'folder', 'strerror': 'Permission denied'}) == (
        "the probe's output folder could not be opened: Permission denied")
    assert messages.output_refused({'reason': 'status', 'status': 'passed'}) == (
        "the probe reported the unknown status 'passed'")
    assert messages.unreadable('zip_directory', {'what': 'up.zip', 'count': 9, 'directory_bytes': 99,
                                                 'most': 5}) == (
        'up.zip holds 9 files (99 bytes of directory); at most 5 are allowed')
    assert messages.unreadable('not_zip', {'what': None}) == 'the arrays file is not a zip archive'


# ----------------------------------------------------------------------------- the child reports facts

def _old_clip(s, limit=4000):
    """How the child cut a whole message before it reported facts (report_schema's cap)."""
    return s if len(s) <= limit else s[:limit - 30] + ' [... %d characters cut]' % (len(s) - limit + 30)


def _child_report(fact, text, stage=None):
    """The error fields runner.py reports, clipped as it writes them."""
    from autograder.contract import report_schema
    info = {'status': 'error', 'fact': fact, 'message': text, 'message_chars': len(text)}
    if fact is None:
        info.pop('fact')
    if stage:
        info['stage'] = stage
    return report_schema.clip_report(info)


def test_the_judge_words_the_childs_error_facts_as_the_child_did():
    exit_words = 'your code called sys.exit(%s)'
    missing = ("model.py imports %s, which the autograder does not provide (only torch, einops, numpy "
               "and the standard library are available)")
    in_test = "model.py could not be imported in this test's process: "
    for text in ('0', "'x'", 'None', 'x' * 3960, 'y' * 3990, 'z' * 4500, 'w' * 9000):
        for fact, words in (('exit', exit_words), ('missing_module', missing)):
            for stage, head in ((None, ''), ('import', in_test)):
                report = _child_report(fact, text, stage)
                got = student_text.spoken(report['message'], report)
                assert got == _old_clip(head + words % text), (fact, stage, len(text))
        report = _child_report(None, 'ValueError: ' + text[:1500], 'import')
        assert student_text.spoken(report['message'], report) == _old_clip(in_test + 'ValueError: ' + text[:1500])
    assert student_text.spoken('ValueError: boom', {'message': 'ValueError: boom'}) == 'ValueError: boom'


def test_the_report_schema_takes_the_error_facts_within_its_caps():
    from autograder.contract import report_schema
    good = {'status': 'error', 'message': '0', 'fact': 'exit', 'message_chars': 1, 'stage': 'import',
            'case_errors': {'a': {'status': 'error', 'message': "'m'", 'fact': 'missing_module',
                                  'message_chars': 3}}}
    assert report_schema.check_report(good) == good
    for bad in ({'fact': 'sentence'}, {'stage': 'later'}, {'message_chars': -1}, {'message_chars': True},
                {'case_errors': {'a': {'fact': 'other'}}}, {'case_errors': {'a': {'message_chars': 1.5}}}):
        try:
            report_schema.check_report(dict(good, **bad))
        except ValueError:
            continue
        raise AssertionError('accepted %r' % bad)


def test_messages_defines_each_name_once():
    # a second `def and_more` at the end of the module silently replaced the first one's words; across the
    # package's modules a name defined twice would be the last star import's, whatever its callers meant
    names = []
    for tree in words_modules().values():
        names += [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
        for node in tree.body:
            for target in node.targets if isinstance(node, ast.Assign) else ():
                names += [e.id for e in (target.elts if isinstance(target, ast.Tuple) else [target])]
    assert len(names) > 250 and not {n for n in names if names.count(n) > 1}
    assert all(hasattr(messages, n) for n in names)


# the sentences that still write test 1.1 (the submission's test): grade.py calls them, and it is another branch's
# of issue 42 (results-42); once merged, grade.py passes grading.test('submission').number and this empties
STILL_WRITTEN = {}


def test_no_sentence_writes_a_test_number():
    # a sentence that names another graded test takes its number from grading.yaml (by id) through its caller;
    # a number written in a string would stay behind when the test is renumbered. Docstrings and comments may.
    numbered = re.compile(r'\b(?:1[0-9]|[1-9])\.[1-9]\b')
    found = []
    for name, tree in words_modules().items():
        skip = _docstrings(tree) | _inside(tree, STILL_WRITTEN.get(name, set()))
        found += ['%s:%d %r' % (name, n.lineno, n.value[:60]) for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
                  and numbered.search(n.value)]
    assert not found, found


# ----------------------------------------------------------------------------- the grader's errors and notes

# what the child wrote at c5e5b72, before its errors and notes were facts: (code, type name, the text
# from the raw values the child had, the figures it reports now)
def _old_errors(name, long):
    shape = (48, 24)
    return [
        ('no_default_config', 'AdapterError',
         "model.py has no GPT.get_default_config(); keep the handout's GPT class", []),
        ('no_class', 'AdapterError', "model.py has no class %s; the handout's name must be kept" % name, [name]),
        ('shape_mismatch', 'AdapterError', 'shape mismatch', []),
        ('no_bias', 'AdapterError', "a projection has no bias, but the handout's nn.Linear layers have one", []),
        ('linear_shape', 'AdapterError', "%s.%s is Linear(%d -> %d), expected Linear(%d -> %d)"
         % (long, 'k_proj', 48, 48, 48, 24), [long, 'k_proj', '48', '48', '48', '24']),
        ('projections_not_found', 'AdapterError', "could not find the %s projection(s) among %s's linear layers %s"
         % ('out', long, 'a 48->48, ' + name), ['out', long, 'a 48->48, ' + name]),
        ('no_parameter', 'AdapterError', "the model has no parameter %s (expected from the handout's GPT)" % name,
         [name]),
        ('parameter_shape', 'AdapterError', "parameter %s has shape %s, expected %s" % (name, shape, (65, 48)),
         [name, str(shape), str((65, 48))]),
        ('attention_returned', 'AdapterError', "%s.forward returned %s; expected (y, mem_bytes)" % (long, name),
         [long, name]),
        ('gpt_returned', 'AdapterError', "GPT.forward returned %s; expected (logits, loss, seconds, mem)" % long,
         [long]),
        ('generate_returned', 'AdapterError', "GPT.generate returned %s; expected (idx, seconds)" % name, [name]),
        ('cached_forward_returned', 'AdapterError',
         'GPT.forward(idx, kv_caches=...) returned %s; expected (logits, loss, seconds, mem)' % long, [long]),
        ('no_kv_cache_class', 'NotImplementedError', 'model.py has no KVCache class (the optional KV-cache part)', []),
        ('no_kv_caches_argument', 'NotImplementedError',
         'GPT.forward takes no kv_caches argument (the optional KV-cache part)', []),
        ('no_use_kv_cache_argument', 'NotImplementedError',
         'GPT.generate takes no use_kv_cache argument (the optional KV-cache part)', []),
        ('no_load_pretrained', 'AdapterError', "GPT has no load_pretrained(folder); keep the handout's method", []),
        ('no_training_step', 'AdapterError',
         "the training ran no step: the Trainer's on_batch_end callbacks never ran", []),
        ('no_banded_attention', 'NotImplementedError',
         'model.py defines no banded_attention (the optional sliding-window part)', []),
    ]


LENGTHS = (5, 300, 1400, 1499, 1500, 1501, 2000, 5000)   # figures short, near and past the child's 1500-character cut


def _reported(exc, stage=None):
    """What the harness reads of a raised `exc`: runner.describe_exception's fields, clipped, through JSON and
    the report schema, worded by student_text.spoken."""
    import json
    from autograder.contract import report_schema
    fields = report_schema.error_fields(exc)
    assert fields is not None, exc.fact
    info = dict(fields, status='error', where=[])
    if stage:
        info.update(stage=stage, message_chars=len(info['message']))
    info = report_schema.check_report(json.loads(json.dumps(report_schema.clip_report(info))))
    case = report_schema.check_report({'case_errors': {'c': dict(fields, status='error')}})['case_errors']['c']
    assert student_text.spoken(case['message'], case) == student_text.spoken(info['message'], dict(info, stage=None))
    return student_text.spoken(info['message'], info)


def test_the_judge_words_the_graders_errors_as_the_child_wrote_them():
    from autograder.contract import report_schema
    in_test = "model.py could not be imported in this test's process: "
    for n in LENGTHS:
        for code, kind, text, figures in _old_errors('n' * n, 'L' * n):
            cls = report_schema.NotImplementedFact if kind == 'NotImplementedError' else report_schema.FactError
            old = _old_clip('%s: %s' % (kind, text[:1500]))
            assert _reported(cls(code, *figures)) == old, (code, n)
            assert _reported(cls(code, *figures), 'import') == _old_clip(in_test + old), (code, n)
            if kind == 'AdapterError' and code != 'by_shape':   # the by-shape loader wraps another error
                wrapped = "could not load weights by shape: %s" % text
                assert _reported(cls('by_shape', *cls(code, *figures).fact)) == \
                    _old_clip('AdapterError: ' + wrapped[:1500]), (code, n)
    assert set(report_schema.FACT_ERRORS) == {c for c, *_ in _old_errors('x', 'y')} | {'by_shape'}
    assert set(messages.CHILD_ERRORS) == set(report_schema.FACT_ERRORS)


def test_the_judge_words_the_adapters_notes_as_the_child_wrote_them():
    import json
    from autograder.contract import report_schema
    roles = {'qkv': 'q_proj+k_proj+v_proj (fused, in that order)', 'kv': 'k_proj+v_proj (fused, in that order)',
             'q': 'q_proj', 'k': 'k_proj', 'v': 'v_proj', 'out': 'out_proj'}
    for n in LENGTHS:
        for plan in ({'qkv': 'c_attn', 'out': 'c_proj'}, {'q': 'wq', 'kv': 'n' * n, 'out': 'o'},
                     {'q': 'a', 'k': 'b', 'v': 'c', 'out': 'd' * n}):
            cls = 'C' * n
            old = "%s lacks the handout names %s; weights were matched by shape: %s" % (
                cls, 'q_proj/k_proj/v_proj/out_proj',
                ', '.join('%s <- %s' % (plan[r], roles[r]) for r in ('qkv', 'kv', 'q', 'k', 'v', 'out') if r in plan))
            note = ('matched_by_shape', cls) + tuple(plan.get(r, '') for r in ('qkv', 'kv', 'q', 'k', 'v', 'out'))
            report = report_schema.check_report(json.loads(json.dumps(report_schema.clip_report({'notes': [note]}))))
            assert student_text.noted(report['notes'][0]) == report_schema.clip_text(old, 500), (plan, n)
        for extra in ([], ['transformer.wpe.weight'], ['p' * n + str(i) for i in range(6)]):
            old = "parameters the reference does not have kept their initial values: %s" % ', '.join(extra)
            report = report_schema.clip_report({'notes': [('kept_initial',) + tuple(extra)]})
            assert report_schema.check_report(report) == report
            assert student_text.noted(report['notes'][0]) == report_schema.clip_text(old, 500), (extra[:1], n)


def test_a_forged_fact_is_refused_or_says_no_more_than_a_message():
    from autograder.contract import report_schema
    note = {'fact': 'kept_initial', 'figures': ['a'], 'cut': 0}
    error = {'status': 'error', 'message': '', 'fact': 'no_class', 'figures': ['GPT']}
    assert report_schema.check_report(dict(error, notes=[note]))
    for bad in ({'figures': []}, {'figures': ['a', 'b']}, {'figures': [3]}, {'figures': ['x' * 1501]},
                {'fact': 'exit'}, {'fact': 'sentence'}, {'fact': 'by_shape', 'figures': ['by_shape', 'x']},
                {'fact': 'by_shape', 'figures': ['no_class']}, {'notes': ['a sentence']},
                {'notes': [dict(note, cut=-1)]}, {'notes': [dict(note, fact='no_class')]},
                {'notes': [dict(note, figures=['a'] * 7)]}, {'notes': [dict(note, extra=1)]},
                {'case_errors': {'c': dict(error, figures=['a', 'b'])}}):
        try:
            report_schema.check_report(dict(error, **bad))
        except ValueError:
            continue
        raise AssertionError('accepted %r' % bad)
    # a FactError the student's code raised with figures that do not fit is reported by its text, as any error
    assert report_schema.error_fields(report_schema.FactError('no_class')) is None
    assert report_schema.error_fields(report_schema.FactError('your text', 'x')) is None
    assert report_schema.error_fields(ValueError('no_class')) is None


# the child's modules whose words a student reads (the others: set_aside, cuda_view and socket_link raise into
# the student's own calls, whose code may read their text; selftest and zygote speak to staff); in
# probes_pretrained, the `facts` field's lines are still words (the harness's pretrained area parses them)
CHILD_SCANNED = {'runner.py': set(), 'adapter.py': set(), 'probes_pretrained.py': {'_shape_facts', '_load_facts'}}
CHILD_SCANNED.update({f: set() for f in os.listdir(os.path.join(PACKAGE_DIR, 'child'))
                      if f.startswith('probes') and f.endswith('.py') and f not in CHILD_SCANNED})


def test_the_childs_modules_write_no_student_sentence():
    found = []
    for name, exempt in sorted(CHILD_SCANNED.items()):
        with open(os.path.join(PACKAGE_DIR, 'child', name), encoding='utf-8') as f:
            found += ['%s:%d %r' % (name, line, text[:80]) for line, text in sentences_in(f.read(), exempt)]
    assert not found, found
    assert len(CHILD_SCANNED) == 10   # runner, adapter, the 7 probes modules of graded tests and probes_staff.py


def test_a_sentence_planted_in_the_adapter_fails_the_scan():
    with open(os.path.join(PACKAGE_DIR, 'child', 'adapter.py'), encoding='utf-8') as f:
        source = f.read()
    planted = source.replace("raise AdapterError('no_bias')",
                             "raise AdapterError(\"a projection has no bias, but the handout's layers must\")")
    assert planted != source and sentences_in(source) == [] and len(sentences_in(planted)) == 1
