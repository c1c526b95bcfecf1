"""Bounded model checking and inductive proofs over the Z3 encoding (`model_check.prove.symbolic`).

Theory of operation.
- BMC unrolls the transition relation from the initial state one step at a time and, at each
  depth d = 0..K, asks Z3 for a state at depth d that violates one of the chosen invariants.
  Depths are tried in order, so the first violation found is a shortest one. Its model is
  decoded into the explorer's trace format (`{action, args, state}` per step) and replayed
  through `spec.step`, which must produce the same states: a trace that does not replay is an
  encoding bug and raises. BMC runs in bounded mode (the config's `max.*` guards apply) so
  that every trace is a run of the spec under that config; there every integer is bounded
  (`int_range`), so the formula is translated exactly to bit-vectors (`_BitVectors`) and asked
  of one incremental SAT-based solver for every depth, and runs are kept in a normal form over
  commuting actions (`independent_pairs`, `_normal_form`).
- Induction checks, for the conjunction Inv of the chosen invariants and lemmas, that
  Init => Inv and, one query per action instance, Inv /\\ T => Inv' (in unbounded mode: no
  exploration bound, so the proof covers every offset and epoch). Inv's quantifier over its
  witness is instantiated at a few terms and refined from models (`_refine`), so every query
  is quantifier-free. A failing query gives a counterexample to induction (CTI): pre-state,
  action, post-state, with a pre-state checked to satisfy Inv at every witness.
- A CTI is classified with the explorer, under the same config and its bounds: `reachable`
  when some reachable state violates the invariant (it is simply false; the shortest such
  run's last step is reported as a CTI whose pre-state is reachable), `unreachable` when the
  complete search finds none (the CTI's pre-state cannot be reachable within those bounds:
  the invariant needs strengthening). The second verdict holds for the config's bounds, and
  the output says so.

Every query is timed; results are frozen dataclasses that `to_json` turns into the `--json`
object of `isrlab prove`.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

import z3

from model_check.explore.model import state_to_json
from model_check.explore.progress import die_with_parent
from model_check.prove import symbolic as sym
from spec import Config, initial_state, step
from spec.actions import ACTIONS_BY_NAME
from spec.invariants import INVARIANTS
from spec.state import Cluster

# The invariants `isrlab prove --induction` targets by default.
TARGETS = ("NoCommittedDataLoss", "LogMatching", "HighWatermarkBelowLogEnd")


class ReplayMismatch(AssertionError):
    """A decoded trace does not replay through spec.step: the encoding and the spec differ."""


@dataclass(frozen=True)
class Query:
    """One solver call: what was asked, what Z3 answered, how long it took."""

    name: str
    answer: str  # sat | unsat | unknown
    seconds: float


@dataclass(frozen=True)
class Step:
    """One trace entry: the action (None for the initial state), its arguments, the state."""

    action: str | None
    args: dict
    state: Cluster


@dataclass(frozen=True)
class Cti:
    """A counterexample to induction and its classification."""

    action: str
    args: dict
    pre: Cluster
    post: Cluster
    violated: tuple[str, ...]  # which of the invariants the post-state breaks
    classification: str = "unclassified"  # reachable | unreachable
    evidence: str = ""
    trace: tuple[Step, ...] = ()  # for `reachable`: a run from the initial state
    bounds: dict[str, int] = field(default_factory=dict)  # where the explorer searched


@dataclass(frozen=True)
class ActionVerdict:
    """Induction for one action instance: `inductive` (Inv /\\ T_a => Inv' holds), `cti`
    (with the goal invariants the post-state breaks), or `unknown` (solver gave up)."""

    action: str  # e.g. "BecomeLeader[0]": the spec action and the brokers it is built for
    verdict: str
    violated: tuple[str, ...] = ()


@dataclass(frozen=True)
class Outcome:
    """The result of `isrlab prove`: proved | violation | cti | unknown (a BMC run that
    finds nothing is `proved` here but printed as "ok": no violation within `depth` steps)."""

    result: str
    mode: str  # bmc | induction
    invariants: tuple[str, ...]
    queries: tuple[Query, ...] = ()
    depth: int | None = None
    invariant: str | None = None  # the violated invariant (BMC)
    trace: tuple[Step, ...] = ()
    cti: Cti | None = None
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)
    actions: tuple[ActionVerdict, ...] = ()  # induction: one verdict per action instance
    # induction with inferred lemmas: (name, kind: target | hand | inferred, verdict) each
    formulas: tuple[tuple[str, str, str], ...] = ()


def solver_within(limit_ms: int) -> z3.Solver:
    """A solver whose checks give up (`unknown`) after about `limit_ms` of work, counted in
    Z3's resource units (`rlimit`, `RLIMIT_PER_MS` per millisecond), not in wall time: a query
    gets the same answer on a fast machine and a loaded one, so a verdict does not depend on
    what else the machine was doing. A wall-clock limit `WALL_BACKSTOP` times longer (30 s
    at least) stops work that Z3 does not count."""
    solver = z3.Solver()
    solver.set("rlimit", limit_ms * RLIMIT_PER_MS)
    solver.set("timeout", max(limit_ms * WALL_BACKSTOP, 30_000))
    return solver


# Z3 counted 3.2-6.6 million units a second on this project's machine at 2 brokers and
# 2.1-4.2 million at 3 (the queries of an induction, 2026-11-29): at 4,000 a millisecond a
# limit lasts 0.6-1.25 of the time it names at 2 brokers and 1-1.9 of it at 3. Less cut off
# LeaderAppend's first queries at 3 brokers, which need 31-34 million to come out unsat.
RLIMIT_PER_MS = 4_000
WALL_BACKSTOP = 5


def _check(solver: z3.Solver, name: str, queries: list[Query]) -> z3.CheckSatResult:
    start = time.perf_counter()
    answer = solver.check()
    queries.append(Query(name, str(answer), time.perf_counter() - start))
    return answer


# ------------------------------------------------------------------------------------------
# BMC


def _step_relation(shape: sym.Shape, table, pre: sym.SState, post: sym.SState,
                   a: sym.StepArgs, selector: z3.ArithRef) -> z3.BoolRef:
    """T(pre, post) for any action: `selector` picks the instance.

    Built per field: post.f == If(selector == i, succ_i.f, ...) over the instances that change
    f, else pre.f. Far smaller than a disjunction of whole-state equations.
    """
    guards = []
    leaves_pre = sym.leaves_of(pre)
    chains = list(leaves_pre)
    for i, inst in enumerate(table):
        guard, succ = inst.build(shape, pre, a)
        guards.append(sym.And(selector == i, guard))
        for j, leaf in enumerate(sym.leaves_of(succ)):
            leaf = sym.as_term(leaf)
            if not leaf.eq(leaves_pre[j]):
                chains[j] = z3.If(selector == i, leaf, chains[j])
    frame = [sym.as_term(p) == c for p, c in zip(sym.leaves_of(post), chains, strict=True)]
    return sym.And(sym.Or(guards), *frame)


def _violation_any(shape: sym.Shape, names, s: sym.SState, w) -> z3.BoolRef:
    return sym.Or([sym.VIOLATIONS[n](shape, s, w) for n in names])


class _BitVectors:
    """The BMC formula's integer terms as signed bit-vectors, for an incremental SAT-based
    solver (Z3's QF_BV solver keeps what it learnt at one depth for the next).

    The translation is exact when no integer term can leave its bit-vector's range. Every
    integer variable the formula mentions lies in a range its own constraints assert (`bounds`,
    by name: `_leaf_range`), so each term's interval follows from its
    operands' (+, -, If), and each term gets the narrowest signed width that holds its interval:
    a broker id needs 2 bits where an error code needs 8, and the SAT core sees a circuit that
    small. Operands are sign-extended to a comparison's wider side; a sum is computed at its
    own width (two's complement arithmetic is exact modulo 2^w, and the true sum fits). No
    term may need more than `width` bits: one that might raises instead of wrapping around.
    A variable `choices` names (a step's selector) is one Boolean per choice instead: `sel == k`
    becomes the k-th. BMC translates one step and one violation and renames them per depth: a
    renaming maps each variable to one with the same range, so the widths and intervals hold at
    every depth.
    """

    def __init__(self, width: int, bounds: Callable[[str], tuple[int, int]],
                 choices: Callable[[str], int | None] = lambda name: None):
        self.width, self.bounds, self.choices = width, bounds, choices
        self.top = (1 << (width - 1)) - 1
        self.memo: dict[int, tuple] = {}  # term id -> (term: keeps the id alive, bv, interval)
        self.vars: dict[str, z3.ExprRef] = {}  # a variable's name -> its translation

    @classmethod
    def fitting(cls, formulas: list, bounds: Callable[[str], tuple[int, int]],
                choices: Callable[[str], int | None] = lambda name: None) -> _BitVectors:
        """A translation whose `width` is the widest term of `formulas` needs."""
        probe = cls(64, bounds, choices)
        for f in formulas:
            probe.intervals(f)
        widest = max(_signed_width(m[2]) for m in probe.memo.values() if m[2] is not None)
        fitted = cls(widest, bounds, choices)
        fitted.memo = probe.memo  # the intervals stay valid; the translations follow
        return fitted

    def intervals(self, e) -> None:
        """Fill the memo with `e`'s subterms' intervals only (no translation)."""
        self._walk(e, build=False)

    def __call__(self, e):
        return self._walk(e, build=True)[1]

    def _walk(self, e, build: bool):
        memo = self.memo
        stack = [(e, False)]

        def done(x) -> bool:
            entry = memo.get(x.get_id())
            return entry is not None and (entry[1] is not None or not build)

        while stack:
            x, ready = stack.pop()
            if done(x):
                continue
            if not ready:
                stack.append((x, True))
                stack.extend((c, False) for c in x.children() if not done(c))
                continue
            parts = [memo[c.get_id()] for c in x.children()]
            interval = self._interval(x, [p[2] for p in parts])
            if interval is not None and not -self.top - 1 <= interval[0] <= interval[1] <= self.top:
                raise ValueError(f"BMC: {x} may leave the {self.width}-bit range")
            memo[x.get_id()] = (x, self._build(x, parts, interval) if build else None, interval)
        return memo[e.get_id()]

    def _interval(self, x, inner: list) -> tuple[int, int] | None:
        if not z3.is_int(x):
            return None
        if z3.is_int_value(x):
            return x.as_long(), x.as_long()
        kind = x.decl().kind()
        if kind == z3.Z3_OP_UNINTERPRETED:
            return self.bounds(x.decl().name())
        if kind == z3.Z3_OP_ADD:
            return sum(i[0] for i in inner), sum(i[1] for i in inner)
        if kind == z3.Z3_OP_SUB:
            first, rest = inner[0], inner[1:]
            return first[0] - sum(i[1] for i in rest), first[1] - sum(i[0] for i in rest)
        if kind == z3.Z3_OP_UMINUS:
            return -inner[0][1], -inner[0][0]
        if kind == z3.Z3_OP_ITE:
            return min(inner[1][0], inner[2][0]), max(inner[1][1], inner[2][1])
        raise ValueError(f"BMC: no bit-vector translation for {x.decl()}")

    def _build(self, x, parts: list, interval):
        kind = x.decl().kind()
        width = None if interval is None else _signed_width(interval)
        if z3.is_int_value(x):
            return z3.BitVecVal(x.as_long(), width)
        if kind == z3.Z3_OP_UNINTERPRETED:
            name = x.decl().name()
            if self.choices(name) is not None:
                return _SELECTOR  # only `sel == k` and `sel != k` read it (its Booleans)
            if name not in self.vars:
                self.vars[name] = z3.BitVec(name, width) if z3.is_int(x) else x
            return self.vars[name]
        if kind in (z3.Z3_OP_TRUE, z3.Z3_OP_FALSE):
            return x
        if kind in (z3.Z3_OP_EQ, z3.Z3_OP_DISTINCT) and len(parts) == 2:
            chosen = self._choice(x)
            if chosen is not None:
                return chosen if kind == z3.Z3_OP_EQ else z3.Not(chosen)
        build = _BUILDERS.get(kind)
        if build is None:
            raise ValueError(f"BMC: no bit-vector translation for {x.decl()}")
        a = [p[1] for p in parts]
        if any(v is _SELECTOR for v in a):
            # A bit-vector for the selector would be free of its Booleans: unsound, so refused.
            raise ValueError(f"BMC: a selector outside `sel == k`: {x}")
        if kind in _ARITHMETIC:
            a = [_resized(v, width) for v in a]  # modulo 2^width: exact, the result fits
        elif kind == z3.Z3_OP_ITE and width is not None:
            a = [a[0], _resized(a[1], width), _resized(a[2], width)]
        elif parts and parts[0][2] is not None:  # a comparison of integers
            common = max(v.size() for v in a)
            a = [_resized(v, common) for v in a]
        return build(*a)

    def _choice(self, x):
        """`sel == k` (or `sel != k`) for a variable `choices` names (a step's selector): its
        k-th Boolean, one per choice (exactly one of them holds, asserted by the caller)."""
        left, right = x.children()
        if z3.is_int_value(left):
            left, right = right, left
        if not (z3.is_int_value(right) and z3.is_const(left) and not z3.is_int_value(left)):
            return None
        name = left.decl().name()
        count = self.choices(name)
        if count is None:
            return None
        k = right.as_long()
        return choice(name, k) if 0 <= k < count else z3.BoolVal(False)


_SELECTOR = object()  # a selector's translation on its own: only its comparisons have one


def choice(name: str, k: int) -> z3.BoolRef:
    """The Boolean saying that selector `name` picks choice k."""
    return z3.Bool(f"{name}={k}")


def _signed_width(interval: tuple[int, int]) -> int:
    """The fewest bits of a signed bit-vector that holds every value of `interval`."""
    low, high = interval
    return max((-low - 1).bit_length() if low < 0 else 0, high.bit_length() if high > 0 else 0) + 1


def _resized(v, width: int):
    """`v` sign-extended to `width` bits, or cut to its low `width` bits (used only where the
    value is needed modulo 2^width)."""
    size = v.size()
    if size < width:
        return z3.SignExt(width - size, v)
    if size > width:
        return z3.Extract(width - 1, 0, v)
    return v


_ARITHMETIC = frozenset({z3.Z3_OP_ADD, z3.Z3_OP_SUB, z3.Z3_OP_UMINUS})
# Signed comparisons (z3's <, <= on bit-vectors are signed).
_BUILDERS = {
    z3.Z3_OP_ADD: lambda *xs: functools.reduce(operator.add, xs),
    z3.Z3_OP_SUB: lambda *xs: functools.reduce(operator.sub, xs),
    z3.Z3_OP_UMINUS: operator.neg,
    z3.Z3_OP_LT: lambda x, y: x < y,
    z3.Z3_OP_LE: lambda x, y: x <= y,
    z3.Z3_OP_GT: lambda x, y: x > y,
    z3.Z3_OP_GE: lambda x, y: x >= y,
    z3.Z3_OP_EQ: lambda x, y: x == y,
    z3.Z3_OP_DISTINCT: z3.Distinct,
    z3.Z3_OP_ITE: z3.If,
    z3.Z3_OP_AND: z3.And,
    z3.Z3_OP_OR: z3.Or,
    z3.Z3_OP_NOT: z3.Not,
    z3.Z3_OP_IMPLIES: z3.Implies,
}


class _IntModel:
    """A bit-vector model read through the integer terms it was translated from (what
    `sym.decode` and `_decode_trace` ask)."""

    def __init__(self, model: z3.ModelRef, to_bv: _BitVectors):
        self.model, self.to_bv = model, to_bv

    def eval(self, x, model_completion: bool = True):
        count = self.to_bv.choices(x.decl().name()) if z3.is_const(x) else None
        if count is not None:  # a selector: the choice its Booleans make
            return z3.IntVal(next(k for k in range(count) if z3.is_true(self.model.eval(
                choice(x.decl().name(), k), model_completion=True))))
        value = self.model.eval(self.to_bv(x), model_completion=model_completion)
        return z3.IntVal(value.as_signed_long()) if z3.is_bv_value(value) else value


def int_range(config: Config, depth: int) -> tuple[int, int]:
    """Bounds that hold for every integer of every state within `depth` steps (bounded mode).

    Every field starts at -1, 0 or 1; counters and epochs (leader, partition and broker
    epochs, ticks, drops, crashes, expiries, the next value) grow by at most one per step;
    offsets, HWs, record values and lag are capped by the config's bounds (a log holds each
    value once); a fetch slot's kind is < 7 and its error code is bounded apart. So
    `depth + max(caps) + 2` is an upper bound, rounded up to a power of two minus one (the
    bits are there anyway); -1 (unknown, no leader) is the least value.
    The bounds are what make the bit-vector translation exact, not an approximation.
    """
    c = config
    caps = (c.max_records + 1, c.max_leader_epochs, c.max_partition_epoch,
            c.replica_lag_time_max_ticks + 1, c.max_ticks, c.max_message_drops,
            c.max_crashes, c.max_session_expiries, sym.RESP_ERROR)
    top = depth + max(caps) + 2
    return -1, (1 << top.bit_length()) - 1


# The kinds of the integer fields of a state (`sym.fresh_state`) and of a step's arguments
# (`sym.StepArgs`), by the field's name without prefix, array index or slot number: each kind
# holds values from a range of its own (`_leaf_range`). An argument has the kind of the fields
# it is compared with or written to; no name means two kinds.
_FIELD_KINDS = {
    **dict.fromkeys(("c_leader", "leader", "hist_leader", "produce"), "broker"),
    **dict.fromkeys(("log_len", "hw", "flushed", "cache_start", "remote_leo", "fetch_offset",
                     "high_watermark", "end_offset", "rec_count", "value_offset"), "offset"),
    **dict.fromkeys(("log_value", "rec_value", "purgatory_value", "next_value"), "value"),
    **dict.fromkeys(("c_epoch", "c_run", "leader_epoch", "cache_epoch", "log_epoch", "rec_epoch",
                     "hist_epoch", "last_fetched_epoch", "current_leader_epoch", "epoch"),
                    "leader_epoch"),
    **dict.fromkeys(("c_pe", "partition_epoch"), "partition_epoch"),
    **dict.fromkeys(("broker_epoch", "registered", "remote_be"), "broker_epoch"),
    "crashes": "crashes", "expiries": "expiries", "drops": "drops", "ticks": "ticks",
    "unclean": "unclean", "lag": "lag", "kind": "kind", "error": "error",
    "cache_len": "cache_len",
    # arguments only
    "value": "value", "offset": "offset", "witness": "offset", "boundary": "offset",
    "boundary_count": "cache_len",
}
_FIELD = re.compile(r"(\[[^]]*\]|\d+)$")


def kind_ranges(shape: sym.Shape, low: int, high: int) -> dict[str, tuple[int, int]]:
    """The range of each kind of state field in bounded mode, within [low, high].

    - A broker id is one of the brokers, or -1 (no leader, no request).
    - A log holds each value once and values are 1..max.records, so offsets, lengths and HWs
      are at most max.records; the next value is max.records + 1 at most.
    - Leader epochs stay below max.leader.epochs (the controller's guards); partition epochs
      below the shape's count of them (see `Shape.cells`).
    - A broker's epoch starts at 0 and grows at each registration after a failure, and every
      failure is a crash or a session expiry; -1 is "unknown" or "not registered".
    - The counters stop at their bounds; lag at replica.lag.time.max.ticks + 1; unclean
      elections each start a leader epoch; a fetch slot's kind is < 7 and its error one of the
      encoding's codes; an epoch cache has at most its slots.
    A step's arguments take the kinds of the fields they stand for (`_FIELD_KINDS`). A test
    checks every state the explorer reaches at small bounds against these ranges, and the
    differential test every transition it draws, arguments included."""
    c = shape.config
    raw = {
        "broker": (-1, shape.n - 1), "offset": (-1, c.max_records),
        "value": (-1, c.max_records + 1), "leader_epoch": (-1, c.max_leader_epochs - 1),
        "partition_epoch": (-1, shape.cells("pe") - 1),
        "broker_epoch": (-1, c.max_crashes + c.max_session_expiries),
        "crashes": (0, c.max_crashes),
        "expiries": (0, c.max_session_expiries), "drops": (0, c.max_message_drops),
        "ticks": (0, c.max_ticks), "unclean": (0, c.max_leader_epochs),
        "lag": (-1, c.replica_lag_time_max_ticks + 1), "kind": (0, 6),
        "cache_len": (0, shape.cache_slots),
    }
    out = {kind: (max(lo, low), min(hi, high)) for kind, (lo, hi) in raw.items()}
    out["error"] = (0, max(sym.ERRORS.values()))  # Kafka's codes, not quantities: not clipped
    return out


def _leaf_range(name: str, kinds: dict[str, tuple[int, int]], low: int,
                high: int) -> tuple[int, int]:
    """The range BMC asserts for an integer variable: its kind's (`kind_ranges`) for a field of
    a state or a step's arguments (`<prefix>.<field>`), [low, high] for anything else."""
    kind = _FIELD_KINDS.get(_FIELD.sub("", name.rsplit(".", 1)[-1])) if "." in name else None
    return kinds[kind] if kind is not None else (low, high)


def _int_bounds(x, kinds: dict[str, tuple[int, int]], low: int, high: int) -> list[z3.BoolRef]:
    """Every integer leaf of `x` within its `_leaf_range`."""
    out = []
    for leaf in sym.leaves_of(x):
        if z3.is_int(leaf) and not z3.is_int_value(leaf):
            lo, hi = _leaf_range(str(leaf), kinds, low, high)
            out.append(sym.And(lo <= leaf, leaf <= hi))
    return out


def independent_pairs(shape: sym.Shape, table) -> frozenset[tuple[int, int]]:
    """Pairs (i, j), i < j, of action instances that commute: neither writes a field the other
    reads or writes (reads: the fields in its guard and in the new values it computes).

    Two adjacent independent steps can be swapped without changing the states after them, so
    runs that differ only by such swaps end in the same state. BMC keeps one run per class
    (`_normal_form`), so no shortest violation is lost and far fewer interleavings remain.
    """
    pre, a = sym.fresh_state(shape, "por."), sym.fresh_args(shape, "por_a.")
    leaves = [sym.as_term(x) for x in sym.leaves_of(pre)]
    reads, writes = [], []
    for inst in table:
        guard, succ = inst.build(shape, pre, a)
        seen: set[int] = set()
        r: set[str] = set()
        _constants(guard, seen, r)
        w: set[str] = set()
        for old, new in zip(leaves, sym.leaves_of(succ), strict=True):
            new = sym.as_term(new)
            if not new.eq(old):
                w.add(str(old))
                _constants(new, seen, r)
        reads.append(r)
        writes.append(w)
    return frozenset((i, j) for i in range(len(table)) for j in range(i + 1, len(table))
                     if not writes[i] & (reads[j] | writes[j]) and not writes[j] & reads[i])


def _constants(e: z3.ExprRef, seen: set[int], out: set[str]) -> None:
    """The names of the uninterpreted constants in `e` (`seen`: term ids already visited)."""
    out.update(str(x) for x in sym.subterms(e, seen)
               if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED)


def _normal_form(pairs: frozenset[tuple[int, int]], count: int, selectors: list) -> list:
    """Constraints that the last selector keeps the run in lexicographic normal form.

    A run is in that form when no step i comes after a step j > i such that i commutes with j
    and with every step between them (i could be moved in front of j, giving a smaller run).
    Each class of runs equal up to swapping independent neighbours has exactly one such run
    (Anisimov and Knuth's characterisation of lexicographic normal forms of traces), with the
    same length and last state. Called once per new step, about the new last one.
    """
    commutes = {i: set() for i in range(count)}
    for i, j in pairs:
        commutes[i].add(j)
        commutes[j].add(i)
    last, earlier = selectors[-1], selectors[:-1]
    out = []
    for i in range(count):
        larger = sorted(j for j in commutes[i] if j > i)
        if not larger:
            continue
        # Walk back from the new step while every step commutes with i; none may be larger.
        free = z3.BoolVal(True)
        for p in range(len(earlier) - 1, -1, -1):
            sel = earlier[p]
            out.append(z3.Implies(sym.And(last == i, free), sym.And([sel != j for j in larger])))
            free = sym.And(free, sym.Or([sel == j for j in sorted(commutes[i])]))
    return out


class _Unrolling:
    """The BMC formula for one config and bound: initial state, steps, normal form, bounds,
    in one incremental bit-vector solver.

    `ask(d)` asks whether a state at depth d breaks an invariant. Steps only accumulate and
    depth d's violation is asked under an assumption, so one solver serves every depth and
    what it learnt about the first steps at one depth serves the next (B1's figures before
    and after: docs/prove.md). The shape and integer range depend on the
    bound `depth`, not on d, so every process asks the same formula for a given d.
    """

    def __init__(self, config: Config, depth: int, names: tuple[str, ...]):
        self.config = config
        # The partition epoch starts at 0 and grows by at most one per step (see int_range).
        self.shape = sym.make_shape(config, bounded=True, pe_limit=depth)
        self.table = sym.action_table(self.shape)
        self.low, self.high = int_range(config, depth)
        self.kinds = kind_ranges(self.shape, self.low, self.high)
        self.pairs = independent_pairs(self.shape, self.table)
        self.states = [sym.fresh_state(self.shape, "s0.")]
        self.selectors: list = []
        self.args: list = []
        start = [sym.initial(self.shape, self.states[0]),
                 *_int_bounds(self.states[0], self.kinds, self.low, self.high)]
        # A step and a violation are built once over placeholder variables, translated once,
        # and renamed per depth (Z3's substitute): building and translating them from the
        # action table per step was most of a small run's time.
        pre, post = sym.fresh_state(self.shape, "t."), sym.fresh_state(self.shape, "t'.")
        a, sel = sym.fresh_args(self.shape, "ta."), z3.Int("t_act")
        w, broken = z3.Int("t_w"), z3.Bool("t_violation")
        # The selector is one Boolean per action instance (`_choices`), exactly one true: the
        # step's `sel == i` tests become single literals for the SAT core.
        step = sym.And(_step_relation(self.shape, self.table, pre, post, a, sel),
                      *_int_bounds(post, self.kinds, self.low, self.high),
                      *_int_bounds(a, self.kinds, self.low, self.high))
        violation = z3.Implies(broken, sym.And(self.low <= w, w <= self.high,
                                              _violation_any(self.shape, names, post, w)))
        self.to_bv = _BitVectors.fitting([*start, step, violation], self._bounds, self._choices)
        self.step_vars = [*self._bv(pre, post, a), *self._one_hot("t_act")]
        self.step = sym.And(self.to_bv(step), z3.PbEq([(b, 1) for b in self._one_hot("t_act")], 1))
        self.violation_vars = [self.to_bv(v) for v in _variables(post, w, broken)]
        self.violation = self.to_bv(violation)
        self.solver = z3.SolverFor("QF_BV")
        # Asymmetric covered clause elimination between restarts: B1 about 8% faster on the
        # mean of a few runs (docs/prove.md).
        self.solver.set("acce", True)
        self.solver.add(*(self.to_bv(c) for c in start))

    def _extend(self) -> None:
        d, shape = len(self.selectors), self.shape
        nxt = sym.fresh_state(shape, f"s{d + 1}.")
        a = sym.fresh_args(shape, f"a{d}.")
        sel = z3.Int(f"act{d}")
        renaming = zip(self.step_vars, [*self._bv(self.states[d], nxt, a),
                                        *self._one_hot(f"act{d}")], strict=True)
        # Added as separate constraints: one And per step made the deeper queries slower.
        self.solver.add(*z3.substitute(self.step, *renaming).children())
        self.states.append(nxt)
        self.selectors.append(sel)
        self.args.append(a)
        self.solver.add(*(self.to_bv(c) for c in _normal_form(self.pairs, len(self.table),
                                                                self.selectors)))

    def _choices(self, name: str) -> int | None:
        """How many choices a selector has (None: not a selector)."""
        return len(self.table) if name == "t_act" or name.startswith("act") else None

    def _one_hot(self, name: str) -> list:
        return [choice(name, k) for k in range(len(self.table))]

    def _bounds(self, name: str) -> tuple[int, int]:
        """The range a variable's own constraints assert: a selector picks one of its choices
        (exactly one of its Booleans holds), every other integer has its `_leaf_range`."""
        count = self._choices(name)
        if count is not None:
            return 0, count - 1
        return _leaf_range(name, self.kinds, self.low, self.high)

    def _bv(self, *parts) -> list:
        return [self.to_bv(v) for v in _variables(*parts)]

    def ask(self, d: int) -> tuple[str, float, tuple[Step, ...], str]:
        """(answer, seconds, replayed trace when sat, reason when unknown)."""
        while len(self.selectors) < d:
            self._extend()
        broken = z3.Bool(f"violation{d}")
        renaming = zip(self.violation_vars,
                       self._bv(self.states[d], z3.Int(f"w{d}"), broken), strict=True)
        self.solver.add(z3.substitute(self.violation, *renaming))
        started = time.perf_counter()
        answer = self.solver.check(broken)
        seconds = time.perf_counter() - started
        if answer == z3.sat:
            model = _IntModel(self.solver.model(), self.to_bv)
            trace = _decode_trace(self.shape, self.table, model, self.states[:d + 1],
                                  self.selectors[:d], self.args[:d])
            return "sat", seconds, tuple(replay(self.config, trace)), ""
        reason = self.solver.reason_unknown() if answer == z3.unknown else ""
        return str(answer), seconds, (), reason


def _variables(*parts) -> list:
    """The variables of states, step arguments and selectors, in one fixed order."""
    return [leaf for part in parts for leaf in sym.leaves_of(part) if z3.is_const(leaf)
            and not z3.is_int_value(leaf) and not z3.is_true(leaf) and not z3.is_false(leaf)]


def _ask_depth(config: Config, depth: int, names: tuple[str, ...], d: int):
    """One depth's query in a worker process (it builds its own formula)."""
    return _Unrolling(config, depth, names).ask(d)


def bmc(config: Config, depth: int, invariants: list[str] | None = None,
        workers: int = 1, progress: Callable[..., None] | None = None) -> Outcome:
    """Search for an invariant violation within `depth` steps (shortest first).
    `progress(depths_asked, depth=d, answer=...)` is called after each depth's answer.

    With `workers` > 1 the depths are asked in parallel processes, in order, and the answers
    are read in depth order: a violation is reported only once every smaller depth is unsat,
    so the verdict and depth are the same as with one worker (the trace is a shortest run that
    replays; the solver may pick another one of the same length).
    """
    # SingleControllerPerEpoch is not encoded (one controller here): BMC checks the rest.
    names = tuple(invariants or (n for n in INVARIANTS if n in sym.VIOLATIONS))
    start = time.perf_counter()
    queries: list[Query] = []
    if workers > 1:
        answers = _parallel_answers(config, depth, names, workers)
    else:
        unrolling = _Unrolling(config, depth, names)
        answers = (unrolling.ask(d) for d in range(depth + 1))
    try:
        for d, (answer, seconds, trace, reason) in enumerate(answers):
            queries.append(Query(f"depth {d}", answer, seconds))
            if progress is not None:
                progress(d + 1, depth=d, answer=answer)
            if answer == "sat":
                violated = [n for n in names if INVARIANTS[n](config, trace[-1].state)]
                return Outcome("violation", "bmc", names, tuple(queries), d,
                               violated[0] if violated else None, trace,
                               seconds=time.perf_counter() - start)
            if answer == "unknown":
                return Outcome("unknown", "bmc", names, tuple(queries), d,
                               seconds=time.perf_counter() - start,
                               notes=(f"solver: {reason}",))
    finally:
        if workers > 1:
            answers.close()  # stops the pool's deeper queries
    return Outcome("proved", "bmc", names, tuple(queries), depth,
                   seconds=time.perf_counter() - start,
                   notes=(f"no violation within {depth} steps",))


def _parallel_answers(config: Config, depth: int, names: tuple[str, ...], workers: int):
    """Each depth's answer, in depth order, from a pool of processes (stopped when the
    caller stops reading: a sat or unknown answer makes the deeper queries moot)."""
    import multiprocessing

    # spawn: a forked child would share the parent's Z3 state.
    import os


    pool = multiprocessing.get_context("spawn").Pool(
        workers, initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        pending = [pool.apply_async(_ask_depth, (config, depth, names, d))
                   for d in range(depth + 1)]
        for result in pending:
            yield result.get()
    finally:
        pool.terminate()
        pool.join()


def _decode_trace(shape, table, model, states, selectors, args) -> list[Step]:
    out = [Step(None, {}, sym.decode(shape, model, states[0]))]
    for d, sel in enumerate(selectors):
        inst = table[model.eval(sel, model_completion=True).as_long()]
        out.append(Step(inst.name, sym.spec_args(inst, model, args[d]),
                        sym.decode(shape, model, states[d + 1])))
    return out


def replay(config: Config, trace: list[Step]) -> list[Step]:
    """Fold spec.step over the trace's actions; every state must equal the decoded one.

    Returns the trace with the spec's own states (equal to the decoded ones)."""
    state = initial_state(config)
    if trace[0].state != state:
        raise ReplayMismatch("decoded initial state differs from spec.initial_state")
    out = [Step(None, {}, state)]
    for number, item in enumerate(trace[1:], start=1):
        state = step(config, state, ACTIONS_BY_NAME[item.action](**item.args))
        if state != item.state:
            raise ReplayMismatch(f"step {number} ({item.action} {item.args}): the spec's "
                                 f"state differs from the decoded one")
        out.append(Step(item.action, item.args, state))
    return out


# ------------------------------------------------------------------------------------------
# Induction


def induction(config: Config, invariants: list[str], lemmas: list[str] | None = None,
              classify: bool = True, classify_states: int = 500_000,
              cache_slots: int = 3, timeout_ms: int = 60_000,
              only: Collection[str] | None = None,
              progress: Callable[..., None] | None = None) -> Outcome:
    """Init => Inv and Inv /\\ T => Inv' for Inv = invariants + lemmas (unbounded mode).

    The goal is the invariants and lemmas together (a lemma must itself be inductive relative
    to the rest). The first failing query gives the CTI. `timeout_ms` limits each query in
    Z3's work, not in wall time (`solver_within`). `only` asks just these action instances
    (a name, or a label such as "LeaderHandleFetch[0, 1]"): the answer is then never
    `proved`, at best `partial`.
    `progress(instances_asked, action=label)` is called as each action instance is asked.
    """
    from model_check.prove.lemmas import LEMMAS

    lemmas = list(lemmas or [])
    goal = list(invariants) + lemmas
    table_inv = {**sym.VIOLATIONS, **LEMMAS}
    shape = sym.make_shape(config, bounded=False, cache_slots=cache_slots)
    table = sym.action_table(shape)
    if only is not None:
        table = [i for i in table if i.name in only or _label(i) in only]
        if not table:
            raise ValueError(f"no action instance named {sorted(only)}")
    start = time.perf_counter()
    queries: list[Query] = []

    def broken(s: sym.SState, w) -> z3.BoolRef:
        return sym.Or([violation(table_inv[n], shape, s, w) for n in goal])

    pre, post = sym.fresh_state(shape, "pre."), sym.fresh_state(shape, "post.")
    a = sym.fresh_args(shape, "a.")
    w = z3.Int("cti_w")
    solver = solver_within(timeout_ms)
    solver.add(sym.initial(shape, pre), broken(pre, w))
    answer = _check(solver, "initiation", queries)
    if answer != z3.unsat:
        return Outcome("unknown" if answer == z3.unknown else "violation", "induction",
                       tuple(goal), tuple(queries), seconds=time.perf_counter() - start,
                       notes=("the initial state breaks the invariant",))
    # Every action instance is checked, not just up to the first CTI: the per-action table
    # says exactly which steps the invariant (with its lemmas) is already inductive for.
    verdicts: list[ActionVerdict] = []
    undecodable: list[str] = []
    cti = None
    base_terms = instance_terms(pre, a, w)
    memo: dict = {}
    with_cti: set[str] = set()  # actions one of whose instances has a CTI
    for asked, inst in enumerate(table):
        label = _label(inst)
        if progress is not None:
            progress(asked, action=label)
        step_terms = base_terms + _step_terms(inst, pre, a)
        small_args = (config, label, invariants, goal, cache_slots, timeout_ms, queries,
                      (shape, inst, pre, post, a, w, goal, table_inv, timeout_ms, queries, label))
        # Another instance of this action has a CTI, so this one most likely has too: the
        # small search finds it in seconds, where the first query below would mostly run to
        # its limit (LeaderHandleFetch at 3 brokers: 10-19 s each).
        sibling = inst.name in with_cti
        small, found = genuine_small_cti(*small_args) if sibling else (None, None)
        searched = sibling
        answer, model = (z3.sat, found) if small is not None else (z3.unsat, None)
        # A step with cases is asked one case at a time (together they cover it): each query
        # is smaller, and the step is inductive when every case is.
        cases = _cases(inst, pre, post) if small is None else []
        relation = sym.relation(shape, inst, pre, post, a)
        for case_name, case in cases:
            where = f"{label} ({case_name})" if case_name else label
            step_rel = [relation, broken(post, w), *case]
            # Proofs take a second or two; a first query that takes longer is more often sat.
            answer, model, terms = _refine(shape, table_inv, goal, pre, step_rel, step_terms,
                                           min(timeout_ms, FIRST_QUERY_MS), queries, where,
                                           rounds=1, memo=memo)
            if answer is JUNK or answer == z3.unknown:
                # The model breaks a formula where the step never looks (or the solver gave
                # up); a small CTI, if there is one, is genuine at once, where more rounds
                # would chase the junk around (a sibling's was searched above).
                if not searched:
                    small, found = genuine_small_cti(*small_args)
                    searched = True
                if small is not None:
                    answer, model = z3.sat, found
                    break
                # A case is then asked one formula at a time: the post-state breaks the
                # conjunction iff it breaks one of them, and each query is smaller.
                parts = [(f"{label} ({case_name}, {n})",
                          [violation(table_inv[n], shape, post, w)])
                         for n in goal] if case_name else [(where, [])]
                again = answer is JUNK and not case_name
                for part, violated in parts:
                    step_rel = [relation, *(violated or [broken(post, w)]), *case]
                    answer, model, _ = _refine(shape, table_inv, goal, pre, step_rel, terms,
                                               timeout_ms, queries, part,
                                               rounds=REFINE_ROUNDS - again, first=int(again),
                                               memo=memo)
                    if answer != z3.unsat:
                        break
            if answer != z3.unsat:
                break
        if answer == z3.unsat:
            verdicts.append(ActionVerdict(label, "inductive"))
            continue
        if small is None and answer != z3.sat:
            verdicts.append(ActionVerdict(label, "unknown"))
            continue
        violated = tuple(n for n in goal if z3.is_true(
            model.eval(violation(table_inv[n], shape, post, w), model_completion=True)))
        verdicts.append(ActionVerdict(label, "cti", violated))
        with_cti.add(inst.name)
        if cti is None:  # the first decodable CTI is shown in full and classified
            try:
                if small is None:
                    model = _nicer_cti(shape, table_inv, goal, invariants, pre, post, w,
                                       step_rel, step_terms, queries, label, memo) or model
                cti = _decode_cti(shape, table_inv, goal, inst, model, pre, post, a, w)
            except sym.NotRepresentable as error:
                undecodable.append(str(error))
                continue
            differs = _spec_differs(config, cti)
            if differs:
                undecodable.append(differs)
            if classify:
                cti = classify_cti(config, cti, invariants, classify_states, queries)
    proved = sum(v.verdict == "inductive" for v in verdicts)
    tally = f"inductive for {proved} of {len(verdicts)} action instances"
    elapsed = time.perf_counter() - start
    formulas = tuple(formula_verdicts(
        [(n, "target" if n in invariants else "hand") for n in goal], verdicts))
    if cti is not None or any(v.verdict == "cti" for v in verdicts):
        return Outcome("cti", "induction", tuple(goal), tuple(queries), cti=cti,
                       seconds=elapsed, notes=(tally, *undecodable), actions=tuple(verdicts),
                       formulas=formulas)
    if proved < len(verdicts):
        unknown = [v.action for v in verdicts if v.verdict == "unknown"]
        return Outcome("unknown", "induction", tuple(goal), tuple(queries), seconds=elapsed,
                       notes=(tally, f"solver gave up on: {', '.join(unknown)}"),
                       actions=tuple(verdicts), formulas=formulas)
    if only is not None:
        return Outcome("partial", "induction", tuple(goal), tuple(queries), seconds=elapsed,
                       notes=(tally, "only the instances asked for were checked"),
                       actions=tuple(verdicts))
    return Outcome("proved", "induction", tuple(goal), tuple(queries), seconds=elapsed,
                   notes=(f"inductive for every action, {config.brokers} brokers, "
                          f"unbounded offsets and epochs, epoch caches of <= {cache_slots} "
                          "entries",), actions=tuple(verdicts), formulas=formulas)


def _label(inst) -> str:
    """An action instance as verdicts name it: "LeaderHandleFetch[0, 1]"."""
    return f"{inst.name}{list(inst.brokers)}"


def formula_verdicts(kinds: list[tuple[str, str]], verdicts) -> list[tuple[str, str, str]]:
    """(name, kind, verdict) per invariant or lemma of a joint induction: `proved` only when
    every action instance is inductive (each formula's step may rest on the others), `cti`
    when some instance's counterexample breaks it, else `unknown`."""
    every = all(v.verdict == "inductive" for v in verdicts)
    return [(name, kind, "proved" if every else
             "cti" if any(name in v.violated for v in verdicts) else "unknown")
            for name, kind in kinds]


def instance_terms(pre: sym.SState, a: sym.StepArgs, w) -> list:
    """Where the pre-state's invariants are first asked to hold (see `_refine`): the post
    violation's witnesses and the first one's neighbours, the step's arguments, each log's
    end and HW, where the witness and the step's value sit, the epoch boundaries of an
    appended response, and each view's partition epoch."""
    terms = [w - 1, w + 1, a.offset, a.value, a.witness, pre.next_value - 1]
    # Where a value is: lemmas over values (ProduceUnwritten) hold there by lemmas over offsets.
    terms += [pre.value_offset[w], pre.value_offset[a.value]]
    # The epoch boundaries an appended response's records are read at.
    terms += list(a.boundaries)
    terms += [r.log_len - 1 for r in pre.replicas]
    terms += [r.high_watermark - 1 for r in pre.replicas]
    # From W2 on: the partition epochs, where pair formulas are assumed too (`_instances`).
    terms += [W2, w, a.partition_epoch, pre.c_pe] + [r.partition_epoch for r in pre.replicas]
    return terms


def _cases(inst, pre: sym.SState, post: sym.SState) -> list[tuple[str, list]]:
    """The cases a step is asked in, one query each (name, constraints), which together
    cover the step. A follower's answer, and a leader's, is split by kind: appending records
    and truncating to a diverging answer change a log in different ways, and each alone is
    a smaller query than the step (a case that is not settled at once is then asked one
    formula at a time)."""
    if inst.name == "LeaderHandleFetch":
        kind = post.fetches[inst.brokers[1]].kind
    elif inst.name == "FollowerHandleFetchResponse":
        kind = pre.fetches[inst.brokers[0]].kind
    else:
        return [("", [])]
    return [("records", [kind == sym.RESP_RECORDS]),
            ("diverging", [kind == sym.RESP_DIVERGING]),
            ("other answers", [kind != sym.RESP_RECORDS, kind != sym.RESP_DIVERGING])]


def _step_terms(inst, pre: sym.SState, a: sym.StepArgs) -> list:
    """Where one step reads besides `instance_terms`, pair formulas included: a leader
    answering a fetch compares the request's last fetched offset with the epoch boundaries
    of its cache, where EpochStartsAgree and EpochLogMatching say the two logs agree, and a
    diverging answer cuts the follower at one of them, which the leader's record of the
    follower's LEO must stay within; a follower appending records reads them from the fetch
    offset to their end, and its cache changes where their epoch goes up. Only for those
    steps: for every step they would quadruple the pairs assumed."""
    if inst.name == "FollowerHandleFetchResponse":
        m = pre.fetches[inst.brokers[0]]
        return [m.fetch_offset, m.fetch_offset + m.rec_count - 1,
                *a.boundaries, *[x - 1 for x in a.boundaries]]
    if inst.name != "LeaderHandleFetch":
        return []
    leader, follower = inst.brokers
    lr, rf = pre.replicas[leader], pre.replicas[follower]
    return [pre.fetches[follower].fetch_offset - 1,
            *[x - 1 for x in lr.cache_start], *lr.cache_start,
            *rf.cache_start, *[x - 1 for x in rf.cache_start],
            lr.remote_leo[follower], lr.remote_leo[follower] - 1]


def _refine(shape, table_inv, goal, pre, constraints, terms, timeout_ms: int,
            queries: list[Query], label: str, rounds: int | None = None, first: int = 0,
            memo: dict | None = None):
    """Inv(pre) and the constraints, with Inv's quantifier over its witness instantiated.

    Each invariant and lemma is a violation formula over one witness (an offset, a value or
    a partition epoch), so Inv(pre) says "for every witness, no violation": a quantifier, and
    Z3's E-matching over arrays gives up on it (`unknown` after a minute on leader steps).
    Here it holds at a finite set of terms instead. Unsat is then a proof (fewer assumptions
    than Inv). A model is checked: for each formula, one quantifier-free query asks whether
    the model's pre-state breaks it at any witness; if so, that witness joins the terms and
    the query is asked again; if not, the model is a genuine CTI. Returns (answer, model,
    terms): answer `JUNK` when every round's model broke a formula somewhere (the terms then
    hold every witness found, to go on from). `memo`: formulas already built over `pre`,
    shared by the queries of one induction (see `_assumed`).
    """
    terms = list(terms)
    memo = {} if memo is None else memo
    rounds = REFINE_ROUNDS if rounds is None else rounds
    for round_ in range(first, first + rounds):
        solver = solver_within(timeout_ms)
        solver.add(*[_assumed(memo, table_inv[n], shape, pre, ts) for n in goal
                     for ts in _instances(table_inv[n], terms)], *constraints)
        answer = _check(solver, label if round_ == 0 else f"{label} (refinement {round_})",
                        queries)
        if answer != z3.sat:
            return answer, None, terms
        model = solver.model()
        found = broken_at(shape, table_inv, goal, pre, model, timeout_ms)
        if found is None:
            return z3.unknown, None, terms
        if not found:
            return z3.sat, model, terms
        terms += found
    return JUNK, None, terms


FIRST_QUERY_MS = 10_000


# `_refine`'s answer when the rounds ran out on models that break a formula where the step
# never reads.
JUNK = "junk"


REFINE_ROUNDS = 25


# The bounds of `_small_cti`'s search: large enough for every CTI the proofs have needed so
# far, small enough that every formula is assumed at every index.
SMALL_CTI_BOUNDS = dict(max_records=3, max_leader_epochs=3, max_crashes=2,
                        max_session_expiries=1, max_ticks=2, max_message_drops=2,
                        max_partition_epoch=4)
SMALL_CTI_PARTITION_EPOCHS = 7


def small_cti_witnesses(top: int) -> range:
    """Where `_small_cti` assumes each formula: every index up to `top` and past it, so that
    a witness anywhere else reads and compares as one of these."""
    return range(-3, top + 4)


@dataclass(frozen=True)
class _SmallCti:
    """A CTI found in the bounded encoding: its model and the terms `_confirm` pins."""

    shape: sym.Shape
    inst: Any
    model: Any
    pre: sym.SState
    post: sym.SState
    args: sym.StepArgs
    witness: Any
    violated: tuple[str, ...]


def small_problem(config: Config, label: str, goal: list[str], cache_slots: int, table_inv):
    """`_small_cti`'s search without its post-condition: (shape, instance, pre, post, args,
    constraints) for one action instance in the bounded encoding, every integer of the
    pre-state and the step bounded, every formula of `goal` assumed at every witness."""
    shape = sym.make_shape(config.replace(**SMALL_CTI_BOUNDS), bounded=True,
                           cache_slots=cache_slots, pe_limit=SMALL_CTI_PARTITION_EPOCHS)
    inst = next(i for i in sym.action_table(shape) if f"{i.name}{list(i.brokers)}" == label)
    pre, post = sym.fresh_state(shape, "small.pre."), sym.fresh_state(shape, "small.post.")
    a = sym.fresh_args(shape, "small.a.")
    top = max(shape.cells(d) for d in ("offset", "value", "pe"))
    ints = [x for x in sym.leaves_of(pre) + sym.leaves_of(a)
            if z3.is_int(sym.as_term(x)) and not z3.is_int_value(sym.as_term(x))]
    witnesses = small_cti_witnesses(top)
    base = [sym.And(-1 <= x, x <= top) for x in ints]
    base += [sym.relation(shape, inst, pre, post, a)]
    base += sym.decodable(shape, pre) + sym.decodable(shape, post)
    return shape, inst, pre, post, a, base + _small_assumed(
        shape, tuple(witnesses), tuple(table_inv[n] for n in goal))


@functools.lru_cache(maxsize=4)
def _small_assumed(shape, witnesses: tuple, formulas: tuple) -> list:
    """Each formula at every witness over `small_problem`'s pre-state: the same for every
    action instance of an induction (its variables are named, so equal shapes give equal
    terms), and most of what a small search costs to build."""
    pre = sym.fresh_state(shape, "small.pre.")
    return [z3.Not(f(shape, pre, *ts)) for f in formulas
            for ts in ([(x, y) for x in witnesses for y in witnesses] if is_pair(f)
                       else [(x,) for x in witnesses])]


def genuine_small_cti(config: Config, label: str, invariants: list[str], goal: list[str],
                      cache_slots: int, timeout_ms: int, queries: list[Query], step: tuple,
                      table_inv: dict | None = None, broken: list[str] | None = None):
    """(small CTI, its model in the unbounded encoding) for one action instance, or (None,
    None): `_small_cti`'s search, each CTI it finds confirmed by `_confirm` (`step`: its
    arguments after the CTI). One the unbounded step rejects is excluded and the search asked
    again, up to `SMALL_CTI_TRIES` times: the bounded step drops a write past its cells, and
    whether Z3's first small CTI is such a one depends on the order its terms were made in,
    not on whether a genuine one exists (FollowerHandleFetchResponse[1] of B11's fix at 2
    brokers: rejected in about one context in five, the step then `unknown` after a minute)."""
    excluded: list = []
    for _ in range(SMALL_CTI_TRIES):
        small = _small_cti(config, label, invariants, goal, cache_slots, timeout_ms, queries,
                           table_inv, broken, excluded)
        if small is None:
            return None, None
        model = _confirm(small, *step)
        if model is not None:
            return small, model
        excluded.append(_other_than(small))
    return None, None


SMALL_CTI_TRIES = 3


def _other_than(small: _SmallCti) -> z3.BoolRef:
    """A small search's pre-state or step differs from `small`'s somewhere."""
    return z3.Not(sym.And(_as_in(small.model, small.pre) + _as_in(small.model, small.args)))


def _as_in(model, x) -> list:
    """Equations that fix every leaf of `x` (a state or a step's arguments) that is not a
    constant to its value in `model`."""
    return [sym.eq_terms(leaf, model.eval(sym.as_term(leaf), model_completion=True))
            for leaf in sym.leaves_of(x) if not z3.is_int_value(sym.as_term(leaf))]


def _small_cti(config: Config, label: str, invariants: list[str], goal: list[str],
               cache_slots: int, timeout_ms: int, queries: list[Query],
               table_inv: dict | None = None, broken: list[str] | None = None,
               excluded: list | None = None) -> _SmallCti | None:
    """A CTI for one action instance whose pre-state satisfies every formula of `goal` at
    every witness, or None if there is none within `SMALL_CTI_BOUNDS` (or the solver gives up).
    Its post-state breaks one of `broken` (default: `goal`); formulas are looked up in
    `table_inv` (default: the invariants and lemmas); `excluded` are further constraints (the
    CTIs already rejected, `genuine_small_cti`).

    The search is in the bounded encoding (`FArr`: one term per small index and one default
    term for every other index), with every integer of the pre-state and the step in
    -1..L, L the largest number of cells. Each formula is then assumed at every witness in
    -3..L+3: any witness outside reads only default cells and compares with every integer as
    L+3 does, so the pre-state breaks no formula anywhere. Its step is the caller's to
    confirm in the unbounded encoding (`_confirm`). A CTI breaking a target invariant is
    asked for first, then any.
    """
    from model_check.prove.lemmas import LEMMAS

    table_inv = table_inv or {**sym.VIOLATIONS, **LEMMAS}
    broken = goal if broken is None else broken
    shape, inst, pre, post, a, base = small_problem(config, label, goal, cache_slots,
                                                    table_inv)
    w = z3.Int("small.cti_w")
    for names, what in ((invariants, "small CTI search, a target broken"),
                        (broken, "small CTI search")):
        if not names:
            continue
        solver = solver_within(timeout_ms)
        solver.add(*base, *(excluded or ()),
                   sym.Or([violation(table_inv[n], shape, post, w) for n in names]))
        answer = _check(solver, f"{label} ({what})", queries)
        if answer == z3.sat:
            model = solver.model()
            violated = tuple(n for n in broken if z3.is_true(model.eval(
                violation(table_inv[n], shape, post, w), model_completion=True)))
            return _SmallCti(shape, inst, model, pre, post, a, w, violated)
        if answer == z3.unknown:
            return None
    return None


def broken_at(shape, table_inv, goal, pre, model, timeout_ms: int) -> list | None:
    """Witnesses at which the model's pre-state breaks a formula of `goal` ([] when it breaks
    none: a genuine pre-state; None when the solver cannot tell)."""
    fixed = _as_in(model, pre)
    out = []
    t, t2 = z3.Int("refine_t"), z3.Int("refine_t2")
    for n in goal:
        f = table_inv[n]
        ts = (t, t2) if is_pair(f) else (t,)
        solver = solver_within(timeout_ms)
        solver.add(*fixed, f(shape, pre, *ts))
        answer = solver.check()
        if answer == z3.unknown:
            return None
        if answer == z3.sat:
            out += [solver.model().eval(x, model_completion=True) for x in ts]
    return out


def is_pair(formula) -> bool:
    """Whether a violation formula takes two witnesses (`symbolic_lemmas.pair`)."""
    return getattr(formula, "pair", False)


# The second witness of a pair formula broken in a post-state (existential, like `cti_w`).
W2 = z3.Int("cti_w2")


def violation(formula, shape, s, w) -> z3.BoolRef:
    """`formula` broken in `s` at `w` (and at `W2` too for a pair formula)."""
    return formula(shape, s, w, W2) if is_pair(formula) else formula(shape, s, w)


def _assumed(memo: dict, formula, shape, pre, ts: tuple) -> z3.BoolRef:
    """Not(formula(pre) broken at ts), built once per formula and terms: every step of an
    induction assumes most of the same instances over the same pre-state, and building them
    in Python took longer than solving. Keyed by the terms' AST ids, which stay unique while
    the memo holds the terms themselves."""
    key = (formula, *(t.get_id() if isinstance(t, z3.AstRef) else ("int", t) for t in ts))
    found = memo.get(key)
    if found is None:
        found = memo[key] = (ts, z3.Not(formula(shape, pre, *ts)))
    return found[1]


def _instances(formula, terms: list) -> list[tuple]:
    """Where a formula is assumed to hold: at each term, or each pair of the terms from `W2`
    on (the partition epochs `instance_terms` lists last, and witnesses found later): all
    pairs of all terms made the default targets' queries ten times slower."""
    if is_pair(formula):
        tail = terms[next(i for i, t in enumerate(terms) if t is W2):]
        return [(t1, t2) for t1 in tail for t2 in tail]
    return [(t,) for t in terms]


def _nicer_cti(shape, table_inv, goal, invariants, pre, post, w, step_rel, terms,
               queries: list[Query], label: str, memo: dict | None = None):
    """A genuine CTI that decodes, with small numbers where possible (easier to read),
    preferring one that breaks a target invariant rather than only a lemma: every integer
    field of both states in -1..SMALL; failing that, any decodable one. None if no try
    succeeds within its short time limit (the caller keeps the first model)."""
    decodable = sym.decodable(shape, pre) + sym.decodable(shape, post)
    small = [sym.And(-1 <= x, x <= SMALL) for x in sym.leaves_of(pre) + sym.leaves_of(post)
             if z3.is_int(x)]
    target = sym.Or([violation(table_inv[n], shape, post, w) for n in invariants])
    for extra, what in ((decodable + small + [target], "small CTI breaking a target"),
                        (decodable + small, "small CTI"), (decodable, "decodable CTI")):
        answer, model, _ = _refine(shape, table_inv, goal, pre, step_rel + extra, terms,
                                   SMALL_MODEL_MS, queries, f"{label} ({what})", memo=memo)
        if answer == z3.sat:
            return model
    return None


SMALL_MODEL_MS = 5_000


SMALL = 8


def _pin(small, unbounded, model) -> list:
    """Equations that fix `unbounded` (a state or step of the unbounded encoding) to the value
    `small` (the same part of the bounded encoding) has in `model`: a bounded array becomes
    the constant array of its default with its cells stored over it."""
    if isinstance(small, sym.FArr):
        value = functools.partial(model.eval, model_completion=True)
        array = z3.K(z3.IntSort(), value(small.default))
        for i, cell in enumerate(small.cells):
            array = z3.Store(array, i, value(cell))
        return [unbounded == array]
    if dataclasses.is_dataclass(small):
        return [eq for f in dataclasses.fields(small)
                for eq in _pin(getattr(small, f.name), getattr(unbounded, f.name), model)]
    if isinstance(small, tuple):
        return [eq for x, y in zip(small, unbounded, strict=True) for eq in _pin(x, y, model)]
    return [sym.as_term(unbounded) == model.eval(sym.as_term(small), model_completion=True)]


def _confirm(small: _SmallCti, shape, inst, pre, post, a, w, goal, table_inv,
             timeout_ms: int, queries: list[Query], label: str):
    """The small CTI's pre-state and step in the unbounded encoding, with a model there if
    the step still breaks a formula of `goal`, else None.

    The bounded encoding reads its pre-state faithfully, so the pre-state breaks no formula
    anywhere; but it drops a write at an index past its cells and keeps an array's default
    where a lambda would compute one, so its post-state may be wrong where the pre-state is
    unreachable. The unbounded step decides."""
    solver = solver_within(timeout_ms)
    solver.add(*_pin(small.pre, pre, small.model), *_pin(small.args, a, small.model),
               sym.relation(shape, inst, pre, post, a),
               sym.Or([violation(table_inv[n], shape, post, w) for n in goal]))
    answer = _check(solver, f"{label} (small CTI, unbounded step)", queries)
    return solver.model() if answer == z3.sat else None


def _spec_differs(config: Config, cti: Cti) -> str | None:
    """Why `spec.step` from the CTI's pre-state does not give its post-state, or None.

    The encoding is faithful on reachable states (tests/test_symbolic_diff.py); a CTI's
    pre-state need not be one, and where the two descriptions part there, the reader should
    know the post-state shown is the encoding's."""
    from spec.actions import NotEnabled

    try:
        after = step(config, cti.pre, ACTIONS_BY_NAME[cti.action](**cti.args))
    except NotEnabled as refused:
        return f"on the CTI's pre-state spec.step refuses {cti.action}: {refused}"
    except Exception as error:  # noqa: BLE001 - the spec assumes states it can reach
        return (f"spec.step cannot run {cti.action} on the CTI's pre-state "
                f"({type(error).__name__}: {error}): not a state the spec reaches")
    if after != cti.post:
        return (f"on the CTI's pre-state spec.step gives another post-state than the "
                f"encoding's {cti.action} (they agree on reachable states)")
    return None


def _decode_cti(shape, table_inv, goal, inst, model, pre, post, a, w) -> Cti:
    violated = tuple(n for n in goal if z3.is_true(model.eval(
        violation(table_inv[n], shape, post, w), model_completion=True)))
    try:
        pre_c, post_c = sym.decode(shape, model, pre), sym.decode(shape, model, post)
    except sym.NotRepresentable as error:
        raise sym.NotRepresentable(f"CTI for {inst.name} not decodable: {error}") from None
    return Cti(inst.name, sym.spec_args(inst, model, a), pre_c, post_c, violated)


# Where `classify_cti` looks for a real violation before the config's own bounds. Induction
# proves the invariants for every bound (offsets, epochs, records, crashes, expiries), so a
# violation reachable within any bounds is a real counterexample; these are searched to the end
# in seconds at 3 brokers, where the config's own bounds can take minutes.
PROBE_BOUNDS = dict(max_records=1, max_leader_epochs=2, max_crashes=1, max_session_expiries=0)


def reachable_violation(config: Config, invariants: list[str], max_states: int,
                        queries: list[Query]) -> tuple[Cti | None, list[tuple[Config, Any]]]:
    """A shortest run to a violation of `invariants`, as a reachable Cti (its last step), and
    every search made: first at `PROBE_BOUNDS` (the config's other settings kept), then at the
    config's own bounds. Each search is appended to `queries`."""
    from model_check.explore.flat import search

    names = [n for n in invariants if n in INVARIANTS]
    probe = config.replace(**PROBE_BOUNDS)
    searches = []
    for bounds in dict.fromkeys([probe, config]):
        started = time.perf_counter()
        result = search(bounds, names, max_states=max_states)
        what = "classify (explorer" + (", probe bounds)" if bounds is probe else ")")
        queries.append(Query(what, result.result, time.perf_counter() - started))
        searches.append((bounds, result))
        if result.violation is not None:
            v = result.violation
            trace = tuple(Step(None if label is None else label.name,
                               {} if label is None else label.args(), state)
                          for label, state in v.trace)
            last, before = trace[-1], trace[-2]
            return Cti(last.action, last.args, before.state, last.state, (v.invariant,),
                       "reachable", f"the explorer reaches a violation of {v.invariant} in "
                       f"{len(v.trace) - 1} steps ({_bounds_text(bounds)}); the CTI shown "
                       "is that run's last step", trace, _bounds(bounds)), searches
    return None, searches


def _bounds(config: Config) -> dict[str, int]:
    return {k: getattr(config, k) for k in PROBE_BOUNDS}


def _bounds_text(config: Config) -> str:
    return ", ".join(f"{k.removeprefix('max_').replace('_', ' ')} <= {v}"
                     for k, v in _bounds(config).items())


def classify_cti(config: Config, cti: Cti, invariants: list[str], max_states: int,
                 queries: list[Query]) -> Cti:
    """Reachable (a real violation, with a run) or unreachable (within the config's bounds).

    The explorer searches for a violation of the invariants (not of the lemmas: a lemma is a
    proof device), at small bounds first (`reachable_violation`). A violation is a real bug:
    its shortest run's last step is reported as the CTI, with a reachable pre-state. A
    complete search of the config's own bounds without one means no reachable state within
    them violates the invariants, so the CTI's pre-state is unreachable there: the invariant
    needs strengthening, or a run longer than the bounds allow reaches it (B11, whose run
    takes 46 steps, was a CTI classified unreachable).
    """
    names = [n for n in invariants if n in INVARIANTS]
    found, searches = reachable_violation(config, invariants, max_states, queries)
    if found is not None:
        return found
    bounds, result = searches[-1]
    if result.result == "ok":
        return Cti(cti.action, cti.args, cti.pre, cti.post, cti.violated, "unreachable",
                   f"the explorer visited all {result.distinct_states:,} states reachable "
                   f"within the config's bounds and none violates {', '.join(names)}: the "
                   "CTI's pre-state is not reachable there: the invariant needs "
                   "strengthening, or a run past those bounds reaches it (B11 and B12 were "
                   "found so, docs/protocol.md)",
                   bounds=_bounds(bounds))
    probed = ""
    if len(searches) > 1 and searches[0][1].result == "ok":
        probed = (f"; it visited all {searches[0][1].distinct_states:,} states within "
                  f"{_bounds_text(searches[0][0])} and none violates them")
    return Cti(cti.action, cti.args, cti.pre, cti.post, cti.violated, "unclassified",
               f"the explorer stopped at {max_states:,} states without a violation "
               f"({_bounds_text(bounds)}){probed}", bounds=_bounds(bounds))


# ------------------------------------------------------------------------------------------
# JSON


def _step_json(s: Step) -> dict[str, Any]:
    return {"action": s.action, "args": s.args, "state": state_to_json(s.state)}


def to_json(outcome: Outcome, config: Config) -> dict[str, Any]:
    """The `--json` object of `isrlab prove` (sorted keys when printed)."""
    out: dict[str, Any] = {
        "result": _result_word(outcome),
        "mode": outcome.mode,
        "variant": config.variant.name,
        "config": config.to_properties(),
        "invariants": list(outcome.invariants),
        "seconds": round(outcome.seconds, 3),
        "queries": [{"name": q.name, "answer": q.answer, "seconds": round(q.seconds, 4)}
                    for q in outcome.queries],
        "notes": list(outcome.notes),
    }
    if outcome.depth is not None:
        out["depth"] = outcome.depth
    if outcome.actions:
        out["actions"] = [{"action": v.action, "verdict": v.verdict, "violated": list(v.violated)}
                          for v in outcome.actions]
    if outcome.formulas:
        out["formulas"] = [{"name": n, "kind": k, "verdict": v} for n, k, v in outcome.formulas]
    if outcome.result == "violation" and outcome.trace:
        out["violation"] = {"invariant": outcome.invariant,
                            "trace": [_step_json(s) for s in outcome.trace]}
    if outcome.cti is not None:
        c = outcome.cti
        out["cti"] = {
            "action": c.action, "args": c.args, "pre": state_to_json(c.pre),
            "post": state_to_json(c.post), "violated": list(c.violated),
            "classification": c.classification, "evidence": c.evidence, "bounds": c.bounds,
            "trace": [_step_json(s) for s in c.trace],
        }
    return out


def _result_word(outcome: Outcome) -> str:
    """The verdict as printed: a BMC run that found nothing is "ok" (no violation within its
    depth, as `isrlab check` says of a finished search), never "proved": only induction proves."""
    return "ok" if outcome.mode == "bmc" and outcome.result == "proved" else outcome.result


# ------------------------------------------------------------------------------------------
# Text


def summary(outcome: Outcome, config: Config) -> str:
    """What a person reads: the verdict, the trace or CTI as spec tables, per-query times."""
    from spec.render import render

    lines = []
    if outcome.result == "violation" and outcome.trace:
        lines.append(f"VIOLATION of {outcome.invariant} after {outcome.depth} steps (BMC):")
        for number, item in enumerate(outcome.trace):
            head = "initial state" if item.action is None else \
                f"{item.action}({', '.join(f'{k}={v}' for k, v in item.args.items())})"
            lines.append(f"step {number}: {head}")
            lines += ["    " + x for x in render(config, item.state).splitlines()]
    elif outcome.cti is not None:
        c = outcome.cti
        lines.append(f"CTI ({c.classification}): {', '.join(c.violated)} not preserved by "
                     f"{c.action}({', '.join(f'{k}={v}' for k, v in c.args.items())})")
        lines.append("pre-state:")
        lines += ["    " + x for x in render(config, c.pre).splitlines()]
        lines.append("post-state:")
        lines += ["    " + x for x in render(config, c.post).splitlines()]
        lines.append(c.evidence)
    verdict = {
        "proved": "PROVED", "ok": f"OK: no violation within {outcome.depth} steps",
        "violation": "VIOLATION", "cti": "CTI", "unknown": "UNKNOWN",
    }[_result_word(outcome)]
    lines.append(f"{verdict} ({outcome.mode}, variant {config.variant.name}, "
                 f"{config.brokers} brokers, {outcome.seconds:.2f} s): "
                 f"{', '.join(outcome.invariants)}")
    lines += [n for n in outcome.notes if n not in verdict]  # the bound is in the verdict
    failing = [v for v in outcome.actions if v.verdict != "inductive"]
    if failing:
        lines.append("not yet inductive: " + "; ".join(
            f"{v.action} {v.verdict}" + (f" ({', '.join(v.violated)})" if v.violated else "")
            for v in failing))
    slowest = sorted(outcome.queries, key=lambda q: -q.seconds)[:5]
    lines.append("slowest queries: " + ", ".join(f"{q.name} {q.answer} {q.seconds:.2f} s"
                                                  for q in slowest))
    return "\n".join(lines)
