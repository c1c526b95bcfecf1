"""Liveness against lost messages: a follower gives up a fetch that gets no answer and fetches
again, the simulator's message faults (drop, duplicate, delay) replay clean, and the liveness
phase after the faults heal fails a run whose cluster does not recover, naming the partition.
Every check here is also shown failing: a broker without the fetch timeout, a follower that
does not say which fetch it gave up, a transport that delivers a copy."""

from __future__ import annotations

import dataclasses
import json

from impl.config import ClusterConfig
from impl.protocol.broker import BrokerCore
from impl.protocol.messages import (
    UNKNOWN,
    Fetch,
    FetchResponse,
    LeaderAndIsr,
    Recall,
    Send,
    Transition,
)
from impl.sim import SimOptions, Simulation, simulate
from model_check.conformance.campaign import (
    CampaignResult,
    format_summary,
    run_campaign,
    run_one,
)
from model_check.conformance.replay import format_result, load_texts, replay_run
from vocab.actions import ActionName
from vocab.outcomes import Code

MESSAGE_FAULTS = ("drop", "duplicate", "delay")


def lines(result, node: str, text: str) -> list[dict]:
    return [json.loads(line) for line in result.traces[node].splitlines() if text in line]


def replayed(result):
    return replay_run(load_texts(result.traces, result.run_json()))


def no_fetch_timeout(monkeypatch) -> None:
    """The broker as it was: a follower waits for a fetch's answer for ever."""
    monkeypatch.setattr(ClusterConfig, "replica_fetch_timeout_ms", property(lambda self: None))


# The stall: a leader lets a parked fetch go, and the follower never hears of it ---------------


class FalseDisconnect(Simulation):
    """b0 is told its connection to the target broke though nothing broke: a spoofed
    connection that says hello as that broker and closes did this over TCP."""

    def _start_fault(self, kind: str, target: str, length: int) -> None:
        if kind != "false-disconnect":
            super()._start_fault(kind, target, length)
            return
        self._input("b0", lambda core: core.on_disconnected(self.now, target))


def false_disconnect_run():
    options = SimOptions(seed=3, duration_ms=6000, faults=((2000, "false-disconnect", "b1", 0),))
    return FalseDisconnect(ClusterConfig(), options).run()


def test_a_follower_whose_parked_fetch_the_leader_dropped_fetches_again_and_rejoins():
    result = false_disconnect_run()
    dropped = lines(result, "b0", '"NetworkDropFetch"')
    assert [(d["time_ms"], d["args"]["follower"]) for d in dropped] == [(2000, 1)]
    gave_up = lines(result, "b1", '"gave_up"')
    assert len(gave_up) == 1 and gave_up[0]["time_ms"] > 2000
    # b1 left the ISR while it waited, and came back once it fetched again.
    assert (result.summary["isr_shrinks"], result.summary["isr_expands"]) == (1, 1)
    assert "liveness" not in result.summary and result.summary["live_after_ms"] <= 1000
    assert replayed(result).verdict == "accepted"


def test_without_the_fetch_timeout_the_same_run_fails_the_liveness_phase(monkeypatch):
    no_fetch_timeout(monkeypatch)
    result = false_disconnect_run()
    assert lines(result, "b1", '"gave_up"') == []
    assert result.summary["liveness"] == (
        "p0: ISR [0, 2] of [0, 1, 2] 10000 ms after the faults healed")
    assert result.summary["end_ms"] == 16_000
    # A liveness failure, not a safety one: the run still conforms to the spec.
    assert replayed(result).verdict == "accepted"


def test_cluster_sim_exits_1_naming_what_did_not_recover(monkeypatch, tmp_path, capsys):
    from isrlab.cli import main

    def simulated(config, options):
        # The CLI has no flag for a false disconnect: its run gets one.
        faults = ((2000, "false-disconnect", "b1", 0),)
        return FalseDisconnect(config, dataclasses.replace(options, faults=faults)).run()

    no_fetch_timeout(monkeypatch)
    monkeypatch.setattr("impl.sim.simulate", simulated)
    code = main(["cluster", "sim", "--seed", "3", "--duration", "6s", "--partitions", "1",
                 "--trace-out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert err == ("isrlab cluster: FAILED: not recovered: p0: ISR [0, 2] of [0, 1, 2] 10000 ms "
                   "after the faults healed\n")
    summary = json.loads((tmp_path / "run.json").read_text())["summary"]
    assert summary["liveness"].startswith("p0: ISR [0, 2]")


def test_a_campaign_fails_a_run_that_did_not_recover_and_says_why(monkeypatch):
    def simulated(config, options):
        faults = ((2000, "false-disconnect", "b1", 0),)
        return FalseDisconnect(config, dataclasses.replace(options, faults=faults)).run()

    monkeypatch.setattr("model_check.conformance.campaign.simulate", simulated)
    options = SimOptions(seed=3, duration_ms=6000)
    healthy = run_campaign(ClusterConfig(), options, 1, None, keep="none", workers=1)
    assert healthy.summary()["failed_runs"] == []
    no_fetch_timeout(monkeypatch)
    stalled = run_campaign(ClusterConfig(), options, 1, None, keep="none", workers=1)
    summary = stalled.summary()
    assert summary["failed_runs"] == summary["liveness_failed_runs"] == [3]
    assert summary["divergences"] == 0
    assert stalled.outcomes[0].report == (
        "liveness: p0: ISR [0, 2] of [0, 1, 2] 10000 ms after the faults healed")
    [row] = [line for line in format_summary(stalled).splitlines() if "not recovered" in line]
    assert row.split() == ["not", "recovered", "after", "the", "faults", "healed", "1"]


# The give-up in the trace ---------------------------------------------------------------------


def paused_leader_run():
    # b0 is paused holding parked fetches; the followers give up theirs (a 500 ms fetch timeout)
    # and b0, resumed, still answers the old ones before it reads the new.
    config = ClusterConfig(request_timeout_ms=300)
    return simulate(config, SimOptions(seed=3, duration_ms=6000,
                                       faults=((2000, "pause", "b0", 1000),)))


def test_a_fetch_given_up_is_named_and_replay_drops_it_in_the_spec():
    result = paused_leader_run()
    gave_up = lines(result, "b1", '"gave_up"') + lines(result, "b2", '"gave_up"')
    assert len(gave_up) == 2
    assert replayed(result).verdict == "accepted"


def test_a_follower_that_does_not_name_the_fetch_it_gave_up_diverges(monkeypatch):
    original = BrokerCore._give_up_fetch

    def silent(self, r, now):
        effects = original(self, r, now)
        r.gave_up_seq = UNKNOWN  # BUG: the next fetch does not say which one it gave up
        return effects

    monkeypatch.setattr(BrokerCore, "_give_up_fetch", silent)
    replay = replayed(paused_leader_run())
    assert replay.verdict == "divergence"
    assert "spec refuses FollowerSendFetch" in format_result(replay)
    assert "a request or response is in flight" in format_result(replay)


# The cores ------------------------------------------------------------------------------------


def follower_core(config: ClusterConfig) -> BrokerCore:
    core = BrokerCore(1, config)
    core.bootstrap([LeaderAndIsr(0, 0, 0, (0, 1, 2), 0)])
    return core


def sent_fetches(effects) -> list[tuple[Fetch, dict | None]]:
    return [(m, t.detail) for t in effects if isinstance(t, Transition)
            for _, m in t.sends if isinstance(m, Fetch)]


def replication(effects) -> list:
    """The effects other than those for the metadata store (heartbeats)."""
    return [e for e in effects if not (isinstance(e, Send) and e.dst == "meta")]


def records(seq: int) -> FetchResponse:
    return FetchResponse(0, 0, 0, "records", records=((0, 7, b""),), high_watermark=0,
                         fetch_offset=0, seq=seq)


def test_a_late_answer_to_a_fetch_given_up_is_ignored_and_the_new_one_is_applied():
    config = ClusterConfig()
    core = follower_core(config)
    [(first, detail)] = sent_fetches(core.on_timer(0))
    assert (first.seq, detail) == (1, None)
    timeout = config.replica_fetch_timeout_ms
    assert timeout == config.replica_fetch_wait_max_ms + config.request_timeout_ms == 1700
    assert core.next_deadline() == config.heartbeat_interval_ms  # heartbeats come first
    assert replication(core.on_timer(timeout - 1)) == []
    assert replication(core.on_timer(timeout)) == [Recall("b0", 0)]
    again = timeout + config.replica_fetch_backoff_ms
    assert core.next_deadline() == again
    [(second, detail)] = sent_fetches(core.on_timer(again))
    assert (second.seq, detail) == (2, {"gave_up": 1})
    assert core.on_message(again + 5, "b0", "b0:m1", records(seq=1)) == []
    assert core.replicas[0].leo == 0
    [handled] = core.on_message(again + 6, "b0", "b0:m2", records(seq=2))[:1]
    assert (handled.action, handled.outcome) == (ActionName.FOLLOWER_HANDLE_FETCH_RESPONSE,
                                                 Code.RECORDS_APPENDED)
    assert core.replicas[0].leo == 1


def test_a_leader_drops_a_parked_fetch_when_the_follower_sends_a_newer_one():
    config = ClusterConfig()
    core = BrokerCore(0, config)
    core.bootstrap([LeaderAndIsr(0, 0, 0, (0, 1, 2), 0)])

    def fetch(seq: int) -> Fetch:
        return Fetch(0, 1, 0, 0, 0, 0, seq)

    assert [t.outcome for t in core.on_message(10, "b1", "b1:m1", fetch(1))] == [
        Code.RECORDS_SENT]
    assert core.on_message(20, "b1", "b1:m2", fetch(2)) == []  # nothing new: parked
    dropped = core.on_message(30, "b1", "b1:m3", fetch(3))
    assert [(t.action, t.recv, t.detail) for t in dropped] == [
        (ActionName.NETWORK_DROP_FETCH, "b1:m2", {"why": "superseded"})]
    deadline = 30 + config.replica_fetch_wait_max_ms
    answered = core.on_timer(deadline)
    assert [(t.action, t.recv) for t in answered if isinstance(t, Transition)] == [
        (ActionName.LEADER_HANDLE_FETCH, "b1:m3")]


# Message faults -------------------------------------------------------------------------------


def test_duplicates_are_delivered_once_and_a_transport_that_delivers_copies_diverges():
    options = SimOptions(seed=3, duration_ms=8000, nemesis=("duplicate",),
                         fault_interval_ms=(500, 1500))
    result = simulate(ClusterConfig(partitions=3), options)
    summary = result.summary
    assert summary["message_faults"] == 4
    assert summary["duplicated_messages"] == summary["duplicates_discarded"] == 527
    assert replayed(result).verdict == "accepted"

    class Forgetful(set):
        def add(self, item) -> None:
            pass  # BUG: the transport forgets what it delivered

    class CopiesDelivered(Simulation):
        def __init__(self, *args):
            super().__init__(*args)
            self.delivered = Forgetful()

    replay = replayed(CopiesDelivered(ClusterConfig(partitions=3), options).run())
    assert replay.verdict == "divergence"
    assert "which an event of this run received" in format_result(replay)


def test_message_faults_with_crashes_pauses_and_partitions_replay_clean_and_lose_nothing():
    # The safe configuration: acks=all, min ISR 2, clean elections.
    config = ClusterConfig(partitions=3)
    nemesis = (*MESSAGE_FAULTS, "crash", "partition", "pause")
    outcomes = [run_one(config, SimOptions(seed=seed, duration_ms=15_000, nemesis=nemesis),
                        None, "none", traces=True) for seed in range(1, 5)]
    summary = CampaignResult(outcomes, 0.0, config).summary()
    assert [o.verdict for o in outcomes] == ["accepted"] * 4
    assert summary["failed_runs"] == [] and summary["liveness_failed_runs"] == []
    assert summary["acked_writes_lost"] == 0 and set(summary["anomalies"].values()) == {0}
    assert summary["acked_writes"] > 1000
    kinds = {json.loads(line)["f"] for o in outcomes for path, text in o.traces.items()
             if path.endswith("nemesis.ndjson") for line in text.splitlines()
             if '"kind":"nemesis"' in line}
    assert set(MESSAGE_FAULTS) <= kinds
