"""
The grader's RoPE, computed in the harness for a probe process whose RotaryPositionalEmbeddings
judge/set_aside.py set aside: the process sends the tensor it would have rotated
(child/set_aside.py, over contract/rope_link.py's format) and gets it back rotated. It lives
outside the sandbox, so nothing of it is in memory, importable or readable where student code
runs; a process can only ask, and only where RoPE was set aside for it. Every call is logged
(shape, positions, direction; never the values) into the probe's harness['link'], for staff.

What a determined student can learn from it: the rotation of tensors of their choice, i.e. the
handout's formula, and only in a test that their own RoPE has already failed (2.1 or 2.2 ran in
processes that had no such service). docs/ARCHITECTURE.md ("One mistake, one part") says why
that is acceptable.
"""


import numpy as np

from autograder.contract import rope_link
from autograder.sandbox import LinkAnswer


class Budget:
    """
    What the probe processes of one grading may ask of the grader's RoPE, all together (one Budget per grading,
    shared by both runs, as judge/student_text.Budget is for the student's text): `calls` requests and `mb`
    megabytes of values (grading.yaml's sandbox.rope_service_calls and rope_service_mb for the profile, with
    their why: what an honest submission needs, with margin). Past either, the process asking gets no answer
    and is stopped (fail closed): a flood costs the harness at most this many rotations. The first `logged` calls
    are logged one entry each (staff's extra_data.second_run); past them a probe keeps one entry of counts, so
    that the log stays a few hundred KB whatever the child asks.
    """

    def __init__(self, calls, mb, logged=2000):
        self.cap_calls, self.cap_mb, self.max_logged = calls, mb, logged
        self.calls = self.bytes = self.logged = 0

    def take(self, nbytes):
        """Count one request of `nbytes`; the stop fact (a dict) once past the cap, else None."""
        self.calls += 1
        self.bytes += nbytes
        if self.calls > self.cap_calls or self.bytes > self.cap_mb * 2 ** 20:
            return {'kind': 'rope_cap', 'calls': self.calls, 'cap_calls': self.cap_calls,
                    'mb': round(self.bytes / 2 ** 20, 1), 'cap_mb': self.cap_mb}
        return None


def calls_of(log):
    """How many calls of the grader's RoPE a probe's link log holds (an entry of counts stands for several)."""
    return sum(e.get('unlogged_calls', 1) for e in log or () if isinstance(e, dict) and e.get('kind') == 'rope')


def mb_of(log):
    """The MB of values those calls sent."""
    return round(sum(e.get('bytes', 0) for e in log or () if isinstance(e, dict) and e.get('kind') == 'rope')
                 / 2 ** 20, 2)


NUMPY = {b'f': np.float32, b'd': np.float64}


def rotate(x, first, base, backward=False):
    """x (rows, T, d) rotated as the handout says at positions first+1..first+T (rotate-half layout,
    theta_i = base^(-2(i-1)/d)), in float64; `backward` rotates by minus the angle (the transpose)."""
    d = x.shape[-1]
    theta = float(base) ** (-np.arange(0, d, 2, dtype=np.float64) / d)          # (d/2,)
    angles = np.outer(np.arange(first + 1, first + x.shape[1] + 1, dtype=np.float64), theta)
    cos, sin = np.cos(angles), np.sin(angles) * (-1.0 if backward else 1.0)     # (T, d/2)
    half = d // 2
    x1, x2 = x[..., :half].astype(np.float64), x[..., half:].astype(np.float64)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def for_probe(budget=None):
    """service(payload, pid) -> (reply, log entry): what answers the harness link
    (probe_job.RunPlan.link_services) of a probe whose RoPE is set aside, every request counted against the
    grading's `budget` (a Budget; None: a budget of this probe's own with no cap, for staff tools and tests);
    past it a LinkAnswer that stops the process. Past the budget's logged calls, this probe's one entry of
    counts (the same dict, in the log once, its counts kept up to date) stands for the rest."""
    budget = budget if budget is not None else Budget(float('inf'), float('inf'), float('inf'))
    counts = {}

    def service(payload, pid):
        stop = budget.take(len(payload))
        if stop is not None:
            return LinkAnswer(stop=stop)
        request = rope_link.decode(payload)
        if request is None:
            entry = {'kind': 'rope', 'refused': 'not a well-formed request', 'bytes': len(payload)}
            reply = b''
        else:
            op, first, rows, length, d, base, code, values = request
            x = np.frombuffer(values, dtype=NUMPY[code]).reshape(rows, length, d)
            reply = rotate(x, first, base, backward=op == b'b').astype(NUMPY[code]).tobytes()
            entry = {'kind': 'rope', 'op': 'backward' if op == b'b' else 'forward', 'rows': rows, 'positions':
                     [first + 1, first + length], 'd': d, 'base': base, 'bytes': len(payload)}
        if budget.logged < budget.max_logged:
            budget.logged += 1
            return reply, entry
        first_past = not counts
        counts['kind'] = 'rope'
        counts['unlogged_calls'] = counts.get('unlogged_calls', 0) + 1
        counts['bytes'] = counts.get('bytes', 0) + len(payload)
        return reply, (counts if first_past else None)
    return service
