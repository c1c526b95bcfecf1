"""Coverage both ways (model_check/conformance/coverage.py, `isrlab coverage`): the spec graph's states and
actions that directed runs and random campaigns make the reference broker reach."""

from __future__ import annotations

import json

import pytest

from impl.config import ClusterConfig
from isrlab.cli import main
from model_check.conformance import coverage
from model_check.conformance.drive import Driver
from spec import VARIANTS, Config, initial_state
from spec import actions as S
from spec.actions import step

pytestmark = pytest.mark.xdist_group("test_coverage")  # one worker builds its shared fixtures

CLUSTER = ClusterConfig(brokers=2, variant="current")
BOUNDS = dict(max_records=1, max_leader_epochs=2, max_crashes=1, max_session_expiries=1,
              max_ticks=0, max_message_drops=0)


@pytest.fixture(scope="module")
def graph2():
    return coverage.explore(coverage.graph_config(CLUSTER, **BOUNDS), 2)


def test_the_covering_paths_pass_through_every_state_of_the_graph():
    graph = coverage.explore(coverage.graph_config(CLUSTER, **BOUNDS), 3)
    assert (len(graph.depth_of), len(graph.covering_paths())) == (84, 56)
    seen = set()
    for leaf, path in graph.covering_paths():
        state = initial_state(graph.config)
        seen.add(state)
        for action in path:
            state = step(graph.config, state, action)
            seen.add(state)
        assert state == leaf
    assert seen == set(graph.depth_of)


def test_directed_runs_reach_the_states_of_the_paths_they_follow(graph2):
    # 8 of the 21 covering paths, drawn with seed 3 (all 21 reach 19 of the 28 states).
    body = coverage.directed(CLUSTER, graph2, max_paths=8, seed=3).to_json()
    assert (body["runs"], body["graph_states"]) == (8, 28)
    assert body["stuck"] == {}
    assert body["actions_not_reached"] == ["BrokerRegister", "LeaderAppend", "LeaderHandleFetch"]
    assert body["states_reached"] == 9
    # Of the paths followed to the end, 3 end elsewhere: the broker's followers fetch at once
    # when their timer fires, a step the spec's path does not take there.
    assert body["extra"] == {"FollowerSendFetch": 3}
    assert sum(body["unreached_states_by_action"].values()) == 28 - 9


def test_a_driver_that_cannot_crash_a_broker_is_reported(graph2, monkeypatch):
    original = Driver.inputs
    monkeypatch.setattr(Driver, "inputs",
                        lambda self: [i for i in original(self) if i.kind != "crash"])
    paths = [lp for lp in graph2.covering_paths() if lp[1][0].name == "BrokerCrash"][:2]
    monkeypatch.setattr(coverage.Graph, "covering_paths", lambda self: paths)
    cov = coverage.directed(CLUSTER, graph2)
    body = cov.to_json()
    assert body["runs"] == 2 and body["stuck"] == {"BrokerCrash": 2}
    assert "BrokerCrash" in body["actions_not_reached"]
    assert cov.states and all(s.crashes == 0 for s in cov.states)


def test_campaign_coverage_counts_states_actions_and_features(graph2):
    body = coverage.campaign(CLUSTER, graph2, 1, 1, 3000, ("crash", "partition", "pause")
                             ).to_json()
    assert body["divergences"] == 0 and body["runs"] == 1
    assert body["states_reached"] == 3
    # The run's liveness phase (every fault healed at its end) reaches a failover too.
    assert body["actions_not_reached"] == ["BrokerRegister"]
    assert body["features"]["acknowledged write"] == 1


def test_the_command_prints_both_sides(capsys):
    assert main(["coverage", "--depth", "1", "--runs", "1", "--duration", "1s", "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert set(body) == {"graph_states", "covering_paths", "directed", "campaign"}
    assert body["directed"]["runs"] == body["covering_paths"]


def test_a_bad_depth_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["coverage", "--depth", "0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("isrlab coverage: ") and "\n" not in err


def test_the_features_name_what_a_counterexample_passes_through(capsys):
    # B10's counterexample: the leader's session expires while it runs (two live leaders
    # once the new one applies the election), and it acknowledges a write.
    config = Config(variant=VARIANTS["current"], brokers=2, acks="1", max_records=1,
                    max_crashes=1)
    states = [initial_state(config)]
    assert main(["check", "--variant", "current", "--acks", "1", "--brokers", "2",
                 "--records", "1", "--epochs", "2", "--crashes", "1", "--invariant",
                 "AckedWritesDurable", "--json"]) == 0
    trace = json.loads(capsys.readouterr().out)["violation"]["trace"][1:]
    for s in trace:
        states.append(step(config, states[-1], getattr(S, s["action"])(**s["args"])))
    reached = {name for name, test in coverage.FEATURES.items() if any(map(test, states))}
    assert not any(test(states[0]) for test in coverage.FEATURES.values())
    assert reached == {"acknowledged write", "two live brokers lead one partition (B10's zombie)",
                       "ISR of one"}
