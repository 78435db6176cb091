"""
The untrusted side: code that runs INSIDE the sandbox, next to the student's model.py.

The harness (autograder/sandbox/) starts `zygote.py` once, which imports this package and
torch, and forks one process per probe; each walls itself in and runs `runner.run` for one
probe. Nothing here may import `autograder` (a test enforces it): the harness imports the
torch-free modules of this package (`wire`, `configs`), never the other way; the wall arrives
in the zygote as an argument.

    zygote.py    the warm interpreter that forks probe processes (never runs student code)
    runner.py    one probe process: its limits, import model.py, run one probe, write results
    probes*.py   one function per graded test, `probe_<id>`, returning plain arrays
    adapter.py   the thin layer between probes and student code (config, weights, calls)
    link.py      ask(payload) -> reply: the harness link (the harness knows the sender's pid)
    selftest.py  the sandbox's self-test, in a process forked like a probe
    configs.py   labels and configurations shared with the harness (no torch)
    wire.py      what a probe may report: file names, fields, types and limits (no torch)
    cuda_view.py          the CUDA view of the memory probe: CPU tensors that answer as CUDA ones, torch.cuda
                          memory queries sent to a reading source (torch only; copied into the public tests)
    memory_readings.py    the readings handler: /proc facts of the asking pid, every query logged (no torch; the
                          harness runs it on the link, the public tests on themselves)
"""
