"""
The student's own text in the grader's output, in one place. Every text a probe's process wrote
(error messages, traceback lines, notes, facts, dtype names; the import check's message and what
model.py printed) is made one line, cut to grading.yaml's sandbox.student_text_chars, and charged
against one budget per grading (sandbox.student_text_budget), probe by probe in test order, by
`Budget.result`, which `judging.Judging` applies to every probe result before any judge reads it,
whatever the child's report claims.

Why: student code sees the grading's inputs and whatever its process holds, so each text it writes
is a channel out. The cut bounds one text, the budget bounds them all: past it a text is replaced
by the grader's WITHHELD sentence, and the judges still say what failed in their own words (the
case, the status). A text already shown costs nothing again: repeating it carries nothing new, and
an honest error raised in every case of every test that uses the part is one text.
One line: a newline (any line break, control or format character) from student code is shown escaped, so
student text never starts a line of the grader's output (no "ok"/"FAIL" line, no heading, no row).
"""

import dataclasses
import re
import unicodedata

from autograder.contract import report_schema
from autograder.judge import messages

CHILD_STATUSES = ('ok', 'error', 'not_implemented')   # statuses (and messages) the child reports itself (wire.STATUSES)
WITHHELD = messages.WITHHELD   # what replaces a text past the budget (its %d: the budget)
MAX_FACT_LINES = 6      # facts (tensor names and shapes) shown per case: the loader's few mismatches fit
WHERE_SHOWN = 3         # traceback lines of a probe shown (areas.probe_failure, test 1.1): the rest is never read
CASE_WHERE_SHOWN = 1    # traceback lines of a case error shown (areas.case_error_line)
DTYPE_CHARS = 24        # a dtype's name ('torch.complex128' is 16): judged, so never withheld, only cut
IMPORT_PRINTED_CHARS = 1000   # what model.py printed at import, shown in test 1.1
_UNSAFE = re.compile('[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]')   # line breaks and control characters (not tab)
# any character past ASCII: a format character (Unicode category Cf: bidi overrides and isolates, zero-width
# characters, the BOM) is escaped like a control character, since it can reorder or hide the grader's own words on
# screen; the test is unicodedata's, per character, so that every Cf of the interpreter's Unicode version is covered
_UNSAFE_OR_WIDE = re.compile('[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]|[^\x00-\x7f]')


def _escaped(m):
    ch = m.group()
    if _UNSAFE.match(ch) or unicodedata.category(ch) == 'Cf':
        return ch.encode('unicode_escape').decode('ascii')
    return ch


def flatten(text):
    """`text` as one line: line breaks, control and format characters escaped ('\\n', '\\x1b', '\\u2028',
    '\\u202e')."""
    text = text if isinstance(text, str) else str(text)
    return _UNSAFE_OR_WIDE.sub(_escaped, text)


def _cut(flat, kept):
    return flat if len(kept) == len(flat) else messages.text_cut(kept, len(flat) - len(kept))


def clip_text(text, limit):
    """One text of the student's process, flattened and cut to `limit` characters (no budget)."""
    flat = flatten(text)
    return _cut(flat, flat[:limit])


def spoken(text, error):
    """
    The message of an error the child reported as facts (its `fact`, `stage` and
    `message_chars`: report_schema.ERROR_FACTS), in the harness's words around its `text`
    (messages.error_words), cut to the report's cap as the child cut a whole message: from the
    sentence's full length, which message_chars gives where the cap cut `text`. An error without
    facts is its text. The grader's own errors in the child (report_schema.FACT_ERRORS) are
    worded from their figures first (messages.child_error), as the child once wrote them.
    """
    fact, stage, chars = error.get('fact'), error.get('stage'), error.get('message_chars')
    if fact in report_schema.FACT_ERRORS:
        text, fact, chars = messages.child_error(fact, error.get('figures') or []), None, None
    if fact not in report_schema.ERROR_FACTS and stage not in report_schema.ERROR_STAGES:
        return text
    head, tail = messages.error_words(fact, stage)
    full = max(chars if isinstance(chars, int) else 0, len(text))
    whole = head + text + tail if full == len(text) else head + text
    length = len(head) + full + len(tail)
    return report_schema.clip_text(whole, report_schema.MAX_MESSAGE_CHARS, length)


def noted(note):
    """A note's text: the adapter's facts (report_schema.FACT_NOTES) worded (messages.child_note) and
    cut as the child cut the whole sentence, from its full length (`cut`: what its figures lost);
    a text (notes the harness merged after taking them) as it is."""
    if not isinstance(note, dict):
        return note
    text = messages.child_note(note.get('fact'), note.get('figures') or [])
    length = len(text) + (note.get('cut') if isinstance(note.get('cut'), int) else 0)
    return report_schema.clip_text(text, report_schema.MAX_NOTE_CHARS, length)


class Budget:
    """
    The student's text of one grading: `take` one text, or `result` every text of a probe result.
    `shown` counts the characters of distinct student text let through, `withheld` the texts replaced.
    """

    def __init__(self, per_text, total):
        self.per_text, self.total, self.left = per_text, total, total
        self.seen = set()
        self.withheld = 0

    @property
    def shown(self):
        return self.total - self.left

    def take(self, text, whole=False, cut=None):
        """The text to show for `text`: flattened, cut to `cut` (default student_text_chars; none when `whole`) and
        charged; WITHHELD past the budget. A `whole` text (the import check's: that process gets no inputs) and a
        text cut to its own `cut` (a dtype's name, which a judge compares) are always shown, and counted."""
        flat = flatten(text)
        kept = flat[:cut] if cut else flat if whole else flat[:self.per_text]
        if kept not in self.seen:
            if len(kept) > self.left and not (whole or cut):
                self.withheld += 1
                return WITHHELD % self.total
            self.left = max(0, self.left - len(kept))
            self.seen.add(kept)
        return _cut(flat, kept)

    def _lines(self, texts, whole=False):
        """Each text taken; a run of withheld ones said once."""
        out = []
        for t in texts:
            t = self.take(t, whole)
            if not (out and t == out[-1] == WITHHELD % self.total):
                out.append(t)
        return out

    def _case_error(self, e, whole):
        """A case error with its message (worded from the child's facts) and traceback line taken."""
        return dict(e, message=self.take(spoken(e.get('message', ''), e), whole),
                    where=self._lines(list(e.get('where') or [])[-CASE_WHERE_SHOWN:], whole))

    def result(self, result, whole=False):
        """
        The probe result with every text its process wrote taken (the import check's with `whole`); texts no
        judge shows (traceback lines past those shown, a probe's printed output) are dropped, not charged. The
        harness's own messages (timeouts, crashes, hang locations) are left whole.
        """
        if result is None:
            return result
        info = dict(result.info)
        message = result.message
        if result.status in CHILD_STATUSES:
            message = self.take(spoken(message, info), whole)
        if isinstance(info.get('where'), list):
            info['where'] = self._lines(info['where'][-WHERE_SHOWN:], whole)
        if isinstance(info.get('case_errors'), dict):
            info['case_errors'] = {k: self._case_error(e, whole)
                                   for k, e in info['case_errors'].items() if isinstance(e, dict)}
        if isinstance(info.get('notes'), list):
            info['notes'] = self._lines([noted(n) for n in info['notes']], whole)
        if isinstance(info.get('facts'), dict):
            info['facts'] = {k: self._lines(list(v)[:MAX_FACT_LINES], whole) for k, v in info['facts'].items()}
        if isinstance(info.get('dtypes'), dict):   # compared by the harness: cut and counted, never replaced
            info['dtypes'] = {k: [self.take(t, cut=DTYPE_CHARS) for t in v] if isinstance(v, list) else v
                              for k, v in info['dtypes'].items()}
        if whole and isinstance(info.get('stdout'), str):
            info['stdout'] = self.take(info['stdout'][:IMPORT_PRINTED_CHARS], True)
        elif not whole:
            info.pop('stdout', None)
        return dataclasses.replace(result, message=message, info=info)

    def report(self):
        """extra_data.student_text (staff): the budget, the characters shown, the texts withheld."""
        return {'budget': self.total, 'shown_chars': self.shown, 'withheld_texts': self.withheld}
