"""Coverage both ways (model_check/coverage.py, `isrlab coverage`): the spec graph's states and
actions that directed runs and random campaigns make the reference broker reach."""

from __future__ import annotations

import json

import pytest

from impl.config import ClusterConfig
from isrlab.cli import main
from model_check import coverage
from model_check.drive import Driver
from spec import initial_state
from spec.actions import step

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
    for path in graph.covering_paths():
        state = initial_state(graph.config)
        seen.add(state)
        for action in path:
            state = step(graph.config, state, action)
            seen.add(state)
    assert seen == set(graph.depth_of)


def test_directed_runs_reach_the_states_of_the_paths_they_follow(graph2):
    # 8 of the 21 covering paths, drawn with seed 3 (all 21 reach 19 of the 28 states).
    body = coverage.directed(CLUSTER, graph2, max_paths=8, seed=3).to_json()
    assert (body["runs"], body["graph_states"]) == (8, 28)
    assert body["stuck"] == {}
    assert body["actions_not_reached"] == ["BecomeLeader", "LeaderAppend", "LeaderHandleFetch"]
    assert body["states_reached"] == 10
    # Of the paths followed to the end, 4 end elsewhere: the broker's followers fetch at once
    # when their timer fires, a step the spec's path does not take there.
    assert body["extra"] == {"FollowerSendFetch": 4}
    assert sum(body["unreached_states_by_action"].values()) == 28 - 10


def test_a_driver_that_cannot_crash_a_broker_is_reported(graph2, monkeypatch):
    original = Driver.inputs
    monkeypatch.setattr(Driver, "inputs",
                        lambda self: [i for i in original(self) if i.kind != "crash"])
    crashing = [i for i, p in enumerate(graph2.covering_paths())
                 if p[0].name == "BrokerCrash"][:2]
    graph2 = coverage.Graph(graph2.config, graph2.depth, graph2.depth_of, graph2.parent,
                            graph2.actions)
    paths = [graph2.covering_paths()[i] for i in crashing]
    monkeypatch.setattr(graph2, "covering_paths", lambda: paths)
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
    assert body["actions_not_reached"] == [
        "BecomeLeader", "BrokerRegister", "ControllerHandleBrokerFailure"]
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
