"""The trace format: its name, its line schema, the message-id codec and the causal merge.

Every writer (impl/trace.py) and reader (model_check.conformance.replay, model_check.conformance.history, the Spark
harness) takes from here the format's name, the fields and types of each kind of line, the
spelling of message ids and the order in which one run's per-node lines are merged, so the two
sides cannot drift apart. docs/traces.md describes the format for people; a test checks its
field tables against the structs below, and the Spark schema is generated from them.

A line is a JSON object whose `kind` says which struct it is (`HeaderLine`, `EventLine`,
`HistoryLine`, `NemesisLine`). Readers keep the parsed object as a dict and use `check` to
validate it: `check` raises `LineError` whose text is one line saying what is wrong (the
reader prefixes `FILE:LINE: `). An event line's structs omit their defaults when encoded, so
one re-encoded has the keys of its text (replay counts them to find a key given twice).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import chain, repeat
from typing import Any, Literal, TypeVar

import msgspec

FORMAT = "isrlab-trace/2"

# Message ids ----------------------------------------------------------------------------------

# A message id: the sending node's name, a colon, the letter m and the node's message count.
_MESSAGE_ID_BODY = r"([^:\s]+):m(0|[1-9][0-9]*)"
MESSAGE_ID_PATTERN = f"^{_MESSAGE_ID_BODY}$"  # for regex engines elsewhere (Spark's rlike)
_MESSAGE_ID = re.compile(_MESSAGE_ID_BODY)


def message_id(node: str, k: int) -> str:
    """The id of the k-th message `node` sent: `b0:m7`."""
    if not node or ":" in node or any(c.isspace() for c in node):
        raise ValueError(f"node name {node!r} cannot be part of a message id")
    if type(k) is not int or k < 0:
        raise ValueError(f"message number {k!r} is not a non-negative integer")
    return f"{node}:m{k}"


def parse_message_id(text: object) -> tuple[str, int]:
    """(node, k) of a message id `<node>:m<k>`; ValueError on anything else."""
    match = _MESSAGE_ID.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"bad message id {text!r} (expected <node>:m<k>)")
    return match.group(1), int(match.group(2))


# The line schema --------------------------------------------------------------------------------

# Outcome codes are UPPER_SNAKE (vocab.outcomes.Code); action names CamelCase (vocab.actions).
# Matched by `check_struct`, once per distinct name, not by a `msgspec.Meta` pattern: msgspec
# runs the regex on every line, and a trace repeats a few dozen names. Whole-string matches
# (`fullmatch` here, `\z` in Spark): a `$` would also pass a name ending in a newline.
CODE_PATTERN = r"^[A-Z][A-Z0-9_]*$"
ACTION_PATTERN = r"^[A-Z][A-Za-z]*$"
EVENT_PATTERNS = {"action": ACTION_PATTERN, "outcome": CODE_PATTERN}  # EventLine's strings
_NAME_CHECKS = tuple((name, re.compile(pattern), set()) for name, pattern in EVENT_PATTERNS.items())
_SEEN = {name: seen for name, _, seen in _NAME_CHECKS}
_SEEN_ACTIONS, _SEEN_CODES = _SEEN["action"], _SEEN["outcome"]
# Names remembered well formed, per field: a hostile trace has no end of them.
_NAMES_KEPT, _NAME_KEPT_CHARS = 1024, 64
# Free-form objects (an outcome's fields, implementation detail): Spark keeps their JSON text.
Object = dict[str, Any]


class HeaderConfig(msgspec.Struct, kw_only=True):
    """The run's configuration, the same object in every file of a run. Further keys (the
    reference broker's timing settings) are allowed and ignored by the readers."""

    acks: str
    brokers: int
    partitions: int
    replication_factor: int | None = None
    variant: str
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    eligible_leader_replicas_enable: bool = False
    last_known_leader_election_enable: bool = True
    log_flush_interval_messages: int | None = None
    replica_lag_time_max_ms: int | None = None
    duration_ms: int | None = None
    nemesis: list[str] | None = None
    faults: list[str] | None = None  # kinds of a fixed fault schedule
    bugs: list[str] | None = None


class HeaderLine(msgspec.Struct, tag="header", tag_field="kind", kw_only=True):
    """The first line of every file."""

    format: str
    node: str
    run: str
    seed: int
    mode: str
    commit: str
    config: HeaderConfig


class Args(msgspec.Struct, kw_only=True, forbid_unknown_fields=True,
           omit_defaults=True):
    """A spec action's arguments (absent where the action has no such argument)."""

    partition: int | None = None
    broker: int | None = None
    follower: int | None = None
    value: int | None = None
    offset: int | None = None
    leader_epoch: int | None = None
    partition_epoch: int | None = None


class PartitionState(msgspec.Struct, kw_only=True, forbid_unknown_fields=True,
                     omit_defaults=True):
    """One partition as the metadata store holds it."""

    partition: int
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int
    # KIP-966, present when eligible.leader.replicas.enable is on.
    elr: list[int] | None = None
    last_known_elr: list[int] | None = None


class ReplicaState(msgspec.Struct, kw_only=True, forbid_unknown_fields=True,
                   omit_defaults=True):
    """One replica as a broker holds it."""

    partition: int
    broker: int
    log_end_offset: int
    high_watermark: int
    flushed_offset: int
    last: list[int] | None
    epoch_cache: list[list[int]]
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int


class State(msgspec.Struct, kw_only=True, forbid_unknown_fields=True,
            omit_defaults=True):
    """An event's post-state: a replica's fields; or the metadata store's changed partitions
    and broker sessions; or, for a crash, what recovery kept of each replica."""

    partition: int | None = None
    broker: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None
    flushed_offset: int | None = None
    last: list[int] | None = None
    epoch_cache: list[list[int]] | None = None
    leader: int | None = None
    leader_epoch: int | None = None
    isr: list[int] | None = None
    partition_epoch: int | None = None
    partitions: list[PartitionState] | None = None
    registered: list[int] | None = None
    replicas: list[ReplicaState] | None = None


class EventLine(msgspec.Struct, tag="event", tag_field="kind", kw_only=True,
                forbid_unknown_fields=True, omit_defaults=True):
    """One protocol transition on one node."""

    node: str
    seq: int
    time_ms: int
    action: str  # ACTION_PATTERN
    args: Args
    outcome: str  # CODE_PATTERN
    outcome_args: Object | None = None
    send: list[str]
    recv: str | None = None
    state: State | None = None
    detail: Object | None = None


class HistoryLine(msgspec.Struct, tag="history", tag_field="kind", kw_only=True,
                  forbid_unknown_fields=True):
    """What a client was told (Jepsen-style)."""

    node: str
    seq: int
    time_ms: int
    process: str
    type: Literal["invoke", "ok", "fail", "info"]
    f: str
    partition: int | None = None
    value: int | None = None
    offset: int | None = None
    acks: str | None = None
    error: str | None = None
    records: list[list[int]] | None = None


class NemesisLine(msgspec.Struct, tag="nemesis", tag_field="kind", kw_only=True,
                  forbid_unknown_fields=True):
    """A fault the driver injected."""

    node: str
    seq: int
    time_ms: int
    f: str
    target: str | None = None
    groups: list[list[str]] | None = None
    delay_ms: int | None = None


Line = HeaderLine | EventLine | HistoryLine | NemesisLine
LINES: dict[str, type[msgspec.Struct]] = {
    "header": HeaderLine, "event": EventLine, "history": HistoryLine, "nemesis": NemesisLine}


class LineError(ValueError):
    """A line that does not fit the format: `str()` is one line saying what is wrong."""


def check(body: object) -> Line:
    """Validate one parsed line (a dict) against its kind's struct; return the struct.

    Beyond types: a header names this format, and an event's message ids are well formed,
    its sends made by its own node.
    """
    if not isinstance(body, dict):
        raise LineError("not a JSON object")
    kind = body.get("kind")
    cls = LINES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise LineError("no `kind` field" if kind is None else f"unknown line kind {kind!r}")
    try:
        line = msgspec.convert(body, cls)
    except msgspec.ValidationError as error:
        raise LineError(f"{kind} line: {error}") from None
    check_struct(line)
    return line


# Decodes and validates a line's text in one pass (what `check` accepts, less `check_struct`).
decode_line = msgspec.json.Decoder(Line).decode


def check_struct(line: Line) -> None:
    """What types cannot say: a header names this format, and an event's action name and
    outcome code are well formed, its message ids too, and its sends made by its own node."""
    cls = type(line)
    if cls is HeaderLine:
        if line.format != FORMAT:
            raise LineError(f"format {line.format!r}, expected {FORMAT!r}")
    elif cls is EventLine:
        if line.action not in _SEEN_ACTIONS or line.outcome not in _SEEN_CODES:
            _check_names(line)
        node = line.node
        try:
            # The id pattern inline (the trace's hottest check); `parse_message_id` only to
            # raise its error on an id that does not match.
            for mid in line.send:
                match = _MESSAGE_ID.fullmatch(mid)
                if match is None:
                    parse_message_id(mid)
                elif match.group(1) != node:
                    raise ValueError(f"sends {mid!r}, an id of another node than {node}")
            if line.recv is not None and _MESSAGE_ID.fullmatch(line.recv) is None:
                parse_message_id(line.recv)
        except ValueError as error:
            raise LineError(str(error)) from None


def _check_names(line: EventLine) -> None:
    for name, pattern, seen in _NAME_CHECKS:
        text = getattr(line, name)
        if text not in seen:
            if pattern.fullmatch(text) is None:
                shown = repr(text) if len(text) <= 80 else f"{text[:80]!r}... ({len(text):,} chars)"
                raise LineError(f"event line: {name} {shown} does not match "
                                f"{pattern.pattern!r} - at `$.{name}`")
            if len(seen) < _NAMES_KEPT and len(text) <= _NAME_KEPT_CHARS:
                seen.add(text)


# The causal merge ------------------------------------------------------------------------------

T = TypeVar("T")


class CausalCycle(ValueError):
    """No causal order exists: `item` (the earliest stuck line) receives `message`, whose
    sending line can only come after it."""

    def __init__(self, item: Any, message: str):
        super().__init__(f"receives {message!r}, which no causal order sends first "
                         "(a send after its receive)")
        self.item = item
        self.message = message


def causal_merge(streams: Mapping[Hashable, Sequence[T]],
                 sends: Callable[[T], Iterable[str]],
                 recv: Callable[[T], str | None],
                 key: Callable[[T], Any],
                 holds: Callable[[T], Any] | None = None) -> list[T]:
    """One total order of the lines of several nodes.

    `streams` holds each node's lines in its own order (`seq`). The result keeps each node's
    order and puts every line that receives a message after the line that sends it; a receive
    waits only for a message some line of the input sends (untraced messages, such as client
    requests, order nothing). Among the nodes whose next line is ready, the smallest `key`
    goes first (ties: node names in sorted order). Raises `CausalCycle` when lines wait for
    each other.

    A line for which `holds` gives a window (a process's crash: `key` units, None for other
    lines) waits for the receives, keyed at most that window after it, of messages its node
    sent before it; meanwhile only the receiving nodes' lines go, and when none of them can,
    the held line goes. Bytes already sent over TCP reach a peer after their sender died, and
    the order that delivers them first is as causal as the one that does not.
    """
    names = sorted(streams, key=str)
    lists = [streams[name] for name in names]
    # Each line's sends, receive and key, asked once (`map`: the callers pass attribute getters).
    sendl = [list(map(sends, items)) for items in lists]
    recvs = [list(map(recv, items)) for items in lists]
    traced = set(chain.from_iterable(chain.from_iterable(sendl)))
    receives = traced and any(mid in traced for per in recvs for mid in per)
    if not receives:
        # Nothing waits: a k-way merge by key (one sort when every node's keys are in order).
        streams_by_key = [[(key(item), rank, n) for n, item in enumerate(items)]
                          for rank, items in enumerate(lists)]
        if all(all(a[0] <= b[0] for a, b in zip(keyed, keyed[1:], strict=False))
               for keyed in streams_by_key):
            merged = sorted(entry for keyed in streams_by_key for entry in keyed)
        else:
            merged = heapq.merge(*streams_by_key)
        return [lists[rank][n] for _, rank, n in merged]
    keys = [list(map(key, items)) for items in lists]
    sizes = [len(items) for items in lists]
    heads = [0] * len(lists)
    unsent = traced  # from here on, the traced messages not sent yet: a receive of one waits
    waiting: dict[str, list[int]] = {}
    ready: list[tuple[Any, int]] = []
    # What holding a crash needs: each line's window or None; where each message is received
    # (rank, key); and, per node, the messages it sent that are still to be received.
    windows = [list(map(holds, items)) for items in lists] if holds else None
    recv_at: dict[str | None, tuple[int, Any]] = {}
    if holds:
        for rank, (per, ks) in enumerate(zip(recvs, keys, strict=True)):
            recv_at.update(zip(per, zip(repeat(rank), ks, strict=False), strict=True))
        recv_at.pop(None, None)
    unreceived: list[set[str]] = [set() for _ in lists]
    in_flight: dict[str, int] = {}  # those messages -> the rank of their sender
    held: list[int] = []

    def awaited(rank: int) -> list[str]:
        """The messages whose receives the crash line at `rank`'s head waits for."""
        window = windows[rank][heads[rank]] if windows and unreceived[rank] else None
        if window is None:
            return []
        until = keys[rank][heads[rank]] + window
        return [m for m in unreceived[rank] if recv_at[m][1] <= until]

    def must_wait(rank: int) -> bool:
        return bool(awaited(rank))

    def offer(rank: int) -> None:
        i = heads[rank]
        if i < sizes[rank]:
            if recvs[rank][i] in unsent:
                waiting.setdefault(recvs[rank][i], []).append(rank)
            else:
                heappush(ready, (keys[rank][i], rank))

    heappush, heappop, heappushpop = heapq.heappush, heapq.heappop, heapq.heappushpop
    for rank in range(len(lists)):
        offer(rank)
    order: list[T] = []
    append = order.append
    # The line offered last, when it is ready: pushed and popped in one heap operation.
    pending = None
    while ready or held or pending:
        if held:
            if pending:
                heappush(ready, pending)
                pending = None
            # While a crash is held, only the nodes that receive what its node sent go on, up
            # to those receives; when none of them can, the crash goes.
            first = held[0]
            receivers = {recv_at[m][0] for m in awaited(first)}
            mine = [entry for entry in ready if entry[1] in receivers]
            if mine:
                entry = min(mine)
                ready.remove(entry)
                heapq.heapify(ready)
                rank = entry[1]
            else:
                rank = held.pop(0)
            i = heads[rank]
        else:
            if pending:
                _, rank = heappushpop(ready, pending)
                pending = None
            else:
                _, rank = heappop(ready)
            i = heads[rank]
            if windows and windows[rank][i] is not None and must_wait(rank):
                held.append(rank)
                continue
        heads[rank] = i + 1
        append(lists[rank][i])
        mid = recvs[rank][i]
        if mid is not None:
            origin = in_flight.pop(mid, None)
            if origin is not None:
                unreceived[origin].discard(mid)
                if origin in held and not must_wait(origin):
                    held.remove(origin)
                    heappush(ready, (keys[origin][heads[origin]], origin))
        for mid in sendl[rank][i]:
            unsent.discard(mid)
            if mid in recv_at:
                unreceived[rank].add(mid)
                in_flight[mid] = rank
            for other in waiting.pop(mid, ()):
                offer(other)
        # offer(rank), inline: the hottest call of the loop
        i += 1
        if i < sizes[rank]:
            mid = recvs[rank][i]
            if mid in unsent:
                waiting.setdefault(mid, []).append(rank)
            else:
                pending = (keys[rank][i], rank)
    if len(order) < sum(sizes):
        raise _cycle(lists, heads, sends, recv, key)
    return order


def _cycle(lists, heads, sends, recv, key) -> CausalCycle:
    """The stuck receive most likely at fault: the one whose send is furthest behind its
    node's next line (the others typically wait for a message sent just behind a stuck head)."""
    sender: dict[str, tuple[int, int]] = {}
    for rank, items in enumerate(lists):
        for i in range(heads[rank], len(items)):
            for mid in sends(items[i]):
                sender.setdefault(mid, (rank, i))
    stuck = []
    for rank, i in enumerate(heads):
        if i < len(lists[rank]):
            item = lists[rank][i]
            where, at = sender[recv(item)]
            stuck.append((-(at - heads[where]), key(item), rank, item))
    item = min(stuck, key=lambda entry: entry[:3])[3]
    return CausalCycle(item, recv(item))
