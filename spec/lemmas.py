"""Strengthening lemmas: facts about every reachable state that the invariants alone do not
carry from one step to the next.

An inductive proof of an invariant I needs a stronger I' = I /\\ lemmas such that every step
from a state satisfying I' lands in one satisfying I' (I alone usually is not: a state that
satisfies I but is unreachable can step into a violation). Each lemma here is a plain
predicate over spec states, `name(config, state) -> str | None` like `spec.invariants`
(None when it holds, else where it fails), checked on every reachable state by the tests, and
mirrored in Z3 by `model_check.prove.lemmas` under the same name.

What is here: the well-formedness and monotonicity layer the proof attempts rest on, the
values layer (values, responses, down and unregistered brokers) and the first lemmas of the
data layer (RemoteLeoBacked, CommittedOnIsr: true on reachable states, not yet inductive);
see docs/prove.md for which invariants are proved with them and what remains.
"""

from __future__ import annotations

from collections.abc import Callable

from spec.actions import truncate_to_epoch_answer
from spec.config import Config
from spec.invariants import log_has
from spec.state import (
    NO_LEADER,
    UNKNOWN,
    Cluster,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    Replica,
)


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


def UnflushedBelowInterval(config: Config, s: Cluster) -> str | None:
    """With `log.flush.interval.messages` = n, every replica's unflushed tail (LEO less the
    flushed offset) is shorter than n; unset, it says nothing.

    Why: a crash keeps only the flushed prefix. At n = 1 this says a crash loses nothing,
    which is the fact that rules out the runs where a broker loses a record it was counted
    for (B12 in docs/protocol.md) and that an inductive step cannot see from the log alone.
    """
    interval = config.log_flush_interval_messages
    if interval is None:
        return None
    for b, r in enumerate(s.replicas[0]):
        if r.log_end_offset - r.flushed_offset >= interval:
            return (f"broker {b}: LEO {r.log_end_offset}, flushed {r.flushed_offset}, "
                    f"flush interval {interval}")
    return None


def EpochCacheMonotone(config: Config, s: Cluster) -> str | None:
    """Every epoch cache is strictly increasing in epoch and in start offset, its entries are
    >= 0, and its starts are at most the replica's LEO.

    Why: `assign_epoch` and truncation keep the cache a prefix-closed, increasing map, and the
    symbolic encoding's truncation (keep the prefix below the offset) is exact only then.
    """
    for b, r in enumerate(s.replicas[0]):
        cache = r.epoch_cache
        for (e1, o1), (e2, o2) in zip(cache, cache[1:], strict=False):
            if e1 >= e2 or o1 >= o2:
                return f"broker {b}: cache {list(cache)} not strictly increasing"
        if any(e < 0 or o < 0 for e, o in cache):
            return f"broker {b}: cache {list(cache)} has a negative entry"
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


def DownBrokerReset(config: Config, s: Cluster) -> str | None:
    """A down broker has no view (no leader, leader epoch or partition epoch), no leader-side
    state and no truncation pending; no LeaderAndIsr or fetch message is addressed to it,
    and its own fetch slot is empty.

    Why: a crash resets all of these and nothing reaches a down broker, so a restart starts
    from nothing; without it the proof meets a restarted broker that leads without
    leader-side state, or answers a fetch it never received.
    """
    for b, r in enumerate(s.replicas[0]):
        if s.alive[b]:
            continue
        if (r.leader, r.leader_epoch, r.partition_epoch) != (NO_LEADER, UNKNOWN, UNKNOWN):
            return f"broker {b} is down with a view"
        if r.remote_log_end_offset or r.truncation_pending:
            return f"broker {b} is down with leader-side state or a truncation pending"
        if any(m.broker == b for m in s.leader_and_isr):
            return f"LeaderAndIsr in flight to down broker {b}"
        if s.fetches[0][b] is not None or any(
                m is not None and m.leader == b for m in s.fetches[0]):
            return f"fetch message to or from down broker {b}"
    return None


def _records(s: Cluster):
    """(where, offset, record) of every record in a log or a fetch response."""
    for b, r in enumerate(s.replicas[0]):
        for o, rec in enumerate(r.log):
            yield f"broker {b}'s log", o, rec
    for f, m in enumerate(s.fetches[0]):
        if isinstance(m, FetchResponse):
            for i, rec in enumerate(m.records):
                yield f"the response to {f}", m.fetch_offset + i, rec


def _written_values(s: Cluster):
    """(where, offset, value) of every record held in a log, a purgatory or a response."""
    for where, o, rec in _records(s):
        yield where, o, rec.value
    for b, r in enumerate(s.replicas[0]):
        for w in r.purgatory:
            yield f"broker {b}'s purgatory", w.offset, w.value


def ProduceUnwritten(config: Config, s: Cluster) -> str | None:
    """A produce request in flight carries a value the producer has drawn (1 .. next value -
    1) that no log, purgatory or fetch response holds yet.

    Why: the leader appends it as a new record; a value already in some log would then sit at
    two offsets, and the proof's accounting of values by offset (the encoding's
    `value_offset`) would break.
    """
    pending = {m.value for m in s.produce_requests}
    for m in s.produce_requests:
        if not 0 < m.value < s.next_value:
            return f"produce request with value {m.value} never drawn"
    for where, o, v in _written_values(s):
        if v in pending:
            return f"value {v} has a produce request in flight and is in {where} at {o}"
    return None


def ValuesAtOneOffset(config: Config, s: Cluster) -> str | None:
    """Every value held in a log, a purgatory, a fetch response, acked or consumed was drawn
    (1 .. next value - 1) and sits at one offset everywhere.

    Why: a value is appended once and only ever copied to the same offset, which is what the
    encoding's ghost `value_offset` (value -> offset) relies on.
    """
    at: dict[int, int] = {}
    found = [*_written_values(s), *(("acked", w.offset, w.value) for w in s.acked),
             *(("consumed", w.offset, w.value) for w in s.consumed)]
    for where, o, v in found:
        if not 0 < v < s.next_value:
            return f"value {v} in {where} never drawn"
        if at.setdefault(v, o) != o:
            return f"value {v} at offsets {at[v]} and {o} ({where})"
    return None


def ValuesKeepTheirEpoch(config: Config, s: Cluster) -> str | None:
    """Every copy of a value, in a log or a fetch response, carries the same leader epoch.

    Why: a value is appended once, by the leader of one epoch, and a follower copies the
    record whole; two logs with the same value at an offset then hold the same record, which
    the data lemmas compare.
    """
    epoch_of: dict[int, int] = {}
    for where, _, rec in _records(s):
        if epoch_of.setdefault(rec.value, rec.epoch) != rec.epoch:
            return f"value {rec.value} in epochs {epoch_of[rec.value]} and {rec.epoch} ({where})"
    return None


def RecordsInRange(config: Config, s: Cluster) -> str | None:
    """Every record in a log, and every epoch cache entry, has a leader epoch in 0 .. the
    controller's.

    Why: records are appended by a leader of an epoch the controller chose, and a cache entry
    comes from such a record or from leading in such an epoch. (LeaderEpochMonotonic says the
    upper half too, with more; this is the part a step's record epochs need.)
    """
    epoch = s.controller.partitions[0].leader_epoch
    for b, r in enumerate(s.replicas[0]):
        for o, rec in enumerate(r.log):
            if not 0 <= rec.epoch <= epoch:
                return f"broker {b} has {rec} at {o}, outside epochs 0..{epoch}"
        if r.latest_epoch() > epoch:
            return f"broker {b}'s epoch cache holds {r.latest_epoch()}, past epoch {epoch}"
    return None


def IsrWithinLeaderView(config: Config, s: Cluster) -> str | None:
    """The true leader's ISR view holds every member of the controller's ISR.

    Why: the controller adds a member only when the leader asks for it (synchronous ISR
    changes), and drops members itself; the leader's HW advances over its view, so a member
    outside it could miss a committed record.
    """
    ps = s.controller.partitions[0]
    leader = s.true_leader(0)
    if leader != NO_LEADER:
        view = s.replicas[0][leader].isr
        if not set(ps.isr) <= set(view):
            return f"leader {leader}'s ISR view {list(view)} lacks part of {list(ps.isr)}"
    return None


def _viewless(s: Cluster, b: int) -> bool:
    """Broker `b` is up without a view: restarted, no LeaderAndIsr applied yet."""
    return s.alive[b] and s.replica(0, b).partition_epoch == UNKNOWN


def ViewlessOutOfIsr(config: Config, s: Cluster) -> str | None:
    """With the broker-epoch check on ISR expansion (KIP-380), a live broker without a view
    (restarted, no LeaderAndIsr applied yet) is in the controller's ISR only as its last
    member. (Without the check, B7: a leader re-admits it on its last fetch before the crash.)

    Why: a broker that crashed is taken out of the ISR (unless it is the last member) before
    it can register again; it comes back in only by fetching, which needs a view. A leader's
    follower LEO for it is then from before the crash and counts for nothing.
    """
    if not config.variant.broker_epochs:
        return None
    isr = s.controller.partitions[0].isr
    for b in range(len(s.replicas[0])):
        if _viewless(s, b) and b in isr and len(isr) > 1:
            return f"broker {b} has no view and is in the ISR {list(isr)}"
    return None


def ViewlessRequestsMatchIsr(config: Config, s: Cluster) -> str | None:
    """With KIP-380's check, a LeaderAndIsr request in flight to a live broker without a view
    names the broker in its ISR exactly when the controller's ISR does, and then alone.

    Why: a crash drops the requests to the broker, so each one in flight was sent since it
    registered again, from a partition state written since. In that time the ISR cannot
    take the broker in (that needs a fetch, and a fetch needs a view) and cannot drop it
    (the controller keeps the last member, and removes only brokers that failed), and a
    broker without a view is in the ISR only as its last member (ViewlessOutOfIsr). So a
    stale request cannot make the broker a follower that counts as a member, or a leader of
    an ISR it never held.
    """
    if not config.variant.broker_epochs:
        return None
    isr = s.controller.partitions[0].isr
    for m in s.leader_and_isr:
        b = m.broker
        if not _viewless(s, b):
            continue
        if (b in m.isr) != (b in isr) or (b in m.isr and len(m.isr) > 1):
            return (f"the request of partition epoch {m.partition_epoch} to viewless broker {b} "
                    f"names the ISR {list(m.isr)}, the controller's is {list(isr)}")
    return None


def CacheMatchesLog(config: Config, s: Cluster) -> str | None:
    """Every record's epoch is the epoch of the cache entry that covers its offset (the last
    entry starting at or before it).

    Why: a follower truncates to the end offset its leader's cache gives for an epoch
    (KIP-101, KIP-279) and a leader admits a follower to the ISR from its epoch's start
    offset, so the caches must say where each epoch's records are.
    """
    for b, r in enumerate(s.replicas[0]):
        for o, rec in enumerate(r.log):
            covering = [e for e, start in r.epoch_cache if start <= o]
            if not covering or covering[-1] != rec.epoch:
                return f"broker {b}: record {rec} at {o}, cache {list(r.epoch_cache)}"
    return None


def LeaderCacheCurrent(config: Config, s: Cluster) -> str | None:
    """A live broker leading in its view has its leader epoch as its cache's last entry.
    Why: it assigns the epoch at its LEO on becoming leader and appends only in it, and
    ISR expansion reads that entry's start (KIP-101's epoch start offset)."""
    for b, r in enumerate(s.replicas[0]):
        if s.alive[b] and r.leader == b and r.latest_epoch() != r.leader_epoch:
            return f"leader {b} of epoch {r.leader_epoch} has cache {list(r.epoch_cache)}"
    return None


def CommittedWithinLeaderReach(config: Config, s: Cluster) -> str | None:
    """With KIP-380's check: every record below any replica's HW, value not excused, is
    below the true leader's HW or below the start offset of its leader epoch.

    Why: a follower takes its HW from a leader's, and what a leader had committed is on
    every ISR member, so on the next leader below its LEO at election, where its epoch
    starts. A follower admitted to the ISR has a recorded LEO at or past both, so it holds
    every such record (with RemoteLeoBacked). (Without the check, B7 breaks it.)
    """
    if not config.variant.broker_epochs or (found := _leader_reach(s)) is None:
        return None
    leader, lr, reach = found
    for x, r in enumerate(s.replicas[0]):
        for o in range(reach, r.high_watermark):
            if r.log[o].value not in s.excused:
                return (f"broker {x} has {r.log[o]} at {o} below its HW, past leader "
                        f"{leader}'s HW {lr.high_watermark} and epoch start")
    return None


def _leader_reach(s: Cluster):
    """(the true leader, its replica, the larger of its HW and its epoch's start offset), or
    None without a true leader."""
    leader = s.true_leader(0)
    if leader == NO_LEADER:
        return None
    lr = s.replica(0, leader)
    return leader, lr, max(lr.high_watermark, lr.epoch_start_offset(lr.leader_epoch))


def LeaderRequestCoversIsr(config: Config, s: Cluster) -> str | None:
    """A LeaderAndIsr request in flight to the broker it names as leader, of the controller's
    leader epoch, which the broker would apply, has every member of the controller's ISR.

    Why: within one leader epoch the ISR grows only by the leader's own expansion, which it
    makes after applying the request; so a broker becoming leader from it starts with an
    ISR view that holds the controller's ISR (IsrWithinLeaderView).
    """
    ps = s.controller.partitions[0]
    for m in s.leader_and_isr:
        r = s.replica(0, m.broker)
        if s.alive[m.broker] and m.leader == m.broker and m.leader_epoch == ps.leader_epoch \
                and m.partition_epoch > r.partition_epoch and not set(ps.isr) <= set(m.isr):
            return f"the request of partition epoch {m.partition_epoch} lacks part of {list(ps.isr)}"
    return None


def ResponsesFromLeaderLog(config: Config, s: Cluster) -> str | None:
    """A records response holds no record of a later epoch than its own; from a live leader
    it carries a leader epoch no later than that leader's view; and while it still leads in
    that epoch, the response carries its records at their offsets and a HW at most its own.
    While the leader's epoch cache still has the response's epoch, starting at some offset,
    the response's records below that offset are the leader's.

    Why: a leader's log only grows while it leads in one epoch and its HW never goes down,
    and a response is dropped when its leader crashes; so a follower appending it copies the
    leader's log (RemoteLeoBacked, CommittedOnIsr). Below the start of its epoch the leader's
    log changes later only by a truncation there, and that drops the epoch's cache entry.
    """
    for f, m in enumerate(s.fetches[0]):
        if not isinstance(m, FetchResponse) or m.kind != "records":
            continue
        if any(rec.epoch > m.leader_epoch for rec in m.records):
            return f"the response to {f} holds a record of a later epoch than its {m.leader_epoch}"
        lr = s.replica(0, m.leader)
        if s.alive[m.leader] and m.leader_epoch > lr.leader_epoch:
            return f"the response to {f} is of leader epoch {m.leader_epoch}, past its leader's"
        for epoch, start in lr.epoch_cache:
            below = m.records[:max(0, start - m.fetch_offset)]
            held = lr.log[m.fetch_offset:m.fetch_offset + len(below)]
            if epoch == m.leader_epoch and held != below:
                return (f"the response to {f} differs below {start}, where leader {m.leader} "
                        f"started its epoch {epoch}, from its log")
        if not (s.alive[m.leader] and lr.leader == m.leader and lr.leader_epoch == m.leader_epoch):
            continue
        end = m.fetch_offset + len(m.records)
        if end > len(lr.log) or lr.log[m.fetch_offset:end] != m.records:
            return f"the response to {f} is not leader {m.leader}'s log from {m.fetch_offset}"
        if m.high_watermark > lr.high_watermark:
            return f"the response to {f} carries HW {m.high_watermark}, past its leader's"
    return None


def RegistrationCurrent(config: Config, s: Cluster) -> str | None:
    """The controller holds each broker as unregistered or with the broker epoch it last
    registered with, and broker epochs start at 0. Why: KIP-380's check compares a leader's
    record with the controller's, and an unknown epoch (-1) must not pass for one."""
    for b, e in enumerate(s.controller.registered):
        if s.broker_epochs[b] < 0:
            return f"broker {b} has broker epoch {s.broker_epochs[b]}"
        if e not in (UNKNOWN, s.broker_epochs[b]):
            return f"broker {b} registered with epoch {e}, its own is {s.broker_epochs[b]}"
    return None


def ViewlessUnrecorded(config: Config, s: Cluster) -> str | None:
    """A live broker without a view (restarted, no LeaderAndIsr applied yet) has sent no
    fetch since, and every broker epoch a leader recorded for it is below the one it
    registered with on restart.

    Why: a leader's record of a follower is from a fetch, and a fetch needs a view; so
    KIP-380's check (recorded broker epoch = registered one) never admits a restarted broker
    to the ISR on a record from before its crash.
    """
    for f in range(len(s.replicas[0])):
        if not _viewless(s, f):
            continue
        if s.fetches[0][f] is not None:
            return f"broker {f} has no view and a fetch message in flight"
        for b, r in enumerate(s.replicas[0]):
            if b != f and r.remote_broker_epoch and r.remote_log_end_offset[f] != UNKNOWN \
                    and r.remote_broker_epoch[f] >= s.broker_epochs[f]:
                return (f"leader {b} records broker epoch {r.remote_broker_epoch[f]} for "
                        f"{f}, which has no view since registering with {s.broker_epochs[f]}")
    return None


def _top_epoch(r) -> int:
    """The latest leader epoch the replica holds, in a log record or its cache, or -1."""
    return max([r.latest_epoch(), *(rec.epoch for rec in r.log)])


def LogWithinView(config: Config, s: Cluster) -> str | None:
    """A live broker with a view holds no record, and no cache entry, of a later leader epoch
    than its view's.

    Why: records come from the leader of the view's epoch or an earlier one, a cache entry
    from such a record or from leading in the view's epoch, and a view's epoch only goes up
    until a crash clears it. A fetch carries the cache's latest epoch (FetchRequestsCurrent).
    """
    for b, r in enumerate(s.replicas[0]):
        if s.alive[b] and r.leader_epoch != UNKNOWN and _top_epoch(r) > r.leader_epoch:
            return f"broker {b} holds a record or cache entry of a later epoch than its view's {r.leader_epoch}"
    return None


def UnstartedEpochUnwritten(config: Config, s: Cluster) -> str | None:
    """A leader epoch that names a live broker leader, later than the epoch of the broker's
    view (or the broker restarted and has no view), is one no epoch cache holds and no log or
    fetch response holds a record of: the controller's current epoch, and the epoch of every
    LeaderAndIsr request in flight to the broker.

    Why: only the leader of an epoch starts it, by applying a request of that epoch, and
    followers copy its records from that leader; a broker's view's epoch only rises until a
    crash, a crash takes the requests in flight to the broker with it, and the controller
    handles the failure of a leader with a new epoch and another leader before the broker may
    register again. So nobody has started the epoch yet, and LeaderHoldsItsEpoch holds when
    the broker takes the lead.
    """
    ps = s.controller.partitions[0]
    named = [(b, e) for b, e in [(ps.leader, ps.leader_epoch)]
             + [(m.broker, m.leader_epoch) for m in s.leader_and_isr if m.leader == m.broker]
             if b != NO_LEADER and s.alive[b] and e > s.replica(0, b).leader_epoch]
    for b, e in named:
        for x, r in enumerate(s.replicas[0]):
            if any(c == e for c, _ in r.epoch_cache):
                return f"broker {x}'s cache holds epoch {e}, which broker {b} is yet to lead"
        for where, o, rec in _records(s):
            if rec.epoch == e:
                return (f"{where} holds {rec} at {o}, of epoch {e}, which broker {b} is yet "
                        "to lead")
    return None


def _empty_epochs(s: Cluster):
    """(broker, epoch, what shows it) for each epoch a broker led without writing: an epoch
    cache entry starting at its log end, or the last fetched epoch of a fetch it sent when that
    is later than the cache's last entry below the fetch offset."""
    for b, r in enumerate(s.replicas[0]):
        for e, start in r.epoch_cache:
            if start == len(r.log):
                yield b, e, f"broker {b}'s cache starts epoch {e} at its log end"
        m = s.fetches[0][b]
        if isinstance(m, FetchRequest):
            if _last_epoch_below(r, m.fetch_offset) < m.last_fetched_epoch:
                yield (b, m.last_fetched_epoch,
                       f"the fetch from {b} names epoch {m.last_fetched_epoch}, past its cache")


def EmptyEpochLed(config: Config, s: Cluster) -> str | None:
    """An epoch a broker led without writing (`_empty_epochs`) is one nothing gives another
    broker: not the controller's state, no LeaderAndIsr request in flight, no broker's view,
    no fetch in flight.

    Why: a follower adds a cache entry only with a record of that epoch, and a truncation
    drops every entry from the cut on; an entry without records is one its broker wrote on
    taking the lead in that epoch, and an epoch has one leader. A follower sends its cache's
    latest epoch, and while the fetch is in flight that entry is replaced only by a later
    leadership at the same offset (FetchRequestsCurrent). So a leader checking a fetch never
    takes a last fetched epoch its follower did not lead for one of its own.
    """
    ps = s.controller.partitions[0]
    named = [(ps.leader, ps.leader_epoch)] + [(m.leader, m.leader_epoch)
                                              for m in s.leader_and_isr]
    named += [(r.leader, r.leader_epoch) for r in s.replicas[0]]
    named += [(m.leader, m.current_leader_epoch) for m in s.fetches[0]
              if isinstance(m, FetchRequest)]
    for b, e, shown in _empty_epochs(s):
        for x, epoch in named:
            if epoch == e and x not in (NO_LEADER, b):
                return f"{shown}, an epoch led by {x}"
    return None


def EmptyEpochUnwritten(config: Config, s: Cluster) -> str | None:
    """No log or fetch response holds a record of an epoch a broker led without writing
    (`_empty_epochs`).

    Why: only an epoch's leader writes its records, and followers copy them from it; the
    leader's own log keeps them unless a truncation cuts them, and that cut drops the cache
    entry too.
    """
    empty = {e: shown for _, e, shown in _empty_epochs(s)}
    for where, o, rec in _records(s):
        if rec.epoch in empty:
            return f"{where} holds {rec} at {o}, and {empty[rec.epoch]}"
    return None


def RequestsNotBehindLog(config: Config, s: Cluster) -> str | None:
    """A LeaderAndIsr request in flight to a live broker that it would apply (a later
    partition epoch than its view's) carries a leader epoch at or above every record in the
    broker's log and every entry of its epoch cache.

    Why: the broker's records and cache entries are of its view's epoch or earlier, and later
    partition epochs carry later or equal leader epochs; after a crash (no view) the requests
    sent before it are gone, and those sent since carry the controller's epoch at the restart
    or later.
    """
    row = s.replicas[0]
    for m in s.leader_and_isr:
        r = row[m.broker]
        if s.alive[m.broker] and m.partition_epoch > r.partition_epoch and \
                m.leader_epoch < _top_epoch(r):
            return (f"LeaderAndIsr of epoch {m.leader_epoch} in flight to broker {m.broker}, "
                    f"whose log or epoch cache has a later epoch")
    return None


def ResponsesWellFormed(config: Config, s: Cluster) -> str | None:
    """A fetch message names another broker as leader; only an error response has an error
    code; a records response has a fetch offset >= 0, a HW from 0 to the end of its records
    (the leader's LEO), and records whose epochs go up from 0 to at most the controller's; an OFFSET_OUT_OF_RANGE error carries the leader's
    LEO (>= 0); an epoch or diverging answer carries an epoch and end offset >= -1, both
    unknown or both known (KIP-101's start-after-epoch answer may leave the end unknown
    alone).

    Why: a follower truncates to the end offset an answer carries and takes its HW from a
    records response; an answer no leader builds would cut its log to a negative length.
    """
    both = config.variant.truncation != "epoch-end"
    top = s.controller.partitions[0].leader_epoch
    for f, m in enumerate(s.fetches[0]):
        if m is not None and not (0 <= m.leader < config.brokers and m.leader != f):
            return f"the fetch message of {f} names leader {m.leader}"
        if not isinstance(m, FetchResponse):
            continue
        epochs = [rec.epoch for rec in m.records]
        if epochs != sorted(epochs) or any(not 0 <= e <= top for e in epochs):
            return f"the response to {f} carries record epochs {epochs}"
        if m.kind != "error" and m.error:
            return f"the response to {f} is a {m.kind} answer with error {m.error}"
        if m.kind == "records":
            bad = not 0 <= m.high_watermark <= m.fetch_offset + len(m.records) or m.fetch_offset < 0
        elif m.kind == "error":
            bad = m.error == "OFFSET_OUT_OF_RANGE" and m.end_offset < 0
        else:  # an epoch or diverging answer
            bad = m.epoch < -1 or m.end_offset < -1 or (
                both and (m.epoch == UNKNOWN) != (m.end_offset == UNKNOWN))
        if bad:
            return f"the response to {f} is malformed: {m}"
    return None


def UnregisteredOutOfIsr(config: Config, s: Cluster) -> str | None:
    """With broker epochs checked on ISR expansion: a broker the controller holds as
    unregistered (failed, not yet back) does not lead, and is in the controller's ISR only as
    its last member; and a leader records a follower's LEO with the broker epoch the follower
    fetched in (0 .. its current one).

    Why: the controller drops a failed broker from the ISR unless it is the last member, and
    the expansion check (the follower's broker epoch is the one it registered with: KIP-380's
    broker epoch) keeps it out until it registers again. A broker that restarts therefore does
    not rejoin an ISR whose leader's HW covers what it lost in the crash. Without the check
    (`kip-320`) a stale fetch can put an unregistered broker back in the ISR.
    """
    ps = s.controller.partitions[0]
    for b, r in enumerate(s.replicas[0]):
        for f, (k, e) in enumerate(zip(r.remote_log_end_offset, r.remote_broker_epoch,
                                       strict=True)):
            if k != UNKNOWN and not 0 <= e <= s.broker_epochs[f]:
                return f"leader {b} records LEO {k} of {f} with broker epoch {e}"
    if not config.variant.broker_epochs:
        return None
    for b, e in enumerate(s.controller.registered):
        if e != UNKNOWN:
            continue
        if ps.leader == b:
            return f"unregistered broker {b} leads"
        if b in ps.isr and tuple(ps.isr) != (b,):
            return f"unregistered broker {b} in ISR {list(ps.isr)}"
    return None


def RemoteLeoBacked(config: Config, s: Cluster) -> str | None:
    """A live leader never records a follower LEO past its own; and while it is the true
    leader and the follower is alive and either in both its ISR view and the controller's
    ISR or recorded with the broker epoch it is registered with, the recorded LEO is at most
    the follower's and the two logs agree below it, whatever view the follower has. (Else the
    record may be stale: a follower that crashed and lost its unflushed tail registers with a
    new broker epoch, and KIP-380's check keeps it out of the ISR until it fetches again.)

    Why: the leader's HW advances to the least LEO it records over its ISR, and it admits
    a follower to the ISR on its record, so what it records must be backed by the
    followers' logs (item 2 of docs/prove.md's list). A follower's fetch offset is its LEO,
    and its log below it matches the leader's by the fetch protocol's divergence check
    (KIP-320); it only truncates when that check, or a new leader epoch, says so.
    """
    row = s.replicas[0]
    for b, r in enumerate(row):
        if not (s.alive[b] and r.leader == b and r.remote_log_end_offset):
            continue
        for f, rf in enumerate(row):
            k = r.remote_log_end_offset[f]
            if f == b or k == UNKNOWN:
                continue
            if k > len(r.log):
                return f"leader {b} records LEO {k} for {f}, past its own {len(r.log)}"
            if not (s.alive[f] and _current_follower(s, r, f) and s.is_true_leader(0, b)):
                continue
            if not _backs(rf, r, k):
                return f"leader {b} records LEO {k} for {f}, whose log does not back it"
    return None


def _current_follower(s: Cluster, r: Replica, f: int) -> bool:
    """`f` is in both the leader `r`'s ISR view and the controller's ISR, or recorded in the
    broker epoch it is registered with."""
    return (f in r.isr and f in s.controller.partitions[0].isr) or \
        r.remote_broker_epoch[f] == s.controller.registered[f]


def _backs(rf: Replica, r: Replica, k: int) -> bool:
    """`rf`'s log holds `r`'s first `k` records."""
    return k <= len(rf.log) and rf.log[:k] == r.log[:k]


def _heard(s: Cluster, leader: int, f: int) -> bool:
    """`leader` (a leader with leader-side state, or NO_LEADER) has recorded a LEO for broker
    `f` in `f`'s current broker epoch: it has heard from `f` since `f` last registered."""
    if leader in (NO_LEADER, f):
        return False
    lr = s.replicas[0][leader]
    return (lr.remote_log_end_offset[f] != UNKNOWN
            and lr.remote_broker_epoch[f] == s.broker_epochs[f])


def CommittedOnIsr(config: Config, s: Cluster) -> str | None:
    """A record below any replica's HW (its value not excused) is at the same offset in every
    live member of the controller's ISR, and in every member when none is live. An excused
    record counts too when it is below the HW of a live ISR member, or of a live follower the
    true leader has heard from in its current session.

    Why: the heart of both data invariants (item 3 of docs/prove.md's list). The next leader
    is an ISR member, so it holds every record some replica already exposes; when every
    member is down, a record one of them lost is excused (`_excuse_lost_writes`), so what
    is left of the ISR still holds the rest. An excused record stays in a live replica only
    until it follows a leader without it and truncates; before that the replica is out of
    the ISR (it joins from a fetch that passed KIP-320's check), so a member, or a follower
    about to join, exposes only what every member holds.
    """
    for x, rx in enumerate(s.replicas[0]):
        found = _uncommitted(s, x, rx.log, rx.high_watermark)
        if found is not None:
            o, rec, m = found
            return f"broker {x} has {rec} at {o} below its HW, ISR member {m} not"
    return None


def _uncommitted(s: Cluster, x: int, log: tuple, hw: int, but: int | None = None):
    """CommittedOnIsr asked of `log` below `hw` as broker `x`'s: the first record it counts
    (not excused, or `x` counted) that a member of the controller's ISR other than `but`
    lacks, as (offset, record, member); None when there is none."""
    counted = _counted(s, x)
    for o in range(min(hw, len(log))):
        rec = log[o]
        if rec.value in s.excused and not counted:
            continue
        m = _member_lacking(s, o, rec, but)
        if m is not None:
            return o, rec, m
    return None


def _counted(s: Cluster, x: int) -> bool:
    """CommittedOnIsr counts `x`'s excused records too: it is up, and in the controller's
    ISR or heard by the true leader in its current session."""
    return s.alive[x] and (x in s.controller.partitions[0].isr or _heard(s, s.true_leader(0), x))


def _member_lacking(s: Cluster, o: int, rec, but: int | None = None) -> int | None:
    """A member of the controller's ISR (other than `but`) without `rec` at offset `o`: a
    live one, or any when none is live; else None."""
    isr = s.controller.partitions[0].isr
    live = any(s.alive[m] for m in isr)
    for m in isr:
        log = s.replicas[0][m].log
        if m != but and (s.alive[m] or not live) and (o >= len(log) or log[o] != rec):
            return m
    return None


def FetchRequestsCurrent(config: Config, s: Cluster) -> str | None:
    """An epoch request in flight asks for an epoch (or -1) in a leader epoch no newer than
    its sender's view; a fetch request in flight carries a broker epoch the follower has had
    (0 .. its own), a leader epoch no newer than its view's and a last fetched epoch no newer
    than that; whatever the follower's view, its log still holds the request's offset; of
    its cache entries starting below the offset the last has the request's last fetched
    epoch (and the record just below the offset is of it) or an older one (none for -1);
    and every entry from the offset on is the last fetched epoch's starting at the offset,
    or of a leader epoch past the request's; when that last entry is older, some entry starts
    at or past the offset; if the log goes past the offset, an entry of a leader epoch past
    the request's starts there (the follower has led since, and written); and while the
    follower is still in the view it sent it in (same leader and leader epoch), no
    truncation is due and the request carries its LEO.

    Why: while its request is in flight a follower's log does not change in that view: it
    truncates only on an answer or a new leader epoch, it appends only answers (one at a
    time), and a crash drops the request; a new session gives it a newer broker epoch. It
    sends its cache's latest epoch, and its cache changes only by becoming leader in a newer
    epoch, at its LEO (which may drop an entry starting there). So a leader
    checking the request checks the follower's log as it is (EpochLogMatching,
    EpochStartsAgree, RemoteLeoBacked), and sees the epoch the follower last led in even
    if it wrote nothing in it.
    """
    for f, m in enumerate(s.fetches[0]):
        r = s.replica(0, f)
        if isinstance(m, EpochRequest) and (m.epoch < UNKNOWN
                                            or m.current_leader_epoch > r.leader_epoch):
            return f"the epoch request from {f} asks for {m.epoch} in leader epoch {m.current_leader_epoch}"
        if not isinstance(m, FetchRequest):
            continue
        if not 0 <= m.broker_epoch <= s.broker_epochs[f] or m.current_leader_epoch > r.leader_epoch \
                or m.last_fetched_epoch > m.current_leader_epoch:
            return (f"the fetch from {f} carries broker epoch {m.broker_epoch}, leader "
                    f"epoch {m.current_leader_epoch} and last fetched epoch {m.last_fetched_epoch}")
        if not 0 <= m.fetch_offset <= len(r.log) or not _fetched_epoch_cached(r, m):
            return (f"the fetch from {f} carries offset {m.fetch_offset} in epoch "
                    f"{m.last_fetched_epoch}, which its log and cache do not hold")
        same = (r.leader, r.leader_epoch) == (m.leader, m.current_leader_epoch)
        if same and r.truncation_pending:
            return f"the fetch from {f} is in flight in its view, with a truncation due"
        if same and m.fetch_offset != len(r.log):
            return (f"the fetch from {f} carries offset {m.fetch_offset} in epoch "
                    f"{m.last_fetched_epoch}; its log ends at {len(r.log)}")
        if len(r.log) > m.fetch_offset and not any(
                start == m.fetch_offset and epoch > m.current_leader_epoch
                for epoch, start in r.epoch_cache):
            return (f"broker {f} holds records past its fetch offset {m.fetch_offset} without "
                    f"an epoch past the fetch's {m.current_leader_epoch} starting there")
    return None


def DivergingAnswersCurrent(config: Config, s: Cluster) -> str | None:
    """A diverging answer names a known epoch no later than its own leader epoch (a follower
    with records has cached their epochs, and a leader its own), and from a live leader a
    leader epoch no later than its view's. One from a leader still alive and leading in the
    answer's epoch is what that leader's epoch cache answers now for the epoch it names
    (KIP-279's end offset), or, for the leader's own epoch, ends at or below its LEO.

    Why: the leader answered from its cache, and while it leads an epoch its cache changes
    only past that epoch's start: its log grows and it does not truncate. A follower cuts its
    log to the answer's end (or its own end for the epoch), so an answer the leader would not
    give could cut records every ISR member holds.
    """
    if config.variant.truncation != "diverging-epoch":
        return None
    for f, m in enumerate(s.fetches[0]):
        if not (isinstance(m, FetchResponse) and m.kind == "diverging"):
            continue
        if not 0 <= m.epoch <= m.leader_epoch:
            return f"the diverging answer to {f} names epoch {m.epoch} in {m.leader_epoch}"
        r = s.replica(0, m.leader)
        if s.alive[m.leader] and m.leader_epoch > r.leader_epoch:
            return (f"the diverging answer to {f} is of leader epoch {m.leader_epoch}, past "
                    "its leader's")
        if not (s.alive[m.leader] and r.leader == m.leader and r.leader_epoch == m.leader_epoch):
            continue
        if m.epoch == r.leader_epoch:
            good = m.end_offset <= len(r.log)
        else:
            good = r.end_offset_for_epoch(m.epoch) == (m.epoch, m.end_offset)
        if not good:
            return (f"the diverging answer to {f} names epoch {m.epoch} ending at "
                    f"{m.end_offset}, which leader {m.leader}'s cache does not give")
    return None


def LeaderFetchesNotInItsEpoch(config: Config, s: Cluster) -> str | None:
    """A live broker leading in its view has no fetch in flight sent in its own leader epoch.

    Why: a fetch goes to the leader of the view it was sent in, another broker, and an epoch
    has one leader; so what a follower sent before it took the lead is of an older epoch,
    and its log past that fetch is of the epochs it led since (FetchRequestsCurrent).
    """
    for f, m in enumerate(s.fetches[0]):
        r = s.replica(0, f)
        if isinstance(m, FetchRequest) and s.alive[f] and r.leader == f \
                and m.current_leader_epoch == r.leader_epoch:
            return f"leader {f} has a fetch of its own epoch {r.leader_epoch} in flight"
    return None


def _last_epoch_below(r: Replica, offset: int) -> int:
    """The epoch of the last cache entry starting below `offset`, or -1."""
    return next((epoch for epoch, start in reversed(r.epoch_cache) if start < offset), UNKNOWN)


def _fetched_epoch_cached(r, m: FetchRequest) -> bool:
    """The follower's cache as FetchRequestsCurrent says it is for `m`."""
    o, e = m.fetch_offset, m.last_fetched_epoch
    last = _last_epoch_below(r, o)
    if last > e or last == e != UNKNOWN and r.log[o - 1].epoch != e:
        return False
    # An epoch past the last one below the offset was led at the offset: its entry, or the
    # entry of a later leadership at the same offset, is still in the cache.
    if last != e and all(start < o for _, start in r.epoch_cache):
        return False
    return all((epoch, start) == (e, o) or epoch > m.current_leader_epoch
               for epoch, start in r.epoch_cache if start >= o)


def PurgatoryInLog(config: Config, s: Cluster) -> str | None:
    """Only a broker that leads in its view parks writes, and every write parked in its
    purgatory is in its log at its offset.

    Why: a leader parks the record it appends at its LEO, and a leader never truncates; it
    drops its purgatory when it becomes a follower, and a crash drops it too. So the value a
    leader acknowledges is its own record at the offset its HW has passed.
    """
    for b, r in enumerate(s.replicas[0]):
        if r.purgatory and r.leader != b:
            return f"broker {b} parks writes without leading"
        for w in r.purgatory:
            if not log_has(r.log, w.offset, w.value):
                have = str(r.log[w.offset]) if w.offset < len(r.log) else "nothing"
                return f"broker {b} parks v{w.value} at {w.offset}, its log has {have}"
    return None


def _delivered(config: Config, s: Cluster):
    """The delivered writes Kafka's guarantee keeps, not excused: those acknowledged with
    acks=all, and those a consumer read (at any acks)."""
    acked = s.acked if config.acks == "all" else frozenset()
    for w in sorted(acked | s.consumed):
        if w.value not in s.excused:
            yield w


def DeliveredOnIsr(config: Config, s: Cluster) -> str | None:
    """A delivered write (acknowledged with acks=all, or read by a consumer), not excused, is
    at its offset in every live member of the controller's ISR, and in every member when
    none is live.

    Why: a leader acknowledges a write once its HW has passed it (PurgatoryInLog), and a
    consumer reads below the leader's HW: either way every member holds it then
    (CommittedOnIsr). Members only leave the ISR; one that joins has caught up with the
    leader past its epoch start and its HW (DeliveredWithinLeaderReach); and when every member
    is down, a write one of them lost is excused.
    """
    for w in _delivered(config, s):
        # A value keeps its epoch (ValuesKeepTheirEpoch): any copy names the record.
        rec = next((r.log[w.offset] for r in s.replicas[0]
                    if w.offset < len(r.log) and r.log[w.offset].value == w.value), None)
        m = _member_lacking(s, w.offset, rec)
        if m is not None:
            return f"ISR member {m} lacks delivered v{w.value} at {w.offset}"
    return None


def DeliveredWithinLeaderReach(config: Config, s: Cluster) -> str | None:
    """A delivered write, not excused, is below the true leader's HW or below the start
    offset of its leader epoch.

    Why: it was below some leader's HW when delivered (CommittedWithinLeaderReach); a HW
    does not go down while its leader leads, and a later leader held the write
    (DeliveredOnIsr) when its epoch started at its LEO. A follower joins the ISR only past
    both, so it holds the write.
    """
    if (found := _leader_reach(s)) is None:
        return None
    leader, lr, reach = found
    for w in _delivered(config, s):
        if w.offset >= reach:
            return (f"delivered v{w.value} at {w.offset} is past leader {leader}'s HW "
                    f"{lr.high_watermark} and epoch start")
    return None


def FollowedLeaderHoldsDelivered(config: Config, s: Cluster) -> str | None:
    """A live leader that a live member of the controller's ISR follows, in the leader's
    epoch, holds every delivered write, not excused, at its offset.

    Why: a write delivered before that leader's epoch was on it when it was elected from the
    ISR, and a leader never truncates; one delivered since was below the HW of that leader
    or a later one. A later leader's HW passes only what every member of its ISR has sent
    it, and the member still following the older leader has sent it nothing: it left the
    ISR or never joined it. So the records the member holds and the older leader lacks are
    not delivered, and a diverging answer from that leader cuts none of them
    (DivergingAnswersSpareDelivered).
    """
    row = s.replicas[0]
    for f in s.controller.partitions[0].isr:
        rf = row[f]
        b = rf.leader
        if not s.alive[f] or b in (NO_LEADER, f) or not s.alive[b]:
            continue
        lr = row[b]
        if lr.leader != b or lr.leader_epoch != rf.leader_epoch:
            continue
        for w in _delivered(config, s):
            if not log_has(lr.log, w.offset, w.value):
                return (f"leader {b}, which ISR member {f} follows, lacks delivered "
                        f"v{w.value} at {w.offset}")
    return None


def DivergingAnswersSpareDelivered(config: Config, s: Cluster) -> str | None:
    """A diverging answer that a live member of the controller's ISR would act on cuts its
    log above every delivered write, not excused (DeliveredOnIsr).

    Why: the member holds the write, and so does the leader that answered (an ISR member,
    or a leader alone in its view, which keeps the partition), in the same epoch: the end
    offset the leader names for the member's latest epoch lies past it.
    """
    for f, cut in _isr_cuts(config, s):
        for w in _delivered(config, s):
            if w.offset >= cut:
                return f"the diverging answer to {f} cuts it to {cut}, below delivered v{w.value}"
    return None


def IsrNeverEmpty(config: Config, s: Cluster) -> str | None:
    """The controller's ISR always has a member.

    Why: a shrink drops a follower, never the leader, and a session expiry keeps the last
    member (an offline partition waits for it). So what the ISR promises about committed
    records always has someone to hold it (CommittedOnIsr, LoneLeaderKeepsPartition).
    """
    if not s.controller.partitions[0].isr:
        return "the controller's ISR is empty"
    return None


def LoneEligibleReplica(config: Config, s: Cluster) -> str | None:
    """KIP-966 at min.insync.replicas=1: the ELR holds at most one broker.

    Why: at min ISR 1 the ELR fills only as the ISR empties, which a failure does one member
    at a time, so it takes the last member alone; while the ISR is empty there is no leader
    to add anyone, and an election from the ELR moves its member into the ISR. What it is for:
    that election leaves an ISR of one, at min ISR, and EligibleReplicasWellFormed wants no
    ELR beside it.
    """
    if config.min_insync_replicas == 1:
        for p, ps in enumerate(s.controller.partitions):
            if len(ps.elr) > 1:
                return f"p{p}: ELR {list(ps.elr)} at min ISR 1"
    return None


def HighWatermarkAtReach(config: Config, s: Cluster) -> str | None:
    """A live leader's HW is at least the least LEO over its ISR view (its own, and what it
    records for the others), whenever that view has min.insync.replicas members.

    Why: the leader moves its HW to that minimum on every step that can raise it (a fetch,
    an append, a change of its view), so it never falls behind. A stale leader therefore
    commits nothing beyond its HW on its next append unless it is alone in its view
    (LoneLeaderKeepsPartition), and what it records for a follower that has since lost its
    tail is already below its HW, where losing it is excused.
    """
    from spec.actions import next_high_watermark

    for b, r in enumerate(s.replicas[0]):
        if not (s.alive[b] and r.leader == b and r.isr):
            continue
        # The HW the leader's next advance would give it (spec.actions), over what it records.
        reach = next_high_watermark(config, r, b, r.remote_log_end_offset)
        if r.high_watermark < reach:
            return f"leader {b} has HW {r.high_watermark}, below {reach} over its ISR view"
    return None


def LoneLeaderKeepsPartition(config: Config, s: Cluster) -> str | None:
    """A live broker leading with an ISR view of itself alone, or with such a LeaderAndIsr in
    flight to it that it has not passed, keeps the partition: the controller's ISR is within
    {it} and its leader is it or none.

    Why: after that view, the ISR only grows through that leader's own expansion (which
    moves its view), members are only dropped, and a clean election picks an ISR member. So a
    stale leader alone in its view, which commits each record it appends, cannot be
    overtaken by a leader whose committed records it lacks (LogMatching).
    """
    ps = s.controller.partitions[0]
    alone = {b for b, r in enumerate(s.replicas[0])
             if s.alive[b] and r.leader == b and tuple(r.isr) == (b,)}
    alone |= {m.broker for m in s.leader_and_isr
              if s.alive[m.broker] and m.leader == m.broker and tuple(m.isr) == (m.broker,)
              and m.partition_epoch > s.replica(0, m.broker).partition_epoch}
    for b in sorted(alone):
        if ps.leader not in (b, NO_LEADER) or not set(ps.isr) <= {b}:
            return (f"broker {b} leads alone in its view (or is told to), the controller has "
                    f"leader {ps.leader} and ISR {list(ps.isr)}")
    return None


def LeaderHoldsItsEpoch(config: Config, s: Cluster) -> str | None:
    """Every record of a live leader's epoch, in any log or fetch response, is in that
    leader's log at its offset.

    Why: only the leader of an epoch appends records of it, and it never truncates while it
    leads; everyone else copies them. So a leader appending at its LEO writes at an offset
    where no record of its epoch exists yet (EpochLogMatching).
    """
    for b, r in enumerate(s.replicas[0]):
        if s.alive[b] and r.leader == b and (
                found := _lacked(s, r, lambda e, r=r: e == r.leader_epoch)):
            return f"{found}, which leader {b} of its epoch does not"
    return None


def _lacked(s: Cluster, r: Replica, ours: Callable[[int], bool]) -> str | None:
    """A record of an epoch `ours` picks, in some log or fetch response, that `r` lacks at
    its offset."""
    for where, o, rec in _records(s):
        if ours(rec.epoch) and (o >= len(r.log) or r.log[o] != rec):
            return f"{where} holds {rec} at {o}"
    return None


def RunLeaderHoldsItsEpochs(config: Config, s: Cluster, run: int) -> str | None:
    """While the controller's leader is alive, every record of a leader epoch from `run` on
    (since when every epoch has named it) is in its log at its offset, whatever its view.

    Why: LeaderHoldsItsEpoch for each epoch of the run: it alone wrote them and has not
    truncated since, for a crash or a lost session ends the run (the controller handles the
    failure before the broker restarts), and a broker yet to apply the run's epochs has
    written none of them. A follower that holds such
    a record the leader lacks would otherwise have its fetch pass the leader's check.
    The Z3 form reads the ghost `c_run`.
    """
    b = s.controller.partitions[0].leader
    if b == NO_LEADER or not s.alive[b]:
        return None
    if found := _lacked(s, s.replica(0, b), lambda e: e >= run):
        return f"{found}, which leader {b} (run from epoch {run}) does not"
    return None


def EpochStartsAgree(config: Config, s: Cluster) -> str | None:
    """Every log holding records of a leader epoch holds its first one at the same offset.

    Why: the leader of an epoch starts it at its LEO on election and appends it contiguously;
    a follower copies a prefix of that log (EpochLogMatching). So a leader that finds a
    follower's last epoch in its own epoch cache, ending at or past the follower's LEO, has
    that epoch at the follower's last offset too, and the logs match below it.
    """
    first: dict[int, tuple[int, int]] = {}
    for b, r in enumerate(s.replicas[0]):
        for o, rec in enumerate(r.log):
            if o and r.log[o - 1].epoch == rec.epoch:
                continue
            seen = first.setdefault(rec.epoch, (b, o))
            if seen[1] != o:
                return (f"epoch {rec.epoch} starts at {seen[1]} on broker {seen[0]} "
                        f"and at {o} on broker {b}")
    return None


def EpochLogMatching(config: Config, s: Cluster) -> str | None:
    """Two logs holding records of one leader epoch at an offset hold the same records at it
    and at every offset below it.

    Why: the leader of an epoch appends at each offset once and never truncates while it
    leads; a follower appends a batch only after the fetch protocol's divergence check
    (KIP-320) found its last record's epoch on the leader's log at the same end offset, so
    by induction its whole prefix is the leader's. LeaderHandleFetch records a follower's
    LEO on exactly that check, and only this fact says the logs agree below it.
    """
    row = s.replicas[0]
    for b1, r1 in enumerate(row):
        for b2 in range(b1 + 1, len(row)):
            r2 = row[b2]
            n = min(len(r1.log), len(r2.log))
            for o in range(n - 1, -1, -1):
                if r1.log[o].epoch == r2.log[o].epoch:
                    if r1.log[:o + 1] != r2.log[:o + 1]:
                        return (f"brokers {b1} and {b2} both hold epoch {r1.log[o].epoch} at "
                                f"{o} but differ at or below it")
                    break
    return None


def EpochResponseMatching(config: Config, s: Cluster) -> str | None:
    """EpochLogMatching between a log and a records response: where both hold records of one
    leader epoch at an offset, they hold the same records at it and below it, as far down as
    the response goes.

    Why: the response is a copy of its leader's log, which matched every other log so then.
    """
    for f, m in enumerate(s.fetches[0]):
        if not isinstance(m, FetchResponse):
            continue
        for b, r in enumerate(s.replicas[0]):
            n = min(len(r.log), m.fetch_offset + len(m.records))
            for o in range(n - 1, m.fetch_offset - 1, -1):
                if r.log[o].epoch == m.records[o - m.fetch_offset].epoch:
                    if r.log[m.fetch_offset:o + 1] != m.records[:o + 1 - m.fetch_offset]:
                        return (f"broker {b} and the response to {f} both hold epoch "
                                f"{r.log[o].epoch} at {o} but differ at or below it")
                    break
    return None


def DivergenceCheckOnly(config: Config, s: Cluster) -> str | None:
    """With KIP-320's divergence check a follower truncates only on a diverging answer: no
    truncation is due, no epoch request or answer is in flight, and no OFFSET_OUT_OF_RANGE
    answer.

    Why: a new leader epoch sets no truncation due (a fetch's last fetched epoch does that
    work), so no follower asks for an epoch; and the end offset a leader's cache gives for a
    fetch's last fetched epoch is at most its LEO, so a fetch past its LEO fails the
    divergence check first. A follower therefore truncates only where its log and the
    leader's part, never to a bare LEO that may cut records the leader counts it as holding.
    """
    if config.variant.truncation != "diverging-epoch":
        return None
    for f, r in enumerate(s.replicas[0]):
        if r.truncation_pending:
            return f"broker {f} has a truncation due"
    for f, m in enumerate(s.fetches[0]):
        if isinstance(m, EpochRequest) or isinstance(m, FetchResponse) and (
                m.kind == "epoch" or m.error == "OFFSET_OUT_OF_RANGE"):
            return f"an epoch request, epoch answer or OFFSET_OUT_OF_RANGE answer is in flight to or from {f}"
    return None


def FollowerHwOnLeader(config: Config, s: Cluster) -> str | None:
    """Every record below the HW of a live follower the true leader has heard from in its
    current session is at the same offset in the true leader's log.

    Why: the leader records a follower's LEO only from a fetch that passed KIP-320's check,
    below which the two logs agree; the follower's HW comes from this leader's answers (at
    most its HW, over records it sent) or was kept from before, over records committed then,
    which the leader, an ISR member then, holds. ISR expansion reads it: the joining follower
    exposes only the leader's records.
    """
    leader = s.true_leader(0)
    if leader == NO_LEADER:
        return None
    row = s.replicas[0]
    lr = row[leader]
    for f, rf in enumerate(row):
        if not s.alive[f] or not _heard(s, leader, f):
            continue
        h = rf.high_watermark
        if not _backs(lr, rf, h):
            return f"follower {f}'s HW {h} covers records leader {leader} lacks"
    return None


def EpochCommittedByLeader(config: Config, s: Cluster) -> str | None:
    """A record of the true leader's epoch is below some replica's HW only if it is below
    the true leader's HW.

    Why: only this leader writes records of its epoch, and a replica learns a HW over them
    only from its answers, which carry its HW; a leader's HW does not go down while it
    leads.
    """
    leader = s.true_leader(0)
    if leader == NO_LEADER:
        return None
    lr = s.replicas[0][leader]
    for x, rx in enumerate(s.replicas[0]):
        for o in range(lr.high_watermark, rx.high_watermark):
            if rx.log[o].epoch == lr.leader_epoch:
                return (f"broker {x}'s HW covers {rx.log[o]} at {o}, past leader {leader}'s "
                        f"HW {lr.high_watermark}")
    return None


def run_start(before: Cluster, after: Cluster, run: int) -> int:
    """The ghost `run` (the leader epoch since which every epoch has named the controller's
    leader) after a step from `before` to `after`: a new leader epoch with another leader
    starts a new run. The concrete state does not keep it; a search that does carries it
    along each path (`model_check.explore.model.RunGhostModel`)."""
    old, new = before.controller.partitions[0], after.controller.partitions[0]
    if new.leader_epoch != old.leader_epoch and new.leader != old.leader:
        return new.leader_epoch
    return run


def RunLeaderBacked(config: Config, s: Cluster, run: int) -> str | None:
    """RemoteLeoBacked's and FollowerHwOnLeader's claims, for every live leader the controller
    has re-elected in each leader epoch since its view's (`run` at or below its view's epoch),
    not only the true leader: a follower LEO it records for a live follower in both ISRs (or
    in the follower's registered broker epoch) is backed by the follower's log, and a live
    follower it has heard from in its current broker epoch has a HW over records it holds.

    Why: such a leader keeps what it knows of its followers when it applies the next epoch's
    request (Kafka resets it only for a new leader, and B11's fix when an epoch was missed),
    so the true leader's lemmas need it before. It is a lemma about the history, which the
    concrete state does not keep: the Z3 form reads the encoding's ghost `c_run`.
    """
    row = s.replicas[0]
    for b, r in enumerate(row):
        if not (s.alive[b] and r.leader == b and r.remote_log_end_offset
                and s.controller.partitions[0].leader == b and r.leader_epoch >= run):
            continue
        for f, rf in enumerate(row):
            k = r.remote_log_end_offset[f]
            if f == b or k == UNKNOWN or not s.alive[f]:
                continue
            if _current_follower(s, r, f) and not _backs(rf, r, k):
                return (f"leader {b} (run from epoch {run}) records LEO {k} for {f}, whose log "
                        "does not back it")
            h = rf.high_watermark
            if _heard(s, b, f) and not _backs(r, rf, h):
                return (f"follower {f}'s HW {h} covers records leader {b} (run from epoch "
                        f"{run}) lacks")
    return None


def RunEpochsLedByLeader(config: Config, s: Cluster, run: int) -> str | None:
    """Every epoch a broker other than the controller's leader led without writing
    (`_empty_epochs`) is older than `run`, the leader epoch since which every epoch has named
    the controller's leader.

    Why: an epoch has one leader, and from `run` on that is the controller's. A follower
    whose cache or fetch shows such an epoch therefore does not pass for one of the current
    run when the leader checks its fetch. Like RunLeaderBacked it is about the history: the
    Z3 form reads the ghost `c_run`.
    """
    leader = s.controller.partitions[0].leader
    for b, e, shown in _empty_epochs(s):
        if b != leader and e >= run:
            return f"{shown}, and every epoch from {run} on is led by {leader}"
    return None


def _leads_in(s: Cluster, b: int, epoch: int) -> bool:
    """Broker `b` is up and leads in leader epoch `epoch` by its view."""
    r = s.replicas[0][b]
    return s.alive[b] and r.leader == b and r.leader_epoch == epoch


def _takes(config: Config, s: Cluster, f: int, kind: str) -> FetchResponse | None:
    """The answer of `kind` in flight to `f` if `f` would act on it (up, still following its
    leader, in its leader epoch with fencing), else None."""
    m = s.fetches[0][f]
    r = s.replicas[0][f]
    if not (isinstance(m, FetchResponse) and m.kind == kind and s.alive[f]):
        return None
    if r.leader != m.leader or (config.variant.fencing and r.leader_epoch != m.leader_epoch):
        return None
    return m


def _takes_records(config: Config, s: Cluster, f: int) -> FetchResponse | None:
    """The records response in flight to `f` if `f` would append it, else None."""
    m = _takes(config, s, f, "records")
    r = s.replicas[0][f]
    return m if m and not r.truncation_pending and m.fetch_offset == len(r.log) else None


def AnswersWithinView(config: Config, s: Cluster) -> str | None:
    """With fencing, an answer (not an error) in flight to a live broker carries a leader
    epoch no later than the broker's view.

    Why: a fenced leader answers only a fetch of its own leader epoch, which the follower
    sent from its view, and a view's epoch only grows while the broker is up (a crash drops
    what is in flight).
    """
    if not config.variant.fencing:
        return None
    for f, m in enumerate(s.fetches[0]):
        if isinstance(m, FetchResponse) and m.kind != "error" and s.alive[f] \
                and m.leader_epoch > s.replicas[0][f].leader_epoch:
            return f"the answer to {f} is of leader epoch {m.leader_epoch}, past its view's"
    return None


def ResponsePrefixMatches(config: Config, s: Cluster) -> str | None:
    """A records response that its follower would append, from a leader still leading in
    the response's epoch: the follower's log below the fetch offset is the leader's.

    Why: the leader sent records only after its divergence check passed, which (by
    EpochLogMatching) means the two logs agreed below the offset; since then the follower's
    log has not changed in that view and the leader's has only grown.
    """
    for f in range(config.brokers):
        m = _takes_records(config, s, f)
        if m is None:
            continue
        lr, o = s.replicas[0][m.leader], m.fetch_offset
        if _leads_in(s, m.leader, m.leader_epoch) and lr.log[:o] != s.replicas[0][f].log[:o]:
            return f"broker {f}'s log below its fetch offset {o} is not leader {m.leader}'s"
    return None


def PendingLogMatching(config: Config, s: Cluster) -> str | None:
    """EpochLogMatching between the log a follower would have after appending the records
    response in flight to it and every other log; and, past offset 0, the response's
    records are of epochs no older than the follower's latest cached epoch.

    Why: that log is the leader's when it answered (ResponsePrefixMatches), and two logs that
    ever held the same epoch at one offset hold the same records up to it. The follower
    sent its latest epoch, and the leader sent records only when its own log held that
    epoch up to the fetch offset, so what follows is of that epoch or later. At offset 0
    the leader does not check: a follower that led an epoch without writing is sent records
    of older epochs, which replace every entry of its cache (Kafka's assign drops entries at
    or past an append's start).
    """
    row = s.replicas[0]
    for f in range(config.brokers):
        m = _takes_records(config, s, f)
        if m is None:
            continue
        top = row[f].latest_epoch()
        if m.fetch_offset > 0 and any(rec.epoch < top for rec in m.records):
            return f"broker {f} would append records older than its latest epoch {top}"
        log = row[f].log + m.records
        for x, rx in enumerate(row):
            if x == f:
                continue
            for o in range(min(len(log), len(rx.log))):
                if log[o].epoch == rx.log[o].epoch and log[:o + 1] != rx.log[:o + 1]:
                    return (f"broker {f} would hold epoch {log[o].epoch} at {o} as broker {x} "
                            "does, with other records below")
    return None


def PendingHwCommitted(config: Config, s: Cluster) -> str | None:
    """CommittedOnIsr for the log and HW a follower would have after appending the records
    response in flight to it: below the response's HW each record of that log (its value not
    excused, or the follower counted as CommittedOnIsr counts it) is on every other member
    of the controller's ISR that is live (every member when none is).

    Why: the follower's HW becomes the response's, over its own prefix and the response's
    records; the leader's HW covered what every member held when it answered, and what is
    committed stays on the ISR.
    """
    for f in range(config.brokers):
        m = _takes_records(config, s, f)
        if m is None:
            continue
        found = _uncommitted(s, f, s.replicas[0][f].log + m.records, m.high_watermark, but=f)
        if found is not None:
            o, rec, x = found
            return (f"broker {f} would take HW {m.high_watermark} over {rec} at {o}, "
                    f"which ISR member {x} lacks")
    return None


def RequestHwCommitted(config: Config, s: Cluster) -> str | None:
    """With every write flushed (`log.flush.interval.messages=1`): CommittedOnIsr for the HW a
    live leader would take on applying a LeaderAndIsr request in flight to it that keeps it
    leader in the epoch of its view (an ISR change it has not applied yet): every record of
    its log below the least LEO it records over the request's other ISR members (that HW) is
    on every live member of the controller's ISR (every member when none is live).
    Unflushed, it is false: B12 in docs/protocol.md.

    Why: applying such a request moves the leader's HW to that least LEO (`makeLeader` of
    the same epoch, then `maybeIncrementLeaderHW`), however late it arrives. Each member
    fetched those records from the leader, so every leader elected since (an ISR member)
    had them, and a broker that joined the ISR since copied them first: a member loses a
    record only by truncating to a leader without it, or in a crash, which loses nothing here.
    """
    if config.log_flush_interval_messages != 1:
        return None
    for m in s.leader_and_isr:
        b = m.broker
        r = s.replicas[0][b]
        if not (m.leader == b and _leads_in(s, b, m.leader_epoch) and r.remote_log_end_offset
                and m.partition_epoch > r.partition_epoch):
            continue
        reach = min([len(r.log)] + [r.remote_log_end_offset[f] for f in m.isr if f != b])
        found = _uncommitted(s, b, r.log, reach)
        if found is not None:
            o, rec, x = found
            return (f"leader {b} would take HW {reach} from the request of partition epoch "
                    f"{m.partition_epoch} over {rec} at {o}, which ISR member {x} lacks")
    return None


def _answer_off_log(lr: Replica, m: FetchResponse) -> bool:
    """Diverging answer `m` does not fit leader `lr`'s log: its end is outside the log, or
    the record at the end is not of a later epoch than the one named, or the one below is."""
    end = m.end_offset
    if not 0 <= end <= len(lr.log):
        return True
    if end < len(lr.log) and lr.log[end].epoch <= m.epoch:
        return True
    return end > 0 and lr.log[end - 1].epoch > m.epoch


def _answer_unfit(lr: Replica, m: FetchResponse, top: int) -> bool:
    """Leader `lr`'s cache has an epoch between the one answer `m` names and the follower's
    latest (`top`), or the answer does not fit its log."""
    return any(m.epoch < e <= top for e, _ in lr.epoch_cache) or _answer_off_log(lr, m)


def DivergingAnswersFitFollower(config: Config, s: Cluster) -> str | None:
    """A diverging answer its follower would act on names an epoch older than its own leader
    epoch and no later than the follower's latest; from a leader still leading in that
    epoch, it names the leader's last epoch up to the follower's latest, and its end is where
    the leader's log passes that epoch.

    Why: the follower sent its cache's latest epoch and has not changed its log since; the
    leader answered with the last epoch of its cache up to it and where that epoch ends, and
    for its own epoch (its log holds every record of it) it would not have diverged. While
    the leader leads, its log only grows and new cache entries are of later epochs.
    """
    if config.variant.truncation != "diverging-epoch":
        return None
    row = s.replicas[0]
    for f in range(config.brokers):
        m = _takes(config, s, f, "diverging")
        if m is None:
            continue
        top = row[f].latest_epoch()
        if m.epoch > top or m.epoch >= m.leader_epoch:
            return (f"the diverging answer to {f} names epoch {m.epoch} in leader epoch "
                    f"{m.leader_epoch}, its latest being {top}")
        lr = row[m.leader]
        if _leads_in(s, m.leader, m.leader_epoch) and _answer_unfit(lr, m, top):
            return (f"the diverging answer to {f} (epoch {m.epoch}, end {m.end_offset}) is not "
                    f"what leader {m.leader} gives for {top}")
    return None


def _isr_cuts(config: Config, s: Cluster):
    """(member, the log end it would cut to) for each live member of the controller's ISR
    that would act on the diverging answer in flight to it."""
    if config.variant.truncation != "diverging-epoch":
        return
    for f in s.controller.partitions[0].isr:
        m = _takes(config, s, f, "diverging")
        if m is not None:
            row = s.replicas[0][f]
            yield f, truncate_to_epoch_answer(row, m.epoch, m.end_offset)[0].log_end_offset


def DivergingAnswersSpareCommitted(config: Config, s: Cluster) -> str | None:
    """A diverging answer that a live member of the controller's ISR would act on cuts its
    log no lower than any record another replica holds below its HW (its value not excused,
    or that replica counted as CommittedOnIsr counts it).

    Why: the follower's records past the cut are not the leader's, and what is committed is
    on the leader; a HW passes the cut only through the follower, which cannot fetch while
    the answer is in flight.
    """
    row = s.replicas[0]
    for f, cut in _isr_cuts(config, s):
        for x, rx in enumerate(row):
            counted = _counted(s, x)
            if x != f and any(rx.log[o].value not in s.excused or counted
                              for o in range(cut, rx.high_watermark)):
                return (f"the diverging answer to {f} cuts it to {cut}, below broker {x}'s "
                        f"HW {rx.high_watermark}")
    return None


def _running(s: Cluster, run: int) -> int | None:
    """The controller's leader if it is up and leads in a view the run covers, else None."""
    b = s.controller.partitions[0].leader
    if b == NO_LEADER or not s.alive[b]:
        return None
    r = s.replicas[0][b]
    return b if r.leader == b and r.remote_log_end_offset and r.leader_epoch >= run else None


def RunLeaderHeardInRun(config: Config, s: Cluster, run: int) -> str | None:
    """The controller's leader, in a view its run covers, has heard from a live follower (in
    the follower's current broker epoch) only if the follower's view is of the run too.

    Why: a leader records a follower's LEO from a fetch of its own leader epoch, and a
    leader starting a new run forgets what it knew (Kafka resets it for a new leader, B11's
    fix after a missed epoch); a follower's view only moves forward while it is up, and a
    new session gives it a new broker epoch. Like RunLeaderBacked it reads the ghost.
    """
    b = _running(s, run)
    if b is None:
        return None
    for f, rf in enumerate(s.replicas[0]):
        if f != b and s.alive[f] and _heard(s, b, f) and rf.leader_epoch < run:
            return (f"leader {b} (run from epoch {run}) has heard from {f}, whose view is of "
                    f"epoch {rf.leader_epoch}")
    return None


def RunAnswersFromLeader(config: Config, s: Cluster, run: int) -> str | None:
    """What the controller's leader answered in its run is still what it would answer: a
    records response of an epoch of the run holds the leader's records at their offsets,
    and if its follower would append it, the follower's log below the fetch offset is the
    leader's; a diverging answer its follower would act on fits the leader's cache and log
    (DivergingAnswersFitFollower's claim).

    Why: through a run the leader does not truncate; its log only grows and its cache gains
    later epochs (or one at its log end replaces an epoch it wrote nothing in, which no
    follower holds). DivergingAnswersFitFollower and ResponsePrefixMatches say so while the
    leader stays in the answer's epoch; this carries it across re-elections of the run.
    """
    b = _running(s, run)
    if b is None:
        return None
    lr = s.replicas[0][b]
    for f, m in enumerate(s.fetches[0]):
        if not (isinstance(m, FetchResponse) and m.leader == b and m.leader_epoch >= run):
            continue
        o = m.fetch_offset
        if m.kind == "records" and lr.log[o:o + len(m.records)] != m.records:
            return f"the response to {f} holds records leader {b} (run from {run}) does not"
        if _takes_records(config, s, f) and lr.log[:o] != s.replicas[0][f].log[:o]:
            return (f"broker {f}'s log below its fetch offset {o} is not leader {b}'s (run "
                    f"from {run})")
        if config.variant.truncation == "diverging-epoch" and _takes(config, s, f, "diverging") \
                and _answer_unfit(lr, m, s.replicas[0][f].latest_epoch()):
            return (f"the diverging answer to {f} is not what leader {b} (run from {run}) "
                    "gives")
    return None


Lemma = Callable[[Config, Cluster], str | None]

LEMMAS: dict[str, Lemma] = {
    f.__name__: f for f in (WellFormed, UnflushedBelowInterval, EpochCacheMonotone,
                            LeaderViewConsistent, DownBrokerReset, ProduceUnwritten, ValuesAtOneOffset, ValuesKeepTheirEpoch,
                            RecordsInRange, IsrWithinLeaderView, ViewlessOutOfIsr, ViewlessUnrecorded,
                            ViewlessRequestsMatchIsr,
                            RegistrationCurrent, CacheMatchesLog, LeaderCacheCurrent,
                            CommittedWithinLeaderReach, LeaderRequestCoversIsr,
                            ResponsesFromLeaderLog,
                            LogWithinView, RequestsNotBehindLog, ResponsesWellFormed,
                            UnregisteredOutOfIsr, RemoteLeoBacked, CommittedOnIsr,
                            EpochLogMatching, LeaderHoldsItsEpoch,
                            LoneLeaderKeepsPartition, HighWatermarkAtReach,
                            IsrNeverEmpty, FetchRequestsCurrent, EpochStartsAgree,
                            DivergenceCheckOnly, FollowerHwOnLeader,
                            EpochCommittedByLeader, UnstartedEpochUnwritten, EmptyEpochLed,
                            EmptyEpochUnwritten, DivergingAnswersCurrent,
                            EpochResponseMatching,
                            LeaderFetchesNotInItsEpoch, AnswersWithinView,
                            ResponsePrefixMatches, PendingLogMatching, PendingHwCommitted,
                            DivergingAnswersFitFollower, DivergingAnswersSpareCommitted,
                            RequestHwCommitted,
                            LoneEligibleReplica, PurgatoryInLog, DeliveredOnIsr,
                            DeliveredWithinLeaderReach, FollowedLeaderHoldsDelivered,
                            DivergingAnswersSpareDelivered)
}
