"""
The words every part of the harness shares: the line markers, the status of a probe or a case and the lines of
a probe that did not finish; the child's facts (an error's kind, the grader's own errors, CHILD_ERRORS, and the
adapter's notes); the student's own text past the grading's budget; comparisons of an output with the
reference's (areas.compare) and the shape guards; the line that names a known bug a failure matches (the
descriptions themselves sit beside their patches in known_bugs.py: the handout build copies them); the Markdown
table of expected against got; a verdict that could not be judged; a probe's outputs refused by the sandbox.
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


# ----------------------------------------------------------------------------- known bugs

def likely_bug(description, bug_id, note):
    """A failure whose outputs match a known wrong variant (known_bugs.py)."""
    return ('Likely bug: %s (your outputs match a known '
            'wrong variant: %s). %s' % (description, bug_id, note)).rstrip()


def likely_bug_tokens(description, bug_id):
    """Generated tokens that are exactly a known wrong variant's."""
    return ('Likely bug: %s (your tokens are those of a known wrong '
            'variant: %s).' % (description, bug_id))


# ----------------------------------------------------------------------------- dropout (6.1)

THAT_TEST_DID_NOT_RUN = 'that test did not run'


def what_failed(what, problem):
    """'FAIL <what>: <problem>' where the problem is already a phrase."""
    return 'FAIL %s: %s' % (what, problem)


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
