"""
The wire format between the child (untrusted) and the harness: the only place that says what
a probe may report and how much of it. Standard library only, so the harness imports it
without torch and the child uses the same definitions when it writes.

Per probe the child writes `out/<id>.json` (the report) and `out/<id>.npz` (arrays, STORED
members: np.savez, never savez_compressed), one probe per process. The harness reads these once
that process and everything it started are dead, with the checks below, and trusts nothing
else: a report
field of the wrong type, a non-finite or out-of-range number, or a count or length past its cap
makes the probe invalid, never the grading. The child clips its own reports with clip_report()
so that an honest probe never trips a cap.
"""

import math

IMPORT = 'import'                   # the pseudo-probe of importing model.py (its own process)
STDOUT_CAP = 20_000                 # characters of student output the child keeps per probe
NUMERIC_KINDS = 'biuf'              # array dtypes that may come back: bool, int, unsigned, float
STATUSES = ('ok', 'error', 'not_implemented')   # what the child may claim; the harness adds the rest

# caps on a report (the harness refuses a report past any of them; the child clips to them)
MAX_STDOUT_CHARS = STDOUT_CAP + 100  # the kept output plus the "[... N more characters dropped]" line
MAX_MESSAGE_CHARS = 4000
MAX_NOTES = 20                      # distinct notes per probe (adapter notes: missing bias, renamed keys...)
MAX_NOTE_CHARS = 500
MAX_WHERE = 12                      # traceback lines kept per error
MAX_WHERE_CHARS = 400
MAX_CASE_ERRORS = 64                # failed cases per probe (the largest probe has about 10 cases)
MAX_KEYS = 64                       # entries of the dtypes / has_wpe / facts maps
MAX_FACTS = 12                      # lines of facts per case
MAX_FACT_CHARS = 300
MAX_KEY_CHARS = 100                 # length of a case name or map key
MAX_SECONDS = 1e6                   # a probe's reported duration, in seconds
MAX_TEXT_CHARS = 1 << 40            # message_chars: an error text's length before the cap

# `stage` 'import': model.py failed to import in a test's process.
ERROR_STAGES = ('import',)

# The grader's own errors and notes in the child (child/adapter.py and the probes), as facts: a code
# of these closed sets and its figures (names, numbers in decimal, the student's strings: `figures`,
# strings only), worded by the harness (judge/messages.py CHILD_ERRORS, CHILD_NOTES) into the text the
# child used to write. Code -> the least and most figures it takes. Student code runs in the child
# and can forge any of them: a forged fact is worded like an honest one, no more than a forged
# message could say; a fact whose figures do not fit its code makes the report invalid.
FACT_ERRORS = {
    'no_default_config': (0, 0), 'no_class': (1, 1), 'shape_mismatch': (0, 0), 'no_bias': (0, 0),
    'linear_shape': (6, 6), 'projections_not_found': (3, 3), 'by_shape': (1, 1 + 6),
    'no_parameter': (1, 1), 'parameter_shape': (3, 3), 'attention_returned': (2, 2),
    'gpt_returned': (1, 1), 'generate_returned': (1, 1), 'cached_forward_returned': (1, 1),
    'no_kv_cache_class': (0, 0), 'no_kv_caches_argument': (0, 0), 'no_use_kv_cache_argument': (0, 0),
    'no_load_pretrained': (0, 0), 'no_training_step': (0, 0), 'no_banded_attention': (0, 0),
}
WRAPPED = 'by_shape'   # its figures: another AdapterError's code (not its own) and that error's figures
# the notes' codes: 'matched_by_shape' figures the class name and the layer names that play qkv, kv,
# q, k, v and out ('' where none does); 'kept_initial' the names of at most 6 parameters
FACT_NOTES = {'matched_by_shape': (7, 7), 'kept_initial': (0, 6)}
MAX_FIGURE_CHARS = 1500   # the child cut str(e) to 1500 characters: a figure's tail past them never shows
MAX_FIGURE_CUT = 1 << 40  # `cut`: the characters a note's figures lost to MAX_FIGURE_CHARS (its length)

# an error's kind, where the kind is a fact the harness words (judge/messages.py) around the error's
# text (a repr): 'exit', student code called sys.exit(code); 'missing_module', model.py imports a
# module the grader does not provide; or one of FACT_ERRORS, from its `figures` (its text is '').
ERROR_FACTS = ('exit', 'missing_module') + tuple(FACT_ERRORS)

# caps on the arrays file
MAX_ARRAYS = 256                    # members of one .npz (the gradients probe reports 110: one per parameter and case)
MAX_NDIM = 8
MAX_ITEMSIZE = 8                    # bytes per element (float64, int64)

# the memory probe's figure arrays hold [code, value]: the code is the index of the figure's type here
# (contract/memory_readings.describe_figure names the type; areas/memory.figure_of reads it back)
FIGURE_TYPES = ('int', 'float', 'tensor', 'str', 'none', 'bool', 'other')


class FactError(Exception):
    """A grader's error in the child as a fact: a code of FACT_ERRORS and its figures (strings), in
    `fact`; the harness words it. child/adapter.py's AdapterError is one."""

    def __init__(self, code, *figures):
        super().__init__(code, *figures)
        self.fact = (code,) + figures


class NotImplementedFact(FactError, NotImplementedError):
    """A FactError about an optional part the submission has not attempted: its probe or case is
    'not_implemented', as a NotImplementedError's."""


def fits(code, figures, table=None):
    """True when `figures` (a list of strings, each within MAX_FIGURE_CHARS) fit `code` of `table`
    (FACT_ERRORS by default); WRAPPED's figures are another error's code and figures."""
    table = FACT_ERRORS if table is None else table
    if code not in table or not isinstance(figures, list):
        return False
    least, most = table[code]
    if not (least <= len(figures) <= most
            and all(isinstance(f, str) and len(f) <= MAX_FIGURE_CHARS for f in figures)):
        return False
    return code != WRAPPED or (figures[0] != WRAPPED and fits(figures[0], figures[1:], table))


def _figures(fact):
    """(code, figures cut to MAX_FIGURE_CHARS, the characters cut) of a fact tuple."""
    figures = [str(f) for f in fact[1:]]
    cut = sum(max(0, len(f) - MAX_FIGURE_CHARS) for f in figures)
    return fact[0], [f[:MAX_FIGURE_CHARS] for f in figures], cut


def error_fields(e):
    """The report's fields of a FactError `e` (its text ''); None for any other exception, or for a
    FactError whose figures do not fit its code (student code can raise one): reported by its text."""
    fact = getattr(e, 'fact', None) if isinstance(e, FactError) else None
    if not isinstance(fact, tuple) or not fact or not all(isinstance(f, str) for f in fact):
        return None
    code, figures, _ = _figures(fact)
    return {'fact': code, 'figures': figures, 'message': ''} if fits(code, figures) else None


def note_fields(note):
    """The report's entry of a note, a tuple (code of FACT_NOTES, figures...): its figures cut, and
    `cut`, the characters cut (the harness cuts the note as the child cut the whole sentence)."""
    code, figures, cut = _figures(note)
    return {'fact': code, 'figures': figures, 'cut': cut}


def _note_ok(n):
    return isinstance(n, dict) and set(n) == {'fact', 'figures', 'cut'} and \
        fits(n['fact'], n['figures'], FACT_NOTES) and _count(n['cut'])


def _error_facts_ok(e):
    """An error's `figures` fit its `fact` (a FACT_ERRORS code needs them; no other fact has them)."""
    if e.get('fact') in FACT_ERRORS:
        return fits(e['fact'], e.get('figures'))
    return 'figures' not in e


# evidence (child/evidence.py, judge/evidence.py): what the student's RoPE and attention modules received and
# returned inside a case, one flat float64 array 'evidence/<slot>' per record, its layout in the report
MAX_EVIDENCE = 48                   # records per probe (a GPT case has one per layer; the largest probe has 9 cases)
MAX_EVIDENCE_ROPES = 4              # RoPE calls kept inside one attention call (q and k; 4 for code that rotates v)
MAX_EVIDENCE_SLOT = 1 << 20         # elements of one record (the gpu profile's largest: about 300,000)
MAX_EVIDENCE_ELEMENTS = 4 << 20     # elements of all the records of one probe (32 MB of float64)
EVIDENCE_PARTS = ('mha', 'gqa')
EVIDENCE_NAMES = ('x', 'y') + tuple('%s_proj.%s' % (p, w) for p in ('q', 'k', 'v', 'out') for w in ('weight', 'bias')) \
    + tuple('rope_%s%d' % (io, i) for i in range(MAX_EVIDENCE_ROPES) for io in 'xy')
EVIDENCE_RAISED = ('', 'self', 'rope')


def evidence_key(slot):
    return 'evidence/%d' % slot


def _evidence_entry(e):
    def dims(shape):
        return isinstance(shape, list) and len(shape) <= MAX_NDIM and all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_EVIDENCE_SLOT for n in shape)
    return (isinstance(e, dict) and set(e) == {'case', 'part', 'slot', 'layout', 'offsets', 'dropout', 'raised'}
            and _text(MAX_KEY_CHARS)(e['case']) and e['part'] in EVIDENCE_PARTS and e['raised'] in EVIDENCE_RAISED
            and isinstance(e['slot'], int) and not isinstance(e['slot'], bool) and 0 <= e['slot'] < MAX_EVIDENCE
            and isinstance(e['dropout'], bool)
            and isinstance(e['offsets'], list) and len(e['offsets']) <= MAX_EVIDENCE_ROPES and all(
                isinstance(o, int) and not isinstance(o, bool) and 0 <= o <= MAX_EVIDENCE_SLOT for o in e['offsets'])
            and isinstance(e['layout'], list) and len(e['layout']) <= len(EVIDENCE_NAMES) and all(
                isinstance(item, list) and len(item) == 2 and item[0] in EVIDENCE_NAMES and dims(item[1])
                for item in e['layout']))


IMPORTED = b'model.py imported'   # the one link frame a probe process sends once model.py is imported (runner.py)
HANG_DUMP = 'hang-stack.txt'   # in out/: the Python stack the probe process dumps on HANG_SIGNAL (runner.arm_hang_dump)
HANG_SIGNAL = 10               # SIGUSR1: the harness sends it at a deadline or wall cap, then kills a moment later
MAX_HANG_DUMP = 64 * 1024      # bytes of the dump the harness reads back (faulthandler writes ~100 frames a thread)


def report_name(probe_id):
    return probe_id + '.json'


def arrays_name(probe_id):
    return probe_id + '.npz'


def _text(limit):
    return lambda v: isinstance(v, str) and len(v) <= limit


def _texts(count, limit):
    return lambda v: isinstance(v, list) and len(v) <= count and all(isinstance(x, str) and len(x) <= limit for x in v)


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= MAX_SECONDS


def _map(count, value_ok):
    return lambda v: isinstance(v, dict) and len(v) <= count and all(
        isinstance(k, str) and len(k) <= MAX_KEY_CHARS and value_ok(x) for k, x in v.items())


def _count(v):
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_TEXT_CHARS


def _one_of(values):
    return lambda v: v in values


def _case_error(e):
    return (isinstance(e, dict) and _text(MAX_KEY_CHARS)(e.get('status', ''))
            and _text(MAX_MESSAGE_CHARS)(e.get('message', ''))
            and _texts(MAX_WHERE, MAX_WHERE_CHARS)(e.get('where', []))
            and ('fact' not in e or _one_of(ERROR_FACTS)(e['fact'])) and _error_facts_ok(e)
            and ('message_chars' not in e or _count(e['message_chars'])))


# the fields of a report as runner.py writes them; student code can write the file itself
REPORT_FIELDS = {
    'status': _text(MAX_KEY_CHARS), 'message': _text(MAX_MESSAGE_CHARS),
    # the error's kind and stage (ERROR_FACTS, ERROR_STAGES) and its text's length before the cap
    'fact': _one_of(ERROR_FACTS), 'stage': _one_of(ERROR_STAGES), 'message_chars': _count,
    'stdout': _text(MAX_STDOUT_CHARS), 'where': _texts(MAX_WHERE, MAX_WHERE_CHARS),
    # the adapter's notes, as facts (FACT_NOTES: note_fields), worded by the harness
    'notes': lambda v: isinstance(v, list) and len(v) <= MAX_NOTES and all(_note_ok(n) for n in v),
    'figures': lambda v: isinstance(v, list),   # checked with 'fact' (_error_facts_ok)
    'seconds': _number,
    'case_errors': _map(MAX_CASE_ERRORS, _case_error),
    'dtypes': _map(MAX_KEYS, _texts(2, MAX_KEY_CHARS)),
    'has_wpe': _map(MAX_KEYS, lambda b: isinstance(b, bool)),
    # per case, what the probe observed about the student's objects (names, shapes), in words: judges
    # print these in failure messages only; no grade rests on them
    'facts': _map(MAX_KEYS, _texts(MAX_FACTS, MAX_FACT_CHARS)),
    # whether the parts the job set aside were built the grader's way, and which the student's code kept anyway
    # (child/set_aside.py): words only; the harness reads only the part names it set aside itself
    'set_aside': _map(2, _texts(8, MAX_KEY_CHARS)),
    # the first run's records of the student's parts inside each case (child/evidence.py); the harness checks
    # their values itself (judge/evidence.py): they can show a part wrong, never right
    'evidence': lambda v: isinstance(v, list) and len(v) <= MAX_EVIDENCE and all(_evidence_entry(e) for e in v),
}


def check_report(info):
    """
    Raises ValueError when a report is not a JSON object of known fields with the right types
    within the caps above. Returns the report with only the known fields (others are dropped).
    """
    if not isinstance(info, dict):
        raise ValueError("report is not a JSON object")
    for key, ok in REPORT_FIELDS.items():
        if key in info and not ok(info[key]):
            raise ValueError("field %r of the report has the wrong type, a number out of range, or is too long" % key)
    if not _error_facts_ok(info):
        raise ValueError("field 'figures' of the report does not fit its field 'fact'")
    return {k: v for k, v in info.items() if k in REPORT_FIELDS}


def _clip_text(s, limit, length=None):
    """`s` cut to `limit` characters; `length`: that of the whole text `s` begins (len(s))."""
    s = str(s)
    length = len(s) if length is None else length
    if length <= limit:
        return s
    return s[:limit - 30] + ' [... %d characters cut]' % (length - limit + 30)


clip_text = _clip_text   # the harness cuts a sentence it words from an error's facts as the child did


def _clip_where(where):
    return [_clip_text(w, MAX_WHERE_CHARS) for w in list(where)[-MAX_WHERE:]]


def clip_report(info):
    """What the child writes: its report cut to the caps, so that an honest probe is never refused."""
    out = dict(info)
    for key, limit in (('message', MAX_MESSAGE_CHARS), ('stdout', MAX_STDOUT_CHARS), ('status', MAX_KEY_CHARS)):
        if key in out:
            out[key] = _clip_text(out[key], limit)
    if 'where' in out:
        out['where'] = _clip_where(out['where'])
    if 'notes' in out:
        out['notes'] = [note_fields(n) for n in out['notes'][:MAX_NOTES]]
    if 'seconds' in out:
        s = float(out['seconds'])
        out['seconds'] = min(max(s, 0.0), MAX_SECONDS) if math.isfinite(s) else 0.0
    if 'case_errors' in out:
        out['case_errors'] = {_clip_text(k, MAX_KEY_CHARS): {
            'status': _clip_text(e.get('status', 'error'), MAX_KEY_CHARS),
            'message': _clip_text(e.get('message', ''), MAX_MESSAGE_CHARS),
            'where': _clip_where(e.get('where', [])),
            **{f: e[f] for f in ('fact', 'figures', 'message_chars') if f in e}}
            for k, e in list(out['case_errors'].items())[:MAX_CASE_ERRORS]}
    for key in ('dtypes', 'has_wpe'):
        if key in out:
            out[key] = dict(list(out[key].items())[:MAX_KEYS])
    if 'facts' in out:
        out['facts'] = {_clip_text(k, MAX_KEY_CHARS): [_clip_text(line, MAX_FACT_CHARS) for line in list(v)[:MAX_FACTS]]
                        for k, v in list(out['facts'].items())[:MAX_KEYS]}
    return out
