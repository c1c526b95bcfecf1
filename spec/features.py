"""Features of a state: named windows in which a known bug can happen (a follower's HW behind
the leader's, an ISR member without every committed record, two live leaders, ...).

Pure predicates over a `Cluster`. Coverage counts how many runs of the reference broker reach
each (model_check.conformance.coverage), and the guided search steers towards states that have
them (model_check.explore.guided).
"""

from __future__ import annotations

from collections.abc import Callable

from spec.state import NO_LEADER, Cluster


def _true_leader(s: Cluster, p: int):
    leader = s.controller.partitions[p].leader
    return None if leader == NO_LEADER else s.replica(p, leader)


def _any(s: Cluster, test: Callable[[Cluster, int], bool]) -> bool:
    return any(test(s, p) for p in range(len(s.replicas)))


def _stale_follower_hw(s: Cluster, p: int) -> bool:
    lead = _true_leader(s, p)
    return lead is not None and any(
        s.alive[b] and r.leader not in (NO_LEADER, b) and r.high_watermark < lead.high_watermark
        for b, r in enumerate(s.replicas[p]))


def _isr_member_behind_hw(s: Cluster, p: int) -> bool:
    lead = _true_leader(s, p)
    return lead is not None and any(
        s.alive[b] and len(s.replica(p, b).log) < lead.high_watermark
        for b in s.controller.partitions[p].isr)


def _two_leaders(s: Cluster, p: int) -> bool:
    return sum(1 for b, r in enumerate(s.replicas[p]) if s.alive[b] and r.leader == b) > 1


def _divergent_logs(s: Cluster, p: int) -> bool:
    logs = [r.log for b, r in enumerate(s.replicas[p]) if s.alive[b]]
    return any(x[i] != y[i] for x in logs for y in logs for i in range(min(len(x), len(y))))


def _unflushed_committed(s: Cluster, p: int) -> bool:
    return any(s.alive[b] and r.flushed_offset < r.high_watermark
               for b, r in enumerate(s.replicas[p]))


FEATURES: dict[str, Callable[[Cluster], bool]] = {
    "acknowledged write": lambda s: bool(s.acked),
    "a follower's HW behind the leader's (B1's window)": lambda s: _any(s, _stale_follower_hw),
    "an ISR member without every committed record (B5, B7)":
        lambda s: _any(s, _isr_member_behind_hw),
    "committed records unflushed on a live replica (B2, B8)":
        lambda s: _any(s, _unflushed_committed),
    "two live brokers lead one partition (B10's zombie)": lambda s: _any(s, _two_leaders),
    "live logs differ at an offset (B2, B4)": lambda s: _any(s, _divergent_logs),
    "partition offline": lambda s: any(ps.leader == NO_LEADER for ps in s.controller.partitions),
    "ISR of one": lambda s: any(len(ps.isr) == 1 for ps in s.controller.partitions),
    "a write lost in a crash": lambda s: bool(s.crash_losses),
}
