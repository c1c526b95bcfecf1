"""What one Kafka request, or many connections, may cost the broker: the door's and the Kafka
listener's caps (impl/kafka/codec.py, door.py, serve.py), each driven by the request or the
sockets that froze or bloated the broker before the cap was there.

The door tests run a real `BrokerCore` behind `KafkaDoor` (as tests/test_kafka_door.py); the
listener tests run `KafkaServer` over trio's in-memory streams with a `MockClock`, so idle
timeouts and long polls take no wall time and every count is deterministic."""

from __future__ import annotations

import struct

import pytest
from kio.records.readers import read_batch
from test_kafka_door import TOPIC, Harness, batch, produce, request_frame

from impl.kafka import batches, codec, door
from impl.kafka.codec import FETCH, METADATA, PRODUCE, BadRequest, parse_request
from impl.protocol.messages import Transition

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
    names = [f"t{i % 500}" for i in range(codec.MAX_REQUEST_TOPICS)] + [TOPIC]
    body = h.call(METADATA, 9, {"topics": [{"name": n} for n in names[1:]],
                                "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": False,
                                "include_topic_authorized_operations": False})
    codes = {t.name: t.error_code.value for t in body.topics}
    assert len(body.topics) == len(codes) == 501  # 500 distinct unknown names and the topic
    assert codes.pop(TOPIC) == 0 and set(codes.values()) == {3}  # UNKNOWN_TOPIC_OR_PARTITION


def test_a_fetch_naming_more_partitions_than_the_cap_is_refused():
    frame = request_frame(FETCH, 12, fetch_body([(0, 0)] * (codec.MAX_REQUEST_PARTITIONS + 1)))
    with pytest.raises(BadRequest) as refused:
        parse_request(frame)
    assert f"{codec.MAX_REQUEST_PARTITIONS + 1} partitions" in str(refused.value)


# Fetch: repeats and bytes per answer ------------------------------------------------------


def test_a_fetch_naming_one_partition_a_thousand_times_is_served_once_within_the_caps():
    h = Served(acks="1")
    for _ in range(8):  # 4 MiB in 4,096 records of 1 KiB
        produce(h, batch([b"x" * 1024] * 512))
    assert h.core.replicas[0].high_watermark == 4096
    body = fetch_body([(0, 0)] * 1000, max_bytes=2**31 - 1, partition_max_bytes=2**31 - 1)
    answer = h.call(FETCH, 12, body)
    (topic,) = answer.responses
    assert len(topic.partitions) == 1000
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
