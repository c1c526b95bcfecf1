"""Helpers shared by the TCP cluster tests (tests/test_tcp*.py): raw frames, both sides of the
handshake, one broker process on real sockets that a test talks to as the producer, and whole
runs of `isrlab cluster tcp`."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import trio

from impl.config import ClusterConfig
from impl.protocol.messages import Produce
from impl.tcp.framing import LENGTH, encode_message
from impl.tcp.node import accept_peer, open_peer
from impl.tcp.supervisor import Processes, control, node_command, pick_ports

REPO = Path(__file__).resolve().parents[1]


def raw_frame(payload: bytes) -> bytes:
    """A length prefix and the payload as is, JSON or not."""
    return LENGTH.pack(len(payload)) + payload


def one_broker_command(tmp_path: Path, node: str = "b0",
                       brokers: int = 1) -> tuple[dict[str, int], list[str]]:
    """Ports for every broker, meta and the producer, and the command that starts broker
    `node` alone (of `brokers`, min ISR 1) with its files in tmp_path; it waits for the
    supervisor's go. Nothing listens on the other nodes' ports unless the test does."""
    config = ClusterConfig(brokers=brokers, min_insync_replicas=1)
    header_cfg = {**config.to_json(), "duration_ms": 0, "nemesis": []}
    ports = pick_ports([*(f"b{b}" for b in range(brokers)), "meta", "producer"])
    return ports, node_command(node, header_cfg, tmp_path, ports, 0, 1, "test", "t")


async def start_one_broker(procs: Processes, tmp_path: Path, secret, node: str = "b0",
                           brokers: int = 1):
    """Start broker `node` alone (one_broker_command), tell it to go, and listen on the
    producer's port, where it sends its answers. Returns the ports and that listener."""
    ports, command = one_broker_command(tmp_path, node, brokers)
    await procs.spawn(node, command)
    assert await control(ports[node], {"ctl": "go", "start_ms": time.time_ns() // 10**6},
                         secret, node)
    return ports, (await trio.open_tcp_listeners(ports["producer"], host="127.0.0.1"))[0]


async def produce_and_read_answer(ports: dict[str, int], listener, key: bytes) -> list:
    """Send b0 one produce (value 41, acks=1) as the producer and return the first two frames
    b0 sends back on the producer's listener (its hello, then the answer); closes the
    connections and the listener."""
    stream = await open_peer(ports["b0"], "producer", "b0", key)
    await stream.send_all(encode_message("producer", "producer:m1", 0,
                                         Produce(0, (41,), (b"x",), "1")))
    inbound, hello, decoder = await accept_peer(listener, key, "producer")
    frames: list = [hello]
    with trio.fail_after(5):
        while len(frames) < 2:
            frames += decoder.frames()
            if len(frames) < 2:
                decoder.feed(await inbound.receive_some(65536))
    await stream.aclose()
    await inbound.aclose()
    await listener.aclose()
    return frames


async def stop_one_broker(procs: Processes, ports: dict[str, int], secret, node: str = "b0"):
    """Ask the broker to stop and wait (5 s at most) for it to exit; returns its answer."""
    reply = await control(ports[node], {"ctl": "stop"}, secret, node)
    with trio.fail_after(5):
        await procs.procs[node].wait()
    return reply


def run_and_read_broker_log(procs: Processes, scenario, tmp_path: Path, node: str = "b0") -> str:
    """trio.run(scenario), then kill whatever is left; the broker must have exited with
    status 0. Returns its log."""
    try:
        trio.run(scenario)
    finally:
        procs.kill_all()
    assert procs.procs[node].returncode == 0
    return (tmp_path / f"{node}.log").read_text()


def isrlab(*args: str, **kwargs) -> subprocess.Popen:
    """`python -m isrlab.cli ARGS` in the repository, text pipes for stdout and stderr."""
    return subprocess.Popen([sys.executable, "-m", "isrlab.cli", *args], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def node_pids(run_dir: Path, role: str | None = None) -> list[int]:
    """The pids of the run's node processes (of one role if given), found by command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"impl.tcp.node" in argv and str(run_dir).encode() in argv and (
                role is None or role.encode() in argv):
            found.append(int(entry.name))
    return found


def run_ports(run_dir: Path, deadline: float) -> dict[str, int]:
    """Every port of a running `isrlab cluster tcp` (read from its metadata store's command
    line), once its clients' trace files exist, so that every listener is up."""
    while time.monotonic() < deadline:
        pids = node_pids(run_dir, "meta")
        if pids and (run_dir / "consumer.ndjson").exists():
            argv = Path(f"/proc/{pids[0]}/cmdline").read_bytes().split(b"\0")
            return json.loads(argv[argv.index(b"--ports") + 1])
        time.sleep(0.05)
    raise AssertionError(f"no run in {run_dir} came up")
