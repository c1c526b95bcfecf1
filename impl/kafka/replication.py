"""Replication between brokers in Kafka's own messages: Fetch v15 and OffsetForLeaderEpoch v4.

Theory of operation. A follower's `Fetch` goes out as Kafka's FetchRequest v15 (KIP-903's
`replica_state` carries the follower's id and broker epoch; `current_leader_epoch` and
`last_fetched_epoch` are KIP-320's), a truncation round's `OffsetsForLeaderEpoch` as
OffsetForLeaderEpochRequest v4 (KIP-279). The leader answers with FetchResponse v15: record
batches v2 (one batch per run of records with the same leader epoch, which the batch header
carries; each record's key is its write number in decimal, its value the payload bytes; one
CRC32C per batch, verified on receipt), the high watermark, `diverging_epoch` (KIP-320),
`current_leader`, and the error code; or with OffsetForLeaderEpochResponse v4 for an epoch
answer.

Kafka's connections are two-way: a follower matches a response to its request by correlation
id and remembers what it asked. A TCP cluster's connections are one-way (see impl/tcp/node.py),
so the frame carries a small JSON envelope before the Kafka bytes: the sender, message id and
send time every frame has, and for a response the request context a Kafka follower would have
kept: `kind` (records | epoch | diverging | error), `fetch_offset`, `end_offset` (an
out-of-range answer's leader end) and `leader_epoch`. Everything else travels in Kafka's
fields, and the decoder checks that the two agree (an error code only on an error answer, a
diverging epoch only on a diverging one, batches starting at the fetch offset).

Frame layout (after the 4-byte frame length): one 0x00 byte (a JSON frame starts with `{`),
a 2-byte envelope length, the envelope's JSON, then a Kafka request (header v2 + body) or
response (header v1 + body) without its own size prefix.
"""

from __future__ import annotations

import io
import struct
import uuid

import msgspec
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32

from impl.kafka import batches
from impl.kafka.codec import build, reader_of, writer_of
from impl.protocol.messages import UNKNOWN, Fetch, FetchResponse, OffsetsForLeaderEpoch
from vocab.outcomes import KAFKA_ERROR_NUMBERS, KafkaError

MARK = 0
FETCH_API, FETCH_VERSION = 1, 15
EPOCH_API, EPOCH_VERSION = 23, 4
TOPIC = "isrlab"
TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_URL, "isrlab:replication")
_ENVELOPE = struct.Struct(">BH")
# An honest envelope is a flat object of under 200 bytes; the cap also bounds its nesting,
# so a hostile one cannot recurse the JSON decoder into a RecursionError.
MAX_ENVELOPE_BYTES = 512
_NAMES = {number: error for error, number in KAFKA_ERROR_NUMBERS.items()}
_json = msgspec.json.encode
_unjson = msgspec.json.decode

_FetchRequest = load_request_schema(FETCH_API, FETCH_VERSION)
_FetchResponse = load_response_schema(FETCH_API, FETCH_VERSION)
_EpochRequest = load_request_schema(EPOCH_API, EPOCH_VERSION)
_EpochResponse = load_response_schema(EPOCH_API, EPOCH_VERSION)
REPLICATED = (Fetch, OffsetsForLeaderEpoch, FetchResponse)


class ReplicationWireError(ValueError):
    """A replication frame that does not decode to a message: one line naming what."""


def encode(src: str, mid: str, time_ms: int, m) -> bytes:
    """The frame body (without the 4-byte length) of a replication message."""
    envelope = {"src": src, "mid": mid, "t": time_ms}
    kind = type(m)
    if kind is Fetch:
        cls, header, body = _FetchRequest, _request_header(FETCH_API, FETCH_VERSION, m), {
            "replica_state": {"replica_id": m.follower, "replica_epoch": m.broker_epoch},
            "max_wait": 0, "min_bytes": 0,
            "topics": [{"topic_id": TOPIC_ID, "partitions": [{
                "partition": m.partition, "current_leader_epoch": m.current_leader_epoch,
                "fetch_offset": m.fetch_offset, "last_fetched_epoch": m.last_fetched_epoch,
                "partition_max_bytes": 2**31 - 1}]}],
            "forgotten_topics_data": []}
    elif kind is OffsetsForLeaderEpoch:
        cls, header, body = _EpochRequest, _request_header(EPOCH_API, EPOCH_VERSION, m), {
            "replica_id": m.follower,
            "topics": [{"topic": TOPIC, "partitions": [{
                "partition": m.partition, "current_leader_epoch": m.current_leader_epoch,
                "leader_epoch": m.epoch}]}]}
    elif kind is FetchResponse:
        envelope.update(kind=m.kind, fetch_offset=m.fetch_offset, end_offset=m.end_offset,
                        leader_epoch=m.leader_epoch)
        # The correlation id carries the request's number back, as in Kafka.
        header = _FetchResponse.__header_schema__(correlation_id=i32(m.seq))
        if m.kind == "epoch":
            cls, header = _EpochResponse, _EpochResponse.__header_schema__(
                correlation_id=i32(m.seq))
            body = {"throttle_time": 0, "topics": [{"topic": TOPIC, "partitions": [{
                "error_code": 0, "partition": m.partition, "leader_epoch": m.epoch,
                "end_offset": m.end_offset}]}]}
        else:
            cls = _FetchResponse
            partition = {
                "partition_index": m.partition,
                "error_code": KAFKA_ERROR_NUMBERS[KafkaError(m.error)] if m.kind == "error" else 0,
                "high_watermark": m.high_watermark, "aborted_transactions": None,
                "current_leader": {"leader_id": m.leader, "leader_epoch": m.leader_epoch},
                "records": write_records(m.records, m.fetch_offset) if m.records else None}
            if m.kind == "diverging":
                partition["diverging_epoch"] = {"epoch": m.epoch, "end_offset": m.end_offset}
            body = {"throttle_time": 0, "error_code": 0, "session_id": 0,
                    "responses": [{"topic_id": TOPIC_ID, "partitions": [partition]}],
                    "node_endpoints": []}
    else:
        raise TypeError(f"{kind.__name__} is not a replication message")
    head = _json(envelope)
    out = io.BytesIO()
    out.write(_ENVELOPE.pack(MARK, len(head)))
    out.write(head)
    writer_of(type(header))(out, header)
    writer_of(cls)(out, build(cls, body))
    return out.getvalue()


def _request_header(api_key: int, version: int, m):
    cls = (_FetchRequest if api_key == FETCH_API else _EpochRequest).__header_schema__
    return cls(request_api_key=i16(api_key), request_api_version=i16(version),
               correlation_id=i32(m.seq), client_id=f"b{m.follower}")


def decode(body: bytes | bytearray | memoryview) -> dict:
    """A frame body that starts with MARK -> {"src", "mid", "t", "msg": Message}."""
    body = bytes(body)
    if len(body) < _ENVELOPE.size:
        raise ReplicationWireError("replication frame shorter than its envelope header")
    _, size = _ENVELOPE.unpack_from(body)
    if size > MAX_ENVELOPE_BYTES:
        raise ReplicationWireError(f"replication envelope of {size} bytes exceeds the "
                                   f"{MAX_ENVELOPE_BYTES}-byte cap")
    start = _ENVELOPE.size + size
    try:
        envelope = _unjson(body[_ENVELOPE.size:start])
    except (msgspec.DecodeError, RecursionError) as error:
        raise ReplicationWireError(f"replication envelope is not JSON ({str(error)[:80]})"
                                   ) from None
    if not isinstance(envelope, dict):
        raise ReplicationWireError("replication envelope is not a JSON object")
    try:
        if "kind" in envelope:
            message = _decode_response(envelope, body, start)
        else:
            message = _decode_request(body, start)
    except ReplicationWireError:
        raise
    except Exception as error:  # kio raises several types on malformed bytes, RecursionError too
        raise ReplicationWireError(f"malformed Kafka replication message: "
                                   f"{str(error)[:120]}") from None
    return {"src": envelope.get("src"), "mid": envelope.get("mid"), "t": envelope.get("t", 0),
            "msg": message}


def _decode_request(body: bytes, start: int):
    if len(body) - start < 4:
        raise ReplicationWireError("replication request shorter than a request header")
    api_key, version = struct.unpack_from(">hh", body, start)
    if (api_key, version) == (FETCH_API, FETCH_VERSION):
        cls = _FetchRequest
    elif (api_key, version) == (EPOCH_API, EPOCH_VERSION):
        cls = _EpochRequest
    else:
        raise ReplicationWireError(f"replication request API {api_key} v{version} is not used "
                                   f"between brokers (Fetch v{FETCH_VERSION}, "
                                   f"OffsetForLeaderEpoch v{EPOCH_VERSION})")
    header, used = reader_of(cls.__header_schema__)(body, start)
    seq = int(header.correlation_id)
    request, size = reader_of(cls)(body, start + used)
    _whole(body, start + used + size)
    (topic,) = _one(request.topics, "topic")
    (partition,) = _one(topic.partitions, "partition")
    if cls is _FetchRequest:
        _topic_id(topic.topic_id)
        state = request.replica_state
        return Fetch(int(partition.partition), int(state.replica_id),
                     int(partition.fetch_offset), int(partition.last_fetched_epoch),
                     int(partition.current_leader_epoch), int(state.replica_epoch), seq)
    if topic.topic != TOPIC:
        raise ReplicationWireError(f"replication topic {topic.topic!r} is not {TOPIC!r}")
    return OffsetsForLeaderEpoch(int(partition.partition), int(request.replica_id),
                                 int(partition.leader_epoch),
                                 int(partition.current_leader_epoch), seq)


def _decode_response(envelope: dict, body: bytes, start: int) -> FetchResponse:
    kind = envelope.get("kind")
    context = [envelope.get(k) for k in ("fetch_offset", "end_offset", "leader_epoch")]
    if any(type(v) is not int for v in context):
        raise ReplicationWireError("replication envelope: fetch_offset, end_offset and "
                                   "leader_epoch must be integers")
    fetch_offset, end_offset, leader_epoch = context
    src = envelope.get("src")
    if not (isinstance(src, str) and src[:1] == "b" and src[1:].isdigit()):
        raise ReplicationWireError(f"replication response from {src!r}, not a broker")
    leader = int(src[1:])
    if kind == "epoch":
        cls = _EpochResponse
    elif kind in ("records", "diverging", "error"):
        cls = _FetchResponse
    else:
        raise ReplicationWireError(f"replication envelope: unknown kind {kind!r}")
    header, used = reader_of(cls.__header_schema__)(body, start)
    seq = int(header.correlation_id)
    response, size = reader_of(cls)(body, start + used)
    _whole(body, start + used + size)
    if cls is _EpochResponse:
        (topic,) = _one(response.topics, "topic")
        (p,) = _one(topic.partitions, "partition")
        _no_error(p.error_code, kind)
        return FetchResponse(int(p.partition), leader, leader_epoch, "epoch",
                             epoch=int(p.leader_epoch), end_offset=int(p.end_offset), seq=seq)
    (topic,) = _one(response.responses, "topic")
    _topic_id(topic.topic_id)
    (p,) = _one(topic.partitions, "partition")
    if (int(p.current_leader.leader_id), int(p.current_leader.leader_epoch)) != (leader,
                                                                                 leader_epoch):
        raise ReplicationWireError("replication response: current_leader disagrees with "
                                   "its sender and leader epoch")
    error = "NONE"
    if kind == "error":
        name = _NAMES.get(p.error_code.value)
        if name is None:
            raise ReplicationWireError(f"replication response: error code {p.error_code.value}"
                                       " is not a replication error")
        error = str(name)
    else:
        _no_error(p.error_code, kind)
    diverging = p.diverging_epoch
    if kind == "diverging":
        return FetchResponse(int(p.partition_index), leader, leader_epoch, "diverging",
                             epoch=int(diverging.epoch), end_offset=int(diverging.end_offset),
                             seq=seq)
    if (int(diverging.epoch), int(diverging.end_offset)) != (UNKNOWN, UNKNOWN):
        raise ReplicationWireError(f"replication response: a diverging epoch on a {kind} answer")
    records = read_records(p.records, fetch_offset) if p.records else ()
    return FetchResponse(int(p.partition_index), leader, leader_epoch, kind, records=records,
                         high_watermark=int(p.high_watermark), fetch_offset=fetch_offset,
                         end_offset=end_offset, error=error, seq=seq)


def _one(items, what: str):
    if len(items) != 1:
        raise ReplicationWireError(f"replication message with {len(items)} {what}s, not 1")
    return items


def _topic_id(topic_id) -> None:
    if topic_id != TOPIC_ID:
        raise ReplicationWireError(f"replication topic id {topic_id} is not the cluster's")


def _no_error(code: ErrorCode, kind: str) -> None:
    if code.value != 0:
        raise ReplicationWireError(f"replication response: error code {code.value} on a "
                                   f"{kind} answer")


def _whole(body: bytes, used: int) -> None:
    if used != len(body):
        raise ReplicationWireError(f"replication message: {len(body) - used} bytes after its "
                                   "body")


def write_records(records, base_offset: int) -> bytes:
    """Core records (epoch, write number, payload) from `base_offset` as v2 batches: one per
    run of records with the same leader epoch (the batch header carries it); a record's key is
    its write number in decimal, its value the payload."""
    return batches.write([(base_offset + i, epoch, b"%d" % value, payload)
                          for i, (epoch, value, payload) in enumerate(records)])


def read_records(data: bytes, base_offset: int) -> tuple[tuple[int, int, bytes], ...]:
    """The inverse of `write_records`: every batch's CRC32C verified; ReplicationWireError on
    a bad CRC, a compressed or transactional batch, a gap in the offsets, or a key that is not
    a write number."""
    out: list = []
    try:
        for batch in batches.read(data):
            if batch.records is None or batch.attributes & batches.TRANSACTIONAL:
                raise ReplicationWireError("replication record batch: compressed or "
                                           "transactional")
            for offset, key, value in batch.records:
                if offset != base_offset + len(out):
                    raise ReplicationWireError(f"replication record at offset {offset}, "
                                               f"expected {base_offset + len(out)}")
                if not (key and key.isdigit()):
                    raise ReplicationWireError("replication record key is not a write number")
                out.append((batch.epoch, int(key), value or b""))
    except batches.BadBatch as error:
        raise ReplicationWireError(f"replication record batch: {error}") from None
    return tuple(out)
