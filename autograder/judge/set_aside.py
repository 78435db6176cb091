"""
The grader's RoPE, computed in the harness for a probe process whose RotaryPositionalEmbeddings
the cascade set aside (judge/cascade.py): the process sends the tensor it would have rotated
(child/set_aside.py, over contract/rope_link.py's format) and gets it back rotated. It lives
outside the sandbox, so nothing of it is in memory, importable or readable where student code
runs; a process can only ask, and only where RoPE was set aside for it. Every call is logged
(shape, positions, direction; never the values) into the probe's harness['link'], for staff.

What a determined student can learn from it: the rotation of tensors of their choice, i.e. the
handout's formula, and only in a test that their own RoPE has already failed (2.1 or 2.2 ran in
processes that had no such service). docs/ARCHITECTURE.md ("One mistake, one part") says why
that is acceptable.
"""

from dataclasses import dataclass

import numpy as np

from autograder.contract import rope_link
from autograder.sandbox import LinkAnswer


@dataclass(frozen=True)
class Cap:
    """What one probe process may ask of the grader's RoPE: `calls` requests and `mb` megabytes of values
    (grading.yaml's sandbox.rope_service_calls and rope_service_mb, with their why): what an honest probe
    needs, with margin. Past either the process gets no answer and is stopped (fail closed), so that a flood
    costs the judge at most this many rotations and log entries per probe, never its memory or the budget."""
    calls: int = 4000
    mb: int = 64


DEFAULT_CAP = Cap()

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


def rope_service(cap=None):
    """service(payload, pid) -> (reply, log entry): what answers the harness link
    (probe_job.RunPlan.link_services) of a probe whose RoPE is set aside; past `cap` (a Cap, default
    DEFAULT_CAP) a LinkAnswer that stops the process, its fact the counts (no entry per call past it)."""
    cap = cap or DEFAULT_CAP
    asked = {'calls': 0, 'bytes': 0}

    def service(payload, pid):
        asked['calls'] += 1
        asked['bytes'] += len(payload)
        if asked['calls'] > cap.calls or asked['bytes'] > cap.mb << 20:
            return LinkAnswer(stop={'kind': 'rope_cap', 'calls': asked['calls'], 'cap_calls': cap.calls,
                                    'mb': round(asked['bytes'] / 2 ** 20, 1), 'cap_mb': cap.mb})
        request = rope_link.decode(payload)
        if request is None:
            return b'', {'kind': 'rope', 'refused': 'not a well-formed request', 'bytes': len(payload)}
        op, first, rows, length, d, base, code, values = request
        x = np.frombuffer(values, dtype=NUMPY[code]).reshape(rows, length, d)
        out = rotate(x, first, base, backward=op == b'b').astype(NUMPY[code])
        entry = {'kind': 'rope', 'op': 'backward' if op == b'b' else 'forward', 'rows': rows, 'positions':
                 [first + 1, first + length], 'd': d, 'base': base, 'bytes': len(payload)}
        return out.tobytes(), entry
    return service
