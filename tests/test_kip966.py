"""KIP-966 in the reference broker: B8 found by replaying runs, absent with ELR, ELR bookkeeping
checked by replay, and the election policies' numbers computed from real runs.

The spec side (B8 found by the explorer, the invariants shown failing) is in
tests/test_rediscovery.py, tests/test_invariants.py and the transcripts elr_election.txt and
b8_last_replica_standing.txt.
"""

from __future__ import annotations

import pytest

from impl.config import ClusterConfig
from impl.protocol import meta
from impl.sim import SimOptions, simulate
from isrlab.cli import main
from model_check.conformance.campaign import run_campaign
from model_check.conformance.policies import POLICIES, policy_of, timeline
from model_check.conformance.replay import format_result, load_texts, replay_run

ELR = ClusterConfig(eligible_leader_replicas_enable=True)
# One isr-kill in 30 s: followers cut off one by one, then the lone ISR member loses power.
ISR_KILL = SimOptions(seed=5, duration_ms=30_000, nemesis=("isr-kill",))


def replayed(config: ClusterConfig, options: SimOptions):
    sim = simulate(config, options)
    return sim, replay_run(load_texts(sim.traces, sim.run_json()))


def kip966_violations(result) -> list[str]:
    return [name for name, _ in result.invariant_violations
            if name in ("AckedWritesDurableKip966", "LeaderCandidatesComplete")]


def lost_writes(sim) -> set[int]:
    import json

    acked = {json.loads(line)["value"] for line in sim.traces["producer"].splitlines()
             if '"type":"ok"' in line}
    final = {v for _, v in sim.final_logs[0]}
    return acked - final


def test_isr_kill_loses_acknowledged_writes_without_elr_and_replay_names_kip966():
    sim, result = replayed(ClusterConfig(), ISR_KILL)
    assert result.verdict == "accepted"
    assert lost_writes(sim), "the last replica standing came back empty and led"
    assert "AckedWritesDurableKip966" in kip966_violations(result)
    # The pre-KIP-966 guarantee excuses every one of them.
    assert lost_writes(sim) <= set(result.excused_values)


def test_isr_kill_loses_nothing_with_elr():
    sim, result = replayed(ELR, ISR_KILL)
    assert result.verdict == "accepted"
    assert lost_writes(sim) == set()
    assert kip966_violations(result) == []
    elections = [line for line in sim.traces["meta"].splitlines() if "ELECTED_ELR" in line
                 or '"elr":[' in line]
    assert elections, "the ELR was used"


def test_replay_checks_the_brokers_elr_bookkeeping(monkeypatch):
    # A mutant metadata store that forgets to drop a broker from the ELR when it comes back
    # from an unclean shutdown (every replica loses power; they return one by one): replay
    # sees the store's ELR differ from the spec's.
    original = meta.MetaCore._elr_change

    def keeps_unclean(self, p, isr, elect, unclean_shutdown=None):
        return original(self, p, isr, elect, None)

    options = SimOptions(seed=5, duration_ms=30_000, nemesis=("isr-kill-all",))
    assert replayed(ELR, options)[1].verdict == "accepted"
    monkeypatch.setattr(meta.MetaCore, "_elr_change", keeps_unclean)
    _, result = replayed(ELR, options)
    assert result.verdict == "divergence"
    report = format_result(result)
    assert "metadata differs" in report and ".elr" in report


def test_policy_of_names_each_policy():
    for name, changes in POLICIES.items():
        assert policy_of(ClusterConfig().replace(**changes)) == name


def test_timeline_measures_offline_and_short_isr_time_from_the_store_trace():
    sim = simulate(ClusterConfig(), ISR_KILL)
    import json

    events = [json.loads(line) for line in sim.traces["meta"].splitlines()
              if '"kind":"event"' in line]
    line = timeline(events, 1, 2, ISR_KILL.duration_ms, 3)
    # Recomputed by hand from the same lines: the intervals with leader -1 / ISR below 2.
    offline = short = 0
    leader, isr, since_leader, since_isr = 0, 3, 0, 0
    for e in events:
        for ps in (e.get("state") or {}).get("partitions") or ():
            if (ps["leader"] < 0) != (leader < 0):
                if leader < 0:
                    offline += e["time_ms"] - since_leader
                since_leader, leader = e["time_ms"], ps["leader"]
            if (len(ps["isr"]) < 2) != (isr < 2):
                if isr < 2:
                    short += e["time_ms"] - since_isr
                since_isr, isr = e["time_ms"], len(ps["isr"])
    offline += ISR_KILL.duration_ms - since_leader if leader < 0 else 0
    short += ISR_KILL.duration_ms - since_isr if isr < 2 else 0
    assert (line.no_leader_ms, line.under_min_isr_ms) == (offline, short)
    assert line.no_leader_ms > 0 and line.under_min_isr_ms > line.no_leader_ms
    assert line.elections >= 1


def test_a_killed_leader_is_offline_until_a_new_leader_is_elected():
    """The store still names a crashed leader until its session times out: that time is
    offline too (no live broker leads), as long as the election latency."""
    import json

    options = SimOptions(seed=3, duration_ms=12_000, faults=((3000, "crash", "b0", 8000),))
    config = ClusterConfig(partitions=3)
    sim = simulate(config, options)
    events = [json.loads(line) for line in sim.traces["meta"].splitlines()
              if '"kind":"event"' in line]
    nemesis = [json.loads(line) for line in sim.traces["nemesis"].splitlines()
               if '"kind":"nemesis"' in line]
    # Election latency by hand: for each partition b0 led at the crash, to its next leader.
    leaders = {p: config.assignment(p)[0] for p in range(3)}  # Kafka's first leaders
    first, latency = dict(leaders), 0
    for e in events:
        for ps in (e.get("state") or {}).get("partitions") or ():
            if e["time_ms"] <= 3000:
                leaders[ps["partition"]] = ps["leader"]
            elif leaders.get(ps["partition"]) == 0 and ps["leader"] not in (0, -1):
                latency += e["time_ms"] - 3000
                leaders[ps["partition"]] = ps["leader"]
    assert latency > 0 and 0 in first.values()
    line = timeline(events, 3, 2, options.duration_ms, 3, nemesis, first)
    assert line.no_leader_ms == 0  # the store always named a leader
    assert line.offline_ms == latency


def test_policy_campaigns_answer_the_question():
    options = SimOptions(seed=1, duration_ms=20_000, nemesis=("isr-kill",))
    rows = {}
    for name in ("clean", "elr"):
        config = ClusterConfig().replace(**POLICIES[name])
        rows[name] = run_campaign(config, options, 6, None, keep="none", workers=1).summary()
    assert rows["clean"]["divergences"] == rows["elr"]["divergences"] == 0
    assert rows["clean"]["acked_writes_lost"] > 0 and rows["clean"]["kip966_violations"] > 0
    assert rows["clean"]["offline_ms"] > 0
    assert rows["elr"]["acked_writes_lost"] == 0 and rows["elr"]["kip966_violations"] == 0
    assert rows["elr"]["failed_runs"] == []
    assert rows["elr"]["offline_ms"] < rows["clean"]["offline_ms"]


def test_cli_flags_reach_the_run_and_its_reproduce_line(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["cluster", "sim", "--elr", "--no-last-known-leader", "--duration", "2s",
                 "--trace-out", str(out)]) == 0
    import json

    header = json.loads((out / "b0.ndjson").read_text().splitlines()[0])
    assert header["config"]["eligible_leader_replicas_enable"] is True
    assert header["config"]["last_known_leader_election_enable"] is False
    run = json.loads((out / "run.json").read_text())
    assert "--elr --no-last-known-leader" in run["command"]


@pytest.mark.parametrize("argv, message", [
    (["cluster", "tcp", "--nemesis", "isr-kill", "--duration", "1s", "--trace-out", "unused"],
     "--nemesis: isr-kill runs in the simulator only"),
    (["prove", "--bmc", "2", "--invariant", "SingleControllerPerEpoch"],
     "--invariant: SingleControllerPerEpoch is not in the symbolic encoding yet"),
])
def test_what_is_not_covered_yet_is_refused_in_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
