"""The actions of the model and the one `step` function that applies them.

Theory of operation. `step(config, state, action)` applies one action and returns the next
state, or raises `NotEnabled(reason)` and changes nothing when the action's guard does not hold.
`successors(config, state)` yields every enabled (action, next state) pair in a deterministic
order; `enabled` is its first half. Everything is pure: no I/O, no clock, no randomness.

Each action is a frozen dataclass named actor+verb, with the same name in traces, scenario files
(kebab-case: `LeaderShrinkIsr` -> `leader-shrink-isr`) and reports. Its docstring has three parts:
guard, effect, and what the model abstracts away. Protocol variants change named rules
(`config.variant.<rule>`), consulted here at the one place each rule applies.

Some actions always take effect but may answer with a Kafka error code (a produce to a broker
that is no longer leader gets NOT_LEADER_OR_FOLLOWER); `step_with_outcome` returns the outcome as
data, a `vocab.outcomes.Code` and its fields, as the reference broker writes it to its traces.
A refused action raises `NotEnabled` with a `Refusal` code. English is rendered from codes only
(`vocab.outcomes.render`), so replay and tests compare codes, never text.

Deliberately left out, across the model: the controller's own failover and epoch (one logical,
never-failing controller), log retention and log start offsets, transactions and idempotent
producers, consumer groups and offsets commits, request timeouts and client retries (a request
whose answer never comes is simply never acknowledged), and the checkpointing delay of the HW
file (a restarted replica keeps min(its HW, its recovered LEO)).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, fields

from spec.config import Config
from spec.state import (
    ACCEPTED,
    NO_LEADER,
    PENDING,
    REJECTED,
    UNKNOWN,
    Acked,
    AlterPartition,
    Cluster,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    LeaderAndIsr,
    LossLedger,
    PartitionState,
    PendingProduce,
    ProduceRequest,
    Record,
    Replica,
    assign_epoch,
    fast_init,
    leader_side_state,
    replace,
)
from vocab.actions import ActionName, command
from vocab.outcomes import Code, KafkaError, Outcome, Refusal, render


class NotEnabled(Exception):
    """The action's guard does not hold in this state; the state is unchanged.

    `code` names the guard that failed (a `vocab.outcomes.Refusal`) and `fields` its values;
    `str()` renders the English in the one place it is written (`vocab.outcomes.render`).
    """

    def __init__(self, code: Refusal, **fields: object):
        super().__init__(code)
        self.code = code
        self.fields = fields

    def __str__(self) -> str:
        return render(self.code, self.fields)


class Action:
    """Base of every action. Subclasses are frozen dataclasses of small ints."""

    __slots__ = ()

    @classmethod
    def command(cls) -> str:
        """The scenario-file spelling of the action: `LeaderShrinkIsr` -> `leader-shrink-isr`."""
        return command(ActionName(cls.__name__))

    @property
    def name(self) -> str:
        return type(self).__name__

    def args(self) -> dict[str, int]:
        # `controller_epoch` is named only once a controller failover made it matter, so the
        # actions of models without failovers read as they always have.
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "controller_epoch" or getattr(self, f.name)}

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in self.args().items())
        return f"{self.name}({inner})"


# ------------------------------------------------------------------------------------------
# Controller actions


@dataclass(frozen=True, slots=True)
class ControllerElectLeader(Action):
    """The controller elects a leader for an offline partition.

    Guard: the partition has no leader, and a candidate exists: clean, the first registered
    (live, as far as the controller knows) ISR member in assignment order; unclean, only when
    `unclean.leader.election.enable` and no ISR member is registered, the first registered
    replica in assignment order. The leader-epoch bound must allow one more epoch.
    Effect: leader and leader epoch + 1 in the metadata store (ISR = registered ISR members, or
    just the new leader when unclean); LeaderAndIsr sent to every registered replica.
    With `max.controller.failovers` above 0 the controller is a broker's role and acts only
    while that broker is up with a session (ControllerHandleBrokerFailure says how the role
    moves). With 0 it is one logical process that never fails.
    """

    partition: int


@dataclass(frozen=True, slots=True)
class ControllerHandleBrokerFailure(Action):
    """The broker's metadata session expires; the controller handles every partition at once.

    Guard: the broker's session is registered, and either the broker is down (the expiry that
    follows a crash) or, for a live broker (a GC pause or lost heartbeats: it keeps running as
    a zombie until it learns otherwise), fewer than `max.session.expiries` such expiries so far.
    Effect: the session is removed. In one batch, for every partition: the broker leaves the ISR
    (unless it is the last member: Kafka keeps the last ISR member so that it can be elected
    when it returns), and where it led, a new leader is elected as in ControllerElectLeader
    (or the partition goes offline, leader -1). Changed partitions get a new partition epoch
    (and a new leader epoch where the leader changed, or on any ISR change under
    `isr_shrink_bumps_leader_epoch`) and LeaderAndIsr to the live registered replicas.
    Controller failover (`max.controller.failovers` above 0): the other controller actions need
    the controller up; this one is also how the role moves. When the expired session is the
    controller's, the first live registered broker (by id) wins the role in the store with
    controller epoch + 1, handles the failure, and sends every live registered replica the
    state of every partition (a new controller rebuilds its view from the store and tells the
    brokers). With no such broker the role stays empty until a broker registers
    (BrokerRestart, BrokerRegister), which then wins it the same way.
    Abstracts: session timeouts (the expiry may happen at any time after the crash); which
    broker wins the race for the role (the lowest id does).
    """

    broker: int


@dataclass(frozen=True, slots=True)
class ControllerElectPreferredLeader(Action):
    """Preferred-leader election: move leadership back to replica 0 of the assignment.

    Guard: the partition has a leader; replica 0 is registered, in the ISR and not the leader;
    epoch bound allows one more.
    Effect: it becomes leader with leader epoch + 1; LeaderAndIsr to registered replicas.
    Abstracts: the imbalance threshold and timer of `auto.leader.rebalance.enable`.
    """

    partition: int


@dataclass(frozen=True, slots=True)
class NetworkDropLeaderAndIsr(Action):
    """A LeaderAndIsr request is lost (or was stale and discarded by its broker).

    Guard: the request is in flight; fewer than `max.message.drops` lost so far.
    Effect: it is gone.
    Abstracts: the controller's retries (a lost request models one that never got through).
    A stale request (its epoch is not newer than the broker's view) is never applied; it stays
    in flight, harmless, unless dropped (with controller failovers modelled, the broker consumes
    it instead, as Kafka's does).
    """

    partition: int
    broker: int
    leader_epoch: int
    partition_epoch: int
    controller_epoch: int = 0


@dataclass(frozen=True, slots=True)
class NetworkDropFetch(Action):
    """A fetch (or OffsetsForLeaderEpoch) request or its answer is lost with its connection.

    Guard: something is in flight on the (partition, follower) connection; fewer than
    `max.message.drops` lost so far.
    Effect: it is gone, and the follower may fetch again.
    Abstracts: how the follower notices (a broken connection, a request timeout). A crash
    already loses what is in flight to and from the crashed broker.
    """

    partition: int
    follower: int


# ------------------------------------------------------------------------------------------
# Broker role changes


@dataclass(frozen=True, slots=True)
class BecomeLeader(Action):
    """The broker applies a LeaderAndIsr that names it leader.

    Guard: the broker is up, the request is in flight, and its (leader epoch, partition epoch)
    is newer than the broker's view.
    Effect: the view is updated. For a new leadership, the leader-epoch cache gets
    (epoch, LEO), remote follower state is reset (LEOs unknown, ISR members counted as caught
    up) and the broker's own fetcher for the partition stops: a fetch it had in flight stays
    in flight (`leader_keeps_last_fetch`; off, it is dropped), the old leader may still handle
    it, and its answer is dropped. A leader re-appointed in a new epoch keeps its follower
    state and purgatory and starts the epoch at its LEO (B11 when it missed epochs; with
    `missed_epoch_resets_followers` such a leader resets its follower state as a new leader
    does). A request that only changes the ISR of
    the current leadership updates the view and keeps the rest. The HW is left as it was: a
    new leader's HW may be stale (that is what KAFKA-7128 is about).
    With `max.controller.failovers` above 0 the broker first checks the controller epoch, as
    Kafka's ReplicaManager does: a request from an older controller epoch than it has seen is
    consumed and changes nothing else (STALE_CONTROLLER_EPOCH), and so is a request whose view
    is not newer (LEADER_AND_ISR_IGNORED); an applied request raises the epoch it has seen.
    """

    partition: int
    broker: int
    leader_epoch: int
    partition_epoch: int
    controller_epoch: int = 0


@dataclass(frozen=True, slots=True)
class BecomeFollower(Action):
    """The broker applies a LeaderAndIsr that names another broker (or nobody) leader.

    Guard: as BecomeLeader, for a request whose leader is not this broker.
    Effect: the view is updated; leader-side state and the produce purgatory are dropped (those
    writes are answered NOT_LEADER_OR_FOLLOWER). On a new leadership the variant's truncation
    rule starts: `high-watermark` truncates to the broker's own HW now, when the leader's
    broker id changed to a live leader (pre-0.11 makeFollower; a restarted broker always
    counts as a leader change, since it forgot its view); `epoch-end` and
    `epoch-end-279` mark an OffsetsForLeaderEpoch round as due before fetching;
    `diverging-epoch` does nothing here (every fetch is checked).
    Abstracts: the fetcher thread's backoff; it fetches whenever FollowerSendFetch fires.
    The controller epoch is checked as in BecomeLeader.
    """

    partition: int
    broker: int
    leader_epoch: int
    partition_epoch: int
    controller_epoch: int = 0


# ------------------------------------------------------------------------------------------
# Clients


@dataclass(frozen=True, slots=True)
class ProducerSend(Action):
    """The producer sends the next write to the partition's leader per the metadata.

    Guard: fewer than `max.records` writes sent so far; the partition has a leader.
    Effect: a produce request with a fresh value id is in flight to that broker.
    Abstracts: batching, retries and idempotence; the metadata the producer uses is the
    controller's (it can still go stale while the request is in flight).
    With `broker` set: the request goes to that broker, which must believe it leads and must
    not be the controller's leader: a producer whose metadata is from an older leadership
    than the controller's latest decision (the explorer and replay both take this branch).
    """

    partition: int
    broker: int = NO_LEADER

    def args(self) -> dict[str, int]:
        if self.broker == NO_LEADER:
            return {"partition": self.partition}
        return {"partition": self.partition, "broker": self.broker}


@dataclass(frozen=True, slots=True)
class ConsumerRead(Action):
    """The consumer reads every record below the HW of the partition's leader.

    Guard: the controller's leader is up, believes it leads, and has committed records the
    consumer has not seen.
    Effect: those (offset, value) pairs join the consumer's history.
    Abstracts: consumer offsets and groups; reads are whole-prefix reads.
    """

    partition: int


# ------------------------------------------------------------------------------------------
# Leader actions


@dataclass(frozen=True, slots=True)
class LeaderAppend(Action):
    """The broker handles a produce request.

    Guard: the request is in flight.
    Effect: if the broker is not leader in its view: NOT_LEADER_OR_FOLLOWER. With acks=all and
    |ISR| < `min.insync.replicas`: NOT_ENOUGH_REPLICAS. Otherwise the record is appended in the
    leader's epoch (flushed per `log.flush.interval.messages`); acks=1 acknowledges now, acks=all
    parks the write in purgatory, acks=0 answers nothing.
    Abstracts: record batches (one record per request).
    """

    partition: int
    broker: int
    value: int


@dataclass(frozen=True, slots=True)
class LeaderAckProduce(Action):
    """An acks=all write leaves the purgatory once the HW passes it.

    Guard: the broker leads in its view and the write's offset is below its HW.
    Effect: the producer is answered: acknowledged, or NOT_ENOUGH_REPLICAS_AFTER_APPEND when
    the ISR is now smaller than `min.insync.replicas`.
    Abstracts: request timeouts (a write that never completes is never acknowledged).
    """

    partition: int
    broker: int
    offset: int


@dataclass(frozen=True, slots=True)
class LeaderHandleFetch(Action):
    """The leader answers a follower's Fetch or OffsetsForLeaderEpoch request.

    Guard: the request is in flight and the broker it was sent to is up.
    Effect: NOT_LEADER_OR_FOLLOWER if it does not lead; with fencing, FENCED_LEADER_EPOCH or
    UNKNOWN_LEADER_EPOCH when the request's leader epoch is older or newer. An epoch request is
    answered per the truncation rule. A fetch under `diverging-epoch` whose (offset, last
    fetched epoch) is not on the leader's log gets a diverging epoch; under the older rules a
    fetch past the leader's LEO gets OFFSET_OUT_OF_RANGE. Otherwise the leader records the
    follower's LEO (and broker epoch), resets its lag clock when it has caught up, advances HW
    (min LEO over the ISR; not below min ISR under `hw_requires_min_isr`) and returns the
    records from the fetch offset with its HW.
    Abstracts: fetch size limits and long-poll timing (a parked fetch is one not yet handled).
    """

    partition: int
    broker: int
    follower: int


@dataclass(frozen=True, slots=True)
class LeaderShrinkIsr(Action):
    """The leader removes a lagging follower from the ISR.

    Guard: the broker leads; the follower is in its ISR and out of sync: behind the leader's LEO
    and not caught up for more than `replica.lag.time.max.ms` ticks (or more than
    `replica.lag.max.messages` behind); the leader's view of the partition epoch matches the
    metadata store's (compare-and-set).
    Effect: ISR without the follower in the store and the leader's view, partition epoch + 1;
    the HW may advance.
    Abstracts: the AlterPartition/ZooKeeper write is atomic with the decision.
    """

    partition: int
    broker: int
    follower: int


@dataclass(frozen=True, slots=True)
class LeaderExpandIsr(Action):
    """The leader adds a caught-up follower back into the ISR.

    Guard: the broker leads; the follower is not in its ISR; its last fetch reached the
    leader's HW and, with `expand_requires_epoch_start`, the start of the leader's epoch;
    with `broker_epochs`, that fetch came from the broker epoch the controller has registered;
    the compare-and-set on the partition epoch holds.
    Effect: ISR with the follower, partition epoch + 1.
    Abstracts: as LeaderShrinkIsr; the decision uses the follower's last fetch, which may be
    stale (that is what B7 is about).
    """

    partition: int
    broker: int
    follower: int


@dataclass(frozen=True, slots=True)
class ControllerHandleAlterPartition(Action):
    """The controller answers a leader's AlterPartition (KIP-497; `isr.changes.async`).

    Guard: the request is in flight. Effect: accepted when the partition's leader, leader epoch
    and partition epoch in the store are the request's (the compare-and-set) and, for an
    expansion under `broker_epochs`, the added follower's registered broker epoch is the one
    it fetched with: the ISR is stored with partition epoch + 1. Otherwise rejected
    (NOT_LEADER_OR_FOLLOWER, INVALID_UPDATE_VERSION, STALE_BROKER_EPOCH). The answer goes back.
    Abstracts: the metadata propagated to other brokers (the leader learns it from the answer).
    """

    partition: int
    broker: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class LeaderHandleAlterPartitionResponse(Action):
    """The leader applies the controller's answer to its AlterPartition.

    Guard: the answer is in flight and the broker is up. Effect: if the broker still leads in
    the request's epochs with that change pending: accepted, the ISR and partition epoch are
    the committed ones; rejected, the pending change is dropped (it may ask again). Otherwise
    the answer is dropped. The HW is recomputed.
    """

    partition: int
    broker: int
    leader_epoch: int
    partition_epoch: int


# ------------------------------------------------------------------------------------------
# Follower actions


@dataclass(frozen=True, slots=True)
class FollowerSendFetch(Action):
    """The follower's fetcher sends its next request to the leader in its view.

    Guard: the broker is up, follows a leader that is up, and has nothing in flight on that
    connection.
    Effect: with an OffsetsForLeaderEpoch round due: an epoch request for its latest epoch;
    otherwise a fetch (offset = LEO, last fetched epoch, current leader epoch, broker epoch).
    Abstracts: fetch sessions and backoff.
    """

    partition: int
    broker: int


@dataclass(frozen=True, slots=True)
class FollowerHandleFetchResponse(Action):
    """The follower applies the leader's answer.

    Guard: a response is in flight to the broker and it is up.
    Effect: a response from a broker it no longer follows (or, with fencing, from another
    epoch), or for a fetch offset that is no longer its LEO, is dropped. Error codes change
    nothing. An epoch answer or diverging epoch truncates per the variant's rule;
    OFFSET_OUT_OF_RANGE truncates to the leader's LEO. Records are appended (flushed per policy)
    and HW = min(leader HW, LEO).
    Abstracts: partial fetches (all records up to the leader's LEO arrive at once).
    """

    partition: int
    broker: int


# ------------------------------------------------------------------------------------------
# Broker life cycle and time


@dataclass(frozen=True, slots=True)
class BrokerFlush(Action):
    """The broker's log is flushed to disk (the flush scheduler or the OS writing back).

    Guard: the replica is up and has unflushed records. Effect: flushed offset = LEO.
    Abstracts: flush timing; `log.flush.interval.messages` flushes on append besides.
    """

    partition: int
    broker: int


@dataclass(frozen=True, slots=True)
class BrokerCrash(Action):
    """The broker crashes (kill -9, power loss).

    Guard: it is up; fewer than `max.crashes` crashes so far.
    Effect: every replica's log is cut to its flushed offset; its view, leader-side state and
    purgatory are lost; messages to and from it are lost. Ghost: when every ISR member is now
    down, committed writes that any of them lost are marked excused (Kafka's guarantee, "as
    long as one in-sync replica is alive", no longer covers them).
    Abstracts: torn records (a crash cuts between records).
    """

    broker: int


@dataclass(frozen=True, slots=True)
class BrokerRestart(Action):
    """The broker restarts and registers a new session with a new broker epoch.

    Guard: it is down and the controller has handled its failure (the old session is gone).
    Effect: up with broker epoch + 1 and an empty view; the controller sends it LeaderAndIsr
    for every partition. Recovery does not truncate: the truncation rule runs when the broker
    becomes follower (BecomeFollower).
    Abstracts: log recovery's scanning; the HW checkpoint is assumed current.
    """

    broker: int


@dataclass(frozen=True, slots=True)
class BrokerRegister(Action):
    """A live broker whose session expired registers a new one, with a new broker epoch.

    Guard: the broker is up and has no session.
    Effect: broker epoch + 1, registered; the controller sends it LeaderAndIsr for every
    partition (as on startup).
    Abstracts: how long the broker takes to notice the expiry.
    """

    broker: int


@dataclass(frozen=True, slots=True)
class Tick(Action):
    """Time passes: every leader's lag clock for each follower ages by one tick.

    Guard: fewer than `max.ticks` ticks so far. Effect: lag ages + 1 (capped once lagging).
    Abstracts: real time; a tick is one `replica.lag.time.max.ms` unit.
    """


ACTION_TYPES: tuple[type[Action], ...] = (
    ControllerElectLeader,
    ControllerHandleBrokerFailure,
    ControllerElectPreferredLeader,
    NetworkDropLeaderAndIsr,
    NetworkDropFetch,
    BecomeLeader,
    BecomeFollower,
    ProducerSend,
    ConsumerRead,
    LeaderAppend,
    LeaderAckProduce,
    LeaderHandleFetch,
    LeaderShrinkIsr,
    LeaderExpandIsr,
    ControllerHandleAlterPartition,
    LeaderHandleAlterPartitionResponse,
    FollowerSendFetch,
    FollowerHandleFetchResponse,
    BrokerFlush,
    BrokerCrash,
    BrokerRestart,
    BrokerRegister,
    Tick,
)
ASYNC_ISR_ACTIONS = (ControllerHandleAlterPartition, LeaderHandleAlterPartitionResponse)
for _type in ACTION_TYPES:
    fast_init(_type)
ACTIONS_BY_NAME: dict[str, type[Action]] = {t.__name__: t for t in ACTION_TYPES}
ACTIONS_BY_COMMAND: dict[str, type[Action]] = {t.command(): t for t in ACTION_TYPES}


# ------------------------------------------------------------------------------------------
# Shared rules


def _require(condition: bool, code: Refusal, **fields: object) -> None:
    if not condition:
        raise NotEnabled(code, **fields)


# The guards of the actions replay steps most (fetches, produces) are spelled out as
# `if ...: raise NotEnabled(...)`: `_require` looks up its Refusal member and builds its fields
# on every call (a StrEnum member looked up on its class costs as much as a dict lookup).
_REQUESTS = (FetchRequest, EpochRequest)


# Asked on every step (replay checks every argument a trace names): the fields of the refusal
# are built only when it is raised.
def _check_partition(config: Config, partition: int) -> None:
    if not 0 <= partition < config.partitions:
        raise NotEnabled(Refusal.NO_SUCH_PARTITION, partition=partition)


def _check_broker(config: Config, broker: int) -> None:
    if not 0 <= broker < config.brokers:
        raise NotEnabled(Refusal.NO_SUCH_BROKER, broker=broker)


def _advance_high_watermark(config: Config, replica: Replica, broker: int) -> Replica:
    """Leader HW = min LEO over its ISR (own LEO, followers' last fetch offsets); never lower.

    Under `hw_requires_min_isr` the HW does not move while the ISR is below min ISR; KIP-966
    requires that rule, so ELR turns it on in every variant.
    """
    hw = next_high_watermark(config, replica, broker, replica.remote_log_end_offset)
    return replica if hw == replica.high_watermark else replace(replica, high_watermark=hw)


def next_high_watermark(config: Config, replica: Replica, broker: int,
                         remote: tuple[int, ...]) -> int:
    """The HW `_advance_high_watermark` gives `replica`, with `remote` as the followers' LEOs
    (a fetch changes them and the HW in one copy of the replica)."""
    if replica.leader != broker:
        return replica.high_watermark
    strict = config.variant.hw_requires_min_isr or config.eligible_leader_replicas_enable
    if strict and len(replica.isr) < config.min_insync_replicas:
        return replica.high_watermark
    isr = replica.isr
    if replica.pending_isr is not None:
        # KIP-497: the maximal ISR (members and requested additions) while a change is
        # pending; B6 counts only the requested one.
        isr = (replica.pending_isr if config.hw_over_requested_isr
               else tuple(sorted(set(isr) | set(replica.pending_isr))))
    candidate = min(replica.log_end_offset if b == broker else remote[b] for b in isr)
    return max(candidate, replica.high_watermark)


def _send_leader_and_isr(
    config: Config, state: Cluster, partition: int, ps: PartitionState, to: tuple[int, ...]
) -> frozenset[LeaderAndIsr]:
    messages = set(state.leader_and_isr)
    c = state.controller
    for broker in to:
        # A request to a broker that is down is lost with its connection.
        if c.registered[broker] != UNKNOWN and state.alive[broker]:
            messages.add(LeaderAndIsr(broker, partition, ps.leader, ps.leader_epoch, ps.isr,
                                      ps.partition_epoch, c.active, c.epoch))
    return frozenset(messages)


# Controller failover ---------------------------------------------------------------------------
# With `max.controller.failovers` above 0 the controller is the role of broker
# `controller.active`; it acts only while that broker is up with a session.


def _controller_down(config: Config, s: Cluster) -> bool:
    if not config.max_controller_failovers:
        return False
    c = s.controller
    return not s.alive[c.active] or c.registered[c.active] == UNKNOWN


def _require_controller(config: Config, s: Cluster) -> None:
    if _controller_down(config, s):
        raise NotEnabled(Refusal.NO_CONTROLLER, broker=s.controller.active)


def _take_over(config: Config, s: Cluster, broker: int) -> Cluster:
    """`broker` wins the controller role in the store, in the next controller epoch."""
    c = s.controller
    _require(c.epoch < config.max_controller_failovers, Refusal.CONTROLLER_FAILOVERS_BOUND)
    return replace(s, controller=replace(c, active=broker, epoch=c.epoch + 1))


def _announce(config: Config, s: Cluster) -> Cluster:
    """A new controller has only the store: it sends every live registered replica the state
    of every partition (Kafka's controller does so on failover)."""
    for p, ps in enumerate(s.controller.partitions):
        s = replace(s, leader_and_isr=_send_leader_and_isr(config, s, p, ps, config.assignment(p)))
    return s


def _controller_fields(s: Cluster) -> dict:
    return {"controller": s.controller.active, "controller_epoch": s.controller.epoch}


def _see_controller_epoch(s: Cluster, broker: int, epoch: int) -> Cluster:
    seen = s.controller_epochs or (0,) * len(s.alive)
    if epoch <= seen[broker]:
        return s
    return replace(s, controller_epochs=seen[:broker] + (epoch,) + seen[broker + 1:])


def _unapplied_leader_and_isr(config: Config, s: Cluster, a, m: LeaderAndIsr):
    """With controller failovers modelled, a request the broker consumes without applying:
    (next state, outcome); else None. Kafka's ReplicaManager checks the controller epoch of
    the whole request first, then the leader epoch of each partition."""
    if not config.max_controller_failovers:
        return None
    seen = s.controller_epoch_seen(a.broker)
    rest = s.leader_and_isr - {m}
    if m.controller_epoch < seen:
        return replace(s, leader_and_isr=rest), Outcome(
            Code.STALE_CONTROLLER_EPOCH, controller_epoch=m.controller_epoch, seen=seen)
    r = s.replica(a.partition, a.broker)
    if (m.leader_epoch, m.partition_epoch) <= (r.leader_epoch, r.partition_epoch):
        s = _see_controller_epoch(replace(s, leader_and_isr=rest), a.broker, m.controller_epoch)
        return s, Outcome(Code.LEADER_AND_ISR_IGNORED, leader_epoch=m.leader_epoch,
                          partition_epoch=m.partition_epoch, view_leader_epoch=r.leader_epoch,
                          view_partition_epoch=r.partition_epoch)
    return None


def _elect(
    config: Config, registered: tuple[int, ...], partition: int, isr: tuple[int, ...]
) -> tuple[int, tuple[int, ...], bool]:
    """The controller's election rule: (leader, new ISR, unclean?) or (NO_LEADER, isr, False)."""
    assignment = config.assignment(partition)
    live = [b for b in assignment if registered[b] != UNKNOWN]
    for broker in live:
        if broker in isr:
            return broker, tuple(sorted(b for b in isr if registered[b] != UNKNOWN)), False
    if config.unclean_leader_election_enable and live:
        return live[0], (live[0],), True
    return NO_LEADER, isr, False


# KIP-966 --------------------------------------------------------------------------------------
# With `eligible.leader.replicas.enable`, every change to a partition goes through one function,
# `_kip966_change`, in the order of Kafka's PartitionChangeBuilder.build: compute the ELR for
# the target ISR, try an election, then keep the last known leader.

CLEAN, FROM_ELR, LAST_KNOWN, UNCLEAN = "clean", "elr", "last-known", "unclean"


def _kip966_elr(config: Config, ps: PartitionState, isr: tuple[int, ...],
                unclean_shutdown: tuple[int, ...] = ()) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(ELR, last known ELR) for a change of `ps` to `isr`. At or above min ISR both are
    cleared; below it, the old ISR and ELR, minus the new ISR and any broker that came back
    from an unclean shutdown, are eligible (strict min ISR kept the HW from passing them)."""
    if len(isr) >= config.min_insync_replicas:
        return (), ()
    candidates = set(ps.elr) | set(ps.isr)
    elr = tuple(sorted(b for b in candidates if b not in isr and b not in unclean_shutdown))
    last_known = tuple(sorted((candidates | set(ps.last_known_elr)) - set(isr) - set(elr)))
    return elr, last_known


def _kip966_elect(config: Config, registered: tuple[int, ...], partition: int,
                  ps: PartitionState, isr: tuple[int, ...], elr: tuple[int, ...]):
    """PartitionChangeBuilder's electAnyLeader: (leader, how) or (NO_LEADER, None).

    The current leader stays if still valid; else the first valid replica in assignment order,
    valid meaning registered and in the ISR, or in the ELR when the ISR is empty; else the last
    known leader when ISR and ELR are empty and it is the only one recorded (Kafka's source
    does not require it to be registered: its check only logs); else unclean if enabled.
    """

    def valid(b: int) -> bool:
        return registered[b] != UNKNOWN and (b in isr or (not isr and b in elr))

    if ps.leader != NO_LEADER and valid(ps.leader):
        return ps.leader, None
    assignment = config.assignment(partition)
    for b in assignment:
        if valid(b):
            return b, (FROM_ELR if b in elr else CLEAN)
    if (config.last_known_leader_election_enable and not isr and not elr
            and len(ps.last_known_elr) == 1):
        return ps.last_known_elr[0], LAST_KNOWN
    if config.unclean_leader_election_enable:
        for b in assignment:
            if registered[b] != UNKNOWN:
                return b, UNCLEAN
    return NO_LEADER, None


def _kip966_change(config: Config, registered: tuple[int, ...], partition: int,
                   ps: PartitionState, isr: tuple[int, ...], elect: bool,
                   unclean_shutdown: tuple[int, ...] = ()):
    """The partition after a change to `isr` under KIP-966: (new state, how elected or None).

    `elect` runs the election (a failed leader, an offline partition); otherwise the leader is
    kept. The leader epoch grows when the leader changes (to nobody too).
    """
    elr, last_known = _kip966_elr(config, ps, isr, unclean_shutdown)
    leader, how = ps.leader, None
    if elect:
        leader, how = _kip966_elect(config, registered, partition, ps, isr, elr)
    if how == FROM_ELR:
        isr, elr = (leader,), tuple(b for b in elr if b != leader)
    elif how in (LAST_KNOWN, UNCLEAN):
        isr, elr, last_known = (leader,), (), ()
    if config.last_known_leader_election_enable:
        # The field then holds the last known leader only: set when the ISR first empties,
        # kept while the partition has no leader, cleared once it has one.
        if not isr and ps.leader != NO_LEADER:
            last_known = (ps.leader,)
        elif leader != NO_LEADER:
            last_known = ()
        else:
            last_known = ps.last_known_elr
    epoch = ps.leader_epoch + (leader != ps.leader)
    new = PartitionState(leader, epoch, tuple(sorted(isr)), ps.partition_epoch + 1, elr,
                         last_known)
    return new, how


def truncate_to_epoch_answer(
    replica: Replica, leader_epoch: int, leader_end: int
) -> tuple[Replica, bool]:
    """KIP-279 follower rule on a (leader epoch, end offset) answer: (new replica, done?)."""
    if leader_epoch == UNKNOWN:
        # Undefined answer (we asked above the leader's latest epoch): fall back to our HW.
        return replica.truncated_to(replica.high_watermark), True
    own_epoch, own_end = replica.end_offset_for_epoch(leader_epoch)
    if own_epoch == UNKNOWN:
        return replica.truncated_to(min(leader_end, replica.log_end_offset)), True
    if own_epoch != leader_epoch:
        # We never had the leader's epoch: cut to the end of our own epoch below it, ask again.
        return replica.truncated_to(own_end), False
    return replica.truncated_to(min(leader_end, own_end)), True


# ------------------------------------------------------------------------------------------
# Handlers: each returns (next state, outcome) or raises NotEnabled.


def _controller_elect_leader(config: Config, s: Cluster, a: ControllerElectLeader):
    _check_partition(config, a.partition)
    _require_controller(config, s)
    ps = s.controller.partitions[a.partition]
    _require(ps.leader == NO_LEADER, Refusal.HAS_LEADER, partition=a.partition, leader=ps.leader)
    _require(ps.leader_epoch + 1 < config.max_leader_epochs, Refusal.LEADER_EPOCH_BOUND)
    if config.eligible_leader_replicas_enable:
        return _kip966_elect_leader(config, s, a, ps)
    leader, isr, unclean = _elect(config, s.controller.registered, a.partition, ps.isr)
    _require(leader != NO_LEADER, Refusal.NO_LIVE_REPLICA if config.unclean_leader_election_enable
             else Refusal.NO_LIVE_ISR_REPLICA)
    new = PartitionState(leader, ps.leader_epoch + 1, isr, ps.partition_epoch + 1)
    s = s.with_partition_state(a.partition, new)
    s = replace(
        s,
        leader_and_isr=_send_leader_and_isr(config, s, a.partition, new, config.assignment(a.partition)),
    )
    if unclean:
        s = replace(s, controller=replace(s.controller, unclean_elections=s.controller.unclean_elections + 1))
    code = Code.ELECTED_UNCLEAN if unclean else Code.ELECTED_CLEAN
    return s, Outcome(code, leader=leader, leader_epoch=new.leader_epoch)


_ELECTION_CODES = {CLEAN: Code.ELECTED_CLEAN, FROM_ELR: Code.ELECTED_ELR,
                   LAST_KNOWN: Code.ELECTED_LAST_KNOWN_LEADER, UNCLEAN: Code.ELECTED_UNCLEAN}


def _kip966_elect_leader(config: Config, s: Cluster, a: ControllerElectLeader, ps: PartitionState):
    new, how = _kip966_change(config, s.controller.registered, a.partition, ps, ps.isr, elect=True)
    _require(new.leader != NO_LEADER, Refusal.NO_LIVE_REPLICA
             if config.unclean_leader_election_enable else Refusal.NO_LIVE_ISR_REPLICA)
    s = s.with_partition_state(a.partition, new)
    s = replace(s, leader_and_isr=_send_leader_and_isr(config, s, a.partition, new,
                                                       config.assignment(a.partition)))
    if how in (LAST_KNOWN, UNCLEAN):
        c = s.controller
        s = replace(s, controller=replace(c, unclean_elections=c.unclean_elections + 1))
    return s, Outcome(_ELECTION_CODES[how], leader=new.leader, leader_epoch=new.leader_epoch)


def _controller_handle_broker_failure(config: Config, s: Cluster, a: ControllerHandleBrokerFailure):
    _check_broker(config, a.broker)
    _require(s.controller.registered[a.broker] != UNKNOWN, Refusal.NO_SESSION, broker=a.broker)
    # The store expires the controller's own session whether or not it is up; any other
    # failure waits for a controller.
    failover = bool(config.max_controller_failovers) and a.broker == s.controller.active
    if not failover:
        _require_controller(config, s)
    before = s
    if s.alive[a.broker]:
        _require(s.expiries < config.max_session_expiries, Refusal.SESSION_EXPIRIES_BOUND)
        s = replace(s, expiries=s.expiries + 1)
    registered = list(s.controller.registered)
    registered[a.broker] = UNKNOWN
    registered = tuple(registered)
    s = replace(s, controller=replace(s.controller, registered=registered))
    successor = None
    if failover:
        successor = next((b for b in range(config.brokers)
                          if s.alive[b] and registered[b] != UNKNOWN), None)
        if successor is not None:
            s = _take_over(config, s, successor)
    changes = []
    elected = 0
    unclean_count = 0
    for p in range(config.partitions):
        ps = s.controller.partitions[p]
        if a.broker not in ps.isr and ps.leader != a.broker:
            continue
        isr = ps.isr
        if config.eligible_leader_replicas_enable:
            # KIP-966: the last ISR member leaves too; the ELR keeps it electable.
            new, how = _kip966_change(config, registered, p, ps,
                                      tuple(b for b in isr if b != a.broker), elect=True)
            if new.leader == ps.leader and new.isr != ps.isr and (
                    config.variant.isr_shrink_bumps_leader_epoch):
                new = replace(new, leader_epoch=new.leader_epoch + 1)
            unclean_count += how in (LAST_KNOWN, UNCLEAN)
            leader, epoch, isr = new.leader, new.leader_epoch, new.isr
            _require(epoch < config.max_leader_epochs, Refusal.LEADER_EPOCH_BOUND)
        else:
            if a.broker in isr and len(isr) > 1:
                isr = tuple(b for b in isr if b != a.broker)
            leader, epoch = ps.leader, ps.leader_epoch
            if ps.leader == a.broker:
                leader, isr, unclean = _elect(config, registered, p, isr)
                unclean_count += unclean
                epoch += 1
            elif isr != ps.isr and config.variant.isr_shrink_bumps_leader_epoch:
                epoch += 1
            _require(epoch < config.max_leader_epochs, Refusal.LEADER_EPOCH_BOUND)
            new = PartitionState(leader, epoch, isr, ps.partition_epoch + 1)
        if (leader, epoch, isr, new.elr, new.last_known_elr) == (
                ps.leader, ps.leader_epoch, ps.isr, ps.elr, ps.last_known_elr):
            continue
        s = s.with_partition_state(p, new)
        s = replace(s, leader_and_isr=_send_leader_and_isr(config, s, p, new, config.assignment(p)))
        changes.append([p, leader, epoch, list(isr)])
        elected += leader not in (ps.leader, NO_LEADER)
    if unclean_count:
        c = s.controller
        s = replace(s, controller=replace(c, unclean_elections=c.unclean_elections + unclean_count))
    s, lost = _excuse_lost_writes(config, before, s)
    extra = {}
    if successor is not None:
        s = _announce(config, s)
        extra = _controller_fields(s)
    return s, Outcome(Code.BROKER_FAILURE_HANDLED, changes=changes, elected=elected, excused=lost,
                      **extra)


def _controller_elect_preferred_leader(config: Config, s: Cluster, a: ControllerElectPreferredLeader):
    _check_partition(config, a.partition)
    _require_controller(config, s)
    ps = s.controller.partitions[a.partition]
    preferred = config.assignment(a.partition)[0]
    # Rebalancing moves leadership between live replicas; an offline partition is the
    # offline-partition election's (ControllerElectLeader), as in Kafka, where a returning ISR
    # replica brings it back through that election (ZooKeeper controller: onBrokerStartup;
    # KRaft: the broker's unfencing), which picks replica 0 first anyway.
    _require(ps.leader != NO_LEADER, Refusal.NO_LEADER, partition=a.partition)
    _require(ps.leader != preferred, Refusal.ALREADY_LEADS, broker=preferred)
    _require(preferred in ps.isr, Refusal.PREFERRED_NOT_IN_ISR, broker=preferred)
    _require(s.controller.registered[preferred] != UNKNOWN, Refusal.NO_SESSION, broker=preferred)
    _require(ps.leader_epoch + 1 < config.max_leader_epochs, Refusal.LEADER_EPOCH_BOUND)
    new = replace(ps, leader=preferred, leader_epoch=ps.leader_epoch + 1,
                  partition_epoch=ps.partition_epoch + 1)
    s = s.with_partition_state(a.partition, new)
    s = replace(
        s,
        leader_and_isr=_send_leader_and_isr(config, s, a.partition, new, config.assignment(a.partition)),
    )
    return s, Outcome(Code.ELECTED_PREFERRED, leader=preferred, leader_epoch=new.leader_epoch)


def _find_leader_and_isr(s: Cluster, a) -> LeaderAndIsr:
    for m in s.leader_and_isr:
        if (m.partition, m.broker, m.leader_epoch, m.partition_epoch, m.controller_epoch) == (
            a.partition, a.broker, a.leader_epoch, a.partition_epoch, a.controller_epoch
        ):
            return m
    raise NotEnabled(Refusal.NO_SUCH_LEADER_AND_ISR)


def _network_drop_leader_and_isr(config: Config, s: Cluster, a: NetworkDropLeaderAndIsr):
    m = _find_leader_and_isr(s, a)
    _require(s.drops < config.max_message_drops, Refusal.MESSAGE_DROPS_BOUND)
    return replace(s, leader_and_isr=s.leader_and_isr - {m}, drops=s.drops + 1), Outcome(Code.DROPPED)


def _applicable_leader_and_isr(config: Config, s: Cluster, a, leads: bool) -> LeaderAndIsr:
    _check_broker(config, a.broker)
    m = _find_leader_and_isr(s, a)
    _require((m.leader == a.broker) == leads, Refusal.OTHER_ROLE)
    _require(s.alive[a.broker], Refusal.BROKER_DOWN, broker=a.broker)
    if config.max_controller_failovers:
        return m  # consumed either way: see _unapplied_leader_and_isr
    r = s.replica(a.partition, a.broker)
    _require(
        (m.leader_epoch, m.partition_epoch) > (r.leader_epoch, r.partition_epoch),
        Refusal.STALE_LEADER_AND_ISR, leader_epoch=m.leader_epoch, partition_epoch=m.partition_epoch,
        view_leader_epoch=r.leader_epoch, view_partition_epoch=r.partition_epoch,
    )
    return m


def _become_leader(config: Config, s: Cluster, a: BecomeLeader):
    m = _applicable_leader_and_isr(config, s, a, leads=True)
    unapplied = _unapplied_leader_and_isr(config, s, a, m)
    if unapplied:
        return unapplied
    r = s.replica(a.partition, a.broker)
    s = replace(s, leader_and_isr=s.leader_and_isr - {m})
    if config.max_controller_failovers:
        s = _see_controller_epoch(s, a.broker, m.controller_epoch)
    # A newer view ends any pending ISR change (KIP-497: the leader goes by the new state).
    view = dict(leader=m.leader, leader_epoch=m.leader_epoch, isr=m.isr,
                partition_epoch=m.partition_epoch, pending_isr=None)
    if r.leader == a.broker and r.leader_epoch == m.leader_epoch:
        r = replace(r, **view)
        outcome = Outcome(Code.ISR_UPDATED)
    elif r.leader == a.broker:
        # Still the leader, in a new epoch: follower state carries over (B11 when epochs were
        # missed: another leader's followers may have truncated below what is recorded here);
        # the epoch starts here.
        cache = assign_epoch(r.epoch_cache, m.leader_epoch, r.log_end_offset)
        if config.variant.missed_epoch_resets_followers and m.leader_epoch > r.leader_epoch + 1:
            r = replace(r, **view, **leader_side_state(config, m.isr), epoch_cache=cache)
        else:
            r = replace(r, **view, epoch_cache=cache)
        outcome = Outcome(Code.STILL_LEADER, leader_epoch=m.leader_epoch)
    else:
        cache = assign_epoch(r.epoch_cache, m.leader_epoch, r.log_end_offset)
        r = replace(
            r,
            **view,
            **leader_side_state(config, m.isr),
            epoch_cache=cache,
            truncation_pending=False,
            purgatory=r.purgatory if r.leader == a.broker else (),
        )
        if not config.leader_keeps_last_fetch:
            # The smaller abstraction (see Config): the broker's own last fetch vanishes.
            s = s.with_fetch(a.partition, a.broker, None)
        outcome = Outcome(Code.LEADER, leader_epoch=m.leader_epoch)
    return s.with_replica(a.partition, a.broker, _advance_high_watermark(config, r, a.broker)), outcome


def _become_follower(config: Config, s: Cluster, a: BecomeFollower):
    m = _applicable_leader_and_isr(config, s, a, leads=False)
    unapplied = _unapplied_leader_and_isr(config, s, a, m)
    if unapplied:
        return unapplied
    r = s.replica(a.partition, a.broker)
    s = replace(s, leader_and_isr=s.leader_and_isr - {m})
    if config.max_controller_failovers:
        s = _see_controller_epoch(s, a.broker, m.controller_epoch)
    new_leadership = (r.leader, r.leader_epoch) != (m.leader, m.leader_epoch)
    leader_changed = r.leader != m.leader
    r = replace(
        r,
        leader=m.leader,
        leader_epoch=m.leader_epoch,
        isr=m.isr,
        partition_epoch=m.partition_epoch,
        remote_log_end_offset=(),
        remote_broker_epoch=(),
        lag_ticks=(),
        purgatory=(),
        pending_isr=None,
    )
    outcome = Outcome(Code.FOLLOWER, leader=m.leader, leader_epoch=m.leader_epoch)
    rule = config.variant.truncation
    if rule == "high-watermark" and leader_changed and m.leader != NO_LEADER:
        # Pre-0.11 makeFollower truncated only when the leader (broker id) changed.
        r = r.truncated_to(r.high_watermark)
        outcome = Outcome(Code.FOLLOWER_TRUNCATED_TO_HW, leader=m.leader, leader_epoch=m.leader_epoch,
                          high_watermark=r.high_watermark)
    elif rule in ("epoch-end", "epoch-end-279") and new_leadership:
        r = replace(r, truncation_pending=bool(r.log))
    return s.with_replica(a.partition, a.broker, r), outcome


def _network_drop_fetch(config: Config, s: Cluster, a: NetworkDropFetch):
    _check_broker(config, a.follower)
    _require(s.fetches[a.partition][a.follower] is not None, Refusal.NOTHING_IN_FLIGHT)
    _require(s.drops < config.max_message_drops, Refusal.MESSAGE_DROPS_BOUND)
    return replace(s.with_fetch(a.partition, a.follower, None), drops=s.drops + 1), Outcome(Code.DROPPED)


def _producer_send(config: Config, s: Cluster, a: ProducerSend):
    _check_partition(config, a.partition)
    if s.next_value > config.max_records:
        raise NotEnabled(Refusal.RECORDS_BOUND)
    leader = s.controller.partitions[a.partition].leader
    if a.broker != NO_LEADER:
        _check_broker(config, a.broker)
        _require(s.replica(a.partition, a.broker).leader == a.broker, Refusal.NOT_LEADER_IN_VIEW,
                 broker=a.broker)
        # The controller's own leader is the untargeted send: one action per transition.
        _require(a.broker != leader, Refusal.TARGET_IS_CURRENT_LEADER, broker=a.broker)
        leader = a.broker
    if leader == NO_LEADER:
        raise NotEnabled(Refusal.NO_LEADER, partition=a.partition)
    request = ProduceRequest(a.partition, leader, s.next_value)
    s = replace(s, produce_requests=s.produce_requests | {request}, next_value=s.next_value + 1)
    return s, Outcome(Code.PRODUCE_SENT, value=request.value, broker=leader)


def _consumer_read(config: Config, s: Cluster, a: ConsumerRead):
    _check_partition(config, a.partition)
    leader = s.controller.partitions[a.partition].leader
    _require(leader != NO_LEADER and s.alive[leader], Refusal.NO_LIVE_LEADER)
    r = s.replica(a.partition, leader)
    _require(r.leader == leader, Refusal.DOES_NOT_LEAD_IN_VIEW, broker=leader)
    seen = {Acked(a.partition, o, r.log[o].value) for o in range(r.high_watermark)}
    _require(not seen <= s.consumed, Refusal.NOTHING_NEW)
    return replace(s, consumed=s.consumed | seen), Outcome(Code.READ, records=r.high_watermark,
                                                           broker=leader)


def _leader_append(config: Config, s: Cluster, a: LeaderAppend):
    request = ProduceRequest(a.partition, a.broker, a.value)
    if request not in s.produce_requests:
        raise NotEnabled(Refusal.NO_SUCH_PRODUCE)
    if not s.alive[a.broker]:
        raise NotEnabled(Refusal.BROKER_DOWN, broker=a.broker)
    s = replace(s, produce_requests=s.produce_requests - {request})
    r = s.replica(a.partition, a.broker)
    if r.leader != a.broker:
        return s, Outcome(Code.NOT_LEADER_OR_FOLLOWER)
    if config.acks == "all" and len(r.isr) < config.min_insync_replicas:
        return s, Outcome(Code.NOT_ENOUGH_REPLICAS)
    offset = r.log_end_offset
    r = r.appended((Record(r.leader_epoch, a.value),), config.log_flush_interval_messages)
    if config.acks == "all":
        r = replace(r, purgatory=(*r.purgatory, PendingProduce(offset, a.value)))
    r = _advance_high_watermark(config, r, a.broker)
    s = s.with_replica(a.partition, a.broker, r)
    if config.acks == "1":
        s = replace(s, acked=s.acked | {Acked(a.partition, offset, a.value)})
        return s, Outcome(Code.APPENDED_ACKNOWLEDGED, offset=offset)
    return s, Outcome(Code.APPENDED, offset=offset)


def _leader_ack_produce(config: Config, s: Cluster, a: LeaderAckProduce):
    _check_broker(config, a.broker)
    r = s.replica(a.partition, a.broker)
    pending = [w for w in r.purgatory if w.offset == a.offset]
    if not pending:
        raise NotEnabled(Refusal.NO_PENDING_WRITE, offset=a.offset)
    if not (s.alive[a.broker] and r.leader == a.broker):
        raise NotEnabled(Refusal.DOES_NOT_LEAD, broker=a.broker)
    if r.high_watermark <= a.offset:
        raise NotEnabled(Refusal.HW_NOT_PAST, high_watermark=r.high_watermark, offset=a.offset)
    w = pending[0]
    s = s.with_replica(a.partition, a.broker, replace(r, purgatory=tuple(x for x in r.purgatory if x != w)))
    if len(r.isr) < config.min_insync_replicas:
        return s, Outcome(Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    return replace(s, acked=s.acked | {Acked(a.partition, a.offset, w.value)}), Outcome(Code.ACKNOWLEDGED)


def _leader_handle_fetch(config: Config, s: Cluster, a: LeaderHandleFetch):
    _check_broker(config, a.follower)
    request = s.fetches[a.partition][a.follower]
    if not isinstance(request, _REQUESTS):
        raise NotEnabled(Refusal.NO_REQUEST_IN_FLIGHT)
    if request.leader != a.broker:
        raise NotEnabled(Refusal.REQUEST_FOR_OTHER_BROKER, broker=request.leader)
    if not s.alive[a.broker]:
        raise NotEnabled(Refusal.BROKER_DOWN, broker=a.broker)
    r = s.replica(a.partition, a.broker)
    variant = config.variant

    def answer(response: FetchResponse, replica: Replica = r):
        return s.with_replica_and_fetch(a.partition, a.broker, replica, a.follower, response)

    def error(code: str, **extra):
        response = FetchResponse(a.broker, r.leader_epoch, "error", error=code, **extra)
        return answer(response), Outcome(Code(code))

    if r.leader != a.broker:
        return error(KafkaError.NOT_LEADER_OR_FOLLOWER)
    if variant.fencing and request.current_leader_epoch < r.leader_epoch:
        return error(KafkaError.FENCED_LEADER_EPOCH)
    if variant.fencing and request.current_leader_epoch > r.leader_epoch:
        return error(KafkaError.UNKNOWN_LEADER_EPOCH)

    if isinstance(request, EpochRequest):
        if variant.truncation == "epoch-end":
            end = r.start_offset_after_epoch(request.epoch)
            epoch = request.epoch
        else:
            epoch, end = r.end_offset_for_epoch(request.epoch)
        response = FetchResponse(a.broker, r.leader_epoch, "epoch", epoch=epoch, end_offset=end)
        return answer(response), Outcome(Code.EPOCH_END, epoch=epoch, end_offset=end)

    offset = request.fetch_offset
    if variant.truncation == "diverging-epoch" and offset > 0:
        epoch, end = r.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch != request.last_fetched_epoch or end < offset:
            response = FetchResponse(a.broker, r.leader_epoch, "diverging", epoch=epoch, end_offset=end)
            return answer(response), Outcome(Code.DIVERGING_EPOCH, epoch=epoch, end_offset=end)
    if offset > r.log_end_offset:
        return error(KafkaError.OFFSET_OUT_OF_RANGE, end_offset=r.log_end_offset)

    remote = list(r.remote_log_end_offset)
    remote[a.follower] = offset
    broker_epochs = list(r.remote_broker_epoch)
    broker_epochs[a.follower] = request.broker_epoch
    lag = list(r.lag_ticks)
    if offset >= r.log_end_offset:
        lag[a.follower] = 0
    # The answer carries the HW read before this fetch moved it (as Kafka's readRecords does),
    # so a follower learns of a commit one fetch round trip after the leader (docs/protocol.md,
    # "Fetch and the high watermark").
    high_watermark = r.high_watermark
    remote = tuple(remote)
    r = replace(r, remote_log_end_offset=remote, remote_broker_epoch=tuple(broker_epochs),
                lag_ticks=tuple(lag),
                high_watermark=next_high_watermark(config, r, a.broker, remote))
    records = r.log[offset:]
    response = FetchResponse(a.broker, r.leader_epoch, "records", records=records,
                             high_watermark=high_watermark, fetch_offset=offset)
    outcome = Outcome(Code.RECORDS_SENT, records=len(records), fetch_offset=offset,
                      high_watermark=r.high_watermark, answer_high_watermark=high_watermark)
    return answer(response, r), outcome


def _follower_send_fetch(config: Config, s: Cluster, a: FollowerSendFetch):
    _check_broker(config, a.broker)
    _check_partition(config, a.partition)
    r = s.replica(a.partition, a.broker)
    if not s.alive[a.broker]:
        raise NotEnabled(Refusal.BROKER_DOWN, broker=a.broker)
    if r.leader in (NO_LEADER, a.broker):
        raise NotEnabled(Refusal.FOLLOWS_NOBODY, broker=a.broker)
    if not s.alive[r.leader]:
        raise NotEnabled(Refusal.LEADER_DOWN, leader=r.leader)
    if s.fetches[a.partition][a.broker] is not None:
        raise NotEnabled(Refusal.CONNECTION_BUSY)
    if r.truncation_pending:
        message = EpochRequest(r.leader, r.latest_epoch(), r.leader_epoch)
        outcome = Outcome(Code.EPOCH_REQUEST_SENT, epoch=message.epoch)
    else:
        # The last fetched epoch is the cache's latest, as Kafka's fetcher starts from
        # (`latestEpoch`) and keeps after each append: an epoch this broker led without
        # writing stays in it until a truncation answer sheds it (KAFKA-10706).
        message = FetchRequest(r.leader, r.log_end_offset, r.latest_epoch(), r.leader_epoch,
                               s.broker_epochs[a.broker])
        outcome = Outcome(Code.FETCH_SENT, fetch_offset=message.fetch_offset)
    return s.with_fetch(a.partition, a.broker, message), outcome


def _follower_handle_fetch_response(config: Config, s: Cluster, a: FollowerHandleFetchResponse):
    _check_broker(config, a.broker)
    response = s.fetches[a.partition][a.broker]
    if not isinstance(response, FetchResponse):
        raise NotEnabled(Refusal.NO_RESPONSE_IN_FLIGHT)
    if not s.alive[a.broker]:
        raise NotEnabled(Refusal.BROKER_DOWN, broker=a.broker)
    r = s.replica(a.partition, a.broker)

    # Every answer is taken off the connection; `done` also installs the changed replica.
    def dropped(outcome: Outcome):
        return s.with_fetch(a.partition, a.broker, None), outcome

    def done(replica: Replica, outcome: Outcome):
        return s.with_replica_and_fetch(a.partition, a.broker, replica, a.broker, None), outcome

    if response.leader != r.leader:
        return dropped(Outcome(Code.DROPPED_NOT_FROM_LEADER, leader=response.leader))
    if config.variant.fencing and response.leader_epoch != r.leader_epoch:
        return dropped(Outcome(Code.DROPPED_OTHER_EPOCH, leader_epoch=response.leader_epoch,
                               current_leader_epoch=r.leader_epoch))
    if response.error == KafkaError.OFFSET_OUT_OF_RANGE:
        r = r.truncated_to(response.end_offset)
        return done(r, Outcome(Code.OUT_OF_RANGE_TRUNCATED, log_end_offset=r.log_end_offset))
    if response.kind == "error":
        return dropped(Outcome(Code(response.error)))
    if response.kind == "epoch":
        if not r.truncation_pending:
            return dropped(Outcome(Code.DROPPED_NO_TRUNCATION_DUE))
        before = r.log_end_offset
        if config.variant.truncation == "epoch-end":
            end = response.end_offset if response.end_offset != UNKNOWN else r.high_watermark
            r = replace(r.truncated_to(end), truncation_pending=False)
        elif response.epoch == UNKNOWN:
            r = replace(r.truncated_to(r.high_watermark), truncation_pending=False)
        else:
            r, finished = truncate_to_epoch_answer(r, response.epoch, response.end_offset)
            r = replace(r, truncation_pending=not finished and bool(r.log))
        code = Code.TRUNCATED_ROUND_DUE if r.truncation_pending else Code.TRUNCATED
        return done(r, Outcome(code, before=before, after=r.log_end_offset))
    if response.kind == "diverging":
        before = r.log_end_offset
        r, _ = truncate_to_epoch_answer(r, response.epoch, response.end_offset)
        return done(r, Outcome(Code.DIVERGED, before=before, after=r.log_end_offset))
    if r.truncation_pending:
        return dropped(Outcome(Code.DROPPED_TRUNCATION_PENDING))
    if response.fetch_offset != r.log_end_offset:
        return dropped(Outcome(Code.DROPPED_STALE_OFFSET, fetch_offset=response.fetch_offset,
                               log_end_offset=r.log_end_offset))
    r = r.appended(response.records, config.log_flush_interval_messages,
                   high_watermark=response.high_watermark)
    return done(r, Outcome(Code.RECORDS_APPENDED, records=len(response.records),
                           high_watermark=r.high_watermark))


def _leader_isr_change_guard(config: Config, s: Cluster, a) -> tuple[Replica, PartitionState]:
    _check_broker(config, a.follower)
    _require(a.follower != a.broker, Refusal.OWN_MEMBERSHIP)
    r = s.replica(a.partition, a.broker)
    ps = s.controller.partitions[a.partition]
    # Bound for exploration: shrink and expand can alternate forever (ISR flapping).
    _require(ps.partition_epoch < config.max_partition_epoch, Refusal.PARTITION_EPOCH_BOUND)
    _require(s.alive[a.broker] and r.leader == a.broker, Refusal.DOES_NOT_LEAD, broker=a.broker)
    if config.isr_changes_async:
        # The controller does the compare-and-set when the request arrives.
        _require(r.pending_isr is None, Refusal.ISR_CHANGE_PENDING)
        return r, ps
    _require(
        (r.leader_epoch, r.partition_epoch) == (ps.leader_epoch, ps.partition_epoch),
        Refusal.COMPARE_AND_SET_FAILS, view_leader_epoch=r.leader_epoch,
        view_partition_epoch=r.partition_epoch, leader_epoch=ps.leader_epoch,
        partition_epoch=ps.partition_epoch,
    )
    return r, ps


def _commit_isr(config, s: Cluster, a, r: Replica, ps: PartitionState, isr: tuple[int, ...]):
    if config.eligible_leader_replicas_enable:
        new, _ = _kip966_change(config, s.controller.registered, a.partition, ps, isr, elect=False)
    else:
        new = PartitionState(ps.leader, ps.leader_epoch, isr, ps.partition_epoch + 1)
    r = replace(r, isr=isr, partition_epoch=new.partition_epoch)
    r = _advance_high_watermark(config, r, a.broker)
    return s.with_partition_state(a.partition, new).with_replica(a.partition, a.broker, r)


def _lagging(config: Config, r: Replica, follower: int) -> bool:
    """Whether a leader counts `follower` as lagging: no fetch up to its LEO for longer than
    replica.lag.time.max, or (if set) more than replica.lag.max.messages behind."""
    if r.lag_ticks[follower] > config.replica_lag_time_max_ticks:
        return True
    remote, max_messages = r.remote_log_end_offset[follower], config.replica_lag_max_messages
    return max_messages is not None and remote != UNKNOWN and r.log_end_offset - remote > max_messages


def _up_to_high_watermark(r: Replica, follower: int) -> bool:
    """Whether a leader has seen `follower` fetch from its HW or beyond (ISR expansion)."""
    remote = r.remote_log_end_offset[follower]
    return remote != UNKNOWN and remote >= r.high_watermark


def _leader_shrink_isr(config: Config, s: Cluster, a: LeaderShrinkIsr):
    r, ps = _leader_isr_change_guard(config, s, a)
    _require(a.follower in r.isr, Refusal.NOT_IN_ISR, follower=a.follower)
    remote = r.remote_log_end_offset[a.follower]
    _require(remote < r.log_end_offset, Refusal.CAUGHT_UP, follower=a.follower)
    _require(_lagging(config, r, a.follower), Refusal.NOT_LAGGING, follower=a.follower)
    isr = tuple(b for b in r.isr if b != a.follower)
    if config.isr_changes_async:
        return _request_isr(config, s, a, r, isr, UNKNOWN)
    return _commit_isr(config, s, a, r, ps, isr), Outcome(Code.ISR_CHANGED, isr=list(isr))


def _leader_expand_isr(config: Config, s: Cluster, a: LeaderExpandIsr):
    r, ps = _leader_isr_change_guard(config, s, a)
    _require(a.follower not in r.isr, Refusal.ALREADY_IN_ISR, follower=a.follower)
    remote = r.remote_log_end_offset[a.follower]
    _require(_up_to_high_watermark(r, a.follower), Refusal.BELOW_HIGH_WATERMARK,
             follower=a.follower)
    if config.variant.expand_requires_epoch_start:
        start = r.epoch_start_offset(r.leader_epoch)
        _require(remote >= start, Refusal.BELOW_EPOCH_START, follower=a.follower, offset=start)
    if config.isr_changes_async:
        isr = tuple(sorted((*r.isr, a.follower)))
        return _request_isr(config, s, a, r, isr, r.remote_broker_epoch[a.follower])
    if config.variant.broker_epochs:
        _require(
            r.remote_broker_epoch[a.follower] == s.controller.registered[a.follower],
            Refusal.STALE_BROKER_EPOCH, broker_epoch=r.remote_broker_epoch[a.follower],
            follower=a.follower,
        )
    isr = tuple(sorted((*r.isr, a.follower)))
    return _commit_isr(config, s, a, r, ps, isr), Outcome(Code.ISR_CHANGED, isr=list(isr))


def _request_isr(config: Config, s: Cluster, a, r: Replica, isr: tuple[int, ...],
                 broker_epoch: int):
    """KIP-497: the leader asks the controller for `isr` and waits for the answer."""
    m = AlterPartition(a.partition, a.broker, r.leader_epoch, r.partition_epoch, isr,
                       broker_epoch)
    r = _advance_high_watermark(config, replace(r, pending_isr=isr), a.broker)
    s = s.with_replica(a.partition, a.broker, r)
    s = replace(s, alter_partitions=s.alter_partitions | {m})
    return s, Outcome(Code.ISR_CHANGE_REQUESTED, isr=list(isr))


def _find_alter_partition(s: Cluster, a, answered: bool) -> AlterPartition:
    for m in s.alter_partitions:
        if ((m.partition, m.leader, m.leader_epoch, m.partition_epoch)
                == (a.partition, a.broker, a.leader_epoch, a.partition_epoch)
                and (m.answer != PENDING) == answered):
            return m
    raise NotEnabled(Refusal.NO_SUCH_ALTER_PARTITION)


def _controller_handle_alter_partition(config: Config, s: Cluster,
                                       a: ControllerHandleAlterPartition):
    m = _find_alter_partition(s, a, answered=False)
    _require_controller(config, s)
    ps = s.controller.partitions[a.partition]
    s = replace(s, alter_partitions=s.alter_partitions - {m})
    expand = m.broker_epoch != UNKNOWN
    error = None
    if ps.leader != m.leader:
        error = KafkaError.NOT_LEADER_OR_FOLLOWER
    elif (ps.leader_epoch, ps.partition_epoch) != (m.leader_epoch, m.partition_epoch):
        error = "INVALID_UPDATE_VERSION"  # Kafka's error names, as the reference broker's
    elif expand and config.variant.broker_epochs:
        follower = next(b for b in m.isr if b not in ps.isr)
        if s.controller.registered[follower] != m.broker_epoch:
            error = "STALE_BROKER_EPOCH"
    if error is not None:
        s = replace(s, alter_partitions=s.alter_partitions | {replace(m, answer=REJECTED)})
        return s, Outcome(Code.ISR_CHANGE_REJECTED, error=str(error))
    if config.eligible_leader_replicas_enable:
        new, _ = _kip966_change(config, s.controller.registered, a.partition, ps, m.isr,
                                elect=False)
    else:
        new = PartitionState(ps.leader, ps.leader_epoch, m.isr, ps.partition_epoch + 1)
    s = s.with_partition_state(a.partition, new)
    s = replace(s, alter_partitions=s.alter_partitions | {replace(m, answer=ACCEPTED)})
    return s, Outcome(Code.ISR_CHANGED, isr=list(m.isr))


def _leader_handle_alter_partition_response(config: Config, s: Cluster,
                                            a: LeaderHandleAlterPartitionResponse):
    m = _find_alter_partition(s, a, answered=True)
    _require(s.alive[a.broker], Refusal.BROKER_DOWN, broker=a.broker)
    s = replace(s, alter_partitions=s.alter_partitions - {m})
    r = s.replica(a.partition, a.broker)
    if (r.leader, r.leader_epoch, r.partition_epoch, r.pending_isr) != (
            a.broker, m.leader_epoch, m.partition_epoch, m.isr):
        return s, Outcome(Code.ISR_CHANGE_DROPPED)
    if m.answer == ACCEPTED:
        r = replace(r, isr=m.isr, partition_epoch=m.partition_epoch + 1, pending_isr=None)
        outcome = Outcome(Code.ISR_APPLIED, isr=list(m.isr), partition_epoch=r.partition_epoch)
    else:
        # Kafka's leader waits for the metadata that explains the rejection; the model lets
        # the next LeaderAndIsr bring it, and the leader may ask again.
        r = replace(r, pending_isr=None)
        outcome = Outcome(Code.ISR_CHANGE_REJECTED, error="rejected")
    return s.with_replica(a.partition, a.broker, _advance_high_watermark(config, r, a.broker)), \
        outcome


def _broker_flush(config: Config, s: Cluster, a: BrokerFlush):
    _check_broker(config, a.broker)
    r = s.replica(a.partition, a.broker)
    _require(s.alive[a.broker], Refusal.BROKER_DOWN, broker=a.broker)
    _require(r.flushed_offset < r.log_end_offset, Refusal.NOTHING_TO_FLUSH)
    # Only a crash reads the flushed offset: with no crash left, flushing changes nothing
    # observable, so the explorer is spared the interleavings.
    _require(s.crashes < config.max_crashes, Refusal.FLUSH_MOOT)
    return s.with_replica(a.partition, a.broker, replace(r, flushed_offset=r.log_end_offset)), Outcome(Code.FLUSHED)


def _has(log: tuple[Record, ...], offset: int, value: int) -> bool:
    return offset < len(log) and log[offset].value == value


def _excuse_lost_writes(config: Config, before: Cluster, s: Cluster) -> tuple[Cluster, list[int]]:
    """Ghost bookkeeping for Kafka's condition "as long as one in-sync replica is alive".

    Called after a crash or a session expiry. Where every member of a partition's ISR is now
    down (crashed, or removed for an expired session leaving only crashed members), clean
    election may later pick any of them, so a committed record that any of them lacks is no
    longer promised: it is excused. Committed means below some replica's HW in `before` (the
    state before a crash cut the logs), acknowledged with acks=all, or read by the consumer;
    acks=1 writes were never promised to survive a leader crash. Records every member kept
    stay due.
    """
    # Only partitions whose every ISR member is down can excuse anything: look at no other
    # (replaying a long run, the committed writes of the others are many).
    down = {p for p, ps in enumerate(s.controller.partitions)
            if not any(s.alive[m] for m in ps.isr)}
    if not down:
        return s, []
    committed = {w for w in s.consumed if w.partition in down}
    if config.acks == "all":
        committed.update(w for w in s.acked if w.partition in down)
    # Anything below any replica's HW was committed when that HW was set (a follower's HW is
    # at most its leader's): followers learn the HW late, and the leader may be out of the ISR
    # by now, so every replica counts, not only the current ISR members.
    for p in down:
        for r in before.replicas[p]:
            committed.update(Acked(p, o, r.log[o].value) for o in range(r.high_watermark))
    excused = set(s.excused)
    for w in committed:
        isr = s.controller.partitions[w.partition].isr
        if w.value in excused:
            continue
        if not all(_has(s.replica(w.partition, m).log, w.offset, w.value) for m in isr):
            excused.add(w.value)
    lost = sorted(excused - s.excused)
    return (replace(s, excused=frozenset(excused)) if lost else s), lost


def _broker_crash(config: Config, s: Cluster, a: BrokerCrash):
    _check_broker(config, a.broker)
    _require(s.alive[a.broker], Refusal.BROKER_DOWN, broker=a.broker)
    _require(s.crashes < config.max_crashes, Refusal.CRASHES_BOUND)
    b = a.broker
    before = s
    alive = s.alive[:b] + (False,) + s.alive[b + 1 :]
    rows = []
    losses = s.crash_losses
    count_losses = config.kip966_promises
    for row in s.replicas:
        if count_losses and row[b].flushed_offset < len(row[b].log):
            losses = _with_losses(losses, b, row[b].log, row[b].flushed_offset)
        r = row[b]
        if r.flushed_offset < len(r.log):  # the cache at the LEO is recovery's rule (below)
            r = r.truncated_to(r.flushed_offset)
        # With `recovery_truncates_epoch_cache`, recovery also drops cache entries at or past
        # the recovered log end (Kafka's truncateFromEnd(LEO) on load).
        cache = r.epoch_cache
        if config.recovery_truncates_epoch_cache:
            cache = tuple(e for e in cache if e[1] < len(r.log))
        r = Replica(log=r.log, high_watermark=r.high_watermark, flushed_offset=r.flushed_offset,
                    epoch_cache=cache)
        rows.append(row[:b] + (r,) + row[b + 1 :])
    fetches = tuple(
        tuple(
            None if f == b or (m is not None and m.leader == b) else m
            for f, m in enumerate(row)
        )
        for row in s.fetches
    )
    s = replace(
        s,
        alive=alive,
        crashes=s.crashes + 1,
        crash_losses=losses,
        replicas=tuple(rows),
        fetches=fetches,
        leader_and_isr=frozenset(m for m in s.leader_and_isr if m.broker != b),
        produce_requests=frozenset(m for m in s.produce_requests if m.broker != b),
        # Requests already sent reach the controller; answers to the crashed broker are lost.
        alter_partitions=frozenset(m for m in s.alter_partitions
                                   if m.leader != b or m.answer == PENDING),
        controller_epochs=_forget_controller_epoch(s.controller_epochs, b),
    )
    s, lost = _excuse_lost_writes(config, before, s)
    return s, Outcome(Code.CRASHED, excused=lost)


def _with_losses(losses, broker: int, log, start: int):
    """`losses` with (value, broker) for each record of `log` from offset `start` on."""
    if type(losses) is LossLedger:  # a replay's: the pairs are made when first read
        return losses.lost(broker, log, start)
    return losses | frozenset((record.value, broker) for record in log[start:])


def _forget_controller_epoch(seen: tuple[int, ...], b: int) -> tuple[int, ...]:
    """A crash forgets the controller epoch the broker had seen (Kafka keeps it in memory)."""
    if not seen or not seen[b]:
        return seen
    seen = seen[:b] + (0,) + seen[b + 1:]
    return seen if any(seen) else ()


def _controller_for_registration(config: Config, s: Cluster) -> bool:
    """Whether a registering broker also wins the controller role (there is none); refused
    while the controller is down with its session still registered."""
    if not config.max_controller_failovers:
        return False
    c = s.controller
    if c.registered[c.active] == UNKNOWN:
        return True
    _require(s.alive[c.active], Refusal.NO_CONTROLLER, broker=c.active)
    return False


def _register(config: Config, s: Cluster, b: int) -> tuple[Cluster, int]:
    """A new session with a new broker epoch; the controller sends the broker every partition
    it holds a replica of."""
    epoch = s.broker_epochs[b] + 1
    registered = s.controller.registered[:b] + (epoch,) + s.controller.registered[b + 1 :]
    messages = set(s.leader_and_isr)
    c = s.controller
    for p, ps in enumerate(c.partitions):
        if b in config.assignment(p):
            messages.add(LeaderAndIsr(b, p, ps.leader, ps.leader_epoch, ps.isr,
                                      ps.partition_epoch, c.active, c.epoch))
    s = replace(
        s,
        broker_epochs=s.broker_epochs[:b] + (epoch,) + s.broker_epochs[b + 1 :],
        controller=replace(s.controller, registered=registered),
        leader_and_isr=frozenset(messages),
    )
    return s, epoch


def _broker_restart(config: Config, s: Cluster, a: BrokerRestart):
    b = a.broker
    _require(not s.alive[b], Refusal.ALREADY_UP, broker=b)
    _require(s.controller.registered[b] == UNKNOWN, Refusal.SESSION_NOT_EXPIRED, broker=b)
    take_over = _controller_for_registration(config, s)
    s = replace(s, alive=s.alive[:b] + (True,) + s.alive[b + 1 :])
    if take_over:
        s = _take_over(config, s, b)
    if config.eligible_leader_replicas_enable:
        # Every crash is an unclean shutdown (Kafka cannot tell whether the page cache
        # survived): the broker leaves each ELR as it registers again, before it is sent the
        # partitions. Elections follow as ControllerElectLeader.
        for p, ps in enumerate(s.controller.partitions):
            if b in ps.elr:
                new, _ = _kip966_change(config, s.controller.registered, p, ps, ps.isr,
                                        elect=False, unclean_shutdown=(b,))
                s = s.with_partition_state(p, new)
                s = replace(s, leader_and_isr=_send_leader_and_isr(config, s, p, new,
                                                                   config.assignment(p)))
    s, epoch = _register(config, s, b)
    if take_over:
        s = _announce(config, s)
        return s, Outcome(Code.BROKER_UP, broker_epoch=epoch, **_controller_fields(s))
    return s, Outcome(Code.BROKER_UP, broker_epoch=epoch)


def _broker_register(config: Config, s: Cluster, a: BrokerRegister):
    b = a.broker
    _require(s.alive[b], Refusal.BROKER_DOWN, broker=b)
    _require(s.controller.registered[b] == UNKNOWN, Refusal.HAS_SESSION, broker=b)
    take_over = _controller_for_registration(config, s)
    if take_over:
        s = _take_over(config, s, b)
    s, epoch = _register(config, s, b)
    if take_over:
        s = _announce(config, s)
        return s, Outcome(Code.REGISTERED, broker_epoch=epoch, **_controller_fields(s))
    return s, Outcome(Code.REGISTERED, broker_epoch=epoch)


def _tick(config: Config, s: Cluster, a: Tick):
    _require(s.ticks < config.max_ticks, Refusal.TICKS_BOUND)
    cap = config.replica_lag_time_max_ticks + 1
    rows = []
    for row in s.replicas:
        new_row = []
        for b, r in enumerate(row):
            if s.alive[b] and r.leader == b and r.lag_ticks:
                r = replace(r, lag_ticks=tuple(
                    lag if f == b else min(lag + 1, cap) for f, lag in enumerate(r.lag_ticks)
                ))
            new_row.append(r)
        rows.append(tuple(new_row))
    return replace(s, replicas=tuple(rows), ticks=s.ticks + 1), Outcome(Code.TICK, ticks=s.ticks + 1)


_HANDLERS = {
    ControllerElectLeader: _controller_elect_leader,
    ControllerHandleBrokerFailure: _controller_handle_broker_failure,
    ControllerElectPreferredLeader: _controller_elect_preferred_leader,
    NetworkDropLeaderAndIsr: _network_drop_leader_and_isr,
    NetworkDropFetch: _network_drop_fetch,
    BecomeLeader: _become_leader,
    BecomeFollower: _become_follower,
    ProducerSend: _producer_send,
    ConsumerRead: _consumer_read,
    LeaderAppend: _leader_append,
    LeaderAckProduce: _leader_ack_produce,
    LeaderHandleFetch: _leader_handle_fetch,
    LeaderShrinkIsr: _leader_shrink_isr,
    LeaderExpandIsr: _leader_expand_isr,
    FollowerSendFetch: _follower_send_fetch,
    FollowerHandleFetchResponse: _follower_handle_fetch_response,
    BrokerFlush: _broker_flush,
    BrokerCrash: _broker_crash,
    BrokerRestart: _broker_restart,
    BrokerRegister: _broker_register,
    Tick: _tick,
    ControllerHandleAlterPartition: _controller_handle_alter_partition,
    LeaderHandleAlterPartitionResponse: _leader_handle_alter_partition_response,
}
assert set(_HANDLERS) == set(ACTION_TYPES), "every action needs exactly one handler"


def step_with_outcome(config: Config, state: Cluster, action: Action) -> tuple[Cluster, Outcome]:
    """Apply `action`; return the next state and its outcome (a code and fields; `str()` is
    the English)."""
    checked = _CHECKED_HANDLERS.get(type(action))
    if checked is None:
        raise TypeError(f"not an action: {action!r}")
    return checked(config, state, action)


def _checked_handler(t: type[Action]):
    """The handler of `t` behind a range check of the fields naming a partition or a broker,
    as straight-line code (replay steps a million actions)."""
    lines = ["def checked(config, state, a):"]
    for f in fields(t):
        if f.name == "partition":
            lines.append("    if not 0 <= a.partition < config.partitions:\n"
                         "        bad_partition(config, a.partition)")
        elif f.name in ("broker", "follower"):
            # ProducerSend's broker is NO_LEADER for the default (untargeted) send.
            unless = f" and a.{f.name} != NO_LEADER" if t is ProducerSend else ""
            lines.append(f"    if not 0 <= a.{f.name} < config.brokers{unless}:\n"
                         f"        bad_broker(config, a.{f.name})")
    # The handler is looked up per call, so a test that swaps one in `_HANDLERS` is heard.
    lines.append("    return handlers[t](config, state, a)")
    namespace = {"handlers": _HANDLERS, "t": t, "bad_partition": _check_partition,
                 "bad_broker": _check_broker, "NO_LEADER": NO_LEADER}
    exec("\n".join(lines), namespace)
    return namespace["checked"]


_CHECKED_HANDLERS = {t: _checked_handler(t) for t in ACTION_TYPES}


def apply_candidate(config: Config, state: Cluster, action: Action) -> Cluster:
    """The state after `action`, one of `candidates(config, state)`: in range by construction,
    so without step()'s argument checks. Raises NotEnabled when its guard does not hold."""
    return _HANDLERS[type(action)](config, state, action)[0]


def step(config: Config, state: Cluster, action: Action) -> Cluster:
    """Apply one enabled action; raise NotEnabled(reason) and change nothing otherwise."""
    return step_with_outcome(config, state, action)[0]


def candidates(config: Config, state: Cluster, prune: bool = True) -> Iterator[Action]:
    """Actions worth trying in `state`, in a fixed order; `successors` filters by guard.

    A cheap over-approximation: it skips actions whose guard obviously fails (saving the
    explorer an exception each), and the handlers still check every guard. With `prune`
    off it also offers the ISR changes, acknowledgements, reads and preferred elections that
    the state already rules out (the scenario runner names an action's refused guard).
    """
    n, parts = config.brokers, range(config.partitions)
    alive = state.alive
    registered = state.controller.registered
    for p in parts:
        ps = state.controller.partitions[p]
        if ps.leader == NO_LEADER:
            yield ControllerElectLeader(p)
        else:
            preferred = config.assignment(p)[0]
            if ps.leader != preferred and (not prune or (
                    preferred in ps.isr and ps.leader_epoch + 1 < config.max_leader_epochs)):
                yield ControllerElectPreferredLeader(p)
    expiries_left = state.expiries < config.max_session_expiries
    for b in range(n):
        if registered[b] != UNKNOWN and (expiries_left or not alive[b]):
            yield ControllerHandleBrokerFailure(b)
    drops_left = state.drops < config.max_message_drops
    for m in sorted(state.leader_and_isr):
        kind = BecomeLeader if m.leader == m.broker else BecomeFollower
        yield kind(m.partition, m.broker, m.leader_epoch, m.partition_epoch, m.controller_epoch)
        if drops_left:
            yield NetworkDropLeaderAndIsr(m.partition, m.broker, m.leader_epoch, m.partition_epoch,
                                          m.controller_epoch)
    if state.next_value <= config.max_records:
        for p in parts:
            yield ProducerSend(p)
            # A producer whose metadata is stale still addresses a broker that believes it leads.
            current = state.controller.partitions[p].leader
            for b in range(n):
                if b != current and state.replicas[p][b].leader == b:
                    yield ProducerSend(p, b)
    for m in sorted(state.produce_requests):
        yield LeaderAppend(m.partition, m.broker, m.value)
    for p in parts:
        row = state.replicas[p]
        ps = state.controller.partitions[p]
        for b in range(n):
            r = row[b]
            for w in r.purgatory:
                if w.offset < r.high_watermark or not prune:
                    yield LeaderAckProduce(p, b, w.offset)
            # Most followers are neither lagging nor newly caught up: the remote LEO and the
            # lag clock say so before a guard is asked (shrink needs the remote LEO below the
            # LEO and a lag, expand needs it at or above the HW); a synchronous change also
            # needs the leader's view at the controller's epochs.
            if r.leader == b and alive[b] and (not prune or config.isr_changes_async or (
                    (r.leader_epoch, r.partition_epoch) == (ps.leader_epoch, ps.partition_epoch))):
                for f in range(n):
                    if f == b:
                        continue
                    if f in r.isr:
                        if not prune or (r.remote_log_end_offset[f] < len(r.log)
                                         and _lagging(config, r, f)):
                            yield LeaderShrinkIsr(p, b, f)
                    elif not prune or _up_to_high_watermark(r, f):
                        yield LeaderExpandIsr(p, b, f)
        for f in range(n):
            message = state.fetches[p][f]
            if message is None:
                if alive[f] and row[f].leader not in (NO_LEADER, f):
                    yield FollowerSendFetch(p, f)
            elif isinstance(message, FetchResponse):
                yield FollowerHandleFetchResponse(p, f)
            else:
                yield LeaderHandleFetch(p, message.leader, f)
            if message is not None and drops_left:
                yield NetworkDropFetch(p, f)
    crashes_left = state.crashes < config.max_crashes
    for p in parts:
        leader = state.controller.partitions[p].leader
        if not prune or (leader != NO_LEADER and state.replicas[p][leader].high_watermark > 0):
            yield ConsumerRead(p)  # reads the leader's records below its HW: none, nothing new
        if crashes_left:
            for b in range(n):
                if alive[b] and state.replicas[p][b].flushed_offset < len(state.replicas[p][b].log):
                    yield BrokerFlush(p, b)
    for b in range(n):
        if alive[b]:
            if crashes_left:
                yield BrokerCrash(b)
            if registered[b] == UNKNOWN:
                yield BrokerRegister(b)
        elif registered[b] == UNKNOWN:
            yield BrokerRestart(b)
    if state.ticks < config.max_ticks:
        yield Tick()
    for m in sorted(state.alter_partitions):
        kind = ControllerHandleAlterPartition if m.answer == PENDING else \
            LeaderHandleAlterPartitionResponse
        yield kind(m.partition, m.leader, m.leader_epoch, m.partition_epoch)


def successors(config: Config, state: Cluster) -> Iterator[tuple[Action, Cluster]]:
    """Every enabled action with the state it leads to, in a deterministic order."""
    handlers = _HANDLERS
    for action in candidates(config, state):
        try:
            # Candidates are in range by construction: skip step()'s argument checks.
            yield action, handlers[type(action)](config, state, action)[0]
        except NotEnabled:
            continue


def enabled(config: Config, state: Cluster) -> Iterator[Action]:
    """Every enabled action, in a deterministic order."""
    for action, _ in successors(config, state):
        yield action
