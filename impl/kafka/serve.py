"""The Kafka listener of a TCP broker node: trio at the edge of `KafkaDoor`.

Each connection is read one request at a time and answered in order (Kafka answers a
connection's requests in the order they came). A request frame over its cap (codec's
`request_max_bytes`), or one that is not a request we serve, closes its connection with one line
on stderr; every other connection goes on being served. So does an acks=0 produce the door
refuses (no response can say so), as in Kafka.

The listener runs on the thread of the broker core, which also answers replication and
heartbeats; so nothing a client does may hold that thread for long, nor take memory or
connection slots without bound:
- at most `MAX_CONNECTIONS` connections; a connection with no request in flight that sends
  nothing for `CONNECTIONS_MAX_IDLE_MS` is closed (Kafka's connections.max.idle.ms), and when
  every slot is taken a newcomer takes the slot of the connection idle longest (idle at least
  `EVICT_IDLE_MIN_S`);
- the bytes of partial request frames and of answers not yet written, over all connections,
  stay under `QUEUED_MAX_REQUEST_BYTES` (Kafka's queued.max.request.bytes, KIP-72): over it,
  the connections whose unfinished frame or unwritten answer has waited longest are closed
  until the total fits, so a slow sender (or a reader that does not read) goes first, and a
  busy client, whose requests arrive and answers leave at once, does not;
- a request's core inputs are handed on in slices of `SLICE_INPUTS`, yielding between them;
- a Fetch with nothing to serve waits (a long poll, up to its max_wait) for the HW, leader or
  leader epoch of one of its partitions to move (`after_input`, called by the node after each
  core input), then asks again; at most `MAX_PARKED_FETCHES` wait at once, the rest are
  answered at once with nothing.
Refusals are logged at most LOG_LINES_PER_S a second per kind, with a count of those left out.
"""

from __future__ import annotations

import math
import struct
import sys
from dataclasses import dataclass, field, replace

import trio

from impl.kafka.codec import (
    FETCH,
    SOCKET_REQUEST_MAX_BYTES,
    SUPPORTED,
    BadRequest,
    parse_request,
    request_max_bytes,
)
from impl.kafka.door import KafkaDoor

HOST = "127.0.0.1"
MAX_CONNECTIONS = 256
# Kafka's default is 600000 (10 min); a minute here, since a slot an idle client holds is one
# of 256, and Kafka's clients reconnect at once when they have something to send.
CONNECTIONS_MAX_IDLE_MS = 60_000
EVICT_IDLE_MIN_S = 1.0  # a connection idle this long may lose its slot to a newcomer
QUEUED_MAX_REQUEST_BYTES = 64 << 20
MAX_IN_FLIGHT = 64  # requests of one connection handed to the core and not yet answered
MAX_PARKED_FETCHES = 256
# The longest a request waits: a Fetch's max_wait (Kafka clients' fetch.max.wait.ms is 500) and a
# Produce's timeout (their request.timeout.ms is 30000) are honoured up to these.
FETCH_MAX_WAIT_MS = 30_000
REQUEST_TIMEOUT_MS = 30_000
SLICE_INPUTS = 200  # core inputs of one request between yields (about 5 ms traced)
RECEIVE_BYTES = 64 << 10
LOG_LINES_PER_S = 10  # of each kind of refusal
_CONNECTION_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class _Closed(Exception):
    pass


@dataclass(eq=False)
class _Connection:
    """One client connection's share of the listener's limits."""

    last_active: float
    scope: trio.CancelScope | None = None
    held: int = 0  # bytes of partial frames and unwritten answers, counted in `buffered`
    partial: int = 0  # of which partial frames
    partial_since: float = math.inf  # when the partial frame's first bytes came
    sending_since: float = math.inf  # when the answer being written began to be
    in_flight: int = 0
    closed: bool = False
    srcs: set = field(default_factory=set)  # its requests handed on and not yet answered


@dataclass(frozen=True, slots=True)
class _Ticket:
    request: object
    reply: bytes | None
    src: str
    waits: bool
    deadline: float | None  # a Fetch's long-poll deadline (trio time)
    marks: dict  # partition -> (HW, leader, leader epoch) as the fetch saw them
    close: str


class KafkaServer:
    """Serves Kafka clients for `node` on its Kafka port (see the module docstring). The
    limits are attributes, set from the module's constants, so a test can shrink them."""

    def __init__(self, node, kafka_ports: dict[int, int], topic: str):
        self.node = node
        broker = int(node.name[1:])
        self.port = kafka_ports[broker]
        self.door = KafkaDoor(broker, node.core.config, kafka_ports, topic, node.core)
        self.waiting: dict[str, trio.Event] = {}
        self.replies: dict[str, bytes] = {}
        self.owner: dict[str, _Connection] = {}
        self.open: set[_Connection] = set()
        self.buffered = 0
        self.parked = 0
        # partition -> the marks parked fetches saw -> their events
        self.watchers: dict[int, dict[tuple, set[trio.Event]]] = {}
        self.max_connections = MAX_CONNECTIONS
        self.idle_timeout_s = CONNECTIONS_MAX_IDLE_MS / 1000
        self.queued_max_request_bytes = QUEUED_MAX_REQUEST_BYTES
        self.max_parked_fetches = MAX_PARKED_FETCHES
        self.stats = {"refused_connections": 0, "evicted_idle": 0, "closed_idle": 0,
                      "closed_over_bytes": 0, "bad_requests": 0, "parked": 0, "wakeups": 0,
                      "answered_unparked": 0, "buffered_max": 0}
        self._logged: dict[str, tuple[int, int, int]] = {}  # kind -> second, lines, left out
        self.listeners: list = []

    @property
    def connections(self) -> int:
        return len(self.open)

    def log(self, text: str, kind: str = "") -> None:
        """One line on stderr; of a `kind`, at most LOG_LINES_PER_S in a second (the next line
        after a pause counts those left out)."""
        if kind:
            second = int(trio.current_time())
            start, lines, left_out = self._logged.get(kind, (second, 0, 0))
            if start != second:
                start, lines = second, 0
            if lines >= LOG_LINES_PER_S:
                self._logged[kind] = (start, lines, left_out + 1)
                return
            self._logged[kind] = (start, lines + 1, 0)
            if left_out:
                text += f" ({left_out} more like it not logged)"
        print(f"{self.node.name}: kafka: {text}", file=sys.stderr, flush=True)

    # Called by the node ---------------------------------------------------------------------

    def answer(self, dst: str, message) -> None:
        """The core sent `message` to a Kafka request (called from Node.send)."""
        try:
            reply = self.door.on_core_message(dst, message)
        except Exception as error:  # a bug of ours must not take the broker down with it
            self.log(f"cannot answer {dst}: {type(error).__name__}: {error}")
            reply = None
        if reply is not None:
            self.replies[dst] = reply
            owner = self.owner.get(dst)
            if owner is not None:
                self._charge(owner, len(reply))
            event = self.waiting.get(dst)
            if event is not None:
                event.set()

    def after_input(self) -> None:
        """The core took an input: wake the long polls whose partitions moved."""
        if not self.watchers:
            return
        for p in list(self.watchers):
            now = self._mark(p)
            by_mark = self.watchers[p]
            for seen in [m for m in by_mark if m != now]:
                for event in by_mark.pop(seen):
                    event.set()
            if not by_mark:
                del self.watchers[p]

    def _mark(self, p: int) -> tuple:
        replicas = self.node.core.replicas
        if not 0 <= p < len(replicas):
            return ()
        r = replicas[p]
        return (r.high_watermark, r.leader, r.leader_epoch)

    # Connections ----------------------------------------------------------------------------

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.listeners = await trio.open_tcp_listeners(self.port, host=HOST)
        task_status.started()
        await trio.serve_listeners(self._connection, self.listeners)

    async def _connection(self, stream) -> None:
        if len(self.open) >= self.max_connections and not self._evict_idle():
            self.stats["refused_connections"] += 1
            self.log(f"refusing a connection: {self.max_connections} are open and none idle",
                     "refused")
            await _close_quietly(stream)
            return
        conn = _Connection(trio.current_time())
        self.open.add(conn)
        # Requests are handed to the core in the order they arrive (the reader) and answered in
        # that order (the writer), with up to MAX_IN_FLIGHT waiting between the two, so a
        # client's pipelined produce requests are not serialised behind each other's commits.
        send, receive = trio.open_memory_channel(MAX_IN_FLIGHT)
        try:
            async with trio.open_nursery() as nursery:
                conn.scope = nursery.cancel_scope
                nursery.start_soon(self._writer, stream, receive, conn)
                await self._reader(stream, send, conn)
                await send.aclose()
        except (_Closed, *_CONNECTION_ERRORS):
            pass
        finally:
            self._drop(conn)
            await _close_quietly(stream)

    def _drop(self, conn: _Connection) -> None:
        """Forget a connection: its slot, its bytes and its requests' pending answers."""
        self.open.discard(conn)
        if not conn.closed:
            conn.closed = True
            self.buffered -= conn.held
            conn.held = conn.partial = 0
        for src in conn.srcs:
            self.waiting.pop(src, None)
            self.replies.pop(src, None)
            self.owner.pop(src, None)
            self.door.expire(src)
            self.door.fetch_was_empty(src)
        conn.srcs.clear()

    def _close(self, conn: _Connection, why: str, kind: str) -> None:
        self.log(f"closing a connection: {why}", kind)
        self._drop(conn)
        if conn.scope is not None:
            conn.scope.cancel()

    def _evict_idle(self) -> bool:
        """Close the connection idle longest, if one is idle enough; whether one was."""
        now = trio.current_time()
        idle = [c for c in self.open
                if c.in_flight == 0 and c.held == 0 and now - c.last_active >= EVICT_IDLE_MIN_S]
        if not idle:
            return False
        self.stats["evicted_idle"] += 1
        self._close(min(idle, key=lambda c: c.last_active),
                    f"idle, its slot given to a new one ({self.max_connections} are open)",
                    "evicted")
        return True

    def _charge(self, conn: _Connection, n: int) -> None:
        """Count n more (or fewer) bytes held for `conn`; over the cap, shed the connections
        whose unfinished frame or unwritten answer has waited longest."""
        if conn.closed or n == 0:
            return
        conn.held += n
        self.buffered += n
        # Over by at most what one receive (RECEIVE_BYTES) or one answer added, for no longer
        # than this call. A busy client holds bytes all the time, but each request arrives and
        # each answer leaves at once: what marks a hog is one frame or answer in flight long.
        while self.buffered > self.queued_max_request_bytes:
            oldest = min((c for c in self.open if c.held),
                         key=lambda c: (min(c.partial_since, c.sending_since), -c.held))
            self.stats["closed_over_bytes"] += 1
            self._close(oldest, f"{oldest.held} bytes held of {self.buffered} over all "
                                f"connections (cap {self.queued_max_request_bytes})", "bytes")
        self.stats["buffered_max"] = max(self.stats["buffered_max"], self.buffered)

    # Reading and writing ----------------------------------------------------------------------

    async def _reader(self, stream, send, conn: _Connection) -> None:
        buffer = bytearray()
        try:
            while True:
                frame = await self._read_frame(stream, buffer, conn)
                try:
                    request = parse_request(frame)
                except BadRequest as error:
                    self._refuse(str(error))
                conn.in_flight += 1
                try:
                    ticket = await self._start(request, conn)
                except Exception as error:  # a bug of ours: one line, this connection closed
                    self._internal(request, error)
                    break
                await send.send(ticket)
                if ticket.close:
                    self.log(f"closing a connection: {ticket.close}", "bad")
                    break
        except (_Closed, *_CONNECTION_ERRORS):
            pass

    async def _writer(self, stream, receive, conn: _Connection) -> None:
        async for ticket in receive:
            try:
                reply = await self._finish(ticket, conn)
            except _Closed:
                break
            except Exception as error:  # as in _reader
                self._internal(ticket.request, error)
                break
            if reply is not None:
                conn.sending_since = trio.current_time()
                with trio.move_on_after(self.idle_timeout_s) as sending:
                    try:
                        await stream.send_all(reply)
                    except _CONNECTION_ERRORS:
                        break
                conn.sending_since = math.inf
                if sending.cancelled_caught:
                    self.stats["closed_idle"] += 1
                    self.log("closing a connection: an answer unread for "
                             f"{self.idle_timeout_s:g} s", "idle")
                    break
                self._charge(conn, -len(reply))
            conn.in_flight -= 1
            conn.last_active = trio.current_time()
        conn.scope.cancel()  # the reader stopped, or the connection is done

    def _internal(self, request, error: Exception) -> None:
        self.log(f"closing a connection: cannot answer api key {request.api_key} "
                 f"v{request.api_version}: {type(error).__name__}: {error}")

    async def _read_frame(self, stream, buffer: bytearray, conn: _Connection) -> bytes:
        """The next request frame; bytes are read only while its size is within its cap."""
        while True:
            if len(buffer) >= 4:
                (size,) = struct.unpack_from(">i", buffer)
                cap = SOCKET_REQUEST_MAX_BYTES
                if len(buffer) >= 6:
                    (api_key,) = struct.unpack_from(">h", buffer, 4)
                    if api_key not in SUPPORTED:
                        self._refuse(f"unsupported API key {api_key}")
                    cap = request_max_bytes(api_key)
                if not 0 <= size <= cap:
                    self._refuse(f"request of {size} bytes (cap {cap})")
                if len(buffer) >= 4 + size:
                    frame = bytes(buffer[4:4 + size])
                    del buffer[:4 + size]
                    self._hold_partial(conn, len(buffer), new_frame=True)
                    return frame
            with trio.move_on_after(self.idle_timeout_s) as waited:
                data = await stream.receive_some(RECEIVE_BYTES)
            if waited.cancelled_caught:
                if conn.in_flight and not buffer:
                    continue  # waiting on its own requests (a long poll, acks=all)
                self.stats["closed_idle"] += 1
                self.log(f"closing a connection idle for {self.idle_timeout_s:g} s"
                         + (f" with {len(buffer)} bytes of a request" if buffer else ""), "idle")
                raise _Closed
            if not data:
                raise _Closed
            conn.last_active = trio.current_time()
            buffer += data
            self._hold_partial(conn, len(buffer))
            if conn.closed:
                raise _Closed

    def _refuse(self, why: str) -> None:
        self.stats["bad_requests"] += 1
        self.log(f"closing a connection: {why}", "bad")
        raise _Closed

    def _hold_partial(self, conn: _Connection, size: int, new_frame: bool = False) -> None:
        if size == 0:
            conn.partial_since = math.inf
        elif new_frame or conn.partial == 0:
            conn.partial_since = trio.current_time()
        change, conn.partial = size - conn.partial, size
        self._charge(conn, change)

    # Requests ---------------------------------------------------------------------------------

    async def _start(self, request, conn: _Connection) -> _Ticket:
        """Hand the request to the door and its inputs to the core, SLICE_INPUTS at a time with
        a yield between slices, so no request holds the core's thread for long. Shielded: a
        request once started is handed on whole, as its batch would be appended whole."""
        node = self.node
        step = self.door.on_request(request)
        src = step.src
        waits = step.pending is not None
        conn.srcs.add(src)
        if waits:
            self.waiting[src] = trio.Event()
            self.owner[src] = conn
        if step.reply is not None:
            self._charge(conn, len(step.reply))
        with trio.CancelScope(shield=True):
            for n, (transition, message) in enumerate(step.inputs):
                if n and n % SLICE_INPUTS == 0:
                    node.trace.flush()
                    await trio.sleep(0)
                mid = node.trace.message_id()
                if transition is not None:
                    node.trace.event(node.now(), transition.action, transition.args,
                                     transition.outcome, transition.outcome_args,
                                     transition.state, [mid], None, transition.detail)
                node.handle(lambda core, now, m=message, i=mid: core.on_message(now, src, i, m))
        node.trace.flush()
        deadline, marks = None, {}
        if request.api_key == FETCH:
            wait_ms = min(max(0, int(request.body.max_wait.total_seconds() * 1000)),
                          FETCH_MAX_WAIT_MS)
            deadline = trio.current_time() + wait_ms / 1000
            marks = {q.partition: self._mark(q.partition)
                     for t in request.body.topics for q in t.partitions}
        return _Ticket(request, step.reply, src, waits, deadline, marks, step.close)

    async def _reply_of(self, ticket: _Ticket, conn: _Connection) -> bytes | None:
        src = ticket.src
        if not ticket.waits:
            conn.srcs.discard(src)
            return ticket.reply
        event = self.waiting.get(src)
        if event is None:  # the connection was closed (its requests forgotten)
            raise _Closed
        with trio.move_on_after(_timeout_s(ticket.request)):
            await event.wait()
        self.waiting.pop(src, None)
        self.owner.pop(src, None)
        conn.srcs.discard(src)
        reply = self.replies.pop(src, None)
        if reply is None:
            reply = self.door.expire(src)
            if reply is not None:
                self._charge(conn, len(reply))
        return reply

    async def _finish(self, ticket: _Ticket, conn: _Connection) -> bytes | None:
        reply = await self._reply_of(ticket, conn)
        deadline = ticket.deadline
        if (deadline is None or not self.door.fetch_was_empty(ticket.src)
                or trio.current_time() >= deadline):
            return reply
        if self.parked >= self.max_parked_fetches:
            self.stats["answered_unparked"] += 1
            return reply  # nothing to serve, said at once
        self.parked += 1
        self.stats["parked"] += 1
        try:
            while True:
                event = trio.Event()
                for p, seen in ticket.marks.items():
                    self.watchers.setdefault(p, {}).setdefault(seen, set()).add(event)
                # The partitions may have moved while the answer was on its way: check now.
                self.after_input()
                with trio.move_on_at(deadline):
                    await event.wait()
                self._unwatch(ticket.marks, event)
                if not event.is_set():
                    return reply  # its time is up: the empty answer is still true
                self.stats["wakeups"] += 1
                if reply is not None:
                    self._charge(conn, -len(reply))
                # Asked again, with the marks this answer saw, under the first deadline.
                ticket = replace(await self._start(ticket.request, conn), deadline=deadline)
                reply = await self._reply_of(ticket, conn)
                if not self.door.fetch_was_empty(ticket.src) or trio.current_time() >= deadline:
                    return reply
        finally:
            self.parked -= 1

    def _unwatch(self, marks: dict, event: trio.Event) -> None:
        for p, seen in marks.items():
            by_mark = self.watchers.get(p)
            if by_mark is None:
                continue
            events = by_mark.get(seen)
            if events is not None:
                events.discard(event)
                if not events:
                    del by_mark[seen]
            if not by_mark:
                del self.watchers[p]


def _timeout_s(request) -> float:
    body = request.body
    if request.api_key == FETCH:
        return 1.0  # the core answers a consumer fetch at once
    timeout = getattr(body, "timeout", None)
    cap = REQUEST_TIMEOUT_MS / 1000
    return min(max(0.1, timeout.total_seconds()), cap) if timeout is not None else cap


async def _close_quietly(stream) -> None:
    with trio.move_on_after(1) as scope:
        scope.shield = True
        try:
            await stream.aclose()
        except _CONNECTION_ERRORS:
            pass
