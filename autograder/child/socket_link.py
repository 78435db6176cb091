"""
The child's end of the harness link: an AF_UNIX SOCK_SEQPACKET socketpair the harness made
before the probe process was forked, inherited as descriptor 3 (job.json's `link_fd`). One
`ask(payload)` is one message to the harness and blocks until its one reply. The harness learns
the sender's pid from the kernel (SCM_CREDENTIALS), never from the payload, and answers through
the harness's service for this probe (probe_job.link_services, ProbeRun) (none: an empty reply).

Plain read/write on an inherited descriptor: it works under the seccomp filter, which denies
socket(). Student code can use the descriptor too; what it says is never evidence by itself.
Standard library only.
"""

import os
import threading

MAX_MESSAGE = (1 << 16) - 1  # payload bytes of one message either way (the harness answers longer ones empty)
FD = 3
_lock = threading.Lock()     # one question at a time: replies come back in order


def connected():
    """Whether descriptor 3 is a socket: in a sandboxed probe always; in a probe run in-process (tests), not."""
    import stat
    try:
        return stat.S_ISSOCK(os.fstat(FD).st_mode)
    except OSError:
        return False


class LinkClosed(OSError):
    """The harness is gone or refused to answer (the probe is being stopped)."""


def ask(payload: bytes) -> bytes:
    if not isinstance(payload, (bytes, bytearray)) or len(payload) > MAX_MESSAGE:
        raise ValueError('a link message is bytes of at most %d' % MAX_MESSAGE)
    with _lock:
        os.write(FD, b'\x01' + bytes(payload))   # never an empty message: that one means the end of the link
        reply = os.read(FD, MAX_MESSAGE + 1)
    if not reply:
        raise LinkClosed('the harness closed the link')
    return reply[1:]   # every reply starts with one byte, so that an empty answer is not the end of the link
