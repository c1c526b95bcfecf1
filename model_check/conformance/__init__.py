"""The spec against a system under test: the reference broker's traces replayed through the
spec, clients' histories checked against what was acknowledged, and Apache Kafka run beside
the reference broker under the same clients and faults.

Theory of operation. A run of the reference broker (`impl.sim`, or OS processes over TCP)
writes one trace per node; `replay` merges them in causal order and maps each event to a spec
action (the refinement mapping), stepping the spec and checking every invariant after every
step, so a run is accepted, diverges at a named event, or is unreadable. `history` reads what
clients were told (acknowledged, refused, read back) and finds lost, duplicated or phantom
writes; `losses` splits the acknowledged writes a run lost into those Kafka's guarantee
excuses and those it does not.
`campaign` is the forward pipeline for many seeded runs (run, replay, history, losses,
verdict) and hands a corpus to Spark; `policies` measures the all-ISR-failure policies from
its runs. `drive` turns a spec path (a counterexample, a transcript) into a directed run of
the broker, replayed as it goes; `coverage` counts the spec states and actions runs reach;
`mutants` runs campaigns with one seeded broker bug switched on and counts the runs needed to
catch it. `kafka_runs`
runs Kafka's own clients against either target, and `wire_suite` sends the same raw Kafka
requests to the reference broker and to Apache Kafka and compares the answers. `corrupt`
damages traces on purpose, to show replay refuses what it should.

The one room that imports both `spec` and `impl`; only `campaign` imports Spark.
"""
