"""
The autograder's own code for test 9.1 (attention memory), copied here by the course staff's
build-template so that `python test_model.py` judges your memory figure exactly as the grader
does. Do not edit: it is regenerated, and it is not uploaded.
"""
