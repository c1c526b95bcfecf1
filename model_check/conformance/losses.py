"""Acknowledged writes a run lost, and whether Kafka's guarantee excuses them: said out loud.

Kafka before KIP-966 promises an acks=all write only while some in-sync replica keeps it: if
every ISR member crashes with the write still unflushed, the clean election may pick a replica
that lost it and the others truncate to it. The spec's ghost state marks such writes
`excused`, and replay reports them; a run that loses them is within the guarantee, but the
loss is real and a user must see it. `run_losses` counts the acknowledged writes lost, splits
them into excused and not, and finds when the ISR was at its smallest (where the guarantee was
spent). `Losses.note()` is the one line every summary prints (cluster runs, campaigns).

A lost acknowledged write has one definition, the history checker's `lost-write`
(model_check.conformance.history): an acks=1/all write acknowledged at offset o whose value is
not at o in its partition's final log (or, for a partition with no final log, in the last read
covering o). Spark's `writes_lost` (pyspark_harness.jobs.acked_writes_lost) is the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from model_check.conformance.history import HistoryResult, check_history
from vocab.anomalies import LOST_WRITE


@dataclass(frozen=True)
class Losses:
    acked: int  # acks=1/all writes the producer saw acknowledged
    lost: tuple[int, ...]  # of those, the values of the history checker's lost-write
    excused: tuple[int, ...]  # of the lost, those the pre-KIP-966 guarantee excuses
    smallest_isr: tuple[int, tuple[int, ...], int] | None  # (partition, ISR, time ms)

    @property
    def unexcused(self) -> tuple[int, ...]:
        return tuple(v for v in self.lost if v not in set(self.excused))

    def note(self) -> str | None:
        """One line when writes were lost (None when none were)."""
        if not self.lost:
            return None
        where = ""
        if self.smallest_isr is not None:
            p, isr, t = self.smallest_isr
            members = ", ".join(map(str, isr))
            where = f", ISR of p{p} shrank to {{{members}}} at {t / 1000:.1f} s"
        parts = []
        if self.excused:
            parts.append(f"{len(self.excused)} acknowledged writes lost: allowed by the "
                         f"pre-KIP-966 guarantee (every in-sync replica lost them "
                         f"unflushed){where}")
        if self.unexcused:
            parts.append(f"{len(self.unexcused)} acknowledged writes lost that the guarantee "
                         "does not excuse")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {"acked": self.acked, "lost": len(self.lost), "excused": len(self.excused),
                "unexcused": len(self.unexcused),
                "smallest_isr": None if self.smallest_isr is None else {
                    "partition": self.smallest_isr[0], "isr": list(self.smallest_isr[1]),
                    "time_ms": self.smallest_isr[2]},
                "note": self.note()}


def final_values(final_logs: dict) -> dict[int, list]:
    """partition -> its final log as values by offset (the history checker's form), from
    `[[offset, value], ...]` or `[value, ...]`; an offset the log lacks holds a placeholder
    no write equals."""
    out: dict[int, list] = {}
    for p, log in final_logs.items():
        pairs = [tuple(e) if isinstance(e, list | tuple) else (i, e) for i, e in enumerate(log)]
        values: list = [object() for _ in range(max((o for o, _ in pairs), default=-1) + 1)]
        for o, v in pairs:
            values[o] = v
        out[int(p)] = values
    return out


def run_losses(history: list[dict], final_logs: dict, excused: set[int] | list[int],
               controller_events: list[dict]) -> Losses:
    """`history`: the run's history lines (the consumer's reads say where no final log
    does); `final_logs`: partition -> [[offset, value], ...] (or [value, ...]); `excused`:
    replay's excused values; `controller_events`: the metadata store's event lines in order
    (their post-states carry each partition's ISR)."""
    return losses_of(check_history(history, final_values(final_logs)), excused,
                     controller_events)


def losses_of(result: HistoryResult, excused: set[int] | list[int],
              controller_events: list[dict]) -> Losses:
    """The Losses of a history checked with the run's final logs (see `run_losses`)."""
    lost = tuple(sorted(a.values[0] for a in result.anomalies if a.kind == LOST_WRITE))
    excused_lost = tuple(v for v in lost if v in set(excused))
    smallest = None
    for e in controller_events:
        for ps in ((e.get("state") or {}).get("partitions") or ()):
            isr = tuple(ps["isr"])
            if smallest is None or len(isr) < len(smallest[1]):
                smallest = (ps["partition"], isr, e["time_ms"])
    acked = sum(n for level, n in result.acked.items() if level != "0")
    return Losses(acked, lost, excused_lost, smallest if lost else None)
