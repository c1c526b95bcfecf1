"""One node of a TCP cluster: a sans-I/O core behind trio sockets, as an OS process.

    python -m impl.tcp.node --role b0|meta --config JSON --run-dir DIR --ports JSON
                            --start-ms N [--restart] [--seed S --commit C --run R] [--no-trace]
                            < the run's key, one line of hex

Theory of operation. `Node` owns one core (`BrokerCore`, `MetaCore`, or in the supervisor's
process a client core) and is its only caller; every call is synchronous, so inputs are
serialised by trio's single thread without locks. An input (a message, a timer, a broken
connection) goes to the core; the effects are carried out as in the simulator: disk effects on
the broker's `BrokerStorage(FileDisk)`, trace lines into the node's `FileTrace`, and messages
into a per-destination queue. The trace is flushed to the OS before the task yields, so the
send line of a message is always in the file before the message is on a socket.

Time is integer milliseconds since the run's start: CLOCK_REALTIME minus `--start-ms`, so
every process of the run agrees. The core's `next_deadline()` sets a cancel-scope deadline.

Connections are one-way: a node sends to a peer on a connection it opened (lazily, on the first
message) and receives on connections peers opened to its listener on 127.0.0.1. Each
connection starts with a handshake under the run's key (framing.py: the listener's challenge,
the connecting node's hello with its proof, the listener's welcome with its own), so a node
only hears processes of its run, and only sends to one. The key comes on stdin, one hex line
from the supervisor (never in the environment or on the command line, which other local users
can read in /proc). A listener refuses a hello that is not proven, names a node that does not
talk to it, or names a node already connected to it (after a short grace for the old
connection's end to arrive): a stranger's hello never touches the real peer's connection.
When one of a node's own connections breaks, the core hears `on_disconnected(peer)`; messages
that could not be written are logged as `NetworkDrop` events (why `unreachable`).

The supervisor speaks over the same listener in control frames, each answered with
`{"ack": ...}`, on a connection whose hello names `supervisor` and proves the key, so no other
local process can stop or partition a node:
- `{"ctl": "block", "peers": [...]}`: a partition. Frames to or from those peers are dropped,
  each logged as a `NetworkDrop` event in this node's trace (why `partition`); the core hears
  `on_disconnected` for each. `{"ctl": "unblock"}` lifts it. Only the cut-off node filters, so
  every message is either delivered or logged as dropped. The exception is the store's
  LeaderAndIsr: the cut-off broker holds it and hands it to its core when the cut heals, as
  Kafka's controller sends each queued request until it is answered (and as the simulator
  holds it); without that, a broker cut off while its partition moved kept its old view.
- `{"ctl": "disconnected", "peer": "b1"}`: tell the core its connection to a cut-off node broke
  (the simulator tells both ends of a link that a partition cuts).
- `{"ctl": "slow", "delay_ms": N}`: delay this node's sends (0 ends it).
- `{"ctl": "message-faults", "drop": R, "duplicate": {"b1": R}, "delay": {"b1": N}, "seed": S}`:
  the message faults on this node's links, replacing any before (`{}` ends them). With rate
  `drop` a replication message (Fetch, OffsetsForLeaderEpoch or their answer) this node sends
  or receives is lost, traced as a `NetworkDrop` (why `nemesis`) and neither end told; a
  message it sends to a peer in `duplicate` (`*`: any) goes out twice at that rate, so a
  fault on one broker duplicates its messages both ways; its sends to a peer in `delay` wait
  that long (one queue per peer: FIFO kept). Choices come from `random.Random(S)`. A
  receiver hands each message id of a connection to its core once and discards a copy, as TCP
  never duplicates and the spec has no duplicates.
- `{"ctl": "view"}`: the answer's `ack` is the node's view now (what `final.json` holds).
- `{"ctl": "go", "start_ms": N}`: the run's time 0, for a node started with `--start-ms 0`
  (the supervisor fixes time 0 once every node is ready).
- `{"ctl": "quiet"}`: the core takes no more inputs and nothing more is traced (messages
  already sent still go). The supervisor quiets every node before it stops any, so that no
  node reacts to a peer's stop (a follower whose leader stopped fetched again while its last
  fetch was still in flight, a step the spec refuses).
- `{"ctl": "stop"}`: clean shutdown, as on SIGTERM or SIGINT: trace flushed, disk flushed, a
  `final.json` of the node's view written to `RUN_DIR/<node>/`.
A refused handshake, a frame over the size cap and a partial frame idle for `IDLE_TIMEOUT_S`
close their connection (so partial frames hold at most `MAX_CONNECTIONS` handshake frames and
one `MAX_FRAME_BYTES` frame per proven peer, a handful in a run); any
other bad frame (not JSON, too deep, a malformed message, a send time ahead of our clock, a
`src` other than the hello's) gets `{"error": ...}` back. Each is logged as one line on
stderr; the node goes on serving. At most `MAX_CONNECTIONS` connections are served at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import secrets
import select
import signal
import sys
import time
from pathlib import Path

import trio

from impl.broker_storage import BrokerStorage
from impl.config import ClusterConfig
from impl.protocol.broker import NEVER, BrokerCore
from impl.protocol.effects import apply_effects, trace_drop
from impl.protocol.messages import (
    DiskAppend,
    Fetch,
    FetchResponse,
    LeaderAndIsr,
    OffsetsForLeaderEpoch,
    Recall,
    Transition,
    WireError,
)
from impl.protocol.meta import MetaCore
from impl.storage import FileDisk
from impl.tcp.framing import (
    HANDSHAKE_MAX_BYTES,
    KEY_BYTES,
    MAX_FRAME_BYTES,
    NONCE_BYTES,
    BadFrame,
    FrameDecoder,
    FrameTooLarge,
    decode_message,
    encode_frame,
    encode_message,
    nonce_of,
    proof,
    proof_matches,
)
from impl.tcp.tracefile import FileTrace

HOST = "127.0.0.1"
KAFKA_SRC = "kafka/"  # the source name of requests from Kafka clients (impl/kafka/door.py)
SUPERVISOR = "supervisor"
CLIENTS = ("producer", "consumer")  # in the supervisor's process; they never talk to each other
# Every process of a run reads the same CLOCK_REALTIME, so honest send times are never far ahead.
MAX_CLOCK_SKEW_MS = 1_000
# What a node accepts from its listener: a run has a handful of peers, so anything beyond these
# is a misbehaving local process, refused before it can cost memory.
MAX_CONNECTIONS = 64
IDLE_TIMEOUT_S = 10.0  # a connection that sends nothing for this long while a frame is partial
HELLO_TIMEOUT_S = 5.0  # for each side's part of the handshake
# How long a proven hello from a node already connected waits for the old connection's end to
# be read (a restarted or reconnecting peer whose old connection's EOF is still on its way).
DUPLICATE_GRACE_S = 1.0
KEY_TIMEOUT_S = 10.0
# What a drop fault may lose, as in the simulator: a follower gives up a fetch it gets no
# answer to (the fetch timeout), where the store sends a request or an answer once.
DROPPABLE = (Fetch, OffsetsForLeaderEpoch, FetchResponse)
# Message ids a connection remembers for discarding copies: a copy follows its original on
# the same connection at once. Per connection, since an untraced restarted node numbers its
# messages from 1 again.
REMEMBERED_IDS = 1024
_CONNECTION_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


def log(node: str, text: str) -> None:
    print(f"{node}: {text}", file=sys.stderr, flush=True)


class HandshakeFailed(Exception):
    """The other side did not complete the handshake: one line saying why."""


async def _handshake_frame(stream, decoder: FrameDecoder, who: str) -> dict:
    """The next frame of a handshake, a dict; HandshakeFailed otherwise."""
    while True:
        try:
            frames = decoder.frames(limit=1)
        except FrameTooLarge as error:
            raise HandshakeFailed(str(error)) from None
        if frames:
            frame = frames[0]
            if type(frame) is BadFrame:
                raise HandshakeFailed(frame.reason)
            return frame
        data = await stream.receive_some(HANDSHAKE_MAX_BYTES)
        if not data:
            raise HandshakeFailed(f"{who} closed the connection during the handshake")
        decoder.feed(data)


async def open_peer(port: int, name: str, listener: str, key: bytes,
                    timeout_s: float = HELLO_TIMEOUT_S) -> trio.SocketStream:
    """A connection from `name` to `listener` on `port`, each side having proven it holds the
    run's key (the module docstring); HandshakeFailed or a connection error otherwise."""
    with trio.move_on_after(timeout_s):
        stream = await trio.open_tcp_stream(HOST, port)
        try:
            decoder = FrameDecoder(HANDSHAKE_MAX_BYTES)
            frame = await _handshake_frame(stream, decoder, listener)
            nonce = nonce_of(frame.get("challenge"))
            if nonce is None:
                raise HandshakeFailed(f"{listener} sent no challenge")
            mine = secrets.token_bytes(NONCE_BYTES)
            await stream.send_all(encode_frame({
                "hello": name, "proof": proof(key, "hello", nonce, name, listener),
                "challenge": mine.hex()}))
            frame = await _handshake_frame(stream, decoder, listener)
            if proof_matches(frame.get("welcome"), key, "welcome", mine, name, listener):
                return stream
            if isinstance(frame.get("error"), str):
                raise HandshakeFailed(f"{listener} refused: {frame['error'][:200]}")
            raise HandshakeFailed(f"the listener on port {port} did not prove it is "
                                  f"{listener} of this run")
        except BaseException:  # a timeout's Cancelled too
            await _close_quietly(stream)
            raise
    raise HandshakeFailed(f"{listener} did not finish the handshake within {timeout_s:g} s")


async def accept_peer(listener, key: bytes, name: str,
                      timeout_s: float = HELLO_TIMEOUT_S) -> tuple[trio.SocketStream, dict,
                                                                   FrameDecoder]:
    """The listening side of the handshake, as node `name`, for a program that is not a Node
    (a bench's producer, a test): the next connection on `listener`, the connecting node's
    proven hello, and the decoder holding whatever followed it; HandshakeFailed otherwise."""
    stream = await listener.accept()
    try:
        with trio.fail_after(timeout_s):
            nonce = secrets.token_bytes(NONCE_BYTES)
            await stream.send_all(encode_frame({"challenge": nonce.hex()}))
            decoder = FrameDecoder()
            hello = await _handshake_frame(stream, decoder, "the connecting peer")
            challenge = nonce_of(hello.get("challenge"))
            who = hello.get("hello")
            if (not isinstance(who, str) or challenge is None
                    or not proof_matches(hello.get("proof"), key, "hello", nonce, who, name)):
                raise HandshakeFailed(f"a hello to {name} without a proof of this run's key")
            await stream.send_all(encode_frame({"welcome": proof(key, "welcome", challenge,
                                                                 who, name)}))
            return stream, hello, decoder
    except BaseException:
        await _close_quietly(stream)
        raise


class _Outbound:
    """The queue and connection for one destination."""

    __slots__ = ("send", "stream", "conn_id")

    def __init__(self, send):
        self.send = send
        self.stream: trio.SocketStream | None = None
        self.conn_id = 0


class Node:
    """Drives one core over TCP (see the module docstring)."""

    def __init__(self, name: str, core, trace: FileTrace, ports: dict[str, int], start_ms: int,
                 storage: BrokerStorage | None = None, key: bytes = b""):
        self.name = name
        self.key = key  # the run's key: without it every handshake fails
        self.inbound: dict[str, trio.Event] = {}  # proven peers connected now; set at the end
        self.connections = 0
        self.core = core
        self.trace = trace
        self.ports = ports
        self.start_ms = start_ms
        self.storage = storage
        self.blocked: set[str] = set()
        self.slow_ms = 0
        self.drop_rate = 0.0
        self.duplicate_rate: dict[str, float] = {}  # destination ("*": any) -> rate
        self.link_delay_ms: dict[str, int] = {}
        self.fault_rng = random.Random(0)
        self.held: list[tuple[str, str, object]] = []  # the store's LeaderAndIsr while cut off
        self.outbound: dict[str, _Outbound] = {}
        self.nursery: trio.Nursery | None = None
        self.timer_scope: trio.CancelScope | None = None
        self.stopped = trio.Event()
        self.go = trio.Event()
        self.last_now = 0
        self.drops: list[tuple] = []
        self.pending_append: list | None = None  # [partition, start, records]: appends merged
        self.input_ms: int | None = None  # the time of the input being applied
        self.stats = {"events": 0, "dropped_messages": 0, "bad_frames": 0,
                      "refused_connections": 0, "duplicated_messages": 0,
                      "duplicates_discarded": 0}
        self.listeners: list = []
        self.kafka = None  # impl.kafka.serve.KafkaServer when this broker serves Kafka clients
        self.watch = None  # called with each input's effects (the supervisor's liveness phase)
        self.quiet = False  # the run is ending: no more inputs (the `quiet` control)

    # Time and inputs ---------------------------------------------------------------------------

    def now(self) -> int:
        """The node's clock: wall ms since the run's start, never going back, and always past
        the send time of every message received (so a receive sorts after its send)."""
        t = wall_ms() - self.start_ms
        if t > self.last_now:
            self.last_now = t
        return self.last_now

    def observe(self, sent_ms: int) -> bool:
        """Move the clock past a received message's send time, unless that time is further
        ahead of our own clock than processes of one machine can disagree: a peer's clock is
        never trusted to stall our timers."""
        if sent_ms >= self.last_now:
            if sent_ms > wall_ms() - self.start_ms + MAX_CLOCK_SKEW_MS:
                return False
            self.last_now = sent_ms + 1
        return True

    def handle(self, call) -> None:
        """Hand an input to the core, `call(core, now)`, and carry out its effects
        synchronously; one input has one time."""
        if self.quiet:
            return
        now = self.now()
        self.apply(call(self.core, now), now)
        self.reschedule()
        if self.kafka is not None:
            self.kafka.after_input()  # wakes the Kafka long polls this input answers

    def disconnected(self, peer: str) -> None:
        if hasattr(self.core, "on_disconnected"):
            self.handle(lambda core, now: core.on_disconnected(now, peer))

    def apply(self, effects: list, now: int) -> None:
        self.input_ms = now
        try:
            apply_effects(effects, now, self.trace, self)
        finally:
            self.input_ms = None
        self._write_append()
        if self.watch is not None:
            self.watch(effects)

    # The effects' handlers (impl.protocol.effects.Handlers); `send` is under Sending below.

    def traced(self, transition: Transition) -> None:
        self.stats["events"] += 1
        self.sent()

    def sent(self) -> None:
        # Drops are traced after the event that names the message sent.
        if self.drops:
            self._log_drops()

    def store(self, effect) -> None:
        """Carry out a disk operation; adjacent appends of one input are written as one."""
        append = self.pending_append
        if type(effect) is DiskAppend:
            if (append is not None and append[0] == effect.partition
                    and append[1] + len(append[2]) == effect.start_offset):
                append[2].extend(effect.records)
                return
            self._write_append()
            self.pending_append = [effect.partition, effect.start_offset, list(effect.records)]
            return
        self._write_append()
        self.storage.apply(effect)

    def _write_append(self) -> None:
        if self.pending_append is not None:
            partition, start, records = self.pending_append
            self.pending_append = None
            self.storage.apply(DiskAppend(partition, start, tuple(records)))

    def recall(self, recall: Recall) -> None:
        """Nothing: the request is written to the socket already, and the old leader may still
        read and answer it (the simulator drops it). Replay steps that late answer on the old
        leader as well (model_check/conformance/replay.py, abandoned fetches)."""

    def reschedule(self) -> None:
        scope = self.timer_scope
        if scope is not None:
            scope.deadline = self._trio_deadline(self.core.next_deadline())

    def _trio_deadline(self, deadline_ms: int) -> float:
        if deadline_ms >= NEVER:
            return math.inf
        now_ms = time.time_ns() / 1e6 - self.start_ms
        return trio.current_time() + (deadline_ms - now_ms) / 1000 + 0.0002

    async def timer_loop(self) -> None:
        while True:
            with trio.CancelScope() as scope:
                self.timer_scope = scope
                scope.deadline = self._trio_deadline(self.core.next_deadline())
                await trio.sleep_forever()
            self.timer_scope = None
            if self.quiet:
                await trio.sleep_forever()
            if self.now() >= self.core.next_deadline():
                self.handle(lambda core, now: core.on_timer(now))
                self.trace.flush()

    # Sending -------------------------------------------------------------------------------------

    def send(self, dst: str, mid: str, message, now: int) -> None:
        if dst.startswith(KAFKA_SRC):
            if self.kafka is not None:
                self.kafka.answer(dst, message)
            return
        if dst in self.blocked:
            self.drops.append((dst, mid, message, "partition"))
            return
        if self._lost(message):
            self.drops.append((dst, mid, message, "nemesis"))  # neither end is told
            return
        out = self.outbound.get(dst)
        if out is None:
            send, receive = trio.open_memory_channel(math.inf)
            out = self.outbound[dst] = _Outbound(send)
            self.nursery.start_soon(self._sender, dst, out, receive)
        out.send.send_nowait((mid, message, now))

    def _lost(self, message) -> bool:
        """Whether a drop fault loses this message (see the module docstring)."""
        return (self.drop_rate > 0 and type(message) in DROPPABLE
                and self.fault_rng.random() < self.drop_rate)

    def _log_drops(self) -> None:
        drops, self.drops = self.drops, []
        for dst, mid, message, why in drops:
            self.log_drop(self.name, dst, mid, message, why)

    def log_drop(self, src: str, dst: str, mid: str, message, why: str) -> None:
        # A drop of one input's send is at that input's time: the clock may have moved on
        # since, and the input's later events carry its time (a node's trace never goes back).
        if self.quiet:
            return  # lost untraced: the spec keeps it in flight, as a message never received
        now = self.now() if self.input_ms is None else self.input_ms
        self.stats["dropped_messages"] += 1
        trace_drop(self.trace, now, src, dst, mid, message, why)
        self.stats["events"] += 1

    async def _sender(self, dst: str, out: _Outbound, receive) -> None:
        while True:
            batch = [await receive.receive()]
            while True:
                try:
                    batch.append(receive.receive_nowait())
                except trio.WouldBlock:
                    break
            if self.slow_ms:
                await trio.sleep(self.slow_ms / 1000)
            delay_ms = self.link_delay_ms.get(dst, 0)
            if delay_ms:  # the newest message waits the delay; those before it at least that
                await trio.sleep(max(0, batch[-1][2] + delay_ms - self.now()) / 1000)
            if dst in self.blocked:
                self._drop_batch(dst, batch, "partition")
                continue
            if out.stream is None and not await self._connect(dst, out):
                self._drop_batch(dst, batch, "unreachable")
                continue
            name = self.name
            frames = []
            for mid, m, t in batch:
                try:
                    frame = encode_message(name, mid, t, m)
                    frames.append(frame)
                    rate = self.duplicate_rate.get(dst, self.duplicate_rate.get("*", 0.0))
                    if rate and self.fault_rng.random() < rate:
                        self.stats["duplicated_messages"] += 1
                        frames.append(frame)
                except ValueError as error:  # over the frame cap: lost, as on a network
                    log(name, f"dropping {mid} to {dst}: {error}")
                    self.log_drop(name, dst, mid, m, "too-large")
                    self.trace.flush()
            data = b"".join(frames)
            try:
                await out.stream.send_all(data)
            except _CONNECTION_ERRORS:
                self._lost_outbound(dst, out, out.conn_id)

    def _drop_batch(self, dst: str, batch: list, why: str) -> None:
        for mid, message, _ in batch:
            self.log_drop(self.name, dst, mid, message, why)
        self.trace.flush()

    async def _connect(self, dst: str, out: _Outbound) -> bool:
        port = self.ports.get(dst)
        if port is None:
            return False
        try:
            stream = await open_peer(port, self.name, dst, self.key)
        except HandshakeFailed as error:
            log(self.name, f"cannot connect to {dst}: {error}")
            return False
        except _CONNECTION_ERRORS:
            return False
        out.stream = stream
        out.conn_id += 1
        self.nursery.start_soon(self._watch_outbound, dst, out, out.conn_id, stream)
        return True

    async def _watch_outbound(self, dst: str, out: _Outbound, conn_id: int, stream) -> None:
        """Read our outbound connection: the peer only writes error frames there; EOF means
        the connection broke. The stream is passed in, not read from `out`: a send that fails
        before this task first runs has already dropped it from `out` (and closed it)."""
        decoder = FrameDecoder()
        try:
            while True:
                data = await stream.receive_some(65536)
                if not data:
                    break
                decoder.feed(data)
                for frame in decoder.frames():
                    if isinstance(frame, dict) and "error" in frame:
                        log(self.name, f"{dst} refused a frame: {frame['error']}")
        except (*_CONNECTION_ERRORS, FrameTooLarge):
            pass
        self._lost_outbound(dst, out, conn_id)

    def _lost_outbound(self, dst: str, out: _Outbound, conn_id: int) -> None:
        if out.conn_id != conn_id or out.stream is None:
            return
        stream, out.stream = out.stream, None
        self.nursery.start_soon(_close_quietly, stream)
        self.disconnected(dst)
        self.trace.flush()

    # Receiving -----------------------------------------------------------------------------------

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.listeners = await trio.open_tcp_listeners(self.ports[self.name], host=HOST)
        task_status.started()
        await trio.serve_listeners(self._serve_connection, self.listeners)

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        if self.connections >= MAX_CONNECTIONS:
            self.stats["refused_connections"] += 1
            log(self.name, f"refusing a connection: {MAX_CONNECTIONS} are open")
            await _close_quietly(stream)
            return
        self.connections += 1
        peer: str | None = None
        ended: trio.Event | None = None  # ours in self.inbound once the peer is proven
        try:
            decoder = FrameDecoder(HANDSHAKE_MAX_BYTES)
            try:
                peer = await self._accept(stream, decoder)
            except HandshakeFailed as error:
                self.stats["refused_connections"] += 1
                log(self.name, f"refusing a connection from an unknown peer: {error}")
                await stream.send_all(encode_frame({"error": str(error)[:200]}))
                return
            if peer != SUPERVISOR:
                ended = self.inbound[peer]
            decoder.max_bytes = MAX_FRAME_BYTES
            await self._serve_peer(stream, decoder, peer)
        except _CONNECTION_ERRORS:
            pass
        finally:
            self.connections -= 1
            if ended is not None:
                del self.inbound[peer]
                ended.set()
            await _close_quietly(stream)
        # Only the proven connection of a peer breaking tells the core: a stranger's does not.
        if ended is not None and not self.stopped.is_set():
            self.disconnected(peer)
            self.trace.flush()

    async def _accept(self, stream, decoder: FrameDecoder) -> str:
        """The listener's side of the handshake: the proven peer's name (registered in
        `inbound` unless it is the supervisor), or HandshakeFailed saying why not."""
        nonce = secrets.token_bytes(NONCE_BYTES)
        await stream.send_all(encode_frame({"challenge": nonce.hex()}))
        frame = None
        with trio.move_on_after(HELLO_TIMEOUT_S):
            frame = await _handshake_frame(stream, decoder, "the peer")
        if frame is None:
            raise HandshakeFailed(f"no hello within {HELLO_TIMEOUT_S:g} s")
        name = frame.get("hello")
        if not isinstance(name, str):
            raise HandshakeFailed("the first frame must be a hello")
        shown = repr(name[:40])
        if not self.talks_to(name):
            raise HandshakeFailed(f"hello as {shown}: not a node that talks to {self.name}")
        if not proof_matches(frame.get("proof"), self.key, "hello", nonce, name, self.name):
            raise HandshakeFailed(f"hello as {shown} without a proof of this run's key")
        theirs = nonce_of(frame.get("challenge"))
        if theirs is None:
            raise HandshakeFailed(f"hello as {shown} without a challenge of its own")
        if name != SUPERVISOR:
            old = self.inbound.get(name)
            if old is not None:
                with trio.move_on_after(DUPLICATE_GRACE_S):
                    await old.wait()
            if name in self.inbound:
                raise HandshakeFailed(f"hello as {shown}: {name} is connected already")
            self.inbound[name] = trio.Event()
        try:
            await stream.send_all(encode_frame({
                "welcome": proof(self.key, "welcome", theirs, name, self.name)}))
        except BaseException:
            if name != SUPERVISOR:  # not connected after all
                self.inbound.pop(name).set()
            raise
        return name

    def talks_to(self, name: str) -> bool:
        """Whether a node named `name` may connect to this one: a node of the run (not itself),
        or the supervisor to a node process; the clients never talk to each other."""
        if name == SUPERVISOR:
            return self.name not in CLIENTS
        if name == self.name or name not in self.ports or name.startswith("kafka-"):
            return False
        return not (name in CLIENTS and self.name in CLIENTS)

    async def _serve_peer(self, stream, decoder: FrameDecoder, peer: str) -> None:
        """Hand a proven peer's messages to the core (and the supervisor's control frames to
        `control`) until the connection ends or breaks a rule that closes it."""
        seen: dict[str, None] = {}  # this connection's recent message ids
        while True:
            frames = await self._next_frames(stream, decoder, peer)
            if frames is None:
                return
            errors: list[str] = []
            controls: list[dict] = []
            for frame in frames:
                if type(frame) is BadFrame:
                    errors.append(frame.reason)
                elif "ctl" in frame:
                    if peer == SUPERVISOR:
                        controls.append(frame)
                    else:
                        errors.append("control frame from a node that is not the supervisor")
                else:
                    self._receive(peer, frame, errors, seen)
            self.trace.flush()
            for reason in errors:
                self.stats["bad_frames"] += 1
                log(self.name, f"bad frame from {peer}: {reason[:200]}")
                await stream.send_all(encode_frame({"error": reason[:200]}))
            for frame in controls:
                await stream.send_all(encode_frame({"ack": self.control(frame)}))

    async def _next_frames(self, stream, decoder: FrameDecoder, peer: str) -> list | None:
        """The frames of the next read (already buffered ones first), or None when the
        connection is to be closed: EOF, a frame over the cap, a partial frame left idle."""
        while True:
            try:
                frames = decoder.frames()
            except FrameTooLarge as error:
                self.stats["bad_frames"] += 1
                log(self.name, f"closing a connection from {peer}: {error}")
                await stream.send_all(encode_frame({"error": str(error)}))
                return None
            if frames:
                return frames
            pending = len(decoder.buffer)
            with trio.move_on_after(IDLE_TIMEOUT_S) as waited:
                data = await stream.receive_some(1 << 20)
            if waited.cancelled_caught:
                if pending:
                    log(self.name, f"closing an idle connection from {peer}")
                    return None
                continue
            if not data:
                return None
            decoder.feed(data)

    def _receive(self, peer: str, frame: dict, errors: list[str],
                 seen: dict[str, None]) -> None:
        """One message frame from a proven peer to the core, or the reason it is refused;
        `seen`: the connection's recent message ids (a copy of one is discarded)."""
        try:
            src, mid, sent_ms, message = decode_message(frame)
        except WireError as error:
            errors.append(str(error))
            return
        if src != peer:
            errors.append(f"message from {src!r} on {peer!r}'s connection")
        elif not self.observe(sent_ms):
            errors.append(f"send time {sent_ms} ms is ahead of this node's clock")
        elif mid in seen:
            self.stats["duplicates_discarded"] += 1  # a copy: each id is handed over once
        else:
            seen[mid] = None
            if len(seen) > REMEMBERED_IDS:
                del seen[next(iter(seen))]  # the oldest
            if src in self.blocked:
                if src == "meta" and type(message) is LeaderAndIsr:
                    self.held.append((src, mid, message))  # delivered when the cut heals
                else:
                    self.log_drop(src, self.name, mid, message, "partition")
            elif self._lost(message):
                self.log_drop(src, self.name, mid, message, "nemesis")
            else:
                self.handle(lambda core, now: core.on_message(now, src, mid, message))

    def control(self, frame: dict) -> str | dict:
        what = frame.get("ctl")
        if what == "block":
            peers = [p for p in frame.get("peers", ()) if isinstance(p, str) and p != self.name]
            self.blocked.update(peers)
            for peer in sorted(peers):
                self.disconnected(peer)
        elif what == "unblock":
            self.blocked.clear()
            held, self.held = self.held, []
            for src, mid, message in held:
                self.handle(lambda core, now, src=src, mid=mid, m=message:
                            core.on_message(now, src, mid, m))
        elif what == "disconnected" and isinstance(frame.get("peer"), str):
            self.disconnected(frame["peer"])
        elif what == "slow" and type(frame.get("delay_ms")) is int:
            self.slow_ms = max(0, frame["delay_ms"])
        elif what == "message-faults":
            self.set_message_faults(frame)
        elif what == "view" and isinstance(self.core, MetaCore):  # a broker's holds its logs
            return final_view(self.name, self.core)
        elif what == "go" and type(frame.get("start_ms")) is int and not self.go.is_set():
            self.start_ms = frame["start_ms"]
            self.go.set()
        elif what == "quiet":
            self.quiet = True
        elif what == "stop":
            self.stopped.set()
        elif what != "ping":
            return f"unknown control {what!r}"
        self.trace.flush()
        return str(what)

    def set_message_faults(self, frame: dict) -> None:
        """The `message-faults` control (the module docstring); bad fields count as none."""
        def rate(value) -> float:
            return min(1.0, max(0.0, float(value))) if type(value) in (int, float) else 0.0

        def per_peer(key: str, value) -> dict:
            body = frame.get(key)
            return ({p: value(v) for p, v in body.items() if isinstance(p, str)}
                    if isinstance(body, dict) else {})

        self.drop_rate = rate(frame.get("drop"))
        self.duplicate_rate = per_peer("duplicate", rate)
        self.link_delay_ms = per_peer("delay", lambda ms: max(0, ms) if type(ms) is int else 0)
        seed = frame.get("seed")
        self.fault_rng = random.Random(seed if type(seed) is int else 0)


async def _close_quietly(stream) -> None:
    with trio.move_on_after(1) as scope:
        scope.shield = True
        try:
            await stream.aclose()
        except _CONNECTION_ERRORS:
            pass


# The process ---------------------------------------------------------------------------------


def parse_config(body: dict) -> ClusterConfig:
    # The header also carries run-level keys (duration, nemesis, fault kinds): not config.
    known = {f.name for f in dataclasses.fields(ClusterConfig)}
    values = {k: v for k, v in body.items() if k in known}
    values["bugs"] = frozenset(values.get("bugs", ()))
    return ClusterConfig(**values)


def final_view(node: str, core) -> dict:
    """What the supervisor needs of a node after a clean stop (and, for the store, in the
    liveness phase: each partition's leader and ISR, and who is registered)."""
    if isinstance(core, MetaCore):
        return {"leaders": {str(p): ps.leader for p, ps in enumerate(core.partitions)},
                "isr": {str(p): list(ps.isr) for p, ps in enumerate(core.partitions)},
                "registered": list(core.registered),
                "unclean_elections": core.unclean_elections}
    return {"partitions": {str(r.partition): {
        "leader": r.leader, "leader_epoch": r.leader_epoch, "high_watermark": r.high_watermark,
        # The whole log, as the simulator's final logs: a leader elected late may still have a
        # stale HW below records that were committed and acknowledged (KAFKA-7128).
        "committed": [[o, r.log[o][1]] for o in range(r.leo)],
    } for r in core.replicas}}


def read_key(stdin, timeout_s: float = KEY_TIMEOUT_S) -> bytes:
    """The run's key: the first line on stdin, KEY_BYTES in hex, written by the supervisor."""
    ready, _, _ = select.select([stdin], [], [], timeout_s)
    if not ready:
        raise SystemExit(f"node: no run key on stdin within {timeout_s:g} s")
    line = stdin.readline(2 * KEY_BYTES + 2).strip()
    try:
        key = bytes.fromhex(line.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        key = b""
    if len(key) != KEY_BYTES:
        raise SystemExit(f"node: the first line on stdin is not the run key "
                         f"({2 * KEY_BYTES} hex digits)")
    return key


def build(args: argparse.Namespace, key: bytes) -> tuple[Node, BrokerStorage | None, list]:
    """The node's core, storage and trace; the effects to carry out once running."""
    header_config = json.loads(args.config)
    config = parse_config(header_config)
    ports = {k: int(v) for k, v in json.loads(args.ports).items()}
    run_dir = Path(args.run_dir)
    role = args.role
    header = {"seed": args.seed, "commit": args.commit, "mode": "tcp", "run": args.run,
              "config": header_config}
    trace_path = run_dir / f"{role}.ndjson"
    trace = FileTrace(role, header, trace_path, resume=args.restart, enabled=args.trace)
    storage = None
    pending: list = []
    if role == "meta":
        core = MetaCore(config)
    else:
        broker = int(role[1:])
        if not 0 <= broker < config.brokers:
            raise SystemExit(f"node: --role {role}: no such broker ({config.brokers} brokers)")
        storage = BrokerStorage(FileDisk(run_dir / role / "data"), config.partitions,
                                checkpoint_fsync=False)
        if args.restart:
            # A new process: a new incarnation, so the store cannot mistake it for the old one.
            core = BrokerCore(broker, config, storage.recovered(), tracing=args.trace,
                              incarnation=time.time_ns() // 1_000_000)
            pending = ["start"]
        else:
            core = BrokerCore(broker, config, tracing=args.trace)
            views = MetaCore(config).initial_view
            for effect in core.bootstrap([views(p) for p in range(config.partitions)]):
                storage.apply(effect)
    node = Node(role, core, trace, ports, args.start_ms, storage, key)
    if f"kafka-{role}" in ports:
        from impl.kafka.serve import KafkaServer

        kafka_ports = {int(k[len("kafka-b"):]): v for k, v in ports.items()
                       if k.startswith("kafka-b")}
        node.kafka = KafkaServer(node, kafka_ports, args.topic)
    return node, storage, pending


async def run_node(args: argparse.Namespace, key: bytes) -> None:
    node, storage, pending = build(args, key)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            node.nursery = nursery
            await nursery.start(node.serve)
            if node.kafka is not None:
                await nursery.start(node.kafka.serve)
            print("ready", flush=True)

            async def on_signal() -> None:
                async for _ in signals:
                    node.stopped.set()

            async def orphan_watch() -> None:
                parent = os.getppid()
                while os.getppid() == parent:
                    await trio.sleep(0.5)
                node.stopped.set()

            async def start() -> None:
                if node.start_ms == 0:
                    await node.go.wait()
                wait_ms = node.start_ms - wall_ms()
                if wait_ms > 0:
                    await trio.sleep(wait_ms / 1000)
                if "start" in pending:
                    node.handle(lambda core, now: core.start(now))
                    node.trace.flush()
                nursery.start_soon(node.timer_loop)

            nursery.start_soon(on_signal)
            nursery.start_soon(orphan_watch)
            # A stop (signal, supervisor gone) before the run's time 0 must end the node too.
            nursery.start_soon(start)
            await node.stopped.wait()
            nursery.cancel_scope.cancel()
    node.trace.close()
    if storage is not None:
        storage.disk.close()
    if args.trace:
        final = Path(args.run_dir) / node.name / "final.json"
        final.parent.mkdir(parents=True, exist_ok=True)
        view = {**final_view(node.name, node.core),
                "duplicates_discarded": node.stats["duplicates_discarded"]}
        final.write_text(json.dumps(view, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m impl.tcp.node", description=__doc__.splitlines()[0])
    p.add_argument("--role", required=True, help="b0, b1, ... or meta")
    p.add_argument("--config", required=True, help="the trace header's config object (JSON)")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--ports", required=True, help='JSON {"b0": port, ...} for every node')
    p.add_argument("--start-ms", type=int, required=True,
                   help="the run's time 0 (epoch ms); 0: wait for the supervisor's `go`")
    p.add_argument("--restart", action="store_true", help="recover from disk and register")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--commit", default="unknown")
    p.add_argument("--run", default="tcp")
    p.add_argument("--no-trace", dest="trace", action="store_false", help="no trace file")
    p.add_argument("--topic", default="isrlab", help="the topic Kafka clients see")
    args = p.parse_args(argv)
    key = read_key(sys.stdin.buffer)
    try:
        trio.run(run_node, args, key)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
