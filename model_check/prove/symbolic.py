"""A Z3 encoding of the default model (`spec/`) for a fixed number of brokers and one partition.

Theory of operation. A symbolic state (`SState`) mirrors `spec.state.Cluster` field by field,
with Z3 terms in place of values. Offsets, leader epochs, partition epochs, broker epochs, HWs
and record values are unbounded integers; every log is a pair of Z3 arrays (offset -> epoch,
offset -> value) with a symbolic length, so nothing about offsets is bounded. Each spec action
has one constraint builder named as in the spec (`BecomeLeader`, `LeaderHandleFetch`, ...).
A builder returns `(guard, successor)`: the successor is the pre-state with the changed fields
replaced, in the same shape as the spec's handler, and `state_eq` equates every field of the
post-state with it. That equation is the frame condition: a field an action does not mention
is carried over unchanged, explicitly.

How the unbounded parts of `Cluster` are represented (all faithful on every reachable state):
- LeaderAndIsr requests in flight: a set per broker of partition epochs (an array pe -> Bool)
  plus a history array pe -> (leader, leader epoch, ISR). A request's content is a function of
  its partition epoch (every controller change bumps it; a re-registration resends the current
  one), so (broker, partition epoch) names a request exactly.
- Produce requests: an array value -> destination broker (-1: none). Values are unique.
- The purgatory: an array offset -> pending? and offset -> value (offsets are unique and the
  spec keeps the tuple in offset order).
- acked / consumed / excused: arrays value -> Bool, plus a ghost array `value_offset`
  (value -> the offset it was appended at). A value is appended once and only ever copied to
  the same offset, so an `Acked(partition, offset, value)` is determined by its value.
- The crash-loss ghost (which broker lost which value in a crash): an array value -> Bool
  per broker, only where the spec keeps it (acks=all, min ISR >= 2).
- A fetch response's records: a snapshot of the leader's log arrays and a count, read from
  the response's fetch offset.

Restrictions (checked by `represent`, which refuses a concrete state outside them, and
documented in docs/prove.md):
- one partition;
- the leader-epoch cache holds at most `cache_slots` entries (slots with a symbolic length).
  With epochs bounded by `max.leader.epochs` the default `cache_slots` equals that bound, so
  BMC is exact; unbounded (induction) mode proves the invariants for runs whose caches never
  exceed it: an action that would overflow a cache is disabled;
- a fetch response appends at most `cache_slots` epoch boundaries (same reason).
- FollowerHandleFetchResponse finds the epoch boundaries of the appended records with
  witnesses that are exact when log epochs are non-decreasing (LeaderEpochMonotonic, which
  every reachable state satisfies).

`bounded=True` keeps every `max.*` exploration bound of the config as a guard (BMC and the
differential test: traces must replay through `spec.step`); `bounded=False` drops them, which
only adds behaviours, so a proof in that mode covers all offsets and epochs.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import z3

from spec.config import Config
from spec.state import (
    NO_LEADER,
    UNKNOWN,
    Acked,
    Cluster,
    Controller,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    PartitionState,
    PendingProduce,
    ProduceRequest,
    Record,
    Replica,
)

INT = z3.IntSort()
BOOL = z3.BoolSort()

# Fetch slot kinds and Kafka error codes (the numbers spec.state._CODES uses). Codes 0-4 would
# save BMC one bit of width, for no measured gain, and left an induction query `unknown` when
# other proofs had run in the same process.
NONE, FETCH, EPOCH_REQ, RESP_RECORDS, RESP_EPOCH, RESP_DIVERGING, RESP_ERROR = range(7)
RESPONSE_KINDS = {RESP_RECORDS: "records", RESP_EPOCH: "epoch", RESP_DIVERGING: "diverging",
                  RESP_ERROR: "error"}
ERRORS = {"": 0, "OFFSET_OUT_OF_RANGE": 1, "NOT_LEADER_OR_FOLLOWER": 6,
          "FENCED_LEADER_EPOCH": 74, "UNKNOWN_LEADER_EPOCH": 75}
ERROR_NAMES = {v: k for k, v in ERRORS.items()}


class NotRepresentable(ValueError):
    """A concrete state lies outside what the encoding represents (see the module docstring)."""


# ------------------------------------------------------------------------------------------
# Symbolic state


@dataclass(frozen=True)
class SSlot:
    """One (follower) fetch connection: nothing, a request or a response, as flat fields."""

    kind: z3.ArithRef
    leader: z3.ArithRef
    fetch_offset: z3.ArithRef
    last_fetched_epoch: z3.ArithRef
    current_leader_epoch: z3.ArithRef
    broker_epoch: z3.ArithRef
    epoch: z3.ArithRef
    leader_epoch: z3.ArithRef
    high_watermark: z3.ArithRef
    end_offset: z3.ArithRef
    error: z3.ArithRef
    rec_count: z3.ArithRef
    rec_epoch: z3.ArrayRef  # indexed by absolute offset, from fetch_offset
    rec_value: z3.ArrayRef


@dataclass(frozen=True)
class SReplica:
    """One broker's replica of the partition (see spec.state.Replica)."""

    log_len: z3.ArithRef
    log_epoch: z3.ArrayRef
    log_value: z3.ArrayRef
    high_watermark: z3.ArithRef
    flushed_offset: z3.ArithRef
    cache_len: z3.ArithRef
    cache_epoch: tuple
    cache_start: tuple
    leader: z3.ArithRef
    leader_epoch: z3.ArithRef
    isr: tuple  # Bool per broker
    partition_epoch: z3.ArithRef
    truncation_pending: z3.BoolRef
    side: z3.BoolRef  # has leader-side state (the remote tuples are non-empty)
    remote_leo: tuple
    remote_be: tuple
    lag: tuple
    purgatory: z3.ArrayRef  # offset -> pending?
    purgatory_value: z3.ArrayRef  # offset -> value


@dataclass(frozen=True)
class SState:
    """The whole symbolic state; field names follow spec.state.Cluster."""

    replicas: tuple
    alive: tuple
    broker_epochs: tuple
    registered: tuple
    c_leader: z3.ArithRef
    c_epoch: z3.ArithRef
    c_isr: tuple
    c_elr: tuple  # KIP-966: Bool per broker, the eligible leader replicas
    c_lkelr: tuple  # KIP-966: Bool per broker, the last known ELR (or last known leader)
    c_pe: z3.ArithRef
    # Ghost: the leader epoch since which every epoch has named the controller's leader (the
    # start of its current run of leadership). The concrete state has no such field.
    c_run: z3.ArithRef
    unclean_elections: z3.ArithRef
    lai: tuple  # per broker: Array(partition epoch -> in flight?)
    hist_leader: z3.ArrayRef  # partition epoch -> leader
    hist_epoch: z3.ArrayRef  # partition epoch -> leader epoch
    hist_isr: tuple  # per broker: Array(partition epoch -> member?)
    fetches: tuple  # SSlot per follower
    produce: z3.ArrayRef  # value -> broker, -1 when no request
    acked: z3.ArrayRef
    consumed: z3.ArrayRef
    excused: z3.ArrayRef
    value_offset: z3.ArrayRef  # ghost: value -> offset it was appended at
    next_value: z3.ArithRef
    crashes: z3.ArithRef
    expiries: z3.ArithRef
    drops: z3.ArithRef
    ticks: z3.ArithRef
    # The crash-loss ghost (`Cluster.crash_losses`), per broker an array value -> lost in a
    # crash?; empty where the spec keeps no such ghost (`Config.kip966_promises`).
    lost: tuple = ()


def subterms(e: z3.ExprRef, seen: set[int]) -> Iterator[z3.ExprRef]:
    """Each subterm of `e` (itself included) whose id is not in `seen`, once, adding its id:
    a walk that shares `seen` over several terms visits a shared subterm once."""
    todo = [e]
    while todo:
        x = todo.pop()
        if x.get_id() in seen:
            continue
        seen.add(x.get_id())
        yield x
        todo.extend(x.children())


def leaves_of(x) -> list:
    if dataclasses.is_dataclass(x):
        return [leaf for f in dataclasses.fields(x) for leaf in leaves_of(getattr(x, f.name))]
    if isinstance(x, tuple):
        return [leaf for item in x for leaf in leaves_of(item)]
    return [x]


@dataclass(frozen=True, eq=False)
class FArr:
    """Bounded mode's array: one cell per index 0..len(cells)-1 and one `default` term that
    stands for every other index.

    In bounded mode every index an action writes is small (offsets < max.records, values <=
    max.records, partition epochs <= `Shape.pe_cells`), so a Z3 array is more than BMC needs.
    Cells are plain terms, so the preprocessing (solve-eqs, propagate-values) sees through
    them and the SMT core never instantiates array axioms: on the depth-12 B7 queries this is the
    difference between minutes and seconds. Reads at a symbolic index are If-chains; a write
    at a symbolic index outside the cells is dropped (no reachable state makes one).
    """

    cells: tuple
    default: z3.ExprRef

    def __getitem__(self, index):
        k = _concrete(index)
        if k is not None:
            return self.cells[k] if 0 <= k < len(self.cells) else self.default
        out = self.default
        for i in range(len(self.cells) - 1, -1, -1):
            out = z3.If(index == i, self.cells[i], out)
        return out

    def __eq__(self, other):  # type: ignore[override]
        return And([eq_terms(x, y) for x, y in zip(leaves_of(self), leaves_of(other), strict=True)])

    __hash__ = None  # type: ignore[assignment]


def _concrete(index) -> int | None:
    if isinstance(index, int):
        return index
    if z3.is_int_value(index):
        return index.as_long()
    return None


def _store(arr, index, value):
    """z3.Store, also for FArr (where a concrete index outside the cells cannot be kept)."""
    if not isinstance(arr, FArr):
        return z3.Store(arr, index, value)
    k = _concrete(index)
    if k is not None:
        if not 0 <= k < len(arr.cells):
            raise NotRepresentable(f"index {k} outside the {len(arr.cells)} bounded cells")
        return FArr(_put(arr.cells, k, as_term(value)), arr.default)
    return FArr(tuple(z3.If(index == i, value, c) for i, c in enumerate(arr.cells)), arr.default)


def _k(like, value):
    """The constant array `value`, shaped like `like` (a Z3 array or an FArr)."""
    value = as_term(value)
    if isinstance(like, FArr):
        return FArr((value,) * len(like.cells), value)
    return z3.K(INT, value)


def _zip_map(fn: Callable, a, b):
    """Apply `fn` leaf-wise to two states of the same shape; rebuild the shape."""
    if dataclasses.is_dataclass(a):
        return type(a)(**{f.name: _zip_map(fn, getattr(a, f.name), getattr(b, f.name))
                          for f in dataclasses.fields(a)})
    if isinstance(a, tuple):
        return tuple(_zip_map(fn, x, y) for x, y in zip(a, b, strict=True))
    return fn(a, b)


def as_term(x):
    """A Z3 term for a leaf (builders may write plain Python bools and ints)."""
    if isinstance(x, bool):
        return _TRUE if x else _FALSE
    if isinstance(x, int):
        term = _INTS.get(x)
        if term is None:
            term = _INTS[x] = z3.IntVal(x)
        return term
    return x


_CTX = z3.main_ctx()
_TRUE, _FALSE = z3.BoolVal(True), z3.BoolVal(False)
_INTS: dict[int, z3.ArithRef] = {}


def eq_terms(x, y) -> z3.BoolRef:
    """`x == y` for two leaves of one sort, without z3's Python-side coercion (which is most of
    `represent`'s time)."""
    if isinstance(x, FArr):
        return x == y
    x, y = as_term(x), as_term(y)
    ctx = x.ctx
    return z3.BoolRef(z3.Z3_mk_eq(ctx.ref(), x.as_ast(), y.as_ast()), ctx)


def _connective(make, slow, args) -> z3.BoolRef:
    """`make` (Z3_mk_and, Z3_mk_or) over Boolean terms or Python bools, given as z3.And and
    z3.Or take them, built in one C call: z3's own coercion of each argument was about a
    quarter of an induction's time. Anything else (a probe, another sort) goes to z3's `slow`
    form."""
    if len(args) == 1 and not isinstance(args[0], (z3.ExprRef, bool)):
        args = tuple(args[0])
    asts = []
    for a in args:
        if isinstance(a, bool):
            a = _TRUE if a else _FALSE
        elif not isinstance(a, z3.BoolRef) or a.ctx is not _CTX:
            return slow(*args)
        asts.append(a.as_ast())
    return z3.BoolRef(make(_CTX.ref(), len(asts), (z3.Ast * len(asts))(*asts)), _CTX)


def And(*args) -> z3.BoolRef:
    """z3.And, without z3's Python-side coercion (the same term)."""
    return _connective(z3.Z3_mk_and, z3.And, args)


def Or(*args) -> z3.BoolRef:
    """z3.Or, without z3's Python-side coercion (the same term)."""
    return _connective(z3.Z3_mk_or, z3.Or, args)


def state_eq(a: SState, b: SState) -> z3.BoolRef:
    """Every field of `a` equals the same field of `b` (leaves that are the same term drop out)."""
    pairs = ((as_term(x), as_term(y)) for x, y in zip(leaves_of(a), leaves_of(b), strict=True))
    return And([eq_terms(x, y) for x, y in pairs if not x.eq(y)])


def ite(c, a, b):
    """Field-wise If over two states (or parts) of the same shape."""
    return _zip_map(lambda x, y: as_term(x) if as_term(x).eq(as_term(y)) else z3.If(c, as_term(x), as_term(y)), a, b)


class Vars:
    """Fresh variable names: one prefix per state or step."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def int(self, name: str) -> z3.ArithRef:
        return z3.Int(f"{self.prefix}{name}")

    def bool(self, name: str) -> z3.BoolRef:
        return z3.Bool(f"{self.prefix}{name}")

    def array(self, name: str, rng=INT, cells: int | None = None):
        """A Z3 array, or (bounded mode: `cells` given) an FArr of fresh terms."""
        if cells is None:
            return z3.Array(f"{self.prefix}{name}", INT, rng)
        fresh = z3.Bool if rng == BOOL else z3.Int
        return FArr(tuple(fresh(f"{self.prefix}{name}[{i}]") for i in range(cells)),
                    fresh(f"{self.prefix}{name}[*]"))


@dataclass(frozen=True)
class Shape:
    """What the encoding is fixed to: the config, cache capacity and whether bounds apply."""

    config: Config
    cache_slots: int
    bounded: bool = True
    pe_limit: int | None = None  # BMC to depth d: no partition epoch exceeds d

    @property
    def n(self) -> int:
        return self.config.brokers

    def cells(self, domain: str) -> int | None:
        """How many cells a bounded-mode array over `domain` has (None: a Z3 array).

        A log holds each value once, so offsets are < max.records and values <= max.records.
        Partition epochs: ISR changes stop at max.partition.epoch, elections at
        max.leader.epochs, and each broker failure needs a registration (the first, or one
        after a crash or session expiry); the sum bounds every partition epoch.
        """
        if not self.bounded:
            return None
        c = self.config
        pes = c.max_partition_epoch + c.max_leader_epochs + 1 + 2 * (
            self.n + c.max_crashes + c.max_session_expiries)
        if self.pe_limit is not None:
            pes = min(pes, self.pe_limit + 1)
        return {"offset": c.max_records, "value": c.max_records + 1, "pe": pes}[domain]


def make_shape(config: Config, bounded: bool = True, cache_slots: int | None = None,
               pe_limit: int | None = None) -> Shape:
    if config.partitions != 1:
        raise NotRepresentable("the symbolic encoding has exactly one partition")
    slots = cache_slots if cache_slots is not None else max(config.max_leader_epochs, 2)
    return Shape(config, slots, bounded, pe_limit)


def fresh_state(shape: Shape, prefix: str) -> SState:
    """A state of fresh variables named `prefix...`."""
    v = Vars(prefix)
    n, c = shape.n, shape.cache_slots
    offs, vals, pes = shape.cells("offset"), shape.cells("value"), shape.cells("pe")

    def slot(f: int) -> SSlot:
        q = Vars(f"{prefix}f{f}.")
        return SSlot(*(q.int(name) for name in (
            "kind", "leader", "fetch_offset", "last_fetched_epoch", "current_leader_epoch",
            "broker_epoch", "epoch", "leader_epoch", "high_watermark", "end_offset", "error",
            "rec_count")), q.array("rec_epoch", cells=offs), q.array("rec_value", cells=offs))

    def replica(b: int) -> SReplica:
        q = Vars(f"{prefix}r{b}.")
        return SReplica(
            log_len=q.int("log_len"), log_epoch=q.array("log_epoch", cells=offs),
            log_value=q.array("log_value", cells=offs), high_watermark=q.int("hw"),
            flushed_offset=q.int("flushed"), cache_len=q.int("cache_len"),
            cache_epoch=tuple(q.int(f"cache_epoch{i}") for i in range(c)),
            cache_start=tuple(q.int(f"cache_start{i}") for i in range(c)),
            leader=q.int("leader"), leader_epoch=q.int("leader_epoch"),
            isr=tuple(q.bool(f"isr{x}") for x in range(n)),
            partition_epoch=q.int("partition_epoch"), truncation_pending=q.bool("pending"),
            side=q.bool("side"), remote_leo=tuple(q.int(f"remote_leo{x}") for x in range(n)),
            remote_be=tuple(q.int(f"remote_be{x}") for x in range(n)),
            lag=tuple(q.int(f"lag{x}") for x in range(n)),
            purgatory=q.array("purgatory", BOOL, offs),
            purgatory_value=q.array("purgatory_value", cells=offs),
        )

    return SState(
        replicas=tuple(replica(b) for b in range(n)),
        alive=tuple(v.bool(f"alive{b}") for b in range(n)),
        broker_epochs=tuple(v.int(f"broker_epoch{b}") for b in range(n)),
        registered=tuple(v.int(f"registered{b}") for b in range(n)),
        c_leader=v.int("c_leader"), c_epoch=v.int("c_epoch"),
        c_isr=tuple(v.bool(f"c_isr{b}") for b in range(n)),
        c_elr=tuple(v.bool(f"c_elr{b}") for b in range(n)),
        c_lkelr=tuple(v.bool(f"c_lkelr{b}") for b in range(n)), c_pe=v.int("c_pe"),
        c_run=v.int("c_run"), unclean_elections=v.int("unclean"),
        lai=tuple(v.array(f"lai{b}", BOOL, pes) for b in range(n)),
        hist_leader=v.array("hist_leader", cells=pes),
        hist_epoch=v.array("hist_epoch", cells=pes),
        hist_isr=tuple(v.array(f"hist_isr{b}", BOOL, pes) for b in range(n)),
        fetches=tuple(slot(f) for f in range(n)),
        produce=v.array("produce", cells=vals), acked=v.array("acked", BOOL, vals),
        consumed=v.array("consumed", BOOL, vals), excused=v.array("excused", BOOL, vals),
        value_offset=v.array("value_offset", cells=vals),
        next_value=v.int("next_value"), crashes=v.int("crashes"), expiries=v.int("expiries"),
        drops=v.int("drops"), ticks=v.int("ticks"),
        lost=tuple(v.array(f"lost{b}", BOOL, vals) for b in range(n))
        if shape.config.kip966_promises else (),
    )


# ------------------------------------------------------------------------------------------
# Small helpers over symbolic values


def replaced_replica(s: SState, b: int, r: SReplica) -> SState:
    return dataclasses.replace(s, replicas=s.replicas[:b] + (r,) + s.replicas[b + 1:])


def _slot(s: SState, f: int, m: SSlot) -> SState:
    return dataclasses.replace(s, fetches=s.fetches[:f] + (m,) + s.fetches[f + 1:])


def at_index(items: tuple, index):
    """items[index] for a symbolic index (the last item when out of range)."""
    out = items[-1]
    for i in range(len(items) - 2, -1, -1):
        out = z3.If(index == i, items[i], out)
    return out


def _put(items: tuple, i: int, value) -> tuple:
    return items[:i] + (value,) + items[i + 1:]


def count_true(bools) -> z3.ArithRef:
    return z3.Sum([z3.If(b, 1, 0) for b in bools])


def _min(a, b):
    return z3.If(a <= b, a, b)


def _none_slot(m: SSlot) -> SSlot:
    return dataclasses.replace(m, kind=z3.IntVal(NONE))


def latest_epoch(r: SReplica):
    return z3.If(r.cache_len > 0, at_index(r.cache_epoch, r.cache_len - 1), UNKNOWN)


def end_offset_for_epoch(r: SReplica, epoch) -> tuple:
    """Replica.end_offset_for_epoch (KIP-279) over cache slots."""
    c = len(r.cache_epoch)
    res_e, res_o = z3.IntVal(UNKNOWN), z3.IntVal(UNKNOWN)
    # The first cached epoch above `epoch` decides; scanning backwards lets lower indices win.
    for i in range(c - 1, -1, -1):
        hit = And(i < r.cache_len, r.cache_epoch[i] > epoch)
        prev = epoch if i == 0 else r.cache_epoch[i - 1]
        res_e, res_o = z3.If(hit, prev, res_e), z3.If(hit, r.cache_start[i], res_o)
    latest = And(r.cache_len > 0, at_index(r.cache_epoch, r.cache_len - 1) == epoch)
    res_e, res_o = z3.If(latest, epoch, res_e), z3.If(latest, r.log_len, res_o)
    undefined = Or(epoch == UNKNOWN, r.cache_len == 0)
    return z3.If(undefined, UNKNOWN, res_e), z3.If(undefined, UNKNOWN, res_o)


def start_offset_after_epoch(r: SReplica, epoch):
    """Replica.start_offset_after_epoch (KIP-101) over cache slots."""
    c = len(r.cache_epoch)
    res = z3.IntVal(UNKNOWN)
    for i in range(c - 1, -1, -1):
        res = z3.If(And(i < r.cache_len, r.cache_epoch[i] > epoch), r.cache_start[i], res)
    res = z3.If(at_index(r.cache_epoch, r.cache_len - 1) == epoch, r.log_len, res)
    return z3.If(Or(r.cache_len == 0, epoch < r.cache_epoch[0]), UNKNOWN, res)


def epoch_start_offset(r: SReplica, epoch):
    """Replica.epoch_start_offset: start of `epoch` in the cache, or -1."""
    res = z3.IntVal(UNKNOWN)
    for i in range(len(r.cache_epoch) - 1, -1, -1):
        res = z3.If(And(i < r.cache_len, r.cache_epoch[i] == epoch), r.cache_start[i], res)
    return res


def assign_epoch(r: SReplica, epoch, start) -> tuple[z3.BoolRef, SReplica]:
    """spec.state.assign_epoch on the slots: (fits?, replica with the new cache)."""
    c = len(r.cache_epoch)
    keep_same = And(r.cache_len > 0, at_index(r.cache_epoch, r.cache_len - 1) == epoch,
                       start >= at_index(r.cache_start, r.cache_len - 1))
    # Entries are removed from the end while epoch >= `epoch` or start >= `start`: what stays
    # is everything up to the last entry that passes neither test.
    k = z3.IntVal(0)
    for i in range(c):
        ok = And(i < r.cache_len, r.cache_epoch[i] < epoch, r.cache_start[i] < start)
        k = z3.If(ok, i + 1, k)
    epochs = tuple(z3.If(k == i, epoch, r.cache_epoch[i]) for i in range(c))
    starts = tuple(z3.If(k == i, start, r.cache_start[i]) for i in range(c))
    new = dataclasses.replace(r, cache_len=k + 1, cache_epoch=epochs, cache_start=starts)
    return Or(keep_same, k < c), ite(keep_same, r, new)


def truncated_to(r: SReplica, offset) -> SReplica:
    """Replica.truncated_to: the cache keeps its (increasing-start) prefix below `offset`."""
    kept = count_true([And(i < r.cache_len, r.cache_start[i] < offset)
                   for i in range(len(r.cache_start))])
    cut = dataclasses.replace(
        r, log_len=offset, high_watermark=_min(r.high_watermark, offset),
        flushed_offset=_min(r.flushed_offset, offset), cache_len=kept)
    return ite(offset >= r.log_len, dataclasses.replace(r, cache_len=kept), cut)


def _flush_policy(shape: Shape, r: SReplica) -> SReplica:
    interval = shape.config.log_flush_interval_messages
    if interval is None:
        return r
    due = r.log_len - r.flushed_offset >= interval
    return dataclasses.replace(r, flushed_offset=z3.If(due, r.log_len, r.flushed_offset))


def _map_array(shape: Shape, arr, var: z3.ArithRef, body):
    """The array `lambda var: body` (body may read `arr`).

    Unbounded mode: a Z3 lambda. Bounded mode: the body at each cell (see FArr); every other
    index keeps `arr`'s default, which is all the cells of the domain can read back.
    """
    if not shape.bounded:
        return z3.Lambda([var], body)
    cells = tuple(z3.simplify(z3.substitute(body, (var, z3.IntVal(i))))
                  for i in range(len(arr.cells)))
    return FArr(cells, arr.default)


def _member_min(isr: tuple, values: tuple):
    """(ISR non-empty?, min of values over ISR members)."""
    n = len(isr)
    out = values[-1]
    for y in range(n - 1, -1, -1):
        is_min = And(isr[y], *[z3.Implies(isr[x], values[x] >= values[y]) for x in range(n)])
        out = z3.If(is_min, values[y], out)
    return Or(isr), out


def advance_high_watermark(shape: Shape, r: SReplica, b: int) -> SReplica:
    """spec.actions._advance_high_watermark."""
    values = tuple(r.log_len if x == b else r.remote_leo[x] for x in range(shape.n))
    some, low = _member_min(r.isr, values)
    move = And(r.leader == b, some, low > r.high_watermark)
    if shape.config.variant.hw_requires_min_isr or shape.config.eligible_leader_replicas_enable:
        move = And(move, count_true(r.isr) >= shape.config.min_insync_replicas)
    return dataclasses.replace(r, high_watermark=z3.If(move, low, r.high_watermark))


def _reset_view(r: SReplica) -> SReplica:
    """The follower-side reset of BecomeFollower and crash: no leader-side state, no purgatory."""
    return dataclasses.replace(r, side=z3.BoolVal(False),
                               purgatory=_k(r.purgatory, False))


def _send_lai(shape: Shape, s: SState, pe, leader, epoch, isr: tuple) -> SState:
    """Record the partition state of `pe` and send it to every registered, live broker."""
    lai = tuple(ite(And(s.registered[x] != UNKNOWN, s.alive[x]),
                      _store(s.lai[x], pe, True), s.lai[x]) for x in range(shape.n))
    return _record(s, pe, leader, epoch, isr, lai=lai)


def _record(s: SState, pe, leader, epoch, isr: tuple, **changes) -> SState:
    return dataclasses.replace(
        s, hist_leader=_store(s.hist_leader, pe, leader),
        hist_epoch=_store(s.hist_epoch, pe, epoch),
        hist_isr=tuple(_store(h, pe, m) for h, m in zip(s.hist_isr, isr, strict=True)),
        **changes)


def _first(bools: tuple, default=NO_LEADER):
    """The first broker whose Bool holds (assignment order 0..n-1), else `default`."""
    out = z3.IntVal(default)
    for b in range(len(bools) - 1, -1, -1):
        out = z3.If(bools[b], b, out)
    return out


def elect(shape: Shape, registered: tuple, isr: tuple):
    """spec.actions._elect for partition 0 (assignment order 0..n-1):
    (found?, leader, new ISR, unclean?)."""
    n = shape.n
    live = [registered[b] != UNKNOWN for b in range(n)]
    leader = _first([And(live[b], isr[b]) for b in range(n)])
    clean = Or([And(live[b], isr[b]) for b in range(n)])
    # No candidate: the ISR stays as it was (the partition goes offline).
    clean_isr = tuple(z3.If(clean, And(isr[b], live[b]), isr[b]) for b in range(n))
    if not shape.config.unclean_leader_election_enable:
        return clean, leader, clean_isr, z3.BoolVal(False)
    first_live = _first(live)
    unclean = And(z3.Not(clean), Or(live))
    new_isr = tuple(z3.If(unclean, first_live == b, clean_isr[b]) for b in range(n))
    return Or(clean, unclean), z3.If(clean, leader, first_live), new_isr, unclean


def kip966_change(shape: Shape, s: SState, registered: tuple, isr: tuple, elect_leader: bool,
                  unclean_shutdown: int | None = None):
    """spec.actions._kip966_change for partition 0, from the controller's state in `s` to the
    ISR `isr`: (leader, leader epoch, ISR, ELR, last known ELR, elected outside ISR and ELR?).
    """
    n, cfg = shape.n, shape.config
    # _kip966_elr: below min ISR the old ISR and ELR, less the new ISR and a broker back from
    # an unclean shutdown, are eligible; the rest of them (and the old last known) are known.
    below = count_true(isr) < cfg.min_insync_replicas
    was = [Or(s.c_elr[x], s.c_isr[x]) for x in range(n)]
    elr = tuple(And(below, was[x], z3.Not(isr[x]), z3.BoolVal(x != unclean_shutdown))
                for x in range(n))
    known = tuple(And(below, Or(was[x], s.c_lkelr[x]), z3.Not(isr[x]), z3.Not(elr[x]))
                  for x in range(n))
    leader, outside = s.c_leader, z3.BoolVal(False)
    if elect_leader:
        # _kip966_elect: the leader stays while valid; else the first valid replica; else the
        # last known leader; else (unclean election) the first registered one.
        empty = z3.Not(Or(isr))
        valid = tuple(And(registered[x] != UNKNOWN, Or(isr[x], And(empty, elr[x])))
                      for x in range(n))
        keep = Or([And(s.c_leader == x, valid[x]) for x in range(n)])
        some = Or(valid)
        first = _first(valid)
        from_elr = And(z3.Not(keep), some, at_index(elr, first))
        last = z3.BoolVal(False)
        if cfg.last_known_leader_election_enable:
            last = And(z3.Not(keep), z3.Not(some), empty, z3.Not(Or(elr)),
                       count_true(s.c_lkelr) == 1)
        unclean = z3.BoolVal(False)
        live = tuple(r != UNKNOWN for r in registered)
        if cfg.unclean_leader_election_enable:
            unclean = And(z3.Not(keep), z3.Not(some), z3.Not(last), Or(live))
        leader = z3.If(keep, s.c_leader, z3.If(some, first, z3.If(
            last, _first(s.c_lkelr), z3.If(unclean, _first(live), z3.IntVal(NO_LEADER)))))
        outside = Or(last, unclean)
        alone = tuple(leader == x for x in range(n))
        isr = tuple(z3.If(Or(from_elr, outside), alone[x], isr[x]) for x in range(n))
        elr = tuple(And(elr[x], z3.Not(And(from_elr, alone[x])), z3.Not(outside))
                    for x in range(n))
        known = tuple(And(known[x], z3.Not(outside)) for x in range(n))
    if cfg.last_known_leader_election_enable:
        # The field then holds the last known leader only: set when the ISR first empties,
        # kept while the partition has no leader, cleared once it has one.
        emptied = And(z3.Not(Or(isr)), s.c_leader != NO_LEADER)
        known = tuple(z3.If(emptied, s.c_leader == x,
                            And(leader == NO_LEADER, s.c_lkelr[x])) for x in range(n))
    epoch = s.c_epoch + z3.If(leader != s.c_leader, 1, 0)
    return leader, epoch, isr, elr, known, outside


# ------------------------------------------------------------------------------------------
# Excusal (spec.actions._excuse_lost_writes), with values located by the value_offset ghost.


def excuse(shape: Shape, before: SState, s: SState) -> SState:
    v = z3.Int("excuse_v")
    o = s.value_offset[v]
    committed = [s.consumed[v]]
    if shape.config.acks == "all":
        committed.append(s.acked[v])
    for r in before.replicas:
        committed.append(And(0 <= o, o < r.high_watermark, r.log_value[o] == v))
    nobody = And([z3.Implies(s.c_isr[m], z3.Not(s.alive[m])) for m in range(shape.n)])
    missing = Or([And(s.c_isr[m], z3.Not(And(
        0 <= o, o < s.replicas[m].log_len, s.replicas[m].log_value[o] == v)))
        for m in range(shape.n)])
    lost = And(Or(committed), missing)
    excused = _map_array(shape, s.excused, v, Or(s.excused[v], lost))
    return dataclasses.replace(s, excused=ite(nobody, excused, s.excused))


# ------------------------------------------------------------------------------------------
# Actions: each builder returns (guard, successor). Step arguments that are not broker ids
# (epochs, values, offsets) are symbolic and chosen by the solver (`StepArgs`).


@dataclass(frozen=True)
class StepArgs:
    """The symbolic arguments one step may use, plus witnesses some guards need."""

    leader_epoch: z3.ArithRef
    partition_epoch: z3.ArithRef
    value: z3.ArithRef
    offset: z3.ArithRef
    witness: z3.ArithRef
    boundaries: tuple
    boundary_count: z3.ArithRef


def fresh_args(shape: Shape, prefix: str) -> StepArgs:
    v = Vars(prefix)
    return StepArgs(v.int("leader_epoch"), v.int("partition_epoch"), v.int("value"),
                    v.int("offset"), v.int("witness"),
                    tuple(v.int(f"boundary{i}") for i in range(shape.cache_slots)),
                    v.int("boundary_count"))


def _bound(shape: Shape, condition) -> z3.BoolRef:
    """An exploration bound: a guard only in bounded mode."""
    return condition if shape.bounded else z3.BoolVal(True)


def _run_start(s: SState, leader, epoch):
    """The ghost `c_run` after the controller moves to (`leader`, `epoch`): a new epoch with
    another leader starts a run."""
    return z3.If(And(epoch != s.c_epoch, leader != s.c_leader), epoch, s.c_run)


def _kip966_move(s: SState, pe, change) -> SState:
    """The controller's state after a KIP-966 change (`kip966_change`'s result)."""
    leader, epoch, isr, elr, known, outside = change
    return dataclasses.replace(s, c_leader=leader, c_epoch=epoch, c_isr=isr, c_elr=elr,
                               c_lkelr=known, c_pe=pe, c_run=_run_start(s, leader, epoch),
                               unclean_elections=s.unclean_elections + z3.If(outside, 1, 0))


def ControllerElectLeader(shape: Shape, s: SState, a: StepArgs):
    if shape.config.eligible_leader_replicas_enable:
        change = kip966_change(shape, s, s.registered, s.c_isr, elect_leader=True)
        guard = And(s.c_leader == NO_LEADER, change[0] != NO_LEADER,
                    _bound(shape, s.c_epoch + 1 < shape.config.max_leader_epochs))
        pe = s.c_pe + 1
        return guard, _send_lai(shape, _kip966_move(s, pe, change), pe, *change[:3])
    found, leader, isr, unclean = elect(shape, s.registered, s.c_isr)
    guard = And(s.c_leader == NO_LEADER, found,
                   _bound(shape, s.c_epoch + 1 < shape.config.max_leader_epochs))
    pe = s.c_pe + 1
    t = dataclasses.replace(s, c_leader=leader, c_epoch=s.c_epoch + 1, c_isr=isr, c_pe=pe,
                            c_run=_run_start(s, leader, s.c_epoch + 1),
                            unclean_elections=s.unclean_elections + z3.If(unclean, 1, 0))
    return guard, _send_lai(shape, t, pe, leader, s.c_epoch + 1, isr)


def ControllerHandleBrokerFailure(shape: Shape, s: SState, a: StepArgs, b: int):
    cfg = shape.config
    guard = [s.registered[b] != UNKNOWN]
    zombie = s.alive[b]
    guard.append(z3.Implies(zombie, _bound(shape, s.expiries < cfg.max_session_expiries)))
    t = dataclasses.replace(s, expiries=s.expiries + z3.If(zombie, 1, 0),
                            registered=_put(s.registered, b, z3.IntVal(UNKNOWN)))
    affected = Or(s.c_isr[b], s.c_leader == b)
    if cfg.eligible_leader_replicas_enable:
        # KIP-966: the last ISR member leaves too; the ELR keeps it electable.
        isr = _put(s.c_isr, b, z3.BoolVal(False))
        change = kip966_change(shape, s, t.registered, isr, elect_leader=True)
        leader, epoch, new_isr, elr, known, _ = change
        isr_changed = Or([new_isr[x] != s.c_isr[x] for x in range(shape.n)])
        if cfg.variant.isr_shrink_bumps_leader_epoch:
            epoch = epoch + z3.If(And(leader == s.c_leader, isr_changed), 1, 0)
            change = (leader, epoch, *change[2:])
        guard.append(z3.Implies(affected, _bound(shape, epoch < cfg.max_leader_epochs)))
        changed = And(affected, Or(leader != s.c_leader, epoch != s.c_epoch, *[
            Or(new_isr[x] != s.c_isr[x], elr[x] != s.c_elr[x], known[x] != s.c_lkelr[x])
            for x in range(shape.n)]))
        pe = s.c_pe + 1
        u = _send_lai(shape, _kip966_move(t, pe, change), pe, leader, epoch, new_isr)
        return And(guard), excuse(shape, s, ite(changed, u, t))
    shrink = And(s.c_isr[b], count_true(s.c_isr) > 1)
    isr = tuple(And(s.c_isr[x], z3.Not(And(shrink, x == b))) for x in range(shape.n))
    found, e_leader, e_isr, unclean = elect(shape, t.registered, isr)
    leads = s.c_leader == b
    leader = z3.If(leads, e_leader, s.c_leader)
    new_isr = tuple(z3.If(leads, e_isr[x], isr[x]) for x in range(shape.n))
    isr_changed = Or([new_isr[x] != s.c_isr[x] for x in range(shape.n)])
    bump = leads
    if cfg.variant.isr_shrink_bumps_leader_epoch:
        bump = Or(leads, isr_changed)
    epoch = s.c_epoch + z3.If(bump, 1, 0)
    guard.append(z3.Implies(affected, _bound(shape, epoch < cfg.max_leader_epochs)))
    changed = And(affected, Or(leader != s.c_leader, epoch != s.c_epoch, isr_changed))
    pe = s.c_pe + 1
    u = dataclasses.replace(t, c_leader=leader, c_epoch=epoch, c_isr=new_isr, c_pe=pe,
                            c_run=_run_start(s, leader, epoch),
                            unclean_elections=t.unclean_elections
                            + z3.If(And(leads, unclean), 1, 0))
    u = _send_lai(shape, u, pe, leader, epoch, new_isr)
    return And(guard), excuse(shape, s, ite(changed, u, t))


def ControllerElectPreferredLeader(shape: Shape, s: SState, a: StepArgs):
    guard = And(s.c_leader != NO_LEADER, s.c_leader != 0, s.c_isr[0],
                   s.registered[0] != UNKNOWN,
                   _bound(shape, s.c_epoch + 1 < shape.config.max_leader_epochs))
    pe = s.c_pe + 1
    t = dataclasses.replace(s, c_leader=z3.IntVal(0), c_epoch=s.c_epoch + 1, c_pe=pe,
                            c_run=_run_start(s, z3.IntVal(0), s.c_epoch + 1))
    return guard, _send_lai(shape, t, pe, z3.IntVal(0), s.c_epoch + 1, s.c_isr)


def _lai_in_flight(s: SState, b: int, a: StepArgs):
    return And(s.lai[b][a.partition_epoch], s.hist_epoch[a.partition_epoch] == a.leader_epoch)


def _lai_removed(s: SState, b: int, a: StepArgs) -> SState:
    return dataclasses.replace(s, lai=_put(s.lai, b, _store(s.lai[b], a.partition_epoch, False)))


def NetworkDropLeaderAndIsr(shape: Shape, s: SState, a: StepArgs, b: int):
    guard = And(_lai_in_flight(s, b, a),
                   _bound(shape, s.drops < shape.config.max_message_drops))
    t = _lai_removed(s, b, a)
    return guard, dataclasses.replace(t, drops=s.drops + 1)


def NetworkDropFetch(shape: Shape, s: SState, a: StepArgs, f: int):
    m = s.fetches[f]
    guard = And(m.kind != NONE, _bound(shape, s.drops < shape.config.max_message_drops))
    return guard, dataclasses.replace(_slot(s, f, _none_slot(m)), drops=s.drops + 1)


def _applicable(s: SState, b: int, a: StepArgs, leads: bool):
    r = s.replicas[b]
    names_b = s.hist_leader[a.partition_epoch] == b
    newer = Or(a.leader_epoch > r.leader_epoch,
                  And(a.leader_epoch == r.leader_epoch, a.partition_epoch > r.partition_epoch))
    return And(_lai_in_flight(s, b, a), names_b if leads else z3.Not(names_b),
                  s.alive[b], newer)


def BecomeLeader(shape: Shape, s: SState, a: StepArgs, b: int):
    n, cfg = shape.n, shape.config
    guard = _applicable(s, b, a, leads=True)
    r = s.replicas[b]
    t = _lai_removed(s, b, a)
    isr = tuple(s.hist_isr[x][a.partition_epoch] for x in range(n))
    viewed = dataclasses.replace(r, leader=z3.IntVal(b), leader_epoch=a.leader_epoch, isr=isr,
                                 partition_epoch=a.partition_epoch)
    fits, reappointed = assign_epoch(viewed, a.leader_epoch, r.log_len)
    cap = cfg.replica_lag_time_max_ticks + 1
    fresh = dataclasses.replace(
        reappointed, side=z3.BoolVal(True),
        remote_leo=(z3.IntVal(UNKNOWN),) * n, remote_be=(z3.IntVal(UNKNOWN),) * n,
        lag=tuple(z3.If(isr[x], 0, cap) for x in range(n)),
        truncation_pending=z3.BoolVal(False), purgatory=_k(r.purgatory, False))
    same_epoch = And(r.leader == b, r.leader_epoch == a.leader_epoch)
    kept = reappointed
    if cfg.variant.missed_epoch_resets_followers:
        forgot = dataclasses.replace(
            reappointed, remote_leo=fresh.remote_leo, remote_be=fresh.remote_be, lag=fresh.lag)
        kept = ite(a.leader_epoch > r.leader_epoch + 1, forgot, reappointed)
    new_r = ite(same_epoch, viewed, ite(r.leader == b, kept, fresh))
    new_leadership = r.leader != b
    if not shape.config.leader_keeps_last_fetch:
        t = ite(new_leadership, _slot(t, b, _none_slot(t.fetches[b])), t)
    guard = And(guard, z3.Implies(z3.Not(same_epoch), fits))
    return guard, replaced_replica(t, b, advance_high_watermark(shape, new_r, b))


def BecomeFollower(shape: Shape, s: SState, a: StepArgs, b: int):
    n, rule = shape.n, shape.config.variant.truncation
    guard = _applicable(s, b, a, leads=False)
    r = s.replicas[b]
    t = _lai_removed(s, b, a)
    leader = s.hist_leader[a.partition_epoch]
    new_leadership = Or(r.leader != leader, r.leader_epoch != a.leader_epoch)
    leader_changed = r.leader != leader
    nr = _reset_view(dataclasses.replace(
        r, leader=leader, leader_epoch=a.leader_epoch,
        isr=tuple(s.hist_isr[x][a.partition_epoch] for x in range(n)),
        partition_epoch=a.partition_epoch))
    if rule == "high-watermark":
        nr = ite(And(leader_changed, leader != NO_LEADER),
                 truncated_to(nr, nr.high_watermark), nr)
    elif rule in ("epoch-end", "epoch-end-279"):
        nr = dataclasses.replace(nr, truncation_pending=z3.If(
            new_leadership, r.log_len > 0, r.truncation_pending))
    return guard, replaced_replica(t, b, nr)


def ProducerSend(shape: Shape, s: SState, a: StepArgs):
    guard = And(_bound(shape, s.next_value <= shape.config.max_records),
                   s.c_leader != NO_LEADER)
    return guard, dataclasses.replace(s, produce=_store(s.produce, s.next_value, s.c_leader),
                                      next_value=s.next_value + 1)


def ConsumerRead(shape: Shape, s: SState, a: StepArgs, leader: int):
    r = s.replicas[leader]
    o = a.witness
    unseen = And(0 <= o, o < r.high_watermark, z3.Not(And(
        s.consumed[r.log_value[o]], s.value_offset[r.log_value[o]] == o)))
    guard = And(s.c_leader == leader, s.alive[leader], r.leader == leader, unseen)
    v = z3.Int("consumer_v")
    vo = s.value_offset[v]
    seen = And(0 <= vo, vo < r.high_watermark, r.log_value[vo] == v)
    return guard, dataclasses.replace(s, consumed=_map_array(
        shape, s.consumed, v, Or(s.consumed[v], seen)))


def LeaderAppend(shape: Shape, s: SState, a: StepArgs, b: int):
    cfg = shape.config
    guard = And(s.produce[a.value] == b, s.alive[b])
    t = dataclasses.replace(s, produce=_store(s.produce, a.value, UNKNOWN))
    r = s.replicas[b]
    offset = r.log_len
    appended = dataclasses.replace(
        r, log_len=r.log_len + 1, log_epoch=_store(r.log_epoch, offset, r.leader_epoch),
        log_value=_store(r.log_value, offset, a.value))
    fits, appended = assign_epoch(appended, r.leader_epoch, offset)
    appended = _flush_policy(shape, appended)
    if cfg.acks == "all":
        appended = dataclasses.replace(
            appended, purgatory=_store(r.purgatory, offset, True),
            purgatory_value=_store(r.purgatory_value, offset, a.value))
    u = replaced_replica(t, b, advance_high_watermark(shape, appended, b))
    u = dataclasses.replace(u, value_offset=_store(s.value_offset, a.value, offset))
    if cfg.acks == "1":
        u = dataclasses.replace(u, acked=_store(s.acked, a.value, True))
    refused = r.leader != b
    if cfg.acks == "all":
        refused = Or(refused, count_true(r.isr) < cfg.min_insync_replicas)
    return And(guard, z3.Implies(z3.Not(refused), fits)), ite(refused, t, u)


def LeaderAckProduce(shape: Shape, s: SState, a: StepArgs, b: int):
    r = s.replicas[b]
    guard = And(r.purgatory[a.offset], s.alive[b], r.leader == b,
                   r.high_watermark > a.offset)
    t = replaced_replica(s, b, dataclasses.replace(r, purgatory=_store(r.purgatory, a.offset, False)))
    acked = _store(s.acked, r.purgatory_value[a.offset], True)
    too_few = count_true(r.isr) < shape.config.min_insync_replicas
    return guard, dataclasses.replace(t, acked=ite(too_few, s.acked, acked))


def _response(m: SSlot, **fields) -> SSlot:
    """A response in the slot: every FetchResponse field set (defaults as in the spec)."""
    base = dict(epoch=UNKNOWN, end_offset=UNKNOWN, error=0, rec_count=0, high_watermark=0,
                fetch_offset=UNKNOWN)
    base.update(fields)
    return dataclasses.replace(
        m, **{k: (v if isinstance(v, z3.ExprRef | FArr) else z3.IntVal(v)) for k, v in base.items()})


def LeaderHandleFetch(shape: Shape, s: SState, a: StepArgs, b: int, f: int):
    variant = shape.config.variant
    m = s.fetches[f]
    r = s.replicas[b]
    guard = And(Or(m.kind == FETCH, m.kind == EPOCH_REQ), m.leader == b, s.alive[b])

    def answer(kind: int, **fields) -> SState:
        return _slot(s, f, _response(m, kind=kind, leader=b, leader_epoch=r.leader_epoch,
                                     **fields))

    not_leader = answer(RESP_ERROR, error=ERRORS["NOT_LEADER_OR_FOLLOWER"])
    fenced = answer(RESP_ERROR, error=ERRORS["FENCED_LEADER_EPOCH"])
    unknown = answer(RESP_ERROR, error=ERRORS["UNKNOWN_LEADER_EPOCH"])
    if variant.truncation == "epoch-end":
        ep, end = m.epoch, start_offset_after_epoch(r, m.epoch)
    else:
        ep, end = end_offset_for_epoch(r, m.epoch)
    epoch_answer = answer(RESP_EPOCH, epoch=ep, end_offset=end)
    offset = m.fetch_offset
    div_e, div_end = end_offset_for_epoch(r, m.last_fetched_epoch)
    diverges = z3.BoolVal(False)
    if variant.truncation == "diverging-epoch":
        diverges = And(offset > 0, Or(div_e != m.last_fetched_epoch, div_end < offset))
    diverging = answer(RESP_DIVERGING, epoch=div_e, end_offset=div_end)
    out_of_range = answer(RESP_ERROR, error=ERRORS["OFFSET_OUT_OF_RANGE"], end_offset=r.log_len)
    caught_up = offset >= r.log_len
    nr = dataclasses.replace(
        r, remote_leo=_put(r.remote_leo, f, offset),
        remote_be=_put(r.remote_be, f, m.broker_epoch),
        lag=_put(r.lag, f, z3.If(caught_up, 0, r.lag[f])))
    nr = advance_high_watermark(shape, nr, b)
    records = replaced_replica(_slot(s, f, _response(
        m, kind=RESP_RECORDS, leader=b, leader_epoch=r.leader_epoch,
        rec_count=r.log_len - offset, rec_epoch=r.log_epoch, rec_value=r.log_value,
        high_watermark=r.high_watermark, fetch_offset=offset)), b, nr)
    fetch = ite(diverges, diverging, ite(offset > r.log_len, out_of_range, records))
    out = ite(m.kind == EPOCH_REQ, epoch_answer, fetch)
    if variant.fencing:
        out = ite(m.current_leader_epoch > r.leader_epoch, unknown, out)
        out = ite(m.current_leader_epoch < r.leader_epoch, fenced, out)
    return guard, ite(r.leader != b, not_leader, out)


def _shrink_expand_guard(shape: Shape, s: SState, b: int, f: int):
    r = s.replicas[b]
    return And(_bound(shape, s.c_pe < shape.config.max_partition_epoch),
                  s.alive[b], r.leader == b,
                  r.leader_epoch == s.c_epoch, r.partition_epoch == s.c_pe)


def _commit_isr(shape: Shape, s: SState, b: int, isr: tuple) -> SState:
    r = s.replicas[b]
    pe = s.c_pe + 1
    t = dataclasses.replace(s, c_isr=isr, c_pe=pe)
    if shape.config.eligible_leader_replicas_enable:
        # No election: leader and epoch stay, the ISR is the leader's.
        _, _, _, elr, known, _ = kip966_change(shape, s, s.registered, isr, elect_leader=False)
        t = dataclasses.replace(t, c_elr=elr, c_lkelr=known)
    # The history records the new partition state too (no request carries it: the leader
    # wrote it to the store itself), so a view's partition epoch always names an entry.
    t = _record(t, pe, s.c_leader, s.c_epoch, isr)
    nr = dataclasses.replace(r, isr=isr, partition_epoch=pe)
    return replaced_replica(t, b, advance_high_watermark(shape, nr, b))


def LeaderShrinkIsr(shape: Shape, s: SState, a: StepArgs, b: int, f: int):
    cfg = shape.config
    r = s.replicas[b]
    remote = r.remote_leo[f]
    lagging = r.lag[f] > cfg.replica_lag_time_max_ticks
    if cfg.replica_lag_max_messages is not None:
        lagging = Or(lagging, And(remote != UNKNOWN,
                                        r.log_len - remote > cfg.replica_lag_max_messages))
    guard = And(_shrink_expand_guard(shape, s, b, f), r.isr[f], remote < r.log_len, lagging)
    return guard, _commit_isr(shape, s, b, _put(r.isr, f, z3.BoolVal(False)))


def LeaderExpandIsr(shape: Shape, s: SState, a: StepArgs, b: int, f: int):
    variant = shape.config.variant
    r = s.replicas[b]
    remote = r.remote_leo[f]
    guard = [_shrink_expand_guard(shape, s, b, f), z3.Not(r.isr[f]),
             remote >= r.high_watermark, remote != UNKNOWN]
    if variant.expand_requires_epoch_start:
        guard.append(remote >= epoch_start_offset(r, r.leader_epoch))
    if variant.broker_epochs:
        guard.append(r.remote_be[f] == s.registered[f])
    return And(guard), _commit_isr(shape, s, b, _put(r.isr, f, z3.BoolVal(True)))


def FollowerSendFetch(shape: Shape, s: SState, a: StepArgs, b: int):
    r = s.replicas[b]
    m = s.fetches[b]
    guard = And(s.alive[b], r.leader != NO_LEADER, r.leader != b,
                   at_index(s.alive, r.leader), m.kind == NONE)
    epoch_request = dataclasses.replace(
        m, kind=z3.IntVal(EPOCH_REQ), leader=r.leader, epoch=latest_epoch(r),
        current_leader_epoch=r.leader_epoch)
    fetch = dataclasses.replace(
        m, kind=z3.IntVal(FETCH), leader=r.leader, fetch_offset=r.log_len,
        last_fetched_epoch=latest_epoch(r), current_leader_epoch=r.leader_epoch,
        broker_epoch=s.broker_epochs[b])
    return guard, _slot(s, b, ite(r.truncation_pending, epoch_request, fetch))


def truncate_to_epoch_answer(r: SReplica, leader_epoch, leader_end) -> tuple:
    """spec.actions._truncate_to_epoch_answer: (replica, done?)."""
    own_e, own_end = end_offset_for_epoch(r, leader_epoch)
    out = truncated_to(r, _min(leader_end, own_end))
    done = z3.BoolVal(True)
    out = ite(own_e != leader_epoch, truncated_to(r, own_end), out)
    done = z3.If(own_e != leader_epoch, False, done)
    out = ite(own_e == UNKNOWN, truncated_to(r, _min(leader_end, r.log_len)), out)
    done = z3.If(own_e == UNKNOWN, True, done)
    out = ite(leader_epoch == UNKNOWN, truncated_to(r, r.high_watermark), out)
    done = z3.If(leader_epoch == UNKNOWN, True, done)
    return out, done


def _append_records(shape: Shape, r: SReplica, m: SSlot, a: StepArgs):
    """Replica.appended for the response's records: (fits?, replica).

    The cache is assigned once per record; since record epochs never go down, that is: the
    first record's assign, then one new entry at every offset where the epoch goes up. Those
    offsets are the witnesses `a.boundaries[:a.boundary_count]`, pinned by the guard.
    """
    c = shape.cache_slots
    start, end = m.fetch_offset, m.fetch_offset + m.rec_count
    ep, k, bs = m.rec_epoch, a.boundary_count, a.boundaries
    wit = [k >= 0, k <= c]
    for j in range(c):
        lo = start if j == 0 else bs[j - 1]
        inside = And(lo < bs[j], bs[j] < end, ep[bs[j]] > ep[bs[j] - 1],
                        ep[bs[j] - 1] == ep[lo])
        wit.append(z3.Implies(j < k, inside))
    last = at_index((start,) + bs, k)
    wit.append(z3.Implies(m.rec_count > 0, ep[end - 1] == ep[last]))
    x = z3.Int("append_x")
    log = dataclasses.replace(
        r, log_len=end,
        log_epoch=_map_array(shape, r.log_epoch, x, z3.If(x < start, r.log_epoch[x], ep[x])),
        log_value=_map_array(shape, r.log_value, x,
                             z3.If(x < start, r.log_value[x], m.rec_value[x])))
    fits, first = assign_epoch(log, ep[start], start)
    base = first.cache_len
    epochs, starts = list(first.cache_epoch), list(first.cache_start)
    for i in range(c):
        for j in range(c):
            put = And(j < k, base + j == i)
            epochs[i] = z3.If(put, ep[bs[j]], epochs[i])
            starts[i] = z3.If(put, bs[j], starts[i])
    done = dataclasses.replace(first, cache_len=base + k, cache_epoch=tuple(epochs),
                               cache_start=tuple(starts))
    done = _flush_policy(shape, done)
    some = m.rec_count > 0
    ok = z3.Implies(some, And(fits, base + k <= c, *wit))
    return ok, ite(some, done, r)


def FollowerHandleFetchResponse(shape: Shape, s: SState, a: StepArgs, b: int):
    variant = shape.config.variant
    m = s.fetches[b]
    r = s.replicas[b]
    guard = And(m.kind >= RESP_RECORDS, s.alive[b])
    t = _slot(s, b, _none_slot(m))

    def done(nr: SReplica) -> SState:
        return replaced_replica(t, b, nr)

    drop = Or(m.leader != r.leader,
                 (m.leader_epoch != r.leader_epoch) if variant.fencing else z3.BoolVal(False))
    out_of_range = done(truncated_to(r, m.end_offset))
    rule = variant.truncation
    if rule == "epoch-end":
        end = z3.If(m.end_offset != UNKNOWN, m.end_offset, r.high_watermark)
        epoch_done = dataclasses.replace(truncated_to(r, end), truncation_pending=False)
    else:
        answered, finished = truncate_to_epoch_answer(r, m.epoch, m.end_offset)
        answered = dataclasses.replace(
            answered, truncation_pending=And(z3.Not(finished), answered.log_len > 0))
        by_hw = dataclasses.replace(truncated_to(r, r.high_watermark), truncation_pending=False)
        epoch_done = ite(m.epoch == UNKNOWN, by_hw, answered)
    epoch_state = ite(r.truncation_pending, done(epoch_done), t)
    diverged = done(truncate_to_epoch_answer(r, m.epoch, m.end_offset)[0])
    fits, appended = _append_records(shape, r, m, a)
    appended = dataclasses.replace(
        appended, high_watermark=_min(m.high_watermark, appended.log_len))
    records = ite(Or(r.truncation_pending, m.fetch_offset != r.log_len), t, done(appended))
    appending = And(m.kind == RESP_RECORDS, z3.Not(drop), z3.Not(r.truncation_pending),
                       m.fetch_offset == r.log_len)
    out = ite(m.kind == RESP_DIVERGING, diverged, records)
    out = ite(m.kind == RESP_EPOCH, epoch_state, out)
    out = ite(m.kind == RESP_ERROR, t, out)
    out = ite(m.error == ERRORS["OFFSET_OUT_OF_RANGE"], out_of_range, out)
    out = ite(drop, t, out)
    return And(guard, z3.Implies(appending, fits)), out


def BrokerFlush(shape: Shape, s: SState, a: StepArgs, b: int):
    r = s.replicas[b]
    guard = And(s.alive[b], r.flushed_offset < r.log_len,
                   _bound(shape, s.crashes < shape.config.max_crashes))
    return guard, replaced_replica(s, b, dataclasses.replace(r, flushed_offset=r.log_len))


def BrokerCrash(shape: Shape, s: SState, a: StepArgs, b: int):
    n = shape.n
    guard = And(s.alive[b], _bound(shape, s.crashes < shape.config.max_crashes))
    r = s.replicas[b]
    # A crash loses the unflushed records; the cache at the LEO is recovery's rule (below).
    r = ite(r.flushed_offset < r.log_len, truncated_to(r, r.flushed_offset), r)
    if shape.config.recovery_truncates_epoch_cache:
        # Recovery drops cache entries at or past the recovered log end (a prefix: starts
        # increase).
        r = dataclasses.replace(r, cache_len=count_true(
            [And(i < r.cache_len, r.cache_start[i] < r.log_len) for i in range(shape.cache_slots)]))
    r = _reset_view(dataclasses.replace(
        r, leader=z3.IntVal(NO_LEADER), leader_epoch=z3.IntVal(UNKNOWN),
        isr=(z3.BoolVal(False),) * n, partition_epoch=z3.IntVal(UNKNOWN),
        truncation_pending=z3.BoolVal(False)))
    slots = tuple(
        _none_slot(m) if f == b else ite(m.leader == b, _none_slot(m), m)
        for f, m in enumerate(s.fetches))
    v = z3.Int("crash_v")
    t = dataclasses.replace(
        replaced_replica(s, b, r), alive=_put(s.alive, b, z3.BoolVal(False)), crashes=s.crashes + 1,
        fetches=slots, lai=_put(s.lai, b, _k(s.lai[b], False)),
        produce=_map_array(shape, s.produce, v, z3.If(s.produce[v] == b, UNKNOWN, s.produce[v])))
    if shape.config.kip966_promises:
        old, o = s.replicas[b], s.value_offset[v]
        gone = And(old.flushed_offset <= o, o < old.log_len, old.log_value[o] == v)
        t = dataclasses.replace(t, lost=_put(s.lost, b, _map_array(
            shape, s.lost[b], v, Or(s.lost[b][v], gone))))
    return guard, excuse(shape, s, t)


def _register(shape: Shape, s: SState, b: int) -> SState:
    epoch = s.broker_epochs[b] + 1
    t = dataclasses.replace(s, broker_epochs=_put(s.broker_epochs, b, epoch),
                            registered=_put(s.registered, b, epoch),
                            lai=_put(s.lai, b, _store(s.lai[b], s.c_pe, True)))
    return _record(t, s.c_pe, s.c_leader, s.c_epoch, s.c_isr)


def BrokerRestart(shape: Shape, s: SState, a: StepArgs, b: int):
    guard = And(z3.Not(s.alive[b]), s.registered[b] == UNKNOWN)
    t = dataclasses.replace(s, alive=_put(s.alive, b, z3.BoolVal(True)))
    if shape.config.eligible_leader_replicas_enable:
        # Every crash is an unclean shutdown: the broker leaves the ELR as it registers again.
        change = kip966_change(shape, t, t.registered, t.c_isr, elect_leader=False,
                               unclean_shutdown=b)
        pe = t.c_pe + 1
        left = _send_lai(shape, _kip966_move(t, pe, change), pe, *change[:3])
        t = ite(s.c_elr[b], left, t)
    return guard, _register(shape, t, b)


def BrokerRegister(shape: Shape, s: SState, a: StepArgs, b: int):
    return And(s.alive[b], s.registered[b] == UNKNOWN), _register(shape, s, b)


def Tick(shape: Shape, s: SState, a: StepArgs):
    cap = shape.config.replica_lag_time_max_ticks + 1
    t = s
    for b in range(shape.n):
        r = s.replicas[b]
        aging = And(s.alive[b], r.leader == b, r.side)
        lag = tuple(r.lag[f] if f == b else z3.If(aging, _min(r.lag[f] + 1, cap), r.lag[f])
                    for f in range(shape.n))
        t = replaced_replica(t, b, dataclasses.replace(r, lag=lag))
    guard = _bound(shape, s.ticks < shape.config.max_ticks)
    return guard, dataclasses.replace(t, ticks=s.ticks + 1)


# ------------------------------------------------------------------------------------------
# The action table: one entry per (action, broker arguments).


@dataclass(frozen=True)
class ActionInstance:
    """An action with its broker ids fixed; the remaining arguments come from `StepArgs`."""

    name: str
    brokers: tuple  # (broker,) or (broker, follower) or ()
    builder: Callable

    def build(self, shape: Shape, s: SState, a: StepArgs):
        return self.builder(shape, s, a, *self.brokers)


def action_table(shape: Shape) -> list[ActionInstance]:
    """Every action instance, in spec.actions.ACTION_TYPES order."""
    n = range(shape.n)
    out = [ActionInstance("ControllerElectLeader", (), ControllerElectLeader)]
    out += [ActionInstance("ControllerHandleBrokerFailure", (b,), ControllerHandleBrokerFailure)
            for b in n]
    out.append(ActionInstance("ControllerElectPreferredLeader", (), ControllerElectPreferredLeader))
    out += [ActionInstance("NetworkDropLeaderAndIsr", (b,), NetworkDropLeaderAndIsr) for b in n]
    out += [ActionInstance("NetworkDropFetch", (f,), NetworkDropFetch) for f in n]
    out += [ActionInstance("BecomeLeader", (b,), BecomeLeader) for b in n]
    out += [ActionInstance("BecomeFollower", (b,), BecomeFollower) for b in n]
    # ProducerSend with an explicit target broker (a produce by stale metadata) is not in this
    # table: the explorer offers it, BMC and induction do not (docs/prove.md, "What the
    # encoding leaves out"), and the explorer's partial-order reduction makes it dependent on
    # every step.
    out.append(ActionInstance("ProducerSend", (), ProducerSend))
    # ConsumerRead's "broker" is the controller's leader, not an argument: one instance each.
    out += [ActionInstance("ConsumerRead", (b,), ConsumerRead) for b in n]
    out += [ActionInstance("LeaderAppend", (b,), LeaderAppend) for b in n]
    out += [ActionInstance("LeaderAckProduce", (b,), LeaderAckProduce) for b in n]
    pairs = [(b, f) for b, f in itertools.product(n, n) if b != f]
    out += [ActionInstance("LeaderHandleFetch", p, LeaderHandleFetch) for p in pairs]
    out += [ActionInstance("LeaderShrinkIsr", p, LeaderShrinkIsr) for p in pairs]
    out += [ActionInstance("LeaderExpandIsr", p, LeaderExpandIsr) for p in pairs]
    out += [ActionInstance("FollowerSendFetch", (b,), FollowerSendFetch) for b in n]
    out += [ActionInstance("FollowerHandleFetchResponse", (b,), FollowerHandleFetchResponse)
            for b in n]
    out += [ActionInstance("BrokerFlush", (b,), BrokerFlush) for b in n]
    out += [ActionInstance("BrokerCrash", (b,), BrokerCrash) for b in n]
    out += [ActionInstance("BrokerRestart", (b,), BrokerRestart) for b in n]
    out += [ActionInstance("BrokerRegister", (b,), BrokerRegister) for b in n]
    out.append(ActionInstance("Tick", (), Tick))
    return out


def spec_args(inst: ActionInstance, model: z3.ModelRef, a: StepArgs) -> dict[str, int]:
    """The keyword arguments of the spec action an instance stands for."""
    def val(x) -> int:
        return model.eval(x, model_completion=True).as_long()

    name, bs = inst.name, inst.brokers
    if name == "Tick":
        return {}
    if name in ("ControllerElectLeader", "ControllerElectPreferredLeader", "ProducerSend",
                "ConsumerRead"):
        return {"partition": 0}
    if name in ("ControllerHandleBrokerFailure", "BrokerCrash", "BrokerRestart",
                "BrokerRegister"):
        return {"broker": bs[0]}
    if name == "NetworkDropFetch":
        return {"partition": 0, "follower": bs[0]}
    out = {"partition": 0, "broker": bs[0]}
    if name in ("BecomeLeader", "BecomeFollower", "NetworkDropLeaderAndIsr"):
        out["leader_epoch"] = val(a.leader_epoch)
        out["partition_epoch"] = val(a.partition_epoch)
    elif name == "LeaderAppend":
        out["value"] = val(a.value)
    elif name == "LeaderAckProduce":
        out["offset"] = val(a.offset)
    elif len(bs) == 2:
        out["follower"] = bs[1]
    return out


def relation(shape: Shape, inst: ActionInstance, pre: SState, post: SState,
             a: StepArgs) -> z3.BoolRef:
    """The transition relation of one action instance: guard and frame."""
    guard, succ = inst.build(shape, pre, a)
    return And(guard, state_eq(post, succ))


def encoded(action) -> bool:
    """Whether the encoding has the spec action. A produce addressed by stale metadata
    (`ProducerSend` with a `broker`, to a broker that still believes it leads) is not encoded
    yet: BMC and induction cover the other actions only, and say so in docs/prove.md."""
    return not (action.name == "ProducerSend" and "broker" in action.args())


def instance_key(action, state: Cluster) -> tuple[str, tuple] | None:
    """(name, broker ids) of the action instance standing for a spec action in `state`, as
    `action_table` names it; None for a step the encoding lacks (see `encoded`). Read from
    the action's fields, not `args()`: the explorer's reduction asks it of every candidate."""
    name = type(action).__name__
    if name == "ConsumerRead":
        return name, (state.controller.partitions[0].leader,)
    if name in ("LeaderHandleFetch", "LeaderShrinkIsr", "LeaderExpandIsr"):
        return name, (action.broker, action.follower)
    if name == "NetworkDropFetch":
        return name, (action.follower,)
    broker = getattr(action, "broker", None)
    if name == "ProducerSend":
        return (name, ()) if broker == -1 else None
    return name, (() if broker is None else (broker,))


def instance_for(table: list, action, state: Cluster):
    """The symbolic action instance standing for a spec action in `state`."""
    key = instance_key(action, state)
    (inst,) = [i for i in table if (i.name, i.brokers) == key]
    return inst


def pin_args(a: StepArgs, action) -> list:
    """Constraints fixing the symbolic step arguments `a` to a spec action's arguments."""
    args = action.args()
    out = []
    if "leader_epoch" in args:
        out += [a.leader_epoch == args["leader_epoch"], a.partition_epoch == args["partition_epoch"]]
    if "value" in args:
        out.append(a.value == args["value"])
    if "offset" in args:
        out.append(a.offset == args["offset"])
    return out


# ------------------------------------------------------------------------------------------
# Initial state and well-formedness


def initial(shape: Shape, s: SState) -> z3.BoolRef:
    """spec.state.initial_state for partition 0 (leader 0, epoch 0, full ISR)."""
    n = shape.n
    cs = [s.c_leader == 0, s.c_epoch == 0, s.c_pe == 0, s.c_run == 0, s.unclean_elections == 0,
          s.next_value == 1, s.crashes == 0, s.expiries == 0, s.drops == 0, s.ticks == 0,
          s.produce == _k(s.produce, UNKNOWN), s.acked == _k(s.acked, False),
          s.consumed == _k(s.consumed, False), s.excused == _k(s.excused, False),
          s.hist_leader[0] == 0, s.hist_epoch[0] == 0]
    for b in range(n):
        r = s.replicas[b]
        cs += [s.alive[b], s.broker_epochs[b] == 0, s.registered[b] == 0, s.c_isr[b],
               z3.Not(s.c_elr[b]), z3.Not(s.c_lkelr[b]),
               s.hist_isr[b][0], s.lai[b] == _k(s.lai[b], False),
               s.fetches[b].kind == NONE,
               r.log_len == 0, r.high_watermark == 0, r.flushed_offset == 0, r.leader == 0,
               r.leader_epoch == 0, r.partition_epoch == 0, z3.Not(r.truncation_pending),
               r.purgatory == _k(r.purgatory, False), *r.isr]
        if shape.config.kip966_promises:
            cs.append(s.lost[b] == _k(s.lost[b], False))
        if b == 0:
            cs += [r.side, r.cache_len == 1, r.cache_epoch[0] == 0, r.cache_start[0] == 0]
            cs += [x == UNKNOWN for x in r.remote_leo + r.remote_be]
            # leader_side_state: ISR members (all of them) start caught up.
            cs += [r.lag[x] == 0 for x in range(n)]
        else:
            cs += [z3.Not(r.side), r.cache_len == 0]
    return And(cs)


# ------------------------------------------------------------------------------------------
# Concrete <-> symbolic


def represent(shape: Shape, c: Cluster, s: SState) -> z3.BoolRef:
    """Constraints saying that symbolic state `s` stands for concrete state `c`.

    Raises NotRepresentable when `c` is outside the encoding (see the module docstring).
    Array entries that `c` does not determine (beyond a log's end, unused cache slots,
    history of partition epochs no request carries) are left free.
    """
    n = shape.n
    if len(c.replicas) != 1 or len(c.alive) != n:
        raise NotRepresentable("one partition and the shape's broker count")
    cs = []
    offsets: dict[int, int] = {}

    def locate(value: int, offset: int) -> None:
        if offsets.setdefault(value, offset) != offset:
            raise NotRepresentable(f"value {value} at offsets {offsets[value]} and {offset}")

    def ints(xs, ys):
        cs.extend(eq_terms(x, y) for x, y in zip(xs, ys, strict=True))

    def log_at(e_arr, v_arr, start, records):
        for i, rec in enumerate(records):
            cs.extend([eq_terms(e_arr[start + i], rec.epoch), eq_terms(v_arr[start + i], rec.value)])
            locate(rec.value, start + i)

    for b, r in enumerate(c.replicas[0]):
        sr = s.replicas[b]
        if len(r.epoch_cache) > shape.cache_slots:
            raise NotRepresentable(f"broker {b}: {len(r.epoch_cache)} cache entries")
        cs += [eq_terms(sr.log_len, len(r.log)), eq_terms(sr.high_watermark, r.high_watermark),
               eq_terms(sr.flushed_offset, r.flushed_offset), eq_terms(sr.cache_len, len(r.epoch_cache)),
               eq_terms(sr.leader, r.leader), eq_terms(sr.leader_epoch, r.leader_epoch),
               eq_terms(sr.partition_epoch, r.partition_epoch),
               eq_terms(sr.truncation_pending, r.truncation_pending)]
        log_at(sr.log_epoch, sr.log_value, 0, r.log)
        for i, (e, o) in enumerate(r.epoch_cache):
            cs += [eq_terms(sr.cache_epoch[i], e), eq_terms(sr.cache_start[i], o)]
        cs += [eq_terms(sr.isr[x], x in r.isr) for x in range(n)]
        if list(r.isr) != sorted(set(r.isr)):
            raise NotRepresentable("an ISR view out of order")
        side = bool(r.remote_log_end_offset)
        if not (len(r.remote_log_end_offset) == len(r.remote_broker_epoch) == len(r.lag_ticks)
                == (n if side else 0)):
            raise NotRepresentable("partial leader-side state")
        cs.append(eq_terms(sr.side, side))
        if side:
            ints(sr.remote_leo, r.remote_log_end_offset)
            ints(sr.remote_be, r.remote_broker_epoch)
            ints(sr.lag, r.lag_ticks)
        pending = _k(sr.purgatory, False)
        offs = [w.offset for w in r.purgatory]
        if offs != sorted(set(offs)):
            raise NotRepresentable("purgatory out of offset order")
        for w in r.purgatory:
            pending = _store(pending, w.offset, True)
            cs.append(eq_terms(sr.purgatory_value[w.offset], w.value))
            locate(w.value, w.offset)
        cs.append(eq_terms(sr.purgatory, pending))
    ctrl = c.controller
    ps = ctrl.partitions[0]
    if list(ps.isr) != sorted(set(ps.isr)):
        raise NotRepresentable("controller ISR out of order")
    cs += [eq_terms(s.c_leader, ps.leader), eq_terms(s.c_epoch, ps.leader_epoch),
           eq_terms(s.c_pe, ps.partition_epoch),
           eq_terms(s.unclean_elections, ctrl.unclean_elections)]
    cs += [eq_terms(s.c_isr[x], x in ps.isr) for x in range(n)]
    if list(ps.elr) != sorted(set(ps.elr)) or list(ps.last_known_elr) != sorted(
            set(ps.last_known_elr)):
        raise NotRepresentable("controller ELR out of order")
    cs += [eq_terms(s.c_elr[x], x in ps.elr) for x in range(n)]
    cs += [eq_terms(s.c_lkelr[x], x in ps.last_known_elr) for x in range(n)]
    cs += [eq_terms(s.alive[b], c.alive[b]) for b in range(n)]
    ints(s.broker_epochs, c.broker_epochs)
    ints(s.registered, ctrl.registered)
    content: dict[int, tuple] = {}
    flight = {b: _k(s.lai[b], False) for b in range(n)}
    for m in c.leader_and_isr:
        key = (m.leader, m.leader_epoch, m.isr)
        if content.setdefault(m.partition_epoch, key) != key:
            raise NotRepresentable(f"two LeaderAndIsr contents at partition epoch "
                                   f"{m.partition_epoch}")
        flight[m.broker] = _store(flight[m.broker], m.partition_epoch, True)
    for pe, (leader, epoch, isr) in content.items():
        if list(isr) != sorted(set(isr)):
            raise NotRepresentable("LeaderAndIsr ISR out of order")
        cs += [eq_terms(s.hist_leader[pe], leader), eq_terms(s.hist_epoch[pe], epoch)]
        cs += [eq_terms(s.hist_isr[x][pe], x in isr) for x in range(n)]
    cs += [eq_terms(s.lai[b], flight[b]) for b in range(n)]
    for f, m in enumerate(c.fetches[0]):
        cs += _represent_slot(s.fetches[f], m, locate)
    produce = _k(s.produce, UNKNOWN)
    for req in c.produce_requests:
        produce = _store(produce, req.value, req.broker)
    cs.append(eq_terms(s.produce, produce))
    for name, items in (("acked", c.acked), ("consumed", c.consumed)):
        arr = _k(getattr(s, name), False)
        values = set()
        for w in items:
            if w.value in values:
                raise NotRepresentable(f"{name}: value {w.value} twice")
            values.add(w.value)
            arr = _store(arr, w.value, True)
            locate(w.value, w.offset)
        cs.append(getattr(s, name) == arr)
    excused = _k(s.excused, False)
    for v in c.excused:
        excused = _store(excused, v, True)
    cs.append(eq_terms(s.excused, excused))
    if shape.config.kip966_promises:
        lost = [_k(x, False) for x in s.lost]
        for value, b in c.crash_losses:
            lost[b] = _store(lost[b], value, True)
        cs += [eq_terms(x, y) for x, y in zip(s.lost, lost, strict=True)]
    elif c.crash_losses:
        raise NotRepresentable("crash losses counted where the spec counts none")
    for value, offset in offsets.items():
        cs.append(eq_terms(s.value_offset[value], offset))
    cs += [eq_terms(s.next_value, c.next_value), eq_terms(s.crashes, c.crashes),
           eq_terms(s.expiries, c.expiries), eq_terms(s.drops, c.drops), eq_terms(s.ticks, c.ticks)]
    return And(cs)


def _represent_slot(m: SSlot, x, locate) -> list:
    if x is None:
        return [eq_terms(m.kind, NONE)]
    if isinstance(x, FetchRequest):
        return [eq_terms(m.kind, FETCH), eq_terms(m.leader, x.leader), eq_terms(m.fetch_offset, x.fetch_offset),
                eq_terms(m.last_fetched_epoch, x.last_fetched_epoch),
                eq_terms(m.current_leader_epoch, x.current_leader_epoch),
                eq_terms(m.broker_epoch, x.broker_epoch)]
    if isinstance(x, EpochRequest):
        return [eq_terms(m.kind, EPOCH_REQ), eq_terms(m.leader, x.leader), eq_terms(m.epoch, x.epoch),
                eq_terms(m.current_leader_epoch, x.current_leader_epoch)]
    kind = {v: k for k, v in RESPONSE_KINDS.items()}[x.kind]
    if x.error not in ERRORS:
        raise NotRepresentable(f"error code {x.error}")
    cs = [eq_terms(m.kind, kind), eq_terms(m.leader, x.leader), eq_terms(m.leader_epoch, x.leader_epoch),
          eq_terms(m.high_watermark, x.high_watermark), eq_terms(m.fetch_offset, x.fetch_offset),
          eq_terms(m.epoch, x.epoch), eq_terms(m.end_offset, x.end_offset), eq_terms(m.error, ERRORS[x.error]),
          eq_terms(m.rec_count, len(x.records))]
    for i, rec in enumerate(x.records):
        cs += [eq_terms(m.rec_epoch[x.fetch_offset + i], rec.epoch),
               eq_terms(m.rec_value[x.fetch_offset + i], rec.value)]
        locate(rec.value, x.fetch_offset + i)
    return cs


def decode(shape: Shape, model: z3.ModelRef, s: SState) -> Cluster:
    """The concrete state a model assigns to `s` (inverse of `represent`)."""
    n = shape.n

    def iv(x) -> int:
        return model.eval(x, model_completion=True).as_long()

    def bv(x) -> bool:
        return z3.is_true(model.eval(x, model_completion=True))

    def members(bools) -> tuple[int, ...]:
        return tuple(x for x in range(n) if bv(bools[x]))

    next_value = iv(s.next_value)
    values = range(1, max(next_value, 1))
    rows = []
    lens = []
    for b in range(n):
        sr = s.replicas[b]
        length = iv(sr.log_len)
        _check_size(length, "log length")
        lens.append(length)
        log = tuple(Record(iv(sr.log_epoch[o]), iv(sr.log_value[o])) for o in range(length))
        clen = iv(sr.cache_len)
        if not 0 <= clen <= shape.cache_slots:
            raise NotRepresentable(f"cache length {clen}")
        cache = tuple((iv(sr.cache_epoch[i]), iv(sr.cache_start[i])) for i in range(clen))
        side = bv(sr.side)
        purgatory = tuple(PendingProduce(o, iv(sr.purgatory_value[o]))
                          for o in range(length) if bv(sr.purgatory[o]))
        rows.append(Replica(
            log=log, high_watermark=iv(sr.high_watermark), flushed_offset=iv(sr.flushed_offset),
            epoch_cache=cache, leader=iv(sr.leader), leader_epoch=iv(sr.leader_epoch),
            isr=members(sr.isr), partition_epoch=iv(sr.partition_epoch),
            truncation_pending=bv(sr.truncation_pending),
            remote_log_end_offset=tuple(iv(x) for x in sr.remote_leo) if side else (),
            remote_broker_epoch=tuple(iv(x) for x in sr.remote_be) if side else (),
            lag_ticks=tuple(iv(x) for x in sr.lag) if side else (),
            purgatory=purgatory))
    c_pe = iv(s.c_pe)
    _check_size(c_pe, "partition epoch")
    lai = set()
    for b in range(n):
        for pe in range(0, c_pe + 1):
            if bv(s.lai[b][pe]):
                lai.add(LeaderAndIsr(b, 0, iv(s.hist_leader[pe]), iv(s.hist_epoch[pe]),
                                     tuple(x for x in range(n) if bv(s.hist_isr[x][pe])), pe))
    fetches = tuple(_decode_slot(s.fetches[f], iv) for f in range(n))
    produce = frozenset(ProduceRequest(0, iv(s.produce[v]), v) for v in values
                        if iv(s.produce[v]) != UNKNOWN)
    acked = frozenset(Acked(0, iv(s.value_offset[v]), v) for v in values if bv(s.acked[v]))
    consumed = frozenset(Acked(0, iv(s.value_offset[v]), v) for v in values
                         if bv(s.consumed[v]))
    excused = frozenset(v for v in values if bv(s.excused[v]))
    losses = frozenset((v, b) for b, x in enumerate(s.lost) for v in values if bv(x[v]))
    return Cluster(
        replicas=(tuple(rows),), alive=tuple(bv(x) for x in s.alive),
        broker_epochs=tuple(iv(x) for x in s.broker_epochs),
        controller=Controller((PartitionState(iv(s.c_leader), iv(s.c_epoch),
                                              members(s.c_isr), c_pe, members(s.c_elr),
                                              members(s.c_lkelr)),),
                              tuple(iv(x) for x in s.registered), iv(s.unclean_elections)),
        leader_and_isr=frozenset(lai), fetches=(fetches,), produce_requests=produce,
        acked=acked, consumed=consumed, excused=excused, next_value=next_value,
        crashes=iv(s.crashes), expiries=iv(s.expiries), drops=iv(s.drops), ticks=iv(s.ticks),
        crash_losses=losses)


def decodable(shape: Shape, s: SState) -> list[z3.BoolRef]:
    """What `decode` needs of a model of `s`: sizes in range and kinds it knows.

    An induction query leaves the pre-state unconstrained, so its first model may pick a
    negative partition epoch or log length; asking for these as well gives one that decodes.
    """
    cs = [And(0 <= s.c_pe, s.c_pe <= SIZE_LIMIT)]
    for sr in s.replicas:
        cs += [And(0 <= sr.log_len, sr.log_len <= SIZE_LIMIT),
               And(0 <= sr.cache_len, sr.cache_len <= shape.cache_slots)]
    for m in s.fetches:
        cs += [And(NONE <= m.kind, m.kind <= RESP_ERROR),
               z3.Implies(m.kind == RESP_RECORDS,
                          And(0 <= m.rec_count, m.rec_count <= SIZE_LIMIT))]
    return cs


SIZE_LIMIT = 10_000


def _check_size(x: int, what: str) -> None:
    # A model of an unconstrained (induction) state could pick huge numbers; decoding them
    # would build huge tuples. Well-formedness lemmas keep real CTIs small.
    if not 0 <= x <= SIZE_LIMIT:
        raise NotRepresentable(f"{what} {x} out of the decodable range")


def _decode_slot(m: SSlot, iv):
    kind = iv(m.kind)
    if kind == NONE:
        return None
    if kind == FETCH:
        return FetchRequest(iv(m.leader), iv(m.fetch_offset), iv(m.last_fetched_epoch),
                            iv(m.current_leader_epoch), iv(m.broker_epoch))
    if kind == EPOCH_REQ:
        return EpochRequest(iv(m.leader), iv(m.epoch), iv(m.current_leader_epoch))
    if kind not in RESPONSE_KINDS:
        raise NotRepresentable(f"fetch slot kind {kind}")
    # Only a records answer carries records; the count of any other kind is a free leaf.
    start, count = iv(m.fetch_offset), iv(m.rec_count) if kind == RESP_RECORDS else 0
    _check_size(count, "record count")
    records = tuple(Record(iv(m.rec_epoch[o]), iv(m.rec_value[o]))
                    for o in range(start, start + count))
    return FetchResponse(iv(m.leader), iv(m.leader_epoch), RESPONSE_KINDS[kind], records,
                         iv(m.high_watermark), start, iv(m.epoch), iv(m.end_offset),
                         ERROR_NAMES.get(iv(m.error), "?"))


# ------------------------------------------------------------------------------------------
# Invariants (spec.invariants), each as a violation formula over one witness integer `w`
# (an offset or a value). The invariant holds when no witness violates it:
# ForAll w. Not(violation(s, w)). BMC asserts the violation itself, quantifier-free.


def is_true_leader(s: SState, b: int) -> z3.BoolRef:
    r = s.replicas[b]
    return And(s.c_leader == b, s.alive[b], r.leader == b, r.leader_epoch == s.c_epoch)


def v_HighWatermarkBelowLogEnd(shape: Shape, s: SState, w) -> z3.BoolRef:
    return Or([r.high_watermark > r.log_len for r in s.replicas])


def v_LeaderInIsr(shape: Shape, s: SState, w) -> z3.BoolRef:
    n = shape.n
    out = [And(s.c_leader != NO_LEADER, z3.Not(at_index(s.c_isr, s.c_leader)))]
    out += [And(s.alive[b], s.replicas[b].leader == b, z3.Not(s.replicas[b].isr[b]))
            for b in range(n)]
    return Or(out)


def record_differs(r1: SReplica, r2: SReplica, w) -> z3.BoolRef:
    """r2 has no record at offset w, or another one than r1's."""
    return Or(w >= r2.log_len, r1.log_epoch[w] != r2.log_epoch[w],
                 r1.log_value[w] != r2.log_value[w])


def v_NoCommittedDataLoss(shape: Shape, s: SState, w) -> z3.BoolRef:
    out = []
    for leader in range(shape.n):
        lr = s.replicas[leader]
        for m in range(shape.n):
            if m == leader:
                continue
            out.append(And(is_true_leader(s, leader), s.c_isr[m], s.alive[m], 0 <= w,
                              w < lr.high_watermark, record_differs(lr, s.replicas[m], w)))
    return Or(out)


def v_LogMatching(shape: Shape, s: SState, w) -> z3.BoolRef:
    out = []
    for b1, b2 in itertools.combinations(range(shape.n), 2):
        r1, r2 = s.replicas[b1], s.replicas[b2]
        x, y = r1.log_value[w], r2.log_value[w]
        differs = Or(r1.log_epoch[w] != r2.log_epoch[w], x != y)
        out.append(And(0 <= w, w < r1.high_watermark, w < r2.high_watermark, differs,
                          z3.Not(s.excused[x]), z3.Not(s.excused[y])))
    return Or(out)


def holds_value(s: SState, b: int, w) -> z3.BoolRef:
    """Broker b's log has value w at its offset."""
    r, o = s.replicas[b], s.value_offset[w]
    return And(0 <= o, o < r.log_len, r.log_value[o] == w)


def _leader_lacks(shape: Shape, s: SState, w) -> z3.BoolRef:
    """The true leader's log does not have value w at its offset."""
    return Or([And(is_true_leader(s, b), z3.Not(holds_value(s, b, w))) for b in range(shape.n)])


def _lost_from_leader(shape: Shape, s: SState, w, ghost) -> z3.BoolRef:
    return And(0 < w, w < s.next_value, ghost[w], z3.Not(s.excused[w]),
               _leader_lacks(shape, s, w))


def v_AckedWritesDurable(shape: Shape, s: SState, w) -> z3.BoolRef:
    return _lost_from_leader(shape, s, w, s.acked)


def _due(shape: Shape, s: SState, w) -> z3.BoolRef:
    """`w` is an acknowledged write KIP-966 promises (spec.invariants._due_writes): fewer
    than min ISR brokers lost it in crashes, and no election from outside took place."""
    if not shape.config.kip966_promises:
        return z3.BoolVal(False)
    losers = z3.Sum([z3.If(x[w], 1, 0) for x in s.lost])
    return And(0 < w, w < s.next_value, s.acked[w], s.unclean_elections == 0,
               losers < shape.config.min_insync_replicas)


def v_AckedWritesDurableKip966(shape: Shape, s: SState, w) -> z3.BoolRef:
    return And(_due(shape, s, w), _leader_lacks(shape, s, w))


def v_LeaderCandidatesComplete(shape: Shape, s: SState, w) -> z3.BoolRef:
    return And(_due(shape, s, w), Or([
        And(Or(s.c_isr[b], s.c_elr[b]), s.alive[b], z3.Not(holds_value(s, b, w)))
        for b in range(shape.n)]))


def v_ConsumerNeverSeesUncommitted(shape: Shape, s: SState, w) -> z3.BoolRef:
    return _lost_from_leader(shape, s, w, s.consumed)


def v_LeaderEpochMonotonic(shape: Shape, s: SState, w) -> z3.BoolRef:
    out = []
    for r in s.replicas:
        out.append(And(0 <= w, w + 1 < r.log_len, r.log_epoch[w] > r.log_epoch[w + 1]))
        for i in range(shape.cache_slots - 1):
            out.append(And(i + 1 < r.cache_len, Or(
                r.cache_epoch[i] >= r.cache_epoch[i + 1], r.cache_start[i] > r.cache_start[i + 1])))
        out.append(And(0 <= w, w < r.log_len, r.log_epoch[w] > s.c_epoch))
        out.append(r.leader_epoch > s.c_epoch)
    return Or(out)


def v_SingleLeaderPerEpoch(shape: Shape, s: SState, w) -> z3.BoolRef:
    out = []
    for b1, b2 in itertools.combinations(range(shape.n), 2):
        r1, r2 = s.replicas[b1], s.replicas[b2]
        out.append(And(s.alive[b1], s.alive[b2], r1.leader == b1, r2.leader == b2,
                          r1.leader_epoch == r2.leader_epoch))
    return Or(out)


def v_EligibleReplicasWellFormed(shape: Shape, s: SState, w) -> z3.BoolRef:
    """spec.invariants.EligibleReplicasWellFormed (sets of Bools cannot list a broker twice
    or one outside the partition's replicas, every broker's here)."""
    n = shape.n
    out = [And(s.c_elr[x], s.c_isr[x]) for x in range(n)]
    out.append(And(Or(s.c_elr), count_true(s.c_isr) >= shape.config.min_insync_replicas))
    if not shape.config.eligible_leader_replicas_enable:
        out += [*s.c_elr, *s.c_lkelr]
    return Or(out)


VIOLATIONS: dict[str, Callable] = {
    "HighWatermarkBelowLogEnd": v_HighWatermarkBelowLogEnd,
    "LeaderInIsr": v_LeaderInIsr,
    "NoCommittedDataLoss": v_NoCommittedDataLoss,
    "LogMatching": v_LogMatching,
    "AckedWritesDurable": v_AckedWritesDurable,
    "AckedWritesDurableKip966": v_AckedWritesDurableKip966,
    "LeaderCandidatesComplete": v_LeaderCandidatesComplete,
    "ConsumerNeverSeesUncommitted": v_ConsumerNeverSeesUncommitted,
    "LeaderEpochMonotonic": v_LeaderEpochMonotonic,
    "SingleLeaderPerEpoch": v_SingleLeaderPerEpoch,
    "EligibleReplicasWellFormed": v_EligibleReplicasWellFormed,
}
