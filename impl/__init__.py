"""The reference broker: a small, readable implementation of Kafka's replication protocol.

- `impl.protocol`: sans-I/O cores (broker, metadata store with the controller logic, clients)
  and the messages and effects they exchange; no clock, no sockets, no randomness inside.
- `impl.storage`, `impl.broker_storage`: CRC32C log segments, checkpoints, crash recovery.
- `impl.sim`: the deterministic simulator; `impl.tcp`: OS processes over 127.0.0.1.
- `impl.trace`: the NDJSON trace writer (format and schema in `vocab.trace`) (docs/traces.md).

`impl` never imports `spec`: the two are independent descriptions of the protocol, and trace
replay (`model_check.conformance.replay`) checks one against the other.
"""
