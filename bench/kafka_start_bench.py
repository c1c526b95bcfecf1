"""Start-up of a real Apache Kafka cluster on this machine: format, first JVM to a full ISR,
RSS per node, stop; CPU beside wall time.

    .venv/bin/python bench/kafka_start_bench.py [--brokers 3] [--times 3] [--heap-mb 512]

Each time: a fresh run directory, `StorageTool format` of every node (in parallel), every
node started (`kafka.Kafka`, combined KRaft broker+controller), the topic created with
--brokers partitions of replication --brokers, and the clock stopped when every partition
reports a full ISR (apache_kafka/cluster.py). RSS is read from /proc once the ISR is full,
then after 1,000 acks=all writes of 100 bytes through confluent-kafka (the JIT and the page
cache warm). The stop is SIGTERM (Kafka's controlled shutdown) with SIGKILL after 15 s.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _jvm_cpu(pids: list[int]) -> float:
    """utime + stime of the processes, in seconds (/proc/PID/stat)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / tick


def once(brokers: int, heap_mb: int) -> dict:
    from confluent_kafka import Producer

    from apache_kafka.cluster import KafkaCluster, KafkaSettings

    run_dir = Path(tempfile.mkdtemp(prefix="isrlab-kafka-start-"))
    settings = KafkaSettings(brokers=brokers, partitions=brokers, heap_mb=heap_mb)
    try:
        with KafkaCluster(settings, run_dir) as cluster:
            t0 = time.perf_counter()
            cluster.format()
            t1 = time.perf_counter()
            for node in cluster.nodes:
                cluster.spawn(node)
            for node in cluster.nodes:
                cluster.wait_serving(node, 120)
            cluster.create_topic(120)
            cluster.wait_full_isr(120)
            t2 = time.perf_counter()
            pids = [n.proc.pid for n in cluster.nodes]
            cpu_start = _jvm_cpu(pids)
            rss_ready = cluster.rss_mb()
            producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all",
                                 "linger.ms": 5, "log_level": 0})
            for i in range(1000):
                producer.produce(settings.topic, b"x" * 100, partition=i % brokers)
                producer.poll(0)
            producer.flush(60)
            rss_warm = cluster.rss_mb()
            t3 = time.perf_counter()
            cluster.stop()
            t4 = time.perf_counter()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"format_s": t1 - t0, "start_s": t2 - t1, "stop_s": t4 - t3,
            "cpu_to_ready_s": cpu_start, "rss_ready": rss_ready, "rss_warm": rss_warm}


def _spread(values: list[float]) -> str:
    return (f"min {min(values):.1f} / median {statistics.median(values):.1f} / "
            f"max {max(values):.1f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--times", type=int, default=3)
    p.add_argument("--heap-mb", type=int, default=512)
    args = p.parse_args()
    from apache_kafka.install import KAFKA_VERSION

    print(f"Apache Kafka {KAFKA_VERSION}: {args.brokers} combined KRaft nodes, -Xmx"
          f"{args.heap_mb}m, {args.times} times; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores at the start", flush=True)
    runs = [once(args.brokers, args.heap_mb) for _ in range(args.times)]
    for key, what in (("format_s", "format every node (s)"),
                      ("start_s", "first JVM to a full ISR (s)"),
                      ("cpu_to_ready_s", "JVM CPU to a full ISR, all nodes (s)"),
                      ("stop_s", "SIGTERM to every JVM gone (s)")):
        print(f"  {what:<40} {_spread([r[key] for r in runs])}")
    for key, what in (("rss_ready", "RSS per node at a full ISR (MB)"),
                      ("rss_warm", "RSS per node after 1,000 writes (MB)")):
        print(f"  {what:<40} {_spread([v for r in runs for v in r[key].values()])}")


if __name__ == "__main__":
    main()
