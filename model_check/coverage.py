"""Coverage both ways: which spec states and actions the reference broker reaches, when the
spec's paths drive it (directed runs) and when random faults do (campaigns).

The yardstick is the spec's state graph of one small configuration, explored breadth-first to
a depth: its states, and the actions that fire in it. Directed runs drive a covering set of
paths (every root-to-leaf path of the breadth-first tree, so together they pass through every
state of the graph) through `model_check.drive`; campaigns run the seeded simulator. Either
way the replay of the run records every spec state it reaches, and a state of the graph counts
as reached when the replay passes through exactly that state. Spec states carry the spec's own
value numbering (the replay renames the broker's values), so the two sides compare as values.

The graph is explored with the replay's own config (the run's protocol settings) plus the
exploration bounds, so a path of the graph is a path replay can take.

`FEATURES` names states that matter to the invariants (a window in which a known bug can
happen); the report counts how many runs reach each, so nemesis settings can be chosen by
coverage rather than by guess.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from impl.config import ClusterConfig
from impl.sim import SimOptions, Simulation
from impl.trace import header_config
from model_check.drive import Driver
from model_check.replay import load_texts, replay_run, spec_config
from spec import Config, initial_state
from spec.actions import successors
from spec.state import NO_LEADER, Cluster

# Graph -------------------------------------------------------------------------------------


@dataclass
class Graph:
    """The spec's states to `depth` steps, each with the step the breadth-first search first
    reached it by (`parent`), and the action names that fired."""

    config: Config
    depth: int
    depth_of: dict[Cluster, int]
    parent: dict[Cluster, tuple[Cluster, object]]
    actions: set[str]

    def covering_paths(self) -> list[tuple[Cluster, list]]:
        """Every root-to-leaf path of the breadth-first tree, deepest first: (leaf, actions)."""
        inner = {prev for prev, _ in self.parent.values()}
        paths = []
        for leaf in self.depth_of:
            if leaf in inner:
                continue
            path, s = [], leaf
            while s in self.parent:
                s, action = self.parent[s]
                path.append(action)
            paths.append((leaf, path[::-1]))
        paths.sort(key=lambda lp: (-len(lp[1]), [str(a) for a in lp[1]]))
        return paths


def graph_config(cluster: ClusterConfig, **bounds: int) -> Config:
    """The replay's spec config for runs of `cluster`, with exploration bounds."""
    return spec_config(header_config(cluster, SimOptions())).replace(**bounds)


def explore(config: Config, depth: int) -> Graph:
    init = initial_state(config)
    depth_of, parent, actions = {init: 0}, {}, set()
    frontier = [init]
    for d in range(1, depth + 1):
        nxt = []
        for state in frontier:
            for action, after in successors(config, state):
                actions.add(action.name)
                if after not in depth_of:
                    depth_of[after] = d
                    parent[after] = (state, action)
                    nxt.append(after)
        frontier = nxt
    return Graph(config, depth, depth_of, parent, actions)


# Features ----------------------------------------------------------------------------------


def _true_leader(s: Cluster, p: int):
    leader = s.controller.partitions[p].leader
    return None if leader == NO_LEADER else s.replica(p, leader)


def _any(s: Cluster, test: Callable[[Cluster, int], bool]) -> bool:
    return any(test(s, p) for p in range(len(s.replicas)))


def _stale_follower_hw(s: Cluster, p: int) -> bool:
    lead = _true_leader(s, p)
    return lead is not None and any(
        s.alive[b] and r.leader not in (NO_LEADER, b) and r.high_watermark < lead.high_watermark
        for b, r in enumerate(s.replicas[p]))


def _isr_member_behind_hw(s: Cluster, p: int) -> bool:
    lead = _true_leader(s, p)
    return lead is not None and any(
        s.alive[b] and len(s.replica(p, b).log) < lead.high_watermark
        for b in s.controller.partitions[p].isr)


def _two_leaders(s: Cluster, p: int) -> bool:
    return sum(1 for b, r in enumerate(s.replicas[p]) if s.alive[b] and r.leader == b) > 1


def _divergent_logs(s: Cluster, p: int) -> bool:
    logs = [r.log for b, r in enumerate(s.replicas[p]) if s.alive[b]]
    return any(x[i] != y[i] for x in logs for y in logs for i in range(min(len(x), len(y))))


def _unflushed_committed(s: Cluster, p: int) -> bool:
    return any(s.alive[b] and r.flushed_offset < r.high_watermark
               for b, r in enumerate(s.replicas[p]))


FEATURES: dict[str, Callable[[Cluster], bool]] = {
    "acknowledged write": lambda s: bool(s.acked),
    "a follower's HW behind the leader's (B1's window)": lambda s: _any(s, _stale_follower_hw),
    "an ISR member without every committed record (B5, B7)":
        lambda s: _any(s, _isr_member_behind_hw),
    "committed records unflushed on a live replica (B2, B8)":
        lambda s: _any(s, _unflushed_committed),
    "two live brokers lead one partition (B10's zombie)": lambda s: _any(s, _two_leaders),
    "live logs differ at an offset (B2, B4)": lambda s: _any(s, _divergent_logs),
    "partition offline": lambda s: any(ps.leader == NO_LEADER for ps in s.controller.partitions),
    "ISR of one": lambda s: any(len(ps.isr) == 1 for ps in s.controller.partitions),
    "a write lost in a crash": lambda s: bool(s.crash_losses),
}


# Coverage ----------------------------------------------------------------------------------


@dataclass
class Coverage:
    """What runs reached of a graph."""

    graph: Graph
    runs: int = 0
    states: set = field(default_factory=set)  # graph states reached
    actions: set = field(default_factory=set)  # spec action names taken (anywhere in a run)
    features: Counter = field(default_factory=Counter)  # runs reaching each feature
    stuck: Counter = field(default_factory=Counter)  # directed: steps not followed, by name
    # directed: paths followed to the end whose last state was still not reached exactly, by
    # the steps the broker took besides the path's (an early refetch, an acknowledgement)
    extra: Counter = field(default_factory=Counter)
    divergences: int = 0

    def add(self, visited: set, taken: set[str]) -> None:
        self.runs += 1
        self.states |= visited & self.graph.depth_of.keys()
        self.actions |= taken
        for name, test in FEATURES.items():
            if any(test(s) for s in visited):
                self.features[name] += 1

    def unreached_by_action(self) -> Counter:
        """Graph states not reached, by the action the search first reached them with."""
        return Counter(self.graph.parent[s][1].name for s in self.graph.depth_of
                       if s not in self.states and s in self.graph.parent)

    def to_json(self) -> dict:
        g = self.graph
        return {
            "runs": self.runs, "graph_states": len(g.depth_of), "depth": g.depth,
            "states_reached": len(self.states),
            "graph_actions": sorted(g.actions),
            "actions_reached": sorted(self.actions & g.actions),
            "actions_not_reached": sorted(g.actions - self.actions),
            "unreached_states_by_action": dict(self.unreached_by_action().most_common()),
            "features": {name: self.features[name] for name in FEATURES},
            "stuck": dict(self.stuck.most_common()), "extra": dict(self.extra.most_common()),
            "divergences": self.divergences,
        }


def directed(cluster: ClusterConfig, graph: Graph, max_paths: int | None = None,
             seed: int = 0) -> Coverage:
    """Drive covering paths of `graph` through the broker (`max_paths` of them, drawn with
    `seed`, when there are more)."""
    paths = graph.covering_paths()
    if max_paths is not None and len(paths) > max_paths:
        paths = [paths[i] for i in sorted(random.Random(seed).sample(range(len(paths)),
                                                                      max_paths))]
    cov = Coverage(graph)
    for leaf, path in paths:
        driver = Driver(cluster, collect_states=True)
        result = driver.drive([(a.name, a.args()) for a in path])
        if result.stuck is not None:
            cov.stuck[result.stuck["action"]] += 1
        elif leaf not in driver.visited:
            cov.extra.update(Counter(a.name for a in driver.taken)
                             - Counter(a.name for a in path))
        cov.add(driver.visited, {a.name for a in driver.taken})
    return cov


def campaign(cluster: ClusterConfig, graph: Graph, runs: int, seed: int, duration_ms: int,
             nemesis: tuple[str, ...]) -> Coverage:
    """Seeded simulator runs, each replayed, against the same graph."""
    cov = Coverage(graph)
    for k in range(runs):
        options = SimOptions(seed=seed + k, duration_ms=duration_ms, nemesis=nemesis)
        result = Simulation(cluster, options).run()
        seen: set = {initial_state(graph.config)}
        taken: list = []
        replayed = replay_run(load_texts(result.traces, result.run_json()), visited=seen,
                              taken=taken)
        if replayed.verdict != "accepted":
            cov.divergences += 1
        cov.add(seen, {a.name for a in taken})
    return cov
