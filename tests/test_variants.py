"""Each protocol variant's rules: truncation, fencing, ISR expansion and HW under min ISR.

The same action sequence is replayed under every variant where that shows the difference
best; the expected outcomes are written out per variant.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import (
    cfg,
    fetch,
    last_record_epoch_fetch,
    not_enabled,
    outcome,
    outcomes,
    produce,
    refused,
    run,
    run_from,
    v,
)

from spec import VARIANTS, initial_state, violations
from spec import actions as S
from spec.state import UNKNOWN, FetchResponse, PartitionState, Replica
from vocab.outcomes import Code, Outcome, Refusal

ALL = ("hw-truncation", "kip-101", "kip-279", "kip-320", "current")


# ------------------------------------------------------------------------------------------
# The epoch cache queries each truncation rule is built on


def test_end_offset_for_epoch_is_kip_279s_answer():
    r = Replica(log=(v(1), v(2), v(3, 1), v(4, 3)), epoch_cache=((0, 0), (1, 2), (3, 3)))
    assert r.end_offset_for_epoch(0) == (0, 2)
    assert r.end_offset_for_epoch(1) == (1, 3)
    assert r.end_offset_for_epoch(2) == (1, 3)  # largest epoch <= 2 is 1
    assert r.end_offset_for_epoch(3) == (3, 4)  # the latest epoch ends at LEO
    assert r.end_offset_for_epoch(-1) == (-1, -1)
    assert Replica().end_offset_for_epoch(0) == (-1, -1)


def test_start_offset_after_epoch_is_kip_101s_answer():
    r = Replica(log=(v(1), v(2), v(3, 1), v(4, 3)), epoch_cache=((0, 0), (1, 2), (3, 3)))
    assert r.start_offset_after_epoch(0) == 2
    assert r.start_offset_after_epoch(1) == 3
    assert r.start_offset_after_epoch(2) == 3  # KAFKA-6361: an epoch it never had
    assert r.start_offset_after_epoch(3) == 4  # the latest epoch: LEO


def test_epoch_start_offset_and_latest_epoch():
    r = Replica(log=(v(1), v(2, 2)), epoch_cache=((0, 0), (2, 1)))
    assert [r.epoch_start_offset(e) for e in (0, 1, 2)] == [0, -1, 1]
    assert r.latest_epoch() == 2
    assert Replica().latest_epoch() == -1


def test_truncating_at_the_leo_drops_a_cache_entry_that_starts_there():
    # KAFKA-10706: an epoch led without a write is shed though no record goes.
    r = Replica(log=(v(1),), epoch_cache=((0, 0), (2, 1)))
    assert r.truncated_to(1) == replace(r, epoch_cache=((0, 0),))
    assert r.truncated_to(2) is r and r.truncated_to(1).truncated_to(1) == r.truncated_to(1)


def test_truncated_to_cuts_log_hw_flushed_offset_and_epoch_cache():
    r = Replica(log=(v(1), v(2), v(3, 1)), high_watermark=3, flushed_offset=3,
                epoch_cache=((0, 0), (1, 2)))
    cut = r.truncated_to(2)
    assert (cut.log, cut.high_watermark, cut.flushed_offset, cut.epoch_cache) == (
        (v(1), v(2)), 2, 2, ((0, 0),)
    )
    assert r.truncated_to(3) is r
    assert r.truncated_to(5) is r


def test_appended_opens_cache_entries_for_new_epochs():
    r = Replica(log=(v(1),), epoch_cache=((0, 0),))
    grown = r.appended((v(2), v(3, 2), v(4, 2)), flush_interval=None)
    assert grown.log == (v(1), v(2), v(3, 2), v(4, 2))
    assert grown.epoch_cache == ((0, 0), (2, 2))
    assert grown.flushed_offset == 0
    assert r.appended((v(2),), flush_interval=2).flushed_offset == 2


# ------------------------------------------------------------------------------------------
# One divergence, five rules: the new leader lacks the follower's last record


def diverged_follower(variant: str):
    """Three brokers: follower 1 has v1, follower 2 has v1 v2 (v2 uncommitted); leader 0
    dies, broker 1 leads epoch 1 and broker 2 becomes its follower."""
    config = cfg(variant, brokers=3, max_crashes=1, max_leader_epochs=3)
    state = run(config, produce(1), fetch(1), produce(2), fetch(2), S.BrokerCrash(0),
                S.ControllerHandleBrokerFailure(0), S.BecomeLeader(0, 1, 1, 1))
    return config, state


@pytest.mark.parametrize(
    ("variant", "become", "said"),
    [
        ("hw-truncation", Outcome(Code.FOLLOWER_TRUNCATED_TO_HW, leader=1, leader_epoch=1,
                                  high_watermark=0),
         [
             Outcome(Code.FETCH_SENT, fetch_offset=0),
             Outcome(Code.RECORDS_SENT, records=1, fetch_offset=0, high_watermark=0,
                     answer_high_watermark=0),
             Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=0),
         ]),
        ("kip-101", Outcome(Code.FOLLOWER, leader=1, leader_epoch=1),
         [
             Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
             Outcome(Code.EPOCH_END, epoch=0, end_offset=1),
             Outcome(Code.TRUNCATED, before=2, after=1),
         ]),
        ("kip-279", Outcome(Code.FOLLOWER, leader=1, leader_epoch=1),
         [
             Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
             Outcome(Code.EPOCH_END, epoch=0, end_offset=1),
             Outcome(Code.TRUNCATED, before=2, after=1),
         ]),
        ("kip-320", Outcome(Code.FOLLOWER, leader=1, leader_epoch=1),
         [
             Outcome(Code.FETCH_SENT, fetch_offset=2),
             Outcome(Code.DIVERGING_EPOCH, epoch=0, end_offset=1),
             Outcome(Code.DIVERGED, before=2, after=1),
         ]),
        ("current", Outcome(Code.FOLLOWER, leader=1, leader_epoch=1),
         [
             Outcome(Code.FETCH_SENT, fetch_offset=2),
             Outcome(Code.DIVERGING_EPOCH, epoch=0, end_offset=1),
             Outcome(Code.DIVERGED, before=2, after=1),
         ]),
    ],
)
def test_follower_removes_the_suffix_the_new_leader_lacks(variant, become, said):
    config, state = diverged_follower(variant)
    state, first = outcome(config, state, S.BecomeFollower(0, 2, 1, 1))
    assert first == become
    state, rest = outcomes(config, state, fetch(2, leader=1))
    assert rest == said
    r = state.replica(0, 2)
    assert r.log == (v(1),)
    assert r.epoch_cache == ((0, 0),)
    assert r.truncation_pending is False
    assert violations(config, state) == []


def test_truncation_round_blocks_records_until_done():
    config, state = diverged_follower("kip-101")
    state = run_from(config, state, S.BecomeFollower(0, 2, 1, 1))
    assert state.replica(0, 2).truncation_pending is True
    state = state.with_fetch(0, 2, FetchResponse(1, 1, "records", records=(v(9, 1),),
                                                 fetch_offset=2))
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 2))
    assert said == Outcome(Code.DROPPED_TRUNCATION_PENDING)
    assert state.replica(0, 2).log == (v(1), v(2))


def test_kip_101_truncation_is_due_only_with_a_log():
    config = cfg("kip-101", brokers=3, max_crashes=1)
    state = run(config, S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2),
                S.BecomeFollower(0, 1, 1, 1))
    assert state.replica(0, 1).truncation_pending is False
    assert outcome(config, state, S.FollowerSendFetch(0, 1))[1] == (
        Outcome(Code.FETCH_SENT, fetch_offset=0)
    )


# ------------------------------------------------------------------------------------------
# hw-truncation (pre-0.11)


def test_hw_truncation_on_leader_change_loses_a_committed_record():
    # v1 is committed (leader HW 1) but both followers still have HW 0.
    config = cfg("hw-truncation", brokers=3, max_crashes=1)
    state = run(config, produce(1), fetch(1), fetch(2), fetch(1), fetch(2))
    assert [state.replica(0, b).high_watermark for b in range(3)] == [1, 0, 0]
    state = run_from(config, state, S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0),
                     S.BecomeLeader(0, 1, 1, 1))
    state, said = outcome(config, state, S.BecomeFollower(0, 2, 1, 1))
    assert said == (
        Outcome(Code.FOLLOWER_TRUNCATED_TO_HW, leader=1, leader_epoch=1, high_watermark=0)
    )
    r = state.replica(0, 2)
    assert (r.log, r.high_watermark, r.epoch_cache) == ((), 0, ())


def test_hw_truncation_keeps_the_log_when_only_the_epoch_changes():
    # The ZooKeeper-era controller bumps the leader epoch on an ISR shrink; the leader is the
    # same broker, so pre-0.11 makeFollower did not truncate.
    config = cfg("hw-truncation", brokers=3, max_crashes=1)
    state = run(config, produce(1), fetch(1), S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))
    state, said = outcome(config, state, S.BecomeFollower(0, 1, 1, 1))
    assert said == Outcome(Code.FOLLOWER, leader=0, leader_epoch=1)
    assert state.replica(0, 1).log == (v(1),)


def test_hw_truncation_after_a_restart():
    # The follower keeps its flushed v1 through the crash; the restart itself does not cut,
    # but the restarted broker forgot its view, so becoming follower counts as a leader change
    # and truncates to its HW (0).
    config = cfg("hw-truncation", brokers=2, max_crashes=1, log_flush_interval_messages=1)
    state = run(config, produce(1), fetch(1), S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1),
                S.BrokerRestart(1))
    r = state.replica(0, 1)
    assert (r.log, r.high_watermark, r.leader) == ((v(1),), 0, -1)
    state, said = outcome(config, state, S.BecomeFollower(0, 1, 1, 1))
    assert said == (
        Outcome(Code.FOLLOWER_TRUNCATED_TO_HW, leader=0, leader_epoch=1, high_watermark=0)
    )
    assert state.replica(0, 1).log == ()


@pytest.mark.parametrize(
    ("variant", "said"),
    [
        ("kip-101", [
            Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
            Outcome(Code.EPOCH_END, epoch=0, end_offset=1),
            Outcome(Code.TRUNCATED, before=1, after=1),
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                    answer_high_watermark=1),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
        ]),
        ("kip-279", [
            Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
            Outcome(Code.EPOCH_END, epoch=0, end_offset=1),
            Outcome(Code.TRUNCATED, before=1, after=1),
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                    answer_high_watermark=1),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
        ]),
        ("kip-320", [
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                    answer_high_watermark=1),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                    answer_high_watermark=1),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
        ]),
        ("current", [
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                    answer_high_watermark=1),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=1, high_watermark=1,
                    answer_high_watermark=1),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=1),
        ]),
    ],
)
def test_restart_then_follow_keeps_the_log_under_epoch_rules(variant, said):
    # As above, but the epoch rules ask the leader instead of trusting the stale HW 0.
    config = cfg(variant, brokers=2, max_crashes=1, log_flush_interval_messages=1)
    state = run(config, produce(1), fetch(1), S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1),
                S.BrokerRestart(1))
    ps = state.controller.partitions[0]
    epochs = (ps.leader_epoch, ps.partition_epoch)
    state = run_from(config, state, S.BecomeLeader(0, 0, *epochs), S.BecomeFollower(0, 1, *epochs))
    state, got = outcomes(config, state, fetch(1), fetch(1))
    assert got == said
    assert state.replica(0, 1).log == (v(1),)
    assert state.replica(0, 1).truncation_pending is False


def test_hw_truncation_not_to_an_offline_partition():
    config = cfg("hw-truncation", brokers=2, max_crashes=3, max_leader_epochs=5,
                 log_flush_interval_messages=1)
    state = run(config, produce(1), fetch(1), S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1),
                S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0), S.BrokerRestart(1))
    assert state.controller.partitions[0] == PartitionState(-1, 2, (0,), 2)
    state, said = outcome(config, state, S.BecomeFollower(0, 1, 2, 2))
    assert said == Outcome(Code.FOLLOWER, leader=-1, leader_epoch=2)
    assert state.replica(0, 1).log == (v(1),)


def test_hw_truncation_out_of_range_after_the_leader_lost_data():
    # Both replicas crash; the leader had nothing flushed, the follower had v1 flushed (and
    # HW 1). The leader returns first and is elected; the follower's fetch is out of range.
    config = cfg("hw-truncation", brokers=2, max_crashes=2, max_leader_epochs=5)
    state = run(config, produce(1), fetch(1), fetch(1), fetch(1))
    state = state.with_replica(0, 1, replace(state.replica(0, 1), flushed_offset=1))
    state = run_from(config, state, S.BrokerCrash(1), S.BrokerCrash(0),
                     S.ControllerHandleBrokerFailure(1), S.ControllerHandleBrokerFailure(0),
                     S.BrokerRestart(0))
    assert state.excused == {1}
    state = run_from(config, state, S.ControllerElectLeader(0), S.BecomeLeader(0, 0, 3, 3),
                     S.BrokerRestart(1))
    state, said = outcomes(config, state, S.BecomeFollower(0, 1, 3, 3), fetch(1))
    assert said == [
        Outcome(Code.FOLLOWER_TRUNCATED_TO_HW, leader=0, leader_epoch=3, high_watermark=1),
        Outcome(Code.FETCH_SENT, fetch_offset=1),
        Outcome(Code.OFFSET_OUT_OF_RANGE),
        Outcome(Code.OUT_OF_RANGE_TRUNCATED, log_end_offset=0),
    ]
    assert state.replica(0, 1).log == ()


# ------------------------------------------------------------------------------------------
# KAFKA-6361: fast failover; the follower asks for an epoch the new leader never had


def fast_failover(variant: str):
    """Broker 2 has v1 v2 (epoch 0), broker 1 has v1 and then leads epoch 1, writes v3 and
    dies; broker 2 leads epoch 2 (its cache: 0:0 2:2); broker 1 returns as its follower."""
    config = cfg(variant, brokers=3, max_records=3, max_crashes=2, max_leader_epochs=3,
                 log_flush_interval_messages=1)
    state = run(config, produce(1), fetch(1), produce(2), fetch(2), S.BrokerCrash(0),
                S.ControllerHandleBrokerFailure(0), S.BecomeLeader(0, 1, 1, 1),
                produce(3, leader=1), S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1),
                S.BecomeLeader(0, 2, 2, 2), S.BrokerRestart(1), S.BecomeFollower(0, 1, 2, 2))
    assert state.replica(0, 1).log == (v(1), v(3, 1))
    assert state.replica(0, 2).epoch_cache == ((0, 0), (2, 2))
    return config, state


@pytest.mark.parametrize(
    ("variant", "said", "log"),
    [
        # KIP-101 answers the start of the next epoch the leader has (2): v3 stays. B4.
        ("kip-101", [
            Outcome(Code.EPOCH_REQUEST_SENT, epoch=1),
            Outcome(Code.EPOCH_END, epoch=1, end_offset=2),
            Outcome(Code.TRUNCATED, before=2, after=2),
            Outcome(Code.FETCH_SENT, fetch_offset=2),
            Outcome(Code.RECORDS_SENT, records=0, fetch_offset=2, high_watermark=2,
                    answer_high_watermark=2),
            Outcome(Code.RECORDS_APPENDED, records=0, high_watermark=2),
        ],
         (v(1), v(3, 1))),
        # KIP-279 answers (0, 2); the follower's epoch 0 ends at 1: cut there, fetch v2.
        ("kip-279", [
            Outcome(Code.EPOCH_REQUEST_SENT, epoch=1),
            Outcome(Code.EPOCH_END, epoch=0, end_offset=2),
            Outcome(Code.TRUNCATED, before=2, after=1),
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=1, fetch_offset=1, high_watermark=2,
                    answer_high_watermark=2),
            Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=2),
        ],
         (v(1), v(2))),
        # KIP-320 and current: the fetch itself is answered with the diverging epoch.
        *((variant, [
            Outcome(Code.FETCH_SENT, fetch_offset=2),
            Outcome(Code.DIVERGING_EPOCH, epoch=0, end_offset=2),
            Outcome(Code.DIVERGED, before=2, after=1),
            Outcome(Code.FETCH_SENT, fetch_offset=1),
            Outcome(Code.RECORDS_SENT, records=1, fetch_offset=1, high_watermark=2,
                    answer_high_watermark=2),
            Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=2),
        ],
           (v(1), v(2))) for variant in ("kip-320", "current")),
    ],
)
def test_fast_failover(variant, said, log):
    config, state = fast_failover(variant)
    state, got = outcomes(config, state, fetch(1, leader=2), fetch(1, leader=2))
    assert got == said
    assert state.replica(0, 1).log == log


def test_fast_failover_leaves_kip_101_logs_diverged():
    config, state = fast_failover("kip-101")
    state = run_from(config, state, fetch(1, leader=2), fetch(1, leader=2))
    assert violations(config, state) == [
        ("LogMatching", "p0 offset 1: broker 1 has v3@e1, broker 2 has v2@e0, both below HW"),
    ]


# ------------------------------------------------------------------------------------------
# KIP-279: another round when the follower lacks the answered epoch


def crafted_epoch_round(variant: str, leader_log, leader_cache, follower_log, follower_cache,
                        follower_hw=1):
    """Two brokers in leader epoch 3: leader 0, follower 1 with an OffsetsForLeaderEpoch round
    due. Logs and caches as given."""
    config = cfg(variant, brokers=2, max_leader_epochs=5)
    state = run(config)
    state = state.with_partition_state(0, PartitionState(0, 3, (0, 1), 3))
    view = dict(leader=0, leader_epoch=3, isr=(0, 1), partition_epoch=3)
    leader = replace(state.replica(0, 0), log=leader_log, epoch_cache=leader_cache,
                     high_watermark=0, **view)
    follower = Replica(log=follower_log, epoch_cache=follower_cache,
                       high_watermark=follower_hw, truncation_pending=True, **view)
    return config, state.with_replica(0, 0, leader).with_replica(0, 1, follower)


def lacks_epoch(variant):
    # The leader has epochs 0, 1, 3; the follower has epochs 0, 2 (it led epoch 2 alone).
    return crafted_epoch_round(variant, (v(1), v(3, 1)), ((0, 0), (1, 1), (3, 2)),
                               (v(1), v(2, 2)), ((0, 0), (2, 1)))


def test_kip_279_steps_back_and_asks_again():
    config, state = lacks_epoch("kip-279")
    state, said = outcomes(config, state, fetch(1))
    assert said == [
        Outcome(Code.EPOCH_REQUEST_SENT, epoch=2),
        Outcome(Code.EPOCH_END, epoch=1, end_offset=2),
        Outcome(Code.TRUNCATED_ROUND_DUE, before=2, after=1),
    ]
    assert state.replica(0, 1).truncation_pending is True
    state, said = outcomes(config, state, fetch(1), fetch(1))
    assert said == [
        Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
        Outcome(Code.EPOCH_END, epoch=0, end_offset=1),
        Outcome(Code.TRUNCATED, before=1, after=1),
        Outcome(Code.FETCH_SENT, fetch_offset=1),
        Outcome(Code.RECORDS_SENT, records=1, fetch_offset=1, high_watermark=1,
                answer_high_watermark=0),
        Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=0),
    ]
    r = state.replica(0, 1)
    assert (r.log, r.epoch_cache, r.truncation_pending) == ((v(1), v(3, 1)), ((0, 0), (1, 1)),
                                                            False)


def test_kip_101_keeps_the_record_of_an_epoch_the_leader_never_had():
    # KAFKA-6361: epoch 2 is unknown to the leader, which answers the start of epoch 3.
    config, state = lacks_epoch("kip-101")
    state, said = outcomes(config, state, fetch(1))
    assert said == [
        Outcome(Code.EPOCH_REQUEST_SENT, epoch=2),
        Outcome(Code.EPOCH_END, epoch=2, end_offset=2),
        Outcome(Code.TRUNCATED, before=2, after=2),
    ]
    assert state.replica(0, 1).log == (v(1), v(2, 2))


def test_kip_279_follower_truncates_to_its_hw_on_an_undefined_answer():
    config, state = lacks_epoch("kip-279")
    state = run_from(config, state, S.FollowerSendFetch(0, 1))
    state = state.with_fetch(0, 1, FetchResponse(0, 3, "epoch", epoch=-1, end_offset=-1))
    state, said = outcome(config, state, S.FollowerHandleFetchResponse(0, 1))
    assert said == Outcome(Code.TRUNCATED, before=2, after=1)
    assert state.replica(0, 1).log == (v(1),)
    assert state.replica(0, 1).truncation_pending is False


def below_all_epochs(variant):
    # The leader was elected with an empty log in epoch 2 (its cache starts there) and wrote
    # v5; the follower has v1 v2 from epoch 0 and HW 1.
    return crafted_epoch_round(variant, (v(5, 2),), ((2, 0),), (v(1), v(2)), ((0, 0),))


def test_kip_279_leader_answers_below_its_first_epoch_with_its_start():
    config, state = below_all_epochs("kip-279")
    state, said = outcomes(config, state, fetch(1))
    assert said == [
        Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
        Outcome(Code.EPOCH_END, epoch=0, end_offset=0),
        Outcome(Code.TRUNCATED, before=2, after=0),
    ]
    assert state.replica(0, 1).log == ()


def test_kip_101_leader_answers_undefined_below_its_first_epoch():
    config, state = below_all_epochs("kip-101")
    state, said = outcomes(config, state, fetch(1))
    assert said == [
        Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
        Outcome(Code.EPOCH_END, epoch=0, end_offset=-1),
        Outcome(Code.TRUNCATED, before=2, after=1),
    ]
    assert state.replica(0, 1).log == (v(1),)


def above_all_epochs(variant):
    # The leader still acts in epoch 1 (its cache: 0:0 1:1); the follower led epoch 2 and
    # asks for it. Without fencing nothing stops the stale leader from answering.
    return crafted_epoch_round(variant, (v(1), v(2, 1)), ((0, 0), (1, 1)),
                               (v(1), v(3, 2)), ((0, 0), (2, 1)))


@pytest.mark.parametrize(("variant", "answer"), [("kip-101", Outcome(Code.EPOCH_END, epoch=2,
                                                                     end_offset=-1)),
                                                  ("kip-279", Outcome(Code.EPOCH_END, epoch=-1,
                                                                      end_offset=-1))])
def test_leader_answers_undefined_above_its_latest_epoch(variant, answer):
    config, state = above_all_epochs(variant)
    state, said = outcomes(config, state, fetch(1))
    assert said == [Outcome(Code.EPOCH_REQUEST_SENT, epoch=2), answer, Outcome(Code.TRUNCATED,
                                                                               before=2, after=1)]
    assert state.replica(0, 1).log == (v(1),)


# ------------------------------------------------------------------------------------------
# Fencing (KIP-320): requests and answers carry the leader epoch


def epoch_bump(variant: str):
    """Three brokers; broker 2 fails and the controller shrinks the ISR. kip-320 (a
    ZooKeeper-era controller) bumps the leader epoch to 1."""
    config = cfg(variant, brokers=3, max_crashes=1)
    return config, run(config, produce(1), S.BrokerCrash(2), S.ControllerHandleBrokerFailure(2))


def test_fenced_leader_epoch():
    config, state = epoch_bump("kip-320")
    state, said = outcomes(config, state, S.FollowerSendFetch(0, 1), S.BecomeLeader(0, 0, 1, 1),
                           S.LeaderHandleFetch(0, 0, 1), S.FollowerHandleFetchResponse(0, 1))
    assert said == [
        Outcome(Code.FETCH_SENT, fetch_offset=0),
        Outcome(Code.STILL_LEADER, leader_epoch=1),
        Outcome(Code.FENCED_LEADER_EPOCH),
        Outcome(Code.DROPPED_OTHER_EPOCH, leader_epoch=1, current_leader_epoch=0),
    ]
    assert state.replica(0, 0).remote_log_end_offset == (-1, -1, -1)  # nothing recorded
    assert state.replica(0, 1).log == ()


def test_unknown_leader_epoch():
    config, state = epoch_bump("kip-320")
    state, said = outcomes(config, state, S.BecomeFollower(0, 1, 1, 1), S.FollowerSendFetch(0, 1),
                           S.LeaderHandleFetch(0, 0, 1), S.FollowerHandleFetchResponse(0, 1))
    assert said == [
        Outcome(Code.FOLLOWER, leader=0, leader_epoch=1),
        Outcome(Code.FETCH_SENT, fetch_offset=0),
        Outcome(Code.UNKNOWN_LEADER_EPOCH),
        Outcome(Code.DROPPED_OTHER_EPOCH, leader_epoch=0, current_leader_epoch=1),
    ]
    assert state.fetches[0][1] is None
    assert state.replica(0, 1).log == ()


@pytest.mark.parametrize("variant", ["hw-truncation", "kip-279"])
def test_without_fencing_a_stale_epoch_fetch_is_served(variant):
    config, state = epoch_bump(variant)
    state, said = outcomes(config, state, S.FollowerSendFetch(0, 1), S.BecomeLeader(0, 0, 1, 1),
                           S.LeaderHandleFetch(0, 0, 1), S.FollowerHandleFetchResponse(0, 1))
    assert said == [
        Outcome(Code.FETCH_SENT, fetch_offset=0),
        Outcome(Code.STILL_LEADER, leader_epoch=1),
        Outcome(Code.RECORDS_SENT, records=1, fetch_offset=0, high_watermark=0,
                answer_high_watermark=0),
        Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=0),
    ]
    assert state.replica(0, 1).log == (v(1),)


@pytest.mark.parametrize(
    ("variant", "said", "log"),
    [
        ("kip-320", Outcome(Code.DROPPED_OTHER_EPOCH, leader_epoch=0, current_leader_epoch=1), ()),
        ("kip-101", Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=0), (v(1),)),
        ("hw-truncation", Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=0), (v(1),)),
    ],
)
def test_an_answer_from_the_previous_epoch(variant, said, log):
    # The follower's fetch is answered in epoch 0; it applies epoch 1 (same leader) before the
    # answer arrives. Only fencing variants drop it.
    config, state = epoch_bump(variant)
    state = run_from(config, state, S.FollowerSendFetch(0, 1), S.LeaderHandleFetch(0, 0, 1),
                     S.BecomeFollower(0, 1, 1, 1))
    state, got = outcome(config, state, S.FollowerHandleFetchResponse(0, 1))
    assert got == said
    assert state.replica(0, 1).log == log


def test_current_controller_keeps_the_leader_epoch_on_isr_shrink():
    config, state = epoch_bump("current")
    assert state.controller.partitions[0] == PartitionState(0, 0, (0, 1), 1)
    state, said = outcomes(config, state, S.BecomeFollower(0, 1, 0, 1), fetch(1))
    assert said == [
        Outcome(Code.FOLLOWER, leader=0, leader_epoch=0),
        Outcome(Code.FETCH_SENT, fetch_offset=0),
        Outcome(Code.RECORDS_SENT, records=1, fetch_offset=0, high_watermark=0,
                answer_high_watermark=0),
        Outcome(Code.RECORDS_APPENDED, records=1, high_watermark=0),
    ]


# ------------------------------------------------------------------------------------------
# ISR expansion: KAFKA-7128 (epoch start) and KIP-903 (broker epochs)


def stale_hw_leader(variant: str):
    """Four brokers: v1 v2 committed on 0, 1, 2; broker 3 lags and is shrunk out. Leader 0
    dies; broker 1 leads epoch 1 with a stale HW 0 (followers learn HW a round trip late);
    broker 3 follows it and fetches from offset 0."""
    config = cfg(variant, brokers=4, max_crashes=1, max_leader_epochs=3)
    state = run(config, produce(1), produce(2), fetch(1), fetch(2), fetch(1), fetch(2), S.Tick(),
                S.Tick(), S.LeaderShrinkIsr(0, 0, 3), S.BrokerCrash(0), S.ControllerHandleBrokerFailure(0),
                S.BecomeLeader(0, 1, 1, 2), S.BecomeFollower(0, 3, 1, 2), S.FollowerSendFetch(0, 3),
                S.LeaderHandleFetch(0, 1, 3))
    r = state.replica(0, 1)
    assert (r.high_watermark, r.epoch_cache, r.remote_log_end_offset[3]) == (
        0, ((0, 0), (1, 2)), 0)
    return config, state


@pytest.mark.parametrize("variant", ["hw-truncation", "kip-101", "kip-279"])
def test_stale_hw_admits_a_replica_missing_committed_data(variant):
    config, state = stale_hw_leader(variant)
    state, said = outcome(config, state, S.LeaderExpandIsr(0, 1, 3))
    assert said == Outcome(Code.ISR_CHANGED, isr=[1, 2, 3])  # B5: broker 3 has nothing of v1 v2 yet


@pytest.mark.parametrize("variant", ["kip-320", "current"])
def test_expansion_waits_for_the_epoch_start(variant):
    config, state = stale_hw_leader(variant)
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 1, 3)) == (
        refused(Refusal.BELOW_EPOCH_START, follower=3, offset=2)
    )
    state = run_from(config, state, S.FollowerHandleFetchResponse(0, 3), fetch(3, leader=1))
    assert outcome(config, state, S.LeaderExpandIsr(0, 1, 3))[1] == (
        Outcome(Code.ISR_CHANGED, isr=[1, 2, 3])
    )


def stale_broker_epoch(variant: str):
    """Follower 1's last fetch (offset 1, broker epoch 0) is all the leader knows of it when
    it crashes with nothing flushed; its session expires and the ISR shrinks to {0}."""
    config = cfg(variant, brokers=2, max_crashes=1, max_leader_epochs=3)
    state = run(config, produce(1), fetch(1), S.FollowerSendFetch(0, 1), S.LeaderHandleFetch(0, 0, 1),
                S.BrokerCrash(1), S.ControllerHandleBrokerFailure(1))
    ps = state.controller.partitions[0]
    state = run_from(config, state, S.BecomeLeader(0, 0, ps.leader_epoch, ps.partition_epoch))
    assert state.replica(0, 0).remote_log_end_offset == (-1, 1)
    assert state.replica(0, 0).remote_broker_epoch == (-1, 0)
    return config, state


def test_current_rejects_an_expansion_from_a_stale_broker_epoch():
    config, state = stale_broker_epoch("current")
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.STALE_BROKER_EPOCH, broker_epoch=0, follower=1)
    )
    state = run_from(config, state, S.BrokerRestart(1))
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.STALE_BROKER_EPOCH, broker_epoch=0, follower=1)
    )
    # The restarted broker (epoch 1) catches up and is admitted on its own fetches.
    state = run_from(config, state, S.BecomeFollower(0, 1, 0, 1), fetch(1))
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.BELOW_HIGH_WATERMARK, follower=1)
    )
    state = run_from(config, state, fetch(1))
    assert state.replica(0, 0).remote_broker_epoch == (-1, 1)
    assert outcome(config, state, S.LeaderExpandIsr(0, 0, 1))[1] == (
        Outcome(Code.ISR_CHANGED, isr=[0, 1])
    )


def test_kip_320_readmits_a_crashed_replica_from_its_stale_fetch():
    config, state = stale_broker_epoch("kip-320")
    state, said = outcome(config, state, S.LeaderExpandIsr(0, 0, 1))
    assert said == Outcome(Code.ISR_CHANGED, isr=[0, 1])  # B7
    state = run_from(config, state, S.BrokerRestart(1))
    assert violations(config, state) == [
        ("NoCommittedDataLoss",
         "p0 offset 0: leader 0 has v1@e0 below HW 1, ISR member 1 has nothing"),
    ]


def test_broker_epoch_rule_alone_fixes_kip_320():
    config, state = stale_broker_epoch("kip-320")
    config = config.replace(variant=VARIANTS["kip-320"].with_rules(broker_epochs=True))
    assert not_enabled(config, state, S.LeaderExpandIsr(0, 0, 1)) == (
        refused(Refusal.STALE_BROKER_EPOCH, broker_epoch=0, follower=1)
    )


# ------------------------------------------------------------------------------------------
# HW below min.insync.replicas (KAFKA-15583)


@pytest.mark.parametrize(("variant", "hw"), [("kip-320", 1), ("current", 0)])
def test_hw_does_not_advance_below_min_isr_in_current(variant, hw):
    config = cfg(variant, brokers=2, min_insync_replicas=2)
    state = run(config, produce(1), S.Tick(), S.Tick())
    state, said = outcome(config, state, S.LeaderShrinkIsr(0, 0, 1))
    assert said == Outcome(Code.ISR_CHANGED, isr=[0])
    assert state.replica(0, 0).high_watermark == hw
    # The lagging follower catches up and rejoins: with min ISR met again, HW moves.
    state = run_from(config, state, fetch(1), fetch(1))
    assert state.replica(0, 0).high_watermark == hw
    state = run_from(config, state, S.LeaderExpandIsr(0, 0, 1))
    assert state.replica(0, 0).high_watermark == 1


@pytest.mark.parametrize("variant", ALL)
def test_every_variant_rejects_acks_all_writes_below_min_isr(variant):
    config = cfg(variant, brokers=2, min_insync_replicas=2)
    state = run(config, produce(1), S.Tick(), S.Tick(), S.LeaderShrinkIsr(0, 0, 1))
    assert outcomes(config, state, produce(2))[1] == [
        Outcome(Code.PRODUCE_SENT, value=2, broker=0),
        Outcome(Code.NOT_ENOUGH_REPLICAS),
    ]


# ------------------------------------------------------------------------------------------
# B2 when the new leader lost everything: its epoch cache starts above the follower's epoch


def b2_total_loss(variant: str):
    """The steps of tests/testdata/b2_divergence_after_hard_failures.txt: v1 committed, only
    A (broker 0) flushed it; both crash; B (broker 1) returns first with an empty log, is
    elected in epoch 3 (cache 3:0) and writes v2 at offset 0; A returns with v1 and HW 1."""
    config = cfg(variant, brokers=2, max_records=2, max_crashes=2, max_leader_epochs=4)
    state = run(config, produce(1), fetch(1), fetch(1), S.BrokerFlush(0, 0), S.BrokerCrash(0),
                S.BrokerCrash(1), S.ControllerHandleBrokerFailure(0), S.ControllerHandleBrokerFailure(1),
                S.BrokerRestart(1), S.BecomeFollower(0, 1, 2, 2), S.ControllerElectLeader(0),
                S.BecomeLeader(0, 1, 3, 3), produce(2, leader=1), S.BrokerRestart(0),
                S.BecomeFollower(0, 0, 3, 3))
    assert state.replica(0, 1).epoch_cache == ((3, 0),)
    assert (state.replica(0, 0).log, state.replica(0, 0).high_watermark) == ((v(1),), 1)
    return config, state


def converge(config, state):
    state, said = outcomes(config, state, fetch(0, leader=1), fetch(0, leader=1),
                           fetch(0, leader=1), S.LeaderExpandIsr(0, 1, 0))
    return state, said


@pytest.mark.parametrize("variant", ["kip-320", "current"])
def test_b2_total_loss_converges_with_diverging_epochs(variant):
    # The leader has no epoch <= 0: the follower's whole log diverges and is cut to 0. (Kafka's
    # leader answers (0, 0) here, the model (-1, -1); the cut is the same, so only the effect
    # is pinned.)
    config, state = b2_total_loss(variant)
    state, said = converge(config, state)
    assert (said[0], said[2]) == (Outcome(Code.FETCH_SENT, fetch_offset=1), Outcome(Code.DIVERGED,
                                                                                    before=1, after=0))
    assert state.replica(0, 0).log == (v(2, 3),)
    assert violations(config, state) == []


def test_b2_total_loss_converges_under_kip_279():
    config, state = b2_total_loss("kip-279")
    state, said = converge(config, state)
    assert said[:3] == [
        Outcome(Code.EPOCH_REQUEST_SENT, epoch=0),
        Outcome(Code.EPOCH_END, epoch=0, end_offset=0),
        Outcome(Code.TRUNCATED, before=1, after=0),
    ]
    assert state.replica(0, 0).log == (v(2, 3),)
    assert violations(config, state) == []


# ------------------------------------------------------------------------------------------
# B11: a leader that missed leader epochs keeps its followers' LEOs (and the rule that fixes it)

B11 = Path(__file__).parent / "testdata" / "b11_leader_missed_epoch.txt"
FIXED = VARIANTS["current"].with_rules(missed_epoch_resets_followers=True)


def transcript_run(path: Path, variant=None, **changes):
    """A transcript's commands run on `variant` (None: the transcript's own) and its config
    with `changes`: (config, [(command, output, state after)])."""
    from model_check.explore import scenario

    if variant is not None:
        changes["variant"] = variant
    runner = scenario.Runner(str(path))
    out = []
    for block in scenario.parse(path.read_text(), str(path)):
        text = runner.run(block)
        if block.command.startswith("config") and changes:
            runner.config = runner.config.replace(**changes)
            runner.state = initial_state(runner.config)
        out.append((block.command, text, runner.state))
    return runner.config, out


def b11_run(variant=None):
    """The B11 transcript's run (`transcript_run`). The step that matters is the second
    `become-leader broker=1`: broker 1 goes from epoch 1 to epoch 3."""
    return transcript_run(B11, variant)


def b11_reelection(out) -> int:
    return [i for i, (command, _, _) in enumerate(out) if command == "become-leader broker=1"][1]


def b11_one_up(s):
    """The state before B11's re-election with broker 1's request one leader epoch past its
    view instead of two (no epoch missed), and the BecomeLeader that applies it."""
    r = s.replicas[0][1]
    m = next(m for m in s.leader_and_isr if m.broker == 1 and m.leader == 1)
    one_up = replace(s, leader_and_isr=frozenset({replace(m, leader_epoch=r.leader_epoch + 1)}))
    return one_up, S.BecomeLeader(0, 1, r.leader_epoch + 1, m.partition_epoch)


def test_b11_the_reelected_leader_counts_a_follower_that_truncated():
    _, out = b11_run()
    i = b11_reelection(out)
    before, after = out[i - 1][2].replicas[0], out[i][2].replicas[0]
    assert (before[1].leader_epoch, after[1].leader_epoch) == (1, 3)
    # What broker 1 recorded of broker 2 in epoch 1 (LEO 2), though broker 2 has since
    # truncated v2 and written v3 at offset 1: the HW passes v2, an ISR member lacks it.
    assert after[1].remote_log_end_offset[2] == 2
    assert [r.value for r in after[2].log] == [1, 3]
    assert (before[1].high_watermark, after[1].high_watermark) == (1, 2)
    assert "VIOLATED NoCommittedDataLoss" in out[i][1]
    assert out[-1][1].splitlines()[-1].startswith("VIOLATED AckedWritesDurable: p0: acknowledged v2")


def test_b11_the_fix_forgets_the_followers_and_loses_nothing():
    config, out = b11_run(FIXED)
    assert config.variant.missed_epoch_resets_followers
    i = b11_reelection(out)
    after = out[i][2].replicas[0][1]
    assert after.leader_epoch == 3
    assert after.remote_log_end_offset == (UNKNOWN,) * 3
    assert after.high_watermark == 1  # waits for broker 2 to fetch again
    assert out[i + 1][1] == ("LeaderAckProduce(partition=0, broker=1, offset=1): not enabled: "
                             "HW 1 has not passed 1")
    assert not any("VIOLATED" in text for _, text, _ in out)
    # One epoch up (no epoch missed), a re-elected leader keeps what it knew, as in Kafka.
    one_up, step = b11_one_up(out[i - 1][2])
    kept, _ = S.step_with_outcome(config, one_up, step)
    assert kept.replicas[0][1].remote_log_end_offset == \
        one_up.replicas[0][1].remote_log_end_offset != (UNKNOWN,) * 3


@pytest.mark.parametrize("variant", [VARIANTS["current"], FIXED], ids=["current", "fixed"])
def test_b11_the_flat_encoding_takes_the_same_steps(variant):
    from test_flat import compare_state

    from model_check.explore.flat import FlatKafka

    config, out = b11_run(variant)
    states = [state for _, _, state in out]
    flat = FlatKafka(config)
    # The path, and the state where the re-election is one epoch up (the rule keeps then).
    for s in [*states, b11_one_up(states[b11_reelection(out) - 1])[0]]:
        _, _, difference = compare_state(config, flat, s)
        assert difference is None
    # The flat encoding without the rule's branch leads elsewhere from the state before the
    # re-election.
    mutant = FlatKafka(config)
    mutant.missed_resets = not variant.missed_epoch_resets_followers
    _, _, difference = compare_state(config, mutant, states[b11_reelection(out) - 1])
    assert difference is not None and "BecomeLeader(partition=0, broker=1" in difference


def z3_relates(config, pre_state, action, post_state) -> bool:
    """Whether the Z3 relation of `action`'s instance (model_check.prove.symbolic, at `config`)
    relates the two concrete states, with the action's arguments pinned."""
    import z3

    from model_check.prove import symbolic as sym

    shape = sym.make_shape(config)
    inst = sym.instance_for(sym.action_table(shape), action, pre_state)
    pre, post = sym.fresh_state(shape, "s."), sym.fresh_state(shape, "t.")
    a = sym.fresh_args(shape, "a.")
    solver = z3.Solver()
    solver.add(sym.represent(shape, pre_state, pre), sym.represent(shape, post_state, post),
               *sym.pin_args(a, action), sym.relation(shape, inst, pre, post, a))
    return solver.check() == z3.sat


def test_b11_the_z3_relation_takes_the_same_step():
    base, out = b11_run()
    config, fixed = b11_run(FIXED)
    i = b11_reelection(out)
    s = out[i - 1][2]
    assert s == fixed[i - 1][2]  # the same path up to the re-election
    step = next(a for a, _ in S.successors(config, s)
                if isinstance(a, S.BecomeLeader) and a.broker == 1 and a.leader_epoch == 3)

    def relates(variant, pre_state, post_state) -> bool:
        return z3_relates(base.replace(variant=variant), pre_state, step, post_state)

    kept, forgot = out[i][2], fixed[i][2]
    assert kept != forgot
    assert relates(VARIANTS["current"], s, kept) and not relates(VARIANTS["current"], s, forgot)
    assert relates(FIXED, s, forgot) and not relates(FIXED, s, kept)
    # One epoch up, the fix keeps what the leader knew, as current does.
    one_up, step = b11_one_up(s)
    after, _ = S.step_with_outcome(config, one_up, step)
    assert relates(FIXED, one_up, after)


def test_b11_the_fix_is_a_rule_the_command_line_switches_on(capsys):
    import json

    from isrlab.cli import main

    assert main(["check", "--variant", "current", "--with", "missed_epoch_resets_followers",
                 "--brokers", "2", "--records", "1", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["config"]
    assert shown["variant"] == "current+missed_epoch_resets_followers=True"
    assert shown["variant.missed_epoch_resets_followers"] == "true"
    # No variant has it, so it cannot be switched off.
    assert main(["check", "--variant", "current", "--without",
                 "missed_epoch_resets_followers"]) == 2
    assert "does not have that rule" in capsys.readouterr().err


EMPTY_EPOCH = Path(__file__).parent / "testdata" / "empty_epoch_shed.txt"


def empty_epoch_run():
    """The commands of the transcript where brokers shed an epoch they led without writing:
    [(command, output, state after)]."""
    return transcript_run(EMPTY_EPOCH)[1]


def shedding_steps(config, out):
    """The fetch round in which broker 0 sheds epoch 2: [(state, action)] for its three
    steps, and the state after."""
    i = next(i for i, (_, text, _) in enumerate(out) if "diverged: LEO 2 -> 2" in text)
    s, steps = out[i - 1][2], []
    for a in (S.FollowerSendFetch(0, 0), S.LeaderHandleFetch(0, 1, 0),
              S.FollowerHandleFetchResponse(0, 0)):
        steps.append((s, a))
        s = S.step(config, s, a)
    assert s == out[i][2]
    return steps, s


def test_a_broker_sheds_an_epoch_it_led_without_writing_on_its_first_fetch():
    out = empty_epoch_run()
    i = next(i for i, (_, text, _) in enumerate(out) if "diverged: LEO 2 -> 2" in text)
    before, after = out[i - 1][2].replicas[0][0], out[i][2].replicas[0][0]
    # The fetch carried the cache's latest epoch (2, led without a write); the leader has no
    # epoch 2 and answers where epoch 1 ends; the log stays, the entry goes.
    assert "FollowerSendFetch(partition=0, broker=0): fetch from 2" in out[i][1]
    assert before.epoch_cache == ((0, 0), (1, 1), (2, 2))
    assert (after.log, after.epoch_cache) == (before.log, ((0, 0), (1, 1)))
    final = out[-1][2].replicas[0]
    assert {tuple(r.value for r in x.log) for x in final} == {(1, 3, 4, 5)}
    assert final[0].high_watermark == 4
    assert all(text.splitlines()[-1] == "invariants: ok" for _, text, _ in out)


def test_a_fetch_carrying_its_last_records_epoch_would_lose_a_committed_record(monkeypatch):
    """The same commands with the fetch carrying the last record's epoch instead of the
    cache's latest: broker 0's cache comes to misplace the end of epoch 0, and broker 2 keeps
    v2 at offset 1 under broker 0's HW."""
    monkeypatch.setitem(S._HANDLERS, S.FollowerSendFetch, last_record_epoch_fetch(S._HANDLERS))
    out = empty_epoch_run()
    assert not any("LEO 2 -> 2" in text for _, text, _ in out)
    misplaced = next(s for _, _, s in out if s.replicas[0][0].epoch_cache[:2] == ((0, 0), (1, 2)))
    assert [r.epoch for r in misplaced.replicas[0][0].log] == [0, 1, 1, 1]
    broken = [text.splitlines()[-1] for _, text, _ in out if "VIOLATED" in text]
    assert broken and broken[0].startswith(
        "VIOLATED NoCommittedDataLoss: p0 offset 1: leader 0 has v3@e1")


def test_the_flat_encoding_and_the_z3_relation_shed_as_the_spec_does():
    from test_flat import compare_state

    from model_check.explore.flat import FlatKafka

    config, out = transcript_run(EMPTY_EPOCH)
    steps, after = shedding_steps(config, out)
    flat = FlatKafka(config)
    for s in [*(state for _, _, state in out), *(state for state, _ in steps)]:
        assert compare_state(config, flat, s)[2] is None

    def relates(pre_state, step, post_state) -> bool:
        return z3_relates(config, pre_state, step, post_state)

    posts = [state for state, _ in steps[1:]] + [after]
    assert all(relates(pre, a, post) for (pre, a), post in zip(steps, posts, strict=True))
    # Not the old rule's steps: a fetch carrying the last record's epoch (1), or a
    # truncation at the LEO that keeps the 2:2 entry.
    (sent_from, send), _, (answered, handle) = steps
    request = posts[0].fetches[0][0]
    assert request.last_fetched_epoch == 2
    old_request = posts[0].with_fetch(0, 0, replace(request, last_fetched_epoch=1))
    assert not relates(sent_from, send, old_request)
    kept = after.with_replica(0, 0, replace(after.replica(0, 0),
                                            epoch_cache=answered.replica(0, 0).epoch_cache))
    assert kept != after and not relates(answered, handle, kept)


# ------------------------------------------------------------------------------------------
# B12: a zombie leader's late ISR shrink of its own epoch moves its HW over a record that was
# never committed

B12 = Path(__file__).parent / "testdata" / "b12_zombie_leader_late_shrink.txt"


def _zombie_passes_a_lost_record(out, zombie_epoch=0, new_epoch=3):
    """The end both B12 runs share: the zombie (session expired, still up, leading
    `zombie_epoch` in its view) applies the late shrink to {0,1}, and with broker 1's old LEO
    its HW moves to 1 over v1, where broker 1 now holds v2 of `new_epoch`. Returns the last
    state."""
    (before, _), (after, text) = [(s, t) for _, t, s in out[-2:]]
    zombie = after.replicas[0][0]
    assert after.controller.registered[0] == UNKNOWN and after.alive[0]
    assert (zombie.leader, zombie.leader_epoch, zombie.isr) == (0, zombie_epoch, (0, 1))
    assert zombie.remote_log_end_offset[1] == 1 and after.replicas[0][1].log[0].value == 2
    assert (before.replicas[0][0].high_watermark, zombie.high_watermark) == (0, 1)
    assert text.splitlines()[-1] == ("VIOLATED LogMatching: p0 offset 0: broker 0 has v1@e0, "
                                     f"broker 1 has v2@e{new_epoch}, both below HW")
    assert not any("VIOLATED" in t for _, t, _ in out[:-1])
    return after


@pytest.mark.parametrize("variant", [None, FIXED], ids=["current", "fixed"])
def test_b12_the_zombie_leader_commits_a_record_it_alone_holds(variant):
    # B11's fix does not help: the late request is of the zombie's own epoch.
    config, out = transcript_run(B12, variant)
    assert config.min_insync_replicas == 2
    _zombie_passes_a_lost_record(out)


B12_MIN_ISR_1 = Path(__file__).parent / "testdata" / "b12_zombie_leader_min_isr_1.txt"


@pytest.mark.parametrize("variant", [None, FIXED], ids=["current", "fixed"])
def test_b12_is_reachable_at_the_inductions_min_isr_of_1(variant):
    # The induction's own config (3 brokers, min ISR 1): the new leader crashes before it
    # applies its election, so it never commits the record it then loses, and nothing is
    # excused. A 3-broker proof of LogMatching for `current`, with B11's fix or without, is
    # therefore impossible (docs/prove.md).
    config, out = transcript_run(B12_MIN_ISR_1, variant)
    assert config.min_insync_replicas == 1 and config.brokers == 3
    out, (ack, acked, _) = out[:-1], out[-1]
    after = _zombie_passes_a_lost_record(out)
    # The LEO the zombie counts was recorded in broker 1's broker epoch before its restart.
    assert after.broker_epochs[1] == 1 and after.replicas[0][0].remote_broker_epoch[1] == 0
    # The zombie's purgatory still holds v1's produce: it is acknowledged and then lost.
    assert ack.startswith("leader-ack-produce") and acked.splitlines()[-1] == (
        "VIOLATED AckedWritesDurable: p0: acknowledged v1 at offset 0 (acks=all) lost: leader 1 "
        "has v2@e3")


@pytest.mark.parametrize("path", [B12, B12_MIN_ISR_1], ids=["min-isr-2", "min-isr-1"])
def test_b12_needs_a_crash_that_loses_an_unflushed_record(path):
    # With every write flushed, the same commands break nothing: broker 1's crash keeps v1,
    # so the zombie's late HW covers a record its ISR holds. The 3-broker proof at flush 1
    # states that as RequestHwCommitted (docs/prove.md); asked of the unflushed run's states,
    # it breaks first where broker 1's crash loses v1, with the late shrink in flight.
    from spec.lemmas import RequestHwCommitted

    config, out = transcript_run(path)
    flushed_config, flushed = transcript_run(path, log_flush_interval_messages=1)
    assert [c for c, _, _ in flushed] == [c for c, _, _ in out]
    assert any("VIOLATED" in t for _, t, _ in out)
    assert not any("VIOLATED" in t for _, t, _ in flushed)
    assert all(RequestHwCommitted(flushed_config, s) is None for _, _, s in flushed)
    said = [(c, RequestHwCommitted(flushed_config, s)) for c, _, s in out]
    command, first = next((c, why) for c, why in said if why is not None)
    assert command == "broker-crash broker=1"
    assert "from the request of partition epoch 1 over v1@e0" in first
    assert RequestHwCommitted(config, out[-2][2]) is None  # unflushed, it says nothing


def _election_after_broker_1_restarts(out):
    """The index of the first controller-elect-leader after broker 1's restart."""
    restart = next(i for i, (c, _, _) in enumerate(out) if c == "broker-restart broker=1")
    return next(i for i, (c, _, _) in enumerate(out)
                if i > restart and c == "controller-elect-leader")


@pytest.mark.parametrize("variant", [None, FIXED], ids=["current", "fixed"])
def test_b12_under_kip_966_needs_an_election_it_counts_unclean(variant):
    # KIP-966 (Kafka 4.1's default for new clusters) keeps a broker back from an unclean
    # shutdown out of the eligible replicas. At min ISR 2 the only eligible replica left is
    # the zombie, whose session has expired, so broker 1 is not elected: the partition stays
    # offline and nothing breaks. At min ISR 1 broker 1 comes back as the last known leader,
    # an election the model counts as unclean (it may lose committed records); the zombie
    # then passes v1 as before.
    config, out = transcript_run(B12, variant, eligible_leader_replicas_enable=True)
    i = _election_after_broker_1_restarts(out)
    pre = out[i - 1][2]
    ps = pre.controller.partitions[0]
    assert (ps.isr, ps.elr, pre.controller.registered[0]) == ((), (0,), UNKNOWN)
    with pytest.raises(S.NotEnabled) as refused:
        S.step(config, pre, S.ControllerElectLeader(partition=0))
    assert refused.value.code == Refusal.NO_LIVE_ISR_REPLICA
    assert not any("VIOLATED" in t for _, t, _ in out)

    config, out = transcript_run(B12_MIN_ISR_1, variant, eligible_leader_replicas_enable=True)
    i = _election_after_broker_1_restarts(out)
    post, outcome = S.step_with_outcome(config, out[i - 1][2], S.ControllerElectLeader(partition=0))
    assert post == out[i][2] and outcome.code == Code.ELECTED_LAST_KNOWN_LEADER
    assert outcome.fields["leader"] == 1 and post.controller.unclean_elections == 1
    _zombie_passes_a_lost_record(out[:-1])


def test_b12_with_the_zookeeper_era_epoch_bump():
    # A controller that raises the leader epoch on every ISR shrink (ZooKeeper-era Kafka) does
    # not stop B12: the late request makes the zombie leader of the next epoch, no epoch was
    # missed, so even with B11's fix it keeps its record of broker 1's LEO and its HW moves.
    bump = FIXED.with_rules(isr_shrink_bumps_leader_epoch=True)
    config, out = transcript_run(B12, bump)
    assert out[-2][2].replicas[0][0].leader_epoch == 0
    after = _zombie_passes_a_lost_record(out, zombie_epoch=1, new_epoch=4)
    assert after.broker_epochs[1] == 1


def test_b12_the_flat_encoding_and_the_z3_relation_take_the_same_steps():
    from test_flat import compare_state

    from model_check.explore.flat import FlatKafka

    config, out = transcript_run(B12)
    states = [state for _, _, state in out]
    flat = FlatKafka(config)
    for s in states:
        assert compare_state(config, flat, s)[2] is None
    pre, post = states[-2], states[-1]
    step = next(a for a, t in S.successors(config, pre) if t == post)
    assert isinstance(step, S.BecomeLeader) and step.broker == 0
    assert z3_relates(config, pre, step, post)
    other = next(t for a, t in S.successors(config, pre) if t != post)
    assert not z3_relates(config, pre, step, other)
