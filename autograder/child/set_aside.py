"""
What a probe process builds in place of the submission's RotaryPositionalEmbeddings when the
harness sets it aside (job['set_aside'] names 'rope': it fails 2.1 or 2.2, and a later test's
own values showed it wrong there; judge/set_aside.py). Runs INSIDE the sandboxed child.

Nothing of the answer is here: GraderRoPE only carries the tensor it is given to the harness over
the link and back (contract/rope_link.py); the rotation is computed outside this process by
judge/rope_service.py, which answers only the probe processes it set RoPE aside for, and logs every
call. Its backward asks for the transposed rotation the same way, so training runs through it.

The swap is by name in the student's module (mingpt.model.RotaryPositionalEmbeddings =
GraderRoPE) for the time a module or model is BUILT; BUILT records whether one was really built,
so that the harness can say where the student's code could not be set aside (a RoPE inlined in
forward) instead of guessing.
"""

import contextlib

import torch
import torch.nn as nn

from . import socket_link
from autograder.contract import rope_link

CLASS_NAME = 'RotaryPositionalEmbeddings'
BUILT = set()   # {'rope'} once a GraderRoPE was built in this process


class GraderUnavailable(RuntimeError):
    """The harness did not answer (this process was not given the grader's RoPE)."""


def _rotate(op, x, offset, d, base):
    """x (..., T, d) rotated at positions offset+1.. by the harness, in pieces under the link's message size."""
    shape, dtype = x.shape, x.dtype
    wire = torch.float64 if dtype == torch.float64 else torch.float32
    flat = x.detach().to('cpu', wire).contiguous().reshape(-1, shape[-2], shape[-1])
    code = b'd' if wire == torch.float64 else b'f'
    rows, T = flat.shape[0], flat.shape[1]
    per_row = max(1, rope_link.MAX_BYTES // (d * rope_link.DTYPES[code]))   # positions of one row per message
    out = torch.empty_like(flat)
    for t0 in range(0, T, per_row):
        t1 = min(T, t0 + per_row)
        step = max(1, rope_link.MAX_BYTES // ((t1 - t0) * d * rope_link.DTYPES[code]))
        for r0 in range(0, rows, step):
            r1 = min(rows, r0 + step)
            piece = flat[r0:r1, t0:t1].contiguous()
            reply = socket_link.ask(rope_link.encode(op, offset + t0, r1 - r0, t1 - t0, d, base, code,
                                                     piece.numpy().tobytes()))
            if len(reply) != piece.numel() * rope_link.DTYPES[code]:
                raise GraderUnavailable("the grader's RoPE is not available in this process")
            out[r0:r1, t0:t1] = torch.frombuffer(bytearray(reply), dtype=wire).reshape(piece.shape)
    return out.reshape(shape).to(x.device, dtype)


class _Rotation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, offset, d, base):
        ctx.rope = (offset, d, base)
        return _rotate(b'f', x, offset, d, base)

    @staticmethod
    def backward(ctx, grad):
        return _rotate(b'b', grad, *ctx.rope), None, None, None


class GraderRoPE(nn.Module):
    """The handout's interface, RotaryPositionalEmbeddings(d, base).forward(x, offset=0); computed by the grader."""

    def __init__(self, d, base=10_000, *args, **kwargs):
        super().__init__()
        BUILT.add('rope')
        self.d, self.base = int(d), float(base)

    def forward(self, x, offset=0, *args, **kwargs):
        if x.shape[-1] != self.d:
            raise ValueError('RoPE built for d=%d got a tensor of last dimension %d' % (self.d, x.shape[-1]))
        return _Rotation.apply(x, int(offset), self.d, self.base)


@contextlib.contextmanager
def swapped(module, set_aside):
    """mingpt.model's RotaryPositionalEmbeddings is GraderRoPE while the block runs, when 'rope' is set aside."""
    saved = getattr(module, CLASS_NAME, None)
    swap = 'rope' in set_aside and saved is not None
    try:
        if swap:
            setattr(module, CLASS_NAME, GraderRoPE)
        yield
    finally:
        if swap:
            setattr(module, CLASS_NAME, saved)
