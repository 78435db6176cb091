"""Staff tools: never shipped in the Gradescope zip."""
