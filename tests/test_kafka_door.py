"""The Kafka front door without sockets: request frames built with kio go through
`parse_request` and `KafkaDoor` into a real `BrokerCore`, and the response frames are decoded
with kio again and checked field by field (error codes, offsets, record values, CRCs)."""

from __future__ import annotations

import datetime
import io
import struct

import crc32c
import pytest
from kio.index import load_request_schema, load_response_schema
from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

from impl.config import ClusterConfig
from impl.kafka.codec import (
    API_VERSIONS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    OFFSET_FOR_LEADER_EPOCH,
    PRODUCE,
    SUPPORTED,
    BadRequest,
    build,
    parse_request,
)
from impl.kafka.door import KafkaDoor, end_offset_for_epoch
from impl.protocol.broker import BrokerCore
from impl.protocol.messages import Send, Transition
from impl.protocol.meta import MetaCore

TOPIC = "isrlab"


def request_frame(api_key: int, version: int, body: dict, correlation_id: int = 7) -> bytes:
    cls = load_request_schema(api_key, version)
    out = io.BytesIO()
    header_cls = cls.__header_schema__
    header = {"request_api_key": api_key, "request_api_version": version,
              "correlation_id": correlation_id, "client_id": "test"}
    entity_writer(header_cls)(out, build(header_cls, header))
    entity_writer(cls)(out, build(cls, body))
    return out.getvalue()


def decode_response(api_key: int, version: int, frame: bytes):
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    cls = load_response_schema(api_key, version)
    header_size = 4 if api_key == API_VERSIONS or not cls.__flexible__ else 5
    (correlation_id,) = struct.unpack_from(">i", frame, 4)
    body, used = entity_reader(cls)(frame, 4 + header_size)
    assert 4 + header_size + used == len(frame)
    return correlation_id, body


class Harness:
    """One broker core (broker 0 leads every partition, alone in the ISR) behind a door; the
    core's answers to `kafka/...` go back to the door, as Node.send does."""

    def __init__(self, partitions: int = 1, acks: str = "1", tracing: bool = True):
        self.config = ClusterConfig(brokers=1, partitions=partitions, min_insync_replicas=1,
                                    acks=acks)
        self.core = BrokerCore(0, self.config, tracing=tracing)
        views = MetaCore(self.config).initial_view
        self.core.bootstrap([views(p) for p in range(partitions)])
        self.door = KafkaDoor(0, self.config, {0: 19092}, TOPIC, self.core)
        self.traced: list[Transition] = []
        self.now = 0

    def call(self, api_key: int, version: int, body: dict):
        request = parse_request(request_frame(api_key, version, body))
        step = self.door.on_request(request)
        replies = [step.reply] if step.reply is not None else []
        for n, (transition, message) in enumerate(step.inputs):
            if transition is not None:
                self.traced.append(transition)
            self.now += 1
            for effect in self.core.on_message(self.now, step.src, f"k:m{n}", message):
                for dst, m in _sends(effect):
                    if dst.startswith("kafka/"):
                        reply = self.door.on_core_message(dst, m)
                        if reply is not None:
                            replies.append(reply)
        if not replies:
            return None
        (reply,) = replies
        correlation_id, body = decode_response(api_key, version, reply)
        assert correlation_id == 7
        return body


def _sends(effect):
    if type(effect) is Send:
        return [(effect.dst, effect.message)]
    if type(effect) is Transition:
        return effect.sends
    return []


def batch(values: list[bytes], corrupt: bool = False, compressed: bool = False) -> bytes:
    """A producer's batch, written by kio (not by the broker's own batch writer)."""
    out = io.BytesIO()
    write_new_batch(out, NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(-1),
        base_sequence=i32(-1), attributes=i16(0), records=tuple(
            Record(attributes=0, timestamp=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
                   offset=i64(i), key=None, value=v, headers=()) for i, v in enumerate(values))))
    raw = bytearray(out.getvalue())
    if compressed:
        raw[22] |= 0x01  # gzip in the attributes' low bits, with the CRC made to match
        struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    if corrupt:
        raw[-1] ^= 0xFF
    return bytes(raw)


def produce(h: Harness, records: bytes, acks: int = 1, topic: str = TOPIC, partition: int = 0):
    body = {"transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": topic, "partition_data": [
                {"index": partition, "records": records}]}]}
    return h.call(PRODUCE, 9, body)


def fetch(h: Harness, offset: int, current_leader_epoch: int = -1, version: int = 12):
    body = {"replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": TOPIC, "partitions": [
                {"partition": 0, "current_leader_epoch": current_leader_epoch,
                 "fetch_offset": offset, "last_fetched_epoch": -1, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": ""}
    return h.call(FETCH, version, body).responses[0].partitions[0]


def produce_error(response) -> int:
    return response.responses[0].partition_responses[0].error_code.value


# ------------------------------------------------------------------------------------------


def test_api_versions_advertises_exactly_what_is_served():
    h = Harness()
    body = h.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert body.error_code.value == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in body.api_keys} == SUPPORTED


def test_api_versions_at_an_unserved_version_answers_v0_with_unsupported_version():
    frame = struct.pack(">hhi", API_VERSIONS, 99, 7) + b"\x00\x00"
    request = parse_request(frame)
    step = Harness().door.on_request(request)
    correlation_id, body = decode_response(API_VERSIONS, 0, step.reply)
    assert (correlation_id, body.error_code.value) == (7, 35)
    assert {k.api_key for k in body.api_keys} == set(SUPPORTED)


@pytest.mark.parametrize(("frame", "words"), [
    (struct.pack(">hhi", 1000, 0, 7), "unsupported API key 1000"),
    (struct.pack(">hhi", PRODUCE, 1, 7), "Produce v1 is not served (3..9)"),
    (b"\x00\x03", "shorter than a request header"),
    (struct.pack(">hhi", METADATA, 9, 7) + b"\xff\xff\xff", "malformed Metadata v9"),
])
def test_requests_that_cannot_be_served_are_refused_with_a_reason(frame, words):
    with pytest.raises(BadRequest) as refused:
        parse_request(frame)
    assert words in str(refused.value)


def test_produce_then_fetch_round_trip_with_crc_checked_batches():
    h = Harness()
    response = produce(h, batch([b"11", b"12", b"13"]))
    part = response.responses[0].partition_responses[0]
    assert (part.error_code.value, part.base_offset) == (0, 0)
    # Each record became one traced ProducerSend naming the decimal value.
    assert [t.outcome_args["value"] for t in h.traced] == [11, 12, 13]
    got = fetch(h, 0)
    assert (got.error_code.value, got.high_watermark) == (0, 3)
    served, _ = read_batch(got.records, 0)  # raises on a CRC mismatch
    assert [(r.offset, r.value) for r in served.records] == [(0, b"11"), (1, b"12"), (2, b"13")]
    assert served.partition_leader_epoch == 0
    assert fetch(h, 3).records in (b"", None)
    assert fetch(h, 9).error_code.value == 1  # OFFSET_OUT_OF_RANGE


def test_untraced_brokers_append_a_batch_at_once_with_the_same_answers():
    h = Harness(tracing=False, acks="all")
    part = produce(h, batch([b"21", b"22"]), acks=-1).responses[0].partition_responses[0]
    assert (part.error_code.value, part.base_offset) == (0, 0)
    assert h.traced == []
    assert [v for _, v, _ in h.core.replicas[0].log] == [21, 22]
    part = produce(h, batch([b"23"]), acks=-1).responses[0].partition_responses[0]
    assert part.base_offset == 2


def test_values_that_are_not_numbers_get_fresh_numbers_and_keep_their_bytes():
    h = Harness()
    produce(h, batch([b"hello", b"0042x"]))
    values = [t.outcome_args["value"] for t in h.traced]
    assert len(set(values)) == 2 and min(values) >= 10**15
    served, _ = read_batch(fetch(h, 0).records, 0)
    assert [r.value for r in served.records] == [b"hello", b"0042x"]


@pytest.mark.parametrize(("records", "topic", "partition", "code"), [
    (batch([b"1"], corrupt=True), TOPIC, 0, 2),  # CORRUPT_MESSAGE: CRC32C mismatch
    (b"\x00" * 40, TOPIC, 0, 2),  # not a v2 batch
    (batch([b"1"], compressed=True), TOPIC, 0, 76),  # UNSUPPORTED_COMPRESSION_TYPE
    (batch([b"1"]), "other", 0, 3),  # UNKNOWN_TOPIC_OR_PARTITION
    (batch([b"1"]), TOPIC, 5, 3),
])
def test_bad_produce_requests_get_kafka_error_codes_and_append_nothing(records, topic,
                                                                       partition, code):
    h = Harness()
    assert produce_error(produce(h, records, topic=topic, partition=partition)) == code
    assert h.traced == [] and h.core.replicas[0].leo == 0


def test_produce_to_a_broker_that_does_not_lead_is_not_leader_or_follower():
    h = Harness()
    r = h.core.replicas[0]
    r.leader = 1
    assert produce_error(produce(h, batch([b"1"]))) == 6


def test_acks_other_than_the_clusters_are_refused():
    # Replay checks against a spec with one acks level per run (the cluster's).
    h = Harness(acks="all")
    assert produce_error(produce(h, batch([b"1"]), acks=1)) == 21  # INVALID_REQUIRED_ACKS
    assert h.traced == [] and h.core.replicas[0].leo == 0
    answer = produce(h, batch([b"1"]), acks=-1)
    assert answer.responses[0].partition_responses[0].base_offset == 0  # committed: ISR {0}


def test_acks_zero_gets_no_response_but_the_write_is_made():
    h = Harness(acks="0")
    assert produce(h, batch([b"5"]), acks=0) is None
    assert [v for _, v, _ in h.core.replicas[0].log] == [5]


def test_fetch_checks_the_current_leader_epoch():
    h = Harness()
    produce(h, batch([b"1"]))
    assert fetch(h, 0, current_leader_epoch=0).error_code.value == 0
    h.core.replicas[0].leader_epoch = 2
    assert fetch(h, 0, current_leader_epoch=1).error_code.value == 74  # FENCED_LEADER_EPOCH
    assert fetch(h, 0, current_leader_epoch=3).error_code.value == 75  # UNKNOWN_LEADER_EPOCH
    assert fetch(h, 0, version=4).error_code.value == 0  # v4 carries no leader epoch


def test_metadata_names_every_broker_and_the_partition_leaders():
    h = Harness(partitions=2)
    body = h.call(METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                "include_cluster_authorized_operations": False,
                                "include_topic_authorized_operations": False})
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(0, "127.0.0.1", 19092)]
    (topic,) = body.topics
    assert topic.name == TOPIC
    assert [(p.partition_index, p.leader_id, p.leader_epoch, list(p.isr_nodes))
            for p in topic.partitions] == [(0, 0, 0, [0]), (1, 0, 0, [0])]
    unknown = h.call(METADATA, 9, {"topics": [{"name": "nope"}],
                                   "allow_auto_topic_creation": True,
                                   "include_cluster_authorized_operations": False,
                                   "include_topic_authorized_operations": False})
    assert unknown.topics[0].error_code.value == 3  # and it is not created


def test_list_offsets_and_offset_for_leader_epoch():
    h = Harness()
    produce(h, batch([b"1", b"2"]))

    def list_offsets(timestamp, current_leader_epoch=-1):
        body = {"replica_id": -1, "isolation_level": 0, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "current_leader_epoch": current_leader_epoch,
             "timestamp": timestamp}]}]}
        return h.call(LIST_OFFSETS, 7, body).topics[0].partitions[0]

    def epoch_end(current_leader_epoch=-1):
        body = {"replica_id": -1, "topics": [{"topic": TOPIC, "partitions": [
            {"partition": 0, "current_leader_epoch": current_leader_epoch, "leader_epoch": 0}]}]}
        answer = h.call(OFFSET_FOR_LEADER_EPOCH, 4, body).topics[0].partitions[0]
        return answer.error_code.value, answer.leader_epoch, answer.end_offset

    assert (list_offsets(-2).offset, list_offsets(-1).offset) == (0, 2)
    assert epoch_end() == (0, 0, 2)
    # A request from a newer leader epoch is answered with its error alone (75:
    # UNKNOWN_LEADER_EPOCH), nothing of the log.
    fenced = list_offsets(-1, current_leader_epoch=1)
    assert (fenced.error_code.value, fenced.offset, fenced.leader_epoch) == (75, -1, -1)
    assert epoch_end(current_leader_epoch=1) == (75, -1, -1)


def test_end_offset_for_epoch_follows_kafkas_epoch_cache():
    cache = [(0, 0), (2, 5), (4, 9)]
    assert end_offset_for_epoch(cache, 12, 0) == (0, 5)
    assert end_offset_for_epoch(cache, 12, 1) == (0, 5)
    assert end_offset_for_epoch(cache, 12, 3) == (2, 9)
    assert end_offset_for_epoch(cache, 12, 7) == (4, 12)
    assert end_offset_for_epoch([(3, 0)], 4, 1) == (-1, -1)


def test_bytes_after_the_request_body_are_refused():
    good = request_frame(METADATA, 9, {"topics": None, "allow_auto_topic_creation": False,
                                       "include_cluster_authorized_operations": False,
                                       "include_topic_authorized_operations": False})
    assert parse_request(good).api_version == 9
    with pytest.raises(BadRequest) as refused:
        parse_request(good + b"\x01")
    assert "1 bytes after the request body" in str(refused.value)
