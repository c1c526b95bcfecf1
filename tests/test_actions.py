"""Every action's guard (enabled, and not enabled with its reason) and its exact effect.

States are reached by action sequences from `initial_state`; a few guards that no reachable
state can fail (a message to a broker that is down: crashes drop those) are shown on states
built with `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import replace

import pytest
from conftest import cfg, fetch, not_enabled, outcome, outcomes, produce, refused, run, run_from, v

from spec import (
    ACTION_TYPES,
    ACTIONS_BY_COMMAND,
    ACTIONS_BY_NAME,
    NotEnabled,
    enabled,
    initial_state,
    step,
    successors,
)
from spec import actions as S
from spec.actions import LeaderAndIsr, candidates
from spec.state import (
    Acked,
    EpochRequest,
    FetchRequest,
    FetchResponse,
    PartitionState,
    PendingProduce,
    ProduceRequest,
    Record,
    Replica,
)
from vocab.outcomes import Code, Outcome, Refusal


def offline(variant: str = "current", **changes):
    """Two brokers; follower 1 then leader 0 crash and both sessions expire: p0 is offline
    with ISR {0} (the last member is kept) in leader epoch 1 (2 when shrinks bump it)."""
    config = cfg(variant, brokers=2, max_crashes=3, max_leader_epochs=5, **changes)
    state = run(
        config,
        S.BrokerCrash(1),
        S.ControllerHandleBrokerFailure(1),
        S.BrokerCrash(0),
        S.ControllerHandleBrokerFailure(0),
    )
    return config, state


def committed_v1(variant: str = "current", **changes):
    """Three brokers; v1 is on every replica and committed: leader HW 1, followers HW 0 (they
    learn HW 1 one fetch round trip later); v1 still in purgatory."""
    config = cfg(variant, brokers=3, **changes)
    return config, run(config, produce(1), fetch(1), fetch(2), fetch(1), fetch(2))


# ------------------------------------------------------------------------------------------
# S.ControllerElectLeader


def test_elect_leader_not_enabled_while_the_partition_has_a_leader():
    config = cfg(brokers=2)
    assert not_enabled(config, initial_state(config), S.ControllerElectLeader(0)) == (
        refused(Refusal.HAS_LEADER, partition=0, leader=0)
    )


def test_offline_partition_keeps_its_last_isr_member():
    config, state = offline()
    assert state.controller.partitions[0] == PartitionState(-1, 1, (0,), 2)
    assert state.controller.registered == (-1, -1)
    assert state.leader_and_isr == frozenset()  # nobody is alive to receive it


def test_elect_leader_clean_needs_a_live_isr_member():
    config, state = offline()
    state = run_from(config, state, S.BrokerRestart(1))  # 1 is alive but not in the ISR
    assert not_enabled(config, state, S.ControllerElectLeader(0)) == (
        refused(Refusal.NO_LIVE_ISR_REPLICA)
    )


def test_elect_leader_clean_picks_the_returning_isr_member():
    config, state = offline()
    state = run_from(config, state, S.BrokerRestart(1), S.BrokerRestart(0))
    before = state.leader_and_isr
    state, said = outcome(config, state, S.ControllerElectLeader(0))
    assert said == Outcome(Code.ELECTED_CLEAN, leader=0, leader_epoch=2)
    assert state.controller.partitions[0] == PartitionState(0, 2, (0,), 3)
    assert state.controller.unclean_elections == 0
    assert state.leader_and_isr - before == {
        LeaderAndIsr(0, 0, 0, 2, (0,), 3),
        LeaderAndIsr(1, 0, 0, 2, (0,), 3),
    }


def test_elect_leader_unclean_picks_any_live_replica_and_resets_the_isr():
    config, state = offline(unclean_leader_election_enable=True)
    assert not_enabled(config, state, S.ControllerElectLeader(0)) == refused(Refusal.NO_LIVE_REPLICA)
    state = run_from(config, state, S.BrokerRestart(1))
    state, said = outcome(config, state, S.ControllerElectLeader(0))
    assert said == Outcome(Code.ELECTED_UNCLEAN, leader=1, leader_epoch=2)
    assert state.controller.partitions[0] == PartitionState(1, 2, (1,), 3)
    assert state.controller.unclean_elections == 1
    assert LeaderAndIsr(1, 0, 1, 2, (1,), 3) in state.leader_and_isr


def test_elect_leader_respects_the_leader_epoch_bound():
    config, state = offline()
    config = config.replace(max_leader_epochs=2)  # epoch 1 exists; 2 would be out of bounds
    state = run_from(config, state, S.BrokerRestart(0))
    assert not_enabled(config, state, S.ControllerElectLeader(0)) == (
        refused(Refusal.LEADER_EPOCH_BOUND)
    )


def test_actions_check_partition_and_broker_ranges():
    config = cfg(brokers=2)
    state = initial_state(config)
    assert not_enabled(config, state, S.ControllerElectLeader(1)) == (
        refused(Refusal.NO_SUCH_PARTITION, partition=1)
    )
    assert not_enabled(config, state, S.BrokerCrash(2)) == refused(Refusal.NO_SUCH_BROKER, broker=2)
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 5)) == (
        refused(Refusal.NO_SUCH_BROKER, broker=5)
    )
    with pytest.raises(TypeError, match="not an action"):
        step(config, state, "tick")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------
# S.ControllerHandleBrokerFailure


def test_handle_failure_needs_a_session_and_bounds_live_expiries():
    config = cfg(brokers=2, max_crashes=1, max_session_expiries=0)
    state = initial_state(config)
    assert not_enabled(config, state, S.ControllerHandleBrokerFailure(1)) == (
        refused(Refusal.SESSION_EXPIRIES_BOUND)
    )
    state = run_from(config, state, S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1))
    assert state.expiries == 0  # the expiry after a crash is not bounded
    assert not_enabled(config, state, S.ControllerHandleBrokerFailure(1)) == (
        refused(Refusal.NO_SESSION, broker=1)
    )


def test_handle_failure_of_a_live_leader_leaves_a_zombie():
    # A GC pause: the leader's session expires while it runs. The controller elects broker 1;
    # broker 0 gets no LeaderAndIsr (no session) and still believes it leads epoch 0.
    config = cfg("current", brokers=3, max_session_expiries=1)
    state = run(config, produce(1))
    state, said = outcome(config, state, S.ControllerHandleBrokerFailure(0))
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, 1, 1, [1, 2]]], elected=1, excused=[])
    )
    assert state.alive == (True, True, True)
    assert state.expiries == 1
    assert state.controller.registered == (-1, 0, 0)
    assert state.controller.partitions[0] == PartitionState(1, 1, (1, 2), 1)
    assert state.leader_and_isr == {
        LeaderAndIsr(1, 0, 1, 1, (1, 2), 1),
        LeaderAndIsr(2, 0, 1, 1, (1, 2), 1),
    }
    zombie = state.replica(0, 0)
    assert (zombie.leader, zombie.leader_epoch, zombie.isr) == (0, 0, (0, 1, 2))
    assert zombie.purgatory == (PendingProduce(0, 1),)
    assert not_enabled(config, state, S.ControllerHandleBrokerFailure(1)) == (
        refused(Refusal.SESSION_EXPIRIES_BOUND)
    )


def test_broker_register_after_a_live_expiry():
    config = cfg("current", brokers=3, max_crashes=1)
    state = initial_state(config)
    assert not_enabled(config, state, S.BrokerRegister(0)) == refused(Refusal.HAS_SESSION, broker=0)
    state = run_from(config, state, S.ControllerHandleBrokerFailure(0))
    state, said = outcome(config, state, S.BrokerRegister(0))
    assert said == Outcome(Code.REGISTERED, broker_epoch=1)
    assert state.broker_epochs == (1, 0, 0)
    assert state.controller.registered == (1, 0, 0)
    assert LeaderAndIsr(0, 0, 1, 1, (1, 2), 1) in state.leader_and_isr
    state, said = outcome(config, state, S.BecomeFollower(0, 0, 1, 1))
    assert said == Outcome(Code.FOLLOWER, leader=1, leader_epoch=1)
    assert state.replica(0, 0).remote_log_end_offset == ()  # no longer a zombie leader
    crashed = run(config, S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0))
    assert not_enabled(config, crashed, S.BrokerRegister(0)) == refused(Refusal.BROKER_DOWN, broker=0)


def crash_handled(config, broker: int):
    """`broker` crashes and the controller handles the failure: the state and what the
    controller said."""
    state = run(config, S.BrokerCrash(broker))
    return outcome(config, state, S.ControllerHandleBrokerFailure(broker))


def test_handle_follower_failure_current_shrinks_isr_without_new_leader_epoch():
    state, said = crash_handled(cfg("current", brokers=3, max_crashes=1), 2)
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, 0, 0, [0, 1]]], elected=0, excused=[])
    )
    assert state.controller.partitions[0] == PartitionState(0, 0, (0, 1), 1)
    assert state.controller.registered == (0, 0, -1)
    assert state.leader_and_isr == {
        LeaderAndIsr(0, 0, 0, 0, (0, 1), 1),
        LeaderAndIsr(1, 0, 0, 0, (0, 1), 1),
    }


def test_handle_follower_failure_zookeeper_era_bumps_the_leader_epoch():
    state, said = crash_handled(cfg("kip-320", brokers=3, max_crashes=1), 2)
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, 0, 1, [0, 1]]], elected=0, excused=[])
    )
    assert state.controller.partitions[0] == PartitionState(0, 1, (0, 1), 1)


def test_handle_leader_failure_elects_the_first_live_isr_member():
    state, said = crash_handled(cfg("current", brokers=3, max_crashes=1), 0)
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, 1, 1, [1, 2]]], elected=1, excused=[])
    )
    assert state.controller.partitions[0] == PartitionState(1, 1, (1, 2), 1)
    assert state.leader_and_isr == {
        LeaderAndIsr(1, 0, 1, 1, (1, 2), 1),
        LeaderAndIsr(2, 0, 1, 1, (1, 2), 1),
    }


def test_handle_last_isr_member_failure_takes_the_partition_offline():
    config = cfg("current", brokers=2, max_crashes=2)
    state = run(config, S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1), S.BrokerCrash(0))
    state, said = outcome(config, state, S.ControllerHandleBrokerFailure(0))
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, -1, 1, [0]]], elected=0, excused=[])
    )
    assert state.controller.partitions[0] == PartitionState(-1, 1, (0,), 2)


def test_handle_failure_of_a_broker_outside_every_isr_changes_nothing():
    config, state = offline()
    state = run_from(config, state, S.BrokerRestart(1), S.BrokerCrash(1))
    partitions = state.controller.partitions
    state, said = outcome(config, state, S.ControllerHandleBrokerFailure(1))
    assert said == Outcome(Code.BROKER_FAILURE_HANDLED, changes=[], elected=0, excused=[])
    assert state.controller.partitions == partitions
    assert state.controller.registered == (-1, -1)


def test_handle_failure_changes_every_partition_in_one_batch():
    config = cfg("current", brokers=2, partitions=2, max_crashes=1)
    state, said = crash_handled(config, 0)
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, 1, 1, [1]], [1, 1, 0, [1]]], elected=1,
                excused=[])
    )
    assert state.controller.partitions == (
        PartitionState(1, 1, (1,), 1),
        PartitionState(1, 0, (1,), 1),
    )


def test_handle_failure_with_unclean_election_counts_it():
    config = cfg("current", brokers=2, max_crashes=2, unclean_leader_election_enable=True)
    state = run(config, S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1), S.BrokerRestart(1),
                S.BrokerCrash(0))
    state, said = outcome(config, state, S.ControllerHandleBrokerFailure(0))
    assert said == (
        Outcome(Code.BROKER_FAILURE_HANDLED, changes=[[0, 1, 1, [1]]], elected=1, excused=[])
    )
    assert state.controller.unclean_elections == 1


def test_handle_failure_respects_the_leader_epoch_bound():
    config = cfg("kip-320", brokers=3, max_crashes=1, max_leader_epochs=1)
    state = run(config, S.BrokerCrash(2))
    assert not_enabled(config, state, S.ControllerHandleBrokerFailure(2)) == (
        refused(Refusal.LEADER_EPOCH_BOUND)
    )


# ------------------------------------------------------------------------------------------
# S.ControllerElectPreferredLeader, and a full failover and failback on the way


def failback_config():
    return cfg("current", brokers=2, max_crashes=1, max_leader_epochs=3)


def failed_over(config):
    """Leader 0 crashed, 1 leads in epoch 1, 0 restarted and follows 1."""
    return run(
        config,
        S.BrokerCrash(0),
        S.ControllerHandleBrokerFailure(0),
        S.BecomeLeader(0, 1, 1, 1),
        S.BrokerRestart(0),
        S.BecomeFollower(0, 0, 1, 1),
    )


def test_failover_then_rejoin_then_preferred_election():
    config = failback_config()
    state = failed_over(config)
    assert not_enabled(config, state, S.ControllerElectPreferredLeader(0)) == (
        refused(Refusal.PREFERRED_NOT_IN_ISR, broker=0)
    )
    state, said = outcomes(config, state, fetch(0, leader=1), S.LeaderExpandIsr(0, 1, 0))
    assert said == [
        Outcome(Code.FETCH_SENT, fetch_offset=0),
        Outcome(Code.RECORDS_SENT, records=0, fetch_offset=0, high_watermark=0,
                answer_high_watermark=0),
        Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=0),
        Outcome(Code.ISR_CHANGED, isr=[0, 1]),
    ]
    assert state.controller.partitions[0] == PartitionState(1, 1, (0, 1), 2)
    state, said = outcome(config, state, S.ControllerElectPreferredLeader(0))
    assert said == Outcome(Code.ELECTED_PREFERRED, leader=0, leader_epoch=2)
    assert state.controller.partitions[0] == PartitionState(0, 2, (0, 1), 3)
    assert state.leader_and_isr == {
        LeaderAndIsr(0, 0, 0, 2, (0, 1), 3),
        LeaderAndIsr(1, 0, 0, 2, (0, 1), 3),
    }
    assert not_enabled(config, state, S.ControllerElectPreferredLeader(0)) == (
        refused(Refusal.ALREADY_LEADS, broker=0)
    )


def test_preferred_election_guards():
    config = cfg(brokers=2)
    assert not_enabled(config, initial_state(config), S.ControllerElectPreferredLeader(0)) == (
        refused(Refusal.ALREADY_LEADS, broker=0)
    )
    config, state = offline()  # the offline election's (S.ControllerElectLeader), not this one
    assert not_enabled(config, state, S.ControllerElectPreferredLeader(0)) == (
        refused(Refusal.NO_LEADER, partition=0)
    )
    config = failback_config().replace(max_leader_epochs=2)
    state = run_from(config, failed_over(config), fetch(0, leader=1), S.LeaderExpandIsr(0, 1, 0))
    assert not_enabled(config, state, S.ControllerElectPreferredLeader(0)) == (
        refused(Refusal.LEADER_EPOCH_BOUND)
    )
    # A session expiry takes the broker out of the ISR first; the guard is shown on a built state.
    expired = replace(state, controller=replace(state.controller, registered=(-1, 0)))
    assert not_enabled(config, expired, S.ControllerElectPreferredLeader(0)) == (
        refused(Refusal.NO_SESSION, broker=0)
    )


# ------------------------------------------------------------------------------------------
# S.NetworkDropLeaderAndIsr


def test_drop_leader_and_isr():
    config = cfg("current", brokers=3, max_crashes=1, max_message_drops=1)
    state = run(config, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    assert not_enabled(config, state, S.NetworkDropLeaderAndIsr(0, 1, 0, 0)) == (
        refused(Refusal.NO_SUCH_LEADER_AND_ISR)
    )
    state, said = outcome(config, state, S.NetworkDropLeaderAndIsr(0, 1, 0, 1))
    assert said == Outcome(Code.DROPPED)
    assert state.leader_and_isr == {LeaderAndIsr(0, 0, 0, 0, (0, 1), 1)}
    assert state.drops == 1
    assert not_enabled(config, state, S.NetworkDropLeaderAndIsr(0, 0, 0, 1)) == (
        refused(Refusal.MESSAGE_DROPS_BOUND)
    )


# ------------------------------------------------------------------------------------------
# S.BecomeLeader


def test_become_leader_new_leadership_resets_follower_state_and_keeps_a_stale_hw():
    config, state = committed_v1(max_crashes=1)
    state = run_from(config, state, S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0))
    assert not_enabled(config, state, S.BecomeFollower(0, 1, 1, 1)) == refused(Refusal.OTHER_ROLE)
    state, said = outcome(config, state, S.BecomeLeader(0, 1, 1, 1))
    assert said == Outcome(Code.LEADER, leader_epoch=1)
    assert state.replica(0, 1) == Replica(
        log=(v(1),),
        high_watermark=0,  # stale: the old leader's HW was 1 (KAFKA-7128)
        flushed_offset=0,
        epoch_cache=((0, 0), (1, 1)),
        leader=1,
        leader_epoch=1,
        isr=(1, 2),
        partition_epoch=1,
        remote_log_end_offset=(-1, -1, -1),
        remote_broker_epoch=(-1, -1, -1),
        lag_ticks=(2, 0, 0),  # broker 0 is outside the ISR: counted as lagging already
    )
    assert state.leader_and_isr == {LeaderAndIsr(2, 0, 1, 1, (1, 2), 1)}


def failed_back_while_fetching(config):
    """From failed_over: broker 0 catches up and rejoins the ISR, sends leader 1 a fetch,
    and becomes leader again (preferred election, epoch 2) while that fetch is in flight."""
    state = run_from(config, failed_over(config), fetch(0, leader=1), S.LeaderExpandIsr(0, 1, 0),
                     S.FollowerSendFetch(0, 0), S.ControllerElectPreferredLeader(0))
    assert isinstance(state.fetches[0][0], FetchRequest)
    return step(config, state, S.BecomeLeader(0, 0, 2, 3))


def test_become_leader_stops_the_brokers_own_fetcher_in_the_smaller_abstraction():
    config = failback_config().replace(leader_keeps_last_fetch=False)
    state = failed_back_while_fetching(config)
    assert state.fetches[0] == (None, None)


def test_become_leader_leaves_its_last_fetch_in_flight_and_drops_the_answer():
    # On a real network the old leader can still handle the new leader's last fetch (and
    # count its LEO); the smaller abstraction deletes that fetch, which no network does.
    config = failback_config().replace(leader_keeps_last_fetch=True)
    state = failed_back_while_fetching(config)
    assert isinstance(state.fetches[0][0], FetchRequest)  # still in flight to broker 1
    assert not_enabled(config, state, S.FollowerSendFetch(0, 0)) == (
        refused(Refusal.FOLLOWS_NOBODY, broker=0)
    )
    state = step(config, state, S.LeaderHandleFetch(0, 1, 0))  # 1 has not heard yet: it answers
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 0))
    assert said == Outcome(Code.DROPPED_NOT_FROM_LEADER, leader=1)
    assert state.fetches[0] == (None, None)
    assert state.replica(0, 0).epoch_cache[-1] == (2, 0)


def test_become_leader_in_a_new_epoch_keeps_follower_state_purgatory_and_advances_hw():
    # Follower 1 has fetched v1 twice, follower 2 never: HW is held at 0 by broker 2.
    config = cfg("kip-320", brokers=3, max_crashes=1)
    state = run(config, produce(1), fetch(1), fetch(1))
    assert state.replica(0, 0).high_watermark == 0
    state = run_from(config, state, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    state, said = outcome(config, state, S.BecomeLeader(0, 0, 1, 1))
    assert said == Outcome(Code.STILL_LEADER, leader_epoch=1)
    r = state.replica(0, 0)
    assert r.epoch_cache == ((0, 0), (1, 1))
    assert (r.leader_epoch, r.isr, r.partition_epoch) == (1, (0, 1), 1)
    assert r.remote_log_end_offset == (-1, 1, -1)
    assert r.purgatory == (PendingProduce(0, 1),)
    assert r.high_watermark == 1  # the ISR without broker 2 has v1 everywhere


def test_become_leader_isr_only_change_updates_the_view():
    config = cfg("current", brokers=3, max_crashes=1)
    state = run(config, produce(1), fetch(1), fetch(1), S.BrokerCrash(2),
                S.ControllerHandleBrokerFailure(2))
    before = state.replica(0, 0)
    state, said = outcome(config, state, S.BecomeLeader(0, 0, 0, 1))
    assert said == Outcome(Code.ISR_UPDATED)
    assert state.replica(0, 0) == replace(before, isr=(0, 1), partition_epoch=1, high_watermark=1)


def test_become_leader_rejects_a_stale_request():
    config = cfg("current", brokers=3, max_crashes=2)
    state = run(config, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2), S.BrokerCrash(1),
                S.ControllerHandleBrokerFailure(1), S.BecomeLeader(0, 0, 0, 2))
    assert state.replica(0, 0).isr == (0,)
    assert not_enabled(config, state, S.BecomeLeader(0, 0, 0, 1)) == (
        refused(Refusal.STALE_LEADER_AND_ISR, leader_epoch=0, partition_epoch=1,
                view_leader_epoch=0, view_partition_epoch=2)
    )
    assert not_enabled(config, state, S.BecomeLeader(0, 0, 3, 3)) == (
        refused(Refusal.NO_SUCH_LEADER_AND_ISR)
    )


def test_become_leader_needs_the_broker_up():
    config = cfg("current", brokers=3, max_crashes=1)
    state = run(config, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    state = replace(state, alive=(False, True, False))  # a crash would have dropped the request
    assert not_enabled(config, state, S.BecomeLeader(0, 0, 0, 1)) == (
        refused(Refusal.BROKER_DOWN, broker=0)
    )


# ------------------------------------------------------------------------------------------
# S.BecomeFollower


def test_become_follower_drops_leader_side_state_and_purgatory():
    config = failback_config()
    state = run_from(config, failed_over(config), produce(1, leader=1), fetch(0, leader=1),
                     fetch(0, leader=1), S.LeaderExpandIsr(0, 1, 0),
                     S.ControllerElectPreferredLeader(0))
    assert state.replica(0, 1).purgatory == (PendingProduce(0, 1),)
    state, said = outcome(config, state, S.BecomeFollower(0, 1, 2, 3))
    assert said == Outcome(Code.FOLLOWER, leader=0, leader_epoch=2)
    assert state.replica(0, 1) == Replica(
        log=(v(1, 1),),
        high_watermark=1,
        flushed_offset=0,
        epoch_cache=((1, 0),),
        leader=0,
        leader_epoch=2,
        isr=(0, 1),
        partition_epoch=3,
    )


def test_become_follower_guards():
    config = cfg("current", brokers=3, max_crashes=1)
    state = run(config, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    assert not_enabled(config, state, S.BecomeLeader(0, 1, 0, 1)) == refused(Refusal.OTHER_ROLE)
    assert not_enabled(config, state, S.BecomeFollower(0, 1, 1, 1)) == (
        refused(Refusal.NO_SUCH_LEADER_AND_ISR)
    )
    state = run_from(config, state, S.BecomeFollower(0, 1, 0, 1))
    state = replace(state, leader_and_isr=state.leader_and_isr | {LeaderAndIsr(1, 0, 0, 0, (0, 1), 0)})
    assert not_enabled(config, state, S.BecomeFollower(0, 1, 0, 0)) == (
        refused(Refusal.STALE_LEADER_AND_ISR, leader_epoch=0, partition_epoch=0,
                view_leader_epoch=0, view_partition_epoch=1)
    )
    crashed = replace(state, alive=(True, False, False))
    assert not_enabled(config, crashed, S.BecomeFollower(0, 1, 0, 0)) == (
        refused(Refusal.BROKER_DOWN, broker=1)
    )


def test_become_follower_isr_change_in_the_same_epoch_is_not_a_new_leadership():
    # A pre-0.11 broker with a KRaft-style controller: the ISR change does not bump the leader
    # epoch, so the follower keeps its log (no truncation to its HW 0).
    variant = "hw-truncation"
    config = cfg(variant, brokers=3, max_crashes=1)
    config = config.replace(variant=config.variant.with_rules(isr_shrink_bumps_leader_epoch=False))
    state = run(config, produce(1), fetch(1), S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    state, said = outcome(config, state, S.BecomeFollower(0, 1, 0, 1))
    assert said == Outcome(Code.FOLLOWER, leader=0, leader_epoch=0)
    assert state.replica(0, 1).log == (v(1),)
    assert state.replica(0, 1).high_watermark == 0


# ------------------------------------------------------------------------------------------
# S.ProducerSend and S.ConsumerRead


def test_producer_send():
    config = cfg(brokers=2, max_records=1)
    state, said = outcome(config, initial_state(config), S.ProducerSend(0))
    assert said == Outcome(Code.PRODUCE_SENT, value=1, broker=0)
    assert state.produce_requests == {ProduceRequest(0, 0, 1)}
    assert state.next_value == 2
    assert not_enabled(config, state, S.ProducerSend(0)) == refused(Refusal.RECORDS_BOUND)


def test_producer_send_needs_a_leader():
    config, state = offline()
    assert not_enabled(config, state, S.ProducerSend(0)) == refused(Refusal.NO_LEADER, partition=0)


def test_producer_send_uses_the_controllers_leader_even_before_it_leads():
    config = cfg("current", brokers=3, max_crashes=1)
    state = run(config, S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0))
    state, said = outcome(config, state, S.ProducerSend(0))
    assert said == Outcome(Code.PRODUCE_SENT, value=1, broker=1)


def test_consumer_read():
    config, state = committed_v1()
    state, said = outcome(config, state, S.ConsumerRead(0))
    assert said == Outcome(Code.READ, records=1, broker=0)
    assert state.consumed == {Acked(0, 0, 1)}
    assert not_enabled(config, state, S.ConsumerRead(0)) == refused(Refusal.NOTHING_NEW)


def test_consumer_read_guards():
    config = cfg(brokers=2)
    assert not_enabled(config, initial_state(config), S.ConsumerRead(0)) == (
        refused(Refusal.NOTHING_NEW)
    )
    config, state = committed_v1(max_crashes=1)
    crashed = run_from(config, state, S.BrokerCrash(0))
    assert not_enabled(config, crashed, S.ConsumerRead(0)) == refused(Refusal.NO_LIVE_LEADER)
    failed_over_ = run_from(config, crashed, S.ControllerHandleBrokerFailure(0))
    assert not_enabled(config, failed_over_, S.ConsumerRead(0)) == (
        refused(Refusal.DOES_NOT_LEAD_IN_VIEW, broker=1)
    )


# ------------------------------------------------------------------------------------------
# S.LeaderAppend


def test_leader_append_acks_all_parks_the_write():
    config = cfg(brokers=2, acks="all")
    state, said = outcomes(config, initial_state(config), produce(1))
    assert said == [
        Outcome(Code.PRODUCE_SENT, value=1, broker=0),
        Outcome(Code.APPENDED, offset=0),
    ]
    r = state.replica(0, 0)
    assert r.log == (v(1),)
    assert (r.log_end_offset, r.high_watermark, r.flushed_offset) == (1, 0, 0)
    assert r.purgatory == (PendingProduce(0, 1),)
    assert state.produce_requests == frozenset()
    assert state.acked == frozenset()


def test_leader_append_acks_1_acknowledges_at_once():
    config = cfg(brokers=2, acks="1")
    state, said = outcomes(config, initial_state(config), produce(1))
    assert said[1] == Outcome(Code.APPENDED_ACKNOWLEDGED, offset=0)
    assert state.acked == {Acked(0, 0, 1)}
    assert state.replica(0, 0).purgatory == ()


def test_leader_append_acks_0_answers_nothing():
    config = cfg(brokers=2, acks="0")
    state, said = outcomes(config, initial_state(config), produce(1))
    assert said[1] == Outcome(Code.APPENDED, offset=0)
    assert state.acked == frozenset()
    assert state.replica(0, 0).purgatory == ()
    assert state.replica(0, 0).log == (v(1),)


def test_leader_append_alone_in_the_isr_commits_at_once():
    config = cfg(brokers=1)
    state = run(config, produce(1))
    assert state.replica(0, 0).high_watermark == 1
    state, said = outcome(config, state, S.LeaderAckProduce(0, 0, 0))
    assert said == Outcome(Code.ACKNOWLEDGED)
    assert state.acked == {Acked(0, 0, 1)}


@pytest.mark.parametrize(("interval", "flushed"), [(None, [0, 0]), (1, [1, 2]), (2, [0, 2])])
def test_leader_append_flush_policy(interval, flushed):
    config = cfg(brokers=2, log_flush_interval_messages=interval)
    first = run(config, produce(1))
    second = run_from(config, first, produce(2))
    assert [first.replica(0, 0).flushed_offset, second.replica(0, 0).flushed_offset] == flushed


def test_leader_append_not_leader_or_follower():
    config = cfg("current", brokers=3, max_crashes=1)
    state = run(config, S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0), S.ProducerSend(0))
    state, said = outcome(config, state, S.LeaderAppend(0, 1, 1))
    assert said == Outcome(Code.NOT_LEADER_OR_FOLLOWER)
    assert state.replica(0, 1).log == ()
    assert state.produce_requests == frozenset()


def lagging_follower(variant="current", **changes):
    """Two brokers, min ISR 2: v1 committed, v2 appended, follower 1 stops fetching and is
    removed from the ISR after two ticks."""
    config = cfg(variant, brokers=2, min_insync_replicas=2, max_records=3, **changes)
    state = run(config, produce(1), fetch(1), fetch(1), produce(2), S.Tick(), S.Tick(),
                S.LeaderShrinkIsr(0, 0, 1))
    return config, state


def test_leader_append_not_enough_replicas():
    config, state = lagging_follower()
    before = state.replica(0, 0)
    state, said = outcomes(config, state, produce(3))
    assert said == [
        Outcome(Code.PRODUCE_SENT, value=3, broker=0),
        Outcome(Code.NOT_ENOUGH_REPLICAS),
    ]
    assert state.replica(0, 0) == before
    assert state.produce_requests == frozenset()


def test_leader_append_acks_1_ignores_min_insync_replicas():
    config, state = lagging_follower(acks="1")
    state, said = outcomes(config, state, produce(3))
    assert said[1] == Outcome(Code.APPENDED_ACKNOWLEDGED, offset=2)
    assert state.replica(0, 0).log == (v(1), v(2), v(3))


def test_leader_append_guards():
    config = cfg(brokers=2)
    state = initial_state(config)
    assert not_enabled(config, state, S.LeaderAppend(0, 0, 1)) == refused(Refusal.NO_SUCH_PRODUCE)
    state = run_from(config, state, S.ProducerSend(0))
    crashed = replace(state, alive=(False, True))
    assert not_enabled(config, crashed, S.LeaderAppend(0, 0, 1)) == (
        refused(Refusal.BROKER_DOWN, broker=0)
    )


# ------------------------------------------------------------------------------------------
# S.LeaderAckProduce


def test_leader_ack_produce_waits_for_the_hw():
    config = cfg(brokers=2)
    state = run(config, produce(1), fetch(1))
    assert not_enabled(config, state, S.LeaderAckProduce(0, 0, 0)) == (
        refused(Refusal.HW_NOT_PAST, high_watermark=0, offset=0)
    )
    assert not_enabled(config, state, S.LeaderAckProduce(0, 0, 1)) == (
        refused(Refusal.NO_PENDING_WRITE, offset=1)
    )
    state = run_from(config, state, fetch(1))
    state, said = outcome(config, state, S.LeaderAckProduce(0, 0, 0))
    assert said == Outcome(Code.ACKNOWLEDGED)
    assert state.acked == {Acked(0, 0, 1)}
    assert state.replica(0, 0).purgatory == ()


@pytest.mark.parametrize(("variant", "hw"), [("kip-320", 2), ("current", 1)])
def test_leader_ack_produce_not_enough_replicas_after_append(variant, hw):
    # v1 was committed by the full ISR; the ISR then shrank below min ISR before the answer.
    # kip-320 lets the HW advance past v2 with the ISR alone; current holds it (KAFKA-15583).
    config, state = lagging_follower(variant)
    assert [w.offset for w in state.replica(0, 0).purgatory] == [0, 1]
    assert state.replica(0, 0).high_watermark == hw
    state, said = outcome(config, state, S.LeaderAckProduce(0, 0, 0))
    assert said == Outcome(Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    assert state.acked == frozenset()
    assert state.replica(0, 0).purgatory == (PendingProduce(1, 2),)


def test_leader_ack_produce_needs_the_leader():
    config, state = committed_v1()
    state = state.with_replica(0, 0, replace(state.replica(0, 0), leader=1))
    assert not_enabled(config, state, S.LeaderAckProduce(0, 0, 0)) == (
        refused(Refusal.DOES_NOT_LEAD, broker=0)
    )


# ------------------------------------------------------------------------------------------
# S.LeaderHandleFetch


def test_leader_handle_fetch_records_the_follower_and_answers_with_records():
    config = cfg(brokers=3, max_records=2)
    state = run(config, produce(1), produce(2), S.FollowerSendFetch(0, 1))
    assert state.fetches[0][1] == FetchRequest(0, 0, -1, 0, 0)
    state, said = outcome(config, state, S.LeaderHandleFetch(0, 0, 1))
    assert said == (
        Outcome(Code.RECORDS_SENT, records=2, fetch_offset=0, high_watermark=0,
                answer_high_watermark=0)
    )
    r = state.replica(0, 0)
    assert r.remote_log_end_offset == (-1, 0, -1)
    assert r.remote_broker_epoch == (-1, 0, -1)
    assert r.lag_ticks == (0, 0, 0)
    assert state.fetches[0][1] == FetchResponse(0, 0, "records", records=(v(1), v(2)),
                                                high_watermark=0, fetch_offset=0)


def test_leader_handle_fetch_advances_hw_to_the_isr_minimum():
    config = cfg(brokers=3)
    state = run(config, produce(1), fetch(1), fetch(2), fetch(1))
    assert state.replica(0, 0).high_watermark == 0  # broker 2 reported offset 0 last
    state, said = outcomes(config, state, S.FollowerSendFetch(0, 2), S.LeaderHandleFetch(0, 0, 2))
    assert said == [
        Outcome(Code.FETCH_SENT, fetch_offset=1),
        Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                answer_high_watermark=0),
    ]
    assert state.replica(0, 0).high_watermark == 1
    # The answer carries the HW read before this fetch moved it: the follower learns of the
    # commit one round trip later.
    assert state.fetches[0][2] == FetchResponse(0, 0, "records", high_watermark=0,
                                                fetch_offset=1)
    state, said = outcomes(config, state, S.FollowerHandleFetchResponse(0, 2), fetch(2))
    assert said == [
        Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=0),
        Outcome(Code.FETCH_SENT, fetch_offset=1),
        Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                answer_high_watermark=1),
        Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
    ]
    assert state.replica(0, 2).high_watermark == 1


def test_leader_handle_fetch_guards():
    config = cfg(brokers=3)
    state = initial_state(config)
    assert not_enabled(config, state, S.LeaderHandleFetch(0, 0, 1)) == (
        refused(Refusal.NO_REQUEST_IN_FLIGHT)
    )
    state = run_from(config, state, S.FollowerSendFetch(0, 1))
    assert not_enabled(config, state, S.LeaderHandleFetch(0, 2, 1)) == (
        refused(Refusal.REQUEST_FOR_OTHER_BROKER, broker=0)
    )
    crashed = replace(state, alive=(False, True, True))
    assert not_enabled(config, crashed, S.LeaderHandleFetch(0, 0, 1)) == (
        refused(Refusal.BROKER_DOWN, broker=0)
    )
    answered = run_from(config, state, S.LeaderHandleFetch(0, 0, 1))
    assert not_enabled(config, answered, S.LeaderHandleFetch(0, 0, 1)) == (
        refused(Refusal.NO_REQUEST_IN_FLIGHT)
    )


def stale_follower_view(variant: str):
    """Three brokers: 0 failed over to 1 and came back as a follower of 1, but broker 2 has not
    applied its LeaderAndIsr yet and still fetches from 0."""
    config = cfg(variant, brokers=3, max_crashes=1, max_leader_epochs=3)
    state = run(config, S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0), S.BrokerRestart(0),
                S.BecomeFollower(0, 0, 1, 1), S.FollowerSendFetch(0, 2))
    return config, state


def test_leader_handle_fetch_not_leader_or_follower():
    config, state = stale_follower_view("hw-truncation")
    state, said = outcome(config, state, S.LeaderHandleFetch(0, 0, 2))
    assert said == Outcome(Code.NOT_LEADER_OR_FOLLOWER)
    assert state.fetches[0][2] == FetchResponse(0, 1, "error", error="NOT_LEADER_OR_FOLLOWER")
    # Without fencing the follower sees the error code; it changes nothing.
    before = state.replica(0, 2)
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 2))
    assert said == Outcome(Code.NOT_LEADER_OR_FOLLOWER)
    assert state.replica(0, 2) == before
    assert state.fetches[0][2] is None


def test_leader_handle_fetch_not_leader_answer_is_dropped_across_epochs_with_fencing():
    config, state = stale_follower_view("current")
    state, said = outcomes(config, state, S.LeaderHandleFetch(0, 0, 2), S.FollowerHandleFetchResponse(0, 2))
    assert said == [
        Outcome(Code.NOT_LEADER_OR_FOLLOWER),
        Outcome(Code.DROPPED_OTHER_EPOCH, leader_epoch=1, current_leader_epoch=0),
    ]


def test_leader_handle_fetch_offset_out_of_range_on_old_variants():
    config = cfg("kip-101", brokers=2)
    state = run(config, produce(1))
    # A follower ahead of its leader (say, the leader lost an unflushed suffix).
    follower = replace(state.replica(0, 1), log=(v(1), v(9)), epoch_cache=((0, 0),))
    state = run_from(config, state.with_replica(0, 1, follower), S.FollowerSendFetch(0, 1))
    state, said = outcome(config, state, S.LeaderHandleFetch(0, 0, 1))
    assert said == Outcome(Code.OFFSET_OUT_OF_RANGE)
    assert state.fetches[0][1] == FetchResponse(0, 0, "error", end_offset=1,
                                                error="OFFSET_OUT_OF_RANGE")
    assert state.replica(0, 0).remote_log_end_offset == (-1, -1)  # nothing recorded
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 1))
    assert said == Outcome(Code.OUT_OF_RANGE_TRUNCATED, log_end_offset=1)
    assert state.replica(0, 1).log == (v(1),)


# ------------------------------------------------------------------------------------------
# S.LeaderShrinkIsr


def test_leader_shrink_isr_after_the_lag_time():
    config = cfg("current", brokers=3)
    state = run(config, produce(1), fetch(1), fetch(1))
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 2)) == (
        refused(Refusal.NOT_LAGGING, follower=2)
    )
    state = run_from(config, state, S.Tick())
    assert state.replica(0, 0).lag_ticks == (0, 1, 1)
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 2)) == (
        refused(Refusal.NOT_LAGGING, follower=2)
    )
    state = run_from(config, state, S.Tick())
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 1)) == (
        refused(Refusal.CAUGHT_UP, follower=1)
    )
    state, said = outcome(config, state, S.LeaderShrinkIsr(0, 0, 2))
    assert said == Outcome(Code.ISR_CHANGED, isr=[0, 1])
    assert state.controller.partitions[0] == PartitionState(0, 0, (0, 1), 1)
    r = state.replica(0, 0)
    assert (r.isr, r.partition_epoch) == ((0, 1), 1)
    assert r.high_watermark == 1  # the remaining ISR has v1 everywhere
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 2)) == (
        refused(Refusal.NOT_IN_ISR, follower=2)
    )


def test_leader_shrink_isr_by_message_lag():
    config = cfg("hw-truncation", brokers=2, replica_lag_max_messages=1, max_records=2)
    state = run(config, produce(1), fetch(1))  # broker 1 reported offset 0: one behind
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 1)) == (
        refused(Refusal.NOT_LAGGING, follower=1)
    )
    state = run_from(config, state, produce(2))  # now two behind
    state, said = outcome(config, state, S.LeaderShrinkIsr(0, 0, 1))
    assert said == Outcome(Code.ISR_CHANGED, isr=[0])
    assert state.replica(0, 0).high_watermark == 2


def test_leader_shrink_isr_by_message_lag_ignores_a_follower_not_yet_heard_from():
    # The follower has not fetched yet, so the leader does not know its LEO; at most it is
    # 1 record behind (the leader has 1), which is not more than replica.lag.max.messages=1.
    config = cfg("hw-truncation", brokers=2, replica_lag_max_messages=1, max_records=2)
    state = run(config, produce(1))
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 1)) == (
        refused(Refusal.NOT_LAGGING, follower=1)
    )


def test_leader_isr_change_guards():
    config = cfg("current", brokers=3, max_crashes=1)
    state = run(config, produce(1), S.Tick(), S.Tick())
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 0)) == (
        refused(Refusal.OWN_MEMBERSHIP)
    )
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 1, 2)) == (
        refused(Refusal.DOES_NOT_LEAD, broker=1)
    )
    state = run_from(config, state, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    assert not_enabled(config, state, S.LeaderShrinkIsr(0, 0, 1)) == (
        refused(Refusal.COMPARE_AND_SET_FAILS, view_leader_epoch=0, view_partition_epoch=0,
                leader_epoch=0, partition_epoch=1)
    )
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 2)) == (
        refused(Refusal.COMPARE_AND_SET_FAILS, view_leader_epoch=0, view_partition_epoch=0,
                leader_epoch=0, partition_epoch=1)
    )


# ------------------------------------------------------------------------------------------
# S.LeaderExpandIsr


def test_leader_expand_isr_once_the_follower_reaches_the_hw():
    config = cfg("kip-320", brokers=2, max_records=2)
    state = run(config, produce(1), S.Tick(), S.Tick(), S.LeaderShrinkIsr(0, 0, 1))
    assert state.replica(0, 0).high_watermark == 1
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.BELOW_HIGH_WATERMARK, follower=1)
    )
    state = run_from(config, state, fetch(1))  # reports offset 0: still below HW 1
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.BELOW_HIGH_WATERMARK, follower=1)
    )
    state = run_from(config, state, fetch(1))
    state, said = outcome(config, state, S.LeaderExpandIsr(0, 0, 1))
    assert said == Outcome(Code.ISR_CHANGED, isr=[0, 1])
    assert state.controller.partitions[0] == PartitionState(0, 0, (0, 1), 2)
    assert (state.replica(0, 0).isr, state.replica(0, 0).partition_epoch) == ((0, 1), 2)
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.ALREADY_IN_ISR, follower=1)
    )


# ------------------------------------------------------------------------------------------
# S.FollowerSendFetch


def test_follower_send_fetch_carries_offset_epochs_and_broker_epoch():
    config = failback_config()
    state = failed_over(config)
    state, said = outcome(config, state, S.FollowerSendFetch(0, 0))
    assert said == Outcome(Code.FETCH_SENT, fetch_offset=0)
    assert state.fetches[0][0] == FetchRequest(1, 0, -1, 1, 1)
    assert not_enabled(config, state, S.FollowerSendFetch(0, 0)) == refused(Refusal.CONNECTION_BUSY)


def test_follower_send_fetch_last_fetched_epoch_is_the_last_records_epoch():
    config = cfg(brokers=2)
    state = run(config, produce(1), fetch(1), S.FollowerSendFetch(0, 1))
    assert state.fetches[0][1] == FetchRequest(0, 1, 0, 0, 0)


def test_follower_send_fetch_guards():
    config = cfg(brokers=3, max_crashes=1)
    state = initial_state(config)
    assert not_enabled(config, state, S.FollowerSendFetch(0, 0)) == (
        refused(Refusal.FOLLOWS_NOBODY, broker=0)
    )
    crashed = run_from(config, state, S.BrokerCrash(0))
    assert not_enabled(config, crashed, S.FollowerSendFetch(0, 1)) == (
        refused(Refusal.LEADER_DOWN, leader=0)
    )
    assert not_enabled(config, crashed, S.FollowerSendFetch(0, 0)) == (
        refused(Refusal.BROKER_DOWN, broker=0)
    )
    config, state = offline()
    state = run_from(config, state, S.BrokerRestart(1), S.BecomeFollower(0, 1, 1, 2))
    assert state.replica(0, 1).leader == -1
    assert not_enabled(config, state, S.FollowerSendFetch(0, 1)) == (
        refused(Refusal.FOLLOWS_NOBODY, broker=1)
    )


# ------------------------------------------------------------------------------------------
# S.FollowerHandleFetchResponse


def test_follower_handle_fetch_response_appends_and_takes_the_leaders_hw():
    config, state = committed_v1()
    state = run_from(config, state, S.FollowerSendFetch(0, 1), S.LeaderHandleFetch(0, 0, 1))
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 1))
    assert said == Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1)
    r = state.replica(0, 1)
    assert (r.log, r.high_watermark, r.epoch_cache, r.flushed_offset) == ((v(1),), 1, ((0, 0),), 0)


def test_follower_append_applies_the_flush_policy():
    config = cfg(brokers=2, log_flush_interval_messages=2)
    state = run(config, produce(1), produce(2), fetch(1))
    r = state.replica(0, 1)
    assert (r.log, r.high_watermark, r.flushed_offset) == ((v(1), v(2)), 0, 2)


def test_follower_drops_an_answer_for_an_old_fetch_offset():
    # The follower's log was cut (say, a truncation to its HW 0) while its fetch from offset 1
    # was in flight; the answer no longer fits its log.
    config = cfg("hw-truncation", brokers=3)
    state = run(config, produce(1), fetch(1), S.FollowerSendFetch(0, 1), S.LeaderHandleFetch(0, 0, 1))
    state = state.with_replica(0, 1, state.replica(0, 1).truncated_to(0))
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 1))
    assert said == Outcome(Code.DROPPED_STALE_OFFSET, fetch_offset=1, log_end_offset=0)
    assert state.replica(0, 1).log == ()
    assert state.fetches[0][1] is None


def test_follower_drops_an_answer_from_a_broker_it_no_longer_follows():
    config = cfg("hw-truncation", brokers=3, max_crashes=1)
    state = run(config, S.FollowerSendFetch(0, 2), S.LeaderHandleFetch(0, 0, 2))
    # The controller moves leadership to 1 while the answer from 0 is in flight.
    state = replace(state, leader_and_isr=frozenset({LeaderAndIsr(2, 0, 1, 1, (1, 2), 1)}))
    state = run_from(config, state, S.BecomeFollower(0, 2, 1, 1))
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 2))
    assert said == Outcome(Code.DROPPED_NOT_FROM_LEADER, leader=0)


def test_follower_handle_fetch_response_guards():
    config = cfg(brokers=2)
    state = initial_state(config)
    assert not_enabled(config, state, S.FollowerHandleFetchResponse(0, 1)) == (
        refused(Refusal.NO_RESPONSE_IN_FLIGHT)
    )
    state = run_from(config, state, S.FollowerSendFetch(0, 1))
    assert not_enabled(config, state, S.FollowerHandleFetchResponse(0, 1)) == (
        refused(Refusal.NO_RESPONSE_IN_FLIGHT)
    )
    state = run_from(config, state, S.LeaderHandleFetch(0, 0, 1))
    crashed = replace(state, alive=(True, False))
    assert not_enabled(config, crashed, S.FollowerHandleFetchResponse(0, 1)) == (
        refused(Refusal.BROKER_DOWN, broker=1)
    )


def test_follower_drops_an_epoch_answer_when_no_truncation_is_due():
    config = cfg("kip-101", brokers=2)
    state = run(config, produce(1), fetch(1))
    state = state.with_fetch(0, 1, FetchResponse(0, 0, "epoch", epoch=0, end_offset=0))
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 1))
    assert said == Outcome(Code.DROPPED_NO_TRUNCATION_DUE)
    assert state.replica(0, 1).log == (v(1),)


# ------------------------------------------------------------------------------------------
# S.BrokerFlush, S.BrokerCrash, S.BrokerRestart, S.Tick


def test_broker_flush():
    config = cfg(brokers=2, max_crashes=1)
    state = initial_state(config)
    assert not_enabled(config, state, S.BrokerFlush(0, 0)) == refused(Refusal.NOTHING_TO_FLUSH)
    no_crashes = config.replace(max_crashes=0)
    assert not_enabled(no_crashes, run(no_crashes, produce(1)), S.BrokerFlush(0, 0)) == (
        refused(Refusal.FLUSH_MOOT)
    )
    state = run_from(config, state, produce(1))
    state, said = outcome(config, state, S.BrokerFlush(0, 0))
    assert said == Outcome(Code.FLUSHED)
    assert state.replica(0, 0).flushed_offset == 1
    crashed = replace(state, alive=(False, True))
    assert not_enabled(config, crashed, S.BrokerFlush(0, 0)) == refused(Refusal.BROKER_DOWN, broker=0)


def test_broker_crash_loses_the_unflushed_suffix_view_and_messages():
    config = cfg(brokers=3, max_crashes=1, max_records=3)
    state = run(config, produce(1), S.BrokerFlush(0, 0), produce(2), fetch(1), fetch(1),
                S.FollowerSendFetch(0, 2), S.ProducerSend(0))
    leader = state.replica(0, 0)
    assert (leader.log_end_offset, leader.high_watermark, leader.flushed_offset) == (2, 0, 1)
    state, said = outcome(config, state, S.BrokerCrash(0))
    assert said == Outcome(Code.CRASHED, excused=[])
    assert state.alive == (False, True, True)
    assert state.crashes == 1
    assert state.replica(0, 0) == Replica(log=(v(1),), high_watermark=0, flushed_offset=1,
                                          epoch_cache=((0, 0),))
    assert state.fetches[0] == (None, None, None)  # request from 2 to 0 lost
    assert state.produce_requests == frozenset()
    assert state.controller.registered == (0, 0, 0)  # the session has not expired yet
    assert not_enabled(config, state, S.BrokerCrash(0)) == refused(Refusal.BROKER_DOWN, broker=0)
    assert not_enabled(config, state, S.BrokerCrash(1)) == refused(Refusal.CRASHES_BOUND)


def test_broker_crash_excuses_committed_writes_once_every_isr_member_is_down():
    config = cfg("current", brokers=2, max_crashes=2)
    state = run(config, produce(1), fetch(1), fetch(1), S.LeaderAckProduce(0, 0, 0),
                S.BrokerFlush(0, 1))
    state, said = outcome(config, state, S.BrokerCrash(1))
    assert said == Outcome(Code.CRASHED, excused=[])  # broker 0 is alive and in the ISR
    state, said = outcome(config, state, S.BrokerCrash(0))
    assert said == Outcome(Code.CRASHED, excused=[1])
    assert state.excused == {1}
    assert state.replica(0, 0).log == ()
    assert state.replica(0, 1).log == (v(1),)


def test_broker_crash_excuses_nothing_when_every_isr_member_kept_the_write():
    config = cfg("current", brokers=2, max_crashes=2, log_flush_interval_messages=1)
    state = run(config, produce(1), fetch(1), fetch(1), S.LeaderAckProduce(0, 0, 0))
    state, said = outcomes(config, state, S.BrokerCrash(1), S.BrokerCrash(0))
    assert said == [
        Outcome(Code.CRASHED, excused=[]),
        Outcome(Code.CRASHED, excused=[]),
    ]
    assert state.excused == frozenset()


def test_broker_restart():
    config = cfg(brokers=2, partitions=2, max_crashes=1)
    state = run(config, S.BrokerCrash(1))
    assert not_enabled(config, state, S.BrokerRestart(1)) == (
        refused(Refusal.SESSION_NOT_EXPIRED, broker=1)
    )
    assert not_enabled(config, state, S.BrokerRestart(0)) == refused(Refusal.ALREADY_UP, broker=0)
    state = run_from(config, state, S.ControllerHandleBrokerFailure(1))
    known = state.leader_and_isr
    state, said = outcome(config, state, S.BrokerRestart(1))
    assert said == Outcome(Code.BROKER_UP, broker_epoch=1)
    assert state.alive == (True, True)
    assert state.broker_epochs == (0, 1)
    assert state.controller.registered == (0, 1)
    assert state.leader_and_isr - known == {
        LeaderAndIsr(1, 0, 0, 0, (0,), 1),
        LeaderAndIsr(1, 1, 0, 1, (0,), 1),
    }


def test_tick_ages_every_leaders_lag_clock_up_to_the_cap():
    config = cfg(brokers=3, partitions=2, max_ticks=3, max_crashes=1)
    state = run(config, S.BrokerCrash(1))
    state, said = outcome(config, state, S.Tick())
    assert said == Outcome(Code.TICK, ticks=1)
    assert state.ticks == 1
    assert state.replica(0, 0).lag_ticks == (0, 1, 1)
    assert state.replica(1, 1).lag_ticks == ()  # its leader crashed and lost its clocks
    assert state.replica(0, 2).lag_ticks == ()  # followers keep no clocks
    state = run_from(config, state, S.Tick(), S.Tick())
    assert state.replica(0, 0).lag_ticks == (0, 2, 2)  # capped at replica.lag.time.max.ms + 1
    assert not_enabled(config, state, S.Tick()) == refused(Refusal.TICKS_BOUND)


# ------------------------------------------------------------------------------------------
# Names


def test_every_action_maps_to_a_kebab_command_and_back():
    assert len(ACTION_TYPES) == 23
    for kind in ACTION_TYPES:
        command = kind.command()
        assert command == command.lower() and " " not in command and "_" not in command
        assert ACTIONS_BY_COMMAND[command] is kind
        assert ACTIONS_BY_NAME[kind.__name__] is kind
        assert "".join(word.capitalize() for word in command.split("-")) == kind.__name__
    assert S.LeaderShrinkIsr.command() == "leader-shrink-isr"
    assert S.Tick.command() == "tick"


def test_action_text_names_every_argument():
    action = S.LeaderShrinkIsr(0, 1, 2)
    assert action.name == "LeaderShrinkIsr"
    assert action.args() == {"partition": 0, "broker": 1, "follower": 2}
    assert str(action) == "LeaderShrinkIsr(partition=0, broker=1, follower=2)"
    assert str(S.Tick()) == "Tick()"


def test_epoch_request_carries_the_latest_cached_epoch():
    config = cfg("kip-101", brokers=3, max_crashes=1)
    state = run(config, produce(1), fetch(1), S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2),
                S.BecomeFollower(0, 1, 1, 1))
    state, said = outcome(config, state, S.FollowerSendFetch(0, 1))
    assert said == Outcome(Code.EPOCH_REQUEST_SENT, epoch=0)
    assert state.fetches[0][1] == EpochRequest(0, 0, 1)


# ------------------------------------------------------------------------------------------
# Purity: frozen states, no mutation, hashable, deterministic order


def sample_states(variant: str, limit: int = 150):
    """The first `limit` states reached breadth first (one crash and two writes allowed)."""
    config = cfg(variant, brokers=2, max_records=2, max_crashes=1, max_ticks=1,
                 max_leader_epochs=3)
    start = initial_state(config)
    seen, order, queue = {start}, [start], [start]
    while queue and len(order) < limit:
        state = queue.pop(0)
        for _, nxt in successors(config, state):
            if nxt not in seen and len(order) < limit:
                seen.add(nxt)
                order.append(nxt)
                queue.append(nxt)
    return config, order


@pytest.mark.parametrize("variant", ["hw-truncation", "kip-101", "kip-279", "kip-320", "current"])
def test_step_never_mutates_its_input(variant):
    config, states = sample_states(variant)
    for state in states:
        snapshot = pickle.dumps(state)
        before = hash(state)
        for action in candidates(config, state):
            try:
                step(config, state, action)
            except NotEnabled:
                pass
            assert hash(state) == before
        assert pickle.loads(snapshot) == state
        assert pickle.dumps(state) == snapshot


@pytest.mark.parametrize("variant", ["kip-101", "current"])
def test_successors_agree_with_step(variant):
    config, states = sample_states(variant, limit=60)
    for state in states:
        pairs = list(successors(config, state))
        assert [a for a, _ in pairs] == list(enabled(config, state))
        for action, nxt in pairs:
            assert step(config, state, action) == nxt
        enabled_ = {a for a, _ in pairs}
        for action in candidates(config, state):
            if action not in enabled_:
                with pytest.raises(NotEnabled):
                    step(config, state, action)


def test_states_are_frozen():
    config = cfg(brokers=2)
    state = initial_state(config)
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.ticks = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.replica(0, 0).high_watermark = 3  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        S.LeaderShrinkIsr(0, 0, 1).follower = 2  # type: ignore[misc]


def test_equal_states_hash_equal_and_deduplicate():
    config = cfg("current", brokers=3, max_crashes=1)
    actions = (produce(1), fetch(1), S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    first, second = run(config, *actions), run(config, *actions)
    assert first == second and first is not second
    assert hash(first) == hash(second)
    assert len({first, second, initial_state(config)}) == 2
    # Independent actions in either order lead to the same state.
    a = run(config, S.FollowerSendFetch(0, 1), S.FollowerSendFetch(0, 2))
    b = run(config, S.FollowerSendFetch(0, 2), S.FollowerSendFetch(0, 1))
    assert a == b and hash(a) == hash(b)


def test_enabled_order_is_deterministic():
    for variant in ("kip-101", "current"):
        config, states = sample_states(variant, limit=80)
        for state in states:
            assert list(enabled(config, state)) == list(enabled(config, state))
            # Set-valued fields rebuilt in another insertion order change nothing.
            shuffled = replace(
                state,
                leader_and_isr=frozenset(reversed(sorted(state.leader_and_isr))),
                produce_requests=frozenset(reversed(sorted(state.produce_requests))),
            )
            assert list(enabled(config, shuffled)) == list(enabled(config, state))


def test_enabled_in_the_initial_state():
    config = cfg("current", brokers=2, max_records=1, max_ticks=1)
    assert [str(a) for a in enabled(config, initial_state(config))] == [
        "ControllerHandleBrokerFailure(broker=0)",
        "ControllerHandleBrokerFailure(broker=1)",
        "ProducerSend(partition=0)",
        "FollowerSendFetch(partition=0, broker=1)",
        "Tick()",
    ]


def test_recovery_forgets_an_epoch_that_began_at_the_log_end_when_asked_to():
    # Kafka's log loading truncates the epoch cache to the recovered LEO (truncateFromEnd).
    for faithful, cache in ((False, ((0, 0), (1, 1))), (True, ((0, 0),))):
        config = cfg("current", brokers=2, max_crashes=1, recovery_truncates_epoch_cache=faithful)
        state = initial_state(config)
        r = replace(state.replica(0, 0), log=(Record(0, 1),), flushed_offset=1,
                    epoch_cache=((0, 0), (1, 1)))
        state = step(config, state.with_replica(0, 0, r), S.BrokerCrash(0))
        assert state.replica(0, 0).epoch_cache == cache


def test_growing_sets_step_exactly_as_frozensets():
    """Replay keeps the ghost sets in `GrowingSet`s (the crash losses in a `LossLedger`); the
    spec must not tell the difference: random walks from both starts reach equal states, with
    equal hashes, every step (crashes with acks=all and min ISR 2 exercise the crash losses
    and the excused writes)."""
    import random

    from spec import VARIANTS, Config
    from spec.actions import successors
    from spec.state import GrowingSet, LossLedger
    from spec.state import replace as replace_state

    base = Config(brokers=3, min_insync_replicas=2, max_records=4, max_crashes=3,
                  max_leader_epochs=4, variant=VARIANTS["hw-truncation"],
                  log_flush_interval_messages=2)
    reached = {"acked": 0, "consumed": 0, "crash_losses": 0}
    for seed in range(40):
        config = base if seed % 2 else base.replace(acks="1")
        rng = random.Random(seed)
        plain = initial_state(config)
        grown = replace_state(plain, acked=GrowingSet(), consumed=GrowingSet(),
                              crash_losses=LossLedger())
        for _ in range(80):
            options = list(successors(config, plain))
            if not options:
                break
            action, plain = options[rng.randrange(len(options))]
            grown = dict(successors(config, grown))[action]
            assert grown == plain and hash(grown) == hash(plain), action
            assert type(grown.acked) is GrowingSet and type(grown.crash_losses) is LossLedger
        for name in reached:
            reached[name] += bool(getattr(plain, name))
    assert all(reached.values()), reached


def test_growing_set_is_a_set():
    from spec.state import GrowingSet

    g = GrowingSet([1, 2]) | {3}
    assert g == frozenset({1, 2, 3}) == g and hash(g) == hash(frozenset({1, 2, 3}))
    assert {1, 2} <= g and not g <= {1, 2} and {4, 1} - g == frozenset({4})
    assert len(g) == 3 and 3 in g and 4 not in g and sorted(g) == [1, 2, 3]
    assert pickle.loads(pickle.dumps(g)) == g


def test_a_loss_ledger_is_the_set_of_its_lost_pairs():
    from spec.state import GrowingLog, LossLedger

    log = GrowingLog([Record(0, 5), Record(0, 6), Record(1, 7)])
    ledger = LossLedger({(1, 0)}).lost(2, log, 1).lost(0, log[:1], 0).lost(2, log, 2)
    log + (Record(1, 8),)  # a later version of the log: the ledger keeps the one it was given
    pairs = frozenset({(1, 0), (6, 2), (7, 2), (5, 0)})
    assert ledger == pairs == ledger and hash(ledger) == hash(pairs) and len(ledger) == 4
    assert (7, 2) in ledger and (8, 2) not in ledger and sorted(ledger) == sorted(pairs)
    assert ledger | {(9, 1)} == pairs | {(9, 1)}
    assert pickle.loads(pickle.dumps(ledger)) == pairs


def test_growing_log_versions_do_not_see_each_others_appends():
    from spec.state import GrowingLog

    base = GrowingLog([1, 2]) + (3,)
    longer = base + (4,)  # in place: base is the longest version
    branch = base + (9,)  # base was grown past: copies its prefix first
    cut = longer[:2]  # a prefix costs nothing
    regrown = cut + (7,)
    assert base == (1, 2, 3) and longer == (1, 2, 3, 4) and branch == (1, 2, 3, 9)
    assert regrown == (1, 2, 7) and longer == (1, 2, 3, 4) and cut == (1, 2)
    assert hash(longer) == hash((1, 2, 3, 4)) and longer[-1] == 4 and longer[1:3] == (2, 3)
    with pytest.raises(IndexError):
        base[3]  # the shared list holds more than this version


def test_the_generated_copiers_make_what_dataclasses_replace_makes():
    # `spec.state.replace` and the `Cluster.with_*` copiers build through a twin class: the
    # copy must be of the class, equal to the generic copy, with its own hash (not the cached
    # one of the state it came from), and leave that state as it was.
    import dataclasses

    from spec.state import FetchRequest, replace

    config = cfg("current", brokers=3, max_crashes=1)
    s = run(config, produce(1), fetch(1))
    before = hash(s)
    request = FetchRequest(0, 1, 0, 0, 0)
    replica = replace(s.replica(0, 1), high_watermark=1)
    # (The generic copy is given `_hash=0`: it would carry over the cached hash.)
    for copy, expected in (
            (replace(s, next_value=9), dataclasses.replace(s, next_value=9, _hash=0)),
            (s.with_replica(0, 1, replica), dataclasses.replace(s, _hash=0, replicas=(
                (s.replicas[0][0], replica, s.replicas[0][2]),))),
            (s.with_fetch(0, 2, request), dataclasses.replace(s, _hash=0, fetches=(
                (*s.fetches[0][:2], request),)))):
        assert type(copy) is type(s) and copy == expected and copy != s
        assert hash(copy) == hash(expected) != before
    assert hash(s) == before and s.replica(0, 1).high_watermark == 0
