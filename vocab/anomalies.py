"""Client anomaly kinds, named as Jepsen's Kafka workload names them, and when Kafka allows each.

The history checker (`model_check.conformance.history`), the campaign summary and the Spark jobs all count
these kinds under these names. Whether a kind is a bug depends on the run's configuration:
Kafka promises an acknowledged write survives only under acks=all with clean elections and
(as it does not fsync each write) while not every replica holding it crashes at once. A kind
is *expected* for a configuration when Kafka's contract allows it there, and *bad* otherwise
(a bug, or a variant with a known bug).

The kinds (model_check/conformance/history.py gives the exact definitions, docs/spark.md a table):
- `lost-write`: an acknowledged write is not at its offset in the final state.
- `duplicate`: one value at two or more offsets of a partition.
- `nonmonotonic-send`: a producer's later write was acknowledged below an earlier one.
- `uncommitted-read`: a read returned a record the final state does not hold (Jepsen's G1a
  is the transactional relative: a read of a write that never committed).
- `inconsistent-offsets`: two values at one offset, among reads and acknowledgements.
- `poll-skip`: a consumer's poll left out offsets between its previous poll and itself, or
  inside itself.
- `nonmonotonic-poll`: a consumer's poll started at or below an offset its previous poll of
  the partition had returned, or its own offsets do not increase.
"""

from __future__ import annotations

from collections.abc import Mapping

LOST_WRITE = "lost-write"
DUPLICATE = "duplicate"
NONMONOTONIC_SEND = "nonmonotonic-send"
UNCOMMITTED_READ = "uncommitted-read"
INCONSISTENT_OFFSETS = "inconsistent-offsets"
POLL_SKIP = "poll-skip"
NONMONOTONIC_POLL = "nonmonotonic-poll"

KINDS = (LOST_WRITE, DUPLICATE, NONMONOTONIC_SEND, UNCOMMITTED_READ, INCONSISTENT_OFFSETS,
         POLL_SKIP, NONMONOTONIC_POLL)

# Why a configuration allows a kind. Each reader evaluates these on a run's config with
# `conditions` below, so the rule is written once.
ACKED_MAY_BE_LOST = "acked-may-be-lost"  # acks below all, or committed records may be lost
COMMITTED_MAY_BE_LOST = "committed-may-be-lost"  # unclean election, or crashes without fsync
RETRIES_WITHOUT_IDEMPOTENCE = "retries-without-idempotence"  # the producer retries, not idempotent

ALLOWED_WHEN: dict[str, str | None] = {
    LOST_WRITE: ACKED_MAY_BE_LOST,
    DUPLICATE: RETRIES_WITHOUT_IDEMPOTENCE,
    NONMONOTONIC_SEND: ACKED_MAY_BE_LOST,
    UNCOMMITTED_READ: COMMITTED_MAY_BE_LOST,
    INCONSISTENT_OFFSETS: ACKED_MAY_BE_LOST,
    POLL_SKIP: None,  # never: a consumer fetches from the offset after its last record
    NONMONOTONIC_POLL: COMMITTED_MAY_BE_LOST,  # a truncation below its position resets it
}

# Faults that lose what a broker had not written to disk (a process kill keeps the page cache).
LOSING_FAULTS = ("crash", "isr-kill", "isr-kill-all")

EXPECTED = "expected"
BAD = "bad"


def conditions(config: Mapping[str, object]) -> frozenset[str]:
    """Which of the conditions above hold for a run's config (a trace header's `config`).

    Committed records may be lost with unclean election, or when a fault can lose unflushed
    records (one of LOSING_FAULTS in `nemesis` or `faults`, and log.flush.interval.messages
    not 1): every replica holding a record may crash before writing it to disk. The reference
    producer retries and is not idempotent, so a retried write whose first attempt was
    appended is written twice.
    """
    held = {RETRIES_WITHOUT_IDEMPOTENCE}
    faults = {*(config.get("nemesis") or ()), *(config.get("faults") or ())}
    if bool(config.get("unclean_leader_election_enable")) or (
            faults & set(LOSING_FAULTS) and config.get("log_flush_interval_messages") != 1):
        held.add(COMMITTED_MAY_BE_LOST)
    if str(config.get("acks", "all")) not in ("all", "-1") or COMMITTED_MAY_BE_LOST in held:
        held.add(ACKED_MAY_BE_LOST)
    return frozenset(held)


def expected_kinds(config: Mapping[str, object]) -> frozenset[str]:
    """The kinds Kafka's contract allows for a run of `config`; every other kind is bad."""
    held = conditions(config)
    return frozenset(k for k, why in ALLOWED_WHEN.items() if why is not None and why in held)


def split(counts: Mapping[str, int], config: Mapping[str, object]) -> dict[str, dict[str, int]]:
    """`{"expected": {kind: n}, "bad": {kind: n}}` of the nonzero counts, for `config`."""
    allowed = expected_kinds(config)
    out: dict[str, dict[str, int]] = {EXPECTED: {}, BAD: {}}
    for kind in KINDS:
        if counts.get(kind):
            out[EXPECTED if kind in allowed else BAD][kind] = counts[kind]
    return out
