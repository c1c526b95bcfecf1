"""Real-client throughput: confluent-kafka (librdkafka) producing 100-byte records to the
reference broker over Kafka's wire protocol, acks=all beside acks=1, in one run.

    .venv/bin/python bench/kafka_bench.py [--records 300000] [--no-trace]

Each acks level gets its own 3-broker, 1-partition cluster (`isrlab cluster tcp --duration 0`,
the cluster's acks must match the client's), traced unless --no-trace. The producer sends
`--records` records as fast as librdkafka batches them (linger 5 ms) and waits for every
delivery report. Printed: records/s (wall), the producer's CPU per record, the cluster's CPU
for the whole run (the cluster process and its nodes, start-up and shutdown included,
divided by the records), and the acks=all / acks=1 ratio beside Kafka's
2014 figure (421,823 vs 786,980 records/s: 0.54).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KAFKA_2014 = (421_823, 786_980)


def measure(acks: str, records: int, trace: bool) -> dict:
    from confluent_kafka import Producer

    run_dir = Path(tempfile.mkdtemp(prefix=f"isrlab-kafka-bench-{acks}-"))
    code = ("import sys; from impl.config import ClusterConfig; "
            "from impl.tcp import TcpOptions, run_cluster; "
            f"run_cluster(ClusterConfig(brokers=3, partitions=1, acks={acks!r}), "
            f"TcpOptions(duration_ms=0, kafka_port_base=0, workload=False, trace={trace}), "
            f"{str(run_dir)!r})")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=env, stderr=subprocess.DEVNULL)
    try:
        servers = None
        while servers is None:
            line = proc.stdout.readline()
            if not line:
                raise SystemExit("the cluster did not start")
            if line.startswith("bootstrap.servers="):
                servers = line.strip().split("=", 1)[1]
        producer = Producer({"bootstrap.servers": servers, "acks": acks, "linger.ms": 5,
                             "enable.idempotence": False, "queue.buffering.max.messages": 200_000,
                             "message.timeout.ms": 20_000, "log_level": 0})
        payload = b"x" * 100
        delivered = [0, 0]

        def report(err, _msg):
            delivered[0 if err is None else 1] += 1

        producer.produce("isrlab", payload, partition=0, on_delivery=report)
        producer.flush(30)  # metadata and connections before the clock starts
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        for _ in range(records):
            while True:
                try:
                    producer.produce("isrlab", payload, partition=0, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(300)
        wall = time.perf_counter() - start
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    finally:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # The cluster reaps its node processes, so this is all of them, start-up included.
    node_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    client_cpu = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    return {"acks": acks, "records": records, "ok": delivered[0] - 1, "errors": delivered[1],
            "wall_s": wall, "rate": records / wall, "client_cpu_us": client_cpu / records * 1e6,
            "cluster_cpu_us": node_cpu / records * 1e6}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=300_000)
    p.add_argument("--no-trace", dest="trace", action="store_false")
    args = p.parse_args()
    load = os.getloadavg()[0]
    print(f"confluent-kafka producer, 3 brokers, 1 partition, 100-byte records, "
          f"{args.records:,} per acks level, traces {'on' if args.trace else 'off'}; "
          f"load average {load:.2f} on {os.cpu_count()} cores at the start")
    results = [measure(acks, args.records, args.trace) for acks in ("all", "1")]
    for r in results:
        print(f"  acks={r['acks']:<3} {r['rate']:>9,.0f} records/s  ({r['ok']:,} ok, "
              f"{r['errors']} errors, {r['wall_s']:.2f} s)  CPU per record: client "
              f"{r['client_cpu_us']:.1f} us, cluster (whole run) {r['cluster_cpu_us']:.1f} us")
    ratio = results[0]["rate"] / results[1]["rate"]
    print(f"  acks=all / acks=1 = {ratio:.2f} (Kafka 2014: "
          f"{KAFKA_2014[0] / KAFKA_2014[1]:.2f}); target >= 100,000 records/s with acks=all")


if __name__ == "__main__":
    main()
