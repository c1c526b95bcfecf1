"""Append + flush throughput of the broker's storage, MemoryDisk and FileDisk side by side.

    python bench/storage_bench.py                  # 100,000 records of 100 bytes per case
    python bench/storage_bench.py --records 20000 --dir /var/tmp

Each case appends records in batches and flushes after every batch, as a broker with
`log.flush.interval.messages` = batch would; "never" appends without flushing and flushes once
at the end. FileDisk fsyncs on every flush, so its small-batch figures measure the device.
A case makes at most 2,000 flushes (it appends fewer records if needed) to keep runs short.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from impl.storage import FileDisk, MemoryDisk, Record, SegmentedLog  # noqa: E402

PAYLOAD = bytes(range(100))
FSYNCS_MAX = 2_000  # per case, so small batches on a slow device stay short


def run(disk, records: int, batch: int | None) -> float:
    """Records per second for `records` appends, flushing every `batch` (None: at the end)."""
    log = SegmentedLog(disk, "p0")
    size = batch or 1000
    start = time.perf_counter()
    for base in range(0, records, size):
        log.append([Record(i, 1, i, PAYLOAD) for i in range(base, min(base + size, records))])
        if batch is not None:
            log.flush()
    log.flush()
    seconds = time.perf_counter() - start
    assert log.log_end_offset == records == log.flushed_offset
    return records / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--dir", default=None, help="where FileDisk writes (default: a tmp dir)")
    args = parser.parse_args()
    print(f"{'flush every':>12} {'records':>9} {'MemoryDisk rec/s':>17} {'FileDisk rec/s':>15} "
          f"{'file/memory':>12}")
    for batch in (1, 10, 100, 1000, None):
        records = args.records if batch is None else min(args.records, FSYNCS_MAX * batch)
        memory = run(MemoryDisk(), records, batch)
        with tempfile.TemporaryDirectory(dir=args.dir) as root:
            disk = FileDisk(root)
            real = run(disk, records, batch)
            disk.close()
        label = "never" if batch is None else f"{batch} rec"
        print(f"{label:>12} {records:>9,} {memory:>17,.0f} {real:>15,.0f} {real / memory:>12.2f}")


if __name__ == "__main__":
    main()
