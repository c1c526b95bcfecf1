"""Z3 versions of the strengthening lemmas of `spec.lemmas` (same names, same meaning).

Each is a violation formula over one witness integer, like `symbolic.VIOLATIONS`; see
spec/lemmas.py for what each lemma says and why it is needed. The encoding adds facts about
its own ghost fields (`EncodingWellFormed`), which have no concrete counterpart.

The history lemmas are about the encoding's record of every partition state the controller
wrote (`hist_*`, indexed by partition epoch): a LeaderAndIsr request in flight is a flag at
the partition epoch it carries, and its content is read from the record. The concrete state
has no such record (the requests carry their content), so these lemmas have no counterpart
in spec/lemmas.py; they are checked by being proved (`HISTORY` is inductive on its own).
A pair formula (`pair`) takes two witnesses and is assumed at every pair of terms.

The values layer (`VALUES`) and the data layer (`DATA`) mirror spec/lemmas.py one for one,
except HistoryMonotone and HistoryRun (about the record) and RunLeaderBacked, which reads the
ghost `c_run` (since when the controller's leader has led) and whose concrete form takes it
as an argument;
the answers layer (`ANSWERS`, opt-in with `--add-lemma answers`) mirrors its spec/lemmas.py
forms the same way, its run lemmas reading `c_run`; the snapshot layer (`SNAPSHOT_LAYER`,
opt-in with `--add-lemma snapshots`) asks lemmas about logs of the log a follower would have
after acting on its answer, mostly through ghosts (`SNAPSHOT_GHOSTS`);
where a formula reads `value_offset` it relies on EncodingWellFormed (a value in a log sits
at its `value_offset`) to stand for the concrete "held anywhere".
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import z3

from model_check.prove import symbolic as sym
from spec.state import NO_LEADER, UNKNOWN


def pair(formula: Callable) -> Callable:
    """Mark a violation formula as taking two witnesses, `(shape, s, w, w2)`."""
    formula.pair = True
    return formula


def v_WellFormed(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    n = shape.n
    out = [s.c_epoch < 0, s.c_pe < 0, s.c_leader < NO_LEADER, s.c_leader >= n, s.next_value < 1]
    for r in s.replicas:
        out += [r.flushed_offset < 0, r.flushed_offset > r.log_len, r.high_watermark < 0,
                r.leader < NO_LEADER, r.leader >= n,
                sym.And(0 <= w, w < r.log_len,
                       sym.Or(r.log_value[w] <= 0, r.log_value[w] >= s.next_value))]
    return sym.Or(out)


def v_EncodingWellFormed(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """The encoding's own ranges: cache lengths fit the slots, slot kinds are known, record
    counts are >= 0, and a value in a log sits at its `value_offset`."""
    out = []
    for r in s.replicas:
        out += [r.cache_len < 0, r.cache_len > shape.cache_slots,
                sym.And(0 <= w, w < r.log_len, s.value_offset[r.log_value[w]] != w)]
    for m in s.fetches:
        out += [m.kind < sym.NONE, m.kind > sym.RESP_ERROR,
                sym.And(m.kind == sym.RESP_RECORDS, m.rec_count < 0)]
    return sym.Or(out)


def v_UnflushedBelowInterval(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    interval = shape.config.log_flush_interval_messages
    if interval is None:
        return z3.BoolVal(False)
    return sym.Or([r.log_len - r.flushed_offset >= interval for r in s.replicas])


def v_EpochCacheMonotone(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for r in s.replicas:
        for i in range(shape.cache_slots - 1):
            out.append(sym.And(i + 1 < r.cache_len, sym.Or(
                r.cache_epoch[i] >= r.cache_epoch[i + 1],
                r.cache_start[i] >= r.cache_start[i + 1])))
        out += [sym.And(i < r.cache_len, sym.Or(r.cache_epoch[i] < 0, r.cache_start[i] < 0))
                for i in range(shape.cache_slots)]
        out.append(sym.And(r.cache_len > 0,
                          sym.at_index(r.cache_start, r.cache_len - 1) > r.log_len))
    return sym.Or(out)


def v_LeaderViewConsistent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for b, r in enumerate(s.replicas):
        out += [sym.And(s.alive[b], r.leader == b, z3.Not(r.side)),
                r.leader_epoch > s.c_epoch]
    return sym.Or(out)


def v_DownBrokerReset(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for b, r in enumerate(s.replicas):
        down = z3.Not(s.alive[b])
        out.append(sym.And(down, sym.Or(
            r.leader != NO_LEADER, r.leader_epoch != UNKNOWN, r.partition_epoch != UNKNOWN,
            r.side, r.truncation_pending, s.lai[b][w], s.fetches[b].kind != sym.NONE)))
        out += [sym.And(down, m.kind != sym.NONE, m.leader == b) for m in s.fetches]
    return sym.Or(out)


def _covers(m, o) -> z3.BoolRef:
    """Fetch message `m` is a records response holding offset `o`."""
    return sym.And(m.kind == sym.RESP_RECORDS, m.fetch_offset <= o,
                  o < m.fetch_offset + m.rec_count)


def _lacks(lr: sym.SReplica, w, epoch, value) -> z3.BoolRef:
    """`lr`'s log has no record (`epoch`, `value`) at offset `w`."""
    return sym.Or(w >= lr.log_len, lr.log_epoch[w] != epoch, lr.log_value[w] != value)


def _another_member(isr, b: int) -> z3.BoolRef:
    """Some broker other than `b` is in `isr` (membership per broker: the controller's ISR,
    or a recorded one)."""
    return sym.Or([m for x, m in enumerate(isr) if x != b])


def _viewless(s: sym.SState, b: int) -> z3.BoolRef:
    """Broker `b` is up without a view: restarted, no LeaderAndIsr applied yet."""
    return sym.And(s.alive[b], s.replicas[b].partition_epoch < 0)


def _holds_value(s: sym.SState, v) -> list:
    """Where value `v` would be, given it sits at its `value_offset`: each log, purgatory and
    records response that has it there."""
    o = s.value_offset[v]
    out = []
    for b, r in enumerate(s.replicas):
        out += [sym.holds_value(s, b, v), sym.And(r.purgatory[o], r.purgatory_value[o] == v)]
    for m in s.fetches:
        out.append(sym.And(_covers(m, o), m.rec_value[o] == v))
    return out


def v_ProduceUnwritten(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a value; with ValuesAtOneOffset and EncodingWellFormed a value held anywhere is
    at its `value_offset`, so looking there is looking everywhere."""
    return sym.And(s.produce[w] != UNKNOWN,
                  sym.Or(w <= 0, w >= s.next_value, *_holds_value(s, w)))


def _drawn(s: sym.SState, v) -> z3.BoolRef:
    return sym.And(0 < v, v < s.next_value)


def v_ValuesAtOneOffset(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset (purgatories, responses) or a value (acked, consumed). Logs are in
    WellFormed and EncodingWellFormed; acked and consumed values are located by the ghost
    itself, so only their range is asked."""
    out = [sym.And(sym.Or(s.acked[w], s.consumed[w]), z3.Not(_drawn(s, w)))]
    for r in s.replicas:
        v = r.purgatory_value[w]
        out.append(sym.And(r.purgatory[w], sym.Or(z3.Not(_drawn(s, v)), s.value_offset[v] != w)))
    for m in s.fetches:
        v = m.rec_value[w]
        out.append(sym.And(_covers(m, w), sym.Or(z3.Not(_drawn(s, v)), s.value_offset[v] != w)))
    return sym.Or(out)


def v_ValuesKeepTheirEpoch(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset. Every copy of a value sits at its `value_offset`, so two copies at
    the same offset are all there is to compare: each pair of logs, and each records
    response with each log."""
    out = []
    logs = s.replicas
    for i, r1 in enumerate(logs):
        in1 = sym.And(0 <= w, w < r1.log_len)
        for r2 in logs[i + 1:]:
            out.append(sym.And(in1, w < r2.log_len, r1.log_value[w] == r2.log_value[w],
                              r1.log_epoch[w] != r2.log_epoch[w]))
        for m in s.fetches:
            out.append(sym.And(in1, _covers(m, w), m.rec_value[w] == r1.log_value[w],
                              m.rec_epoch[w] != r1.log_epoch[w]))
    return sym.Or(out)


def v_RecordsInRange(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset; the cache's epochs rise, so its last entry is the one to ask."""
    return sym.Or([sym.Or(sym.And(0 <= w, w < r.log_len,
                               sym.Or(r.log_epoch[w] < 0, r.log_epoch[w] > s.c_epoch)),
                        sym.latest_epoch(r) > s.c_epoch)
                  for r in s.replicas])


def v_IsrWithinLeaderView(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    return sym.Or([sym.And(sym.is_true_leader(s, b), s.c_isr[x], z3.Not(r.isr[x]))
                  for b, r in enumerate(s.replicas) for x in range(shape.n)])


def v_ViewlessOutOfIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    n = shape.n
    if not shape.config.variant.broker_epochs:
        return z3.BoolVal(False)
    return sym.Or([sym.And(_viewless(s, b), s.c_isr[b], _another_member(s.c_isr, b))
                  for b in range(n)])


def v_ViewlessRequestsMatchIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a partition epoch (a request in flight)."""
    n = shape.n
    if not shape.config.variant.broker_epochs:
        return z3.BoolVal(False)
    told = [h[w] for h in s.hist_isr]
    return sym.Or([sym.And(_viewless(s, b), s.lai[b][w],
                          sym.Or(told[b] != s.c_isr[b],
                                 sym.And(told[b], _another_member(told, b))))
                  for b in range(n)])


def v_CacheMatchesLog(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset; the entry covering it is the last one starting at or before it."""
    out = []
    for r in s.replicas:
        covered, epoch = z3.BoolVal(False), z3.IntVal(UNKNOWN)
        for i in range(shape.cache_slots):
            here = sym.And(i < r.cache_len, r.cache_start[i] <= w)
            covered, epoch = sym.Or(covered, here), z3.If(here, r.cache_epoch[i], epoch)
        out.append(sym.And(0 <= w, w < r.log_len,
                          sym.Or(z3.Not(covered), epoch != r.log_epoch[w])))
    return sym.Or(out)


def v_LeaderCacheCurrent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    return sym.Or([sym.And(s.alive[b], r.leader == b, sym.latest_epoch(r) != r.leader_epoch)
                  for b, r in enumerate(s.replicas)])


def v_CommittedWithinLeaderReach(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    if not shape.config.variant.broker_epochs:
        return z3.BoolVal(False)
    out = []
    for b in range(shape.n):
        past = _past_leader_reach(s, b, w)
        out += [sym.And(past, 0 <= w, w < r.high_watermark, z3.Not(s.excused[r.log_value[w]]))
                for r in s.replicas]
    return sym.Or(out)


def _past_leader_reach(s: sym.SState, b: int, o) -> z3.BoolRef:
    """`b` is the true leader and offset `o` is at or past its HW and its epoch's start."""
    lr = s.replicas[b]
    return sym.And(sym.is_true_leader(s, b), o >= lr.high_watermark,
                   o >= sym.epoch_start_offset(lr, lr.leader_epoch))


def v_LeaderRequestCoversIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a partition epoch (a request in flight)."""
    return sym.Or([sym.And(s.alive[b], s.lai[b][w], w > r.partition_epoch,
                         s.hist_leader[w] == b, s.hist_epoch[w] == s.c_epoch,
                         sym.Or([sym.And(s.c_isr[x], z3.Not(s.hist_isr[x][w]))
                                for x in range(shape.n)]))
                  for b, r in enumerate(s.replicas)])


def v_ResponsesFromLeaderLog(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    out = [sym.And(_covers(m, w), m.rec_epoch[w] > m.leader_epoch) for m in s.fetches]
    for m in s.fetches:
        for b, lr in enumerate(s.replicas):
            sent = sym.And(m.kind == sym.RESP_RECORDS, m.leader == b, s.alive[b])
            leads = sym.And(sent, lr.leader == b, lr.leader_epoch == m.leader_epoch)
            out += [sym.And(sent, m.leader_epoch > lr.leader_epoch),
                    sym.And(leads, m.high_watermark > lr.high_watermark),
                    sym.And(leads, _covers(m, w), _lacks(lr, w, m.rec_epoch[w], m.rec_value[w]))]
            out += [sym.And(m.kind == sym.RESP_RECORDS, m.leader == b, i < lr.cache_len,
                           lr.cache_epoch[i] == m.leader_epoch, w < lr.cache_start[i],
                           _covers(m, w), _lacks(lr, w, m.rec_epoch[w], m.rec_value[w]))
                    for i in range(shape.cache_slots)]
    return sym.Or(out)


def v_RegistrationCurrent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    return sym.Or([sym.Or(s.broker_epochs[b] < 0, sym.And(e != UNKNOWN, e != s.broker_epochs[b]))
                  for b, e in enumerate(s.registered)])


def v_ViewlessUnrecorded(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for f in range(shape.n):
        viewless = _viewless(s, f)
        out.append(sym.And(viewless, s.fetches[f].kind != sym.NONE))
        out += [sym.And(viewless, r.side, r.remote_leo[f] != UNKNOWN,
                       r.remote_be[f] >= s.broker_epochs[f])
                for b, r in enumerate(s.replicas) if b != f]
    return sym.Or(out)


def v_LogWithinView(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset; the cache's epochs rise, so its last entry is the one to ask."""
    return sym.Or([sym.And(s.alive[b], r.leader_epoch != UNKNOWN,
                         sym.Or(sym.And(0 <= w, w < r.log_len, r.log_epoch[w] > r.leader_epoch),
                               sym.latest_epoch(r) > r.leader_epoch))
                  for b, r in enumerate(s.replicas)])


@pair
def v_RequestsNotBehindLog(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w` is a partition epoch (a request in flight), `w2` an offset of the broker's log:
    two witnesses, so that a step that changes a view can read the lemma at the record it
    is asked about rather than through a chain of LeaderEpochMonotonic's neighbours."""
    out = []
    for b, r in enumerate(s.replicas):
        out.append(sym.And(s.alive[b], s.lai[b][w], w > r.partition_epoch,
                          sym.Or(sym.And(0 <= w2, w2 < r.log_len, s.hist_epoch[w] < r.log_epoch[w2]),
                                s.hist_epoch[w] < sym.latest_epoch(r))))
    return sym.Or(out)


@pair
def v_UnstartedEpochUnwritten(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w` is a partition epoch (a request in flight), `w2` an offset (a record of its epoch in
    a log or a response)."""
    out = []

    def written(e) -> list:
        return ([sym.And(i < r.cache_len, r.cache_epoch[i] == e)
                 for r in s.replicas for i in range(shape.cache_slots)]
                + [sym.And(0 <= w2, w2 < r.log_len, r.log_epoch[w2] == e) for r in s.replicas]
                + [sym.And(_covers(m, w2), m.rec_epoch[w2] == e) for m in s.fetches])

    e = s.hist_epoch[w]
    # The same for every broker: built once (it was a tenth of an induction's Python time).
    written_e, written_c = written(e), written(s.c_epoch)
    for b, rb in enumerate(s.replicas):
        told = sym.And(s.alive[b], s.lai[b][w], s.hist_leader[w] == b, e > rb.leader_epoch)
        elected = sym.And(s.alive[b], s.c_leader == b, s.c_epoch > rb.leader_epoch)
        out += [sym.And(told, x) for x in written_e]
        out += [sym.And(elected, x) for x in written_c]
    return sym.Or(out)


def _empty_epochs(shape: sym.Shape, s: sym.SState) -> list[tuple[int, z3.ArithRef, z3.BoolRef]]:
    """spec.lemmas._empty_epochs: (broker, epoch, condition) for every candidate."""
    out = []
    for b, (r, m) in enumerate(zip(s.replicas, s.fetches, strict=True)):
        out += [(b, r.cache_epoch[i], sym.And(i < r.cache_len, r.cache_start[i] == r.log_len))
                for i in range(shape.cache_slots)]
        below, last = _below(shape, r, m.fetch_offset)
        e = m.last_fetched_epoch
        past = sym.Or(sym.And(z3.Not(below[0]), e != UNKNOWN),
                     *[sym.And(last[i], r.cache_epoch[i] < e) for i in range(shape.cache_slots)])
        out.append((b, e, sym.And(m.kind == sym.FETCH, past)))
    return out


def v_EmptyEpochLed(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a partition epoch (a LeaderAndIsr request in flight)."""
    asked = sym.Or([s.lai[x][w] for x in range(shape.n)])
    named = [(s.c_leader, s.c_epoch, True), (s.hist_leader[w], s.hist_epoch[w], asked)]
    named += [(x.leader, x.leader_epoch, True) for x in s.replicas]
    named += [(m.leader, m.current_leader_epoch, m.kind == sym.FETCH) for m in s.fetches]
    return sym.Or([sym.And(empty, where, epoch == e, leader != NO_LEADER, leader != b)
                  for b, e, empty in _empty_epochs(shape, s)
                  for leader, epoch, where in named])


def v_EmptyEpochUnwritten(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    held = [(sym.And(0 <= w, w < r.log_len), r.log_epoch[w]) for r in s.replicas]
    held += [(_covers(m, w), m.rec_epoch[w]) for m in s.fetches]
    return sym.Or([sym.And(empty, where, epoch == e) for _, e, empty in _empty_epochs(shape, s)
                  for where, epoch in held])


def v_RunEpochsLedByLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    return sym.Or([sym.And(empty, s.c_leader != b, e >= s.c_run)
                  for b, e, empty in _empty_epochs(shape, s)])


def _below(shape: sym.Shape, r: sym.SReplica, o) -> tuple[list, list]:
    """Which cache slots start below offset `o`, and which one is the last of those."""
    c = shape.cache_slots
    below = [sym.And(i < r.cache_len, r.cache_start[i] < o) for i in range(c)]
    # Starts rise along the cache, so the entries below the offset are a prefix of it.
    last = [sym.And(below[i], *([z3.Not(below[i + 1])] if i + 1 < c else []))
            for i in range(c)]
    return below, last


def _fetched_epoch_uncached(shape: sym.Shape, r: sym.SReplica, m, w) -> z3.BoolRef:
    """spec.lemmas._fetched_epoch_cached fails; `w` is the offset just below the request's."""
    o, e, c = m.fetch_offset, m.last_fetched_epoch, shape.cache_slots
    held = [i < r.cache_len for i in range(c)]
    below, last = _below(shape, r, o)
    out = [sym.And(last[i], r.cache_epoch[i] > e) for i in range(c)]
    out += [sym.And(last[i], r.cache_epoch[i] == e, w == o - 1, 0 <= w, r.log_epoch[w] != e)
            for i in range(c)]
    out += [sym.And(held[j], r.cache_start[j] >= o,
                   z3.Not(sym.And(r.cache_epoch[j] == e, r.cache_start[j] == o)),
                   r.cache_epoch[j] <= m.current_leader_epoch) for j in range(c)]
    nothing_after = z3.Not(sym.Or([sym.And(held[j], r.cache_start[j] >= o) for j in range(c)]))
    out += [sym.And(last[i], r.cache_epoch[i] < e, nothing_after) for i in range(c)]
    out.append(sym.And(z3.Not(below[0]), e != UNKNOWN, nothing_after))
    return sym.Or(out)


def v_FetchRequestsCurrent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for f, (r, m) in enumerate(zip(s.replicas, s.fetches, strict=True)):
        fetch = m.kind == sym.FETCH
        same = sym.And(fetch, r.leader == m.leader, r.leader_epoch == m.current_leader_epoch)
        out += [sym.And(fetch, sym.Or(m.broker_epoch < 0, m.broker_epoch > s.broker_epochs[f],
                                    m.current_leader_epoch > r.leader_epoch,
                                    m.last_fetched_epoch > m.current_leader_epoch)),
                sym.And(same, sym.Or(r.truncation_pending, m.fetch_offset != r.log_len)),
                sym.And(fetch, sym.Or(m.fetch_offset < 0, m.fetch_offset > r.log_len,
                                    _fetched_epoch_uncached(shape, r, m, w))),
                sym.And(fetch, m.fetch_offset < r.log_len, z3.Not(sym.Or([
                    sym.And(i < r.cache_len, r.cache_start[i] == m.fetch_offset,
                           r.cache_epoch[i] > m.current_leader_epoch)
                    for i in range(shape.cache_slots)]))),
                sym.And(m.kind == sym.EPOCH_REQ, sym.Or(m.epoch < UNKNOWN,
                                                     m.current_leader_epoch > r.leader_epoch))]
    return sym.Or(out)


def v_DivergingAnswersCurrent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    if shape.config.variant.truncation != "diverging-epoch":
        return z3.BoolVal(False)
    out = [sym.And(m.kind == sym.RESP_DIVERGING, sym.Or(m.epoch < 0, m.epoch > m.leader_epoch))
           for m in s.fetches]
    for m in s.fetches:
        for b, r in enumerate(s.replicas):
            sent = sym.And(m.kind == sym.RESP_DIVERGING, m.leader == b, s.alive[b])
            out.append(sym.And(sent, m.leader_epoch > r.leader_epoch))
            leads = sym.And(sent, r.leader == b, r.leader_epoch == m.leader_epoch)
            e, end = sym.end_offset_for_epoch(r, m.epoch)
            out.append(sym.And(leads, z3.If(m.epoch == r.leader_epoch, m.end_offset > r.log_len,
                                           sym.Or(e != m.epoch, end != m.end_offset))))
    return sym.Or(out)


def v_LeaderFetchesNotInItsEpoch(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    return sym.Or([sym.And(m.kind == sym.FETCH, s.alive[f], r.leader == f,
                         m.current_leader_epoch == r.leader_epoch)
                  for f, (r, m) in enumerate(zip(s.replicas, s.fetches, strict=True))])


def v_IsrNeverEmpty(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    return z3.Not(sym.Or([s.c_isr[m] for m in range(shape.n)]))


def v_LoneEligibleReplica(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    if shape.config.min_insync_replicas != 1:
        return z3.BoolVal(False)
    return sym.count_true(s.c_elr) > 1


def v_HighWatermarkAtReach(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for b, r in enumerate(s.replicas):
        members = z3.Sum([z3.If(r.isr[x], 1, 0) for x in range(shape.n)])
        behind = [z3.Implies(r.isr[x], r.high_watermark < (r.log_len if x == b else r.remote_leo[x]))
                  for x in range(shape.n)]
        out.append(sym.And(s.alive[b], r.leader == b, members >= 1,
                          members >= shape.config.min_insync_replicas, *behind))
    return sym.Or(out)


def v_LoneLeaderKeepsPartition(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a partition epoch (a LeaderAndIsr in flight)."""
    out = []
    for b, r in enumerate(s.replicas):
        others = [x for x in range(shape.n) if x != b]
        overtaken = sym.And(sym.Or(s.c_leader != b, *[s.c_isr[x] for x in others]),
                           sym.Or(s.c_leader != NO_LEADER, *[s.c_isr[x] for x in others]))
        leads = sym.And(r.leader == b, r.isr[b], *[z3.Not(r.isr[x]) for x in others])
        told = sym.And(s.lai[b][w], w > r.partition_epoch, s.hist_leader[w] == b,
                      s.hist_isr[b][w], *[z3.Not(s.hist_isr[x][w]) for x in others])
        out.append(sym.And(s.alive[b], sym.Or(leads, told), overtaken))
    return sym.Or(out)


def _leader_lacks(s: sym.SState, b: int, w, ours) -> list[z3.BoolRef]:
    """A record at offset `w`, of an epoch `ours` picks, in another broker's log or a fetch
    response, that broker `b`'s log lacks."""
    lr = s.replicas[b]
    out = [sym.And(0 <= w, w < r.log_len, ours(r.log_epoch[w]), sym.record_differs(r, lr, w))
           for x, r in enumerate(s.replicas) if x != b]
    out += [sym.And(_covers(m, w), ours(m.rec_epoch[w]), _lacks(lr, w, m.rec_epoch[w], m.rec_value[w]))
            for m in s.fetches]
    return out


def v_LeaderHoldsItsEpoch(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    out = []
    for b, lr in enumerate(s.replicas):
        leads = sym.And(s.alive[b], lr.leader == b)
        out += [sym.And(leads, x)
                for x in _leader_lacks(s, b, w, lambda e, lr=lr: e == lr.leader_epoch)]
    return sym.Or(out)


def v_RunLeaderHoldsItsEpochs(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    out = []
    for b in range(shape.n):
        named = sym.And(s.alive[b], s.c_leader == b)
        out += [sym.And(named, x) for x in _leader_lacks(s, b, w, lambda e: e >= s.c_run)]
    return sym.Or(out)


@pair
def v_EpochStartsAgree(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w` is where one log holds an epoch, `w2` a later offset where another log holds it
    too but not at `w`."""
    out = []
    for a, b in itertools.permutations(range(shape.n), 2):
        ra, rb = s.replicas[a], s.replicas[b]
        out.append(sym.And(0 <= w, w < w2, w2 < ra.log_len, w < rb.log_len,
                          ra.log_epoch[w2] == rb.log_epoch[w], ra.log_epoch[w] != ra.log_epoch[w2]))
    return sym.Or(out)


@pair
def v_EpochLogMatching(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w2` is an offset where two logs hold the same epoch, `w` one at or below it where
    they differ."""
    out = []
    for b1, b2 in itertools.combinations(range(shape.n), 2):
        r1, r2 = s.replicas[b1], s.replicas[b2]
        out.append(sym.And(0 <= w, w <= w2, w2 < r1.log_len, w2 < r2.log_len,
                          r1.log_epoch[w2] == r2.log_epoch[w2], sym.record_differs(r1, r2, w)))
    return sym.Or(out)


@pair
def v_EpochResponseMatching(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w2` is an offset where a log and a response hold the same epoch, `w` one at or below
    it, in the response, where they differ."""
    out = [sym.And(_covers(m, w2), m.fetch_offset <= w, w <= w2, w2 < r.log_len,
                   m.rec_epoch[w2] == r.log_epoch[w2], _lacks(r, w, m.rec_epoch[w], m.rec_value[w]))
            for m in s.fetches for r in s.replicas]
    return sym.Or(out)


def v_DivergenceCheckOnly(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    if shape.config.variant.truncation != "diverging-epoch":
        return z3.BoolVal(False)
    out = [r.truncation_pending for r in s.replicas]
    out += [sym.Or(m.kind == sym.EPOCH_REQ, m.kind == sym.RESP_EPOCH,
                  sym.And(m.kind == sym.RESP_ERROR, m.error == sym.ERRORS["OFFSET_OUT_OF_RANGE"]))
            for m in s.fetches]
    return sym.Or(out)

def v_ResponsesWellFormed(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    both = shape.config.variant.truncation != "epoch-end"
    out = []
    for f, m in enumerate(s.fetches):
        out.append(sym.And(m.kind != sym.NONE, sym.Or(m.leader < 0, m.leader >= shape.n,
                                                    m.leader == f)))
        answer = sym.Or(m.kind == sym.RESP_EPOCH, m.kind == sym.RESP_DIVERGING)
        inside = _covers(m, w)
        out += [sym.And(inside, sym.Or(m.rec_epoch[w] < 0, m.rec_epoch[w] > s.c_epoch)),
                sym.And(inside, w + 1 < m.fetch_offset + m.rec_count,
                       m.rec_epoch[w] > m.rec_epoch[w + 1]),
                sym.And(m.kind >= sym.RESP_RECORDS, m.kind < sym.RESP_ERROR, m.error != 0),
                sym.And(m.kind == sym.RESP_RECORDS,
                       sym.Or(m.fetch_offset < 0, m.high_watermark < 0,
                             m.high_watermark > m.fetch_offset + m.rec_count)),
                sym.And(m.kind == sym.RESP_ERROR, m.error == sym.ERRORS["OFFSET_OUT_OF_RANGE"],
                       m.end_offset < 0),
                sym.And(answer, sym.Or(m.epoch < -1, m.end_offset < -1))]
        if both:
            out.append(sym.And(answer, (m.epoch == UNKNOWN) != (m.end_offset == UNKNOWN)))
    return sym.Or(out)


def v_UnregisteredOutOfIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    n = shape.n
    out = []
    for r in s.replicas:
        out += [sym.And(r.side, r.remote_leo[f] != UNKNOWN,
                       sym.Or(r.remote_be[f] < 0, r.remote_be[f] > s.broker_epochs[f]))
                for f in range(n)]
    if shape.config.variant.broker_epochs:
        for b in range(n):
            gone = s.registered[b] == UNKNOWN
            out += [sym.And(gone, s.c_leader == b),
                    sym.And(gone, s.c_isr[b], _another_member(s.c_isr, b))]
    return sym.Or(out)


def _current_follower(s: sym.SState, r: sym.SReplica, f: int) -> z3.BoolRef:
    """`f` is in both the leader `r`'s ISR view and the controller's, or recorded in the broker
    epoch it is registered with."""
    return sym.Or(sym.And(r.isr[f], s.c_isr[f]), r.remote_be[f] == s.registered[f])


def _unbacked(r: sym.SReplica, rf: sym.SReplica, k, w) -> z3.BoolRef:
    """`rf`'s log does not back LEO `k` recorded by `r`: it is shorter, or differs at `w`."""
    return sym.Or(k > rf.log_len, sym.And(0 <= w, w < k, sym.record_differs(r, rf, w)))


def _hw_past_leader(rf: sym.SReplica, lr: sym.SReplica, w) -> z3.BoolRef:
    """`rf`'s HW covers a record `lr` lacks: past its end, or one that differs at `w`."""
    return sym.Or(rf.high_watermark > lr.log_len, sym.And(
        0 <= w, w < rf.high_watermark, sym.record_differs(rf, lr, w)))


def v_RemoteLeoBacked(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for b, r in enumerate(s.replicas):
        leads = sym.And(s.alive[b], r.leader == b, r.side)
        for f, rf in enumerate(s.replicas):
            if f == b:
                continue
            k = r.remote_leo[f]
            follows = sym.And(s.alive[f], _current_follower(s, r, f), sym.is_true_leader(s, b))
            out += [sym.And(leads, k != UNKNOWN, k > r.log_len),
                    sym.And(leads, k != UNKNOWN, follows, _unbacked(r, rf, k, w))]
    return sym.Or(out)


def v_CommittedOnIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for x, rx in enumerate(s.replicas):
        below = sym.And(0 <= w, w < rx.high_watermark, _counted(shape, s, x, rx.log_value[w]))
        out.append(sym.And(below, _member_lacks(shape, s, w, rx.log_epoch[w], rx.log_value[w])))
    return sym.Or(out)


def _member_lacks(shape: sym.Shape, s: sym.SState, w, epoch, value, but=None) -> z3.BoolRef:
    """A member of the controller's ISR (other than `but`) lacks record (`epoch`, `value`)
    at `w`: a live one, or any when none is live."""
    return _member_where(shape, s, lambda m, rm: _lacks(rm, w, epoch, value), but)


def _member_where(shape: sym.Shape, s: sym.SState, cond: Callable, but=None) -> z3.BoolRef:
    """`cond(m, replica)` holds of a member of the controller's ISR (other than `but`): a
    live one, or any when none is live."""
    live = sym.Or([sym.And(s.c_isr[m], s.alive[m]) for m in range(shape.n)])
    return sym.Or([sym.And(s.c_isr[m], sym.Or(s.alive[m], z3.Not(live)), cond(m, rm))
                  for m, rm in enumerate(s.replicas) if m != but])


def v_PurgatoryInLog(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    return sym.Or([sym.And(r.purgatory[w], sym.Or(r.leader != b, w < 0, w >= r.log_len,
                                                 r.log_value[w] != r.purgatory_value[w]))
                  for b, r in enumerate(s.replicas)])


def _delivered(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a delivered write (acknowledged with acks=all, or consumed), not excused."""
    acked = s.acked[w] if shape.config.acks == "all" else z3.BoolVal(False)
    return sym.And(sym.Or(acked, s.consumed[w]), z3.Not(s.excused[w]))


def v_DeliveredOnIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a value; ValuesKeepTheirEpoch makes holding the value holding the record."""
    lacking = _member_where(shape, s, lambda m, rm: z3.Not(sym.holds_value(s, m, w)))
    return sym.And(_delivered(shape, s, w), lacking)


def v_DeliveredWithinLeaderReach(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a value."""
    o = s.value_offset[w]
    past = [_past_leader_reach(s, b, o) for b in range(shape.n)]
    return sym.And(_delivered(shape, s, w), sym.Or(past))


def _applies(shape: sym.Shape, s: sym.SState, f: int, kind: int) -> z3.BoolRef:
    """The answer of `kind` in flight to `f` is one `f` would act on: `f` is up and still
    follows the answer's leader (in its leader epoch, with fencing)."""
    m, r = s.fetches[f], s.replicas[f]
    same = sym.And(m.leader == r.leader, m.leader_epoch == r.leader_epoch) \
        if shape.config.variant.fencing else m.leader == r.leader
    return sym.And(m.kind == kind, s.alive[f], same)


def v_AnswersWithinView(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    if not shape.config.variant.fencing:
        return z3.BoolVal(False)
    return sym.Or([sym.And(m.kind >= sym.RESP_RECORDS, m.kind != sym.RESP_ERROR, s.alive[f],
                         m.leader_epoch > r.leader_epoch)
                  for f, (r, m) in enumerate(zip(s.replicas, s.fetches, strict=True))])


def v_DivergingAnswersFitFollower(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    if shape.config.variant.truncation != "diverging-epoch":
        return z3.BoolVal(False)
    out = []
    for f, (rf, m) in enumerate(zip(s.replicas, s.fetches, strict=True)):
        takes = _applies(shape, s, f, sym.RESP_DIVERGING)
        top = sym.latest_epoch(rf)
        out.append(sym.And(takes, sym.Or(m.epoch > top, m.epoch >= m.leader_epoch)))
        for b, lr in enumerate(s.replicas):
            if b == f:
                continue
            leads = sym.And(takes, m.leader == b, _leads_in(s, b, m.leader_epoch))
            out.append(sym.And(leads, _answer_unfit(shape, lr, m, top)))
    return sym.Or(out)


def _leads_in(s: sym.SState, b: int, epoch) -> z3.BoolRef:
    """Broker `b` is up and leads in leader epoch `epoch` by its view."""
    r = s.replicas[b]
    return sym.And(s.alive[b], r.leader == b, r.leader_epoch == epoch)


def _answer_unfit(shape: sym.Shape, lr: sym.SReplica, m, top) -> z3.BoolRef:
    """Leader `lr`'s cache has an epoch between the one diverging answer `m` names and the
    follower's latest (`top`), or the answer does not fit its log."""
    return sym.Or(*[sym.And(i < lr.cache_len, m.epoch < lr.cache_epoch[i],
                          lr.cache_epoch[i] <= top) for i in range(shape.cache_slots)],
                 _answer_off_log(lr, m))


def _prefix_differs(shape: sym.Shape, s: sym.SState, f: int, b: int, w) -> z3.BoolRef:
    """The records response in flight to `f` is one `f` would append, from `b`, and `f`'s
    log below the fetch offset differs from `b`'s at `w`."""
    rf, m, lr = s.replicas[f], s.fetches[f], s.replicas[b]
    return sym.And(_takes_records(shape, s, f), m.leader == b, 0 <= w, w < m.fetch_offset,
                  sym.record_differs(rf, lr, w))


def v_ResponsePrefixMatches(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset below the fetch offset."""
    out = []
    for f in range(shape.n):
        m = s.fetches[f]
        out += [sym.And(_leads_in(s, b, m.leader_epoch), _prefix_differs(shape, s, f, b, w))
                for b in range(shape.n) if b != f]
    return sym.Or(out)


def _pending(s: sym.SState, f: int, w) -> tuple:
    """The record at `w` of the log `f` would have after appending the response in flight:
    (epoch, value)."""
    rf, m = s.replicas[f], s.fetches[f]
    own = w < m.fetch_offset
    return (z3.If(own, rf.log_epoch[w], m.rec_epoch[w]),
            z3.If(own, rf.log_value[w], m.rec_value[w]))


def _takes_records(shape: sym.Shape, s: sym.SState, f: int) -> z3.BoolRef:
    """`f` would append the records response in flight to it."""
    rf, m = s.replicas[f], s.fetches[f]
    return sym.And(_applies(shape, s, f, sym.RESP_RECORDS), z3.Not(rf.truncation_pending),
                  m.fetch_offset == rf.log_len)


def _appends_below_cache(shape: sym.Shape, s: sym.SState, f: int, w) -> z3.BoolRef:
    """Follower `f` would append, at offset `w` past offset 0, a record of an older epoch than
    its cache's latest (PendingLogMatching's epoch clause, SnapshotAboveCache)."""
    m = s.fetches[f]
    return sym.And(_takes_records(shape, s, f), m.fetch_offset > 0, _covers(m, w),
                   m.rec_epoch[w] < sym.latest_epoch(s.replicas[f]))


@pair
def v_PendingLogMatching(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w2` is an offset where the log `f` would have and another log hold the same epoch,
    `w` one at or below it where they differ."""
    out = []
    for f in range(shape.n):
        m = s.fetches[f]
        out.append(_appends_below_cache(shape, s, f, w))
        e2, _ = _pending(s, f, w2)
        e, v = _pending(s, f, w)
        out += [sym.And(_takes_records(shape, s, f), 0 <= w, w <= w2,
                       w2 < m.fetch_offset + m.rec_count, w2 < rx.log_len,
                       e2 == rx.log_epoch[w2], _lacks(rx, w, e, v))
                for x, rx in enumerate(s.replicas) if x != f]
    return sym.Or(out)


def v_PendingHwCommitted(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset of the log `f` would have, below the answer's HW."""
    out = []
    for f, m in enumerate(s.fetches):
        epoch, value = _pending(s, f, w)
        below = sym.And(_takes_records(shape, s, f), 0 <= w, w < m.high_watermark,
                       w < m.fetch_offset + m.rec_count, _counted(shape, s, f, value))
        out.append(sym.And(below, _member_lacks(shape, s, w, epoch, value, but=f)))
    return sym.Or(out)


@pair
def v_RequestHwCommitted(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w` is a partition epoch (a request in flight), `w2` an offset of the leader's log.
    Two witnesses: the record just below the HW alone is no term of the step, and the
    refinement does not find it (docs/prove.md, "Every write flushed")."""
    if shape.config.log_flush_interval_messages != 1:
        return z3.BoolVal(False)
    out = []
    for b, r in enumerate(s.replicas):
        told = sym.And(s.lai[b][w], s.hist_leader[w] == b, _leads_in(s, b, s.hist_epoch[w]),
                       r.side, w > r.partition_epoch)
        below = [sym.Or(z3.Not(s.hist_isr[f][w]), w2 < r.remote_leo[f])
                 for f in range(shape.n) if f != b]
        out.append(sym.And(told, 0 <= w2, w2 < r.log_len, *below,
                           _counted(shape, s, b, r.log_value[w2]),
                           _member_lacks(shape, s, w2, r.log_epoch[w2], r.log_value[w2])))
    return sym.Or(out)


def _isr_cuts(shape: sym.Shape, s: sym.SState) -> list:
    """Per broker f: (the conditions for f, in the controller's ISR, to act on the diverging
    answer in flight to it; the log end it would cut to)."""
    out = []
    for f, (rf, m) in enumerate(zip(s.replicas, s.fetches, strict=True)):
        cut = sym.truncate_to_epoch_answer(rf, m.epoch, m.end_offset)[0].log_len
        out.append(((_applies(shape, s, f, sym.RESP_DIVERGING), s.c_isr[f]), cut))
    return out


def v_DivergingAnswersSpareCommitted(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset the answer would cut, below another replica's HW."""
    if shape.config.variant.truncation != "diverging-epoch":
        return z3.BoolVal(False)
    out = []
    for f, (takes, cut) in enumerate(_isr_cuts(shape, s)):
        takes = sym.And(*takes, cut <= w)
        for x, rx in enumerate(s.replicas):
            if x != f:
                out.append(sym.And(takes, w < rx.high_watermark,
                                  _counted(shape, s, x, rx.log_value[w])))
    return sym.Or(out)


def v_FollowedLeaderHoldsDelivered(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a value."""
    out = []
    for f, rf in enumerate(s.replicas):
        for b, lr in enumerate(s.replicas):
            if b != f:
                out.append(sym.And(s.c_isr[f], s.alive[f], s.alive[b], rf.leader == b,
                                   lr.leader == b, lr.leader_epoch == rf.leader_epoch,
                                   z3.Not(sym.holds_value(s, b, w))))
    return sym.And(_delivered(shape, s, w), sym.Or(out))


def v_DivergingAnswersSpareDelivered(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a delivered value the answer would cut."""
    if shape.config.variant.truncation != "diverging-epoch":
        return z3.BoolVal(False)
    out = [sym.And(*takes, cut <= s.value_offset[w]) for takes, cut in _isr_cuts(shape, s)]
    return sym.And(_delivered(shape, s, w), sym.Or(out))


def _counted(shape: sym.Shape, s: sym.SState, x: int, value) -> z3.BoolRef:
    """CommittedOnIsr asks for `x`'s record of `value` (below its HW) on every ISR member:
    the value is not excused, or `x` is up and in the ISR or heard by the true leader."""
    heard = sym.Or([_heard(s, b, x) for b in range(shape.n) if b != x])
    return sym.Or(z3.Not(s.excused[value]), sym.And(s.alive[x], sym.Or(s.c_isr[x], heard)))


def _heard(s: sym.SState, b: int, f: int, leads=None) -> z3.BoolRef:
    """`b` is the true leader (or `leads` holds) and has recorded a LEO for `f` in `f`'s
    current broker epoch."""
    lr = s.replicas[b]
    return sym.And(sym.is_true_leader(s, b) if leads is None else leads,
                  lr.remote_leo[f] != UNKNOWN, lr.remote_be[f] == s.broker_epochs[f])


def v_FollowerHwOnLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    out = []
    for b, lr in enumerate(s.replicas):
        for f, rf in enumerate(s.replicas):
            if f == b:
                continue
            heard = sym.And(_heard(s, b, f), s.alive[f])
            out.append(sym.And(heard, _hw_past_leader(rf, lr, w)))
    return sym.Or(out)


def v_EpochCommittedByLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset."""
    return sym.Or([sym.And(sym.is_true_leader(s, b), 0 <= w, w < rx.high_watermark,
                         rx.log_epoch[w] == lr.leader_epoch, w >= lr.high_watermark)
                  for b, lr in enumerate(s.replicas) for rx in s.replicas])


def _running_leader(s: sym.SState, b: int) -> z3.BoolRef:
    """`b` leads, alive, in a view of an epoch the controller's current run of `b`'s leadership
    covers: every leader epoch from its view's to the controller's has named it (`c_run`)."""
    r = s.replicas[b]
    return sym.And(s.c_leader == b, s.alive[b], r.leader == b, r.side, r.leader_epoch >= s.c_run)


def v_RunLeaderBacked(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset. RemoteLeoBacked's and FollowerHwOnLeader's claims for a leader the
    controller has re-elected in every epoch since its view (the ghost `c_run`), not only for
    the true leader. Why: such a leader applies the next epoch's request keeping what it knows
    of its followers, so before it does, that knowledge must already be backed."""
    out = []
    for b, r in enumerate(s.replicas):
        running = _running_leader(s, b)
        for f, rf in enumerate(s.replicas):
            if f == b:
                continue
            k = r.remote_leo[f]
            out.append(sym.And(running, k != UNKNOWN, s.alive[f], _current_follower(s, r, f),
                              _unbacked(r, rf, k, w)))
            heard = sym.And(_heard(s, b, f, running), s.alive[f])
            out.append(sym.And(heard, _hw_past_leader(rf, r, w)))
    return sym.Or(out)


def v_RunLeaderHeardInRun(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for b in range(shape.n):
        running = _running_leader(s, b)
        out += [sym.And(_heard(s, b, f, running), s.alive[f], rf.leader_epoch < s.c_run)
                for f, rf in enumerate(s.replicas) if f != b]
    return sym.Or(out)


def v_RunAnswersFromLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset of a response's records or below its fetch offset."""
    diverging = shape.config.variant.truncation == "diverging-epoch"
    out = []
    for f, (rf, m) in enumerate(zip(s.replicas, s.fetches, strict=True)):
        for b, lr in enumerate(s.replicas):
            if b == f:
                continue
            ran = sym.And(_running_leader(s, b), s.c_run <= m.leader_epoch)
            out.append(sym.And(ran, _prefix_differs(shape, s, f, b, w)))
            out.append(sym.And(ran, m.leader == b, _covers(m, w),
                              _lacks(lr, w, m.rec_epoch[w], m.rec_value[w])))
            if diverging:
                out.append(sym.And(ran, m.leader == b, _applies(shape, s, f, sym.RESP_DIVERGING),
                                  _answer_unfit(shape, lr, m, sym.latest_epoch(rf))))
    return sym.Or(out)


def _answer_off_log(lr: sym.SReplica, m) -> z3.BoolRef:
    """Diverging answer `m` does not fit leader `lr`'s log: its end is past the log, or the
    record at the end is not of a later epoch than the one named, or the one below it is."""
    end = m.end_offset
    return sym.Or(end > lr.log_len, end < 0,
                 sym.And(end < lr.log_len, lr.log_epoch[end] <= m.epoch),
                 sym.And(end > 0, lr.log_epoch[end - 1] > m.epoch))


def _recorded(s: sym.SState, pe) -> z3.BoolRef:
    return sym.And(0 <= pe, pe <= s.c_pe)


def v_HistoryCurrent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """The record at the controller's partition epoch is the controller's state (leader,
    leader epoch, ISR), and the controller's leader is a broker or none. Why: every request
    sent now carries it."""
    return sym.Or(s.c_pe < 0, s.c_epoch < 0, s.c_leader < NO_LEADER, s.c_leader >= shape.n,
                 s.hist_leader[s.c_pe] != s.c_leader, s.hist_epoch[s.c_pe] != s.c_epoch,
                 *[s.hist_isr[x][s.c_pe] != s.c_isr[x] for x in range(shape.n)])


def v_HistoryLeaderInIsr(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """Every recorded partition state with a leader has the leader in its ISR. Why: a
    broker that becomes leader takes its ISR view from the record (LeaderInIsr)."""
    return sym.And(_recorded(s, w), sym.Or([
        sym.And(s.hist_leader[w] == b, z3.Not(s.hist_isr[b][w])) for b in range(shape.n)]))


def v_HistoryBounded(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """Every recorded partition state has a leader epoch in 0 .. the controller's, and a
    leader that is a broker or none. Why: a new leader epoch is then above every recorded one,
    so an election can never reuse an epoch."""
    return sym.And(_recorded(s, w), sym.Or(
        s.hist_epoch[w] < 0, s.hist_epoch[w] > s.c_epoch,
        s.hist_leader[w] < NO_LEADER, s.hist_leader[w] >= shape.n))


@pair
def v_HistoryFunctional(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """Two recorded partition states with the same leader epoch name the same leader: the
    controller picks a new leader only with a new epoch, and ISR changes keep both. The heart
    of SingleLeaderPerEpoch (two witnesses: the two partition epochs)."""
    return sym.And(_recorded(s, w), _recorded(s, w2), s.hist_epoch[w] == s.hist_epoch[w2],
                  s.hist_leader[w] != s.hist_leader[w2])


@pair
def v_HistoryMonotone(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """Leader epochs never go down along recorded partition epochs: each new record keeps
    the controller's epoch or raises it. Why: a request a broker applies late (a later
    partition epoch than its view's) then carries a leader epoch at or above its view's, so
    at or above every record the broker wrote or copied (RequestsNotBehindLog)."""
    return sym.And(_recorded(s, w), _recorded(s, w2), w < w2,
                  s.hist_epoch[w] > s.hist_epoch[w2])


@pair
def v_NewEpochNewLeader(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """Two recorded partition states of consecutive leader epochs name different leaders
    (pair). Why: in `current` the controller moves to a new leader epoch only to change the
    leader, to nobody too (an ISR change keeps the epoch: KAFKA-15021), so a leader is
    re-elected only after a leaderless epoch, and BecomeLeader's branch for a leader told of
    the next epoch is not a step of `current`: a leader that stays one is one that missed
    epochs (B11's fix resets its follower records then)."""
    return sym.And(_recorded(s, w), _recorded(s, w2), s.hist_epoch[w2] == s.hist_epoch[w] + 1,
                   s.hist_leader[w] == s.hist_leader[w2])


def v_HistoryRun(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a partition epoch. The ghost `c_run` is a leader epoch from 0 to the controller's;
    every recorded partition state of a leader epoch from it on names the controller's leader,
    and none of the epoch just before it does. Why: the controller starts a run when it moves
    to a new epoch with another leader, and keeps it through ISR changes and re-elections of
    the same leader."""
    return sym.Or(s.c_run < 0, s.c_run > s.c_epoch, sym.And(_recorded(s, w), sym.Or(
        sym.And(s.hist_epoch[w] >= s.c_run, s.hist_leader[w] != s.c_leader),
        sym.And(s.hist_epoch[w] == s.c_run - 1, s.hist_leader[w] == s.c_leader))))


def v_RequestsRecorded(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """A LeaderAndIsr request in flight carries a partition epoch the controller has written
    (0 .. its current one). Why: its content is read from that record."""
    return sym.Or([sym.And(s.lai[b][w], z3.Not(_recorded(s, w))) for b in range(shape.n)])


def v_ViewsFromHistory(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """A broker's view (leader, leader epoch, ISR) is the record at the view's partition epoch,
    which the controller has written; a broker without a view (partition epoch -1, after a
    crash) names no leader. Why: views come only from applied requests, initial state, or
    the leader's own ISR change, and the record keeps what each of those carried."""
    out = []
    for r in s.replicas:
        pe = r.partition_epoch
        out.append(sym.And(pe >= 0, sym.Or(pe > s.c_pe, s.hist_epoch[pe] != r.leader_epoch,
                                         s.hist_leader[pe] != r.leader,
                                         *[s.hist_isr[x][pe] != r.isr[x]
                                           for x in range(shape.n)])))
        out.append(sym.And(pe < 0, sym.Or(r.leader != NO_LEADER, r.leader_epoch != UNKNOWN)))
    return sym.Or(out)


# The structural layer: ranges, caches and leader-side state (not inductive on its own yet).
STRUCTURE = ("WellFormed", "UnflushedBelowInterval", "EncodingWellFormed", "EpochCacheMonotone",
             "LeaderViewConsistent")
# Values and down brokers: what appends and restarts need (docs/prove.md, "What is proved").
VALUES = ("DownBrokerReset", "ProduceUnwritten", "ValuesAtOneOffset", "ResponsesWellFormed",
          "UnregisteredOutOfIsr")
# The history layer: inductive on its own, and enough to prove SingleLeaderPerEpoch.
HISTORY = ("HistoryCurrent", "HistoryBounded", "HistoryFunctional", "RequestsRecorded",
           "ViewsFromHistory")

# The data layer, written from the CTIs the layers above leave (docs/prove.md, "The data
# layer"): the history's order, views against logs, broker epochs, epoch caches, the
# leader's record of its followers and what is committed.
DATA = ("HistoryMonotone", "NewEpochNewLeader", "LeaderRequestCoversIsr", "IsrWithinLeaderView",
        "RegistrationCurrent", "ViewlessOutOfIsr", "ViewlessUnrecorded",
        "ValuesKeepTheirEpoch", "RecordsInRange", "LogWithinView", "RequestsNotBehindLog",
        "CacheMatchesLog", "LeaderCacheCurrent", "ResponsesFromLeaderLog", "RemoteLeoBacked",
        "CommittedOnIsr", "CommittedWithinLeaderReach", "EpochLogMatching",
        "LeaderHoldsItsEpoch", "LoneLeaderKeepsPartition", "HighWatermarkAtReach",
        "IsrNeverEmpty", "FetchRequestsCurrent", "EpochStartsAgree",
        "DivergenceCheckOnly", "FollowerHwOnLeader",
        "EpochCommittedByLeader", "UnstartedEpochUnwritten", "HistoryRun", "RunLeaderBacked",
        "EmptyEpochLed", "EmptyEpochUnwritten", "RunEpochsLedByLeader",
        "RunLeaderHoldsItsEpochs", "DivergingAnswersCurrent", "EpochResponseMatching",
        "LeaderFetchesNotInItsEpoch")

# The answers layer, opt-in (`--add-lemma answers`): what a follower would do with the answer in flight
# to it (docs/prove.md, "Answers in flight"). True on reachable states, not yet in the
# default: with it FollowerHandleFetchResponse's CTIs move on, but other steps get CTIs or
# `unknown`s.
ANSWERS = ("AnswersWithinView", "ResponsePrefixMatches", "PendingLogMatching",
           "PendingHwCommitted", "DivergingAnswersFitFollower", "DivergingAnswersSpareCommitted",
           "RunLeaderHeardInRun", "RunAnswersFromLeader")

# KIP-966's bookkeeping (the controller's ELR fields).
KIP966 = ("LoneEligibleReplica",)
# Delivered writes (acknowledged with acks=all, or consumed): what AckedWritesDurable's and
# ConsumerNeverSeesUncommitted's proofs add to the data layer.
DELIVERED = ("PurgatoryInLog", "DeliveredOnIsr", "DeliveredWithinLeaderReach",
             "FollowedLeaderHoldsDelivered", "DivergingAnswersSpareDelivered",
             "ViewlessRequestsMatchIsr")

# With every write flushed, opt-in (`--add-lemma RequestHwCommitted`; docs/prove.md, "Every
# write flushed"): what rules out B12's late HW. It makes BecomeLeader's B12-shaped CTIs go at
# 3 brokers, but the controller's and crash steps' queries reach their limits with it.
FLUSHED = ("RequestHwCommitted",)

LEMMAS: dict[str, Callable] = {
    name: globals()[f"v_{name}"]
    for name in (*STRUCTURE, *HISTORY, "HistoryLeaderInIsr", *VALUES, *DATA, *ANSWERS,
                 *KIP966, *DELIVERED, *FLUSHED)}

# What each proved invariant's proof assumes besides itself: lemmas, or other invariants.
PROOF_LEMMAS: dict[str, tuple[str, ...]] = {
    "SingleLeaderPerEpoch": HISTORY,
    "LeaderInIsr": (*HISTORY, "HistoryLeaderInIsr"),
    # The leader is in its own ISR view, so its LEO bounds the minimum its HW advances to.
    "HighWatermarkBelowLogEnd": ("LeaderInIsr", *HISTORY, "HistoryLeaderInIsr"),
    # KIP-966's bookkeeping: the controller's fields, and (a leader's shrink empties no ISR)
    # the leader in the ISR it shrinks, which is the controller's.
    "EligibleReplicasWellFormed": (*KIP966, "LeaderInIsr", *HISTORY, "HistoryLeaderInIsr"),
}


def data_layer_holds(config) -> bool:
    """Whether the data layer is true of `config`'s model: `current` with every rule on and
    clean elections and no KIP-966 (its ISR may empty), the variant it was written for, with
    or without B11's fix (which only forgets what a leader knew). Elsewhere (another variant, a guard taken out with
    --without, an unclean election) committed writes are lost, the lemmas are false, and the
    refinement chases their junk for minutes per step before the explorer's real run is
    shown."""
    import dataclasses

    from spec.config import VARIANTS

    current = VARIANTS["current"]
    variant = dataclasses.replace(config.variant, name=current.name,
                                  missed_epoch_resets_followers=False)
    return (variant == current and not config.unclean_leader_election_enable
            and not config.eligible_leader_replicas_enable)


def proof_lemmas(invariants: list[str], config=None) -> list[str]:
    """The lemmas a proof of `invariants` uses when none are named: what their proofs assume
    (`PROOF_LEMMAS`, less the invariants asked) when every one has a proof, else every
    proved invariant and the structural, history and values layers (`UNPROVED_LEMMAS`),
    with LeaderEpochMonotonic and the data layer where they hold (`data_layer_holds`; no
    config: `current`) and KIP-966's bookkeeping with ELR on."""
    if not all(name in PROOF_LEMMAS for name in invariants):
        data = config is None or data_layer_holds(config)
        kip966 = config is not None and config.eligible_leader_replicas_enable
        return [x for x in UNPROVED_LEMMAS
                if x not in invariants and (data or x not in DATA_LEMMAS)
                and (kip966 or x not in KIP966_LEMMAS)]
    return list(dict.fromkeys(x for name in invariants for x in PROOF_LEMMAS[name]
                              if x not in invariants))


# For invariants without a proof yet (the data invariants): with these, `current` at 2
# brokers has 34 of 38 action instances inductive (36 with B11's fix, FollowerHandleFetchResponse
# left) and a CTI or `unknown` at each of the others (docs/prove.md); the structural layer
# alone gives 31 of 64 at 3.
DATA_LEMMAS = ("LeaderEpochMonotonic", *DATA)
# KIP-966's bookkeeping, assumed only with ELR on (elsewhere it says the fields stay empty).
KIP966_LEMMAS = ("EligibleReplicasWellFormed", *KIP966)
UNPROVED_LEMMAS = (*PROOF_LEMMAS, *KIP966, "LeaderEpochMonotonic", *STRUCTURE, *HISTORY,
                   "HistoryLeaderInIsr", *VALUES, *DATA)


# ------------------------------------------------------------------------------------------
# Snapshots: a records response keeps its sender's whole log arrays as they
# were when it was sent (`LeaderHandleFetch`), so the log a follower would have after taking
# it is that snapshot, and lemmas about logs can be asked of it as of a replica.


def _snap(s: sym.SState, f: int) -> sym.SReplica:
    """Follower `f`'s replica as it would be after taking the records response in flight to
    it: the snapshot's log and the response's HW (its cache is not updated here)."""
    m, r = s.fetches[f], s.replicas[f]
    return dataclasses.replace(r, log_len=m.fetch_offset + m.rec_count, log_epoch=m.rec_epoch,
                               log_value=m.rec_value, high_watermark=m.high_watermark)


def v_SnapshotPrefix(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset below the fetch offset: the follower's log there is the snapshot's
    (the divergence check passed, and neither has changed since)."""
    return sym.Or([sym.And(_takes_records(shape, s, f), 0 <= w, w < s.fetches[f].fetch_offset,
                           sym.record_differs(_snap(s, f), s.replicas[f], w))
                   for f in range(shape.n)])


def _snapshot_off_log(s: sym.SState, w, leads: Callable) -> z3.BoolRef:
    """A records response whose sender `b` satisfies `leads(b, m)` holds, at offset `w` of its
    snapshot, a record the sender's log does not."""
    out = []
    for f, m in enumerate(s.fetches):
        sr = _snap(s, f)
        out += [sym.And(m.kind == sym.RESP_RECORDS, m.leader == b, leads(b, m), 0 <= w,
                        w < sr.log_len, sym.record_differs(sr, lr, w))
                for b, lr in enumerate(s.replicas) if b != f]
    return sym.Or(out)


def v_SnapshotFromLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset of a snapshot: while its sender still leads in the response's epoch,
    the snapshot is a prefix of the sender's log."""
    return _snapshot_off_log(s, w, lambda b, m: _leads_in(s, b, m.leader_epoch))


def v_SnapshotFromRunLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset of a snapshot sent in the run of the controller's leader (`c_run`):
    while that run lasts, the snapshot is a prefix of the leader's log (a leader re-elected
    without following in between never truncates)."""
    return _snapshot_off_log(
        s, w, lambda b, m: sym.And(_running_leader(s, b), s.c_run <= m.leader_epoch))


def v_SnapshotAboveCache(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is an offset of the records a follower would append past offset 0: none is of an
    older epoch than its cache's latest (the leader's check found that epoch on its log up
    to the fetch offset). At offset 0 there is no check, and the records replace every
    entry (Kafka's assign drops entries at or past an append's start)."""
    return sym.Or([_appends_below_cache(shape, s, f, w) for f in range(shape.n)])


@pair
def v_EpochsNonDecreasing(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w` <= `w2` are offsets of one log or one records response's snapshot, where the epoch
    goes down. LeaderEpochMonotonic says it of neighbours; a follower appending a run of
    records needs it across the run, which no finite set of neighbours gives."""
    logs = [(z3.BoolVal(True), r) for r in s.replicas]
    logs += [(m.kind == sym.RESP_RECORDS, _snap(s, f)) for f, m in enumerate(s.fetches)]
    return sym.Or([sym.And(on, 0 <= w, w <= w2, w2 < r.log_len, r.log_epoch[w] > r.log_epoch[w2])
                   for on, r in logs])


@pair
def v_EpochMatchesResponse(shape: sym.Shape, s: sym.SState, w, w2) -> z3.BoolRef:
    """`w2` is where a log holds a record of the leader epoch a records response was sent
    in, `w` an offset below it that the response carries and the log holds otherwise. The
    epoch's records and the response both come from its one leader's log while it led, and
    that log only grew."""
    return sym.Or([sym.And(m.kind == sym.RESP_RECORDS, 0 <= w, w < w2, w2 < r.log_len,
                           r.log_epoch[w2] == m.leader_epoch, _covers(m, w),
                           _lacks(r, w, m.rec_epoch[w], m.rec_value[w]))
                   for m in s.fetches for r in s.replicas])


def v_ResponsesFromEpochLeader(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """`w` is a partition epoch: a records response's leader epoch is recorded with its
    sender as leader, and with no other (one leader per epoch, HistoryFunctional), so a
    broker leading in that epoch is the one that sent it."""
    return sym.Or([sym.And(m.kind == sym.RESP_RECORDS, _recorded(s, w),
                           s.hist_epoch[w] == m.leader_epoch, s.hist_leader[w] != m.leader)
                   for m in s.fetches])


def _after(base: Callable, acts: Callable, replica: Callable, what: str) -> Callable:
    """`base` asked of each state in which one follower `f` has acted on the answer in flight
    to it (`acts(shape, s, f)`), its replica then being `replica(s, f)`."""
    def formula(shape, s, *ws):
        return sym.Or([sym.And(acts(shape, s, f), base(shape, sym.replaced_replica(s, f, replica(s, f)), *ws))
                       for f in range(shape.n)])
    formula.__doc__ = f"{base.__name__[2:]} after a follower {what}."
    return pair(formula) if getattr(base, "pair", False) else formula


def _as_taken(base: Callable) -> Callable:
    return _after(base, _takes_records, _snap, "takes its records response")


def _as_diverged(base: Callable) -> Callable:
    def cut(s, f):
        m = s.fetches[f]
        return sym.truncate_to_epoch_answer(s.replicas[f], m.epoch, m.end_offset)[0]
    return _after(base, lambda shape, s, f: _applies(shape, s, f, sym.RESP_DIVERGING), cut,
                  "cuts its log to a diverging answer")


v_DivergedRunLeaderBacked = _as_diverged(v_RunLeaderBacked)
v_DivergedRemoteLeoBacked = _as_diverged(v_RemoteLeoBacked)
v_TakenLogMatching = _as_taken(sym.v_LogMatching)
v_TakenCommittedOnIsr = _as_taken(v_CommittedOnIsr)
v_TakenEpochLogMatching = _as_taken(v_EpochLogMatching)
v_TakenEpochStartsAgree = _as_taken(v_EpochStartsAgree)
v_TakenCommittedWithinLeaderReach = _as_taken(v_CommittedWithinLeaderReach)
v_TakenValuesKeepTheirEpoch = _as_taken(v_ValuesKeepTheirEpoch)
v_TakenEpochResponseMatching = _as_taken(v_EpochResponseMatching)
v_TakenResponsesFromLeaderLog = _as_taken(v_ResponsesFromLeaderLog)
v_TakenEpochMatchesResponse = _as_taken(v_EpochMatchesResponse)
v_TakenDeliveredOnIsr = _as_taken(v_DeliveredOnIsr)

# The snapshot layer, opt-in (`--add-lemma snapshots`; docs/prove.md, "Snapshots"): what a
# follower's log would be after it acts on the answer in flight to it, and the three answer
# lemmas it needs beside. Ghost lemmas (they read a snapshot below its fetch offset, which a
# concrete response does not carry) are checked by being proved inductive.
SNAPSHOTS = ("SnapshotPrefix", "SnapshotFromLeader", "SnapshotFromRunLeader",
             "SnapshotAboveCache", "EpochsNonDecreasing", "EpochMatchesResponse",
             "ResponsesFromEpochLeader", "TakenLogMatching", "TakenCommittedOnIsr",
             "TakenEpochLogMatching", "TakenEpochStartsAgree",
             "TakenCommittedWithinLeaderReach", "TakenValuesKeepTheirEpoch",
             "TakenEpochResponseMatching", "TakenResponsesFromLeaderLog",
             "TakenEpochMatchesResponse", "DivergedRunLeaderBacked", "DivergedRemoteLeoBacked")
# Those that read a snapshot below its fetch offset, the history or `c_run`: ghosts that a
# concrete state has no counterpart of (the others are checked on reachable states too).
SNAPSHOT_GHOSTS = tuple(n for n in SNAPSHOTS if n.startswith("Taken") or n in (
    "SnapshotPrefix", "SnapshotFromLeader", "SnapshotFromRunLeader", "EpochsNonDecreasing",
    "ResponsesFromEpochLeader", "DivergedRunLeaderBacked"))
SNAPSHOT_LAYER = (*SNAPSHOTS, "AnswersWithinView", "RunLeaderHeardInRun",
                  "DivergingAnswersFitFollower", "DivergingAnswersSpareCommitted")
LEMMAS.update({name: globals()[f"v_{name}"] for name in SNAPSHOTS})
# Layers `--add-lemma` takes by name.
# The delivered writes' layer, opt-in (`--add-lemma delivered`, beside the snapshot layer;
# docs/prove.md, "Delivered writes"): with it AckedWritesDurable and
# ConsumerNeverSeesUncommitted are proved too. Its snapshot lemma is a ghost lemma.
LEMMAS["TakenDeliveredOnIsr"] = v_TakenDeliveredOnIsr
DELIVERED_LAYER = (*DELIVERED, "TakenDeliveredOnIsr")
SNAPSHOT_GHOSTS = (*SNAPSHOT_GHOSTS, "TakenDeliveredOnIsr")
LAYERS = {"answers": ANSWERS, "snapshots": SNAPSHOT_LAYER, "delivered": DELIVERED_LAYER}
