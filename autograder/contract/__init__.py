"""
The contract both sides of the wall load: standard library only, no import of the rest of
autograder. The harness imports it as autograder.contract; the zygote imports it under the same
name from the same folder before the wall goes up, so the probe process and the harness read one
definition.

    report_schema.py    what a probe may report: file names, fields, types and limits; the facts
                        (codes, figures) of the grader's own errors and notes in the child
    configs.py          labels and configurations of the probes' inputs
    memory_readings.py  the readings service of test 9.1: /proc facts of the asking pid, every query logged
    memory_rules.py     how 9.1 judges a call's readings (the harness, and the public tests' memory helper)
"""
