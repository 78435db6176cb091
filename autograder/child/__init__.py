"""
The untrusted side: code that runs INSIDE the sandbox, next to the student's model.py.

The harness copies this whole package into the scratch folder and runs `runner.main` in a
child process. Nothing here may import `autograder` (a test enforces it): the harness
imports the torch-free modules of this package (`wire`, `configs`), never the other way.

    runner.py    the child's main loop: import model.py, run the probes a job names, write results
    probes.py    one function per graded test, `probe_<id>`, returning plain arrays
    adapter.py   the thin layer between probes and student code (config, weights, calls)
    configs.py   labels and configurations shared with the harness (no torch)
    wire.py      what a probe may report: file names, fields, types and limits (no torch)
    cuda_view.py          the CUDA view of the memory probe: CPU tensors that answer as CUDA ones, torch.cuda
                          memory queries sent to a reading source (torch only; copied into the public tests)
    memory_readings.py    the readings handler: /proc facts of the asking pid, every query logged (no torch; the
                          harness runs it on the link, the public tests on themselves)
    link_standin.py       DEV STAND-IN for the harness link until the sandbox branch is merged (no torch)
"""
