"""Guided search: best-first from the initial state, towards states where bugs live.

Breadth-first search finds the shortest counterexample, but only once it has visited every
state closer to the start; random walks are cheap, but a bug that needs a precise sequence of
faults (KIP-279's fast leader failover, B4 in docs/protocol.md) is a needle for them. This
search takes the state with the lowest `depth - weight * features` next, where `features` counts
the invariant-relevant conditions of model_check.conformance.coverage that hold in the state (a follower's
HW behind its leader's, live logs that differ at an offset, committed records unflushed, ...).
A state in which several of them hold is where the catalogue's bugs start, so the search goes
deep there first and stays shallow elsewhere.

What it gives up: the counterexample is not known to be the shortest (BFS's claim), and "ok"
means only that the state space is exhausted, as for BFS. The order is deterministic: the same
model and weight give the same states in the same order, so the same counterexample.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections import Counter

from model_check.explore.explorer import Result, Violation, collision_probability, first_violation
from model_check.explore.gcpause import gc_paused
from model_check.explore.model import KafkaModel
from spec.features import FEATURES

DEFAULT_WEIGHT = 3  # one feature is worth three steps of depth


@gc_paused
def guided_search(model: KafkaModel, *, max_states: int | None = None,
                  weight: int = DEFAULT_WEIGHT, check_invariants: bool = True) -> Result:
    """Best-first search by `depth - weight * features` (ties: first generated first)."""
    start = time.perf_counter()
    features = list(FEATURES.values())
    invariants = list(model.invariants.items()) if check_invariants else []
    coverage: Counter = Counter()
    order = itertools.count()
    parent: dict[int, tuple[int | None, object]] = {}  # fingerprint -> (parent's, label)
    heap: list = []
    generated = deepest = 0

    def score(state, depth: int) -> int:
        return depth - weight * sum(1 for f in features if f(state))

    def violated(state):
        return first_violation(invariants, state)

    def result(kind: str, violation: Violation | None = None) -> Result:
        # A violation's depth is its counterexample's length, as BFS reports it.
        depth = len(violation.trace) - 1 if violation else deepest
        return Result(kind, len(parent), generated, depth, time.perf_counter() - start,
                      coverage, violation, collision_probability(len(parent)))

    for state in model.init_states():
        fp = hash(state)
        if fp in parent:
            continue
        parent[fp] = (None, None)
        found = violated(state)
        if found:
            return result("violation", Violation(*found, [(None, state)]))
        heapq.heappush(heap, (score(state, 0), next(order), 0, fp, state))
    while heap:
        _, _, depth, fp, state = heapq.heappop(heap)
        for label, nxt in model.successors(state):
            generated += 1
            coverage[model.action_name(label)] += 1
            nfp = hash(nxt)
            if nfp in parent:
                continue
            parent[nfp] = (fp, label)
            deepest = max(deepest, depth + 1)
            found = violated(nxt)
            if found:
                return result("violation", Violation(*found, _trace(model, parent, nfp)))
            if max_states is not None and len(parent) >= max_states:
                return result("incomplete")
            heapq.heappush(heap, (score(nxt, depth + 1), next(order), depth + 1, nfp, nxt))
    return result("ok")


def _trace(model: KafkaModel, parent: dict, fp: int) -> list:
    """The path to the state `fp`, re-stepped from the initial state along the stored labels."""
    labels = []
    while parent[fp][0] is not None:
        fp, label = parent[fp]
        labels.append(label)
    state = next(s for s in model.init_states() if hash(s) == fp)
    trace = [(None, state)]
    for label in reversed(labels):
        state = next(nxt for lab, nxt in model.successors(state) if lab == label)
        trace.append((label, state))
    return trace
