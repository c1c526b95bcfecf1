"""A broker's disk: applies the core's disk effects to segmented logs and checkpoint files.

One directory per partition (`p<i>/`) holds the log segments and its `leader-epoch-checkpoint`;
`replication-offset-checkpoint` holds the HW of every partition. The same code runs on a
`MemoryDisk` in the simulator and a `FileDisk` over TCP. `recovered()` reads everything back
after a crash, in the shape `BrokerCore` takes.
"""

from __future__ import annotations

from impl.protocol.messages import DiskAppend, DiskCheckpoint, DiskFlush, DiskTruncate
from impl.storage import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    Disk,
    EpochEntry,
    HighWatermarkCheckpoint,
    LeaderEpochCheckpoint,
    Record,
    RecoveryReport,
    SegmentedLog,
    recover,
)


class BrokerStorage:
    def __init__(self, disk: Disk, partitions: int, segment_bytes: int = 1 << 20):
        self.disk = disk
        self.partitions = partitions
        self.segment_bytes = segment_bytes
        self.logs: list[SegmentedLog] = []
        self.reports: list[RecoveryReport] = []
        self.high_watermarks: dict[int, int] = {}
        self.hw_file = HighWatermarkCheckpoint(disk, HIGH_WATERMARK_CHECKPOINT_FILE)
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
            self.epoch_files[effect.partition].write(
                EpochEntry(e, s) for e, s in effect.epoch_cache)
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
