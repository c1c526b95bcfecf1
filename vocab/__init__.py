"""The shared vocabulary of isrlab: names, codes and schemas, with no protocol logic.

Every layer (`spec/`, `impl/`, `model_check/`, `pyspark_harness/`, `isrlab/`) may import this
package, and it imports nothing of the project, so the two independent descriptions of the
protocol (`spec/` and `impl/`) agree on spelling without sharing a single rule.

- `vocab.actions`: the action names (one spelling in spec, traces, scenarios, Spark, docs).
- `vocab.outcomes`: outcome and refusal codes with their fields, Kafka error codes, and the one
  place their English is rendered.
- `vocab.config`, `vocab.properties`: config keys with types, ranges and Kafka names; the one
  `.properties` reader.
- `vocab.trace`: the trace line schema, the message-id codec and the causal merge.
"""
