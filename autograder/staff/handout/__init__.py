"""Staff: the student handout built from the reference (build-template, build-handout)."""
