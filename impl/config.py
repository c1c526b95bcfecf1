"""Configuration of a reference-broker cluster, with Kafka's names, and the seeded bugs.

The impl has its own table of protocol variants (it never imports `spec/`); their names, the
config keys and their ranges come from `vocab.config`, shared with the spec, so traces, CLI flags
and Spark columns agree and every run the simulator accepts is one replay accepts. Times are
integer milliseconds.

Seeded bugs (`bugs`, by name) are switches, off by default, each named after the mistake it
plants; the cores receive them as `Mutants`. Trace replay or the history checker must catch
every one of them (tests/test_campaign.py): a check that never fails would check nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from vocab.config import CLUSTER_KEYS, KEYS_BY_NAME, ConfigError
from vocab.properties import problem


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

@dataclass(frozen=True, slots=True)
class Mutants:
    """The planted bugs a core runs with: one switch per bug, all off in a correct broker.

    A bug's `--bug` name is its field's name with dashes (`truncate-to-hw`); the cores read the
    switches as they read the variant's rules (`ClusterConfig.mutants`).
    """

    truncate_to_hw: bool = False
    """Followers cut their log to their HW on every new leadership instead of truncating by
    leader epoch, whatever the variant: B1's truncation to a stale HW (KAFKA-1211, the rule
    KIP-101 replaced) in the variants that fixed it."""

    expand_without_epoch_start: bool = False
    """ISR expansion skips the check that the follower reached the start of the leader's epoch:
    B5 (KAFKA-7128). The spec's `expand_requires_epoch_start` switched off
    (`vocab.config.BUG_RULES`), so a run with it replays against the variant without that rule."""

    hw_counts_non_isr: bool = False
    """The leader's HW is the min.insync.replicas-th highest LEO over every replica, in the ISR
    or not, instead of the lowest LEO over the ISR: a HW over replicas the ISR does not hold, as
    in B6 (KIP-497), where the HW counts an ISR only requested."""

    serve_above_hw: bool = False
    """Consumers are served records above the HW, before they are committed: Kafka's consumers
    read only up to the HW (KIP-101's high watermark), so a read may see a record later lost."""

    skip_fetch_fencing: bool = False
    """The leader ignores the current leader epoch of fetch requests: KIP-320's fencing off, so
    a follower in a stale epoch is served (B3)."""

    early_ack: bool = False
    """acks=all writes are answered at the append, before the ISR has them: the loss acks=1
    allows by design (B10) under a setting that promises none."""

    ignore_min_isr: bool = False
    """min.insync.replicas is not checked on produce: acks=all writes are acknowledged by an ISR
    smaller than it, against Kafka's documentation of the setting (the guarantee B8 tests)."""

    unclean_when_disabled: bool = False
    """The controller elects an out-of-sync replica though unclean.leader.election.enable is
    false: B9's loss of acknowledged writes, which the setting was to rule out."""

    false_flush: bool = False
    """The broker counts records flushed that it never writes out: a crash loses what the trace
    says is durable (the unflushed data B2's double crash loses, under any flush setting)."""

    no_epoch_cache_on_leader: bool = False
    """A new leader does not record its epoch and start offset in the leader-epoch cache
    (KIP-101), on which every epoch-based truncation and KAFKA-7128's expansion check rest."""

    follower_hw_is_leo: bool = False
    """Followers take their own LEO as their HW instead of the lower of it and the leader's HW: a
    follower's HW over records not yet committed, which a restart or a truncation to the HW
    (B1) then keeps."""

    @classmethod
    def of(cls, names: frozenset[str]) -> Mutants:
        """The switches of the bugs named as `--bug` names them."""
        return cls(**{name.replace("-", "_"): True for name in names})


# The `--bug` names, in the order of `Mutants`.
BUGS: tuple[str, ...] = tuple(f.name.replace("_", "-") for f in dataclasses.fields(Mutants))


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
                raise ConfigError(f"{key.name}: {why}", key=key.name)
        if self.session_timeout_ms <= self.heartbeat_interval_ms:
            raise ConfigError("session.timeout.ms: must exceed heartbeat.interval.ms",
                              key="session.timeout.ms")
        unknown = sorted(set(self.bugs) - set(BUGS))
        if unknown:
            raise ConfigError(f"bugs: unknown bug {unknown[0]!r} (known: {', '.join(BUGS)})")

    @property
    def replica_fetch_timeout_ms(self) -> int | None:
        """How long a follower waits for the answer to a fetch before it gives the request up
        and fetches again (None: for ever). Kafka's fetcher times a request out after
        replica.socket.timeout.ms, which must be at least replica.fetch.wait.max.ms; here it
        is the long poll plus request.timeout.ms, with no key of its own."""
        return self.replica_fetch_wait_max_ms + self.request_timeout_ms

    @property
    def rules(self) -> VariantRules:
        return VARIANTS[self.variant]

    @property
    def mutants(self) -> Mutants:
        return Mutants.of(self.bugs)

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
