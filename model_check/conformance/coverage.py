"""Coverage both ways: which spec states and actions the reference broker reaches, when the
spec's paths drive it (directed runs) and when random faults do (campaigns).

The yardstick is the spec's state graph of one small configuration, explored breadth-first to
a depth: its states, and the actions that fire in it. Directed runs drive a covering set of
paths (every root-to-leaf path of the breadth-first tree, so together they pass through every
state of the graph) through `model_check.conformance.drive`; campaigns run the seeded simulator. Either
way the replay of the run records every spec state it reaches, and a state of the graph counts
as reached when the replay passes through exactly that state. Spec states carry the spec's own
value numbering (the replay renames the broker's values), so the two sides compare as values.

The graph is explored with the replay's own config (the run's protocol settings) plus the
exploration bounds, so a path of the graph is a path replay can take.

`spec.features.FEATURES` names states that matter to the invariants (a window in which a known
bug can happen); the report counts how many runs reach each, so nemesis settings can be chosen
by coverage rather than by guess.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from impl.config import ClusterConfig
from impl.sim import SimOptions, Simulation
from impl.trace import header_config
from model_check.conformance.drive import Driver
from model_check.conformance.replay import load_texts, replay_run, spec_config
from spec import Config, initial_state
from spec.actions import successors
from spec.features import FEATURES
from spec.state import Cluster

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


def explore(config: Config, depth: int, progress: Callable[..., None] | None = None) -> Graph:
    """The spec's graph breadth-first to `depth` steps; `progress(states, depth=d)` after
    each level."""
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
        if progress is not None:
            progress(len(depth_of), depth=d)
    return Graph(config, depth, depth_of, parent, actions)


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
             seed: int = 0, progress: Callable[..., None] | None = None) -> Coverage:
    """Drive covering paths of `graph` through the broker (`max_paths` of them, drawn with
    `seed`, when there are more); `progress(paths_driven, states=...)` after each."""
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
        if progress is not None:
            progress(cov.runs, states=len(cov.states))
    return cov


def campaign(cluster: ClusterConfig, graph: Graph, runs: int, seed: int, duration_ms: int,
             nemesis: tuple[str, ...], progress: Callable[..., None] | None = None) -> Coverage:
    """Seeded simulator runs, each replayed, against the same graph; `progress(runs_done,
    states=...)` after each."""
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
        if progress is not None:
            progress(cov.runs, states=len(cov.states))
    return cov
