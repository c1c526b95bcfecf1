"""Exhaustive breadth-first exploration of a `Model`, with shortest counterexamples.

Theory of operation. The search runs level by level. Level d holds the states first reached in
d steps. Expanding a level means, for each of its states: check every invariant, then compute
its successors, canonicalise each (symmetry), and fingerprint it (64-bit `hash`). The next level
is every fingerprint not yet visited. Because levels are sets, the visited set and every count
are the same whatever order states are expanded in, so:

- `workers > 1` gives exactly the counts and verdict of `workers = 1`. Workers are forked
  processes that own the states they generated: fingerprints and action labels cross process
  boundaries, and states only when a level is rebalanced (each new state at most once). The coordinator keeps the visited set and, for each new
  state, the smallest (parent fingerprint, successor index) that reached it, so the parent tree,
  and hence every reported trace, is also independent of the number of workers.
- A violation found in level d is reported after the whole level has been checked, choosing the
  smallest (invariant order, fingerprint): counts stop at level d, and the counterexample has the
  shortest possible length, d steps.

Traces are rebuilt from parent pointers by replaying labels from the initial state.

Fingerprints: distinct states are told apart by a 64-bit hash, so two different states could
collide and one would go unexplored. The chance is about n^2 / 2^65 for n distinct states
(birthday bound, assuming a uniform hash); it is reported with every result.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import random
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from model_check.gcpause import gc_paused
from model_check.model import Model


@dataclass
class Violation:
    invariant: str
    detail: str
    trace: list[tuple[Any, Any]]  # (label or None for the initial state, state)


@dataclass
class Result:
    """The outcome of a search. `result` is "ok", "violation" or "incomplete"."""

    result: str
    distinct_states: int
    generated_states: int
    depth: int
    seconds: float
    coverage: Counter = field(default_factory=Counter)
    violation: Violation | None = None
    collision_probability: float = 0.0
    symmetry: bool = False
    workers: int = 1
    seed: int | None = None
    traces: int = 0

    @property
    def states_per_second(self) -> float:
        return self.distinct_states / self.seconds if self.seconds > 0 else 0.0


def _first(item):
    return item[0]


def _label_kind(label):
    """The action name of a label: tuple labels start with it, dataclass labels are typed."""
    return label[0] if type(label) is tuple else type(label).__name__


def collision_probability(n: int) -> float:
    """Probability that some two of n distinct states share a 64-bit fingerprint."""
    return min(1.0, n * (n - 1) / 2 / 2.0**64)


# ------------------------------------------------------------------------------------------
# The expansion work, shared by the in-process and the forked workers.


class _Expander:
    """Holds the states this worker generated and expands the ones the coordinator accepts."""

    def __init__(self, model: Model, symmetry: bool, check: bool):
        self.model = model
        self.symmetry = symmetry
        self.check = check
        self.pending: dict[int, Any] = {}
        # Every fingerprint this worker reported in an earlier level is visited by now (it was
        # either new and accepted, or already visited), so it can be skipped at once.
        self.seen: set[int] = set()
        self.checks = list(model.invariants.items())

    def fingerprint(self, state: Any) -> tuple[int, Any]:
        if self.symmetry:
            state = self.model.canonical(state)
        return hash(state), state

    def seed(self, states: list[Any]) -> list[tuple[int, int, int]]:
        out = []
        for index, state in enumerate(states):
            fp, canon = self.fingerprint(state)
            if fp not in self.pending:
                self.pending[fp] = canon
                self.seen.add(fp)
                out.append((fp, 0, index))
        return out

    def export(self, fps: list[int]) -> list[tuple[int, Any]]:
        """Hand some accepted states to the coordinator, to balance the next level."""
        return [(fp, self.pending.pop(fp)) for fp in fps]

    def expand(self, accepted: list[int], imported: list[tuple[int, Any]], expand: bool):
        """Check and expand the accepted states; return violations, new candidates, counts."""
        frontier = [(fp, self.pending[fp]) for fp in accepted] + imported
        self.pending = {}
        model = self.model
        violations = []
        if self.check:
            checks = self.checks
            for fp, state in frontier:
                for order, (name, check) in enumerate(checks):
                    detail = check(state)
                    if detail is not None:
                        violations.append((order, fp, name, detail))
                        break
        candidates: dict[int, tuple[int, int]] = {}
        kinds: Counter = Counter()
        generated = 0
        if expand and not violations:
            pending = self.pending
            canonical = self.model.canonical if self.symmetry else None
            # In ascending fingerprint order the first discovery of a state within this worker
            # is its smallest (parent, index): no per-successor comparison needed.
            frontier.sort(key=_first)
            seen = self.seen
            successors = model.successors
            labels_seen: list = []
            kind_of = labels_seen.append
            for parent, state in frontier:
                index = 0
                for label, nxt in successors(state):
                    kind_of(label)
                    if canonical is not None:
                        nxt = canonical(nxt)
                    fp = hash(nxt)
                    if fp not in seen and fp not in candidates:
                        candidates[fp] = (parent, index)
                        pending[fp] = nxt
                    index += 1
                generated += index
                if len(labels_seen) > 4096:
                    kinds.update(map(_label_kind, labels_seen))
                    labels_seen.clear()
            kinds.update(map(_label_kind, labels_seen))
            seen.update(candidates)
        coverage = kinds
        return violations, candidates, coverage, generated


def die_with_parent(parent: int | None = None) -> None:
    """Make this (forked or spawned worker) process die when its parent does: Linux's
    PR_SET_PDEATHSIG, and a check that the parent did not die before it was set."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: workers then end when their pipe breaks
    if parent is not None and os.getppid() != parent:
        os._exit(1)


def _worker_main(conn, model, symmetry, check, parent):
    die_with_parent(parent)
    expander = _Expander(model, symmetry, check)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "stop":
            return
        if kind == "seed":
            conn.send(expander.seed(message[1]))
        elif kind == "export":
            conn.send(expander.export(message[1]))
        elif kind == "expand":
            conn.send(expander.expand(message[1], message[2], message[3]))


class _ZeroOwner:
    """Owner map for a single worker: everything belongs to worker 0."""

    def __getitem__(self, fp: int) -> int:
        return 0


class _Pool:
    """Forked workers speaking a tiny protocol over pipes; or one in-process expander."""

    def __init__(self, model: Model, workers: int, symmetry: bool, check: bool):
        self.workers = workers
        if workers == 1:
            self.local = _Expander(model, symmetry, check)
            return
        ctx = multiprocessing.get_context("fork")  # shares the hash secret: same fingerprints
        self.conns = []
        self.procs = []
        for _ in range(workers):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_worker_main,
                               args=(child, model, symmetry, check, os.getpid()), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)

    def seed(self, states: list[Any]) -> list[tuple[int, int, int]]:
        if self.workers == 1:
            return self.local.seed(states)
        self.conns[0].send(("seed", states))
        return self.conns[0].recv()

    def expand(self, groups: list[list[int]], expand: bool):
        """Expand the next level, `groups[w]` being the states worker w found.

        Workers that found more than their share first hand the excess over (only new states
        ever travel, once), so the level is split evenly whoever discovered it.
        """
        if self.workers == 1:
            return [self.local.expand(groups[0], [], expand)]
        share = -(-sum(len(g) for g in groups) // self.workers)
        keep = [g[:share] for g in groups]
        excess = {w: g[share:] for w, g in enumerate(groups) if len(g) > share}
        for w, fps in excess.items():
            self.conns[w].send(("export", fps))
        moved = [item for w in excess for item in self.conns[w].recv()]
        imports: list[list[tuple[int, Any]]] = [[] for _ in range(self.workers)]
        for w in range(self.workers):
            room = share - len(keep[w])
            imports[w], moved = moved[:room], moved[room:]
        for conn, own, extra in zip(self.conns, keep, imports, strict=True):
            conn.send(("expand", own, extra, expand))
        return [conn.recv() for conn in self.conns]

    def close(self) -> None:
        if self.workers == 1:
            return
        for conn in self.conns:
            try:
                conn.send(("stop",))
            except OSError:
                pass
        for proc in self.procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()


# ------------------------------------------------------------------------------------------


@gc_paused
def explore(
    model: Model,
    *,
    max_states: int | None = None,
    max_depth: int | None = None,
    workers: int = 1,
    symmetry: bool | None = None,
    check_invariants: bool = True,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> Result:
    """Breadth-first search of every reachable state; see the module docstring."""
    start = time.perf_counter()
    use_symmetry = model.symmetric() if symmetry is None else (symmetry and model.symmetric())
    check = check_invariants and bool(model.invariants)
    workers = max(1, workers)
    pool = _Pool(model, workers, use_symmetry, check)
    parents: dict[int, tuple[int, int] | None] = {}
    coverage: Counter = Counter()
    generated = 0
    depth = 0
    result = "ok"
    violation = None
    owner: dict[int, int] = {}
    try:
        init_states = list(model.init_states())
        seeded = pool.seed(init_states)
        frontier: list[int] = []
        for fp, _, _index in seeded:
            parents[fp] = None
            frontier.append(fp)
            owner[fp] = 0
        init_by_fp = {fp: index for fp, _, index in seeded}
        while frontier:
            last_level = max_depth is not None and depth >= max_depth
            groups: list[list[int]] = [[] for _ in range(workers)]
            for fp in frontier:
                groups[owner[fp]].append(fp)
            replies = pool.expand(groups, expand=not last_level)
            found = sorted(v for reply in replies for v in reply[0])
            if found:
                _, fp, name, detail = found[0]
                trace = _rebuild(model, use_symmetry, parents, init_states, init_by_fp, fp)
                violation = Violation(name, detail, trace)
                result = "violation"
                break
            for reply in replies:
                coverage.update(reply[2])
                generated += reply[3]
            if workers == 1:
                # One worker never reports a visited state (see _Expander.seen): accept all.
                new: dict[int, tuple[int, int]] = replies[0][1]
                owner = _ZeroOwner()
            else:
                best: dict[int, tuple[tuple[int, int], int]] = {}
                for worker, reply in enumerate(replies):
                    for fp, key in reply[1].items():
                        if fp in parents:
                            continue
                        current = best.get(fp)
                        if current is None or key < current[0]:
                            best[fp] = (key, worker)
                new = {fp: key for fp, (key, _) in best.items()}
                owner = {fp: worker for fp, (_, worker) in best.items()}
            if max_states is not None and len(parents) + len(new) > max_states:
                room = max(0, max_states - len(parents))
                new = dict(sorted(new.items())[:room])
                result = "incomplete"
            parents.update(new)
            frontier = list(new)
            if frontier:
                depth += 1
            if progress is not None:
                progress(dict(depth=depth, distinct=len(parents), generated=generated,
                              queue=len(frontier), seconds=time.perf_counter() - start))
            if result == "incomplete":
                break
    finally:
        pool.close()
    return Result(
        result=result,
        distinct_states=len(parents),
        generated_states=generated,
        depth=depth,
        seconds=time.perf_counter() - start,
        coverage=coverage,
        violation=violation,
        collision_probability=collision_probability(len(parents)),
        symmetry=use_symmetry,
        workers=workers,
    )


def _rebuild(model, symmetry, parents, init_states, init_by_fp, fp) -> list[tuple[Any, Any]]:
    """Replay the labels on the parent chain from the initial state to `fp`."""
    chain = []
    while parents[fp] is not None:
        parent, index = parents[fp]
        chain.append(index)
        fp = parent
    state = init_states[init_by_fp[fp]]
    if symmetry:
        state = model.canonical(state)
    trace = [(None, state)]
    for index in reversed(chain):
        for i, (label, nxt) in enumerate(model.successors(state)):
            if i == index:
                state = model.canonical(nxt) if symmetry else nxt
                trace.append((label, state))
                break
        else:  # pragma: no cover - would mean successors() is not deterministic
            raise AssertionError("successor order changed between search and replay")
    return trace


SIM_BIASES = ("uniform", "rare")


def first_violation(invariants: list, state) -> tuple[str, str] | None:
    """(name, detail) of the first of `invariants` (name, check) that `state` breaks."""
    for name, inv in invariants:
        detail = inv(state)
        if detail is not None:
            return name, detail
    return None


@gc_paused
def simulate(
    model: Model,
    *,
    seed: int,
    depth: int,
    traces: int,
    check_invariants: bool = True,
    bias: str = "uniform",
) -> Result:
    """Random walks from the initial states; every successor is checked, not just the path.

    bias "uniform" picks each step among the enabled actions alike; "rare" weighs an action by
    1 / (1 + how often walks so far took an action of its kind), so walks spend their steps on
    the kinds that random choice starves (a crash, an expansion, a second election) rather
    than on the many fetch and read steps enabled in most states."""
    if bias not in SIM_BIASES:
        raise ValueError(f"bias: {bias!r} (known: {', '.join(SIM_BIASES)})")
    start = time.perf_counter()
    rng = random.Random(seed)
    coverage: Counter = Counter()
    chosen: Counter = Counter()
    generated = 0
    seen: set[int] = set()
    deepest = 0
    invariants = list(model.invariants.items()) if check_invariants else []

    def check(state):
        return first_violation(invariants, state)

    init_states = list(model.init_states())
    for _ in range(traces):
        state = rng.choice(init_states)
        trace = [(None, state)]
        found = check(state)
        if found:
            return _sim_result(start, "violation", seen, generated, 0, coverage, Violation(*found, trace), seed, traces)
        for step in range(depth):
            succs = list(model.successors(state))
            if not succs:
                break
            for label, nxt in succs:
                generated += 1
                coverage[model.action_name(label)] += 1
                seen.add(hash(nxt))
                found = check(nxt)
                if found:
                    trace.append((label, nxt))
                    return _sim_result(start, "violation", seen, generated, step + 1, coverage,
                                       Violation(*found, trace), seed, traces)
            if bias == "rare":
                names = [model.action_name(label) for label, _ in succs]
                i = rng.choices(range(len(succs)), [1 / (1 + chosen[n]) for n in names])[0]
                label, state = succs[i]
                chosen[names[i]] += 1
            else:
                label, state = rng.choice(succs)
            trace.append((label, state))
            deepest = max(deepest, step + 1)
    return _sim_result(start, "ok", seen, generated, deepest, coverage, None, seed, traces)


def _sim_result(start, result, seen, generated, depth, coverage, violation, seed, traces):
    return Result(result, len(seen), generated, depth, time.perf_counter() - start, coverage,
                  violation, collision_probability(len(seen)), seed=seed, traces=traces)


def tty_progress(stream=sys.stderr) -> Callable[[dict[str, Any]], None] | None:
    """A one-line progress display for interactive runs; None when stderr is not a TTY."""
    if not stream.isatty() or os.environ.get("ISRLAB_NO_PROGRESS"):
        return None

    def show(p: dict[str, Any]) -> None:
        rate = p["distinct"] / p["seconds"] if p["seconds"] > 0 else 0
        stream.write(f"\rdepth {p['depth']:>3}  distinct {p['distinct']:>10,}  generated "
                     f"{p['generated']:>11,}  queue {p['queue']:>9,}  {rate:>9,.0f} states/s")
        stream.flush()

    return show
