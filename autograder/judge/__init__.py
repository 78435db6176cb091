"""
The harness: the trusted harness that grades one submission. It reads grading.yaml (config), finds
the submission (submission), asks the sandbox to run the probes (grade), judges their outputs
against the reference's fixtures (areas/, through the test table of registry) and writes
Gradescope's results.json (results). It never imports student code, torch, the staff tools, or
anything of autograder/child/ but the shared contract (autograder/contract/).
"""
