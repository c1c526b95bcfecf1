"""Real Kafka clients as workloads: each produces numbered records to a running cluster, then
reads every partition from offset 0, and writes what it was told as a client history.

    python -m impl.kafka.clients CLIENT --run-dir DIR [--first V] [--count N] [--acks all|1]
                                 [--until-ms T]

CLIENT is kafka-python, confluent-kafka or aiokafka. The cluster is `isrlab cluster tcp` with
Kafka served (its run directory holds `kafka.json`: bootstrap servers, topic, partitions and the
run's time 0). The history goes to `DIR/<client>.ndjson` in the trace format (docs/traces.md),
so `isrlab replay DIR` and the history checker read it beside the brokers' traces.

With `--until-ms T` the sends are spread evenly up to time T of the run's clock (so writes
overlap a scripted fault whatever the machine's speed); without it they go as fast as the client
takes them.

Record i carries the decimal value `first + i` (the broker takes a decimal value as the write's
number, impl/kafka/door.py) and goes to partition `value % partitions`. An acknowledgement is
`ok` with its offset; an error the client reports is `info` (the client may have retried, so
whether the write landed is unknown), as is a record the client never reported on. Reads are
`ok` `read` lines with `[offset, value]` pairs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
import time
from pathlib import Path

from impl.tcp.tracefile import FileTrace

CLIENTS = ("kafka-python", "confluent-kafka", "aiokafka")
READ_IDLE_S = 3.0  # reading stops once nothing new came for this long (and everything was seen)
READ_DEADLINE_S = 30.0  # ... and it reached each partition's end offset, or this long passed


class History:
    """History lines of one client process, timed on the run's clock."""

    def __init__(self, run_dir: Path, client: str, acks: str, until_ms: int | None = None):
        info = json.loads((run_dir / "kafka.json").read_text(encoding="utf-8"))
        self.info = info
        self.start_ms = info["start_ms"]
        self.acks = acks
        self.process = client
        self.trace = FileTrace(client, info["header"], run_dir / f"{client}.ndjson")
        self.outcome: dict[int, str] = {}
        self.until_ms = until_ms
        self.first_send_ms: int | None = None
        self.next_offset: dict[int, int] = {}  # per partition: one past the highest read

    def wait_s(self, k: int, count: int) -> float:
        """How long to wait before the k-th of `count` sends so that they spread evenly up to
        `until_ms` (0 when not spreading, or when behind)."""
        if self.until_ms is None:
            return 0.0
        now = self.now()
        if self.first_send_ms is None:
            self.first_send_ms = now
        due = self.first_send_ms + (self.until_ms - self.first_send_ms) * k / count
        return max(0.0, (due - now) / 1000)

    def now(self) -> int:
        return time.time_ns() // 1_000_000 - self.start_ms

    def line(self, type_: str, f: str, **fields) -> None:
        self.trace.other({"kind": "history", "process": self.process, "type": type_, "f": f,
                          "time_ms": self.now(), **fields})

    def invoke(self, p: int, value: int) -> None:
        self.line("invoke", "send", partition=p, value=value, acks=self.acks)

    def done(self, p: int, value: int, offset: int | None, error: str | None) -> None:
        if value in self.outcome:
            return
        if error is None:
            self.outcome[value] = "ok"
            self.line("ok", "send", partition=p, value=value, acks=self.acks, offset=offset)
        else:
            self.outcome[value] = "info"
            self.line("info", "send", partition=p, value=value, acks=self.acks,
                      error=error[:200])

    def unanswered(self, sent: list[tuple[int, int]]) -> None:
        for p, value in sent:
            self.done(p, value, None, "NO_ANSWER")

    def read(self, records: list[tuple[int, int]], p: int) -> None:
        if records:
            self.line("ok", "read", partition=p, records=[[o, v] for o, v in records])
            self.next_offset[p] = max(self.next_offset.get(p, 0), records[-1][0] + 1)

    def read_to_end(self, read_idle, end_offsets) -> None:
        """Read (`read_idle()`: until nothing new comes for READ_IDLE_S) until every partition
        is read up to the end offset `end_offsets()` gives ({partition: offset}), or
        READ_DEADLINE_S passed; then `end_lines`."""
        deadline = time.monotonic() + READ_DEADLINE_S
        while True:
            read_idle()
            try:
                ends = end_offsets()
            except Exception:  # noqa: BLE001 - each client's own timeout and network errors
                ends = None
            if self.read_enough(ends, deadline):
                break
        self.end_lines(ends)

    def read_enough(self, ends: dict[int, int] | None, deadline: float) -> bool:
        """Every partition read up to its end offset (None: the cluster did not say), or the
        deadline passed."""
        reached = ends is not None and all(self.next_offset.get(p, 0) >= end
                                           for p, end in ends.items())
        return reached or time.monotonic() > deadline

    def end_lines(self, ends: dict[int, int] | None) -> None:
        """An `end` line per partition whose end offset is known, so that a checker can tell
        a read-back that reached the end (the partition's whole log) from one cut short."""
        for p, end in sorted((ends or {}).items()):
            self.line("ok", "end", partition=p, offset=end)

    def read_batch(self, batch: dict) -> bool:
        """kafka-python's and aiokafka's poll result ({TopicPartition: [record]}) as reads;
        whether it held any record."""
        for tp, messages in batch.items():
            self.read([(m.offset, _value(m.value)) for m in messages], tp.partition)
        return any(batch.values())

    def close(self) -> None:
        self.trace.close()


def _value(raw: bytes | None) -> int:
    return int(raw) if raw and raw.isdigit() else -1


def run_kafka_python(h: History, values: list[tuple[int, int]], topic: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.errors import KafkaTimeoutError

    servers = h.info["bootstrap_servers"]
    producer = KafkaProducer(bootstrap_servers=servers, acks=-1 if h.acks == "all" else 1,
                             request_timeout_ms=10_000, retries=5, linger_ms=5)
    futures = []
    for k, (p, value) in enumerate(values):
        time.sleep(h.wait_s(k, len(values)))
        h.invoke(p, value)
        future = producer.send(topic, str(value).encode(), partition=p)
        futures.append((p, value, future))
    try:
        producer.flush(60)
    except KafkaTimeoutError:
        # Writes still being retried (a slow machine, a partition) are left to the loop below:
        # each gets an unknown outcome, as the client would report it, and the run goes on.
        pass
    for p, value, future in futures:
        try:
            meta = future.get(timeout=1)
        except Exception as error:  # the client's own error types: all mean "unknown"
            h.done(p, value, None, f"{type(error).__name__}: {error}")
        else:
            h.done(p, value, meta.offset, None)
    producer.close(5)
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, group_id=None,
                             request_timeout_ms=10_000)
    parts = [TopicPartition(topic, p) for p in range(h.info["partitions"])]
    consumer.assign(parts)
    for tp in parts:
        consumer.seek(tp, 0)

    def read_idle() -> None:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < READ_IDLE_S:
            if h.read_batch(consumer.poll(timeout_ms=500)):
                idle_since = time.monotonic()

    h.read_to_end(read_idle, lambda: {tp.partition: end for tp, end in
                                      consumer.end_offsets(parts).items()})
    consumer.close()


def run_confluent_kafka(h: History, values: list[tuple[int, int]], topic: str) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    servers = h.info["bootstrap_servers"]
    producer = Producer({"bootstrap.servers": servers, "acks": h.acks, "linger.ms": 5,
                         "log_level": 0,
                         "enable.idempotence": False, "message.timeout.ms": 30_000})

    def delivered(err, msg, p=None, value=None):
        if err is None:
            h.done(msg.partition(), _value(msg.value()), msg.offset(), None)
        else:
            h.done(msg.partition(), _value(msg.value()), None, str(err))

    for k, (p, value) in enumerate(values):
        time.sleep(h.wait_s(k, len(values)))
        h.invoke(p, value)
        while True:
            try:
                producer.produce(topic, str(value).encode(), partition=p, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(60)
    consumer = Consumer({"bootstrap.servers": servers, "group.id": "isrlab-history",
                         "log_level": 0,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(h.info["partitions"])])

    def read_idle() -> None:
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < READ_IDLE_S:
            messages = consumer.consume(1000, 0.5)
            by_partition: dict[int, list] = {}
            for m in messages:
                if m.error() is None:
                    by_partition.setdefault(m.partition(), []).append(
                        (m.offset(), _value(m.value())))
            for p, records in by_partition.items():
                h.read(records, p)
                idle_since = time.monotonic()

    def end_offsets() -> dict[int, int]:
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
                for p in range(h.info["partitions"])}

    h.read_to_end(read_idle, end_offsets)
    consumer.close()


def run_aiokafka(h: History, values: list[tuple[int, int]], topic: str) -> None:
    asyncio.run(_aiokafka(h, values, topic))


async def _aiokafka(h: History, values: list[tuple[int, int]], topic: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    servers = h.info["bootstrap_servers"]
    producer = AIOKafkaProducer(bootstrap_servers=servers, acks=-1 if h.acks == "all" else 1,
                                request_timeout_ms=10_000, linger_ms=5)
    await producer.start()
    pending = []
    for k, (p, value) in enumerate(values):
        await asyncio.sleep(h.wait_s(k, len(values)))
        h.invoke(p, value)
        pending.append((p, value, await producer.send(topic, str(value).encode(), partition=p)))
    for p, value, future in pending:
        try:
            meta = await future
        except Exception as error:  # as above: unknown outcome
            h.done(p, value, None, f"{type(error).__name__}: {error}")
        else:
            h.done(p, value, meta.offset, None)
    await producer.stop()
    consumer = AIOKafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                                request_timeout_ms=10_000)
    await consumer.start()
    parts = [TopicPartition(topic, p) for p in range(h.info["partitions"])]
    consumer.assign(parts)
    for tp in parts:
        consumer.seek(tp, 0)
    deadline = time.monotonic() + READ_DEADLINE_S
    while True:  # History.read_to_end, with awaits
        idle_since = time.monotonic()
        while time.monotonic() - idle_since < READ_IDLE_S:
            if h.read_batch(await consumer.getmany(timeout_ms=500)):
                idle_since = time.monotonic()
        try:
            ends = {tp.partition: end for tp, end in (await consumer.end_offsets(parts)).items()}
        except Exception:  # noqa: BLE001 - the client's own timeout and network errors
            ends = None
        if h.read_enough(ends, deadline):
            break
    h.end_lines(ends)
    await consumer.stop()


RUNNERS = {"kafka-python": run_kafka_python, "confluent-kafka": run_confluent_kafka,
           "aiokafka": run_aiokafka}


def run_client(client: str, run_dir: Path, first: int, count: int, acks: str,
               until_ms: int | None = None) -> dict:
    """Produce `count` values from `first` (spread up to `until_ms` on the run's clock, when
    given), read everything back, write the history; return counts of what the client was
    told."""
    # The clients log every retry under faults; what they were told is in the history.
    for name in ("kafka", "aiokafka"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    h = History(Path(run_dir), client, acks, until_ms)
    partitions = h.info["partitions"]
    values = [(v % partitions, v) for v in range(first, first + count)]
    try:
        RUNNERS[client](h, values, h.info["topic"])
        h.unanswered(values)
    finally:
        h.close()
    told = list(h.outcome.values())
    return {"client": client, "ok": told.count("ok"), "info": told.count("info")}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m impl.kafka.clients",
                                description=__doc__.splitlines()[0])
    p.add_argument("client", choices=CLIENTS)
    p.add_argument("--run-dir", required=True)
    p.add_argument("--first", type=int, default=1_000_000)
    p.add_argument("--count", type=int, default=1_000)
    p.add_argument("--acks", choices=("all", "1"), default="all")
    p.add_argument("--until-ms", type=int, default=None,
                   help="spread the sends evenly up to this time of the run's clock")
    args = p.parse_args(argv)
    if not (Path(args.run_dir) / "kafka.json").is_file():
        print(f"impl.kafka.clients: {args.run_dir}/kafka.json: not found (start the cluster "
              "with isrlab cluster tcp --duration 0 first)", file=sys.stderr)
        return 2
    print(json.dumps(run_client(args.client, Path(args.run_dir), args.first, args.count,
                                args.acks, args.until_ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
