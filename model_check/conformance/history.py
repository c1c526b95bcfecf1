"""A Jepsen-style checker over what the clients of one run saw (the `history` trace lines).

Theory of operation. The input is the `history` lines of a run (docs/traces.md), as dicts, from
any number of client files, plus optionally the final committed log of each partition. Nothing
here knows about brokers: the checker reads only what producers and consumers were told, so it
judges the implementation from the outside, independently of trace replay. It imports neither
`impl` nor `spec`.

Order. Lines are grouped by `node`, each node's lines taken in `seq` order, and the nodes merged
by `time_ms` (ties: nodes by name) with `vocab.trace.causal_merge`, as replay and Spark merge
theirs (history lines send no messages, so nothing waits). "Later" below means later in this
order. Across processes in TCP mode it is only as good as the nodes' clocks.

Operations. `f == "send"`: an `invoke` (`value`, `partition`, `acks`) completed by at most one
`ok` (`offset`), `fail` or `info` of the same process and value. An `ok` is an acknowledged
write; acks=0 writes are `ok` at offset -1 and are counted but never judged. `f == "read"`: an
`ok` with `records`, a list of `[offset, value]` pairs; read invokes, fails and infos carry
nothing to check. Other `f` values are ignored.

The final state of a partition, at offset o, is:
- with `final_logs` holding the partition: `final_logs[partition][o]`, or *absent* when o is
  at or beyond the end of that log;
- otherwise, from the reads: the value that the *last* read covering o returned at o, where a
  read covers o when its lowest offset <= o <= its highest offset; *absent* if that read had
  no record at o (a gap). When no read covers o the final state at o is *unknown*.

Anomalies, by kind (`vocab.anomalies` names them as Jepsen's Kafka workload does, and says for
which configurations Kafka allows each):
- `lost-write`: an acknowledged write (acks 1 or all, `ok` with offset o >= 0) whose value is
  not the final state at o (another value there, or absent). A write whose final state is
  unknown is not lost but *unverified* (counted per acks level), so a vacuous check shows.
- `duplicate`: one value at two or more offsets of one partition, among all reads and the
  final logs.
- `nonmonotonic-send`: two acknowledged writes w1, w2 of one producer process to one
  partition, w1 acknowledged before w2 was invoked, and offset(w2) < offset(w1). One anomaly
  per w2, naming the w1 with the highest offset.
- `uncommitted-read`: a read returned (o, v) and the final state at o is known and is not v:
  the consumer saw a record that was later lost. One anomaly per (partition, o, v).
- `inconsistent-offsets`: two values at one offset of one partition, among reads and
  acknowledgements. One anomaly per (partition, offset).
- `poll-skip`: a read of a partition by one consumer process whose lowest offset is above
  the highest offset of that process's previous read of the partition plus one, or that
  leaves out an offset between its own lowest and highest. One anomaly per read.
- `nonmonotonic-poll`: a read whose lowest offset is at or below the highest offset of the
  same process's previous read of the partition (the consumer went back), or whose own
  offsets do not increase. One anomaly per read; its values are the previous read's last
  value and this read's first, so a poll that went back because that last value was lost
  is excused with it.

One fault usually shows as several kinds (a truncated acked write is a `lost-write`, and an
`uncommitted-read` and `inconsistent-offsets` where a consumer saw it); they are separate
questions and each is counted. Each anomaly names its values, offsets and the history lines
involved (for a value seen many times, the first line that showed it at that offset).

Left out: excusing writes that every in-sync replica lost in simultaneous crashes (the spec's
`excused`), which a history cannot see; `fail`ed writes that show up in reads (with
NOT_ENOUGH_REPLICAS_AFTER_APPEND they legitimately can); and reads of values never sent.

A malformed history (an `ok` without an `invoke` of that value in that process, a value
invoked or completed twice, a missing field) raises `HistoryError` naming the line.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from model_check.explore.gcpause import without_gc
from vocab import anomalies as K
from vocab.anomalies import KINDS
from vocab.trace import LineError, causal_merge, check

ACKS_LEVELS = ("0", "1", "all")

_ABSENT = object()  # The final state holds no record at an offset.


class HistoryError(Exception):
    """A history that cannot be checked: unreadable file or malformed lines (one line of text)."""


@dataclass(frozen=True, slots=True)
class Event:
    """One history line an anomaly involves: who, its node's `seq`, and when."""

    process: str
    seq: int
    time_ms: int

    def to_json(self) -> dict[str, Any]:
        """`{"process", "seq", "time_ms"}`."""
        return {"process": self.process, "seq": self.seq, "time_ms": self.time_ms}


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One anomaly: its kind, where (partition, offsets), which values, and the lines involved.

    `offsets` and `values` are ordered as `detail` describes them; `acks` is set for
    `lost-write` and `nonmonotonic-send`.
    """

    kind: str
    partition: int
    offsets: tuple[int, ...]
    values: tuple[Any, ...]
    events: tuple[Event, ...]
    detail: str
    acks: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The anomaly as a JSON object (the `details` entries of `HistoryResult.to_json`)."""
        out: dict[str, Any] = {
            "kind": self.kind,
            "partition": self.partition,
            "offsets": list(self.offsets),
            "values": list(self.values),
            "events": [e.to_json() for e in self.events],
            "detail": self.detail,
        }
        if self.acks is not None:
            out["acks"] = self.acks
        return out


@dataclass(frozen=True, slots=True)
class HistoryResult:
    """What `check_history` found. Counts per acks level are keyed "0", "1", "all"."""

    counts: dict[str, int]  # anomalies per kind, every kind present
    anomalies: tuple[Anomaly, ...]
    acked: dict[str, int]  # `ok` sends per acks level
    lost: dict[str, int]  # lost-write anomalies per acks level
    unverified: dict[str, int]  # acked writes whose final state is unknown
    reads: int  # `ok` reads

    @property
    def clean(self) -> bool:
        """True when no anomaly of any kind was found."""
        return not self.anomalies

    def to_json(self) -> dict[str, Any]:
        """`anomalies` as `{kind: count}`, `details` as a list, plus the write and read counts."""
        return {
            "anomalies": dict(self.counts),
            "details": [a.to_json() for a in self.anomalies],
            "acked": dict(self.acked),
            "lost": dict(self.lost),
            "unverified": dict(self.unverified),
            "reads": self.reads,
        }


class History(list):
    """The `history` lines `load_history` read, remembering each line's file and line number."""

    def __init__(self) -> None:
        super().__init__()
        self._line_numbers: list[int] = []
        self._file_starts: list[int] = []
        self._files: list[str] = []

    def origin(self, index: int) -> str:
        """`"path:line"` of the `index`-th history line."""
        f = bisect.bisect_right(self._file_starts, index) - 1
        return f"{self._files[f]}:{self._line_numbers[index]}"


def load_history(paths: Iterable[str | Path]) -> History:
    """The `kind == "history"` lines of NDJSON trace files (a directory means its `*.ndjson`).

    Raise `HistoryError` naming file:line for a line that is not a JSON object of a known
    kind, a header of another format, or a history line that does not fit its struct in
    `vocab.trace` (a missing field, a wrong type).
    """
    history = History()
    files: list[Path] = []
    for path in map(Path, paths):
        files.extend(sorted(path.glob("*.ndjson")) if path.is_dir() else [path])
    with without_gc():
        for path in files:
            _load_file(history, path)
    return history


def _load_file(history: History, path: Path) -> None:
    """Append the history lines of one NDJSON file."""
    history._file_starts.append(len(history))
    history._files.append(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise HistoryError(f"{path}: cannot read: {e}") from None
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw:
            continue
        if len(raw) > MAX_LINE_CHARS:
            raise HistoryError(f"{path}:{number}: line over {MAX_LINE_CHARS} characters")
        try:
            line = _decode(raw)
        except RecursionError:
            raise HistoryError(f"{path}:{number}: JSON nested too deeply") from None
        except msgspec.DecodeError as e:
            raise HistoryError(f"{path}:{number}: not JSON: {str(e)[:120]}") from None
        kind = line.get("kind") if isinstance(line, dict) else None
        try:
            # Event lines are the bulk and not read here: only their kind is checked.
            if kind != "event":
                check(line)
        except LineError as e:
            raise HistoryError(f"{path}:{number}: {e}") from None
        if kind == "history":
            history.append(line)
            history._line_numbers.append(number)


_decode = msgspec.json.Decoder().decode
MAX_LINE_CHARS = 1 << 20


def _acks_level(acks: Any) -> str:
    """Kafka's acks spelled as in config files: "0", "1" or "all" (-1 means all)."""
    text = str(acks)
    return "all" if text == "-1" else text


class _Write:
    """A send from its invoke: what it was, how it ended, and the highest earlier ack."""

    __slots__ = ("process", "partition", "acks", "invoke", "done", "offset", "ok", "before")

    def __init__(self, process, partition, acks, invoke, before):
        self.process = process
        self.partition = partition
        self.acks = acks
        self.invoke = invoke  # line index of the invoke
        self.done = False
        self.offset = -1
        self.ok = None  # line index of the ok
        self.before = before  # (offset, value, ok index) acked by this process before invoke


def _merged_order(lines: Sequence[dict]) -> list[int]:
    """Indices of the history lines: each node's in `seq` order, nodes merged by `time_ms`."""
    by_node: dict[str, list[tuple[int, int, int]]] = {}
    for i, line in enumerate(lines):
        if line.get("kind", "history") == "history":
            node = str(line.get("node", line.get("process")))
            by_node.setdefault(node, []).append((line["seq"], line["time_ms"], i))
    for stream in by_node.values():
        stream.sort()
    merged = causal_merge(by_node, _no_sends, _no_receive, _time_of)
    return [i for _, _, i in merged]


def _no_sends(_: tuple) -> tuple:
    return ()


def _no_receive(_: tuple) -> None:
    return None


def _time_of(entry: tuple[int, int, int]) -> int:
    return entry[1]


def check_history(
    lines: Sequence[dict], final_logs: Mapping[int, Sequence[Any]] | None = None
) -> HistoryResult:
    """Check one run's history lines (dicts) for the anomalies in `KINDS`; see the module doc.

    `final_logs` maps a partition to its final committed log, a sequence of values with offset =
    index; partitions it does not hold take their final state from the reads. Lines of other
    kinds are skipped. Raise `HistoryError` for a malformed history.
    """
    with without_gc():
        return _check(lines, final_logs or {})


def _check(lines: Sequence[dict], final_logs: Mapping[int, Sequence[Any]]) -> HistoryResult:
    checker = _Checker(lines, final_logs)
    try:
        order = _merged_order(lines)
    except KeyError as e:
        bad = next(i for i, line in enumerate(lines)
                   if line.get("kind", "history") == "history"
                   and not {"seq", "time_ms"} <= line.keys())
        raise HistoryError(f"{checker.where(bad)}: missing field {e}") from None
    except TypeError as e:
        raise HistoryError(f"history lines: `seq` and `time_ms` must be integers ({e})") \
            from None
    send, read = checker.send, checker.read
    for i in order:
        line = lines[i]
        try:
            f = line["f"]
            if f == "send":
                send(i, line)
            elif f == "read" and line["type"] == "ok":
                read(i, line)
        except KeyError as e:
            raise HistoryError(f"{checker.where(i)}: missing field {e}") from None
        except (TypeError, ValueError) as e:
            raise HistoryError(f"{checker.where(i)}: malformed line ({e})") from None
    return checker.result()


class _Checker:
    """The single pass over the merged history, then the anomaly collection."""

    def __init__(self, lines: Sequence[dict], final_logs: Mapping[int, Sequence[Any]]):
        self.lines = lines
        self.final_logs = {int(p): log for p, log in final_logs.items()}
        self.writes: dict[Any, _Write] = {}
        self.acked = dict.fromkeys(ACKS_LEVELS, 0)
        self.reads = 0
        # (process, partition) -> (offset, value, ok index) of its highest acknowledged write.
        self.highest: dict[tuple[str, int], tuple[int, Any, int]] = {}
        self.reordered: list[Anomaly] = []
        self.polls: list[Anomaly] = []  # poll-skip and nonmonotonic-poll, found as reads come
        # (process, partition) -> (highest offset, its value, read index) of the previous read.
        self.previous_read: dict[tuple[str, int], tuple[int, Any, int]] = {}
        # partition -> offset -> [(value, ok index)] of acknowledged writes.
        self.acks_at: dict[int, dict[int, list[tuple[Any, int]]]] = {}
        # partition -> offset -> (value, read index) of the first read that returned it, and
        # (partition, offset) -> {other value: first read index}.
        self.read_first: dict[int, dict[int, tuple[Any, int]]] = {}
        self.read_more: dict[tuple[int, int], dict[Any, int]] = {}
        # partition -> offset -> (value or _ABSENT, read index) from the last covering read.
        self.last_read: dict[int, dict[int, tuple[Any, int]]] = {}
        # partition -> value -> (offset, index or None) where it was first seen, and
        # (partition, value) -> {other offset: first index or None (final log)}.
        self.seen_at: dict[int, dict[Any, tuple[int, int | None]]] = {}
        self.more_offsets: dict[tuple[int, Any], dict[int, int | None]] = {}
        self.unverified = dict.fromkeys(ACKS_LEVELS[1:], 0)

    def where(self, i: int) -> str:
        """The line for error messages: file:line when known, and always node and seq."""
        line = self.lines[i]
        who = f"{line.get('node', line.get('process', '?'))} seq {line.get('seq', '?')}"
        if isinstance(self.lines, History):
            return f"{self.lines.origin(i)} ({who})"
        return f"history line {i} ({who})"

    def event(self, i: int) -> Event:
        line = self.lines[i]
        return Event(line.get("process", line.get("node")), line["seq"], line["time_ms"])

    def send(self, i: int, line: dict) -> None:
        kind, value, process = line["type"], line["value"], line["process"]
        partition = line["partition"]
        if kind == "invoke":
            if value in self.writes:
                raise HistoryError(f"{self.where(i)}: value {value!r} invoked twice "
                                   f"(values are unique per run)")
            before = self.highest.get((process, partition))
            self.writes[value] = _Write(process, partition, _acks_level(line["acks"]), i, before)
            return
        w = self.writes.get(value)
        if w is None or w.process != process:
            raise HistoryError(f"{self.where(i)}: {kind} of send {value!r} without an earlier "
                               f"invoke by {process}")
        if w.done:
            raise HistoryError(f"{self.where(i)}: send {value!r} completed twice")
        if partition != w.partition:
            raise HistoryError(f"{self.where(i)}: send {value!r} completed on partition "
                               f"{partition}, invoked on {w.partition}")
        w.done = True
        if kind != "ok":
            return
        w.acks = _acks_level(line.get("acks", w.acks))
        offset = line["offset"]
        if not isinstance(offset, int):
            raise HistoryError(f"{self.where(i)}: offset {offset!r} is not an integer")
        self.acked[w.acks] = self.acked.get(w.acks, 0) + 1
        if w.acks == "0":
            return
        if offset < 0:
            raise HistoryError(f"{self.where(i)}: acks={w.acks} send {value!r} acknowledged "
                               f"at offset {offset}")
        w.offset, w.ok = offset, i
        self.acks_at.setdefault(partition, {}).setdefault(offset, []).append((value, i))
        if w.before is not None and offset < w.before[0]:
            o1, v1, ok1 = w.before
            self.reordered.append(Anomaly(
                K.NONMONOTONIC_SEND, partition, (o1, offset), (v1, value),
                (self.event(ok1), self.event(w.invoke), self.event(i)),
                f"p{partition}: {process} had {v1!r} acknowledged at offset {o1} before it "
                f"sent {value!r}, which was acknowledged at the lower offset {offset}",
                w.acks))
        key = (process, partition)
        high = self.highest.get(key)
        if high is None or offset > high[0]:
            self.highest[key] = (offset, value, i)

    def read(self, i: int, line: dict) -> None:
        partition, records = line["partition"], line["records"]
        self.reads += 1
        if not records:
            return
        self.poll_order(i, line["process"], partition, records)
        first = self.read_first.setdefault(partition, {})
        last = self.last_read.setdefault(partition, {})
        seen = self.seen_at.setdefault(partition, {})
        low = high = records[0][0]
        more_values, more_offsets = self.read_more, self.more_offsets
        for offset, value in records:
            if offset < low:
                low = offset
            elif offset > high:
                high = offset
            seen_here = (value, i)
            had = first.setdefault(offset, seen_here)
            if had[0] != value:
                more_values.setdefault((partition, offset), {}).setdefault(value, i)
            last[offset] = seen_here
            at = seen.setdefault(value, (offset, i))
            if at[0] != offset:
                more_offsets.setdefault((partition, value), {}).setdefault(offset, i)
        if high - low + 1 != len(records):
            returned = {offset for offset, _ in records}
            for offset in range(low, high + 1):
                if offset not in returned:
                    last[offset] = (_ABSENT, i)

    def poll_order(self, i: int, process: str, partition: int, records: list) -> None:
        """poll-skip and nonmonotonic-poll of one read against the process's previous one."""
        offsets = [offset for offset, _ in records]
        low, high = offsets[0], offsets[-1]
        before = self.previous_read.get((process, partition))
        self.previous_read[(process, partition)] = (high, records[-1][1], i)
        p = f"p{partition}: {process} (seq {self.lines[i]['seq']})"
        back = any(b <= a for a, b in zip(offsets, offsets[1:], strict=False))

        def against_previous(kind: str, skipping: str, reached: str) -> Anomaly:
            e = self.event(before[2])
            return Anomaly(kind, partition, (before[0], low), (before[1], records[0][1]),
                           (e, self.event(i)), f"{p} read from offset {low}{skipping} after "
                           f"its previous read ({e.process} seq {e.seq}) {reached} {before[0]}")

        def inside(kind: str, where: tuple[int, ...], text: str) -> Anomaly:
            return Anomaly(kind, partition, where, (), (self.event(i),), f"{p} read {text}")

        if before is not None and low <= before[0]:
            self.polls.append(against_previous(K.NONMONOTONIC_POLL, "", "had reached offset"))
        elif back:
            self.polls.append(inside(K.NONMONOTONIC_POLL, tuple(offsets),
                                     f"offsets that do not increase: {offsets}"))
        if before is not None and low > before[0] + 1:
            self.polls.append(against_previous(
                K.POLL_SKIP, f", skipping offsets {before[0] + 1}..{low - 1}", "ended at"))
        elif not back and high - low + 1 != len(offsets):
            missing = sorted(set(range(low, high + 1)) - set(offsets))
            self.polls.append(inside(K.POLL_SKIP, tuple(missing),
                                     f"offsets {low}..{high} without {missing[:5]}"))

    def final(self, partition: int, offset: int) -> tuple[Any, int | None] | None:
        """(value or _ABSENT, index of the read that showed it or None), or None if unknown."""
        log = self.final_logs.get(partition)
        if log is not None:
            return (log[offset] if 0 <= offset < len(log) else _ABSENT), None
        return self.last_read.get(partition, {}).get(offset)

    def final_text(self, partition: int, offset: int, final: tuple[Any, int | None]) -> str:
        value, i = final
        have = "nothing" if value is _ABSENT else repr(value)
        if i is None:
            return f"the final log has {have} there"
        e = self.event(i)
        return f"the last read covering it ({e.process} seq {e.seq}) has {have} there"

    def result(self) -> HistoryResult:
        for partition, log in self.final_logs.items():
            seen = self.seen_at.setdefault(partition, {})
            for offset, value in enumerate(log):
                at = seen.get(value)
                if at is None:
                    seen[value] = (offset, None)
                elif at[0] != offset:
                    self.more_offsets.setdefault((partition, value), {}).setdefault(offset, None)
        anomalies = [
            *self.lost_writes(),
            *self.duplicates(),
            *self.reordered,
            *self.uncommitted_reads(),
            *self.inconsistent_offsets(),
            *self.polls,
        ]
        rank = {kind: n for n, kind in enumerate(KINDS)}
        anomalies.sort(key=lambda a: (rank[a.kind], a.partition, a.offsets, repr(a.values)))
        counts = dict.fromkeys(KINDS, 0)
        lost = dict.fromkeys(ACKS_LEVELS[1:], 0)
        for a in anomalies:
            counts[a.kind] += 1
            if a.kind == K.LOST_WRITE:
                lost[a.acks] = lost.get(a.acks, 0) + 1
        return HistoryResult(counts, tuple(anomalies), self.acked, lost, self.unverified,
                             self.reads)

    def lost_writes(self) -> Iterable[Anomaly]:
        for value, w in self.writes.items():
            if w.ok is None:
                continue
            final = self.final(w.partition, w.offset)
            if final is None:
                self.unverified[w.acks] = self.unverified.get(w.acks, 0) + 1
                continue
            if final[0] == value:
                continue
            events = [self.event(w.invoke), self.event(w.ok)]
            if final[1] is not None:
                events.append(self.event(final[1]))
            values = (value,) if final[0] is _ABSENT else (value, final[0])
            yield Anomaly(
                K.LOST_WRITE, w.partition, (w.offset,), values, tuple(events),
                f"p{w.partition}: acks={w.acks} write {value!r} acknowledged at offset "
                f"{w.offset} is lost: {self.final_text(w.partition, w.offset, final)}",
                w.acks)

    def duplicates(self) -> Iterable[Anomaly]:
        for (partition, value), more in self.more_offsets.items():
            first = self.seen_at[partition][value]
            places = sorted([first, *more.items()], key=lambda place: place[0])
            events = tuple(self.event(i) for _, i in places if i is not None)
            offsets = tuple(offset for offset, _ in places)
            yield Anomaly(
                K.DUPLICATE, partition, offsets, (value,), events,
                f"p{partition}: value {value!r} is at offsets "
                f"{', '.join(map(str, offsets))}")

    def uncommitted_reads(self) -> Iterable[Anomaly]:
        for partition, first in self.read_first.items():
            for offset, (value, i) in first.items():
                more = self.read_more.get((partition, offset), {})
                final = self.final(partition, offset)
                if final is None:
                    continue
                for v, j in [(value, i), *more.items()]:
                    if v == final[0]:
                        continue
                    events = [self.event(j)]
                    if final[1] is not None:
                        events.append(self.event(final[1]))
                    values = (v,) if final[0] is _ABSENT else (v, final[0])
                    e = events[0]
                    yield Anomaly(
                        K.UNCOMMITTED_READ, partition, (offset,), values, tuple(events),
                        f"p{partition}: {e.process} (seq {e.seq}) read {v!r} at offset "
                        f"{offset}, later lost: {self.final_text(partition, offset, final)}")

    def inconsistent_offsets(self) -> Iterable[Anomaly]:
        places = set(self.read_more)
        for partition, by_offset in self.acks_at.items():
            for offset, acks in by_offset.items():
                read = self.read_first.get(partition, {}).get(offset)
                if len(acks) > 1 or (read is not None and read[0] != acks[0][0]):
                    places.add((partition, offset))
        for partition, offset in places:
            values: dict[Any, int] = {}
            read = self.read_first.get(partition, {}).get(offset)
            if read is not None:
                values[read[0]] = read[1]
            for v, j in self.read_more.get((partition, offset), {}).items():
                values.setdefault(v, j)
            for v, j in self.acks_at.get(partition, {}).get(offset, []):
                if v not in values or self._when(j) < self._when(values[v]):
                    values[v] = j
            if len(values) < 2:
                continue
            ordered = sorted(values.items(), key=lambda item: self._when(item[1]))
            events = tuple(self.event(j) for _, j in ordered)
            said = "; ".join(f"{self.event(j).process} seq {self.event(j).seq} "
                             f"{'acked' if self.lines[j]['f'] == 'send' else 'read'} {v!r}"
                             for v, j in ordered)
            yield Anomaly(
                K.INCONSISTENT_OFFSETS, partition, (offset,), tuple(v for v, _ in ordered),
                events, f"p{partition}: {len(ordered)} values at offset {offset}: {said}")

    def _when(self, i: int) -> tuple[int, str, int]:
        line = self.lines[i]
        return line["time_ms"], str(line.get("node", line.get("process"))), line["seq"]
