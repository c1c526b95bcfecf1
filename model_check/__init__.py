"""Model checking over `spec`: scenario transcripts, the explorer, tla-compat, fuzzing."""
