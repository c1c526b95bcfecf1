"""Strengthening lemmas: facts about every reachable state that the invariants alone do not
carry from one step to the next.

An inductive proof of an invariant I needs a stronger I' = I /\\ lemmas such that every step
from a state satisfying I' lands in one satisfying I' (I alone usually is not: a state that
satisfies I but is unreachable can step into a violation). Each lemma here is a plain
predicate over spec states, `name(config, state) -> str | None` like `spec.invariants`
(None when it holds, else where it fails), checked on every reachable state by the tests, and
mirrored in Z3 by `model_check.symbolic_lemmas` under the same name.

What is here is the well-formedness and monotonicity layer the proof attempts rest on; see
docs/prove.md for which invariants are proved with them and what remains.
"""

from __future__ import annotations

from collections.abc import Callable

from spec.config import Config
from spec.state import NO_LEADER, Cluster


def WellFormed(config: Config, s: Cluster) -> str | None:
    """Counters and offsets are in range: 0 <= flushed <= LEO and 0 <= HW on every replica;
    the controller's epochs are >= 0 and its leader is a broker or -1; every view names a
    broker or -1; values written so far are 1 .. next_value - 1.

    Why: an inductive step from a state with a negative log length or a leader id outside the
    cluster is meaningless, and the solver finds such states first.
    """
    n = config.brokers
    ps = s.controller.partitions[0]
    if ps.leader_epoch < 0 or ps.partition_epoch < 0 or not -1 <= ps.leader < n:
        return f"controller state {ps} out of range"
    if s.next_value < 1:
        return f"next value {s.next_value} < 1"
    for b, r in enumerate(s.replicas[0]):
        if not (0 <= r.flushed_offset <= r.log_end_offset and r.high_watermark >= 0):
            return f"broker {b}: flushed {r.flushed_offset}, HW {r.high_watermark}, LEO {r.log_end_offset}"
        if not -1 <= r.leader < n:
            return f"broker {b}: leader {r.leader} out of range"
        for rec in r.log:
            if not 0 < rec.value < s.next_value:
                return f"broker {b}: value {rec.value} never written"
    return None


def EpochCacheMonotone(config: Config, s: Cluster) -> str | None:
    """Every epoch cache is strictly increasing in epoch and in start offset, and its starts
    are at most the replica's LEO.

    Why: `assign_epoch` and truncation keep the cache a prefix-closed, increasing map, and the
    symbolic encoding's truncation (keep the prefix below the offset) is exact only then.
    """
    for b, r in enumerate(s.replicas[0]):
        cache = r.epoch_cache
        for (e1, o1), (e2, o2) in zip(cache, cache[1:], strict=False):
            if e1 >= e2 or o1 >= o2:
                return f"broker {b}: cache {list(cache)} not strictly increasing"
        if cache and cache[-1][1] > r.log_end_offset:
            return f"broker {b}: cache start {cache[-1][1]} beyond LEO {r.log_end_offset}"
    return None


def LeaderViewConsistent(config: Config, s: Cluster) -> str | None:
    """A live broker that leads in its own view has leader-side state, and its view's epochs
    are at most the controller's.

    Why: the leader's HW advance reads the remote LEOs (leader-side state); a leader without
    it is an artefact of an unreachable state.
    """
    ps = s.controller.partitions[0]
    for b, r in enumerate(s.replicas[0]):
        if s.alive[b] and r.leader == b and r.leader != NO_LEADER and not r.remote_log_end_offset:
            return f"broker {b} leads without leader-side state"
        if r.leader_epoch > ps.leader_epoch:
            return f"broker {b}: view epoch {r.leader_epoch} beyond the controller's"
    return None


Lemma = Callable[[Config, Cluster], str | None]

LEMMAS: dict[str, Lemma] = {
    f.__name__: f for f in (WellFormed, EpochCacheMonotone, LeaderViewConsistent)
}
