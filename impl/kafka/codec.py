"""Kafka's wire format, through `kio` (entities generated from Kafka's JSON message schemas).

A request frame (after the 4-byte size) is a request header then the body; which header version
and body class to use follows from the API key and version, so both are read first. Responses
are built from plain dicts by `build`, which fills each version's own dataclasses (fields a
version lacks are left out, so one dict serves every version we advertise).
"""

from __future__ import annotations

import datetime
import io
import struct
import typing
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import cache

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i32

# API key -> (min, max) version served. Exactly what `KafkaDoor` answers; ApiVersions
# advertises this table.
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_FOR_LEADER_EPOCH, API_VERSIONS, INIT_PRODUCER_ID = 23, 18, 22
SUPPORTED: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 9),
    FETCH: (4, 12),
    LIST_OFFSETS: (1, 7),
    METADATA: (1, 12),
    API_VERSIONS: (0, 3),
    INIT_PRODUCER_ID: (0, 4),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
}
NAMES = {PRODUCE: "Produce", FETCH: "Fetch", LIST_OFFSETS: "ListOffsets", METADATA: "Metadata",
         API_VERSIONS: "ApiVersions", INIT_PRODUCER_ID: "InitProducerId",
         OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch"}

# Decoding limits. Only a Produce carries bulk (its record batches); every other request names
# topics and partitions, and this broker serves one topic of a few partitions, so a small frame
# is plenty, and decoding one costs well under a millisecond per kilobyte.
SOCKET_REQUEST_MAX_BYTES = 16 << 20  # a Produce frame (Kafka's socket.request.max.bytes: 100 MiB)
SMALL_REQUEST_MAX_BYTES = 256 << 10  # any other request
# Entries one request may name, counted after decoding (Kafka has no such cap): each costs an
# answer entry, 20-150 us to build and encode (the machine idle or loaded), so these keep any
# one request to a few milliseconds of the core's thread. A cluster has one topic.
MAX_REQUEST_TOPICS = 100
MAX_REQUEST_PARTITIONS = 256


def request_max_bytes(api_key: int) -> int:
    """The largest request frame (without its size prefix) served for `api_key`."""
    return SOCKET_REQUEST_MAX_BYTES if api_key == PRODUCE else SMALL_REQUEST_MAX_BYTES


class BadRequest(ValueError):
    """A frame that cannot be answered as its API: the connection is closed with a log line.
    `correlation_id` is set when the header could be read."""

    def __init__(self, text: str, api_key: int = -1, api_version: int = -1,
                 correlation_id: int | None = None):
        super().__init__(text)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


@dataclass(frozen=True, slots=True)
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: object  # the kio request entity


@cache
def _request_class(api_key: int, version: int):
    return load_request_schema(api_key, version)


@cache
def reader_of(cls):
    return entity_reader(cls)


@cache
def writer_of(cls):
    return entity_writer(cls)


def parse_request(frame: bytes) -> Request:
    """A request frame (without its size prefix) -> `Request`; `BadRequest` otherwise."""
    if len(frame) < 8:
        raise BadRequest(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
    if api_key not in SUPPORTED:
        raise BadRequest(f"unsupported API key {api_key}", api_key, api_version, correlation_id)
    if len(frame) > request_max_bytes(api_key):
        raise BadRequest(f"{NAMES[api_key]} of {len(frame)} bytes (cap "
                         f"{request_max_bytes(api_key)})", api_key, api_version, correlation_id)
    low, high = SUPPORTED[api_key]
    if not low <= api_version <= high:
        if api_key == API_VERSIONS:
            # Kafka answers an ApiVersions it cannot parse with v0 and UNSUPPORTED_VERSION, so
            # the client can retry with a version from the list.
            return Request(api_key, api_version, correlation_id, None, None)
        raise BadRequest(f"{NAMES[api_key]} v{api_version} is not served ({low}..{high})",
                         api_key, api_version, correlation_id)
    cls = _request_class(api_key, api_version)
    try:
        header, size = reader_of(cls.__header_schema__)(frame, 0)
        body, used = reader_of(cls)(frame, size)
    except Exception as error:  # kio raises several types for malformed bytes
        raise BadRequest(f"malformed {NAMES[api_key]} v{api_version}: {error}",
                         api_key, api_version, correlation_id) from None
    if size + used != len(frame):
        raise BadRequest(f"{NAMES[api_key]} v{api_version}: {len(frame) - size - used} bytes "
                         "after the request body", api_key, api_version, correlation_id)
    topics, partitions = entries(body)
    if topics > MAX_REQUEST_TOPICS or partitions > MAX_REQUEST_PARTITIONS:
        raise BadRequest(f"{NAMES[api_key]} v{api_version} names {topics} topics and "
                         f"{partitions} partitions (caps {MAX_REQUEST_TOPICS} and "
                         f"{MAX_REQUEST_PARTITIONS})", api_key, api_version, correlation_id)
    return Request(api_key, api_version, correlation_id, header.client_id, body)


def entries(body) -> tuple[int, int]:
    """(topics, partitions) a request body names: the entries of its top-level lists, and of
    the lists inside those entries. Every request served here lists topics, each listing its
    partitions (Fetch also lists forgotten topics; ApiVersions and InitProducerId list none)."""
    topics = partitions = 0
    for f in fields(body):
        value = getattr(body, f.name)
        if type(value) is not tuple:
            continue
        topics += len(value)
        for entry in value:
            if is_dataclass(entry):
                partitions += sum(len(getattr(entry, g.name)) for g in fields(entry)
                                  if type(getattr(entry, g.name)) is tuple)
    return topics, partitions


# Responses ----------------------------------------------------------------------------------


@cache
def _hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _convert(hint, value):
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin is tuple:
        (inner, *_) = typing.get_args(hint)
        return tuple(_convert(inner, v) for v in value)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        inner = next(a for a in typing.get_args(hint) if a is not type(None))
        return _convert(inner, value)
    if is_dataclass(hint) and isinstance(value, dict):
        return build(hint, value)
    if isinstance(hint, type):
        if issubclass(hint, datetime.timedelta):
            return datetime.timedelta(milliseconds=value)
        if issubclass(hint, ErrorCode):
            return ErrorCode(value)
    return value


def build(cls, data: dict):
    """`cls` (a kio entity of one version) from a dict; keys the version lacks are dropped and
    fields with defaults may be left out."""
    hints = _hints(cls)
    kwargs = {}
    for f in fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
        elif f.default is MISSING and f.default_factory is MISSING:
            raise KeyError(f"{cls.__module__}.{cls.__qualname__}: no value for {f.name}")
    return cls(**kwargs)


def encode_response(request: Request, data: dict) -> bytes:
    """The response frame (with its size prefix) to `request`, from a dict."""
    version = request.api_version
    if request.body is None:  # ApiVersions at a version we do not serve: answered as v0
        version = 0
    cls = load_response_schema(request.api_key, version)
    header_cls = cls.__header_schema__
    # ApiVersions responses always use header v0, whatever the version (KIP-511).
    if request.api_key == API_VERSIONS:
        from kio.schema.response_header.v0.header import ResponseHeader
        header_cls = ResponseHeader
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    writer_of(header_cls)(out, header_cls(correlation_id=i32(request.correlation_id)))
    writer_of(cls)(out, build(cls, data))
    frame = out.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)
