"""Disks with the broker's own write buffer: a crash keeps exactly what was flushed.

Kafka acknowledges writes before they are on disk (docs/protocol.md, "Crashes and
flushing"). The write buffer is
modelled explicitly: `append` puts bytes into a per-file buffer inside this process and `flush`
makes them durable. A crash keeps every file's durable bytes and, to model a write cut off
half-way, the first `torn_bytes` of each file's buffer; everything else in the buffers is lost.

`MemoryDisk` serves the deterministic simulator. `FileDisk` keeps the durable part in real files
and moves a buffer to the OS only on flush (`os.write` then `os.fsync`), so SIGKILL of the
process loses the same bytes that `MemoryDisk.crash()` discards. A differential test drives
both through one script of operations and compares what they hold after each step.

Operations other than `append` are durable when they return: `truncate`, `delete`, `replace`
(write a temporary file, fsync, rename, fsync the directory) and file creation. File names are
relative POSIX paths such as "p0/00000000000000000000.log". Left out: power loss (which could
also lose data the OS had but had not written), disk-full handling, and fsync errors, which
are raised as they come.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path


class StorageError(Exception):
    """A storage operation failed or found bad data; the message names the file."""


def _check_name(name: str) -> None:
    parts = name.split("/")
    if not name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"bad file name {name!r}: want a relative path like 'p0/x.log'")


class Disk(ABC):
    """Files with a durable part and an in-process write buffer (the unflushed suffix)."""

    @abstractmethod
    def append(self, name: str, data: bytes) -> None:
        """Buffer `data` at the end of the file; a missing file is created (durably, empty)."""

    @abstractmethod
    def flush(self, name: str) -> None:
        """Make the file's buffered bytes durable."""

    @abstractmethod
    def flush_all(self) -> None:
        """Flush every file with buffered bytes, in name order."""

    @abstractmethod
    def truncate(self, name: str, size: int) -> None:
        """Cut the file to `size` bytes, durably; buffered bytes below `size` stay buffered."""

    @abstractmethod
    def read(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        """Bytes [start, end) of the file as this process sees it: durable part then buffer."""

    @abstractmethod
    def size(self, name: str) -> int:
        """The file's length in bytes, buffer included."""

    @abstractmethod
    def pending_bytes(self, name: str) -> int:
        """How many of the file's bytes are buffered, not yet durable."""

    @abstractmethod
    def exists(self, name: str) -> bool:
        """Whether the file exists."""

    @abstractmethod
    def listdir(self, directory: str) -> list[str]:
        """Sorted names of the files directly in `directory` ([] if it does not exist)."""

    @abstractmethod
    def delete(self, name: str) -> None:
        """Remove the file, durably."""

    @abstractmethod
    def replace(self, name: str, data: bytes) -> None:
        """Atomically give the file exactly `data`, durably: a crash leaves old or new."""

    @abstractmethod
    def crash(self, torn_bytes: int = 0) -> None:
        """Lose every buffer except its first `torn_bytes` bytes, which become durable."""

    @abstractmethod
    def corrupt(self, name: str, position: int, mask: int = 0xFF) -> None:
        """Flip bits of one durable byte, as bit rot would (fault injection)."""

    def describe(self, name: str) -> str:
        """How to name the file in a message to a person."""
        return name

    def release(self, name: str) -> None:
        """Drop any handle kept for the file if nothing is buffered (a hint; may do nothing)."""
        return None

    def close(self) -> None:
        """Clean shutdown: flush everything and release all handles."""
        self.flush_all()

    def __enter__(self) -> Disk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_range(disk: Disk, name: str, start: int, end: int | None) -> int:
    total = disk.size(name)
    end = total if end is None else end
    if not 0 <= start <= end <= total:
        raise ValueError(f"{disk.describe(name)}: range [{start}, {end}) outside [0, {total}]")
    return end


class MemoryDisk(Disk):
    """Byte buffers in memory, for the simulator. Deterministic: no clock, no randomness."""

    def __init__(self) -> None:
        self._durable: dict[str, bytearray] = {}
        self._pending: dict[str, bytearray] = {}

    def _require(self, name: str) -> bytearray:
        try:
            return self._durable[name]
        except KeyError:
            raise StorageError(f"{name}: no such file") from None

    def append(self, name: str, data: bytes) -> None:
        if name not in self._durable:
            _check_name(name)
            self._durable[name] = bytearray()
        self._pending.setdefault(name, bytearray()).extend(data)

    def flush(self, name: str) -> None:
        durable = self._require(name)
        pending = self._pending.pop(name, None)
        if pending:
            durable.extend(pending)

    def flush_all(self) -> None:
        for name in sorted(self._pending):
            self.flush(name)

    def truncate(self, name: str, size: int) -> None:
        durable = self._require(name)
        _check_range(self, name, 0, size)
        if size <= len(durable):
            del durable[size:]
            self._pending.pop(name, None)
        else:
            del self._pending[name][size - len(durable):]

    def read(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        durable = self._require(name)
        end = _check_range(self, name, start, end)
        cut = len(durable)
        if end <= cut:
            return bytes(durable[start:end])
        pending = self._pending[name]
        if start >= cut:
            return bytes(pending[start - cut:end - cut])
        return bytes(durable[start:]) + bytes(pending[:end - cut])

    def size(self, name: str) -> int:
        return len(self._require(name)) + self.pending_bytes(name)

    def pending_bytes(self, name: str) -> int:
        return len(self._pending.get(name, b""))

    def exists(self, name: str) -> bool:
        return name in self._durable

    def listdir(self, directory: str) -> list[str]:
        prefix = directory.rstrip("/") + "/"
        return sorted(
            n[len(prefix):] for n in self._durable
            if n.startswith(prefix) and "/" not in n[len(prefix):]
        )

    def delete(self, name: str) -> None:
        self._require(name)
        del self._durable[name]
        self._pending.pop(name, None)

    def replace(self, name: str, data: bytes) -> None:
        _check_name(name)
        self._durable[name] = bytearray(data)
        self._pending.pop(name, None)

    def crash(self, torn_bytes: int = 0) -> None:
        for name in sorted(self._pending):
            self._durable[name].extend(self._pending[name][:torn_bytes])
        self._pending.clear()

    def corrupt(self, name: str, position: int, mask: int = 0xFF) -> None:
        durable = self._require(name)
        if not 0 <= position < len(durable):
            raise ValueError(f"{name}: byte {position} is not durable")
        durable[position] ^= mask


@dataclass(slots=True)
class _Handle:
    fd: int
    durable_size: int
    pending: bytearray = field(default_factory=bytearray)


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileDisk(Disk):
    """Real files under `root`; buffers live in this process until flush (os.write + fsync)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._handles: dict[str, _Handle] = {}

    def _path(self, name: str) -> Path:
        _check_name(name)
        return self.root / name

    def describe(self, name: str) -> str:
        return str(self.root / name)

    def _ensure_dir(self, directory: Path) -> None:
        if not directory.is_dir():
            self._ensure_dir(directory.parent)
            directory.mkdir()
            _fsync_dir(directory.parent)

    def _open(self, name: str, create: bool) -> _Handle:
        handle = self._handles.get(name)
        if handle is not None:
            return handle
        path = self._path(name)
        existed = path.is_file()
        if not existed and not create:
            raise StorageError(f"{path}: no such file")
        self._ensure_dir(path.parent)
        # O_APPEND: writes land at the end even after ftruncate; pread still reads anywhere.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if not existed:
            _fsync_dir(path.parent)
        handle = self._handles[name] = _Handle(fd, os.fstat(fd).st_size)
        return handle

    def append(self, name: str, data: bytes) -> None:
        self._open(name, create=True).pending.extend(data)

    def flush(self, name: str) -> None:
        handle = self._handles.get(name)
        if handle is None:
            if not self.exists(name):
                raise StorageError(f"{self.describe(name)}: no such file")
            return
        if handle.pending:
            _write_all(handle.fd, handle.pending)
            os.fsync(handle.fd)
            handle.durable_size += len(handle.pending)
            handle.pending = bytearray()

    def flush_all(self) -> None:
        for name in sorted(self._handles):
            self.flush(name)

    def truncate(self, name: str, size: int) -> None:
        handle = self._open(name, create=False)
        _check_range(self, name, 0, size)
        if size <= handle.durable_size:
            os.ftruncate(handle.fd, size)
            os.fsync(handle.fd)
            handle.durable_size = size
            handle.pending.clear()
        else:
            del handle.pending[size - handle.durable_size:]

    def read(self, name: str, start: int = 0, end: int | None = None) -> bytes:
        end = _check_range(self, name, start, end)
        handle = self._handles.get(name)
        cut = handle.durable_size if handle is not None else end
        out = b""
        if start < cut:
            fd = handle.fd if handle is not None else os.open(self._path(name), os.O_RDONLY)
            try:
                out = os.pread(fd, min(end, cut) - start, start)
            finally:
                if handle is None:
                    os.close(fd)
            if len(out) != min(end, cut) - start:
                raise StorageError(f"{self.describe(name)}: file changed size under us")
        if end > cut:
            out += bytes(handle.pending[max(start - cut, 0):end - cut])
        return out

    def size(self, name: str) -> int:
        handle = self._handles.get(name)
        if handle is not None:
            return handle.durable_size + len(handle.pending)
        try:
            return self._path(name).stat().st_size
        except FileNotFoundError:
            raise StorageError(f"{self.describe(name)}: no such file") from None

    def pending_bytes(self, name: str) -> int:
        handle = self._handles.get(name)
        return len(handle.pending) if handle is not None else 0

    def exists(self, name: str) -> bool:
        return name in self._handles or self._path(name).is_file()

    def listdir(self, directory: str) -> list[str]:
        path = self.root / directory
        if not path.is_dir():
            return []
        return sorted(entry.name for entry in os.scandir(path) if entry.is_file())

    def _close(self, name: str) -> None:
        handle = self._handles.pop(name, None)
        if handle is not None:
            os.close(handle.fd)

    def delete(self, name: str) -> None:
        path = self._path(name)
        self._close(name)
        try:
            path.unlink()
        except FileNotFoundError:
            raise StorageError(f"{path}: no such file") from None
        _fsync_dir(path.parent)

    def replace(self, name: str, data: bytes) -> None:
        path = self._path(name)
        self._close(name)
        self._ensure_dir(path.parent)
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        _fsync_dir(path.parent)

    def crash(self, torn_bytes: int = 0) -> None:
        # What SIGKILL does: the torn prefix had reached the OS, the rest of the buffer had not.
        for name in sorted(self._handles):
            handle = self._handles[name]
            if torn_bytes and handle.pending:
                _write_all(handle.fd, handle.pending[:torn_bytes])
            os.close(handle.fd)
        self._handles.clear()

    def corrupt(self, name: str, position: int, mask: int = 0xFF) -> None:
        handle = self._handles.get(name)
        durable = handle.durable_size if handle is not None else self.size(name)
        if not 0 <= position < durable:
            raise ValueError(f"{self.describe(name)}: byte {position} is not durable")
        # A separate descriptor: pwrite on an O_APPEND one would append on Linux.
        fd = os.open(self._path(name), os.O_RDWR)
        try:
            os.pwrite(fd, bytes([os.pread(fd, 1, position)[0] ^ mask]), position)
            os.fsync(fd)
        finally:
            os.close(fd)

    def release(self, name: str) -> None:
        handle = self._handles.get(name)
        if handle is not None and not handle.pending:
            self._close(name)

    def close(self) -> None:
        self.flush_all()
        for name in sorted(self._handles):
            self._close(name)
