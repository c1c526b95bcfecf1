"""Progress for long commands (`check`, `campaign`, `analyze`, `coverage`, `drive`, `prove`):
a live display on a terminal, a plain line now and then otherwise, nothing with `--json` or
`--quiet`; and `die_with_parent`, which every pool of worker processes (the explorer's, Z3's,
a campaign's) starts its workers with.

On a TTY the display is rich's (one line, redrawn in place, gone when the command ends). When
stderr is not a terminal (CI logs, a pipe) a plain line is written at most every
`PLAIN_INTERVAL` seconds, so a quick run writes none and a long one leaves a readable trail.
`ISRLAB_NO_PROGRESS=1` turns both off.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

PLAIN_INTERVAL = 10.0


def _wanted(quiet: bool) -> bool:
    return not quiet and not os.environ.get("ISRLAB_NO_PROGRESS")


class Progress:
    """One task's progress: `update(done, **fields)` with a running count and named figures;
    `total` (when known) gives a bar and an ETA. Use as a context manager."""

    def __init__(self, what: str, total: int | None = None, *, quiet: bool = False,
                 stream: TextIO | None = None, tty: bool | None = None,
                 interval: float | None = None):
        self.what = what
        self.total = total
        self.stream = stream or sys.stderr
        self.enabled = _wanted(quiet)
        self.tty = self.stream.isatty() if tty is None else tty
        # Read here, not bound as a default, so that a test can shorten it.
        self.interval = PLAIN_INTERVAL if interval is None else interval
        self.started = time.perf_counter()
        self.last_plain = self.started
        self.done = 0
        self.fields: dict[str, Any] = {}
        self._rich = None
        self._task = None

    def __enter__(self) -> Progress:
        if self.enabled and self.tty:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            columns = [TextColumn("[bold]{task.description}")]
            if self.total is not None:
                columns += [BarColumn(), MofNCompleteColumn(), TimeRemainingColumn()]
            columns += [TextColumn("{task.fields[figures]}"), TimeElapsedColumn()]
            console = Console(file=self.stream, force_terminal=True)
            self._rich = RichProgress(*columns, console=console, transient=True,
                                      refresh_per_second=4)
            self._rich.start()
            self._task = self._rich.add_task(self.what, total=self.total, figures="")
        return self

    def __exit__(self, *exc) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None

    def figures(self) -> str:
        """The named figures and the rate, as one line's worth of text."""
        seconds = time.perf_counter() - self.started
        parts = [f"{name} {_fmt(value)}" for name, value in self.fields.items()]
        if seconds > 0 and self.done:
            rate = self.done / seconds
            # A slow task (a run a minute) still shows its rate, not 0/s.
            parts.append(f"{rate:,.0f}/s" if rate >= 10 else f"{rate:.2g}/s")
        return "  ".join(parts)

    def update(self, done: int | None = None, **fields: Any) -> None:
        if done is not None:
            self.done = done
        self.fields.update(fields)
        if not self.enabled:
            return
        if self._rich is not None:
            self._rich.update(self._task, completed=self.done, figures=self.figures())
            return
        now = time.perf_counter()
        if now - self.last_plain >= self.interval:
            self.last_plain = now
            of = f"/{self.total:,}" if self.total is not None else ""
            eta = ""
            if self.total and self.done:
                left = (now - self.started) * (self.total - self.done) / self.done
                eta = f"  eta {left:,.0f} s"
            print(f"{self.what}: {self.done:,}{of}  {self.figures()}{eta}  "
                  f"({now - self.started:,.0f} s)", file=self.stream, flush=True)


def _fmt(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def search_progress(progress: Progress) -> Callable[[dict[str, Any]], None]:
    """The explorer's per-level callback, shown on `progress` (states, depth, queue)."""

    def show(p: dict[str, Any]) -> None:
        progress.update(p["distinct"], depth=p["depth"], queue=p["queue"],
                        generated=p["generated"])

    return show


def campaign_progress(progress: Progress) -> Callable[[Any, int, int], None]:
    """A campaign's per-run callback, shown on `progress` (runs, failures, events)."""
    failures = events = 0

    def show(outcome: Any, done: int, total: int) -> None:
        nonlocal failures, events
        failures += bool(outcome.failed)
        events += outcome.events
        progress.update(done, failures=failures, events=events)

    return show


def die_with_parent(parent: int | None = None) -> None:
    """Make this (forked or spawned worker) process die when its parent does: Linux's
    PR_SET_PDEATHSIG, and a check that the parent did not die before it was set."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: workers then end when their pipe breaks
    if parent is not None and os.getppid() != parent:
        os._exit(1)
