"""Staff: the Gradescope zip (build-zip) and its golden file listing."""
