"""Apache Kafka's own jars as a second system under test (apache_kafka/): the install's one
pin, the config the nodes get, the CLI's refusals, and a real 3-broker KRaft cluster that
takes 1,000 acks=all writes through a SIGKILL of the leader and loses none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from apache_kafka.cluster import KafkaCluster, KafkaSettings
from apache_kafka.install import KAFKA_VERSION, POM, InstallError, cache_dir, classpath
from model_check.history import check_history, load_history
from model_check.kafka_runs import kafka_run

ROOT = Path(__file__).resolve().parents[1]


def test_the_pom_pins_one_kafka_release_of_at_least_4_1():
    # KIP-966's eligible leader replicas can be switched on from 4.1.
    major, minor = (int(x) for x in KAFKA_VERSION.split(".")[:2])
    assert (major, minor) >= (4, 1)
    assert POM.read_text().count(KAFKA_VERSION) == 1  # named once, as a property
    assert "<version>${kafka.version}</version>" in POM.read_text()
    ignored = subprocess.run(["git", "check-ignore", "-q", str(cache_dir() / "lib" / "x.jar")],
                             cwd=ROOT).returncode
    assert ignored == 0


def test_an_unfetched_release_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("ISRLAB_KAFKA_CACHE", str(tmp_path))
    with pytest.raises(InstallError, match="is not fetched .*apache_kafka.install"):
        classpath()
    done = subprocess.run([sys.executable, "-m", "isrlab.cli", "cluster", "kafka", "--out",
                           str(tmp_path / "run"), "--duration", "1s"], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ,
                                                        "ISRLAB_KAFKA_CACHE": str(tmp_path),
                                                        "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "is not fetched" in done.stderr


def test_isrlab_settings_reach_kafkas_own_config(tmp_path):
    settings = KafkaSettings(brokers=3, partitions=2, min_insync_replicas=1,
                             unclean_leader_election_enable=True,
                             log_flush_interval_messages=1, replica_lag_time_max_ms=5000)
    cluster = KafkaCluster(settings, tmp_path)
    props = cluster.properties(cluster.nodes[1])
    assert props["min.insync.replicas"] == "1"
    assert props["unclean.leader.election.enable"] == "true"
    assert props["log.flush.interval.messages"] == "1"
    assert props["replica.lag.time.max.ms"] == "5000"
    assert props["process.roles"] == "broker,controller" and props["node.id"] == "1"
    voters = props["controller.quorum.voters"].split(",")
    assert [v.split("@")[0] for v in voters] == ["0", "1", "2"]
    assert all("127.0.0.1:" in v for v in voters)
    assert props["listeners"].count("127.0.0.1:") == 2  # loopback only
    assert settings.assignment(1) == [1, 2, 0]  # the reference broker's placement
    assert "log.flush.interval.messages" not in KafkaCluster(
        KafkaSettings(), tmp_path / "b").properties(cluster.nodes[0])


@pytest.mark.parametrize("argv, said", [
    (["--nemesis", "partition"], "partition is not run on Apache Kafka"),
    (["--bug", "early-ack"], "seeded bugs are the reference broker's"),
    (["--fault", "100:slow:b0:100"], "KIND one of crash, pause, controller-kill, isr-kill-all"),
    (["--brokers", "3", "--fault", "100:crash:b5:100"], "no broker b5"),
])
def test_what_kafka_cannot_run_is_refused_in_one_line(tmp_path, argv, said):
    done = subprocess.run([sys.executable, "-m", "isrlab.cli", "cluster", "kafka", "--out",
                           str(tmp_path / "run"), *argv], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_kafka_faults_are_refused_by_the_reference_cluster(tmp_path):
    for argv in (["--nemesis", "controller-kill"], ["--fault", "100:crash:leader:100"]):
        done = subprocess.run([sys.executable, "-m", "isrlab.cli", "cluster", "tcp",
                               "--trace-out", str(tmp_path / "run"), *argv],
                              capture_output=True, text=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 2, done.stderr
        assert ("isrlab cluster kafka" in done.stderr or "KIND one of crash, partition, pause, "
                "slow" in done.stderr), done.stderr


@pytest.mark.serial
def test_real_kafka_keeps_every_acked_write_through_a_sigkill_of_the_leader(tmp_path):
    # Partition 0's leader is SIGKILLed 3 s into the run and restarted 5 s later while
    # kafka-python sends 1,000 acks=all writes spread over 10 s.
    run = kafka_run(tmp_path / "run", ("kafka-python",), count=1_000, acks="all",
                    cluster_args=("--brokers", "3", "--partitions", "1",
                                  "--fault", "3000:crash:leader:5000"),
                    until_ms=10_000, target="kafka")
    nemesis = [json.loads(x) for x in (tmp_path / "run" / "nemesis.ndjson").open()][1:]
    assert [n["f"] for n in nemesis] == ["crash", "restart"]
    crash_ms = nemesis[0]["time_ms"]
    lines = [json.loads(x) for x in (tmp_path / "run" / "kafka-python.ndjson").open()]
    acked = [x for x in lines if x.get("f") == "send" and x.get("type") == "ok"]
    invoked_after = [x for x in lines if x.get("type") == "invoke" and x["time_ms"] > crash_ms]
    assert invoked_after, "no write overlapped the crash"
    assert run.history.acked["all"] == len(acked) > 900
    assert run.history.unverified["all"] == 0  # every acknowledged write was read back
    assert run.history.lost == {"1": 0, "all": 0}
    assert run.history.counts["lost-write"] == 0
    assert run.run_json["crashes"] == 1
    # The checker is not vacuous on Kafka's history: one acknowledged record taken out of
    # what the consumer read back is a lost write, named by its value (one inside a read, so
    # that the read still covers its offset).
    path = tmp_path / "run" / "kafka-python.ndjson"
    reads = [x["records"] for x in lines if x.get("f") == "read" and x.get("type") == "ok"]
    middle = max(reads, key=len)[len(max(reads, key=len)) // 2]
    victim = next(x for x in acked if x["value"] == middle[1])
    doctored = []
    for line in path.read_text().splitlines():
        body = json.loads(line)
        if body.get("f") == "read" and body.get("type") == "ok":
            body["records"] = [r for r in body["records"] if r[1] != victim["value"]]
        doctored.append(json.dumps(body))
    path.write_text("\n".join(doctored) + "\n")
    forged = check_history(load_history([tmp_path / "run"]))
    lost = [a for a in forged.anomalies if a.kind == "lost-write"]
    assert [(a.values[0], a.offsets[0]) for a in lost] == [(victim["value"], victim["offset"])]
    assert _kafka_jvms(tmp_path) == []


def _kafka_jvms(run_dir: Path) -> list[int]:
    """Pids of JVMs whose command line names this run's directory (none may be left)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "kafka.Kafka" in text and str(run_dir) in text:
            found.append(int(cmdline.parent.name))
    return found
