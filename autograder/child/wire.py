"""
The wire format between the child (untrusted) and the harness: the only place that says what
a probe may report. Standard library only, so the harness imports it without torch and the
child uses the same definitions when it writes.

Per probe the child writes `out/<id>.json` (the report) and `out/<id>.npz` (arrays), and
appends "start <id>" / "end <id>" lines to `out/progress`. The harness reads these with the
checks below and trusts nothing else: a report field of the wrong type makes the probe
invalid, never the grading.
"""

import math

IMPORT = 'import'                   # the pseudo-probe of importing model.py
PROGRESS_FILE = 'progress'
STDOUT_CAP = 20_000                 # characters of student output the child keeps per probe
NUMERIC_KINDS = 'biuf'              # array dtypes that may come back: bool, int, unsigned, float
STATUSES = ('ok', 'error', 'not_implemented')   # what the child may claim; the harness adds the rest


def report_name(probe_id):
    return probe_id + '.json'


def arrays_name(probe_id):
    return probe_id + '.npz'


def _strings(v):
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


# the fields of a report as runner.py writes them; student code can write the file itself
REPORT_FIELDS = {
    'status': lambda v: isinstance(v, str), 'message': lambda v: isinstance(v, str),
    'stdout': lambda v: isinstance(v, str), 'where': _strings, 'notes': _strings,
    'seconds': _number,
    'case_errors': lambda v: isinstance(v, dict) and all(
        isinstance(e, dict) and isinstance(e.get('status', ''), str) and isinstance(e.get('message', ''), str)
        and _strings(e.get('where', [])) for e in v.values()),
    'dtypes': lambda v: isinstance(v, dict) and all(_strings(d) for d in v.values()),
    'has_wpe': lambda v: isinstance(v, dict) and all(isinstance(b, bool) for b in v.values()),
}


def check_report(info):
    """Raises ValueError when a report is not a JSON object of known fields with the right types."""
    if not isinstance(info, dict):
        raise ValueError("report is not a JSON object")
    for key, ok in REPORT_FIELDS.items():
        if key in info and not ok(info[key]):
            raise ValueError("field %r of the report has the wrong type" % key)
