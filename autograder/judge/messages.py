"""
The sentences a student reads, in one place. The code that decides a verdict calls a function
(or reads a constant) here with the figures the sentence shows (numbers, names, and arrays
already formatted where formatting is the decision's logic) and gets back the exact text; no
sentence a student reads is written anywhere else in the modules that use this one
(tests/unit/test_messages.py keeps that rule). The child and the wall report facts; they are
worded here, by the judge.

Sections, in the order a student meets them:
- the status of a probe or a case (STATUS_WORDS) and the lines of a probe that did not finish;
  the child's facts: an error's kind, the grader's own errors (CHILD_ERRORS) and notes;
- the student's own text: what replaces it past the grading's budget, and a cut text's tail;
- comparisons of an output with the reference's (areas.compare), and shape guards;
- each area's verdict lines: values (2.1-5.1, 8.1), dropout (6.1), causality (7.1), generation
  (8.2) and the KV cache (12.1), memory (9.1, 11.2), training (10.1, 10.2), the pretrained
  workflow, sliding-window attention (11.1);
- known bugs: the line that names the known wrong variant a failure matches (the descriptions
  themselves sit beside their patches in known_bugs.py: the handout build copies them);
- the Markdown table of expected against got;
- a verdict that could not be judged at all;
- how a process in the sandbox ended (the wall's facts: ProbeResult.harness, worded by
  probe_job.execute);
- hangs and the second run (cascade.py): where a process was stopped, what a hang leaves unrun,
  a test judged with a failed part set aside, an optional test not judged;
- test 1.1 and results.json's top line (grade.py), the grader's own failures;
- results.json's frame (results.py): the "Autograder error" test, Not attempted, a cut output,
  a results.json written while the grading runs;
- the upload (submission.py): which model.py was graded and why, why an upload is refused.

Not here, on purpose: the sentences of the functions the handout build
(staff/handout/build.py) copies word for word into the students' tests/_support/grader_rules.py,
so that the students' own check says what the grader says: submission.too_large, _line_of,
not_utf8, read_source, decode, imported_names and interface_check._names_defined, _classes,
_has_method, missing, missing_in, nothing_to_grade, nothing_to_grade_in. Their words travel with
the copied code (a copy cannot import this module). Staff-only text (SandboxRefused's messages,
extra_data, results.json's validation errors, stderr for the person at the command line) is not
the student's and stays where it is written.

Line markers: a verdict's lines start with OK ('ok   ') or FAIL ('FAIL '); a detail under a
line is indented by DETAIL (five spaces). Where a sentence is built from pieces, the pieces
are joined here exactly as they always were: results.json must not change by a byte.
"""

OK = 'ok   '
FAIL = 'FAIL '
DETAIL = '     '


# ----------------------------------------------------------------------------- statuses

STATUS_WORDS = {
    'not_implemented': 'not implemented yet',
    'not_implemented_optional': 'not implemented (optional)',
    'error': 'your code raised an error',
    'timeout': 'timed out',
    'crashed': 'the test process died',
    'missing': 'not run',
    'invalid': 'the output could not be read',
    'shape': 'wrong output shape',
}


def with_status(word, message):
    """'word: message', or the message alone where it already starts with the status's words (a case or
    probe not run says why in a message that starts 'not run: ...': said once, never 'not run: not run: ...')."""
    return message if word and message.startswith(word) else '%s: %s' % (word, message)


def probe_failed(status, message, where):
    """The lines of a probe that produced no results: its status, message, last traceback lines."""
    return [with_status(STATUS_WORDS.get(status, status), message)] + ['  at ' + w for w in where]


def case_error(name, status, message, where):
    """One case that raised (or hung, or is missing): name, status words, message, last frame."""
    word = STATUS_WORDS.get(status, 'error')
    return '%s: %s%s' % (name, with_status(word, message), ('\n    at ' + where[-1]) if where else '')


# the cause an error's own text shows (areas.error_cause picks it by ERROR_CAUSE_MARKS), said after the error
ERROR_CAUSES = {
    'cuda': (' (the grader has no GPU: a device written into the code, device="cuda" or .cuda(), fails '
             'here; take the device from the input, x.device, or from a parameter of the module)'),
    'is_causal_with_mask': (' (F.scaled_dot_product_attention takes either is_causal=True or an '
                            'attn_mask, not both; with a KV cache pass the mask rows of positions past .. '
                            'past+T-1 as attn_mask)'),
}


def status_and_message(status, message):
    """Another probe's failure, cited as evidence ('timeout: ...'), with the status as given."""
    return '%s: %s' % (status, message)


def error_words(fact, stage):
    """(head, tail): the words around the text of an error the child reported as facts
    (contract/report_schema.py ERROR_FACTS, ERROR_STAGES); student_text.spoken joins them."""
    head, tail = FACT_WORDS.get(fact, ('', ''))
    return (IMPORT_IN_TEST if stage == 'import' else '') + head, tail


FACT_WORDS = {   # fact -> the words before and after its text (a repr)
    'exit': ('your code called sys.exit(', ')'),
    'missing_module': ('model.py imports ',
                       ', which the autograder does not provide (only torch, einops, numpy and the '
                       'standard library are available)'),
}
IMPORT_IN_TEST = 'model.py could not be imported in this test\'s process: '


# the grader's own errors in the child, from their facts (contract/report_schema.py FACT_ERRORS):
# code -> (the exception's type name, its text with a %s per figure); student_text.spoken shows
# them as the child used to write them, 'Type: text' with the text cut at 1500 characters
CHILD_ERRORS = {
    'no_default_config': ('AdapterError', "model.py has no GPT.get_default_config(); keep the "
                                          "handout's GPT class"),
    'no_class': ('AdapterError', "model.py has no class %s; the handout's name must be kept"),
    'shape_mismatch': ('AdapterError', 'shape mismatch'),
    'no_bias': ('AdapterError', "a projection has no bias, but the handout's nn.Linear layers have "
                                "one"),
    'linear_shape': ('AdapterError', '%s.%s is Linear(%s -> %s), expected Linear(%s -> %s)'),
    'projections_not_found': ('AdapterError', "could not find the %s projection(s) among %s's "
                                              "linear layers %s"),
    'by_shape': ('AdapterError', 'could not load weights by shape: %s'),   # %s: another error's text
    'no_parameter': ('AdapterError', "the model has no parameter %s (expected from the handout's "
                                     "GPT)"),
    'parameter_shape': ('AdapterError', 'parameter %s has shape %s, expected %s'),
    'attention_returned': ('AdapterError', '%s.forward returned %s; expected (y, mem_bytes)'),
    'gpt_returned': ('AdapterError', 'GPT.forward returned %s; expected (logits, loss, seconds, '
                                     'mem)'),
    'generate_returned': ('AdapterError', 'GPT.generate returned %s; expected (idx, seconds)'),
    'cached_forward_returned': ('AdapterError', 'GPT.forward(idx, kv_caches=...) returned %s; '
                                                'expected (logits, loss, seconds, mem)'),
    'no_kv_cache_class': ('NotImplementedError', 'model.py has no KVCache class (the optional '
                                                 'KV-cache part)'),
    'no_kv_caches_argument': ('NotImplementedError', 'GPT.forward takes no kv_caches argument '
                                                     '(the optional KV-cache part)'),
    'no_use_kv_cache_argument': ('NotImplementedError', 'GPT.generate takes no use_kv_cache '
                                                        'argument (the optional KV-cache part)'),
    'no_load_pretrained': ('AdapterError', "GPT has no load_pretrained(folder); keep the handout's "
                                           "method"),
    'no_training_step': ('AdapterError', "the training ran no step: the Trainer's on_batch_end "
                                         "callbacks never ran"),
    'no_banded_attention': ('NotImplementedError', 'model.py defines no banded_attention (the '
                                                   'optional sliding-window part)'),
}
CHILD_TEXT_CHARS = 1500   # the child cut an exception's text (str(e)) to its first 1500 characters


def child_error_text(code, figures):
    """The text (str(e)) of the grader's error `code` in the child with its figures; 'by_shape'
    wraps another error, whose code and figures its figures are."""
    if code == 'by_shape':
        return CHILD_ERRORS[code][1] % child_error_text(figures[0], figures[1:])
    return CHILD_ERRORS[code][1] % tuple(figures)


def child_error(code, figures):
    """The message of the grader's error `code` in the child, as the child wrote it: 'Type: text'."""
    return '%s: %s' % (CHILD_ERRORS[code][0], child_error_text(code, figures)[:CHILD_TEXT_CHARS])


# the adapter's notes (report_schema.FACT_NOTES): what each handout projection was loaded into
FUSED_QKV = 'q_proj+k_proj+v_proj (fused, in that order)'
FUSED_KV = 'k_proj+v_proj (fused, in that order)'
ROLE_WORDS = (FUSED_QKV, FUSED_KV, 'q_proj', 'k_proj', 'v_proj', 'out_proj')   # qkv, kv, q, k, v, out


def child_note(code, figures):
    """A note of the adapter's, from its facts: 'matched_by_shape' (the class, then the layer of each
    role of ROLE_WORDS, '' for none) or 'kept_initial' (parameter names)."""
    if code == 'matched_by_shape':
        return ('%s lacks the handout names q_proj/k_proj/v_proj/out_proj; weights were matched by '
                'shape: %s' % (figures[0], ', '.join('%s <- %s' % (name, role) for name, role
                                                      in zip(figures[1:], ROLE_WORDS) if name)))
    return ('parameters the reference does not have kept their initial values: %s'
            % ', '.join(figures))


def status_words_and_message(status, message):
    """Another probe's failure, cited as evidence, its status in words."""
    return with_status(STATUS_WORDS.get(status, status), message)


# ------------------------------------------------------------------------- the student's own text

WITHHELD = ("[not shown: this grading already shows as much of your code's own text as it allows "
            "(%d characters)]")


def text_cut(kept, more):
    """A text of the student's process cut to its first characters."""
    return '%s [... %d more characters not shown]' % (kept, more)


# ----------------------------------------------------------------------------- comparisons

NO_OUTPUT = 'no output'
EMPTY = 'empty'
AN_ERROR = 'an error'


def wrong_shape(got, expected):
    """Two shapes (tuples): 'shape (2, 3), expected (2, 4)'."""
    return 'shape %s, expected %s' % (got, expected)


def wrong_dtype(got, expected):
    return 'dtype %s, expected %s' % (got, expected)


def non_finite(value, index):
    """The first NaN or inf of an output, `index` formatted ('[0, 3]')."""
    return ('non-finite value %r at %s (NaN/inf: a fully masked row, or a '
            'division by zero?)' % (value, index))


def allowed(atol, rtol):
    """The tolerance of a comparison (also a cell of the Markdown table)."""
    return '%.1g + %.1g*|expected|' % (atol, rtol)


def error_allowed(error, allowed_):
    """The table's 'error (allowed)' cell."""
    return '%s (%s)' % (error, allowed_)


def max_error(error, allowed_, where, expected, got):
    """compare()'s description of two outputs, each figure already formatted."""
    return ('max abs error %s (allowed %s); worst at '
            '%s: expected %s, got %s' % (error, allowed_, where, expected, got))


def low_precision(dtype):
    """After a comparison whose output values all lie on a low-precision dtype's grid (areas.low_precision_grid)."""
    return ('; every value of this output is a %s number: your code computed in %s (autocast left on, '
            'or a cast to torch.%s?), and %s\'s rounding is far above the float32 tolerance'
            % (dtype, dtype, dtype, dtype))


def guarded_shape(got, expected):
    return 'has shape %s, expected %s' % (got, expected)


def guarded_oversize(got):
    return 'has shape %s, far larger than any output of this test' % (got,)


def output_problem(key, why):
    """An output taken out by the shape guard: 'vanilla/logits has shape ...'."""
    return '%s %s' % (key, why)


# ------------------------------------------------------------------------- values (2.1-5.1, 8.1)

def cases_match(passed, total):
    return '%d of %d cases match the reference.' % (passed, total)


def output_differs(key, desc):
    return '%s: %s' % (key, desc)


def case_ok(case):
    return OK + case


def case_failed(details):
    """A failed case: its outputs' descriptions, one per line."""
    return FAIL + ('\n' + DETAIL).join(details)


def hint(text):
    return DETAIL + 'hint: ' + text


def rope_cache_dtype(input_dtype, output_dtype):
    return ('output dtype %s for a %s input: the cos/sin cache must be rebuilt (or cast) '
            'when another dtype or device arrives' % (output_dtype, input_dtype))


ROPE_CACHE_LONGER = ('the first call (T=8) is right and this longer one is not: a longer T than '
                     'the first call needs a longer cache')
WPE_WITH_ROPE = ('Note: with rope=True your GPT still has transformer.wpe; RoPE replaces the '
                 'absolute position embedding, so wpe must exist only when rope=False.')


# ----------------------------------------------------------------------------- known bugs

def likely_bug(description, bug_id, note):
    """A failure whose outputs match a known wrong variant (known_bugs.py)."""
    return ('Likely bug: %s (your outputs match a known '
            'wrong variant: %s). %s' % (description, bug_id, note)).rstrip()


def likely_bug_tokens(description, bug_id):
    """Generated tokens that are exactly a known wrong variant's."""
    return ('Likely bug: %s (your tokens are those of a known wrong '
            'variant: %s).' % (description, bug_id))


def window_ignored(keys):
    """Sliding-window cases that returned plain causal attention."""
    return ('Likely bug: %s returned plain causal attention: the window is '
            'ignored there.' % ', '.join(keys))


# ----------------------------------------------------------------------------- dropout (6.1)

THAT_TEST_DID_NOT_RUN = 'that test did not run'
# the three dropout checks, by name
ATTENTION_DROPOUT = 'attention dropout'
RESIDUAL_DROPOUT = 'residual dropout'
EVAL_MODE = 'eval mode'


def dropout_checks(passed, total, names, p):
    return ('%d of %d dropout checks pass (%s; each at p = 1 and at p = %g).'
            % (passed, total, ', '.join(names), p))


DROPOUT_EVAL_P1_OK = ('ok   eval mode with attn_pdrop = resid_pdrop = 1 gives the output of p = 0 '
                      '(test 4.1): dropout is off')
DROPOUT_EVAL_IS_BIAS = ': that is out_proj.bias, so the attention weights are dropped in eval mode'
DROPOUT_EVAL_IS_ZERO = ': it is all zeros, so the residual dropout is applied in eval mode'


def dropout_eval_p1_failed(desc, why):
    return ('FAIL in eval mode dropout must do nothing, but with attn_pdrop = resid_pdrop = 1 the '
            'output differs from the same module\'s output with p = 0 in test 4.1 '
            '(%s)%s' % (desc, why))


DROPOUT_ATTN_P1_OK = ('ok   train mode with attn_pdrop = 1 drops every attention weight: the '
                      'output is out_proj.bias')
DROPOUT_ATTN_IS_P0 = (': it equals the output without dropout, so no dropout is applied to the '
                      'attention weights')
DROPOUT_IS_ZERO = ': it is all zeros'


def dropout_attn_p1_failed(desc, why):
    return ('FAIL with attn_pdrop = 1 in train mode every attention weight is dropped, so the '
            'output must be out_proj(0) = out_proj.bias at every position (%s)%s' % (desc, why))


DROPOUT_RESID_P1_OK = 'ok   train mode with resid_pdrop = 1 gives all zeros'
DROPOUT_RESID_IS_P0 = (': it equals the output without dropout, so no dropout is applied after '
                       'out_proj')


def dropout_resid_p1_failed(desc, why):
    return ('FAIL with resid_pdrop = 1 in train mode the output must be all zeros '
            '(%s)%s' % (desc, why))


def dropout_unjudgeable(what, p, against, n):
    """`against`: 'out_proj.bias' or 'zero'."""
    return ('FAIL %s at p = %g: cannot be judged: the module\'s output without dropout (eval, p = '
            '0) differs from %s at only %d elements' % (what, p, against, n))


def dropout_nothing_dropped(what, p):
    return ('FAIL %s at p = %g in train mode: nothing is dropped, the output is the one without '
            'dropout' % (what, p))


def dropout_on_grid(dtype):
    """After a dropout check whose outputs are all %s numbers (areas.low_precision_grid)."""
    return (' (your outputs are all %s numbers: the module computed in %s, autocast left on?; dropout '
            'is judged here at %s\'s precision, and the values tests 4.1 and 5.1 judge the precision)'
            % (dtype, dtype, dtype))


DROPOUT_UNSCALED = ': the kept values are not scaled by 1/(1 - p)'


def dropout_neither(what, p, count, size, where, got, dropped, kept, why):
    return ('FAIL %s at p = %g in train mode: %d of %d output values are neither dropped nor kept '
            'and scaled by 1/(1 - p) (first at %s: got %.6g, expected %.6g or %.6g from your eval '
            'output)%s'
            % (what, p, count, size, where, got, dropped, kept, why))


def dropout_share_off(what, p, share, n, margin, sigmas):
    return ('FAIL %s at p = %g in train mode dropped %.3f of %d values, expected %g within %.3f '
            '(%g standard deviations of a binomial share)' % (what, p, share, n, p, margin, sigmas))


def dropout_share_ok(what, p, share, n):
    return ('ok   %s at p = %g in train mode: %.3f of %d values dropped, the others scaled by 1/(1 '
            '- p)'
            % (what, p, share, n))


def dropout_no_p0(case, n_kv_head, missing):
    return ('FAIL %s: cannot be judged without the same module\'s output at p = 0, which test 4.1 '
            'did not return for n_kv_head=%d (%s)' % (case, n_kv_head, missing))


def dropout_output_shape(case, got, expected):
    return 'FAIL %s: output of shape %s, expected %s' % (case, got, expected)


def dropout_degenerate(case):
    return ('FAIL %s: not credited: the module\'s output at p = 0 (test 4.1) is already what p = 1 '
            'must give, so this proves nothing' % case)


def outputs_missing(case, shape):
    """Dropout's and causality's outputs absent or of a shape the check cannot use."""
    return 'FAIL %s: outputs missing or of shape %s' % (case, shape)


def dropout_non_finite(case):
    return 'FAIL %s: non-finite values (NaN/inf) in the output' % case


def dropout_eval_mid_ok(p):
    return 'ok   eval mode at p = %g gives the output of p = 0: dropout is off' % p


def dropout_eval_mid_failed(p, desc):
    return ('FAIL in eval mode at attn_pdrop = resid_pdrop = %g the output differs from the same '
            'module\'s at p = 0 (%s): dropout must do nothing in eval mode' % (p, desc))


# ----------------------------------------------------------------------------- causality (7.1)

def other_non_finite(at):
    """`at`: ' first at [..]' or ''."""
    return 'non-finite values (NaN/inf) at other places%s' % at


def first_at(where):
    return ' first at %s' % where


ALL_NON_FINITE = 'all non-finite'


def causal_modules(passed, total):
    return '%d of %d modules are causal.' % (passed, total)


def not_deterministic(case, desc):
    return ('FAIL %s: two calls on the same input gave different outputs (%s): the model is not '
            'deterministic in eval mode, so causality cannot be judged' % (case, desc))


def causality_no_base(case, number, missing):
    return ('FAIL %s: cannot be judged: test %s returned no output for '
            'the original input (%s)' % (case, number, missing))


def causality_shapes(case, here, there, number):
    return 'FAIL %s: outputs of shape %s here but %s in test %s' % (case, here, there, number)


def causality_constant(case, c, number):
    return ('FAIL %s: not credited: the outputs at positions >= %d did not change either, although '
            'the tokens there did (test %s\'s outputs for the original input): outputs that do not '
            'depend on the input prove nothing' % (case, c, number))


def causal_ok(case, c, number):
    return ('ok   %s: outputs at positions < %d are unchanged when the tokens from %d on change '
            '(compared with test %s\'s outputs for the original input)' % (case, c, c, number))


def causal_failed(case, c, number, desc):
    return ('FAIL %s: changing the tokens from position %d on changed the outputs at earlier '
            'positions (against test %s\'s outputs for the original input: %s): the model looks at '
            'future tokens (a mask that lets a query see a later key does that, and so does a softmax '
            'over the queries, dim=-2, instead of the keys)' % (case, c, number, desc))


# ----------------------------------------------------------------------------- generation (8.2)

GENERATE_CASES = (('greedy', 'greedy decoding'), ('top_k=1', 'do_sample=True, top_k=1 at seed 0'),
                  ('top_k=5', 'do_sample=True, top_k=5 at seed 0'),
                  ('greedy_past_block', 'greedy decoding past block_size'))


def first_token_difference(b, t, expected, got, expected_ids, got_ids):
    """Where two token arrays first differ; the ids from there on formatted ('[3, 4, ...]')."""
    return ('first at batch %d, position %d (expected %d, got %d): from there, expected %s, '
            'got %s' % (b, t, expected, got, expected_ids, got_ids))


NO_TOKENS = 'no tokens returned'


def tokens_shape(got, expected):
    return 'returned shape %s, expected %s (batch, prompt + new tokens)' % (got, expected)


def tokens_dtype(dtype):
    return 'returned %s values, expected integer token ids' % dtype


def what_failed(what, problem):
    """'FAIL <what>: <problem>' where the problem is already a phrase."""
    return 'FAIL %s: %s' % (what, problem)


def tokens_ok(what, new):
    return 'ok   %s: the %d new tokens are the reference\'s' % (what, new)


def tokens_differ(what, where):
    return 'FAIL %s: tokens differ from the reference\'s %s' % (what, where)


def token_row_where(b, t):
    """The 'where' cell of generation's table row."""
    return 'batch %d, token %d' % (b, t)


TOKEN_IDS = 'token ids'


def generate_past_block(block):
    return ('; they match until the sequence outgrows block_size=%d: from then on the model must '
            'be fed the last block_size tokens (idx[:, -block_size:])' % block)


def generate_logits_differ(label):
    return ('Generation runs the %s model, whose logits differ from the reference\'s in test 8.1: '
            'with other logits it generates other tokens.' % label)


def generation_checks(passed, total):
    return '%d of %d generation checks pass.' % (passed, total)


# ----------------------------------------------------------------------------- KV cache (12.1)

def kv_lengths_wrong(label, prompt_len, got, expected):
    return ('FAIL %s: KVCache.length of each layer after the prompt of %d tokens, then after one '
            'more token, is %s; expected %s' % (label, prompt_len, got, expected))


NONE = 'none'


def kv_step_ok(label, prompt_len):
    return ('ok   %s: with empty caches the prompt\'s logits, then one more token fed alone, match '
            'the reference; KVCache.length is %d, then %d' % (label, prompt_len, prompt_len + 1))


def kv_prefill_wrong(label, desc):
    return ('FAIL %s: GPT.forward(prompt, kv_caches=empty caches): the logits differ from the '
            'reference\'s (%s)' % (label, desc))


def kv_step_wrong(label, desc, prompt_len):
    return ('FAIL %s: the prompt\'s logits match, but those of the next token fed alone with the '
            'filled caches do not (%s): that token sits at position %d = KVCache.length and '
            'attends to all %d cached keys'
            % (label, desc, prompt_len, prompt_len + 1))


def kv_generate_problem(label, problem):
    return 'FAIL %s: generate(use_kv_cache=True): %s' % (label, problem)


def kv_cache_unused(label):
    return ('FAIL %s: generate(use_kv_cache=True) does not use the cache: with every value handed '
            'to KVCache.append negated it gives the same tokens as without that change' % label)


KV_PLAIN_RIGHT = 'its tokens without the change are the reference\'s'


def kv_plain_wrong(where):
    return 'without the change they differ too (%s)' % where


def kv_altered_wrong(label, where, cached):
    return ('FAIL %s: with every value handed to KVCache.append negated, '
            'generate(use_kv_cache=True) gives other tokens than the reference under the same '
            'change (%s); %s: at each step the attention must use all the keys and values the '
            'cache holds, the new token\'s included, as append returns '
            'them' % (label, where, cached))


def kv_long_problem(label, problem):
    return 'FAIL %s: generate(use_kv_cache=True) past block_size: %s' % (label, problem)


def kv_past_block(block):
    return ('; they match until the sequence outgrows block_size=%d: from then on the tokens must '
            'still be those of generation without a cache' % block)


def kv_long_wrong(label, where, late):
    return ('FAIL %s: generate(use_kv_cache=True) past block_size: tokens differ from the '
            'reference\'s (its tokens without a cache) %s%s' % (label, where, late))


def kv_generate_ok(label, tokens):
    return ('ok   %s: generate(use_kv_cache=True) uses the cache (the reference\'s tokens when the '
            'cached values are negated) and gives the reference\'s %d tokens '
            'past block_size' % (label, tokens))


KV_NONE_JUDGED = 'no configuration of this test could be judged'


def kv_step_case(label):
    return '%s: one cached step' % label


def kv_generate_case(label):
    return '%s: generate(use_kv_cache=True)' % label


KV_NOT_IMPLEMENTED = ('not implemented (optional): no KVCache or no kv_caches argument, and '
                      'generate does not use a cache.')


def kv_checks(passed, total):
    return '%d of %d KV-cache checks pass.' % (passed, total)


# ----------------------------------------------------------------------------- memory (9.1)

MEMORY_VIEW = ('on the grader the attention runs in a CUDA view for this test (tensors say is_cuda '
               'and device cuda:0, torch.cuda.is_available() is True), so the code your guard runs '
               'on a GPU runs here')


def floor_output(B, nh, T, hs):
    """What 9.1's floor is when it is the attention output."""
    return 'the attention output y (one float32 (%d, %d, %d, %d) tensor)' % (B, nh, T, hs)


def floor_heads(n_kv_head, nh):
    return 'all %d heads' % nh if n_kv_head == nh else '%d of the %d heads' % (n_kv_head, nh)


def floor_weights(heads, B, nh, T):
    """What 9.1's floor is when it is the attention weights (`heads` from floor_heads)."""
    return ('%s of the attention weights, a float32 (B, n_query_head, T, T) = '
            '(%d, %d, %d, %d) tensor that autograd keeps for backward' % (heads, B, nh, T, T))


def memory_case_error(line, raised):
    """A measured call that raised: its case error line, with why it ran on a CUDA view."""
    return 'FAIL %s%s' % (line, ' (%s)' % MEMORY_VIEW if raised else '')


def memory_no_figure(label):
    return 'FAIL %s: the probe recorded no memory figure' % label


def memory_call(ok, label, sentence):
    """A judged call: memory_rules' sentence (contract/memory_rules.py words it, as the handout's
    check does)."""
    return '%s %s: %s' % ('ok  ' if ok else 'FAIL', label, sentence)


def memory_figures(passed, total):
    return '%d of %d memory figures are measurements of the attention.' % (passed, total)


# ------------------------------------------------------------------ sliding window (11.1, 11.2)

SLIDING_NOT_IMPLEMENTED = ('not implemented (optional): banded_attention is missing or raises '
                           'NotImplementedError, and the attention modules ignore '
                           'config.sliding_window.')
BANDED = 'banded_attention'


def window_size(n, window):
    return 'N=%d, window %d' % (n, window)


def not_implemented_optional(line):
    return 'not implemented (optional): ' + line


def banded_out_of_memory(size, margin_mb, matrix_mb):
    return ('FAIL banded_attention ran out of memory at %s: it may use %d MB more than the process '
            'held before, and one N x N float32 matrix alone is %d MB. Compute only the band '
            '(scores of each query with its w//2 + 1 keys): never an N x N tensor, whether '
            'scores, mask or weights.' % (size, margin_mb, matrix_mb))


def banded_shape(size, returned, expected):
    """`returned`: banded_returned(...)."""
    return 'FAIL banded_attention at %s returned %s, expected shape %s' % (size, returned, expected)


def banded_returned(shape):
    return 'nothing' if shape is None else 'shape %s' % (shape,)


def banded_differs(size, bad, checked, index, query, expected, got, atol, rtol):
    figures = (size, bad, checked) + tuple(index) + (query, expected, got, atol, rtol)
    return ('FAIL banded_attention at %s differs from the windowed attention at %d of the %d '
            'queries checked; worst at [%d, %d, %d, %d] (query %d): expected %.6g, got %.6g '
            '(allowed %.1g + %.1g*|expected|); see test 11.1' % figures)


def banded_ok(size, rows, margin_mb, matrix_mb):
    return ('ok   banded_attention at %s matches the reference at %d queries the grader picked, '
            'within %d MB of memory (one N x N float32 '
            'matrix would need %d MB)' % (size, rows, margin_mb, matrix_mb))


# ------------------------------------------------------------------------ training (10.1, 10.2)

GRAD_HINTS = {
    'q_proj': 'is q detached, computed under torch.no_grad(), or its weight used through .data?',
    'k_proj': 'is k detached, computed under torch.no_grad(), or its weight used through .data?',
    'v_proj': 'is v detached, computed under torch.no_grad(), or its weight used through .data?',
    'out_proj': 'is the attention output detached or computed under torch.no_grad()?',
}
GRAD_HINT_OTHER = 'is it detached, computed under torch.no_grad(), or used through .data?'


def gradients_ok(what, count):
    return 'ok   %s: all %d parameter gradients match the reference' % (what, count)


def gradients_failed(what, missing, total, wrong):
    return ('FAIL %s: %d of %d parameters get no gradient, %d get '
            'a wrong one' % (what, missing, total, wrong))


def training_follows_gradients(number):
    """After 10.1's failure, where test `number` (10.2) finds parameters with a missing or wrong gradient."""
    return ('Test %s finds the gradients of this very training run (its first step) missing or wrong for some '
            'parameters, and names them: training follows those gradients, so its logits differ.' % number)


def no_gradient(name, hint_):
    return '     %s gets no gradient: %s' % (name, hint_)


def wrong_gradient(name, desc):
    return '     %s has a wrong gradient: %s' % (name, desc)


def and_more(count):
    return '     ... and %d more' % count


TRAINING_RUN = 'training run (step 0 of test 10.1\'s training)'
NO_TRAINING_FIXTURES = ('FAIL the fixtures hold no gradients of the reference\'s training run: '
                        'regenerate them')
IT_DID_NOT_RUN = 'it did not run'


def training_no_gradients(what, why):
    return 'FAIL %s: the training gave no gradients (%s)' % (what, why)


TRAINING_GRADIENTS_WRONG = ('The gradients the training used are wrong, so this test earns nothing '
                            '(the gradients of its own probe are shown above for diagnosis).')


def gradient_checks(passed, total):
    return '%d of %d gradient checks pass.' % (passed, total)


def no_heldout_fixtures(seed):
    return ('FAIL the fixtures hold no held-out logits of the reference at seed %d: '
            'regenerate them' % seed)


TRAINING = 'training'


def heldout_shape(got, expected):
    return ('FAIL after training, the logits on held-out text have shape %s, '
            'expected %s' % (got, expected))


HELDOUT_NON_FINITE = ('FAIL after training, the logits on held-out text are not finite (NaN/inf): '
                      'the training diverged or a fully masked row divided by zero')


def reported_curve(start, window, mean):
    return ('; training loss as your process reported it (not graded): start %.3f, last %d '
            'mean %.3f' % (start, window, mean))


def loss_summary(loss, sequences, iters, seed, expected, curve):
    return ('held-out loss %.4f (computed by the grader on %d held-out sequences after %d '
            'iterations from fixed initial weights, seed %d), reference %.4f from the same start '
            'and seed%s'
            % (loss, sequences, iters, seed, expected, curve))


def training_same(loss, expected):
    return ('ok   after the same training from the same start, the held-out logits are the '
            'reference\'s (held-out loss %.4f, reference %.4f)' % (loss, expected))


def training_differs(iters, seed, desc, loss, expected):
    return ('FAIL after %d iterations from the reference\'s initial weights at seed %d, the logits '
            'on held-out text differ from the reference\'s run (%s); held-out loss %.4f, the '
            'reference\'s %.4f'
            % (iters, seed, desc, loss, expected))


def training_steps(steps, iters):
    return '     the training ran %d iterations, not %d' % (steps, iters)


FIRST_STEP_DIFFERS = ('     the gradients of the first training step already differ from the '
                      'reference\'s (test 10.2)')
FIRST_STEP_SAME = ('     the gradients of the first step are the reference\'s, so the training '
                   'parts ways later: with what the optimizer does with them '
                   '(configure_optimizers: every parameter in one of its two groups) or with what '
                   'changes between steps')


# ----------------------------------------------------------------------------- pretrained workflow

# stage reached by the probe (child/probes_training.py): 0 building/saving the short model,
# 1 saved, 2 load_pretrained returned, 3 forward at the long T done
STAGE_WORDS = {0: 'building, loading fixed weights into or saving the block-%d model',
               1: 'GPT.load_pretrained(folder) into a block-%d model',
               2: 'the forward at T=%d after load_pretrained'}


def fact(text):
    """One fact the probe observed, under its case."""
    return DETAIL + text


def stage_case(label, what):
    return '%s: %s' % (label, what)


def pretrained_shapes_differ(short, long_):
    return ('     model.pt, saved at block %d, holds tensors whose shape differs in the block-%d '
            'model; load_pretrained must fit each into it, or the module keep it out of model.pt '
            '(register_buffer(..., persistent=False)):' % (short, long_))


def pretrained_left(long_):
    return '     what load_pretrained left in the block-%d model:' % long_


def pretrained_ok(label, short, long_):
    return ('ok   %s: block %d -> %d, logits at T=%d match the '
            'reference' % (label, short, long_, long_))


def pretrained_logits(label, long_, desc):
    return 'FAIL %s: logits at T=%d after load_pretrained: %s' % (label, long_, desc)


def pretrained_copied(early, short, long_):
    """Every tensor was copied: `early` True when positions before the old block size match."""
    return '     load_pretrained copied every tensor of model.pt; %s' % (
        'positions < %d match, later ones do not: what the model computes past the old block size '
        'differs (RoPE tables, the causal mask)' % short if early else
        'even positions < %d differ: the forward of the block-%d model differs from the '
        'reference\'s'
        % (short, long_))


def pretrained_models(passed, total, short, long_):
    return ('%d of %d models load from block %d into block %d and '
            'match the reference.' % (passed, total, short, long_))


# ----------------------------------------------------------------------------- Markdown table

TABLE_HEADER = ('case', 'where', 'expected', 'got', 'error (allowed)')
TABLE_TITLE = 'Expected against got (for each output that differs, its worst element):'


# ----------------------------------------------------------------------------- a verdict not judged

def not_judgeable(kind, text):
    """A judge that raised on the student's arrays: the exception's type and its (cut) text."""
    return ('FAIL your outputs could not be judged (wrong dtype, shape or non-finite values?): '
            '%s: %s' % (kind, text))


# ------------------------------------------------------------------ a probe's outputs refused
# The sandbox refuses a probe's outputs as facts (sandbox/readback.py: ProbeResult.refusal, an
# Unreadable's reason and figures; ProbeResult.refused for an array too large to read); the
# judge's loop (probe_job.worded) and the shape guard (areas.guard_shapes) word them with these.

ARRAYS_FILE = 'the arrays file'
UNREADABLE = {
    'link': lambda f: '%s cannot be opened safely (a link?): %s' % (f['name'], f['strerror']),
    'not_regular': lambda f: '%s is not a regular file' % f['name'],
    'too_large': lambda f: '%s is %d bytes, more than the %d allowed' % (
        f['name'], f['size'], f['limit']),
    'grew': lambda f: '%s grew past %d bytes while being read' % (f['name'], f['limit']),
    'constant': lambda f: 'the report contains %s, which is not a number JSON allows' % f['name'],
    'out_of_range': lambda f: 'the report contains the number %s, which is out of range'
                              % f['number'],
    'not_zip': lambda f: '%s is not a zip archive' % (f['what'] or ARRAYS_FILE),
    'zip_directory': lambda f: '%s holds %d files (%d bytes of directory); at most %d are allowed'
                               % (f['what'] or ARRAYS_FILE, f['count'], f['directory_bytes'],
                                  f['most']),
    'zip64': lambda f: '%s is a zip64 archive (too large)' % (f['what'] or ARRAYS_FILE),
    'npy_version': lambda f: 'unsupported .npy version %s' % (f['version'],),
    'members': lambda f: 'the arrays file has %d members; at most %d are allowed' % (
        f['count'], f['most']),
    'member': lambda f: 'unexpected member %r in the arrays file' % f['name'],
    'twice': lambda f: 'the arrays file holds %r twice' % f['key'],
    'unexpected_array': lambda f: 'unexpected array %r (this test returns %s)' % (
        f['key'], ', '.join(f['keys']) or 'no arrays'),
    'compressed': lambda f: 'array %r is compressed or encrypted; arrays must be stored (np.savez)'
                            % f['key'],
    'dtype': lambda f: 'array %r has dtype %s; only numbers are accepted' % (f['key'], f['dtype']),
    'rank': lambda f: 'array %r has shape %s' % (f['key'], f['shape']),
    'stored': lambda f: 'array %r declares shape %s (%d bytes) but stores %d bytes' % (
        f['key'], f['shape'], f['nbytes'], f['stored']),
    'truncated': lambda f: 'array %r is truncated' % f['key'],
}


def unreadable(reason, figures):
    """Why a file of the child's (or an upload's zip) was refused: an Unreadable's code and figures."""
    return UNREADABLE[reason](figures)


def output_refused(fact):
    """The message of a probe whose outputs were refused (a ProbeResult.refusal)."""
    if fact['reason'] == 'folder':
        return "the probe's output folder could not be opened: %s" % fact['strerror']
    if fact['reason'] == 'status':
        return 'the probe reported the unknown status %r' % fact['status']
    text = fact['text'] if fact['reason'] == 'error' else unreadable(fact['reason'], fact)
    return "the probe's output could not be read safely: %s: %s" % (fact['error'], text[:300])


def array_not_read(fact):
    """Why an array far larger than its key's reference was not read (a ProbeResult.refused entry)."""
    return 'has shape %s (%d values)%s: far too large, not read' % (
        fact['shape'], fact['count'],
        '' if fact['expected'] is None else ', expected %s' % (fact['expected'],))


# ----------------------------------------------------------------------------- how a process ended
# The sandbox reports how a process ended as facts (ProbeResult.harness: ended, cpu_limit,
# cpu_seconds, idle_seconds, wall_seconds, signal, exit_code, link_errors); the judge's loop
# (probe_job.execute) words them with these.

FLOODED = 'your code flooded or stopped reading the grader\'s channel (descriptor 3)'
NOT_IMPORTED = 'this test did not run because the submission could not be imported'
SIGNAL_HINTS = {'SIGKILL': ' (out of memory, or a limit was hit)', 'SIGXCPU': ' (CPU time limit)',
                'SIGXFSZ': ' (wrote or printed more than the file-size limit)',
                'SIGSEGV': ' (crashed)', 'SIGSYS': ' (a forbidden system call)'}
LINK_MISUSED = 'it misused the grader\'s channel'


def link_problem(fact):
    """One thing a process did to the harness link (a harness['link_errors'] entry), in words."""
    kind = fact.get('kind')
    if kind == 'unread_replies':
        return '%s: %d replies it did not read' % (FLOODED, fact['count'])
    if kind == 'messages':
        return '%s: more than %d messages' % (FLOODED, fact['count'])
    if kind == 'rope_cap':
        return ('your code asked the grader\'s RoPE for more than a grading needs (%d calls and %.1f MB of values; '
                'a grading gets at most %d calls and %d MB) and got no more answers'
                % (fact['calls'], fact['mb'], fact['cap_calls'], fact['cap_mb']))
    if kind == 'foreign_sender':
        return ('a process other than the test\'s own (pid %s, not %d: a forked helper, or '
                'something that inherited descriptor 3) wrote to the grader\'s channel'
                % (fact['sender'], fact['pid']))
    return fact.get('error', '')


def process_ended(h, budget_seconds, memory_mb, exits=True):
    """How the process of harness dict `h` ended (`budget_seconds`: the grading's time budget,
    `memory_mb`: its memory limit; `exits`: whether model.py names sys.exit, os._exit or the like,
    submission.names_exit: an exit code is blamed on them only then)."""
    kind = h['ended']
    if kind == 'timeout':
        return ('it ran longer than the %g s allowed (%.1f s of CPU time: an infinite loop or a '
                'very slow forward?) and was stopped' % (h['cpu_limit'], h.get('cpu_seconds', 0)))
    if kind == 'memory':
        return ('its memory kept growing past the %d MB a test\'s process may use (%d MB of its own after %.1f s '
                'of CPU time: a loop that never ends, allocating as it goes?) and it was stopped'
                % (h['memory_limit_bytes'] >> 20, h.get('memory_bytes', 0) >> 20, h.get('cpu_seconds', 0)))
    if kind == 'wall' and h.get('idle_seconds'):
        return ('it used almost no CPU for %g s (sleeping, or waiting for something that never '
                'comes?) and was stopped' % h['idle_seconds'])
    if kind == 'wall':
        return ('it ran longer than the %g s allowed (%.0f s of wall-clock time while using '
                'little CPU: sleeping or waiting forever?) and was stopped'
                % (h['cpu_limit'], h['wall_seconds']))
    if kind == 'budget':
        return ('the grading time budget of %g s was used up (earlier tests timed out: look for an '
                'infinite loop or a very slow forward)' % budget_seconds)
    if kind == 'link':
        problems = [link_problem(p) for p in h.get('link_errors') or []]
        return 'it was stopped: %s' % '; '.join(problems or [LINK_MISUSED])[:600]
    if kind == 'oom':
        return ('the process ran out of memory and was killed by SIGKILL (the grading\'s memory '
                'limit is %d MB; allocating more than the test needs?)' % memory_mb)
    if h.get('signal'):
        return 'the process was killed by %s%s' % (h['signal'], SIGNAL_HINTS.get(h['signal'], ''))
    if exits:
        return 'the process exited with code %d (sys.exit or os._exit in your code?)' % h['exit_code']
    return 'the process exited with code %d' % h['exit_code']


def import_unfinished(ending):
    """The import check's process ended without results (`ending`: process_ended's words)."""
    return 'importing your model.py did not finish: %s' % ending


def ended_without_results(ending):
    """A probe's process exited (no signal, no limit) leaving no results."""
    return 'its process ended without leaving results: %s' % ending


def not_run(ending):
    """A probe not started (the grading's time budget was used up)."""
    return 'not run: ' + ending


def second_import_failed(message):
    """A probe of the second run when that run's own import check failed (its first run imported
    model.py: only the second run's repeat did not)."""
    return 'not run in the second run: model.py\'s import check in that run failed: %s' % message


# ------------------------------------------------------------------------- hangs, the second run
# cascade.py: where a probe was stopped, the tests a hang or an unfinished import leaves unrun, the
# words of a test judged with a failed part set aside, and an optional test not judged.

# where a probe was stopped at its deadline, as its own process said (the public tests say the same)
STOPPED_IN = 'Your code was stopped in %s (model.py line %d): a loop that never ends?'
STOPPED_AT = 'Your code was stopped at model.py line %d: a loop that never ends?'
OWN_ACCOUNT = ' (where your process said it was when it was stopped)'
# a later test that would run the part that hung again (the public tests say the same, naming
# their own test)
NOT_RUN = 'not run: %s did not return in test %s%s'
SHORT = {'rope': 'RoPE', 'mha': 'CausalSelfAttention', 'gqa': 'GroupedQueryAttention',
         'banded': 'banded_attention'}


def stopped(where, line):
    """Where a process said it was stopped, marked as its own account (`where`: a function, or
    'model.py' for the top level)."""
    return (STOPPED_IN % (where, line) if where != 'model.py' else STOPPED_AT % line) + OWN_ACCOUNT


def case_head(unit):
    """The head of a line about one case of a test that has several."""
    return 'Case %s: ' % unit


def said_at(line, where):
    """Where a stopped process said it was (`where`: a function, or 'model.py' for the top
    level)."""
    return ' (your process said it was at model.py line %d%s)' % (
        line, ', in ' + where if where != 'model.py' else '')


def import_hang(said):
    """model.py did not finish importing in the import check's process."""
    return 'model.py did not finish importing' + said


def import_hang_in_test(number, said):
    """model.py did not finish importing in a test's process (the import check's did)."""
    return 'model.py did not finish importing in test %s\'s process%s' % (number, said)


def not_run_import(import_hang_words):
    """A probe not run because model.py did not finish importing."""
    return 'not run: %s (see test 1.1)' % import_hang_words


def part_reason_failed(number):
    """Why a part is set aside or blocks a test: it fails its own test `number`."""
    return 'fails %s' % number


# what the harness saw where a part was shown wrong (judge/evidence.Shown.what), after "when test N runs it"
SHOWN_WHAT = {
    'rope': {'values': 'its output is not the rotation of its input at position %(position)d',
             'shape': 'it returned a tensor of shape %(detail)s',
             'raised': 'it raised the error of that case'},
    'attention': {'values': 'its output at position %(position)d is not what its own projections and its own '
                            "RoPE's outputs give (causal softmax attention, scaled by 1/sqrt(head size))",
                  'shape': 'it returned a tensor of shape %(detail)s',
                  'raised': 'it raised the error of that case'},
}


def shown_where(part, number, case, what, position=0, detail=''):
    """Why a part is charged: the harness's own check of a call recorded in test `number` (judge/evidence.py)."""
    table = SHOWN_WHAT['rope' if part == 'rope' else 'attention']
    said = table.get(what, table['raised']) % {'position': position, 'detail': detail}
    return 'is wrong when test %s runs it (case %s: %s)' % (number, case or 'its only case', said)


def hung_reason(number):
    return 'did not return in test %s' % number


def part_charged(part, reason):
    """The first line of a part's own test when the part was shown wrong, or hung, where another test ran it."""
    return ('0 points: your %s %s. A part is judged on all its behaviour, wherever it runs: its own tests score '
            'nothing, and the cases it spoiled were judged without it (their lines say so).'
            % (SHORT.get(part, part), reason))


def sibling_hint(number, text):
    """A hint of a charged part's other own test, repeated in the charged one."""
    return 'Test %s says of it: %s' % (number, text)


def part_fails(part, reason):
    """`part` (its code name) and why it is set aside (part_reason_failed, shown_where, hung_reason)."""
    return '%s %s' % (SHORT.get(part, part), reason)


def works_here(parts, reasons):
    """A part shown wrong here whose case still gives the reference's values: judged as it is."""
    return ('Your %s, but in this case your model\'s own values are the '
            'reference\'s, so it was judged as it is.'
            % ' and '.join('%s %s' % (SHORT.get(p, p), r) for p, r in zip(parts, reasons)))


def unit_not_judged(fails):
    """A unit that runs only failed parts of the student's (`fails`: part_fails lines)."""
    return ('Not judged: it runs only parts of yours that are set aside here (%s), so nothing of '
            'yours would be judged; it counts neither way.' % '; '.join(fails))


def gqa_aside(reason):
    return ('Judged at n_kv_head = n_query_head, where the given Block builds your '
            'CausalSelfAttention: your GroupedQueryAttention %s.' % reason)


def gqa_rope_aside(reason):
    return ('Judged with rope=False: your GroupedQueryAttention %s with RoPE, and passes 4.1 '
            'without it.' % reason)


def rope_kept(reason):
    return ('Your RoPE, which %s, could not be set aside in this test (your code does not '
            'build the class RotaryPositionalEmbeddings by that name where it uses it), so this '
            'test ran it.' % reason)


def rope_aside(reason):
    return ('Judged with the grader\'s RoPE, computed outside your process, in place of yours, '
            'which %s.' % reason)


def rope_run_again(reason):
    return 'Run again with the grader\'s RoPE in place of yours, which %s.' % reason


def nothing_left(fails):
    """A test none of whose units is judged (`fails`: part_fails lines)."""
    return ('Not judged: every case of this test runs only parts of yours that are set aside here '
            '(%s), so nothing of yours would be judged here: it earns nothing.'
            % '; '.join(fails))


def part_likely_bug(part, number, description, bug_id):
    """After nothing_left: the known bug a failed part's own test named."""
    return ('Likely bug in your %s (test %s): %s (its outputs there match a known wrong variant: %s).'
            % (SHORT.get(part, part), number, description, bug_id))


def builds_on_failed(part_words, reason):
    """An optional test that builds on a failed required part (lower case: not_judged_line caps)."""
    return 'not judged: it builds on your %s, which %s' % (part_words, reason)


def optional_not_implemented(message):
    return 'not implemented (optional): %s' % message


def did_not_finish_either(number):
    return ('not judged: test %s did not finish in time, so this one could not finish either'
            % number)


def not_judged_line(reason):
    """An optional test's "not judged" reason as its verdict line."""
    return reason[0].upper() + reason[1:] + '.'


# ---------------------------------------------------------------------- test 1.1, the top line
# grade.py: the submission's test (1.1), the line a test shows when nothing of it could run, and
# results.json's top-level output.

INTERFACE_OK = 'model.py imports and exposes the handout interface.'
NOT_IMPORTED_SHORT = 'your model.py could not be imported'
SANDBOX_UNSAFE = ('Your code was not run: the autograder\'s sandbox is not working safely on this '
                  'machine. This is not your fault; course staff have been notified.')
INVALID_RESULTS = 'The autograder produced an invalid results.json.'


def import_hang_hint(hang):
    """1.1: the import check itself did not finish (`hang`: import_hang's words)."""
    return ('%s: code at the top level of model.py runs when it is imported (a loop, a sleep, a '
            'training run?); put it under `if __name__ == "__main__":` or remove it.' % hang)


def not_imported(message):
    """1.1: the import check failed (`message`: the probe's own)."""
    return NOT_IMPORTED_SHORT + ': %s' % message


def import_hang_in_tests(hang):
    """1.1: imported in the import check, then stalled importing in a test's process."""
    return ('%s: code at the top level of model.py runs when it is imported (a loop, a sleep, a '
            'training run?), and no later test could run; put it under `if __name__ == '
            '"__main__":` or remove it.' % (hang[0].upper() + hang[1:]))


def note(text):
    """A note of a probe's, or of the grader's, on 1.1."""
    return 'Note: ' + text


def slow_import(wall, cpu):
    return note('importing model.py took %.1f s (%.1f s of CPU time), and every test imports it '
                'again: keep work out of the top level of model.py.' % (wall, cpu))


def printed_at_import(printed):
    """1.1: what model.py printed at import (`printed`: already cut to what is shown)."""
    return 'model.py printed at import:\n' + printed


def interface_lacks(names):
    return ('model.py does not define the handout interface: %s is missing. Keep the handout\'s '
            'class and method names.' % ', '.join(names))


INTERFACE_OK_BUT_READ = (INTERFACE_OK + ' This test is marked failed (it is worth no points) only '
                         'so that you read the line above: the upload holds more than one model.py '
                         'and only the first one named was graded.')


def not_graded_top(why):
    """results.json's output when nothing was graded (`why`: the first line of the reason)."""
    return 'Not graded: %s.' % why.rstrip('.')


def not_graded_import_top(hang):
    """results.json's output when model.py did not import (`hang`: import_hang's words, or None)."""
    return 'Not graded: %s (see test 1.1).' % (hang or NOT_IMPORTED_SHORT)


def located_top(note_text):
    """results.json's output: the note of where model.py was found, as a sentence."""
    return '%s.' % (note_text[0].upper() + note_text[1:])


def not_graded_test(why):
    """A test's line when the upload cannot be graded (`why`: the first line of the reason)."""
    return 'not graded: %s (see test 1.1)' % why


def not_graded_import_test(message):
    return 'not graded: your model.py could not be imported (see test 1.1): %s' % message


def optional_todo(names):
    """An optional part the student left as the handout's TODO (`names`: its code names)."""
    return ('model.py leaves %s as the handout\'s TODO (or does not define it).'
            % ' and '.join(names))


def could_not_run(error):
    """The grader could not run (stale fixtures, a bad grading.yaml)."""
    return 'Grading could not run: %s' % error


def failed_internally(kind):
    return 'The autograder failed internally (%s).' % kind


# ----------------------------------------------------------------------------- results.json's frame
# results.py: the test that stands for a failed grading, a test the grader failed to judge, an
# untouched optional part, the marks of a cut output, and a results.json written while grading runs.

ERROR_NAME = 'Autograder error'
INTERNAL_ERROR = ('The autograder hit an internal error; this is not your fault. Course staff can '
                  'see the details.')
# what an untouched optional part reads on Gradescope: a test worth 0 that is not a failure
NOT_ATTEMPTED = ('Not attempted: this optional part (extra credit) is not in your model.py '
                 '(missing, a TODO that raises NotImplementedError, or a setting your code never '
                 'reads), so it was not graded and costs nothing. Implement it for up to %s extra '
                 'points.')
NOT_IMPLEMENTED_OPTIONAL = 'not implemented (optional)'
PENDING = 'not run yet: the grading was still running when this file was written'


def truncated(more):
    """The tail of an output cut at the limit (`more`: the characters cut)."""
    return '\n[... output truncated: %d more characters]' % more


def judge_failed(kind):
    """A test the grader failed to judge (`kind`: the exception's type name)."""
    return ('the autograder failed while judging this test (%s); this is not your fault, course '
            'staff can see the details' % kind)


def scored(name, percent):
    return '%s scored %.0f%% of its points' % (name, percent)


def in_progress(finished, total):
    return 'Grading in progress: %d of %d tests finished.' % (finished, total)


def did_not_run(message):
    """A test the stopped grading had not finished (`message`: run_autograder's why)."""
    return 'did not run: %s' % message


def stopped_kept(message, kept):
    return '%s %d test(s) had finished and are kept; the others did not run.' % (message, kept)


# ----------------------------------------------------------------------------- the upload
# submission.py: which model.py was graded and why, and why an upload is refused before it runs.
# (The sentences of the functions the handout build copies word for word into the students'
# tests/_support/grader_rules.py stay in those functions: see the module docstring.)

def symlink(rel):
    return '%s is a symbolic link; upload the file itself, not a link to it' % rel


def not_regular(rel):
    return '%s is not a regular file (a device, FIFO or socket); upload your model.py itself' % rel


def hard_link(rel, links):
    return ('%s is a hard link (one file with %d names); upload a plain copy of the file'
            % (rel, links))


# why the best-ranked candidate won, by its class (submission._rank's first two fields)
WHY_GRADED = {(False, False): 'mingpt/model.py is where the handout keeps it',
              (True, False): 'it is named exactly model.py',
              (False, True): 'it is in a mingpt folder',
              (True, True): 'it is the least deeply nested'}
ALSO_SAME = '; also found, with the same content: %s'
ALSO_DIFFERENT = ('; NOT graded, with other content: %s. To have one of these graded, upload it '
                  'alone')


def and_others(more):
    return ' and %d more' % more


def several_models(count, listed, more):
    """Several different files could be model.py (`more`: and_others' words, or '')."""
    return ('found %d different files that could be your model.py (%s%s); the autograder will not '
            'guess which one you mean: upload only one (your mingpt/model.py)'
            % (count, ', '.join(listed), more))


def zip_symlink(name):
    return '%s is a symbolic link inside the zip; zip the file itself' % name


def zip_not_regular(name):
    return '%s is not a regular file inside the zip' % name


def zip_unpacks_too_large(name, limit):
    return '%s unpacks to more than %d bytes' % (name, limit)


def could_not_read(name, error):
    return 'could not read %s: %s' % (name, error)


def zip_in_zip(inner):
    return ('no model.py in the submission: %s is a zip inside the zip you uploaded, and the '
            'autograder opens only the zip itself, not zips within it: upload your '
            'mingpt/model.py, or a zip that holds it directly' % inner)


def graded_from_zip(best, why, also):
    return 'graded %s (from the zip you uploaded%s)%s' % (best, '; ' + why if why else '', also)


def unsafe_members(names, shown):
    """Zip members ignored for their path (`shown`: the first few names)."""
    return '; ignored %d zip member%s with an unsafe path (absolute or with ..): %s' % (
        len(names), 's' if len(names) > 1 else '', ', '.join(shown))


def no_submission(path):
    return 'no submission found at %s' % path


def submission_symlink(name):
    return 'the submission %s is a symbolic link; upload the file itself' % name


def no_model(holds):
    """No model.py in the upload (`holds`: what it holds, in words)."""
    return 'no model.py in the submission: upload your mingpt/model.py (%s)' % holds


def graded(name, why='', also=''):
    return 'graded %s%s%s' % (name, ' (%s)' % why if why else '', also)


def outside_upload(name):
    return '%s resolves outside the upload' % name


def linked_folder(rel):
    return ('no model.py in the submission: %s is a symbolic link to a folder, which the '
            'autograder does not follow; upload the files themselves' % rel)


NOT_A_ZIP = 'it could not be read as a zip'


def holds(what, names, shown, more):
    """'the upload holds a, b ...' (`shown`: the first few names, `more`: whether there are
    others)."""
    if not names:
        return '%s holds no file' % what
    return '%s holds %s%s' % (what, ', '.join(shown), ' ...' if more else '')


# one sentence on every Python: 3.11 fails in ast.parse ("during ast construction"), 3.10 parses
# such a file and fails only in compile() ("during compilation"), as importing model.py would
TOO_DEEP = ('model.py could not be parsed (RecursionError): it nests too deeply for Python to '
            'compile (a very long expression?): split it into shorter statements')


def syntax_error(line, msg, shown):
    """`shown`: the line's text on its own line, or ''."""
    return 'syntax error in model.py line %s: %s%s' % (line, msg, shown)


def not_parsed(kind, text):
    return ('model.py could not be parsed (%s: %s): it nests too deeply for Python (a very '
            'long expression?)' % (kind, text))


def not_checked(kind, text):
    return ('model.py could not be checked (%s: %s): simplify the file, e.g. very long or deeply '
            'nested expressions' % (kind, text))


def unusual_import(line, name):
    return ("Warning: model.py line %d imports %r, which a model has no use for; it costs nothing, "
            "but the grader's sandbox may refuse what it does" % (line, name))


def guarded_import(line, name, in_try):
    """A module the grader may lack, imported inside a try/except ImportError or a function."""
    return ("Note: model.py line %d imports %r %s; the autograder provides only torch, einops, "
            "numpy and the standard library, so that code must not run during grading"
            % (line, name, 'inside a try/except ImportError' if in_try else 'inside a function'))
