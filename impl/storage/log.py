"""The segmented log of one partition replica: CRC32C frames, flush policy, crash recovery.

Theory of operation
-------------------
Records are (offset, epoch, value, payload) with dense offsets: the log holds every offset from
`log_start_offset` to `log_end_offset - 1`. `append` encodes frames and hands them to the disk's
write buffer; nothing is durable until `flush`, so `flushed_offset <= log_end_offset`, and a
crash loses the records at or above the flushed offset (possibly keeping a few more, whole or
torn, if part of the buffer had reached the OS). The core decides when to flush;
`needs_flush(FlushPolicy)` implements Kafka's `log.flush.interval.messages`.

The log is a directory of segment files named by the offset of their first record, zero-padded
to 20 digits (`00000000000000000000.log`). A new segment starts when the next frame would push
the active one past `segment_bytes` (a frame bigger than that gets a segment of its own).

Frame format (every integer little-endian; header `struct` format "<IIqiq", 28 bytes):

    byte  size  field
    0     4     length   u32  bytes after this field: 24 + len(payload)
    4     4     crc      u32  CRC32C (Castagnoli) of bytes 8 .. 4 + length
    8     8     offset   i64  the record's offset
    16    4     epoch    i32  the leader epoch it was written in
    20    8     value    i64  its value id (the spec's Record.value)
    28    n     payload       n <= MAX_PAYLOAD_BYTES

Offset index: kept in memory only, one (offset, byte position) entry per segment every
`index_interval_bytes` (and for each segment's first frame). Recovery reads and checks every
frame anyway, so it rebuilds the index for free and there is no index file to get wrong.

Recovery (`recover`) scans segments in base-offset order and stops at the first frame that is
cut off (`torn-frame`), has an impossible length (`bad-length`), fails its CRC
(`crc-mismatch`), or carries the wrong offset (`offset-mismatch`), or at a segment that does not
start where the log ends (`segment-gap`, left by a crash with unflushed data in two segments).
It truncates that segment there and deletes every later one, durably, and reports what it
removed. Empty segment files past the log end (a roll whose records the crash lost) are deleted
without counting as a problem. It never raises on bad bytes. Reads do not re-check CRCs: every byte they see was
written by this process or checked by recovery.

Left out: retention (log start is always the first segment's base), compaction, timestamps,
producer ids, Kafka's record batches (one frame per record), and an index file.
"""

from __future__ import annotations

import re
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from crc32c import crc32c

from .disk import Disk, StorageError

_PREFIX = struct.Struct("<II")  # length, crc
_BODY = struct.Struct("<qiq")  # offset, epoch, value
HEADER_BYTES = _PREFIX.size + _BODY.size
MAX_PAYLOAD_BYTES = 1 << 20
_LENGTH_MIN = 4 + _BODY.size
_LENGTH_MAX = _LENGTH_MIN + MAX_PAYLOAD_BYTES
_READ_CHUNK_BYTES = 64 * 1024
_SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")

DEFAULT_SEGMENT_BYTES = 1 << 20
DEFAULT_INDEX_INTERVAL_BYTES = 4096


@dataclass(frozen=True, slots=True)
class Record:
    """One record: its offset, the leader epoch it was written in, its value id, a payload."""

    offset: int
    epoch: int
    value: int
    payload: bytes = b""


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """Kafka's `log.flush.interval.messages`: None never flushes on append; k flushes when
    k or more records are unflushed."""

    log_flush_interval_messages: int | None = None

    def __post_init__(self) -> None:
        k = self.log_flush_interval_messages
        if k is not None and k < 1:
            raise ValueError(f"log.flush.interval.messages must be >= 1 or None, not {k}")


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What `recover` found and removed. `reason` and `problem` are None for a clean log."""

    log_start_offset: int
    log_end_offset: int
    segments_kept: int
    segments_deleted: tuple[str, ...] = ()
    truncated_bytes: int = 0  # every byte removed, deleted segments included
    torn_bytes: int = 0  # of those, the bytes of a frame cut off at the end of a segment
    records_dropped: int = 0  # frames removed, counted by walking their length prefixes
    reason: str | None = None  # torn-frame, bad-length, crc-mismatch, offset-mismatch, ...
    problem: str | None = None  # "file@byte: what is wrong", for people

    @property
    def clean(self) -> bool:
        """Whether recovery removed nothing."""
        return self.reason is None


def segment_name(base_offset: int) -> str:
    """The file name of the segment whose first record has offset `base_offset`."""
    return f"{base_offset:020d}.log"


def encode(record: Record) -> bytes:
    """The record's frame (see the module docstring)."""
    if len(record.payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(f"payload of {len(record.payload)} bytes > {MAX_PAYLOAD_BYTES}")
    if record.offset < 0:
        raise ValueError(f"negative offset {record.offset}")
    try:
        body = _BODY.pack(record.offset, record.epoch, record.value) + record.payload
    except struct.error as e:
        raise ValueError(f"{record}: {e}") from None
    return _PREFIX.pack(len(body) + 4, crc32c(body)) + body


def decode(frame: bytes) -> Record:
    """The record in a frame already known to be whole (no CRC check)."""
    offset, epoch, value = _BODY.unpack_from(frame, _PREFIX.size)
    return Record(offset, epoch, value, frame[HEADER_BYTES:])


@dataclass(slots=True)
class _Segment:
    base_offset: int
    name: str
    size_bytes: int = 0
    end_offset: int = -1
    index_offsets: list[int] = field(default_factory=list)
    index_positions: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.end_offset < 0:
            self.end_offset = self.base_offset

    def add(self, frame_bytes: int, interval_bytes: int) -> None:
        position = self.size_bytes
        if not self.index_positions or position - self.index_positions[-1] >= interval_bytes:
            self.index_offsets.append(self.end_offset)
            self.index_positions.append(position)
        self.size_bytes += frame_bytes
        self.end_offset += 1

    def lookup(self, offset: int) -> tuple[int, int]:
        """The nearest indexed (offset, position) at or before `offset`."""
        i = bisect_right(self.index_offsets, offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.index_offsets[i], self.index_positions[i]

    def cut(self, offset: int, position: int) -> None:
        self.size_bytes, self.end_offset = position, offset
        i = bisect_left(self.index_offsets, offset)
        del self.index_offsets[i:], self.index_positions[i:]


class SegmentedLog:
    """The log of one partition replica in `directory` on `disk`. Use `recover` to reopen one."""

    def __init__(
        self,
        disk: Disk,
        directory: str,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    ) -> None:
        existing = [n for n in disk.listdir(directory) if _SEGMENT_NAME.match(n)]
        if existing:
            raise StorageError(
                f"{disk.describe(directory)}: holds segments ({existing[0]}, ...); "
                "use recover() to reopen a log"
            )
        self._setup(disk, directory, segment_bytes, index_interval_bytes, [])

    def _setup(
        self, disk: Disk, directory: str, segment_bytes: int, index_interval_bytes: int,
        segments: list[_Segment],
    ) -> None:
        if segment_bytes < 1 or index_interval_bytes < 1:
            raise ValueError("segment_bytes and index_interval_bytes must be >= 1")
        self.disk = disk
        self.directory = directory.rstrip("/")
        self.segment_bytes = segment_bytes
        self.index_interval_bytes = index_interval_bytes
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._dirty: dict[str, None] = {}  # segments with buffered bytes, oldest first
        self._flushed_offset = self.log_end_offset

    @property
    def log_start_offset(self) -> int:
        """The offset of the first record (0 for a new log)."""
        return self._bases[0] if self._bases else 0

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (LEO)."""
        return self._segments[-1].end_offset if self._segments else 0

    @property
    def flushed_offset(self) -> int:
        """Records below this offset are durable; a crash may lose the ones above."""
        return self._flushed_offset

    @property
    def unflushed_records(self) -> int:
        """How many records a crash right now could lose."""
        return self.log_end_offset - self._flushed_offset

    @property
    def segment_names(self) -> tuple[str, ...]:
        """The disk names of the segment files, oldest first."""
        return tuple(s.name for s in self._segments)

    def needs_flush(self, policy: FlushPolicy) -> bool:
        """Whether `policy` asks for a flush now."""
        k = policy.log_flush_interval_messages
        return k is not None and self.unflushed_records >= k

    def _roll(self, base_offset: int) -> _Segment:
        segment = _Segment(base_offset, f"{self.directory}/{segment_name(base_offset)}")
        self.disk.append(segment.name, b"")  # creates the file
        self._segments.append(segment)
        self._bases.append(base_offset)
        return segment

    def append(self, records: Iterable[Record]) -> None:
        """Buffer records; the first must have offset `log_end_offset`, the rest follow it.

        Checks and encodes every record before writing any, so a bad batch changes nothing.
        """
        frames = []
        expected = self.log_end_offset
        for record in records:
            if record.offset != expected:
                raise ValueError(f"record offset {record.offset}, expected {expected}")
            frames.append(encode(record))
            expected += 1
        segment = self._segments[-1] if self._segments else None
        batch = bytearray()
        for frame in frames:
            if segment is None or (
                segment.size_bytes > 0 and segment.size_bytes + len(frame) > self.segment_bytes
            ):
                if batch:
                    self._write(segment, batch)
                    batch = bytearray()
                segment = self._roll(self.log_end_offset)
            segment.add(len(frame), self.index_interval_bytes)
            batch += frame
        if batch:
            self._write(segment, batch)

    def _write(self, segment: _Segment, batch: bytearray) -> None:
        self.disk.append(segment.name, bytes(batch))
        self._dirty[segment.name] = None

    def flush(self) -> None:
        """Make every appended record durable (older segments first)."""
        for name in self._dirty:
            self.disk.flush(name)
            if name != self._segments[-1].name:
                self.disk.release(name)
        self._dirty.clear()
        self._flushed_offset = self.log_end_offset

    def _frames(self, segment: _Segment, from_offset: int) -> Iterator[tuple[int, int, bytes]]:
        """(offset, position, frame) of the segment's frames, starting near `from_offset`."""
        offset, position = segment.lookup(from_offset)
        data, data_start = b"", position

        def fetch(need: int) -> bytes:
            end = min(segment.size_bytes, position + max(_READ_CHUNK_BYTES, need))
            return self.disk.read(segment.name, position, end)

        while position < segment.size_bytes:
            rel = position - data_start
            if len(data) - rel < _PREFIX.size:
                data, data_start, rel = fetch(_PREFIX.size), position, 0
            frame_bytes = 4 + int.from_bytes(data[rel:rel + 4], "little")
            if len(data) - rel < frame_bytes:
                data, data_start, rel = fetch(frame_bytes), position, 0
            assert len(data) - rel >= frame_bytes, f"{segment.name}@{position}: short frame"
            yield offset, position, data[rel:rel + frame_bytes]
            offset += 1
            position += frame_bytes

    def read(
        self, from_offset: int, max_records: int, max_bytes: int | None = None
    ) -> list[Record]:
        """Up to `max_records` records from `from_offset` on; with `max_bytes`, stop before the
        frames would exceed it, but always return at least one record if there is one."""
        if not self.log_start_offset <= from_offset <= self.log_end_offset:
            raise ValueError(
                f"offset {from_offset} outside [{self.log_start_offset}, {self.log_end_offset}]"
            )
        records: list[Record] = []
        total_bytes = 0
        first = max(bisect_right(self._bases, from_offset) - 1, 0)
        for segment in self._segments[first:]:
            for offset, _, frame in self._frames(segment, from_offset):
                if offset < from_offset:
                    continue
                if len(records) >= max_records or (
                    max_bytes is not None and records and total_bytes + len(frame) > max_bytes
                ):
                    return records
                records.append(decode(frame))
                total_bytes += len(frame)
        return records

    def records(self) -> Iterator[Record]:
        """Every record, in offset order."""
        for segment in self._segments:
            for _, _, frame in self._frames(segment, segment.base_offset):
                yield decode(frame)

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset`, durably (a crash cannot bring them back).

        Records below `offset` keep their state: durable ones stay durable, buffered ones stay
        buffered. Later segments go first, so a crash part-way leaves a prefix of the log.
        """
        if offset < self.log_start_offset:
            raise ValueError(f"offset {offset} below log start {self.log_start_offset}")
        if offset >= self.log_end_offset:
            return
        while len(self._segments) > 1 and self._bases[-1] > offset:
            segment = self._segments.pop()
            self._bases.pop()
            self._dirty.pop(segment.name, None)
            self.disk.delete(segment.name)
        segment = self._segments[-1]
        position = next(p for o, p, _ in self._frames(segment, offset) if o == offset)
        self.disk.truncate(segment.name, position)
        segment.cut(offset, position)
        if self.disk.pending_bytes(segment.name) == 0:
            self._dirty.pop(segment.name, None)
        self._flushed_offset = min(self._flushed_offset, offset)


@dataclass(frozen=True, slots=True)
class _Stop:
    position: int
    reason: str
    detail: str


def _scan(data: bytes, segment: _Segment, interval_bytes: int) -> _Stop | None:
    """Add the segment's valid frames to `segment`; where and why the scan stopped, if early."""
    position = 0
    while position < len(data):
        remaining = len(data) - position
        if remaining < 4:
            return _Stop(position, "torn-frame", f"{remaining} bytes, not even a length")
        length = int.from_bytes(data[position:position + 4], "little")
        if not _LENGTH_MIN <= length <= _LENGTH_MAX:
            return _Stop(position, "bad-length", f"length {length}")
        if remaining < 4 + length:
            return _Stop(position, "torn-frame", f"{remaining} of {4 + length} bytes")
        crc = _PREFIX.unpack_from(data, position)[1]
        body = data[position + _PREFIX.size:position + 4 + length]
        if crc32c(body) != crc:
            return _Stop(position, "crc-mismatch", f"CRC32C mismatch at offset {segment.end_offset}")
        offset = _BODY.unpack_from(body)[0]
        if offset != segment.end_offset:
            return _Stop(position, "offset-mismatch",
                         f"frame says offset {offset}, expected {segment.end_offset}")
        segment.add(4 + length, interval_bytes)
        position += 4 + length
    return None


def _count_frames(data: bytes, position: int) -> int:
    """How many frames (whole or not) start at or after `position`, by their length prefixes."""
    count = 0
    while position < len(data):
        count += 1
        if len(data) - position < 4:
            break
        length = int.from_bytes(data[position:position + 4], "little")
        if not _LENGTH_MIN <= length <= _LENGTH_MAX:
            break
        position += 4 + length
    return count


def recover(
    disk: Disk,
    directory: str,
    *,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
) -> tuple[SegmentedLog, RecoveryReport]:
    """Reopen the log in `directory` after a restart or crash; see the module docstring.

    The disk must hold no unflushed data (a fresh FileDisk, or a MemoryDisk after `crash()`).
    """
    directory = directory.rstrip("/")
    names = [n for n in disk.listdir(directory) if _SEGMENT_NAME.match(n)]
    kept: list[_Segment] = []
    doomed: list[str] = []
    truncated = torn = dropped = 0
    reason = problem = None
    for name in names:
        path = f"{directory}/{name}"
        if disk.pending_bytes(path):
            raise StorageError(f"{disk.describe(path)}: has unflushed data; recover after a crash")
        data = disk.read(path)
        base = int(name[:20])
        expected = kept[-1].end_offset if kept else base
        if reason is None and base != expected and not data:
            doomed.append(path)  # a roll whose every record a crash lost: no data, no problem
            continue
        if reason is None and base != expected:
            reason = "segment-gap"
            problem = f"{path}@0: starts at offset {base}, the log ends at {expected}"
        if reason is not None:
            doomed.append(path)
            truncated += len(data)
            dropped += _count_frames(data, 0)
            continue
        segment = _Segment(base, path)
        stop = _scan(data, segment, index_interval_bytes)
        kept.append(segment)
        if stop is not None:
            reason, problem = stop.reason, f"{path}@{stop.position}: {stop.detail}"
            truncated += len(data) - stop.position
            dropped += _count_frames(data, stop.position)
            if stop.reason == "torn-frame":
                torn = len(data) - stop.position
            disk.truncate(path, stop.position)
            disk.release(path)
    for path in reversed(doomed):
        disk.delete(path)
    log = SegmentedLog.__new__(SegmentedLog)
    log._setup(disk, directory, segment_bytes, index_interval_bytes, kept)
    report = RecoveryReport(
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        segments_kept=len(kept),
        segments_deleted=tuple(doomed),
        truncated_bytes=truncated,
        torn_bytes=torn,
        records_dropped=dropped,
        reason=reason,
        problem=problem,
    )
    return log, report
