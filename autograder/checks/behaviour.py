"""
Judges of behaviour rather than values: dropout in train vs eval mode, causality (both runs
against the reference's outputs), and GPT.generate (shapes, greedy tokens, top_k sampling,
generation past block_size).
"""

import dataclasses

import numpy as np

from autograder.checks import Verdict, case_error_line, compare
from autograder.checks.values import judge_cases
from autograder.child.configs import GENERATE_NEW

DROPOUT_HINTS = {
    'attn_p1_train': 'with attn_pdrop=1 in train mode every attention weight is dropped, so the output must be '
                     'out_proj.bias: is attn_dropout applied to the attention weights?',
    'resid_p1_train': 'with resid_pdrop=1 in train mode the output must be all zeros: is resid_dropout applied '
                      'after out_proj?',
    'both_p1_eval': 'in eval mode dropout must do nothing: use nn.Dropout modules (or pass training=self.training)',
}


def judge_dropout(test, result, fixtures, grading):
    # the resid_p1_train reference is all zeros: a module whose eval-mode output is all zeros too
    # (or forged zeros) would pass it without any dropout, so then that case earns nothing
    errors = dict(result.info.get('case_errors', {}))
    for key in [k for k in fixtures.probe(test.id) if k.endswith('/resid_p1_train')]:
        eval_out = result.arrays.get(key.replace('resid_p1_train', 'both_p1_eval'))
        if key not in errors and (eval_out is None or not np.any(eval_out)):
            errors[key] = {'status': 'error', 'message': 'not credited: the eval-mode output is missing or all '
                                                         'zeros, so an all-zero output here proves nothing'}
    if errors != result.info.get('case_errors', {}):
        result = dataclasses.replace(result, info=dict(result.info, case_errors=errors))
    return judge_cases(test, result, fixtures, hint=lambda case: DROPOUT_HINTS.get(case.split('/')[-1]))


def judge_causality(test, result, fixtures, grading):
    """
    Both runs (the input, and the input with its later tokens replaced) are compared with the
    reference's outputs for the same inputs, never only with each other: a copied or rewritten
    second output fails.
    """
    tol = test.tolerance
    expected = fixtures.probe('causality')
    errors = result.info.get('case_errors', {})
    prof = grading.profiles[fixtures.profile]
    lines, passed, cases = [], 0, ('mha', 'gqa', 'gpt')
    for case in cases:
        if case in errors:
            lines.append('FAIL ' + case_error_line(case, errors[case]))
            continue
        c = prof['model' if case == 'gpt' else 'module']['seq'] // 2
        base, future = result.arrays.get(case + '/base'), result.arrays.get(case + '/future')
        exp_base, exp_future = expected[case + '/base'], expected[case + '/future']
        if base is None or future is None or base.shape != exp_base.shape or future.shape != exp_future.shape:
            lines.append('FAIL %s: outputs missing or of shape %s, expected %s' % (
                case, None if future is None else tuple(future.shape), tuple(exp_future.shape)))
            continue
        prefix_ok, prefix_desc = compare(future[:, :c], exp_future[:, :c], tol.atol, tol.rtol)
        self_ok, _ = compare(future[:, :c], base[:, :c], tol.atol, tol.rtol)
        base_ok, base_desc = compare(base, exp_base, tol.atol, tol.rtol)
        rest_ok, rest_desc = compare(future[:, c:], exp_future[:, c:], tol.atol, tol.rtol)
        if not self_ok:
            lines.append('FAIL %s: tokens from position %d on were changed, and outputs at positions < %d changed '
                         'too (%s): the model looks at future tokens; check the causal mask' % (case, c, c, prefix_desc))
        elif not (prefix_ok and base_ok and rest_ok):
            lines.append('FAIL %s: the outputs differ from the reference\'s for the same inputs (%s), so causality '
                         'cannot be confirmed; fix the values first (tests 3.1, 5.1, 8.1)'
                         % (case, base_desc if not base_ok else prefix_desc if not prefix_ok else rest_desc))
        else:
            passed += 1
            lines.append('ok   %s: earlier outputs unchanged when later tokens change, both runs equal the reference'
                         % case)
    return Verdict(passed / len(cases), ['%d of %d modules are causal.' % (passed, len(cases))] + lines)


def _outside_top_k(tokens, logits, k, prompt_len):
    """
    [(batch, position)] of generated tokens not strictly among the k largest of the model's own
    logits (ties at the k-th value count as outside, so constant logits prove nothing); None
    when the shapes do not fit (batch, prompt + new tokens) and (batch, prompt + new - 1, vocab).
    """
    if tokens is None or logits is None or tokens.ndim != 2 or tokens.dtype.kind not in 'iu' or logits.ndim != 3 \
            or logits.shape[:2] != (tokens.shape[0], tokens.shape[1] - 1):
        return None
    outside = []
    for b in range(tokens.shape[0]):
        for t in range(prompt_len, tokens.shape[1]):
            row, tok = logits[b, t - 1], tokens[b, t]
            if not (0 <= tok < row.shape[0]) or not np.isfinite(row[tok]) or np.count_nonzero(row >= row[tok]) > k:
                outside.append((b, t))
    return outside


def judge_generate(test, result, fixtures, grading):
    errors = result.info.get('case_errors', {})
    expected = fixtures.probe('generate')
    greedy_exp = expected['greedy']
    prompt_len = greedy_exp.shape[1] - GENERATE_NEW
    lines, passed = [], 0
    greedy = result.arrays.get('greedy')

    # 1. shapes and greedy tokens
    if 'greedy' in errors:
        lines.append('FAIL ' + case_error_line('greedy decoding', errors['greedy']))
    elif greedy is None or greedy.shape != greedy_exp.shape:
        lines.append('FAIL greedy decoding: returned shape %s, expected %s (prompt + max_new_tokens)'
                     % (None if greedy is None else tuple(greedy.shape), tuple(greedy_exp.shape)))
    elif not np.array_equal(greedy, greedy_exp):
        first = np.argwhere(greedy != greedy_exp)[0]
        lines.append('FAIL greedy decoding: tokens differ from the reference first at %s (expected %d, got %d)'
                     % (list(first), greedy_exp[tuple(first)], greedy[tuple(first)]))
    else:
        passed += 1
        lines.append('ok   greedy decoding: shape %s and tokens match' % (tuple(greedy.shape),))

    # 2. top_k=1 sampling must be greedy (and pick the strict maximum of the model's own logits)
    top1 = result.arrays.get('top_k=1/tokens')
    if 'top_k=1' in errors:
        lines.append('FAIL ' + case_error_line('do_sample=True, top_k=1', errors['top_k=1']))
    elif top1 is None or greedy is None or top1.shape != greedy.shape or not np.array_equal(top1, greedy) \
            or _outside_top_k(top1, result.arrays.get('top_k=1/logits'), 1, prompt_len) != []:
        lines.append('FAIL do_sample=True, top_k=1 must always pick the most likely token (same as greedy): '
                     'is top_k applied before sampling?')
    else:
        passed += 1
        lines.append('ok   do_sample=True, top_k=1 equals greedy decoding')

    # 3. top_k=5 samples lie in the top 5 of the model's own logits
    tokens, logits = result.arrays.get('top_k=5/tokens'), result.arrays.get('top_k=5/logits')
    if 'top_k=5' in errors:
        lines.append('FAIL ' + case_error_line('do_sample=True, top_k=5', errors['top_k=5']))
    elif _outside_top_k(tokens, logits, 5, prompt_len) is None:
        lines.append('FAIL do_sample=True, top_k=5: output shape %s is not (batch, prompt + new tokens)'
                     % (None if tokens is None else tuple(tokens.shape),))
    else:
        outside = _outside_top_k(tokens, logits, 5, prompt_len)
        if outside:
            lines.append('FAIL do_sample=True, top_k=5: %d of %d sampled tokens are not among the 5 most likely '
                         '(first at batch %d, position %d): top_k is ignored?' % (
                             len(outside), tokens.shape[0] * (tokens.shape[1] - prompt_len), *outside[0]))
        else:
            passed += 1
            lines.append('ok   do_sample=True, top_k=5 samples only among the 5 most likely tokens')

    # 4. past block_size the context is the LAST block_size tokens
    long_exp, long = expected['greedy_past_block'], result.arrays.get('greedy_past_block')
    if 'greedy_past_block' in errors:
        lines.append('FAIL ' + case_error_line('greedy decoding past block_size', errors['greedy_past_block']))
    elif long is None or long.shape != long_exp.shape:
        lines.append('FAIL greedy decoding of %d new tokens (past block_size): returned shape %s, expected %s'
                     % (long_exp.shape[1] - prompt_len, None if long is None else tuple(long.shape), tuple(long_exp.shape)))
    elif not np.array_equal(long, long_exp):
        first = np.argwhere(long != long_exp)[0]
        block = grading.profiles[fixtures.profile]['model']['block_size']
        lines.append('FAIL greedy decoding past block_size: tokens differ from the reference first at %s (expected '
                     '%d, got %d)%s' % (list(first), long_exp[tuple(first)], long[tuple(first)],
                                        ': once the sequence is longer than block_size=%d, condition on its LAST '
                                        'block_size tokens (idx[:, -block_size:])' % block if first[1] >= block else ''))
    else:
        passed += 1
        lines.append('ok   greedy decoding of %d new tokens, past block_size, matches' % (long.shape[1] - prompt_len))
    return Verdict(passed / 4, ['%d of 4 generation checks pass.' % passed] + lines)
