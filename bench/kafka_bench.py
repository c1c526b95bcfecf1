"""Real-client throughput side by side: one confluent-kafka (librdkafka) producer writing
100-byte records to the reference broker and to Apache Kafka 4.4, acks=all and acks=1, in one run.

    .venv/bin/python bench/kafka_bench.py [--targets reference,kafka] [--acks all,1]
        [--records 300000] [--warmup 50000] [--no-trace]

Each (acks level, target) pair gets a fresh cluster of 3 brokers, 1 partition, replication 3,
min.insync.replicas 2, all on 127.0.0.1:
- reference: `impl.tcp.run_cluster` in a child process with Kafka's protocol served on free
  ports (the cluster's acks set to the client's), traced unless --no-trace;
- kafka: `isrlab cluster kafka --duration 0` (three combined KRaft JVMs, apache_kafka/).
Both print `bootstrap.servers=` once the partition has a full ISR. The runs go acks level by
acks level, the targets one after the other within each, so that the pairs compared are close
in time. The producer's settings are the same for both (linger 5 ms, idempotence off, a
200,000-record queue, 300 s delivery timeout); only the bootstrap servers differ. `--warmup`
records are sent and delivered first (metadata, connections, the JVMs' JIT), then the clock
runs while `--records` records are sent as fast as librdkafka batches them and until every
delivery report is in.

CPU is read at the clock's start and stop, so start-up, warm-up and shutdown are outside the
window: the client's from getrusage(RUSAGE_SELF) (librdkafka's threads included), the
cluster's from /proc/<pid>/stat (utime + stime) of the cluster command and every process
under it (the reference's supervisor, metadata store and brokers; Kafka's launcher and JVMs),
and the whole machine's from /proc/stat, so that what other users took in the window is
printed too. Printed: records/s (wall) and CPU per record for the client and the cluster per
target and acks level, the CPU seconds beside the wall seconds, the ratios Kafka / reference
per acks level, and acks=all / acks=1 per target beside Kafka's 2014 figure (421,823 vs
786,980 records/s: 0.54).
"""

from __future__ import annotations

import argparse
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KAFKA_2014 = (421_823, 786_980)
TARGETS = ("reference", "kafka")
ACKS = ("all", "1")
TOPIC = "isrlab"
RECORD = b"x" * 100
START_TIMEOUT_S = {"reference": 120, "kafka": 300}
FLUSH_TIMEOUT_S = 300
STOP_GRACE_S = {"reference": 30, "kafka": 60}  # Kafka's launcher gives its JVMs 15 s
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A cluster that did not start or a run that could not be measured: one line."""


@dataclass(frozen=True, slots=True)
class Result:
    """One measured window."""

    target: str
    acks: str
    records: int
    ok: int
    errors: int
    wall_s: float
    client_cpu_s: float
    cluster_cpu_s: float
    machine_cpu_s: float  # every core's busy time in the window, whoever used it
    cluster_processes: int
    lost_processes: int  # processes that exited inside the window: their CPU is not counted

    @property
    def rate(self) -> float:
        return self.records / self.wall_s

    @property
    def client_cpu_us(self) -> float:
        return self.client_cpu_s / self.records * 1e6

    @property
    def cluster_cpu_us(self) -> float:
        return self.cluster_cpu_s / self.records * 1e6

    @property
    def others_cpu_s(self) -> float:
        # Clock ticks are 10 ms: on an idle machine the difference can come out a tick below 0.
        return max(0.0, self.machine_cpu_s - self.client_cpu_s - self.cluster_cpu_s)


# Processes and their CPU, from /proc ------------------------------------------------------

def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """(parent pid, start time, utime + stime in ticks, state) of `pid`, None once gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # the command name may hold spaces
    return int(fields[1]), int(fields[19]), int(fields[11]) + int(fields[12]), fields[0]


def process_tree(root: int) -> dict[tuple[int, int], int]:
    """(pid, start time) -> CPU ticks of `root` and every live process under it."""
    stats = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (s := _stat(int(entry))) is not None:
            stats[int(entry)] = s
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_) in stats.items():
        children.setdefault(ppid, []).append(pid)
    tree, todo = {}, [root] if root in stats else []
    while todo:
        pid = todo.pop()
        _, started, ticks, _ = stats[pid]
        tree[(pid, started)] = ticks
        todo.extend(children.get(pid, ()))
    return tree


def machine_busy_ticks() -> int:
    """Busy time of every core since boot (/proc/stat: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(fields[:8]) - fields[3] - fields[4]  # user..steal, less idle and iowait


def _alive(pid: int, started: int) -> bool:
    s = _stat(pid)
    return s is not None and s[1] == started and s[3] != "Z"


# One cluster ------------------------------------------------------------------------------

def cluster_command(target: str, acks: str, trace: bool, run_dir: Path) -> list[str]:
    if target == "reference":
        code = ("from impl.config import ClusterConfig; "
                "from impl.tcp import TcpOptions, run_cluster; "
                f"run_cluster(ClusterConfig(brokers=3, partitions=1, acks={acks!r}), "
                f"TcpOptions(duration_ms=0, kafka_port_base=0, workload=False, trace={trace}), "
                f"{str(run_dir)!r})")
        return [sys.executable, "-c", code]
    return [sys.executable, "-m", "isrlab.cli", "cluster", "kafka", "--duration", "0",
            "--brokers", "3", "--partitions", "1", "--topic", TOPIC, "--out", str(run_dir)]


class Cluster:
    """One cluster command as a child process; leaving the block stops it and everything it
    started (SIGTERM, then SIGKILL by pid), however the block ends."""

    def __init__(self, target: str, acks: str, trace: bool):
        self.target = target
        self.run_dir = Path(tempfile.mkdtemp(prefix=f"isrlab-kafka-bench-{target}-{acks}-"))
        self.command = cluster_command(target, acks, trace, self.run_dir / "run")
        self.log_path = self.run_dir / "cluster.log"
        self.proc: subprocess.Popen | None = None
        self.seen: dict[tuple[int, int], int] = {}  # every process seen under the command

    def __enter__(self) -> Cluster:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL, cwd=ROOT,
                                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
        return self

    def bootstrap_servers(self) -> str:
        """Wait for the `bootstrap.servers=` line the cluster prints once it serves."""
        deadline = time.monotonic() + START_TIMEOUT_S[self.target]
        buffered = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if not selector.select(max(0.0, deadline - time.monotonic())):
                    continue
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    raise BenchError(f"{self.target}: the cluster exited before it served: "
                                     f"{self.last_log_line()}")
                buffered += chunk
                for line in buffered.decode(errors="replace").splitlines():
                    if line.startswith("bootstrap.servers="):
                        self.note_processes()
                        return line.strip().split("=", 1)[1]
        raise BenchError(f"{self.target}: no bootstrap.servers line within "
                         f"{START_TIMEOUT_S[self.target]} s: {self.last_log_line()}")

    def note_processes(self) -> dict[tuple[int, int], int]:
        tree = process_tree(self.proc.pid)
        self.seen.update(tree)
        return tree

    def last_log_line(self) -> str:
        lines = [x for x in self.log_path.read_text(errors="replace").splitlines() if x.strip()]
        return f"{lines[-1][:300] if lines else '(no output)'} (log: {self.log_path})"

    def __exit__(self, *exc) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            self.note_processes()
            proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=STOP_GRACE_S[self.target])  # drained: no EPIPE at exit
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        # The command stops its nodes itself, and they die with it; this is for when it could not.
        left = [key for key in self.seen if key[0] != proc.pid and _alive(*key)]
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(*key) for key in left):
            time.sleep(0.05)

    def remove(self) -> None:
        shutil.rmtree(self.run_dir, ignore_errors=True)


# One measurement --------------------------------------------------------------------------

def producer_config(servers: str, acks: str) -> dict:
    """The one producer configuration, for every target. A record may wait behind up to
    200,000 others in the client's queue, 20 s or more for the traced reference broker, so the
    delivery timeout is the flush's 300 s (librdkafka's default): slowness shows as a lower
    rate, not as timed-out records."""
    return {"bootstrap.servers": servers, "acks": acks, "linger.ms": 5,
            "enable.idempotence": False, "queue.buffering.max.messages": 200_000,
            "message.timeout.ms": FLUSH_TIMEOUT_S * 1000, "log_level": 0}


def send(producer, count: int, report) -> None:
    """`count` records to partition 0, each reported to `report`; a full client queue waits."""
    for _ in range(count):
        while True:
            try:
                producer.produce(TOPIC, RECORD, partition=0, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)


def measure(target: str, acks: str, records: int, warmup: int, trace: bool) -> Result:
    from confluent_kafka import Producer

    with Cluster(target, acks, trace) as cluster:
        producer = Producer(producer_config(cluster.bootstrap_servers(), acks))
        delivered = [0, 0]
        first_error = []

        def report(err, _msg):
            delivered[0 if err is None else 1] += 1
            if err is not None and not first_error:
                first_error.append(err.str())

        try:
            send(producer, max(1, warmup), report)
            if producer.flush(FLUSH_TIMEOUT_S) or delivered[1]:
                raise BenchError(f"{target} acks={acks}: the warm-up was not delivered "
                                 f"({delivered[1]} errors, the first: {first_error[:1]})")
            delivered[:] = [0, 0]
            tree0 = cluster.note_processes()
            busy0 = machine_busy_ticks()
            cpu0 = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            send(producer, records, report)
            left = producer.flush(FLUSH_TIMEOUT_S)
            wall = time.perf_counter() - start
            cpu1 = resource.getrusage(resource.RUSAGE_SELF)
            busy1 = machine_busy_ticks()
            tree1 = cluster.note_processes()
            ok, errors = delivered
            if cluster.proc.poll() is not None:
                raise BenchError(f"{target} acks={acks}: the cluster exited in the measured "
                                 f"window: {cluster.last_log_line()}")
        finally:
            producer.purge()
            producer.flush(1)
    cluster.remove()
    if left:
        raise BenchError(f"{target} acks={acks}: {left} records undelivered after "
                         f"{FLUSH_TIMEOUT_S} s")
    ticks = sum(t - tree0.get(key, 0) for key, t in tree1.items())
    client = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return Result(target, acks, records, ok, errors, wall, client,
                  ticks / CLOCK_TICKS_PER_S, (busy1 - busy0) / CLOCK_TICKS_PER_S, len(tree1),
                  len(tree0.keys() - tree1.keys()))


# The report -------------------------------------------------------------------------------

def print_results(results: list[Result]) -> None:
    cores = os.cpu_count() or 1
    print(f"  {'target':<9} {'acks':<4} {'records/s':>9} {'ok':>8} {'errors':>6} "
          f"{'procs':>5} | wall s | CPU s: {'client':>6} {'cluster':>7} {'others':>6} "
          f"| CPU us/record: {'client':>6} {'cluster':>7}")
    for r in results:
        lost = (f"  ({r.lost_processes} cluster processes exited in the window)"
                if r.lost_processes else "")
        print(f"  {r.target:<9} {r.acks:<4} {r.rate:>9,.0f} {r.ok:>8,} {r.errors:>6} "
              f"{r.cluster_processes:>5} | {r.wall_s:>6.2f} | {'':>6} {r.client_cpu_s:>6.2f} "
              f"{r.cluster_cpu_s:>7.2f} {r.others_cpu_s:>6.2f} | {'':>14} "
              f"{r.client_cpu_us:>6.1f} {r.cluster_cpu_us:>7.1f}{lost}")
    print(f"  (procs: the cluster's processes; CPU s: core-seconds in the window, of {cores} x "
          "wall available; others: the machine's busy time less the client's and the "
          "cluster's)")
    by = {(r.target, r.acks): r for r in results}
    for acks in ACKS:
        ref, kafka = by.get(("reference", acks)), by.get(("kafka", acks))
        if ref and kafka:
            print(f"  kafka / reference, acks={acks}: records/s {kafka.rate / ref.rate:.2f}, "
                  f"cluster CPU per record {kafka.cluster_cpu_us / ref.cluster_cpu_us:.2f}, "
                  f"client CPU per record {kafka.client_cpu_us / ref.client_cpu_us:.2f}")
    ratios = [f"{t} {by[(t, 'all')].rate / by[(t, '1')].rate:.2f}" for t in TARGETS
              if (t, "all") in by and (t, "1") in by]
    if ratios:
        print(f"  acks=all / acks=1 records/s: {', '.join(ratios)} (Kafka 2014: "
              f"{KAFKA_2014[0] / KAFKA_2014[1]:.2f})")


def _choices(allowed: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        values = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise argparse.ArgumentTypeError(f"{text!r}: a comma-separated list of "
                                             f"{', '.join(allowed)}")
        return values
    parse.__name__ = "list"
    return parse


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive whole number")
    return int(text)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--targets", type=_choices(TARGETS), default=TARGETS,
                   help="reference, kafka or both (default both)")
    p.add_argument("--acks", type=_choices(ACKS), default=ACKS, help="default all,1")
    p.add_argument("--records", type=_count, default=300_000, help="measured per run")
    p.add_argument("--warmup", type=_count, default=50_000,
                   help="records delivered before the clock starts (default 50000)")
    p.add_argument("--no-trace", dest="trace", action="store_false",
                   help="the reference broker without its traces")
    args = p.parse_args()
    # Ctrl-C and SIGTERM end the bench through every cluster's clean-up (also when it was
    # started where SIGINT is ignored, as background jobs of a script are).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"confluent-kafka producer, 3 brokers, replication 3, 1 partition, "
          f"min.insync.replicas 2, 100-byte records, {args.records:,} measured after "
          f"{args.warmup:,} warm-up per run; reference traces {'on' if args.trace else 'off'}; "
          f"load average {load} (1, 5, 15 min) on {os.cpu_count()} cores at the start")
    print("  CPU window: clock start to last delivery (start-up, warm-up and shutdown "
          "excluded); cluster CPU from /proc/<pid>/stat of the cluster command and every "
          "process under it")
    results = []
    try:
        for acks in args.acks:
            for target in args.targets:
                results.append(measure(target, acks, args.records, args.warmup, args.trace))
    except BenchError as error:
        print(f"kafka_bench: {error}", file=sys.stderr)
        print_results(results)
        return 2
    except KeyboardInterrupt:
        print("kafka_bench: interrupted; every cluster stopped", file=sys.stderr)
        print_results(results)
        return 130
    print_results(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
