"""Hostile local clients against the reference broker's Kafka port, each beside an honest
kafka-python producer (acks=all), measured end to end.

    .venv/bin/python bench/kafka_attacks.py [--attacks metadata-million,...] [--seconds 20]
        [--out DIR]

Each attack gets a fresh `isrlab cluster tcp` (3 brokers, 4 partitions, acks=all, traced) and
is aimed at the broker leading partition 0, which the producer writes to (one record every
10 ms). For the attack's duration it records, every 0.2 s, that broker's RSS, and prints:
the writes acknowledged and failed, the leader's largest RSS, its CPU seconds, the actions the
metadata store traced meanwhile (ControllerElectLeader and ISR changes: a leader fenced for
missing its heartbeats shows there), and what the attack's connections were told (closed,
answered, error codes).

The attacks are plain functions `attack(port, stop, info) -> dict` on blocking sockets, run in
a thread until `stop` is set, so another harness can reuse them (`ATTACKS`):
- metadata-million: a Metadata v1 naming 1,000,000 topics (a 9 MB frame), again and again;
- fetch-repeated: a Fetch v12 naming partition 0 a thousand times from offset 0, max_bytes and
  partition_max_bytes 2**31-1, after 20 MB are written (fetch-repeated-256: 256 times, the
  most the broker decodes);
- produce-nulls: a Produce v9 (acks=-1) of one batch of 100,000 null records;
- idle-sockets: 300 connections that send nothing, and every 2 s a newcomer's ApiVersions;
- half-sent: 200 connections, each the first 15 MiB of a 16 MiB Produce, never finished (one
  closed is replaced);
- parked-polls: 200 connections, each a Fetch of partition 3 (led by the same broker as
  partition 0, no writes) at its end with max_wait 2 s, sent again whenever answered: a
  legitimate request at volume, which the broker must hold without spinning and answer
  (empty) at its max_wait.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import socket
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from kio.index import load_request_schema, load_response_schema  # noqa: E402
from kio.serial import entity_reader, entity_writer  # noqa: E402

from impl.kafka import batches  # noqa: E402
from impl.kafka.codec import build  # noqa: E402
from model_check.conformance.kafka_runs import cluster_command, cluster_process  # noqa: E402

TOPIC = "isrlab"
METADATA, FETCH, PRODUCE, LIST_OFFSETS = 3, 1, 0, 2


# Raw requests ---------------------------------------------------------------------------------


def request(api_key: int, version: int, body: dict, correlation_id: int = 1) -> bytes:
    """A request frame with its size prefix, written by kio."""
    cls = load_request_schema(api_key, version)
    out = io.BytesIO()
    header_cls = cls.__header_schema__
    entity_writer(header_cls)(out, build(header_cls, {
        "request_api_key": api_key, "request_api_version": version,
        "correlation_id": correlation_id, "client_id": "attack"}))
    entity_writer(cls)(out, build(cls, body))
    frame = out.getvalue()
    return struct.pack(">i", len(frame)) + frame


def response(api_key: int, version: int, frame: bytes):
    cls = load_response_schema(api_key, version)
    header_size = 4 if not cls.__flexible__ else 5
    body, _ = entity_reader(cls)(frame, 4 + header_size)
    return body


def read_reply(sock: socket.socket) -> bytes | None:
    """One response frame (size prefix included), or None once the broker closed (or went
    silent for the socket's timeout, 30 s)."""
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        try:
            chunk = sock.recv(1 << 20)
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return data


def fetch_request(partitions: list[tuple[int, int]], max_wait_ms: int = 0,
                  max_bytes: int = 2**31 - 1) -> bytes:
    return request(FETCH, 12, {
        "replica_id": -1, "max_wait": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": TOPIC, "partitions": [
            {"partition": p, "current_leader_epoch": -1, "fetch_offset": offset,
             "last_fetched_epoch": -1, "log_start_offset": -1,
             "partition_max_bytes": max_bytes} for p, offset in partitions]}],
        "forgotten_topics_data": [], "rack_id": ""})


def leaders(port: int) -> dict[int, tuple[int, int]]:
    """partition -> (leader id, its Kafka port), from a Metadata v1 to `port`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request(METADATA, 1, {"topics": None}))
        body = response(METADATA, 1, read_reply(sock))
    ports = {b.node_id: b.port for b in body.brokers}
    return {p.partition_index: (p.leader_id, ports.get(p.leader_id, -1))
            for t in body.topics for p in t.partitions}


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def _closed(sock: socket.socket) -> bool:
    """Whether the broker closed `sock` (without waiting)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


# Attacks ---------------------------------------------------------------------------------------


def metadata_million(port: int, stop: threading.Event, info: dict) -> dict:
    names = b"".join(struct.pack(">h", len(n)) + n
                     for n in (b"t%d" % i for i in range(1_000_000)))
    header = struct.pack(">hhih", METADATA, 1, 1, 6) + b"attack"
    frame = header + struct.pack(">i", 1_000_000) + names
    frame = struct.pack(">i", len(frame)) + frame
    told = {"sent": 0, "closed": 0, "answered": 0}
    while not stop.is_set():
        with _connect(port) as sock:
            try:
                sock.sendall(frame)
            except OSError:
                pass
            told["sent"] += 1
            try:
                told["answered" if read_reply(sock) else "closed"] += 1
            except OSError:
                told["closed"] += 1
    return told


def fetch_repeated(port: int, stop: threading.Event, info: dict, entries: int = 1000) -> dict:
    frame = fetch_request([(0, 0)] * entries)
    told = {"sent": 0, "closed": 0, "answer_bytes_max": 0, "error_codes": {}}
    while not stop.is_set():
        with _connect(port) as sock:
            try:
                sock.sendall(frame)
            except OSError:
                pass
            told["sent"] += 1
            reply = read_reply(sock)
            if reply is None:
                told["closed"] += 1
                continue
            told["answer_bytes_max"] = max(told["answer_bytes_max"], len(reply))
            for p in response(FETCH, 12, reply).responses[0].partitions:
                code = str(p.error_code.value)
                told["error_codes"][code] = told["error_codes"].get(code, 0) + 1
    return told


def produce_nulls(port: int, stop: threading.Event, info: dict) -> dict:
    records = batches.write([(i, 0, None, None) for i in range(100_000)])
    frame = request(PRODUCE, 9, {"transactional_id": None, "acks": -1, "timeout": 5000,
                                 "topic_data": [{"name": TOPIC, "partition_data": [
                                     {"index": 0, "records": records}]}]})
    told = {"sent": 0, "closed": 0, "error_codes": {}}
    while not stop.is_set():
        with _connect(port) as sock:
            try:
                sock.sendall(frame)
            except OSError:
                pass
            told["sent"] += 1
            reply = read_reply(sock)
            if reply is None:
                told["closed"] += 1
                continue
            code = str(response(PRODUCE, 9, reply).responses[0].partition_responses[0]
                       .error_code.value)
            told["error_codes"][code] = told["error_codes"].get(code, 0) + 1
    return told


def idle_sockets(port: int, stop: threading.Event, info: dict, count: int = 300) -> dict:
    socks = []
    for _ in range(count):
        try:
            socks.append(_connect(port))
        except OSError:
            pass
    # Every 2 s a newcomer asks for ApiVersions: is a slot found for it?
    told = {"opened": len(socks), "newcomers": 0, "newcomers_served": 0}
    versions = request(18, 3, {"client_software_name": "attack",
                               "client_software_version": "1"})
    while not stop.wait(2):
        told["newcomers"] += 1
        try:
            with _connect(port) as newcomer:
                newcomer.settimeout(5)
                newcomer.sendall(versions)
                told["newcomers_served"] += read_reply(newcomer) is not None
        except OSError:
            pass
    told["closed_by_broker"] = sum(_closed(s) for s in socks)
    for s in socks:
        s.close()
    return told


def half_sent(port: int, stop: threading.Event, info: dict, count: int = 200) -> dict:
    """`count` connections each sending the first 15 MiB of a 16 MiB Produce; one the broker
    closes is replaced by a new one, so the pressure lasts the whole attack."""
    header = struct.pack(">ihhi", 16 << 20, PRODUCE, 9, 1)
    chunk = bytes(1 << 20)
    told = {"opened": 0, "mib_sent": 0, "closed_by_broker": 0}

    def fresh() -> tuple[socket.socket | None, int]:
        try:
            s = _connect(port)
            s.sendall(header)
            s.settimeout(0.5)
            told["opened"] += 1
            return s, 0
        except OSError:
            return None, 0

    socks = [fresh() for _ in range(count)]
    while not stop.is_set():
        progressed = False
        for i, (s, sent) in enumerate(socks):
            if stop.is_set():
                break
            if s is None:
                socks[i] = fresh()
                continue
            if sent >= 15:
                continue
            try:
                s.sendall(chunk)
                socks[i] = (s, sent + 1)
                told["mib_sent"] += 1
                progressed = True
            except TimeoutError:
                pass
            except OSError:
                told["closed_by_broker"] += 1
                s.close()
                socks[i] = fresh()
        if not progressed:
            stop.wait(0.2)
    for s, _ in socks:
        if s is not None:
            told["closed_by_broker"] += _closed(s)
            s.close()
    return told


def parked_polls(port: int, stop: threading.Event, info: dict, count: int = 200) -> dict:
    partition = info["idle_partition"]
    frame = fetch_request([(partition, 0)], max_wait_ms=2_000)
    socks = []
    for _ in range(count):
        try:
            s = _connect(port)
            s.sendall(frame)
            s.setblocking(False)
            socks.append(s)
        except OSError:
            pass
    told = {"opened": len(socks), "answers": 0, "closed": 0}
    live = set(range(len(socks)))
    while not stop.is_set() and live:
        for i in list(live):
            try:
                data = socks[i].recv(1 << 16)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                live.discard(i)
                told["closed"] += 1
                continue
            told["answers"] += 1  # (a reply may span reads: a rough count)
            try:
                socks[i].send(frame)
            except OSError:
                pass
        stop.wait(0.05)
    for s in socks:
        s.close()
    return told


ATTACKS = {"metadata-million": metadata_million, "fetch-repeated": fetch_repeated,
           "fetch-repeated-256": functools.partial(fetch_repeated, entries=256),
           "produce-nulls": produce_nulls, "idle-sockets": idle_sockets,
           "half-sent": half_sent, "parked-polls": parked_polls}


# The honest producer and the broker's figures ------------------------------------------------


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / 100
    except OSError:
        return 0.0


def store_actions(run_dir: Path) -> dict[str, int]:
    """The metadata store's traced actions so far, by name: elections, ISR changes, fencing."""
    counts: dict[str, int] = {}
    meta = run_dir / "meta.ndjson"
    if meta.exists():
        with open(meta, encoding="utf-8") as f:
            for line in f:
                action = json.loads(line).get("action")
                if action:
                    counts[action] = counts.get(action, 0) + 1
    return counts


def run_attack(name: str, seconds: float, out: Path) -> dict:
    from kafka import KafkaProducer

    run_dir = out / name
    run_dir.mkdir(parents=True, exist_ok=True)
    cmd = cluster_command("reference", run_dir, ("--brokers", "3", "--partitions", "4",
                                                 "--acks", "all"))
    result: dict = {"attack": name}
    with cluster_process(cmd, run_dir / "cluster.stderr", 60):
        info = json.loads((run_dir / "kafka.json").read_text())
        bootstrap = info["nodes"][0]["port"]
        lead = leaders(bootstrap)
        leader, port = lead[0]
        pid = next(n["pid"] for n in info["nodes"] if n["id"] == leader)
        same = [p for p, (b, _) in lead.items() if b == leader and p != 0]
        assert same, f"no partition but 0 is led by b{leader}: {lead}"
        info["idle_partition"] = same[0]
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{bootstrap}", acks="all",
                                 linger_ms=0, retries=0, request_timeout_ms=10_000,
                                 max_block_ms=10_000)
        if name.startswith("fetch-repeated"):  # 20 MB for the fetch to read
            for i in range(20_000):
                producer.send(TOPIC, str(10**9 + i).encode() + b" " * 1000, partition=0)
            producer.flush(timeout=120)
        before = store_actions(run_dir)
        stop = threading.Event()
        told: dict = {}
        thread = threading.Thread(target=lambda: told.update(
            ATTACKS[name](port, stop, info)), daemon=True)
        counts = {"acked": 0, "failed": 0}

        def ok(_):
            counts["acked"] += 1

        def failed(_):
            counts["failed"] += 1

        rss_max, cpu0 = rss_mb(pid), cpu_s(pid)
        thread.start()
        end = time.monotonic() + seconds
        value = 1
        next_sample = 0.0
        while time.monotonic() < end:
            try:
                future = producer.send(TOPIC, str(value).encode(), partition=0)
                future.add_callback(ok)
                future.add_errback(failed)
            except Exception:  # the client's own timeouts: counted as failed writes
                counts["failed"] += 1
            value += 1
            if time.monotonic() >= next_sample:
                rss_max = max(rss_max, rss_mb(pid))
                next_sample = time.monotonic() + 0.2
            time.sleep(0.01)
        stop.set()
        thread.join(timeout=60)
        producer.flush(timeout=30)
        producer.close(timeout=10)
        result.update({"leader": f"b{leader}", "sent": value - 1, **counts,
                       "leader_rss_max_mb": round(rss_max, 1),
                       "leader_cpu_s": round(cpu_s(pid) - cpu0, 1),
                       "attack": name, "told": told})
        time.sleep(0.5)
        after = store_actions(run_dir)
        result["store_actions_during"] = {k: n - before.get(k, 0) for k, n in after.items()
                                          if n != before.get(k, 0)}
    stderr = (run_dir / "cluster.stderr").read_text(errors="replace")
    logs = sum(len(p.read_text(errors="replace").splitlines())
               for p in run_dir.glob("b*.log"))
    result["broker_log_lines"] = logs
    result["tracebacks"] = stderr.count("Traceback") + sum(
        p.read_text(errors="replace").count("Traceback") for p in run_dir.glob("b*.log"))
    trace = run_dir / f"{result['leader']}.ndjson"
    result["leader_trace_mb"] = round(trace.stat().st_size / 1e6, 1) if trace.exists() else 0
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--attacks", default=",".join(ATTACKS))
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="kafka-attacks-"))
    for name in args.attacks.split(","):
        if name not in ATTACKS:
            print(f"kafka_attacks: unknown attack {name!r} ({', '.join(ATTACKS)})",
                  file=sys.stderr)
            return 2
        print(json.dumps(run_attack(name, args.seconds, out), sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
