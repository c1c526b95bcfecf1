"""Z3 versions of the strengthening lemmas of `spec.lemmas` (same names, same meaning).

Each is a violation formula over one witness integer, like `symbolic.VIOLATIONS`; see
spec/lemmas.py for what each lemma says and why it is needed. The encoding adds facts about
its own ghost fields (`EncodingWellFormed`), which have no concrete counterpart.
"""

from __future__ import annotations

from collections.abc import Callable

import z3

from model_check import symbolic as sym
from spec.state import NO_LEADER


def v_WellFormed(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    n = shape.n
    out = [s.c_epoch < 0, s.c_pe < 0, s.c_leader < NO_LEADER, s.c_leader >= n, s.next_value < 1]
    for r in s.replicas:
        out += [r.flushed_offset < 0, r.flushed_offset > r.log_len, r.high_watermark < 0,
                r.leader < NO_LEADER, r.leader >= n,
                z3.And(0 <= w, w < r.log_len,
                       z3.Or(r.log_value[w] <= 0, r.log_value[w] >= s.next_value))]
    return z3.Or(out)


def v_EncodingWellFormed(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    """The encoding's own ranges: cache lengths fit the slots, slot kinds are known, record
    counts are >= 0, and a value in a log sits at its `value_offset`."""
    out = []
    for r in s.replicas:
        out += [r.cache_len < 0, r.cache_len > shape.cache_slots,
                z3.And(0 <= w, w < r.log_len, s.value_offset[r.log_value[w]] != w)]
    for m in s.fetches:
        out += [m.kind < sym.NONE, m.kind > sym.RESP_ERROR,
                z3.And(m.kind == sym.RESP_RECORDS, m.rec_count < 0)]
    return z3.Or(out)


def v_EpochCacheMonotone(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for r in s.replicas:
        for i in range(shape.cache_slots - 1):
            out.append(z3.And(i + 1 < r.cache_len, z3.Or(
                r.cache_epoch[i] >= r.cache_epoch[i + 1],
                r.cache_start[i] >= r.cache_start[i + 1])))
        out.append(z3.And(r.cache_len > 0,
                          sym._at(r.cache_start, r.cache_len - 1) > r.log_len))
    return z3.Or(out)


def v_LeaderViewConsistent(shape: sym.Shape, s: sym.SState, w) -> z3.BoolRef:
    out = []
    for b, r in enumerate(s.replicas):
        out += [z3.And(s.alive[b], r.leader == b, z3.Not(r.side)),
                r.leader_epoch > s.c_epoch]
    return z3.Or(out)


LEMMAS: dict[str, Callable] = {
    "WellFormed": v_WellFormed,
    "EncodingWellFormed": v_EncodingWellFormed,
    "EpochCacheMonotone": v_EpochCacheMonotone,
    "LeaderViewConsistent": v_LeaderViewConsistent,
}
