"""Staff: reference answers to the handout's empirical and written questions (experiments)."""
