"""
The untrusted side: code that runs INSIDE the sandbox, next to the student's model.py.

The harness (autograder/sandbox/) starts `zygote.py` once, which imports this package, the shared
contract (autograder/contract/) and torch, and forks one process per probe; each walls itself in
and runs `runner.run_probe` for one probe. Nothing here imports `autograder` beyond `autograder.contract`
(the import-contract test enforces it); the wall arrives in the zygote as an argument.

    zygote.py                 the warm interpreter that forks probe processes (never runs student code)
    runner.py                 one probe process: its limits, import model.py, run one probe, write results
    probes_<area>.py          one function per graded test, `probe_<id>`, returning plain arrays; the judge of
                              the same area is autograder/judge/areas/<area>.py
    adapter.py                the thin layer between probes and student code (config, weights, calls)
    socket_link.py            ask(payload) -> reply over the harness's socket (the harness knows the sender's pid)
    selftest.py               the sandbox's self-test, in a process forked like a probe
    cuda_view.py              the CUDA view of the memory probe: CPU tensors that answer as CUDA ones, torch.cuda
                              memory queries sent to a reading source (torch only; copied into the public tests)
"""
