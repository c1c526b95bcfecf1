"""The TCP cluster: framing error paths, real processes whose traces the spec replays, a leader
killed with SIGKILL, a malformed frame that a broker survives, and no orphan processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import tcp_helpers

from impl.config import ClusterConfig
from impl.protocol.messages import Produce, ProduceResponse, WireError
from impl.tcp import TcpOptions, framing, run_cluster
from impl.tcp.node import open_peer
from impl.tcp.supervisor import Processes
from model_check.conformance.history import check_history, load_history
from model_check.conformance.replay import format_result, read_run_json, replay_paths

# Real processes on real sockets with timeouts: run alone, not beside a second test worker
# (make test runs these after the parallel part).
pytestmark = pytest.mark.serial

KEY = bytes(range(32))


# Framing ---------------------------------------------------------------------------------------


def test_frames_round_trip_byte_by_byte():
    message = Produce(0, (1, 2), (b"ab", b""), "all")
    stream = (framing.encode_frame({"hello": "producer"})
              + framing.encode_message("producer", "producer:m1", 7, message))
    decoder = framing.FrameDecoder()
    frames = []
    for i in range(len(stream)):
        decoder.feed(stream[i:i + 1])
        frames += decoder.frames()
    assert frames[0] == {"hello": "producer"}
    assert framing.decode_message(frames[1]) == ("producer", "producer:m1", 7, message)


def test_bad_frames_are_reported_and_the_stream_goes_on():
    decoder = framing.FrameDecoder()
    decoder.feed(tcp_helpers.raw_frame(b"not json") + tcp_helpers.raw_frame(b"[1, 2]")
                 + tcp_helpers.raw_frame(b"\xff\xfe")
                 + tcp_helpers.raw_frame(b'{"src": "x", "mid": "x:m1", "msg": {"type": "Nope"}}')
                 + framing.encode_frame({"hello": "b1"}))
    frames = decoder.frames()
    assert [type(f).__name__ for f in frames] == ["BadFrame", "BadFrame", "BadFrame", "dict",
                                                  "dict"]
    assert frames[0].reason.startswith("frame is not JSON (JSON is malformed")
    assert frames[1] == framing.BadFrame("frame is not a JSON object")
    assert frames[2].reason.startswith("frame is not JSON (JSON is malformed")
    with pytest.raises(WireError, match="unknown message type 'Nope'"):
        framing.decode_message(frames[3])
    with pytest.raises(WireError, match="'src'"):
        framing.decode_message({"mid": "m", "msg": {}})
    bad_field = {"src": "p", "mid": "p:m1", "msg": {"type": "Produce", "partition": "zero",
                                                    "values": [], "payloads": [], "acks": "1"}}
    with pytest.raises(WireError, match="Produce.partition: expected an integer"):
        framing.decode_message(bad_field)
    assert frames[4] == {"hello": "b1"}


def test_an_oversized_length_is_refused_before_its_body_arrives():
    decoder = framing.FrameDecoder()
    decoder.feed(framing.LENGTH.pack(framing.MAX_FRAME_BYTES + 1) + b"{")
    with pytest.raises(framing.FrameTooLarge, match="exceeds"):
        decoder.frames()
    with pytest.raises(ValueError, match="cap"):
        framing.encode_frame({"x": "y" * framing.MAX_FRAME_BYTES})


# Clusters --------------------------------------------------------------------------------------


def _committed(run_dir: Path) -> dict[int, list[int]]:
    final_logs = read_run_json(run_dir / "run.json")["final_logs"]
    return {int(p): [v for _, v in log] for p, log in final_logs.items()}


def _events(path: Path) -> list[dict]:
    return [b for b in map(json.loads, path.read_text().splitlines()) if b["kind"] == "event"]


def test_a_cluster_without_faults_replays(tmp_path):
    summary = run_cluster(ClusterConfig(), TcpOptions(seed=5, duration_ms=2_500), tmp_path)
    assert summary["writes_acked"] > 10 and summary["reads"] > 0
    assert summary["leaders"] == {"0": 0}
    result = replay_paths([tmp_path])
    assert result.verdict == "accepted", format_result(result)
    history = check_history(load_history([tmp_path]), _committed(tmp_path))
    assert history.clean, history.to_json()
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["mode"] == "tcp" and run["command"].startswith("isrlab cluster tcp --seed 5")


def test_the_leader_killed_with_sigkill_is_replaced_and_rejoins(tmp_path):
    options = TcpOptions(seed=6, duration_ms=7_000, faults=((1_500, "crash", "b0", 1_500),))
    summary = run_cluster(ClusterConfig(), options, tmp_path)
    assert summary["crashes"] == 1
    meta = _events(tmp_path / "meta.ndjson")
    failure = next(e for e in meta if e["action"] == "ControllerHandleBrokerFailure")
    assert failure["args"] == {"broker": 0} and failure["outcome"] == "BROKER_FAILURE_HANDLED"
    assert [c[:2] for c in failure["outcome_args"]["changes"]] == [[0, 1]]  # p0 led by b1
    assert failure["outcome_args"]["elected"] == 1
    crash = next(e for e in _events(tmp_path / "b0.ndjson") if e["action"] == "BrokerCrash")
    restart = next(e for e in meta if e["action"] == "BrokerRestart")
    assert restart["args"] == {"broker": 0} and restart["time_ms"] > crash["time_ms"]
    rejoined = [e for e in meta if e["action"] == "LeaderExpandIsr"
                and e["args"]["follower"] == 0 and e["time_ms"] > restart["time_ms"]]
    assert rejoined, "the old leader never rejoined the ISR"
    # It came back as a follower of the new leader, then caught up (its unflushed log was
    # lost with the process, so it fetched everything again).
    b0 = _events(tmp_path / "b0.ndjson")
    after = [e for e in b0 if e["seq"] > crash["seq"]]
    assert after[0]["action"] == "BecomeFollower" and after[0]["state"]["leader"] == 1
    assert summary["writes_acked"] > 20
    history = check_history(load_history([tmp_path]), _committed(tmp_path))
    assert history.clean, history.to_json()
    assert history.acked["all"] == summary["writes_acked"]
    result = replay_paths([tmp_path])
    assert result.verdict == "accepted", format_result(result)


def test_a_cut_off_leader_truncates_through_kafkas_offset_for_leader_epoch(tmp_path):
    """kip-279 over the wire: the old leader, back from a partition as a follower, asks the
    new leader for its epoch's end in an OffsetForLeaderEpoch v4 request and truncates to the
    answer that came back as OffsetForLeaderEpochResponse; the spec accepts the run."""
    options = TcpOptions(seed=3, duration_ms=7_000, faults=((1_500, "partition", "b0", 3_000),))
    run_cluster(ClusterConfig(variant="kip-279"), options, tmp_path)
    b0 = _events(tmp_path / "b0.ndjson")
    outcomes = [e["outcome"] for e in b0]
    assert "EPOCH_END" in _events_outcomes(tmp_path), "no leader answered an epoch request"
    assert "TRUNCATED" in outcomes
    result = replay_paths([tmp_path])
    assert result.verdict == "accepted", format_result(result)


def _events_outcomes(run_dir: Path) -> set[str]:
    return {e["outcome"] for node in ("b0", "b1", "b2") for e in _events(run_dir / f"{node}.ndjson")}


def test_a_malformed_frame_gets_an_error_and_the_broker_keeps_serving(tmp_path):
    procs = Processes(tmp_path, KEY)

    async def scenario() -> None:
        ports, listener = await tcp_helpers.start_one_broker(procs, tmp_path, KEY)
        async with await open_peer(ports["b0"], "producer", "b0", KEY) as bad:
            await bad.send_all(
                tcp_helpers.raw_frame(b"{oops")
                + tcp_helpers.raw_frame(b'{"src":"p","mid":"p:1","msg":{"type":"X"}}'))
            decoder = framing.FrameDecoder()
            errors: list = []
            while len(errors) < 2:
                decoder.feed(await bad.receive_some(65536))
                errors += decoder.frames()
            assert errors[0]["error"].startswith("frame is not JSON (JSON is malformed")
            assert errors[1:] == [{"error": "unknown message type 'X'"}]
        async with await open_peer(ports["b0"], "meta", "b0", KEY) as huge:
            await huge.send_all(framing.LENGTH.pack(1 << 31))
            reply = await huge.receive_some(65536)
            assert b"exceeds" in reply
            assert await huge.receive_some(65536) == b""  # closed
        # Still serving: a produce gets its answer on the producer's listener.
        frames = await tcp_helpers.produce_and_read_answer(ports, listener, KEY)
        assert frames[0]["hello"] == "b0"
        assert framing.decode_message(frames[1])[3] == ProduceResponse(0, ((41, 0, "NONE"),))
        assert await tcp_helpers.stop_one_broker(procs, ports, KEY)

    log = tcp_helpers.run_and_read_broker_log(procs, scenario, tmp_path)
    assert "bad frame from producer: frame is not JSON" in log
    assert "closing a connection" in log


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline and b"impl.tcp.node" in cmdline:
            found.append(int(entry.name))
    return found


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGKILL])
def test_interrupting_the_supervisor_leaves_no_processes(tmp_path, how):
    """SIGINT stops the supervisor even when it inherited SIGINT ignored, as a background job
    of a non-interactive shell does (the test starts it so, whatever launched pytest)."""
    run_dir = tmp_path / "run"
    script = ("from impl.tcp import TcpOptions, run_cluster\n"
              "from impl.config import ClusterConfig\n"
              f"run_cluster(ClusterConfig(), TcpOptions(duration_ms=60_000), {str(run_dir)!r})\n")
    supervisor = subprocess.Popen([sys.executable, "-c", script], cwd=tcp_helpers.REPO,
                                  stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  preexec_fn=_ignore_sigint)
    try:
        deadline = time.monotonic() + 20
        while not (run_dir / "producer.ndjson").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(_processes_mentioning(str(run_dir))) == 4
        supervisor.send_signal(how)
        supervisor.wait(timeout=60)  # liveness, not speed: a loaded machine stops slowly
        deadline = time.monotonic() + 5
        while _processes_mentioning(str(run_dir)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_mentioning(str(run_dir)) == []
    finally:
        supervisor.kill()
        for pid in _processes_mentioning(str(run_dir)):
            os.kill(pid, signal.SIGKILL)
