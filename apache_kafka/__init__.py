"""Apache Kafka itself, run from its own jars as the second system under test.

`install` fetches the release pinned in `pom.xml` from Maven Central into an ignored cache
folder; `cluster` runs a KRaft cluster of those jars on 127.0.0.1 (or, for partitions, each
node in a network namespace of its own: `netns`) and puts it under faults.
Nothing here imports `spec` or `impl`: Kafka is judged from the outside, by the same client
workloads and the same history checker as the reference broker.
"""
