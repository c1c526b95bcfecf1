"""A broker's disk: applies the core's disk effects to segmented logs and checkpoint files.

One directory per partition (`p<i>/`) holds the log segments and its `leader-epoch-checkpoint`;
`replication-offset-checkpoint` holds the HW of every partition. The same code runs on a
`MemoryDisk` in the simulator and a `FileDisk` over TCP. `recovered()` reads everything back
after a crash, in the shape `BrokerCore` takes.

`checkpoint_fsync` False (the TCP driver's choice) rewrites the HW checkpoint by atomic replace
without fsync: the HW changes on almost every fetch, and an fsync each time caps throughput.
That survives SIGKILL (the OS has the bytes) but not power loss, which isrlab does not model.
Leader-epoch checkpoints stay durable; in that mode they are rewritten only when they change.
"""

from __future__ import annotations

import os

from impl.protocol.messages import DiskAppend, DiskCheckpoint, DiskFlush, DiskTruncate
from impl.storage import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    Disk,
    EpochEntry,
    FileDisk,
    HighWatermarkCheckpoint,
    LeaderEpochCheckpoint,
    Record,
    RecoveryReport,
    SegmentedLog,
    recover,
)


class _UnsyncedReplace:
    """The part of a Disk a checkpoint uses, with `replace` as write + rename, no fsync."""

    def __init__(self, disk: Disk):
        self.disk = disk

    def replace(self, name: str, data: bytes) -> None:
        if not isinstance(self.disk, FileDisk):
            self.disk.replace(name, data)
            return
        path = self.disk.root / name
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(temporary, path)

    def exists(self, name: str) -> bool:
        return self.disk.exists(name)

    def read(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        return self.disk.read(name, start, end)

    def describe(self, name: str) -> str:
        return self.disk.describe(name)


class BrokerStorage:
    def __init__(self, disk: Disk, partitions: int, segment_bytes: int = 1 << 20,
                 checkpoint_fsync: bool = True):
        self.disk = disk
        self.checkpoint_fsync = checkpoint_fsync
        self.epoch_written: dict[int, tuple] = {}
        self.partitions = partitions
        self.segment_bytes = segment_bytes
        self.logs: list[SegmentedLog] = []
        self.reports: list[RecoveryReport] = []
        self.high_watermarks: dict[int, int] = {}
        self.hw_file = HighWatermarkCheckpoint(
            disk if checkpoint_fsync else _UnsyncedReplace(disk), HIGH_WATERMARK_CHECKPOINT_FILE)
        self.epoch_files = [LeaderEpochCheckpoint(disk, f"p{p}/{LEADER_EPOCH_CHECKPOINT_FILE}")
                            for p in range(partitions)]
        self.open()

    def open(self) -> None:
        """Open (or recover) every partition's log."""
        self.logs, self.reports = [], []
        for p in range(self.partitions):
            log, report = recover(self.disk, f"p{p}", segment_bytes=self.segment_bytes)
            self.logs.append(log)
            self.reports.append(report)
        self.high_watermarks = self.hw_file.read()

    def apply(self, effect: object) -> None:
        kind = type(effect)
        if kind is DiskAppend:
            self.logs[effect.partition].append(
                Record(effect.start_offset + i, e, v, payload)
                for i, (e, v, payload) in enumerate(effect.records))
        elif kind is DiskFlush:
            self.logs[effect.partition].flush()
        elif kind is DiskTruncate:
            self.logs[effect.partition].truncate_to(effect.offset)
        elif kind is DiskCheckpoint:
            if self.checkpoint_fsync or self.epoch_written.get(effect.partition) != (
                    effect.epoch_cache):
                self.epoch_files[effect.partition].write(
                    EpochEntry(e, s) for e, s in effect.epoch_cache)
                self.epoch_written[effect.partition] = effect.epoch_cache
            if self.high_watermarks.get(effect.partition) != effect.high_watermark:
                self.high_watermarks[effect.partition] = effect.high_watermark
                self.hw_file.write(self.high_watermarks)

    def recovered(self) -> dict:
        """partition -> (records as (epoch, value, payload), HW, epoch cache) for BrokerCore."""
        out = {}
        for p, log in enumerate(self.logs):
            records = [(r.epoch, r.value, r.payload) for r in log.records()]
            cache = [(e.epoch, e.start_offset) for e in self.epoch_files[p].read()]
            out[p] = (records, self.high_watermarks.get(p, 0), cache)
        return out
