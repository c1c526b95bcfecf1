"""`isrlab prove`: BMC counterexamples replay through the spec at the explorer's shortest depth;
induction classifies CTIs (reachable: a real bug; unreachable: strengthen the invariant);
lemmas hold on every reachable state; the CLI's exit codes and JSON.

Outcomes are pinned (depths, action lists, verdicts), never wall-clock times.
"""

from __future__ import annotations

import json

import pytest

import spec.actions as actions
from isrlab.cli import main
from model_check.explore.explorer import explore
from model_check.explore.model import KafkaModel
from model_check.prove.engine import bmc, induction, replay, summary, violation
from spec import VARIANTS, Config, initial_state, step
from spec.invariants import violations
from spec.lemmas import LEMMAS

# Not an xdist group: the only shared fixture (b10_found) takes seconds, and the Z3 tests here
# are the longest in make test, so both workers take them.


def _config(variant: str, **changes) -> Config:
    base = dict(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1,
                max_session_expiries=0)
    return Config(variant=VARIANTS[variant], **{**base, **changes})


B10 = _config("current", acks="1")


@pytest.fixture(scope="module")
def b10_found():
    return bmc(B10, 6)


def test_bmc_with_two_workers_gives_the_same_answer(b10_found):
    # Depths asked in parallel processes, read in order: same verdict and depth, and a trace
    # that replays (bmc replays it); the solver may pick another run of that length.
    found = bmc(B10, 6, workers=2)
    assert (found.result, found.invariant, found.depth) == ("violation", "AckedWritesDurable", 5)
    assert found.trace[0] == b10_found.trace[0] and len(found.trace) == len(b10_found.trace)
    assert [q.answer for q in found.queries] == ["unsat"] * 5 + ["sat"]


def test_bmc_finds_b10_at_the_explorers_depth_and_the_trace_replays(b10_found):
    found = b10_found
    shortest = explore(KafkaModel(B10))
    assert (found.result, found.invariant, found.depth) == ("violation", "AckedWritesDurable", 5)
    assert found.depth == shortest.depth == len(shortest.violation.trace) - 1
    assert [s.action for s in found.trace[1:]] == [
        "ProducerSend", "LeaderAppend", "BrokerCrash", "ControllerHandleBrokerFailure",
        "BecomeLeader"]
    # Replay by hand, independent of prove.replay: fold spec.step over the decoded actions.
    state = initial_state(B10)
    for item in found.trace[1:]:
        state = step(B10, state, actions.ACTIONS_BY_NAME[item.action](**item.args))
        assert state == item.state
    assert [name for name, _ in violations(B10, state)] == ["AckedWritesDurable"]


@pytest.mark.slow
def test_bmc_finds_b1_at_the_explorers_depth():
    # B1 (a follower truncates to its HW and loses a committed record), every write flushed:
    # the explorer's shortest violation is 13 steps. The bit-vector widths and the ranges per
    # kind of field BMC asserts must keep it (tests/test_bmc_reductions.py checks the ranges).
    b1 = _config("hw-truncation", log_flush_interval_messages=1)
    shortest = explore(KafkaModel(b1))
    found = bmc(b1, 13)
    assert (found.result, found.invariant) == ("violation", "NoCommittedDataLoss")
    assert found.depth == shortest.depth == 13
    assert [q.answer for q in found.queries] == ["unsat"] * 13 + ["sat"]
    state = initial_state(b1)
    for item in found.trace[1:]:
        state = step(b1, state, actions.ACTIONS_BY_NAME[item.action](**item.args))
        assert state == item.state
    assert "NoCommittedDataLoss" in [name for name, _ in violations(b1, state)]


def test_bmc_reports_no_violation_below_the_shortest_depth():
    found = bmc(B10, 4)
    assert (found.result, found.depth) == ("proved", 4)
    assert [q.answer for q in found.queries] == ["unsat"] * 5


def test_replay_rejects_a_trace_the_spec_does_not_produce(b10_found):
    from model_check.prove.engine import ReplayMismatch, Step

    found = b10_found
    forged = list(found.trace)
    forged[2] = Step(forged[2].action, forged[2].args, forged[1].state)  # append "did nothing"
    with pytest.raises(ReplayMismatch):
        replay(B10, forged)


def test_non_inductive_invariant_gives_a_cti_classified_unreachable():
    # HW <= LEO alone is not inductive: a state where a leader is outside its own ISR view can
    # advance HW past its LEO. No reachable state does that.
    config = _config("current", log_flush_interval_messages=1)
    outcome = induction(config, ["HighWatermarkBelowLogEnd"],
                        ["WellFormed", "EncodingWellFormed", "EpochCacheMonotone",
                         "LeaderViewConsistent"])
    assert outcome.result == "cti"
    assert outcome.cti.classification == "unreachable"
    assert "HighWatermarkBelowLogEnd" in outcome.cti.violated
    assert violations(config, outcome.cti.post, ["HighWatermarkBelowLogEnd"])


def test_buggy_variant_gives_a_cti_classified_reachable():
    # B1: hw-truncation loses a committed record; the CTI is a real bug, with a run.
    config = _config("hw-truncation", log_flush_interval_messages=1)
    outcome = induction(config, ["NoCommittedDataLoss"],
                        ["WellFormed", "EncodingWellFormed", "EpochCacheMonotone",
                         "LeaderViewConsistent"])
    assert outcome.result == "cti"
    cti = outcome.cti
    assert (cti.classification, cti.violated) == ("reachable", ("NoCommittedDataLoss",))
    assert len(cti.trace) - 1 == 13 and cti.trace[-2].state == cti.pre
    assert step(config, cti.pre, actions.ACTIONS_BY_NAME[cti.action](**cti.args)) == cti.post


def test_induction_reports_a_verdict_for_every_action_instance():
    # `current`, 2 brokers, unbounded: which steps the targets + lemmas are already inductive
    # for. Pinned so that a change to the encoding, the spec or a lemma shows up here (3
    # brokers, 31 of 64, is printed by bench/prove_bench.py).
    from model_check.prove.engine import TARGETS
    from model_check.prove.lemmas import STRUCTURE

    config = Config(brokers=2, variant=VARIANTS["current"])
    outcome = induction(config, list(TARGETS), list(STRUCTURE), classify=False)
    assert outcome.result == "cti" and outcome.notes[0] == "inductive for 22 of 38 action instances"
    # Which CTI is shown depends on which query hit its time limit on a loaded machine; a note
    # may then say where spec.step parts from the encoding on that (unreachable) pre-state.
    assert all("spec.step" in note for note in outcome.notes[1:])
    text = summary(outcome, config)  # an incomplete proof shows the fraction, never PROVED
    assert "inductive for 22 of 38 action instances" in text.splitlines()
    assert "PROVED" not in text
    verdicts = verdicts_of(outcome)
    assert len(verdicts) == len(outcome.actions) == 38
    inductive = {a for a, v in verdicts.items() if v.verdict == "inductive"}
    assert {"ControllerElectLeader[]", "ControllerHandleBrokerFailure[1]", "ProducerSend[]",
            "LeaderAckProduce[1]", "FollowerSendFetch[0]", "BrokerCrash[1]", "Tick[]"} <= inductive
    assert verdicts["BecomeLeader[0]"].verdict == "cti" and verdicts["BecomeLeader[0]"].violated
    assert verdicts["LeaderShrinkIsr[1, 0]"].verdict == "cti"
    # Without the lemmas the controller's steps are no longer inductive: they carry weight.
    bare = induction(config, list(TARGETS), [], classify=False)
    bare_inductive = {v.action for v in bare.actions if v.verdict == "inductive"}
    assert "ControllerElectLeader[]" not in bare_inductive and "Tick[]" in bare_inductive


@pytest.mark.parametrize("variant", ["current", "kip-320"])
def test_lemmas_hold_on_every_reachable_state(variant):
    config = _config(variant, brokers=3, log_flush_interval_messages=1)
    model = KafkaModel(config, [])
    model.invariants = {name: (lambda s, f=f: f(config, s)) for name, f in LEMMAS.items()}
    result = explore(model, max_states=200_000)
    assert (result.result, result.violation) == ("ok", None)


def test_a_lemma_can_fail():
    from spec.lemmas import EpochCacheMonotone
    from spec.state import replace

    config = _config("current")
    s = initial_state(config)
    r = s.replica(0, 0)
    bad = s.with_replica(0, 0, replace(r, epoch_cache=((1, 0), (0, 0))))
    assert EpochCacheMonotone(config, bad) is not None and EpochCacheMonotone(config, s) is None


def test_the_new_lemmas_can_fail():
    # Each lemma of the values and data layers names a broken state, and holds initially.
    from spec.lemmas import (
        CommittedOnIsr,
        DownBrokerReset,
        ProduceUnwritten,
        RemoteLeoBacked,
        ResponsesWellFormed,
        UnregisteredOutOfIsr,
        ValuesAtOneOffset,
    )
    from spec.state import FetchResponse, ProduceRequest, Record, replace

    config = _config("current")
    s = initial_state(config)
    for lemma in (DownBrokerReset, ProduceUnwritten, ValuesAtOneOffset, ResponsesWellFormed,
                  UnregisteredOutOfIsr, RemoteLeoBacked, CommittedOnIsr):
        assert lemma(config, s) is None, lemma.__name__
    down = replace(s, alive=(True, False))  # broker 1 down, its view kept
    assert "down with a view" in DownBrokerReset(config, down)
    leader = s.replica(0, 0)
    logged = s.with_replica(0, 0, replace(leader, log=(Record(0, 1),)))
    logged = replace(logged, next_value=2)
    assert ProduceUnwritten(config, logged) is None and ValuesAtOneOffset(config, logged) is None
    produced = replace(logged, produce_requests=frozenset({ProduceRequest(0, 0, 1)}))
    assert "in broker 0's log" in ProduceUnwritten(config, produced)
    moved = logged.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(0, 2), Record(0, 1))))
    assert "offsets 0 and 1" in ValuesAtOneOffset(config, replace(moved, next_value=3))
    bad = FetchResponse(0, 0, "error", error="OFFSET_OUT_OF_RANGE", end_offset=-1)
    answered = replace(s, fetches=((None, bad),))
    assert "malformed" in ResponsesWellFormed(config, answered)
    # One broken response per rule (a well-formed one of each kind passes).
    for good in (FetchResponse(0, 0, "records", (Record(0, 1),), 0, 0),
                 FetchResponse(0, 0, "epoch", epoch=0, end_offset=1),
                 FetchResponse(0, 0, "error", error="OFFSET_OUT_OF_RANGE", end_offset=0)):
        assert ResponsesWellFormed(config, replace(logged, fetches=((None, good),))) is None
    for broken, says in (
            (FetchResponse(1, 0, "epoch", epoch=0, end_offset=1), "names leader 1"),
            (FetchResponse(0, 0, "records", (Record(1, 1),), 0, 0), "record epochs [1]"),
            (FetchResponse(0, 0, "records", error="NOT_LEADER_OR_FOLLOWER"), "with error"),
            (FetchResponse(0, 0, "records", high_watermark=-1, fetch_offset=0), "malformed"),
            (FetchResponse(0, 0, "diverging", epoch=0, end_offset=-1), "malformed"),
            (FetchResponse(0, 0, "epoch", epoch=-2, end_offset=-1), "malformed")):
        assert says in ResponsesWellFormed(config, replace(logged, fetches=((None, broken),)))
    ctrl = s.controller
    gone = replace(s, controller=replace(ctrl, registered=(0, -1)))
    assert "unregistered broker 1 in ISR" in UnregisteredOutOfIsr(config, gone)
    ahead = logged.with_replica(0, 0, replace(logged.replica(0, 0), remote_log_end_offset=(-1, 1)))
    assert "does not back it" in RemoteLeoBacked(config, ahead)
    exposed = logged.with_replica(0, 0, replace(logged.replica(0, 0), high_watermark=1))
    assert "ISR member 1 not" in CommittedOnIsr(config, exposed)


def _z3_breaks(config):
    """`breaks(name, state, run=None)`: whether the Z3 form of lemma `name` is broken (at
    some witness) in `state`'s representation, with the ghost `c_run` at `run` if given."""
    import z3

    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import LEMMAS as SYMBOLIC

    shape = sym.make_shape(config, bounded=False, cache_slots=3)
    x, t = sym.fresh_state(shape, "x."), z3.Int("t")

    def breaks(name, state, run=None) -> bool:
        solver = z3.Solver()
        solver.add(sym.represent(shape, state, x), violation(SYMBOLIC[name], shape, x, t))
        if run is not None:
            solver.add(x.c_run == run)
        return solver.check() == z3.sat

    return breaks


def _fail_in_both_forms(config, breaks, cases) -> None:
    """For each (lemma, good states, bad state, words): neither form of the lemma breaks a
    good state, both break the bad one, and the concrete form's message has the words.
    `breaks` is `_z3_breaks(config)`."""
    for lemma, good, bad, says in cases:
        for state in good:
            assert lemma(config, state) is None, lemma.__name__
            assert not breaks(lemma.__name__, state), lemma.__name__
        assert says in lemma(config, bad), lemma.__name__
        assert breaks(lemma.__name__, bad), lemma.__name__


def test_the_record_lemmas_can_fail_in_both_forms():
    # Each data-layer lemma names a broken hand-made state, and the Z3 form is satisfiable
    # on that state's representation exactly when the concrete one fails (the initial state
    # and a good log break none).

    from spec.lemmas import (
        CacheMatchesLog,
        CommittedOnIsr,
        CommittedWithinLeaderReach,
        DivergenceCheckOnly,
        DivergingAnswersCurrent,
        EmptyEpochLed,
        EmptyEpochUnwritten,
        EpochCommittedByLeader,
        EpochLogMatching,
        EpochResponseMatching,
        EpochStartsAgree,
        FetchRequestsCurrent,
        FollowerHwOnLeader,
        HighWatermarkAtReach,
        IsrNeverEmpty,
        IsrWithinLeaderView,
        LeaderCacheCurrent,
        LeaderFetchesNotInItsEpoch,
        LeaderHoldsItsEpoch,
        LeaderRequestCoversIsr,
        LogWithinView,
        LoneLeaderKeepsPartition,
        RecordsInRange,
        RegistrationCurrent,
        RemoteLeoBacked,
        RequestsNotBehindLog,
        ResponsesFromLeaderLog,
        ResponsesWellFormed,
        UnstartedEpochUnwritten,
        ValuesKeepTheirEpoch,
        ViewlessOutOfIsr,
        ViewlessRequestsMatchIsr,
        ViewlessUnrecorded,
    )
    from spec.state import FetchRequest, FetchResponse, LeaderAndIsr, Record, replace

    config = _config("current")
    s = initial_state(config)
    logged = s.with_replica(0, 0, replace(s.replica(0, 0), log=(Record(0, 1),)))
    logged = replace(logged, next_value=2)
    copied = logged.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(0, 1),),
                                               epoch_cache=((0, 0),)))
    relabelled = logged.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(1, 1),)))
    ahead = s.with_replica(0, 0, replace(s.replica(0, 0), log=(Record(5, 1),)))
    narrow = s.with_replica(0, 0, replace(s.replica(0, 0), isr=(0,)))
    restarted = s.with_replica(0, 1, replace(s.replica(0, 1), leader=-1, leader_epoch=-1,
                                             partition_epoch=-1, isr=()))
    alone = replace(restarted, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], isr=(1,)),)))
    # Requests in flight to viewless broker 1: one naming the controller's ISR (good); (bad)
    # one naming broker 1, alone or beside broker 0, though the controller's ISR has only
    # broker 0, one leaving it out though it is the ISR's last member, one naming it beside
    # broker 0 though it is that last member.
    out_of_isr = replace(restarted, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], isr=(0,)),)))
    told_out = replace(out_of_isr, leader_and_isr=frozenset({LeaderAndIsr(1, 0, 0, 1, (0,), 1)}))
    told_in = replace(out_of_isr,
                      leader_and_isr=frozenset({LeaderAndIsr(1, 0, 0, 1, (0, 1), 1)}))
    told_alone = replace(alone, leader_and_isr=frozenset({LeaderAndIsr(1, 0, 1, 1, (1,), 1)}))
    told_beside = replace(alone, leader_and_isr=frozenset({LeaderAndIsr(1, 0, 1, 1, (0, 1), 1)}))
    told_only = replace(out_of_isr, leader_and_isr=frozenset({LeaderAndIsr(1, 0, 1, 1, (1,), 1)}))
    told_omitted = replace(alone, leader_and_isr=frozenset({LeaderAndIsr(1, 0, 0, 1, (0,), 1)}))
    later = s.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(1, 1),)))
    later = replace(later, next_value=2)
    # A request of epoch 0 on its way to a broker whose view and log are at epoch 1.
    ahead_of_request = later.with_replica(0, 1, replace(later.replica(0, 1), leader_epoch=1))
    stale = replace(ahead_of_request, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], leader_epoch=1),)), leader_and_isr=frozenset({
            LeaderAndIsr(1, 0, 0, 0, (0, 1), 1)}))
    # The same with the later epoch only in broker 1's cache (led without a write).
    cached_later = s.with_replica(0, 1, replace(s.replica(0, 1), epoch_cache=((0, 0), (1, 0)),
                                                leader_epoch=1))
    stale_for_cache = replace(cached_later, controller=stale.controller,
                              leader_and_isr=stale.leader_and_isr)
    cached_ahead = s.with_replica(0, 0, replace(s.replica(0, 0), epoch_cache=((5, 0),)))
    cached_past_view = s.with_replica(0, 1, replace(s.replica(0, 1), epoch_cache=((0, 0), (1, 0))))
    # Broker 1 restarted: registered again with epoch 1, or (bad) leader 0 still holding a
    # record of it with the epoch it has now.
    restarted_recorded = restarted.with_replica(0, 0, replace(
        restarted.replica(0, 0), remote_log_end_offset=(-1, 0), remote_broker_epoch=(-1, 0)))
    reregistered = replace(restarted_recorded, broker_epochs=(0, 1), controller=replace(
        restarted.controller, registered=(0, 1)))
    misregistered = replace(s, broker_epochs=(0, 1))
    # Leader 0 holds a record of follower 1 (out of both ISRs) at LEO 1, in its current
    # broker epoch: the follower's log must back it; in an older broker epoch it need not.
    solo = replace(logged, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], isr=(0,)),)))
    solo = solo.with_replica(0, 0, replace(solo.replica(0, 0), isr=(0,),
                                           remote_log_end_offset=(-1, 1)))
    unbacked = solo.with_replica(0, 0, replace(solo.replica(0, 0), remote_broker_epoch=(-1, 0)))
    older = replace(solo, broker_epochs=(0, 1), controller=replace(
        solo.controller, registered=(0, 1)))
    miscached = logged.with_replica(0, 0, replace(logged.replica(0, 0), epoch_cache=((1, 0),)))
    unassigned = s.with_replica(0, 0, replace(s.replica(0, 0), leader_epoch=1))
    # Follower 1 has the record below its HW 1; leader 0's HW and epoch start are 0.
    overtaken = copied.with_replica(0, 1, replace(copied.replica(0, 1), high_watermark=1))
    caught_up = overtaken.with_replica(0, 0, replace(overtaken.replica(0, 0), high_watermark=1))
    # A records response from leader 0, in its epoch: its log, or (bad) another value.
    answered = logged.with_fetch(0, 1, FetchResponse(0, 0, "records", (Record(0, 1),), 0, 0))
    misanswered = logged.with_fetch(0, 1, FetchResponse(0, 0, "records", (Record(0, 2),), 0, 0))
    # ... or one of a later leader epoch than leader 0's view; or (from broker 1, which does
    # not lead, so only this is asked) one holding a record of a later epoch than its own.
    premature = logged.with_fetch(0, 1, FetchResponse(0, 1, "records", (), 0, 0))
    late_record = replace(logged, next_value=3).with_fetch(
        0, 0, FetchResponse(1, 0, "records", (Record(1, 2),), 0, 1))
    # A request to leader 0 of its own epoch, not applied yet, without follower 1.
    shrunk = replace(s, leader_and_isr=frozenset({LeaderAndIsr(0, 0, 0, 0, (0,), 1)}))
    # Two logs of two records: epoch 0 at offset 1 in both, over another record at 0 (bad);
    # epoch 1 starting at 1 on broker 0 and at 0 on broker 1 (bad).
    def logs(first, second, next_value):
        two = s.with_replica(0, 0, replace(s.replica(0, 0), log=first))
        return replace(two.with_replica(0, 1, replace(s.replica(0, 1), log=second)),
                       next_value=next_value)

    diverged = logs((Record(0, 1), Record(0, 2)), (Record(0, 3), Record(0, 2)), 4)
    restarted_epoch = logs((Record(0, 1), Record(1, 2)), (Record(1, 3),), 4)
    # Follower 1 holds a record of leader 0's epoch that leader 0 does not.
    orphan = replace(s.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(0, 1),))),
                     next_value=2)
    # Leader 0 alone in its view with one record: HW 1 (good) or 0 (bad); the controller's
    # ISR {0} (good) or {0, 1} (bad: another leader could be elected without its record).
    solo_committed = solo.with_replica(0, 0, replace(solo.replica(0, 0), high_watermark=1))
    overtakable = logged.with_replica(0, 0, replace(logged.replica(0, 0), isr=(0,),
                                                    high_watermark=1))
    emptied = replace(s, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], isr=()),)))
    # Follower 1's fetch to leader 0 in its view: at its LEO 0 (good) or past it (bad).
    fetching = s.with_fetch(0, 1, FetchRequest(0, 0, -1, 0, 0))
    misfetching = s.with_fetch(0, 1, FetchRequest(0, 1, -1, 0, 0))
    # With a record: from its LEO 1 (good), or from 0 (bad: only this clause asks for the LEO).
    copied_fetching = copied.with_fetch(0, 1, FetchRequest(0, 1, 0, 0, 0))
    behind_fetch = copied.with_fetch(0, 1, FetchRequest(0, 0, 0, 0, 0))
    # Follower 1, since moved to leader epoch 1, with a fetch of epoch 0 in flight: its log
    # still holds the record before the offset (good), or has lost it or holds another
    # epoch there (bad); or a fetch whose last fetched epoch is past the leader epoch it was
    # sent in (bad).
    moved_on = copied.with_replica(0, 1, replace(copied.replica(0, 1), leader_epoch=1))
    moved_on = moved_on.with_fetch(0, 1, FetchRequest(0, 1, 0, 0, 0))
    cut_since = moved_on.with_replica(0, 1, replace(moved_on.replica(0, 1), log=()))
    replaced_since = moved_on.with_replica(0, 1, replace(moved_on.replica(0, 1),
                                                         log=(Record(1, 1),)))
    future_fetch = moved_on.with_replica(0, 1, replace(moved_on.replica(0, 1),
                                                       log=(Record(1, 1),)))
    future_fetch = future_fetch.with_fetch(0, 1, FetchRequest(0, 1, 1, 0, 0))
    # Follower 1 led epoch 1 without writing and follows again in epoch 2: its fetch carries
    # epoch 1, its cache's latest (good), or its last record's epoch 0 (bad: KAFKA-10706).
    led_empty = copied.with_replica(0, 1, replace(copied.replica(0, 1), leader_epoch=2,
                                                  epoch_cache=((0, 0), (1, 1))))
    latest_fetch = led_empty.with_fetch(0, 1, FetchRequest(0, 1, 1, 2, 0))
    last_record_fetch = led_empty.with_fetch(0, 1, FetchRequest(0, 1, 0, 2, 0))
    # ... or (bad) an epoch older than one its log holds below the offset.
    wrote_in_1 = replace(led_empty.with_replica(0, 1, replace(
        led_empty.replica(0, 1), log=(Record(0, 1), Record(1, 2)))), next_value=3)
    older_fetch = wrote_in_1.with_fetch(0, 1, FetchRequest(0, 2, 0, 2, 0))
    # A records response whose HW is past the end of its records.
    overcommitted = logged.with_fetch(0, 1, FetchResponse(0, 0, "records", (Record(0, 1),), 2, 0))
    # Neither an epoch answer nor an OFFSET_OUT_OF_RANGE one reaches a follower of `current`.
    out_of_range = s.with_fetch(0, 1, FetchResponse(
        0, 0, "error", (), 0, 1, end_offset=0, error="OFFSET_OUT_OF_RANGE"))
    epoch_answer = logged.with_fetch(0, 1, FetchResponse(0, 0, "epoch", (), 0, 0, epoch=0,
                                                         end_offset=1))
    # Broker 0 (in the controller's ISR, live) exposes a record whose loss was excused below
    # its HW while member 1 lacks it (bad: it could lead with it); out of the ISR it may.
    excused_exposed = replace(logged.with_replica(0, 0, replace(
        logged.replica(0, 0), high_watermark=1)), excused=frozenset({1}))
    excused_outside = replace(excused_exposed, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], isr=(1,)),)))
    # Leader 0 has heard from follower 1 in its session: the follower's HW covers leader 0's
    # record (good), or another record (bad); not heard from, it is not asked.
    heard = copied.with_replica(0, 0, replace(copied.replica(0, 0), high_watermark=1,
                                              remote_log_end_offset=(-1, 1),
                                              remote_broker_epoch=(-1, 0)))
    heard = heard.with_replica(0, 1, replace(heard.replica(0, 1), high_watermark=1))
    misheard = replace(heard.with_replica(0, 1, replace(heard.replica(0, 1),
                                                        log=(Record(0, 2),))), next_value=3)
    unheard = misheard.with_replica(0, 0, replace(misheard.replica(0, 0),
                                                  remote_log_end_offset=(-1, -1)))
    # Follower 1, out of the ISR, holds below its HW a record whose loss was excused, which
    # ISR member 0 lacks: asked only once leader 0 has heard from it in its session.
    unheard_excused = replace(s.with_replica(0, 1, replace(
        s.replica(0, 1), log=(Record(0, 1),), high_watermark=1)), next_value=2,
        excused=frozenset({1}), controller=replace(s.controller, partitions=(
            replace(s.controller.partitions[0], isr=(0,)),)))
    unheard_excused = unheard_excused.with_replica(0, 0, replace(s.replica(0, 0), isr=(0,)))
    heard_excused = unheard_excused.with_replica(0, 0, replace(
        unheard_excused.replica(0, 0), remote_log_end_offset=(-1, 0),
        remote_broker_epoch=(-1, 0)))
    # Not heard: no LEO recorded, or one recorded in another session of broker 1.
    no_leo = heard_excused.with_replica(0, 0, replace(
        heard_excused.replica(0, 0), remote_log_end_offset=(-1, -1)))
    old_session = heard_excused.with_replica(0, 0, replace(
        heard_excused.replica(0, 0), remote_broker_epoch=(-1, -1)))
    # The controller names broker 1 leader of epoch 1, which broker 1 has not applied yet
    # (the request is in flight), or has moved on to epoch 2 with the request still in flight:
    # nobody holds anything of epoch 1 (bad: broker 0's cache or log does).
    elected = replace(s, controller=replace(s.controller, partitions=(replace(
        s.controller.partitions[0], leader=1, leader_epoch=1, partition_epoch=1),)),
        leader_and_isr=frozenset({LeaderAndIsr(1, 0, 1, 1, (0, 1), 1)}))
    moved_past = replace(elected, controller=replace(s.controller, partitions=(replace(
        s.controller.partitions[0], leader=0, leader_epoch=2, partition_epoch=2),)))
    pre_cached = elected.with_replica(0, 0, replace(s.replica(0, 0),
                                                    epoch_cache=((0, 0), (1, 0))))
    pre_logged = replace(elected.with_replica(0, 0, replace(
        s.replica(0, 0), log=(Record(1, 1),))), next_value=2)
    pre_cached_request = replace(pre_cached, controller=moved_past.controller)
    pre_cached_elected = replace(pre_cached, leader_and_isr=frozenset())  # the controller only
    pre_answered = replace(elected, next_value=2).with_fetch(
        0, 1, FetchResponse(0, 1, "records", (Record(1, 1),), 0, 0))
    # Broker 1 down: the request goes with it, and the controller elects again before it
    # may come back.
    down_cached = replace(pre_cached, alive=(True, False))
    # Follower 1 led epoch 1 without writing (`led_empty`): nothing else may name epoch 1
    # (bad: broker 0's view, or a fetch of broker 1 sent in epoch 1 to leader 0), and nobody
    # holds a record of it (bad: broker 0 does).
    led_by_0 = led_empty.with_replica(0, 0, replace(copied.replica(0, 0), leader_epoch=1))
    fetched_in_1 = led_empty.with_fetch(0, 1, FetchRequest(0, 1, 1, 1, 0))
    requested_in_1 = replace(led_empty, leader_and_isr=frozenset({
        LeaderAndIsr(0, 0, 0, 1, (0, 1), 1)}))
    written_by_0 = replace(led_empty.with_replica(0, 0, replace(
        copied.replica(0, 0), log=(Record(0, 1), Record(1, 2)))), next_value=3)
    # ... and (bad) its fetch names epoch 1 though its cache no longer has the entry; or,
    # with a fetch of epoch 0 in flight, its log holds a record of epoch 0 past the fetch
    # offset (bad) rather than one of epoch 1 it led since (good).
    uncached_fetch = latest_fetch.with_replica(0, 1, replace(latest_fetch.replica(0, 1),
                                                             epoch_cache=((0, 0),)))
    grown_since = replace(moved_on.with_replica(0, 1, replace(moved_on.replica(0, 1), log=(
        Record(0, 1), Record(1, 2)), epoch_cache=((0, 0), (1, 1)))), next_value=3)
    grown_in_0 = replace(moved_on.with_replica(0, 1, replace(moved_on.replica(0, 1), log=(
        Record(0, 1), Record(0, 2)))), next_value=3)
    # Leader 0 (cache (0, 0), LEO 1) answers follower 1 with a divergence in its own epoch
    # ending at its LEO (good), past it (bad), or naming an unknown epoch (bad); or (bad) an
    # answer of leader epoch 1 while its view is at 0.
    def diverging(epoch, end, leader_epoch=0):
        return logged.with_fetch(0, 1, FetchResponse(0, leader_epoch, "diverging", epoch=epoch,
                                                     end_offset=end))

    # A log and a records response of leader 0 both with epoch 0 at 0: the same record
    # (`answered`), or not (bad). Broker 0, since a follower in epoch 2 whose cache still
    # starts its epoch 1 at 1, answered in epoch 1 from 0 with its record (good) or another
    # (bad).
    def answered_in_1(value):
        r0 = replace(logged.replica(0, 0), leader=1, leader_epoch=2,
                     epoch_cache=((0, 0), (1, 1)))
        return replace(logged.with_replica(0, 0, r0), next_value=3).with_fetch(
            0, 1, FetchResponse(0, 1, "records", (Record(0, value),), 0, 0))

    # Leader 0 with a fetch of its own epoch 0 in flight (bad), or follower 1 with one.
    own_fetch = s.with_fetch(0, 0, FetchRequest(1, 0, -1, 0, 0))
    cases = [
        (LeaderFetchesNotInItsEpoch, [s, fetching], own_fetch,
         "leader 0 has a fetch of its own epoch 0 in flight"),
        (EmptyEpochLed, [s, led_empty, latest_fetch], led_by_0,
         "broker 1's cache starts epoch 1 at its log end, an epoch led by 0"),
        (EmptyEpochLed, [s, led_empty, latest_fetch], fetched_in_1,
         "an epoch led by 0"),
        (EmptyEpochLed, [s, led_empty, latest_fetch], requested_in_1,
         "an epoch led by 0"),
        (EmptyEpochUnwritten, [s, led_empty, latest_fetch], written_by_0,
         "broker 0's log holds v2@e1 at 1, and broker 1's cache starts epoch 1"),
        (FetchRequestsCurrent, [moved_on, latest_fetch], uncached_fetch,
         "offset 1 in epoch 1, which its log and cache do not hold"),
        (FetchRequestsCurrent, [moved_on, grown_since], grown_in_0,
         "records past its fetch offset 1 without an epoch past the fetch's 0"),
        (DivergingAnswersCurrent, [s, diverging(0, 1)], diverging(0, 2),
         "names epoch 0 ending at 2, which leader 0's cache does not give"),
        (DivergingAnswersCurrent, [s, diverging(0, 1)], diverging(-1, -1),
         "names epoch -1 in 0"),
        (DivergingAnswersCurrent, [s, diverging(0, 1)], diverging(0, 1, leader_epoch=1),
         "of leader epoch 1, past its leader's"),
        (EpochResponseMatching, [s, answered], misanswered,
         "broker 0 and the response to 1 both hold epoch 0 at 0"),
        (ResponsesFromLeaderLog, [s, answered, answered_in_1(1)], answered_in_1(2),
         "differs below 1, where leader 0 started its epoch 1"),
        (UnstartedEpochUnwritten, [s, elected, moved_past, down_cached], pre_cached,
         "broker 0's cache holds epoch 1, which broker 1 is yet to lead"),
        (UnstartedEpochUnwritten, [s, elected, moved_past], pre_logged,
         "broker 0's log holds v1@e1 at 0, of epoch 1, which broker 1 is yet to lead"),
        (UnstartedEpochUnwritten, [s, elected, moved_past], pre_cached_request,
         "broker 0's cache holds epoch 1, which broker 1 is yet to lead"),
        (UnstartedEpochUnwritten, [s, elected, moved_past], pre_cached_elected,
         "broker 0's cache holds epoch 1, which broker 1 is yet to lead"),
        (UnstartedEpochUnwritten, [s, elected, moved_past], pre_answered,
         "the response to 1 holds"),
        (CommittedOnIsr, [s, copied, excused_outside], excused_exposed,
         "below its HW, ISR member 1 not"),
        (CommittedOnIsr, [s, unheard_excused, no_leo, old_session], heard_excused, "below its HW, ISR member 0 not"),
        (EpochCommittedByLeader, [s, copied, caught_up], overtaken, "past leader 0's HW 0"),
        (FollowerHwOnLeader, [s, heard, unheard], misheard, "covers records leader 0 lacks"),
        (FetchRequestsCurrent, [moved_on], cut_since, "offset 1 in epoch 0, which its log"),
        (FetchRequestsCurrent, [moved_on], replaced_since, "offset 1 in epoch 0, which its log"),
        (FetchRequestsCurrent, [moved_on], future_fetch, "last fetched epoch 1"),
        (FetchRequestsCurrent, [moved_on, latest_fetch], last_record_fetch,
         "offset 1 in epoch 0, which its log and cache do not hold"),
        (FetchRequestsCurrent, [moved_on, latest_fetch], older_fetch,
         "offset 2 in epoch 0, which its log and cache do not hold"),
        (ResponsesWellFormed, [s, answered], overcommitted, "malformed"),
        (DivergenceCheckOnly, [s, answered], out_of_range, "OFFSET_OUT_OF_RANGE answer"),
        (DivergenceCheckOnly, [s, answered], epoch_answer, "epoch answer"),
        (EpochLogMatching, [s, copied, logged], diverged, "both hold epoch 0 at 1"),
        (EpochStartsAgree, [s, copied, logged], restarted_epoch, "epoch 1 starts at 1"),
        (LeaderHoldsItsEpoch, [s, copied, logged], orphan, "leader 0 of its epoch does not"),
        (LoneLeaderKeepsPartition, [s, solo_committed], overtakable, "leads alone"),
        (HighWatermarkAtReach, [s, logged, solo_committed], solo, "below 1 over its ISR view"),
        (IsrNeverEmpty, [s], emptied, "the controller's ISR is empty"),
        (FetchRequestsCurrent, [s, fetching], misfetching, "carries offset 1 in epoch -1"),
        (FetchRequestsCurrent, [s, fetching, copied_fetching], behind_fetch,
         "carries offset 0 in epoch 0; its log ends at 1"),
        (ResponsesFromLeaderLog, [s, answered], misanswered, "not leader 0's log from 0"),
        (ResponsesFromLeaderLog, [s, answered], premature, "of leader epoch 1, past its leader's"),
        (ResponsesFromLeaderLog, [s, answered], late_record, "a later epoch than its 0"),
        (LeaderRequestCoversIsr, [s, stale], shrunk, "lacks part of [0, 1]"),
        (CacheMatchesLog, [s, logged], miscached, "cache [(1, 0)]"),
        (LeaderCacheCurrent, [s, logged], unassigned, "leader 0 of epoch 1 has cache"),
        (CommittedWithinLeaderReach, [s, copied, caught_up], overtaken,
         "past leader 0's HW 0 and epoch start"),
        (ViewlessUnrecorded, [s, reregistered], restarted_recorded,
         "records broker epoch 0 for 1"),
        (RegistrationCurrent, [s, reregistered], misregistered, "registered with epoch 0"),
        (RemoteLeoBacked, [s, logged, older], unbacked, "whose log does not back it"),
        (ValuesKeepTheirEpoch, [s, logged, copied], relabelled, "value 1 in epochs 0 and 1"),
        (RecordsInRange, [s, logged], replace(ahead, next_value=2), "outside epochs 0..0"),
        (RecordsInRange, [s, logged], cached_ahead, "epoch cache holds 5, past epoch 0"),
        (IsrWithinLeaderView, [s, logged], narrow, "lacks part of [0, 1]"),
        (ViewlessOutOfIsr, [s, alone], restarted, "broker 1 has no view and is in the ISR"),
        (ViewlessRequestsMatchIsr, [s, told_out, told_alone], told_in,
         "to viewless broker 1 names the ISR [0, 1], the controller's is [0]"),
        (ViewlessRequestsMatchIsr, [s, told_out, told_alone], told_beside,
         "to viewless broker 1 names the ISR [0, 1], the controller's is [1]"),
        (ViewlessRequestsMatchIsr, [s, told_out, told_alone], told_only,
         "to viewless broker 1 names the ISR [1], the controller's is [0]"),
        (ViewlessRequestsMatchIsr, [s, told_out, told_alone], told_omitted,
         "to viewless broker 1 names the ISR [0], the controller's is [1]"),
        (LogWithinView, [s, logged], later, "later epoch than its view's 0"),
        (LogWithinView, [s, cached_later], cached_past_view, "later epoch than its view's 0"),
        (RequestsNotBehindLog, [s, ahead_of_request], stale, "has a later epoch"),
        (RequestsNotBehindLog, [s, cached_later], stale_for_cache, "has a later epoch"),
    ]
    _fail_in_both_forms(config, _z3_breaks(config), cases)


def test_the_flush_lemma_can_fail_in_both_forms():
    # UnflushedBelowInterval at flush intervals 1 and 2: an unflushed tail as long as the
    # interval breaks it in both forms; unset, no tail does.
    from spec.lemmas import UnflushedBelowInterval
    from spec.state import Record, replace

    for interval in (1, 2):
        config = _config("current", log_flush_interval_messages=interval)
        s = replace(initial_state(config), next_value=3)
        r = s.replica(0, 0)
        log = tuple(Record(0, v) for v in range(1, interval + 1))
        short = s.with_replica(0, 0, replace(r, log=log, flushed_offset=1))
        long = s.with_replica(0, 0, replace(r, log=log))
        _fail_in_both_forms(config, _z3_breaks(config), [
            (UnflushedBelowInterval, [s, short], long, f"flush interval {interval}")])
    config = _config("current")
    breaks = _z3_breaks(config)
    assert UnflushedBelowInterval(config, long) is None
    assert not breaks("UnflushedBelowInterval", long)


def test_the_late_request_lemma_can_fail_in_both_forms():
    # RequestHwCommitted: leader 0 (epoch 0, v1 at offset 0) records LEO 1 for broker 1 and
    # has an ISR change of its own epoch in flight to it. Bad: broker 1, an ISR member, lacks
    # v1. Good: broker 1 holds v1; or the LEO recorded for it is 0; or the request is of
    # another epoch; or writes are not all flushed (the lemma says nothing then: B12).
    from spec.lemmas import RequestHwCommitted
    from spec.state import UNKNOWN, LeaderAndIsr, Record, replace

    config = _config("current", log_flush_interval_messages=1)
    s = initial_state(config)
    s = replace(s, next_value=2, controller=replace(s.controller, partitions=(
        replace(s.controller.partitions[0], partition_epoch=1),)))
    leader = replace(s.replica(0, 0), log=(Record(0, 1),), flushed_offset=1,
                     remote_log_end_offset=(UNKNOWN, 1))
    request = LeaderAndIsr(0, 0, 0, 0, (0, 1), 1)
    bad = replace(s.with_replica(0, 0, leader), leader_and_isr=frozenset({request}))
    held = bad.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(0, 1),),
                                          flushed_offset=1, epoch_cache=((0, 0),)))
    unrecorded = bad.with_replica(0, 0, replace(leader, remote_log_end_offset=(UNKNOWN, 0)))
    other_epoch = replace(bad, leader_and_isr=frozenset({replace(request, leader_epoch=1)}),
                          controller=replace(s.controller, partitions=(replace(
                              s.controller.partitions[0], partition_epoch=1, leader_epoch=1),)))
    _fail_in_both_forms(config, _z3_breaks(config), [
        (RequestHwCommitted, [s, held, unrecorded, other_epoch], bad,
         "would take HW 1 from the request of partition epoch 1")])
    unflushed = _config("current")
    assert RequestHwCommitted(unflushed, bad) is None
    assert not _z3_breaks(unflushed)("RequestHwCommitted", bad)


def test_the_answer_lemmas_can_fail_in_both_forms():
    # The answers layer (opt-in, docs/prove.md "Answers in flight"): each lemma names a
    # broken hand-made state in both forms, and a good one breaks neither. Leader 0 holds
    # (0,1); in the diverging cases it leads epoch 1 over (0,1) (1,2) and follower 1, at
    # epoch 1 too, holds (0,1) (0,3) and is answered: epoch 0 ends at 1.

    from model_check.prove.lemmas import ANSWERS
    from spec.lemmas import (
        AnswersWithinView,
        DivergingAnswersFitFollower,
        DivergingAnswersSpareCommitted,
        PendingHwCommitted,
        PendingLogMatching,
        ResponsePrefixMatches,
        RunAnswersFromLeader,
        RunLeaderHeardInRun,
    )
    from spec.state import FetchResponse, Record, replace

    config = _config("current")
    s = replace(initial_state(config), next_value=10)
    one = (Record(0, 1),)
    base = s.with_replica(0, 0, replace(s.replica(0, 0), log=one + (Record(0, 2),)))

    def to_follower(state, m, log=None):
        out = state.with_fetch(0, 1, m)
        if log is not None:
            out = out.with_replica(0, 1, replace(state.replica(0, 1), log=log,
                                                 epoch_cache=((0, 0),)))
        return out

    records = FetchResponse(0, 0, "records", records=(Record(0, 2),), high_watermark=0,
                            fetch_offset=1)
    matching = to_follower(base, records, one)
    strayed = to_follower(base, records, (Record(0, 3),))
    # Follower 1 led epoch 1 at its log end without writing, then is sent epoch 0's record.
    led_past = matching.with_replica(0, 1, replace(matching.replica(0, 1),
                                                    epoch_cache=((0, 0), (1, 1))))
    # ... and one that wrote in epoch 1 below the fetch offset.
    wrote_past = to_follower(base, replace(records, records=(Record(0, 5),), fetch_offset=2),
                             one + (Record(1, 4),))
    wrote_past = wrote_past.with_replica(0, 1, replace(wrote_past.replica(0, 1),
                                                        epoch_cache=((0, 0), (1, 1))))
    held = to_follower(s.with_replica(0, 0, replace(s.replica(0, 0), log=one)),
                       FetchResponse(0, 0, "records", records=one, high_watermark=1,
                                     fetch_offset=0), ())
    unheld = held.with_fetch(0, 1, replace(held.fetches[0][1], records=(Record(0, 5),)))
    ahead = held.with_fetch(0, 1, replace(held.fetches[0][1], leader_epoch=1))

    r0 = replace(s.replica(0, 0), log=one + (Record(1, 2),), epoch_cache=((0, 0), (1, 1)),
                 leader_epoch=1, high_watermark=1)
    diverged = s.with_replica(0, 0, r0).with_replica(0, 1, replace(
        s.replica(0, 1), log=one + (Record(0, 3),), epoch_cache=((0, 0),), leader_epoch=1))
    answer = FetchResponse(0, 1, "diverging", epoch=0, end_offset=1)
    fits = to_follower(diverged, answer)
    past_end = to_follower(diverged, replace(answer, end_offset=2))
    too_late = to_follower(diverged, replace(answer, epoch=1))
    over_hw = fits.with_replica(0, 0, replace(r0, high_watermark=2))
    # The same answers once their leader has moved on to a later epoch: nothing is claimed.
    strayed_later = strayed.with_replica(0, 0, replace(strayed.replica(0, 0), leader_epoch=1))
    past_end_later = past_end.with_replica(0, 0, replace(r0, leader_epoch=2))
    cases = [
        (AnswersWithinView, [s, held], ahead, "past its view's"),
        (ResponsePrefixMatches, [s, matching, strayed_later], strayed, "is not leader 0's"),
        (PendingLogMatching, [s, matching], strayed, "with other records below"),
        (PendingLogMatching, [s, matching], led_past, "older than its latest epoch 1"),
        (PendingLogMatching, [s, matching], wrote_past, "older than its latest epoch 1"),
        (PendingHwCommitted, [s, held], unheld, "which ISR member 0 lacks"),
        (DivergingAnswersFitFollower, [s, fits], too_late, "names epoch 1 in leader epoch 1"),
        (DivergingAnswersFitFollower, [s, fits, past_end_later], past_end,
         "is not what leader 0 gives"),
        (DivergingAnswersSpareCommitted, [s, fits], over_hw, "below broker 0's HW 2"),
    ]
    symbolic_breaks = _z3_breaks(config)
    _fail_in_both_forms(config, symbolic_breaks, cases)

    # The run lemmas: leader 0 re-elected (the controller at epoch 1, its view too) has heard
    # from follower 1, whose view is of epoch 0, and answers it with a record it lacks, or a
    # diverging answer past where its epoch 0 ends. In a run from epoch 1 each is broken; in
    # a run from epoch 0 the follower's view is of the run, and from epoch 2 the answers
    # are older than the run.
    def reelect(state):
        return replace(state, controller=replace(state.controller, partitions=(replace(
            state.controller.partitions[0], leader_epoch=1, partition_epoch=1),)))

    lead = replace(s.replica(0, 0), log=one, leader_epoch=1, remote_log_end_offset=(-1, 0),
                   remote_broker_epoch=(-1, 0))
    heard = reelect(s.with_replica(0, 0, lead))
    foreign = to_follower(heard.with_replica(0, 0, replace(lead, remote_log_end_offset=(-1, -1))),
                          FetchResponse(0, 1, "records", records=(Record(0, 9),),
                                        high_watermark=0, fetch_offset=0))
    run_diverged = reelect(past_end.with_replica(0, 0, replace(r0, remote_log_end_offset=(
        -1, -1), remote_broker_epoch=(-1, -1))))
    for lemma, bad, good_run, says in (
            (RunLeaderHeardInRun, heard, 0, "whose view is of epoch 0"),
            (RunAnswersFromLeader, foreign, 2, "holds records leader 0 (run from 1) does not"),
            (RunAnswersFromLeader, run_diverged, 2, "is not what leader 0 (run from 1) gives")):
        name = lemma.__name__
        assert lemma(config, s, 0) is None and not symbolic_breaks(name, s, 0)
        assert says in lemma(config, bad, 1) and symbolic_breaks(name, bad, 1), name
        assert lemma(config, bad, good_run) is None, name
        assert not symbolic_breaks(name, bad, good_run), name
    assert {c[0].__name__ for c in cases} | {"RunLeaderHeardInRun", "RunAnswersFromLeader"} \
        == set(ANSWERS)



def test_the_snapshot_lemmas_can_fail():
    # The snapshot layer (opt-in, docs/prove.md "Snapshots"), in its Z3 form: each lemma
    # holds on a good hand-made state and breaks on a bad one. Leader 0 holds (0,1) (0,2)
    # with HW 2 and answers follower 1, which holds (0,1), with (0,2) from offset 1.
    import z3

    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import LEMMAS as SYMBOLIC
    from model_check.prove.lemmas import SNAPSHOTS
    from spec.lemmas import CacheMatchesLog
    from spec.state import FetchResponse, Record, replace

    config = _config("current")
    shape = sym.make_shape(config, bounded=False, cache_slots=3)
    x, t = sym.fresh_state(shape, "x."), z3.Int("t")

    def breaks(name, state, ghost=(), pin=()) -> bool:
        """Lemma `name` broken in `state`, the response to follower 1 holding `ghost` (its
        records below the fetch offset: a concrete response has none) and `pin` true."""
        solver = z3.Solver()
        solver.add(sym.represent(shape, state, x), violation(SYMBOLIC[name], shape, x, t))
        m = x.fetches[1]
        for o, rec in enumerate(ghost):
            solver.add(m.rec_epoch[o] == rec.epoch, m.rec_value[o] == rec.value)
        solver.add(*[p(x) for p in pin])
        return solver.check() == z3.sat

    s = replace(initial_state(config), next_value=10)
    one, two = (Record(0, 1),), (Record(0, 1), Record(0, 2))
    lead = replace(s.replica(0, 0), log=two, high_watermark=2, epoch_cache=((0, 0),))
    follow = replace(s.replica(0, 1), log=one, epoch_cache=((0, 0),))
    answer = FetchResponse(0, 0, "records", records=(Record(0, 2),), high_watermark=2,
                           fetch_offset=1)
    good = s.with_replica(0, 0, lead).with_replica(0, 1, follow).with_fetch(0, 1, answer)
    # The controller's record of partition epoch 0 (a ghost too): leader 0 in epoch 0.
    recorded = [lambda y: y.hist_leader[0] == 0, lambda y: y.hist_epoch[0] == 0]
    for name in SNAPSHOTS:
        assert not breaks(name, good, ghost=one, pin=recorded), name

    # The follower's log below the fetch offset is not what the leader answered from.
    assert breaks("SnapshotPrefix", good, ghost=(Record(0, 7),))
    # ... nor a prefix of the leader's log, which still leads in the answer's epoch.
    assert breaks("SnapshotFromLeader", good.with_replica(0, 0, replace(lead, log=(
        Record(0, 8), Record(0, 2)))), ghost=one)
    # A record older than the follower's epoch 1, which it wrote in below the fetch offset.
    wrote = good.with_replica(0, 1, replace(follow, log=(Record(1, 1),), epoch_cache=((1, 0),)))
    assert breaks("SnapshotAboveCache", wrote, ghost=(Record(1, 1),))
    # Epochs going down in a log, two records apart.
    down = good.with_replica(0, 0, replace(lead, log=(Record(1, 5), Record(1, 3), Record(0, 4))))
    assert breaks("EpochsNonDecreasing", down, ghost=one)
    # A log holding the answer's leader epoch (0) at offset 2, with another record at 1.
    other = good.with_replica(0, 0, replace(lead, log=(Record(0, 1), Record(0, 5),
                                                        Record(0, 6))))
    assert breaks("EpochMatchesResponse", other, ghost=one)
    # The controller's record of epoch 0 names broker 1 as its leader, not the sender 0.
    assert breaks("ResponsesFromEpochLeader", good, ghost=one,
                  pin=[lambda y: y.hist_leader[0] == 1, lambda y: y.hist_epoch[0] == 0])
    # Taken: the follower's log and HW after appending; its HW 2 covers (0,2) where another
    # replica, with HW 2, holds (0,9). The concrete step agrees.
    stale = good.with_replica(0, 0, replace(lead, log=(Record(0, 1), Record(0, 9))))
    assert breaks("TakenLogMatching", stale, ghost=one)
    after = step(config, stale, actions.FollowerHandleFetchResponse(0, 1))
    assert "LogMatching" in {name for name, _ in violations(config, after)}
    # ... and its cache then agrees with its log, which Taken needs no lemma for.
    assert CacheMatchesLog(config, after) is None
    # Diverged: leader 0 has recorded LEO 1 for follower 1 (in its ISR, in its broker epoch)
    # and a diverging answer would cut the follower to 0.
    cut = FetchResponse(0, 0, "diverging", epoch=0, end_offset=0)
    recorded = replace(lead, remote_log_end_offset=(-1, 1), remote_broker_epoch=(-1, 0))
    diverged = good.with_replica(0, 0, recorded).with_fetch(0, 1, cut)
    assert breaks("DivergedRemoteLeoBacked", diverged)
    assert not breaks("DivergedRemoteLeoBacked", diverged.with_fetch(0, 1, replace(
        cut, end_offset=1)))

def _run_lemma_config():
    fixed = VARIANTS["current"].with_rules(missed_epoch_resets_followers=True)
    return Config(variant=fixed, brokers=2, max_records=1, max_leader_epochs=3, max_crashes=1)


def test_the_run_lemma_holds_where_the_ghost_is_carried(monkeypatch):
    # RunLeaderBacked reads the ghost `run` (since when the controller's leader has led), so
    # it is checked on (state, run) pairs, the ghost carried along each path. The real lemma
    # holds on the first 60,000 of them; asked of every follower, current or not (a mutant
    # without the ISR or broker-epoch condition), it is false: a follower that crashed and
    # registered again leaves a stale record behind.
    import model_check.explore.model
    import spec.lemmas as spec_lemmas
    from model_check.explore.model import RunGhostModel

    config = _run_lemma_config()

    def search(names=("RunLeaderBacked", "RunEpochsLedByLeader", "RunLeaderHoldsItsEpochs",
                      "RunLeaderHeardInRun", "RunAnswersFromLeader")):
        model = RunGhostModel(config, [])
        model.invariants = {name: lambda st, name=name: getattr(spec_lemmas, name)(
            config, st[0], st[1]) for name in names}
        return explore(model, max_states=60_000)

    real = search()
    assert (real.result, real.violation) == ("incomplete", None)
    assert real.distinct_states == 60_000
    with monkeypatch.context() as patch:
        patch.setattr(spec_lemmas, "_current_follower", lambda s, r, f: True)
        every_follower = search()
    assert every_follower.result == "violation"
    assert "records LEO 1 for" in every_follower.violation.detail
    # "Heard" without the broker epoch: a follower that restarted (view -1) is still heard.
    with monkeypatch.context() as patch:
        patch.setattr(spec_lemmas, "_heard", lambda s, b, f: b not in (-1, f) and
                      s.replicas[0][b].remote_log_end_offset[f] != -1)
        unsessioned = search(("RunLeaderHeardInRun",))
    assert unsessioned.result == "violation"
    assert "whose view is of epoch -1" in unsessioned.violation.detail
    # With the ghost never restarted, a run spans leaders, and another leader's records and
    # empty epochs fall inside it, and so do the answers it gave before it truncated.
    monkeypatch.setattr(model_check.explore.model, "run_start", lambda before, after, run: 0)
    for name, says in (("RunLeaderHoldsItsEpochs", "which leader"),
                       ("RunEpochsLedByLeader", "on is led by"),
                       ("RunAnswersFromLeader", "holds records leader 0")):
        endless = search((name,))
        assert endless.result == "violation" and says in endless.violation.detail, name


def test_the_run_lemma_reads_the_ghost_in_both_forms():
    # Leader 0, re-elected in epoch 1 but still at its view of epoch 0, records LEO 1 for
    # follower 1, whose log is empty (or, below, has heard from follower 1, whose HW covers
    # a record the leader lacks). In a run from epoch 0 (it led epoch 0 and 1) the record
    # must be backed: both forms find it broken. In a run from epoch 1 (epoch 0 named another
    # leader) nothing is asked of it. The initial state breaks neither.

    from spec.lemmas import RunEpochsLedByLeader, RunLeaderBacked, RunLeaderHoldsItsEpochs
    from spec.state import Record, replace

    config = _config("current")
    s = initial_state(config)
    r0 = replace(s.replica(0, 0), log=(Record(0, 1),), remote_log_end_offset=(-1, 1),
                 remote_broker_epoch=(-1, 0))
    reelected = replace(s.with_replica(0, 0, r0), next_value=2, controller=replace(
        s.controller, partitions=(replace(s.controller.partitions[0], leader_epoch=1,
                                          partition_epoch=1),)))
    breaks = _z3_breaks(config)

    def symbolic_breaks(state, run, name="RunLeaderBacked") -> bool:
        return breaks(name, state, run)

    # The same leader, having heard from follower 1 (at LEO 0) in its session, while the
    # follower's HW covers a record the leader lacks.
    misheard = reelected.with_replica(0, 0, replace(r0, remote_log_end_offset=(-1, 0)))
    misheard = replace(misheard.with_replica(0, 1, replace(
        s.replica(0, 1), log=(Record(0, 2),), high_watermark=1)), next_value=3)
    assert RunLeaderBacked(config, s, 0) is None and not symbolic_breaks(s, 0)
    for state, says in ((reelected, "whose log does not back it"),
                        (misheard, "covers records leader 0 (run from epoch 0) lacks")):
        assert says in RunLeaderBacked(config, state, 0) and symbolic_breaks(state, 0)
        assert RunLeaderBacked(config, state, 1) is None and not symbolic_breaks(state, 1)

    # Broker 1 led epoch 1 without writing (an entry at its log end), or holds a record of
    # epoch 1 leader 0 lacks: in a run of leader 0 from epoch 1 or earlier both are wrong,
    # in one from epoch 2 neither is.
    led = s.with_replica(0, 1, replace(s.replica(0, 1), epoch_cache=((1, 0),)))
    wrote = replace(s.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(1, 1),),
                                                 epoch_cache=((1, 0),))), next_value=2)
    for lemma, state, says in (
            (RunEpochsLedByLeader, led, "every epoch from 1 on is led by 0"),
            (RunLeaderHoldsItsEpochs, wrote, "which leader 0 (run from epoch 1) does not")):
        name = lemma.__name__
        assert lemma(config, s, 0) is None and not symbolic_breaks(s, 0, name)
        assert says in lemma(config, state, 1) and symbolic_breaks(state, 1, name)
        assert lemma(config, state, 2) is None and not symbolic_breaks(state, 2, name)


def test_the_run_ghost_is_inductive_with_the_history_layer(monkeypatch):
    # HistoryRun ties the ghost to the record of partition states, and like the history
    # layer it is checked by being proved: every action instance preserves it. A controller
    # that never starts a new run (the ghost kept when another broker takes the lead) breaks
    # it at each of its steps that can change the leader.
    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import HISTORY

    outcome = induction(Config(brokers=2), ["HistoryRun"], list(HISTORY), classify=False)
    assert outcome.result == "proved" and len(outcome.actions) == 38
    monkeypatch.setattr(sym, "_run_start", lambda s, leader, epoch: s.c_run)
    kept = induction(Config(brokers=2), ["HistoryRun"], list(HISTORY), classify=False)
    assert {v.action: v.violated for v in kept.actions if v.verdict != "inductive"} == {
        name: ("HistoryRun",) for name in (
            "ControllerElectLeader[]", "ControllerHandleBrokerFailure[0]",
            "ControllerHandleBrokerFailure[1]", "ControllerElectPreferredLeader[]")}


def test_a_new_leader_epoch_names_a_new_leader():
    # NewEpochNewLeader is about the ghost record, so like the history layer it is checked
    # by being proved. Where the controller also raises the epoch when it shrinks the ISR
    # (`current` with that rule of older variants on, as ZooKeeper-era Kafka did), the leader
    # stays into the next epoch and the lemma breaks at the failure steps that shrink it.
    from model_check.prove.lemmas import HISTORY

    outcome = induction(Config(brokers=2), ["NewEpochNewLeader"], list(HISTORY), classify=False)
    assert outcome.result == "proved" and len(outcome.actions) == 38
    bumps = VARIANTS["current"].with_rules(isr_shrink_bumps_leader_epoch=True)
    broken = induction(Config(brokers=2, variant=bumps), ["NewEpochNewLeader"], list(HISTORY),
                       classify=False)
    assert {v.action: v.violated for v in broken.actions if v.verdict != "inductive"} == {
        f"ControllerHandleBrokerFailure[{b}]": ("NewEpochNewLeader",) for b in (0, 1)}


def test_a_reelected_leader_needs_the_run_ghost_or_a_new_leader_per_epoch(monkeypatch):
    # With B11's fix, 2 brokers, BecomeLeader is inductive with the default lemmas
    # (test_cli_induction_with_b11s_fix_leaves_only_the_follower_fetch_steps). Without
    # RunLeaderBacked and NewEpochNewLeader a leader re-elected while behind (its view an
    # epoch below the controller's) applies the next request without knowing its follower
    # records are backed: a CTI. Either lemma closes it: RunLeaderBacked says the records are
    # backed, NewEpochNewLeader that a leader is never told of the very next epoch (the fix
    # resets a leader told of a later one). Without the fix the CTI is B11
    # (docs/protocol.md): a leader that missed another's epoch keeps them.
    from model_check.prove.engine import TARGETS
    from model_check.prove.lemmas import proof_lemmas

    fixed = Config(brokers=2, variant=_run_lemma_config().variant)
    lemmas = proof_lemmas(list(TARGETS), fixed)
    _only(monkeypatch, "BecomeLeader", brokers=(0,))  # BecomeLeader[1] is its mirror image

    def verdicts(config, dropped):
        out = induction(config, list(TARGETS), [x for x in lemmas if x not in dropped],
                        classify=False)
        return {v.verdict for v in out.actions}, out

    assert verdicts(fixed, ("RunLeaderBacked", "NewEpochNewLeader"))[0] == {"cti"}
    assert verdicts(fixed, ("RunLeaderBacked",))[0] == {"inductive"}
    assert verdicts(fixed, ("NewEpochNewLeader",))[0] == {"inductive"}
    found, b11 = verdicts(Config(brokers=2), ())
    assert found == {"cti"}
    assert all("RunLeaderBacked" in v.violated for v in b11.actions)


def _only(monkeypatch, *names: str, brokers: tuple | None = None) -> None:
    """Restrict induction to the action instances of `names`, and to those on `brokers` when
    given (the rest are checked by the slow runs and pinned in docs/prove.md)."""
    _keep(monkeypatch, lambda i: i.name in names and brokers in (None, i.brokers))


def _keep(monkeypatch, wanted) -> None:
    """Restrict induction to the action instances `wanted` accepts."""
    from model_check.prove import symbolic as sym

    table = sym.action_table
    monkeypatch.setattr(sym, "action_table", lambda shape: [i for i in table(shape) if wanted(i)])


def _values_lemmas() -> list[str]:
    from model_check.prove.lemmas import HISTORY, STRUCTURE, VALUES

    return [*STRUCTURE, *HISTORY, "HistoryLeaderInIsr", *VALUES]


def test_a_restart_is_inductive_for_the_data_invariants(monkeypatch):
    # 3 brokers: a broker that comes back after a crash has no view and is out of any ISR
    # whose leader's HW covers what it lost (DownBrokerReset, UnregisteredOutOfIsr).
    _only(monkeypatch, "BrokerRestart")
    targets = ["NoCommittedDataLoss", "LogMatching", *PROVED]
    outcome = induction(Config(brokers=3), targets, _values_lemmas(), classify=False)
    assert [(v.action, v.verdict) for v in outcome.actions] == [
        (f"BrokerRestart[{b}]", "inductive") for b in range(3)]
    assert outcome.result == "proved"


def _down_lemmas(with_down: bool) -> list[str]:
    from model_check.prove.lemmas import HISTORY, STRUCTURE

    return [*STRUCTURE, *HISTORY, "HistoryLeaderInIsr", *(["DownBrokerReset"] * with_down)]


def test_a_restart_needs_the_down_broker_lemma(monkeypatch):
    # Without DownBrokerReset the restart step has a counterexample: a down broker that kept
    # its view comes back leading without leader-side state. With it the step is inductive.
    _only(monkeypatch, "BrokerRestart")
    without = induction(Config(brokers=2), PROVED, _down_lemmas(False), classify=False)
    assert without.result == "cti"
    assert [(v.verdict, v.violated) for v in without.actions] == [
        ("cti", ("LeaderViewConsistent",))] * 2
    outcome = induction(Config(brokers=2), PROVED, _down_lemmas(True), classify=False)
    assert outcome.result == "proved"


def test_the_proof_fails_on_a_crash_that_keeps_the_view(monkeypatch):
    # A mutant encoding: a crash keeps the broker's view (leader, epochs, ISR). The crash
    # step, inductive with the real crash, must fail naming DownBrokerReset.
    from model_check.prove import symbolic as sym

    _only(monkeypatch, "BrokerCrash")
    outcome = induction(Config(brokers=2), PROVED, _down_lemmas(True), classify=False)
    assert outcome.result == "proved"
    original = sym.BrokerCrash

    def keeps_view(shape, s, a, b):
        guard, t = original(shape, s, a, b)
        r, kept = t.replicas[b], s.replicas[b]
        return guard, sym.replaced_replica(t, b, sym.dataclasses.replace(
            r, leader=kept.leader, leader_epoch=kept.leader_epoch,
            partition_epoch=kept.partition_epoch, isr=kept.isr))

    monkeypatch.setattr(sym, "BrokerCrash", keeps_view)
    outcome = induction(Config(brokers=2), PROVED, _down_lemmas(True), classify=False)
    assert outcome.result == "cti"
    assert all(v.verdict == "cti" and "DownBrokerReset" in v.violated for v in outcome.actions)


# ------------------------------------------------------------------------------------------
# CLI


def run_json(capsys, *argv):
    code = main(["prove", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def replay_json(config: Config, trace: list[dict]):
    """Fold spec.step over a `--json` trace's actions; the last state reached."""
    state = initial_state(config)
    for item in trace[1:]:
        state = step(config, state, actions.ACTIONS_BY_NAME[item["action"]](**item["args"]))
    return state


def test_cli_bmc_violation_exits_1_with_a_replayable_trace(capsys):
    # CLI defaults for BMC: 2 brokers, 1 record, 2 epochs, 1 crash, and Config's one session
    # expiry, which makes the acks=1 loss one step shorter than B10 above (an expiry instead of
    # a crash). The explorer agrees on the depth.
    code, data = run_json(capsys, "--variant", "current", "--acks", "1", "--bmc", "6")
    config = Config(variant=VARIANTS["current"], brokers=2, max_records=1, max_leader_epochs=2,
                    max_crashes=1, acks="1")
    shortest = explore(KafkaModel(config))
    assert (code, data["result"], data["mode"], data["depth"]) == (1, "violation", "bmc", 4)
    assert data["depth"] == shortest.depth
    assert data["violation"]["invariant"] == "AckedWritesDurable"
    trace = data["violation"]["trace"]
    assert trace[0]["action"] is None and len(trace) == 5
    assert all({"name", "answer", "seconds"} <= set(q) for q in data["queries"])
    from model_check.explore.model import state_to_json

    assert state_to_json(replay_json(config, trace)) == trace[-1]["state"]


def test_cli_bmc_no_violation_exits_0(capsys):
    # A bounded search that finds nothing is "ok" within its depth, never "proved".
    code, data = run_json(capsys, "--variant", "current", "--bmc", "2")
    assert (code, data["result"], data["depth"]) == (0, "ok", 2)
    assert data["notes"] == ["no violation within 2 steps"]
    assert main(["prove", "--variant", "current", "--bmc", "2"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("OK: no violation within 2 steps (bmc, variant current, 2 brokers")
    assert "proved" not in text.lower()


def test_cli_cti_unreachable_exits_3(capsys):
    # HW <= LEO alone (its proof needs LeaderInIsr and the history lemmas, left out here).
    code, data = run_json(capsys, "--variant", "current", "--induction", "--brokers", "2",
                          "--invariant", "HighWatermarkBelowLogEnd", "--no-lemmas")
    assert (code, data["result"], data["cti"]["classification"]) == (3, "cti", "unreachable")
    assert {"pre", "post", "action", "args", "violated", "evidence"} <= set(data["cti"])
    verdicts = {v["action"]: v["verdict"] for v in data["actions"]}
    assert "cti" in verdicts.values() and "inductive" in verdicts.values()
    assert set(verdicts.values()) <= {"inductive", "cti", "unknown"} and len(verdicts) > 20
    proved = sum(v == "inductive" for v in verdicts.values())
    assert data["notes"][0] == f"inductive for {proved} of {len(verdicts)} action instances"


@pytest.mark.parametrize(("variant", "without", "lemmas"), [
    ("hw-truncation", None, True), ("kip-101", None, False), ("kip-320", None, False),
    # The guard mutant: `current` without the broker-epoch check on ISR expansion.
    ("current", "broker_epochs", True),
])
def test_cli_induction_on_a_buggy_variant_exits_1_with_a_real_run(capsys, variant, without,
                                                                   lemmas):
    # At the induction defaults (every exploration bound lifted, crashes none) the explorer
    # would stop at its state cap; it looks at the small probe bounds first, where these
    # variants lose a committed write (kip-320 and the mutant: B7, a crashed follower
    # re-admitted on its last fetch). The CTI shown is the run's last step, and the run
    # replays through spec.step. `current` itself has no such run (the next test).
    # The default lemmas cost 60-100 s a run: hw-truncation and the guard mutant show that
    # they leave the proof failing; kip-101 and kip-320 reach the same classification
    # without them (bench/prove_bench.py --buggy runs all four with them).
    from model_check.prove.engine import PROBE_BOUNDS, TARGETS

    rule = ["--without", without] if without else []
    code, data = run_json(capsys, "--variant", variant, *rule, "--induction", "--brokers", "2",
                          *([] if lemmas else ["--no-lemmas"]))
    assert (data["invariants"] != list(TARGETS)) == lemmas  # the goal: targets (+ lemmas)
    cti = data["cti"]
    assert (code, data["result"], cti["classification"]) == (1, "cti", "reachable")
    assert cti["violated"] == ["NoCommittedDataLoss"] and cti["bounds"] == PROBE_BOUNDS
    chosen = VARIANTS[variant].with_rules(**{without: False}) if without else VARIANTS[variant]
    config = Config(variant=chosen, brokers=2).replace(**PROBE_BOUNDS)
    state = replay_json(config, cti["trace"])
    from model_check.explore.model import state_to_json

    assert state_to_json(state) == cti["post"] == cti["trace"][-1]["state"]
    assert [name for name, _ in violations(config, state)][:1] == ["NoCommittedDataLoss"]


def test_without_fencing_a_follower_takes_records_of_a_later_epoch_than_its_view():
    # Fencing taken out of the 2-broker proof of B11's fix (bench/prove_bench.py --guards)
    # leaves CTIs naming LogWithinView at FollowerHandleFetchResponse, among others. The
    # lemma is then false, not just unproved: a follower still viewing epoch 0 fetches from
    # the leader of epoch 2, which answers, and it appends a record of epoch 2. With the
    # guard the same bounds are searched to the end without a break.
    from spec.lemmas import LogWithinView

    fixed = VARIANTS["current"].with_rules(missed_epoch_resets_followers=True)
    found = {}
    for variant in (fixed, fixed.with_rules(fencing=False)):
        config = Config(variant=variant, brokers=2, max_records=1, max_leader_epochs=3,
                        max_crashes=1, max_session_expiries=1)
        model = KafkaModel(config, [])
        model.invariants = {"LogWithinView": lambda s, c=config: LogWithinView(c, s)}
        found[variant.name] = explore(model, max_states=300_000)
    with_guard, without = found.values()
    assert (with_guard.result, with_guard.violation) == ("ok", None)
    assert without.result == "violation" and without.depth == 11
    assert without.violation.detail == ("broker 1 holds a record or cache entry of a later "
                                        "epoch than its view's 0")
    last = [a for a, _ in without.violation.trace[-3:]]
    assert [type(a).__name__ for a in last] == ["FollowerSendFetch", "LeaderHandleFetch",
                                               "FollowerHandleFetchResponse"]


@pytest.mark.slow
def test_cli_induction_with_b11s_fix_leaves_only_the_follower_fetch_steps(capsys):
    # The same probe on `current` with B11's fix is searched to the end without a violation:
    # its CTIs stay unclassified at the defaults' state cap (exit 3, never 1). With the data
    # layer, the run ghost and the fetch and answer lemmas every step is inductive but the
    # follower taking a records response (docs/prove.md, "Fetches, answers and empty
    # epochs"); without the fix BecomeLeader is B11 (test_a_reelected_leader...); 3 brokers
    # are in bench/prove_bench.py. Both FollowerHandleFetchResponse steps have a genuine
    # small CTI ([0]'s found after its first query reaches its limit or gives junk; a small
    # one is sometimes rejected and the search asked again).
    code, data = run_json(capsys, "--variant", "current", "--with",
                          "missed_epoch_resets_followers", "--induction", "--brokers", "2",
                          "--max-states", "20000")
    assert code == 3 and data["notes"][0] == "inductive for 36 of 38 action instances"
    others = {a["action"]: a["verdict"] for a in data["actions"] if a["verdict"] != "inductive"}
    assert others == {"FollowerHandleFetchResponse[0]": "cti",
                      "FollowerHandleFetchResponse[1]": "cti"}
    # [0]'s CTI made [1] a likely one: [1] was asked the small search first, not the first
    # query that [0] ran to its limit; [0] was asked by cases, records first.
    asked = [q["name"] for q in data["queries"]]
    first = next(i for i, n in enumerate(asked) if n.startswith("FollowerHandleFetchResponse[1]"))
    assert asked.index("FollowerHandleFetchResponse[0] (records)") < first
    assert asked[first].startswith("FollowerHandleFetchResponse[1] (small CTI search")


@pytest.mark.slow
def test_the_snapshot_layer_makes_a_follower_taking_an_answer_inductive(monkeypatch):
    # FollowerHandleFetchResponse at 2 brokers with B11's fix, the step the default lemmas
    # leave CTIs at (the test above): with the snapshot layer both instances are inductive
    # (docs/prove.md, "Snapshots"; the whole table is in bench/prove_bench.py). Without
    # SnapshotPrefix (the follower's log below the fetch offset is what the leader answered
    # from) the records case has CTIs again.
    from model_check.prove import symbolic as sym
    from model_check.prove.engine import TARGETS
    from model_check.prove.lemmas import SNAPSHOT_LAYER, proof_lemmas

    table = sym.action_table
    monkeypatch.setattr(sym, "action_table", lambda shape: [
        i for i in table(shape) if i.name == "FollowerHandleFetchResponse"])
    fixed = VARIANTS["current"].with_rules(missed_epoch_resets_followers=True)
    config = Config(variant=fixed, brokers=2)
    lemmas = [*proof_lemmas(list(TARGETS), config), *SNAPSHOT_LAYER]

    def verdicts(names):
        out = induction(config, list(TARGETS), names, classify=False)
        return {v.action: v.verdict for v in out.actions}, out

    proved, out = verdicts(lemmas)
    assert proved == {"FollowerHandleFetchResponse[0]": "inductive",
                      "FollowerHandleFetchResponse[1]": "inductive"}
    assert out.result == "proved"
    # Without it neither instance is inductive and at least one gives a CTI; the other may run
    # to its limit instead (it did once in CI), which is no proof either.
    broken, out = verdicts([x for x in lemmas if x != "SnapshotPrefix"])
    assert "inductive" not in broken.values()
    assert "cti" in broken.values()
    assert out.result != "proved"

@pytest.mark.parametrize("argv", [
    ["--bmc", "3", "--variant", "nope"],
    ["--bmc", "-1"],
    [],
    ["--induction", "--invariant", "Nope"],
    ["--induction", "--lemma", "Nope"],
    ["--induction", "--add-lemma", "Nope"],
    ["--induction", "--lemma", "answers"],
])
def test_cli_bad_usage_exits_2_with_one_line(capsys, argv):
    try:
        code = main(["prove", *argv])
    except SystemExit as exit_:  # argparse's own refusals
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_cli_add_lemma_adds_to_the_default_set(monkeypatch):
    # What --add-lemma hands the induction: the default set, then the answers layer (once,
    # in its order) and a named lemma; --lemma replaces the default, --add-lemma still adds.
    import model_check.prove.engine
    from model_check.prove.lemmas import ANSWERS, proof_lemmas

    asked = []

    class Asked(Exception):
        pass

    def induction(config, invariants, lemmas, **_):
        asked.append(lemmas)
        raise Asked

    monkeypatch.setattr(model_check.prove.engine, "induction", induction)
    common = ["prove", "--variant", "current", "--induction", "--brokers", "2"]
    for extra in (["--add-lemma", "answers", "--add-lemma", "EncodingWellFormed",
                   "--add-lemma", "answers"],
                  ["--lemma", "WellFormed", "--add-lemma", "AnswersWithinView"]):
        with pytest.raises(Asked):
            main([*common, *extra])
    default = proof_lemmas(list(model_check.prove.engine.TARGETS), Config(brokers=2))
    assert "EncodingWellFormed" in default and not set(ANSWERS) & set(default)
    assert asked == [[*default, *ANSWERS], ["WellFormed", "AnswersWithinView"]]


# ------------------------------------------------------------------------------------------
# Proofs that go through: three invariants with the history lemmas


PROVED = ["HighWatermarkBelowLogEnd", "SingleLeaderPerEpoch", "LeaderInIsr"]


def verdicts_of(outcome):
    return {v.action: v for v in outcome.actions}


def test_cli_proves_three_invariants_for_current(capsys):
    # Unbounded offsets and epochs, 3 brokers; the lemmas are the history layer their proofs
    # need (chosen when none are named), and each lemma is proved with them.
    from model_check.prove.lemmas import proof_lemmas

    argv = [x for name in PROVED for x in ("--invariant", name)]
    code, data = run_json(capsys, "--variant", "current", "--induction", *argv)
    assert (code, data["result"]) == (0, "proved")
    assert data["invariants"] == [*PROVED, *proof_lemmas(PROVED)]
    assert [(f["name"], f["kind"], f["verdict"]) for f in data["formulas"]] == [
        *((n, "target", "proved") for n in PROVED),
        *((n, "hand", "proved") for n in proof_lemmas(PROVED))]
    assert len(data["actions"]) == 64
    assert {v["verdict"] for v in data["actions"]} == {"inductive"}
    assert data["notes"] == ["inductive for every action, 3 brokers, unbounded offsets and "
                             "epochs, epoch caches of <= 3 entries"]


@pytest.mark.parametrize(("variant", "unclean"), [
    ("hw-truncation", False), ("kip-101", False), ("kip-279", False), ("kip-320", False),
    # An unclean election makes an out-of-sync broker leader with the ISR just itself.
    ("current", True),
])
def test_the_same_proof_goes_through_for_every_variant(variant, unclean):
    from model_check.prove.lemmas import proof_lemmas

    config = Config(brokers=2, variant=VARIANTS[variant], unclean_leader_election_enable=unclean)
    outcome = induction(config, PROVED, proof_lemmas(PROVED), classify=False)
    assert outcome.result == "proved"
    assert {v.verdict for v in outcome.actions} == {"inductive"}


def test_an_induction_over_some_instances_is_never_a_proof():
    from model_check.prove.lemmas import proof_lemmas

    config = Config(brokers=2)
    some = induction(config, PROVED, proof_lemmas(PROVED), classify=False,
                     only=["BecomeLeader", "Tick[]"])
    assert some.result == "partial" and not some.formulas
    assert [(v.action, v.verdict) for v in some.actions] == [
        ("BecomeLeader[0]", "inductive"), ("BecomeLeader[1]", "inductive"),
        ("Tick[]", "inductive")]
    broken = induction(config, ["HighWatermarkBelowLogEnd"], [], classify=False,
                       only=["BecomeLeader[0]"])
    assert broken.result == "cti" and [v.verdict for v in broken.actions] == ["cti"]
    with pytest.raises(ValueError, match="no action instance named"):
        induction(config, PROVED, [], only=["BecomeLeader[7]"])


def test_hw_below_log_end_alone_is_not_inductive():
    # Without LeaderInIsr and the history a new leader outside its own ISR view takes its HW
    # to a follower's LEO past its own: the lemmas carry weight.
    outcome = induction(Config(brokers=2), ["HighWatermarkBelowLogEnd"], [], classify=False)
    assert outcome.result == "cti"
    assert verdicts_of(outcome)["BecomeLeader[0]"].verdict == "cti"


def test_the_proof_needs_the_pair_lemma():
    # Without HistoryFunctional (one leader per recorded epoch, a two-witness lemma) the
    # rest is not inductive: the lemmas carry weight.
    from model_check.prove.lemmas import HISTORY

    lemmas = [x for x in HISTORY if x != "HistoryFunctional"]
    outcome = induction(Config(brokers=2), ["SingleLeaderPerEpoch"], lemmas, classify=False)
    assert outcome.result == "cti"
    assert any("SingleLeaderPerEpoch" in v.violated for v in outcome.actions)


def test_the_proof_fails_on_a_controller_that_reuses_an_epoch(monkeypatch):
    # A mutant encoding: the preferred-leader election moves leadership without a new leader
    # epoch (Kafka always bumps it). The proof must fail there, naming the broken lemma.
    import z3

    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import HISTORY

    def keeps_epoch(shape, s, a):
        guard = z3.And(s.c_leader != sym.NO_LEADER, s.c_leader != 0, s.c_isr[0],
                       s.registered[0] != sym.UNKNOWN)
        pe = s.c_pe + 1
        t = sym.dataclasses.replace(s, c_leader=z3.IntVal(0), c_pe=pe)
        return guard, sym._send_lai(shape, t, pe, z3.IntVal(0), s.c_epoch, s.c_isr)

    monkeypatch.setattr(sym, "ControllerElectPreferredLeader", keeps_epoch)
    outcome = induction(Config(brokers=2), ["SingleLeaderPerEpoch"], list(HISTORY),
                        classify=False)
    verdicts = verdicts_of(outcome)
    mutated = verdicts["ControllerElectPreferredLeader[]"]
    # The proof must not go through, and only the mutated step may fail, with a genuine
    # counterexample naming the lemma (a small one where the refinement chases junk).
    assert outcome.result == "cti" and mutated.verdict == "cti", [
        (q.name, q.answer) for q in outcome.queries if "Preferred" in q.name]
    assert "HistoryFunctional" in mutated.violated
    assert all(v.verdict == "inductive" for a, v in verdicts.items() if v is not mutated)


def test_the_proof_fails_on_a_shrink_that_drops_the_leader(monkeypatch):
    # A mutant encoding: the leader's ISR shrink also takes the leader out of the ISR.
    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import proof_lemmas

    original = sym._commit_isr

    def drops_leader(shape, s, b, isr):
        return original(shape, s, b, sym._put(isr, b, sym.z3.BoolVal(False)))

    monkeypatch.setattr(sym, "_commit_isr", drops_leader)
    outcome = induction(Config(brokers=2), ["LeaderInIsr"], proof_lemmas(["LeaderInIsr"]),
                        classify=False)
    verdicts = verdicts_of(outcome)
    assert outcome.result == "cti"
    assert "LeaderInIsr" in verdicts["LeaderShrinkIsr[0, 1]"].violated
    assert {a for a, v in verdicts.items() if v.verdict != "inductive"} == {
        "LeaderShrinkIsr[0, 1]", "LeaderShrinkIsr[1, 0]", "LeaderExpandIsr[0, 1]",
        "LeaderExpandIsr[1, 0]"}


def test_the_proof_fails_on_a_leader_that_leaves_its_own_log_out_of_hw(monkeypatch):
    # A mutant encoding: the HW advance takes the minimum over the other ISR members only.
    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import proof_lemmas

    def others_only(shape, r, b):
        isr = sym._put(r.isr, b, sym.z3.BoolVal(False))
        some, low = sym._member_min(isr, r.remote_leo)
        move = sym.z3.And(r.leader == b, some, low > r.high_watermark)
        return sym.dataclasses.replace(r, high_watermark=sym.z3.If(move, low, r.high_watermark))

    monkeypatch.setattr(sym, "advance_high_watermark", others_only)
    outcome = induction(Config(brokers=2), PROVED, proof_lemmas(PROVED), classify=False)
    assert outcome.result == "cti"
    broken = {a: v.violated for a, v in verdicts_of(outcome).items() if v.verdict == "cti"}
    assert {"BecomeLeader[0]", "LeaderAppend[0]"} <= set(broken)
    assert all(names == ("HighWatermarkBelowLogEnd",) for names in broken.values())


def test_cli_refuses_a_replication_factor_below_the_brokers(tmp_path, capsys):
    # The encoding takes replica j of the partition to be broker j: a smaller replication
    # factor was accepted and checked as if every broker held a replica.
    config = tmp_path / "rf.properties"
    config.write_text("brokers=3\nreplication.factor=2\n")
    assert main(["prove", "--bmc", "2", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "replication factor below the broker count" in err


# ------------------------------------------------------------------------------------------
# Small CTIs: genuine at once where the refinement would chase junk


def _data_goal() -> tuple[list[str], list[str]]:
    targets = ["NoCommittedDataLoss", "LogMatching"]
    return targets, targets + PROVED + _values_lemmas()


def test_a_small_cti_breaks_no_formula_anywhere_in_its_pre_state(monkeypatch):
    # With the values layer the unbounded models of LeaderAppend break some lemma at an index
    # the step never reads, round after round. In the small search no pre-state can break a
    # formula at any witness: asked of the solver over every integer (unsat, whatever model
    # it would pick); with the witnesses cut to 0..1 one can (sat). The search finds a CTI.
    import z3

    from model_check.prove import engine as prove
    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import LEMMAS

    table = {**sym.VIOLATIONS, **LEMMAS}
    targets, goal = _data_goal()
    t = z3.Int("anywhere")

    def can_break_one() -> z3.CheckSatResult:
        shape, _, pre, _, _, base = prove.small_problem(Config(brokers=2), "LeaderAppend[0]",
                                                        goal, 3, table)
        solver = z3.Solver()
        solver.set("timeout", 120_000)
        solver.add(*base, z3.Or([prove.violation(table[n], shape, pre, t) for n in goal]))
        return solver.check()

    found = prove._small_cti(Config(brokers=2), "LeaderAppend[0]", targets, goal, 3, 60_000, [])
    assert found is not None and set(found.violated) & set(targets)
    assert prove.broken_at(found.shape, table, goal, found.pre, found.model, 60_000) == []
    assert can_break_one() == z3.unsat
    monkeypatch.setattr(prove, "small_cti_witnesses", lambda top: range(0, 2))
    assert can_break_one() == z3.sat


def test_every_step_gets_a_verdict_with_the_values_layer():
    # 2 brokers, the data invariants with the history and values layers: where the refinement
    # used to run out of rounds (`unknown`), each step is now inductive or has a genuine CTI.
    targets, goal = _data_goal()
    outcome = induction(Config(brokers=2), targets, goal[len(targets):], classify=False)
    verdicts = verdicts_of(outcome)
    assert outcome.notes[0] == "inductive for 26 of 38 action instances"
    assert {v.verdict for v in verdicts.values()} == {"inductive", "cti"}
    assert {a for a, v in verdicts.items() if v.verdict == "cti"} == {
        f"{name}[{b}]" for name in ("BecomeLeader", "LeaderAppend",
                                    "FollowerHandleFetchResponse") for b in (0, 1)} | {
        f"{name}[{b}, {1 - b}]" for name in ("LeaderHandleFetch", "LeaderShrinkIsr",
                                             "LeaderExpandIsr") for b in (0, 1)}
    assert outcome.cti is not None and outcome.cti.action == "BecomeLeader"


def test_the_data_layer_is_assumed_only_where_it_holds():
    # The data lemmas are true of `current` with every rule on; on another variant, a guard
    # taken out or an unclean election they are false (committed writes are lost), so the
    # default for the data invariants leaves them out there. The proved invariants' lemmas
    # never include them.
    from model_check.prove.engine import TARGETS
    from model_check.prove.lemmas import DATA_LEMMAS, proof_lemmas

    current = Config(brokers=2, variant=VARIANTS["current"])
    elsewhere = [Config(brokers=2, variant=VARIANTS["kip-320"]),
                 Config(brokers=2, variant=VARIANTS["current"].with_rules(broker_epochs=False)),
                 current.replace(unclean_leader_election_enable=True)]
    assert set(DATA_LEMMAS) <= set(proof_lemmas(list(TARGETS), current))
    assert proof_lemmas(list(TARGETS), current) == proof_lemmas(list(TARGETS))
    # B11's fix only makes a leader forget: the layer is kept for it, alone or not.
    fixed = current.replace(variant=VARIANTS["current"].with_rules(
        missed_epoch_resets_followers=True))
    assert proof_lemmas(list(TARGETS), fixed) == proof_lemmas(list(TARGETS))
    elsewhere.append(fixed.replace(variant=fixed.variant.with_rules(fencing=False)))
    for config in elsewhere:
        chosen = proof_lemmas(list(TARGETS), config)
        assert not set(DATA_LEMMAS) & set(chosen) and "ViewsFromHistory" in chosen
    assert not set(DATA_LEMMAS) & set(proof_lemmas(PROVED, current))


def test_a_small_cti_the_unbounded_step_does_not_confirm_is_dropped(monkeypatch):
    # The bounded encoding can compute a post-state the unbounded one does not (it drops a
    # write past its cells). Made to here on purpose: its BrokerFlush also lifts broker 0's HW
    # past its log, and the first query is made to come back junk so the small search runs.
    # The small "CTI" it finds breaks HighWatermarkBelowLogEnd only in the bounded encoding;
    # `_confirm` rejects it and the step is proved. Taking the confirmation out reports it.
    import dataclasses

    import z3

    from model_check.prove import engine as prove
    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import proof_lemmas

    _only(monkeypatch, "BrokerFlush")
    relation, refine = sym.relation, prove._refine

    def bounded_lifts_hw(shape, inst, pre, post, a):
        if not shape.bounded:
            return relation(shape, inst, pre, post, a)
        guard, succ = inst.build(shape, pre, a)
        r0 = succ.replicas[0]
        lifted = dataclasses.replace(r0, high_watermark=r0.log_len + 1)
        succ = dataclasses.replace(succ, replicas=(lifted, *succ.replicas[1:]))
        return z3.And(guard, sym.state_eq(post, succ))

    def first_is_junk(*args, rounds=None, first=0, **kwargs):
        if rounds == 1 and first == 0:
            return prove.JUNK, None, list(args[5])
        return refine(*args, rounds=rounds, first=first, **kwargs)

    monkeypatch.setattr(sym, "relation", bounded_lifts_hw)
    monkeypatch.setattr(prove, "_refine", first_is_junk)
    outcome = induction(Config(brokers=2), PROVED, proof_lemmas(PROVED), classify=False)
    assert [(v.action, v.verdict) for v in outcome.actions] == [
        ("BrokerFlush[0]", "inductive"), ("BrokerFlush[1]", "inductive")]
    confirmations = [q for q in outcome.queries if "small CTI, unbounded step" in q.name]
    assert confirmations and all(q.answer == "unsat" for q in confirmations)
    assert any("BrokerFlush[0] (small CTI search" in q.name and q.answer == "sat"
               for q in outcome.queries)
    monkeypatch.setattr(prove, "_confirm", lambda small, *args: small.model)
    unconfirmed = induction(Config(brokers=2), PROVED, proof_lemmas(PROVED), classify=False)
    assert verdicts_of(unconfirmed)["BrokerFlush[0]"].verdict == "cti"


def test_a_small_cti_the_unbounded_step_rejects_is_excluded_and_the_search_asked_again(
        monkeypatch):
    # Which small CTI Z3 finds first depends on the order the process made its terms in; for
    # FollowerHandleFetchResponse[1] of B11's fix about one order in five gave one the
    # unbounded step rejects (a write past the bounded cells), and the step then came out
    # `unknown`. Here the first is rejected on purpose: the search, asked again without it,
    # finds another (a different pre-state or step), until the unbounded step confirms one
    # (the second may be rejected for real, in the same worker's term order: more tries here).
    # The refinement after a failed small search is made to give up at once, so that with one
    # try the verdict is `unknown` at once, not after a minute.
    import z3

    from model_check.prove import engine as prove
    from model_check.prove import symbolic as sym
    from model_check.prove.lemmas import proof_lemmas

    _keep(monkeypatch, lambda i: (i.name, i.brokers) == ("FollowerHandleFetchResponse", (1,)))
    confirm = prove._confirm
    seen = []

    def first_is_junk_then_gives_up(*args, rounds=None, first=0, **kwargs):
        if rounds == 1 and first == 0:
            return prove.JUNK, None, list(args[5])
        return z3.unknown, None, list(args[5])

    def first_rejected(small, *args):
        seen.append(small)
        return None if len(seen) == 1 else confirm(small, *args)

    def values(small):
        return [str(small.model.eval(sym.as_term(x), model_completion=True))
                for x in sym.leaves_of(small.pre) + sym.leaves_of(small.args)]

    search, excluded = prove._small_cti, []

    def recorded(*args):
        excluded.append(list(args[9] or []))
        return search(*args)

    monkeypatch.setattr(prove, "_refine", first_is_junk_then_gives_up)
    monkeypatch.setattr(prove, "_confirm", first_rejected)
    monkeypatch.setattr(prove, "_small_cti", recorded)
    monkeypatch.setattr(prove, "SMALL_CTI_TRIES", 6)
    fixed = Config(brokers=2, variant=VARIANTS["current"].with_rules(
        missed_epoch_resets_followers=True))
    lemmas = proof_lemmas(list(prove.TARGETS), fixed)
    outcome = induction(fixed, list(prove.TARGETS), lemmas, classify=False)
    assert [(v.action, v.verdict) for v in outcome.actions] == [
        ("FollowerHandleFetchResponse[1]", "cti")]
    assert len(seen) >= 2 and values(seen[0]) != values(seen[1])
    # Each search was asked without every CTI before it, and only without those.
    assert [len(x) for x in excluded] == list(range(len(seen)))
    for k in range(1, len(seen)):
        assert z3.is_false(seen[k - 1].model.eval(excluded[k][k - 1], model_completion=True))
        assert all(z3.is_true(seen[k].model.eval(x, model_completion=True))
                   for x in excluded[k])
    searches = [q for q in outcome.queries if "(small CTI search" in q.name]
    assert sum(q.answer == "sat" for q in searches) == len(seen)
    seen.clear()
    monkeypatch.setattr(prove, "SMALL_CTI_TRIES", 1)
    once = induction(fixed, list(prove.TARGETS), lemmas, classify=False)
    assert [(v.action, v.verdict) for v in once.actions] == [
        ("FollowerHandleFetchResponse[1]", "unknown")]


def test_a_query_stops_on_z3s_count_of_its_work_not_on_the_clock():
    # Every limit of induction and Houdini is Z3's count of its work (`rlimit`), so a query
    # past its limit stops at the same point however fast or loaded the machine is: Z3 says
    # "canceled" (its resource limit) and the count has grown by the limit, each time. With a
    # wall-clock limit it says "timeout", after as much work as the clock allowed.
    import itertools

    import z3

    from model_check.prove import engine as prove

    def count(solver) -> int:
        stats = solver.statistics()
        return next(stats.get_key_value(k) for k in stats.keys() if k == "rlimit count")

    xs = [z3.Int(f"pigeon{i}") for i in range(14)]
    hard = [*[z3.And(0 <= x, x < 14) for x in xs], z3.Distinct(xs),
            z3.Sum([x * x * (i + 1) for i, x in enumerate(xs)]) == 1003]
    counts = []
    for _ in range(3):
        solver = prove.solver_within(20)
        solver.add(*hard)
        assert solver.check() == z3.unknown and solver.reason_unknown() == "canceled"
        counts.append(count(solver))
    budget = 20 * prove.RLIMIT_PER_MS
    assert all(0 <= b - a - budget < 10_000 for a, b in itertools.pairwise(counts))


def test_the_z3_lemmas_hold_on_represented_reachable_states():
    # The Z3 forms, not only the concrete ones, are true where it matters: on 260 reachable
    # states (a breadth-first sample and random walks, 3 brokers, a crash), no witness breaks
    # any lemma of the structural, values, data, answers or snapshot layers in the state's
    # representation. The history layer, the run lemmas and most of the snapshot layer are
    # about ghosts (the record of partition states, `c_run`, a response's records below its
    # fetch offset) that `represent` does not build, so they are left out.
    import z3

    from model_check.prove import symbolic as sym
    from model_check.prove.houdini import random_walks, reachable_states
    from model_check.prove.lemmas import HISTORY, SNAPSHOT_GHOSTS
    from model_check.prove.lemmas import LEMMAS as SYMBOLIC

    config = _config("current", brokers=3)
    states = reachable_states(config, 3000)[::150] + random_walks(config, 20, 60, 1)[::5]
    shape = sym.make_shape(config, bounded=False, cache_slots=3)
    x, t = sym.fresh_state(shape, "x."), z3.Int("t")
    names = [n for n in SYMBOLIC if n not in (*HISTORY, "HistoryLeaderInIsr", "HistoryMonotone",
                                              "NewEpochNewLeader", "HistoryRun", "RunLeaderBacked",
                                              "RunEpochsLedByLeader", "RunLeaderHoldsItsEpochs",
                                              "RunLeaderHeardInRun", "RunAnswersFromLeader",
                                              *SNAPSHOT_GHOSTS)]
    assert {"ValuesKeepTheirEpoch", "ResponsesWellFormed", "CommittedOnIsr",
            "PendingHwCommitted", "SnapshotAboveCache", "EpochMatchesResponse",
            "DivergedRemoteLeoBacked"} <= set(names)
    broken = set()
    any_broken = z3.Or([violation(SYMBOLIC[name], shape, x, t) for name in names])
    for state in states:
        solver = z3.Solver()
        solver.add(sym.represent(shape, state, x))
        solver.push()
        solver.add(any_broken)  # one query a state; which lemma only when one is broken
        if solver.check() == z3.unsat:
            continue
        solver.pop()
        for name in names:
            solver.push()
            solver.add(violation(SYMBOLIC[name], shape, x, t))
            if solver.check() == z3.sat:
                broken.add(name)
            solver.pop()
    assert len(states) == 260 and broken == set()


def test_records_at_offset_zero_replace_an_epoch_led_without_writing():
    # A reachable run (found by a search of 3 brokers with a crash and a session expiry):
    # broker 1 leads epoch 1 with an empty log, its session expires without a crash (so it
    # keeps its cache), and broker 2, leader of epoch 2, answers its fetch at offset 0,
    # which KIP-320's check skips, with an epoch-0 record. PendingLogMatching once said no
    # answered record is older than the follower's latest epoch; appending it replaces the
    # entry, and the cache agrees with the log.
    from spec.lemmas import CacheMatchesLog, PendingLogMatching

    config = _config("current", brokers=3, max_records=1, max_leader_epochs=3, max_crashes=1,
                     max_session_expiries=1)
    run = [actions.ProducerSend(0), actions.LeaderAppend(0, 0, 1),
           actions.FollowerSendFetch(0, 2), actions.LeaderHandleFetch(0, 0, 2),
           actions.FollowerHandleFetchResponse(0, 2), actions.BrokerCrash(0),
           actions.ControllerHandleBrokerFailure(0), actions.BecomeLeader(0, 1, 1, 1),
           actions.ControllerHandleBrokerFailure(1), actions.BecomeLeader(0, 2, 2, 2),
           actions.BrokerRegister(1), actions.BecomeFollower(0, 1, 2, 2),
           actions.FollowerSendFetch(0, 1), actions.LeaderHandleFetch(0, 2, 1)]
    s = initial_state(config)
    for action in run:
        s = step(config, s, action)
    answer, follower = s.fetches[0][1], s.replica(0, 1)
    assert (answer.kind, answer.fetch_offset, [r.epoch for r in answer.records]) == (
        "records", 0, [0])
    assert (follower.log, follower.epoch_cache) == ((), ((1, 0),))
    assert PendingLogMatching(config, s) is None and violations(config, s) == []
    # The Z3 forms agree on this state (each is broken here without its offset-0 exception).
    breaks = _z3_breaks(config)
    assert not breaks("PendingLogMatching", s) and not breaks("SnapshotAboveCache", s)
    after = step(config, s, actions.FollowerHandleFetchResponse(0, 1))
    assert after.replica(0, 1).epoch_cache == ((0, 0),) and CacheMatchesLog(config, after) is None


def test_the_cases_a_step_is_asked_in_cover_it():
    # The induction asks a fetch step one case at a time and calls it inductive when every
    # case is: sound only if the cases leave nothing out. Each step's cases are checked to
    # cover every state (a case list missing one fails here).
    import z3

    from model_check.prove import symbolic as sym
    from model_check.prove.engine import _cases

    shape = sym.make_shape(_config("current"), bounded=False, cache_slots=3)
    pre, post = sym.fresh_state(shape, "pre."), sym.fresh_state(shape, "post.")
    split = 0
    for inst in sym.action_table(shape):
        cases = _cases(inst, pre, post)
        split += len(cases) > 1
        solver = z3.Solver()
        solver.add(*[z3.Not(z3.And(*case)) for _, case in cases])
        assert solver.check() == z3.unsat, inst.name
    assert split == 4  # LeaderHandleFetch both ways, FollowerHandleFetchResponse at each


# ------------------------------------------------------------------------------------------
# KIP-966 (eligible leader replicas) in the Z3 encoding

KIP966_TARGETS = ["HighWatermarkBelowLogEnd", "SingleLeaderPerEpoch", "LeaderInIsr",
                  "EligibleReplicasWellFormed"]


def _kip966(min_isr: int, **changes) -> Config:
    return Config(brokers=3, eligible_leader_replicas_enable=True, min_insync_replicas=min_isr,
                  **changes)


def _kip966_induction(config, dropped=()):
    from model_check.prove.lemmas import proof_lemmas

    lemmas = [x for x in proof_lemmas(KIP966_TARGETS, config) if x not in dropped]
    return induction(config, KIP966_TARGETS, lemmas, classify=False)


@pytest.mark.parametrize("min_isr", [1, 2])
def test_kip966_keeps_the_three_invariants_and_its_bookkeeping_proved(min_isr):
    # With ELR on, the three invariants every variant keeps and KIP-966's bookkeeping (ELR
    # and ISR disjoint, no ELR beside an ISR of min ISR size) are inductive at 3 brokers,
    # for unbounded offsets and epochs (docs/prove.md, "KIP-966").
    out = _kip966_induction(_kip966(min_isr))
    assert out.result == "proved" and len(out.actions) == 64


def test_an_election_from_the_elr_at_min_isr_1_needs_a_lone_eligible_replica():
    # The election moves one ELR member into the ISR; at min ISR 1 that ISR is at min ISR,
    # so the rest of the ELR would break the bookkeeping. LoneEligibleReplica says there is
    # no rest; without it the step has a CTI.
    out = _kip966_induction(_kip966(1), dropped=("LoneEligibleReplica",))
    assert {v.action: v.violated for v in out.actions if v.verdict != "inductive"} == {
        "ControllerElectLeader[]": ("EligibleReplicasWellFormed",)}


def test_the_kip966_proof_fails_for_a_controller_that_keeps_a_rejoined_member_eligible(
        monkeypatch):
    # A mutant controller: an ELR member the leader adds back to the ISR stays in the ELR.
    # The bookkeeping is then false, and the proof says where: at the ISR expansions.
    from model_check.prove import symbolic as sym

    real = sym.kip966_change

    def keeps(shape, s, registered, isr, elect_leader, unclean_shutdown=None):
        leader, epoch, new_isr, elr, known, outside = real(shape, s, registered, isr,
                                                           elect_leader, unclean_shutdown)
        elr = tuple(sym.Or(e, sym.And(i, s.c_elr[x]))
                    for x, (e, i) in enumerate(zip(elr, new_isr, strict=True)))
        return leader, epoch, new_isr, elr, known, outside

    monkeypatch.setattr(sym, "kip966_change", keeps)
    out = _kip966_induction(_kip966(3))
    assert out.result == "cti"
    assert {v.action: v.violated for v in out.actions if v.verdict != "inductive"} == {
        name: ("EligibleReplicasWellFormed",) for name in (
            "ControllerElectLeader[]", *[f"ControllerHandleBrokerFailure[{b}]" for b in range(3)],
            *[f"LeaderExpandIsr[{b}, {f}]" for b in range(3) for f in range(3) if f != b])}


def test_the_lone_eligible_replica_lemma_fails_in_both_forms_and_holds_where_reached():
    from model_check.prove.houdini import reachable_states
    from spec.lemmas import LoneEligibleReplica
    from spec.state import replace

    config = _kip966(1)
    breaks = _z3_breaks(config)
    s = initial_state(config)
    ps = s.controller.partitions[0]
    two = replace(s, controller=replace(s.controller, partitions=(
        replace(ps, leader=-1, isr=(), elr=(0, 1)),)))
    one = replace(s, controller=replace(s.controller, partitions=(
        replace(ps, leader=-1, isr=(), elr=(1,)),)))
    assert "ELR [0, 1] at min ISR 1" in LoneEligibleReplica(config, two)
    assert breaks("LoneEligibleReplica", two)
    for good in (s, one):
        assert LoneEligibleReplica(config, good) is None
        assert not breaks("LoneEligibleReplica", good)
    # At min ISR 2 the ELR may hold two: nothing to say there.
    assert LoneEligibleReplica(_kip966(2), two) is None
    # On the first 200,000 states the explorer reaches with ELR on, 2 brokers (the ISR
    # empties after a crash and a session expiry, the ELR fills and elects).
    config = Config(brokers=2, eligible_leader_replicas_enable=True, min_insync_replicas=1,
                    max_records=1, max_leader_epochs=4, max_crashes=1, max_session_expiries=1)
    states = reachable_states(config, 200_000)
    eligible = [x for x in states if x.controller.partitions[0].elr]
    assert len(states) == 200_000 and eligible
    assert all(LoneEligibleReplica(config, x) is None for x in states)


def test_cli_proves_kip966s_bookkeeping_with_the_elr_flags(capsys):
    # `isrlab prove --elr` (as `isrlab check --elr`): the bookkeeping alone, with the lemmas
    # its proof names (LoneEligibleReplica, and the leader in the ISR it shrinks).
    code, data = run_json(capsys, "--elr", "--no-last-known-leader", "--min-isr", "1",
                          "--induction", "--invariant", "EligibleReplicasWellFormed")
    assert code == 0 and data["result"] == "proved" and len(data["actions"]) == 64
    assert data["config"]["eligible.leader.replicas.enable"] == "true"
    assert data["config"]["last.known.leader.election.enable"] == "false"
    assert {"LoneEligibleReplica", "LeaderInIsr"} <= set(data["invariants"])


# KIP-966's promise in the Z3 encoding: the crash-loss ghost

B8_BMC = _config("current", min_insync_replicas=2, max_leader_epochs=3, max_session_expiries=1)


@pytest.mark.slow
@pytest.mark.parametrize("elr", [False, True])
def test_bmc_finds_b8s_first_step_at_the_explorers_depth_and_not_with_elr(elr):
    # B8 (the last ISR member comes back from a crash without what it lost, and stays in the
    # ISR): LeaderCandidatesComplete breaks at the explorer's depth. The decoded trace
    # replays through spec.step state for state, the crash-loss ghost included. With ELR on,
    # no run of that length breaks it.
    config = B8_BMC.replace(eligible_leader_replicas_enable=elr,
                            last_known_leader_election_enable=False)
    found = bmc(config, 12, ["LeaderCandidatesComplete"])
    if elr:
        assert (found.result, found.depth) == ("proved", 12)
        return
    model = KafkaModel(config, ["LeaderCandidatesComplete"])
    shortest = explore(model)
    assert (found.result, found.invariant) == ("violation", "LeaderCandidatesComplete")
    assert found.depth == shortest.depth == 12
    state = initial_state(config)
    for item in found.trace[1:]:
        state = step(config, state, actions.ACTIONS_BY_NAME[item.action](**item.args))
        assert state == item.state
    assert state.crash_losses and "BrokerCrash" in [s.action for s in found.trace]


def _unflushed_crash():
    """B8_BMC with ELR: broker 0 leads and holds v1 unflushed; its crash and the state after."""
    from spec.actions import BrokerCrash, LeaderAppend, ProducerSend

    config = B8_BMC.replace(eligible_leader_replicas_enable=True)
    s = initial_state(config)
    for a in (ProducerSend(0), LeaderAppend(0, 0, 1)):
        s = step(config, s, a)
    return config, s, step(config, s, BrokerCrash(0))


def test_the_relation_records_what_a_crash_loses_and_a_mutant_that_forgets_fails():
    import z3

    from model_check.prove import symbolic as sym
    from spec.state import replace

    config, before, after = _unflushed_crash()
    assert after.crash_losses == {(1, 0)}
    shape = sym.make_shape(config, bounded=False, cache_slots=3)
    crash = next(i for i in sym.action_table(shape) if i.name == "BrokerCrash" and i.brokers == (0,))

    def steps(inst, post_state) -> bool:
        pre, post = sym.fresh_state(shape, "s."), sym.fresh_state(shape, "t.")
        solver = z3.Solver()
        solver.add(sym.relation(shape, inst, pre, post, sym.fresh_args(shape, "a.")),
                   sym.represent(shape, before, pre), sym.represent(shape, post_state, post))
        return solver.check() == z3.sat

    forgot = replace(after, crash_losses=frozenset())
    assert steps(crash, after) and not steps(crash, forgot)
    # A mutant crash that keeps the ghost as it was takes the forgetful step, not the spec's.

    def forgets(shape, s, a, b):
        guard, t = sym.BrokerCrash(shape, s, a, b)
        return guard, sym.dataclasses.replace(t, lost=s.lost)

    mutant = sym.ActionInstance("BrokerCrash", (0,), forgets)
    assert not steps(mutant, after) and steps(mutant, forgot)
    # Where the spec keeps no ghost (min ISR 1), a state with losses is not represented.
    one = sym.make_shape(config.replace(min_insync_replicas=1), bounded=False, cache_slots=3)
    with pytest.raises(sym.NotRepresentable, match="crash losses counted"):
        sym.represent(one, after, sym.fresh_state(one, "x."))


def test_kip966s_promise_reads_the_ghost_in_both_forms():
    # The Z3 forms of AckedWritesDurableKip966 and LeaderCandidatesComplete break exactly where
    # the spec's do: an acknowledged write one broker lost is still due at min ISR 2, and
    # no longer once min ISR brokers lost it.
    import z3

    from model_check.prove import symbolic as sym
    from spec.invariants import AckedWritesDurableKip966, LeaderCandidatesComplete
    from spec.state import Acked, replace

    config, _, after = _unflushed_crash()
    shape = sym.make_shape(config, bounded=False, cache_slots=3)
    x, w = sym.fresh_state(shape, "x."), z3.Int("w")

    def breaks(name, state) -> bool:
        solver = z3.Solver()
        solver.add(sym.represent(shape, state, x), sym.VIOLATIONS[name](shape, x, w))
        return solver.check() == z3.sat

    # v1 acknowledged, broker 0 lost it in its crash; broker 1 took over (in the ISR) without it.
    ps = after.controller.partitions[0]
    lost = replace(after, acked=frozenset({Acked(0, 0, 1)}), controller=replace(
        after.controller, partitions=(replace(ps, leader=1, leader_epoch=1, isr=(1,)),)))
    lost = lost.with_replica(0, 1, replace(lost.replica(0, 1), leader=1, leader_epoch=1))
    both = replace(lost, crash_losses=frozenset({(1, 0), (1, 1)}))
    for name, check in (("AckedWritesDurableKip966", AckedWritesDurableKip966),
                        ("LeaderCandidatesComplete", LeaderCandidatesComplete)):
        assert check(config, lost) is not None and breaks(name, lost), name
        assert check(config, both) is None and not breaks(name, both), name
        assert check(config, after) is None and not breaks(name, after), name


# Delivered writes: AckedWritesDurable and ConsumerNeverSeesUncommitted


def test_the_delivered_lemmas_can_fail_in_both_forms():
    # Each names a broken hand-made state, and the Z3 form is broken on that state's
    # representation exactly when the concrete one is.
    from spec.lemmas import (
        DeliveredOnIsr,
        DeliveredWithinLeaderReach,
        DivergingAnswersSpareDelivered,
        FollowedLeaderHoldsDelivered,
        PurgatoryInLog,
    )
    from spec.state import Acked, FetchResponse, PendingProduce, Record, replace

    config = _config("current")
    one = _config("current", acks="1")
    s = replace(initial_state(config), next_value=3)
    lead = s.replica(0, 0)
    # Leader 0 holds v1 at 0 with HW 1; follower 1 has it too, or not.
    held = s.with_replica(0, 0, replace(lead, log=(Record(0, 1),), high_watermark=1))
    both = held.with_replica(0, 1, replace(s.replica(0, 1), log=(Record(0, 1),)))
    acked = frozenset({Acked(0, 0, 1)})
    cases = [
        (PurgatoryInLog, config,
         held.with_replica(0, 0, replace(held.replica(0, 0), purgatory=(PendingProduce(0, 1),))),
         held.with_replica(0, 0, replace(held.replica(0, 0), purgatory=(PendingProduce(0, 2),))),
         "parks v2 at 0"),
        (PurgatoryInLog, config, both,
         both.with_replica(0, 1, replace(both.replica(0, 1), purgatory=(PendingProduce(0, 1),))),
         "broker 1 parks writes without leading"),
        (DeliveredOnIsr, config, replace(both, acked=acked), replace(held, acked=acked),
         "ISR member 1 lacks delivered v1"),
        # A consumer's read counts at any acks; an acks=1 acknowledgement does not (B10).
        (DeliveredOnIsr, one, replace(held, acked=acked), replace(held, consumed=acked),
         "ISR member 1 lacks delivered v1"),
        (DeliveredWithinLeaderReach, config, replace(both, acked=acked),
         replace(both, acked=acked).with_replica(0, 0, replace(both.replica(0, 0),
                                                               high_watermark=0)),
         "past leader 0's HW 0"),
    ]
    # Follower 1 (in the ISR, holding acknowledged v1 at 0) is told its epoch 0 ends at 1,
    # or at 0.
    def told(end):
        answer = FetchResponse(0, 0, "diverging", epoch=0, end_offset=end)
        return replace(both, acked=acked, fetches=((None, answer),))

    cases.append((DivergingAnswersSpareDelivered, config, told(1), told(0), "cuts it to 0"))
    # Follower 1 (in the ISR) follows leader 0, which lacks the write 1 holds, or holds it.
    lacking = both.with_replica(0, 0, replace(both.replica(0, 0), log=()))
    cases.append((FollowedLeaderHoldsDelivered, config, replace(both, consumed=acked),
                  replace(lacking, consumed=acked), "leader 0, which ISR member 1 follows, lacks"))
    for lemma, cfg, good, bad, says in cases:
        breaks = _z3_breaks(cfg)
        for state in (initial_state(cfg), good):
            assert lemma(cfg, state) is None, lemma.__name__
            assert not breaks(lemma.__name__, state), lemma.__name__
        assert says in lemma(cfg, bad), lemma.__name__
        assert breaks(lemma.__name__, bad), lemma.__name__
    # An excused write is not asked for.
    excused = replace(held, acked=acked, excused=frozenset({1}))
    assert DeliveredOnIsr(config, excused) is None
    assert not _z3_breaks(config)("DeliveredOnIsr", excused)


DELIVERED_TARGETS = ["NoCommittedDataLoss", "LogMatching", "HighWatermarkBelowLogEnd",
                     "AckedWritesDurable", "ConsumerNeverSeesUncommitted"]


def _delivered_induction(dropped=(), without=None, only=None, **changes):
    """The delivered layer's induction of B11's fix at 2 brokers; `without` takes a guard out
    and keeps the lemmas."""
    from model_check.prove.lemmas import DELIVERED_LAYER, SNAPSHOT_LAYER, proof_lemmas

    fixed = VARIANTS["current"].with_rules(missed_epoch_resets_followers=True)
    config = Config(variant=fixed, brokers=2, **changes)
    lemmas = [x for x in (*proof_lemmas(DELIVERED_TARGETS, config), *SNAPSHOT_LAYER,
                          *DELIVERED_LAYER) if x not in dropped]
    if without:
        config = config.replace(variant=fixed.with_rules(**{without: False}))
    return induction(config, DELIVERED_TARGETS, lemmas, classify=False, only=only)


def test_an_acknowledgement_and_a_read_are_inductive_with_the_delivered_layer(monkeypatch):
    # The two steps that deliver a write (docs/prove.md, "Delivered writes"): a leader
    # acknowledging it once its HW passed it, a consumer reading below the leader's HW.
    # Without PurgatoryInLog the acknowledgement has a CTI: the value parked is not the
    # record the HW passed.
    _only(monkeypatch, "LeaderAckProduce", "ConsumerRead")
    out = _delivered_induction()
    assert out.result == "proved" and len(out.actions) == 4
    out = _delivered_induction(dropped=("PurgatoryInLog",))
    assert {v.action: v.verdict for v in out.actions} == {
        "LeaderAckProduce[0]": "cti", "LeaderAckProduce[1]": "cti",
        "ConsumerRead[0]": "inductive", "ConsumerRead[1]": "inductive"}


@pytest.mark.slow
def test_kafka_7128s_guard_carries_the_delivered_layer_at_isr_expansion():
    # The three default targets are proved at 2 brokers without KAFKA-7128's guard (bench/
    # prove_bench.py --guards): what it stops, B5, loses an acknowledged write above the new
    # leader's HW, which NoCommittedDataLoss does not see. The delivered layer does: with the
    # guard the ISR expansion is inductive, without it (same lemmas) both expansions break
    # the delivered layer, at B5's min ISR 2. Which of its lemmas the second CTI names
    # depends on the model Z3 gives (DeliveredOnIsr alone, DivergingAnswersSpareDelivered
    # after the rest of the suite has run).
    from model_check.prove.lemmas import DELIVERED_LAYER

    steps = ["LeaderExpandIsr[0, 1]", "LeaderExpandIsr[1, 0]"]
    kept = _delivered_induction(only=["LeaderExpandIsr"], min_insync_replicas=2)
    assert kept.result == "partial"
    assert [(v.action, v.verdict) for v in kept.actions] == [(a, "inductive") for a in steps]
    out = _delivered_induction(without="expand_requires_epoch_start", only=["LeaderExpandIsr"],
                               min_insync_replicas=2)
    assert out.result == "cti" and [v.action for v in out.actions] == steps
    for v in out.actions:
        assert v.verdict == "cti" and v.violated and set(v.violated) <= set(DELIVERED_LAYER)


def test_the_delivered_proof_fails_for_a_leader_that_acknowledges_early(monkeypatch):
    # A mutant encoding: the leader acknowledges a write before its HW has passed it. The
    # acknowledgement then breaks the delivered writes' lemmas, named.
    from model_check.prove import symbolic as sym

    original = sym.LeaderAckProduce

    def early(shape, s, a, b):
        guard, t = original(shape, s, a, b)
        r = s.replicas[b]
        return sym.And(r.purgatory[a.offset], s.alive[b], r.leader == b), t

    monkeypatch.setattr(sym, "LeaderAckProduce", early)
    _keep(monkeypatch, lambda i: i.name == "LeaderAckProduce")
    out = _delivered_induction()
    assert out.result == "cti"
    for v in out.actions:
        assert v.verdict == "cti" and {"DeliveredOnIsr", "AckedWritesDurable"} & set(v.violated)
