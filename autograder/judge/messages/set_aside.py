"""
The words of hangs and of the second run (judge/set_aside.py): where a probe was stopped, the tests a hang or
an unfinished import leaves unrun, a part charged, a test judged with a failed part set aside, and an optional test
not judged. Every test a sentence names is given by its number (grading.yaml's `number`, by id), never written.
"""

# ------------------------------------------------------------------------- hangs, the second run
# set_aside.py: where a probe was stopped, the tests a hang or an unfinished import leaves unrun, the
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


def not_run_import(import_hang_words, number):
    """A probe not run because model.py did not finish importing (`number`: the import test's)."""
    return 'not run: %s (see test %s)' % (import_hang_words, number)


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


def gqa_rope_aside(reason, number):
    """`number`: the test of GroupedQueryAttention without RoPE (4.1)."""
    return ('Judged with rope=False: your GroupedQueryAttention %s with RoPE, and passes %s '
            'without it.' % (reason, number))


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
