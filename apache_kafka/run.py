"""One run of a real Kafka cluster under faults: `isrlab cluster kafka` is this module.

The cluster starts (apache_kafka/cluster.py), `kafka.json` tells client workloads where it is
(the same file `isrlab cluster tcp` writes, so impl/kafka/clients.py runs unchanged against
either), the `bootstrap.servers=` line is printed once every partition has a full ISR, then the
nemesis runs until the duration is over or SIGINT/SIGTERM comes. `nemesis.ndjson` logs every
fault in the trace format; `run.json` holds the summary: start-up seconds, each node's RSS,
leaders and ISRs at the end, fault counts.

Faults. `crash` is SIGKILL then a restart after the fault's length (the process dies, the page
cache survives: Kafka loses nothing it wrote to the OS); `pause` is SIGSTOP then SIGCONT;
`controller-kill` is a crash of the node the controller quorum last elected; `isr-kill-all`
kills every replica of one partition at once and restarts them one by one, a broker session
apart; `partition` cuts one node off from every other node (its peers and the controllers,
being combined nodes) in both directions, while clients still reach it, then heals. A fault's
target `leader` is resolved when the fault starts (partition 0's leader).

A partition needs each node in its own network namespace (apache_kafka/netns.py), so a run
with `partition` among its faults puts them there, as `KafkaSettings.netns` does for any run;
every other run stays on 127.0.0.1. Where namespaces cannot be made (not root), the run ends
before any JVM starts, with one line saying so.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from apache_kafka.cluster import KafkaCluster, KafkaClusterError, KafkaSettings
from vocab.trace import FORMAT

KAFKA_NEMESIS = ("crash", "pause", "partition", "controller-kill", "isr-kill-all")
FAULT_TARGETS = ("leader", "controller")


@dataclass
class KafkaRunOptions:
    seed: int = 1
    duration_ms: int = 60_000  # 0: until SIGINT/SIGTERM
    nemesis: tuple[str, ...] = ()
    faults: tuple[tuple[int, str, str, int], ...] = ()  # scripted: (at ms, kind, target, ms)
    fault_interval_ms: tuple[int, int] = (5_000, 15_000)
    fault_length_ms: tuple[int, int] = (2_000, 10_000)
    commit: str = "unknown"
    start_timeout_s: float = 120


class Stop(Exception):
    """SIGINT or SIGTERM: end the run as if its duration were over."""


class KafkaRun:
    def __init__(self, settings: KafkaSettings, options: KafkaRunOptions, run_dir: Path,
                 header_config: dict):
        if "partition" in options.nemesis or any(f[1] == "partition" for f in options.faults):
            settings = replace(settings, netns=True)
        self.s = settings
        self.o = options
        self.run_dir = Path(run_dir).resolve()
        self.cluster = KafkaCluster(settings, self.run_dir)
        self.rng = random.Random(f"{options.seed}/kafka-nemesis")
        self.header = {"seed": options.seed, "commit": options.commit, "mode": "kafka",
                       "run": f"seed-{options.seed}", "config": header_config}
        self.start_ms = 0
        self.seq = 0
        self.stats = {"crashes": 0, "pauses": 0, "partitions": 0, "controller_kills": 0}
        self.nemesis_file = None
        self.ending = False  # set once the run is ending: later signals ask for nothing more

    def now(self) -> int:
        return time.time_ns() // 1_000_000 - self.start_ms

    def log(self, f: str, target: str, **more) -> None:
        line = {"kind": "nemesis", "node": "nemesis", "seq": self.seq, "time_ms": self.now(),
                "f": f, "target": target, **more}
        self.seq += 1
        self.nemesis_file.write(json.dumps(line, sort_keys=True) + "\n")
        self.nemesis_file.flush()

    def sleep_until(self, at_ms: int) -> None:
        while self.now() < at_ms:
            time.sleep(min(0.05, max(0, at_ms - self.now()) / 1000))

    # Faults ---------------------------------------------------------------------------------

    def resolve(self, target: str) -> int | None:
        if target == "controller":
            return self.cluster.controller()
        if target == "leader":
            leader = self.cluster.describe().get(0, (-1, []))[0]
            return leader if leader >= 0 else None
        return int(target[1:])

    def inject(self, kind: str, target: str, length_ms: int) -> None:
        """Start a fault, wait `length_ms`, end it."""
        c = self.cluster
        if kind == "isr-kill-all":
            p = self.rng.randrange(self.s.partitions)
            replicas = self.s.assignment(p)
            for b in replicas:
                self.stats["crashes"] += 1
                self.log("crash", f"b{b}")
                c.kill(b)
            back = self.s.broker_session_timeout_ms
            for k, b in enumerate(replicas):
                self.sleep_until(self.now() + (length_ms if k == 0 else back))
                self.log("restart", f"b{b}")
                c.restart(b)
            return
        node = self.resolve(target if kind != "controller-kill" else "controller")
        if node is None or not c.alive(node):
            return
        name = f"b{node}"
        if kind in ("crash", "controller-kill"):
            if kind == "controller-kill":
                self.stats["controller_kills"] += 1
            self.down_for(node, length_ms, "crashes", ("crash", c.kill), ("restart", c.restart))
        elif kind == "pause":
            self.down_for(node, length_ms, "pauses", ("pause", c.pause), ("resume", c.resume))
        elif kind == "partition":
            others = [f"b{n.id}" for n in c.nodes if n.id != node]
            self.down_for(node, length_ms, "partitions", ("partition", c.partition),
                          ("heal", c.heal), groups=[[name], others])

    def down_for(self, node: int, length_ms: int, stat: str, down: tuple, up: tuple,
                 **fields) -> None:
        """One fault on `node` for `length_ms`, counted under `stat`: `down` and then `up`, each
        a (nemesis word, cluster action) pair, logged as it is done."""
        name = f"b{node}"
        self.stats[stat] += 1
        self.log(down[0], name, **fields)
        down[1](node)
        self.sleep_until(self.now() + length_ms)
        self.log(up[0], name)
        up[1](node)

    def nemesis(self, end_ms: int | None) -> None:
        o = self.o
        if o.faults:
            for at_ms, kind, target, length in o.faults:
                self.sleep_until(at_ms)
                self.inject(kind, target, length)
        elif o.nemesis:
            while end_ms is None or self.now() < end_ms:
                self.sleep_until(self.now() + self.rng.randint(*o.fault_interval_ms))
                if end_ms is not None and self.now() >= end_ms:
                    break
                kind = self.rng.choice(o.nemesis)
                target = f"b{self.rng.randrange(self.s.brokers)}"
                self.inject(kind, target, self.rng.randint(*o.fault_length_ms))
        while end_ms is None or self.now() < end_ms:
            time.sleep(0.1)

    # The run --------------------------------------------------------------------------------

    def run(self) -> dict:
        def stop(signum, _frame):
            if not self.ending:
                self.ending = True
                raise Stop()

        old = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        started_s = None
        stopped_by = "duration"
        try:
            with self.cluster:
                try:
                    started_s = self.cluster.start(self.o.start_timeout_s)
                    self.start_ms = time.time_ns() // 1_000_000
                    self.write_info()
                    print(f"bootstrap.servers={self.cluster.bootstrap_servers}", flush=True)
                    self.nemesis(self.o.duration_ms or None)
                except Stop:
                    stopped_by = "signal"
                    if started_s is None:
                        raise KafkaClusterError("stopped by a signal while starting") from None
                finally:
                    self.ending = True
                summary = self.summary(started_s, stopped_by)
        finally:
            for sig, handler in old.items():
                signal.signal(sig, handler)
            if self.nemesis_file is not None:
                self.nemesis_file.close()
        (self.run_dir / "run.json").write_text(json.dumps(summary, sort_keys=True, indent=1)
                                               + "\n")
        return summary

    def write_info(self) -> None:
        info = {"bootstrap_servers": self.cluster.bootstrap_servers,
                "topic": self.s.topic_names[0], "topics": self.s.topic_names,
                "partitions": self.s.partitions, "start_ms": self.start_ms,
                "header": self.header, "target": "kafka", **self.cluster.info()}
        (self.run_dir / "kafka.json").write_text(json.dumps(info, sort_keys=True) + "\n")
        self.nemesis_file = open(self.run_dir / "nemesis.ndjson", "w", encoding="utf-8")
        self.nemesis_file.write(json.dumps({"kind": "header", "format": FORMAT,
                                            "node": "nemesis", **self.header},
                                           sort_keys=True) + "\n")
        self.nemesis_file.flush()

    def summary(self, started_s: float | None, stopped_by: str) -> dict:
        # Paused nodes are resumed and cut-off ones healed first, so that the last look at
        # the metadata can be answered.
        for node in self.cluster.nodes:
            if node.paused:
                self.cluster.resume(node.id)
        for node_id in sorted(self.cluster.network.cut_off if self.cluster.network else ()):
            self.cluster.heal(node_id)
        described = self.cluster.describe()
        return {"target": "kafka", "header": self.header, "start_seconds": started_s,
                "restart_seconds": [round(s, 2) for n in self.cluster.nodes
                                    for s in n.starts[1:]],
                "rss_mb": {f"b{k}": round(v, 1) for k, v in self.cluster.rss_mb().items()},
                "leaders": {str(p): leader for p, (leader, _) in sorted(described.items())},
                "isr": {str(p): isr for p, (_, isr) in sorted(described.items())},
                "controller": self.cluster.controller(), "stopped_by": stopped_by,
                "time_ms": self.now(), **self.stats, **self.cluster.info()}


def run_kafka(settings: KafkaSettings, options: KafkaRunOptions, run_dir: Path,
              header_config: dict) -> dict:
    return KafkaRun(settings, options, run_dir, header_config).run()


if __name__ == "__main__":
    sys.exit("use: isrlab cluster kafka")
