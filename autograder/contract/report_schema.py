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

# an error's kind, where the kind is a fact the judge words (judge/messages.py) around the error's
# text (a repr): 'exit', student code called sys.exit(code); 'missing_module', model.py imports a
# module the grader does not provide. `stage` 'import': model.py failed to import in a test's process.
ERROR_FACTS = ('exit', 'missing_module')
ERROR_STAGES = ('import',)

# caps on the arrays file
MAX_ARRAYS = 256                    # members of one .npz (the gradients probe reports 110: one per parameter and case)
MAX_NDIM = 8
MAX_ITEMSIZE = 8                    # bytes per element (float64, int64)

# the memory probe's figure arrays hold [code, value]: the code is the index of the figure's type here
# (contract/memory_readings.describe_figure names the type; areas/memory.figure_of reads it back)
FIGURE_TYPES = ('int', 'float', 'tensor', 'str', 'none', 'bool', 'other')


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
    return (isinstance(e, dict) and _text(MAX_KEY_CHARS)(e.get('status', '')) and _text(MAX_MESSAGE_CHARS)(e.get('message', ''))
            and _texts(MAX_WHERE, MAX_WHERE_CHARS)(e.get('where', []))
            and ('fact' not in e or _one_of(ERROR_FACTS)(e['fact']))
            and ('message_chars' not in e or _count(e['message_chars'])))


# the fields of a report as runner.py writes them; student code can write the file itself
REPORT_FIELDS = {
    'status': _text(MAX_KEY_CHARS), 'message': _text(MAX_MESSAGE_CHARS),
    # the error's kind and stage (ERROR_FACTS, ERROR_STAGES) and its text's length before the cap
    'fact': _one_of(ERROR_FACTS), 'stage': _one_of(ERROR_STAGES), 'message_chars': _count,
    'stdout': _text(MAX_STDOUT_CHARS), 'where': _texts(MAX_WHERE, MAX_WHERE_CHARS),
    'notes': _texts(MAX_NOTES, MAX_NOTE_CHARS),
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
    return {k: v for k, v in info.items() if k in REPORT_FIELDS}


def _clip_text(s, limit, length=None):
    """`s` cut to `limit` characters; `length`: that of the whole text `s` begins (len(s))."""
    s = str(s)
    length = len(s) if length is None else length
    if length <= limit:
        return s
    return s[:limit - 30] + ' [... %d characters cut]' % (length - limit + 30)


clip_text = _clip_text   # the judge cuts a sentence it words from an error's facts as the child did


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
        out['notes'] = [_clip_text(n, MAX_NOTE_CHARS) for n in out['notes'][:MAX_NOTES]]
    if 'seconds' in out:
        s = float(out['seconds'])
        out['seconds'] = min(max(s, 0.0), MAX_SECONDS) if math.isfinite(s) else 0.0
    if 'case_errors' in out:
        out['case_errors'] = {_clip_text(k, MAX_KEY_CHARS): {
            'status': _clip_text(e.get('status', 'error'), MAX_KEY_CHARS),
            'message': _clip_text(e.get('message', ''), MAX_MESSAGE_CHARS),
            'where': _clip_where(e.get('where', [])),
            **{f: e[f] for f in ('fact', 'message_chars') if f in e}}
            for k, e in list(out['case_errors'].items())[:MAX_CASE_ERRORS]}
    for key in ('dtypes', 'has_wpe'):
        if key in out:
            out[key] = dict(list(out[key].items())[:MAX_KEYS])
    if 'facts' in out:
        out['facts'] = {_clip_text(k, MAX_KEY_CHARS): [_clip_text(line, MAX_FACT_CHARS) for line in list(v)[:MAX_FACTS]]
                        for k, v in list(out['facts'].items())[:MAX_KEYS]}
    return out
