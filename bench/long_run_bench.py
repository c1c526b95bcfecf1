"""A long honest run over TCP, replayed: N acknowledged writes from a real Kafka client to the
traced reference broker, then `isrlab replay` of the whole run.

    .venv/bin/python bench/long_run_bench.py [--records 1000000] [--acks all] [--keep]

One confluent-kafka producer (kafka_bench.py's settings) writes `--records` 100-byte records
to partition 0 of a 3-broker cluster (replication 3, min ISR 2), traced, and waits for every
delivery report; the cluster is then stopped and `isrlab replay` judges the run in a child
process. Printed: writes acknowledged and failed, the produce window's wall time, the run's
trace bytes and longest line (replay refuses lines over 1 MiB, so a run that grows one line
with its length stops being replayable), replay's verdict line, exit code, wall and CPU
seconds, peak RSS and events per second. Exit 0 only if every write was acknowledged and
replay accepted the run. The run directory is removed unless `--keep`.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import kafka_bench  # noqa: E402
from kafka_bench import (  # noqa: E402
    FLUSH_TIMEOUT_S,
    BenchError,
    Cluster,
    _count,
    producer_config,
    send,
)

REPLAY_TIMEOUT_S = 3600
# At its end the cluster reads its whole trace to count what happened (about a minute per
# gigabyte): kafka_bench's grace would kill it before it wrote run.json.
kafka_bench.STOP_GRACE_S["reference"] = 1800


def produce(servers: str, acks: str, records: int) -> tuple[int, int, float, list[str]]:
    """(acknowledged, failed, wall seconds, the first error) for `records` writes."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(servers, acks))
    delivered, first_error = [0, 0], []

    def report(err, _msg):
        delivered[0 if err is None else 1] += 1
        if err is not None and not first_error:
            first_error.append(err.str())

    start = time.perf_counter()
    try:
        send(producer, records, report)
        left = producer.flush(FLUSH_TIMEOUT_S)
    finally:
        producer.purge()
        producer.flush(1)
    if left:
        raise BenchError(f"{left} records undelivered after {FLUSH_TIMEOUT_S} s")
    return delivered[0], delivered[1], time.perf_counter() - start, first_error


def trace_figures(run_dir: Path) -> tuple[int, int, str]:
    """Total bytes of the run's files, the longest line's bytes and the file holding it."""
    total, longest, where = 0, 0, ""
    for path in sorted(run_dir.iterdir()):
        if not path.is_file():
            continue
        total += path.stat().st_size
        with open(path, "rb") as f:
            for line in f:
                if len(line) > longest:
                    longest, where = len(line), path.name
    return total, longest, where


def replay(run_dir: Path) -> tuple[int, str, float, float, int, str]:
    """(exit code, verdict line, wall s, CPU s, peak RSS in KiB, stderr's last line)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "isrlab", "replay", str(run_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=REPLAY_TIMEOUT_S)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [x for x in done.stdout.splitlines() if x.strip()]
    errors = [x for x in done.stderr.splitlines() if x.strip()]
    return (done.returncode, lines[0] if lines else "", wall, cpu, after.ru_maxrss,
            errors[-1] if errors else "")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=_count, default=1_000_000)
    p.add_argument("--acks", choices=("all", "1"), default="all")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    args = p.parse_args(argv)
    try:
        with Cluster("reference", args.acks, True) as cluster:
            ok, failed, wall, first_error = produce(cluster.bootstrap_servers(), args.acks,
                                                    args.records)
    except BenchError as error:
        print(f"long_run_bench: {error}", file=sys.stderr)
        return 2
    run_dir = cluster.run_dir / "run"
    print(f"produce: {ok:,} acknowledged, {failed:,} failed of {args.records:,} "
          f"(acks={args.acks}) in {wall:.1f} s: {ok / wall:,.0f} records/s"
          + (f"; first error: {first_error[0]}" if first_error else ""))
    total, longest, where = trace_figures(run_dir)
    print(f"run: {total / 1e6:,.1f} MB in {run_dir}; longest line {longest:,} bytes ({where})")
    code, verdict, rwall, rcpu, rss_kib, last_error = replay(run_dir)
    words = verdict.replace(",", "").split()
    events = next((int(w) for w in words if w.isdigit()), 0)
    # The verdict says how long replay itself took ("... in 1.16 s"), start-up aside.
    took = float(words[-2]) if len(words) > 2 and words[-1] == "s" and words[-3] == "in" \
        else rwall
    print(f"replay: exit {code}, {rwall:.1f} s wall, {rcpu:.1f} s CPU, peak RSS "
          f"{rss_kib / 1024:,.0f} MB" + (f", {events / took:,.0f} events/s" if events else ""))
    print(f"  {verdict or last_error}")
    if not args.keep:
        cluster.remove()
    return 0 if code == 0 and failed == 0 and ok == args.records else 1


if __name__ == "__main__":
    sys.exit(main())
