"""The Kafka listener of a TCP broker node: trio at the edge of `KafkaDoor`.

Each connection is read one request at a time and answered in order (Kafka answers a
connection's requests in the order they came). A request frame over `MAX_REQUEST_BYTES`, or one
that is not a request we serve, closes its connection with one line on stderr; every other
connection goes on being served. So does an acks=0 produce the door refuses (no response can
say so), as in Kafka.
"""

from __future__ import annotations

import struct
import sys

import trio

from impl.kafka.codec import FETCH, BadRequest, parse_request
from impl.kafka.door import KafkaDoor

HOST = "127.0.0.1"
MAX_REQUEST_BYTES = 16 << 20
MAX_CONNECTIONS = 256
MAX_IN_FLIGHT = 64  # requests of one connection handed to the core and not yet answered
LONG_POLL_STEP_S = 0.01
_CONNECTION_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError, OSError)


class _Closed(Exception):
    pass


class KafkaServer:
    def __init__(self, node, kafka_ports: dict[int, int], topic: str):
        self.node = node
        broker = int(node.name[1:])
        self.port = kafka_ports[broker]
        self.door = KafkaDoor(broker, node.core.config, kafka_ports, topic, node.core)
        self.waiting: dict[str, trio.Event] = {}
        self.replies: dict[str, bytes] = {}
        self.connections = 0

    def log(self, text: str) -> None:
        print(f"{self.node.name}: kafka: {text}", file=sys.stderr, flush=True)

    def answer(self, dst: str, message) -> None:
        """The core sent `message` to a Kafka request (called from Node.send)."""
        try:
            reply = self.door.on_core_message(dst, message)
        except Exception as error:  # a bug of ours must not take the broker down with it
            self.log(f"cannot answer {dst}: {type(error).__name__}: {error}")
            reply = None
        if reply is not None:
            self.replies[dst] = reply
            event = self.waiting.get(dst)
            if event is not None:
                event.set()

    async def serve(self, task_status=trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=HOST)
        task_status.started()
        await trio.serve_listeners(self._connection, listeners)

    async def _connection(self, stream: trio.SocketStream) -> None:
        if self.connections >= MAX_CONNECTIONS:
            self.log(f"refusing a connection: {MAX_CONNECTIONS} are open")
            await stream.aclose()
            return
        self.connections += 1
        # Requests are handed to the core in the order they arrive (the reader) and answered in
        # that order (the writer), with up to MAX_IN_FLIGHT waiting between the two, so a
        # client's pipelined produce requests are not serialised behind each other's commits.
        send, receive = trio.open_memory_channel(MAX_IN_FLIGHT)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._writer, stream, receive, nursery.cancel_scope)
                await self._reader(stream, send)
                await send.aclose()
        except (_Closed, *_CONNECTION_ERRORS):
            pass
        finally:
            self.connections -= 1
            with trio.CancelScope(shield=True):
                try:
                    await stream.aclose()
                except _CONNECTION_ERRORS:
                    pass

    async def _reader(self, stream, send) -> None:
        buffer = bytearray()
        try:
            while True:
                frame = await self._read_frame(stream, buffer)
                try:
                    request = parse_request(frame)
                except BadRequest as error:
                    self.log(f"closing a connection: {error}")
                    break
                try:
                    ticket = self._start(request)
                except Exception as error:  # a bug of ours: one line, this connection closed
                    self._internal(request, error)
                    break
                await send.send(ticket)
                if ticket[5]:
                    self.log(f"closing a connection: {ticket[5]}")
                    break
        except (_Closed, *_CONNECTION_ERRORS):
            pass

    async def _writer(self, stream, receive, scope) -> None:
        async for ticket in receive:
            try:
                reply = await self._finish(ticket)
            except Exception as error:  # as in _reader
                self._internal(ticket[0], error)
                scope.cancel()
                return
            if reply is not None:
                try:
                    await stream.send_all(reply)
                except _CONNECTION_ERRORS:
                    scope.cancel()
                    return
        scope.cancel()  # the reader stopped: the connection is done

    def _internal(self, request, error: Exception) -> None:
        self.log(f"closing a connection: cannot answer api key {request.api_key} "
                 f"v{request.api_version}: {type(error).__name__}: {error}")

    async def _read_frame(self, stream, buffer: bytearray) -> bytes:
        while len(buffer) < 4:
            await self._fill(stream, buffer)
        (size,) = struct.unpack_from(">i", buffer)
        if not 0 <= size <= MAX_REQUEST_BYTES:
            self.log(f"closing a connection: request of {size} bytes (cap "
                     f"{MAX_REQUEST_BYTES})")
            raise _Closed
        while len(buffer) < 4 + size:
            await self._fill(stream, buffer)
        frame = bytes(buffer[4:4 + size])
        del buffer[:4 + size]
        return frame

    async def _fill(self, stream, buffer: bytearray) -> None:
        data = await stream.receive_some(1 << 20)
        if not data:
            raise _Closed
        buffer += data

    def _start(self, request) -> tuple:
        """Hand the request to the door and its inputs to the core, synchronously: (request,
        immediate reply, source, whether it waits for the core, long-poll deadline or None,
        why the connection closes after it or "")."""
        node = self.node
        step = self.door.on_request(request)
        src = step.src
        if step.pending is not None:
            self.waiting[src] = trio.Event()
        for transition, message in step.inputs:
            mid = node.trace.message_id()
            if transition is not None:
                node.trace.event(node.now(), transition.action, transition.args,
                                 transition.outcome, transition.outcome_args, transition.state,
                                 [mid], None, transition.detail)
            node.handle(lambda core, now, m=message, i=mid: core.on_message(now, src, i, m))
        node.trace.flush()
        deadline = None
        if request.api_key == FETCH:
            wait_ms = max(0, int(request.body.max_wait.total_seconds() * 1000))
            deadline = trio.current_time() + wait_ms / 1000
        return (request, step.reply, src, step.pending is not None, deadline, step.close)

    async def _finish(self, ticket: tuple) -> bytes | None:
        request, reply, src, waits, deadline, _ = ticket
        while True:
            if waits:
                with trio.move_on_after(_timeout_s(request)):
                    await self.waiting[src].wait()
                self.waiting.pop(src, None)
                reply = self.replies.pop(src, None)
                if reply is None:
                    reply = self.door.expire(src)
            empty = request.api_key == FETCH and self.door.fetch_was_empty(src)
            if deadline is None or not empty or trio.current_time() >= deadline:
                return reply
            # Long poll: nothing to serve yet; ask again until the fetch's max wait.
            await trio.sleep(min(LONG_POLL_STEP_S, max(0, deadline - trio.current_time())))
            _, reply, src, waits, _, _ = self._start(request)


def _timeout_s(request) -> float:
    body = request.body
    if request.api_key == FETCH:
        return 1.0  # the core answers a consumer fetch at once
    timeout = getattr(body, "timeout", None)
    return max(0.1, timeout.total_seconds()) if timeout is not None else 30.0
