"""Storage of the reference broker: round trips, crash semantics, recovery, checkpoints.

Most tests run on both disks. Each check is also shown failing: a mutant disk that leaks
unflushed bytes, a CRC that skips the payload, a log that really was flushed before SIGKILL.
"""

from __future__ import annotations

import ast
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import impl.storage.log as log_module
from impl.storage import (
    HEADER_BYTES,
    CheckpointError,
    Disk,
    EpochEntry,
    FileDisk,
    FlushPolicy,
    HighWatermarkCheckpoint,
    LeaderEpochCheckpoint,
    MemoryDisk,
    Record,
    SegmentedLog,
    StorageError,
    encode,
    recover,
    segment_name,
)

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD_BYTES = 10
FRAME_BYTES = HEADER_BYTES + PAYLOAD_BYTES


def recs(start: int, stop: int, epoch: int = 0) -> list[Record]:
    """Records [start, stop) whose value and payload say which offset they were written at."""
    return [Record(i, epoch, 1000 * epoch + i, bytes([i % 256]) * PAYLOAD_BYTES)
            for i in range(start, stop)]


@pytest.fixture(params=["memory", "file"])
def disk(request, tmp_path) -> Disk:
    if request.param == "memory":
        return MemoryDisk()
    return FileDisk(tmp_path / "run")


def reopened(disk: Disk) -> Disk:
    """The disk as a restarted process sees it: a new FileDisk on the same directory."""
    return FileDisk(disk.root) if isinstance(disk, FileDisk) else disk


# --- append, read, flush ---------------------------------------------------------------------


def test_append_read_flush_round_trip(disk):
    log = SegmentedLog(disk, "p0")
    log.append(recs(0, 5))
    log.append(recs(5, 12, epoch=3))
    assert (log.log_start_offset, log.log_end_offset, log.flushed_offset) == (0, 12, 0)
    assert log.read(0, 100) == recs(0, 5) + recs(5, 12, epoch=3)
    assert log.read(4, 2) == [recs(0, 5)[4], recs(5, 12, epoch=3)[0]]
    assert log.read(12, 10) == []
    log.flush()
    assert (log.flushed_offset, log.unflushed_records) == (12, 0)
    assert list(log.records()) == log.read(0, 100)
    again, report = recover(reopened(disk), "p0")
    assert report.clean and list(again.records()) == list(log.records())


def test_read_limits_and_bounds(disk):
    log = SegmentedLog(disk, "p0")
    log.append(recs(0, 10))
    assert log.read(3, 0) == []
    assert log.read(3, 100, max_bytes=2 * FRAME_BYTES + 1) == recs(3, 5)
    assert log.read(3, 100, max_bytes=1) == recs(3, 4), "at least one record"
    for bad in (-1, 11):
        with pytest.raises(ValueError, match="outside"):
            log.read(bad, 1)


def test_append_rejects_a_gap_and_writes_nothing(disk):
    log = SegmentedLog(disk, "p0")
    log.append(recs(0, 3))
    with pytest.raises(ValueError, match="offset 6, expected 5"):
        log.append(recs(3, 5) + recs(6, 7))
    with pytest.raises(ValueError):
        log.append([Record(3, 2**31, 0)])  # epoch is an i32 on disk
    assert log.log_end_offset == 3 and log.read(0, 10) == recs(0, 3)


def test_a_new_log_refuses_a_directory_that_holds_one(disk):
    SegmentedLog(disk, "p0").append(recs(0, 1))
    with pytest.raises(StorageError, match="use recover"):
        SegmentedLog(disk, "p0")


def test_flush_policy():
    log = SegmentedLog(MemoryDisk(), "p0")
    never, every_three = FlushPolicy(None), FlushPolicy(3)
    log.append(recs(0, 2))
    assert not log.needs_flush(never) and not log.needs_flush(every_three)
    log.append(recs(2, 3))
    assert log.needs_flush(every_three) and not log.needs_flush(never)
    log.flush()
    assert not log.needs_flush(every_three)
    with pytest.raises(ValueError):
        FlushPolicy(0)


# --- segments --------------------------------------------------------------------------------


def test_segments_roll_at_segment_bytes_and_reads_cross_them(disk):
    log = SegmentedLog(disk, "p0", segment_bytes=3 * FRAME_BYTES, index_interval_bytes=1)
    log.append(recs(0, 7))
    log.append(recs(7, 10))
    assert log.segment_names == tuple(f"p0/{segment_name(b)}" for b in (0, 3, 6, 9))
    assert disk.listdir("p0") == [segment_name(b) for b in (0, 3, 6, 9)]
    assert log.read(2, 5) == recs(2, 7)
    assert log.read(5, 100) == recs(5, 10)
    big = Record(10, 0, 10, b"z" * 200)  # larger than a segment: gets one of its own
    log.append([big, *recs(11, 12)])
    assert log.segment_names[-2:] == ("p0/00000000000000000010.log", "p0/00000000000000000011.log")
    log.flush()
    again, report = recover(reopened(disk), "p0", segment_bytes=3 * FRAME_BYTES)
    assert report.clean and report.segments_kept == 6
    assert again.read(0, 100) == recs(0, 10) + [big] + recs(11, 12)


def test_sparse_index_reads_from_the_middle_of_a_big_segment(disk):
    log = SegmentedLog(disk, "p0", index_interval_bytes=10 * FRAME_BYTES)
    log.append(recs(0, 1000))
    assert [r.offset for r in log.read(537, 3)] == [537, 538, 539]
    assert log.read(0, 1000) == recs(0, 1000)


def test_truncate_to_across_segments_then_append_continues(disk):
    log = SegmentedLog(disk, "p0", segment_bytes=4 * FRAME_BYTES)
    log.append(recs(0, 20))
    log.flush()
    log.append(recs(20, 30))
    log.truncate_to(9)
    assert log.segment_names == ("p0/00000000000000000000.log", "p0/00000000000000000004.log",
                                 "p0/00000000000000000008.log")
    assert (log.log_end_offset, log.flushed_offset) == (9, 9)
    log.append(recs(9, 14, epoch=2))
    assert log.read(0, 100) == recs(0, 9) + recs(9, 14, epoch=2)
    log.flush()
    disk.crash()
    again, report = recover(reopened(disk), "p0", segment_bytes=4 * FRAME_BYTES)
    assert report.clean
    assert again.read(0, 100) == recs(0, 9) + recs(9, 14, epoch=2)


def test_truncate_to_a_segment_base_and_below_the_flushed_offset_is_durable(disk):
    log = SegmentedLog(disk, "p0", segment_bytes=4 * FRAME_BYTES)
    log.append(recs(0, 20))
    log.flush()
    log.truncate_to(8)
    assert log.segment_names[-1] == "p0/00000000000000000008.log" and log.log_end_offset == 8
    log.truncate_to(5)
    disk.crash()
    again, report = recover(reopened(disk), "p0")
    assert report.clean and again.log_end_offset == 5, "truncated records came back"
    log.truncate_to(5)  # no-op at the end
    with pytest.raises(ValueError, match="below log start"):
        log.truncate_to(-1)


def test_truncate_to_keeps_buffered_records_buffered(disk):
    log = SegmentedLog(disk, "p0")
    log.append(recs(0, 10))
    log.flush()
    log.append(recs(10, 20))
    log.truncate_to(15)
    assert (log.log_end_offset, log.flushed_offset) == (15, 10)
    disk.crash()
    again, _ = recover(reopened(disk), "p0")
    assert again.log_end_offset == 10


def test_truncate_to_zero_then_rewrite(disk):
    log = SegmentedLog(disk, "p0", segment_bytes=4 * FRAME_BYTES)
    log.append(recs(0, 10))
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.read(0, 10) == []
    log.append(recs(0, 2, epoch=5))
    log.flush()
    assert list(recover(reopened(disk), "p0")[0].records()) == recs(0, 2, epoch=5)


# --- crashes ---------------------------------------------------------------------------------


def crash_after_partial_flush(disk: Disk) -> int:
    """Flush 10 records, buffer 15 more across segment rolls, crash: the recovered LEO."""
    log = SegmentedLog(disk, "p0", segment_bytes=4 * FRAME_BYTES)
    log.append(recs(0, 10))
    log.flush()
    log.append(recs(10, 25))
    assert (log.flushed_offset, log.log_end_offset) == (10, 25)
    disk.crash()
    again, report = recover(reopened(disk), "p0")
    assert report.clean, report
    assert list(again.records()) == recs(0, again.log_end_offset)
    return again.log_end_offset


def test_crash_loses_exactly_the_unflushed_suffix(disk):
    assert crash_after_partial_flush(disk) == 10
    assert disk.listdir("p0")[-1] == segment_name(8), "empty segments past the end are gone"


class LeakyDisk(MemoryDisk):
    """A mutant whose appends are durable at once, as if the OS buffered them."""

    def append(self, name: str, data: bytes) -> None:
        super().append(name, data)
        self.flush(name)


def test_the_crash_check_catches_a_disk_that_keeps_unflushed_data():
    assert crash_after_partial_flush(LeakyDisk()) == 25


@pytest.mark.parametrize(
    ("torn_bytes", "end", "torn"),
    [
        (0, 10, 0),
        (2, 10, 2),  # cut inside the length prefix
        (FRAME_BYTES // 2, 10, FRAME_BYTES // 2),  # cut inside the header
        (FRAME_BYTES - 1, 10, FRAME_BYTES - 1),  # one byte short of the payload
        (FRAME_BYTES, 11, 0),  # a whole unflushed frame had reached the disk: it is valid
        (FRAME_BYTES + HEADER_BYTES + 3, 11, HEADER_BYTES + 3),  # cut inside the payload
    ],
)
def test_torn_tail_recovery_drops_exactly_the_torn_record(disk, torn_bytes, end, torn):
    log = SegmentedLog(disk, "p0")
    log.append(recs(0, 10))
    log.flush()
    log.append(recs(10, 15))
    disk.crash(torn_bytes=torn_bytes)
    again, report = recover(reopened(disk), "p0")
    assert again.log_end_offset == end and list(again.records()) == recs(0, end)
    assert (report.torn_bytes, report.truncated_bytes) == (torn, torn)
    assert report.records_dropped == (1 if torn else 0)
    assert report.reason == ("torn-frame" if torn else None)
    assert disk.size("p0/" + segment_name(0)) == end * FRAME_BYTES
    assert recover(reopened(disk), "p0")[1].clean, "recovery left something to recover"
    again.append(recs(end, end + 1, epoch=1))  # the log goes on where it ends
    assert again.read(end, 5) == recs(end, end + 1, epoch=1)


def test_torn_tail_across_a_roll_leaves_a_gap_that_recovery_removes():
    disk = MemoryDisk()
    log = SegmentedLog(disk, "p0", segment_bytes=4 * FRAME_BYTES)
    log.append(recs(0, 2))
    log.flush()
    log.append(recs(2, 10))  # 2..3 in segment 0, 4..7 in segment 4, 8..9 in segment 8
    disk.crash(torn_bytes=FRAME_BYTES + 5)  # every buffer keeps one frame and 5 bytes
    again, report = recover(disk, "p0")
    assert again.log_end_offset == 3
    assert report.reason == "torn-frame" and report.torn_bytes == 5
    assert report.segments_deleted == ("p0/00000000000000000004.log",
                                       "p0/00000000000000000008.log")
    assert report.truncated_bytes == 5 + 2 * (FRAME_BYTES + 5)
    assert report.records_dropped == 1 + 2 * 2
    assert disk.listdir("p0") == [segment_name(0)]


# --- corruption ------------------------------------------------------------------------------


def twenty_flushed(disk: Disk) -> str:
    log = SegmentedLog(disk, "p0")
    log.append(recs(0, 20))
    log.flush()
    return log.segment_names[0]


@pytest.mark.parametrize("byte", range(FRAME_BYTES))
def test_every_flipped_byte_of_a_flushed_frame_is_caught(byte):
    disk = MemoryDisk()
    name = twenty_flushed(disk)
    disk.corrupt(name, 7 * FRAME_BYTES + byte)
    again, report = recover(disk, "p0")
    assert again.log_end_offset == 7 and list(again.records()) == recs(0, 7)
    assert report.truncated_bytes == 13 * FRAME_BYTES
    # Length 38 with one byte flipped: 217 (fits, so the CRC is over the wrong bytes), 65318
    # (past the end of the file), or more than a frame may hold.
    length_flips = {0: "crc-mismatch", 1: "torn-frame", 2: "bad-length", 3: "bad-length"}
    assert report.reason == length_flips.get(byte, "crc-mismatch")
    assert report.problem.startswith(f"{name}@{7 * FRAME_BYTES}: ")


def test_crc_corruption_is_reported_with_the_records_it_drops(disk):
    name = twenty_flushed(disk)
    disk.corrupt(name, 7 * FRAME_BYTES + HEADER_BYTES + 1)  # a payload byte
    again, report = recover(reopened(disk), "p0")
    assert again.log_end_offset == 7
    assert (report.reason, report.records_dropped, report.torn_bytes) == ("crc-mismatch", 13, 0)
    assert report.problem == f"{name}@{7 * FRAME_BYTES}: CRC32C mismatch at offset 7"


def test_the_corruption_check_fails_with_a_crc_that_skips_the_payload(monkeypatch):
    real = log_module.crc32c
    monkeypatch.setattr(log_module, "crc32c", lambda body: real(body[:20]))
    disk = MemoryDisk()
    name = twenty_flushed(disk)
    disk.corrupt(name, 7 * FRAME_BYTES + HEADER_BYTES + 1)
    again, report = recover(disk, "p0")
    assert report.clean and again.log_end_offset == 20, "the payload flip went unnoticed"


@pytest.mark.parametrize(
    "garbage",
    [
        bytes(100),
        b"\xff" * 100,
        b"\x01",
        encode(Record(99, 0, 0)),  # a valid frame at the wrong offset
        *(random.Random(seed).randbytes(300) for seed in range(5)),
    ],
)
def test_garbage_tails_never_raise(disk, garbage):
    name = twenty_flushed(disk)
    disk.append(name, garbage)
    disk.flush(name)
    again, report = recover(reopened(disk), "p0")
    assert again.log_end_offset == 20 and report.truncated_bytes == len(garbage)
    assert report.reason in ("bad-length", "torn-frame", "offset-mismatch")


def test_recover_refuses_a_disk_with_unflushed_data():
    disk = MemoryDisk()
    SegmentedLog(disk, "p0").append(recs(0, 1))
    with pytest.raises(StorageError, match="unflushed"):
        recover(disk, "p0")


def test_recover_of_an_empty_directory_gives_an_empty_log(disk):
    log, report = recover(disk, "nothing-here")
    assert report.clean and (log.log_start_offset, log.log_end_offset) == (0, 0)
    log.append(recs(0, 2))
    assert log.read(0, 5) == recs(0, 2)


# --- the two disks agree ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_memory_and_file_disks_agree_on_a_random_script(tmp_path, seed):
    rng = random.Random(seed)
    memory, real = MemoryDisk(), FileDisk(tmp_path)
    names = ["d/a", "d/b", "e/c"]
    for step in range(300):
        existing = [n for n in names if memory.exists(n)]
        op = rng.choice(["append"] * 4 + ["flush", "truncate", "crash", "replace", "delete"])
        name = rng.choice(existing) if existing and op not in ("append", "replace") else None
        target = names[step % 3]
        cut = memory.size(name) * (step % 3) // 3 if name is not None else 0
        for disk in (memory, real):
            if op == "append":
                disk.append(target, bytes([step % 256]) * (step % 7))
            elif op == "replace":
                disk.replace(target, b"r" * (step % 5))
            elif op == "crash":
                disk.crash(torn_bytes=step % 4)
            elif name is not None and op == "flush":
                disk.flush(name)
            elif name is not None and op == "truncate":
                disk.truncate(name, cut)
            elif name is not None and op == "delete":
                disk.delete(name)
        for directory in ("d", "e"):
            assert memory.listdir(directory) == real.listdir(directory), (step, op)
        for n in names:
            assert memory.exists(n) == real.exists(n), (step, op, n)
            if memory.exists(n):
                assert memory.read(n) == real.read(n), (step, op, n)
                assert memory.pending_bytes(n) == real.pending_bytes(n), (step, op, n)
    memory.crash()
    real.crash()
    restarted = FileDisk(tmp_path)
    assert [memory.read(n) for n in names if memory.exists(n)] == [
        restarted.read(n) for n in names if restarted.exists(n)]


# --- checkpoints -----------------------------------------------------------------------------


def test_checkpoints_round_trip_and_survive_a_crash(disk):
    epochs = LeaderEpochCheckpoint(disk, "p0/leader-epoch-checkpoint")
    hws = HighWatermarkCheckpoint(disk, "replication-offset-checkpoint")
    assert epochs.read() == () and hws.read() == {}
    entries = (EpochEntry(0, 0), EpochEntry(3, 120), EpochEntry(4, 120))
    epochs.write(entries)
    hws.write({2: 7, 0: 15})
    assert disk.read("p0/leader-epoch-checkpoint") == b"0\n3\n0 0\n3 120\n4 120\n"
    assert disk.read("replication-offset-checkpoint") == b"0\n2\n0 15\n2 7\n"
    disk.crash()
    disk = reopened(disk)
    assert LeaderEpochCheckpoint(disk, "p0/leader-epoch-checkpoint").read() == entries
    assert HighWatermarkCheckpoint(disk, "replication-offset-checkpoint").read() == {0: 15, 2: 7}
    epochs.write([])
    assert epochs.read() == ()


def test_checkpoint_writes_refuse_bad_entries():
    epochs = LeaderEpochCheckpoint(MemoryDisk(), "x")
    with pytest.raises(ValueError, match="does not increase"):
        epochs.write([EpochEntry(3, 0), EpochEntry(3, 5)])
    with pytest.raises(ValueError, match="negative"):
        HighWatermarkCheckpoint(MemoryDisk(), "y").write({0: -1})


@pytest.mark.parametrize(
    ("data", "line", "reason"),
    [
        (b"", 1, "empty file"),
        (b"0\n1\n0 0", 3, "no newline"),
        (b"1\n0\n", 1, "version 1"),
        (b"x\n", 1, "'x' is not a non-negative integer"),
        (b"0\n", 2, "missing the entry count"),
        (b"0\n2\n0 0\n", 4, "count says 2, found 1"),
        (b"0\n1\n0 0\n1 5\n", 4, "count says 1, found 2"),
        (b"0\n1\n0\n", 3, "expected epoch start_offset"),
        (b"0\n1\n0  0\n", 3, "expected epoch start_offset"),
        (b"0\n1\n-1 0\n", 3, "epoch '-1' is not"),
        (b"0\n1\n0 \xff\n", 3, "start_offset '\\\\xff' is not"),
        (b"0\n2\n0 0\n0 5\n", 4, "epoch 0 does not increase"),
        (b"0\n2\n1 9\n2 5\n", 4, "start offset 5 decreases"),
    ],
)
def test_a_corrupt_leader_epoch_checkpoint_names_file_and_line(disk, data, line, reason):
    disk.replace("p0/leader-epoch-checkpoint", data)
    with pytest.raises(CheckpointError) as caught:
        LeaderEpochCheckpoint(disk, "p0/leader-epoch-checkpoint").read()
    path = disk.describe("p0/leader-epoch-checkpoint")
    assert str(caught.value).startswith(f"{path}:{line}: ")
    assert reason in str(caught.value) and caught.value.line == line


def test_a_corrupt_high_watermark_checkpoint_names_file_and_line(disk):
    disk.replace("replication-offset-checkpoint", b"0\n2\n1 5\n1 6\n")
    with pytest.raises(CheckpointError, match=r"checkpoint:4: partition 1 appears twice"):
        HighWatermarkCheckpoint(disk, "replication-offset-checkpoint").read()


# --- real processes --------------------------------------------------------------------------

CHILD = """
import sys, time
from impl.storage import FileDisk, Record, SegmentedLog
log = SegmentedLog(FileDisk(sys.argv[1]), "p0", segment_bytes=1000)
log.append([Record(i, 1, i, b"x" * 100) for i in range(50)])
log.flush()
log.append([Record(i, 1, i, b"y" * 100) for i in range(50, 80)])
if sys.argv[2] == "flush-all":
    log.flush()
print(log.flushed_offset, log.log_end_offset, flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize(("mode", "end"), [("flush-some", 50), ("flush-all", 80)])
def test_sigkill_loses_exactly_the_unflushed_suffix(tmp_path, mode, end):
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), mode], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().split() == [str(end), "80"]
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    log, report = recover(FileDisk(tmp_path), "p0", segment_bytes=1000)
    assert report.clean and log.log_end_offset == end
    assert [r.payload[:1] for r in log.records()] == [b"x"] * 50 + [b"y"] * (end - 50)


def test_storage_reads_no_clock_randomness_or_trio():
    forbidden = {"time", "random", "trio", "spec", "model_check", "asyncio"}
    for path in (ROOT / "impl" / "storage").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                 for a in n.names}
        names |= {n.module.split(".")[0] for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
        assert names & forbidden == set(), path
