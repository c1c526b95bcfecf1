"""One run of real Kafka clients against a cluster, checked: the clients' histories for
anomalies, and on the reference broker also its traces replayed against the spec.

The cluster is `isrlab cluster tcp --duration 0` (target `reference`) or `isrlab cluster kafka
--duration 0` (target `kafka`: Apache Kafka's own jars, which write no trace to replay), a child
process stopped with SIGTERM once the clients are done; the clients run here one after another
(impl/kafka/clients.py), each with its own range of values. On Kafka the final state of each
partition is what the clients read back at the end (model_check/history.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from impl.kafka.clients import run_client
from model_check.history import HistoryResult, check_history, load_history
from model_check.replay import ReplayResult, load_run, replay_run

REPO_ROOT = Path(__file__).resolve().parents[1]
CLIENT_VALUE_BASE = 10**9  # client k writes from (k + 1) * CLIENT_VALUE_BASE
TARGETS = ("reference", "kafka")


class KafkaRunError(RuntimeError):
    """The cluster did not come up or did not stop: one line with its stderr's tail."""


@dataclass
class KafkaRun:
    told: list[dict]  # per client: ok / info counts
    history: HistoryResult
    replay: ReplayResult | None  # None on Apache Kafka: no broker traces
    cluster_output: str
    target: str = "reference"
    run_json: dict | None = None


def kafka_run(run_dir: Path, clients: tuple[str, ...], count: int, acks: str = "all",
              cluster_args: tuple[str, ...] = (), seed: int = 1,
              start_timeout_s: float = 60, until_ms: int | None = None,
              target: str = "reference") -> KafkaRun:
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    if target == "kafka":
        cmd = [sys.executable, "-m", "isrlab.cli", "cluster", "kafka", "--duration", "0",
               "--seed", str(seed), "--out", str(run_dir), "--acks", acks, *cluster_args]
        start_timeout_s = max(start_timeout_s, 180)  # JVMs on two cores
    else:
        cmd = [sys.executable, "-m", "isrlab.cli", "cluster", "tcp", "--duration", "0",
               "--port-base", "0", "--seed", str(seed), "--trace-out", str(run_dir),
               "--acks", acks, *cluster_args]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    err_path = run_dir / "cluster.stderr"
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
    try:
        lines = _wait_for_bootstrap(proc, start_timeout_s, err_path)
        told = [run_client(client, run_dir, (k + 1) * CLIENT_VALUE_BASE, count, acks,
                           until_ms)
                for k, client in enumerate(clients)]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
    if proc.returncode != 0:
        raise KafkaRunError(f"isrlab cluster {'kafka' if target == 'kafka' else 'tcp'} exited "
                            f"with {proc.returncode}: {_tail(err_path)}")
    if target == "kafka":
        run_json = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        said = load_history([run_dir])
        partitions = json.loads((run_dir / "kafka.json").read_text())["partitions"]
        history = check_history(said, read_back_logs(said, clients[-1], partitions))
        return KafkaRun(told, history, None, "".join(lines) + (out or ""), target, run_json)
    run = load_run([run_dir])
    logs = (run.run_json or {}).get("final_logs") or {}
    history = check_history(load_history([run_dir]),
                            {int(p): [v for _, v in log] for p, log in logs.items()})
    replay = replay_run(run)
    return KafkaRun(told, history, replay, "".join(lines) + (out or ""))


def _wait_for_bootstrap(proc, timeout_s: float, err_path: Path) -> list[str]:
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise KafkaRunError(f"the cluster stopped before serving: {_tail(err_path)}")
        lines.append(line)
        if line.startswith("bootstrap.servers="):
            return lines
    raise KafkaRunError(f"the cluster did not serve within {timeout_s:g} s")


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no stderr)"
    return text[-1] if text else "(empty stderr)"


def unavailable_seconds(run_dir: Path) -> int:
    """Seconds of the run in which writes were sent and none of them was acknowledged: each
    client's sends grouped by the second they were invoked in, a second counted when it
    holds sends and no `ok`. Needs sends spread over the run (`until_ms`) to mean much."""
    sent: dict[tuple[str, int], int] = {}
    acked: set[tuple[str, int]] = set()
    for line in load_history([run_dir]):
        if line.get("f") != "send":
            continue
        key = (line["process"], line["value"])
        if line["type"] == "invoke":
            sent[key] = line["time_ms"] // 1000
        elif line["type"] == "ok":
            acked.add(key)
    seconds: dict[int, bool] = {}
    for key, second in sent.items():
        seconds[second] = seconds.get(second, False) or key in acked
    return sum(1 for ok in seconds.values() if not ok)


def read_back_logs(lines, process: str, partitions: int) -> dict[int, list[int]]:
    """Each partition's final log on a target without broker traces: what the last client
    (`process`) read back from offset 0 once every write had its answer, where those reads
    hold every offset from 0 to their end. Then a write acknowledged at or past that end is
    lost, not unverified. A partition whose read-back has a gap is left out (its final state
    is taken from the reads, offset by offset, model_check/history.py); one it read nothing
    of is empty."""
    seen: dict[int, dict[int, int]] = {p: {} for p in range(partitions)}
    for line in lines:
        if line.get("process") == process and line.get("f") == "read" and \
                line.get("type") == "ok":
            part = seen.setdefault(line["partition"], {})
            for offset, value in line["records"]:
                part[offset] = value
    return {p: [part[o] for o in range(len(part))] for p, part in seen.items()
            if all(o in part for o in range(len(part)))}
