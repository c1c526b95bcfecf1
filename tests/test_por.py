"""Partial-order reduction (model_check.prove.por): the reduced search finds exactly the states of
the full one, each at the same depth, and the full search's counterexample state at the same
length; a wrong independence relation is caught by the same comparison, and a step's instance
is the one the Z3 encoding names."""

from __future__ import annotations

import pytest

from model_check.explore.explorer import explore
from model_check.explore.model import KafkaModel, RunGhostModel
from model_check.prove import symbolic as sym
from model_check.prove.houdini import random_walks
from model_check.prove.por import Reduction, problem
from spec import INVARIANTS, VARIANTS, Config, initial_state, step
from spec.actions import successors

CONFIGS = {
    # (config, depth): whole graphs at two brokers, the first levels at three
    "current-2": (Config(variant=VARIANTS["current"], brokers=2, max_records=1,
                         max_leader_epochs=2, max_crashes=1), None),
    "kip-101-2": (Config(variant=VARIANTS["kip-101"], brokers=2, max_records=1,
                         max_leader_epochs=2, max_crashes=1, max_session_expiries=1,
                         replica_lag_max_messages=1, log_flush_interval_messages=1), None),
    # three brokers, every fault the encoding has, acks=1, unclean election
    "kip-320-3": (Config(variant=VARIANTS["kip-320"], brokers=3, acks="1", max_records=1,
                         max_leader_epochs=2, max_crashes=1, max_ticks=1, max_message_drops=1,
                         unclean_leader_election_enable=True), 9),
}


def _levels(model: KafkaModel, reduce: bool, depth: int | None = None,
            reduction: Reduction | None = None) -> tuple:
    """(verdict, distinct states per depth, generated) of a whole search."""
    levels: list[int] = []

    def seen(p: dict) -> None:
        levels.append(p["distinct"])

    if reduce and reduction is None:
        reduction = Reduction(model.config)
    result = explore(model, reduction=reduction if reduce else None, progress=seen,
                     check_invariants=False, max_depth=depth)
    return result.result, levels, result.generated_states


# Searched with two workers too, against the same full search.
TWO_WORKERS = {"kip-101-2", "kip-320-3"}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_the_reduced_search_finds_every_state_at_its_depth(name):
    config, depth = CONFIGS[name]
    full = _levels(KafkaModel(config), reduce=False, depth=depth)
    reduced = _levels(KafkaModel(config), reduce=True, depth=depth)
    assert full[0] == reduced[0] == "ok"
    assert reduced[1] == full[1]  # the same count at every depth: the same states
    assert reduced[2] < 0.85 * full[2]  # and fewer transitions computed
    if name in TWO_WORKERS:
        # A state two workers both reach must keep only what both rule out: the coordinator
        # ANDs their masks. Counts per depth equal the full search's, as with one worker.
        two = explore(KafkaModel(config), reduction=Reduction(config), workers=2,
                      check_invariants=False,
                      max_depth=depth)
        assert two.distinct_states == full[1][-1]
        assert two.generated_states < 0.85 * full[2]


def test_a_wrong_independence_loses_states():
    # A follower's fetch request is what the leader handles: the two are dependent. Called
    # independent, a request is never handled right after it is sent (the handling has the
    # smaller number), the reduced search misses states, and the comparison above says so.
    config = CONFIGS["current-2"][0]
    wrong = Reduction(config)
    handle = wrong.index[("LeaderHandleFetch", (0, 1))]
    send = wrong.index[("FollowerSendFetch", (1,))]
    assert handle < send and (handle, send) not in wrong.pairs
    wrong.independent[handle] |= 1 << send
    wrong.independent[send] |= 1 << handle
    full = _levels(KafkaModel(config), reduce=False)
    reduced = _levels(KafkaModel(config), reduce=True, reduction=wrong)
    assert reduced[1][-1] < full[1][-1]


def test_the_reduced_search_gives_a_shortest_counterexample_that_replays():
    # B1 at two brokers: a truncation to the HW loses a committed record.
    config = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1,
                    max_leader_epochs=2, max_crashes=1)
    full = explore(KafkaModel(config))
    reduced = explore(KafkaModel(config), reduction=Reduction(config))
    assert full.result == reduced.result == "violation"
    assert reduced.violation.invariant == full.violation.invariant == "NoCommittedDataLoss"
    assert len(reduced.violation.trace) == len(full.violation.trace)
    assert reduced.distinct_states == full.distinct_states
    # The same violating state (the same states at the same depth, the first in the same
    # order), reached by a run of the spec that ends in it.
    assert reduced.violation.trace[-1][1] == full.violation.trace[-1][1]
    state = reduced.violation.trace[0][1]
    for action, after in reduced.violation.trace[1:]:
        state = step(config, state, action)
        assert state == after
    assert INVARIANTS["NoCommittedDataLoss"](config, state) is not None


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_step_has_the_instance_the_encoding_names(name):
    # The reduction looks instances up in its own index, by `symbolic.instance_key`, which
    # `instance_for` (what BMC and the differential test use) also reads.
    config = CONFIGS[name][0]
    reduction = Reduction(config)
    table = sym.action_table(sym.make_shape(config, bounded=True))
    kinds = set()
    for state in [initial_state(config), *random_walks(config, walks=30, steps=40, seed=7)]:
        for action, _ in successors(config, state):
            k = reduction.instance(state, action)
            if sym.encoded(action):
                assert table[k] is sym.instance_for(table, action, state), action
                kinds.add(action.name)
            else:
                assert k == -1, action
    assert len(kinds) >= 12


@pytest.mark.parametrize("changes, word", [
    (dict(partitions=2), "one partition"),
    (dict(eligible_leader_replicas_enable=True, min_insync_replicas=2), "KIP-966"),
    (dict(max_controller_failovers=1), "failovers"),
    (dict(isr_changes_async=True), "async"),
    (dict(variant=VARIANTS["current"].with_rules(fencing=False)), "named variants"),
])
def test_configs_the_encoding_lacks_are_refused(changes, word):
    config = Config(brokers=3, **changes)
    assert word in problem(config)
    with pytest.raises(ValueError, match="partial-order reduction"):
        Reduction(config)


def test_a_reduction_is_refused_for_another_model_or_config():
    config = CONFIGS["current-2"][0]
    with pytest.raises(ValueError, match="another config"):
        explore(KafkaModel(config.replace(max_crashes=0)), reduction=Reduction(config))
    with pytest.raises(ValueError, match="has none"):
        explore(RunGhostModel(config), reduction=Reduction(config))


def test_two_workers_report_the_same_counterexample():
    config = Config(variant=VARIANTS["hw-truncation"], brokers=2, max_records=1,
                    max_leader_epochs=2, max_crashes=1)
    one = explore(KafkaModel(config), reduction=Reduction(config))
    two = explore(KafkaModel(config), reduction=Reduction(config), workers=2)
    assert [label for label, _ in two.violation.trace] == [label for label, _ in one.violation.trace]
    assert two.violation.trace[-1][1] == one.violation.trace[-1][1]


def test_the_coordinator_ands_the_masks_of_a_state_two_workers_found():
    # The two-worker searches above do not catch a coordinator that keeps one worker's mask
    # instead of the AND (on those configs the workers' masks for a shared state agree), so
    # the merge is asked directly: one state found by both workers, with masks that differ.
    from array import array

    import numpy as np

    from model_check.explore.explorer import _merge_level, _Tree

    tree = _Tree()
    tree.add_level([7], [-1], [0])

    def reply(fps, parents, indices, masks):
        return ([], (fps, array("q", parents), array("H", indices), len(fps)), None, 0,
                np.array(masks, dtype=np.uint64))

    masks: dict[int, int] = {}
    fps, parent, index, owner = _merge_level(tree, [
        reply([10, 11, 7], [0, 0, 0], [2, 3, 4], [0b1100, 0b0001, 0b1111]),  # 7: visited
        reply([10, 12], [0, 0], [1, 5], [0b1010, 0b0110])], masks)
    assert fps.tolist() == [10, 11, 12]
    # 10: the second worker's step (index 1) is the smaller, so its parent and owner
    assert (parent[0], index[0], owner[0]) == (0, 1, 1)
    assert masks == {10: 0b1000, 11: 0b0001, 12: 0b0110}
