"""
What the fork of a zygote costs (issue 43): a process with torch imported as the zygote imports it
(autograder/child/zygote.py preload: torch, the deterministic flag and so torch._dynamo, gc.freeze), forked
N times. Prints the median of the parent's fork call, of fork + the child's exit + reaping, and of each
namespace's unshare in the child (as the wall does it: sandbox/wall.py). Needs root for the namespaces.

    python bench/fork_cost.py [--n 20]
"""

import argparse
import ctypes
import gc
import os
import time

CLONE = {'mount': 0x00020000, 'net': 0x40000000, 'ipc': 0x08000000, 'uts': 0x04000000}


def median(values):
    return sorted(values)[len(values) // 2]


def fork_seconds(n):
    """(the parent's fork call, fork + exit + reaping), each a median over n."""
    calls, whole = [], []
    for _ in range(n):
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        calls.append(time.perf_counter() - started)
        os.waitpid(pid, 0)
        whole.append(time.perf_counter() - started)
    return median(calls), median(whole)


def unshare_seconds(flags, n):
    """The child's unshare(flags), a median over n children; None where it failed (not root)."""
    libc = ctypes.CDLL(None, use_errno=True)
    r, w = os.pipe()
    found = []
    for _ in range(n):
        pid = os.fork()
        if pid == 0:
            started = time.perf_counter()
            rc = libc.unshare(flags)
            os.write(w, ('%.9f %d\n' % (time.perf_counter() - started, rc)).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        seconds, rc = os.read(r, 100).split()
        found.append(float(seconds) if int(rc) == 0 else None)
    return None if None in found else median(found)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--n', type=int, default=20)
    args = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True, warn_only=True)
    gc.collect()
    gc.freeze()
    call, whole = fork_seconds(args.n)
    print('fork, the parent\'s call: %.2f ms; fork + exit + reaping: %.2f ms' % (call * 1e3, whole * 1e3))
    for name, flag in list(CLONE.items()) + [('all four', sum(CLONE.values()))]:
        seconds = unshare_seconds(flag, args.n)
        print('unshare %s: %s' % (name, 'failed (not root?)' if seconds is None else '%.2f ms' % (seconds * 1e3)))


if __name__ == '__main__':
    main()
