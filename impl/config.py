"""Configuration of a reference-broker cluster, with Kafka's names, and the seeded bugs.

The impl has its own table of protocol variants (it never imports `spec/`); their names, the
config keys and their ranges come from `vocab.config`, shared with the spec, so traces, CLI flags
and Spark columns agree and every run the simulator accepts is one replay accepts. Times are
integer milliseconds.

Seeded bugs (`bugs`) are switches, off by default, each named after the mistake it plants. Trace
replay or the history checker must catch every one of them (tests/test_campaign.py): a check
that never fails would check nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from vocab.config import CLUSTER_KEYS, KEYS_BY_NAME
from vocab.properties import problem


class ClusterConfigError(ValueError):
    """A bad cluster setting; `str()` is one line naming the key (`key`, when there is one)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


@dataclass(frozen=True, slots=True)
class VariantRules:
    truncation: str  # high-watermark | epoch-end | epoch-end-279 | diverging-epoch
    fencing: bool = False
    expand_requires_epoch_start: bool = False
    broker_epochs: bool = False
    hw_requires_min_isr: bool = False
    isr_shrink_bumps_leader_epoch: bool = True
    # The fix for B11, which no variant has: the broker resets follower state, as Kafka does,
    # only when it was not leader before (spec.config.Variant documents each rule).
    missed_epoch_resets_followers: bool = False


VARIANTS: dict[str, VariantRules] = {
    "hw-truncation": VariantRules("high-watermark"),
    "kip-101": VariantRules("epoch-end"),
    "kip-279": VariantRules("epoch-end-279"),
    "kip-320": VariantRules("diverging-epoch", fencing=True, expand_requires_epoch_start=True),
    "current": VariantRules(
        "diverging-epoch", fencing=True, expand_requires_epoch_start=True, broker_epochs=True,
        hw_requires_min_isr=True, isr_shrink_bumps_leader_epoch=False,
    ),
}

# name -> what the planted bug does (see impl/protocol/broker.py and meta.py for each use).
BUGS: dict[str, str] = {
    "truncate-to-hw": "followers truncate to their HW on a leader change instead of by epoch",
    "expand-without-epoch-start": "ISR expansion skips the epoch-start (KAFKA-7128) check",
    "hw-counts-non-isr": "the leader's HW counts a follower that is not in the ISR",
    "serve-above-hw": "consumers are served records above the HW",
    "skip-fetch-fencing": "the leader ignores the leader epoch in fetch requests",
    "early-ack": "acks=all writes are answered before the ISR has them",
    "ignore-min-isr": "min.insync.replicas is ignored on produce",
    "unclean-when-disabled": "the controller elects an out-of-sync replica though unclean "
    "election is disabled",
    "false-flush": "the broker reports records flushed that are not (never fsyncs)",
    "no-epoch-cache-on-leader": "a new leader does not record its epoch in the leader-epoch cache",
    "follower-hw-is-leo": "followers set their HW to their own LEO, not the leader's HW",
}


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    brokers: int = 3
    partitions: int = 1
    replication_factor: int | None = None  # None: every broker
    variant: str = "current"
    acks: str = "all"  # "0" | "1" | "all"
    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False
    eligible_leader_replicas_enable: bool = False
    last_known_leader_election_enable: bool = True
    log_flush_interval_messages: int | None = None
    replica_lag_time_max_ms: int = 1000
    replica_fetch_wait_max_ms: int = 200
    # Kafka's replica.fetch.max.bytes: the payload bytes one FetchResponse to a follower
    # carries (at least one record). Only untraced runs apply it: the spec's leader sends the
    # whole suffix, so a traced run sends it too (a response over the frame cap is dropped).
    replica_fetch_max_bytes: int = 1 << 20
    replica_fetch_backoff_ms: int = 50
    session_timeout_ms: int = 1500
    heartbeat_interval_ms: int = 300
    request_timeout_ms: int = 1500
    preferred_leader_check_interval_ms: int = 5000
    bugs: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        def value_of(name: str) -> object:
            return getattr(self, KEYS_BY_NAME[name].cluster.field)

        for key in CLUSTER_KEYS:
            why = problem(key, key.cluster, getattr(self, key.cluster.field), value_of)
            if why:
                raise ClusterConfigError(f"{key.name}: {why}", key=key.name)
        if self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise ClusterConfigError("session.timeout.ms: must exceed heartbeat.interval.ms",
                                     key="session.timeout.ms")
        unknown = sorted(set(self.bugs) - set(BUGS))
        if unknown:
            raise ClusterConfigError(f"bugs: unknown bug {unknown[0]!r} (known: {', '.join(BUGS)})")

    @property
    def rules(self) -> VariantRules:
        return VARIANTS[self.variant]

    def assignment(self, partition: int) -> tuple[int, ...]:
        """Replica j < replication factor of partition i on broker (i + j) mod n."""
        n = self.brokers
        return tuple((partition + j) % n for j in range(self.replication_factor or n))

    def replace(self, **changes: object) -> ClusterConfig:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict:
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        body["bugs"] = sorted(self.bugs)
        return body
