"""The safety invariants, named as everywhere else (checker output, traces, Spark columns).

Each is a predicate `name(config, state) -> str | None`: None when it holds, else one line
saying where it fails. Each docstring names the Kafka guarantee it encodes and how crashed and
restarted replicas count.

How crashes count, in one place. Kafka promises that a committed record survives "as long as
at least one in-sync replica is alive". The model therefore:
- exempts a replica from per-replica checks while it is down (its log was cut to the flushed
  offset; being behind is what a crash means), and checks it again once it is up;
- keeps a ghost set `excused` of record values for which the condition failed: after some
  crash or session expiry, every member of the controller's ISR was down (Kafka counts a broker
  whose session expired as failed, and the controller drops it from the ISR) and at least one
  of them had lost the record
  (clean election may later pick exactly that one). Only those records may be missing from
  later leaders; a committed record that every ISR member kept through the crashes stays due. acks=1 writes are
  never excused (B10), and unclean election excuses nothing (B9): both are losses by design
  that AckedWritesDurable is meant to show.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from spec.config import Config
from spec.state import NO_LEADER, Cluster


def log_has(log, offset: int, value: int) -> bool:
    return offset < len(log) and log[offset].value == value


def _lost_at_leader(s: Cluster, writes: Iterable, say: Callable[..., str]) -> str | None:
    """`say(write, leader, what the leader has at its offset)` of the first of `writes` (records
    with a partition, offset and value) that its partition's true leader lacks; None when each
    is there or its partition has no leader."""
    for w in writes:
        leader = s.true_leader(w.partition)
        if leader == NO_LEADER:
            continue
        log = s.replica(w.partition, leader).log
        if not log_has(log, w.offset, w.value):
            return say(w, leader, str(log[w.offset]) if w.offset < len(log) else "nothing")
    return None


def HighWatermarkBelowLogEnd(config: Config, s: Cluster) -> str | None:
    """HW <= LEO on every replica (a replica never exposes what it does not have).

    Crashed replicas included: recovery cuts the HW together with the log.
    """
    for p, row in enumerate(s.replicas):
        for b, r in enumerate(row):
            if r.high_watermark > r.log_end_offset:
                return f"p{p} broker {b}: HW {r.high_watermark} > LEO {r.log_end_offset}"
    return None


def LeaderInIsr(config: Config, s: Cluster) -> str | None:
    """The controller's leader is in the controller's ISR, and a live broker that leads in its
    own view lists itself in its ISR view (clean election only ever picks ISR members; unclean
    election resets the ISR to the new leader)."""
    for p, ps in enumerate(s.controller.partitions):
        if ps.leader != NO_LEADER and ps.leader not in ps.isr:
            return f"p{p}: leader {ps.leader} not in ISR {list(ps.isr)}"
        for b, r in enumerate(s.replicas[p]):
            if s.alive[b] and r.leader == b and b not in r.isr:
                return f"p{p}: broker {b} leads outside its ISR view {list(r.isr)}"
    return None


def NoCommittedDataLoss(config: Config, s: Cluster) -> str | None:
    """Every record below the true leader's HW is at the same offset in every live member of
    the controller's ISR (hachikuji/kafka-specification's StrongIsr).

    This is the ISR's promise: committed means "every ISR member has it". The true leader is
    the controller's leader, up, leading in its own view at the controller's epoch. ISR members
    that are down are exempt until they restart (they may be in the ISR only until their
    session expires, or as the last member of an offline partition).
    """
    for p in range(config.partitions):
        leader = s.true_leader(p)
        if leader == NO_LEADER:
            continue
        lr = s.replica(p, leader)
        for member in s.controller.partitions[p].isr:
            if member == leader or not s.alive[member]:
                continue
            log = s.replica(p, member).log
            for offset in range(lr.high_watermark):
                if offset >= len(log) or log[offset] != lr.log[offset]:
                    have = str(log[offset]) if offset < len(log) else "nothing"
                    return (f"p{p} offset {offset}: leader {leader} has {lr.log[offset]} below "
                            f"HW {lr.high_watermark}, ISR member {member} has {have}")
    return None


def LogMatching(config: Config, s: Cluster) -> str | None:
    """No two replicas hold different records at an offset below both their HWs.

    Committed prefixes agree across all replicas, up or down: a crash only shortens a log.
    A replica may still hold a record whose loss was excused (every ISR member was down and
    one lost it) until it truncates; that offset is not compared.
    """
    for p, row in enumerate(s.replicas):
        for b1 in range(len(row)):
            for b2 in range(b1 + 1, len(row)):
                r1, r2 = row[b1], row[b2]
                for offset in range(min(r1.high_watermark, r2.high_watermark)):
                    x, y = r1.log[offset], r2.log[offset]
                    if x != y and x.value not in s.excused and y.value not in s.excused:
                        return (f"p{p} offset {offset}: broker {b1} has {r1.log[offset]}, "
                                f"broker {b2} has {r2.log[offset]}, both below HW")
    return None


def AckedWritesDurable(config: Config, s: Cluster) -> str | None:
    """Every write acknowledged to the producer is at its offset in the true leader's log.

    With acks=all and clean election this holds unless every ISR replica lost the write in
    crashes (then it is in `excused`: every ISR member was down at once and one of them lost it). acks=1 writes (B10) and any write under unclean election
    (B9) are not excused: their loss is a trade-off by design, and this invariant shows it.
    """
    return _lost_at_leader(
        s, (w for w in sorted(s.acked) if w.value not in s.excused),
        lambda w, leader, have: f"p{w.partition}: acknowledged v{w.value} at offset {w.offset} "
                                f"(acks={config.acks}) lost: leader {leader} has {have}")


def _due_writes(config: Config, s: Cluster):
    """The acknowledged acks=all writes KIP-966 promises: those fewer than min ISR replicas
    lost in crashes, while no unclean or last-known-leader election has happened. With min ISR
    1 it tolerates no loss at all, and AckedWritesDurable already says what is left: none."""
    if not config.kip966_promises or s.controller.unclean_elections:
        return
    losers: dict[int, int] = {}
    for value, _ in s.crash_losses:
        losers[value] = losers.get(value, 0) + 1
    for w in sorted(s.acked):
        if losers.get(w.value, 0) < config.min_insync_replicas:
            yield w, losers.get(w.value, 0)


def AckedWritesDurableKip966(config: Config, s: Cluster) -> str | None:
    """No acknowledged acks=all write is lost unless at least min ISR replicas lost it in
    crashes (unflushed data), or an unclean or last-known-leader election took place.

    KIP-966's promise ("MinISR-1 tolerance to data loss unclean shutdown events"), stated
    without the `excused` escape: where the pre-KIP-966 guarantee (AckedWritesDurable) forgives
    the last ISR replica losing a write, this one does not. It fails for B8 (last replica
    standing) with ELR off and min ISR 2, and holds with ELR on.
    """
    due = dict(_due_writes(config, s))  # write -> replicas that lost it in crashes
    return _lost_at_leader(
        s, due, lambda w, leader, have: f"p{w.partition}: acknowledged v{w.value} at offset "
        f"{w.offset} lost: leader {leader} has {have}; {due[w]} replica(s) lost it in crashes, "
        f"fewer than min ISR {config.min_insync_replicas}")


def LeaderCandidatesComplete(config: Config, s: Cluster) -> str | None:
    """Every live member of the controller's ISR or ELR holds every write KIP-966 promises
    (see AckedWritesDurableKip966): any of them may be elected next.

    A crashed member is exempt while down; with ELR on it leaves the ELR when it registers
    again (an unclean shutdown), and a fenced broker leaves the ISR. With ELR off, the last ISR
    member stays in the ISR through its crash, and comes back without what it lost: B8's first
    step.
    """
    due = list(_due_writes(config, s))
    if not due:
        return None
    for p, ps in enumerate(s.controller.partitions):
        for b in sorted(set(ps.isr) | set(ps.elr)):
            if not s.alive[b]:
                continue
            log = s.replica(p, b).log
            for w, _ in due:
                if w.partition == p and not log_has(log, w.offset, w.value):
                    role = "ISR" if b in ps.isr else "ELR"
                    return (f"p{p}: {role} member {b} lacks acknowledged v{w.value} at offset "
                            f"{w.offset}")
    return None


def EligibleReplicasWellFormed(config: Config, s: Cluster) -> str | None:
    """KIP-966 bookkeeping: ELR and ISR are disjoint sets of the partition's replicas, the ELR
    is empty while the ISR has min ISR members, and both ELR fields stay empty with ELR off."""
    for p, ps in enumerate(s.controller.partitions):
        replicas = set(config.assignment(p))
        # Checked in every explored state, where the ELR fields are mostly empty: no sets
        # are built for them then.
        if ps.elr and not set(ps.elr).isdisjoint(ps.isr):
            return f"p{p}: ELR {list(ps.elr)} and ISR {list(ps.isr)} overlap"
        if not (replicas.issuperset(ps.isr) and replicas.issuperset(ps.elr)
                and replicas.issuperset(ps.last_known_elr)):
            return f"p{p}: ISR/ELR name a broker that holds no replica"
        if (ps.elr and len(set(ps.elr)) != len(ps.elr)) or len(set(ps.isr)) != len(ps.isr):
            return f"p{p}: a broker is listed twice in ISR {list(ps.isr)} or ELR {list(ps.elr)}"
        if ps.elr and len(ps.isr) >= config.min_insync_replicas:
            return f"p{p}: ELR {list(ps.elr)} beside an ISR of min ISR size {list(ps.isr)}"
        if not config.eligible_leader_replicas_enable and (ps.elr or ps.last_known_elr):
            return f"p{p}: ELR fields set with ELR off"
    return None


def ConsumerNeverSeesUncommitted(config: Config, s: Cluster) -> str | None:
    """Every record a consumer read is still at its offset in the true leader's log.

    Consumers read below HW only, so what they saw was committed and must never be undone
    (reading a record that is later truncated is an uncommitted read). Excused as for
    AckedWritesDurable when every ISR replica lost it in crashes.
    """
    return _lost_at_leader(
        s, (c for c in sorted(s.consumed) if c.value not in s.excused),
        lambda c, leader, have: f"p{c.partition}: consumer read v{c.value} at offset "
                                f"{c.offset}, leader {leader} now has {have}")


def LeaderEpochMonotonic(config: Config, s: Cluster) -> str | None:
    """Leader epochs only grow: along every log, along every epoch cache (with non-decreasing
    start offsets), and no replica holds a record or view from an epoch the controller has not
    yet created."""
    # Checked in every explored state: one pass per log, no lists built while it holds.
    for p, row in enumerate(s.replicas):
        current = s.controller.partitions[p].leader_epoch
        for b, r in enumerate(row):
            top = -1
            for rec in r.log:
                if rec.epoch < top:
                    epochs = [x.epoch for x in r.log]
                    return f"p{p} broker {b}: log epochs go down: {epochs}"
                top = rec.epoch
            cache = r.epoch_cache
            if len(cache) > 1:
                for (e1, o1), (e2, o2) in zip(cache, cache[1:], strict=False):
                    if e1 >= e2 or o1 > o2:
                        return f"p{p} broker {b}: epoch cache not increasing: {list(cache)}"
            if top > current or r.leader_epoch > current:
                return f"p{p} broker {b}: epoch beyond the controller's {current}"
    return None


def SingleLeaderPerEpoch(config: Config, s: Cluster) -> str | None:
    """No two live brokers believe they lead the same partition in the same leader epoch."""
    for p, row in enumerate(s.replicas):
        seen: dict[int, int] = {}
        for b, r in enumerate(row):
            if s.alive[b] and r.leader == b:
                if r.leader_epoch in seen:
                    return f"p{p}: brokers {seen[r.leader_epoch]} and {b} both lead epoch {r.leader_epoch}"
                seen[r.leader_epoch] = b
    return None


def SingleControllerPerEpoch(config: Config, s: Cluster) -> str | None:
    """No two controllers act in one controller epoch: every LeaderAndIsr in flight carries a
    controller epoch no later than the store's, those of the store's epoch come from the
    broker that holds the role, any two with one epoch come from one controller, and no broker
    has seen an epoch the store has not reached (Kafka fences a stale controller by its
    controller epoch: KAFKA-1120 and the ZooKeeper controller's epoch znode)."""
    c = s.controller
    sender: dict[int, int] = {c.epoch: c.active}
    for m in sorted(s.leader_and_isr):
        if m.controller_epoch > c.epoch:
            return (f"LeaderAndIsr to {m.broker} carries controller epoch {m.controller_epoch}, "
                    f"the store is at {c.epoch}")
        first = sender.setdefault(m.controller_epoch, m.controller)
        if first != m.controller:
            return (f"controllers {first} and {m.controller} both act in controller epoch "
                    f"{m.controller_epoch}")
    for b, seen in enumerate(s.controller_epochs):
        if seen > c.epoch:
            return f"broker {b} has seen controller epoch {seen}, the store is at {c.epoch}"
    return None


Invariant = Callable[[Config, Cluster], str | None]

INVARIANTS: dict[str, Invariant] = {
    f.__name__: f
    for f in (
        HighWatermarkBelowLogEnd,
        LeaderInIsr,
        NoCommittedDataLoss,
        LogMatching,
        AckedWritesDurable,
        AckedWritesDurableKip966,
        LeaderCandidatesComplete,
        EligibleReplicasWellFormed,
        ConsumerNeverSeesUncommitted,
        LeaderEpochMonotonic,
        SingleLeaderPerEpoch,
        SingleControllerPerEpoch,
    )
}


def violations(config: Config, state: Cluster, names=None) -> list[tuple[str, str]]:
    """Every (invariant, detail) that fails in `state`, in INVARIANTS order."""
    out = []
    for name, check in INVARIANTS.items():
        if names is not None and name not in names:
            continue
        detail = check(config, state)
        if detail is not None:
            out.append((name, detail))
    return out
