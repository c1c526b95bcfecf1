"""Hostile peers and faults on the TCP cluster: no frame kills or stalls a node, nobody without
the run's key steers it, the supervisor notices a node that dies unasked, and bad flags are one
line before any work."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tcp_helpers
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from impl.protocol.messages import Produce, ProduceResponse, WireError
from impl.tcp import framing
from impl.tcp.node import open_peer
from impl.tcp.supervisor import Processes, pick_ports

# Real processes on real sockets with timeouts: run alone, not beside a second test worker
# (make test runs these after the parallel part).
pytestmark = pytest.mark.serial

KEY = bytes(range(32))


def _produce_frame(values, payloads, acks="1", t=0) -> bytes:
    body = {"type": "Produce", "partition": 0, "values": values,
            "payloads": payloads, "acks": acks}
    return framing.encode_frame({"src": "producer", "mid": "producer:m1", "t": t, "msg": body})


# Frames, sans-I/O --------------------------------------------------------------------------------


def test_a_deeply_nested_frame_is_a_bad_frame_not_a_recursion_error():
    decoder = framing.FrameDecoder()
    decoder.feed(tcp_helpers.raw_frame(b"[" * 100_000 + b"]" * 100_000))
    assert decoder.frames() == [framing.BadFrame("frame nests too deeply")]


@pytest.mark.parametrize("msg, problem", [
    ({"values": [1, 2], "payloads": ["00"]}, "2 values but 1 payloads"),
    ({"values": [], "payloads": []}, "a batch needs at least one record"),
    ({"acks": "2"}, "acks must be one of"),
    ({"partition": -5}, "Produce.partition: -5 is out of range"),
    ({"values": [1 << 63], "payloads": ["00"]}, "Produce.values: malformed entries"),
])
def test_produce_shapes_the_broker_could_not_handle_are_refused_at_decode(msg, problem):
    body = {"type": "Produce", "partition": 0, "values": [1], "payloads": ["00"], "acks": "1",
            **msg}
    with pytest.raises(WireError, match=problem):
        framing.decode_message({"src": "producer", "mid": "producer:m1", "t": 0, "msg": body})


@pytest.mark.parametrize("msg, problem", [
    ({"type": "FetchResponse", "partition": 0, "leader": 0, "leader_epoch": 0, "kind": "records",
      "records": [[0, 1]]}, "FetchResponse.records: malformed entries"),
    ({"type": "FetchResponse", "partition": 0, "leader": 0, "leader_epoch": 0, "kind": "boom"},
     "kind must be one of"),
    ({"type": "ProduceResponse", "partition": 0, "results": [[1, 0]]},
     "ProduceResponse.results: malformed entries"),
    ({"type": "LeaderAndIsr", "partition": 0, "leader": 0, "leader_epoch": 0, "isr": [0, 0],
      "partition_epoch": 0}, "isr must name distinct brokers"),
    ({"type": "ConsumerFetchResponse", "partition": 0, "error": "NONE",
      "records": [[3, 1], [2, 1]]}, "offsets must be non-negative and increasing"),
])
def test_every_message_type_is_checked_for_shape(msg, problem):
    with pytest.raises(WireError, match=problem):
        framing.decode_message({"src": "b0", "mid": "b0:m1", "t": 0, "msg": msg})


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                 max_size=4),
    max_leaves=20)


def _real_frames() -> list[bytes]:
    return [
        framing.encode_frame({"hello": "producer"}),
        framing.encode_message("producer", "producer:m1", 5,
                               Produce(0, (1, 2), (b"a", b"b"), "all")),
        framing.encode_message("b0", "b0:m3", 9, ProduceResponse(0, ((1, 0, "NONE"),))),
    ]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.data())
def test_any_corruption_of_real_frames_is_a_frame_a_bad_frame_or_too_large(data):
    stream = bytearray(b"".join(_real_frames()))
    for _ in range(data.draw(st.integers(0, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "json"]))
        at = data.draw(st.integers(0, len(stream)))
        if kind == "flip" and at < len(stream):
            stream[at] ^= 1 << data.draw(st.integers(0, 7))
        elif kind == "cut":
            del stream[at:at + data.draw(st.integers(1, 20))]
        elif kind == "insert":
            stream[at:at] = data.draw(st.binary(max_size=12))
        else:
            body = json.dumps(data.draw(_json)).encode()
            stream[at:at] = tcp_helpers.raw_frame(body)
    decoder = framing.FrameDecoder()
    decoder.feed(bytes(stream))
    try:
        frames = decoder.frames()
    except framing.FrameTooLarge:
        return
    for frame in frames:
        assert type(frame) is framing.BadFrame or isinstance(frame, dict)
        if isinstance(frame, dict) and "msg" in frame:
            try:
                framing.decode_message(frame)
            except WireError:
                pass


# A live broker -----------------------------------------------------------------------------------


async def _replies(sock: socket.socket, n: int) -> list:
    decoder = framing.FrameDecoder()
    out: list = []
    with trio.fail_after(10):
        while len(out) < n:
            data = await trio.to_thread.run_sync(sock.recv, 65536)
            if not data:
                break
            decoder.feed(data)
            out += decoder.frames()
    return out


async def _closed(sock: socket.socket) -> bool:
    with trio.fail_after(10):
        while True:
            try:
                data = await trio.to_thread.run_sync(sock.recv, 65536)
            except ConnectionResetError:
                return True  # closed with bytes of ours unread
            if not data:
                return True


async def _stream_replies(stream, n: int) -> list:
    decoder = framing.FrameDecoder()
    out: list = []
    with trio.fail_after(10):
        while len(out) < n:
            data = await stream.receive_some(65536)
            if not data:
                break
            decoder.feed(data)
            out += decoder.frames()
    return out


def test_a_broker_survives_a_battery_of_hostile_frames_and_still_answers(tmp_path):
    procs = Processes(tmp_path, KEY)
    far_future = 1 << 62

    async def scenario() -> None:
        ports, listener = await tcp_helpers.start_one_broker(procs, tmp_path, KEY)
        # Frames from a proven peer that would kill or stall an unchecked node: deep nesting,
        # a length mismatch, a clock 2^62 ahead, a message whose src is not the hello's.
        bad = await open_peer(ports["b0"], "producer", "b0", KEY)
        async with bad:
            await bad.send_all(
                tcp_helpers.raw_frame(b"[" * 100_000 + b"]" * 100_000)
                + _produce_frame([1, 2], ["00"])
                + _produce_frame([1], ["00"], t=far_future)
                + framing.encode_message("b1", "b1:m1", 0, Produce(0, (1,), (b"x",), "1")))
            errors = [f["error"] for f in await _stream_replies(bad, 4)]
            assert errors == [
                "frame nests too deeply",
                "Produce: 2 values but 1 payloads",
                f"send time {far_future} ms is ahead of this node's clock",
                "message from 'b1' on 'producer''s connection",
            ]
        # A forged supervisor: no proof of the key, no control; the connection is closed.
        for hello in ({"hello": "supervisor"}, {"hello": "supervisor", "secret": "guess"},
                      {"hello": "supervisor", "proof": "0" * 64, "challenge": "0" * 32}):
            with socket.create_connection(("127.0.0.1", ports["b0"])) as forged:
                forged.sendall(framing.encode_frame(hello) + framing.encode_frame({"ctl": "stop"})
                               + framing.encode_frame({"ctl": "block", "peers": ["meta"]}))
                replies = await _replies(forged, 2)
                assert list(replies[0]) == ["challenge"]
                assert replies[1:] == [
                    {"error": "hello as 'supervisor' without a proof of this run's key"}]
                assert await _closed(forged)
        assert procs.alive("b0")
        # Strangers' frames are not buffered: a first frame over the handshake's cap closes
        # the connection before its body arrives.
        hogs = []
        closed = 0
        for _ in range(30):
            hog = socket.create_connection(("127.0.0.1", ports["b0"]))
            hogs.append(hog)
            hog.sendall(framing.LENGTH.pack(framing.MAX_FRAME_BYTES))
            closed += await _closed(hog)
        for hog in hogs:
            hog.close()
        assert closed == 30
        # Still serving, and its timers still fire: the produce is acknowledged.
        frames = await tcp_helpers.produce_and_read_answer(ports, listener, KEY)
        assert framing.decode_message(frames[1])[3] == ProduceResponse(0, ((41, 0, "NONE"),))
        assert await tcp_helpers.stop_one_broker(procs, ports, KEY) == {"ack": "stop"}

    log = tcp_helpers.run_and_read_broker_log(procs, scenario, tmp_path)
    assert "exceeds the 1024-byte cap" in log
    assert "Traceback" not in log


# The supervisor ----------------------------------------------------------------------------------


_isrlab = tcp_helpers.isrlab
_node_pids = tcp_helpers.node_pids


def test_a_node_that_dies_unasked_fails_the_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = _isrlab("cluster", "tcp", "--seed", "3", "--duration", "4",
                   "--trace-out", str(run_dir))
    deadline = time.monotonic() + 20
    while not (run_dir / "producer.ndjson").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)
    (victim,) = _node_pids(run_dir, "b2")
    os.kill(victim, signal.SIGKILL)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "isrlab cluster: FAILED: b2 exited with status -9" in err
    run = json.loads((run_dir / "run.json").read_text())
    assert [f["node"] for f in run["summary"]["node_failures"]] == ["b2"]
    assert _node_pids(run_dir) == []


def test_a_port_in_use_is_one_line_and_leaves_no_process(tmp_path):
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        if port > 65000:
            pytest.fail(f"picked port {port} leaves no room for a run's consecutive ports")
        proc = _isrlab("cluster", "tcp", "--duration", "1", "--base-port", str(port),
                       "--trace-out", str(tmp_path / "run"))
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip().splitlines() == [
        f"isrlab cluster tcp: port {port} on 127.0.0.1: Address already in use"]
    assert _node_pids(tmp_path / "run") == []


@pytest.mark.parametrize("port", ["-1", "80", "70000", "٣٠٠٠"])
def test_a_base_port_out_of_range_is_refused(tmp_path, port):
    proc = _isrlab("cluster", "tcp", "--base-port", port, "--trace-out", str(tmp_path))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "--base-port" in err and "a port in 1024..65535, or 0" in err
    assert "Traceback" not in err


class _IdleCore:
    """A core that never wants anything: the test is about the connection, not the protocol."""

    def next_deadline(self) -> int:
        from impl.protocol.broker import NEVER

        return NEVER

    def on_message(self, now, src, mid, message) -> list:
        return []


def test_silent_and_stalled_connections_are_closed_and_idle_peers_are_not(monkeypatch,
                                                                         tmp_path):
    import impl.tcp.node as node_module
    from impl.tcp.tracefile import FileTrace

    monkeypatch.setattr(node_module, "IDLE_TIMEOUT_S", 0.3)
    monkeypatch.setattr(node_module, "HELLO_TIMEOUT_S", 0.3)
    ports = pick_ports(["b0", "b1", "producer"])
    trace = FileTrace("b0", {}, tmp_path / "b0.ndjson", enabled=False)
    node = node_module.Node("b0", _IdleCore(), trace, ports, node_module.wall_ms(), key=KEY)

    async def eof_within(stream, seconds: float) -> bool:
        with trio.move_on_after(seconds):
            while await stream.receive_some(100):
                pass  # the challenge
            return True
        return False

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            node.nursery = nursery
            await nursery.start(node.serve)
            silent = await trio.open_tcp_stream("127.0.0.1", ports["b0"])
            stalled = await open_peer(ports["b0"], "producer", "b0", KEY)
            await stalled.send_all(framing.LENGTH.pack(100) + b"x")
            idle = await open_peer(ports["b0"], "b1", "b0", KEY)
            assert await eof_within(silent, 3)
            assert await eof_within(stalled, 3)
            assert not await eof_within(idle, 1.0)  # a whole frame, then quiet: kept
            for stream in (silent, stalled, idle):
                await stream.aclose()
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    assert node.connections == 0 and node.inbound == {}


def _connect_when_listening(port: int, deadline: float) -> socket.socket:
    """A connection to `port` once something listens there (the run starts its client
    listeners after the nodes, later on a loaded machine)."""
    while True:
        try:
            return socket.create_connection(("127.0.0.1", port))
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_hostile_frames_to_the_producer_port_do_not_end_the_run(tmp_path):
    from model_check.conformance.replay import replay_paths

    run_dir = tmp_path / "run"
    proc = _isrlab("cluster", "tcp", "--seed", "4", "--duration", "4",
                   "--trace-out", str(run_dir))
    try:
        deadline = time.monotonic() + 20
        while not (pids := _node_pids(run_dir, "meta")) and time.monotonic() < deadline:
            time.sleep(0.05)
        argv = Path(f"/proc/{pids[0]}/cmdline").read_bytes().split(b"\0")
        ports = json.loads(argv[argv.index(b"--ports") + 1])
        for port in (ports["producer"], ports["consumer"]):
            with _connect_when_listening(port, deadline) as bad:
                bad.sendall(framing.encode_frame({"hello": "b0"})
                            + tcp_helpers.raw_frame(b"[" * 100_000 + b"]" * 100_000)
                            + _produce_frame([1, 2], ["00"])
                            + framing.encode_frame({"ctl": "stop"}))
                bad.settimeout(5)
                replies = b""
                try:
                    while data := bad.recv(65536):
                        replies += data
                except ConnectionResetError:
                    pass  # closed with our frames unread
                assert b"hello as 'b0' without a proof of this run's key" in replies
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert replay_paths([run_dir]).verdict == "accepted"


def _running(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("how", ["SIGTERM", "parent gone"])
def test_a_node_stopped_before_the_runs_time_zero_exits(tmp_path, how):
    """A node started with --start-ms 0 waits for the supervisor's go; a stop meanwhile (a
    signal, or its parent dying) must still end it, not leave it waiting for ever."""
    _, node = tcp_helpers.one_broker_command(tmp_path)
    if how == "SIGTERM":
        proc = subprocess.Popen(node, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        try:
            proc.stdin.write(KEY.hex() + "\n")
            proc.stdin.close()
            assert proc.stdout.readline().strip() == "ready"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0, proc.stderr.read()
        finally:
            proc.kill()
        return
    # A parent that starts the node, waits for it to be ready, prints its pid and exits.
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, "
         "stdout=subprocess.PIPE, text=True); p.stdin.write(sys.stdin.readline()); "
         "p.stdin.close(); assert p.stdout.readline().strip() == 'ready'; "
         "print(p.pid, flush=True)",
         *node], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    parent.stdin.write(KEY.hex() + "\n")
    parent.stdin.close()
    pid = int(parent.stdout.readline())
    parent.wait(timeout=20)
    deadline = time.monotonic() + 20
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = _running(pid)
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "the orphaned node was still running 20 s after its parent exited"


def test_a_fault_beyond_the_runs_end_is_refused_up_front(tmp_path):
    """A scripted fault the run never reaches would pass for a run that survived it."""
    proc = _isrlab("cluster", "tcp", "--duration", "2", "--fault",
                   f"{10**20}:crash:b0:100", "--trace-out", str(tmp_path / "run"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        f"isrlab cluster tcp: --fault {10**20}:crash:b0:100: starts after the run's "
        f"2000 ms"]
    assert not (tmp_path / "run").exists()


def test_a_kafka_port_out_of_room_is_named_by_its_own_flag(tmp_path):
    proc = _isrlab("cluster", "tcp", "--duration", "1", "--port-base", "65534",
                   "--trace-out", str(tmp_path / "run"))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert err.strip().splitlines() == [
        "isrlab cluster tcp: --port-base 65534: must be 0 (any free ports) or in "
        "1024..65533 (3 ports)"]


@pytest.mark.parametrize("where", ["/proc/x", "/proc/x/y"])
def test_an_output_directory_that_cannot_be_made_is_one_line(tmp_path, where):
    proc = _isrlab("cluster", "tcp", "--duration", "1", "--trace-out", where)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and where in err, err
    assert "producer" not in out
