"""Lemma inference for `isrlab prove --induction`: Houdini over a grammar of candidates.

A proof by induction needs an invariant that carries itself across every step. The targets
(NoCommittedDataLoss, LogMatching, HighWatermarkBelowLogEnd) do not: a state that satisfies
them but is unreachable can step into a violation. Houdini strengthens them with the largest
subset of candidate lemmas that is inductive together:

1. Candidates come from a grammar (below): orderings between two integer terms of the state
   (LEOs, HWs, flushed offsets, view and controller epochs, remote LEOs, the offsets and HW a
   fetch request or response carries), each under a guard (a broker is alive, leads, is in
   the ISR, a fetch request or response is in flight), and agreement of two logs below a
   term.
2. Every candidate is evaluated on the states the explorer reaches under small bounds; one
   that fails on a reachable state is no lemma and is dropped at once (this leaves few for
   the solver).
3. The survivors are assumed in the pre-state of every action instance, and Z3 is asked for
   a step to a post-state that breaks one of them. Each candidate broken in the post-state of
   such a step is dropped, and the instances are asked again, until none breaks: what is
   left is inductive relative to itself, the targets and the hand-written lemmas. (A step
   that breaks only a target is a CTI of the proof, not of the candidates.)

Each candidate exists twice, as a predicate on `spec.state.Cluster` and as a violation
formula on `model_check.prove.symbolic.SState` (the form `symbolic.VIOLATIONS` and
`symbolic_lemmas.LEMMAS` have), built from the same term and guard: the name says what it
means, e.g. `leads(b0) -> rleo(b0,b1) <= leo(b1)`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import z3

from model_check.prove import symbolic as sym
from spec import Config, initial_state
from spec.actions import successors
from spec.state import Cluster, FetchRequest, FetchResponse

Concrete = Callable[[Cluster], object]
Symbolic = Callable[[sym.SState], object]


@dataclass(frozen=True)
class Term:
    """An integer of the state, both ways. `concrete` gives None where the term is undefined
    (a follower has no remote LEOs): candidates use such terms only under a guard that
    defines them."""

    name: str
    concrete: Concrete
    symbolic: Symbolic


@dataclass(frozen=True)
class Guard:
    name: str
    concrete: Concrete
    symbolic: Symbolic


@dataclass(frozen=True)
class Candidate:
    name: str
    holds: Callable[[Cluster], bool]
    violation: Callable[[sym.Shape, sym.SState, object], z3.BoolRef]
    witnessed: bool = False  # its violation formula reads the witness (an offset)


def _replica(s: Cluster, b: int):
    return s.replicas[0][b]


def _ps(s: Cluster):
    return s.controller.partitions[0]


def _slot(s: Cluster, f: int):
    return s.fetches[0][f]


def _records(m) -> bool:
    return type(m) is FetchResponse and m.kind == "records"


def broker_terms(b: int) -> list[Term]:
    return [
        Term(f"leo(b{b})", lambda s: len(_replica(s, b).log), lambda s: s.replicas[b].log_len),
        Term(f"hw(b{b})", lambda s: _replica(s, b).high_watermark,
             lambda s: s.replicas[b].high_watermark),
        Term(f"flushed(b{b})", lambda s: _replica(s, b).flushed_offset,
             lambda s: s.replicas[b].flushed_offset),
        Term(f"view_epoch(b{b})", lambda s: _replica(s, b).leader_epoch,
             lambda s: s.replicas[b].leader_epoch),
        Term(f"view_pe(b{b})", lambda s: _replica(s, b).partition_epoch,
             lambda s: s.replicas[b].partition_epoch),
    ]


def controller_terms() -> list[Term]:
    return [Term("c_epoch", lambda s: _ps(s).leader_epoch, lambda s: s.c_epoch),
            Term("c_pe", lambda s: _ps(s).partition_epoch, lambda s: s.c_pe)]


def remote_term(b: int, f: int) -> Term:
    def concrete(s):
        remote = _replica(s, b).remote_log_end_offset
        return remote[f] if remote else None
    return Term(f"rleo(b{b},b{f})", concrete, lambda s: s.replicas[b].remote_leo[f])


def request_terms(f: int) -> list[Term]:
    def offset(s):
        m = _slot(s, f)
        return m.fetch_offset if type(m) is FetchRequest else None
    return [Term(f"req_offset(f{f})", offset, lambda s: s.fetches[f].fetch_offset)]


def response_terms(f: int) -> list[Term]:
    def field(get):
        def concrete(s):
            m = _slot(s, f)
            return get(m) if _records(m) else None
        return concrete
    return [
        Term(f"resp_hw(f{f})", field(lambda m: m.high_watermark),
             lambda s: s.fetches[f].high_watermark),
        Term(f"resp_offset(f{f})", field(lambda m: m.fetch_offset),
             lambda s: s.fetches[f].fetch_offset),
        Term(f"resp_end(f{f})", field(lambda m: m.fetch_offset + len(m.records)),
             lambda s: s.fetches[f].fetch_offset + s.fetches[f].rec_count),
        Term(f"resp_epoch(f{f})", field(lambda m: m.leader_epoch),
             lambda s: s.fetches[f].leader_epoch),
    ]


TRUE = Guard("true", lambda s: True, lambda s: z3.BoolVal(True))


def alive(b: int) -> Guard:
    return Guard(f"alive(b{b})", lambda s: s.alive[b], lambda s: s.alive[b])


def leads(b: int) -> Guard:
    """b is alive, leads in its own view and has leader-side state."""
    return Guard(f"leads(b{b})",
                 lambda s: (s.alive[b] and _replica(s, b).leader == b
                            and bool(_replica(s, b).remote_log_end_offset)),
                 lambda s: sym.And(s.alive[b], s.replicas[b].leader == b, s.replicas[b].side))


def true_leader(b: int) -> Guard:
    """b leads in the controller's view and its own, at the controller's epoch."""
    def concrete(s):
        r = _replica(s, b)
        return (_ps(s).leader == b and s.alive[b] and r.leader == b
                and r.leader_epoch == _ps(s).leader_epoch)
    return Guard(f"true_leader(b{b})", concrete, lambda s: sym.is_true_leader(s, b))


def in_isr(b: int) -> Guard:
    return Guard(f"in_isr(b{b})", lambda s: b in _ps(s).isr and s.alive[b],
                 lambda s: sym.And(s.c_isr[b], s.alive[b]))


def requesting(f: int) -> Guard:
    return Guard(f"requesting(f{f})", lambda s: type(_slot(s, f)) is FetchRequest,
                 lambda s: s.fetches[f].kind == sym.FETCH)


def answered(f: int) -> Guard:
    return Guard(f"answered(f{f})", lambda s: _records(_slot(s, f)),
                 lambda s: s.fetches[f].kind == sym.RESP_RECORDS)


def both(g1: Guard, g2: Guard) -> Guard:
    return Guard(f"{g1.name} & {g2.name}",
                 lambda s: g1.concrete(s) and g2.concrete(s),
                 lambda s: sym.And(g1.symbolic(s), g2.symbolic(s)))


def leq(guard: Guard, t1: Term, t2: Term) -> Candidate:
    def holds(s):
        if not guard.concrete(s):
            return True
        x, y = t1.concrete(s), t2.concrete(s)
        return x is not None and y is not None and x <= y
    return Candidate(f"{guard.name} -> {t1.name} <= {t2.name}", holds,
                     lambda shape, s, w: sym.And(guard.symbolic(s),
                                                t1.symbolic(s) > t2.symbolic(s)))


def logs_agree(guard: Guard, b1: int, b2: int, below: Term) -> Candidate:
    """Below `below`, the logs of b1 and b2 hold the same records (an index past either
    log's end counts as a difference)."""
    def holds(s):
        if not guard.concrete(s):
            return True
        n = below.concrete(s)
        l1, l2 = _replica(s, b1).log, _replica(s, b2).log
        return n is not None and n <= min(len(l1), len(l2)) and l1[:n] == l2[:n]

    def violation(shape, s, w):
        r1, r2 = s.replicas[b1], s.replicas[b2]
        differs = sym.Or(w >= r1.log_len, w >= r2.log_len, r1.log_epoch[w] != r2.log_epoch[w],
                        r1.log_value[w] != r2.log_value[w])
        return sym.And(guard.symbolic(s), 0 <= w, w < below.symbolic(s), differs)
    return Candidate(f"{guard.name} -> log(b{b1}) = log(b{b2}) below {below.name}", holds,
                     violation, witnessed=True)


def response_matches_leader(f: int, b: int) -> Candidate:
    """A records response to follower f from leader b, at b's current view epoch, holds b's
    records at their offsets."""
    def holds(s):
        m = _slot(s, f)
        r = _replica(s, b)
        if not (_records(m) and m.leader == b and m.leader_epoch == r.leader_epoch):
            return True
        return tuple(r.log[m.fetch_offset:m.fetch_offset + len(m.records)]) == m.records

    def violation(shape, s, w):
        m, r = s.fetches[f], s.replicas[b]
        differs = sym.Or(w >= r.log_len, m.rec_epoch[w] != r.log_epoch[w],
                        m.rec_value[w] != r.log_value[w])
        return sym.And(m.kind == sym.RESP_RECORDS, m.leader == b,
                      m.leader_epoch == r.leader_epoch, m.fetch_offset <= w,
                      w < m.fetch_offset + m.rec_count, differs)
    return Candidate(f"answered(f{f}) by b{b} at its epoch -> records = log(b{b})", holds,
                     violation, witnessed=True)


def request_facts(n: int) -> list[Candidate]:
    """LeaderAndIsr requests in flight (witness: the partition epoch naming one): at most
    the controller's partition epoch and leader epoch, an epoch >= 0, a leader that is a
    broker or none and is in the request's ISR."""
    out = []
    for b in range(n):
        def requests(s, b=b):
            return [m for m in s.leader_and_isr if m.broker == b and m.partition == 0]

        def fact(name, concrete, symbolic, b=b, requests=requests):
            out.append(Candidate(
                f"lai(b{b}) -> {name}",
                lambda s: all(concrete(s, m) for m in requests(s)),
                lambda shape, s, w, b=b: sym.And(s.lai[b][w], z3.Not(symbolic(shape, s, w))),
                witnessed=True))

        fact("pe <= c_pe", lambda s, m: m.partition_epoch <= _ps(s).partition_epoch,
             lambda shape, s, w: w <= s.c_pe)
        fact("epoch <= c_epoch", lambda s, m: m.leader_epoch <= _ps(s).leader_epoch,
             lambda shape, s, w: s.hist_epoch[w] <= s.c_epoch)
        fact("0 <= epoch", lambda s, m: 0 <= m.leader_epoch,
             lambda shape, s, w: 0 <= s.hist_epoch[w])
        fact("0 <= pe", lambda s, m: 0 <= m.partition_epoch, lambda shape, s, w: 0 <= w)
        fact("leader is a broker or none", lambda s, m: -1 <= m.leader < n,
             lambda shape, s, w: sym.And(-1 <= s.hist_leader[w], s.hist_leader[w] < n))
        fact("leader in isr", lambda s, m: m.leader == -1 or m.leader in m.isr,
             lambda shape, s, w: sym.Or(s.hist_leader[w] == -1, sym.Or(
                 [sym.And(s.hist_leader[w] == x, s.hist_isr[x][w]) for x in range(n)])))
        fact("epoch = c_epoch at c_pe",
             lambda s, m: (m.partition_epoch != _ps(s).partition_epoch
                           or (m.leader_epoch, m.leader) == (_ps(s).leader_epoch, _ps(s).leader)),
             lambda shape, s, w: sym.Or(w != s.c_pe, sym.And(s.hist_epoch[w] == s.c_epoch,
                                                           s.hist_leader[w] == s.c_leader)))
    return out


def down(b: int) -> Guard:
    return Guard(f"down(b{b})", lambda s: not s.alive[b], lambda s: z3.Not(s.alive[b]))


def down_facts(n: int) -> list[Candidate]:
    """What a crash leaves: a broker that is down has no view and no leader-side state, and
    its log is what it had flushed."""
    out = []
    for b in range(n):
        view_leader = Term(f"view_leader(b{b})", lambda s, b=b: _replica(s, b).leader,
                           lambda s, b=b: s.replicas[b].leader)
        side = Term(f"side(b{b})", lambda s, b=b: int(bool(_replica(s, b).remote_log_end_offset)),
                    lambda s, b=b: z3.If(s.replicas[b].side, 1, 0))
        none = Term("-1", lambda s: -1, lambda s: z3.IntVal(-1))
        zero = Term("0", lambda s: 0, lambda s: z3.IntVal(0))
        leo, hw, flushed = broker_terms(b)[:3]
        out += [leq(down(b), view_leader, none), leq(down(b), side, zero),
                leq(down(b), leo, flushed), leq(down(b), hw, flushed)]
    return out


def message_facts(n: int) -> list[Candidate]:
    """Fetch messages in flight: to or from a broker other than the follower itself, and
    the records of a response are values written so far."""
    out = []
    for f in range(n):
        def leader_other(s, f=f):
            m = _slot(s, f)
            return m is None or (m.leader != f and 0 <= m.leader < n)
        out.append(Candidate(
            f"message(f{f}) -> leader(f{f}) is another broker", leader_other,
            lambda shape, s, w, f=f: sym.And(s.fetches[f].kind != sym.NONE, sym.Or(
                s.fetches[f].leader == f, s.fetches[f].leader < 0, s.fetches[f].leader >= n))))

        def written(s, f=f):
            m = _slot(s, f)
            return not _records(m) or all(0 < r.value < s.next_value for r in m.records)

        def unwritten(shape, s, w, f=f):
            m = s.fetches[f]
            return sym.And(m.kind == sym.RESP_RECORDS, m.fetch_offset <= w,
                          w < m.fetch_offset + m.rec_count,
                          sym.Or(m.rec_value[w] <= 0, m.rec_value[w] >= s.next_value))
        out.append(Candidate(f"answered(f{f}) -> records were written", written, unwritten,
                             witnessed=True))
        out.append(leq(answered(f), Term("0", lambda s: 0, lambda s: z3.IntVal(0)),
                       response_terms(f)[1]))
        out.append(leq(requesting(f), Term("0", lambda s: 0, lambda s: z3.IntVal(0)),
                       request_terms(f)[0]))
    return out


def candidates(n: int) -> list[Candidate]:
    """The grammar, instantiated for n brokers (names are unique)."""
    out: list[Candidate] = []
    brokers = range(n)
    ctrl = controller_terms()
    for b in brokers:
        own = broker_terms(b)
        for guard in (TRUE, alive(b), leads(b), true_leader(b), in_isr(b)):
            for t1, t2 in itertools.permutations(own + ctrl, 2):
                out.append(leq(guard, t1, t2))
        for c in brokers:
            if c == b:
                continue
            other = broker_terms(c)
            remote = remote_term(b, c)
            for guard in (leads(b), both(leads(b), in_isr(c)), true_leader(b),
                          both(true_leader(b), in_isr(c))):
                for t in own[:2] + other[:3] + [remote]:
                    if t is not remote:
                        out += [leq(guard, remote, t), leq(guard, t, remote)]
                for t1, t2 in itertools.product(own[:3], other[:3]):
                    out.append(leq(guard, t1, t2))
            for guard in (both(true_leader(b), in_isr(c)), both(in_isr(b), in_isr(c))):
                for below in (own[1], other[1], remote, own[2], other[2]):
                    out.append(logs_agree(guard, b, c, below))
    for f in brokers:
        for guard, terms in ((requesting(f), request_terms(f)), (answered(f), response_terms(f))):
            for t in terms:
                for u in broker_terms(f)[:4] + ctrl:
                    out += [leq(guard, t, u), leq(guard, u, t)]
            if guard.name.startswith("answered"):
                offset, end = terms[1], terms[2]
                out.append(leq(guard, offset, end))
        for b in brokers:
            if b != f:
                out.append(response_matches_leader(f, b))
    out += request_facts(n) + message_facts(n) + down_facts(n)
    seen: dict[str, Candidate] = {}
    for c in out:
        seen.setdefault(c.name, c)
    return list(seen.values())


# ------------------------------------------------------------------------------------------
# Step 2: the reachable states


def filter_config(config: Config) -> Config:
    """The induction's config under small exploration bounds (crashes and expiries on)."""
    return config.replace(max_records=2, max_leader_epochs=3, max_crashes=1,
                          max_session_expiries=1)


def breadth_first(config: Config) -> Iterator[tuple[int, Cluster]]:
    """(depth, state) for every reachable state, in the order a breadth-first search finds
    them (lazily: stop reading, and the search stops)."""
    start = initial_state(config)
    seen = {start}
    frontier, depth = [start], 0
    yield depth, start
    while frontier:
        depth += 1
        nxt = []
        for s in frontier:
            for _, t in successors(config, s):
                if t not in seen:
                    seen.add(t)
                    nxt.append(t)
                    yield depth, t
        frontier = nxt


def reachable_states(config: Config, limit: int) -> list[Cluster]:
    """Breadth-first, up to `limit` states."""
    return [s for _, s in itertools.islice(breadth_first(config), limit)]


def random_walks(config: Config, walks: int, steps: int, seed: int) -> list[Cluster]:
    """States along `walks` seeded random runs of up to `steps` steps: deeper than a
    breadth-first prefix reaches."""
    import random

    rng = random.Random(seed)
    out = []
    for _ in range(walks):
        s = initial_state(config)
        for _ in range(steps):
            nxt = [t for _, t in successors(config, s)]
            if not nxt:
                break
            s = rng.choice(nxt)
            out.append(s)
    return out


def filter_reachable(cands: list[Candidate], states: list[Cluster]) -> list[Candidate]:
    """The candidates that hold on every state of `states`."""
    alive_ = list(cands)
    for s in states:
        alive_ = [c for c in alive_ if c.holds(s)]
    return alive_


# ------------------------------------------------------------------------------------------
# Step 3: Houdini


class _Induction:
    """One induction step, asked per action instance: a genuine pre-state (every assumed
    formula holds at every witness) and a step to a post-state that breaks a formula."""

    def __init__(self, config: Config, targets: list[str], lemmas: list[str],
                 cache_slots: int, timeout_ms: int):
        from model_check.prove.engine import instance_terms, violation
        from model_check.prove.lemmas import LEMMAS

        self.shape = sym.make_shape(config, bounded=False, cache_slots=cache_slots)
        self.table = sym.action_table(self.shape)
        self.pre = sym.fresh_state(self.shape, "pre.")
        self.post = sym.fresh_state(self.shape, "post.")
        self.a = sym.fresh_args(self.shape, "a.")
        self.w = z3.Int("cti_w")
        self.terms = instance_terms(self.pre, self.a, self.w)
        self.timeout_ms = timeout_ms
        # A pair formula is assumed at its second witness `prove.W2` only (a weaker
        # instantiation of "for every pair", so still sound) and broken at (w, W2).
        every = {n: (lambda shape, s, w, f=f: violation(f, shape, s, w))
                 for n, f in {**sym.VIOLATIONS, **LEMMAS}.items()}
        names = [*targets, *lemmas]
        probe = z3.Int("houdini_probe")
        # Whether a formula reads its witness (an offset or a value) decides how it is
        # assumed: once, or for every witness.
        self.fixed = [Candidate(n, _never, every[n], reads_witness(
            every[n](self.shape, self.pre, probe), probe)) for n in names]

    def relation(self, inst) -> z3.BoolRef:
        return sym.relation(self.shape, inst, self.pre, self.post, self.a)

    def step(self, relation, assumed: list[Candidate], broken: list[Candidate],
             exact: bool = True, inst=None):
        """(sat, model), (unsat, None) or (unknown, None): a step from a genuine pre-state
        of `assumed` to a post-state breaking one of `broken`.

        A formula that reads its witness says "for every offset (value, partition epoch)".
        It is first assumed only at the step's terms: unsat is then a proof (fewer
        assumptions), and a model is checked formula by formula at every witness; a witness
        where the pre-state breaks one joins the terms. When that does not settle within a
        few rounds (a log's unconstrained cells give the solver endless fresh offsets), an
        `exact` step assumes the formulas quantified instead, under a short time limit. The
        search asks inexact steps and takes the last model: a pre-state that is not genuine
        may drop a lemma for nothing, which costs lemmas but never soundness (the check that
        follows is exact), while quantified queries leave most leader steps unsettled."""
        terms = list(self.terms)
        witnessed = [c for c in assumed if c.witnessed]
        for round_ in range(INSTANCE_ROUNDS):
            answer, model = self._ask(relation, assumed, broken, terms, quantified=False)
            if answer != z3.sat:
                return answer, None
            found = self._broken_at(model, witnessed)
            if found is None:
                break
            if not found:
                return answer, model
            if round_ == 0 and inst is not None:
                # A pre-state with junk where the step never reads: a small genuine CTI, if
                # there is one, settles it at once (prove._small_cti).
                small = self.small_cti(inst, assumed, broken)
                if small is not None:
                    return z3.sat, small
            terms += found
        if not exact:
            return z3.sat, model
        return self._ask(relation, assumed, broken, terms, quantified=True,
                         timeout_ms=QUANTIFIED_MS)

    def small_cti(self, inst, assumed: list[Candidate], broken: list[Candidate]):
        """A model of a genuine CTI over this step's pre- and post-state, from the bounded
        search confirmed in the unbounded encoding; None if there is none."""
        from model_check.prove.engine import genuine_small_cti
        from model_check.prove.lemmas import LEMMAS

        # The hand formulas by their own table (a pair formula is assumed at every pair),
        # the candidates by theirs.
        table = {**{c.name: c.violation for c in assumed + broken}, **sym.VIOLATIONS, **LEMMAS}
        label = f"{inst.name}{list(inst.brokers)}"
        names, broken_names = [c.name for c in assumed], [c.name for c in broken]
        _, model = genuine_small_cti(
            self.shape.config, label, [], names, self.shape.cache_slots, self.timeout_ms, [],
            (self.shape, inst, self.pre, self.post, self.a, self.w, broken_names, table,
             self.timeout_ms, [], label),
            table, broken_names)
        return model

    def _ask(self, relation, assumed, broken, terms, quantified: bool,
             timeout_ms: int | None = None):
        from model_check.prove.engine import solver_within

        shape, pre = self.shape, self.pre
        q = z3.Int("houdini_q")
        solver = solver_within(timeout_ms or self.timeout_ms)
        for c in assumed:
            if c.witnessed:
                solver.add(*[z3.Not(c.violation(shape, pre, t)) for t in terms])
                if quantified:
                    solver.add(z3.ForAll([q], z3.Not(c.violation(shape, pre, q))))
            else:
                solver.add(z3.Not(c.violation(shape, pre, self.w)))
        solver.add(relation, sym.Or([c.violation(shape, self.post, self.w) for c in broken]))
        answer = solver.check()
        return (answer, solver.model() if answer == z3.sat else None)

    def _broken_at(self, model, witnessed: list[Candidate]):
        """The witnesses at which the model's pre-state breaks a formula of `witnessed`
        ([]: none, the pre-state is genuine; None: the solver cannot tell)."""
        from model_check.prove.engine import broken_at

        table = {c.name: c.violation for c in witnessed}
        return broken_at(self.shape, table, list(table), self.pre, model, self.timeout_ms)

    def broken_in_post(self, model, formulas: list[Candidate]) -> list[str]:
        return [c.name for c in formulas if z3.is_true(model.eval(
            c.violation(self.shape, self.post, self.w), model_completion=True))]


INSTANCE_ROUNDS = 4
# E-matching and model-based instantiation either answer a quantified step within seconds or
# run on for minutes: a short limit, and `unknown` past it.
QUANTIFIED_MS = 15_000


def _never(s: Cluster) -> bool:
    raise AssertionError("a fixed formula has no concrete form here")


@dataclass
class HoudiniResult:
    generated: int
    after_filter: int
    lemmas: list[Candidate]
    rounds: int
    queries: int
    seconds: float
    states: int
    dropped_by_solver: list[tuple[str, str]]  # (candidate, the action instance that broke it)
    undecided: list[str]  # action instances the solver gave up on (candidates unchecked)


def houdini(config: Config, targets: list[str], lemmas: list[str], cache_slots: int = 3,
            states: int = 20_000, walks: int = 1_500, seed: int = 1,
            timeout_ms: int = 15_000,
            log: Callable[[str], None] | None = None) -> HoudiniResult:
    """Houdini over `candidates(config.brokers)`, relative to `targets` and the hand-written
    `lemmas` (assumed, never dropped)."""
    say = log or (lambda _: None)
    start = time.perf_counter()
    cands = candidates(config.brokers)
    small = filter_config(config)
    reached = reachable_states(small, states) + random_walks(small, walks, 80, seed)
    kept = filter_reachable(cands, reached)
    say(f"{len(cands)} candidates; {len(kept)} hold on {len(reached):,} reachable states "
        f"(seed {seed})")
    ind = _Induction(config, targets, lemmas, cache_slots, timeout_ms)
    alive_ = {c.name: c for c in kept}
    dropped: list[tuple[str, str]] = []
    undecided: set[str] = set()
    queries = rounds = 0
    changed = True
    while changed:
        changed = False
        rounds += 1
        undecided.clear()
        for inst in ind.table:
            label = f"{inst.name}{list(inst.brokers)}"
            relation = ind.relation(inst)
            while alive_:
                live = list(alive_.values())
                answer, model = ind.step(relation, ind.fixed + live, live, exact=False,
                                         inst=inst)
                queries += 1
                if answer != z3.sat:
                    if answer == z3.unknown:
                        undecided.add(label)
                        say(f"round {rounds} {label}: the solver gave up")
                    break
                broken = ind.broken_in_post(model, live)
                for n in broken:
                    del alive_[n]
                dropped.extend((n, label) for n in broken)
                changed = True
                say(f"round {rounds} {label}: dropped {len(broken)}, {len(alive_)} left")
    return HoudiniResult(len(cands), len(kept), list(alive_.values()), rounds, queries,
                         time.perf_counter() - start, len(reached), dropped, sorted(undecided))


@dataclass(frozen=True)
class Verdict:
    action: str
    verdict: str  # inductive | cti | unknown
    violated: tuple[str, ...] = ()


def verify(config: Config, targets: list[str], lemmas: list[str], found: list[Candidate],
           cache_slots: int = 3, timeout_ms: int = 60_000,
           queries: list | None = None,
           log: Callable[[str], None] | None = None) -> list[Verdict]:
    """Per action instance: is targets + lemmas + found inductive for it? (Each solver call
    is appended to `queries` as a `prove.Query`.)"""
    from model_check.prove.engine import Query

    ind = _Induction(config, targets, lemmas, cache_slots, timeout_ms)
    goal = ind.fixed + list(found)
    out = []
    for inst in ind.table:
        label = f"{inst.name}{list(inst.brokers)}"
        started = time.perf_counter()
        answer, model = ind.step(ind.relation(inst), goal, goal, inst=inst)
        if log is not None:
            log(f"check {label}: {answer} ({time.perf_counter() - started:.1f} s)")
        if queries is not None:
            queries.append(Query(label, str(answer), time.perf_counter() - started))
        if answer == z3.unsat:
            out.append(Verdict(label, "inductive"))
        elif answer == z3.sat:
            out.append(Verdict(label, "cti", tuple(ind.broken_in_post(model, goal))))
        else:
            out.append(Verdict(label, "unknown"))
    return out


def prove(config: Config, targets: list[str], lemmas: list[str],
          found: list[Candidate] | None = None, cache_slots: int = 3, seed: int = 1,
          log: Callable[[str], None] | None = None, classify_states: int = 500_000):
    """`isrlab prove --induction --houdini`: infer lemmas (unless `found` is given), then
    check targets + hand lemmas + inferred lemmas for every action instance. When some
    instance has a CTI, the explorer looks for a real violation of the targets (shown as a
    reachable CTI with its run). Returns (prove.Outcome, HoudiniResult or None)."""
    from model_check.prove.engine import (
        ActionVerdict,
        Outcome,
        formula_verdicts,
        reachable_violation,
    )

    start = time.perf_counter()
    search = None
    if found is None:
        search = houdini(config, targets, lemmas, cache_slots=cache_slots, seed=seed, log=log)
        found = search.lemmas
    queries: list = []
    verdicts = verify(config, targets, lemmas, found, cache_slots, queries=queries, log=log)
    proved = sum(v.verdict == "inductive" for v in verdicts)
    kinds = [(n, "target") for n in targets] + [(n, "hand") for n in lemmas] + [
        (c.name, "inferred") for c in found]
    formulas = formula_verdicts(kinds, verdicts)
    result = ("proved" if proved == len(verdicts) else
              "cti" if any(v.verdict == "cti" for v in verdicts) else "unknown")
    notes = [f"inductive for {proved} of {len(verdicts)} action instances",
             f"{len(found)} inferred lemmas"
             + (f" (from {search.generated} candidates, {search.after_filter} true on "
                f"{search.states:,} reachable states, seed {seed}; search "
                f"{search.seconds:.0f} s)" if search else " (given)")]
    if result == "proved":
        notes.append(f"inductive for every action, {config.brokers} brokers, unbounded "
                     f"offsets and epochs, epoch caches of <= {cache_slots} entries")
    cti = None
    if result == "cti":
        cti, _ = reachable_violation(config, targets, classify_states, queries)
    outcome = Outcome(result, "induction", tuple(n for n, _ in kinds), tuple(queries),
                      cti=cti, seconds=time.perf_counter() - start, notes=tuple(notes),
                      actions=tuple(ActionVerdict(v.action, v.verdict, v.violated)
                                    for v in verdicts),
                      formulas=tuple(formulas))
    return outcome, search


def by_name(n: int, names: list[str]) -> list[Candidate]:
    """The candidates of `candidates(n)` with these names (a saved lemma set)."""
    table = {c.name: c for c in candidates(n)}
    missing = [x for x in names if x not in table]
    if missing:
        raise ValueError(f"not in the grammar: {missing[0]!r}")
    return [table[x] for x in names]


def reads_witness(formula: z3.ExprRef, probe: z3.ExprRef) -> bool:
    return any(x.get_id() == probe.get_id() for x in sym.subterms(formula, set()))
