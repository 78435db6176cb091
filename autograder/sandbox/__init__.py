"""
The OS wall between the student's code (autograder/child/, run in a probe process) and the
judge (the rest of autograder/). Standard library and ctypes only; nothing here imports torch or
student code, and nothing of autograder/child/ imports this package.

    session.py    Sandbox, and Sandbox.grading: one grading as a session the harness drives
                  (GradingSession: the import check and each probe it asks for, a ProbeJob value
                  each), one fresh process per call, facts back (how a process ended: the harness
                  words it); nothing here calls judge code: a probe's link questions are
                  handed to the harness (ProbeRun yields LinkRequests, takes LinkAnswers)
    runs.py       the values a session trades with the harness: ProbeJob, ProbeRun (a process while it runs),
                  SessionReport, ending_status (how an unread process is reported)
    settings.py   Settings: the sandbox's typed settings, given by the caller (never read from grading.yaml here)
    zygote_handle.py  the harness's handle on the zygote (child/zygote.py is the zygote process
                  itself): starts it, asks it to fork probe processes, reads their exits
    wall.py       what a probe process does to itself before the probe runs (namespaces, allow-listed
                  root, limits, user, Landlock where there are no namespaces, seccomp); loaded by path into
                  the zygote
    probe.py      one probe process watched to its end, never waited on: the link (non-blocking, the probe's
                  own pid only), CPU deadline, idle and wall caps, the stack dump before the kill, how it ended
    seccomp.py    the seccomp filter (BPF), Docker's default deny-list and more
    defences.py   which defences are in force (grading.yaml sandbox.defences), fail closed
    cgroups.py    one cgroup per grading: CPU time, equal share, memory and task limits, OOM, kill
    users.py      the pool of sandbox users, their locks, kill-and-confirm, CPU of every process they ever had
    leftovers.py  files in every writable folder (iterative, fd-relative, fail closed), kernel keys, SysV IPC
    scratch.py    the grading's folders and the file system a probe sees
    readback.py   reading a probe's outputs: bounded bytes read once, parsed from the copy with caps
    cli.py        python -m autograder sandbox: the self-test, the clean-up, the writable-folder scan
    copies.py     the copies of the grader on the machine (for the self-test), and what of its own is locked

Order within the package (no circle): copies, wall, seccomp, cgroups, readback, users, settings <- defences
<- leftovers, zygote_handle, scratch <- probe <- runs <- session <- cli.
"""

from autograder.sandbox.copies import lock_own_copy, protect_source  # noqa: F401
from autograder.sandbox.session import GradingSession, GradingStopped, ProbeJob, ProbeRun  # noqa: F401
from autograder.sandbox.probe import LinkAnswer, LinkRequest  # noqa: F401
from autograder.sandbox.session import Sandbox, SessionReport  # noqa: F401
from autograder.sandbox.defences import SandboxRefused  # noqa: F401
from autograder.sandbox.readback import ProbeResult  # noqa: F401
from autograder.sandbox.settings import Settings  # noqa: F401
from autograder.sandbox.zygote_handle import Zygote  # noqa: F401
