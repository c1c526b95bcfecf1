"""Config keys: one row per `.properties` key, with its type, range and the layers that use it.

Kafka's own names are used where Kafka has one (`acks`, `min.insync.replicas`, ...); isrlab's
own settings follow the same dotted style (`max.records`). The spec (`spec.config.Config`) and
the reference broker (`impl.config.ClusterConfig`) each take their fields and ranges from this
table, and `vocab.properties` reads every config file with it, so a file means the same thing to
every command and a run the simulator accepts is a run replay accepts.

A key can mean different units in the two layers (the model's abstract ticks, the cluster's
milliseconds), so each layer's use carries its own field name and range. An integer key also
has the Java type Kafka's ConfigDef gives it (INT or LONG): a value outside that type is refused
before its own range is looked at, as Kafka's broker refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ConfigError(ValueError):
    """A config key or value is wrong, in the model's or the cluster's config. `str()` is one
    line fit for the user, naming the key (`key`, when there is one)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


ACKS_LEVELS = ("0", "1", "all")
# Spellings Kafka also accepts, and the level each one means.
ACKS_ALIASES = {"-1": "all"}

# The protocol variants, oldest first; `spec.config.VARIANTS` and `impl.config.VARIANTS` hold
# each one's rules under these names.
VARIANT_NAMES = ("hw-truncation", "kip-101", "kip-279", "kip-320", "current")
# The rules a variant sets (the fields of both layers' variant records), and the values of the
# `truncation` rule.
RULE_NAMES = (
    "truncation", "fencing", "expand_requires_epoch_start", "broker_epochs",
    "hw_requires_min_isr", "isr_shrink_bumps_leader_epoch", "missed_epoch_resets_followers",
)
# Boolean rules a variant can have switched off on the command line (`--without RULE`).
SWITCHABLE_RULES = (
    "fencing", "expand_requires_epoch_start", "broker_epochs", "hw_requires_min_isr",
    "isr_shrink_bumps_leader_epoch", "missed_epoch_resets_followers",
)
# Rules that only add a guard to an action (the expansion's): every path of a variant with one
# switched on is a path of the variant without it, so its counterexample can run on the
# broker of the variant without it.
GUARD_RULES = ("expand_requires_epoch_start", "broker_epochs")
# Planted bugs of the reference broker that are exactly a spec rule switched off: a run with
# the bug replays against the spec variant without that rule.
BUG_RULES = {"expand-without-epoch-start": "expand_requires_epoch_start"}
TRUNCATION_RULES = ("high-watermark", "epoch-end", "epoch-end-279", "diverging-epoch")

# Values an optional integer takes for "not set".
UNSET_WORDS = ("", "none", "never")
# As Kafka's ConfigDef reads a BOOLEAN: true or false, in any case, and nothing else.
TRUE_WORDS = ("true",)
FALSE_WORDS = ("false",)


class Kind(StrEnum):
    """How a key's text becomes a value."""

    INT = "int"
    OPTIONAL_INT = "optional int"  # an integer, or one of UNSET_WORDS for None
    BOOL = "bool"  # TRUE_WORDS / FALSE_WORDS, any case
    ACKS = "acks"  # ACKS_LEVELS or ACKS_ALIASES
    VARIANT = "variant"  # one of VARIANT_NAMES


class ConfigType(StrEnum):
    """Kafka's `ConfigDef.Type` of an integer key: the Java type its value must fit."""

    INT = "INT"  # a Java int
    LONG = "LONG"  # a Java long


# The values each type holds, as Java's int and long do.
TYPE_RANGES: dict[ConfigType, tuple[int, int]] = {
    ConfigType.INT: (-(1 << 31), (1 << 31) - 1),
    ConfigType.LONG: (-(1 << 63), (1 << 63) - 1),
}


class Layer(StrEnum):
    """Which configurations a key belongs to."""

    MODEL = "model"  # the spec only (exploration bounds and rules the broker does not have)
    CLUSTER = "cluster"  # the reference broker only (timings in ms)
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class Use:
    """A key as one layer uses it: the field it sets and its allowed range.

    `max` is a number, or the name of another key whose value is the bound
    (`min.insync.replicas` is at most `brokers`).
    """

    field: str
    min: int | None = None
    max: int | str | None = None


@dataclass(frozen=True, slots=True)
class Key:
    name: str
    kind: Kind
    model: Use | None
    cluster: Use | None
    bound: bool = False  # an exploration bound: a guard of the model, not protocol
    doc: str = ""
    # An integer's Java type in Kafka's ConfigDef (isrlab's own settings are INT, its
    # exploration bounds LONG, as replay lifts them out of reach): a value outside it is
    # refused, whatever the key's own range says.
    type: ConfigType = ConfigType.INT

    @property
    def layer(self) -> Layer:
        if self.model and self.cluster:
            return Layer.BOTH
        return Layer.MODEL if self.model else Layer.CLUSTER


def _both(field: str, min: int | None = None, max: int | str | None = None) -> dict:
    return {"model": Use(field, min, max), "cluster": Use(field, min, max)}


def _bound(field: str, min: int) -> dict:
    """An exploration bound of the model."""
    return {"model": Use(field, min), "cluster": None, "bound": True, "type": ConfigType.LONG}


# Kafka's settings first, then the model's semantic switches and exploration bounds, then the
# cluster's timings. Order is the order of error listings and `Config.to_properties`.
KEYS: tuple[Key, ...] = (
    Key("variant", Kind.VARIANT, **_both("variant"), doc="the protocol variant"),
    # Brokers are named by one digit in traces and renderings; 16 partitions keep a run's
    # replay state small. Both layers share the limits, so every simulated run replays.
    Key("brokers", Kind.INT, **_both("brokers", 1, 9), doc="brokers"),
    Key("partitions", Kind.INT, **_both("partitions", 1, 16), doc="partitions of the topic"),
    Key("replication.factor", Kind.OPTIONAL_INT, **_both("replication_factor", 1, "brokers"),
        doc="replicas per partition, placed round-robin from the partition's own broker "
        "(unset: every broker)"),
    Key("acks", Kind.ACKS, **_both("acks"), doc="producer acks"),
    Key("min.insync.replicas", Kind.INT, **_both("min_insync_replicas", 1, "brokers"),
        doc="ISR size below which acks=all writes are refused"),
    Key("unclean.leader.election.enable", Kind.BOOL, **_both("unclean_leader_election_enable"),
        doc="elect an out-of-sync replica when no ISR member is left"),
    Key("eligible.leader.replicas.enable", Kind.BOOL, **_both("eligible_leader_replicas_enable"),
        doc="KIP-966: replicas that left the ISR below min ISR stay electable (ELR)"),
    Key("last.known.leader.election.enable", Kind.BOOL,
        **_both("last_known_leader_election_enable"),
        doc="with ELR: elect the last known leader when ISR and ELR are empty (Kafka's default)"),
    Key("replica.lag.time.max.ms", Kind.INT,
        model=Use("replica_lag_time_max_ticks", 0), cluster=Use("replica_lag_time_max_ms", 1),
        doc="how long a follower may lag before the leader shrinks the ISR (model: ticks)",
        type=ConfigType.LONG),
    Key("replica.lag.max.messages", Kind.OPTIONAL_INT,
        model=Use("replica_lag_max_messages", 1), cluster=None,
        doc="pre-0.9 Kafka: a follower this many messages behind leaves the ISR",
        type=ConfigType.LONG),
    Key("log.flush.interval.messages", Kind.OPTIONAL_INT,
        **_both("log_flush_interval_messages", 1), doc="fsync after this many appends",
        type=ConfigType.LONG),
    Key("leader.keeps.last.fetch", Kind.BOOL, model=Use("leader_keeps_last_fetch"), cluster=None,
        doc="a new leader's last fetch stays in flight (as on a real network)"),
    Key("recovery.truncates.epoch.cache", Kind.BOOL,
        model=Use("recovery_truncates_epoch_cache"), cluster=None,
        doc="a restarted broker drops epoch-cache entries at or past its recovered end"),
    Key("isr.changes.async", Kind.BOOL, model=Use("isr_changes_async"), cluster=None,
        doc="KIP-497: an ISR change is an AlterPartition request the controller accepts or "
        "rejects; meanwhile the HW counts the maximal ISR"),
    Key("hw.over.requested.isr", Kind.BOOL, model=Use("hw_over_requested_isr"), cluster=None,
        doc="B6: while an ISR change is pending the HW counts the requested ISR"),
    Key("max.records", Kind.INT, **_bound("max_records", 0)),
    Key("max.leader.epochs", Kind.INT, **_bound("max_leader_epochs", 1)),
    Key("max.crashes", Kind.INT, **_bound("max_crashes", 0)),
    Key("max.session.expiries", Kind.INT, **_bound("max_session_expiries", 0)),
    Key("max.controller.failovers", Kind.INT, **_bound("max_controller_failovers", 0),
        doc="0: the controller never fails; above 0 it is a role a broker holds, failing over "
        "at most this many times"),
    Key("max.message.drops", Kind.INT, **_bound("max_message_drops", 0)),
    Key("max.partition.epoch", Kind.INT, **_bound("max_partition_epoch", 0)),
    Key("max.ticks", Kind.INT, **_bound("max_ticks", 0)),
    Key("replica.fetch.wait.max.ms", Kind.INT, model=None,
        cluster=Use("replica_fetch_wait_max_ms", 1), doc="how long a leader parks an empty fetch"),
    Key("replica.fetch.max.bytes", Kind.INT, model=None,
        cluster=Use("replica_fetch_max_bytes", 1),
        doc="payload bytes per response to a follower (untraced runs only)"),
    Key("replica.fetch.backoff.ms", Kind.INT, model=None,
        cluster=Use("replica_fetch_backoff_ms", 1), doc="a follower's pause after a failed fetch"),
    # Above the heartbeat interval (checked by the cluster config), so at least 2.
    Key("session.timeout.ms", Kind.INT, model=None, cluster=Use("session_timeout_ms", 2),
        doc="a broker without heartbeats this long is fenced"),
    Key("heartbeat.interval.ms", Kind.INT, model=None, cluster=Use("heartbeat_interval_ms", 1),
        doc="how often a broker heartbeats to the metadata store"),
    Key("request.timeout.ms", Kind.INT, model=None, cluster=Use("request_timeout_ms", 1),
        doc="how long a client waits for an answer"),
)

KEYS_BY_NAME: dict[str, Key] = {key.name: key for key in KEYS}
MODEL_KEYS: tuple[Key, ...] = tuple(key for key in KEYS if key.model)
CLUSTER_KEYS: tuple[Key, ...] = tuple(key for key in KEYS if key.cluster)
