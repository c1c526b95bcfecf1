"""Storage of the reference broker: segmented logs and checkpoint files on a crashable disk.

Theory of operation: the broker core never touches files. It appends records to a
`SegmentedLog`, decides when to `flush` (Kafka's `log.flush.interval.messages`, via
`needs_flush`), truncates with `truncate_to` and persists its leader-epoch cache and high
watermarks in checkpoint files. Underneath, a `Disk` holds each file as a durable part plus the
broker's own write buffer; a crash loses exactly the buffered suffix (docs/protocol.md, "Crashes
and flushing"), optionally leaving a torn tail, and `recover` brings a log back to its longest
valid prefix. `MemoryDisk` runs in the deterministic simulator, `FileDisk` on real files; both
have the same crash semantics. Nothing here reads a clock, draws random numbers or awaits.

- `disk`: Disk, MemoryDisk, FileDisk, StorageError.
- `log`: Record, SegmentedLog, recover, RecoveryReport, FlushPolicy; the frame format.
- `checkpoint`: LeaderEpochCheckpoint, HighWatermarkCheckpoint, CheckpointError.
"""

from .checkpoint import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LEADER_EPOCH_CHECKPOINT_FILE,
    CheckpointError,
    EpochEntry,
    HighWatermarkCheckpoint,
    LeaderEpochCheckpoint,
)
from .disk import Disk, FileDisk, MemoryDisk, StorageError
from .log import (
    HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    FlushPolicy,
    Record,
    RecoveryReport,
    SegmentedLog,
    decode,
    encode,
    recover,
    segment_name,
)

__all__ = [
    "HEADER_BYTES",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
    "LEADER_EPOCH_CHECKPOINT_FILE",
    "MAX_PAYLOAD_BYTES",
    "CheckpointError",
    "Disk",
    "EpochEntry",
    "FileDisk",
    "FlushPolicy",
    "HighWatermarkCheckpoint",
    "LeaderEpochCheckpoint",
    "MemoryDisk",
    "Record",
    "RecoveryReport",
    "SegmentedLog",
    "StorageError",
    "decode",
    "encode",
    "recover",
    "segment_name",
]
