"""Apache Kafka's own jars as a second system under test (apache_kafka/): the install's one
pin, the config the nodes get, the CLI's refusals, the network namespaces a partition needs
(made, cut, healed, removed, swept after a killed run), and real 3-broker KRaft clusters: one
takes 1,000 acks=all writes through a SIGKILL of the leader and loses none; with the leader
partitioned away, acks=1 writes are lost, as Kafka documents, and acks=all ones are not."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from apache_kafka.cluster import KafkaCluster, KafkaClusterError, KafkaSettings
from apache_kafka.install import KAFKA_VERSION, POM, InstallError, cache_dir, classpath
from apache_kafka.netns import Network, namespaces, root_links, sweep
from model_check.conformance.history import check_history, load_history
from model_check.conformance.kafka_runs import kafka_batch, kafka_run, read_back_logs

ROOT = Path(__file__).resolve().parents[1]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root "
                                "(CAP_NET_ADMIN and CAP_SYS_ADMIN)")


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
    (["--nemesis", "slow"], "slow is not run on Apache Kafka"),
    (["--bug", "early-ack"], "seeded bugs are the reference broker's"),
    (["--fault", "100:slow:b0:100"],
     "KIND one of crash, pause, partition, controller-kill, isr-kill-all"),
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


@needs_root
def test_a_runs_namespaces_are_made_and_every_one_removed():
    net = Network(3)
    try:
        net.create()
        assert set(namespaces()) >= {*net.names, net.hub}
        assert net.link in root_links()  # the run's one link in the root namespace
        assert [net.address(i) for i in range(3)] == [str(net.subnet[i]) for i in (1, 2, 3)]
        assert len(net.link) <= 15 and net.names[0] == f"{net.link}-b0"
    finally:
        net.destroy()
    assert net.leftovers() == []
    assert not [n for n in namespaces() + root_links() if n.startswith(net.link)]
    net.destroy()  # again: nothing to do, nothing raised


@needs_root
def test_blackhole_routes_cut_one_node_off_both_ways_and_heal():
    net = Network(3)
    try:
        net.create()
        servers = []
        for i in range(3):
            server = net.socket(i)
            server.bind((net.address(i), 0))
            server.listen(8)
            servers.append(server)

        def reaches(i: int | None, j: int) -> bool:
            """Whether a TCP connect from node i (None: the root namespace) to node j's
            listener succeeds."""
            client = socket.socket() if i is None else net.socket(i)
            client.settimeout(1)
            try:
                client.connect(servers[j].getsockname())
                return True
            except OSError:
                return False
            finally:
                client.close()

        assert reaches(1, 0) and reaches(0, 2) and reaches(None, 0)
        net.cut(0)
        assert net.cut_off == {0}
        assert not reaches(1, 0) and not reaches(2, 0)  # the peers cannot reach it
        assert not reaches(0, 1) and not reaches(0, 2)  # nor it them
        assert reaches(None, 0)  # clients still can
        assert reaches(1, 2) and reaches(2, 1)  # the others still reach each other
        net.heal(0)
        assert reaches(1, 0) and reaches(0, 2) and reaches(None, 0)
        for server in servers:
            server.close()
    finally:
        net.destroy()
    assert net.leftovers() == []


@needs_root
def test_a_killed_runs_namespaces_are_swept_by_the_next_run():
    # A run SIGKILLed after making its namespaces leaves them; its pid is gone, so a sweep
    # (which every create() starts with) removes them, and a live run's are kept.
    code = ("import os, signal; from apache_kafka.netns import Network; n = Network(2); "
            "n.create(); print(n.link, flush=True); os.kill(os.getpid(), signal.SIGKILL)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == -signal.SIGKILL, done.stderr
    dead = done.stdout.strip()
    assert dead in root_links() and f"{dead}-b1" in namespaces()
    live = Network(1)
    try:
        live.create()
        assert not [n for n in namespaces() + root_links() if n.startswith(dead)]
        assert sweep() == [] and live.names[0] in namespaces()
    finally:
        live.destroy()
    assert live.leftovers() == []


@needs_root
def test_in_namespaces_every_listener_and_voter_is_on_the_nodes_own_address(tmp_path):
    with KafkaCluster(KafkaSettings(brokers=3, netns=True), tmp_path) as cluster:
        cluster.open_network()
        hosts = [cluster.network.address(i) for i in range(3)]
        props = cluster.properties(cluster.nodes[1])
        node = cluster.nodes[1]
        assert props["listeners"] == (f"PLAINTEXT://{hosts[1]}:{node.port},"
                                      f"CONTROLLER://{hosts[1]}:{node.controller_port}")
        assert props["advertised.listeners"] == f"PLAINTEXT://{hosts[1]}:{node.port}"
        assert props["controller.quorum.voters"] == ",".join(
            f"{n.id}@{hosts[n.id]}:{n.controller_port}" for n in cluster.nodes)
        assert cluster.bootstrap_servers == ",".join(
            f"{hosts[n.id]}:{n.port}" for n in cluster.nodes)
        assert "127.0.0.1" not in json.dumps(props)
        names = cluster.network.names
    assert not set(names) & set(namespaces())


@needs_root
@pytest.mark.serial
def test_a_failed_start_in_namespaces_removes_them(tmp_path):
    # Storage formats, then every broker JVM refuses a 1 MB heap at once: the start fails
    # with the node named, and the namespaces made for it are gone.
    cluster = KafkaCluster(KafkaSettings(brokers=3, netns=True, heap_mb=1), tmp_path)
    with pytest.raises(KafkaClusterError, match="kafka-0 exited with 1 while starting"):
        with cluster:
            cluster.start(timeout_s=60)
    assert cluster.network.leftovers() == []
    assert not set(cluster.network.names) & set(namespaces())
    assert _kafka_jvms(tmp_path) == []


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare (util-linux)")
def test_a_partition_without_the_rights_to_make_namespaces_is_one_line(tmp_path):
    # In a user namespace of its own the CLI has no capability over the machine's network,
    # as for a user who is not root: the partition is refused before any JVM starts.
    tmp_path.chmod(0o777)
    for argv in (["--nemesis", "partition"], ["--fault", "3000:partition:leader:8000"]):
        out = tmp_path / argv[0].strip("-")
        done = subprocess.run(["unshare", "--user", "--", sys.executable, "-m", "isrlab.cli",
                               "cluster", "kafka", "--out", str(out), *argv],
                              capture_output=True, text=True, cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        if "unshare failed" in done.stderr:
            pytest.skip(f"no user namespaces here: {done.stderr.strip()}")
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "network namespaces (needed for the partition fault" in done.stderr
        assert "Traceback" not in done.stderr
        assert not list(out.glob("kafka-*/pid"))  # no JVM was started


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
    # The read-back is the final log only when it reached the end offset the client learnt:
    # cut short (a leader offline while reading, say), what it did not reach is unverified,
    # not lost.
    end = [x for x in lines if x.get("f") == "end"]
    assert [(x["partition"], x["offset"]) for x in end] == [(0, len(acked))]
    short = [dict(x, records=[r for r in x["records"] if r[0] < 100])
             if x.get("f") == "read" else x for x in lines]
    short = [x for x in short if x.get("f") != "read" or x["records"]]
    assert read_back_logs(short, "kafka-python", 1) == {}
    cut = check_history(short, read_back_logs(short, "kafka-python", 1))
    assert cut.counts["lost-write"] == 0 and cut.unverified["all"] == len(acked) - 100
    assert read_back_logs(lines, "kafka-python", 1)[0] == [x["value"] for x in sorted(
        acked, key=lambda x: x["offset"])]
    assert _kafka_jvms(tmp_path) == []
    # No broker traces: replay says so in one line instead of judging an empty run.
    replay = subprocess.run([sys.executable, "-m", "isrlab.cli", "replay", str(tmp_path / "run")],
                            capture_output=True, text=True, env={**os.environ,
                                                                 "PYTHONPATH": str(ROOT)})
    assert replay.returncode == 2 and "a run of Apache Kafka has no broker traces" in \
        replay.stderr and replay.stderr.count("\n") == 1


def _partitioned_leader_run(run_dir: Path, acks: str):
    # Partition 0's leader is cut off from the other two nodes 3 s into the run and healed 8 s
    # later while kafka-python sends acks=`acks` writes spread over 14 s. The other nodes fence
    # the cut-off one after a broker session (4 s) and elect a new leader; the cut-off leader
    # cannot reach the controller to shrink its ISR and keeps answering the client until the
    # partition heals, then truncates to the new leader's log.
    run = kafka_run(run_dir, ("kafka-python",), count=700, acks=acks,
                    cluster_args=("--brokers", "3", "--partitions", "1",
                                  "--fault", "3000:partition:leader:8000"),
                    until_ms=14_000, target="kafka")
    nemesis = [json.loads(x) for x in (run_dir / "nemesis.ndjson").open()][1:]
    assert [n["f"] for n in nemesis] == ["partition", "heal"]
    cut = nemesis[0]["target"]
    lines = [json.loads(x) for x in (run_dir / "kafka-python.ndjson").open()]
    during = [x for x in lines if x.get("type") == "invoke"
              and nemesis[0]["time_ms"] < x["time_ms"] < nemesis[1]["time_ms"]]
    assert len(during) > 100, "the writes did not overlap the partition"
    assert nemesis[0]["groups"] == [[cut], [f"b{i}" for i in range(3) if f"b{i}" != cut]]
    assert run.run_json["partitions"] == 1
    names = run.run_json["network"]["namespaces"]
    assert len(names) == 3 and not set(names) & set(namespaces())
    assert run.run_json["network"]["root_link"] not in root_links()
    assert _kafka_jvms(run_dir) == []
    return run


@needs_root
@pytest.mark.serial
@pytest.mark.slow
def test_real_kafka_loses_acks_1_writes_to_a_partitioned_leader(tmp_path):
    run = _partitioned_leader_run(tmp_path / "run", "1")
    assert run.history.acked["1"] > 0
    assert run.history.lost["1"] > 0, run.history.counts  # Kafka's documented acks=1 loss
    assert run.history.counts["lost-write"] == run.history.lost["1"]
    # The read-back is the final log: a write acknowledged past its end is lost, not unknown.
    assert run.history.unverified["1"] == 0


@needs_root
@pytest.mark.serial
@pytest.mark.slow
def test_real_kafka_keeps_every_acks_all_write_through_a_partitioned_leader(tmp_path):
    run = _partitioned_leader_run(tmp_path / "run", "all")
    assert run.history.acked["all"] > 0
    assert run.history.unverified["all"] == 0
    assert run.history.lost == {"1": 0, "all": 0}
    assert run.history.counts["lost-write"] == 0


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


@pytest.mark.serial
def test_a_batch_of_runs_shares_one_cluster_each_on_its_own_topic(tmp_path):
    # Two runs on one cluster; b0 is SIGKILLed 1 s into the batch (during the first run) and
    # back 2 s later: each run gets its own topic, history and window of the nemesis.
    runs = kafka_batch(tmp_path, [5, 6], ("kafka-python",), count=200, acks="all",
                       cluster_args=("--brokers", "3", "--partitions", "1",
                                     "--fault", "1000:crash:b0:2000"), until_ms=4_000)
    assert [type(r).__name__ for r in runs] == ["KafkaRun", "KafkaRun"]
    topics = [json.loads((tmp_path / f"run-{s}" / "kafka.json").read_text())["topic"]
              for s in (5, 6)]
    assert topics == ["isrlab-0", "isrlab-1"]
    for run in runs:
        assert run.history.acked["all"] == 200 and run.history.unverified["all"] == 0
        assert run.history.counts["lost-write"] == 0
    assert runs[0].run_json["crashes"] == 1 and runs[1].run_json["crashes"] == 0
    window = [json.loads(x) for x in (tmp_path / "run-5" / "nemesis.ndjson").open()]
    assert window[0]["run"] == "seed-5" and [w["f"] for w in window[1:]] == ["crash", "restart"]
    assert _kafka_jvms(tmp_path) == []
