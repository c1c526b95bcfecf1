"""Checkpoint files: Kafka's `leader-epoch-checkpoint` and `replication-offset-checkpoint`.

Both are small text files rewritten whole with `Disk.replace` (temporary file, fsync, rename),
so a crash leaves the old or the new version, never a mix. The format is Kafka's:

    0            <- version
    2            <- number of entries
    0 0          <- entries: "epoch start_offset" or "partition high_watermark"
    3 120

Every number is a non-negative decimal; fields are separated by a space; every line ends with
a newline. Reading checks all of it and raises `CheckpointError` ("file:line: what is wrong")
on the first problem. A missing file reads as no entries, as in Kafka. Left out: Kafka's topic
column in `replication-offset-checkpoint` (isrlab partitions are numbered within one topic).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .disk import Disk, StorageError

VERSION = 0
LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
HIGH_WATERMARK_CHECKPOINT_FILE = "replication-offset-checkpoint"


class CheckpointError(StorageError):
    """A checkpoint file is malformed; names the file and the 1-based line."""

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def _number(path: str, line: int, token: bytes, what: str) -> int:
    if not token.isdigit():  # ASCII digits only: no sign, no spaces, no other scripts
        text = token.decode("ascii", "backslashreplace")
        raise CheckpointError(path, line, f"{what} {text!r} is not a non-negative integer")
    return int(token)


def _parse(path: str, data: bytes, fields: tuple[str, ...]) -> list[tuple[int, tuple[int, ...]]]:
    """(line number, numbers) per entry, after checking version, count and shape."""
    lines = data.split(b"\n")
    if lines[-1] != b"":
        raise CheckpointError(path, len(lines), "no newline at the end (a cut-off file?)")
    lines.pop()
    if not lines:
        raise CheckpointError(path, 1, "empty file, expected a version line")
    version = _number(path, 1, lines[0], "version")
    if version != VERSION:
        raise CheckpointError(path, 1, f"version {version}, only {VERSION} is known")
    if len(lines) < 2:
        raise CheckpointError(path, 2, "missing the entry count line")
    count = _number(path, 2, lines[1], "entry count")
    body = lines[2:]
    if len(body) != count:
        line = 3 + count if len(body) > count else len(lines) + 1
        raise CheckpointError(path, line, f"entry count says {count}, found {len(body)}")
    entries = []
    for number, text in enumerate(body, start=3):
        tokens = text.split(b" ")
        if len(tokens) != len(fields):
            raise CheckpointError(path, number, f"expected {' '.join(fields)}, got {text!r}")
        entries.append((number, tuple(_number(path, number, t, f) for t, f in zip(tokens, fields,
                                                                                  strict=True))))
    return entries


def _render(rows: list[tuple[int, int]]) -> bytes:
    lines = [str(VERSION), str(len(rows)), *(f"{a} {b}" for a, b in rows)]
    return ("\n".join(lines) + "\n").encode("ascii")


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """A leader-epoch cache entry: `epoch` began at `start_offset`."""

    epoch: int
    start_offset: int


def _epoch_problem(previous: EpochEntry | None, entry: EpochEntry) -> str | None:
    if entry.epoch < 0 or entry.start_offset < 0:
        return f"negative number in {entry}"
    if previous is not None and entry.epoch <= previous.epoch:
        return f"epoch {entry.epoch} does not increase (previous {previous.epoch})"
    if previous is not None and entry.start_offset < previous.start_offset:
        return f"start offset {entry.start_offset} decreases (previous {previous.start_offset})"
    return None


class LeaderEpochCheckpoint:
    """The leader-epoch cache file: epochs strictly increasing, start offsets non-decreasing."""

    def __init__(self, disk: Disk, name: str) -> None:
        self.disk = disk
        self.name = name

    def write(self, entries: Iterable[EpochEntry]) -> None:
        """Replace the file's contents with `entries`, atomically and durably."""
        entries = list(entries)
        previous = None
        for entry in entries:
            if (problem := _epoch_problem(previous, entry)) is not None:
                raise ValueError(f"{self.disk.describe(self.name)}: {problem}")
            previous = entry
        self.disk.replace(self.name, _render([(e.epoch, e.start_offset) for e in entries]))

    def read(self) -> tuple[EpochEntry, ...]:
        """The entries, oldest epoch first; () if the file does not exist."""
        if not self.disk.exists(self.name):
            return ()
        path = self.disk.describe(self.name)
        entries: list[EpochEntry] = []
        for line, (epoch, start_offset) in _parse(path, self.disk.read(self.name),
                                                  ("epoch", "start_offset")):
            entry = EpochEntry(epoch, start_offset)
            if (problem := _epoch_problem(entries[-1] if entries else None, entry)) is not None:
                raise CheckpointError(path, line, problem)
            entries.append(entry)
        return tuple(entries)


class HighWatermarkCheckpoint:
    """The high watermark of each partition on this broker, one line per partition."""

    def __init__(self, disk: Disk, name: str) -> None:
        self.disk = disk
        self.name = name

    def write(self, high_watermarks: Mapping[int, int]) -> None:
        """Replace the file's contents, atomically and durably (lines sorted by partition)."""
        rows = sorted(high_watermarks.items())
        if any(p < 0 or hw < 0 for p, hw in rows):
            raise ValueError(f"{self.disk.describe(self.name)}: negative number in {rows}")
        self.disk.replace(self.name, _render(rows))

    def read(self) -> dict[int, int]:
        """Partition -> high watermark; {} if the file does not exist."""
        if not self.disk.exists(self.name):
            return {}
        path = self.disk.describe(self.name)
        out: dict[int, int] = {}
        for line, (partition, hw) in _parse(path, self.disk.read(self.name),
                                            ("partition", "high_watermark")):
            if partition in out:
                raise CheckpointError(path, line, f"partition {partition} appears twice")
            out[partition] = hw
        return out
