"""Client anomaly kinds, named as Jepsen's Kafka workload names them, and when Kafka allows each.

The history checker (`model_check.conformance.history`), the campaign summary and the Spark jobs all count
these kinds under these names. Whether a kind is a bug depends on what the run's configuration
promises, which spec.promises decides (acks below all and unclean election give up invariants
by design) and the caller passes in as the given-up invariant names. A kind is *expected* when
an invariant it shows broken is given up, and *bad* otherwise (a bug, or a variant with a
known bug).

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

from collections.abc import Iterable, Mapping

LOST_WRITE = "lost-write"
DUPLICATE = "duplicate"
NONMONOTONIC_SEND = "nonmonotonic-send"
UNCOMMITTED_READ = "uncommitted-read"
INCONSISTENT_OFFSETS = "inconsistent-offsets"
POLL_SKIP = "poll-skip"
NONMONOTONIC_POLL = "nonmonotonic-poll"

KINDS = (LOST_WRITE, DUPLICATE, NONMONOTONIC_SEND, UNCOMMITTED_READ, INCONSISTENT_OFFSETS,
         POLL_SKIP, NONMONOTONIC_POLL)

# Which given-up invariants (spec.promises: the ones a run's configuration does not promise)
# excuse each kind: a kind is expected when any of its invariants is given up. The caller
# decides what is given up (model_check.conformance.replay.given_up_of for a trace header);
# this table only names which loss each kind shows.
EXCUSED_BY: dict[str, tuple[str, ...]] = {
    LOST_WRITE: ("AckedWritesDurable",),
    NONMONOTONIC_SEND: ("AckedWritesDurable",),  # the earlier write was lost and rewritten
    INCONSISTENT_OFFSETS: ("AckedWritesDurable",),
    UNCOMMITTED_READ: ("ConsumerNeverSeesUncommitted",),
    NONMONOTONIC_POLL: ("ConsumerNeverSeesUncommitted",),  # a truncation below its position
    DUPLICATE: (),
    POLL_SKIP: (),  # never: a consumer fetches from the offset after its last record
}

# Expected whatever is given up: the reference producer retries and is not idempotent, so a
# retried write whose first attempt was appended is written twice. No invariant speaks of it.
ALWAYS_EXPECTED = frozenset({DUPLICATE})

# Faults that lose what a broker had not written to disk (a process kill keeps the page cache).
LOSING_FAULTS = ("crash", "isr-kill", "isr-kill-all")

EXPECTED = "expected"
BAD = "bad"


def expected_kinds(given_up: Iterable[str]) -> frozenset[str]:
    """The kinds allowed when the invariants named in `given_up` are not promised; every other
    kind is bad."""
    if isinstance(given_up, (Mapping, str)):  # the old call shape, a header config: refuse it
        raise TypeError("expected_kinds takes given-up invariant names, not a config")
    names = frozenset(given_up)
    return ALWAYS_EXPECTED | {k for k, why in EXCUSED_BY.items() if names.intersection(why)}


def split(counts: Mapping[str, int], given_up: Iterable[str]) -> dict[str, dict[str, int]]:
    """`{"expected": {kind: n}, "bad": {kind: n}}` of the nonzero counts, when the invariants
    named in `given_up` are not promised."""
    allowed = expected_kinds(given_up)
    out: dict[str, dict[str, int]] = {EXPECTED: {}, BAD: {}}
    for kind in KINDS:
        if counts.get(kind):
            out[EXPECTED if kind in allowed else BAD][kind] = counts[kind]
    return out
