"""Enabledness is decided in one place: every action `step` accepts, `candidates` yields.

`candidates` is the explorer's cheap over-approximation of the enabled actions (`successors`
filters it through `step`). If it ever skipped an action that `step` accepts, the explorer, the
pinned counts and the Z3 checks would all miss the behaviour that action leads to, while
replay, which calls `step` directly, would still admit it.

The check: random walks over several configs, each step drawn from the actions `step` accepts
(so the walks do not depend on `candidates`), and at every visited state every action of a
finite universe (every action type with every argument value in the config's ranges, and the
LeaderAndIsr keys in flight) that `step` accepts must be among those `candidates` yields.
Walks are seeded (the seed is printed and named in every failure). A mutant `candidates` that
drops one action type shows the check failing.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

import pytest

import spec.actions as actions
from spec import VARIANTS, Config, NotEnabled, initial_state, step
from spec import actions as S
from spec.actions import ACTION_TYPES, Action
from spec.state import Cluster

SEED = 1207
WALK_STEPS = 40

_BOUNDS = dict(max_records=2, max_leader_epochs=3, max_crashes=1, max_session_expiries=1,
               max_message_drops=1, max_ticks=2, max_partition_epoch=5)


def _config(variant: str, **changes: object) -> Config:
    return Config(variant=VARIANTS[variant], **{**_BOUNDS, **changes})


CONFIGS: dict[str, Config] = {
    "current 2b": _config("current", brokers=2),
    "current 3b 2p acks=1 unclean": _config("current", brokers=3, partitions=2, acks="1",
                                            unclean_leader_election_enable=True),
    "hw-truncation 2b 2p acks=0 flush=1": _config("hw-truncation", brokers=2, partitions=2,
                                                  acks="0", log_flush_interval_messages=1),
    "kip-101 3b min.isr=2 lag.messages=1": _config("kip-101", brokers=3, min_insync_replicas=2,
                                                   replica_lag_max_messages=1, max_crashes=2),
    "kip-279 2b unclean": _config("kip-279", brokers=2, unclean_leader_election_enable=True,
                                  max_message_drops=2),
    "kip-320 3b": _config("kip-320", brokers=3, max_ticks=3),
    "current 2b, abstractions on": _config("current", brokers=2, leader_keeps_last_fetch=False,
                                           recovery_truncates_epoch_cache=False),
    "current 2b ELR, async ISR changes": _config("current", brokers=2, min_insync_replicas=2,
                                                eligible_leader_replicas_enable=True,
                                                isr_changes_async=True, max_ticks=3),
}


def universe(config: Config, state: Cluster) -> list[Action]:
    """Every action instance with arguments in the config's ranges, in a fixed order.

    LeaderAndIsr-keyed actions take every key in flight plus a small grid of epochs (a request
    that is not in flight must be refused, so the grid checks that too). Values and offsets run
    one past the record bound.
    """
    parts, brokers = range(config.partitions), range(config.brokers)
    values = range(config.max_records + 2)
    keys = {(m.partition, m.broker, m.leader_epoch, m.partition_epoch)
            for m in state.leader_and_isr}
    keys |= set(itertools.product(parts, brokers, range(-1, 3), range(-1, 3)))
    out: list[Action] = []
    for p in parts:
        out += [S.ControllerElectLeader(p), S.ControllerElectPreferredLeader(p), S.ConsumerRead(p),
                S.ProducerSend(p)]
        for b in brokers:
            out += [S.ProducerSend(p, b), S.NetworkDropFetch(p, b), S.FollowerSendFetch(p, b),
                    S.FollowerHandleFetchResponse(p, b), S.BrokerFlush(p, b)]
            out += [S.LeaderAppend(p, b, v) for v in values]
            out += [S.LeaderAckProduce(p, b, o) for o in values]
            for f in brokers:
                out += [S.LeaderHandleFetch(p, b, f), S.LeaderShrinkIsr(p, b, f),
                        S.LeaderExpandIsr(p, b, f)]
    for key in sorted(keys):
        out += [S.BecomeLeader(*key), S.BecomeFollower(*key), S.NetworkDropLeaderAndIsr(*key)]
    alter_keys = {(m.partition, m.leader, m.leader_epoch, m.partition_epoch)
                  for m in state.alter_partitions}
    alter_keys |= set(itertools.product(parts, brokers, range(0, 2), range(0, 3)))
    for key in sorted(alter_keys):
        out += [S.ControllerHandleAlterPartition(*key),
                S.LeaderHandleAlterPartitionResponse(*key)]
    for b in brokers:
        out += [S.ControllerHandleBrokerFailure(b), S.BrokerCrash(b), S.BrokerRestart(b),
                S.BrokerRegister(b)]
    out.append(S.Tick())
    return out


def accepted(config: Config, state: Cluster) -> list[tuple[Action, Cluster]]:
    """The universe's actions that `step` accepts, with the states they lead to."""
    out = []
    for action in universe(config, state):
        try:
            out.append((action, step(config, state, action)))
        except NotEnabled:
            continue
    return out


def missed_actions(config: Config, state: Cluster,
                   enabled: list[tuple[Action, Cluster]] | None = None) -> list[Action]:
    """The actions `step` accepts in `state` that `candidates` does not yield (should be none).

    `candidates` is looked up on `spec.actions` at each call, so a test can swap in a mutant.
    """
    if enabled is None:
        enabled = accepted(config, state)
    yielded = set(actions.candidates(config, state))
    return [action for action, _ in enabled if action not in yielded]


def test_unpruned_candidates_offer_every_pruned_one_and_the_refused_ones():
    """The scenario runner fills a step's arguments from unpruned candidates, so a step a
    guard refuses is still named with that guard: on random walks, pruning only removes."""
    more = 0
    for seed, variant in enumerate(("current", "hw-truncation", "kip-320")):
        config = Config(variant=VARIANTS[variant], brokers=3, max_records=2, max_leader_epochs=3,
                        max_crashes=1)
        rng = random.Random(seed)
        for _ in range(20):
            state = initial_state(config)
            for _ in range(30):
                pruned = set(actions.candidates(config, state))
                full = set(actions.candidates(config, state, prune=False))
                assert pruned <= full
                more += len(full - pruned)
                options = [nxt for _, nxt in actions.successors(config, state)]
                if not options:
                    break
                state = rng.choice(options)
    assert more > 0


@dataclass
class WalkReport:
    seed: int
    states: int = 0
    missed: list[tuple[str, int, int, Action]] = field(default_factory=list)  # config, walk, step
    fired: set[str] = field(default_factory=set)  # action types `step` accepted somewhere

    def first_missed(self) -> str:
        name, walk, index, action = self.missed[0]
        return (f"seed {self.seed}, config {name!r}, walk {walk}, step {index}: step accepts "
                f"{action} but candidates does not yield it "
                f"({len(self.missed)} missed in all)")


def check_walks(configs: dict[str, Config], seed: int, walks: int,
                steps: int = WALK_STEPS) -> WalkReport:
    """Random walks (drawn from what `step` accepts); `missed_actions` at every state."""
    print(f"enabledness walks: seed {seed}, {walks} walks of {steps} steps per config")
    report = WalkReport(seed)
    for config_index, (name, config) in enumerate(configs.items()):
        rnd = random.Random(seed * 1000 + config_index)
        for walk in range(walks):
            state = initial_state(config)
            for index in range(steps):
                enabled = accepted(config, state)
                report.states += 1
                report.fired.update(action.name for action, _ in enabled)
                report.missed += [(name, walk, index, action)
                                  for action in missed_actions(config, state, enabled)]
                if not enabled:
                    break
                state = rnd.choice(enabled)[1]
    return report


def test_step_and_candidates_agree_on_random_walks():
    report = check_walks(CONFIGS, SEED, walks=3)
    assert not report.missed, report.first_missed()
    # Not vacuous: the walks reach states where every action type is enabled.
    assert report.fired == {t.__name__ for t in ACTION_TYPES}, (
        f"seed {SEED}: never enabled: {sorted({t.__name__ for t in ACTION_TYPES} - report.fired)}")
    assert report.states > 500


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_step_and_candidates_agree_on_longer_walks(seed):
    report = check_walks(CONFIGS, seed, walks=10, steps=80)
    assert not report.missed, report.first_missed()


def _dropping(kind: type[Action]):
    real = actions.candidates

    def mutant(config, state):
        return (a for a in real(config, state) if type(a) is not kind)

    return mutant


@pytest.mark.parametrize("kind", [S.ControllerElectPreferredLeader, S.LeaderShrinkIsr, S.Tick,
                                  S.NetworkDropLeaderAndIsr])
def test_a_candidates_that_drops_an_action_type_is_caught(monkeypatch, kind):
    monkeypatch.setattr(actions, "candidates", _dropping(kind))
    report = check_walks(CONFIGS, SEED, walks=3)
    assert report.missed, f"dropping {kind.__name__} went unnoticed"
    assert {type(action) for _, _, _, action in report.missed} == {kind}


def test_the_checker_reports_a_dropped_instance_in_one_state(monkeypatch):
    config = CONFIGS["current 2b"]
    state = initial_state(config)
    assert missed_actions(config, state) == []
    monkeypatch.setattr(actions, "candidates", _dropping(S.ProducerSend))
    assert missed_actions(config, state) == [S.ProducerSend(0)]
