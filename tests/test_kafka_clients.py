"""Real Kafka clients (kafka-python, confluent-kafka, aiokafka) against the TCP cluster: each
produces and reads back, the brokers' traces replay against the spec, and the clients'
histories are checked (model_check/conformance/kafka_runs.py)."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import sys
import time

import pytest

from impl.kafka.clients import CLIENTS
from model_check.conformance.kafka_runs import kafka_run
from model_check.conformance.replay import load_run, replay_run

# Real processes on real sockets with timeouts: run alone, not beside a second test worker
# (make test runs these after the parallel part).
pytestmark = pytest.mark.serial


def test_three_clients_produce_and_read_back_with_acks_all(tmp_path):
    run = kafka_run(tmp_path / "run", CLIENTS, count=200,
                    cluster_args=("--brokers", "3", "--partitions", "2"))
    assert [(t["client"], t["ok"], t["info"]) for t in run.told] == [
        (c, 200, 0) for c in CLIENTS]
    assert run.history.acked["all"] == 600
    assert run.history.lost == {"1": 0, "all": 0}
    assert run.history.unverified["all"] == 0  # every acknowledged write was read back
    assert run.history.counts["lost-write"] == 0
    assert run.replay.verdict == "accepted", run.replay.divergence
    assert "bootstrap.servers=127.0.0.1:" in run.cluster_output
    # A client's acknowledgement is checked against the spec: one offset moved is rejected.
    history = tmp_path / "run" / "confluent-kafka.ndjson"
    original = history.read_text()
    lines = original.splitlines()
    k = next(i for i, line in enumerate(lines) if '"type":"ok"' in line and '"f":"send"' in line)
    body = json.loads(lines[k])
    body["offset"] += 1
    lines[k] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    history.write_text("\n".join(lines) + "\n")
    forged = replay_run(load_run([tmp_path / "run"]))
    assert forged.verdict == "divergence"
    assert "which the spec never acknowledged" in forged.divergence.reason
    # An invoke in the same millisecond as the broker's receipt of the write may merge after
    # it (nothing links the two lines, and "b0" sorts before "confluent-kafka"): accepted. The
    # same invoke on the other partition is a divergence, found once the run is merged.
    lines = original.splitlines()
    received_ms = {json.loads(line)["detail"]["value"]: json.loads(line)
                   for b in range(3)
                   for line in (tmp_path / "run" / f"b{b}.ndjson").read_text().splitlines()
                   if '"ProducerSend"' in line}
    k = next(i for i, line in enumerate(lines) if '"type":"invoke"' in line)
    invoke = json.loads(lines[k])
    received = received_ms[invoke["value"]]
    # The client's later lines no earlier than the moved invoke: its clock never goes back.
    for i in range(k + 1, len(lines)):
        body = json.loads(lines[i])
        if body.get("time_ms", received["time_ms"]) < received["time_ms"]:
            body["time_ms"] = received["time_ms"]
            lines[i] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    for changes, verdict in (({"time_ms": received["time_ms"]}, "accepted"),
                             ({"time_ms": received["time_ms"],
                               "partition": 1 - invoke["partition"]}, "divergence")):
        lines[k] = json.dumps({**invoke, **changes}, sort_keys=True, separators=(",", ":"))
        history.write_text("\n".join(lines) + "\n")
        result = replay_run(load_run([tmp_path / "run"]))
        assert result.verdict == verdict, result.divergence
    assert "which the producer never invoked there" in result.divergence.reason
    # A Kafka client's write is the event of the broker whose port took it: one that says
    # another broker took it is refused.
    history.write_text(original)
    path = next(p for b in range(3) if '"ProducerSend"' in
                (p := tmp_path / "run" / f"b{b}.ndjson").read_text())
    lines = path.read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if '"action":"ProducerSend"' in line)
    body = json.loads(lines[k])
    other = (body["outcome_args"]["broker"] + 1) % 3
    body["outcome_args"]["broker"] = body["detail"]["broker"] = other
    lines[k] = json.dumps(body, sort_keys=True, separators=(",", ":"))
    path.write_text("\n".join(lines) + "\n")
    moved = replay_run(load_run([tmp_path / "run"]))
    assert moved.verdict == "divergence"
    assert "not by the producer or the Kafka port of broker" in moved.divergence.reason



def _frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def _api_versions(correlation_id: int) -> bytes:
    # ApiVersions v0: header v1 (api key, version, correlation id, client id), empty body.
    return _frame(struct.pack(">hhih", 18, 0, correlation_id, 1) + b"t")


def _answer(sock) -> tuple[int, int]:
    size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
    body = sock.recv(size, socket.MSG_WAITALL)
    correlation_id, error = struct.unpack_from(">ih", body)
    return correlation_id, error


def test_bad_bytes_close_only_their_connection(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "isrlab.cli", "cluster", "tcp", "--duration", "0",
         "--port-base", "0", "--brokers", "1", "--partitions", "1", "--min-isr", "1",
         "--trace-out", str(run_dir)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while not line.startswith("bootstrap.servers=") and time.monotonic() < deadline:
            line = proc.stdout.readline()
        port = int(line.strip().rsplit(":", 1)[1])
        healthy = socket.create_connection(("127.0.0.1", port))
        healthy.sendall(_api_versions(1))
        assert _answer(healthy) == (1, 0)
        for bad in (struct.pack(">i", 1 << 30),  # over the size cap
                    _frame(struct.pack(">hhi", 1000, 0, 5)),  # unknown API key
                    _frame(struct.pack(">hhi", 3, 9, 5) + b"\xff\xff\xff"),  # malformed
                    _frame(b"\x00")):  # shorter than a header
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(bad)
            s.settimeout(10)
            assert s.recv(1) == b""  # closed, not answered
            s.close()
        healthy.sendall(_api_versions(2))
        assert _answer(healthy) == (2, 0)  # the other connection is still served
        healthy.close()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    logs = (run_dir / "b0.log").read_text()
    for words in ("request of 1073741824 bytes", "unsupported API key 1000",
                  "malformed Metadata v9", "shorter than a request header"):
        assert words in logs
    assert "Traceback" not in logs and "Traceback" not in err


@pytest.mark.slow
def test_three_clients_under_broker_crashes_lose_nothing(tmp_path):
    # The crash nemesis kills a broker with SIGKILL every few seconds and restarts it. (The
    # 10,000-records-per-client run: isrlab campaign --clients ... --count 10000 --nemesis
    # crash, docs/kafka.md.)
    run = kafka_run(tmp_path / "run", CLIENTS, count=4_000, seed=7,
                    cluster_args=("--brokers", "3", "--partitions", "2", "--nemesis", "crash"))
    assert run.history.acked["all"] + sum(t["info"] for t in run.told) == 12_000
    assert run.history.lost == {"1": 0, "all": 0}
    assert run.history.counts["lost-write"] == 0
    assert run.replay.verdict == "accepted", run.replay.divergence
    assert "faults: crashes 0" not in run.cluster_output


PARTITION_LEADER = ("--brokers", "3", "--partitions", "1", "--fault", "1000:partition:b0:4000")


def _sends_during_partition(run_dir) -> int:
    lines = [json.loads(line) for line in (run_dir / "kafka-python.ndjson").open()]
    return sum(1 for r in lines if r.get("f") == "send" and r.get("type") == "invoke"
               and 1_000 <= r["time_ms"] <= 5_000)


@pytest.mark.slow
def test_acks_1_loses_writes_to_a_partitioned_leader_and_acks_all_does_not(tmp_path):
    # Broker 0 leads p0 and is cut off from the other brokers and the metadata store for 4 s
    # (Kafka clients still reach it). It goes on acknowledging acks=1 writes while broker 1 is
    # elected; when it learns, it truncates them (B10 in docs/protocol.md). The sends are spread
    # up to 3.5 s so that they overlap the partition on a fast machine and a loaded one alike.
    lossy = kafka_run(tmp_path / "acks1", ("kafka-python",), count=20_000, acks="1",
                      cluster_args=(*PARTITION_LEADER, "--unclean"), until_ms=3_500)
    assert _sends_during_partition(tmp_path / "acks1") > 0
    assert lossy.history.lost["1"] > 0
    assert lossy.history.counts["lost-write"] == lossy.history.lost["1"]
    assert lossy.replay.verdict == "accepted", lossy.replay.divergence
    assert "AckedWritesDurable" in {name for name, _ in lossy.replay.invariant_violations}
    safe = kafka_run(tmp_path / "acksall", ("kafka-python",), count=8_000, acks="all",
                     cluster_args=PARTITION_LEADER, until_ms=3_500)
    assert _sends_during_partition(tmp_path / "acksall") > 0
    assert safe.history.acked["all"] > 0
    assert safe.history.lost == {"1": 0, "all": 0}
    assert safe.replay.verdict == "accepted", safe.replay.divergence
    assert safe.replay.invariant_violations == []
