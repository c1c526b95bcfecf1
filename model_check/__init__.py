"""Checks of the protocol, in three rooms by what a check runs against.

- `model_check.explore`: the spec alone, state by state (the explorer, its flat encoding and
  compiled loop, guided search, scenario transcripts, fuzzing, reports, the tla-compat model).
- `model_check.prove`: the spec as formulas (Z3: BMC, induction, lemmas, Houdini, and the
  partial-order reduction read off the encoding).
- `model_check.conformance`: the spec against a system under test (replay of the reference
  broker's traces, directed runs, campaigns, the history checker, Kafka clients and Apache
  Kafka itself, corruption and coverage).

`tests/test_layout.py` holds each room to its imports: explore reads only `spec` and `vocab`;
prove adds explore; conformance is the one place that reads both `spec` and `impl`.
"""
