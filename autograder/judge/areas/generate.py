"""
Judges of generation, on exact tokens against the reference's (never on the student's own
logits, which its code could shape to fit the tokens):
- generate (8.2): greedy tokens, top_k=1 and top_k=5 samples at a fixed seed, and greedy tokens
  past block_size. Generation runs the rope-gqa model, so a model whose logits are wrong also
  generates other tokens; the message then cites test 8.1's evidence for that model.
- kv-cache (12.1, optional part): per configuration, one cached step through the KVCache
  interface (logits and cache lengths), and generate(use_kv_cache=True): its tokens past
  block_size, and its tokens when every value handed to KVCache.append is negated, which only an
  attention that uses the cache turns into the reference's tokens under the same change.
"""

import numpy as np

from autograder.judge import messages
from autograder.judge.areas import Verdict, case_error_line, compare, evidence_output
from autograder.judge.areas.values import known_bug_matches
from autograder.contract.configs import GENERATE_NEW, KV_CACHE_CONFIGS
from autograder.judge.known_bugs import BY_ID as KNOWN_BUGS

GENERATE_CASES = messages.GENERATE_CASES   # (output key, the words of that check)


def first_difference(got, exp):
    """'first at batch b, position t (expected x, got y)' of two token arrays of one shape."""
    b, t = (int(i) for i in np.argwhere(got != exp)[0][:2])
    window = slice(t, min(t + 8, exp.shape[1]))   # the token ids from the first difference on, as integers
    ids = lambda row: '[%s%s]' % (', '.join(str(int(x)) for x in row[window]),
                                  ', ...' if window.stop < exp.shape[1] else '')
    return b, t, messages.first_token_difference(b, t, exp[b, t], got[b, t], ids(exp[b]),
                                                 ids(got[b]))


def _same_tokens(got, exp):
    return got is not None and got.shape == exp.shape and got.dtype.kind in 'iu' and np.array_equal(got, exp)


def _tokens_problem(got, exp):
    """Why `got` cannot be compared token by token with `exp`, or None."""
    if got is None:
        return messages.NO_TOKENS
    if got.shape != exp.shape:
        return messages.tokens_shape(tuple(got.shape), tuple(exp.shape))
    if got.dtype.kind not in 'iu':
        return messages.tokens_dtype(got.dtype)
    return None


def _likely(fixtures, probe_id, key, got):
    """The known bugs (known_bugs.py) whose tokens for `key` are exactly `got`."""
    return [fp for fp, arrays in fixtures.known_bug_outputs(probe_id).items()
            if key in arrays and _same_tokens(got, arrays[key])]


def judge_generate(test, result, fixtures, grading, evidence):
    expected = fixtures.probe('generate')
    errors = result.info.get('case_errors', {})
    block = grading.profiles[fixtures.profile_name].model.block_size
    prompt_len = expected['greedy'].shape[1] - GENERATE_NEW
    lines, rows, passed, likely = [], [], 0, []
    for key, what in GENERATE_CASES:
        exp, got = expected[key], result.arrays.get(key)
        if key in errors:
            lines.append(messages.FAIL + case_error_line(what, errors[key]))
            continue
        problem = _tokens_problem(got, exp)
        if problem:
            lines.append(messages.what_failed(what, problem))
            continue
        if np.array_equal(got, exp):
            passed += 1
            lines.append(messages.tokens_ok(what, exp.shape[1] - prompt_len))
            continue
        b, t, where = first_difference(got, exp)
        line = messages.tokens_differ(what, where)
        rows.append((what, messages.token_row_where(b, t), str(int(exp[b, t])),
                     str(int(got[b, t])), messages.TOKEN_IDS))
        if key == 'greedy_past_block' and t >= block and _same_tokens(result.arrays.get('greedy'), expected['greedy']):
            line += messages.generate_past_block(block)
        lines.append(line)
        likely += [fp for fp in _likely(fixtures, 'generate', key, got) if fp not in likely]
    if passed < len(GENERATE_CASES):
        aside = fixtures.set_aside_in('generate', '')   # the model it generated with (judge/set_aside.py)
        label = 'rope' if 'gqa' in aside else 'gqa' if 'gqa_rope' in aside else 'rope-gqa'
        logits, _ = evidence_output(evidence, 'model', label + '/logits')
        ref_logits = fixtures.probe('model').get(label + '/logits')
        tol = grading.test('model').tolerance
        if logits is not None and ref_logits is not None and logits.shape == ref_logits.shape \
                and not compare(logits, ref_logits, tol.atol, tol.rtol)[0]:
            lines.append(messages.generate_logits_differ(label, grading.test('model').number))
    if likely:
        lines.append(messages.likely_bug_tokens(KNOWN_BUGS[likely[0]].description, likely[0]))
    return Verdict(passed / len(GENERATE_CASES),
                   [messages.generation_checks(passed, len(GENERATE_CASES))] + lines, rows=rows)


# ----------------------------------------------------------------------------- KV cache (optional part)

def _step_check(label, result, expected, tol, prompt_len):
    """(ok, line) of one cached step: the prompt's logits, the next token's, and the caches' lengths."""
    lengths, exp_lengths = result.arrays.get(label + '/step/lengths'), expected[label + '/step/lengths']
    if lengths is None or lengths.shape != exp_lengths.shape or not np.array_equal(lengths, exp_lengths):
        got = messages.NONE if lengths is None else np.asarray(lengths).tolist()
        return False, messages.kv_lengths_wrong(label, prompt_len, got, exp_lengths.tolist())
    prefill_ok, prefill_desc = compare(result.arrays.get(label + '/step/prefill'), expected[label + '/step/prefill'],
                                       tol.atol, tol.rtol)
    step_ok, step_desc = compare(result.arrays.get(label + '/step/logits'), expected[label + '/step/logits'],
                                 tol.atol, tol.rtol)
    if prefill_ok and step_ok:
        return True, messages.kv_step_ok(label, prompt_len)
    if not prefill_ok:
        return False, messages.kv_prefill_wrong(label, prefill_desc)
    return False, messages.kv_step_wrong(label, step_desc, prompt_len)


def _generate_check(label, result, expected, block):
    """(ok, line, cache unused) of generate(use_kv_cache=True): tokens under altered cached values, and past
    block_size."""
    plain, altered = result.arrays.get(label + '/uses_cache/plain'), result.arrays.get(label + '/uses_cache/altered')
    exp_plain, exp_altered = expected[label + '/uses_cache/plain'], expected[label + '/uses_cache/altered']
    problem = _tokens_problem(plain, exp_plain) or _tokens_problem(altered, exp_altered)
    if problem:
        return False, messages.kv_generate_problem(label, problem), False
    if np.array_equal(altered, plain):
        return False, messages.kv_cache_unused(label), True
    if not np.array_equal(altered, exp_altered):
        _, _, where = first_difference(altered, exp_altered)
        cached = messages.KV_PLAIN_RIGHT if np.array_equal(plain, exp_plain) else \
            messages.kv_plain_wrong(first_difference(plain, exp_plain)[2])
        return False, messages.kv_altered_wrong(label, where, cached), False
    long_, exp_long = result.arrays.get(label + '/generate'), expected[label + '/generate']
    problem = _tokens_problem(long_, exp_long)
    if problem:
        return False, messages.kv_long_problem(label, problem), False
    if not np.array_equal(long_, exp_long):
        _, t, where = first_difference(long_, exp_long)
        late = messages.kv_past_block(block) if t >= block else ''
        return False, messages.kv_long_wrong(label, where, late), False
    return True, messages.kv_generate_ok(label, exp_long.shape[1]), False


def judge_kv_cache(test, result, fixtures, grading):
    expected = fixtures.probe(test.id)
    errors = result.info.get('case_errors', {})
    block = grading.profiles[fixtures.profile_name].model.block_size
    labels = [label for label, _, _ in KV_CACHE_CONFIGS if label + '/step/lengths' in expected]   # not set aside
    if not labels:
        return Verdict(0.0, [messages.KV_NONE_JUDGED])
    prompt_len = expected[labels[0] + '/step/lengths'][0][0]
    lines, passed, untouched = [], 0, 0
    for label in labels:
        step_error = errors.get(label + '/step')
        if step_error:
            lines.append(messages.FAIL + case_error_line(messages.kv_step_case(label), step_error))
            step_ok = False
        else:
            step_ok, line = _step_check(label, result, expected, test.tolerance, prompt_len)
            lines.append(line)
        gen_error = errors.get(label + '/uses_cache') or errors.get(label + '/generate')
        unused = False
        if gen_error:
            lines.append(messages.FAIL + case_error_line(messages.kv_generate_case(label),
                                                         gen_error))
            gen_ok = False
        else:
            gen_ok, line, unused = _generate_check(label, result, expected, block)
            lines.append(line)
        passed += step_ok + gen_ok
        # untouched: the cached step is not there, and generate either is not there or ignores the cache
        untouched += bool(step_error and step_error.get('status') == 'not_implemented'
                          and (unused or (gen_error and gen_error.get('status') == 'not_implemented')))
    total = 2 * len(labels)
    if untouched == len(labels):
        return Verdict(0.0, [messages.KV_NOT_IMPLEMENTED] + lines, not_implemented=True)
    likely = _likely_step(test, result, expected, fixtures, labels)
    if likely:
        lines.append(messages.likely_bug(KNOWN_BUGS[likely].description, likely, KNOWN_BUGS[likely].note))
    return Verdict(passed / total, [messages.kv_checks(passed, total)] + lines)


def _likely_step(test, result, expected, fixtures, labels):
    """The known bug (known_bugs.py) whose logits of the cached steps are the failing ones' (values.py's rule),
    or None."""
    tol, votes = test.tolerance, {}
    outputs = fixtures.known_bug_outputs(test.id)
    for label in labels:
        for key in (label + '/step/prefill', label + '/step/logits'):
            got = result.arrays.get(key)
            if got is None or compare(got, expected[key], tol.atol, tol.rtol)[0]:
                continue
            for fp in known_bug_matches(key, got, outputs, tol):
                votes[fp] = votes.get(fp, 0) + 1
    return max(sorted(votes), key=votes.get) if votes else None
