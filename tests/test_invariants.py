"""Every invariant holds on reachable states and fails, with its exact detail, where it must.

A check that has never failed has not been shown to check anything: each invariant is shown
violated, on a state reached by actions where a protocol variant or a trade-off allows it and
on a crafted state otherwise.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import replace

import pytest
from conftest import cfg, fetch, produce, run, run_from, v

from spec import INVARIANTS, initial_state, successors, violations
from spec.actions import (
    BecomeLeader,
    BrokerCrash,
    BrokerRestart,
    ConsumerRead,
    ControllerElectLeader,
    ControllerHandleBrokerFailure,
    LeaderAckProduce,
    LeaderExpandIsr,
    LeaderShrinkIsr,
    Tick,
)
from spec.state import Acked, LeaderAndIsr, PartitionState

VARIANT_NAMES = ("hw-truncation", "kip-101", "kip-279", "kip-320", "current")


def reachable(config, limit: int = 10_000):
    """Every state reachable from the initial one (breadth first), at most `limit`."""
    start = initial_state(config)
    seen = {start}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        for _, nxt in successors(config, state):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
                assert len(seen) <= limit, "state space larger than the test expects"
    return seen


# Holding ----------------------------------------------------------------------------------


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_every_invariant_holds_on_every_state_without_failures(variant):
    # Two brokers, one write, one tick, no crashes, no expiries or drops: no variant may lose
    # anything here.
    config = cfg(variant, brokers=2, max_records=1, max_ticks=1, max_crashes=0,
                 max_leader_epochs=2, max_session_expiries=0, max_message_drops=0)
    states = reachable(config)
    assert len(states) > 100
    assert [violations(config, s) for s in states if violations(config, s)] == []


@pytest.mark.parametrize("seed", range(3))
def test_every_invariant_holds_on_random_walks_of_the_current_protocol(seed):
    # Crashes, live session expiries (zombies) and lost LeaderAndIsr requests included: the
    # current protocol with acks=all and clean election is safe.
    config = cfg("current", brokers=3, max_records=2, max_crashes=2, max_ticks=3,
                 max_leader_epochs=4, min_insync_replicas=2, max_session_expiries=1,
                 max_message_drops=1)
    rng = random.Random(seed)
    checked = 0
    for _ in range(40):
        state = initial_state(config)
        for _ in range(40):
            options = list(successors(config, state))
            if not options:
                break
            _, state = rng.choice(options)
            assert violations(config, state) == []
            checked += 1
    assert checked > 1000


@pytest.mark.parametrize("variant", VARIANT_NAMES)
def test_invariants_hold_initially(variant):
    for brokers in (1, 2, 3):
        config = cfg(variant, brokers=brokers, partitions=2)
        state = initial_state(config)
        assert {name: check(config, state) for name, check in INVARIANTS.items()} == {
            name: None for name in INVARIANTS
        }


# Violated ---------------------------------------------------------------------------------


def crafted_hw_above_leo():
    config = cfg(brokers=2)
    state = run(config, produce(1), fetch(1))
    follower = replace(state.replica(0, 1), high_watermark=2)
    return config, state.with_replica(0, 1, follower)


def crafted_leader_outside_controller_isr():
    config = cfg(brokers=2)
    state = initial_state(config)
    return config, state.with_partition_state(0, PartitionState(1, 0, (0,), 1))


def crafted_leader_outside_its_isr_view():
    config = cfg(brokers=2)
    state = initial_state(config)
    return config, state.with_replica(0, 0, replace(state.replica(0, 0), isr=(1,)))


def reached_stale_broker_epoch_rejoin():
    """B7 under kip-320: follower 1 crashes with nothing flushed, and the leader re-admits it
    from its last fetch (offset 1, before the crash); it restarts with an empty log."""
    config = cfg("kip-320", brokers=2, max_records=1, max_crashes=1, max_leader_epochs=3)
    state = run(config, produce(1), fetch(1), fetch(1)[:2], BrokerCrash(1),
                ControllerHandleBrokerFailure(1), BecomeLeader(0, 0, 1, 1),
                LeaderExpandIsr(0, 0, 1), BrokerRestart(1))
    return config, state


def crafted_diverged_logs():
    config = cfg(brokers=2)
    state = run(config, produce(1), fetch(1), fetch(1))
    follower = replace(state.replica(0, 1), log=(v(2, 1),), epoch_cache=((1, 0),),
                       high_watermark=1)
    return config, state.with_replica(0, 1, follower)


def reached_acks_1_loss():
    """B10: acks=1, the leader acknowledges and crashes before any follower fetched."""
    config = cfg("current", brokers=2, acks="1", max_crashes=1)
    state = run(config, produce(1), BrokerCrash(0), ControllerHandleBrokerFailure(0),
                BecomeLeader(0, 1, 1, 1))
    return config, state


def reached_unclean_election_loss():
    """B9: the ISR shrinks to the leader, a consumer reads v1, the leader dies and the
    lagging replica is elected uncleanly."""
    config = cfg("current", brokers=2, unclean_leader_election_enable=True, max_crashes=1,
                 log_flush_interval_messages=1)
    state = run(config, produce(1), Tick(), Tick(), LeaderShrinkIsr(0, 0, 1), ConsumerRead(0),
                BrokerCrash(0), ControllerHandleBrokerFailure(0), BecomeLeader(0, 1, 1, 2))
    return config, state


def _last_replica_standing(**changes):
    """B8's prefix: v1 committed on both brokers, broker 1's session expires (ISR {0}), the ack
    comes, broker 0 crashes unflushed and is fenced, then restarts."""
    config = cfg("current", brokers=2, min_insync_replicas=2, max_crashes=1,
                 max_leader_epochs=3, max_session_expiries=1, **changes)
    state = run(config, produce(1), fetch(1), fetch(1)[:2], ControllerHandleBrokerFailure(1),
                LeaderAckProduce(0, 0, 0), BrokerCrash(0), ControllerHandleBrokerFailure(0),
                BrokerRestart(0))
    return config, state


def reached_last_replica_standing_restart():
    """B8 with ELR off: the restarted broker 0, empty, is still the ISR's last member."""
    return _last_replica_standing()


def reached_last_replica_standing_loss():
    """B8 with ELR off: broker 0 is elected again and leads without v1."""
    config, state = _last_replica_standing()
    return config, run_from(config, state, ControllerElectLeader(0), BecomeLeader(0, 0, 2, 3))


def crafted_elr_beside_a_full_isr():
    """ELR on, but the store lists an ELR member beside an ISR of min ISR size."""
    config = cfg("current", brokers=3, min_insync_replicas=2,
                 eligible_leader_replicas_enable=True)
    state = initial_state(config)
    return config, state.with_partition_state(0, PartitionState(0, 0, (0, 1), 1, elr=(2,)))


def crafted_elr_overlapping_the_isr():
    """ELR on: broker 1 is in both the ISR and the ELR."""
    config = cfg("current", brokers=3, min_insync_replicas=2,
                 eligible_leader_replicas_enable=True)
    state = initial_state(config)
    return config, state.with_partition_state(0, PartitionState(0, 0, (0, 1), 1, elr=(1,)))


def crafted_isr_listing_a_broker_twice():
    """ELR off: the store's ISR names broker 1 twice."""
    config = cfg("current", brokers=3)
    return config, initial_state(config).with_partition_state(0, PartitionState(0, 0, (0, 1, 1), 1))


def crafted_isr_outside_the_replicas():
    """ELR off, replication factor 2: the ISR of p0 names broker 2, which holds no replica."""
    config = cfg("current", brokers=3, replication_factor=2)
    return config, initial_state(config).with_partition_state(0, PartitionState(0, 0, (0, 2), 1))


def crafted_log_epochs_down():
    config = cfg(brokers=2)
    state = run(config, produce(1))
    follower = replace(state.replica(0, 1), log=(v(1, 1), v(2, 0)))
    return config, state.with_partition_state(0, PartitionState(0, 1, (0, 1), 1)) \
        .with_replica(0, 1, follower)


def crafted_epoch_cache_not_increasing():
    config = cfg(brokers=2)
    state = initial_state(config)
    follower = replace(state.replica(0, 1), epoch_cache=((0, 1), (0, 2)))
    return config, state.with_replica(0, 1, follower)


def crafted_epoch_beyond_controller():
    config = cfg(brokers=2)
    state = initial_state(config)
    return config, state.with_replica(0, 1, replace(state.replica(0, 1), leader_epoch=1))


def crafted_two_leaders_one_epoch():
    config = cfg(brokers=2)
    state = initial_state(config)
    follower = replace(state.replica(0, 1), leader=1)
    return config, state.with_replica(0, 1, follower)


def _with_controller(state, active, epoch):
    return replace(state, controller=replace(state.controller, active=active, epoch=epoch))


def crafted_request_from_a_future_controller():
    config = cfg(brokers=3, max_controller_failovers=1)
    m = LeaderAndIsr(0, 0, 0, 1, (0,), 1, controller=0, controller_epoch=1)
    return config, replace(initial_state(config), leader_and_isr=frozenset({m}))


def crafted_two_controllers_one_epoch():
    # Broker 1 holds the role in controller epoch 1 while a request from broker 2 in the same
    # epoch is in flight (a failover that forgot to bump the epoch).
    config = cfg(brokers=3, max_controller_failovers=1)
    state = _with_controller(initial_state(config), 1, 1)
    m = LeaderAndIsr(0, 0, 0, 1, (0,), 1, controller=2, controller_epoch=1)
    return config, replace(state, leader_and_isr=frozenset({m}))


def crafted_broker_ahead_of_the_store():
    config = cfg(brokers=3, max_controller_failovers=1)
    return config, replace(initial_state(config), controller_epochs=(0, 0, 1))


VIOLATED = {
    "HighWatermarkBelowLogEnd": [
        (crafted_hw_above_leo, "p0 broker 1: HW 2 > LEO 1"),
    ],
    "LeaderInIsr": [
        (crafted_leader_outside_controller_isr, "p0: leader 1 not in ISR [0]"),
        (crafted_leader_outside_its_isr_view, "p0: broker 0 leads outside its ISR view [1]"),
    ],
    "NoCommittedDataLoss": [
        (reached_stale_broker_epoch_rejoin,
         "p0 offset 0: leader 0 has v1@e0 below HW 1, ISR member 1 has nothing"),
    ],
    "LogMatching": [
        (crafted_diverged_logs,
         "p0 offset 0: broker 0 has v1@e0, broker 1 has v2@e1, both below HW"),
    ],
    "AckedWritesDurable": [
        (reached_acks_1_loss,
         "p0: acknowledged v1 at offset 0 (acks=1) lost: leader 1 has nothing"),
    ],
    "AckedWritesDurableKip966": [
        (reached_last_replica_standing_loss,
         "p0: acknowledged v1 at offset 0 lost: leader 0 has nothing; 1 replica(s) lost it in "
         "crashes, fewer than min ISR 2"),
    ],
    "LeaderCandidatesComplete": [
        (reached_last_replica_standing_restart,
         "p0: ISR member 0 lacks acknowledged v1 at offset 0"),
    ],
    "EligibleReplicasWellFormed": [
        (crafted_elr_beside_a_full_isr, "p0: ELR [2] beside an ISR of min ISR size [0, 1]"),
        (crafted_elr_overlapping_the_isr, "p0: ELR [1] and ISR [0, 1] overlap"),
        (crafted_isr_listing_a_broker_twice,
         "p0: a broker is listed twice in ISR [0, 1, 1] or ELR []"),
        (crafted_isr_outside_the_replicas, "p0: ISR/ELR name a broker that holds no replica"),
    ],
    "ConsumerNeverSeesUncommitted": [
        (reached_unclean_election_loss, "p0: consumer read v1 at offset 0, leader 1 now has nothing"),
    ],
    "LeaderEpochMonotonic": [
        (crafted_log_epochs_down, "p0 broker 1: log epochs go down: [1, 0]"),
        (crafted_epoch_cache_not_increasing,
         "p0 broker 1: epoch cache not increasing: [(0, 1), (0, 2)]"),
        (crafted_epoch_beyond_controller, "p0 broker 1: epoch beyond the controller's 0"),
    ],
    "SingleLeaderPerEpoch": [
        (crafted_two_leaders_one_epoch, "p0: brokers 0 and 1 both lead epoch 0"),
    ],
    "SingleControllerPerEpoch": [
        (crafted_request_from_a_future_controller,
         "LeaderAndIsr to 0 carries controller epoch 1, the store is at 0"),
        (crafted_two_controllers_one_epoch, "controllers 1 and 2 both act in controller epoch 1"),
        (crafted_broker_ahead_of_the_store,
         "broker 2 has seen controller epoch 1, the store is at 0"),
    ],
}


def test_every_invariant_is_shown_violated():
    assert list(VIOLATED) == list(INVARIANTS)


@pytest.mark.parametrize(
    ("name", "build", "detail"),
    [(name, build, detail) for name, cases in VIOLATED.items() for build, detail in cases],
    ids=lambda x: x if isinstance(x, str) and " " not in x else getattr(x, "__name__", None),
)
def test_invariant_violated_with_its_detail(name, build, detail):
    config, state = build()
    assert INVARIANTS[name](config, state) == detail
    assert (name, detail) in violations(config, state)


def test_each_reached_violation_breaks_only_its_own_invariant():
    assert violations(*reached_stale_broker_epoch_rejoin()) == [
        ("NoCommittedDataLoss",
         "p0 offset 0: leader 0 has v1@e0 below HW 1, ISR member 1 has nothing"),
    ]
    assert violations(*reached_acks_1_loss()) == [
        ("AckedWritesDurable",
         "p0: acknowledged v1 at offset 0 (acks=1) lost: leader 1 has nothing"),
    ]
    assert violations(*reached_unclean_election_loss()) == [
        ("ConsumerNeverSeesUncommitted",
         "p0: consumer read v1 at offset 0, leader 1 now has nothing"),
    ]


def test_violations_lists_in_registry_order_and_filters_by_name():
    config, state = crafted_two_leaders_one_epoch()
    state = state.with_partition_state(0, PartitionState(1, 0, (0,), 1))
    assert [name for name, _ in violations(config, state)] == [
        "LeaderInIsr", "SingleLeaderPerEpoch"
    ]
    assert violations(config, state, names={"SingleLeaderPerEpoch"}) == [
        ("SingleLeaderPerEpoch", "p0: brokers 0 and 1 both lead epoch 0"),
    ]


# How crashes and the ghost `excused` set count -------------------------------------------


def test_a_crashed_isr_member_is_exempt_until_it_restarts():
    config, state = reached_stale_broker_epoch_rejoin()
    crashed = replace(state, alive=(True, False))  # the moment before the restart
    assert INVARIANTS["NoCommittedDataLoss"](config, crashed) is None


def test_no_true_leader_means_nothing_to_check_against():
    config = cfg("current", brokers=2, acks="1", max_crashes=1)
    state = run(config, produce(1), BrokerCrash(0), ControllerHandleBrokerFailure(0))
    # Broker 1 is the controller's leader but has not applied the LeaderAndIsr yet.
    assert INVARIANTS["AckedWritesDurable"](config, state) is None


def test_excused_writes_are_not_reported():
    config, state = reached_acks_1_loss()
    assert INVARIANTS["AckedWritesDurable"](config, replace(state, excused=frozenset({1}))) is None
    config, state = reached_unclean_election_loss()
    assert INVARIANTS["ConsumerNeverSeesUncommitted"](
        config, replace(state, excused=frozenset({1}))) is None
    config, state = crafted_diverged_logs()
    assert INVARIANTS["LogMatching"](config, replace(state, excused=frozenset({2}))) is None


def test_acks_all_write_lost_by_every_isr_member_is_excused():
    # Both replicas lose the acknowledged v1 (nothing flushed): the guarantee's condition
    # ("one in-sync replica alive") failed, so its loss is excused, not a violation.
    config = cfg("current", brokers=2, max_crashes=2, max_leader_epochs=4)
    state = run(config, produce(1), fetch(1), fetch(1), LeaderAckProduce(0, 0, 0),
                BrokerCrash(1), BrokerCrash(0))
    assert state.excused == {1}
    assert state.acked == {Acked(0, 0, 1)}
    state = run(config, produce(1), fetch(1), fetch(1), LeaderAckProduce(0, 0, 0),
                BrokerCrash(1), BrokerCrash(0), ControllerHandleBrokerFailure(1),
                ControllerHandleBrokerFailure(0), BrokerRestart(0))
    assert violations(config, state) == []
