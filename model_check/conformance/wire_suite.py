"""A client-level conformance suite: the same raw Kafka requests against any cluster that
speaks Kafka's wire protocol, each answer recorded by name, so that two targets (the reference
broker, `isrlab cluster tcp`, and Apache Kafka, `isrlab cluster kafka`) can be set side by side.

Theory of operation. A `Session` holds one blocking socket per broker and sends requests built
with kio from plain dicts, at the highest version of each API that the suite and every target
serve (ApiVersions first). Each step sends one request and reduces the response to an `Answer`:
the error code by name, plus a few words on the result that do not depend on the target
(`NONE, records from offset 0`, not `NONE, 3 records`), so that two targets that behave alike
answer the same strings; the absolute numbers go to `detail`. Faults come from a small
`control` object: `pause`, `resume` and `kill` of a broker id, and the sets `paused` and
`killed` (`PidControl` signals the pids that each cluster's `kafka.json` lists).

The groups run in this order, each on one partition, with min.insync.replicas equal to the
replication factor (3 of 3) so that one stopped follower is enough to be short:
produce (acks all, 1, 0), fetch (inside the log, at its end, beyond it, from a follower),
list offsets (earliest, latest), follower (a produce to a follower, then Metadata from it),
min-isr (a follower paused until the ISR shrinks, then acks=all), leader-change (the leader
killed, a new leader elected, OffsetForLeaderEpoch for the old epoch), epochs (Fetch and
ListOffsets with a fenced and a future current leader epoch). The epoch group comes after the
leader change because a fresh Kafka partition is at leader epoch 0, so only a leader change
makes an epoch that is stale.

Left out: consumer groups, transactions, idempotence, compression, more than one partition,
and any timing (how long an ISR takes to shrink is waited for, never measured).
"""

from __future__ import annotations

import datetime
import io
import json
import os
import signal
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kio.index import load_request_schema, load_response_schema
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i64

from impl.kafka import batches
from impl.kafka.codec import build
from model_check.conformance.kafka_runs import KafkaRunError, cluster_command, cluster_process, tail

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
API_VERSIONS, OFFSET_FOR_LEADER_EPOCH = 18, 23
# The versions whose request bodies this suite fills (Produce and Fetch v13 name topics by id).
CLIENT_VERSIONS: dict[int, tuple[int, int]] = {
    PRODUCE: (3, 12), FETCH: (4, 12), LIST_OFFSETS: (1, 7), METADATA: (1, 12),
    OFFSET_FOR_LEADER_EPOCH: (2, 4),
}
API_NAMES = {PRODUCE: "Produce", FETCH: "Fetch", LIST_OFFSETS: "ListOffsets",
             METADATA: "Metadata", OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch"}
EARLIEST, LATEST = -2, -1
GROUPS = ("produce", "fetch", "list-offsets", "follower", "min-isr", "leader-change", "epochs")
TARGETS = ("reference", "kafka")
CLIENT_ID = "isrlab-conformance"


class ConformanceError(RuntimeError):
    """The suite could not run (a cluster that does not start, a broker that does not answer):
    one line."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What one step was answered: `answer` is compared between targets, `detail` is not."""

    step: str
    answer: str
    detail: str = ""


# The wire --------------------------------------------------------------------------------------


def error_name(code) -> str:
    number = int(getattr(code, "value", code))
    try:
        return ErrorCode(number).name.upper()
    except ValueError:
        return f"ERROR_{number}"


def _request_bytes(api_key: int, version: int, correlation_id: int, body: dict) -> bytes:
    cls = load_request_schema(api_key, version)
    header_cls = cls.__header_schema__
    out = io.BytesIO()
    out.write(b"\0\0\0\0")
    entity_writer(header_cls)(out, build(header_cls, {
        "request_api_key": api_key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": CLIENT_ID}))
    entity_writer(cls)(out, build(cls, body))
    frame = out.getbuffer()
    struct.pack_into(">i", frame, 0, len(frame) - 4)
    return bytes(frame)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Session:
    """Blocking connections to one cluster's brokers, one request at a time on each."""

    def __init__(self, bootstrap: str, topic: str, timeout_s: float = 15):
        self.topic = topic
        self.timeout_s = timeout_s
        self.bootstrap = [(h, int(p)) for h, p in (a.rsplit(":", 1) for a in bootstrap.split(","))]
        self.addresses: dict[int, tuple[str, int]] = {}
        self.sockets: dict[object, socket.socket] = {}
        self.correlation_id = 0
        self.versions: dict[int, int] = {}

    def close(self) -> None:
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()

    def _socket(self, where) -> socket.socket:
        sock = self.sockets.get(where)
        if sock is None:
            address = self.bootstrap[0] if where == "bootstrap" else self.addresses[where]
            sock = socket.create_connection(address, timeout=self.timeout_s)
            self.sockets[where] = sock
        return sock

    def send(self, where, api_key: int, body: dict, expect_response: bool = True):
        """The decoded response body (None when `expect_response` is false, as for acks=0).
        `where` is a broker id or "bootstrap". A broken connection is dropped and raised."""
        version = self.versions.get(api_key, 3 if api_key == API_VERSIONS else None)
        assert version is not None, f"{API_NAMES[api_key]}: no version agreed yet"
        self.correlation_id += 1
        frame = _request_bytes(api_key, version, self.correlation_id, body)
        sock = self._socket(where)
        try:
            sock.sendall(frame)
            if not expect_response:
                return None
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            payload = _read_exactly(sock, size)
        except OSError:
            self.sockets.pop(where, None)
            sock.close()
            raise
        cls = load_response_schema(api_key, version)
        header_cls = cls.__header_schema__
        if api_key == API_VERSIONS:  # always response header v0 (KIP-511)
            from kio.schema.response_header.v0.header import ResponseHeader as header_cls
        header, used = entity_reader(header_cls)(payload, 0)
        assert header.correlation_id == self.correlation_id, "responses arrive in order"
        body, _ = entity_reader(cls)(payload, used)
        return body

    def api_versions(self) -> dict[int, tuple[int, int]]:
        """What the bootstrap broker serves: API key -> (min, max) version."""
        body = self.send("bootstrap", API_VERSIONS, {"client_software_name": CLIENT_ID,
                                                     "client_software_version": "1"})
        if body.error_code.value:
            raise ConformanceError(f"ApiVersions v3: {error_name(body.error_code)}")
        return {int(k.api_key): (int(k.min_version), int(k.max_version))
                for k in body.api_keys}


def common_versions(*served: dict[int, tuple[int, int]]) -> dict[int, int]:
    """The highest version of each API the suite and every target serve."""
    out = {}
    for api_key, (low, high) in CLIENT_VERSIONS.items():
        for ranges in served:
            if api_key not in ranges:
                raise ConformanceError(f"{API_NAMES[api_key]} is not served by a target")
            low, high = max(low, ranges[api_key][0]), min(high, ranges[api_key][1])
        if low > high:
            raise ConformanceError(f"{API_NAMES[api_key]}: no version every target serves")
        out[api_key] = high
    return out


# Requests ---------------------------------------------------------------------------------------


def _batch(values: list[bytes]) -> bytes:
    """A producer's batch, written by kio."""
    now = datetime.datetime.now(datetime.UTC)
    out = io.BytesIO()
    write_new_batch(out, NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), partition_leader_epoch=i32(-1),
        base_sequence=i32(-1), attributes=i16(0), records=tuple(
            Record(attributes=0, timestamp=now, offset=i64(i), key=None, value=v, headers=())
            for i, v in enumerate(values))))
    return out.getvalue()


@dataclass
class Partition:
    """Partition 0 as one broker's Metadata answer says."""

    error: str
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class Suite:
    """The steps against one cluster (see the module docstring). `answers` grows as they run."""

    session: Session
    control: PidControl  # or any object with its pause, resume, kill, paused and killed
    wait_s: float = 60
    answers: list[Answer] = field(default_factory=list)
    leader: int = -1
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    old_epoch: int | None = None  # the leader epoch before the leader change
    value: int = 0

    def answer(self, step: str, answer: str, detail: str = "") -> None:
        self.answers.append(Answer(step, answer, detail))

    # Requests, each to one broker, for partition 0 of the suite's topic.

    def metadata(self, broker) -> Partition:
        body = self.session.send(broker, METADATA, {
            "topics": [{"topic_id": None, "name": self.session.topic}],
            "allow_auto_topic_creation": False, "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False})
        for b in body.brokers:
            self.session.addresses[int(b.node_id)] = (b.host, int(b.port))
        (topic,) = body.topics
        if topic.error_code.value:
            return Partition(error_name(topic.error_code), -1, -1, (), ())
        (p,) = [p for p in topic.partitions if p.partition_index == 0]
        return Partition(error_name(p.error_code), int(p.leader_id), int(p.leader_epoch),
                         tuple(int(b) for b in p.replica_nodes),
                         tuple(sorted(int(b) for b in p.isr_nodes)))

    def produce(self, broker, acks: int, count: int = 1):
        """(error name, base offset) of a produce of `count` fresh numbers; None for acks=0."""
        values = []
        for _ in range(count):
            self.value += 1
            values.append(str(self.value).encode())
        body = self.session.send(broker, PRODUCE, {
            "transactional_id": None, "acks": acks, "timeout": 5000,
            "topic_data": [{"name": self.session.topic, "partition_data": [
                {"index": 0, "records": _batch(values)}]}]}, expect_response=acks != 0)
        if body is None:
            return None
        (part,) = body.responses[0].partition_responses
        return error_name(part.error_code), int(part.base_offset)

    def fetch(self, broker, offset: int, current_leader_epoch: int = -1, max_wait_ms: int = 100):
        """(error name, high watermark, offsets of the records served)."""
        body = self.session.send(broker, FETCH, {
            "cluster_id": None, "replica_id": -1, "replica_state": {"replica_id": -1,
                                                                    "replica_epoch": -1},
            "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": self.session.topic, "topic_id": uuid.UUID(int=0),
                        "partitions": [{
                            "partition": 0, "current_leader_epoch": current_leader_epoch,
                            "fetch_offset": offset, "last_fetched_epoch": -1,
                            "log_start_offset": -1, "partition_max_bytes": 1 << 20,
                            "replica_directory_id": uuid.UUID(int=0)}]}],
            "forgotten_topics_data": [], "rack_id": ""})
        if body.error_code.value:
            return error_name(body.error_code), -1, []
        part = body.responses[0].partitions[0]
        offsets = []
        try:
            for b in batches.read(part.records or b""):
                offsets += [o for o, _, _ in b.records or ()]
        except batches.BadBatch as error:
            raise ConformanceError(f"b{broker}: unreadable records in a Fetch answer: "
                                   f"{error}") from None
        return error_name(part.error_code), int(part.high_watermark), offsets

    def list_offsets(self, broker, timestamp: int, current_leader_epoch: int = -1):
        """(error name, offset, leader epoch)."""
        body = self.session.send(broker, LIST_OFFSETS, {
            "replica_id": -1, "isolation_level": 0, "topics": [{
                "name": self.session.topic, "partitions": [{
                    "partition_index": 0, "current_leader_epoch": current_leader_epoch,
                    "timestamp": timestamp, "max_num_offsets": 1}]}]})
        part = body.topics[0].partitions[0]
        return error_name(part.error_code), int(part.offset), int(part.leader_epoch)

    def offset_for_leader_epoch(self, broker, epoch: int, current_leader_epoch: int = -1):
        """(error name, leader epoch, end offset)."""
        body = self.session.send(broker, OFFSET_FOR_LEADER_EPOCH, {
            "replica_id": -1, "topics": [{"topic": self.session.topic, "partitions": [{
                "partition": 0, "current_leader_epoch": current_leader_epoch,
                "leader_epoch": epoch}]}]})
        part = body.topics[0].partitions[0]
        return error_name(part.error_code), int(part.leader_epoch), int(part.end_offset)

    # Waiting for the cluster ------------------------------------------------------------------

    def wait_for(self, what: str, ask: Callable[[], object | None]) -> object:
        """`ask()` until it returns something other than None; ConformanceError after
        `wait_s` seconds. A broker that does not answer is asked again."""
        deadline = time.monotonic() + self.wait_s
        while True:
            try:
                got = ask()
            except (OSError, KeyError):
                got = None
            if got is not None:
                return got
            if time.monotonic() > deadline:
                raise ConformanceError(f"{what}: not within {self.wait_s:g} s")
            time.sleep(0.2)

    def live(self) -> list[int]:
        return [b for b in self.replicas
                if b not in self.control.killed and b not in self.control.paused]

    def settle(self) -> None:
        """Wait until every live replica is in the ISR, and learn the leader and its epoch."""
        def full():
            p = self.metadata(self.leader if self.leader >= 0 else "bootstrap")
            if p.leader < 0 or p.error != "NONE":
                return None
            self.replicas = self.replicas or p.replicas
            if p.leader != self.leader and self.leader >= 0:
                self.leader = p.leader  # ask the new leader next time
                return None
            self.leader, self.leader_epoch = p.leader, p.leader_epoch
            return p if set(self.live()) <= set(p.isr) else None
        self.wait_for("a full ISR", full)

    def high_watermark(self) -> int:
        error, offset, _ = self.list_offsets(self.leader, LATEST)
        assert error == "NONE", f"ListOffsets latest: {error}"
        return offset

    def follower(self) -> int:
        return next(b for b in self.live() if b != self.leader)

    # The groups -------------------------------------------------------------------------------

    def group_produce(self) -> None:
        self.settle()
        for acks, name in ((-1, "all"), (1, "1")):
            error, base = self.produce(self.leader, acks)
            self.answer(f"produce acks={name}", error, f"base offset {base}")
        before = self.high_watermark()
        self.produce(self.leader, 0)
        # No response comes to acks=0. A broker that refuses the write closes the connection
        # (so the next request on it fails), and whether the write was made shows in the
        # log end.
        try:
            self.metadata(self.leader)
            connection = "connection kept"
        except OSError:
            connection = "connection closed"
        deadline = time.monotonic() + 3
        after = self.high_watermark()
        while after == before and time.monotonic() < deadline:
            time.sleep(0.1)
            after = self.high_watermark()
        self.answer("produce acks=0", f"no response, {connection}, " + (
            "appended" if after > before else "not appended"), f"latest {before} -> {after}")

    def group_fetch(self) -> None:
        self.settle()
        error, hw, offsets = self.fetch(self.leader, 0)
        self.answer("fetch inside the log", error + (
            ", records from offset 0" if offsets[:1] == [0] else ", no records" if not offsets
            else f", records from offset {offsets[0]}"),
            f"{len(offsets)} records, high watermark {hw}")
        error, hw_end, offsets = self.fetch(self.leader, hw)
        self.answer("fetch at the log end", error + (", no records" if not offsets else
                                                     f", {len(offsets)} records"),
                    f"offset {hw}, high watermark {hw_end}")
        error, _, offsets = self.fetch(self.leader, hw + 1)
        self.answer("fetch beyond the log end", error, f"offset {hw + 1}")
        error, _, offsets = self.fetch(self.follower(), 0)
        self.answer("fetch from a follower", error + (
            ", records from offset 0" if offsets[:1] == [0] else ""),
            f"{len(offsets)} records")

    def group_list_offsets(self) -> None:
        self.settle()
        _, hw, _ = self.fetch(self.leader, 0)
        for timestamp, name in ((EARLIEST, "earliest"), (LATEST, "latest")):
            error, offset, epoch = self.list_offsets(self.leader, timestamp)
            where = ("0" if offset == 0 else "the high watermark" if offset == hw else
                     str(offset))
            epoch_said = ("the leader epoch" if epoch == self.leader_epoch else "-1"
                          if epoch == -1 else "another epoch")
            self.answer(f"list offsets {name}", f"{error}, offset {where}, epoch {epoch_said}",
                        f"offset {offset}, epoch {epoch}; high watermark {hw}, leader epoch "
                        f"{self.leader_epoch}")

    def group_follower(self) -> None:
        self.settle()
        follower = self.follower()
        error, _ = self.produce(follower, -1)
        self.answer("produce to a follower", error, f"b{follower}")
        p = self.metadata(follower)
        self.answer("metadata from that follower", p.error + (
            ", names the leader" if p.leader == self.leader else f", names b{p.leader}"),
            f"leader b{p.leader}, epoch {p.leader_epoch}")

    def group_min_isr(self) -> None:
        self.settle()
        follower = self.follower()
        self.control.pause(follower)
        try:
            self.wait_for(f"the ISR without paused b{follower}", lambda: (
                p if follower not in (p := self.metadata(self.leader)).isr else None))
            error, _ = self.produce(self.leader, -1)
            self.answer("produce acks=all, ISR below min.insync.replicas", error,
                        f"b{follower} paused")
        finally:
            self.control.resume(follower)

    def group_leader_change(self) -> None:
        self.settle()
        old, self.old_epoch = self.leader, self.leader_epoch
        end = self.high_watermark()
        self.control.kill(old)
        others = [b for b in self.replicas if b != old]

        def elected():
            for b in others:
                try:
                    p = self.metadata(b)
                except OSError:
                    continue
                if p.leader not in (-1, old) and p.leader_epoch > self.old_epoch:
                    return p
            return None
        p = self.wait_for(f"a leader other than b{old}", elected)
        self.leader, self.leader_epoch = p.leader, p.leader_epoch
        self.answer("metadata after the leader is killed", f"{p.error}, a new leader, "
                    "a higher epoch", f"b{old} epoch {self.old_epoch} -> b{p.leader} epoch "
                    f"{p.leader_epoch}")
        error, epoch, end_offset = self.wait_for("an answer from the new leader", lambda: (
            a if (a := self.offset_for_leader_epoch(self.leader, self.old_epoch,
                                                    self.leader_epoch))[0]
            != "NOT_LEADER_OR_FOLLOWER" else None))
        said = (f"epoch {'the old' if epoch == self.old_epoch else epoch}, end offset "
                + ("the old log end" if end_offset == end else str(end_offset)))
        self.answer("offset for the old leader epoch", f"{error}, {said}",
                    f"epoch {epoch}, end offset {end_offset}; log end before {end}")
        error, epoch, end_offset = self.offset_for_leader_epoch(self.leader, self.leader_epoch,
                                                                self.leader_epoch)
        hw = self.high_watermark()
        said = (f"epoch {'the current' if epoch == self.leader_epoch else epoch}, end offset "
                + ("the log end" if end_offset == hw else str(end_offset)))
        self.answer("offset for the current leader epoch", f"{error}, {said}",
                    f"epoch {epoch}, end offset {end_offset}; high watermark {hw}")

    def group_epochs(self) -> None:
        if self.old_epoch is None:
            self.settle()
        stale = self.old_epoch if self.old_epoch is not None else self.leader_epoch - 1
        cases = (("fenced", stale), ("current", self.leader_epoch),
                 ("future", self.leader_epoch + 1))
        for name, epoch in cases:
            if epoch < 0:
                self.answer(f"fetch with the {name} leader epoch", "skipped: no such epoch")
                continue
            error, _, offsets = self.fetch(self.leader, 0, current_leader_epoch=epoch)
            self.answer(f"fetch with the {name} leader epoch", error, f"epoch {epoch}")
        for name, epoch in (cases[0], cases[2]):
            if epoch < 0:
                continue
            error, _, _ = self.list_offsets(self.leader, LATEST, current_leader_epoch=epoch)
            self.answer(f"list offsets with the {name} leader epoch", error, f"epoch {epoch}")
        if self.old_epoch is None:
            return
        # After the leader change the first record and the leader are of different epochs.
        for timestamp, name in ((EARLIEST, "earliest"), (LATEST, "latest")):
            error, offset, epoch = self.list_offsets(self.leader, timestamp, self.leader_epoch)
            said = ("the leader epoch" if epoch == self.leader_epoch else "the old epoch"
                    if epoch == self.old_epoch else str(epoch))
            self.answer(f"list offsets {name} after the leader change", f"{error}, epoch {said}",
                        f"offset {offset}, epoch {epoch}")

    def run(self, groups: tuple[str, ...] = GROUPS) -> list[Answer]:
        for group in GROUPS:
            if group in groups:
                getattr(self, "group_" + group.replace("-", "_"))()
        return self.answers


def run_suite(bootstrap: str, topic: str, control, versions: dict[int, int] | None = None,
              groups: tuple[str, ...] = GROUPS, wait_s: float = 60) -> list[Answer]:
    """Every step of `groups` against the cluster at `bootstrap`, in order. `versions` (API key
    -> version) defaults to the highest this target and the suite share."""
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        raise ConformanceError(f"no group {unknown[0]!r} (known: {', '.join(GROUPS)})")
    session = Session(bootstrap, topic)
    try:
        session.versions = versions or common_versions(session.api_versions())
        return Suite(session, control, wait_s).run(groups)
    except OSError as error:
        raise ConformanceError(f"{bootstrap}: {error}") from None
    finally:
        session.close()


# Comparing --------------------------------------------------------------------------------------


def differences(left: list[Answer], right: list[Answer] | dict[str, str]) -> list[tuple]:
    """(step, left answer, right answer) for every step the two answer differently, in the
    left's order; a step only one side ran is answered "(not run)" on the other."""
    want = right if isinstance(right, dict) else {a.step: a.answer for a in right}
    have = {a.step: a.answer for a in left}
    steps = [a.step for a in left] + [s for s in want if s not in have]
    return [(s, have.get(s, "(not run)"), want.get(s, "(not run)")) for s in steps
            if have.get(s) != want.get(s)]


def table(sides: dict[str, list[Answer]]) -> str:
    """A plain-text table: the step, each target's answer, and with two targets same/DIFFERS."""
    have = {name: {a.step: a.answer for a in answers} for name, answers in sides.items()}
    steps = list(dict.fromkeys(a.step for answers in sides.values() for a in answers))
    rows = [("step", *sides, "" if len(sides) == 2 else None)]
    for step in steps:
        said = [have[name].get(step, "(not run)") for name in sides]
        rows.append((step, *said, ("same" if said[0] == said[1] else "DIFFERS")
                     if len(sides) == 2 else None))
    rows = [[c for c in row if c is not None] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
                     for row in rows)


# Clusters ---------------------------------------------------------------------------------------


class PidControl:
    """Faults by signal to the broker pids a cluster's `kafka.json` lists."""

    def __init__(self, pids: dict[int, int]):
        self.pids = pids
        self.paused: set[int] = set()
        self.killed: set[int] = set()

    def _signal(self, broker: int, sig: int) -> None:
        try:
            os.kill(self.pids[broker], sig)
        except ProcessLookupError:
            pass

    def pause(self, broker: int) -> None:
        self._signal(broker, signal.SIGSTOP)
        self.paused.add(broker)

    def resume(self, broker: int) -> None:
        self._signal(broker, signal.SIGCONT)
        self.paused.discard(broker)

    def kill(self, broker: int) -> None:
        self._signal(broker, signal.SIGKILL)
        self.killed.add(broker)
        self.paused.discard(broker)

    def heal(self) -> None:
        """Resume every paused broker (the cluster's own shutdown then stops them)."""
        for broker in sorted(self.paused):
            self.resume(broker)


@dataclass
class Target:
    """A running cluster: where it listens and how to fault its brokers."""

    name: str
    bootstrap: str
    topic: str
    control: PidControl
    run_dir: Path


@contextmanager
def cluster(target: str, run_dir: Path, args: tuple[str, ...] = (),
            start_timeout_s: float = 60) -> Iterator[Target]:
    """`isrlab cluster tcp` (target `reference`) or `isrlab cluster kafka` (target `kafka`)
    running until the block ends, then stopped with SIGTERM. A broker the block killed is not a
    failure; any other exit the cluster reports is (ConformanceError)."""
    if target not in TARGETS:
        raise ConformanceError(f"no target {target!r} (known: {', '.join(TARGETS)})")
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    common = ("--brokers", "3", "--partitions", "1", "--min-isr", "3", *args)
    if target == "kafka":
        start_timeout_s = max(start_timeout_s, 180)  # JVMs on two cores
    control = PidControl({})
    try:
        with cluster_process(cluster_command(target, run_dir, common),
                             run_dir / "cluster.stderr", start_timeout_s) as child:
            try:
                info = json.loads((run_dir / "kafka.json").read_text(encoding="utf-8"))
                control.pids = {int(n["id"]): int(n["pid"]) for n in info.get("nodes", ())}
                if not control.pids:
                    raise ConformanceError(f"{target}: {run_dir}/kafka.json lists no broker "
                                           "pids")
                yield Target(target, info["bootstrap_servers"], info["topic"], control,
                             run_dir)
            finally:
                control.heal()
    except KafkaRunError as error:
        raise ConformanceError(f"{target}: {error}") from None
    proc, err_path = child.proc, child.err_path
    if proc.returncode != 0:
        failed = _failed_nodes(run_dir)
        if proc.returncode != 1 or failed - {f"b{b}" for b in control.killed} or not failed:
            raise ConformanceError(f"isrlab cluster {target} exited with {proc.returncode}: "
                                   f"{tail(err_path)}")


def _failed_nodes(run_dir: Path) -> set[str]:
    """The nodes the reference cluster's run.json names as having died unasked."""
    try:
        summary = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["summary"]
    except (OSError, ValueError, KeyError):
        return set()
    return {f["node"] for f in summary.get("node_failures", ())}
