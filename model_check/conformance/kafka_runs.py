"""One run of real Kafka clients against a cluster, checked: the clients' histories for
anomalies, and on the reference broker also its traces replayed against the spec.

The cluster is `isrlab cluster tcp --duration 0` (target `reference`) or `isrlab cluster kafka
--duration 0` (target `kafka`: Apache Kafka's own jars, which write no trace to replay), a child
process stopped with SIGTERM once the clients are done; the clients run here one after another
(impl/kafka/clients.py), each with its own range of values. On Kafka the final state of each
partition is what the clients read back at the end (model_check/conformance/history.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from impl.kafka.clients import run_client
from model_check.conformance.history import HistoryResult, check_history, load_history
from model_check.conformance.replay import ReplayResult, load_run, replay_run

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


@dataclass
class ClusterProcess:
    """A cluster command running as a child (see `cluster_process`)."""

    proc: subprocess.Popen
    err_path: Path
    lines: list[str]  # its stdout up to and including the bootstrap.servers= line
    out: str = ""  # the rest of its stdout, once stopped


def cluster_command(target: str, run_dir: Path, args: tuple[str, ...]) -> list[str]:
    """`isrlab cluster tcp|kafka --duration 0` writing into run_dir, with `args`."""
    if target == "kafka":
        return [sys.executable, "-m", "isrlab.cli", "cluster", "kafka", "--duration", "0",
                "--out", str(run_dir), *args]
    return [sys.executable, "-m", "isrlab.cli", "cluster", "tcp", "--duration", "0",
            "--port-base", "0", "--trace-out", str(run_dir), *args]


@contextmanager
def cluster_process(cmd: list[str], err_path: Path,
                    start_timeout_s: float) -> Iterator[ClusterProcess]:
    """Start `cmd`, wait for its bootstrap.servers= line (KafkaRunError if it stops or does
    not serve in time), and stop it with SIGTERM when the block ends, however it ends (SIGKILL
    after 60 s). Its exit code is `proc.returncode` after the block."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
    child = ClusterProcess(proc, err_path, [])
    try:
        child.lines = _wait_for_bootstrap(proc, start_timeout_s, err_path)
        yield child
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            child.out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            child.out, _ = proc.communicate()
        child.out = child.out or ""


def kafka_run(run_dir: Path, clients: tuple[str, ...], count: int, acks: str = "all",
              cluster_args: tuple[str, ...] = (), seed: int = 1,
              start_timeout_s: float = 60, until_ms: int | None = None,
              target: str = "reference") -> KafkaRun:
    run_dir = Path(run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    args = ("--seed", str(seed), "--acks", acks, *cluster_args)
    if target == "kafka":
        start_timeout_s = max(start_timeout_s, 180)  # JVMs on two cores
    with cluster_process(cluster_command(target, run_dir, args), run_dir / "cluster.stderr",
                         start_timeout_s) as child:
        told = [run_client(client, run_dir, (k + 1) * CLIENT_VALUE_BASE, count, acks,
                           until_ms)
                for k, client in enumerate(clients)]
    if child.proc.returncode != 0:
        raise KafkaRunError(f"isrlab cluster {'kafka' if target == 'kafka' else 'tcp'} exited "
                            f"with {child.proc.returncode}: {tail(child.err_path)}")
    output = "".join(child.lines) + child.out
    if target == "kafka":
        run_json = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        said = load_history([run_dir])
        partitions = json.loads((run_dir / "kafka.json").read_text())["partitions"]
        history = check_history(said, read_back_logs(said, clients[-1], partitions))
        return KafkaRun(told, history, None, output, target, run_json)
    run = load_run([run_dir])
    logs = (run.run_json or {}).get("final_logs") or {}
    history = check_history(load_history([run_dir]),
                            {int(p): [v for _, v in log] for p, log in logs.items()})
    replay = replay_run(run)
    return KafkaRun(told, history, replay, output)


def kafka_batch(out: Path, seeds: list[int], clients: tuple[str, ...], count: int,
                acks: str = "all", cluster_args: tuple[str, ...] = (),
                until_ms: int | None = None,
                start_timeout_s: float = 180) -> list[KafkaRun | KafkaRunError]:
    """Several runs on one Apache Kafka cluster, each on a topic of its own.

    `isrlab cluster kafka --topics len(seeds)` starts once (its directory:
    `out/cluster-<first seed>/`, with the nemesis of the first seed running through every run);
    run k writes to and reads back topic k, in `out/run-<seed>/`, whose `kafka.json` starts
    that run's clock and whose `nemesis.ndjson` holds the faults of its window, on its clock.
    A run whose clients fail is that run's KafkaRunError; the cluster failing ends the batch.
    """
    out = Path(out).resolve()
    cluster_dir = out / f"cluster-{seeds[0]}"
    cluster_dir.mkdir(parents=True, exist_ok=True)
    args = ("--seed", str(seeds[0]), "--acks", acks, "--topics", str(len(seeds)), *cluster_args)
    results: list[KafkaRun | KafkaRunError] = []
    with cluster_process(cluster_command("kafka", cluster_dir, args),
                         cluster_dir / "cluster.stderr", start_timeout_s) as child:
        proc, err_path = child.proc, child.err_path
        info = json.loads((cluster_dir / "kafka.json").read_text(encoding="utf-8"))
        for k, seed in enumerate(seeds):
            if proc.poll() is not None:
                results.append(KafkaRunError(f"isrlab cluster kafka exited with "
                                             f"{proc.returncode} during the batch: "
                                             f"{tail(err_path)}"))
                break
            run_dir = out / f"run-{seed}"
            run_dir.mkdir(parents=True, exist_ok=True)
            start_ms = time.time_ns() // 1_000_000
            header = {**info["header"], "run": f"seed-{seed}", "seed": seed}
            (run_dir / "kafka.json").write_text(json.dumps(
                {**info, "topic": info["topics"][k], "start_ms": start_ms, "header": header,
                 "cluster_dir": str(cluster_dir)}, sort_keys=True) + "\n")
            try:
                told = [run_client(client, run_dir, (c + 1) * CLIENT_VALUE_BASE, count, acks,
                                   until_ms) for c, client in enumerate(clients)]
            except Exception as error:  # noqa: BLE001 - a client library's own errors
                results.append(KafkaRunError(f"seed {seed}: {type(error).__name__}: {error}"))
                continue
            end_ms = time.time_ns() // 1_000_000
            faults = _window(cluster_dir, info["start_ms"], start_ms, end_ms, header, run_dir)
            said = load_history([run_dir])
            history = check_history(said, read_back_logs(said, clients[-1],
                                                         info["partitions"]))
            results.append(KafkaRun(told, history, None, "".join(child.lines), "kafka",
                                    faults))
    return results


def _window(cluster_dir: Path, zero_ms: int, start_ms: int, end_ms: int, header: dict,
            run_dir: Path) -> dict:
    """The cluster's nemesis lines between start_ms and end_ms (wall clock), rewritten on the
    run's clock into run_dir/nemesis.ndjson; their counts as a run.json would hold them."""
    from vocab.trace import FORMAT

    kept = []
    for raw in (cluster_dir / "nemesis.ndjson").read_text(encoding="utf-8").splitlines():
        body = json.loads(raw)
        if body.get("kind") == "nemesis" and start_ms <= zero_ms + body["time_ms"] <= end_ms:
            kept.append({**body, "time_ms": zero_ms + body["time_ms"] - start_ms,
                         "seq": len(kept)})
    with open(run_dir / "nemesis.ndjson", "w", encoding="utf-8") as f:
        f.write(json.dumps({"kind": "header", "format": FORMAT, "node": "nemesis", **header},
                           sort_keys=True) + "\n")
        for body in kept:
            f.write(json.dumps(body, sort_keys=True) + "\n")
    fs = [b["f"] for b in kept]
    return {"crashes": fs.count("crash"), "pauses": fs.count("pause"),
            "partitions": fs.count("partition"), "batch": str(cluster_dir)}


def _wait_for_bootstrap(proc, timeout_s: float, err_path: Path) -> list[str]:
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise KafkaRunError(f"the cluster stopped before serving: {tail(err_path)}")
        lines.append(line)
        if line.startswith("bootstrap.servers="):
            return lines
    raise KafkaRunError(f"the cluster did not serve within {timeout_s:g} s")


def tail(path: Path) -> str:
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
    (`process`) read back from offset 0 once every write had its answer, for a partition whose
    end offset the client learnt (its `end` line, impl/kafka/clients.py) and whose reads hold
    every offset below it. Then a write acknowledged at or past that end is lost, not
    unverified. A partition read back only in part (its leader offline, say) is left out: its
    final state is taken from the reads, offset by offset (model_check/conformance/history.py)."""
    seen: dict[int, dict[int, int]] = {p: {} for p in range(partitions)}
    ends: dict[int, int] = {}
    for line in lines:
        if line.get("process") != process or line.get("type") != "ok":
            continue
        if line.get("f") == "read":
            part = seen.setdefault(line["partition"], {})
            for offset, value in line["records"]:
                part[offset] = value
        elif line.get("f") == "end":
            ends[line["partition"]] = line["offset"]
    logs = {}
    for p, end in ends.items():
        part = seen.get(p, {})
        length = max(end, max(part, default=-1) + 1)
        if all(o in part for o in range(length)):
            logs[p] = [part[o] for o in range(length)]
    return logs
