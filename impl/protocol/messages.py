"""Messages between the nodes of the reference cluster, and the effects a core hands back.

Nodes are named `b0`, `b1`, ... (brokers), `meta` (the metadata store, which also runs the
controller logic), `producer` and `consumer`. Every message is a frozen dataclass with a
`to_wire()` / `from_wire()` pair (plain JSON-able dicts) so the TCP driver can frame it and the
simulator can pass it by reference. Names follow Kafka's request names where Kafka has one.

Effects are what a sans-I/O core asks its driver to do: `Transition` (one line of the node's
trace, with the messages it sent), `Send` (a message outside a traced transition; an answer to a
client is a `Send` to the client's node), `Recall` (take back an unread fetch), `History` (a
client's history line) and the disk operations (`DiskAppend`, `DiskFlush`, `DiskTruncate`,
`DiskCheckpoint`, carried out in order). `impl.protocol.effects.apply_effects` is the one loop
that carries them out for both drivers. A core never performs I/O.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields

from vocab.actions import ActionName
from vocab.outcomes import Code, KafkaError, Outcome

NO_LEADER = -1
UNKNOWN = -1

# Kafka error codes used on the wire (StrEnum members encode as their names); the ones a
# trace line can carry as its outcome are `vocab.outcomes.KafkaError`.
NONE = "NONE"
NOT_LEADER_OR_FOLLOWER = KafkaError.NOT_LEADER_OR_FOLLOWER
FENCED_LEADER_EPOCH = KafkaError.FENCED_LEADER_EPOCH
UNKNOWN_LEADER_EPOCH = KafkaError.UNKNOWN_LEADER_EPOCH
NOT_ENOUGH_REPLICAS = KafkaError.NOT_ENOUGH_REPLICAS
NOT_ENOUGH_REPLICAS_AFTER_APPEND = KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND
OFFSET_OUT_OF_RANGE = KafkaError.OFFSET_OUT_OF_RANGE
REQUEST_TIMED_OUT = KafkaError.REQUEST_TIMED_OUT
INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
STALE_BROKER_EPOCH = "STALE_BROKER_EPOCH"
INVALID_REQUEST = "INVALID_REQUEST"


@dataclass(frozen=True, slots=True)
class Message:
    def to_wire(self) -> dict:
        body = asdict(self)
        body["type"] = type(self).__name__
        return body


# Broker <-> metadata store -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterBroker(Message):
    """A broker asks for a session. `restarted`: first registration since the process began;
    `incarnation` names the process, so a retried request is not taken for a new process."""

    broker: int
    restarted: bool
    incarnation: int = 0


@dataclass(frozen=True, slots=True)
class RegisterBrokerResponse(Message):
    broker: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class Heartbeat(Message):
    broker: int
    broker_epoch: int


@dataclass(frozen=True, slots=True)
class HeartbeatResponse(Message):
    """`registered` False: the session expired; the broker must register again."""

    broker: int
    registered: bool


@dataclass(frozen=True, slots=True)
class LeaderAndIsr(Message):
    """`broker_epoch`: the recipient's session it was sent to (KIP-380): a restarted process
    ignores requests meant for its previous life."""

    partition: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    broker_epoch: int = 0


@dataclass(frozen=True, slots=True)
class AlterIsr(Message):
    """Leader -> store: compare-and-set of the ISR on (leader epoch, partition epoch).

    `request_id` makes a retry idempotent: the store answers a request it already committed
    with the state it committed."""

    request_id: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    follower: int
    follower_broker_epoch: int
    expand: bool


@dataclass(frozen=True, slots=True)
class AlterIsrResponse(Message):
    request_id: str
    partition: int
    error: str
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class MetadataRequest(Message):
    partition: int


@dataclass(frozen=True, slots=True)
class MetadataResponse(Message):
    partition: int
    leader: int
    leader_epoch: int


# Replication ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Fetch(Message):
    """`seq` numbers a follower's requests for one partition; the answer carries it back (as
    Kafka's correlation id), so an answer to a request given up on is told apart."""

    partition: int
    follower: int
    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    broker_epoch: int
    seq: int = 0


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpoch(Message):
    partition: int
    follower: int
    epoch: int
    current_leader_epoch: int
    seq: int = 0  # as Fetch.seq


@dataclass(frozen=True, slots=True)
class FetchResponse(Message):
    """`kind`: records | epoch | diverging | error (as in the spec's vocabulary)."""

    partition: int
    leader: int
    leader_epoch: int
    kind: str
    records: tuple[tuple[int, int, bytes], ...] = ()  # (epoch, value, payload)
    high_watermark: int = 0
    fetch_offset: int = UNKNOWN
    epoch: int = UNKNOWN
    end_offset: int = UNKNOWN
    error: str = NONE
    seq: int = 0  # the request's (Fetch.seq)

    def to_wire(self) -> dict:
        body = Message.to_wire(self)
        body["records"] = [[e, v, p.hex()] for e, v, p in self.records]
        return body


# Clients -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Produce(Message):
    """One batch: `values[i]` with `payloads[i]`; acks in "0" | "1" | "all"."""

    partition: int
    values: tuple[int, ...]
    payloads: tuple[bytes, ...]
    acks: str

    def to_wire(self) -> dict:
        body = Message.to_wire(self)
        body["payloads"] = [p.hex() for p in self.payloads]
        return body


@dataclass(frozen=True, slots=True)
class ProduceResponse(Message):
    """Per record of the batch: (value, offset, error)."""

    partition: int
    results: tuple[tuple[int, int, str], ...]


@dataclass(frozen=True, slots=True)
class ConsumerFetch(Message):
    partition: int
    offset: int
    # The answer's size cap: payload bytes plus RECORD_OVERHEAD per record, the first record
    # served whatever its size (as Kafka's fetch.max.bytes, KIP-74); -1: up to the HW.
    max_bytes: int = -1


RECORD_OVERHEAD = 24  # bytes a record costs in a fetch answer beyond its payload, about


@dataclass(frozen=True, slots=True)
class ConsumerFetchResponse(Message):
    partition: int
    error: str
    records: tuple[tuple[int, int], ...] = ()  # (offset, value)
    high_watermark: int = 0
    offset: int = -1  # the fetch offset it answers: a consumer drops an answer to an old fetch


MESSAGE_TYPES: dict[str, type[Message]] = {
    t.__name__: t
    for t in (
        RegisterBroker, RegisterBrokerResponse, Heartbeat, HeartbeatResponse, LeaderAndIsr,
        AlterIsr, AlterIsrResponse, MetadataRequest, MetadataResponse, Fetch,
        OffsetsForLeaderEpoch, FetchResponse, Produce, ProduceResponse, ConsumerFetch,
        ConsumerFetchResponse,
    )
}


class WireError(ValueError):
    """Bytes from the network that do not decode to a message. One line, names the field."""


def from_wire(body: object) -> Message:
    """Decode a dict from the network, validating every field's type (never trusting it)."""
    if not isinstance(body, dict):
        raise WireError("message is not a JSON object")
    name = body.get("type")
    cls = MESSAGE_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise WireError(f"unknown message type {name!r}")
    values = {}
    for f in fields(cls):
        if f.name not in body:
            if f.default is not MISSING or f.default_factory is not MISSING:
                continue
            raise WireError(f"{cls.__name__}: missing field {f.name!r}")
        values[f.name] = _decode(cls.__name__, f.name, f.type, body[f.name])
    try:
        message = cls(**values)
    except TypeError as error:
        raise WireError(f"{cls.__name__}: {error}") from None
    return validate(message)


def validate(message: Message) -> Message:
    """`message` if its fields are in range and fit together (see `_SHAPES`); WireError."""
    cls = type(message)
    for f in fields(cls):
        value = getattr(message, f.name)
        if type(value) is int and not MIN_INT <= value <= MAX_INT:
            raise WireError(f"{cls.__name__}.{f.name}: {value} is out of range")
        if type(value) is str and len(value) > MAX_STRING:
            raise WireError(f"{cls.__name__}.{f.name}: string longer than {MAX_STRING}")
    check = _SHAPES.get(cls)
    problem = check(message) if check is not None else None
    if problem:
        raise WireError(f"{cls.__name__}: {problem}")
    return message


# Types say what a field holds; these say how fields fit together, so that no handler ever
# indexes past a list or reads a value the sender could not have meant.
MIN_INT = -1
MAX_INT = (1 << 62) - 1
MAX_STRING = 256
ACKS = ("0", "1", "all")
FETCH_KINDS = ("records", "epoch", "diverging", "error")


def _replica_set(brokers: tuple[int, ...]) -> bool:
    return all(b >= 0 for b in brokers) and len(set(brokers)) == len(brokers)


def _produce(m: Produce) -> str | None:
    if m.acks not in ACKS:
        return f"acks must be one of {', '.join(ACKS)}"
    if not m.values:
        return "a batch needs at least one record"
    if len(m.values) != len(m.payloads):
        return f"{len(m.values)} values but {len(m.payloads)} payloads"
    return None


def _produce_response(m: ProduceResponse) -> str | None:
    if not m.results:
        return "no results"
    return None


def _fetch_response(m: FetchResponse) -> str | None:
    if m.kind not in FETCH_KINDS:
        return f"kind must be one of {', '.join(FETCH_KINDS)}"
    if any(e < 0 or v < 0 for e, v, _ in m.records):
        return "a record's epoch and value must be non-negative"
    return None


def _consumer_fetch_response(m: ConsumerFetchResponse) -> str | None:
    offsets = [o for o, _ in m.records]
    if any(o < 0 for o in offsets) or offsets != sorted(set(offsets)):
        return "record offsets must be non-negative and increasing"
    return None


_SHAPES = {
    Produce: _produce,
    ProduceResponse: _produce_response,
    FetchResponse: _fetch_response,
    ConsumerFetchResponse: _consumer_fetch_response,
    LeaderAndIsr: lambda m: None if _replica_set(m.isr) else "isr must name distinct brokers",
    AlterIsr: lambda m: None if _replica_set(m.isr) else "isr must name distinct brokers",
    AlterIsrResponse: lambda m: None if _replica_set(m.isr) else "isr must name distinct brokers",
}


def _decode(cls: str, name: str, annotation: str, value: object) -> object:
    where = f"{cls}.{name}"
    if annotation == "int":
        if type(value) is not int:
            raise WireError(f"{where}: expected an integer")
        return value
    if annotation == "bool":
        if type(value) is not bool:
            raise WireError(f"{where}: expected a boolean")
        return value
    if annotation == "str":
        if type(value) is not str:
            raise WireError(f"{where}: expected a string")
        return value
    if not isinstance(value, list):
        raise WireError(f"{where}: expected a list")
    try:
        if annotation == "tuple[int, ...]":
            _ints(value)
            return tuple(value)
        if annotation == "tuple[bytes, ...]":
            return tuple(_hex(v) for v in value)
        if annotation.startswith("tuple[tuple[int, int, bytes]"):
            return tuple((_int(e), _int(v), _hex(p)) for e, v, p in map(_triple, value))
        if annotation.startswith("tuple[tuple[int, int, str]"):
            return tuple((_int(v), _int(o), _str(e)) for v, o, e in map(_triple, value))
        if annotation.startswith("tuple[tuple[int, int]"):
            return tuple((_int(o), _int(v)) for o, v in map(_pair, value))
    except (AssertionError, TypeError, ValueError):
        raise WireError(f"{where}: malformed entries") from None
    raise WireError(f"{where}: unsupported field type {annotation}")


def _int(v: object) -> int:
    if type(v) is not int or not MIN_INT <= v <= MAX_INT:
        raise ValueError
    return v


def _ints(values: list) -> None:
    for v in values:
        _int(v)


def _str(v: object) -> str:
    if type(v) is not str or len(v) > MAX_STRING:
        raise ValueError
    return v


def _hex(v: object) -> bytes:
    if type(v) is not str:
        raise ValueError
    return bytes.fromhex(v)


def _triple(v: object) -> list:
    if type(v) is not list or len(v) != 3:
        raise ValueError
    return v


def _pair(v: object) -> list:
    if type(v) is not list or len(v) != 2:
        raise ValueError
    return v


# Effects -------------------------------------------------------------------------------------


@dataclass(slots=True)
class Transition:
    """One protocol transition, to be written as one trace `event` line by the driver.

    `outcome` and `outcome_args` are what it did as data: the code and fields the spec's
    action of the same name returns (`vocab.outcomes`), never English. `sends` are the
    messages this transition sent (the driver assigns their ids)."""

    action: ActionName
    args: dict
    outcome: Code
    outcome_args: dict = field(default_factory=dict)
    state: dict | None = None
    detail: dict | None = None
    recv: str | None = None
    sends: list[tuple[str, Message]] = field(default_factory=list)

    @classmethod
    def of(cls, action: ActionName, args: dict, outcome: Outcome, **rest) -> Transition:
        """A transition whose outcome is given as one `Outcome` (code and fields)."""
        return cls(action, args, outcome.code, dict(outcome.fields), **rest)


@dataclass(frozen=True, slots=True)
class Send:
    """A message not tied to a traced transition (heartbeats, metadata, client requests)."""

    dst: str
    message: Message


@dataclass(frozen=True, slots=True)
class Recall:
    """The fetch (or OffsetsForLeaderEpoch) this node has in flight to `dst` for `partition`
    is no longer wanted: lost if it has not been delivered yet. Kafka closes the fetcher of
    the old leader on a leader change, and with it the connection the request was on."""

    dst: str
    partition: int


@dataclass(frozen=True, slots=True)
class History:
    """A client-visible history line (see docs/traces.md)."""

    body: dict


@dataclass(frozen=True, slots=True)
class DiskAppend:
    partition: int
    start_offset: int
    records: tuple[tuple[int, int, bytes], ...]  # (epoch, value, payload)


@dataclass(frozen=True, slots=True)
class DiskFlush:
    partition: int


@dataclass(frozen=True, slots=True)
class DiskTruncate:
    partition: int
    offset: int


@dataclass(frozen=True, slots=True)
class DiskCheckpoint:
    """Rewrite the partition's leader-epoch checkpoint and HW checkpoint (atomic replace)."""

    partition: int
    epoch_cache: tuple[tuple[int, int], ...]
    high_watermark: int
