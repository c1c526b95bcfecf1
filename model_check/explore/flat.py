"""The default model in a flat encoding: states as plain nested tuples, one successor function.

The explorer spends its time making and hashing states. The reference spec (`spec/`) makes them
as frozen dataclasses, readable and checked everywhere else; this module makes the same states
as tuples of small ints, tuples and frozensets, which Python builds and hashes several times
faster. It is a second description of the same transition system, not a new one:
`tests/test_flat.py` walks both on random paths of several configs and asserts, state by
state, the same enabled actions in the same order, the same next states (`decode` maps a flat
state back to a `Cluster`, and both hash alike) and the same invariant verdicts, and shows a
mutant failing that.

It covers the configs the explorer spends most time on: one partition replicated on every
broker, no controller failover, no KIP-966 and synchronous ISR changes. `problem(config)`
names what is outside; `KafkaModel` is used there.

A flat state is the tuple the spec's `Cluster.__hash__` hashes, built directly: every
dataclass becomes the tuple of the fields its hash covers, in order, so a flat state and the
`Cluster` it stands for have the same fingerprint. The explorer then finds the same parent
for every state and reports the same counterexample whichever encoding it searched (and the
tests compare hashes, not just decoded states). So the layout follows the spec's:

    state      = (rows, alive, broker_epochs, controller, leader_and_isr, fetch_rows,
                  produce_requests, acked, consumed, excused, next_value, crashes, expiries,
                  drops, ticks[, crash_losses])    crash_losses only once non-empty
    rows       = (replicas,)  one partition: replicas[b] is broker b's replica
    replica    = (log, high_watermark, flushed_offset, epoch_cache, leader, leader_epoch, isr,
                  partition_epoch, truncation_pending, remote_leo, remote_broker_epoch,
                  lag_ticks, purgatory)            log: ((epoch, value), ...)
    controller = (((leader, leader_epoch, isr, partition_epoch),), registered,
                  unclean_elections)
    leader_and_isr: frozenset of (broker, 0, leader, leader_epoch, isr, partition_epoch)
    fetch_rows = (fetches,): fetches[f] is 0 (none), (leader, fetch_offset, last_fetched_epoch,
                  current_leader_epoch, broker_epoch), (leader, epoch, current_leader_epoch) or
                  (leader, leader_epoch, kind, records, high_watermark, fetch_offset, epoch,
                  end_offset, error)               kind and error as ints
    produce_requests: frozenset of (0, broker, value); acked, consumed: of (0, offset, value)
    crash_losses: frozenset of (value, broker); excused: frozenset of values

Fields the spec hashes only once set (controller failover, ELR, pending ISR changes,
AlterPartition requests, seen controller epochs) stay unset in these configs, and everything
is an int, a bool, or a tuple or frozenset of them: a state hashes the same in every process.
Each handler below follows the spec function of the same name; where the spec refuses an
action the handler returns None.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import compress
from operator import is_not
from typing import Any

from model_check.explore.model import KafkaModel, core_problem
from spec.actions import (
    BecomeFollower,
    BecomeLeader,
    BrokerCrash,
    BrokerFlush,
    BrokerRegister,
    BrokerRestart,
    ConsumerRead,
    ControllerElectLeader,
    ControllerElectPreferredLeader,
    ControllerHandleBrokerFailure,
    FollowerHandleFetchResponse,
    FollowerSendFetch,
    LeaderAckProduce,
    LeaderAppend,
    LeaderExpandIsr,
    LeaderHandleFetch,
    LeaderShrinkIsr,
    NetworkDropFetch,
    NetworkDropLeaderAndIsr,
    ProducerSend,
    Tick,
)
from spec.config import Config
from spec.state import (
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
    assign_epoch,
    end_offset_for_epoch,
    start_offset_after_epoch,
)
from vocab.outcomes import KAFKA_ERROR_NUMBERS, KafkaError

# State fields (the Cluster's, in its order, as its fingerprint hashes them).
(ROWS, ALIVE, BROKER_EPOCHS, CTRL, LAI, FETCH_ROWS, PRODUCE, ACKED, CONSUMED, EXCUSED,
 NEXT_VALUE, CRASHES, EXPIRIES, DROPS, TICKS, LOSSES) = range(16)
# Replica fields.
(LOG, HW, FLUSHED, CACHE, LEADER, LEPOCH, ISR, PEPOCH, TRUNC, RLEO, RBE, LAG, PURG) = range(13)
# Fetch messages, told apart by their length; the first field is always the leader.
FETCH_LEN, EPOCH_LEN, RESPONSE_LEN = 5, 3, 9
# A response's kind, and its error as Kafka numbers it (what FetchResponse.__hash__ hashes).
RECORDS, ANSWER, DIVERGING, ERROR = 0, 1, 2, 3
_KINDS = {"records": RECORDS, "epoch": ANSWER, "diverging": DIVERGING, "error": ERROR}
_KIND_NAMES = {code: name for name, code in _KINDS.items()}
_ERRORS = {"": 0, **{str(e): n for e, n in KAFKA_ERROR_NUMBERS.items()}}
_ERROR_NAMES = {n: e for e, n in _ERRORS.items()}
OUT_OF_RANGE = KAFKA_ERROR_NUMBERS[KafkaError.OFFSET_OUT_OF_RANGE]
NOT_LEADER = KAFKA_ERROR_NUMBERS[KafkaError.NOT_LEADER_OR_FOLLOWER]
FENCED = KAFKA_ERROR_NUMBERS[KafkaError.FENCED_LEADER_EPOCH]
UNKNOWN_EPOCH = KAFKA_ERROR_NUMBERS[KafkaError.UNKNOWN_LEADER_EPOCH]
_NO_LOSSES: frozenset = frozenset()

_EMPTY_REPLICA = ((), 0, 0, (), -1, -1, (), -1, False, (), (), (), ())


def problem(config: Config) -> str | None:
    """Why the flat encoding does not cover `config` (then the explorer uses the reference
    spec), or None when it does."""
    why = core_problem(config)
    if why is not None:
        return why
    if config.variant.truncation not in ("high-watermark", "epoch-end", "epoch-end-279",
                                         "diverging-epoch"):
        return f"truncation rule {config.variant.truncation!r}"
    return None


# ------------------------------------------------------------------------------------------
# Replica helpers (spec/state.py's Replica methods on tuples; the epoch-cache answers and
# assign_epoch are spec/state.py's own functions, on the same cache tuples)


def _truncated(r: tuple, offset: int) -> tuple:
    log = r[LOG]
    if offset >= len(log):
        cache = r[CACHE]
        if cache and cache[-1][1] >= offset:
            return _put(r, CACHE, tuple(e for e in cache if e[1] < offset))
        return r
    x = list(r)
    x[LOG] = log[:offset]
    if r[HW] > offset:
        x[HW] = offset
    if r[FLUSHED] > offset:
        x[FLUSHED] = offset
    x[CACHE] = tuple(e for e in r[CACHE] if e[1] < offset)
    return tuple(x)


def _truncate_to_epoch_answer(r: tuple, leader_epoch: int, leader_end: int) -> tuple[tuple, bool]:
    if leader_epoch == -1:
        return _truncated(r, r[HW]), True
    own_epoch, own_end = end_offset_for_epoch(r[CACHE], len(r[LOG]), leader_epoch)
    if own_epoch == -1:
        return _truncated(r, min(leader_end, len(r[LOG]))), True
    if own_epoch != leader_epoch:
        return _truncated(r, own_end), False
    return _truncated(r, min(leader_end, own_end)), True


def _put(t: tuple, i: int, v: Any) -> tuple:
    x = list(t)  # one copy: faster than joining slices
    x[i] = v
    return tuple(x)


# ------------------------------------------------------------------------------------------
# Conversion


def _message(m) -> Any:
    if m is None:
        return 0
    if type(m) is FetchRequest:
        return (m.leader, m.fetch_offset, m.last_fetched_epoch, m.current_leader_epoch,
                m.broker_epoch)
    if type(m) is EpochRequest:
        return (m.leader, m.epoch, m.current_leader_epoch)
    return (m.leader, m.leader_epoch, _KINDS[m.kind],
            tuple((rec.epoch, rec.value) for rec in m.records), m.high_watermark,
            m.fetch_offset, m.epoch, m.end_offset, _ERRORS[str(m.error)])


def encode(config: Config, s: Cluster) -> tuple:
    """The flat state of a `Cluster` (of a config `problem` accepts)."""
    why = problem(config)
    if why is not None:
        raise ValueError(f"the flat encoding does not cover this config: {why}")
    ps = s.controller.partitions[0]
    replicas = tuple(
        (tuple((rec.epoch, rec.value) for rec in r.log), r.high_watermark, r.flushed_offset,
         tuple(r.epoch_cache), r.leader, r.leader_epoch, tuple(r.isr), r.partition_epoch,
         r.truncation_pending, tuple(r.remote_log_end_offset), tuple(r.remote_broker_epoch),
         tuple(r.lag_ticks), tuple((w.offset, w.value) for w in r.purgatory))
        for r in s.replicas[0])
    state = (
        (replicas,), tuple(s.alive), tuple(s.broker_epochs),
        (((ps.leader, ps.leader_epoch, tuple(ps.isr), ps.partition_epoch),),
         tuple(s.controller.registered), s.controller.unclean_elections),
        frozenset((m.broker, 0, m.leader, m.leader_epoch, tuple(m.isr), m.partition_epoch)
                  for m in s.leader_and_isr),
        (tuple(_message(m) for m in s.fetches[0]),),
        frozenset((0, m.broker, m.value) for m in s.produce_requests),
        frozenset((0, w.offset, w.value) for w in s.acked),
        frozenset((0, w.offset, w.value) for w in s.consumed),
        frozenset(s.excused), s.next_value, s.crashes, s.expiries, s.drops, s.ticks,
    )
    return (*state, frozenset(s.crash_losses)) if s.crash_losses else state


def decode(s: tuple) -> Cluster:
    """The `Cluster` a flat state stands for."""
    rows = tuple(
        Replica(log=tuple(Record(e, v) for e, v in r[LOG]), high_watermark=r[HW],
                flushed_offset=r[FLUSHED], epoch_cache=r[CACHE], leader=r[LEADER],
                leader_epoch=r[LEPOCH], isr=r[ISR], partition_epoch=r[PEPOCH],
                truncation_pending=r[TRUNC], remote_log_end_offset=r[RLEO],
                remote_broker_epoch=r[RBE], lag_ticks=r[LAG],
                purgatory=tuple(PendingProduce(o, v) for o, v in r[PURG]))
        for r in s[ROWS][0])

    def message(m):
        if not m:
            return None
        if len(m) == FETCH_LEN:
            return FetchRequest(*m)
        if len(m) == EPOCH_LEN:
            return EpochRequest(*m)
        leader, epoch, kind, records, hw, fetch_offset, e, end, error = m
        error = _ERROR_NAMES[error]
        return FetchResponse(leader, epoch, _KIND_NAMES[kind],
                             tuple(Record(a, b) for a, b in records), hw, fetch_offset, e, end,
                             KafkaError(error) if error else "")

    (ps,), registered, unclean = s[CTRL]
    return Cluster(
        replicas=(rows,),
        alive=s[ALIVE],
        broker_epochs=s[BROKER_EPOCHS],
        controller=Controller((PartitionState(*ps),), registered=registered,
                              unclean_elections=unclean),
        leader_and_isr=frozenset(LeaderAndIsr(*m) for m in s[LAI]),
        fetches=(tuple(message(m) for m in s[FETCH_ROWS][0]),),
        produce_requests=frozenset(ProduceRequest(*m) for m in s[PRODUCE]),
        acked=frozenset(Acked(*w) for w in s[ACKED]),
        consumed=frozenset(Acked(*w) for w in s[CONSUMED]),
        excused=s[EXCUSED],
        crash_losses=_losses(s),
        next_value=s[NEXT_VALUE],
        crashes=s[CRASHES],
        expiries=s[EXPIRIES],
        drops=s[DROPS],
        ticks=s[TICKS],
    )


def _losses(s: tuple) -> frozenset:
    return s[LOSSES] if len(s) > LOSSES else _NO_LOSSES


def _controller(leader: int, epoch: int, isr: tuple, pe: int, registered: tuple,
                unclean: int) -> tuple:
    return (((leader, epoch, isr, pe),), registered, unclean)


def _with_replica(s: tuple, b: int, r: tuple) -> tuple:
    x = list(s)
    x[ROWS] = (_put(s[ROWS][0], b, r),)
    return tuple(x)


def _with_fetch(s: tuple, f: int, m: Any) -> tuple:
    x = list(s)
    x[FETCH_ROWS] = (_put(s[FETCH_ROWS][0], f, m),)
    return tuple(x)


# ------------------------------------------------------------------------------------------
# The transition system


class FlatKafka:
    """`spec.actions.successors` and the invariants of `spec.invariants` for one config, on
    flat states."""

    def __init__(self, config: Config):
        why = problem(config)
        if why is not None:
            raise ValueError(f"the flat encoding does not cover this config: {why}")
        self.config = config
        self.n = config.brokers
        v = config.variant
        self.truncation = v.truncation
        self.fencing = v.fencing
        self.expand_requires_epoch_start = v.expand_requires_epoch_start
        self.broker_epochs = v.broker_epochs
        self.strict_hw = v.hw_requires_min_isr
        self.missed_resets = v.missed_epoch_resets_followers
        self.shrink_bumps = v.isr_shrink_bumps_leader_epoch
        self.min_isr = config.min_insync_replicas
        self.acks_all = config.acks == "all"
        self.acks_one = config.acks == "1"
        self.unclean = config.unclean_leader_election_enable
        self.lag_ticks_max = config.replica_lag_time_max_ticks
        self.lag_cap = config.replica_lag_time_max_ticks + 1
        self.lag_messages = config.replica_lag_max_messages
        self.flush_interval = config.log_flush_interval_messages
        self.count_losses = config.kip966_promises
        self.all_brokers = tuple(range(self.n))
        self._isr_ok: dict[tuple, bool] = {}
        # Labels are spec actions (traces, coverage and replay read them), made once each:
        # a run has few distinct ones, and making one costs more than the step it names.
        brokers = self.all_brokers
        self.l_elect, self.l_preferred = ControllerElectLeader(0), ControllerElectPreferredLeader(0)
        self.l_send, self.l_read, self.l_tick = ProducerSend(0), ConsumerRead(0), Tick()
        self.l_failure = [ControllerHandleBrokerFailure(b) for b in brokers]
        self.l_send_to = [ProducerSend(0, b) for b in brokers]
        self.l_shrink = [[LeaderShrinkIsr(0, b, f) for f in brokers] for b in brokers]
        self.l_expand = [[LeaderExpandIsr(0, b, f) for f in brokers] for b in brokers]
        self.l_handle_fetch = [[LeaderHandleFetch(0, b, f) for f in brokers] for b in brokers]
        self.l_send_fetch = [FollowerSendFetch(0, f) for f in brokers]
        self.l_handle_response = [FollowerHandleFetchResponse(0, f) for f in brokers]
        self.l_drop_fetch = [NetworkDropFetch(0, f) for f in brokers]
        self.l_flush = [BrokerFlush(0, b) for b in brokers]
        self.l_crash = [BrokerCrash(b) for b in brokers]
        self.l_register = [BrokerRegister(b) for b in brokers]
        self.l_restart = [BrokerRestart(b) for b in brokers]
        # The labels made so far, one dict per kind: successors asks `labels.get(key) or
        # self._label(kind, key)`, no call and no (kind, key) pair on the usual path.
        self._labels: dict[type, dict[tuple, Any]] = {
            kind: {} for kind in (BecomeLeader, BecomeFollower, NetworkDropLeaderAndIsr,
                                  LeaderAppend, LeaderAckProduce)}

    def _label(self, kind, key: tuple):
        """The action of `kind` for a message in flight (its tuple) or a (broker, offset)."""
        label = self._labels[kind].get(key)
        if label is None:
            if kind is LeaderAppend:
                label = kind(0, key[1], key[2])
            elif kind is LeaderAckProduce:
                label = kind(0, key[0], key[1])
            else:
                label = kind(0, key[0], key[3], key[5])
            self._labels[kind][key] = label
        return label

    # -- shared rules ---------------------------------------------------------------------

    def _next_hw(self, r: tuple, broker: int, remote: tuple) -> int:
        hw = r[HW]
        if r[LEADER] != broker:
            return hw
        isr = r[ISR]
        if self.strict_hw and len(isr) < self.min_isr:
            return hw
        if broker not in isr:  # never on a reachable state (LeaderInIsr): the spec's min
            candidate = min(remote[b] for b in isr)
        else:
            candidate = len(r[LOG])
            for b in isr:
                if b != broker and remote[b] < candidate:
                    candidate = remote[b]
        return candidate if candidate > hw else hw

    def _advance_hw(self, r: tuple, broker: int) -> tuple:
        hw = self._next_hw(r, broker, r[RLEO])
        return r if hw == r[HW] else _put(r, HW, hw)

    def _appended(self, r: tuple, records: tuple, hw: int | None = None) -> tuple:
        cache = r[CACHE]
        offset = len(r[LOG])
        epoch = None
        for record in records:
            if record[0] != epoch:
                epoch = record[0]
                cache = assign_epoch(cache, epoch, offset)
            offset += 1
        log = r[LOG] + records
        flushed = r[FLUSHED]
        if self.flush_interval is not None and len(log) - flushed >= self.flush_interval:
            flushed = len(log)
        x = list(r)
        x[LOG] = log
        x[CACHE] = cache
        x[FLUSHED] = flushed
        if hw is not None:
            x[HW] = min(hw, len(log))
        return tuple(x)

    def _send(self, s: tuple, leader: int, epoch: int, isr: tuple, pe: int,
              registered: tuple) -> frozenset:
        """_send_leader_and_isr to every replica: live brokers with a session."""
        alive = s[ALIVE]
        new = [(b, 0, leader, epoch, isr, pe) for b in self.all_brokers
               if registered[b] != -1 and alive[b]]
        return s[LAI].union(new) if new else s[LAI]

    def _elect(self, registered: tuple, isr: tuple) -> tuple[int, tuple, bool]:
        live = [b for b in self.all_brokers if registered[b] != -1]
        for b in live:
            if b in isr:
                return b, tuple(sorted(x for x in isr if registered[x] != -1)), False
        if self.unclean and live:
            return live[0], (live[0],), True
        return -1, isr, False

    def _lagging(self, r: tuple, f: int) -> bool:
        if r[LAG][f] > self.lag_ticks_max:
            return True
        remote, most = r[RLEO][f], self.lag_messages
        return most is not None and remote != -1 and len(r[LOG]) - remote > most

    def _excuse(self, before: tuple, s: tuple) -> tuple:
        """_excuse_lost_writes: after a crash or an expiry, committed records some ISR member
        (all of them down) lacks are excused."""
        alive, isr = s[ALIVE], s[CTRL][0][0][2]
        if any(alive[m] for m in isr):
            return s
        committed = {(o, v) for _, o, v in s[CONSUMED]}
        if self.acks_all:
            committed.update((o, v) for _, o, v in s[ACKED])
        for r in before[ROWS][0]:
            log = r[LOG]
            committed.update((o, log[o][1]) for o in range(r[HW]))
        excused = set(s[EXCUSED])
        replicas = s[ROWS][0]
        logs = [replicas[m][LOG] for m in isr]
        grown = False
        for o, v in committed:
            if v in excused:
                continue
            if not all(o < len(log) and log[o][1] == v for log in logs):
                excused.add(v)
                grown = True
        return _put(s, EXCUSED, frozenset(excused)) if grown else s

    # -- successors -----------------------------------------------------------------------

    def successors(self, s: tuple) -> Iterator[tuple[Any, tuple]]:
        """Every enabled (action, next state), in `spec.actions.successors`'s order."""
        config = self.config
        n = self.n
        ((replicas,), alive, _, ((ps,), registered, _), lai, (fetches,), produce, _, _, _,
         next_value, crashes, expiries, drops, ticks) = s[:LOSSES]
        c_leader, c_epoch, c_isr, c_pe = ps
        labels = self._labels
        leads, follows = labels[BecomeLeader], labels[BecomeFollower]
        appends, acks = labels[LeaderAppend], labels[LeaderAckProduce]
        max_epochs = config.max_leader_epochs
        if c_leader == -1:
            nxt = self._controller_elect_leader(s)
            if nxt is not None:
                yield self.l_elect, nxt
        elif c_leader != 0 and 0 in c_isr and c_epoch + 1 < max_epochs:
            nxt = self._controller_elect_preferred_leader(s)
            if nxt is not None:
                yield self.l_preferred, nxt
        expiries_left = expiries < config.max_session_expiries
        if expiries_left or False in alive:  # mostly neither, then the loop finds nothing
            for b in range(n):
                if registered[b] != -1 and (expiries_left or not alive[b]):
                    nxt = self._controller_handle_broker_failure(s, b)
                    if nxt is not None:
                        yield self.l_failure[b], nxt
        drops_left = drops < config.max_message_drops
        if lai:
            for m in sorted(lai):
                b = m[0]
                if m[2] == b:
                    nxt = self._become_leader(s, m)
                    if nxt is not None:
                        yield leads.get(m) or self._label(BecomeLeader, m), nxt
                else:
                    nxt = self._become_follower(s, m)
                    if nxt is not None:
                        yield follows.get(m) or self._label(BecomeFollower, m), nxt
                if drops_left:
                    x = list(s)
                    x[LAI] = lai - {m}
                    x[DROPS] = drops + 1
                    yield self._label(NetworkDropLeaderAndIsr, m), tuple(x)
        if next_value <= config.max_records:
            if c_leader != -1:
                yield self.l_send, self._produce(s, c_leader)
            for b in range(n):
                if b != c_leader and replicas[b][LEADER] == b:
                    yield self.l_send_to[b], self._produce(s, b)
        if produce:
            for m in sorted(produce):
                nxt = self._leader_append(s, m)
                if nxt is not None:
                    yield appends.get(m) or self._label(LeaderAppend, m), nxt
        for b in range(n):
            r = replicas[b]
            hw = r[HW]
            for offset, _ in r[PURG]:
                if offset < hw:
                    nxt = self._leader_ack_produce(s, b, offset)
                    if nxt is not None:
                        key = (b, offset)
                        yield acks.get(key) or self._label(LeaderAckProduce, key), nxt
            if r[LEADER] == b and alive[b] and r[LEPOCH] == c_epoch and r[PEPOCH] == c_pe:
                isr, remote = r[ISR], r[RLEO]
                for f in range(n):
                    if f == b:
                        continue
                    if f in isr:
                        if remote[f] < len(r[LOG]) and self._lagging(r, f):
                            nxt = self._leader_shrink_isr(s, b, f)
                            if nxt is not None:
                                yield self.l_shrink[b][f], nxt
                    elif remote[f] != -1 and remote[f] >= hw:
                        nxt = self._leader_expand_isr(s, b, f)
                        if nxt is not None:
                            yield self.l_expand[b][f], nxt
        for f in range(n):
            m = fetches[f]
            if not m:
                leader = replicas[f][LEADER]
                if alive[f] and leader != -1 and leader != f and alive[leader]:
                    yield self.l_send_fetch[f], self._follower_send_fetch(s, f)
                continue
            if len(m) == RESPONSE_LEN:
                if alive[f]:
                    yield self.l_handle_response[f], \
                        self._follower_handle_fetch_response(s, f, m)
            elif alive[m[0]]:
                yield self.l_handle_fetch[m[0]][f], self._leader_handle_fetch(s, m[0], f, m)
            if drops_left:
                x = list(s)
                x[FETCH_ROWS] = (_put(fetches, f, 0),)
                x[DROPS] = drops + 1
                yield self.l_drop_fetch[f], tuple(x)
        crashes_left = crashes < config.max_crashes
        if c_leader != -1 and replicas[c_leader][HW] > 0:
            nxt = self._consumer_read(s)
            if nxt is not None:
                yield self.l_read, nxt
        if crashes_left:
            for b in range(n):
                r = replicas[b]
                if alive[b] and r[FLUSHED] < len(r[LOG]):
                    yield self.l_flush[b], _with_replica(s, b, _put(r, FLUSHED, len(r[LOG])))
        if crashes_left or -1 in registered:  # mostly neither, then the loop finds nothing
            for b in range(n):
                if alive[b]:
                    if crashes_left:
                        yield self.l_crash[b], self._broker_crash(s, b)
                    if registered[b] == -1:
                        yield self.l_register[b], self._register(s, b)
                elif registered[b] == -1:
                    restarted = _put(s, ALIVE, _put(alive, b, True))
                    yield self.l_restart[b], self._register(restarted, b)
        if ticks < config.max_ticks:
            yield self.l_tick, self._tick(s)

    # -- handlers (spec/actions.py's of the same names) -----------------------------------

    def _controller_elect_leader(self, s: tuple) -> tuple | None:
        (ps,), registered, unclean_count = s[CTRL]
        epoch = ps[1] + 1
        if epoch >= self.config.max_leader_epochs:
            return None
        leader, isr, unclean = self._elect(registered, ps[2])
        if leader == -1:
            return None
        pe = ps[3] + 1
        x = list(s)
        x[CTRL] = _controller(leader, epoch, isr, pe, registered, unclean_count + unclean)
        x[LAI] = self._send(s, leader, epoch, isr, pe, registered)
        return tuple(x)

    def _controller_elect_preferred_leader(self, s: tuple) -> tuple | None:
        (ps,), registered, unclean = s[CTRL]
        if registered[0] == -1:
            return None
        epoch, pe = ps[1] + 1, ps[3] + 1
        x = list(s)
        x[CTRL] = _controller(0, epoch, ps[2], pe, registered, unclean)
        x[LAI] = self._send(s, 0, epoch, ps[2], pe, registered)
        return tuple(x)

    def _controller_handle_broker_failure(self, s: tuple, b: int) -> tuple | None:
        before = s
        x = list(s)
        if s[ALIVE][b]:
            if s[EXPIRIES] >= self.config.max_session_expiries:
                return None
            x[EXPIRIES] += 1
        (ps,), registered, unclean = s[CTRL]
        registered = _put(registered, b, -1)
        leader, epoch, isr, pe = ps
        if b in isr or leader == b:
            if b in isr and len(isr) > 1:
                isr = tuple(m for m in isr if m != b)
            if leader == b:
                leader, isr, elected_unclean = self._elect(registered, isr)
                unclean += elected_unclean
                epoch += 1
            elif isr != ps[2] and self.shrink_bumps:
                epoch += 1
            if epoch >= self.config.max_leader_epochs:
                return None
            if (leader, epoch, isr) != ps[:3]:
                pe += 1
                x[LAI] = self._send(s, leader, epoch, isr, pe, registered)
        x[CTRL] = _controller(leader, epoch, isr, pe, registered, unclean)
        return self._excuse(before, tuple(x))

    def _applicable(self, s: tuple, m: tuple) -> tuple | None:
        """The broker's replica when the request is newer than its view (else None)."""
        b = m[0]
        if not s[ALIVE][b]:
            return None
        r = s[ROWS][0][b]
        epoch = r[LEPOCH]  # (m[3], m[5]) <= (epoch, partition epoch), without the pairs
        if m[3] < epoch or (m[3] == epoch and m[5] <= r[PEPOCH]):
            return None
        return r

    def _become_leader(self, s: tuple, m: tuple) -> tuple | None:
        r = self._applicable(s, m)
        if r is None:
            return None
        b, _, leader, epoch, isr, pe = m
        x = list(r)
        x[LEADER], x[LEPOCH], x[ISR], x[PEPOCH] = leader, epoch, isr, pe
        fetches = s[FETCH_ROWS]
        if r[LEADER] == b and r[LEPOCH] == epoch:
            pass
        elif r[LEADER] == b:
            x[CACHE] = assign_epoch(r[CACHE], epoch, len(r[LOG]))
            if self.missed_resets and epoch > r[LEPOCH] + 1:
                self._forget_followers(x, isr)
        else:
            self._forget_followers(x, isr)
            x[CACHE] = assign_epoch(r[CACHE], epoch, len(r[LOG]))
            x[TRUNC] = False
            x[PURG] = ()
            if not self.config.leader_keeps_last_fetch:
                fetches = (_put(fetches[0], b, 0),)
        r = self._advance_hw(tuple(x), b)
        y = list(s)
        y[LAI] = s[LAI] - {m}
        y[ROWS] = (_put(s[ROWS][0], b, r),)
        y[FETCH_ROWS] = fetches
        return tuple(y)

    def _forget_followers(self, x: list, isr: tuple) -> None:
        """leader_side_state into the replica being built: remote LEOs and broker epochs
        unknown, ISR members caught up."""
        n = self.n
        x[RLEO] = (-1,) * n
        x[RBE] = (-1,) * n
        x[LAG] = tuple(0 if f in isr else self.lag_cap for f in range(n))

    def _become_follower(self, s: tuple, m: tuple) -> tuple | None:
        r = self._applicable(s, m)
        if r is None:
            return None
        b, _, leader, epoch, isr, pe = m
        new_leadership = r[LEADER] != leader or r[LEPOCH] != epoch
        leader_changed = r[LEADER] != leader
        # The fields from LEADER on: the new view, and no leader's records of its followers.
        r = r[:LEADER] + (leader, epoch, isr, pe, r[TRUNC], (), (), (), ())
        rule = self.truncation
        if rule == "high-watermark":
            if leader_changed and leader != -1:
                r = _truncated(r, r[HW])
        elif rule != "diverging-epoch" and new_leadership:
            r = _put(r, TRUNC, bool(r[LOG]))
        y = list(s)
        y[LAI] = s[LAI] - {m}
        y[ROWS] = (_put(s[ROWS][0], b, r),)
        return tuple(y)

    def _produce(self, s: tuple, broker: int) -> tuple:
        x = list(s)
        x[PRODUCE] = s[PRODUCE] | {(0, broker, s[NEXT_VALUE])}
        x[NEXT_VALUE] += 1
        return tuple(x)

    def _leader_append(self, s: tuple, m: tuple) -> tuple | None:
        _, b, value = m
        if not s[ALIVE][b]:
            return None
        x = list(s)
        x[PRODUCE] = s[PRODUCE] - {m}
        r = s[ROWS][0][b]
        if r[LEADER] != b or (self.acks_all and len(r[ISR]) < self.min_isr):
            return tuple(x)
        offset = len(r[LOG])
        r = self._appended(r, ((r[LEPOCH], value),))
        if self.acks_all:
            r = _put(r, PURG, (*r[PURG], (offset, value)))
        r = self._advance_hw(r, b)
        x[ROWS] = (_put(s[ROWS][0], b, r),)
        if self.acks_one:
            x[ACKED] = s[ACKED] | {(0, offset, value)}
        return tuple(x)

    def _leader_ack_produce(self, s: tuple, b: int, offset: int) -> tuple | None:
        r = s[ROWS][0][b]
        if not (s[ALIVE][b] and r[LEADER] == b):
            return None
        purgatory = r[PURG]
        # The spec acknowledges the first pending write at the offset.
        for w in purgatory:
            if w[0] == offset:
                break
        else:
            return None
        x = list(s)
        rest = tuple(p for p in purgatory if p != w) if len(purgatory) > 1 else ()
        x[ROWS] = (_put(s[ROWS][0], b, _put(r, PURG, rest)),)
        if len(r[ISR]) >= self.min_isr:
            x[ACKED] = s[ACKED] | {(0, offset, w[1])}
        return tuple(x)

    def _commit_isr(self, s: tuple, b: int, r: tuple, isr: tuple) -> tuple | None:
        """The leader's own ISR change, applied by the controller at once (synchronous)."""
        (ps,), registered, unclean = s[CTRL]
        if ps[3] >= self.config.max_partition_epoch:
            return None
        pe = ps[3] + 1
        x = list(r)
        x[ISR], x[PEPOCH] = isr, pe
        r = self._advance_hw(tuple(x), b)
        y = list(s)
        y[CTRL] = _controller(ps[0], ps[1], isr, pe, registered, unclean)
        y[ROWS] = (_put(s[ROWS][0], b, r),)
        return tuple(y)

    def _leader_shrink_isr(self, s: tuple, b: int, f: int) -> tuple | None:
        r = s[ROWS][0][b]
        return self._commit_isr(s, b, r, tuple(m for m in r[ISR] if m != f))

    def _leader_expand_isr(self, s: tuple, b: int, f: int) -> tuple | None:
        r = s[ROWS][0][b]
        remote = r[RLEO][f]
        if self.expand_requires_epoch_start:
            start = -1
            for cached, at in r[CACHE]:
                if cached == r[LEPOCH]:
                    start = at
                    break
            if remote < start:
                return None
        if self.broker_epochs and r[RBE][f] != s[CTRL][1][f]:
            return None
        return self._commit_isr(s, b, r, tuple(sorted((*r[ISR], f))))

    def _follower_send_fetch(self, s: tuple, f: int) -> tuple:
        r = s[ROWS][0][f]
        if r[TRUNC]:
            cache = r[CACHE]
            message = (r[LEADER], cache[-1][0] if cache else -1, r[LEPOCH])
        else:
            cache = r[CACHE]
            message = (r[LEADER], len(r[LOG]), cache[-1][0] if cache else -1, r[LEPOCH],
                       s[BROKER_EPOCHS][f])
        return _with_fetch(s, f, message)

    def _leader_handle_fetch(self, s: tuple, b: int, f: int, request: tuple) -> tuple:
        r = s[ROWS][0][b]
        epoch = r[LEPOCH]
        if r[LEADER] != b:
            return _with_fetch(s, f, (b, epoch, ERROR, (), 0, -1, -1, -1, NOT_LEADER))
        fetch = len(request) == FETCH_LEN
        if self.fencing:
            current = request[3] if fetch else request[2]
            if current < epoch:
                return _with_fetch(s, f, (b, epoch, ERROR, (), 0, -1, -1, -1, FENCED))
            if current > epoch:
                return _with_fetch(s, f, (b, epoch, ERROR, (), 0, -1, -1, -1, UNKNOWN_EPOCH))
        log = r[LOG]
        leo = len(log)
        if not fetch:
            if self.truncation == "epoch-end":
                e, end = request[1], start_offset_after_epoch(r[CACHE], leo, request[1])
            else:
                e, end = end_offset_for_epoch(r[CACHE], leo, request[1])
            return _with_fetch(s, f, (b, epoch, ANSWER, (), 0, -1, e, end, 0))
        offset = request[1]
        if self.truncation == "diverging-epoch" and offset > 0:
            e, end = end_offset_for_epoch(r[CACHE], leo, request[2])
            if e != request[2] or end < offset:
                return _with_fetch(s, f, (b, epoch, DIVERGING, (), 0, -1, e, end, 0))
        if offset > leo:
            return _with_fetch(s, f, (b, epoch, ERROR, (), 0, -1, -1, leo, OUT_OF_RANGE))
        remote = _put(r[RLEO], f, offset)
        x = list(r)
        x[RLEO] = remote
        x[RBE] = _put(r[RBE], f, request[4])
        if offset >= leo:
            x[LAG] = _put(r[LAG], f, 0)
        x[HW] = self._next_hw(r, b, remote)
        y = list(s)
        y[FETCH_ROWS] = (_put(s[FETCH_ROWS][0], f,
                              (b, epoch, RECORDS, log[offset:], r[HW], offset, -1, -1, 0)),)
        y[ROWS] = (_put(s[ROWS][0], b, tuple(x)),)
        return tuple(y)

    def _follower_handle_fetch_response(self, s: tuple, f: int, m: tuple) -> tuple:
        r = s[ROWS][0][f]
        x = list(s)
        x[FETCH_ROWS] = (_put(s[FETCH_ROWS][0], f, 0),)
        leader, epoch, kind, records, hw, fetch_offset, e, end, error = m
        if leader != r[LEADER] or (self.fencing and epoch != r[LEPOCH]):
            return tuple(x)
        if error == OUT_OF_RANGE:
            r = _truncated(r, end)
        elif kind == ERROR:
            return tuple(x)
        elif kind == ANSWER:
            if not r[TRUNC]:
                return tuple(x)
            if self.truncation == "epoch-end":
                r = _put(_truncated(r, end if end != -1 else r[HW]), TRUNC, False)
            elif e == -1:
                r = _put(_truncated(r, r[HW]), TRUNC, False)
            else:
                r, finished = _truncate_to_epoch_answer(r, e, end)
                r = _put(r, TRUNC, not finished and bool(r[LOG]))
        elif kind == DIVERGING:
            r, _ = _truncate_to_epoch_answer(r, e, end)
        else:
            if r[TRUNC] or fetch_offset != len(r[LOG]):
                return tuple(x)
            r = self._appended(r, records, hw)
        x[ROWS] = (_put(s[ROWS][0], f, r),)
        return tuple(x)

    def _consumer_read(self, s: tuple) -> tuple | None:
        leader = s[CTRL][0][0][0]
        r = s[ROWS][0][leader]
        if not s[ALIVE][leader] or r[LEADER] != leader:
            return None
        log = r[LOG]
        consumed = s[CONSUMED]
        # Mostly refused (nothing new to read): asked record by record, no set built.
        for o in range(r[HW]):
            if (0, o, log[o][1]) not in consumed:
                return _put(s, CONSUMED, consumed | {(0, o, log[o][1]) for o in range(r[HW])})
        return None

    def _broker_crash(self, s: tuple, b: int) -> tuple:
        r = s[ROWS][0][b]
        log, flushed = r[LOG], r[FLUSHED]
        x = list(s)
        if self.count_losses and flushed < len(log):
            losses = _losses(s) | {(rec[1], b) for rec in log[flushed:]}
            if len(x) > LOSSES:
                x[LOSSES] = losses
            else:
                x.append(losses)
        if flushed < len(log):  # the cache at the LEO is recovery's rule (below)
            r = _truncated(r, flushed)
        cache = r[CACHE]
        if self.config.recovery_truncates_epoch_cache:
            cache = tuple(e for e in cache if e[1] < len(r[LOG]))
        x[ROWS] = (_put(s[ROWS][0], b, (r[LOG], r[HW], r[FLUSHED], cache) + _EMPTY_REPLICA[4:]),)
        x[ALIVE] = _put(s[ALIVE], b, False)
        x[CRASHES] += 1
        x[FETCH_ROWS] = (tuple(0 if f == b or (m and m[0] == b) else m
                               for f, m in enumerate(s[FETCH_ROWS][0])),)
        lai = s[LAI]
        if lai:
            x[LAI] = frozenset(m for m in lai if m[0] != b)
        produce = s[PRODUCE]
        if produce:
            x[PRODUCE] = frozenset(m for m in produce if m[1] != b)
        return self._excuse(s, tuple(x))

    def _register(self, s: tuple, b: int) -> tuple:
        epoch = s[BROKER_EPOCHS][b] + 1
        (ps,), registered, unclean = s[CTRL]
        x = list(s)
        x[BROKER_EPOCHS] = _put(s[BROKER_EPOCHS], b, epoch)
        x[CTRL] = ((ps,), _put(registered, b, epoch), unclean)
        x[LAI] = s[LAI] | {(b, 0, *ps)}
        return tuple(x)

    def _tick(self, s: tuple) -> tuple:
        cap = self.lag_cap
        alive = s[ALIVE]
        rows = []
        for b, r in enumerate(s[ROWS][0]):
            if alive[b] and r[LEADER] == b and r[LAG]:
                r = _put(r, LAG, tuple(lag if f == b else min(lag + 1, cap)
                                       for f, lag in enumerate(r[LAG])))
            rows.append(r)
        x = list(s)
        x[ROWS] = (tuple(rows),)
        x[TICKS] += 1
        return tuple(x)

    # -- invariants: True where spec/invariants.py's of the same name fails ----------------

    def never_fail(self) -> set[str]:
        """The invariants that cannot fail in this config's flat states: the single
        controller's, and KIP-966's promises where they promise nothing (acks other than all,
        or min ISR below 2)."""
        out = {"SingleControllerPerEpoch"}
        if not self.count_losses:
            out |= {"AckedWritesDurableKip966", "LeaderCandidatesComplete"}
        return out

    def reads_same(self, before: tuple, s: tuple) -> bool:
        """Whether every field an invariant reads, but the acknowledged and consumed writes,
        is the same in `s` as in `before`. The invariants read, of a replica, its log, HW,
        epoch cache and view of the leadership. Parts are compared as objects: a step
        rebuilds only what it changes, and the explorer's states share their equal parts
        (`FlatKafkaModel.compact`)."""
        if (s[ALIVE] is not before[ALIVE] or s[CTRL][0] is not before[CTRL][0]
                or s[EXCUSED] is not before[EXCUSED] or s[CTRL][2] != before[CTRL][2]
                or _losses(s) is not _losses(before)):
            return False
        rows, was = s[ROWS][0], before[ROWS][0]
        if rows is was:
            return True
        for r, q in zip(rows, was, strict=True):
            if r is not q and (r[LOG] is not q[LOG] or r[HW] != q[HW] or r[CACHE] is not q[CACHE]
                               or r[LEADER] != q[LEADER] or r[LEPOCH] != q[LEPOCH]
                               or r[ISR] is not q[ISR]):
                return False
        return True

    def _true_leader(self, s: tuple) -> int:
        ps = s[CTRL][0][0]
        leader = ps[0]
        if leader == -1 or not s[ALIVE][leader]:
            return -1
        r = s[ROWS][0][leader]
        return leader if r[LEADER] == leader and r[LEPOCH] == ps[1] else -1

    def replica_wise(self, s: tuple) -> bool:
        """Whether one of REPLICA_WISE fails: the four in one pass over the replicas."""
        ps = s[CTRL][0][0]
        leader = ps[0]
        if leader != -1 and leader not in ps[2]:
            return True
        alive = s[ALIVE]
        current = ps[1]
        leading = None
        b = -1
        for r in s[ROWS][0]:
            b += 1
            log = r[LOG]
            if r[HW] > len(log) or r[LEPOCH] > current:
                return True
            if log:
                if len(log) > 1:
                    top = -1
                    for e, _ in log:
                        if e < top:
                            return True
                        top = e
                if log[-1][0] > current:  # the largest epoch, the log's being monotone
                    return True
            cache = r[CACHE]
            if len(cache) > 1:
                for i in range(len(cache) - 1):
                    if cache[i][0] >= cache[i + 1][0] or cache[i][1] > cache[i + 1][1]:
                        return True
            if r[LEADER] == b and alive[b]:
                if b not in r[ISR]:
                    return True
                if leading is None:
                    leading = {r[LEPOCH]}
                elif r[LEPOCH] in leading:
                    return True
                else:
                    leading.add(r[LEPOCH])
        return False

    def any_fails(self, s: tuple) -> bool:
        """Whether one of REPLICA_WISE and DATA_WISE fails (the usual search asks this of every
        state): the replicas in one pass, and the true leader found once for the three that
        read it."""
        if self.replica_wise(s) or self.EligibleReplicasWellFormed(s):
            return True
        leader = self._true_leader(s)
        if leader != -1 and (self._uncommitted(s, leader)
                             or self._lost(s, leader, s[ACKED])
                             or self._lost(s, leader, s[CONSUMED])):
            return True
        return self.LogMatching(s)

    def HighWatermarkBelowLogEnd(self, s: tuple) -> bool:
        return any(r[HW] > len(r[LOG]) for r in s[ROWS][0])

    def LeaderInIsr(self, s: tuple) -> bool:
        ps = s[CTRL][0][0]
        if ps[0] != -1 and ps[0] not in ps[2]:
            return True
        alive = s[ALIVE]
        return any(alive[b] and r[LEADER] == b and b not in r[ISR]
                   for b, r in enumerate(s[ROWS][0]))

    def NoCommittedDataLoss(self, s: tuple) -> bool:
        leader = self._true_leader(s)
        return leader != -1 and self._uncommitted(s, leader)

    def _uncommitted(self, s: tuple, leader: int) -> bool:
        """Some live ISR member's log differs from the true leader's below its HW."""
        replicas, alive = s[ROWS][0], s[ALIVE]
        lr = replicas[leader]
        hw, lead_log = lr[HW], lr[LOG]
        if not hw:
            return False
        for member in s[CTRL][0][0][2]:
            if member == leader or not alive[member]:
                continue
            log = replicas[member][LOG]
            # A follower that fetched from offset 0 holds the leader's own tuple.
            if len(log) < hw or (log is not lead_log and log[:hw] != lead_log[:hw]):
                return True
        return False

    def LogMatching(self, s: tuple) -> bool:
        replicas, excused = s[ROWS][0], s[EXCUSED]
        n = self.n
        for b1 in range(n):
            r1 = replicas[b1]
            if not r1[HW]:
                continue
            l1 = r1[LOG]
            for b2 in range(b1 + 1, n):
                r2 = replicas[b2]
                top = r2[HW]
                if not top:
                    continue
                if r1[HW] < top:
                    top = r1[HW]
                l2 = r2[LOG]
                if l1 is l2 or l1[:top] == l2[:top]:
                    continue
                for o in range(top):
                    x, y = l1[o], l2[o]
                    if x != y and x[1] not in excused and y[1] not in excused:
                        return True
        return False

    def _lost(self, s: tuple, leader: int, writes) -> bool:
        """Some write of `writes` (0, offset, value), not excused, is missing from the true
        leader's log."""
        excused = s[EXCUSED]
        log = s[ROWS][0][leader][LOG]
        size = len(log)
        for _, o, v in writes:
            if not (o < size and log[o][1] == v) and v not in excused:
                return True
        return False

    def AckedWritesDurable(self, s: tuple) -> bool:
        leader = self._true_leader(s) if s[ACKED] else -1
        return leader != -1 and self._lost(s, leader, s[ACKED])

    def ConsumerNeverSeesUncommitted(self, s: tuple) -> bool:
        leader = self._true_leader(s) if s[CONSUMED] else -1
        return leader != -1 and self._lost(s, leader, s[CONSUMED])

    def _due(self, s: tuple) -> list:
        if not self.count_losses or s[CTRL][2] or not s[ACKED]:
            return []
        losers: dict[int, int] = {}
        for value, _ in _losses(s):
            losers[value] = losers.get(value, 0) + 1
        return [w for w in s[ACKED] if losers.get(w[2], 0) < self.min_isr]

    def AckedWritesDurableKip966(self, s: tuple) -> bool:
        due = self._due(s)
        if not due:
            return False
        leader = self._true_leader(s)
        if leader == -1:
            return False
        log = s[ROWS][0][leader][LOG]
        return any(not (o < len(log) and log[o][1] == v) for _, o, v in due)

    def LeaderCandidatesComplete(self, s: tuple) -> bool:
        due = self._due(s)
        if not due:
            return False
        alive, replicas = s[ALIVE], s[ROWS][0]
        for b in s[CTRL][0][0][2]:
            if alive[b]:
                log = replicas[b][LOG]
                if any(not (o < len(log) and log[o][1] == v) for _, o, v in due):
                    return True
        return False

    def EligibleReplicasWellFormed(self, s: tuple) -> bool:
        # No ELR in these configs: what is left is an ISR of distinct replicas, of which a
        # run has few (one answer each, remembered).
        isr = s[CTRL][0][0][2]
        known = self._isr_ok.get(isr)
        if known is None:
            known = self._isr_ok[isr] = len(set(isr)) == len(isr) and all(
                0 <= b < self.n for b in isr)
        return not known

    def LeaderEpochMonotonic(self, s: tuple) -> bool:
        current = s[CTRL][0][0][1]
        for r in s[ROWS][0]:
            top = -1
            for e, _ in r[LOG]:
                if e < top:
                    return True
                top = e
            cache = r[CACHE]
            for i in range(len(cache) - 1):
                if cache[i][0] >= cache[i + 1][0] or cache[i][1] > cache[i + 1][1]:
                    return True
            if top > current or r[LEPOCH] > current:
                return True
        return False

    def SingleLeaderPerEpoch(self, s: tuple) -> bool:
        alive = s[ALIVE]
        seen = set()
        for b, r in enumerate(s[ROWS][0]):
            if alive[b] and r[LEADER] == b:
                if r[LEPOCH] in seen:
                    return True
                seen.add(r[LEPOCH])
        return False

    def SingleControllerPerEpoch(self, s: tuple) -> bool:
        # One controller that never fails: every request carries its epoch 0, and the state
        # has no other controller epoch to compare (`problem` refuses failovers).
        return False


# The invariants that read the acknowledged writes, and the consumed ones.
ACKED_WISE = ("AckedWritesDurable", "AckedWritesDurableKip966", "LeaderCandidatesComplete")
CONSUMED_WISE = ("ConsumerNeverSeesUncommitted",)
# `FlatKafka.any_fails` checks these and REPLICA_WISE in one call (the usual search).
DATA_WISE = ("NoCommittedDataLoss", "LogMatching", "AckedWritesDurable",
             "ConsumerNeverSeesUncommitted", "EligibleReplicasWellFormed")
# Checked together by `FlatKafka.replica_wise` when all are asked for.
REPLICA_WISE = ("HighWatermarkBelowLogEnd", "LeaderInIsr", "LeaderEpochMonotonic",
                "SingleLeaderPerEpoch")


def _shared(table: dict, part):
    """The one copy of `part` in `table`, made of shared parts itself. Numbers and booleans
    stay as they are: False and 0 are equal, and a state keeps the types it was built of."""
    kind = type(part)
    if kind is not tuple and kind is not frozenset:
        return part
    got = table.get(part)
    if got is not None:
        return got
    if kind is tuple:
        part = tuple([_shared(table, x) for x in part])
    else:
        part = frozenset([_shared(table, x) for x in part])
    table[part] = part
    return part


class FlatKafkaModel:
    """`KafkaModel` on flat states: the same searches, counts and counterexamples, faster.

    Invariants are asked of the flat state; one that fails is asked again of the decoded
    `Cluster` for its one-line detail (so reports read the same), and a disagreement between
    the two is an error, not a pass. Compiled, it is an extension type (flat.pxd), which
    cannot take `Model`'s defaults by inheritance: it spells out each member.
    """

    name = "kafka"

    def __init__(self, config: Config, invariants=None):
        self.reference = KafkaModel(config, invariants)
        self.config = config
        self.flat = FlatKafka(config)
        self._parts: dict = {}
        self.invariants = {name: self._check(name) for name in self.reference.invariants}
        names = [name for name in self.invariants if name not in self.flat.never_fail()]
        self._fails_acked = tuple(getattr(self.flat, name) for name in names
                                  if name in ACKED_WISE)
        self._fails_consumed = tuple(getattr(self.flat, name) for name in names
                                     if name in CONSUMED_WISE)
        if set(REPLICA_WISE) <= set(names):
            names = ["replica_wise", *(name for name in names if name not in REPLICA_WISE)]
        if set(names) == {"replica_wise", *DATA_WISE}:
            names = ["any_fails"]
        self._fails = tuple(getattr(self.flat, name) for name in names)

    def holds(self, state) -> bool:
        """Whether every invariant holds (the explorer's fast path: one call, not one per
        invariant)."""
        for fails in self._fails:
            if fails(state):
                return False
        return True

    def compact(self, before, state):
        """`state`, a successor of `before`, rebuilt of parts shared with earlier states: the
        explorer keeps a level or two of states, made of few distinct replicas, messages and
        sets, which shared stay in the processor's caches. Only what the step changed is
        looked up (the rest is `before`'s, shared already); with `before` None, every
        part."""
        table = self._parts
        x = list(state)
        changed = (range(len(state)) if before is None
                   else compress(range(len(state)), map(is_not, state, before)))
        for i in changed:
            if i != ALIVE:  # booleans, not to be swapped for the equal ints of other parts
                x[i] = table.get(x[i]) or _shared(table, x[i])
        return tuple(x)

    def holds_from(self, before, state) -> bool:
        """`holds` of `state`, a successor of `before`, in which every invariant holds: of a
        step that changed nothing the invariants read, but the acknowledged or consumed
        writes, only the invariants reading those are asked."""
        if not self.flat.reads_same(before, state):
            return self.holds(state)
        if state[ACKED] is not before[ACKED]:
            for fails in self._fails_acked:
                if fails(state):
                    return False
        if state[CONSUMED] is not before[CONSUMED]:
            for fails in self._fails_consumed:
                if fails(state):
                    return False
        return True

    def _check(self, name: str):
        fails = getattr(self.flat, name)
        detail_of = self.reference.invariants[name]

        def check(state):
            if not fails(state):
                return None
            detail = detail_of(decode(state))
            if detail is None:
                raise AssertionError(f"flat {name} fails where the spec's holds")
            return detail

        return check

    def init_states(self):
        return [encode(self.config, s) for s in self.reference.init_states()]

    def successors(self, state):
        return self.flat.successors(state)

    def action_name(self, label) -> str:
        return label.name

    def action_args(self, label) -> dict[str, Any]:
        return label.args()

    def action_names(self):
        return self.reference.action_names()

    def render(self, state) -> str:
        return self.reference.render(decode(state))

    def to_json(self, state) -> dict[str, Any]:
        return self.reference.to_json(decode(state))

    def symmetric(self) -> bool:
        return False

    def canonical(self, state):
        return state

    def config_json(self) -> dict[str, Any]:
        return self.reference.config_json()

    def decode(self, state) -> Cluster:
        return decode(state)


def search(config: Config, invariants=None, *, run=None, spec_states: bool = False,
           compiled: bool = True, **options):
    """`run(model, **options)` (the explorer's `explore`, the default, or `simulate`) on the
    flat encoding where it covers `config` and `spec_states` is off, else on the spec's own
    states. Either gives the same counts and counterexample; the result's counterexample
    holds `Cluster`s either way (reports, replays and drives read those), and its `encoding`
    says which was searched. The flat encoding runs compiled where `model_check.explore.compiled`
    has built it from this file as it is (`compiled` off: as Python), which the result's
    `compiled` says."""
    from model_check.explore.compiled import load as load_compiled
    from model_check.explore.explorer import explore

    run = run or explore
    if spec_states or problem(config) is not None:
        return run(KafkaModel(config, invariants), **options)
    module = load_compiled() if compiled else None
    model = (module.FlatKafkaModel if module else FlatKafkaModel)(config, invariants)
    result = run(model, **options)
    if result.violation is not None:
        result.violation.trace = [(label, decode(state))
                                  for label, state in result.violation.trace]
    result.encoding = "flat"
    result.compiled = module is not None
    return result
