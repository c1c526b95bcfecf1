"""Frames on the wire between the nodes of a TCP cluster: a 4-byte length, then a body.

Theory of operation. A frame is `struct(">I")` length followed by that many bytes: one JSON
object, or (first byte 0x00) a replication message in Kafka's own format, see
impl/kafka/replication.py: a follower's Fetch and OffsetsForLeaderEpoch and the leader's
answers travel as Kafka's FetchRequest v15 / OffsetForLeaderEpochRequest v4 and their
responses, records as v2 batches. Four kinds of JSON object travel:

- hello    `{"hello": "b1"}`: the first frame on a connection, naming the connecting node;
- message  `{"src": "b1", "mid": "b1:m17", "t": 1234, "msg": {...}}`: `msg` is
  `Message.to_wire()`, `t` the sender's clock (ms since the run's start) when it sent it;
- control  `{"ctl": "block", "peers": [...]}` and friends, from the supervisor (see node.py);
- error    `{"error": "..."}`: what was wrong with the last frame the sender of it received.

`FrameDecoder` is sans-I/O: bytes in (`feed`), frames out (`frames`; a replication frame comes
out as a message dict whose `msg` is already a `Message`). A frame longer than
`MAX_FRAME_BYTES` is a `FrameTooLarge` (the connection cannot be resynchronised, so it is
closed); a frame that is not a JSON object, a replication frame that does not decode, or a
message that `messages.from_wire` / `messages.validate` refuses, is a `BadFrame` item in the
output (the length prefix still delimits it, so the connection goes on): bytes that are not
UTF-8 or not JSON, JSON nested deeper than the decoder's recursion limit, numbers out of range,
a record batch whose CRC32C does not match. Nothing here raises on bad input from the network
except `FrameTooLarge`.

`message_to_wire` is `Message.to_wire()` with fast paths for the client messages that carry
records (same JSON, without `dataclasses.asdict`'s deep copy).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import msgspec

from impl.kafka import replication
from impl.kafka.replication import REPLICATED
from impl.protocol.messages import (
    Message,
    Produce,
    ProduceResponse,
    WireError,
    from_wire,
    validate,
)

MAX_FRAME_BYTES = 4 << 20
LENGTH = struct.Struct(">I")

_encoder = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_decode_json = msgspec.json.decode


class FrameTooLarge(Exception):
    """A length prefix over the cap: the stream cannot be trusted any further."""


@dataclass(frozen=True, slots=True)
class BadFrame:
    """A frame that was delimited correctly but did not hold what it should (one line)."""

    reason: str


def encode_frame(body: dict) -> bytes:
    data = _encoder.encode(body).encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {len(data)} bytes exceeds the {MAX_FRAME_BYTES}-byte cap")
    return LENGTH.pack(len(data)) + data


def message_to_wire(m: Message) -> dict:
    kind = type(m)
    if kind is Produce:
        return {"type": "Produce", "partition": m.partition, "values": list(m.values),
                "payloads": [p.hex() for p in m.payloads], "acks": m.acks}
    if kind is ProduceResponse:
        return {"type": "ProduceResponse", "partition": m.partition,
                "results": [list(r) for r in m.results]}
    return m.to_wire()


def encode_message(src: str, mid: str, time_ms: int, m: Message) -> bytes:
    if type(m) in REPLICATED:
        data = replication.encode(src, mid, time_ms, m)
        if len(data) > MAX_FRAME_BYTES:
            raise ValueError(f"frame of {len(data)} bytes exceeds the {MAX_FRAME_BYTES}-byte cap")
        return LENGTH.pack(len(data)) + data
    return encode_frame({"src": src, "mid": mid, "t": time_ms, "msg": message_to_wire(m)})


def decode_message(body: dict) -> tuple[str, str, int, Message]:
    """(src, mid, sent time ms, message) of a message frame; WireError naming what is wrong."""
    src, mid, msg = body.get("src"), body.get("mid"), body.get("msg")
    time_ms = body.get("t", 0)
    if not isinstance(src, str) or not src:
        raise WireError("frame: 'src' must be a non-empty string")
    if not isinstance(mid, str):
        raise WireError("frame: 'mid' must be a string")
    if type(time_ms) is not int:
        raise WireError("frame: 't' must be an integer")
    if isinstance(msg, Message):  # decoded from Kafka's replication messages
        return src, mid, time_ms, validate(msg)
    return src, mid, time_ms, from_wire(msg)


class FrameDecoder:
    """Splits a byte stream into frames (sans-I/O)."""

    __slots__ = ("buffer", "max_bytes")

    def __init__(self, max_bytes: int = MAX_FRAME_BYTES):
        self.buffer = bytearray()
        self.max_bytes = max_bytes

    def feed(self, data: bytes) -> None:
        self.buffer += data

    def frames(self) -> list[dict | BadFrame]:
        """Every complete frame buffered so far: a dict, or a BadFrame; FrameTooLarge when a
        length prefix is over the cap (check it before the body arrives)."""
        out: list[dict | BadFrame] = []
        buffer = self.buffer
        position = 0
        end = len(buffer)
        while end - position >= 4:
            (length,) = LENGTH.unpack_from(buffer, position)
            if length > self.max_bytes:
                del buffer[:position]
                raise FrameTooLarge(f"frame length {length} exceeds the {self.max_bytes}-byte cap")
            if end - position - 4 < length:
                break
            start = position + 4
            position = start + length
            if length and buffer[start] == replication.MARK:
                try:
                    out.append(replication.decode(buffer[start:position]))
                except replication.ReplicationWireError as error:
                    out.append(BadFrame(str(error)[:200]))
                continue
            try:
                body = _decode_json(buffer[start:position])
            except RecursionError:
                out.append(BadFrame("frame nests too deeply"))
                continue
            except UnicodeDecodeError:
                out.append(BadFrame("frame is not UTF-8"))
                continue
            except msgspec.DecodeError as error:
                out.append(BadFrame(f"frame is not JSON ({str(error)[:80]})"))
                continue
            if not isinstance(body, dict):
                out.append(BadFrame("frame is not a JSON object"))
                continue
            out.append(body)
        if position:
            del buffer[:position]
        return out
