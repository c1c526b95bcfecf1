"""A Spark job's progress: its status tracker polled in a thread while the job runs.

The display itself is the caller's (`isrlab analyze` passes `model_check.explore.progress.Progress`):
this package imports nothing of the others."""

from __future__ import annotations

from typing import Any


class Quiet:
    """A progress display that shows nothing (spark-submit, tests)."""

    enabled = False

    def __init__(self, what: str = "") -> None:
        self.what = what

    def __enter__(self) -> Quiet:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, done: int | None = None, **fields: Any) -> None:
        return None


class SparkWatch:
    """While a Spark job runs, polls its status tracker (in a thread) and shows the tasks of
    the active stages on `progress`. Use as a context manager around the job."""

    def __init__(self, spark: Any, progress: Any, every: float = 0.5):
        self.tracker = spark.sparkContext.statusTracker()
        self.progress = progress
        self.every = every
        self._seen: dict[int, int] = {}
        self._stop = None
        self._thread = None

    def poll(self) -> None:
        total = done = 0
        active = set(self.tracker.getActiveStageIds())  # one JVM call per poll
        for stage_id in active:
            info = self.tracker.getStageInfo(stage_id)
            if info is None:
                continue
            self._seen[stage_id] = info.numTasks
            total += info.numTasks
            done += info.numCompletedTasks
        finished = sum(n for s, n in self._seen.items() if s not in active)
        self.progress.update(finished + done, stages=len(self._seen),
                             active=f"{done}/{total} tasks")

    def __enter__(self) -> SparkWatch:
        if not self.progress.enabled:
            return self
        import threading

        self._stop = threading.Event()

        def loop() -> None:
            while not self._stop.wait(self.every):
                try:
                    self.poll()
                except Exception:  # noqa: BLE001 (the JVM going away ends the display only)
                    return

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join(timeout=2)
