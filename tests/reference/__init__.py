"""
Tests of the staff reference (reference/). A package so that pytest imports its conftest as
`reference.conftest` and it cannot shadow the `conftest` module of another test folder.
"""
