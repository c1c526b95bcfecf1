"""The broker: a sans-I/O core for one broker's replicas of every partition.

Theory of operation. `BrokerCore` is driven by its driver (the simulator or the TCP server)
through four inputs: `start(now_ms)`, `on_message(now_ms, src, mid, message)`,
`on_timer(now_ms)` and `on_disconnected(now_ms, peer)`. Each returns a list of effects (see
`impl.protocol.messages`): messages to send, disk operations to perform in order, client
history lines and `Transition`s, the node's trace events. The core never reads a clock, never
touches a socket or a file, and draws no random numbers; `next_deadline()` tells the driver when
to call `on_timer` next. The core's state is mutated in place (a broker's logs are too large to
copy per step); a driver that needs a snapshot deep-copies it.

Each partition's replica follows Kafka's replication protocol with the configured variant:
- leader: appends produce batches in its leader epoch, tracks each follower's LEO (from its
  fetch offset) and last caught-up time, advances the HW to the minimum LEO over the ISR, parks
  acks=all writes until the HW passes them, shrinks the ISR on `replica.lag.time.max.ms` and
  expands it when a follower has caught up, each change a compare-and-set at the metadata
  store (`AlterIsr`); while that request is out, the partition's inputs wait (as Kafka's
  ZooKeeper-era leaders held the partition lock across the write).
- follower: one fetch (or OffsetsForLeaderEpoch) in flight at a time to the leader in its view,
  given up after `ClusterConfig.replica_fetch_timeout_ms` (as Kafka's fetcher times out a
  request and closes its connection) and sent again after the backoff; the next fetch's trace
  line says which one it gave up, so replay drops that one in the spec (its `NetworkDropFetch`).
  A leader drops a follower's parked fetch when a newer one of that follower arrives.
  Truncation per variant: to its HW on a leader change (`high-watermark`), by an
  OffsetsForLeaderEpoch round (`epoch-end`, `epoch-end-279`), or by the diverging epoch in a
  fetch answer (`diverging-epoch`).

Transitions are named as the spec's actions, with the spec's arguments, so the replay in
`model_check/` can map them; the code here is written from the protocol, not from the spec.
"""

from __future__ import annotations

import dataclasses
from collections import deque

from impl.config import ClusterConfig
from impl.protocol.messages import (
    FENCED_LEADER_EPOCH,
    NO_LEADER,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    RECORD_OVERHEAD,
    REQUEST_TIMED_OUT,
    UNKNOWN,
    UNKNOWN_LEADER_EPOCH,
    AlterIsr,
    AlterIsrResponse,
    ConsumerFetch,
    ConsumerFetchResponse,
    DiskAppend,
    DiskCheckpoint,
    DiskFlush,
    DiskTruncate,
    Fetch,
    FetchResponse,
    Heartbeat,
    HeartbeatResponse,
    LeaderAndIsr,
    Message,
    OffsetsForLeaderEpoch,
    Produce,
    ProduceResponse,
    Recall,
    RegisterBroker,
    RegisterBrokerResponse,
    Send,
    Transition,
)
from vocab.actions import ActionName as A
from vocab.outcomes import Code, KafkaError, Outcome

META = "meta"
NEVER = 1 << 62
# The errors a leader answers a fetch with (each is also the follower's outcome code).
FETCH_ERRORS = frozenset({NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH,
                          OFFSET_OUT_OF_RANGE})


def broker_node(broker: int) -> str:
    return f"b{broker}"


# Leader-epoch cache (Kafka's LeaderEpochFileCache) ------------------------------------------


def assign_epoch(cache: list[tuple[int, int]], epoch: int, start: int) -> bool:
    """Record that `epoch` starts at `start`; True if the cache changed.

    Entries at the end whose epoch or start is not below the new one are replaced, so the cache
    stays strictly increasing in both and agrees with the log."""
    if cache and cache[-1][0] == epoch and start >= cache[-1][1]:
        return False
    while cache and (cache[-1][0] >= epoch or cache[-1][1] >= start):
        cache.pop()
    cache.append((epoch, start))
    return True


def end_offset_for(cache: list[tuple[int, int]], leo: int, epoch: int) -> tuple[int, int]:
    """OffsetsForLeaderEpoch, Kafka >= 2.0: (largest cached epoch <= `epoch`, its end offset).

    Undefined, (-1, -1), above the latest epoch or with an empty cache."""
    if epoch == UNKNOWN or not cache:
        return UNKNOWN, UNKNOWN
    if cache[-1][0] == epoch:
        return epoch, leo
    previous = None
    for cached, start in cache:
        if cached > epoch:
            return (epoch if previous is None else previous), start
        previous = cached
    return UNKNOWN, UNKNOWN


def start_offset_after(cache: list[tuple[int, int]], leo: int, epoch: int) -> int:
    """OffsetsForLeaderEpoch, Kafka 0.11 (KIP-101): the start of the next larger cached epoch
    (LEO for the latest); -1 below the first or above the latest."""
    if not cache or epoch < cache[0][0]:
        return UNKNOWN
    if cache[-1][0] == epoch:
        return leo
    for cached, start in cache:
        if cached > epoch:
            return start
    return UNKNOWN


# Per-partition state -------------------------------------------------------------------------


class Replica:
    """One partition's replica on this broker. Records are (epoch, value, payload)."""

    __slots__ = (
        "partition", "log", "high_watermark", "flushed", "epoch_cache", "leader",
        "leader_epoch", "isr", "partition_epoch", "truncation_pending", "fetch_in_flight",
        "fetch_to", "fetch_seq", "fetch_expires_at", "gave_up_seq",
        "fetch_at", "remote_leo", "remote_broker_epoch", "caught_up_ms", "hw_sent", "parked",
        "purgatory", "alter", "alter_retry_at", "deferred",
    )

    def __init__(self, partition: int, brokers: int, log=None, high_watermark: int = 0,
                 epoch_cache=None):
        self.partition = partition
        self.log: list[tuple[int, int, bytes]] = list(log or ())
        self.high_watermark = min(high_watermark, len(self.log))
        self.flushed = len(self.log)
        # Entries at or past the recovered LEO belong to records the crash took.
        self.epoch_cache: list[tuple[int, int]] = [
            tuple(e) for e in (epoch_cache or ()) if e[1] < len(self.log)
        ]
        # View from the last LeaderAndIsr (or ISR change) applied.
        self.leader = NO_LEADER
        self.leader_epoch = UNKNOWN
        self.isr: tuple[int, ...] = ()
        self.partition_epoch = UNKNOWN
        # Follower side.
        self.truncation_pending = False
        self.fetch_in_flight = False
        self.fetch_to = NO_LEADER  # the broker our in-flight fetch went to
        self.fetch_seq = 0  # the number of our latest fetch (Fetch.seq)
        self.fetch_expires_at = NEVER  # when we give up the fetch in flight
        self.gave_up_seq = UNKNOWN  # the fetch given up since our last send, if any
        self.fetch_at = NEVER
        # Leader side, indexed by broker id.
        self.remote_leo = [UNKNOWN] * brokers
        self.remote_broker_epoch = [UNKNOWN] * brokers
        self.caught_up_ms = [0] * brokers
        self.hw_sent = [UNKNOWN] * brokers
        self.parked: dict[int, tuple] = {}  # follower -> (deadline, src, mid, Fetch)
        # [last offset, [(offset, value)], client, deadline], in append order: offsets and
        # deadlines both only grow along it, so commits and expiries leave from the left.
        self.purgatory: deque[list] = deque()
        self.alter: AlterIsr | None = None  # ISR change awaiting the store
        self.alter_retry_at = NEVER
        self.deferred: list[tuple] = []  # inputs waiting for `alter`

    @property
    def leo(self) -> int:
        return len(self.log)

    def latest_cached_epoch(self) -> int:
        return self.epoch_cache[-1][0] if self.epoch_cache else UNKNOWN

    def epoch_start(self, epoch: int) -> int:
        for cached, start in self.epoch_cache:
            if cached == epoch:
                return start
        return UNKNOWN


class BrokerCore:
    """One broker's protocol core (see the module docstring)."""

    def __init__(self, broker: int, config: ClusterConfig, recovered: dict | None = None,
                 tracing: bool = True, incarnation: int = 0):
        """`recovered`: partition -> (records, high watermark, epoch cache) read from disk.
        `tracing` False leaves transitions without post-states (for throughput runs)."""
        self.broker = broker
        self.tracing = tracing
        self.incarnation = incarnation  # which process this is (0 = the first)
        self.node = broker_node(broker)
        self.config = config
        self.rules = config.rules
        self.mutants = config.mutants
        self.broker_epoch = UNKNOWN
        self.registering = False
        self.restarted = True
        self.heartbeat_at = NEVER
        self.isr_check_at = NEVER
        self.flush_at = NEVER
        self._late_fetches: list[tuple] = []  # parked fetches to answer after a role change
        # partition -> (length, last entry) of the epoch cache as the trace last showed it.
        self._traced_cache: dict[int, tuple] = {}
        recovered = recovered or {}
        self.replicas: list[Replica] = []
        for p in range(config.partitions):
            log, hw, cache = recovered.get(p, ((), 0, ()))
            self.replicas.append(Replica(p, config.brokers, log, hw, cache))

    def bootstrap(self, views: list[LeaderAndIsr]) -> list:
        """Start as a member of a freshly created cluster: registered with broker epoch 0 and
        each partition's first LeaderAndIsr applied (the spec's initial state). Returns the
        disk effects (the leaders' epoch caches)."""
        effects: list = []
        self.broker_epoch = 0
        self.restarted = False
        self.heartbeat_at = self.config.heartbeat_interval_ms
        self.isr_check_at = self.config.replica_lag_time_max_ms // 2
        for view in views:
            if self.broker not in self.config.assignment(view.partition):
                continue  # not a replica of this partition: no view, never fetches
            r = self.replicas[view.partition]
            r.leader, r.leader_epoch, r.isr, r.partition_epoch = (
                view.leader, view.leader_epoch, tuple(view.isr), view.partition_epoch)
            if view.leader == self.broker:
                r.caught_up_ms = [0] * self.config.brokers
                assign_epoch(r.epoch_cache, view.leader_epoch, r.leo)
                effects.append(self._checkpoint(r))
            else:
                r.fetch_at = 0
        return effects

    # Inputs ----------------------------------------------------------------------------------

    def start(self, now: int) -> list:
        self.registering = True
        self.isr_check_at = now + self.config.replica_lag_time_max_ms // 2
        return [Send(META, RegisterBroker(self.broker, self.restarted, self.incarnation))]

    def next_deadline(self) -> int:
        deadline = min(self.heartbeat_at, self.isr_check_at, self.flush_at)
        for r in self.replicas:
            if r.alter is not None:
                # The partition waits for its ISR change; its other timers wait with it.
                deadline = min(deadline, r.alter_retry_at)
                continue
            deadline = min(deadline, r.fetch_at)
            if r.fetch_in_flight:
                deadline = min(deadline, r.fetch_expires_at)
            for entry in r.parked.values():
                deadline = min(deadline, entry[0])
            if r.purgatory:
                deadline = min(deadline, r.purgatory[0][3])
        return deadline

    def on_timer(self, now: int) -> list:
        effects: list = []
        if now >= self.heartbeat_at:
            self.heartbeat_at = now + self.config.heartbeat_interval_ms
            if self.broker_epoch != UNKNOWN and not self.registering:
                effects.append(Send(META, Heartbeat(self.broker, self.broker_epoch)))
        for r in self.replicas:
            if now >= r.alter_retry_at and r.alter is not None:
                r.alter_retry_at = now + self.config.request_timeout_ms
                effects.append(Send(META, r.alter))
            if r.alter is not None:
                continue  # the partition waits for its ISR change
            if r.fetch_in_flight and now >= r.fetch_expires_at:
                effects += self._give_up_fetch(r, now)
            if now >= r.fetch_at:
                r.fetch_at = NEVER
                effects += self._send_fetch(r, now)
            for follower, entry in sorted(r.parked.items()):
                if now >= entry[0]:
                    del r.parked[follower]
                    _, src, mid, request = entry
                    effects += self._handle_fetch(r, now, src, mid, request, parked=True)
            expired = []
            while r.purgatory and now >= r.purgatory[0][3]:
                expired.append(r.purgatory.popleft())
            if expired:
                for _, writes, client, _ in expired:
                    effects.append(Send(client, ProduceResponse(
                        r.partition, tuple((v, o, REQUEST_TIMED_OUT) for o, v in writes))))
        if now >= self.isr_check_at:
            self.isr_check_at = now + self.config.replica_lag_time_max_ms // 2
            for r in self.replicas:
                if r.alter is None:
                    effects += self._maybe_shrink_isr(r, now)
        if now >= self.flush_at:
            self.flush_at = NEVER
        return effects

    def on_disconnected(self, now: int, peer: str) -> list:
        """The connection to `peer` broke: what was in flight on it is lost."""
        effects: list = []
        for r in self.replicas:
            if r.fetch_in_flight and peer == broker_node(r.fetch_to):
                r.fetch_in_flight = False
                r.fetch_at = now + self.config.replica_fetch_backoff_ms
            if peer == META and r.alter is not None:
                r.alter_retry_at = now + self.config.replica_fetch_backoff_ms
            if r.deferred:
                # Requests from the peer still waiting behind an ISR change die with it too.
                for _, mid, message in [d for d in r.deferred if d[0] == peer]:
                    if type(message) in (Fetch, OffsetsForLeaderEpoch):
                        effects.append(self._transition(
                            r, A.NETWORK_DROP_FETCH, {"follower": message.follower},
                            Outcome(Code.DROPPED), mid))
                r.deferred = [d for d in r.deferred if d[0] != peer]
            for follower in [f for f in r.parked if broker_node(f) == peer]:
                # A parked long poll dies with its connection; the follower will fetch again.
                _, _, mid, _ = r.parked.pop(follower)
                effects.append(self._transition(r, A.NETWORK_DROP_FETCH, {"follower": follower},
                                                Outcome(Code.DROPPED), mid))
        if peer == META and self.registering:
            effects.append(Send(META, RegisterBroker(self.broker, self.restarted, self.incarnation)))
        return effects

    def on_message(self, now: int, src: str, mid: str, message: Message) -> list:
        kind = type(message)
        if kind is RegisterBrokerResponse:
            self.broker_epoch = message.broker_epoch
            self.registering = False
            self.restarted = False
            self.heartbeat_at = now + self.config.heartbeat_interval_ms
            return []
        if kind is HeartbeatResponse:
            if not message.registered and not self.registering:
                # Our session expired (we were paused or cut off): register again.
                # Fetches keep the old broker epoch until the new one is granted.
                self.registering = True
                return [Send(META, RegisterBroker(self.broker, False, self.incarnation))]
            return []
        partition = getattr(message, "partition", None)
        if not isinstance(partition, int) or not 0 <= partition < self.config.partitions:
            return []
        r = self.replicas[partition]
        if kind is AlterIsrResponse:
            return self._handle_alter_response(r, now, message)
        if r.alter is not None:
            r.deferred.append((src, mid, message))
            return []
        return self._dispatch(r, now, src, mid, message)

    def _dispatch(self, r: Replica, now: int, src: str, mid: str, message: Message) -> list:
        kind = type(message)
        if kind is LeaderAndIsr:
            return self._handle_leader_and_isr(r, now, mid, message)
        if kind is Fetch or kind is OffsetsForLeaderEpoch:
            return self._handle_fetch(r, now, src, mid, message)
        if kind is FetchResponse:
            return self._handle_fetch_response(r, now, mid, message)
        if kind is Produce:
            return self._handle_produce(r, now, src, mid, message)
        if kind is ConsumerFetch:
            return self._handle_consumer_fetch(r, now, src, mid, message)
        return []

    # Trace helpers ---------------------------------------------------------------------------

    def replica_state(self, r: Replica) -> dict:
        return {
            "partition": r.partition,
            "broker": self.broker,
            "log_end_offset": r.leo,
            "high_watermark": r.high_watermark,
            "flushed_offset": r.flushed,
            "last": [r.log[-1][0], r.log[-1][1]] if r.log else None,
            "epoch_cache": [list(e) for e in r.epoch_cache],
            "leader": r.leader,
            "leader_epoch": r.leader_epoch,
            "isr": list(r.isr),
            "partition_epoch": r.partition_epoch,
        }

    def _transition(self, r: Replica, action: A, args: dict, outcome: Outcome,
                    recv: str | None = None, detail: dict | None = None) -> Transition:
        return Transition.of(action, {"partition": r.partition, "broker": self.broker, **args},
                             outcome, state=self._post_state(r) if self.tracing else None,
                             detail=detail, recv=recv)

    def _post_state(self, r: Replica) -> dict:
        """A transition's post-state: the replica's fields, with the epoch cache only when it
        changed since this process last traced the replica. The cache gains an entry per
        leadership and Kafka keeps it for the life of the log, so carried on every line it
        made a long trace quadratic in size. Both of the cache's changes (assign, truncate)
        act at its end, so its length and last entry tell whether it changed."""
        state = self.replica_state(r)
        cache = r.epoch_cache
        key = (len(cache), tuple(cache[-1]) if cache else None)
        if self._traced_cache.get(r.partition) == key:
            del state["epoch_cache"]
        else:
            self._traced_cache[r.partition] = key
        return state

    # Log changes (each also returns the disk effects) -----------------------------------------

    def _append(self, r: Replica, records: list[tuple[int, int, bytes]]) -> list:
        start = r.leo
        cache_changed = False
        for i, (epoch, _, _) in enumerate(records):
            cache_changed |= assign_epoch(r.epoch_cache, epoch, start + i)
        r.log.extend(records)
        effects: list = [DiskAppend(r.partition, start, tuple(records))]
        interval = self.config.log_flush_interval_messages
        if interval is not None and r.leo - r.flushed >= interval:
            effects += self._flush(r)
        if cache_changed:
            effects.append(self._checkpoint(r))
        return effects

    def _flush(self, r: Replica) -> list:
        r.flushed = r.leo
        if self.mutants.false_flush:
            return []  # BUG: reports the records durable without writing them out
        return [DiskFlush(r.partition)]

    def _truncate(self, r: Replica, offset: int) -> list:
        if offset >= r.leo:
            # The log stays, but not a cache entry from a leadership without writes
            # (KAFKA-10706: otherwise the follower asks about that epoch forever).
            kept = [e for e in r.epoch_cache if e[1] < offset]
            if kept == r.epoch_cache:
                return []
            r.epoch_cache = kept
            return [self._checkpoint(r)]
        del r.log[offset:]
        r.high_watermark = min(r.high_watermark, offset)
        r.flushed = min(r.flushed, offset)
        r.epoch_cache = [e for e in r.epoch_cache if e[1] < offset]
        return [DiskTruncate(r.partition, offset), self._checkpoint(r)]

    def _checkpoint(self, r: Replica) -> DiskCheckpoint:
        return DiskCheckpoint(r.partition, tuple(r.epoch_cache), r.high_watermark)

    # Role changes ----------------------------------------------------------------------------

    def _handle_leader_and_isr(self, r: Replica, now: int, mid: str, m: LeaderAndIsr) -> list:
        if (m.leader_epoch, m.partition_epoch) <= (r.leader_epoch, r.partition_epoch):
            return []  # stale: an older request overtaken by a newer one
        if m.broker_epoch != self.broker_epoch:
            return []  # sent to another session of this broker (before a restart)
        args = {"leader_epoch": m.leader_epoch, "partition_epoch": m.partition_epoch}
        if m.leader == self.broker:
            return self._become_leader(r, now, mid, m, args)
        return self._become_follower(r, now, mid, m, args)

    def _become_leader(self, r: Replica, now: int, mid: str, m: LeaderAndIsr, args) -> list:
        effects: list = []
        same_epoch = r.leader == self.broker and r.leader_epoch == m.leader_epoch
        was_leader = r.leader == self.broker
        r.leader, r.leader_epoch, r.isr, r.partition_epoch = (
            m.leader, m.leader_epoch, tuple(m.isr), m.partition_epoch)
        if same_epoch:
            outcome = Outcome(Code.ISR_UPDATED)
        else:
            if not self.mutants.no_epoch_cache_on_leader:
                if assign_epoch(r.epoch_cache, m.leader_epoch, r.leo):
                    effects.append(self._checkpoint(r))
            if was_leader:
                outcome = Outcome(Code.STILL_LEADER, leader_epoch=m.leader_epoch)
            else:
                n = self.config.brokers
                r.remote_leo = [UNKNOWN] * n
                r.remote_broker_epoch = [UNKNOWN] * n
                r.caught_up_ms = [now] * n
                r.hw_sent = [UNKNOWN] * n
                r.parked = {}
                r.purgatory = deque()
                r.truncation_pending = False
                r.fetch_at = NEVER  # our last fetch, if any, stays in flight; its answer is dropped
                outcome = Outcome(Code.LEADER, leader_epoch=m.leader_epoch)
        hw_moved = self._advance_hw(r)
        effects.insert(0, self._transition(r, A.BECOME_LEADER, args, outcome, mid))
        if hw_moved:
            effects += self._after_hw_moved(r, now)
        return effects

    def _become_follower(self, r: Replica, now: int, mid: str, m: LeaderAndIsr, args) -> list:
        effects: list = []
        new_leadership = (r.leader, r.leader_epoch) != (m.leader, m.leader_epoch)
        leader_changed = r.leader != m.leader
        was_leader = r.leader == self.broker
        r.leader, r.leader_epoch, r.isr, r.partition_epoch = (
            m.leader, m.leader_epoch, tuple(m.isr), m.partition_epoch)
        # Parked writes were appended and may still commit under the new leader: their outcome
        # is unknown (Kafka answers NOT_LEADER_OR_FOLLOWER, and a retry duplicates them).
        for _, writes, client, _ in r.purgatory:
            effects.append(Send(client, ProduceResponse(
                r.partition, tuple((v, o, REQUEST_TIMED_OUT) for o, v in writes))))
        r.purgatory = deque()
        # Parked long polls are answered now: this broker no longer leads.
        parked, r.parked = r.parked, {}
        for follower in sorted(parked):
            _, src, pmid, request = parked[follower]
            self._late_fetches.append((src, pmid, request))
        if was_leader:
            n = self.config.brokers
            r.remote_leo = [UNKNOWN] * n
            r.remote_broker_epoch = [UNKNOWN] * n
        outcome = Outcome(Code.FOLLOWER, leader=m.leader, leader_epoch=m.leader_epoch)
        truncated = Outcome(Code.FOLLOWER_TRUNCATED_TO_HW, leader=m.leader,
                            leader_epoch=m.leader_epoch, high_watermark=r.high_watermark)
        truncation = self.rules.truncation
        if self.mutants.truncate_to_hw and new_leadership and m.leader != NO_LEADER:
            truncation = "bug"
            effects += self._truncate(r, r.high_watermark)  # BUG: HW instead of epochs
            outcome = truncated
        elif truncation == "high-watermark" and leader_changed and m.leader != NO_LEADER:
            effects += self._truncate(r, r.high_watermark)
            outcome = truncated
        elif truncation in ("epoch-end", "epoch-end-279") and new_leadership:
            r.truncation_pending = bool(r.log)
        effects.insert(0, self._transition(r, A.BECOME_FOLLOWER, args, outcome, mid))
        for src, pmid, request in self._late_fetches:
            effects += self._handle_fetch(r, now, src, pmid, request, parked=True)
        self._late_fetches = []
        if r.fetch_in_flight and m.leader not in (NO_LEADER, self.broker, r.fetch_to):
            # Kafka stops the fetcher of the old leader on a leader change. Waiting for its
            # answer could take for ever: a leader cut off by a partition drops the fetch and
            # this end's connection to it never breaks. A late answer is ignored (fetch_to).
            r.fetch_in_flight = False
            effects.append(Recall(broker_node(r.fetch_to), r.partition))
        if m.leader not in (NO_LEADER, self.broker) and not r.fetch_in_flight:
            effects += self._send_fetch(r, now)
        return effects

    # Follower --------------------------------------------------------------------------------

    def _send_fetch(self, r: Replica, now: int) -> list:
        if r.leader in (NO_LEADER, self.broker) or r.fetch_in_flight:
            return []
        r.fetch_in_flight = True
        r.fetch_to = r.leader
        r.fetch_seq = (r.fetch_seq + 1) & 0x7FFFFFFF  # as Kafka's int32 correlation id
        timeout = self.config.replica_fetch_timeout_ms
        r.fetch_expires_at = NEVER if timeout is None else now + timeout
        detail = None
        if r.gave_up_seq != UNKNOWN:
            detail = {"gave_up": r.gave_up_seq}
            r.gave_up_seq = UNKNOWN
        if r.truncation_pending:
            request = OffsetsForLeaderEpoch(r.partition, self.broker, r.latest_cached_epoch(),
                                            r.leader_epoch, r.fetch_seq)
            outcome = Outcome(Code.EPOCH_REQUEST_SENT, epoch=request.epoch)
        else:
            # Kafka's fetcher sends its cache's latest epoch (`latestEpoch`), not its last
            # record's: an epoch it led without writing must meet the divergence check.
            request = Fetch(r.partition, self.broker, r.leo, r.latest_cached_epoch(),
                            r.leader_epoch, self.broker_epoch, r.fetch_seq)
            outcome = Outcome(Code.FETCH_SENT, fetch_offset=r.leo)
        t = self._transition(r, A.FOLLOWER_SEND_FETCH, {}, outcome, detail=detail)
        t.sends.append((broker_node(r.leader), request))
        return [t]

    def _give_up_fetch(self, r: Replica, now: int) -> list:
        """No answer within the fetch timeout: the request or its answer is lost (a dropped
        frame, a long poll the leader let go when it took the connection for broken). Kafka's
        fetcher fails the request, closes the connection and backs off; a late answer is
        ignored (`fetch_seq`). The next fetch's trace line names the one given up."""
        r.fetch_in_flight = False
        r.fetch_expires_at = NEVER
        r.gave_up_seq = r.fetch_seq
        r.fetch_at = now + self.config.replica_fetch_backoff_ms
        return [Recall(broker_node(r.fetch_to), r.partition)]

    def _handle_fetch_response(self, r: Replica, now: int, mid: str, m: FetchResponse) -> list:
        if not r.fetch_in_flight or m.leader != r.fetch_to or m.seq != r.fetch_seq:
            # The answer to a fetch we gave up: its connection broke meanwhile, or the leader
            # changed and changed back while it was on the way.
            return []
        if m.kind == "error" and m.error not in FETCH_ERRORS:
            return []  # malformed: no leader sends this error
        r.fetch_in_flight = False
        effects: list = []
        retry_now = True
        rules = self.rules
        if m.leader != r.leader:
            outcome = Outcome(Code.DROPPED_NOT_FROM_LEADER, leader=m.leader)
        elif rules.fencing and m.leader_epoch != r.leader_epoch:
            outcome = Outcome(Code.DROPPED_OTHER_EPOCH, leader_epoch=m.leader_epoch,
                              current_leader_epoch=r.leader_epoch)
        elif m.error == OFFSET_OUT_OF_RANGE:
            effects += self._truncate(r, m.end_offset)
            outcome = Outcome(Code.OUT_OF_RANGE_TRUNCATED, log_end_offset=r.leo)
        elif m.kind == "error":
            outcome = Outcome(Code(m.error))
            retry_now = False
        elif m.kind == "epoch":
            if not r.truncation_pending:
                outcome = Outcome(Code.DROPPED_NO_TRUNCATION_DUE)
            else:
                before = r.leo
                if rules.truncation == "epoch-end":
                    end = m.end_offset if m.end_offset != UNKNOWN else r.high_watermark
                    effects += self._truncate(r, end)
                    r.truncation_pending = False
                elif m.epoch == UNKNOWN:
                    effects += self._truncate(r, r.high_watermark)
                    r.truncation_pending = False
                else:
                    finished = self._truncate_to_epoch_answer(r, m.epoch, m.end_offset, effects)
                    r.truncation_pending = not finished and bool(r.log)
                code = Code.TRUNCATED_ROUND_DUE if r.truncation_pending else Code.TRUNCATED
                outcome = Outcome(code, before=before, after=r.leo)
        elif m.kind == "diverging":
            before = r.leo
            self._truncate_to_epoch_answer(r, m.epoch, m.end_offset, effects)
            outcome = Outcome(Code.DIVERGED, before=before, after=r.leo)
        elif r.truncation_pending:
            outcome = Outcome(Code.DROPPED_TRUNCATION_PENDING)
        elif m.fetch_offset != r.leo:
            outcome = Outcome(Code.DROPPED_STALE_OFFSET, fetch_offset=m.fetch_offset,
                              log_end_offset=r.leo)
        else:
            if m.records:
                effects += self._append(r, list(m.records))
            hw = r.leo if self.mutants.follower_hw_is_leo else min(m.high_watermark, r.leo)
            if hw != r.high_watermark:
                r.high_watermark = hw
                effects.append(self._checkpoint(r))
            outcome = Outcome(Code.RECORDS_APPENDED, records=len(m.records),
                              high_watermark=r.high_watermark)
        # The records themselves stay out of the trace: a catch-up after a restart would write
        # the whole log into one line. The post-state (LEO, last record, cache) pins them.
        detail = {"records": len(m.records), "from": m.fetch_offset} if m.records else None
        effects.insert(0, self._transition(r, A.FOLLOWER_HANDLE_FETCH_RESPONSE, {}, outcome, mid,
                                           detail))
        if retry_now:
            effects += self._send_fetch(r, now)
        else:
            r.fetch_at = now + self.config.replica_fetch_backoff_ms
        return effects

    def _truncate_to_epoch_answer(self, r: Replica, leader_epoch: int, leader_end: int,
                                  effects: list) -> bool:
        """KIP-279 follower rule for a (leader epoch, end offset) answer; True when done."""
        if leader_epoch == UNKNOWN:
            effects += self._truncate(r, r.high_watermark)
            return True
        own_epoch, own_end = end_offset_for(r.epoch_cache, r.leo, leader_epoch)
        if own_epoch == UNKNOWN:
            effects += self._truncate(r, min(leader_end, r.leo))
            return True
        if own_epoch != leader_epoch:
            effects += self._truncate(r, own_end)
            return False
        effects += self._truncate(r, min(leader_end, own_end))
        return True

    # Leader ----------------------------------------------------------------------------------

    def _handle_fetch(self, r: Replica, now: int, src: str, mid: str, m, parked: bool = False):
        follower = m.follower
        if not 0 <= follower < self.config.brokers or follower == self.broker:
            return []
        effects: list = []
        if not parked and follower in r.parked:
            # A newer request from the follower: it gave up the parked one (timed out), which
            # is never to be answered; the new one takes its place.
            _, _, old_mid, _ = r.parked.pop(follower)
            effects.append(self._transition(r, A.NETWORK_DROP_FETCH, {"follower": follower},
                                            Outcome(Code.DROPPED), old_mid,
                                            {"why": "superseded"}))
        return effects + self._answer_fetch(r, now, src, mid, m, parked)

    def _answer_fetch(self, r: Replica, now: int, src: str, mid: str, m, parked: bool) -> list:
        follower = m.follower
        rules = self.rules
        base = {"follower": follower}

        def answer(response: FetchResponse, outcome: Outcome) -> list:
            t = self._transition(r, A.LEADER_HANDLE_FETCH, base, outcome, mid)
            t.sends.append((src, dataclasses.replace(response, seq=m.seq)))
            return [t]

        def error(code: KafkaError, **extra) -> list:
            return answer(FetchResponse(r.partition, self.broker, r.leader_epoch, "error",
                                        error=code, **extra), Outcome(Code(code)))

        if r.leader != self.broker:
            return error(NOT_LEADER_OR_FOLLOWER)
        if rules.fencing and not self.mutants.skip_fetch_fencing:
            if m.current_leader_epoch < r.leader_epoch:
                return error(FENCED_LEADER_EPOCH)
            if m.current_leader_epoch > r.leader_epoch:
                return error(UNKNOWN_LEADER_EPOCH)
        if type(m) is OffsetsForLeaderEpoch:
            if rules.truncation == "epoch-end":
                epoch, end = m.epoch, start_offset_after(r.epoch_cache, r.leo, m.epoch)
            else:
                epoch, end = end_offset_for(r.epoch_cache, r.leo, m.epoch)
            return answer(FetchResponse(r.partition, self.broker, r.leader_epoch, "epoch",
                                        epoch=epoch, end_offset=end),
                          Outcome(Code.EPOCH_END, epoch=epoch, end_offset=end))
        offset = m.fetch_offset
        if rules.truncation == "diverging-epoch" and offset > 0:
            epoch, end = end_offset_for(r.epoch_cache, r.leo, m.last_fetched_epoch)
            if epoch != m.last_fetched_epoch or end < offset:
                return answer(FetchResponse(r.partition, self.broker, r.leader_epoch,
                                            "diverging", epoch=epoch, end_offset=end),
                              Outcome(Code.DIVERGING_EPOCH, epoch=epoch, end_offset=end))
        if offset > r.leo:
            return error(OFFSET_OUT_OF_RANGE, end_offset=r.leo)
        if (not parked and offset == r.leo and r.remote_leo[follower] == offset
                and r.hw_sent[follower] == r.high_watermark
                and r.remote_broker_epoch[follower] == m.broker_epoch):
            # Long poll: nothing to send and nothing to learn; answer on news or timeout.
            r.parked[follower] = (now + self.config.replica_fetch_wait_max_ms, src, mid, m)
            return []
        r.remote_leo[follower] = offset
        r.remote_broker_epoch[follower] = m.broker_epoch
        if offset >= r.leo:
            r.caught_up_ms[follower] = now
        high_watermark = r.high_watermark  # the answer carries the HW from before this fetch
        hw_moved = self._advance_hw(r)
        if self.tracing:
            records = tuple(r.log[offset:])
        else:
            records = self._fetch_slice(r, offset)
        r.hw_sent[follower] = high_watermark
        outcome = Outcome(Code.RECORDS_SENT, records=len(records), fetch_offset=offset,
                          high_watermark=r.high_watermark, answer_high_watermark=high_watermark)
        effects = answer(FetchResponse(r.partition, self.broker, r.leader_epoch, "records",
                                       records=records, high_watermark=high_watermark,
                                       fetch_offset=offset), outcome)
        if hw_moved:
            effects += self._after_hw_moved(r, now)
        if r.alter is None:
            effects += self._maybe_expand_isr(r, now, follower)
        return effects

    def _fetch_slice(self, r: Replica, offset: int) -> tuple:
        budget = self.config.replica_fetch_max_bytes
        end = offset
        log = r.log
        while end < len(log) and (end == offset or budget > 0):
            budget -= len(log[end][2]) + 16
            end += 1
        return tuple(log[offset:end])

    def _advance_hw(self, r: Replica) -> bool:
        """HW = min LEO over the ISR (never lower); not while the ISR is below min ISR when the
        variant says so. True if it moved."""
        if r.leader != self.broker:
            return False
        strict = self.rules.hw_requires_min_isr or self.config.eligible_leader_replicas_enable
        if strict and len(r.isr) < self.config.min_insync_replicas:
            return False
        if self.mutants.hw_counts_non_isr:
            # BUG: the min.insync.replicas highest LEOs of all replicas, ISR or not.
            leos = sorted((r.leo if b == self.broker else r.remote_leo[b]
                           for b in range(self.config.brokers)), reverse=True)
            candidate = leos[min(self.config.min_insync_replicas, len(leos)) - 1]
        else:
            candidate = min(r.leo if b == self.broker else r.remote_leo[b] for b in r.isr)
        if candidate > r.high_watermark:
            r.high_watermark = candidate
            return True
        return False

    def _after_hw_moved(self, r: Replica, now: int) -> list:
        """Answer the writes the HW has passed, and the followers waiting to learn the HW."""
        effects: list = [self._checkpoint(r)]
        done = []
        while r.purgatory and r.purgatory[0][0] < r.high_watermark:
            done.append(r.purgatory.popleft())
        if done:
            short = len(r.isr) < self.config.min_insync_replicas
            code = NOT_ENOUGH_REPLICAS_AFTER_APPEND if short else NONE
            outcome = Outcome(Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND if short
                              else Code.ACKNOWLEDGED)
            for _, writes, client, _ in done:
                if self.tracing:  # one event per record is for replay; untraced runs skip it
                    effects += [self._transition(r, A.LEADER_ACK_PRODUCE, {"offset": offset},
                                                 outcome) for offset, _ in writes]
                effects.append(Send(client, ProduceResponse(
                    r.partition, tuple((value, offset, code) for offset, value in writes))))
        effects += self._wake_parked(r, now)
        return effects

    def _wake_parked(self, r: Replica, now: int) -> list:
        effects: list = []
        for follower in sorted(r.parked):
            _, src, mid, request = r.parked.pop(follower)
            effects += self._handle_fetch(r, now, src, mid, request, parked=True)
        return effects

    def _maybe_shrink_isr(self, r: Replica, now: int) -> list:
        if r.leader != self.broker:
            return []
        for follower in r.isr:
            if follower == self.broker:
                continue
            lag_ms = now - r.caught_up_ms[follower]
            if r.remote_leo[follower] < r.leo and lag_ms > self.config.replica_lag_time_max_ms:
                isr = tuple(b for b in r.isr if b != follower)
                return self._alter_isr(r, now, isr, follower, expand=False)
        return []

    def _maybe_expand_isr(self, r: Replica, now: int, follower: int) -> list:
        if follower in r.isr or r.leader != self.broker:
            return []
        remote = r.remote_leo[follower]
        if remote == UNKNOWN or remote < r.high_watermark:
            return []
        if self.rules.expand_requires_epoch_start and not self.mutants.expand_without_epoch_start:
            if remote < r.epoch_start(r.leader_epoch):
                return []
        isr = tuple(sorted((*r.isr, follower)))
        return self._alter_isr(r, now, isr, follower, expand=True)

    def _alter_isr(self, r: Replica, now: int, isr, follower: int, expand: bool) -> list:
        self._alter_seq = getattr(self, "_alter_seq", 0) + 1
        r.alter = AlterIsr(f"{self.node}/{self.broker_epoch}/{self._alter_seq}", r.partition,
                           self.broker, r.leader_epoch, r.partition_epoch, isr, follower,
                           r.remote_broker_epoch[follower], expand)
        # Sent again after a request timeout: a request dropped on a cut link breaks no
        # connection, and the partition would wait for its answer forever. The store answers a
        # request id it has committed with the same response, so a repeat changes nothing.
        r.alter_retry_at = now + self.config.request_timeout_ms
        return [Send(META, r.alter)]

    def _handle_alter_response(self, r: Replica, now: int, m: AlterIsrResponse) -> list:
        if r.alter is None or m.request_id != r.alter.request_id:
            return []
        request, r.alter, r.alter_retry_at = r.alter, None, NEVER
        effects: list = []
        if m.error == NONE and r.leader == self.broker:
            r.isr, r.partition_epoch = tuple(m.isr), m.partition_epoch
            if request.expand:
                r.caught_up_ms[request.follower] = now
            hw_moved = self._advance_hw(r)
            effects.append(self._transition(
                r, A.LEADER_APPLY_ISR, {"follower": request.follower},
                Outcome(Code.ISR_APPLIED, isr=list(r.isr), partition_epoch=r.partition_epoch),
                detail={"expand": request.expand}))
            if hw_moved:
                effects += self._after_hw_moved(r, now)
        deferred, r.deferred = r.deferred, []
        for src, mid, message in deferred:
            if r.alter is not None:
                r.deferred.append((src, mid, message))
            else:
                effects += self._dispatch(r, now, src, mid, message)
        return effects

    # Clients ---------------------------------------------------------------------------------

    def _handle_produce(self, r: Replica, now: int, src: str, mid: str, m: Produce) -> list:
        effects: list = []
        code = NONE
        if r.leader != self.broker:
            code = NOT_LEADER_OR_FOLLOWER
        elif (m.acks == "all" and len(r.isr) < self.config.min_insync_replicas
              and not self.mutants.ignore_min_isr):
            code = NOT_ENOUGH_REPLICAS
        if code != NONE:
            for value in m.values:
                effects.append(self._transition(r, A.LEADER_APPEND, {"value": value},
                                                Outcome(Code(code)), mid))
            if m.acks != "0":
                effects.append(Send(src, ProduceResponse(
                    r.partition, tuple((v, UNKNOWN, code) for v in m.values))))
            return effects
        start = r.leo
        writes = [(start + i, v) for i, v in enumerate(m.values)]
        parks = m.acks == "all" and not self.mutants.early_ack
        if parks:
            r.purgatory.append([writes[-1][0], writes, src, now + self.config.request_timeout_ms])
        # acks=1 is acknowledged at the append; acks=all (and acks=0) are not acknowledged yet.
        appended = Code.APPENDED_ACKNOWLEDGED if m.acks == "1" else Code.APPENDED
        hw_moved = False
        if not self.tracing:
            # Throughput runs: the whole batch in one append (traced runs go record by record,
            # since the replay compares the state after each LeaderAppend).
            effects += self._append(r, [(r.leader_epoch, v, m.payloads[i])
                                        for i, v in enumerate(m.values)])
            hw_moved = self._advance_hw(r)
        for i, value in enumerate(m.values if self.tracing else ()):
            effects += self._append(r, [(r.leader_epoch, value, m.payloads[i])])
            hw_moved |= self._advance_hw(r)  # a leader alone in its ISR commits at once
            effects.append(self._transition(r, A.LEADER_APPEND, {"value": value},
                                            Outcome(appended, offset=start + i), mid))
        if m.acks != "0" and not parks:
            # acks=1 answers now; so does acks=all under the early-ack bug.
            effects.append(Send(src, ProduceResponse(
                r.partition, tuple((v, o, NONE) for o, v in writes))))
        if hw_moved:
            effects += self._after_hw_moved(r, now)
        else:
            effects += self._wake_parked(r, now)
        return effects

    def _handle_consumer_fetch(self, r: Replica, now: int, src: str, mid: str,
                               m: ConsumerFetch) -> list:
        if r.leader != self.broker:
            return [Send(src, ConsumerFetchResponse(r.partition, NOT_LEADER_OR_FOLLOWER,
                                                    offset=m.offset))]
        limit = r.leo if self.mutants.serve_above_hw else r.high_watermark
        if m.offset > r.leo:
            return [Send(src, ConsumerFetchResponse(r.partition, OFFSET_OUT_OF_RANGE,
                                                    high_watermark=limit, offset=m.offset))]
        end = limit
        if m.max_bytes >= 0:  # a Kafka client's fetch: bounded, as Kafka's answer is
            end, size = m.offset, 0
            while end < limit:
                size += len(r.log[end][2]) + RECORD_OVERHEAD
                if end > m.offset and size > m.max_bytes:
                    break
                end += 1
        records = tuple((o, r.log[o][1]) for o in range(m.offset, end))
        response = ConsumerFetchResponse(r.partition, NONE, records, limit, m.offset)
        if not records:
            return [Send(src, response)]
        t = self._transition(r, A.CONSUMER_SERVE, {},
                             Outcome(Code.SERVED, records=len(records), limit=limit),
                             mid, {"records": [list(x) for x in records]})
        t.sends.append((src, response))
        return [t]

    # Driver helpers --------------------------------------------------------------------------

    def flush_all(self) -> list:
        """The flush scheduler (or the OS writing back): everything appended becomes durable."""
        effects: list = []
        for r in self.replicas:
            if r.flushed < r.leo and r.alter is None:  # a partition waiting on its ISR waits
                effects += self._flush(r)
                effects.append(self._transition(r, A.BROKER_FLUSH, {}, Outcome(Code.FLUSHED)))
        return effects
