"""The TCP cluster's supervisor: node processes, in-process clients, a nemesis with signals.

Theory of operation. `run_cluster` picks free ports on 127.0.0.1, spawns the metadata store
and each broker as `python -m impl.tcp.node` (waiting for each to print `ready`), and fixes the
run's time 0 a moment after all are ready (the `go` control frame) so that every node starts
its core together. The producer and the
consumer run here, as trio tasks over the same `Node` driver, each with its own trace file; a
seeded workload invokes a write every `write_interval_ms` (with jitter), as the simulator does.

The nemesis (seeded; one fault at a time, as in the simulator):
- crash: SIGSTOP, a short drain so that peers read what the node had already sent, SIGKILL.
  The supervisor then appends the `BrokerCrash` line to the dead broker's trace, with the
  post-crash replica states read back from its data directory by `BrokerStorage` (exactly how
  the simulator's `_crash` builds them). After the fault length: restart with `--restart`.
- pause: SIGSTOP, then SIGCONT (a GC pause).
- partition: the target drops frames to and from everyone, or from the metadata store only
  (control frames; see node.py), and both ends hear that their connection broke.
- slow: the target delays its sends by 20-200 ms.
- drop, duplicate: the target loses (or sends twice) a share of its messages, at a rate drawn
  from the seed (5-50%), as the simulator's message faults; delay: the link between the target
  and one other node (a broker or the store) is slowed by 20-1500 ms, each way, FIFO kept.
  Control frames tell the nodes (`message-faults`, see node.py).
Faults are `nemesis` lines in `nemesis.ndjson`. `run.json` is the simulator's, with mode `tcp`;
the final logs are in a file beside it (impl/trace.py `write_final_logs`).

Liveness, as in the simulator: at the run's duration the nemesis stops and every fault still
on heals (a crashed broker restarts, a paused one resumes, a cut or message fault ends). Then,
within `liveness_ms`, each partition must have a live leader with every replica in the store's
ISR and acknowledge an acks write; the supervisor asks the store for its view (the `view`
control) every `LIVENESS_CHECK_MS`. The run stops when all do; otherwise the summary's
`liveness` line names each partition that did not. A run without a duration, or without
isrlab's own workload, has no liveness phase.

Shutdown: every node is sent `quiet` (see node.py), then `stop` (SIGCONT first if paused); a node that does not exit in
time is killed. `run_cluster` kills whatever is left on any exit path, Ctrl-C and set-up
failures included (SIGTERM, then SIGKILL), and nodes exit by themselves if the supervisor dies
(they watch their parent). A node that exits when neither the nemesis nor the shutdown asked it
to is a failed run: named in the summary's `node_failures` and in run.json.

Every connection of the run, node to node and supervisor to node, starts with a handshake
under a per-run key (`secrets.token_bytes`; see node.py and framing.py). The supervisor hands
the key to each node process on its stdin, a pipe it closes at once: the key is never in an
environment, a command line, a file, a log or a trace.

Left out: messages a node had written to a socket and that the kernel delivers after the
node's crash line (the drain before SIGKILL makes that rare); messages lost in a socket
buffer when a connection breaks are not logged as drops (the spec loses messages to and from
a crashed broker by itself).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import trio

from impl.broker_storage import BrokerStorage
from impl.config import ClusterConfig
from impl.protocol.broker import BrokerCore, broker_node
from impl.protocol.clients import ConsumerCore, ProducerCore
from impl.protocol.messages import History
from impl.storage import FileDisk
from impl.tcp.framing import KEY_BYTES, FrameDecoder, FrameTooLarge, encode_frame
from impl.tcp.node import HOST, SUPERVISOR, HandshakeFailed, Node, open_peer, wall_ms
from impl.tcp.tracefile import FileTrace
from impl.trace import dumps, event_counts, header_config, reproduce_command, write_final_logs
from vocab.actions import ActionName as A
from vocab.outcomes import Code

REPO_ROOT = Path(__file__).resolve().parents[2]
MESSAGE_FAULTS = ("drop", "duplicate", "delay")  # as impl.sim.MESSAGE_FAULTS
LIVENESS_CHECK_MS = 100  # how often the liveness phase asks the store


@dataclass(frozen=True, slots=True)
class TcpOptions:
    """A TCP run. Times in milliseconds; `base_port` 0 picks free ports."""

    seed: int = 0
    duration_ms: int = 60_000
    nemesis: tuple[str, ...] = ()
    commit: str = "unknown"
    base_port: int = 0
    fault_interval_ms: tuple[int, int] = (2_000, 6_000)
    fault_length_ms: tuple[int, int] = (500, 4_000)
    write_interval_ms: int = 50
    poll_interval_ms: int = 100
    startup_ms: int = 100
    crash_drain_ms: int = 30
    trace: bool = True
    faults: tuple[tuple[int, str, str, int], ...] = ()  # scripted: (at ms, kind, target, ms)
    # Kafka clients: broker i serves Kafka's protocol on kafka_port_base + i (0: any free
    # ports; None: not served), with one topic.
    kafka_port_base: int | None = None
    topic: str = "isrlab"
    workload: bool = True  # isrlab's own producer and consumer
    # After the faults heal at duration_ms, how long the cluster has to recover (0: no check).
    liveness_ms: int = 10_000




def pick_ports(names: list[str], base_port: int = 0,
               flag: str = "--base-port") -> dict[str, int]:
    """Consecutive ports from `base_port` (each checked free), or any free ports (0); `flag`
    is the option that gave `base_port`, for the error."""
    if base_port and not 1024 <= base_port <= 65536 - len(names):
        raise ClusterError(f"{flag} {base_port}: must be 0 (any free ports) or in "
                           f"1024..{65536 - len(names)} ({len(names)} ports)")
    sockets = []
    try:
        for i, _ in enumerate(names):
            s = socket.socket()
            # As trio's listeners do: a port left in TIME_WAIT by an earlier run is free.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sockets.append(s)
            port = base_port + i if base_port else 0
            try:
                s.bind((HOST, port))
            except OSError as error:
                raise ClusterError(f"port {port} on {HOST}: {error.strerror}") from None
        return {name: s.getsockname()[1] for name, s in zip(names, sockets, strict=True)}
    finally:
        for s in sockets:
            s.close()


def node_command(node: str, header_cfg: dict, run_dir: Path, ports: dict, start_ms: int,
                 seed: int, commit: str, run: str, restart: bool = False,
                 trace: bool = True, topic: str = "isrlab") -> list[str]:
    cmd = [sys.executable, "-m", "impl.tcp.node", "--role", node,
           "--config", json.dumps(header_cfg, sort_keys=True), "--run-dir", str(run_dir),
           "--ports", json.dumps(ports, sort_keys=True), "--start-ms", str(start_ms),
           "--seed", str(seed), "--commit", commit, "--run", run, "--topic", topic]
    if restart:
        cmd.append("--restart")
    if not trace:
        cmd.append("--no-trace")
    return cmd


class ClusterError(Exception):
    """The run could not be set up or a node failed it: one line for the user."""


def node_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


class Processes:
    """The node processes of one run; `kill_all` works with or without a trio loop. Each is
    handed `key`, the run's, on its stdin."""

    def __init__(self, run_dir: Path, key: bytes):
        assert len(key) == KEY_BYTES, "a run key is KEY_BYTES random bytes"
        self.run_dir = run_dir
        self.key = key
        self.procs: dict[str, trio.Process] = {}
        self.every: list[trio.Process] = []  # every process ever spawned, for the last cleanup
        self.paused: set[str] = set()

    async def spawn(self, node: str, cmd: list[str], timeout_s: float = 20) -> None:
        log_path = self.run_dir / f"{node}.log"
        with open(log_path, "ab") as err:
            proc = await trio.lowlevel.open_process(cmd, stdin=subprocess.PIPE,
                                                    stdout=subprocess.PIPE, stderr=err,
                                                    env=node_env(), cwd=str(REPO_ROOT))
        self.procs[node] = proc
        self.every.append(proc)
        try:
            await proc.stdin.send_all(self.key.hex().encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # it died at once: said below, from its log
        finally:
            await proc.stdin.aclose()
        seen = b""
        with trio.move_on_after(timeout_s):
            while b"ready\n" not in seen:
                chunk = await proc.stdout.receive_some(256)
                if not chunk:
                    raise ClusterError(f"{node} exited before it was ready: "
                                       f"{_last_line(log_path)} (log: {log_path})")
                seen += chunk
            await proc.stdout.aclose()
            return
        raise ClusterError(f"{node} was not ready within {timeout_s:g} s (log: {log_path})")

    def alive(self, node: str) -> bool:
        proc = self.procs.get(node)
        return proc is not None and proc.returncode is None

    def signal(self, node: str, sig: int) -> None:
        if self.alive(node):
            self.procs[node].send_signal(sig)

    def kill_all(self, grace_s: float = 2.0) -> None:
        """SIGCONT + SIGTERM, then SIGKILL what is still there; reap everything. Works outside
        trio (by pid: trio's process objects need its loop once a process has exited) and
        never raises."""
        pids = [proc.pid for proc in self.every]
        for pid in pids:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                _kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_running(pid) for pid in pids):
            time.sleep(0.02)
        for pid in pids:
            if _running(pid):
                _kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(_running(pid) for pid in pids):
            time.sleep(0.02)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _running(pid: int) -> bool:
    """Reap `pid` if it has exited; True while it runs."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return False  # already reaped
    return done == 0


def _last_line(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1][:200] if lines else "no output"


async def control(port: int, body: dict, key: bytes, node: str,
                  timeout_s: float = 3.0) -> dict | None:
    """One control frame to `node` listening on `port`; its answer, or None if it did not
    answer in time (or did not prove it is that node of this run)."""
    with trio.move_on_after(timeout_s):
        try:
            stream = await open_peer(port, SUPERVISOR, node, key, timeout_s)
        except (HandshakeFailed, OSError, trio.BrokenResourceError):
            return None
        try:
            async with stream:
                await stream.send_all(encode_frame(body))
                decoder = FrameDecoder()
                while True:
                    data = await stream.receive_some(65536)
                    if not data:
                        return None
                    decoder.feed(data)
                    for frame in decoder.frames():
                        if isinstance(frame, dict):
                            return frame
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError, FrameTooLarge):
            return None
    return None


def crash_line(config: ClusterConfig, run_dir: Path, header: dict, node: str,
               time_ms: int) -> None:
    """Append `BrokerCrash` to a killed broker's trace, the state read back from its disk."""
    broker = int(node[1:])
    storage = BrokerStorage(FileDisk(run_dir / node / "data"), config.partitions,
                            checkpoint_fsync=False)
    core = BrokerCore(broker, config, storage.recovered())
    state = {"replicas": [core.replica_state(r) for r in core.replicas]}
    torn_bytes = sum(r.torn_bytes for r in storage.reports)
    storage.disk.close()
    trace = FileTrace(node, header, run_dir / f"{node}.ndjson", resume=True)
    trace.event(time_ms, A.BROKER_CRASH, {"broker": broker}, Code.CRASHED, {}, state, [], None,
                {"torn_bytes": torn_bytes})
    trace.close()


class Cluster:
    """One TCP run (see the module docstring)."""

    def __init__(self, config: ClusterConfig, options: TcpOptions, run_dir: Path):
        late = [f for f in options.faults if options.duration_ms and f[0] >= options.duration_ms]
        if late:
            # A fault the run never reaches would pass for one it survived.
            raise ClusterError(f"--fault {':'.join(map(str, late[0]))}: starts after the "
                               f"run's {options.duration_ms} ms")
        self.config = config
        self.options = options
        self.run_dir = run_dir
        self.brokers = [broker_node(b) for b in range(config.brokers)]
        self.header_cfg = header_config(config, options)
        self.run_name = f"seed-{options.seed}"
        self.header = {"seed": options.seed, "commit": options.commit, "mode": "tcp",
                       "run": self.run_name, "config": self.header_cfg}
        self.ports = pick_ports([*self.brokers, "meta", "producer", "consumer"],
                                options.base_port)
        if options.kafka_port_base is not None:
            self.ports.update(pick_ports([f"kafka-{b}" for b in self.brokers],
                                         options.kafka_port_base, "--port-base"))
        self.key = secrets.token_bytes(KEY_BYTES)
        self.procs = Processes(run_dir, self.key)
        self.down: set[str] = set()  # killed by the nemesis and not yet restarted
        self.failures: list[dict] = []  # nodes that exited when nothing asked them to
        self.stopping = False
        self.start_ms = 0
        self.rng = random.Random(options.seed)
        self.workload_rng = random.Random(f"{options.seed}/workload")
        self.stats = {"crashes": 0, "pauses": 0, "partitions": 0, "message_faults": 0}
        self.active: dict[tuple[str, str], object] = {}  # (kind, target) -> what heals it
        self.faults_scope = trio.CancelScope()
        self.faults_done = trio.Event()  # the fault task has ended (set at once without one)
        self.healed_at: int | None = None  # when the liveness phase began
        self.acked_since_heal: set[int] = set()  # partitions with a write acknowledged since
        self.live_after_ms: int | None = None
        self.not_live: list[str] = []  # what kept the cluster from recovering, if it did not
        self.clients: dict[str, Node] = {}
        self.nemesis_trace: FileTrace | None = None
        self.blocked_target: str | None = None

    def now(self) -> int:
        return wall_ms() - self.start_ms

    async def control(self, node: str, body: dict) -> dict | None:
        return await control(self.ports[node], body, self.key, node)

    def command(self, node: str, restart: bool = False) -> list[str]:
        o = self.options
        return node_command(node, self.header_cfg, self.run_dir, self.ports, self.start_ms,
                            o.seed, o.commit, self.run_name, restart, o.trace, o.topic)

    def write_kafka_info(self) -> None:
        """What a Kafka client workload needs to write its history beside the traces
        (impl/kafka/clients.py)."""
        # Each broker's pid, as `isrlab cluster kafka` lists its nodes, so that a client-level
        # suite can stop or kill a broker itself (model_check/conformance/wire_suite.py).
        nodes = [{"id": b, "port": self.ports[f"kafka-{node}"],
                  "pid": self.procs.procs[node].pid if node in self.procs.procs else None}
                 for b, node in enumerate(self.brokers)]
        info = {"bootstrap_servers": self.bootstrap_servers(), "topic": self.options.topic,
                "partitions": self.config.partitions, "start_ms": self.start_ms,
                "header": self.header, "nodes": nodes}
        (self.run_dir / "kafka.json").write_text(json.dumps(info, sort_keys=True) + "\n")

    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{self.ports[f'kafka-{b}']}" for b in self.brokers)

    async def run(self) -> dict:
        o = self.options
        self.run_dir.mkdir(parents=True, exist_ok=True)
        for stale in [*self.run_dir.glob("*.ndjson"), *self.run_dir.glob("*.log"),
                      *self.run_dir.glob("kafka.json")]:
            stale.unlink()
        for node in ["meta", *self.brokers]:
            shutil.rmtree(self.run_dir / node, ignore_errors=True)
        async with trio.open_nursery() as nursery:
            for node in ["meta", *self.brokers]:
                nursery.start_soon(self.procs.spawn, node, self.command(node))
        self.start_ms = wall_ms() + o.startup_ms
        for node in ["meta", *self.brokers]:
            answer = await self.control(node, {"ctl": "go", "start_ms": self.start_ms})
            if answer is None:
                raise ClusterError(f"{node} did not answer `go`")
        self.nemesis_trace = FileTrace("nemesis", self.header, self.run_dir / "nemesis.ndjson",
                                       enabled=o.trace)
        producer = ProducerCore(self.config.partitions, self.config.acks,
                                self.config.request_timeout_ms)
        consumer = ConsumerCore(self.config.partitions, o.poll_interval_ms,
                                self.config.request_timeout_ms)
        for name, core in (("producer", producer), ("consumer", consumer)):
            trace = FileTrace(name, self.header, self.run_dir / f"{name}.ndjson",
                              enabled=o.trace)
            self.clients[name] = Node(name, core, trace, self.ports, self.start_ms,
                                      key=self.key)
        try:
            async with trio.open_nursery() as nursery:
                for name, node in self.clients.items():
                    node.nursery = nursery
                    try:
                        await nursery.start(node.serve)
                    except OSError as error:
                        raise ClusterError(f"{name} cannot listen on port "
                                           f"{self.ports[name]}: {error.strerror}") from None
                nursery.start_soon(self.watchdog)
                wait_ms = -self.now()
                if wait_ms > 0:
                    await trio.sleep(wait_ms / 1000)
                if o.workload:  # without it the consumer would poll for nobody
                    for node in self.clients.values():
                        nursery.start_soon(node.timer_loop)
                    nursery.start_soon(self.workload)
                if o.faults or o.nemesis:
                    nursery.start_soon(self.faults)
                else:
                    self.faults_done.set()
                if o.kafka_port_base is not None:
                    self.write_kafka_info()
                    print(f"bootstrap.servers={self.bootstrap_servers()}", flush=True)
                if o.duration_ms:
                    await trio.sleep(max(0, o.duration_ms - self.now()) / 1000)
                    if o.liveness_ms and o.workload:
                        await self.liveness()
                else:
                    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                        async for _ in signals:
                            break
                nursery.cancel_scope.cancel()
            await self.stop_all()
        finally:
            for node in self.clients.values():
                node.trace.close()
            self.nemesis_trace.close()
        return self.summary(producer, consumer)

    async def watchdog(self) -> None:
        """A node that exits when nothing asked it to fails the run."""
        while True:
            await trio.sleep(0.05)
            self.notice_failures()

    def notice_failures(self) -> None:
        for node, proc in self.procs.procs.items():
            code = proc.returncode
            if code is not None and node not in self.down and not (
                    self.stopping and code == 0) and not any(
                    f["node"] == node and f["pid"] == proc.pid for f in self.failures):
                self.failures.append({"node": node, "pid": proc.pid, "exit": code,
                                      "time_ms": self.now(),
                                      "log": str(self.run_dir / f"{node}.log")})

    async def stop_all(self) -> None:
        for node in list(self.procs.procs):
            self.procs.signal(node, signal.SIGCONT)

        async def stop(node: str) -> None:
            if not self.procs.alive(node):
                return
            await self.control(node, {"ctl": "stop"})
            with trio.move_on_after(5):
                await self.procs.procs[node].wait()

        async def quiet(node: str) -> None:
            if self.procs.alive(node):
                await self.control(node, {"ctl": "quiet"})

        self.notice_failures()
        self.stopping = True
        for client in self.clients.values():
            client.quiet = True
        async with trio.open_nursery() as nursery:  # no node reacts to another's stop
            for node in list(self.procs.procs):
                nursery.start_soon(quiet, node)
        async with trio.open_nursery() as nursery:
            for node in list(self.procs.procs):
                nursery.start_soon(stop, node)
        self.notice_failures()

    # Workload and nemesis ------------------------------------------------------------------------

    async def workload(self) -> None:
        producer = self.clients["producer"]
        interval = self.options.write_interval_ms
        value = 1
        next_at = interval
        while True:
            await trio.sleep(max(0, next_at - self.now()) / 1000)
            producer.handle(lambda core, now, v=value: core.invoke(now, v))
            producer.trace.flush()
            value += 1
            next_at = self.now() + interval // 2 + self.workload_rng.randint(0, interval)

    def nemesis_line(self, f: str, target: str, **extra) -> None:
        self.nemesis_trace.other({"kind": "nemesis", "time_ms": self.now(), "f": f,
                                  "target": target, **extra})
        self.nemesis_trace.flush()

    async def faults(self) -> None:
        """The scripted faults or the seeded nemesis, until the liveness phase cancels them."""
        try:
            with self.faults_scope:
                if self.options.faults:
                    await self.scripted_faults()
                else:
                    await self.nemesis()
        finally:
            self.faults_done.set()

    async def nemesis(self) -> None:
        o = self.options
        while True:
            await trio.sleep(self.rng.randint(*o.fault_interval_ms) / 1000)
            kind = self.rng.choice(o.nemesis)
            target = self.rng.choice(self.brokers)
            length = self.rng.randint(*o.fault_length_ms)
            await self.fault(kind, target, length)

    async def scripted_faults(self) -> None:
        """`TcpOptions.faults` in order, instead of the seeded nemesis (for tests)."""
        for at_ms, kind, target, length in self.options.faults:
            await trio.sleep(max(0, at_ms - self.now()) / 1000)
            await self.fault(kind, target, length)

    async def fault(self, kind: str, target: str, length: int) -> None:
        """One fault for `length` ms. Starting and healing are shielded (a crash is not left
        half done); a fault cut short by the liveness phase is in `active`, which heals it."""
        with trio.CancelScope(shield=True):
            self.active[(kind, target)] = await self.inject(kind, target)
        await trio.sleep(length / 1000)
        with trio.CancelScope(shield=True):
            await self.active.pop((kind, target))()

    async def liveness(self) -> None:
        """Heal every fault, then wait until the cluster has recovered or `liveness_ms` has
        passed (see the module docstring)."""
        self.faults_scope.cancel()
        await self.faults_done.wait()  # a fault being started or healed is seen through
        with trio.CancelScope(shield=True):
            for key in list(self.active):
                await self.active.pop(key)()
        self.healed_at = self.now()
        self.clients["producer"].watch = self.watch_acks
        deadline = self.healed_at + self.options.liveness_ms
        while True:
            problems = await self.not_recovered()
            now = self.now()
            if not problems:
                self.live_after_ms = now - self.healed_at
                return
            if now >= deadline:
                self.not_live = problems
                return
            await trio.sleep(min(LIVENESS_CHECK_MS, deadline - now) / 1000)

    def watch_acks(self, effects: list) -> None:
        for effect in effects:
            if type(effect) is History and effect.body.get("type") == "ok":
                self.acked_since_heal.add(effect.body["partition"])

    async def not_recovered(self) -> list[str]:
        """What keeps the cluster from having recovered: per partition, a leader missing, a
        replica missing from the store's ISR, or no write acknowledged since the heal."""
        answer = await self.control("meta", {"ctl": "view"})
        view = answer.get("ack") if answer else None
        if not isinstance(view, dict):
            return ["the metadata store did not answer"]
        problems = []
        for p in range(self.config.partitions):
            leader, isr = view["leaders"][str(p)], view["isr"][str(p)]
            replicas = sorted(self.config.assignment(p))
            if leader < 0 or not self.procs.alive(broker_node(leader)):
                problems.append(f"p{p}: no leader")
            elif sorted(isr) != replicas:
                problems.append(f"p{p}: ISR {sorted(isr)} of {replicas}")
            elif p not in self.acked_since_heal:
                problems.append(f"p{p}: no write acknowledged")
        return problems

    async def inject(self, kind: str, target: str):
        """Start a fault; return the coroutine function that ends it."""
        others = [n for n in [*self.brokers, "meta", "producer", "consumer"] if n != target]

        async def nothing() -> None:
            return None

        if kind == "crash":
            self.stats["crashes"] += 1
            self.procs.signal(target, signal.SIGSTOP)
            await trio.sleep(self.options.crash_drain_ms / 1000)
            time_ms = self.now()
            self.nemesis_trace.other({"kind": "nemesis", "time_ms": time_ms, "f": "crash",
                                      "target": target})
            self.nemesis_trace.flush()
            await trio.sleep(0.002)  # peers' reactions sort after the crash line
            self.down.add(target)
            self.procs.signal(target, signal.SIGKILL)
            await self.procs.procs[target].wait()
            if self.options.trace:
                crash_line(self.config, self.run_dir, self.header, target, time_ms)

            async def restart() -> None:
                self.nemesis_line("restart", target)
                await self.procs.spawn(target, self.command(target, restart=True))
                self.down.discard(target)
                if self.options.kafka_port_base is not None:
                    self.write_kafka_info()  # the restarted broker's pid
            return restart
        if kind == "pause":
            self.stats["pauses"] += 1
            self.nemesis_line("pause", target)
            self.procs.signal(target, signal.SIGSTOP)

            async def resume() -> None:
                self.nemesis_line("resume", target)
                self.procs.signal(target, signal.SIGCONT)
            return resume
        if kind == "partition":
            self.stats["partitions"] += 1
            cut_from = others if self.rng.random() < 0.5 else ["meta"]
            groups = [[target], sorted(others)]
            if cut_from == ["meta"]:
                groups = [[target, *sorted(n for n in others if n != "meta")], ["meta"]]
            self.nemesis_line("partition", target, groups=groups)
            await self.control(target, {"ctl": "block", "peers": cut_from})
            for peer in cut_from:
                if peer in self.clients:
                    self.clients[peer].disconnected(target)
                    self.clients[peer].trace.flush()
                else:
                    await self.control(peer, {"ctl": "disconnected", "peer": target})

            async def heal() -> None:
                self.nemesis_line("heal", target)
                await self.control(target, {"ctl": "unblock"})
            return heal
        if kind in MESSAGE_FAULTS:
            self.stats["message_faults"] += 1
            if kind == "delay":
                peer = self.rng.choice(sorted(n for n in (*self.brokers, "meta") if n != target))
                delay = self.rng.randint(20, 1500)
                self.nemesis_line("delay", target, groups=[[target], [peer]], delay_ms=delay)
                ends = {target: peer, peer: target}
                for node, other in ends.items():
                    await self.set_message_faults(node, {"delay": {other: delay}})
            else:
                # The rate is the seed's; the nemesis line format has no field for it.
                rate = self.rng.uniform(0.05, 0.5)
                self.nemesis_line(kind, target)
                if kind == "drop":  # the target drops what it sends and receives
                    ends = {target: {"drop": rate}}
                else:  # every other node duplicates what it sends the target
                    ends = {node: {"duplicate": {"*" if node == target else target: rate}}
                            for node in [*self.brokers, "meta", *self.clients]}
                for node, body in ends.items():
                    await self.set_message_faults(node, {**body,
                                                         "seed": self.rng.randrange(1 << 31)})

            async def clear() -> None:
                self.nemesis_line("heal", target)
                for node in ends:
                    await self.set_message_faults(node, {})
            return clear
        if kind == "slow":
            delay = self.rng.randint(20, 200)
            self.nemesis_line("slow", target, delay_ms=delay)
            await self.control(target, {"ctl": "slow", "delay_ms": delay})

            async def fast() -> None:
                self.nemesis_line("heal", target)
                await self.control(target, {"ctl": "slow", "delay_ms": 0})
            return fast
        return nothing

    async def set_message_faults(self, node: str, body: dict) -> None:
        """The `message-faults` control (node.py) to a node process or an in-process client."""
        if node in self.clients:
            self.clients[node].set_message_faults(body)
        else:
            await self.control(node, {"ctl": "message-faults", **body})

    # Results -------------------------------------------------------------------------------------

    def summary(self, producer: ProducerCore, consumer: ConsumerCore) -> dict:
        counts = {"elections": 0, "isr_shrinks": 0, "isr_expands": 0, "dropped_messages": 0,
                  "events": 0}
        leaders: dict[str, int] = {str(p): self.config.assignment(p)[0]
                                   for p in range(self.config.partitions)}
        for path in sorted(self.run_dir.glob("*.ndjson")):
            for line in path.read_text(encoding="utf-8").splitlines():
                body = json.loads(line)
                if body.get("kind") != "event":
                    continue
                action = body["action"]
                if action == A.NETWORK_DROP:
                    counts["dropped_messages"] += 1
                    continue
                if action == A.BROKER_CRASH:
                    continue
                counts["events"] += 1
                outcome_args = body.get("outcome_args", {})
                for key, n in event_counts(action, body["outcome"], outcome_args).items():
                    counts[key] += n
                if body["node"] == "meta":
                    for ps in (body.get("state") or {}).get("partitions", ()):
                        leaders[str(ps["partition"])] = ps["leader"]
        meta_final = self._final("meta")
        if meta_final:
            leaders = meta_final["leaders"]
        final_logs = {}
        for p, leader in leaders.items():
            view = self._final(broker_node(leader)) if leader >= 0 else None
            if view and p in view["partitions"]:
                final_logs[p] = view["partitions"][p]["committed"]
        discarded = sum(node.stats["duplicates_discarded"] for node in self.clients.values())
        for node in ["meta", *self.brokers]:
            discarded += (self._final(node) or {}).get("duplicates_discarded", 0)
        summary = {
            **counts, **self.stats,
            "duplicates_discarded": discarded,
            "duration_ms": self.options.duration_ms,
            "leaders": leaders,
            "writes_acked": producer.stats["ok"],
            "writes_failed": producer.stats["fail"],
            "writes_unknown": producer.stats["info"],
            "reads": consumer.reads,
            "unclean_elections": meta_final.get("unclean_elections", 0) if meta_final else 0,
            "node_failures": [{k: f[k] for k in ("node", "exit", "time_ms", "log")}
                              for f in self.failures],
        }
        summary["end_ms"] = self.options.duration_ms
        if self.healed_at is not None:
            summary["healed_ms"] = self.healed_at
            summary["end_ms"] = self.healed_at + (self.options.liveness_ms
                                                  if self.live_after_ms is None
                                                  else self.live_after_ms)
            if self.live_after_ms is not None:
                summary["live_after_ms"] = self.live_after_ms
            else:
                waited = self.options.liveness_ms
                summary["liveness"] = "; ".join(f"{problem} {waited} ms after the faults healed"
                                                for problem in self.not_live)
        command = reproduce_command(self.config, self.options, mode="tcp")
        run_json = {"run": self.run_name, "seed": self.options.seed, "mode": "tcp",
                    "commit": self.options.commit, "config": self.header_cfg,
                    "summary": summary, "command": command}
        path = self.run_dir / "run.json"
        try:
            # Beside run.json, not in it: a long run's logs made one line too long to read.
            run_json.update(write_final_logs(self.run_dir, final_logs))
            path.write_text(dumps(run_json) + "\n", encoding="utf-8")
        except OSError as error:
            raise ClusterError(f"cannot write {path}: {error.strerror}") from None
        return summary

    def _final(self, node: str) -> dict | None:
        path = self.run_dir / node / "final.json"
        if not self.procs.procs.get(node) or not path.is_file():
            return None
        if self.procs.procs[node].returncode != 0:
            return None
        return json.loads(path.read_text(encoding="utf-8"))


def run_cluster(config: ClusterConfig, options: TcpOptions, out_dir: Path | str) -> dict:
    """Run the cluster for `options.duration_ms` and write the run directory; the summary has
    the simulator's keys. No node process outlives this call, however it ends."""
    cluster = Cluster(config, options, Path(out_dir))
    try:
        cluster.run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ClusterError(f"--trace-out {out_dir}: {error.strerror}") from None
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started as a background job of a non-interactive shell, the process inherits SIGINT
        # ignored, and `kill -INT`, this supervisor's documented stop, would do nothing.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return trio.run(cluster.run)
    except BaseExceptionGroup as group:
        matched, _ = group.split(ClusterError)
        if matched is None:
            raise
        while isinstance(matched, BaseExceptionGroup):
            matched = matched.exceptions[0]
        raise matched from None
    finally:
        cluster.procs.kill_all()
