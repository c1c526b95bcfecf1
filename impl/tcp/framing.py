"""Frames on the wire between the nodes of a TCP cluster: a 4-byte length, then UTF-8 JSON.

Theory of operation. A frame is `struct(">I")` length followed by that many bytes of one JSON
object. Four kinds of object travel:

- hello    `{"hello": "b1"}`: the first frame on a connection, naming the connecting node;
- message  `{"src": "b1", "mid": "b1:m17", "t": 1234, "msg": {...}}`: `msg` is
  `Message.to_wire()`, `t` the sender's clock (ms since the run's start) when it sent it;
- control  `{"ctl": "block", "peers": [...]}` and friends, from the supervisor (see node.py);
- error    `{"error": "..."}`: what was wrong with the last frame the sender of it received.

`FrameDecoder` is sans-I/O: bytes in (`feed`), frames out (`frames`). A frame longer than
`MAX_FRAME_BYTES` is a `FrameTooLarge` (the connection cannot be resynchronised, so it is
closed); a frame that is not a JSON object, or a message that `messages.from_wire` refuses, is
a `BadFrame` item in the output (the length prefix still delimits it, so the connection goes
on): bytes that are not UTF-8 or not JSON, JSON nested deeper than the decoder's recursion
limit, numbers out of range. Nothing here raises on bad input from the network except
`FrameTooLarge`.

`message_to_wire` is `Message.to_wire()` with fast paths for the messages that carry records
(same JSON, without `dataclasses.asdict`'s deep copy), since those dominate a throughput run.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass

import msgspec

from impl.protocol.messages import (
    FetchResponse,
    Message,
    Produce,
    ProduceResponse,
    WireError,
    from_wire,
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
    if kind is FetchResponse:
        return {"type": "FetchResponse", "partition": m.partition, "leader": m.leader,
                "leader_epoch": m.leader_epoch, "kind": m.kind,
                "records": [[e, v, p.hex()] for e, v, p in m.records],
                "high_watermark": m.high_watermark, "fetch_offset": m.fetch_offset,
                "epoch": m.epoch, "end_offset": m.end_offset, "error": m.error}
    if kind is Produce:
        return {"type": "Produce", "partition": m.partition, "values": list(m.values),
                "payloads": [p.hex() for p in m.payloads], "acks": m.acks}
    if kind is ProduceResponse:
        return {"type": "ProduceResponse", "partition": m.partition,
                "results": [list(r) for r in m.results]}
    return m.to_wire()


def encode_message(src: str, mid: str, time_ms: int, m: Message) -> bytes:
    if type(m) is FetchResponse and m.records:
        return _encode_fetch_response(src, mid, time_ms, m)
    return encode_frame({"src": src, "mid": mid, "t": time_ms, "msg": message_to_wire(m)})


def _encode_fetch_response(src: str, mid: str, time_ms: int, m: FetchResponse) -> bytes:
    """The same JSON as `encode_frame` of `message_to_wire(m)`, built by hand: the records
    (integers and hex strings, nothing to escape) dominate a throughput run."""
    enc = _encoder.encode
    records = ",".join([f'[{e},{v},"{p.hex()}"]' for e, v, p in m.records])
    text = (f'{{"src":{enc(src)},"mid":{enc(mid)},"t":{int(time_ms)},"msg":{{"type":'
            f'"FetchResponse","partition":{int(m.partition)},"leader":{int(m.leader)},'
            f'"leader_epoch":{int(m.leader_epoch)},"kind":{enc(m.kind)},"records":[{records}],'
            f'"high_watermark":{int(m.high_watermark)},"fetch_offset":{int(m.fetch_offset)},'
            f'"epoch":{int(m.epoch)},"end_offset":{int(m.end_offset)},"error":{enc(m.error)}}}}}')
    data = text.encode("utf-8")
    if len(data) > MAX_FRAME_BYTES:
        raise ValueError(f"frame of {len(data)} bytes exceeds the {MAX_FRAME_BYTES}-byte cap")
    return LENGTH.pack(len(data)) + data


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
