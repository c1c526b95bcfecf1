"""Partial-order reduction for the explorer: fewer transitions computed, the same states found.

Two action instances (an action with its broker ids fixed, `symbolic.action_table`) are
independent when neither writes a state field the other reads or writes; the relation is read
off the Z3 builders (`prove.independent_pairs`, also what BMC's normal form uses). From any
state where both are enabled, either order is enabled and ends in the same state, so runs
that differ only by swapping independent neighbours reach the same states.

The reduction. Number the instances in table order. After a step by instance k, a next step
by an instance j is not taken when j is independent of k and either j < k, or j was already
ruled out before k's step (then j is independent of k and of every step since the larger
instance that ruled it out): in each case j's step could be moved in front of those steps,
giving a run that reaches the same state with a smaller instance earlier. A state reached by
several steps from the level above keeps only what every one of them rules out (the
intersection), and an initial state rules out nothing.

Why no state is lost, and each is found at its own depth (so BFS's shortest counterexamples
stay shortest). Take a state t at distance d and a shortest run to it; among the runs equal to
it up to swaps of independent neighbours, take the lexicographically smallest, w (same length,
same last state). No step of w comes after a larger instance it is independent of, together
with every step between them, or moving it in front would give a smaller run (this is what
makes a run the smallest of its class: Anisimov and Knuth's characterisation of lexicographic
normal forms). Every prefix of w is a shortest run to its own last state (a prefix of a shortest
run is one). By induction on the prefix length k: the state after k steps of w is found at
depth k, and one of the steps that find it is w's k-th, taken from the state after k - 1 steps;
along w, what is ruled out after k steps is exactly the instances that w's condition forbids
next, and what the search keeps is a subset of it (an intersection, and the rule is monotone
in what was ruled out before), so w's next step is taken. Only steps from one level to the
next are recorded: a state's depth is its distance, so a step into it from deeper is not on a
shortest run. The argument needs every step's instance to be a function of the step, every
pair called independent to commute in the explorer's own transition relation, and every step
into a state to count: with several workers, each reports its own intersection and the
coordinator ANDs them before the state is expanded (`explore`).

A produce addressed by stale metadata (`ProducerSend` with a broker), which the explorer
offers, is not in the encoding: it is made independent of nothing. Everything else the
explorer offers is an encoded instance whose guard includes the explorer's own conditions for
offering it (`candidates` only skips steps its handler would refuse), so commuting in the
encoding is commuting in the explorer's relation. The encoding has one partition and none of
the KIP-966 (ELR), controller-failover or asynchronous-ISR rules, and its named variants only;
other configs are refused (`problem`). `tests/test_por.py` checks that the reduced search
visits exactly the states of the full one, depth by depth, on several configs; that a wrong
independence (a fetch request and its handling) is caught by that comparison; that a step's
instance is the one `symbolic.instance_for` names (both read it with `symbolic.instance_key`,
which the differential test checks against the spec); and that a counterexample is the full
search's.

A step's count in the coverage table is the steps taken, so it is lower than without the
reduction.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from model_check.explore.model import core_problem
from spec import VARIANTS, Config
from spec.actions import NotEnabled, apply_candidate, candidates
from spec.state import Cluster


def problem(config: Config) -> str | None:
    """Why the reduction cannot be used for `config`, or None when it can."""
    why = core_problem(config)
    if why is not None:
        return f"{why}: not in the Z3 encoding the independence is read from"
    if VARIANTS.get(config.variant.name) != config.variant:
        return f"variant {config.variant.name!r} is not one of the named variants"
    return None


class Reduction:
    """The independence relation of one config's action instances, as bit masks."""

    def __init__(self, config: Config):
        why = problem(config)
        if why is not None:
            raise ValueError(f"partial-order reduction: {why}")
        # Imported here: Z3 is needed only when the reduction is asked for.
        from model_check.prove import symbolic as sym
        from model_check.prove.engine import independent_pairs

        shape = sym.make_shape(config, bounded=True)
        table = sym.action_table(shape)
        pairs = independent_pairs(shape, table)
        self.config = config
        self.size = len(table)
        self.index = {(inst.name, inst.brokers): k for k, inst in enumerate(table)}
        self._key = sym.instance_key
        # independent[k]: the instances independent of k; below[k]: those numbered below k.
        self.independent = [0] * self.size
        for i, j in pairs:
            self.independent[i] |= 1 << j
            self.independent[j] |= 1 << i
        self.below = [(1 << k) - 1 for k in range(self.size)]
        self.pairs = pairs

    def after(self, ruled_out: int, k: int) -> int:
        """What a step by instance k rules out next, given what was ruled out before it: the
        smaller instances independent of k, and whatever was ruled out that is independent of
        k (it could still have been moved in front of k's step and the ones before)."""
        if k < 0:
            return 0
        return (ruled_out | self.below[k]) & self.independent[k]

    def instance(self, state: Cluster, action: Any) -> int:
        """The instance index of a step, or -1 for one the encoding lacks (dependent on all)."""
        return self.index.get(self._key(action, state), -1)

    def successors(self, state: Cluster, ruled_out: int) -> Iterator[tuple[Any, int, int, Cluster]]:
        """(action, instance, candidate index, next state) of each enabled step not ruled out."""
        config, instance = self.config, self.instance
        for position, action in enumerate(candidates(config, state)):
            k = instance(state, action)
            if k >= 0 and ruled_out >> k & 1:
                continue
            try:
                nxt = apply_candidate(config, state, action)
            except NotEnabled:
                continue
            yield action, k, position, nxt

    def successor_at(self, state: Cluster, position: int) -> tuple[Any, Cluster]:
        """The step of `state`'s candidate number `position` (how a trace is rebuilt)."""
        for i, action in enumerate(candidates(self.config, state)):
            if i == position:
                return action, apply_candidate(self.config, state, action)
        raise IndexError(f"no candidate {position}")
