"""Frames on the wire between the nodes of a TCP cluster: a 4-byte length, then a body.

Theory of operation. A frame is `struct(">I")` length followed by that many bytes: one JSON
object, or (first byte 0x00) a replication message in Kafka's own format, see
impl/kafka/replication.py: a follower's Fetch and OffsetsForLeaderEpoch and the leader's
answers travel as Kafka's FetchRequest v15 / OffsetForLeaderEpochRequest v4 and their
responses, records as v2 batches. Four kinds of JSON object travel:

- challenge `{"challenge": N}`: the first frame the accepting side sends, a fresh nonce;
- hello    `{"hello": "b1", "proof": P, "challenge": M}`: the connecting side's answer, naming
  it; P is `proof(key, "hello", N, "b1", listener)` and M its own fresh nonce;
- welcome  `{"welcome": Q}`: the accepting side's answer, Q = `proof(key, "welcome", M, "b1",
  listener)`: each side has shown the other it holds the run's key (see `proof`);
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

A frame of the handshake is read by a decoder capped at `HANDSHAKE_MAX_BYTES`, and only that
one frame (`frames(limit=1)`): nothing a stranger sends past its hello is decoded.

`message_to_wire` is `Message.to_wire()` with fast paths for the client messages that carry
records (same JSON, without `dataclasses.asdict`'s deep copy).
"""

from __future__ import annotations

import hashlib
import hmac
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
HANDSHAKE_MAX_BYTES = 1024  # a hello with its proof is under 200 bytes
LENGTH = struct.Struct(">I")
KEY_BYTES = 32
NONCE_BYTES = 16

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


def proof(key: bytes, step: str, nonce: bytes, connector: str, listener: str) -> str:
    """HMAC-SHA256 (hex) under the run's key of one handshake step ("hello" from the
    connecting side, "welcome" from the accepting one) over the other side's fresh nonce and
    both names: it answers that nonce only, between those two nodes, in that direction."""
    text = b"\0".join([b"isrlab", step.encode(), nonce, connector.encode(), listener.encode()])
    return hmac.new(key, text, hashlib.sha256).hexdigest()


def proof_matches(given, key: bytes, step: str, nonce: bytes, connector: str,
                  listener: str) -> bool:
    """Whether `given` (anything a peer sent) is the proof; compared in constant time."""
    return isinstance(given, str) and given.isascii() and hmac.compare_digest(
        given, proof(key, step, nonce, connector, listener))


def nonce_of(text) -> bytes | None:
    """A peer's nonce from its hex, or None if it is not NONCE_BYTES of hex."""
    if not isinstance(text, str) or len(text) != 2 * NONCE_BYTES:
        return None
    try:
        return bytes.fromhex(text)
    except ValueError:
        return None


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

    def frames(self, limit: int | None = None) -> list[dict | BadFrame]:
        """Every complete frame buffered so far (at most `limit`; the rest stay buffered): a
        dict, or a BadFrame; FrameTooLarge when a length prefix is over the cap (checked
        before the body arrives)."""
        out: list[dict | BadFrame] = []
        buffer = self.buffer
        position = 0
        end = len(buffer)
        while end - position >= 4 and (limit is None or len(out) < limit):
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
                except RecursionError:  # replication.decode catches its own; a second guard
                    out.append(BadFrame("replication frame nests too deeply"))
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
