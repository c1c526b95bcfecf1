"""Who may speak to a node of the TCP cluster: only processes of the run, each proving it with
the run's key; a stranger's hello changes nothing, whatever name it claims, and no frame it
sends reaches a core or ends a node."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
import types
from pathlib import Path

import pytest
import tcp_helpers
import trio

from impl.config import ClusterConfig
from impl.kafka import replication
from impl.protocol.messages import FetchResponse, LeaderAndIsr
from impl.protocol.meta import MetaCore
from impl.tcp import TcpOptions, framing, run_cluster
from impl.tcp import supervisor as supervisor_module
from impl.tcp.supervisor import Processes
from vocab.actions import ActionName as A

# Real processes on real sockets with timeouts: run alone, not beside a second test worker.
pytestmark = pytest.mark.serial

KEY = bytes(range(32))
# A replication frame whose envelope is JSON nested 30,000 deep: 60 KB.
DEEP = tcp_helpers.raw_frame(bytes([replication.MARK]) + struct.pack(">H", 60_000)
                             + b"[" * 30_000 + b"]" * 30_000)


def _final(tmp_path: Path, node: str) -> dict:
    return json.loads((tmp_path / node / "final.json").read_text())["partitions"]["0"]


async def _send_as_stranger(port: int, frames: bytes) -> None:
    """Connect, send `frames` at once as a stranger does (without waiting to be asked
    anything), read whatever comes back until the node closes the connection (2 s at most)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(frames)
        with trio.move_on_after(2):
            try:
                while await stream.receive_some(65536):
                    pass
            except trio.BrokenResourceError:
                pass  # closed with our frames unread: a reset


def _lone_follower(tmp_path: Path, attack) -> str:
    """Broker b1 of two, alone (b0 and the metadata store are not running, so its first fetch
    to b0 stays in flight); `attack(ports)` runs against it, then b1 stops. b1's log."""
    procs = Processes(tmp_path, KEY)

    async def scenario() -> None:
        ports, listener = await tcp_helpers.start_one_broker(procs, tmp_path, KEY, "b1", 2)
        await listener.aclose()
        await trio.sleep(0.3)  # b1 has sent its fetch
        await attack(ports)
        await trio.sleep(0.3)
        assert procs.alive("b1")
        assert await tcp_helpers.stop_one_broker(procs, ports, KEY, "b1") == {"ack": "stop"}

    return tcp_helpers.run_and_read_broker_log(procs, scenario, tmp_path, "b1")


def test_a_hello_as_b0_without_the_key_cannot_append_forged_records(tmp_path):
    epoch = MetaCore(ClusterConfig(brokers=2)).initial_view(0).leader_epoch

    async def attack(ports) -> None:
        # Every fetch number a first fetch could have: one of them is b1's.
        forged = b"".join(framing.encode_message("b0", f"b0:m{seq}", 0, FetchResponse(
            0, 0, epoch, "records", records=((epoch, 99, b"forged"),), high_watermark=1,
            fetch_offset=0, seq=seq)) for seq in range(20))
        await _send_as_stranger(ports["b1"], framing.encode_frame({"hello": "b0"}) + forged)

    log = _lone_follower(tmp_path, attack)
    final = _final(tmp_path, "b1")
    assert final["committed"] == [] and final["high_watermark"] == 0
    assert final["leader"] == 0 and final["leader_epoch"] == epoch
    refusals = [line for line in log.splitlines() if "refusing" in line]
    assert len(refusals) == 1, log
    assert "Traceback" not in log


def test_a_hello_as_the_metadata_store_cannot_make_a_leader(tmp_path):
    async def attack(ports) -> None:
        forged = framing.encode_message("meta", "meta:m1", 0,
                                        LeaderAndIsr(0, 1, 50, (1,), 50, 0))
        for hello in ({"hello": "meta"}, {"hello": "meta", "proof": "00" * 32}):
            await _send_as_stranger(ports["b1"], framing.encode_frame(hello) + forged)

    log = _lone_follower(tmp_path, attack)
    final = _final(tmp_path, "b1")
    assert (final["leader"], final["leader_epoch"]) == (0, 0)
    assert len([line for line in log.splitlines() if "refusing" in line]) == 2, log


def test_spoofed_hellos_do_not_break_the_followers_fetches(tmp_path):
    """A stranger says hello as each follower to every broker and hangs up: the leader must
    not take its followers' own connections for broken (that dropped their parked fetches,
    and the followers, never told, stopped fetching: ISR shrunk, acks=all writes failed)."""
    run_dir = tmp_path / "run"
    proc = tcp_helpers.isrlab("cluster", "tcp", "--seed", "7", "--duration", "4",
                              "--partitions", "2", "--trace-out", str(run_dir))
    try:
        ports = tcp_helpers.run_ports(run_dir, time.monotonic() + 30)
        time.sleep(0.5)
        brokers = sorted(n for n in ports if n.startswith("b"))
        for target in brokers:
            for claimed in brokers:
                if claimed == target:
                    continue
                with socket.create_connection(("127.0.0.1", ports[target])) as spoof:
                    spoof.sendall(framing.encode_frame({"hello": claimed}))
                    time.sleep(0.01)
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    # The shutdown closes every connection after 4 s: parked fetches die with them then.
    drops = [e for path in sorted(run_dir.glob("b*.ndjson"))
             for e in map(json.loads, path.read_text().splitlines())
             if e.get("action") == A.NETWORK_DROP_FETCH and e["time_ms"] < 4_000]
    assert drops == []
    summary = json.loads((run_dir / "run.json").read_text())["summary"]
    assert summary["isr_shrinks"] == 0 and summary["writes_failed"] == 0, summary
    assert summary["writes_acked"] > 20
    assert proc.returncode == 0, err


def test_a_deep_envelope_to_every_port_is_one_line_and_the_run_ends(tmp_path):
    """60 KB of nesting in a replication envelope raised RecursionError past the decoder's
    catch: a broker died of it, and sent to the consumer's port it ended the whole run."""
    run_dir = tmp_path / "run"
    proc = tcp_helpers.isrlab("cluster", "tcp", "--seed", "8", "--duration", "3",
                              "--partitions", "1", "--trace-out", str(run_dir))
    try:
        ports = tcp_helpers.run_ports(run_dir, time.monotonic() + 30)
        for port in ports.values():
            with socket.create_connection(("127.0.0.1", port)) as bad:
                bad.sendall(DEEP)
                bad.settimeout(10)
                try:
                    while bad.recv(65536):
                        pass
                except ConnectionResetError:
                    pass  # closed with our frame unread
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert (run_dir / "run.json").exists()
    assert "Traceback" not in err
    for node in ("meta", "b0", "b1", "b2"):
        log = (run_dir / f"{node}.log").read_text()
        assert "Traceback" not in log
        assert len([line for line in log.splitlines() if "unknown peer" in line]) == 1, log
    assert len([line for line in err.splitlines() if "unknown peer" in line]) == 2, err


def test_the_run_key_is_in_no_environment_command_line_or_file(tmp_path, monkeypatch):
    """The key reaches each node (a restarted one too) on a pipe: not in /proc/PID/environ or
    cmdline, where any local user can read it, nor in any file the run leaves."""
    handed_out: list[bytes] = []

    def token_bytes(n: int = 32) -> bytes:
        handed_out.append(bytes(range(100, 100 + n)))
        return handed_out[-1]

    monkeypatch.setattr(supervisor_module, "secrets", types.SimpleNamespace(
        token_bytes=token_bytes, token_hex=lambda n=32: token_bytes(n).hex()))
    run_dir = tmp_path / "run"
    seen: dict[int, bytes] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for pid in tcp_helpers.node_pids(run_dir):
                try:
                    seen[pid] = (Path(f"/proc/{pid}/environ").read_bytes()
                                 + Path(f"/proc/{pid}/cmdline").read_bytes())
                except OSError:
                    pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        options = TcpOptions(seed=2, duration_ms=2_500, faults=((800, "crash", "b1", 400),))
        summary = run_cluster(ClusterConfig(), options, run_dir)
    finally:
        done.set()
        watcher.join()
    assert summary["crashes"] == 1 and summary["node_failures"] == []
    assert len(handed_out) == 1
    key = handed_out[0]
    forms = [key, key.hex().encode(), key.hex().upper().encode()]
    roles = sorted(text.split(b"--role\0")[1].split(b"\0")[0] for text in seen.values())
    assert set(roles) == {b"b0", b"b1", b"b2", b"meta"} and roles.count(b"b1") >= 2, roles
    for pid, text in seen.items():
        assert not any(form in text for form in forms), pid
    files = [p for p in run_dir.rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in files:
        data = path.read_bytes()
        assert not any(form in data for form in forms), path


# Sans-I/O pieces ---------------------------------------------------------------------------------


def test_a_deep_or_long_replication_envelope_is_a_bad_frame():
    decoder = framing.FrameDecoder()
    decoder.feed(DEEP + tcp_helpers.raw_frame(bytes([replication.MARK]) + struct.pack(">H", 300)
                                              + b"[" * 150 + b"]" * 150))
    assert decoder.frames() == [
        framing.BadFrame("replication envelope of 60000 bytes exceeds the 512-byte cap"),
        framing.BadFrame("replication envelope is not a JSON object"),
    ]


def test_a_proof_answers_one_nonce_between_two_names_in_one_direction():
    nonce = bytes(16)
    given = framing.proof(KEY, "hello", nonce, "b0", "b1")
    assert framing.proof_matches(given, KEY, "hello", nonce, "b0", "b1")
    for other in [(bytes(range(1, 33)), "hello", nonce, "b0", "b1"),
                  (KEY, "welcome", nonce, "b0", "b1"),
                  (KEY, "hello", bytes([1] * 16), "b0", "b1"),
                  (KEY, "hello", nonce, "b1", "b0"),
                  (KEY, "hello", nonce, "b0", "b2")]:
        assert not framing.proof_matches(given, *other)
    assert not framing.proof_matches(None, KEY, "hello", nonce, "b0", "b1")
    assert not framing.proof_matches("é" * 64, KEY, "hello", nonce, "b0", "b1")
    assert framing.nonce_of("00" * 16) == nonce
    assert [framing.nonce_of(x) for x in ("00" * 15, "zz" * 16, 7, None)] == [None] * 4


class _TwoSendsCore:
    """On the timer: two transitions, each sending to b1 (cut off by a partition)."""

    def next_deadline(self) -> int:
        from impl.protocol.broker import NEVER

        return NEVER

    def on_timer(self, now: int) -> list:
        from impl.protocol.messages import Fetch, Transition
        from vocab.outcomes import Code

        return [Transition(A.FOLLOWER_SEND_FETCH, {"partition": p}, Code.FETCH_SENT,
                           sends=[("b1", Fetch(p, 0, 0, -1, 0, 0, 1))]) for p in (0, 1)]


def test_a_drop_is_traced_at_its_inputs_time_though_the_clock_moved_on(tmp_path, monkeypatch):
    """The second transition's line carries the input's time, so the first one's drop must
    too, or the node's trace goes back in time (replay refuses such a trace)."""
    import itertools

    import impl.tcp.node as node_module
    from impl.tcp.tracefile import FileTrace

    clock = itertools.count(1_000)  # every read of the wall clock is 1 ms later
    monkeypatch.setattr(node_module, "wall_ms", lambda: next(clock))
    trace = FileTrace("b0", {}, tmp_path / "b0.ndjson")
    node = node_module.Node("b0", _TwoSendsCore(), trace, {"b0": 1, "b1": 2}, 0, key=KEY)
    node.blocked.add("b1")
    node.handle(lambda core, now: core.on_timer(now))
    trace.close()
    lines = [json.loads(line) for line in (tmp_path / "b0.ndjson").read_text().splitlines()[1:]]
    assert [(e["action"], e["time_ms"]) for e in lines] == [
        ("FollowerSendFetch", 1_000), ("NetworkDrop", 1_000),
        ("FollowerSendFetch", 1_000), ("NetworkDrop", 1_000)]


class _RecordingCore:
    """A core that records what it hears: messages, and connections that broke."""

    def __init__(self):
        self.heard: list = []

    def next_deadline(self) -> int:
        from impl.protocol.broker import NEVER

        return NEVER

    def on_message(self, now, src, mid, message) -> list:
        self.heard.append((src, mid))
        return []

    def on_disconnected(self, now, peer) -> list:
        self.heard.append(("disconnected", peer))
        return []


def test_a_second_hello_for_a_connected_peer_is_refused_and_breaks_nothing(tmp_path,
                                                                           monkeypatch):
    import impl.tcp.node as node_module
    from impl.protocol.messages import Heartbeat
    from impl.tcp.tracefile import FileTrace

    monkeypatch.setattr(node_module, "DUPLICATE_GRACE_S", 0.2)
    ports = supervisor_module.pick_ports(["b0", "b1", "meta", "producer", "consumer"])
    core = _RecordingCore()
    node = node_module.Node("b0", core, FileTrace("b0", {}, None), ports,
                            node_module.wall_ms(), key=KEY)
    consumer = node_module.Node("consumer", _RecordingCore(), FileTrace("consumer", {}, None),
                                ports, node_module.wall_ms(), key=KEY)

    async def heard(what, seconds: float = 5) -> bool:
        with trio.move_on_after(seconds):
            while what not in core.heard:
                await trio.sleep(0.01)
            return True
        return False

    async def refused(port: int, name: str, listener: str, key: bytes = KEY) -> str:
        with pytest.raises(node_module.HandshakeFailed) as caught:
            await node_module.open_peer(port, name, listener, key)
        return str(caught.value)

    async def scenario() -> None:
        async with trio.open_nursery() as nursery:
            node.nursery = consumer.nursery = nursery
            await nursery.start(node.serve)
            await nursery.start(consumer.serve)
            first = await node_module.open_peer(ports["b0"], "b1", "b0", KEY)
            assert "b1 is connected already" in await refused(ports["b0"], "b1", "b0")
            await _send_as_stranger(ports["b0"], framing.encode_frame({"hello": "b1"}))
            await first.send_all(framing.encode_message("b1", "b1:m1", 0, Heartbeat(1, 0)))
            assert await heard(("b1", "b1:m1"))
            # Who talks to whom: names of the run only, never itself, no client to a client,
            # the supervisor to node processes only; and only under this run's key.
            for name in ("b0", "nobody", "kafka-b1"):
                assert "not a node that talks to b0" in await refused(ports["b0"], name, "b0")
            for name in ("producer", "supervisor"):
                assert "not a node that talks to consumer" in await refused(
                    ports["consumer"], name, "consumer")
            assert "without a proof of this run's key" in await refused(
                ports["b0"], "meta", "b0", bytes(32))
            # Nobody's failed hello broke b1's connection; b1's own closing does.
            assert ("disconnected", "b1") not in core.heard
            await first.aclose()
            assert await heard(("disconnected", "b1"))
            # A listener that does not hold the key is not talked to either.
            impostor = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]

            async def pretend() -> None:
                stream = await impostor.accept()
                await stream.send_all(framing.encode_frame({"challenge": "00" * 16}))
                await stream.receive_some(65536)
                await stream.send_all(framing.encode_frame({"welcome": "00" * 32}))
                await stream.receive_some(65536)

            nursery.start_soon(pretend)
            port = impostor.socket.getsockname()[1]
            assert "did not prove it is b1 of this run" in await refused(port, "b0", "b1")
            nursery.cancel_scope.cancel()

    trio.run(scenario)
    assert core.heard == [("b1", "b1:m1"), ("disconnected", "b1")]


class _HangUpAtWelcome:
    """A stream whose peer proves itself as b1 and is gone before the welcome is written."""

    def __init__(self):
        self.sent: list[bytes] = []

    async def send_all(self, data: bytes) -> None:
        if self.sent:
            raise trio.BrokenResourceError("the peer is gone")
        self.sent.append(data)

    async def receive_some(self, max_bytes: int) -> bytes:
        decoder = framing.FrameDecoder()
        decoder.feed(self.sent[0])
        (challenge,) = decoder.frames()
        nonce = bytes.fromhex(challenge["challenge"])
        return framing.encode_frame({"hello": "b1", "challenge": "11" * 16,
                                     "proof": framing.proof(KEY, "hello", nonce, "b1", "b0")})

    async def aclose(self) -> None:
        pass


def test_a_peer_gone_before_its_welcome_is_not_left_connected(tmp_path):
    import impl.tcp.node as node_module
    from impl.tcp.tracefile import FileTrace

    core = _RecordingCore()
    node = node_module.Node("b0", core, FileTrace("b0", {}, None), {"b0": 1, "b1": 2},
                            node_module.wall_ms(), key=KEY)
    trio.run(node._serve_connection, _HangUpAtWelcome())
    # Left in `inbound`, b1 would be refused as connected already for ever after.
    assert node.inbound == {} and node.connections == 0 and core.heard == []
