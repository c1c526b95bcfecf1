"""Configuration of the model: protocol variant, Kafka settings and exploration bounds.

Kafka's own names are used where Kafka has one (`acks`, `min.insync.replicas`,
`unclean.leader.election.enable`, `replica.lag.time.max.ms`, ...). Times are abstract ticks.
A config can come from keyword flags or a `.properties` file; any unknown key or bad value is a
`ConfigError` that names the file, line and key.

Protocol variants are small overrides of named rules (`Variant`), not copies of the step
function: each rule is one field, and `step` consults the field where the rule applies.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path

from vocab.config import MODEL_KEYS, ConfigError, Key, Kind, Layer
from vocab.properties import Pair, PropertiesError, load_pairs, problem, read_pairs, settings


@dataclass(frozen=True, slots=True)
class Variant:
    """A generation of Kafka's replication protocol, as a set of named rules.

    truncation: how a follower removes a suffix the leader does not have.
      "high-watermark"  truncate to its own HW on becoming follower and on restart (pre-0.11)
      "epoch-end"       KIP-101: ask OffsetsForLeaderEpoch(latest epoch), truncate to the
                        start of the leader's next epoch (or its LEO)
      "epoch-end-279"   KIP-279: the leader answers (largest epoch <= asked, its end offset);
                        the follower truncates to the smaller of that and its own end of that epoch
      "diverging-epoch" KIP-320 and later: every fetch carries the last fetched epoch and the
                        leader answers a divergence with a `divergingEpoch`
    fencing: requests carry the current leader epoch; the leader answers FENCED_LEADER_EPOCH or
      UNKNOWN_LEADER_EPOCH on a mismatch and followers drop responses from another epoch (KIP-320).
    expand_requires_epoch_start: a follower joins the ISR only once its LEO reaches the start
      offset of the leader's current epoch (KAFKA-7128).
    broker_epochs: ISR expansion carries the follower's broker epoch, and the controller rejects
      it when the broker has re-registered since (KIP-903 / KIP-841).
    hw_requires_min_isr: the leader does not advance HW while |ISR| < min.insync.replicas
      (KAFKA-15583).
    isr_shrink_bumps_leader_epoch: when the controller removes a failed follower from the ISR
      it also bumps the leader epoch (ZooKeeper-era controllers did; KRaft bumps only the
      partition epoch), so every replica applies a new LeaderAndIsr.
    missed_epoch_resets_followers: a leader that becomes leader again in a leader epoch more
      than one past its own (it missed the epochs between, in which another broker may have
      led) forgets what it knew of its followers, as a new leader does. Kafka resets follower
      state only for a broker that was not leader (`Partition.makeLeader`, `isNewLeader`), so
      no variant has this rule: it is the fix for B11 (docs/protocol.md), switched on with
      `--with missed_epoch_resets_followers`.
    """

    name: str
    truncation: str
    fencing: bool = False
    expand_requires_epoch_start: bool = False
    broker_epochs: bool = False
    hw_requires_min_isr: bool = False
    isr_shrink_bumps_leader_epoch: bool = True
    missed_epoch_resets_followers: bool = False

    def with_rules(self, **rules: object) -> Variant:
        """A mutant: this variant with some rules switched (named `name+rule=value`)."""
        suffix = ",".join(f"{k}={v}" for k, v in sorted(rules.items()))
        return dataclasses.replace(self, name=f"{self.name}+{suffix}", **rules)


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("hw-truncation", truncation="high-watermark"),
        Variant("kip-101", truncation="epoch-end"),
        Variant("kip-279", truncation="epoch-end-279"),
        Variant(
            "kip-320",
            truncation="diverging-epoch",
            fencing=True,
            expand_requires_epoch_start=True,
        ),
        Variant(
            "current",
            truncation="diverging-epoch",
            fencing=True,
            expand_requires_epoch_start=True,
            broker_epochs=True,
            hw_requires_min_isr=True,
            isr_shrink_bumps_leader_epoch=False,
        ),
    )
}


@functools.cache
def _assignment(brokers: int, replication_factor: int | None, partition: int) -> tuple[int, ...]:
    # Asked for every explored state (the preferred leader): computed once per partition.
    return tuple((partition + j) % brokers for j in range(replication_factor or brokers))


@dataclass(frozen=True, slots=True)
class Config:
    """Everything `step` needs besides the state. Hashable, so it can key caches.

    Bounds (`max_*`) keep exhaustive exploration finite; they are guards, not protocol.

    Two switches choose between a faithful rule and a smaller abstraction. Both are on by
    default, so the explorer, the Z3 encodings and trace replay check one model: the one the
    reference broker is held to.

    `leader_keeps_last_fetch`: when a follower becomes leader, the fetch it last sent stays in
    flight, as on a real network: the old leader may still handle it and count the new
    leader's LEO, and the answer is dropped. Off, that fetch vanishes when the broker becomes
    leader: a fifth to a third fewer states at small bounds, but the model no longer admits
    every run of the reference broker.

    `recovery_truncates_epoch_cache`: a restarted broker drops leader-epoch cache entries that
    start at or past its recovered log end, as Kafka's log loading does
    (`LeaderEpochFileCache.truncateFromEnd` on load), so an epoch that began at the LEO and
    wrote nothing is forgotten. Off, the cache survives a crash whole, which Kafka does not do.

    `isr_changes_async` (KIP-497): the leader's ISR change is an AlterPartition request; the
    controller accepts or rejects it (ControllerHandleAlterPartition) and the leader applies the
    answer (LeaderHandleAlterPartitionResponse). While it is pending the HW counts the maximal
    ISR (current members plus requested additions), or, with `hw_over_requested_isr`, the
    requested ISR: B6. Off (the default), the change is atomic with the leader's decision, the
    smaller model the reference broker is replayed against.
    """

    brokers: int = 3
    partitions: int = 1
    replication_factor: int | None = None  # None: every broker
    variant: Variant = VARIANTS["current"]
    acks: str = "all"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    eligible_leader_replicas_enable: bool = False
    last_known_leader_election_enable: bool = True
    replica_lag_time_max_ticks: int = 1
    replica_lag_max_messages: int | None = None
    log_flush_interval_messages: int | None = None
    max_records: int = 2
    max_leader_epochs: int = 2
    max_crashes: int = 0
    max_session_expiries: int = 1
    max_controller_failovers: int = 0
    max_ticks: int = 0
    max_message_drops: int = 0
    max_partition_epoch: int = 8
    leader_keeps_last_fetch: bool = True
    recovery_truncates_epoch_cache: bool = True
    isr_changes_async: bool = False
    hw_over_requested_isr: bool = False

    def __post_init__(self) -> None:
        # Types and ranges from the key table (`vocab.config`); a variant is checked by
        # construction (mutants carry names of their own).
        def value_of(name: str) -> object:
            return getattr(self, _KEYS[name][0])

        for key in MODEL_KEYS:
            if key.kind is Kind.VARIANT:
                continue
            why = problem(key, key.model, getattr(self, key.model.field), value_of)
            if why:
                raise ConfigError(f"{key.name}: {why}", key=key.name)

    @property
    def kip966_promises(self) -> bool:
        """Whether KIP-966's promise says anything here: it tolerates min ISR - 1 losses of
        an acks=all write, so only acks=all with min ISR >= 2. Only then does the model keep
        the crash-loss ghost that promise reads (elsewhere the states stay as few)."""
        return self.acks == "all" and self.min_insync_replicas >= 2

    def replace(self, **changes: object) -> Config:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def assignment(self, partition: int) -> tuple[int, ...]:
        """Replica j < replication factor of partition i on broker (i + j) mod n: Kafka's
        rack-unaware assignment (AdminUtils) from start index 0, without its per-round shift
        (docs/protocol.md, "Placement and preferred leaders")."""
        return _assignment(self.brokers, self.replication_factor, partition)

    def to_properties(self) -> dict[str, str]:
        """The config in Kafka's key names, as strings (for traces and reports)."""
        out = {}
        for key, (field, _) in _KEYS.items():
            value = getattr(self, field)
            if value is None:
                continue
            if isinstance(value, Variant):
                value = value.name
            elif isinstance(value, bool):
                value = "true" if value else "false"
            out[key] = str(value)
        return out

    def settings(self) -> dict[str, str]:
        """Every field, as strings, for reports that must show which model was checked.

        The keys of `to_properties` (an unset optional limit is "none"), then each field that
        has no key under its field name (the model switches), then each rule of the variant
        as `variant.<rule>`.
        """
        properties = self.to_properties()
        out = {key: properties.get(key, "none") for key in _KEYS}
        keyed = {field for field, _ in _KEYS.values()}
        for f in dataclasses.fields(self):
            if f.name not in keyed:
                out[f.name] = _setting(getattr(self, f.name))
        for f in dataclasses.fields(self.variant):
            if f.name != "name":
                out[f"variant.{f.name}"] = _setting(getattr(self.variant, f.name))
        return out


def _setting(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "none" if value is None else str(value)


# Key -> (Config field, its row in the key table), for the keys the model uses, in table order.
_KEYS: dict[str, tuple[str, Key]] = {key.name: (key.model.field, key) for key in MODEL_KEYS}

CONFIG_KEYS = tuple(_KEYS)


def config_from_pairs(
    pairs: list[tuple[str, str, str]], base: Config | None = None
) -> Config:
    """Build a config from (where, key, value) triples; `where` prefixes every error."""
    try:
        typed = settings((Pair(*pair) for pair in pairs), Layer.MODEL)
    except PropertiesError as error:
        raise ConfigError(str(error), key=error.key) from None
    changes: dict[str, object] = {}
    where_of: dict[str, str] = {}
    for where, key, value in typed:
        where_of[key.name] = where
        changes[key.model.field] = VARIANTS[value] if key.kind is Kind.VARIANT else value
    try:
        return dataclasses.replace(base or Config(), **changes)
    except ConfigError as error:
        where = where_of.get(error.key or "", next(iter(where_of.values()), "config"))
        raise ConfigError(f"{where}: {error}", key=error.key) from None


def parse_properties(text: str, path: str = "<config>", base: Config | None = None) -> Config:
    """Parse a Java-style `.properties` text (`vocab.properties`) into a config."""
    try:
        pairs = read_pairs(text, path)
    except PropertiesError as error:
        raise ConfigError(str(error), key=error.key) from None
    return config_from_pairs(pairs, base)


def load_properties(path: str | Path, base: Config | None = None) -> Config:
    """Read and parse a `.properties` file; a missing file is a ConfigError too."""
    try:
        pairs = load_pairs(path)
    except PropertiesError as error:
        raise ConfigError(str(error), key=error.key) from None
    return config_from_pairs(pairs, base)
