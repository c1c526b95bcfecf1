"""The producer and the consumer: sans-I/O cores that also record a client-visible history.

The producer sends each write to the leader named by its metadata (asked of the store), one
request in flight per partition so that a partition's writes stay in order. A definite refusal
(NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS) is retried after a metadata refresh, up to
`retries`; a timeout, a broken connection or NOT_ENOUGH_REPLICAS_AFTER_APPEND leaves the
outcome unknown (`info`) and is never retried, so the history has no duplicates of our own
making. acks=0 writes are `ok` with offset -1 as soon as they are sent.

The consumer polls the leader for records from its position up to the HW; when its position
is past the leader's log (the log was truncated under it) it starts again from 0, so a history
shows a value that changed at an offset.

History lines are `History` effects (see docs/traces.md); `ProducerSend` transitions link each
request to the broker's `LeaderAppend` events by message id.
"""

from __future__ import annotations

from collections import deque

from impl.protocol.broker import META, NEVER, broker_node
from impl.protocol.messages import (
    NO_LEADER,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    ConsumerFetch,
    ConsumerFetchResponse,
    History,
    Message,
    MetadataRequest,
    MetadataResponse,
    Produce,
    ProduceResponse,
    Send,
    Transition,
)
from vocab.actions import ActionName as A
from vocab.outcomes import Code

RETRIABLE = (NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS)


class ProducerCore:
    node = "producer"

    def __init__(self, partitions: int, acks: str, request_timeout_ms: int, retries: int = 3,
                 payload_bytes: int = 0):
        self.partitions = partitions
        self.acks = acks
        self.timeout = request_timeout_ms
        self.retries = retries
        self.payload = b"x" * payload_bytes
        self.leaders = [NO_LEADER] * partitions
        self.queue: list[deque] = [deque() for _ in range(partitions)]
        self.in_flight: list[tuple | None] = [None] * partitions  # (value, attempt, deadline, dst)
        self.metadata_at = [NEVER] * partitions
        self.stats = {"ok": 0, "fail": 0, "info": 0}

    def _history(self, now: int, type_: str, p: int, value: int, **extra) -> History:
        body = {"kind": "history", "process": self.node, "type": type_, "f": "send",
                "partition": p, "value": value, "acks": self.acks, "time_ms": now, **extra}
        if type_ != "invoke":
            self.stats[type_] += 1
        return History(body)

    def invoke(self, now: int, value: int) -> list:
        p = value % self.partitions
        self.queue[p].append((value, 0))
        return [self._history(now, "invoke", p, value)] + self._pump(now, p)

    def refresh(self, now: int) -> list:
        """Ask for every partition's leader now, as a client does when it starts or its
        metadata ages out (Kafka's metadata.max.age.ms)."""
        return [send for p in range(self.partitions) for send in self._ask_leader(now, p)]

    def _ask_leader(self, now: int, p: int) -> list:
        """A metadata request for `p`, unless one is already out."""
        if self.metadata_at[p] != NEVER:
            return []
        self.metadata_at[p] = now + self.timeout
        return [Send(META, MetadataRequest(p))]

    def _pump(self, now: int, p: int) -> list:
        if self.in_flight[p] is not None or not self.queue[p]:
            return []
        if self.leaders[p] == NO_LEADER:
            return self._ask_leader(now, p)
        value, attempt = self.queue[p].popleft()
        dst = broker_node(self.leaders[p])
        t = Transition(A.PRODUCER_SEND, {"partition": p}, Code.PRODUCE_SENT,
                       {"value": value, "broker": self.leaders[p]},
                       detail={"value": value, "broker": self.leaders[p], "attempt": attempt})
        t.sends.append((dst, Produce(p, (value,), (self.payload,), self.acks)))
        effects: list = [t]
        if self.acks == "0":
            effects.append(self._history(now, "ok", p, value, offset=-1))
            return effects + self._pump(now, p)
        self.in_flight[p] = (value, attempt, now + self.timeout, dst)
        return effects

    def next_deadline(self) -> int:
        deadline = min(self.metadata_at)
        for entry in self.in_flight:
            if entry is not None:
                deadline = min(deadline, entry[2])
        return deadline

    def on_timer(self, now: int) -> list:
        effects: list = []
        for p in range(self.partitions):
            entry = self.in_flight[p]
            if entry is not None and now >= entry[2]:
                self.in_flight[p] = None
                self.leaders[p] = NO_LEADER
                effects.append(self._history(now, "info", p, entry[0], error="TIMEOUT"))
            if now >= self.metadata_at[p]:
                self.metadata_at[p] = NEVER
            effects += self._pump(now, p)
        return effects

    def on_disconnected(self, now: int, peer: str) -> list:
        effects: list = []
        for p in range(self.partitions):
            entry = self.in_flight[p]
            if entry is not None and entry[3] == peer:
                self.in_flight[p] = None
                self.leaders[p] = NO_LEADER
                effects.append(self._history(now, "info", p, entry[0], error="DISCONNECTED"))
                effects += self._pump(now, p)
        return effects

    def on_message(self, now: int, src: str, mid: str, m: Message) -> list:
        if type(m) is MetadataResponse:
            if 0 <= m.partition < self.partitions:
                self.metadata_at[m.partition] = NEVER
                self.leaders[m.partition] = m.leader
                return self._pump(now, m.partition)
            return []
        if type(m) is not ProduceResponse or not 0 <= m.partition < self.partitions:
            return []
        p = m.partition
        entry = self.in_flight[p]
        if entry is None or entry[3] != src:
            return []
        value, attempt, _, _ = entry
        effects: list = []
        for v, offset, error in m.results:
            if v != value:
                continue
            self.in_flight[p] = None
            if error == NONE:
                effects.append(self._history(now, "ok", p, value, offset=offset))
            elif error in RETRIABLE and attempt < self.retries:
                self.leaders[p] = NO_LEADER
                self.queue[p].appendleft((value, attempt + 1))
            elif error in RETRIABLE:
                effects.append(self._history(now, "fail", p, value, error=error))
            else:
                effects.append(self._history(now, "info", p, value, error=error))
        return effects + self._pump(now, p)


class ConsumerCore:
    node = "consumer"

    def __init__(self, partitions: int, poll_interval_ms: int, request_timeout_ms: int):
        self.partitions = partitions
        self.poll = poll_interval_ms
        self.timeout = request_timeout_ms
        self.leaders = [NO_LEADER] * partitions
        self.position = [0] * partitions
        self.waiting: list[tuple | None] = [None] * partitions  # (deadline, dst)
        self.poll_at = [0] * partitions
        self.reads = 0

    def next_deadline(self) -> int:
        deadline = NEVER
        for p, entry in enumerate(self.waiting):
            deadline = min(deadline, self.poll_at[p] if entry is None else entry[0])
        return deadline

    def on_timer(self, now: int) -> list:
        effects: list = []
        for p in range(self.partitions):
            entry = self.waiting[p]
            if entry is not None and now >= entry[0]:
                self.waiting[p] = None
                self.leaders[p] = NO_LEADER
            if self.waiting[p] is None and now >= self.poll_at[p]:
                self.poll_at[p] = now + self.poll
                if self.leaders[p] == NO_LEADER:
                    self.waiting[p] = (now + self.timeout, META)
                    effects.append(Send(META, MetadataRequest(p)))
                else:
                    dst = broker_node(self.leaders[p])
                    self.waiting[p] = (now + self.timeout, dst)
                    effects.append(Send(dst, ConsumerFetch(p, self.position[p])))
        return effects

    def on_disconnected(self, now: int, peer: str) -> list:
        for p in range(self.partitions):
            entry = self.waiting[p]
            if entry is not None and entry[1] == peer:
                self.waiting[p] = None
                self.leaders[p] = NO_LEADER
        return []

    def on_message(self, now: int, src: str, mid: str, m: Message) -> list:
        p = getattr(m, "partition", -1)
        if not isinstance(p, int) or not 0 <= p < self.partitions:
            return []
        entry = self.waiting[p]
        if entry is None or entry[1] != src:
            return []
        # An answer to a fetch that timed out, arriving while a later fetch is out: as Kafka's
        # fetcher does, drop what was fetched from another offset than the position.
        if type(m) is ConsumerFetchResponse and m.offset != self.position[p]:
            return []
        self.waiting[p] = None
        if type(m) is MetadataResponse:
            self.leaders[p] = m.leader
            self.poll_at[p] = now
            return []
        if type(m) is not ConsumerFetchResponse:
            return []
        if m.error == OFFSET_OUT_OF_RANGE:
            self.position[p] = 0
            return []
        if m.error != NONE:
            self.leaders[p] = NO_LEADER
            return []
        if not m.records:
            return []
        self.reads += 1
        self.position[p] = m.records[-1][0] + 1
        return [History({"kind": "history", "process": self.node, "type": "ok", "f": "read",
                         "partition": p, "records": [list(r) for r in m.records],
                         "time_ms": now})]
