"""The TCP cluster's message faults and liveness phase: a run with drop, duplicate and delay
replays clean and recovers after the faults heal; a broker without the fetch timeout does not
(the run fails, naming the partition); a broker cut off while its partition moved is handed
the store's LeaderAndIsr when the cut heals.

The mutants run in the node processes: a `sitecustomize.py` on the nodes' PYTHONPATH patches
the broker there, as monkeypatch does in the simulator's tests (tests/test_liveness.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from impl.config import ClusterConfig
from impl.tcp import TcpOptions, run_cluster
from isrlab.cli import main
from model_check.conformance.history import check_history, load_history
from model_check.conformance.replay import format_result, read_run_json, replay_paths

pytestmark = pytest.mark.serial  # real processes with timeouts: not beside another worker

NO_FETCH_TIMEOUT = """
from impl.config import ClusterConfig
ClusterConfig.replica_fetch_timeout_ms = property(lambda self: None)
"""

# The store's LeaderAndIsr to a cut-off broker lost, as before it was held. The node runs as
# `python -m impl.tcp.node`, so its Node is __main__'s, patched once main() calls trio.run.
NO_HOLD = """
import sys
import trio
_run = trio.run
def run(*args, **kwargs):
    Node = sys.modules["__main__"].Node
    control = Node.control
    def lose_held(self, frame):
        if frame.get("ctl") == "unblock":
            for _, mid, message in self.held:
                self.log_drop("meta", self.name, mid, message, "partition")
            self.held = []
        return control(self, frame)
    Node.control = lose_held
    return _run(*args, **kwargs)
trio.run = run
"""


def mutate(monkeypatch, tmp_path: Path, code: str) -> None:
    """Run every node process of the test with `code` at start-up."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(code)
    monkeypatch.setenv("PYTHONPATH", str(site))


def events(path: Path) -> list[dict]:
    return [b for b in map(json.loads, path.read_text().splitlines()) if b["kind"] == "event"]


def committed(run_dir: Path) -> dict[int, list[int]]:
    final_logs = read_run_json(run_dir / "run.json")["final_logs"]
    return {int(p): [v for _, v in log] for p, log in final_logs.items()}


# Message faults --------------------------------------------------------------------------------

MESSAGE_FAULTS = ((800, "drop", "b1", 1_500), (2_500, "duplicate", "b0", 1_000),
                  (3_700, "delay", "b2", 800))


def test_drop_duplicate_and_delay_replay_clean_and_the_cluster_recovers(tmp_path):
    config = ClusterConfig(partitions=3)
    options = TcpOptions(seed=11, duration_ms=5_000, faults=MESSAGE_FAULTS)
    summary = run_cluster(config, options, tmp_path)
    print(f"seed {options.seed}: {summary}")
    assert summary["message_faults"] == 3
    drops = [e for e in events(tmp_path / "b1.ndjson")
             if e["action"] == "NetworkDrop" and e["detail"]["why"] == "nemesis"]
    assert drops and {d["detail"]["type"] for d in drops} <= {"Fetch", "FetchResponse",
                                                              "OffsetsForLeaderEpoch"}
    assert summary["duplicates_discarded"] > 0
    nemesis = [json.loads(line) for line in (tmp_path / "nemesis.ndjson").open()][1:]
    assert [(n["f"], n["target"]) for n in nemesis] == [
        ("drop", "b1"), ("heal", "b1"), ("duplicate", "b0"), ("heal", "b0"),
        ("delay", "b2"), ("heal", "b2")]
    assert "liveness" not in summary and summary["live_after_ms"] <= 10_000
    assert summary["healed_ms"] >= options.duration_ms
    result = replay_paths([tmp_path])
    assert result.verdict == "accepted", format_result(result)
    history = check_history(load_history([tmp_path]), committed(tmp_path))
    assert history.clean, history.to_json()
    run = json.loads((tmp_path / "run.json").read_text())
    assert "final_logs" not in run and (tmp_path / run["final_logs_file"]["file"]).is_file()


# Liveness --------------------------------------------------------------------------------------


def test_without_the_fetch_timeout_dropped_fetches_fail_the_liveness_phase(
        monkeypatch, tmp_path, capsys):
    mutate(monkeypatch, tmp_path, NO_FETCH_TIMEOUT)
    out = tmp_path / "run"
    code = main(["cluster", "tcp", "--seed", "12", "--partitions", "1", "--duration", "4s",
                 "--liveness", "3s", "--fault", "500:drop:b1:3000", "--trace-out", str(out)])
    err = capsys.readouterr().err
    assert code == 1, err
    summary = read_run_json(out / "run.json")["summary"]
    assert "p0: ISR [0, 2] of [0, 1, 2] 3000 ms after the faults healed" in summary["liveness"]
    assert "isrlab cluster: FAILED: not recovered: p0: ISR [0, 2] of [0, 1, 2]" in err


def test_with_the_fetch_timeout_the_same_faults_recover(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["cluster", "tcp", "--seed", "12", "--partitions", "1", "--duration", "4s",
                 "--liveness", "3s", "--fault", "500:drop:b1:3000", "--trace-out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert "recovered" in capsys.readouterr().out


# A LeaderAndIsr to a cut-off broker --------------------------------------------------------------

# b0 crashes, so b1 leads p0; b0 comes back; while b1 is cut off (shorter than its session)
# the preferred-leader check hands p0 back to b0, and the LeaderAndIsr to b1 cannot travel.
MOVED_WHILE_CUT = ((300, "crash", "b0", 300), (4_400, "partition", "b1", 1_200))
MOVED_CONFIG = ClusterConfig(session_timeout_ms=4_000)


def moved_while_cut(tmp_path: Path) -> tuple[dict, list[dict], int]:
    options = TcpOptions(seed=13, duration_ms=6_500, liveness_ms=4_000, faults=MOVED_WHILE_CUT)
    summary = run_cluster(MOVED_CONFIG, options, tmp_path)
    heal = next(json.loads(line) for line in (tmp_path / "nemesis.ndjson").open()
                if '"f":"heal"' in line)
    b1 = [e for e in events(tmp_path / "b1.ndjson") if e["time_ms"] >= heal["time_ms"]]
    return summary, b1, heal["time_ms"]


def test_a_broker_cut_off_while_its_partition_moved_learns_it_when_the_cut_heals(tmp_path):
    summary, b1, healed = moved_while_cut(tmp_path)
    meta = events(tmp_path / "meta.ndjson")
    preferred = [e for e in meta if e["action"] == "ControllerElectPreferredLeader"]
    assert preferred and 4_400 < preferred[0]["time_ms"] < healed, "no move during the cut"
    assert not any(e["action"] == "BrokerRegister" for e in meta), "b1's session expired"
    assert b1[0]["action"] == "BecomeFollower" and b1[0]["state"]["leader"] == 0
    assert "liveness" not in summary, summary["liveness"]
    result = replay_paths([tmp_path])
    assert result.verdict == "accepted", format_result(result)


def test_a_lost_leader_and_isr_leaves_the_broker_behind(monkeypatch, tmp_path):
    mutate(monkeypatch, tmp_path, NO_HOLD)
    summary, b1, _ = moved_while_cut(tmp_path / "run")
    assert not any(e["action"] == "BecomeFollower" for e in b1)
    assert "p0: ISR [0, 2] of [0, 1, 2]" in summary["liveness"]


# A transport that hands the core both copies of a duplicated message.
NO_DEDUPE = """
import sys
import trio
_run = trio.run
def run(*args, **kwargs):
    Node = sys.modules["__main__"].Node
    receive = Node._receive
    Node._receive = lambda self, peer, frame, errors, seen: receive(self, peer, frame, errors, {})
    return _run(*args, **kwargs)
trio.run = run
"""


def test_copies_handed_to_the_core_diverge_from_the_spec(monkeypatch, tmp_path):
    mutate(monkeypatch, tmp_path, NO_DEDUPE)
    run_dir = tmp_path / "run"
    options = TcpOptions(seed=14, duration_ms=2_500, faults=((500, "duplicate", "b0", 1_500),))
    run_cluster(ClusterConfig(), options, run_dir)  # b0's followers (node processes) mutated
    result = replay_paths([run_dir])
    print(format_result(result))
    assert result.verdict != "accepted"
