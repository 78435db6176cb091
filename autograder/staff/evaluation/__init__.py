"""Staff: the grader measured on a corpus of submissions (evaluate), against the course's own tests."""
