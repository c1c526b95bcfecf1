"""Helpers shared by the TCP cluster tests (tests/test_tcp.py, tests/test_tcp_hostile.py): raw
frames, and one broker process on real sockets that a test talks to as the producer."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from impl.config import ClusterConfig
from impl.protocol.messages import Produce
from impl.tcp.framing import LENGTH, FrameDecoder, encode_frame, encode_message
from impl.tcp.supervisor import Processes, control, node_command, pick_ports

REPO = Path(__file__).resolve().parents[1]


def raw_frame(payload: bytes) -> bytes:
    """A length prefix and the payload as is, JSON or not."""
    return LENGTH.pack(len(payload)) + payload


def one_broker_command(tmp_path: Path) -> tuple[dict[str, int], list[str]]:
    """Ports for b0, meta and the producer, and the command that starts broker b0 alone
    (min ISR 1) with its files in tmp_path; it waits for the supervisor's go."""
    config = ClusterConfig(brokers=1, min_insync_replicas=1)
    header_cfg = {**config.to_json(), "duration_ms": 0, "nemesis": []}
    ports = pick_ports(["b0", "meta", "producer"])
    return ports, node_command("b0", header_cfg, tmp_path, ports, 0, 1, "test", "t")


async def start_one_broker(procs: Processes, tmp_path: Path, secret: str):
    """Start broker b0 (one_broker_command), tell it to go, and listen on the producer's port,
    where b0 sends its answers. Returns the ports and that listener."""
    ports, command = one_broker_command(tmp_path)
    await procs.spawn("b0", command)
    assert await control(ports["b0"], {"ctl": "go", "start_ms": time.time_ns() // 10**6},
                         secret)
    return ports, (await trio.open_tcp_listeners(ports["producer"], host="127.0.0.1"))[0]


async def produce_and_read_answer(ports: dict[str, int], listener) -> list:
    """Send b0 one produce (value 41, acks=1) as the producer and return the first two frames
    b0 sends back on the producer's listener (its hello, then the answer); closes the
    connections and the listener."""
    stream = await trio.open_tcp_stream("127.0.0.1", ports["b0"])
    await stream.send_all(encode_frame({"hello": "producer"}) + encode_message(
        "producer", "producer:m1", 0, Produce(0, (41,), (b"x",), "1")))
    inbound = await listener.accept()
    decoder = FrameDecoder()
    frames: list = []
    with trio.fail_after(5):
        while len(frames) < 2:
            decoder.feed(await inbound.receive_some(65536))
            frames += decoder.frames()
    await stream.aclose()
    await inbound.aclose()
    await listener.aclose()
    return frames


async def stop_one_broker(procs: Processes, ports: dict[str, int], secret: str):
    """Ask b0 to stop and wait (5 s at most) for it to exit; returns b0's answer."""
    reply = await control(ports["b0"], {"ctl": "stop"}, secret)
    with trio.fail_after(5):
        await procs.procs["b0"].wait()
    return reply


def run_and_read_broker_log(procs: Processes, scenario, tmp_path: Path) -> str:
    """trio.run(scenario), then kill whatever is left; b0 must have exited with status 0.
    Returns b0's log."""
    try:
        trio.run(scenario)
    finally:
        procs.kill_all()
    assert procs.procs["b0"].returncode == 0
    return (tmp_path / "b0.log").read_text()
