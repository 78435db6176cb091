"""
The wire format of the grader's RoPE over the harness link (both sides; standard library only).

When a submission's RotaryPositionalEmbeddings fails its own tests (2.1, 2.2), a later test that
runs it is judged again with the rotation computed by the grader, outside the student's process:
the probe process sends the tensor it would have rotated (child/set_aside.py) and the harness
answers with the rotated values (judge/rope_service.py), logging every call. One message carries
at most MAX_VALUES values of `rows` sequences of `length` positions, `d` channels each:

    MAGIC, op (b'f' rotate by +angle, b'b' by -angle: the backward of a rotation is its transpose),
    HEADER (offset of the first position, rows, length, d, base, dtype code), then the values, C order

The reply is the same number of values in the same dtype, or nothing (refused).
"""

import struct

MAGIC = b'hw1-rope\x01'
HEADER = struct.Struct('<iiiid1s')      # first position (0-based: position 1 is offset 0), rows, length, d, base, dtype
DTYPES = {b'f': 4, b'd': 8}             # float32, float64 (what the child sends; bfloat16 travels as float32)
MAX_BYTES = 60_000                      # of values per message: under the link's 64 KB cap with the header
OPS = (b'f', b'b')


def encode(op, offset, rows, length, d, base, dtype, values):
    """One request: `values` is rows * length * d numbers of `dtype` (b'f' or b'd'), as bytes."""
    return MAGIC + op + HEADER.pack(int(offset), int(rows), int(length), int(d), float(base), dtype) + bytes(values)


def decode(payload):
    """(op, offset, rows, length, d, base, dtype, values bytes), or None for anything not a well-formed request."""
    head = len(MAGIC) + 1 + HEADER.size
    if len(payload) < head or not payload.startswith(MAGIC):
        return None
    op = payload[len(MAGIC):len(MAGIC) + 1]
    offset, rows, length, d, base, dtype = HEADER.unpack(payload[len(MAGIC) + 1:head])
    values = payload[head:]
    if op not in OPS or dtype not in DTYPES or min(rows, length, d) <= 0 or d % 2 or offset < 0 \
            or not 0 < base < 1e12 or len(values) != rows * length * d * DTYPES[dtype] or len(values) > MAX_BYTES:
        return None
    return op, offset, rows, length, d, base, dtype, values
