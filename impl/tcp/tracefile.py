"""A node's trace streamed to its NDJSON file, written ahead of the messages it sends.

`FileTrace` is `NodeTrace` writing to a file descriptor: lines collect in memory and `flush()`
hands them to the OS with one `os.write`. The driver flushes before it lets any message of the
same input reach a socket, so a SIGKILL never leaves a message delivered whose send line is
lost (the OS keeps what was written). A restarted process resumes its node's numbering:
`seq` continues after the file's last line, and message ids jump to the next block of a
million above any id of this node that any trace file of the run mentions, so ids of
untraced messages from the previous incarnation are never reused.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from impl.trace import FORMAT, NodeTrace, dumps

MESSAGE_ID_BLOCK = 1_000_000


def repair_tail(path: Path) -> bytes:
    """Cut a partial last line (a write cut off by SIGKILL); return the last complete line."""
    data = path.read_bytes() if path.exists() else b""
    cut = data.rfind(b"\n") + 1
    if cut != len(data):
        os.truncate(path, cut)
    data = data[:cut]
    start = data.rfind(b"\n", 0, max(cut - 1, 0)) + 1
    return data[start:cut].strip()


def resume_counters(path: Path, node: str) -> tuple[int, int]:
    """(next seq, message counter) for a node whose trace file already exists."""
    import json

    last = repair_tail(path)
    seq = 0
    if last:
        body = json.loads(last)
        seq = body.get("seq", -1) + 1 if body.get("kind") != "header" else 0
    pattern = re.compile(rf'"{re.escape(node)}:m(\d+)"')
    highest = 0
    for other in sorted(path.parent.glob("*.ndjson")):
        for match in pattern.finditer(other.read_text(encoding="utf-8", errors="replace")):
            highest = max(highest, int(match.group(1)))
    return seq, (highest // MESSAGE_ID_BLOCK + 1) * MESSAGE_ID_BLOCK if highest else 0


class FileTrace(NodeTrace):
    """NodeTrace on a file, flushed explicitly (see the module docstring)."""

    __slots__ = ("fd",)

    def __init__(self, node: str, header: dict, path: Path | None, resume: bool = False,
                 enabled: bool = True):
        NodeTrace.__init__(self, node, header, None, enabled=False)
        self.enabled = enabled and path is not None
        self.fd: int | None = None
        if not self.enabled:
            return
        if resume and path.exists():
            self.seq, self.sent = resume_counters(path, node)
        else:
            self._write({"kind": "header", "format": FORMAT, "node": node, **header})
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.flush()

    def _write(self, body: dict) -> None:
        self.lines.append(dumps(body))

    def flush(self) -> None:
        if not self.lines or self.fd is None:
            return
        data = ("\n".join(self.lines) + "\n").encode("utf-8")
        self.lines.clear()
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    def close(self) -> None:
        self.flush()
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
