"""Acknowledged writes a run lost, and whether Kafka's guarantee excuses them: said out loud.

Kafka before KIP-966 promises an acks=all write only while some in-sync replica keeps it: if
every ISR member crashes with the write still unflushed, the clean election may pick a replica
that lost it and the others truncate to it. The spec's ghost state marks such writes
`excused`, and replay reports them; a run that loses them is within the guarantee, but the
loss is real and a user must see it. `run_losses` compares what the producer was told was
acknowledged with the final logs, splits the missing writes into excused and not, and finds
when the ISR was at its smallest (where the guarantee was spent). `Losses.note()` is the one
line every summary prints (cluster runs, campaigns).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Losses:
    acked: int  # acks=1/all writes the producer saw acknowledged
    lost: tuple[int, ...]  # of those, values missing from their partition's final log
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


def run_losses(history: list[dict], final_logs: dict, excused: set[int] | list[int],
               controller_events: list[dict]) -> Losses:
    """`history`: the producer's history lines; `final_logs`: partition -> [[offset, value],
    ...] (or [value, ...]); `excused`: replay's excused values; `controller_events`: the
    metadata store's event lines in order (their post-states carry each partition's ISR)."""
    final: dict[int, set[int]] = {}
    for p, log in final_logs.items():
        final[int(p)] = {e[1] if isinstance(e, list | tuple) else e for e in log}
    acked = [(h["partition"], h["value"]) for h in history
             if h.get("f") == "send" and h.get("type") == "ok" and h.get("acks") != "0"]
    # A partition with no final log (offline at the end, its leader down) cannot say.
    lost = tuple(sorted(v for p, v in acked if p in final and v not in final[p]))
    excused_lost = tuple(v for v in lost if v in set(excused))
    smallest = None
    for e in controller_events:
        for ps in ((e.get("state") or {}).get("partitions") or ()):
            isr = tuple(ps["isr"])
            if smallest is None or len(isr) < len(smallest[1]):
                smallest = (ps["partition"], isr, e["time_ms"])
    return Losses(len(acked), lost, excused_lost, smallest if lost else None)
