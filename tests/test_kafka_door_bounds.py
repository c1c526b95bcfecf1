"""What one Kafka request, or many connections, may cost the broker: the door's and the Kafka
listener's caps (impl/kafka/codec.py, door.py, serve.py), each driven by the request or the
sockets that froze or bloated the broker before the cap was there.

The door tests run a real `BrokerCore` behind `KafkaDoor` (as tests/test_kafka_door.py); the
listener tests run `KafkaServer` over trio's in-memory streams with a `MockClock`, so idle
timeouts and long polls take no wall time and every count is deterministic."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import trio
import trio.testing
from kio.records.readers import read_batch
from test_kafka_door import TOPIC, Harness, batch, produce, request_frame

from impl.kafka import batches, codec, door, serve
from impl.kafka.codec import FETCH, METADATA, PRODUCE, BadRequest, parse_request
from impl.protocol.messages import Send, Transition

# Requests built byte by byte: kio's writer takes seconds over a million entries.


def metadata_v1(names: list[bytes]) -> bytes:
    """A Metadata v1 frame (no size prefix) naming `names`."""
    header = struct.pack(">hhih", METADATA, 1, 7, 4) + b"test"
    body = struct.pack(">i", len(names)) + b"".join(struct.pack(">h", len(n)) + n
                                                      for n in names)
    return header + body


def fetch_body(partitions: list[tuple[int, int]], max_bytes: int = 1 << 20,
               partition_max_bytes: int = 1 << 20, max_wait_ms: int = 0) -> dict:
    """A Fetch v12 body naming (partition, offset) pairs of TOPIC, in order."""
    return {"replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
                 "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": partition_max_bytes} for p, offset in partitions]}],
            "forgotten_topics_data": [], "rack_id": ""}


def produce_body(parts: list[tuple[int, bytes]], acks: int = 1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": TOPIC, "partition_data": [
                {"index": p, "records": records} for p, records in parts]}]}


def null_records(n: int) -> bytes:
    """One batch of n records with null values (about 7 bytes each), by the broker's writer."""
    return batches.write([(i, 0, None, None) for i in range(n)])


class Served(Harness):
    """The door harness, also keeping what the core served (its ConsumerServe lines)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.served: list[Transition] = []
        on_message = self.core.on_message

        def spy(now, src, mid, message):
            effects = on_message(now, src, mid, message)
            self.served += [e for e in effects
                            if type(e) is Transition and e.action == "ConsumerServe"]
            return effects

        self.core.on_message = spy


# Decoding: bytes and entries per request ---------------------------------------------------


def test_a_metadata_naming_a_million_topics_is_refused_before_it_is_decoded():
    frame = metadata_v1([b"t%d" % i for i in range(1_000_000)])
    with pytest.raises(BadRequest) as refused:
        parse_request(frame)
    assert f"(cap {codec.SMALL_REQUEST_MAX_BYTES})" in str(refused.value)


def test_a_small_metadata_naming_more_topics_than_the_cap_is_refused():
    names = [b"t%d" % i for i in range(codec.MAX_REQUEST_TOPICS + 1)]
    assert len(metadata_v1(names)) < codec.SMALL_REQUEST_MAX_BYTES
    with pytest.raises(BadRequest) as refused:
        parse_request(metadata_v1(names))
    assert f"names {codec.MAX_REQUEST_TOPICS + 1} topics" in str(refused.value)


def test_metadata_up_to_the_cap_answers_each_unknown_name_once():
    h = Harness()
    names = [f"t{i % 50}" for i in range(codec.MAX_REQUEST_TOPICS - 1)] + [TOPIC]
    body = h.call(METADATA, 9, {"topics": [{"name": n} for n in names],
                                "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": False,
                                "include_topic_authorized_operations": False})
    codes = {t.name: t.error_code.value for t in body.topics}
    assert len(body.topics) == len(codes) == 51  # 50 distinct unknown names and the topic
    assert codes.pop(TOPIC) == 0 and set(codes.values()) == {3}  # UNKNOWN_TOPIC_OR_PARTITION


def test_a_fetch_naming_more_partitions_than_the_cap_is_refused():
    frame = request_frame(FETCH, 12, fetch_body([(0, 0)] * (codec.MAX_REQUEST_PARTITIONS + 1)))
    with pytest.raises(BadRequest) as refused:
        parse_request(frame)
    assert f"{codec.MAX_REQUEST_PARTITIONS + 1} partitions" in str(refused.value)


# Fetch: repeats and bytes per answer ------------------------------------------------------


def test_a_fetch_naming_one_partition_at_every_entry_is_served_once_within_the_caps():
    h = Served(acks="1")
    for _ in range(8):  # 4 MiB in 4,096 records of 1 KiB
        produce(h, batch([b"x" * 1024] * 512))
    assert h.core.replicas[0].high_watermark == 4096
    entries = codec.MAX_REQUEST_PARTITIONS
    body = fetch_body([(0, 0)] * entries, max_bytes=2**31 - 1, partition_max_bytes=2**31 - 1)
    answer = h.call(FETCH, 12, body)
    (topic,) = answer.responses
    assert len(topic.partitions) == entries
    first, *repeats = topic.partitions
    assert {p.error_code.value for p in repeats} == {42}  # INVALID_REQUEST
    assert all(not p.records for p in repeats)
    served, _ = read_batch(first.records, 0)
    per_record = 1024 + door.RECORD_OVERHEAD
    assert len(served.records) == door.MAX_PARTITION_FETCH_BYTES // per_record
    # The core served (and traced) only what the answer carries, once.
    (line,) = h.served
    assert line.outcome_args["records"] == len(served.records)


def test_a_fetch_answer_never_carries_more_than_fetch_max_bytes():
    h = Served(partitions=8, acks="1")
    for p in range(8):
        h.call(PRODUCE, 9, produce_body([(p, batch([b"y" * 1024] * 400))]))
    answer = h.call(FETCH, 12, fetch_body([(p, 0) for p in range(8)], max_bytes=2**31 - 1,
                                          partition_max_bytes=2**31 - 1))
    sizes = [len(p.records or b"") for p in answer.responses[0].partitions]
    assert 0 < sum(sizes) <= door.FETCH_MAX_BYTES
    assert sizes[-1] == 0  # the answer was full before the last partition


def test_a_fetch_from_a_negative_offset_is_out_of_range():
    h = Served()
    produce(h, batch([b"1", b"2"]))
    part = h.call(FETCH, 12, fetch_body([(0, -5)])).responses[0].partitions[0]
    assert part.error_code.value == 1 and h.served == []


# Produce: records per request, bytes per batch, repeats -----------------------------------


def test_a_produce_of_a_hundred_thousand_null_records_is_refused_unread():
    h = Harness()
    answer = h.call(PRODUCE, 9, produce_body([(0, null_records(100_000))]))
    assert answer.responses[0].partition_responses[0].error_code.value == 10  # MESSAGE_TOO_LARGE
    assert h.traced == [] and h.core.replicas[0].leo == 0


def test_a_produce_at_the_record_cap_is_written_and_one_over_it_is_not():
    h = Harness()
    answer = h.call(PRODUCE, 9, produce_body([(0, null_records(door.MAX_PRODUCE_RECORDS))]))
    assert answer.responses[0].partition_responses[0].error_code.value == 0
    assert h.core.replicas[0].leo == door.MAX_PRODUCE_RECORDS
    # The cap is per request: two batches of half the cap and one more are refused together.
    half = null_records(door.MAX_PRODUCE_RECORDS // 2)
    h2 = Harness(partitions=2)
    answer = h2.call(PRODUCE, 9, produce_body([(0, half), (1, half + null_records(1))]))
    codes = [p.error_code.value for p in answer.responses[0].partition_responses]
    assert codes == [0, 10]
    assert [r.leo for r in h2.core.replicas] == [door.MAX_PRODUCE_RECORDS // 2, 0]


def test_a_batch_over_message_max_bytes_is_message_too_large():
    h = Harness()
    answer = h.call(PRODUCE, 9, produce_body([(0, batch([b"z" * door.MESSAGE_MAX_BYTES]))]))
    assert answer.responses[0].partition_responses[0].error_code.value == 10
    assert h.core.replicas[0].leo == 0


def test_a_partition_named_twice_in_a_produce_is_written_once():
    h = Harness()
    answer = h.call(PRODUCE, 9, produce_body([(0, batch([b"1"])), (0, batch([b"2"]))]))
    codes = [p.error_code.value for p in answer.responses[0].partition_responses]
    assert codes == [0, 42]
    assert [v for _, v, _ in h.core.replicas[0].log] == [1]


# The listener: connections, bytes held, long polls ------------------------------------------


class NullTrace:
    def __init__(self):
        self.ids = 0

    def message_id(self) -> str:
        self.ids += 1
        return f"b0:m{self.ids}"

    def event(self, *args) -> None:
        pass

    def flush(self) -> None:
        pass


class FakeNode:
    """What `KafkaServer` needs of a `Node`: its core and trace, and `handle`, which (as
    Node.handle) hands the core's answers to `kafka/...` back to the server, then tells it an
    input was taken. Counts the core inputs, by message type."""

    name = "b0"

    def __init__(self, partitions: int = 1, tracing: bool = True):
        self.core = Harness(partitions=partitions, tracing=tracing).core
        self.trace = NullTrace()
        self.inputs: dict[str, int] = {}
        self.t = 0
        self.kafka = serve.KafkaServer(self, {0: 19092}, TOPIC)
        self.on_input = None  # a test's hook, called with each input's message

    def now(self) -> int:
        self.t += 1
        return self.t

    def handle(self, call) -> None:
        effects = call(self, self.now())
        for effect in effects:
            for dst, m in _sends(effect):
                if dst.startswith("kafka/"):
                    self.kafka.answer(dst, m)
        after_input = getattr(self.kafka, "after_input", None)
        if after_input is not None:
            after_input()

    def on_message(self, now, src, mid, message):
        """Stands in for the core as `call`'s first argument, to count inputs."""
        name = type(message).__name__
        self.inputs[name] = self.inputs.get(name, 0) + 1
        if self.on_input is not None:
            self.on_input(message)
        return self.core.on_message(now, src, mid, message)


def _sends(effect):
    if type(effect) is Send:
        return [(effect.dst, effect.message)]
    if type(effect) is Transition:
        return effect.sends
    return []


def framed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


async def read_reply(stream) -> bytes | None:
    """One response frame (with its size prefix), or None when the server closed."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = await stream.receive_some(1 << 20)
        if not chunk:
            return None
        data += chunk
    return data


def count_frames(data: bytes) -> int:
    """How many whole response frames `data` holds, back to back."""
    n = at = 0
    while at + 4 <= len(data) and at + 4 + struct.unpack_from(">i", data, at)[0] <= len(data):
        at += 4 + struct.unpack_from(">i", data, at)[0]
        n += 1
    return n


API_VERSIONS_FRAME = request_frame(18, 3, {"client_software_name": "t",
                                           "client_software_version": "1"})


async def connect(nursery, server):
    """A client end of a new in-memory connection the server serves."""
    client, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(server._connection, server_end)
    await trio.testing.wait_all_tasks_blocked()
    return client


async def served(nursery, server) -> bool:
    """Whether a new connection's ApiVersions is answered."""
    client = await connect(nursery, server)
    try:
        await client.send_all(framed(API_VERSIONS_FRAME))
    except trio.BrokenResourceError:
        return False
    with trio.move_on_after(1):
        return await read_reply(client) is not None
    return False


def run(scenario) -> None:
    trio.run(scenario, clock=trio.testing.MockClock(autojump_threshold=0))


def test_idle_connections_give_their_slots_back():
    node = FakeNode()
    server = node.kafka
    server.idle_timeout_s = 30

    async def scenario():
        async with trio.open_nursery() as nursery:
            clients = [await connect(nursery, server) for _ in range(300)]
            assert server.connections == server.max_connections == 256
            assert server.stats["refused_connections"] == 44  # none idle a second yet
            await trio.sleep(31)
            assert server.connections == 0
            assert server.stats["closed_idle"] == 256
            for client in clients:  # every one was closed by the server
                assert await client.receive_some(10) == b""
            assert await served(nursery, server)
            nursery.cancel_scope.cancel()

    run(scenario)


def test_a_new_connection_takes_the_slot_of_the_one_idle_longest():
    node = FakeNode()
    server = node.kafka

    async def scenario():
        async with trio.open_nursery() as nursery:
            first = await connect(nursery, server)
            await trio.sleep(serve.EVICT_IDLE_MIN_S / 2)
            for _ in range(server.max_connections - 1):
                await connect(nursery, server)
            assert not await served(nursery, server)  # none idle a second
            await trio.sleep(serve.EVICT_IDLE_MIN_S)
            assert await served(nursery, server)
            assert server.stats["evicted_idle"] == 1
            assert await first.receive_some(10) == b""  # the one idle longest
            nursery.cancel_scope.cancel()

    run(scenario)


def test_half_sent_requests_hold_no_more_than_the_cap_in_all():
    node = FakeNode()
    server = node.kafka
    server.queued_max_request_bytes = 8 << 20
    header = struct.pack(">ihhi", codec.SOCKET_REQUEST_MAX_BYTES, PRODUCE, 9, 7)
    chunk = bytes(64 << 10)

    async def scenario():
        async with trio.open_nursery() as nursery:
            for _ in range(40):  # 40 MiB sent, none of it a whole request
                client = await connect(nursery, server)
                try:
                    await client.send_all(header)
                    for _ in range(16):
                        await client.send_all(chunk)
                        await trio.testing.wait_all_tasks_blocked()
                except trio.BrokenResourceError:
                    pass  # this one was shed
            assert server.stats["buffered_max"] <= server.queued_max_request_bytes
            assert server.buffered <= server.queued_max_request_bytes
            assert server.stats["closed_over_bytes"] >= 40 - 8
            # A whole request sent at once is served beside them.
            client = await connect(nursery, server)
            await client.send_all(framed(request_frame(
                PRODUCE, 9, produce_body([(0, batch([b"7"]))]))))
            assert await read_reply(client) is not None
            assert [v for _, v, _ in node.core.replicas[0].log] == [7]
            nursery.cancel_scope.cancel()
        assert server.buffered == 0

    run(scenario)


def test_over_the_cap_the_slow_sender_is_shed_not_the_busy_one():
    # A client that pipelines requests holds bytes all the time (the next request's start
    # arrives with the last one's end); what marks a hog is one frame unfinished for long.
    node = FakeNode()
    server = node.kafka
    server.queued_max_request_bytes = 2 << 20
    frames = [framed(request_frame(PRODUCE, 9, produce_body([(0, batch([b"%d" % v]))])))
              for v in (1, 2, 3)]
    slow_header = struct.pack(">ihhi", codec.SOCKET_REQUEST_MAX_BYTES, PRODUCE, 9, 7)

    async def scenario():
        async with trio.open_nursery() as nursery:
            busy = await connect(nursery, server)
            await busy.send_all(frames[0] + frames[1][:50])
            await trio.sleep(1)
            slow = await connect(nursery, server)
            await slow.send_all(slow_header + bytes(1 << 20))
            await trio.sleep(1)
            await busy.send_all(frames[1][50:] + frames[2][:50])
            await trio.testing.wait_all_tasks_blocked()
            await slow.send_all(bytes(3 << 19))  # over the cap now
            await trio.testing.wait_all_tasks_blocked()
            assert await slow.receive_some(10) == b""
            await busy.send_all(frames[2][50:])
            await trio.testing.wait_all_tasks_blocked()
            assert count_frames(await busy.receive_some(1 << 20)) == len(frames)
            assert [v for _, v, _ in node.core.replicas[0].log] == [1, 2, 3]
            assert server.stats["closed_over_bytes"] == 1
            nursery.cancel_scope.cancel()

    run(scenario)


def test_a_client_that_never_reads_its_answers_is_closed_and_holds_nothing():
    node = FakeNode()
    server = node.kafka
    server.idle_timeout_s = 30

    async def scenario():
        async with trio.open_nursery() as nursery:
            # Lockstep: the server's send blocks until the client reads, which it never does.
            client, server_end = trio.testing.lockstep_stream_pair()
            nursery.start_soon(server._connection, server_end)
            await client.send_all(framed(API_VERSIONS_FRAME) * 3)
            await trio.testing.wait_all_tasks_blocked()
            assert server.connections == 1 and server.buffered > 0
            await trio.sleep(31)
            assert server.connections == 0 and server.buffered == 0
            assert server.stats["closed_idle"] == 1
            assert server.waiting == {} and server.replies == {} and server.door.pending == {}
            nursery.cancel_scope.cancel()

    run(scenario)


def test_parked_long_polls_wake_once_per_append_not_on_a_timer():
    node = FakeNode()
    server = node.kafka
    polls = 200
    fetch = framed(request_frame(FETCH, 12, fetch_body([(0, 0)], max_wait_ms=10_000)))

    async def scenario():
        async with trio.open_nursery() as nursery:
            clients = [await connect(nursery, server) for _ in range(polls)]
            for client in clients:
                await client.send_all(fetch)
            await trio.testing.wait_all_tasks_blocked()
            await trio.sleep(1)  # a second with nothing to serve
            assert server.parked == polls
            assert node.inputs == {"ConsumerFetch": polls}
            producer = await connect(nursery, server)
            await producer.send_all(framed(request_frame(
                PRODUCE, 9, produce_body([(0, batch([b"5"]))]))))
            assert await read_reply(producer) is not None
            for client in clients:
                reply = await read_reply(client)
                assert b"5" in reply[-40:]  # the record, served
            # Each poll was asked again once, when the HW moved, and never on a timer.
            assert server.stats["wakeups"] == polls
            assert node.inputs == {"ConsumerFetch": 2 * polls, "Produce": 1}
            assert server.parked == 0
            nursery.cancel_scope.cancel()

    run(scenario)


def test_long_polls_over_the_cap_are_answered_at_once():
    node = FakeNode()
    server = node.kafka
    server.max_parked_fetches = 50
    fetch = framed(request_frame(FETCH, 12, fetch_body([(0, 0)], max_wait_ms=10_000)))

    async def scenario():
        async with trio.open_nursery() as nursery:
            clients = [await connect(nursery, server) for _ in range(60)]
            for client in clients:
                await client.send_all(fetch)
            await trio.testing.wait_all_tasks_blocked()
            assert server.parked == 50
            assert server.stats["answered_unparked"] == 10
            start = trio.current_time()
            await read_reply(clients[-1])  # empty, at once
            assert trio.current_time() == start
            await read_reply(clients[0])  # empty, at its max_wait
            assert trio.current_time() - start == pytest.approx(10, abs=0.01)
            nursery.cancel_scope.cancel()

    run(scenario)


def test_a_large_produce_lets_other_tasks_run_between_slices():
    node = FakeNode()
    server = node.kafka
    ticks = [0]
    seen: list[int] = []
    node.on_input = lambda message: seen.append(ticks[0])

    async def ticker():
        while True:
            ticks[0] += 1
            await trio.sleep(0)

    async def scenario():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)  # never blocks: no wait_all_tasks_blocked here
            client, server_end = trio.testing.memory_stream_pair()
            nursery.start_soon(server._connection, server_end)
            records = [b"%d" % i for i in range(door.MAX_PRODUCE_RECORDS)]
            await client.send_all(framed(request_frame(
                PRODUCE, 9, produce_body([(0, batch(records))]))))
            assert await read_reply(client) is not None
            nursery.cancel_scope.cancel()

    run(scenario)
    assert len(seen) == door.MAX_PRODUCE_RECORDS
    # The ticker ran between slices: no more than two slices of inputs (trio may run the
    # producing task twice in a row) went by without it.
    assert max(seen.count(t) for t in set(seen)) <= 2 * serve.SLICE_INPUTS


# End to end: a real cluster, the attack beside a kafka-python producer ---------------------


def _attacks_module():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "bench" / "kafka_attacks.py"
    spec = importlib.util.spec_from_file_location("kafka_attacks", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.parametrize("attack", ["half-sent", "metadata-million"])
def test_under_attack_the_leader_keeps_acknowledging_writes(tmp_path, attack):
    result = _attacks_module().run_attack(attack, 8.0, tmp_path)
    assert result["failed"] == 0 and result["acked"] == result["sent"] > 0
    # The store fenced no broker and elected no leader (ControllerHandleBrokerFailure,
    # ControllerElectLeader), and the leader's memory stayed bounded.
    assert not [a for a in result["store_actions_during"] if a.startswith("Controller")]
    assert result["leader_rss_max_mb"] < 512
    assert result["tracebacks"] == 0
    closed = result["told"].get("closed_by_broker", result["told"].get("closed"))
    assert closed > 0  # the attack's connections were closed by the broker
