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
from dataclasses import dataclass
from pathlib import Path


class ConfigError(ValueError):
    """A config value or key is wrong. `str()` is one line fit for the user."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


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
    """

    name: str
    truncation: str
    fencing: bool = False
    expand_requires_epoch_start: bool = False
    broker_epochs: bool = False
    hw_requires_min_isr: bool = False
    isr_shrink_bumps_leader_epoch: bool = True

    def with_rules(self, **rules: object) -> Variant:
        """A mutant: this variant with some rules switched (named `name+rule=value`)."""
        suffix = ",".join(f"{k}={v}" for k, v in sorted(rules.items()))
        return dataclasses.replace(self, name=f"{self.name}+{suffix}", **rules)


TRUNCATION_RULES = ("high-watermark", "epoch-end", "epoch-end-279", "diverging-epoch")

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

ACKS_LEVELS = ("0", "1", "all")


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
    """

    brokers: int = 3
    partitions: int = 1
    variant: Variant = VARIANTS["current"]
    acks: str = "all"
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    replica_lag_time_max_ticks: int = 1
    replica_lag_max_messages: int | None = None
    log_flush_interval_messages: int | None = None
    max_records: int = 2
    max_leader_epochs: int = 2
    max_crashes: int = 0
    max_session_expiries: int = 1
    max_ticks: int = 0
    max_message_drops: int = 0
    max_partition_epoch: int = 8
    leader_keeps_last_fetch: bool = True
    recovery_truncates_epoch_cache: bool = True

    def __post_init__(self) -> None:
        checks = (
            (1 <= self.brokers <= 9, "brokers", "must be between 1 and 9"),
            (1 <= self.partitions <= 16, "partitions", "must be between 1 and 16"),
            (self.acks in ACKS_LEVELS, "acks", "must be 0, 1 or all"),
            (
                1 <= self.min_insync_replicas <= self.brokers,
                "min.insync.replicas",
                f"must be between 1 and the number of brokers ({self.brokers})",
            ),
            (self.replica_lag_time_max_ticks >= 0, "replica.lag.time.max.ms", "must be >= 0"),
            (
                self.replica_lag_max_messages is None or self.replica_lag_max_messages >= 1,
                "replica.lag.max.messages",
                "must be >= 1",
            ),
            (
                self.log_flush_interval_messages is None or self.log_flush_interval_messages >= 1,
                "log.flush.interval.messages",
                "must be >= 1",
            ),
            (self.max_records >= 0, "max.records", "must be >= 0"),
            (self.max_leader_epochs >= 1, "max.leader.epochs", "must be >= 1"),
            (self.max_crashes >= 0, "max.crashes", "must be >= 0"),
            (self.max_session_expiries >= 0, "max.session.expiries", "must be >= 0"),
            (self.max_message_drops >= 0, "max.message.drops", "must be >= 0"),
            (self.max_partition_epoch >= 0, "max.partition.epoch", "must be >= 0"),
            (self.max_ticks >= 0, "max.ticks", "must be >= 0"),
        )
        for ok, key, why in checks:
            if not ok:
                raise ConfigError(f"{key}: {why}", key=key)

    def replace(self, **changes: object) -> Config:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def assignment(self, partition: int) -> tuple[int, ...]:
        """Replica j of partition i on broker (i + j) mod n: Kafka's rack-unaware assignment
        (AdminUtils) from start index 0, without its per-round shift (docs/protocol.md,
        "Placement and preferred leaders")."""
        n = self.brokers
        return tuple((partition + j) % n for j in range(n))

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


def _parse_int(text: str) -> int:
    return int(text.strip())


def _parse_optional_int(text: str) -> int | None:
    text = text.strip()
    return None if text in ("", "none", "never") else int(text)


def _parse_bool(text: str) -> bool:
    text = text.strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def _parse_acks(text: str) -> str:
    text = text.strip().lower()
    if text == "-1":
        return "all"
    if text not in ACKS_LEVELS:
        raise ValueError(f"expected 0, 1, all or -1, got {text!r}")
    return text


def _parse_variant(text: str) -> Variant:
    text = text.strip()
    if text not in VARIANTS:
        raise ValueError(f"unknown variant {text!r} (known: {', '.join(VARIANTS)})")
    return VARIANTS[text]


# Key -> (Config field, parser). Kafka's names first, then isrlab's exploration bounds.
_KEYS = {
    "variant": ("variant", _parse_variant),
    "brokers": ("brokers", _parse_int),
    "partitions": ("partitions", _parse_int),
    "acks": ("acks", _parse_acks),
    "min.insync.replicas": ("min_insync_replicas", _parse_int),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _parse_bool),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ticks", _parse_int),
    "replica.lag.max.messages": ("replica_lag_max_messages", _parse_optional_int),
    "log.flush.interval.messages": ("log_flush_interval_messages", _parse_optional_int),
    "max.records": ("max_records", _parse_int),
    "max.leader.epochs": ("max_leader_epochs", _parse_int),
    "max.crashes": ("max_crashes", _parse_int),
    "max.session.expiries": ("max_session_expiries", _parse_int),
    "max.message.drops": ("max_message_drops", _parse_int),
    "max.partition.epoch": ("max_partition_epoch", _parse_int),
    "max.ticks": ("max_ticks", _parse_int),
}

CONFIG_KEYS = tuple(_KEYS)


def config_from_pairs(
    pairs: list[tuple[str, str, str]], base: Config | None = None
) -> Config:
    """Build a config from (where, key, value) triples; `where` prefixes every error."""
    changes: dict[str, object] = {}
    where_of: dict[str, str] = {}
    for where, key, value in pairs:
        where_of[key] = where
        if key not in _KEYS:
            raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(_KEYS)})")
        field, parse = _KEYS[key]
        try:
            changes[field] = parse(value)
        except ValueError as error:
            msg = str(error)
            if msg.startswith("invalid literal"):
                msg = f"expected an integer, got {value.strip()!r}"
            raise ConfigError(f"{where}: {key}: {msg}") from None
    try:
        return dataclasses.replace(base or Config(), **changes)
    except ConfigError as error:
        where = where_of.get(error.key or "", next(iter(where_of.values()), "config"))
        raise ConfigError(f"{where}: {error}", key=error.key) from None


def parse_properties(text: str, path: str = "<config>", base: Config | None = None) -> Config:
    """Parse a Java-style `.properties` text (`key=value`, `#` or `!` comments)."""
    pairs = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        pairs.append((f"{path}:{number}", line[:sep].strip(), line[sep + 1 :]))
    return config_from_pairs(pairs, base)


def load_properties(path: str | Path, base: Config | None = None) -> Config:
    """Read and parse a `.properties` file; a missing file is a ConfigError too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    return parse_properties(text, str(path), base)
