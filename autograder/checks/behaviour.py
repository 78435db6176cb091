"""
Judges of behaviour rather than values: dropout in train vs eval mode, causality of the
student's own model, and GPT.generate (shapes, greedy tokens, top_k sampling).
"""

import dataclasses

import numpy as np

from autograder.checks import Verdict, case_error_line, compare
from autograder.checks.values import judge_cases

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
    tol = test.tolerance
    errors = result.info.get('case_errors', {})
    cut = grading.profiles[fixtures.profile]['module']['seq'] // 2
    cut_model = grading.profiles[fixtures.profile]['model']['seq'] // 2
    lines, passed, cases = [], 0, ('mha', 'gqa', 'gpt')
    for case in cases:
        if case in errors:
            lines.append('FAIL ' + case_error_line(case, errors[case]))
            continue
        base, future = result.arrays.get(case + '/base'), result.arrays.get(case + '/future')
        c = cut_model if case == 'gpt' else cut
        if base is None or future is None or base.shape != future.shape or base.ndim < 2:
            lines.append('FAIL %s: outputs missing or of different shapes' % case)
            continue
        ok, desc = compare(future[:, :c], base[:, :c], tol.atol, tol.rtol)
        if not ok:
            lines.append('FAIL %s: tokens from position %d on were changed, and outputs at positions < %d changed '
                         'too (%s): the model looks at future tokens; check the causal mask' % (case, c, c, desc))
        elif np.array_equal(base[:, c:], future[:, c:]):
            lines.append('FAIL %s: outputs did not change even where the inputs did' % case)
        else:
            passed += 1
            lines.append('ok   %s: earlier outputs unchanged when later tokens change' % case)
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
    prompt_len = greedy_exp.shape[1] - 12
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
    return Verdict(passed / 3, ['%d of 3 generation checks pass.' % passed] + lines)
