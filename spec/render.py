"""Readable text for states and messages, used by scenario transcripts and counterexamples.

The layout is stable on purpose: transcripts compare it byte for byte.
"""

from __future__ import annotations

from spec.config import Config
from spec.state import (
    ACCEPTED,
    NO_LEADER,
    PENDING,
    Cluster,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    Replica,
)


def _isr(isr) -> str:
    return "{" + ",".join(str(b) for b in isr) + "}"


def _log(r: Replica) -> str:
    return " ".join(str(rec) for rec in r.log) or "-"


def _cache(r: Replica) -> str:
    return " ".join(f"{e}:{o}" for e, o in r.epoch_cache) or "-"


def _role(s: Cluster, p: int, b: int) -> str:
    r = s.replica(p, b)
    if not s.alive[b]:
        return "down"
    if r.leader == b:
        return f"leader e{r.leader_epoch}"
    if r.leader == NO_LEADER and r.leader_epoch == -1:
        return "no view"
    suffix = " trunc" if r.truncation_pending else ""
    return f"follow {r.leader if r.leader != NO_LEADER else '-'} e{r.leader_epoch}{suffix}"


def render_message(m) -> str:
    if isinstance(m, FetchRequest):
        return (f"Fetch(offset={m.fetch_offset}, last_epoch={m.last_fetched_epoch}, "
                f"epoch={m.current_leader_epoch}) to {m.leader}")
    if isinstance(m, EpochRequest):
        return f"OffsetsForLeaderEpoch(epoch={m.epoch}, current={m.current_leader_epoch}) to {m.leader}"
    if isinstance(m, FetchResponse):
        if m.kind == "records":
            recs = " ".join(str(r) for r in m.records) or "no records"
            return f"FetchResponse({recs}, hw={m.high_watermark}) from {m.leader} e{m.leader_epoch}"
        if m.kind == "error":
            return f"FetchResponse({m.error}) from {m.leader} e{m.leader_epoch}"
        return (f"{'EpochAnswer' if m.kind == 'epoch' else 'DivergingEpoch'}"
                f"(epoch={m.epoch}, end={m.end_offset}) from {m.leader} e{m.leader_epoch}")
    return str(m)


def render(config: Config, s: Cluster) -> str:
    """The cluster as a table: controller, replicas, messages in flight, clients."""
    lines = []
    for p, ps in enumerate(s.controller.partitions):
        leader = ps.leader if ps.leader != NO_LEADER else "none"
        line = (f"p{p} controller: leader={leader} epoch={ps.leader_epoch} "
                f"isr={_isr(ps.isr)} partition_epoch={ps.partition_epoch}")
        if config.eligible_leader_replicas_enable:
            line += f" elr={_isr(ps.elr)} last_known_elr={_isr(ps.last_known_elr)}"
        lines.append(line)
    if failovers := config.max_controller_failovers > 0:
        c = s.controller
        state = "up" if s.alive[c.active] and c.registered[c.active] >= 0 else "down"
        seen = " ".join(f"b{b}:c{s.controller_epoch_seen(b)}" for b in range(config.brokers))
        lines.append(f"controller: broker {c.active} ({state}), controller epoch {c.epoch}; "
                     f"seen by brokers {seen}")
    rows = [("replica", "role", "log", "LEO", "HW", "flushed", "epochs", "isr")]
    for p in range(config.partitions):
        for b in range(config.brokers):
            r = s.replica(p, b)
            rows.append((f"p{p}/b{b}", _role(s, p, b), _log(r), str(r.log_end_offset),
                         str(r.high_watermark), str(r.flushed_offset), _cache(r),
                         _isr(r.isr) if r.leader_epoch >= 0 else "-"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    flight = []
    for m in sorted(s.leader_and_isr):
        sender = f" from controller {m.controller} c{m.controller_epoch}" if failovers else ""
        flight.append(f"LeaderAndIsr(p{m.partition} leader={m.leader} epoch={m.leader_epoch} "
                      f"isr={_isr(m.isr)}){sender} to {m.broker}")
    for m in sorted(s.alter_partitions):
        ask = f"AlterPartition(p{m.partition} isr={_isr(m.isr)} at e{m.leader_epoch}/pe{m.partition_epoch})"
        flight.append(f"{ask} from {m.leader}" if m.answer == PENDING
                      else f"{ask} {'accepted' if m.answer == ACCEPTED else 'rejected'} to {m.leader}")
    for p, row in enumerate(s.fetches):
        for f, m in enumerate(row):
            if m is not None:
                arrow = "->" if isinstance(m, FetchRequest | EpochRequest) else "<-"
                flight.append(f"p{p} b{f} {arrow} {render_message(m)}")
    for m in sorted(s.produce_requests):
        flight.append(f"Produce(p{m.partition} v{m.value}) to {m.broker}")
    for p in range(config.partitions):
        for b in range(config.brokers):
            for w in s.replica(p, b).purgatory:
                flight.append(f"p{p} b{b} purgatory: v{w.value} at {w.offset}")
    if flight:
        lines.append("in flight: " + "; ".join(flight))
    if s.acked:
        lines.append("acked: " + " ".join(f"v{w.value}@p{w.partition}:{w.offset}"
                                         for w in sorted(s.acked, key=lambda w: w.value)))
    if s.consumed:
        lines.append("consumed: " + " ".join(f"v{w.value}@p{w.partition}:{w.offset}"
                                            for w in sorted(s.consumed, key=lambda w: (w.partition, w.offset))))
    if s.excused:
        lines.append("excused (all ISR down, one lost them): "
                     + " ".join(f"v{v}" for v in sorted(s.excused)))
    if s.crash_losses:
        lines.append("lost in crashes: " + " ".join(
            f"v{v}@b{b}" for v, b in sorted(s.crash_losses)))
    if not all(s.alive) or s.crashes or s.expiries:
        lines.append("brokers: " + " ".join(
            f"b{b}={'up' if up else 'down'}/epoch{s.broker_epochs[b]}"
            + ("" if s.controller.registered[b] >= 0 else "/no-session")
            for b, up in enumerate(s.alive)))
    return "\n".join(lines)
