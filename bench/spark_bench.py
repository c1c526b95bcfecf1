"""Benchmark of the Spark analysis: ingestion events/s and analysis wall time, local[1] vs local[2].

    python bench/spark_bench.py                      # 10,000,000 events (about 4 GB of NDJSON)
    python bench/spark_bench.py --events 1000000     # a quicker run
    python bench/spark_bench.py --corpus DIR --keep  # reuse / keep the generated corpus
    python bench/spark_bench.py --from-sim --events 1000000 --masters local[2]  # real runs

The corpus is synthetic but follows docs/traces.md line for line (a campaign directory,
run-<seed>/ with one file per node, every file opening with its header): brokers append,
followers fetch, the metadata store changes leaders and ISRs after nemesis crashes, clients
send and read. It is generated from one printed seed, so two runs measure the same bytes. The
numbers it produces (lost writes, offline time) are a load for the jobs, not findings.

Each master runs in its own process (Spark has one session per JVM, and a master cannot change
once the JVM is up): ingestion (NDJSON -> Parquet), then the full report from Parquet. The
figures of both are printed side by side with their ratio. Beside each master's figures, the
same job on the corpus's first runs holding about `--beside` events (1,000,000 unless told):
how the time grows with the data, measured on the same traces.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from vocab.outcomes import Code  # noqa: E402
from vocab.trace import FORMAT, message_id  # noqa: E402

# The outcome code each synthetic transition reports (it always succeeds).
OUTCOME = {
    "ControllerHandleBrokerFailure": Code.BROKER_FAILURE_HANDLED,
    "ControllerElectLeader": Code.ELECTED_CLEAN,
    "FollowerSendFetch": Code.FETCH_SENT,
    "LeaderHandleFetch": Code.RECORDS_SENT,
    "FollowerHandleFetchResponse": Code.RECORDS_APPENDED,
    "LeaderExpandIsr": Code.ISR_CHANGED,
    "LeaderAppend": Code.APPENDED,
}

CONFIGS = (  # variant, acks, min.insync.replicas, unclean, flush interval, nemesis
    ("current", "all", 2, False, None, ["crash"]),
    ("current", "1", 1, False, None, ["crash"]),
    ("current", "0", 1, False, None, ["crash"]),
    ("current", "all", 1, True, None, ["crash"]),
    ("hw-truncation", "1", 1, False, None, ["crash", "partition"]),
    ("kip-101", "all", 2, False, 1000, ["crash"]),
)
BROKERS = 3
PARTITIONS = 3


class _Run:
    """One synthetic run: a tiny replication model that writes its trace lines as it goes."""

    def __init__(self, seed: int, config: tuple, events_max: int, out: Path) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        variant, acks, min_isr, unclean, flush, nemesis = config
        self.acks, self.min_isr, self.unclean = acks, min_isr, unclean
        self.events_max = events_max
        self.events = 0
        self.t = 0
        self.seq = {}
        self.value = 0
        self.config = {"acks": acks, "brokers": BROKERS, "duration_ms": 0,
                       "log_flush_interval_messages": flush, "min_insync_replicas": min_isr,
                       "nemesis": nemesis, "partitions": PARTITIONS,
                       "replica_lag_time_max_ms": 1000,
                       "unclean_leader_election_enable": unclean, "variant": variant}
        self.run_id = f"seed-{seed}"
        self.out = out
        self.files = {}
        self.alive = [True] * BROKERS
        # Per partition: the leader's log (values), each replica's log end, leader, epochs, isr.
        self.log = [[] for _ in range(PARTITIONS)]
        self.leo = [[0] * BROKERS for _ in range(PARTITIONS)]
        self.leader = [p % BROKERS for p in range(PARTITIONS)]
        self.leader_epoch = [1] * PARTITIONS
        self.partition_epoch = [1] * PARTITIONS
        self.isr = [list(range(BROKERS)) for _ in range(PARTITIONS)]

    def _file(self, node: str):
        handle = self.files.get(node)
        if handle is None:
            handle = open(self.out / f"{node}.ndjson", "w", encoding="utf-8")  # noqa: SIM115
            header = {"commit": "bench", "config": self.config, "format": FORMAT,
                      "kind": "header", "mode": "sim", "node": node, "run": self.run_id,
                      "seed": self.seed}
            handle.write(json.dumps(header, sort_keys=True, separators=(",", ":")) + "\n")
            self.files[node] = handle
        return handle

    def _next_seq(self, node: str) -> int:
        seq = self.seq.get(node, 0)
        self.seq[node] = seq + 1
        return seq

    def _replica_state(self, p: int, b: int) -> str:
        leo = self.leo[p][b]
        hw = min(self.leo[p][r] for r in self.isr[p]) if self.isr[p] else 0
        last = f"[{self.leader_epoch[p]},{self.log[p][leo - 1]}]" if leo else "null"
        isr = ",".join(map(str, self.isr[p]))
        return (f'{{"broker":{b},"epoch_cache":[[{self.leader_epoch[p]},0]],'
                f'"flushed_offset":{leo},"high_watermark":{min(hw, leo)},"isr":[{isr}],'
                f'"last":{last},"leader":{self.leader[p]},"leader_epoch":{self.leader_epoch[p]},'
                f'"log_end_offset":{leo},"partition":{p},'
                f'"partition_epoch":{self.partition_epoch[p]}}}')

    def _event(self, node: str, action: str, args: str, state: str,
               recv: str | None = None) -> int:
        seq = self._next_seq(node)
        recv_part = f'"recv":"{recv}",' if recv else ""
        self._file(node).write(
            f'{{"action":"{action}","args":{{{args}}},"kind":"event","node":"{node}",'
            f'"outcome":"{OUTCOME[action]}",{recv_part}"send":["{message_id(node, seq)}"],'
            f'"seq":{seq},'
            f'"state":{state},"time_ms":{self.t}}}\n')
        self.events += 1
        return seq

    def _history(self, node: str, body: str) -> int:
        seq = self._next_seq(node)
        self._file(node).write(
            f'{{{body},"kind":"history","node":"{node}","process":"{node}","seq":{seq},'
            f'"time_ms":{self.t}}}\n')
        return seq

    def _meta(self, action: str, args: str, partitions: list[int]) -> None:
        states = ",".join(
            f'{{"isr":[{",".join(map(str, self.isr[p]))}],"leader":{self.leader[p]},'
            f'"leader_epoch":{self.leader_epoch[p]},"partition":{p},'
            f'"partition_epoch":{self.partition_epoch[p]}}}' for p in partitions)
        registered = ",".join("1" if a else "-1" for a in self.alive)
        self._event("meta", action, args,
                    f'{{"partitions":[{states}],"registered":[{registered}]}}')

    def _nemesis(self, f: str, target: str) -> None:
        seq = self._next_seq("nemesis")
        self._file("nemesis").write(
            f'{{"f":"{f}","kind":"nemesis","node":"nemesis","seq":{seq},"target":"{target}",'
            f'"time_ms":{self.t}}}\n')

    def _elect(self, p: int, dead: int | None) -> None:
        live_isr = [b for b in self.isr[p] if self.alive[b] and b != dead]
        if live_isr:
            new = live_isr[0]
        elif self.unclean and any(self.alive):
            new = next(b for b in range(BROKERS) if self.alive[b])
            self.isr[p] = [new]
        else:
            new = -1
        self.leader[p] = new
        if new >= 0:
            self.leader_epoch[p] += 1
            # The new leader's log is the truth now: the others truncate to it.
            del self.log[p][self.leo[p][new]:]
            for b in range(BROKERS):
                self.leo[p][b] = min(self.leo[p][b], self.leo[p][new])

    def crash(self, broker: int) -> None:
        self._nemesis("crash", f"b{broker}")
        self.alive[broker] = False
        self.t += self.rng.randint(200, 600)
        changed = []
        for p in range(PARTITIONS):
            if broker in self.isr[p] and len(self.isr[p]) > 1:
                self.isr[p].remove(broker)
            if self.leader[p] == broker:
                self._elect(p, broker)
            self.partition_epoch[p] += 1
            changed.append(p)
        self._meta("ControllerHandleBrokerFailure", f'"broker":{broker}', changed)

    def restart(self, broker: int) -> None:
        self._nemesis("restart", f"b{broker}")
        self.alive[broker] = True
        self.t += self.rng.randint(100, 300)
        for p in range(PARTITIONS):
            if self.leader[p] < 0:
                self._elect(p, None)
                if self.leader[p] >= 0:
                    self.partition_epoch[p] += 1
                    self._meta("ControllerElectLeader", f'"partition":{p}', [p])
            if self.leader[p] >= 0 and self.leader[p] != broker:
                self.t += self.rng.randint(50, 500)
                self.fetch(p, broker)

    def fetch(self, p: int, follower: int) -> None:
        """One fetch round trip of `follower` from the leader of `p`; rejoin the ISR after."""
        leader = self.leader[p]
        node, f_node = f"b{leader}", f"b{follower}"
        args = f'"broker":{follower},"partition":{p}'
        s1 = self._event(f_node, "FollowerSendFetch", args, self._replica_state(p, follower))
        s2 = self._event(node, "LeaderHandleFetch",
                         f'"broker":{leader},"follower":{follower},"partition":{p}',
                         self._replica_state(p, leader), recv=message_id(f_node, s1))
        self.leo[p][follower] = self.leo[p][leader]
        self._event(f_node, "FollowerHandleFetchResponse", args,
                    self._replica_state(p, follower), recv=message_id(node, s2))
        if follower not in self.isr[p]:
            self.expand(p, follower)

    def expand(self, p: int, follower: int) -> None:
        leader = self.leader[p]
        self.isr[p].append(follower)
        self.isr[p].sort()
        self.partition_epoch[p] += 1
        args = f'"broker":{leader},"follower":{follower},"partition":{p}'
        self._event(f"b{leader}", "LeaderExpandIsr", args, self._replica_state(p, leader))
        self._meta("LeaderExpandIsr", args, [p])

    def send(self, p: int) -> None:
        self.value += 1
        value = self.value
        leader = self.leader[p]
        invoke = self._history("producer", f'"acks":"{self.acks}","f":"send","partition":{p},'
                                           f'"type":"invoke","value":{value}')
        if leader < 0 or (self.acks == "all" and len(self.isr[p]) < self.min_isr):
            error = "NOT_LEADER_OR_FOLLOWER" if leader < 0 else "NOT_ENOUGH_REPLICAS"
            self._history("producer", f'"acks":"{self.acks}","error":"{error}","f":"send",'
                                      f'"partition":{p},"type":"fail","value":{value}')
            return
        self.log[p].append(value)
        offset = len(self.log[p]) - 1
        self.leo[p][leader] = offset + 1
        node = f"b{leader}"
        self._event(node, "LeaderAppend", f'"broker":{leader},"partition":{p},"value":{value}',
                    self._replica_state(p, leader), recv=message_id("producer", invoke))
        # Followers fetch: always before an acks=all answer, now and then otherwise.
        for follower in range(BROKERS):
            if follower == leader or not self.alive[follower]:
                continue
            if self.acks != "all" and self.rng.random() < 0.3:
                continue
            self.fetch(p, follower)
        self.t += 1
        shown = -1 if self.acks == "0" else offset
        self._history("producer", f'"acks":"{self.acks}","f":"send","offset":{shown},'
                                  f'"partition":{p},"type":"ok","value":{value}')

    def read(self, p: int, start: int = 0) -> None:
        leader = self.leader[p]
        if leader < 0:
            return
        hw = min(self.leo[p][r] for r in self.isr[p])
        records = ",".join(f"[{o},{self.log[p][o]}]" for o in range(start, hw))
        self._history("consumer", f'"f":"read","partition":{p},"type":"invoke"')
        self._history("consumer", f'"f":"read","partition":{p},"records":[{records}],'
                                  f'"type":"ok"')

    def play(self) -> None:
        down: list[int] = []
        while self.events < self.events_max:
            roll = self.rng.random()
            if roll < 0.002 and len(down) < BROKERS - 1:
                broker = self.rng.choice([b for b in range(BROKERS) if self.alive[b]])
                self.crash(broker)
                down.append(broker)
            elif roll < 0.004 and down:
                self.restart(down.pop(0))
            elif roll < 0.02:
                p = self.rng.randrange(PARTITIONS)
                self.read(p, start=max(0, len(self.log[p]) - 20))
            else:
                self.send(self.rng.randrange(PARTITIONS))
            self.t += self.rng.randint(0, 3)
        while down:
            self.restart(down.pop(0))
        for p in range(PARTITIONS):
            self.read(p)
        for handle in self.files.values():
            handle.close()


def generate(out: Path, events: int, events_per_run: int, seed: int) -> tuple[int, int]:
    """Write a campaign of about `events` event lines to `out`; return (runs, bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    runs = max(1, events // events_per_run)
    for index in range(runs):
        run_seed = seed * 100_000 + index
        directory = out / f"run-{run_seed}"
        directory.mkdir(exist_ok=True)
        share = events // runs + (1 if index < events % runs else 0)
        _Run(run_seed, CONFIGS[index % len(CONFIGS)], share, directory).play()
    size = sum(f.stat().st_size for f in out.rglob("*.ndjson"))
    return runs, size


# Simulated events per simulated second of a 3-broker run under crash, partition and pause
# (bench/replay_bench.py: about 99,000 events in 240 s).
SIM_EVENTS_PER_SECOND = 410
SIM_CONFIGS = (dict(acks="all", min_insync_replicas=2), dict(acks="1"),
               dict(acks="all", unclean_leader_election_enable=True))


def _simulate_run(job: tuple[Path, int, int, int]) -> int:
    from impl.config import ClusterConfig
    from impl.sim import SimOptions, simulate

    out, run_seed, duration_ms, config = job
    sim = simulate(ClusterConfig(**SIM_CONFIGS[config]),
                   SimOptions(seed=run_seed, duration_ms=duration_ms,
                              nemesis=("crash", "partition", "pause")))
    sim.write(out / f"run-{run_seed}")
    return run_seed


def generate_sim(out: Path, events: int, events_per_run: int, seed: int) -> tuple[int, int]:
    """A campaign of real simulator runs (about `events` lines in all), on every core."""
    import multiprocessing

    out.mkdir(parents=True, exist_ok=True)
    runs = max(1, events // events_per_run)
    duration_ms = events_per_run * 1000 // SIM_EVENTS_PER_SECOND
    jobs = [(out, seed * 100_000 + i, duration_ms, i % len(SIM_CONFIGS)) for i in range(runs)]
    with multiprocessing.get_context("fork").Pool() as pool:
        for _ in pool.imap_unordered(_simulate_run, jobs):
            pass
    size = sum(f.stat().st_size for f in out.rglob("*.ndjson"))
    return runs, size


MEASURE = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
from pyspark_harness.session import get_session
from pyspark_harness.ingest import find_trace_files, ingest
from pyspark_harness.report import analyze
from model_check.conformance.replay import given_up_of
master, corpus, work = sys.argv[2], sys.argv[3], sys.argv[4]
t = time.perf_counter()
spark = get_session(master)
start_s = time.perf_counter() - t
files = find_trace_files([corpus], campaign=True)
result = ingest(spark, files, work + "/dataset")
t = time.perf_counter()
report = analyze(spark, work + "/dataset", work + "/report", given_up=given_up_of)
analysis_s = time.perf_counter() - t
print("RESULT " + json.dumps(dict(master=master, start_s=start_s, ingest_s=result.seconds,
      lines=result.lines, events=result.lines_by_table.get("events", 0),
      malformed=result.malformed, runs=report.runs, analysis_s=analysis_s)))
"""


def measure(master: str, corpus: Path) -> dict:
    """Ingest and analyse `corpus` in a fresh process on `master`; return its figures."""
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-") as work:
        done = subprocess.run([sys.executable, "-c", MEASURE, str(ROOT), master, str(corpus),
                               work], capture_output=True, text=True)
        for line in done.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        sys.stderr.write(done.stdout[-2000:] + done.stderr[-4000:])
        raise SystemExit(f"{master}: the measurement failed (exit {done.returncode})")


def _end_to_end(r: dict) -> float:
    return r["start_s"] + r["ingest_s"] + r["analysis_s"]


def _figures(r: dict) -> str:
    return (f"start {r['start_s']:.1f} s; ingest {r['lines']:,} lines ({r['events']:,} events) "
            f"in {r['ingest_s']:.1f} s = {r['events'] / r['ingest_s']:,.0f} events/s "
            f"({r['lines'] / r['ingest_s']:,.0f} lines/s); analysis of {r['runs']} runs from "
            f"Parquet {r['analysis_s']:.1f} s; end to end {_end_to_end(r):.1f} s")


def _first_runs(runs: list[Path]) -> Path:
    """A campaign directory of links to `runs` (removed at exit)."""
    import atexit

    part = Path(tempfile.mkdtemp(prefix="isrlab-corpus-part-"))
    atexit.register(shutil.rmtree, part, ignore_errors=True)
    for run in runs:
        (part / run.name).symlink_to(run.resolve(), target_is_directory=True)
    return part


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="event lines")
    parser.add_argument("--events-per-run", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--corpus", type=Path, help="corpus directory (generated if absent)")
    parser.add_argument("--keep", action="store_true", help="keep a generated corpus")
    parser.add_argument("--masters", default="local[1],local[2]")
    parser.add_argument("--beside", type=int, default=1_000_000, metavar="EVENTS",
                        help="also measure, on each master, the first runs of the same corpus "
                        "that hold about this many events (a share of its runs: EVENTS / "
                        "--events, so give --events with a --corpus of another size), and "
                        "print both figures side by side (0: do not)")
    parser.add_argument("--from-sim", action="store_true",
                        help="generate the corpus with the reference broker's simulator "
                        "(crash, partition, pause; acks all / 1 / unclean) instead of the "
                        "synthetic generator")
    args = parser.parse_args()

    corpus = args.corpus or Path(tempfile.mkdtemp(prefix="isrlab-corpus-"))
    print(f"seed {args.seed}; corpus {corpus}")
    if not any(corpus.glob("run-*")):
        t = time.perf_counter()
        make = generate_sim if args.from_sim else generate
        runs, size = make(corpus, args.events, args.events_per_run, args.seed)
        print(f"generated {runs} {'simulated' if args.from_sim else 'synthetic'} runs, "
              f"{size / 1e9:.2f} GB of NDJSON in {time.perf_counter() - t:.0f} s")
    results = []
    runs = sorted(d for d in corpus.glob("run-*") if d.is_dir())
    part = max(1, round(len(runs) * args.beside / args.events)) if args.beside else 0
    try:
        for master in args.masters.split(","):
            r = measure(master, corpus)
            results.append(r)
            print(f"{master:>9}: {_figures(r)}", flush=True)
            if 0 < part < len(runs):
                small = measure(master, _first_runs(runs[:part]))
                print(f"{'':>9}  the first {part} of its {len(runs)} runs: {_figures(small)}")
                print(f"{'':>9}  {r['events'] / small['events']:.1f}x the events took "
                      f"{_end_to_end(r) / _end_to_end(small):.1f}x as long end to end "
                      f"({_end_to_end(small):.1f} s -> {_end_to_end(r):.1f} s)", flush=True)
    finally:
        if args.corpus is None and not args.keep:
            shutil.rmtree(corpus, ignore_errors=True)
    if len(results) == 2:
        a, b = results
        print(f"{b['master']} / {a['master']}: ingest {a['ingest_s'] / b['ingest_s']:.2f}x "
              f"faster, analysis {a['analysis_s'] / b['analysis_s']:.2f}x faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
