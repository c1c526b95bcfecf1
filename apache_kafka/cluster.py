"""A real Apache Kafka cluster: KRaft nodes of Kafka's own jars, each one JVM.

Shape. Every node is a combined KRaft node (`process.roles=broker,controller`) and a voter of
the controller quorum. On a 2-core machine three JVMs start within the minute where six (three
brokers beside a separate three-voter quorum) would not, and a controller failover is still
real: killing the node whose `quorum-state` names it leader moves the quorum's leadership.
What combined nodes cannot show is a controller dying alone: `controller-kill` takes the
broker on that node down with it (Kafka's docs advise separate controllers in production for
this reason).

Storage. Each node's log directory is formatted fresh by `kafka.tools.StorageTool` with one
cluster id; KIP-966 is the feature `eligible.leader.replicas.version` (1 on, 0 off) given at
format time, as `kafka-storage.sh format --feature` does. Each node's directory under the run
holds its `server.properties`, `log4j2.properties`, `server.log` (Kafka's log4j output) and
`stdout.log`.

Processes. Each JVM runs in its own session with `PR_SET_PDEATHSIG` = SIGKILL, so it dies with
the process that started it even when that one is killed; `stop()` resumes paused nodes, sends
SIGTERM, waits, then SIGKILLs. Every start and stop goes by pid.

Network. Nodes listen on 127.0.0.1 unless the settings ask for network namespaces (`netns`,
which the partition fault needs): then each JVM is started inside its own namespace
(apache_kafka/netns.py) and every listener, advertised listener and controller voter is on
that namespace's address, which clients in the root namespace reach. The namespaces are made
when the cluster starts and removed when it stops, after its JVMs, however the block ends.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from apache_kafka.install import KAFKA_VERSION, classpath, java
from apache_kafka.netns import NetnsError, Network, enter

HOST = "127.0.0.1"
PR_SET_PDEATHSIG = 1


class KafkaClusterError(RuntimeError):
    """The cluster could not start or answer: one line naming the node and what happened."""


@dataclass
class KafkaSettings:
    """What the cluster is asked to be, with isrlab's (and Kafka's) key names."""

    brokers: int = 3
    partitions: int = 1
    replication_factor: int | None = None  # None: every broker
    min_insync_replicas: int = 2
    unclean_leader_election_enable: bool = False
    eligible_leader_replicas_enable: bool = False
    log_flush_interval_messages: int | None = None
    replica_lag_time_max_ms: int = 10_000
    topic: str = "isrlab"
    topics: int = 1  # more: TOPIC-0 .. TOPIC-(n-1), one per run of a campaign batch
    port_base: int = 0  # broker i serves clients on port_base + i; 0: any free ports
    heap_mb: int = 512
    # How long a node's broker may miss heartbeats before the controller fences it; Kafka's
    # default is 9 s, shortened so a killed leader is replaced within a short run.
    broker_session_timeout_ms: int = 4_000
    broker_heartbeat_interval_ms: int = 500
    netns: bool = False  # each node in its own network namespace (root only)

    @property
    def topic_names(self) -> list[str]:
        if self.topics == 1:
            return [self.topic]
        return [f"{self.topic}-{k}" for k in range(self.topics)]

    def assignment(self, partition: int) -> list[int]:
        """The reference broker's placement: replica j of partition i on broker (i + j) % n."""
        n = self.brokers
        return [(partition + j) % n for j in range(self.replication_factor or n)]


@dataclass
class Node:
    id: int
    dir: Path
    port: int  # clients and replication (PLAINTEXT)
    controller_port: int
    host: str = HOST  # the address every listener of the node is on
    proc: subprocess.Popen | None = None
    paused: bool = False
    starts: list[float] = field(default_factory=list)  # seconds from spawn to serving


def free_ports(count: int, base: int = 0) -> list[int]:
    """`count` ports free on 127.0.0.1: consecutive from `base`, or any (base 0)."""
    held, ports = [], []
    try:
        for k in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(s)
            try:
                s.bind((HOST, base + k if base else 0))
            except OSError as error:
                raise KafkaClusterError(f"port {base + k} on {HOST}: {error.strerror}") from None
            ports.append(s.getsockname()[1])
    finally:
        for s in held:
            s.close()
    return ports


def _die_with_parent() -> None:
    os.setsid()
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def _in_namespace(fd: int):
    def preexec() -> None:
        _die_with_parent()
        enter(fd)
    return preexec


class KafkaCluster:
    """N combined KRaft nodes of Apache Kafka (see the module docstring). Use as a context
    manager: every JVM is gone when the block ends, however it ends."""

    def __init__(self, settings: KafkaSettings, run_dir: Path):
        self.s = settings
        self.run_dir = Path(run_dir).resolve()
        if settings.replication_factor and settings.replication_factor > settings.brokers:
            raise KafkaClusterError(f"replication factor {settings.replication_factor} > "
                                    f"{settings.brokers} brokers")
        self.classpath = classpath()
        self.java = java()
        n = settings.brokers
        client = free_ports(n, settings.port_base)
        controller = free_ports(n)
        self.nodes = [Node(i, self.run_dir / f"kafka-{i}", client[i], controller[i])
                      for i in range(n)]
        self.cluster_id = ""
        self.started_s = 0.0
        self.network: Network | None = None

    # Configuration --------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.nodes)

    def open_network(self) -> None:
        """Each node's namespace made and its address taken (when the settings ask for them)."""
        if not self.s.netns or self.network is not None:
            return
        self.network = Network(len(self.nodes))
        try:
            self.network.create()
        except NetnsError as error:
            raise KafkaClusterError(f"network namespaces (needed for the partition fault and "
                                    f"--netns; root only): {error}") from None
        for node in self.nodes:
            node.host = self.network.address(node.id)

    def close_network(self) -> None:
        """The namespaces removed (after the JVMs: a namespace outlives its name while a
        process runs in it)."""
        if self.network is None:
            return
        try:
            self.network.destroy()
        except NetnsError as error:
            raise KafkaClusterError(f"removing the run's network namespaces: {error}") from None

    def properties(self, node: Node) -> dict[str, str]:
        s = self.s
        voters = ",".join(f"{n.id}@{n.host}:{n.controller_port}" for n in self.nodes)
        internal = str(min(3, s.brokers))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{node.host}:{node.port},"
                         f"CONTROLLER://{node.host}:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{node.host}:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.dir / "data"),
            "auto.create.topics.enable": "false",
            "min.insync.replicas": str(s.min_insync_replicas),
            "unclean.leader.election.enable": str(s.unclean_leader_election_enable).lower(),
            "replica.lag.time.max.ms": str(s.replica_lag_time_max_ms),
            "broker.session.timeout.ms": str(s.broker_session_timeout_ms),
            "broker.heartbeat.interval.ms": str(s.broker_heartbeat_interval_ms),
            "offsets.topic.replication.factor": internal,
            "transaction.state.log.replication.factor": internal,
            "transaction.state.log.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            # Two cores: fewer threads than Kafka's defaults, one fetcher per broker pair.
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "num.replica.fetchers": "1",
            "log.cleaner.enable": "false",
        }
        if s.log_flush_interval_messages is not None:
            props["log.flush.interval.messages"] = str(s.log_flush_interval_messages)
        return props

    def _write_config(self, node: Node) -> None:
        node.dir.mkdir(parents=True, exist_ok=True)
        text = "".join(f"{k}={v}\n" for k, v in self.properties(node).items())
        (node.dir / "server.properties").write_text(text, encoding="utf-8")
        (node.dir / "log4j2.properties").write_text(
            "status = error\n"
            "appender.file.type = File\n"
            "appender.file.name = file\n"
            f"appender.file.fileName = {node.dir / 'server.log'}\n"
            "appender.file.layout.type = PatternLayout\n"
            "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
            "rootLogger.level = info\n"
            "rootLogger.appenderRef.file.ref = file\n", encoding="utf-8")

    def _jvm(self, node: Node, main: str, *args: str, tool: bool = False) -> list[str]:
        # A tool runs for a second: a small heap and the quick JIT tier start it fastest.
        flags = (["-Xmx128m", "-XX:TieredStopAtLevel=1"] if tool else
                 [f"-Xmx{self.s.heap_mb}m", f"-Xms{self.s.heap_mb // 2}m"])
        return [self.java, *flags, "-XX:+UseSerialGC", "-Djava.awt.headless=true",
                f"-Dlog4j2.configurationFile={node.dir / 'log4j2.properties'}",
                "-cp", self.classpath, main, *args]

    def format(self) -> None:
        """A fresh cluster id, then every node's storage formatted with it (in parallel)."""
        first = self.nodes[0]
        self._write_config(first)
        out = subprocess.run(self._jvm(first, "kafka.tools.StorageTool", "random-uuid",
                                       tool=True), capture_output=True, text=True, timeout=120)
        self.cluster_id = out.stdout.strip().splitlines()[-1] if out.returncode == 0 else ""
        if not self.cluster_id:
            raise KafkaClusterError(f"StorageTool random-uuid failed: {out.stderr.strip()[-300:]}")
        elr = "1" if self.s.eligible_leader_replicas_enable else "0"
        procs = []
        for node in self.nodes:
            self._write_config(node)
            cmd = self._jvm(node, "kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                            "-c", str(node.dir / "server.properties"),
                            "--feature", f"eligible.leader.replicas.version={elr}", tool=True)
            procs.append((node, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, text=True)))
        try:
            for node, proc in procs:
                text, _ = proc.communicate(timeout=120)
                (node.dir / "format.log").write_text(text, encoding="utf-8")
                if proc.returncode != 0:
                    raise KafkaClusterError(f"kafka-{node.id}: StorageTool format failed: "
                                            f"{_last(text)}")
        finally:
            for _, proc in procs:  # none outlives a failed or interrupted format
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()

    # Processes ------------------------------------------------------------------------------

    def spawn(self, node: Node) -> None:
        fd = self.network.open(node.id) if self.network else None
        try:
            with open(node.dir / "stdout.log", "ab") as out:
                node.proc = subprocess.Popen(
                    self._jvm(node, "kafka.Kafka", str(node.dir / "server.properties")),
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    pass_fds=() if fd is None else (fd,),
                    preexec_fn=_die_with_parent if fd is None else _in_namespace(fd))
        finally:
            if fd is not None:
                os.close(fd)
        node.paused = False
        (node.dir / "pid").write_text(f"{node.proc.pid}\n")

    def wait_serving(self, node: Node, timeout_s: float) -> float:
        """Seconds until the node's client port accepts a connection."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s:
            if node.proc is not None and node.proc.poll() is not None:
                raise KafkaClusterError(f"kafka-{node.id} exited with {node.proc.returncode} "
                                        f"while starting: {_last_log(node)}")
            try:
                socket.create_connection((node.host, node.port), timeout=0.5).close()
                return time.monotonic() - start
            except OSError:
                time.sleep(0.1)
        raise KafkaClusterError(f"kafka-{node.id} did not serve on {node.host}:{node.port} within "
                                f"{timeout_s:g} s: {_last_log(node)}")

    def start(self, timeout_s: float = 120) -> float:
        """Format, start every node, create the topic, wait for a full ISR everywhere;
        return the seconds it took from the first JVM's start."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.open_network()
        self.format()
        start = time.monotonic()
        for node in self.nodes:
            self.spawn(node)
        for node in self.nodes:
            node.starts.append(self.wait_serving(node, timeout_s))
        self.create_topic(timeout_s)
        self.wait_full_isr(timeout_s - (time.monotonic() - start))
        self.started_s = time.monotonic() - start
        return self.started_s

    def kill(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGKILL)
            node.proc.wait()

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        self.kill(node_id)
        self.spawn(node)
        node.starts.append(self.wait_serving(node, 120))

    def pause(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGSTOP)
            node.paused = True

    def resume(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.send_signal(signal.SIGCONT)
        node.paused = False

    def partition(self, node_id: int) -> None:
        """Cut the node off from every other node, both ways; clients still reach it."""
        if self.network is None:
            raise KafkaClusterError("a partition needs the nodes in network namespaces")
        try:
            self.network.cut(node_id)
        except NetnsError as error:
            raise KafkaClusterError(str(error)) from None

    def heal(self, node_id: int) -> None:
        """Undo `partition(node_id)`."""
        if self.network is not None:
            try:
                self.network.heal(node_id)
            except NetnsError as error:
                raise KafkaClusterError(str(error)) from None

    def alive(self, node_id: int) -> bool:
        proc = self.nodes[node_id].proc
        return proc is not None and proc.poll() is None

    def stop(self, grace_s: float = 15) -> None:
        """Every node gone: resumed, asked with SIGTERM, killed after `grace_s`."""
        live = [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]
        for node in live:
            node.proc.send_signal(signal.SIGCONT)
            node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for node in live:
            try:
                node.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait()

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(self, *exc) -> None:
        # SIGINT and SIGTERM wait until the JVMs and the namespaces are gone.
        main = threading.current_thread() is threading.main_thread()
        if main:
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            self.stop()
        finally:
            try:
                self.close_network()
            finally:
                if main:
                    signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def rss_mb(self) -> dict[int, float]:
        """Each live node's resident set, from /proc."""
        out = {}
        for node in self.nodes:
            if node.proc is None or node.proc.poll() is not None:
                continue
            try:
                for line in Path(f"/proc/{node.proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[node.id] = int(line.split()[1]) / 1024
            except OSError:
                pass
        return out

    # Metadata -------------------------------------------------------------------------------

    def admin(self, timeout_s: float = 10):
        from confluent_kafka.admin import AdminClient

        live = [n for n in self.nodes if self.alive(n.id) and not n.paused]
        servers = ",".join(f"{n.host}:{n.port}" for n in live) or self.bootstrap_servers
        return AdminClient({"bootstrap.servers": servers, "log_level": 0,
                            "socket.timeout.ms": int(timeout_s * 1000)})

    def create_topic(self, timeout_s: float) -> None:
        """Every topic of the settings, with the reference broker's placement."""
        from confluent_kafka.admin import NewTopic

        config = {"min.insync.replicas": str(self.s.min_insync_replicas),
                  "unclean.leader.election.enable":
                      str(self.s.unclean_leader_election_enable).lower()}
        assignment = [self.s.assignment(p) for p in range(self.s.partitions)]
        todo = list(self.s.topic_names)
        deadline = time.monotonic() + timeout_s
        while todo:
            admin = self.admin()  # kept: a collected client cancels its requests
            futures = admin.create_topics(
                [NewTopic(name, num_partitions=self.s.partitions, replica_assignment=assignment,
                          config=config) for name in todo], operation_timeout=30)
            for name, future in futures.items():
                try:
                    future.result(timeout=max(1.0, deadline - time.monotonic()))
                except Exception as error:  # noqa: BLE001 - KafkaException carries the code
                    code = getattr(error.args[0], "name", lambda: "")() if error.args else ""
                    if code != "TOPIC_ALREADY_EXISTS":
                        if time.monotonic() > deadline:
                            raise KafkaClusterError(f"creating topic {name}: {error!r}") \
                                from None
                        continue
                todo.remove(name)
            if todo:
                time.sleep(0.5)

    def describe(self, timeout_s: float = 5,
                 topic: str | None = None) -> dict[int, tuple[int, list[int]]]:
        """partition -> (leader, ISR) of `topic` (the first) as the live brokers' metadata
        says ({} when no answer)."""
        return self.describe_all(timeout_s, [topic or self.s.topic_names[0]]).get(
            topic or self.s.topic_names[0], {})

    def describe_all(self, timeout_s: float = 5, topics: list[str] | None = None
                     ) -> dict[str, dict[int, tuple[int, list[int]]]]:
        admin = self.admin(timeout_s)
        try:
            meta = admin.list_topics(timeout=timeout_s)
        except Exception:  # noqa: BLE001 - no answer in time is an answer here
            return {}
        out = {}
        for name in topics or self.s.topic_names:
            topic = meta.topics.get(name)
            if topic is not None and topic.error is None:
                out[name] = {p: (m.leader, sorted(m.isrs)) for p, m in topic.partitions.items()}
        return out

    def wait_full_isr(self, timeout_s: float) -> None:
        want = {p: sorted(self.s.assignment(p)) for p in range(self.s.partitions)}
        deadline = time.monotonic() + max(timeout_s, 1)
        seen: dict = {}
        while time.monotonic() < deadline:
            seen = self.describe_all()
            if all(name in seen and all(p in seen[name] and seen[name][p][0] >= 0
                                        and seen[name][p][1] == isr for p, isr in want.items())
                   for name in self.s.topic_names):
                return
            time.sleep(0.3)
        raise KafkaClusterError(f"topic {self.s.topic_names[0]}: no full ISR within the start "
                                f"timeout (last seen {seen.get(self.s.topic_names[0])})")

    def controller(self) -> int | None:
        """The node the controller quorum last elected leader (its `quorum-state` files)."""
        best: tuple[int, int] | None = None
        for node in self.nodes:
            path = node.dir / "data" / "__cluster_metadata-0" / "quorum-state"
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            leader, epoch = state.get("leaderId", -1), state.get("leaderEpoch", -1)
            if leader >= 0 and (best is None or epoch > best[1]):
                best = (leader, epoch)
        return best[0] if best else None

    def info(self) -> dict:
        net = self.network
        return {"kafka_version": KAFKA_VERSION, "cluster_id": self.cluster_id,
                "bootstrap_servers": self.bootstrap_servers,
                "network": {"namespaces": net.names, "subnet": str(net.subnet),
                            "root_link": net.link} if net else None,
                "nodes": [{"id": n.id, "host": n.host, "port": n.port,
                           "controller_port": n.controller_port,
                           "pid": n.proc.pid if n.proc else None} for n in self.nodes]}


def _last(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _last_log(node: Node) -> str:
    for name in ("stdout.log", "server.log"):
        try:
            text = (node.dir / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        errors = [x for x in text.splitlines() if " ERROR " in x or "Exception" in x]
        if errors:
            return errors[-1][:300]
    return f"see {node.dir / 'server.log'}"
