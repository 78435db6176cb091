"""
Patches a source text by anchor strings: each (old, new[, count]) replaces `old`, which must
occur exactly `count` times (default 1), so a patch that no longer fits the reference fails
loudly instead of silently doing nothing. One helper for every patched copy of the reference:
the known bugs (known_bugs.py), the hostile corpus (tests/hostile/build.py) and the tests.
"""

import os

from autograder import REFERENCE_DIR

REFERENCE_MODEL = os.path.join(REFERENCE_DIR, 'mingpt', 'model.py')


class PatchError(RuntimeError):
    """An anchor does not occur the expected number of times: the reference changed under the patch."""


def apply(source, edits, what='patch'):
    """`source` with every edit applied in order. edits: iterable of (old, new) or (old, new, count)."""
    for edit in edits:
        old, new = edit[0], edit[1]
        count = edit[2] if len(edit) > 2 else 1
        found = source.count(old)
        if found != count:
            raise PatchError('%s: expected %d occurrence(s) of %r in the reference, found %d; update the patch'
                             % (what, count, old[:60], found))
        source = source.replace(old, new)
    return source


def reference_source(path=REFERENCE_MODEL):
    with open(path, encoding='utf-8') as f:
        return f.read()


def patched_reference(edits, what='patch', path=REFERENCE_MODEL):
    """reference/mingpt/model.py with `edits` applied (see apply)."""
    return apply(reference_source(path), edits, what)
