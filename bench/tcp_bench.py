"""TCP cluster throughput: 3 broker processes, 1 partition, 100-byte records, acks=all vs acks=1.

    .venv/bin/python bench/tcp_bench.py [--seconds 5] [--batch 500] [--window 8] [--profile]

The metadata store and three brokers run as `python -m impl.tcp.node --no-trace` processes
(BrokerCore(tracing=False), no trace files), exactly as `isrlab cluster tcp` starts them. A
small batching producer written here sends `Produce` batches of `--batch` values with up to
`--window` batches in flight to the leader, and reads each ProduceResponse. It measures acks=all
then acks=1 in the same run (the same cluster: acks is per request), each for `--seconds` after
a one-second warm-up, and prints records/s, p50/p99 batch latency and the ratio, beside
Kafka's 2014 figure (421,823 vs 786,980 records/s: 0.54).

`--profile` runs the leader under cProfile and prints its top functions at the end.
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import sys
import tempfile
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from impl.config import ClusterConfig  # noqa: E402
from impl.tcp.framing import KEY_BYTES, LENGTH, FrameDecoder, decode_message  # noqa: E402
from impl.tcp.node import accept_peer, open_peer  # noqa: E402
from impl.tcp.supervisor import Processes, control, node_command, pick_ports  # noqa: E402

RECORD_BYTES = 100
KAFKA_2014 = (421_823, 786_980)


class Producer:
    """Pipelined Produce batches to one broker; answers arrive on our own listener."""

    def __init__(self, leader_port: int, batch: int, window: int):
        self.leader_port = leader_port
        self.batch = batch
        self.window = window
        payload = '"' + ("ab" * (RECORD_BYTES // 2)) + '"'  # hex of 100 bytes: 200 characters
        self.payloads = ",".join([payload] * batch)
        self.next_value = 1
        self.sent_at: dict[int, float] = {}  # first value of a batch -> send time
        self.latencies: list[float] = []
        self.acked = 0
        self.errors = 0
        self.mid = 0

    def frame(self, acks: str) -> tuple[int, bytes]:
        first = self.next_value
        self.next_value += self.batch
        self.mid += 1
        values = ",".join(map(str, range(first, first + self.batch)))
        body = (f'{{"src":"producer","mid":"producer:m{self.mid}","t":0,"msg":{{"type":'
                f'"Produce","partition":0,"values":[{values}],"payloads":[{self.payloads}],'
                f'"acks":"{acks}"}}}}').encode()
        return first, LENGTH.pack(len(body)) + body

    async def run_phase(self, acks: str, seconds: float, inbound: trio.SocketStream,
                        outbound: trio.SocketStream) -> dict:
        in_flight = trio.Semaphore(self.window)
        stats = {"acked": 0, "errors": 0, "latencies": []}
        measuring = False
        done = trio.Event()

        async def reader() -> None:
            decoder = FrameDecoder()
            while True:
                data = await inbound.receive_some(1 << 20)
                if not data:
                    raise RuntimeError("the leader closed its connection")
                decoder.feed(data)
                for frame in decoder.frames():
                    if "msg" not in frame:
                        continue
                    response = decode_message(frame)[3]
                    first = response.results[0][0]
                    started = self.sent_at.pop(first, None)
                    ok = sum(1 for _, _, error in response.results if error == "NONE")
                    if measuring and started is not None:
                        stats["acked"] += ok
                        stats["errors"] += len(response.results) - ok
                        stats["latencies"].append(time.perf_counter() - started)
                    in_flight.release()
                    if done.is_set() and not self.sent_at:
                        return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            warm_until = time.perf_counter() + 1.0
            end = warm_until + seconds
            while True:
                now = time.perf_counter()
                if not measuring and now >= warm_until:
                    measuring = True
                    started_at = now
                if now >= end:
                    break
                await in_flight.acquire()
                first, data = self.frame(acks)
                self.sent_at[first] = time.perf_counter()
                await outbound.send_all(data)
            elapsed = time.perf_counter() - started_at
            done.set()
            with trio.move_on_after(10):
                while self.sent_at:
                    await trio.sleep(0.01)
            nursery.cancel_scope.cancel()
        latencies = sorted(stats["latencies"])

        def pct(q: float) -> float:
            return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

        return {"acks": acks, "records_per_s": stats["acked"] / elapsed,
                "p50_ms": pct(0.50), "p99_ms": pct(0.99), "errors": stats["errors"],
                "batches": len(latencies)}


async def bench(args: argparse.Namespace) -> list[dict]:
    config = ClusterConfig(brokers=3, partitions=1, min_insync_replicas=2)
    header_cfg = {**config.to_json(), "duration_ms": 0, "nemesis": []}
    run_dir = Path(tempfile.mkdtemp(prefix="tcp-bench-"))
    names = ["b0", "b1", "b2", "meta", "producer"]
    ports = pick_ports(names)
    key = secrets.token_bytes(KEY_BYTES)
    procs = Processes(run_dir, key)
    try:
        async with trio.open_nursery() as nursery:
            for node in ["meta", "b0", "b1", "b2"]:
                cmd = node_command(node, header_cfg, run_dir, ports, 0, 0, "bench", "bench",
                                   trace=False)
                if args.profile and node == "b0":
                    out = str(run_dir / "b0.prof")
                    cmd = [cmd[0], "-m", "cProfile", "-o", out, "-m", *cmd[2:]]
                nursery.start_soon(procs.spawn, node, cmd)
        start_ms = time.time_ns() // 1_000_000 + 100
        for node in ["meta", "b0", "b1", "b2"]:
            await control(ports[node], {"ctl": "go", "start_ms": start_ms}, key, node)
        listeners = await trio.open_tcp_listeners(ports["producer"], host="127.0.0.1")
        outbound = await open_peer(ports["b0"], "producer", "b0", key)
        producer = Producer(ports["b0"], args.batch, args.window)
        # The first batch makes the leader connect back to us.
        first, data = producer.frame("1")
        producer.sent_at[first] = time.perf_counter()
        await outbound.send_all(data)
        inbound, _, decoder = await accept_peer(listeners[0], key, "producer")
        while not any("msg" in f for f in decoder.frames()):
            decoder.feed(await inbound.receive_some(1 << 20))
        producer.sent_at.clear()
        results = []
        for acks in ("all", "1"):
            results.append(await producer.run_phase(acks, args.seconds, inbound, outbound))
        for node in ["meta", "b0", "b1", "b2"]:
            await control(ports[node], {"ctl": "stop"}, key, node)
        with trio.move_on_after(20):
            for proc in procs.procs.values():
                await proc.wait()
    finally:
        procs.kill_all()
    if args.profile:
        import pstats

        pstats.Stats(str(run_dir / "b0.prof")).sort_stats("tottime").print_stats(25)
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="measured seconds per acks level")
    p.add_argument("--batch", type=int, default=500, help="records per Produce request")
    p.add_argument("--window", type=int, default=8, help="Produce requests in flight")
    p.add_argument("--profile", action="store_true", help="cProfile the leader (b0)")
    args = p.parse_args()
    results = trio.run(bench, args)
    for r in results:
        print(f"acks={r['acks']:>3}: {r['records_per_s']:>10,.0f} records/s  "
              f"p50 {r['p50_ms']:7.1f} ms  p99 {r['p99_ms']:7.1f} ms  "
              f"({r['batches']} batches of {args.batch}, {r['errors']} errors)")
    all_, one = results[0]["records_per_s"], results[1]["records_per_s"]
    ratio = all_ / one if one else math.nan
    print(f"ratio acks=all / acks=1: {ratio:.2f}  (Kafka 2014: {KAFKA_2014[0]:,} / "
          f"{KAFKA_2014[1]:,} = {KAFKA_2014[0] / KAFKA_2014[1]:.2f}; goal >= 0.5 and >= "
          f"100,000 records/s with acks=all)")
    print(json.dumps({"batch": args.batch, "window": args.window, "results": results,
                      "ratio": ratio}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
