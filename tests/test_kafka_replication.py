"""Replication between brokers in Kafka's Fetch v15 / OffsetForLeaderEpoch v4 (impl/kafka/replication.py)."""

from __future__ import annotations

import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader

from impl.kafka import replication
from impl.protocol.messages import Fetch, FetchResponse, OffsetsForLeaderEpoch
from impl.tcp.framing import BadFrame, FrameDecoder, decode_message, encode_message

small = st.integers(min_value=0, max_value=2**40)
epoch = st.integers(min_value=-1, max_value=1000)
records = st.lists(st.tuples(st.integers(0, 50), small, st.binary(max_size=40)), max_size=12)


def responses():
    base = st.fixed_dictionaries({"partition": st.integers(0, 5), "leader": st.integers(0, 8),
                                  "leader_epoch": st.integers(0, 1000)})
    return st.one_of(
        st.builds(lambda b, r, hw, fo: FetchResponse(**b, kind="records", records=tuple(r),
                                                     high_watermark=hw, fetch_offset=fo),
                  base, records, small, small),
        st.builds(lambda b, e, o: FetchResponse(**b, kind="diverging", epoch=e, end_offset=o),
                  base, epoch, st.integers(-1, 2**40)),
        st.builds(lambda b, e, o: FetchResponse(**b, kind="epoch", epoch=e, end_offset=o),
                  base, epoch, st.integers(-1, 2**40)),
        st.builds(lambda b, err, o: FetchResponse(**b, kind="error", error=err, end_offset=o),
                  base, st.sampled_from(["NOT_LEADER_OR_FOLLOWER", "FENCED_LEADER_EPOCH",
                                         "UNKNOWN_LEADER_EPOCH", "OFFSET_OUT_OF_RANGE"]),
                  st.integers(-1, 2**40)))


def frames_of(data: bytes) -> list:
    decoder = FrameDecoder()
    decoder.feed(data)
    return decoder.frames()


@settings(max_examples=300, deadline=None)
@given(st.one_of(
    st.builds(Fetch, st.integers(0, 5), st.integers(0, 8), small, epoch, epoch, small),
    st.builds(OffsetsForLeaderEpoch, st.integers(0, 5), st.integers(0, 8), epoch, epoch),
    responses()))
def test_every_replication_message_survives_the_kafka_wire(message):
    src = f"b{message.leader}" if type(message) is FetchResponse else "b9"
    (frame,) = frames_of(encode_message(src, "b9:m1", 12, message))
    assert decode_message(frame) == (src, "b9:m1", 12, message)


def test_the_bytes_are_kafkas_own_messages():
    """Read back with kio's schema classes alone: Kafka would parse what a follower sends."""
    body = replication.encode("b2", "b2:m4", 7, Fetch(0, 2, 5, 3, 4, 17))
    (_, size) = struct.unpack_from(">BH", body)
    kafka = body[3 + size:]
    cls = load_request_schema(1, 15)
    header, used = entity_reader(cls.__header_schema__)(kafka, 0)
    request, _ = entity_reader(cls)(kafka, used)
    assert (header.request_api_key, header.request_api_version) == (1, 15)
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (2, 17)
    (p,) = request.topics[0].partitions
    assert (p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch) == (5, 3, 4)

    body = replication.encode("b1", "b1:m9", 8, FetchResponse(
        0, 1, 4, "records", records=((3, 10, b"ab"), (4, 11, b"c")), high_watermark=1,
        fetch_offset=6))
    (_, size) = struct.unpack_from(">BH", body)
    cls = load_response_schema(1, 15)
    _, used = entity_reader(cls.__header_schema__)(body[3 + size:], 0)
    response, _ = entity_reader(cls)(body[3 + size:], used)
    (p,) = response.responses[0].partitions
    assert (p.high_watermark, p.current_leader.leader_id, p.current_leader.leader_epoch) == (
        1, 1, 4)
    # Two leader epochs, two batches, each with its own partition leader epoch.
    assert replication.read_records(p.records, 6) == ((3, 10, b"ab"), (4, 11, b"c"))
    assert p.records.count(b"\x00\x00\x00\x03\x02") == 1  # epoch 3, magic 2


def test_a_flipped_byte_in_a_batch_is_refused_by_its_crc():
    data = bytearray(encode_message("b1", "b1:m2", 3, FetchResponse(
        0, 1, 4, "records", records=((4, 10, b"payload-bytes"),), high_watermark=0,
        fetch_offset=0)))
    data[data.index(b"payload-bytes") + 3] ^= 0x20
    (frame,) = frames_of(bytes(data))
    assert isinstance(frame, BadFrame) and "CRC32C mismatch" in frame.reason


def with_envelope(body: bytes, **changes) -> bytes:
    """The frame of `body` (a replication frame body) with envelope fields changed."""
    (_, size) = struct.unpack_from(">BH", body)
    envelope = json.loads(body[3:3 + size]) | changes
    head = json.dumps(envelope).encode()
    data = struct.pack(">BH", 0, len(head)) + head + body[3 + size:]
    return struct.pack(">I", len(data)) + data


def test_response_fields_that_contradict_the_answer_are_refused():
    records = FetchResponse(0, 1, 4, "records", records=((4, 10, b"x"),), fetch_offset=0)
    body = replication.encode("b1", "b1:m2", 3, records)
    (frame,) = frames_of(with_envelope(body))
    assert decode_message(frame)[3] == records
    # The same Kafka bytes claimed to come from broker 2: current_leader says broker 1.
    (frame,) = frames_of(with_envelope(body, src="b2"))
    assert isinstance(frame, BadFrame) and "current_leader" in frame.reason
    # Records that do not start at the fetch offset the envelope names.
    (frame,) = frames_of(with_envelope(body, fetch_offset=1))
    assert isinstance(frame, BadFrame) and "expected 1" in frame.reason
    # An error answer whose envelope says records: the error code must not be dropped.
    error = replication.encode("b1", "b1:m3", 3,
                               FetchResponse(0, 1, 4, "error", error="FENCED_LEADER_EPOCH"))
    (frame,) = frames_of(with_envelope(error, kind="records"))
    assert isinstance(frame, BadFrame) and "error code 74" in frame.reason
    # A diverging answer read as records would append instead of truncating.
    diverging = replication.encode("b1", "b1:m4", 3,
                                   FetchResponse(0, 1, 4, "diverging", epoch=2, end_offset=5))
    (frame,) = frames_of(with_envelope(diverging, kind="records"))
    assert isinstance(frame, BadFrame) and "diverging epoch on a records" in frame.reason


def test_truncated_and_foreign_requests_are_one_line_refusals():
    body = replication.encode("b2", "b2:m1", 1, Fetch(0, 2, 5, 3, 4, 17))
    for bad in (body[:-3], body[:5], body.replace(b"\x00\x01\x00\x0f", b"\x00\x01\x00\x0c", 1)):
        (frame,) = frames_of(struct.pack(">I", len(bad)) + bad)
        assert isinstance(frame, BadFrame), bad
        assert "\n" not in frame.reason


@settings(max_examples=200, deadline=None)
@given(records, st.integers(0, 2**40))
def test_fast_batches_agree_with_kio_both_ways(recs, base):
    """The hot-path batch writer and reader against kio's, the library reference."""
    import datetime
    import io

    from kio.records.readers import read_batch
    from kio.records.schema import NewRecordBatch, Record
    from kio.records.writers import write_new_batch
    from kio.static.primitive import i16, i32, i64

    data = replication.write_records(recs, base)
    seen, position = [], 0
    while position < len(data):
        batch, size = read_batch(data, position)
        seen += [(batch.partition_leader_epoch, int(r.key), r.value, r.offset)
                 for r in batch.records]
        position += size
    assert seen == [(e, v, p, base + i) for i, (e, v, p) in enumerate(recs)]

    out, start = io.BytesIO(), 0
    while start < len(recs):
        end = start
        while end < len(recs) and recs[end][0] == recs[start][0]:
            end += 1
        write_new_batch(out, NewRecordBatch(
            producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(recs[start][0]),
            base_sequence=i32(-1), attributes=i16(0), records=tuple(
                Record(attributes=0, timestamp=datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC),
                       offset=i64(base + i), key=b"%d" % v, value=p, headers=())
                for i, (_, v, p) in enumerate(recs[start:end], start))))
        start = end
    assert replication.read_records(out.getvalue(), base) == tuple(recs)
