"""A Python re-expression of the public TLA+ model hachikuji/kafka-specification.

That specification models one Kafka partition. Its shared module, KafkaReplication, has six
variables (the replica logs, per-replica state, the record-id and leader-epoch id sequences,
the set of LeaderAndIsr requests ever sent, and the quorum (ZooKeeper) state) and the actions
all protocol versions share; four root modules choose the truncation and fencing rules:

=================  ==============================  ==============================================
variant            TLA+ module                     what differs
=================  ==============================  ==============================================
``hw-truncation``  KafkaTruncateToHighWatermark    a new follower truncates to its own HW
``kip-101``        Kip101                          truncate to the leader's answer for the epoch
                                                   of the follower's last record
``kip-279``        Kip279                          truncate after the last offset at which the
                                                   follower's record equals the leader's
``kip-320``        Kip320                          KIP-279 truncation plus epoch fencing of
                                                   fetch, HW advance, ISR changes and truncation
=================  ==============================  ==============================================

This model has exactly the state graph of those modules. TLC 2.18 and this model agree on the
number of distinct states and on the shortest counterexample lengths (pinned in
``tests/test_tla_compat.py``), and on the number of transitions once TLC's habit of counting a
transition twice when both branches of a non-exclusive disjunction hold is accounted for.

Two implementations of the transition relation live here:

- `_Reference` follows the TLA+ text operator by operator on decoded, TLA+-shaped values
  (sets, records, existential choices over whole domains). It is slow and exists to be read
  and to check the fast one; like TLC it yields a transition once per true disjunct.
- The fast successor function is Python source generated for one (variant, constants) pair and
  compiled with `exec`: every loop over replicas or epochs is unrolled, every decode is a table
  lookup and every successor one tuple display. Tests check that both agree state by state.

Encoding. A state is a tuple ``(g, rq, rep_0, ..., rep_{n-1})`` of small ints:

- ``g = nextRecordId + (MaxRecords + 1) * quorumIsrMask``;
- ``rq`` packs ``leaderAndIsrRequests``: digit e (base ``1 + (n+1) * 2^n``) is
  ``1 + leader + (n+1) * isrMask`` for the request of epoch e (leader n stands for None), and
  0 for epochs not yet used;
- ``rep_r = log + LOGS * (hw + (LogSize+1) * ((leaderEpoch+1) + (NE+1) * (leader + (n+1) *
  isrMask)))`` where ``NE = MaxLeaderEpoch + 1``, ``log`` is the log's records as base-``C+1``
  digits (offset o is digit o; a record ``[id, epoch]`` is ``1 + id*NE + epoch`` and 0 is Nil;
  ``C = MaxRecords * NE`` is the size of LogRecords) and ``LOGS = (C+1)^LogSize``.

Why that is a bijection with the TLA+ states: each controller action takes the next epoch from
the id sequence and adds a request with it, and no action removes one, so the requests are one
per epoch below ``nextLeaderEpoch`` (which is therefore the number of requests);
``quorumState.leaderEpoch`` is always ``nextLeaderEpoch - 1`` and ``quorumState.leader`` the
leader of the newest request (None before any), since only the controller sets them and only
to the request it sends, so only the quorum ISR, which a leader's ISR change rewrites without a
request, is stored; and a log's slots past its end offset are always Nil (``TruncateTo`` resets
them), so the digits give both the records and the end offset.

Replica r is TLC's model value ``r{r+1}`` in a config ``Replicas = {r1, ..., rn}``. The spec is
symmetric in the replicas (every choice is an existential over Replicas or over a set of them,
Init treats them alike, and None and Nil are not replicas), so permutations of replica ids are
automorphisms and `canonical` may return the least permuted encoding.

Invariants: ``WeakIsr`` and ``StrongIsr`` (checked by default, in that order) and, on request,
``TypeOk`` and ``LeaderInIsr``. TLC cannot evaluate the spec's own ``TypeOk``: it compares a
record with ``Nil = -1`` and stops with an error on the first state that has a record; here it is
the type predicate the spec means, over the decoded state. ``LeaderInIsr`` (added upstream in
2020) is false already in the initial state, whose quorum leader is None.
"""

from __future__ import annotations

from collections import namedtuple
from itertools import permutations
from typing import Any

VARIANTS = {
    "hw-truncation": "KafkaTruncateToHighWatermark",
    "kip-101": "Kip101",
    "kip-279": "Kip279",
    "kip-320": "Kip320",
}

DEFAULT_INVARIANTS = ("WeakIsr", "StrongIsr")
ALL_INVARIANTS = ("TypeOk", "WeakIsr", "StrongIsr", "LeaderInIsr")

# The TLA+ action names of each variant's Next, in its order (which `successors` follows).
_HEAD = ("ControllerElectLeader", "ControllerShrinkIsr", "BecomeLeader")
_UNFENCED = ("LeaderExpandIsr", "LeaderShrinkIsr", "LeaderWrite", "LeaderIncHighWatermark")
ACTIONS = {
    "hw-truncation": _HEAD + _UNFENCED + ("BecomeFollowerTruncateToHighWatermark",
                                          "FollowerReplicate"),
    "kip-101": _HEAD + _UNFENCED + ("BecomeFollowerTruncateKip101", "FollowerReplicate"),
    "kip-279": _HEAD + _UNFENCED + ("BecomeFollowerTruncateKip279", "FollowerReplicate"),
    "kip-320": _HEAD + ("FencedLeaderExpandIsr", "FencedLeaderShrinkIsr", "LeaderWrite",
                        "FencedLeaderIncHighWatermark", "FencedBecomeFollowerAndTruncate",
                        "FencedFollowerFetch"),
}

# A label is (action name, *arguments); these name the arguments.
_ARG_NAMES = {
    "ControllerElectLeader": ("newLeader",),
    "ControllerShrinkIsr": ("replica",),
    "BecomeLeader": ("leader", "leaderEpoch"),
    "LeaderWrite": ("replica",),
    "LeaderIncHighWatermark": ("leader",),
    "FencedLeaderIncHighWatermark": ("leader",),
    "LeaderExpandIsr": ("leader", "replica"),
    "LeaderShrinkIsr": ("leader", "replica"),
    "FencedLeaderExpandIsr": ("leader", "follower"),
    "FencedLeaderShrinkIsr": ("leader", "follower"),
    "BecomeFollowerTruncateToHighWatermark": ("leader", "replica", "leaderEpoch"),
    "BecomeFollowerTruncateKip101": ("leader", "replica", "leaderEpoch"),
    "BecomeFollowerTruncateKip279": ("leader", "replica", "leaderEpoch"),
    "FencedBecomeFollowerAndTruncate": ("leader", "replica", "leaderEpoch"),
    "FollowerReplicate": ("follower", "leader"),
    "FencedFollowerFetch": ("follower", "leader"),
}

NONE = "NONE"  # the spec's None (not a replica)
NIL = -1  # the spec's Nil (no record / no epoch)

# Decoded, TLA+-shaped values. A record is an (id, epoch) pair; a log is (endOffset, records)
# with LogSize slots, Nil past the end; sets of replicas are frozensets.
TlaState = namedtuple("TlaState", "replicaLog replicaState nextRecordId nextLeaderEpoch "
                                  "leaderAndIsrRequests quorumState")
ReplicaState = namedtuple("ReplicaState", "hw leaderEpoch leader isr")
QuorumState = namedtuple("QuorumState", "leader leaderEpoch isr")  # also a LeaderAndIsr request

_EAGER_TABLE_LIMIT = 1 << 18


class _Lazy(dict):
    """A dict that computes a missing entry with `fn` and keeps it."""

    __slots__ = ("fn",)

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def __missing__(self, key):
        value = self[key] = self.fn(key)
        return value


def _table(size: int, fn):
    """`fn` over range(size): a list when small, else a lazily filled dict."""
    if size <= _EAGER_TABLE_LIMIT:
        return [fn(k) for k in range(size)]
    return _Lazy(fn)


class _Layout:
    """The constants, the packed encoding and its lookup tables."""

    def __init__(self, n: int, L: int, R: int, E: int):
        self.n, self.L, self.R, self.E = n, L, R, E
        self.NE = NE = E + 1
        self.N1 = N1 = n + 1
        self.NONE = n
        self.FULL = (1 << n) - 1
        self.RR = R + 1
        self.C = C = R * NE
        self.LB = LB = C + 1
        self.LOGS = LOGS = LB ** L
        self.LPOW = tuple(LB ** k for k in range(L + 1))
        self.S_HW = LOGS
        self.S_EP = LOGS * (L + 1)
        self.S_LD = self.S_EP * (NE + 1)
        self.S_ISR = self.S_LD * N1
        self.REPS = self.S_ISR << n
        self.RBASE = 1 + N1 * (1 << n)
        self.RPOW = tuple(self.RBASE ** e for e in range(NE + 1))
        self.RQS = self.RBASE ** NE
        # log tables
        self.LDIG = [self._digits(lc) for lc in range(LOGS)]
        self.LEND = [next((o for o, d in enumerate(ds) if d == 0), L) for ds in self.LDIG]
        self.LEP = [tuple(-1 if d == 0 else (d - 1) % NE for d in ds) for ds in self.LDIG]
        self.REP = _table(self.REPS, self._unpack_rep)
        self.RQ = _table(self.RQS, self._unpack_rq)
        self.FNM = _table(LOGS * LOGS, self._first_non_matching)
        self.K101 = _table(LOGS * LOGS * (L + 1), self._kip101_offset)

    # -- logs ----------------------------------------------------------------------------------

    def _digits(self, lc: int) -> tuple[int, ...]:
        out = []
        for _ in range(self.L):
            out.append(lc % self.LB)
            lc //= self.LB
        return tuple(out)

    def record_code(self, record) -> int:
        rid, epoch = record
        return 1 + rid * self.NE + epoch

    def code_record(self, code: int):
        return ((code - 1) // self.NE, (code - 1) % self.NE)

    def _first_non_matching(self, key: int) -> int:
        """Kip279's FirstNonMatchingOffsetFromTail(leader, follower) on log codes."""
        cl, cf = divmod(key, self.LOGS)
        if self.LEND[cl] == 0:
            return 0
        dl, df = self.LDIG[cl], self.LDIG[cf]
        for o in range(min(self.LEND[cl], self.LEND[cf]) - 1, -1, -1):
            if dl[o] == df[o]:
                return o + 1
        return 0

    def _kip101_offset(self, key: int) -> int:
        """Kip101's truncation offset for (leader log, follower log, follower hw), or -1 when
        TruncateTo is not enabled (the offset is past the follower's end)."""
        rest, hw = divmod(key, self.L + 1)
        cl, cf = divmod(rest, self.LOGS)
        fend, lend = self.LEND[cf], self.LEND[cl]
        if fend == 0:
            return 0
        epoch = self.LEP[cf][fend - 1]
        if lend == 0:
            to = hw
        elif self.LEP[cl][lend - 1] == epoch:
            to = lend
        else:
            larger = [o for o in range(lend) if self.LEP[cl][o] > epoch]
            to = min(larger) if larger else hw
        return to if to <= fend else -1

    # -- replicas and requests ------------------------------------------------------------------

    def pack_rep(self, hw, epoch, leader, isr, lc) -> int:
        return (lc + self.S_HW * hw + self.S_EP * (epoch + 1) + self.S_LD * leader
                + self.S_ISR * isr)

    def _unpack_rep(self, rep: int):
        """rep -> (hw, leaderEpoch, leader, isr mask, log code, end offset)."""
        lc, x = rep % self.LOGS, rep // self.LOGS
        hw, x = x % (self.L + 1), x // (self.L + 1)
        ep, x = x % (self.NE + 1) - 1, x // (self.NE + 1)
        return (hw, ep, x % self.N1, x // self.N1, lc, self.LEND[lc])

    def _unpack_rq(self, rq: int):
        """rq -> (nextLeaderEpoch, quorum leader, leader_0, isr_0, ..., leader_E, isr_E), with
        (n, 0) for unused epochs."""
        pairs, nle = [], 0
        for _e in range(self.NE):
            d = rq % self.RBASE
            rq //= self.RBASE
            if d:
                nle += 1
                pairs.extend(divmod(d - 1, self.N1)[::-1])
            else:
                pairs.extend((self.NONE, 0))
        ql = pairs[2 * (nle - 1)] if nle else self.NONE
        return (nle, ql, *pairs)

    # -- whole states ---------------------------------------------------------------------------

    def mask(self, replicas) -> int:
        return sum(1 << r for r in replicas)

    def members(self, mask: int) -> frozenset:
        return frozenset(r for r in range(self.n) if mask >> r & 1)

    def decode(self, state) -> TlaState:
        g, rq, *reps = state
        nrid, qisr = g % self.RR, g // self.RR
        nle, ql, *pairs = self.RQ[rq]
        requests = frozenset(
            QuorumState(NONE if pairs[2 * e] == self.NONE else pairs[2 * e], e,
                        self.members(pairs[2 * e + 1]))
            for e in range(nle))
        quorum = QuorumState(NONE if ql == self.NONE else ql, nle - 1 if nle else NIL,
                             self.members(qisr))
        logs, rstates = [], []
        for rep in reps:
            hw, ep, ld, isr, lc, end = self.REP[rep]
            records = tuple(NIL if d == 0 else self.code_record(d) for d in self.LDIG[lc])
            logs.append((end, records))
            rstates.append(ReplicaState(hw, ep, NONE if ld == self.NONE else ld,
                                        self.members(isr)))
        return TlaState(tuple(logs), tuple(rstates), nrid, nle, requests, quorum)

    def encode(self, v: TlaState):
        """The packed state of a TLA+-shaped one; raises ValueError if `v` is outside the
        reachable shape the encoding relies on (see the module docstring)."""
        nle = v.nextLeaderEpoch
        by_epoch = sorted(v.leaderAndIsrRequests, key=lambda q: q.leaderEpoch)
        if [q.leaderEpoch for q in by_epoch] != list(range(nle)):
            raise ValueError("requests are not one per epoch below nextLeaderEpoch")
        newest = by_epoch[-1].leader if by_epoch else NONE
        if (v.quorumState.leaderEpoch, v.quorumState.leader) != (nle - 1 if nle else NIL,
                                                                  newest):
            raise ValueError("quorum leader/epoch differ from the newest request")
        rid = lambda r: self.NONE if r == NONE else r  # noqa: E731
        rq = sum((1 + rid(q.leader) + self.N1 * self.mask(q.isr)) * self.RPOW[q.leaderEpoch]
                 for q in by_epoch)
        reps = []
        for (end, records), rs in zip(v.replicaLog, v.replicaState, strict=True):
            if any(rec == NIL for rec in records[:end]) or any(rec != NIL
                                                               for rec in records[end:]):
                raise ValueError("log slots do not match its end offset")
            lc = sum(self.record_code(rec) * self.LPOW[o] for o, rec in enumerate(records[:end]))
            reps.append(self.pack_rep(rs.hw, rs.leaderEpoch, rid(rs.leader), self.mask(rs.isr),
                                      lc))
        g = v.nextRecordId + self.RR * self.mask(v.quorumState.isr)
        return (g, rq, *reps)

    def initial(self):
        rep = self.pack_rep(0, -1, self.NONE, 0, 0)
        return (self.RR * self.FULL, 0) + (rep,) * self.n


# ----------------------------------------------------------------------------------------------
# The literal re-expression (slow; the oracle for the generated code).


class _Reference:
    """The spec's operators and actions over `TlaState` values, one method per TLA+ definition.

    Actions are generators of (label, next TlaState). Existentials range over the same domains
    as in the spec (replicas, offsets, LogRecords, the request set), and a disjunction whose
    disjuncts can hold together yields once per true disjunct, as TLC counts transitions.
    """

    def __init__(self, variant: str, layout: _Layout):
        self.variant = variant
        n, L, R, NE = layout.n, layout.L, layout.R, layout.NE
        self.Replicas = tuple(range(n))
        self.Offsets = tuple(range(L))
        self.LogSize = L
        self.RecordIds = tuple(range(R))
        self.EpochIds = tuple(range(NE))
        self.MaxLeaderEpoch = NE - 1
        self.MaxRecordId = R - 1
        self.LogRecords = tuple((i, e) for i in range(R) for e in range(NE))
        self.next = {
            "hw-truncation": (self.ControllerElectLeader, self.ControllerShrinkIsr,
                              self.BecomeLeader, self.LeaderExpandIsr, self.LeaderShrinkIsr,
                              self.LeaderWrite, self.LeaderIncHighWatermark,
                              self.BecomeFollowerTruncateToHighWatermark,
                              self.FollowerReplicate),
            "kip-101": (self.ControllerElectLeader, self.ControllerShrinkIsr, self.BecomeLeader,
                        self.LeaderExpandIsr, self.LeaderShrinkIsr, self.LeaderWrite,
                        self.LeaderIncHighWatermark, self.BecomeFollowerTruncateKip101,
                        self.FollowerReplicate),
            "kip-279": (self.ControllerElectLeader, self.ControllerShrinkIsr, self.BecomeLeader,
                        self.LeaderExpandIsr, self.LeaderShrinkIsr, self.LeaderWrite,
                        self.LeaderIncHighWatermark, self.BecomeFollowerTruncateKip279,
                        self.FollowerReplicate),
            "kip-320": (self.ControllerElectLeader, self.ControllerShrinkIsr, self.BecomeLeader,
                        self.FencedLeaderExpandIsr, self.FencedLeaderShrinkIsr,
                        self.LeaderWrite, self.FencedLeaderIncHighWatermark,
                        self.FencedBecomeFollowerAndTruncate, self.FencedFollowerFetch),
        }[variant]

    def successors(self, v: TlaState):
        for action in self.next:
            yield from action(v)

    # -- FiniteReplicatedLog ----------------------------------------------------------------

    @staticmethod
    def IsEmpty(v, r):
        return v.replicaLog[r][0] == 0

    def IsFull(self, v, r):
        return v.replicaLog[r][0] == self.LogSize

    @staticmethod
    def HasEntry(v, r, record, offset):
        end, records = v.replicaLog[r]
        return offset < end and records[offset] == record

    @staticmethod
    def GetEndOffset(v, r):
        return v.replicaLog[r][0]

    @staticmethod
    def HasOffset(v, r, offset):
        return offset < v.replicaLog[r][0]

    def GetLatestRecord(self, v, r):
        end, records = v.replicaLog[r]
        return NIL if end == 0 else records[end - 1]

    def IsLatestRecord(self, v, r, record):
        end, records = v.replicaLog[r]
        return any(end != 0 and o == end - 1 and record == records[o] for o in self.Offsets)

    def GetAllEntries(self, v, r):
        end, records = v.replicaLog[r]
        return [(o, records[o]) for o in range(end)]

    def Append(self, logs, r, record, offset):
        """The logs after the append, or None when not enabled."""
        end, records = logs[r]
        if end == self.LogSize or offset != end:
            return None
        new = list(logs)
        new[r] = (end + 1, records[:offset] + (record,) + records[offset + 1:])
        return tuple(new)

    def TruncateTo(self, logs, r, new_end):
        end, records = logs[r]
        if not new_end <= end:
            return None
        new = list(logs)
        new[r] = (new_end, tuple(rec if o < new_end else NIL for o, rec in enumerate(records)))
        return tuple(new)

    def ReplicateTo(self, v, frm, to):
        """Every logs' value ReplicateTo(frm, to) allows (one per offset/record witness)."""
        for offset in self.Offsets:
            for record in self.LogRecords:
                if self.HasEntry(v, frm, record, offset):
                    logs = self.Append(v.replicaLog, to, record, offset)
                    if logs is not None:
                        yield logs

    # -- KafkaReplication ---------------------------------------------------------------------

    @staticmethod
    def ReplicaPresumesLeadership(v, r):
        return v.replicaState[r].leader == r

    @staticmethod
    def ReplicaIsFollowing(v, follower, leader):
        return v.replicaState[follower].leader == leader

    def IsTrueLeader(self, v, leader):
        return (v.quorumState.leader == leader and self.ReplicaPresumesLeadership(v, leader)
                and v.replicaState[leader].leaderEpoch == v.quorumState.leaderEpoch)

    @staticmethod
    def _set_rs(v, r, rs):
        states = list(v.replicaState)
        states[r] = rs
        return states

    def ControllerUpdateIsr(self, v, new_leader, new_isr):
        for epoch in self.EpochIds:  # LeaderEpochSeq!NextId(epoch)
            if epoch <= self.MaxLeaderEpoch and epoch == v.nextLeaderEpoch:
                q = QuorumState(new_leader, epoch, frozenset(new_isr))
                yield v._replace(quorumState=q, nextLeaderEpoch=epoch + 1,
                                 leaderAndIsrRequests=v.leaderAndIsrRequests | {q})

    def ControllerShrinkIsr(self, v):
        q = v.quorumState
        for r in self.Replicas:
            label = ("ControllerShrinkIsr", r)
            if q.leader == r and q.isr == {r}:
                for w in self.ControllerUpdateIsr(v, NONE, q.isr):
                    yield label, w
            if q.leader == r and q.isr != {r}:
                for w in self.ControllerUpdateIsr(v, NONE, q.isr - {r}):
                    yield label, w
            if q.leader != r and r in q.isr:
                for w in self.ControllerUpdateIsr(v, q.leader, q.isr - {r}):
                    yield label, w

    def ControllerElectLeader(self, v):
        for new_leader in sorted(v.quorumState.isr):
            if v.quorumState.leader != new_leader:
                for w in self.ControllerUpdateIsr(v, new_leader, v.quorumState.isr):
                    yield ("ControllerElectLeader", new_leader), w

    def BecomeLeader(self, v):
        for req in sorted(v.leaderAndIsrRequests, key=lambda q: q.leaderEpoch):
            leader = req.leader
            if leader != NONE and req.leaderEpoch > v.replicaState[leader].leaderEpoch:
                rs = ReplicaState(v.replicaState[leader].hw, req.leaderEpoch, leader, req.isr)
                yield (("BecomeLeader", leader, req.leaderEpoch),
                       v._replace(replicaState=tuple(self._set_rs(v, leader, rs))))

    def LeaderWrite(self, v):
        for r in self.Replicas:
            for rid in self.RecordIds:
                for offset in self.Offsets:
                    if not self.ReplicaPresumesLeadership(v, r):
                        continue
                    if not (rid <= self.MaxRecordId and rid == v.nextRecordId):
                        continue
                    record = (rid, v.replicaState[r].leaderEpoch)
                    logs = self.Append(v.replicaLog, r, record, offset)
                    if logs is not None:
                        yield ("LeaderWrite", r), v._replace(replicaLog=logs,
                                                             nextRecordId=rid + 1)

    def QuorumUpdateLeaderAndIsr(self, v, leader, new_isr):
        if not (self.IsTrueLeader(v, leader) and v.quorumState.leader == leader):
            return None
        rs = v.replicaState[leader]._replace(isr=frozenset(new_isr))
        return v._replace(quorumState=v.quorumState._replace(isr=frozenset(new_isr)),
                          replicaState=tuple(self._set_rs(v, leader, rs)))

    def IsFollowerCaughtUp(self, v, leader, follower, end_offset):
        return self.ReplicaIsFollowing(v, follower, leader) and (
            end_offset == 0
            or (end_offset > 0
                and any(self.HasEntry(v, leader, rec, end_offset - 1)
                        and self.HasOffset(v, follower, end_offset - 1)
                        for rec in self.LogRecords)))

    def LeaderShrinkIsr(self, v):
        for leader in self.Replicas:
            isr = v.replicaState[leader].isr
            end = self.GetEndOffset(v, leader)
            for r in sorted(isr - {leader}):
                if not self.IsFollowerCaughtUp(v, leader, r, end):
                    w = self.QuorumUpdateLeaderAndIsr(v, leader, isr - {r})
                    if w is not None:
                        yield ("LeaderShrinkIsr", leader, r), w

    def LeaderExpandIsr(self, v):
        for leader in self.Replicas:
            isr = v.replicaState[leader].isr
            hw = v.replicaState[leader].hw
            for r in self.Replicas:
                if r not in isr and self.IsFollowerCaughtUp(v, leader, r, hw):
                    w = self.QuorumUpdateLeaderAndIsr(v, leader, isr | {r})
                    if w is not None:
                        yield ("LeaderExpandIsr", leader, r), w

    def LeaderIncHighWatermark(self, v):
        for offset in self.Offsets:
            for leader in self.Replicas:
                rs = v.replicaState[leader]
                if (self.ReplicaPresumesLeadership(v, leader) and offset == rs.hw
                        and all(self.ReplicaIsFollowing(v, f, leader)
                                and self.HasOffset(v, f, offset) for f in rs.isr)):
                    yield (("LeaderIncHighWatermark", leader),
                           v._replace(replicaState=tuple(
                               self._set_rs(v, leader, rs._replace(hw=rs.hw + 1)))))

    def BecomeFollowerAndTruncateTo(self, v, leader, r, truncation_offset, name):
        for req in sorted(v.leaderAndIsrRequests, key=lambda q: q.leaderEpoch):
            if not (leader != r and req.leader == leader
                    and req.leaderEpoch > v.replicaState[r].leaderEpoch):
                continue
            if leader == NONE:
                logs = v.replicaLog
            else:
                logs = self.TruncateTo(v.replicaLog, r, truncation_offset)
                if logs is None:
                    continue
            rs = ReplicaState(min(truncation_offset, v.replicaState[r].hw), req.leaderEpoch,
                              leader, req.isr)
            yield ((name, leader, r, req.leaderEpoch),
                   v._replace(replicaLog=logs, replicaState=tuple(self._set_rs(v, r, rs))))

    def FollowerReplicate(self, v):
        for follower in self.Replicas:
            for leader in self.Replicas:
                if not (self.ReplicaPresumesLeadership(v, leader)
                        and self.ReplicaIsFollowing(v, follower, leader)):
                    continue
                for logs in self.ReplicateTo(v, leader, follower):
                    yield ("FollowerReplicate", follower, leader), self._fetched(
                        v, logs, follower, leader)

    def _fetched(self, v, logs, follower, leader):
        new_end = self.GetEndOffset(v, follower) + 1
        hw = min(v.replicaState[leader].hw, new_end)
        rs = v.replicaState[follower]._replace(hw=hw)
        return v._replace(replicaLog=logs, replicaState=tuple(self._set_rs(v, follower, rs)))

    # -- KafkaTruncateToHighWatermark -----------------------------------------------------------

    def BecomeFollowerTruncateToHighWatermark(self, v):
        for leader in self.Replicas:
            for r in self.Replicas:
                yield from self.BecomeFollowerAndTruncateTo(
                    v, leader, r, v.replicaState[r].hw, "BecomeFollowerTruncateToHighWatermark")

    # -- Kip101 ---------------------------------------------------------------------------------

    def OffsetsWithLargerEpochs(self, v, r, epoch):
        return {o for o, rec in self.GetAllEntries(v, r) if rec[1] > epoch}

    def LookupOffsetForEpoch(self, v, leader, follower, epoch):
        if self.IsEmpty(v, leader):
            return v.replicaState[follower].hw
        if self.GetLatestRecord(v, leader)[1] == epoch:
            return self.GetEndOffset(v, leader)
        larger = self.OffsetsWithLargerEpochs(v, leader, epoch)
        return v.replicaState[follower].hw if not larger else min(larger)

    def BecomeFollowerTruncateKip101(self, v):
        name = "BecomeFollowerTruncateKip101"
        for leader in self.Replicas:
            for r in self.Replicas:
                if self.IsEmpty(v, r):
                    yield from self.BecomeFollowerAndTruncateTo(v, leader, r, 0, name)
                for record in self.LogRecords:
                    if self.IsLatestRecord(v, r, record):
                        offset = self.LookupOffsetForEpoch(v, leader, r, record[1])
                        yield from self.BecomeFollowerAndTruncateTo(v, leader, r, offset, name)

    # -- Kip279 ---------------------------------------------------------------------------------

    def MatchingOffsets(self, v, r1, r2):
        return {o for o, rec in self.GetAllEntries(v, r1) if self.HasEntry(v, r2, rec, o)}

    def FirstNonMatchingOffsetFromTail(self, v, leader, follower):
        if self.IsEmpty(v, leader):
            return 0
        matching = self.MatchingOffsets(v, follower, leader)
        return 0 if not matching else max(matching) + 1

    def BecomeFollowerTruncateKip279(self, v):
        name = "BecomeFollowerTruncateKip279"
        for leader in self.Replicas:
            for r in self.Replicas:
                if self.IsEmpty(v, r):
                    yield from self.BecomeFollowerAndTruncateTo(v, leader, r, 0, name)
                offset = self.FirstNonMatchingOffsetFromTail(v, leader, r)
                yield from self.BecomeFollowerAndTruncateTo(v, leader, r, offset, name)

    # -- Kip320 ---------------------------------------------------------------------------------

    def IsFollowingLeaderEpoch(self, v, leader, follower):
        return (self.ReplicaPresumesLeadership(v, leader)
                and v.replicaState[follower].leader == leader
                and v.replicaState[follower].leaderEpoch == v.replicaState[leader].leaderEpoch)

    def FencedFollowerFetch(self, v):
        for follower in self.Replicas:
            for leader in self.Replicas:
                if not self.IsFollowingLeaderEpoch(v, leader, follower):
                    continue
                for logs in self.ReplicateTo(v, leader, follower):
                    yield ("FencedFollowerFetch", follower, leader), self._fetched(
                        v, logs, follower, leader)

    def FencedLeaderIncHighWatermark(self, v):
        for leader in self.Replicas:
            rs = v.replicaState[leader]
            if self.HasOffset(v, leader, rs.hw) and all(
                    self.IsFollowingLeaderEpoch(v, leader, f) and self.HasOffset(v, f, rs.hw)
                    for f in rs.isr):
                yield (("FencedLeaderIncHighWatermark", leader),
                       v._replace(replicaState=tuple(
                           self._set_rs(v, leader, rs._replace(hw=rs.hw + 1)))))

    def FencedLeaderShrinkIsr(self, v):
        for leader in self.Replicas:
            isr = v.replicaState[leader].isr
            end = self.GetEndOffset(v, leader)
            for f in sorted(isr - {leader}):
                # TLC branches on this disjunction: a transition per true disjunct.
                for holds in (not self.IsFollowingLeaderEpoch(v, leader, f),
                              self.GetEndOffset(v, f) < end):
                    if holds:
                        w = self.QuorumUpdateLeaderAndIsr(v, leader, isr - {f})
                        if w is not None:
                            yield ("FencedLeaderShrinkIsr", leader, f), w

    def HasHighWatermarkReachedCurrentEpoch(self, v, leader):
        hw = v.replicaState[leader].hw
        return hw == self.GetEndOffset(v, leader) or any(
            self.HasEntry(v, leader, rec, hw) and rec[1] == v.replicaState[leader].leaderEpoch
            for rec in self.LogRecords)

    def HasFollowerReachedHighWatermark(self, v, leader, follower):
        hw = v.replicaState[leader].hw
        return hw == 0 or (hw > 0 and self.HasOffset(v, follower, hw - 1))

    def FencedLeaderExpandIsr(self, v):
        for leader in self.Replicas:
            isr = v.replicaState[leader].isr
            for f in self.Replicas:
                if (f not in isr and self.IsFollowingLeaderEpoch(v, leader, f)
                        and self.HasFollowerReachedHighWatermark(v, leader, f)
                        and self.HasHighWatermarkReachedCurrentEpoch(v, leader)):
                    w = self.QuorumUpdateLeaderAndIsr(v, leader, isr | {f})
                    if w is not None:
                        yield ("FencedLeaderExpandIsr", leader, f), w

    def FencedBecomeFollowerAndTruncate(self, v):
        for leader in self.Replicas:
            for r in self.Replicas:
                for req in sorted(v.leaderAndIsrRequests, key=lambda q: q.leaderEpoch):
                    if not (leader != r and req.leader == leader
                            and req.leaderEpoch > v.replicaState[r].leaderEpoch):
                        continue
                    label = ("FencedBecomeFollowerAndTruncate", leader, r, req.leaderEpoch)
                    if leader == NONE:
                        rs = ReplicaState(v.replicaState[r].hw, req.leaderEpoch, req.leader,
                                          req.isr)
                        yield label, v._replace(replicaState=tuple(self._set_rs(v, r, rs)))
                    elif (self.ReplicaPresumesLeadership(v, leader)
                          and v.replicaState[leader].leaderEpoch == req.leaderEpoch):
                        to = self.FirstNonMatchingOffsetFromTail(v, leader, r)
                        hw = min(to, v.replicaState[r].hw)
                        logs = self.TruncateTo(v.replicaLog, r, to)
                        if logs is not None:
                            rs = ReplicaState(hw, req.leaderEpoch, req.leader, req.isr)
                            yield label, v._replace(replicaLog=logs, replicaState=tuple(
                                self._set_rs(v, r, rs)))

    # -- invariants -----------------------------------------------------------------------------

    def _isr_consistent(self, v, isr_of):
        for r1 in self.Replicas:
            if not self.ReplicaPresumesLeadership(v, r1):
                continue
            hw = v.replicaState[r1].hw
            if hw == 0:
                continue
            for r2 in isr_of(r1):
                for offset in range(hw):
                    if not any(self.HasEntry(v, r1, rec, offset)
                               and self.HasEntry(v, r2, rec, offset) for rec in self.LogRecords):
                        return False
        return True

    def WeakIsr(self, v):
        return self._isr_consistent(v, lambda r1: v.replicaState[r1].isr)

    def StrongIsr(self, v):
        return self._isr_consistent(v, lambda r1: v.quorumState.isr)


# ----------------------------------------------------------------------------------------------
# The generated fast code.


def _generate_source(variant: str, lay: _Layout) -> str:
    """Python source of `successors(s)`, `weak(s)`, `strong(s)` and `canonical(s)` for one
    variant and one set of constants: the reference semantics, unrolled over replicas and
    epochs. Each section names the TLA+ action it re-expresses."""
    n, L, R, E, NE, N1, RR = lay.n, lay.L, lay.R, lay.E, lay.NE, lay.N1, lay.RR
    S_HW, S_EP, S_LD, S_ISR, LOGS = lay.S_HW, lay.S_EP, lay.S_LD, lay.S_ISR, lay.LOGS
    NONE_ID, FULL = lay.NONE, lay.FULL
    REPL = range(n)
    fenced = variant == "kip-320"
    names = ACTIONS[variant]
    src: list[str] = []

    def w(depth: int, text: str) -> None:
        src.append("    " * depth + text)

    def tup(g="g", rq="rq", reps=None) -> str:
        reps = reps or {}
        return "(" + ", ".join([g, rq] + [reps.get(r, f"R{r}") for r in REPL]) + ")"

    unpack = f"g, rq, {', '.join(f'R{r}' for r in REPL)}, = s"
    decode = [f"h{r}, e{r}, d{r}, i{r}, c{r}, n{r} = REP[R{r}]" for r in REPL]

    w(0, "def successors(s):")
    w(1, unpack)
    w(1, f"nrid = g % {RR}")
    w(1, f"qisr = g // {RR}")
    w(1, f"nle, ql, {', '.join(f'a{e}, b{e}' for e in range(NE))}, = RQ[rq]")
    for line in decode:
        w(1, line)
    w(1, "out = []")
    w(1, "app = out.append")

    # ControllerElectLeader / ControllerShrinkIsr (ControllerUpdateIsr: next epoch, new request
    # appended as the digit of epoch nle, quorum state replaced).
    w(1, f"if nle <= {E}:")
    w(2, "P = RPOW[nle]")
    w(2, "# ControllerElectLeader")
    for r in REPL:
        w(2, f"if qisr & {1 << r} and ql != {r}:")
        w(3, f"app((LBL_ELECT[{r}], {tup(rq=f'rq + ({1 + r} + {N1} * qisr) * P')}))")
    w(2, "# ControllerShrinkIsr")
    for r in REPL:
        w(2, f"if ql == {r}:")
        w(3, f"ni = qisr if qisr == {1 << r} else qisr & {FULL & ~(1 << r)}")
        w(3, f"app((LBL_CSHRINK[{r}], "
             f"{tup(g=f'nrid + {RR} * ni', rq=f'rq + ({1 + NONE_ID} + {N1} * ni) * P')}))")
        w(2, f"elif qisr & {1 << r}:")
        w(3, f"ni = qisr & {FULL & ~(1 << r)}")
        w(3, f"app((LBL_CSHRINK[{r}], "
             f"{tup(g=f'nrid + {RR} * ni', rq=f'rq + (1 + ql + {N1} * ni) * P')}))")

    # BecomeLeader: the request's leader, in an older epoch, adopts it (hw and log kept).
    w(1, "# BecomeLeader")
    for e in range(NE):
        for k, ldr in enumerate(REPL):
            w(1, f"{'if' if k == 0 else 'elif'} a{e} == {ldr}:")
            w(2, f"if e{ldr} < {e}:")
            rep = (f"R{ldr} + ({e} - e{ldr}) * {S_EP} + ({ldr} - d{ldr}) * {S_LD} "
                   f"+ (b{e} - i{ldr}) * {S_ISR}")
            w(3, f"app((LBL_BLEADER[{e}][{ldr}], {tup(reps={ldr: rep})}))")

    # ISR changes go through QuorumUpdateLeaderAndIsr: only the true leader (the quorum
    # leader, presuming leadership in the quorum's epoch) may make them.
    for k, ldr in enumerate(REPL):
        w(1, f"{'if' if k == 0 else 'elif'} ql == {ldr} and d{ldr} == {ldr} and e{ldr} == nle - 1:")

        def isr_change(x, op, label, depth, _l=ldr):
            w(depth, f"ni = i{_l} {op} {1 << x if op == '|' else FULL & ~(1 << x)}")
            w(depth, f"app(({label}[{_l}][{x}], "
                     f"{tup(g=f'nrid + {RR} * ni', reps={_l: f'R{_l} + (ni - i{_l}) * {S_ISR}'})}))")

        if fenced:
            w(2, "# FencedLeaderExpandIsr")
            w(2, f"if h{ldr} == n{ldr} or (h{ldr} < n{ldr} and LEP[c{ldr}][h{ldr}] == e{ldr}):")
            for x in REPL:
                if x == ldr:  # the leader itself (only if outside its own ISR)
                    w(3, f"if not i{ldr} & {1 << x} and (h{ldr} == 0 or h{ldr} <= n{x}):")
                else:
                    w(3, f"if not i{ldr} & {1 << x} and d{x} == {ldr} and e{x} == e{ldr} "
                         f"and (h{ldr} == 0 or h{ldr} <= n{x}):")
                isr_change(x, "|", "LBL_EXPAND", 4)
            w(2, "# FencedLeaderShrinkIsr")
            for x in REPL:
                if x == ldr:
                    continue
                w(2, f"if i{ldr} & {1 << x} and (d{x} != {ldr} or e{x} != e{ldr} or n{x} < n{ldr}):")
                isr_change(x, "&", "LBL_SHRINK", 3)
        else:
            w(2, "# LeaderExpandIsr")
            for x in REPL:
                w(2, f"if not i{ldr} & {1 << x} and d{x} == {ldr} "
                     f"and (h{ldr} == 0 or (h{ldr} <= n{ldr} and h{ldr} <= n{x})):")
                isr_change(x, "|", "LBL_EXPAND", 3)
            w(2, "# LeaderShrinkIsr")
            for x in REPL:
                if x == ldr:
                    continue
                w(2, f"if i{ldr} & {1 << x} and (d{x} != {ldr} or (n{ldr} != 0 and n{x} < n{ldr})):")
                isr_change(x, "&", "LBL_SHRINK", 3)

    # LeaderWrite: a replica presuming leadership appends record [nextRecordId, its epoch].
    w(1, "# LeaderWrite")
    w(1, f"if nrid < {R}:")
    w(2, f"k = 1 + nrid * {NE}")
    for r in REPL:
        w(2, f"if d{r} == {r} and n{r} < {L}:")
        w(3, f"app((LBL_WRITE[{r}], {tup(g='g + 1', reps={r: f'R{r} + (k + e{r}) * LPOW[n{r}]'})}))")

    if fenced:
        w(1, "# FencedLeaderIncHighWatermark")
        for ldr in REPL:
            # "every ISR member follows the leader's epoch" needs the replica to presume
            # leadership unless its ISR is empty; for the member `ldr` itself that is all.
            conds = [f"(d{ldr} == {ldr} or not i{ldr})", f"h{ldr} < n{ldr}"] + [
                f"(not i{ldr} & {1 << f} or (d{f} == {ldr} and e{f} == e{ldr} and n{f} > h{ldr}))"
                for f in REPL if f != ldr]
            w(1, f"if {' and '.join(conds)}:")
            w(2, f"app((LBL_INCHW[{ldr}], {tup(reps={ldr: f'R{ldr} + {S_HW}'})}))")
    else:
        w(1, "# LeaderIncHighWatermark")
        for ldr in REPL:
            conds = [f"d{ldr} == {ldr}", f"h{ldr} < {L}"] + [
                f"(not i{ldr} & {1 << f} or n{f} > h{ldr})" if f == ldr else
                f"(not i{ldr} & {1 << f} or (d{f} == {ldr} and n{f} > h{ldr}))" for f in REPL]
            w(1, f"if {' and '.join(conds)}:")
            w(2, f"app((LBL_INCHW[{ldr}], {tup(reps={ldr: f'R{ldr} + {S_HW}'})}))")

    # Becoming a follower of the request's leader (requests naming None are never adopted:
    # the spec's leader ranges over Replicas), truncating per the variant.
    w(1, f"# {names[7]}")
    for e in range(NE):
        for k, ldr in enumerate(REPL):
            guard = f"a{e} == {ldr}" + (f" and d{ldr} == {ldr} and e{ldr} == {e}" if fenced else "")
            w(1, f"{'if' if k == 0 else 'elif'} {guard}:")
            w(2, f"base = {S_EP * (e + 1) + S_LD * ldr} + b{e} * {S_ISR}")
            for r in REPL:
                if r == ldr:
                    continue
                w(2, f"if e{r} < {e}:")
                if variant == "hw-truncation":
                    w(3, f"to = h{r}")
                    w(3, f"if to <= n{r}:")
                    d = 4
                elif variant == "kip-101":
                    w(3, f"to = K101[(c{ldr} * {LOGS} + c{r}) * {L + 1} + h{r}]")
                    w(3, "if to >= 0:")
                    d = 4
                else:
                    w(3, f"to = FNM[c{ldr} * {LOGS} + c{r}]")
                    d = 3
                w(d, f"hh = to if to < h{r} else h{r}")
                w(d, f"app((LBL_FOLLOW[{ldr}][{r}][{e}], "
                     f"{tup(reps={r: f'c{r} % LPOW[to] + hh * {S_HW} + base'})}))")

    # FollowerReplicate / FencedFollowerFetch: copy the leader's record at the follower's end
    # offset; follower hw = min(leader hw, new end offset).
    w(1, f"# {names[8]}")
    for ldr in REPL:
        w(1, f"if d{ldr} == {ldr} and n{ldr}:")
        for f in REPL:
            if f == ldr:
                continue
            cond = f"d{f} == {ldr} and n{f} < n{ldr}" + (f" and e{f} == e{ldr}" if fenced else "")
            w(2, f"if {cond}:")
            w(3, f"nh = h{ldr} if h{ldr} <= n{f} else n{f} + 1")
            rep = (f"R{f} + (nh - h{f}) * {S_HW} + c{ldr} % LPOW[n{f} + 1] - c{ldr} % LPOW[n{f}]")
            w(3, f"app((LBL_REPL[{f}][{ldr}], {tup(reps={f: rep})}))")
    w(1, "return out")
    w(0, "")

    # WeakIsr / StrongIsr: a replica presuming leadership with hw > 0 must have hw records,
    # and every member of its own ISR (weak) / the quorum ISR (strong) the same first hw.
    for fn, strong in (("weak", False), ("strong", True)):
        w(0, f"def {fn}(s):")
        w(1, unpack)
        if strong:
            w(1, f"qisr = g // {RR}")
        for line in decode:
            w(1, line)
        for ldr in REPL:
            isr = "qisr" if strong else f"i{ldr}"
            w(1, f"if d{ldr} == {ldr} and h{ldr}:")
            w(2, f"if h{ldr} > n{ldr} and {isr}:")
            w(3, f"return ISR_DETAIL({ldr}, h{ldr}, {isr}, {strong})")
            w(2, f"p = LPOW[h{ldr}]")
            w(2, f"x = c{ldr} % p")
            for r in REPL:
                if r != ldr:
                    w(2, f"if {isr} & {1 << r} and c{r} % p != x:")
                    w(3, f"return ISR_DETAIL({ldr}, h{ldr}, {1 << r}, {strong})")
        w(1, "return None")
        w(0, "")

    # Broker permutations: a candidate per non-identity permutation, the least one wins.
    w(0, "def canonical(s):")
    w(1, unpack)
    w(1, "best = s")
    for k, perm in enumerate(p for p in permutations(REPL) if p != tuple(REPL)):
        inv = [0] * n
        for r, p in enumerate(perm):
            inv[p] = r
        reps = ", ".join(f"PREP[{k}][R{inv[p]}]" for p in REPL)
        w(1, f"c = (PG[{k}][g], PRQ[{k}][rq], {reps},)")
        w(1, "if c < best:")
        w(2, "best = c")
    w(1, "return best")
    return "\n".join(src) + "\n"


def _permutation_tables(lay: _Layout):
    """Per non-identity permutation: the maps of g, rq and a replica code."""
    n = lay.n
    out = []
    for perm in permutations(range(n)):
        if perm == tuple(range(n)):
            continue
        rmap = tuple(perm) + (lay.NONE,)
        mmap = tuple(sum(1 << perm[r] for r in range(n) if m >> r & 1) for m in range(1 << n))

        def pg(g, mmap=mmap):
            return g % lay.RR + lay.RR * mmap[g // lay.RR]

        def prq(rq, rmap=rmap, mmap=mmap):
            out, e = 0, 0
            while rq:
                rq, d = divmod(rq, lay.RBASE)
                if d:
                    ld, isr = (d - 1) % lay.N1, (d - 1) // lay.N1
                    out += (1 + rmap[ld] + lay.N1 * mmap[isr]) * lay.RPOW[e]
                e += 1
            return out

        def prep(rep, rmap=rmap, mmap=mmap):
            hw, ep, ld, isr, lc, _end = lay.REP[rep]
            return lay.pack_rep(hw, ep, rmap[ld], mmap[isr], lc)

        out.append((_Lazy(pg), _Lazy(prq), _Lazy(prep)))
    return out


class TlaCompatModel:
    """hachikuji/kafka-specification under one variant and one set of constants.

    ``brokers`` is |Replicas|, ``log_size`` LogSize, ``records`` MaxRecords (record ids
    0 .. MaxRecords-1) and ``epochs`` MaxLeaderEpoch (leader epochs 0 .. MaxLeaderEpoch).
    """

    name = "tla-compat"

    def __init__(self, variant: str, brokers: int, log_size: int, records: int, epochs: int,
                 invariants: list[str] | None = None):
        if variant not in VARIANTS:
            raise ValueError(f"unknown variant {variant!r}; expected one of {sorted(VARIANTS)}")
        if brokers < 1 or log_size < 0 or records < 0 or epochs < 0:
            raise ValueError("brokers must be >= 1 and the other constants >= 0")
        names = list(DEFAULT_INVARIANTS) if invariants is None else list(invariants)
        for inv in names:
            if inv not in ALL_INVARIANTS:
                raise ValueError(f"unknown invariant {inv!r}; expected one of {ALL_INVARIANTS}")
        self.variant = variant
        self.module = VARIANTS[variant]
        self.brokers, self.log_size, self.records, self.epochs = brokers, log_size, records, epochs
        self.layout = lay = _Layout(brokers, log_size, records, epochs)
        self.reference = _Reference(variant, lay)
        self.source = _generate_source(variant, lay)
        act = ACTIONS[variant]
        repl = range(brokers)
        perms = _permutation_tables(lay)
        namespace = {
            "REP": lay.REP, "RQ": lay.RQ, "FNM": lay.FNM, "K101": lay.K101, "LEP": lay.LEP,
            "LPOW": lay.LPOW, "RPOW": lay.RPOW, "ISR_DETAIL": self._isr_detail,
            "PG": [p[0] for p in perms], "PRQ": [p[1] for p in perms],
            "PREP": [p[2] for p in perms],
            "LBL_ELECT": [("ControllerElectLeader", r) for r in repl],
            "LBL_CSHRINK": [("ControllerShrinkIsr", r) for r in repl],
            "LBL_BLEADER": [[("BecomeLeader", r, e) for r in repl] for e in range(lay.NE)],
            "LBL_EXPAND": [[(act[3], ldr, x) for x in repl] for ldr in repl],
            "LBL_SHRINK": [[(act[4], ldr, x) for x in repl] for ldr in repl],
            "LBL_WRITE": [("LeaderWrite", r) for r in repl],
            "LBL_INCHW": [(act[6], r) for r in repl],
            "LBL_FOLLOW": [[[(act[7], ldr, r, e) for e in range(lay.NE)] for r in repl]
                           for ldr in repl],
            "LBL_REPL": [[(act[8], f, ldr) for ldr in repl] for f in repl],
        }
        exec(compile(self.source, f"<tla_compat {variant}>", "exec"), namespace)
        self.successors = namespace["successors"]
        self.canonical = namespace["canonical"]
        checks = {
            "TypeOk": self._type_ok,
            "WeakIsr": namespace["weak"],
            "StrongIsr": namespace["strong"],
            "LeaderInIsr": self._leader_in_isr,
        }
        self.invariants = {inv: checks[inv] for inv in names}

    def __reduce__(self):
        # The generated functions do not pickle; rebuild from the constructor arguments.
        return (TlaCompatModel, (self.variant, self.brokers, self.log_size, self.records,
                                 self.epochs, list(self.invariants)))

    # -- the Model protocol (successors, canonical and the ISR invariants are the generated
    # functions bound in __init__) -------------------------------------------------------------

    def init_states(self):
        """KafkaReplication's Init: empty logs, no leader anywhere, quorum ISR = all replicas."""
        return [self.layout.initial()]

    def successors(self, state):  # pragma: no cover - replaced per instance in __init__
        """(label, next state) for every enabled instance of the variant's Next, in Next order
        (a list)."""
        raise NotImplementedError

    def canonical(self, state):  # pragma: no cover - replaced per instance in __init__
        """The least encoding among the broker permutations of `state`."""
        raise NotImplementedError

    def reference_successors(self, state):
        """The successors computed by the literal re-expression (slow; TLC's multiplicity)."""
        lay = self.layout
        for label, v in self.reference.successors(lay.decode(state)):
            yield label, lay.encode(v)

    def action_name(self, label) -> str:
        return label[0]

    def action_args(self, label) -> dict[str, Any]:
        return dict(zip(_ARG_NAMES[label[0]], label[1:], strict=True))

    def action_names(self) -> tuple[str, ...]:
        return ACTIONS[self.variant]

    def symmetric(self) -> bool:
        # Every action quantifies over Replicas (or over ISR subsets of it) and never tells one
        # replica from another; Init is invariant under renaming; None and Nil are not replicas.
        return True

    def config_json(self) -> dict[str, Any]:
        return {
            "model": self.name,
            "variant": self.variant,
            "module": self.module,
            "Replicas": self.brokers,
            "LogSize": self.log_size,
            "MaxRecords": self.records,
            "MaxLeaderEpoch": self.epochs,
            "invariants": list(self.invariants),
        }

    # -- showing states -------------------------------------------------------------------------

    def decode(self, state) -> TlaState:
        """The TLA+ variables of `state` as namedtuples, frozensets and (id, epoch) records."""
        return self.layout.decode(state)

    def to_json(self, state) -> dict[str, Any]:
        """The TLA+ variables by name. Replicas are 0..n-1 (TLC's r1..rn); None is "NONE" and
        Nil is -1 as in the spec; sets are sorted lists; requests are sorted by epoch."""
        v = self.decode(state)

        def q(x):
            return {"leader": x.leader, "leaderEpoch": x.leaderEpoch, "isr": sorted(x.isr)}

        return {
            "replicaLog": [
                {"endOffset": end,
                 "records": [NIL if rec == NIL else {"id": rec[0], "epoch": rec[1]}
                             for rec in records]}
                for end, records in v.replicaLog],
            "replicaState": [{"hw": rs.hw, "leaderEpoch": rs.leaderEpoch, "leader": rs.leader,
                              "isr": sorted(rs.isr)} for rs in v.replicaState],
            "nextRecordId": v.nextRecordId,
            "nextLeaderEpoch": v.nextLeaderEpoch,
            "leaderAndIsrRequests": [q(x) for x in sorted(v.leaderAndIsrRequests,
                                                          key=lambda x: x.leaderEpoch)],
            "quorumState": q(v.quorumState),
        }

    def render(self, state) -> str:
        d = self.to_json(state)
        quorum = d["quorumState"]

        def isr(members):
            return "{" + ",".join(str(m) for m in members) + "}"

        def who(v):
            return "-" if v == NONE else str(v)

        lines = [
            f"{self.module}: nextRecordId={d['nextRecordId']} "
            f"nextLeaderEpoch={d['nextLeaderEpoch']}",
            f"quorum: leader={who(quorum['leader'])} epoch={quorum['leaderEpoch']} "
            f"isr={isr(quorum['isr'])}",
            "requests: " + (" ".join(
                f"e{r['leaderEpoch']}:{who(r['leader'])}{isr(r['isr'])}"
                for r in d["leaderAndIsrRequests"]) or "-"),
        ]
        rows = [("replica", "leader", "epoch", "hw", "end", "isr", "log")]
        for r, (st, lg) in enumerate(zip(d["replicaState"], d["replicaLog"], strict=True)):
            log = " ".join(f"{rec['id']}@e{rec['epoch']}" for rec in lg["records"]
                           if rec != NIL) or "-"
            rows.append((str(r), who(st["leader"]), str(st["leaderEpoch"]), str(st["hw"]),
                         str(lg["endOffset"]), isr(st["isr"]), log))
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            lines.append("  ".join(c.ljust(wd) for c, wd in zip(row, widths, strict=True))
                         .rstrip())
        return "\n".join(lines)

    # -- invariants off the hot path ------------------------------------------------------------

    def _isr_detail(self, leader: int, hw: int, mask: int, strong: bool) -> str:
        which = "quorum ISR" if strong else "its ISR"
        members = ",".join(str(r) for r in sorted(self.layout.members(mask)))
        return (f"replica {leader} presumes leadership with hw {hw} but {which} member(s) "
                f"{{{members}}} do not hold the same records below it")

    def _leader_in_isr(self, state) -> str | None:
        """LeaderInIsr: the quorum leader is a member of the quorum ISR."""
        q = self.decode(state).quorumState
        if q.leader in q.isr:
            return None
        return f"quorum leader {q.leader} is not in the quorum ISR {sorted(q.isr)}"

    def _type_ok(self, state) -> str | None:
        """TypeOk: every variable is in its TLA+ type (true in every reachable state)."""
        lay = self.layout
        try:
            v = lay.decode(state)
            if lay.encode(v) != tuple(state):
                return "the state is not a canonical encoding"
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return f"the state does not decode: {exc}"
        replicas = set(range(lay.n))
        records = set(self.reference.LogRecords)
        epochs = set(range(lay.NE))
        if not 0 <= v.nextRecordId <= lay.R:
            return f"nextRecordId {v.nextRecordId} out of range"
        if not 0 <= v.nextLeaderEpoch <= lay.NE:
            return f"nextLeaderEpoch {v.nextLeaderEpoch} out of range"
        for r, ((end, recs), rs) in enumerate(zip(v.replicaLog, v.replicaState, strict=True)):
            if not 0 <= end <= lay.L or any(x not in records for x in recs[:end]):
                return f"replicaLog[{r}] is not a log of LogRecords"
            if not (0 <= rs.hw <= lay.L and (rs.leaderEpoch in epochs or rs.leaderEpoch == NIL)
                    and (rs.leader in replicas or rs.leader == NONE) and rs.isr <= replicas):
                return f"replicaState[{r}] is not a ReplicaState"
        for q in (v.quorumState, *v.leaderAndIsrRequests):
            if not ((q.leaderEpoch in epochs or q.leaderEpoch == NIL)
                    and (q.leader in replicas or q.leader == NONE) and q.isr <= replicas):
                return "quorumState or a request is not a QuorumState"
        return None
