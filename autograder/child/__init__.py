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
"""
