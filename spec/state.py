"""The state of a Kafka cluster as the model sees it: frozen, hashable, cheap to compare.

A cluster has N brokers, each holding one replica of each of P partitions (replication factor =
N). Offsets are list indices: record k of a log sits at offset k, and LEO = len(log).

What each part stands for:
- `Replica`: one broker's copy of one partition: its log, HW, the flushed offset (what survives
  a crash), the leader-epoch cache (`leader-epoch-checkpoint`), its view of (leader, leader epoch,
  ISR, partition epoch) from the last LeaderAndIsr it applied, and, when it is leader, its
  per-follower state (remote LEO and broker epoch from the last fetch, lag age in ticks) and its
  produce purgatory.
- `PartitionState` and `Controller`: the metadata store as the controller keeps it (ZooKeeper,
  or the KRaft metadata log): per partition leader, leader epoch, ISR and partition epoch (the
  ISR-change version used for compare-and-set), and the registered broker epoch of each live
  session.
- Messages in flight: LeaderAndIsr requests (a set: delayed, reordered, lost), at most one fetch
  request or response per (partition, follower) connection, and produce requests.
- Clients: the producer's acknowledged writes and the consumer's reads, plus `excused`: ghost
  state naming the writes whose loss Kafka's guarantee allows (every ISR replica lost them in
  crashes), so invariants can encode the guarantee's condition exactly; and `crash_losses`,
  which replicas lost which records in crashes (KIP-966's promise counts them).

Values are unique record ids 1, 2, ... assigned by `ProducerSend`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence, Set
from dataclasses import MISSING, dataclass, field, fields
from itertools import islice

import immutables

from spec.config import Config
from vocab.outcomes import KAFKA_ERROR_NUMBERS

NO_LEADER = -1
UNKNOWN = -1

_new = object.__new__
_set = object.__setattr__
_REPLACERS: dict[type, object] = {}


def replace(obj, **changes):
    """`dataclasses.replace` for the model's frozen, slotted, validation-free dataclasses.

    The generic one re-runs `__init__` and costs several times more; this is the explorer's and
    replay's hot path, so each class gets a generated straight-line copier. A cached hash
    (`_hash`) is never copied: the new object computes its own.
    """
    cls = type(obj)
    replacer = _REPLACERS.get(cls)
    if replacer is None:
        replacer = _REPLACERS[cls] = _replacer(cls)
    return replacer(obj, changes)


def _replacer(cls: type):
    """The copier `replace` uses for `cls`.

    A frozen class refuses plain attribute stores, and setting a slot through its descriptor
    is a call per field. So the copy is made as an instance of a plain class with the same
    slots (the same memory layout), filled with plain stores, then given its class: for the
    19 fields of a `Cluster`, under half the time. A class with inherited slots, whose layout
    such a twin would not share, is copied through the descriptors."""
    slots = cls.__slots__
    if cls.__base__ is object:
        return _twin_copier(cls, f"replace_{cls.__name__}", changes=True)
    # Each field is copied through its slot descriptor's setter (bound once, here), then the
    # changes are set over it: faster than a lookup in `changes` per field.
    lines = [f"def replace_{cls.__name__}(obj, changes):", "    new = _new(cls)"]
    for name in slots:
        value = "0" if name == "_hash" else f"obj.{name}"
        lines.append(f"    set_{name}(new, {value})")
    lines += ["    for name, value in changes.items():", "        _set(new, name, value)",
              "    return new"]
    namespace = {"_new": _new, "_set": _set, "cls": cls,
                 **{f"set_{name}": getattr(cls, name).__set__ for name in slots}}
    exec("\n".join(lines), namespace)
    return namespace[f"replace_{cls.__name__}"]


def _twin(cls: type) -> type:
    """A plain class with the slots of `cls`, so with its memory layout (see `_replacer`)."""
    twin = _TWINS.get(cls)
    if twin is None:
        twin = _TWINS[cls] = type(f"_{cls.__name__}Copy", (), {"__slots__": cls.__slots__})
    return twin


_TWINS: dict[type, type] = {}


def _updater(cls: type, *names: str):
    """`replace(obj, name=value, ...)` for these `names`, as `f(obj, value, ...)`: for the
    changes every step makes, without the keyword dict and its loop (see `_replacer`)."""
    assert cls.__base__ is object, cls
    return _twin_copier(cls, f"with_{'_'.join(names)}", names)


def _twin_copier(cls: type, function: str, names: tuple[str, ...] = (), changes: bool = False):
    """A copier of `cls` through its twin (see `_replacer`), generated as straight-line code:
    the fields in `names` are its arguments after `obj`, the others `obj`'s (a cached hash
    reset); with `changes`, a last argument, a dict of further changes set over them."""
    params = ", ".join(("obj", *names, *(("changes",) if changes else ())))
    lines = [f"def {function}({params}):", "    new = _new(twin)"]
    lines += [f"    new.{n} = {n if n in names else '0' if n == '_hash' else f'obj.{n}'}"
              for n in cls.__slots__]
    if changes:
        lines += ["    for name, value in changes.items():", "        setattr(new, name, value)"]
    lines += ["    _set(new, '__class__', cls)", "    return new"]
    namespace = {"_new": _new, "_set": _set, "cls": cls, "twin": _twin(cls)}
    exec("\n".join(lines), namespace)
    return namespace[function]


def fast_init(cls: type) -> type:
    """Give a frozen, slotted dataclass an `__init__` that sets each slot through its
    descriptor: the generated one calls `object.__setattr__` per field, which made creating a
    state, message or action (millions in a search or a replay) cost half again as much. Same
    signature, defaults and values; the class keeps every other generated method."""
    params, body, namespace = [], [], {"__name__": cls.__module__}
    assert not hasattr(cls, "__post_init__"), f"{cls.__name__}: __post_init__ is not run"
    for f in fields(cls):
        assert f.init and not f.kw_only and f.default_factory is MISSING, f"{cls.__name__}.{f.name}"
        if f.default is MISSING:
            params.append(f.name)
        else:
            namespace[f"default_{f.name}"] = f.default
            params.append(f"{f.name}=default_{f.name}")
        namespace[f"set_{f.name}"] = getattr(cls, f.name).__set__
        body.append(f"    set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body or ["    pass"])
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return cls


class GrowingSet(Set):
    """An immutable set whose `|` costs O(k log n) for k new items, not O(n): a hash array
    mapped trie (`immutables.Map`) shares all but a path with the set it came from.

    The ghost sets (acknowledged writes, consumer reads, crash losses) only grow. The explorer
    keeps them small and uses frozensets; replaying a run of a million events holds tens of
    thousands of writes, where copying a frozenset on every acknowledgement made replay
    quadratic. It is a set in every way the spec uses one (membership, iteration, `|`,
    comparisons, `-` from `Set`) and equal to, and hashed as, the frozenset of its items.
    """

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Iterable = ()):
        self._items = immutables.Map(dict.fromkeys(items))
        self._hash = 0

    @classmethod
    def _of(cls, items: immutables.Map) -> GrowingSet:
        new = _new(cls)
        new._items = items
        new._hash = 0
        return new

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __iter__(self) -> Iterator:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __or__(self, other: Iterable) -> GrowingSet:
        if type(other) in (set, frozenset) and len(other) == 1:
            # The spec's usual union (one acknowledgement, one read): a plain insert costs
            # less than a mutation.
            for item in other:
                return GrowingSet._of(self._items.set(item, None))
        with self._items.mutate() as items:
            for item in other:
                items.set(item, None)
            return GrowingSet._of(items.finish())

    __ror__ = __or__

    def __ge__(self, other: object) -> bool:
        # `Set`'s, with the membership loop in C: the spec's consumer asks whether its whole
        # read (`seen <= consumed`, which Python turns into this) is already in the set.
        if not isinstance(other, Set):
            return NotImplemented
        return len(self) >= len(other) and all(map(self._items.__contains__, other))

    def __hash__(self) -> int:
        if not self._hash:
            self._hash = hash(frozenset(self._items))
        return self._hash

    def __repr__(self) -> str:
        return f"GrowingSet({sorted(self._items, key=repr)!r})"

    def __reduce__(self):
        return GrowingSet, (tuple(self._items),)


class LossLedger(Set):
    """The crash-loss ghost (`Cluster.crash_losses`: (value, broker) pairs) for a replay: a
    crash adds the segment of the log it lost, in O(1), and the pairs are made once, when
    the set is first read (the invariants, at the end of a replay).

    Without a flush policy every machine crash loses a broker's whole log: on a long run that
    is tens of thousands of records a crash, mostly the same ones again, and listing them at
    each crash was a tenth of the replay's time. Logs are `GrowingLog` versions, which never
    change, so a segment can be kept as (broker, log, start): the ledger holds those lost
    versions (their record lists, not copies) until it is read. Equal to, and hashed as, the
    frozenset of its pairs.
    """

    __slots__ = ("_parent", "_segment", "_items")

    def __init__(self, items: Iterable = ()):
        self._parent: LossLedger | None = None
        self._segment: tuple | None = None
        self._items: frozenset | None = frozenset(items)

    def lost(self, broker: int, log: Sequence, start: int) -> LossLedger:
        """This set with (record.value, broker) for every record of `log` from `start` on."""
        new = _new(LossLedger)
        new._parent, new._segment, new._items = self, (broker, log, start), None
        return new

    def _pairs(self) -> frozenset:
        if self._items is None:
            # Back to the nearest ledger whose pairs are made (only those read keep them: a
            # set per crash would hold every pair again), then its segments since.
            segments = []
            ledger = self
            while ledger._items is None:
                segments.append(ledger._segment)
                ledger = ledger._parent
            items = set(ledger._items)
            for broker, log, start in segments:
                items.update((record.value, broker) for record in log[start:])
            self._items = frozenset(items)
        return self._items

    @classmethod
    def _from_iterable(cls, items: Iterable) -> LossLedger:
        return cls(items)

    def __contains__(self, item: object) -> bool:
        return item in self._pairs()

    def __iter__(self) -> Iterator:
        return iter(self._pairs())

    def __len__(self) -> int:
        return len(self._pairs())

    def __hash__(self) -> int:
        return hash(self._pairs())

    def __repr__(self) -> str:
        return f"LossLedger({sorted(self._pairs())!r})"

    def __reduce__(self):
        return LossLedger, (tuple(self._pairs()),)


class GrowingLog(Sequence):
    """An immutable sequence of records whose append costs O(1), not a copy of the log.

    Logs only grow at their end, and a replay keeps one version of each: so every version is a
    length over one shared list, and appending to a version that is the longest so far writes
    into that list. A version that others have grown past (an older state, a truncated log)
    copies its prefix before it grows. Taking a prefix (`log[:n]`) is free; other slices are
    tuples. Equal to, and hashed as, the tuple of its records, as the explorer's logs are.
    """

    __slots__ = ("_items", "_len")

    def __init__(self, items: Iterable = ()):
        self._items = list(items)
        self._len = len(self._items)

    @classmethod
    def _view(cls, items: list, length: int) -> GrowingLog:
        new = _new(cls)
        new._items = items
        new._len = length
        return new

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):
        if type(index) is int:
            if 0 <= index < self._len:
                return self._items[index]
            if -self._len <= index < 0:
                return self._items[self._len + index]
            raise IndexError("log index out of range")
        start, stop, step = index.indices(self._len)
        if start == 0 and step == 1:
            return GrowingLog._view(self._items, max(stop, 0))
        return tuple(self._items[start:stop:step])

    def __iter__(self) -> Iterator:
        return islice(self._items, self._len)

    def __add__(self, records: Iterable) -> GrowingLog:
        items = self._items
        if len(items) != self._len:
            items = items[: self._len]
        items.extend(records)
        return GrowingLog._view(items, len(items))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GrowingLog | tuple):
            return len(other) == self._len and all(
                a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"GrowingLog({tuple(self)!r})"

    def __reduce__(self):
        return GrowingLog, (tuple(self),)


def _no_none(rows):
    return tuple([tuple([0 if m is None else m for m in row]) for row in rows])


def _cached_hash(self) -> int:
    """Hash once per object (states share most of their parts, and the explorer hashes every
    successor), and the same in every process: fingerprints decide which counterexample is
    reported, and parallel workers compare them. `hash(None)` is an address in Python 3.11, so
    the one field that holds None (an empty fetch slot) is hashed with 0 in its place.

    The hash of the field tuple is computed by a generated straight-line function per class
    (as `replace` is): a generator over the fields cost a third of the explorer's time."""
    h = self._hash
    if not h:
        cls = type(self)
        hasher = _HASHERS.get(cls)
        if hasher is None:
            late = [n for n in cls._hash_fields if n in _LATE_FIELDS]
            names = [n for n in cls._hash_fields if n not in _LATE_FIELDS]
            parts = ", ".join(
                f"_no_none(obj.{n})" if n == "fetches" else f"obj.{n}" for n in names
            )
            # Fields added for KIP-966 and KIP-497 join the hash only once set (as for
            # PartitionState's ELR): with those features off, fingerprints stay as they were.
            # The hash takes the late fields up to the last one that is set, so a state that
            # sets only the first hashes as it did before the later ones existed.
            extra = "".join(
                f"    if obj.{late[k]}:\n        return hash(({parts}, "
                + "".join(f"obj.{n}, " for n in late[: k + 1]) + "))\n"
                for k in reversed(range(len(late))))
            namespace = {"_no_none": _no_none}
            exec(f"def hash_{cls.__name__}(obj):\n{extra}    return hash(({parts},))", namespace)
            hasher = _HASHERS[cls] = namespace[f"hash_{cls.__name__}"]
        h = hasher(self) or 1
        _set(self, "_hash", h)
    return h


_HASHERS: dict[type, object] = {}
# Hashed only when set (see _cached_hash).
_LATE_FIELDS = frozenset({"crash_losses", "alter_partitions", "controller_epochs", "pending_isr"})


@dataclass(frozen=True, slots=True, order=True)
class Record:
    """A record in a log: the leader epoch it was written in and its unique value id."""

    epoch: int
    value: int

    def __str__(self) -> str:
        return f"v{self.value}@e{self.epoch}"


@dataclass(frozen=True, slots=True)
class PendingProduce:
    """An acks=all write waiting in the leader's purgatory until HW passes `offset`."""

    offset: int
    value: int


@dataclass(frozen=True, slots=True)
class Replica:
    """One broker's replica of one partition."""

    log: tuple[Record, ...] = ()
    high_watermark: int = 0
    flushed_offset: int = 0
    epoch_cache: tuple[tuple[int, int], ...] = ()  # (leader epoch, start offset), increasing
    # View from the last applied LeaderAndIsr (lost on crash).
    leader: int = NO_LEADER
    leader_epoch: int = UNKNOWN
    isr: tuple[int, ...] = ()
    partition_epoch: int = UNKNOWN
    # KIP-101 / KIP-279: an OffsetsForLeaderEpoch round is due before the next fetch.
    truncation_pending: bool = False
    # Leader-side, indexed by broker id; empty tuples on followers.
    remote_log_end_offset: tuple[int, ...] = ()
    remote_broker_epoch: tuple[int, ...] = ()
    lag_ticks: tuple[int, ...] = ()
    purgatory: tuple[PendingProduce, ...] = ()
    # KIP-497 (isr.changes.async): the ISR this leader has asked the controller for.
    pending_isr: tuple[int, ...] | None = None
    _hash: int = field(default=0, compare=False, repr=False)

    __hash__ = _cached_hash

    @property
    def log_end_offset(self) -> int:
        return len(self.log)

    def is_leader(self, broker: int) -> bool:
        return self.leader == broker

    def latest_epoch(self) -> int:
        """The epoch of the last entry of the leader-epoch cache, or -1."""
        return self.epoch_cache[-1][0] if self.epoch_cache else UNKNOWN

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch as Kafka >= 2.0 answers it (KIP-279): see
        `end_offset_for_epoch` below."""
        return end_offset_for_epoch(self.epoch_cache, len(self.log), epoch)

    def start_offset_after_epoch(self, epoch: int) -> int:
        """OffsetsForLeaderEpoch as Kafka 0.11 answers it (KIP-101): see
        `start_offset_after_epoch` below."""
        return start_offset_after_epoch(self.epoch_cache, len(self.log), epoch)

    def epoch_start_offset(self, epoch: int) -> int:
        """Start offset of `epoch` in the cache, or -1 if it is not cached."""
        for cached, start in self.epoch_cache:
            if cached == epoch:
                return start
        return UNKNOWN

    def truncated_to(self, offset: int) -> Replica:
        """The replica with its log cut to `offset` (HW, flushed and cache follow).

        At or past the LEO the log stays, but cache entries starting there go: a broker that
        became leader and wrote nothing before losing the leadership holds an entry no other
        log has, and must shed it on a truncation answer (KAFKA-10706).
        """
        if offset >= self.log_end_offset:
            cache = self.epoch_cache
            if not cache or cache[-1][1] < offset:  # starts rise: the last is the one to ask
                return self
            return replace(self, epoch_cache=tuple(e for e in cache if e[1] < offset))
        return replace(
            self,
            log=self.log[:offset],
            high_watermark=min(self.high_watermark, offset),
            flushed_offset=min(self.flushed_offset, offset),
            epoch_cache=tuple(e for e in self.epoch_cache if e[1] < offset),
        )

    def appended(self, records: tuple[Record, ...], flush_interval: int | None,
                 high_watermark: int | None = None) -> Replica:
        """The replica with `records` appended, epoch cache and flush policy applied, and its
        HW set to `high_watermark` (a follower's, capped at the new LEO) when given."""
        cache = self.epoch_cache
        offset = self.log_end_offset
        epoch = None
        for record in records:
            # A batch is mostly one epoch: only a change of epoch can change the cache.
            if record.epoch != epoch:
                epoch = record.epoch
                cache = assign_epoch(cache, epoch, offset)
            offset += 1
        log = self.log + records
        flushed = self.flushed_offset
        if flush_interval is not None and len(log) - flushed >= flush_interval:
            flushed = len(log)
        if high_watermark is None:
            return replace(self, log=log, epoch_cache=cache, flushed_offset=flushed)
        return replace(self, log=log, epoch_cache=cache, flushed_offset=flushed,
                       high_watermark=min(high_watermark, len(log)))


def end_offset_for_epoch(cache: tuple[tuple[int, int], ...], log_end: int,
                         epoch: int) -> tuple[int, int]:
    """OffsetsForLeaderEpoch as Kafka >= 2.0 answers it (KIP-279), as (epoch, end offset),
    from a leader-epoch cache and the log end offset.

    The end of a cached epoch is the start of the next one, or LEO for the latest. For an
    epoch the cache lacks: the largest cached epoch below it with the start of the next;
    below every cached epoch, (the asked epoch, the start of the first one). Above the latest
    epoch, or with an empty cache, the answer is undefined: (-1, -1).
    """
    if epoch == UNKNOWN or not cache:
        return UNKNOWN, UNKNOWN
    if cache[-1][0] == epoch:
        return epoch, log_end
    for index, (cached, start) in enumerate(cache):
        if cached > epoch:
            return (epoch if index == 0 else cache[index - 1][0]), start
    return UNKNOWN, UNKNOWN


def start_offset_after_epoch(cache: tuple[tuple[int, int], ...], log_end: int,
                             epoch: int) -> int:
    """OffsetsForLeaderEpoch as Kafka 0.11 answers it (KIP-101): an end offset only.

    LEO for the latest epoch; otherwise the start of the first cached epoch above it;
    undefined (-1) above the latest epoch or below the first. The KAFKA-6361 flaw is kept on
    purpose: an epoch the leader never had, between two it had, still gets the start of the
    next larger one.
    """
    if not cache or epoch < cache[0][0]:
        return UNKNOWN
    if cache[-1][0] == epoch:
        return log_end
    for cached, start in cache:
        if cached > epoch:
            return start
    return UNKNOWN


def assign_epoch(
    cache: tuple[tuple[int, int], ...], epoch: int, start: int
) -> tuple[tuple[int, int], ...]:
    """Kafka's LeaderEpochFileCache.assign: record that `epoch` starts at `start`.

    Nothing changes when `epoch` is already the latest and starts no later. Otherwise entries at
    the end with an epoch >= `epoch` or a start >= `start` are removed first, so the cache stays
    increasing in both and agrees with the log (a follower can hold an entry from a leadership
    it never wrote in; the next append in an older epoch at that offset replaces it).
    """
    if cache and cache[-1][0] == epoch and start >= cache[-1][1]:
        return cache
    end = len(cache)
    while end and (cache[end - 1][0] >= epoch or cache[end - 1][1] >= start):
        end -= 1
    return (*cache[:end], (epoch, start))


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The metadata store's record of one partition.

    With KIP-966 (`eligible.leader.replicas.enable`): `elr`, the eligible leader replicas
    (members that left the ISR while it was below min ISR, so still hold every committed
    record), and `last_known_elr`, which Kafka's PartitionChangeBuilder uses for the last
    known leader (one broker) by default, or for the last known ELR members otherwise. Both
    stay empty with ELR off.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def __hash__(self) -> int:
        # With ELR off the two fields are always empty: hash as the four-field record did, so
        # fingerprints, and so the counterexample each search reports, stay as they were.
        base = (self.leader, self.leader_epoch, self.isr, self.partition_epoch)
        if self.elr or self.last_known_elr:
            return hash((*base, self.elr, self.last_known_elr))
        return hash(base)


@dataclass(frozen=True, slots=True)
class Controller:
    """The controller and its metadata store.

    `registered[b]` is the broker epoch of b's live session, or -1 once the session expired.
    `unclean_elections` counts unclean elections (ghost: lets reports say why data was lost).
    With `max.controller.failovers` above 0 the controller is a role: `active` is the broker
    that won it in the store and `epoch` the controller epoch it won (Kafka's ZooKeeper
    `/controller` and `/controller_epoch`). With 0 both stay 0: one controller that never fails.
    """

    partitions: tuple[PartitionState, ...]
    registered: tuple[int, ...]
    unclean_elections: int = 0
    active: int = 0
    epoch: int = 0

    def __hash__(self) -> int:
        # As PartitionState's ELR: the role joins the hash only once it has moved.
        base = (self.partitions, self.registered, self.unclean_elections)
        if self.active or self.epoch:
            return hash((*base, self.active, self.epoch))
        return hash(base)


# Messages ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, order=True)
class LeaderAndIsr:
    """Controller -> broker: the partition's new leader, epoch and ISR, and the controller (and
    its controller epoch) that sent it."""

    broker: int
    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    controller: int = 0
    controller_epoch: int = 0

    def __hash__(self) -> int:
        base = (self.broker, self.partition, self.leader, self.leader_epoch, self.isr,
                self.partition_epoch)
        if self.controller or self.controller_epoch:
            return hash((*base, self.controller, self.controller_epoch))
        return hash(base)


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """Follower -> leader. `current_leader_epoch` is only checked by fencing variants."""

    leader: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class EpochRequest:
    """Follower -> leader: OffsetsForLeaderEpoch (KIP-101 / KIP-279)."""

    leader: int
    epoch: int
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """Leader -> follower. `kind` says which answer it is:

    "records"   records from `fetch_offset` and the leader's HW
    "epoch"     OffsetsForLeaderEpoch answer: (`epoch`, `end_offset`)
    "diverging" KIP-320 style divergingEpoch: (`epoch`, `end_offset`)
    "error"     a Kafka error code in `error` (OFFSET_OUT_OF_RANGE carries the leader's LEO
                in `end_offset`)
    """

    leader: int
    leader_epoch: int
    kind: str
    records: tuple[Record, ...] = ()
    high_watermark: int = 0
    fetch_offset: int = UNKNOWN
    epoch: int = UNKNOWN
    end_offset: int = UNKNOWN
    error: str = ""

    def __hash__(self) -> int:
        # Strings hash differently in every Python process; fingerprints must not (parallel
        # workers, and the same counterexample on every run), so hash stable codes instead.
        return hash((self.leader, self.leader_epoch, _CODES[self.kind], self.records,
                     self.high_watermark, self.fetch_offset, self.epoch, self.end_offset,
                     _CODES[self.error]))


# Stable small codes for the strings a FetchResponse carries (Kafka's numeric error codes).
_CODES = {"records": 0, "epoch": 1, "diverging": 2, "error": 3, "": 0, **KAFKA_ERROR_NUMBERS}


@dataclass(frozen=True, slots=True, order=True)
class ProduceRequest:
    """Producer -> broker it believes leads the partition."""

    partition: int
    broker: int
    value: int


@dataclass(frozen=True, slots=True, order=True)
class Acked:
    """A write acknowledged to the producer (or a record returned to the consumer)."""

    partition: int
    offset: int
    value: int


@dataclass(frozen=True, slots=True, order=True)
class AlterPartition:
    """Leader -> controller (KIP-497), and the controller's answer in its place.

    The request names the leadership it comes from (leader epoch, partition epoch: the
    compare-and-set) and the ISR it asks for; `broker_epoch` is the added follower's, from its
    last fetch (-1 for a shrink). `answer`: 0 in flight to the controller, 1 accepted, 2
    rejected (on its way back to the leader).
    """

    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    broker_epoch: int = UNKNOWN
    answer: int = 0


PENDING, ACCEPTED, REJECTED = 0, 1, 2

FetchMessage = FetchRequest | EpochRequest | FetchResponse | None


@dataclass(frozen=True, slots=True)
class Cluster:
    """The whole state. Every field is immutable; `replicas[p][b]` is broker b's replica of p."""

    replicas: tuple[tuple[Replica, ...], ...]
    alive: tuple[bool, ...]
    broker_epochs: tuple[int, ...]
    controller: Controller
    leader_and_isr: frozenset[LeaderAndIsr]
    fetches: tuple[tuple[FetchMessage, ...], ...]  # [partition][follower]
    produce_requests: frozenset[ProduceRequest]
    acked: frozenset[Acked]
    consumed: frozenset[Acked]
    excused: frozenset[int]  # values whose loss is excused (every ISR replica lost them)
    # Ghost: (value, broker) for each record a broker lost in a crash (unflushed), so the
    # KIP-966 durability promise can count how many replicas lost a write.
    crash_losses: frozenset[tuple[int, int]] = frozenset()
    alter_partitions: frozenset[AlterPartition] = frozenset()  # KIP-497 requests and answers
    # The highest controller epoch each broker has seen (in memory: 0 after a crash); empty
    # means all 0 (only `max.controller.failovers` moves it).
    controller_epochs: tuple[int, ...] = ()
    next_value: int = 1
    crashes: int = 0
    expiries: int = 0  # sessions of live brokers expired (GC pause, lost heartbeats)
    drops: int = 0  # LeaderAndIsr requests lost
    ticks: int = 0
    _hash: int = field(default=0, compare=False, repr=False)

    __hash__ = _cached_hash

    def replica(self, partition: int, broker: int) -> Replica:
        return self.replicas[partition][broker]

    def with_replica(self, partition: int, broker: int, replica: Replica) -> Cluster:
        row = self.replicas[partition]
        row = row[:broker] + (replica,) + row[broker + 1 :]
        return _with_replicas(
            self, self.replicas[:partition] + (row,) + self.replicas[partition + 1 :])

    def with_fetch(self, partition: int, follower: int, message: FetchMessage) -> Cluster:
        row = self.fetches[partition]
        row = row[:follower] + (message,) + row[follower + 1 :]
        return _with_fetches(self, self.fetches[:partition] + (row,) + self.fetches[partition + 1 :])

    def with_replica_and_fetch(self, partition: int, broker: int, replica: Replica,
                               follower: int, message: FetchMessage) -> Cluster:
        """`with_replica` and `with_fetch` in one copy (a leader answering a fetch)."""
        row = self.replicas[partition]
        row = row[:broker] + (replica,) + row[broker + 1 :]
        slots = self.fetches[partition]
        slots = slots[:follower] + (message,) + slots[follower + 1 :]
        return _with_replicas_and_fetches(
            self, self.replicas[:partition] + (row,) + self.replicas[partition + 1 :],
            self.fetches[:partition] + (slots,) + self.fetches[partition + 1 :])

    def with_partition_state(self, partition: int, ps: PartitionState) -> Cluster:
        parts = self.controller.partitions
        parts = parts[:partition] + (ps,) + parts[partition + 1 :]
        return replace(self, controller=replace(self.controller, partitions=parts))

    def controller_epoch_seen(self, broker: int) -> int:
        return self.controller_epochs[broker] if self.controller_epochs else 0

    def is_true_leader(self, partition: int, broker: int) -> bool:
        """Alive, leader in its own view, and that view is the controller's current one."""
        ps = self.controller.partitions[partition]
        replica = self.replicas[partition][broker]
        return (
            self.alive[broker]
            and replica.leader == broker
            and ps.leader == broker
            and replica.leader_epoch == ps.leader_epoch
        )

    def true_leader(self, partition: int) -> int:
        leader = self.controller.partitions[partition].leader
        if leader != NO_LEADER and self.is_true_leader(partition, leader):
            return leader
        return NO_LEADER


# The copies of a state that most steps make (see `_updater`).
_with_replicas = _updater(Cluster, "replicas")
_with_fetches = _updater(Cluster, "fetches")
_with_replicas_and_fetches = _updater(Cluster, "replicas", "fetches")


def leader_side_state(config: Config, isr: tuple[int, ...]) -> dict:
    """Fresh per-follower state for a new leader: remote LEOs unknown, ISR members caught up."""
    n = config.brokers
    lag_cap = config.replica_lag_time_max_ticks + 1
    return dict(
        remote_log_end_offset=(UNKNOWN,) * n,
        remote_broker_epoch=(UNKNOWN,) * n,
        lag_ticks=tuple(0 if b in isr else lag_cap for b in range(n)),
    )


def initial_state(config: Config) -> Cluster:
    """All brokers up, each partition led by its preferred replica at epoch 0, full ISR, and
    every replica has applied that LeaderAndIsr. Logs are empty."""
    n, p = config.brokers, config.partitions
    partitions = []
    rows = []
    for partition in range(p):
        assignment = config.assignment(partition)
        leader = assignment[0]
        isr = tuple(sorted(assignment))
        partitions.append(PartitionState(leader, 0, isr, 0))
        row = []
        for broker in range(n):
            view = dict(leader=leader, leader_epoch=0, isr=isr, partition_epoch=0)
            if broker not in assignment:
                row.append(Replica())  # not a replica: no view of the partition, no fetches
            elif broker == leader:
                row.append(Replica(epoch_cache=((0, 0),), **view, **leader_side_state(config, isr)))
            else:
                row.append(Replica(**view))
        rows.append(tuple(row))
    return Cluster(
        replicas=tuple(rows),
        alive=(True,) * n,
        broker_epochs=(0,) * n,
        controller=Controller(tuple(partitions), registered=(0,) * n),
        leader_and_isr=frozenset(),
        fetches=tuple((None,) * n for _ in range(p)),
        produce_requests=frozenset(),
        acked=frozenset(),
        consumed=frozenset(),
        excused=frozenset(),
    )


for _cls in (Replica, Cluster):
    _cls._hash_fields = tuple(n for n in _cls.__slots__ if n != "_hash")
for _cls in (Record, PendingProduce, Replica, PartitionState, Controller, LeaderAndIsr,
             FetchRequest, EpochRequest, FetchResponse, ProduceRequest, Acked, AlterPartition,
             Cluster):
    fast_init(_cls)
