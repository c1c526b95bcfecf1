"""Trace replay: accepted runs, and divergences on purpose (a corrupted line, a missing line, a
seeded bug), unreadable traces, causal merge of separately written files, and the CLI contract."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from impl.config import ClusterConfig
from impl.sim import SimOptions, header_config, simulate
from isrlab.cli import main
from model_check.conformance.drive import DrivenCluster
from model_check.conformance.replay import (
    IncrementalReplay,
    TraceError,
    load_run,
    load_texts,
    merge,
    replay_paths,
    replay_run,
)
from vocab.trace import FORMAT

pytestmark = pytest.mark.xdist_group("test_replay")  # one worker builds its shared fixtures

FAULTS = ("crash", "partition", "pause", "slow")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("run") / "seed-27"
    simulate(ClusterConfig(), SimOptions(seed=27, duration_ms=15_000, nemesis=FAULTS,
                                         max_faults=2)).write(directory)
    return directory


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(run_dir, target)
    return target


def rewrite(path: Path, change) -> int:
    """Apply `change(body) -> body | None` to the first line it changes; return its number."""
    lines = path.read_text().splitlines()
    for index, line in enumerate(lines):
        body = json.loads(line)
        new = change(body)
        if new is not None:
            if new == "delete":
                del lines[index]
            else:
                lines[index] = json.dumps(new, sort_keys=True, separators=(",", ":"))
            path.write_text("\n".join(lines) + "\n")
            return index + 1
    raise AssertionError("nothing changed")


def test_a_faulty_run_is_accepted_with_every_kind_of_event_mapped(run_dir):
    result = replay_paths([run_dir])
    assert result.verdict == "accepted" and not result.invariant_violations
    actions = {e.action for e in merge(load_run([run_dir])) if e.kind == "event"}
    assert {"BecomeLeader", "BecomeFollower", "LeaderAppend", "LeaderHandleFetch",
            "FollowerHandleFetchResponse", "LeaderAckProduce", "ProducerSend",
            "ControllerHandleBrokerFailure", "LeaderShrinkIsr", "LeaderExpandIsr",
            "ConsumerServe", "NetworkDropFetch", "BrokerCrash"} <= actions
    # Nearly every event is a spec step: a mapping that skipped events would pass vacuously.
    lines = merge(load_run([run_dir]))
    event_lines = sum(e.kind == "event" for e in lines)
    assert result.skipped <= 5 and result.steps >= 0.95 * event_lines


def test_a_changed_high_watermark_is_a_divergence_naming_the_field(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)

    def bump(body):
        if body.get("action") == "FollowerHandleFetchResponse" and body["state"]["high_watermark"] > 5:
            body["state"]["high_watermark"] += 1
            return body
        return None

    line = rewrite(run / "b1.ndjson", bump)
    result = replay_paths([run])
    d = result.divergence
    assert result.verdict == "divergence" and d.event.where == f"{run / 'b1.ndjson'}:{line}"
    assert [f for f, _, _ in d.differences] == ["high_watermark"]
    (_, spec, impl), = d.differences
    assert impl == spec + 1
    assert len(d.recent) == 8 and "seed 27" in __import__("model_check.conformance.replay", fromlist=["x"]
                                                           ).format_result(result)


def _carries_cache(body) -> bool:
    return body.get("kind") == "event" and "epoch_cache" in (body.get("state") or {}) \
        and body["action"] != "BrokerCrash"


@pytest.fixture(scope="module")
def leaderships_dir(tmp_path_factory) -> Path:
    """A run with several leaderships, so the epoch cache changes mid-run."""
    directory = tmp_path_factory.mktemp("run") / "seed-1"
    simulate(ClusterConfig(), SimOptions(seed=1, duration_ms=30_000,
                                         nemesis=("crash", "partition", "pause"))).write(directory)
    return directory


def test_lines_carry_the_epoch_cache_only_when_it_changed(leaderships_dir):
    lines = [json.loads(x) for x in (leaderships_dir / "b0.ndjson").read_text().splitlines()]
    with_state = [b for b in lines if b.get("kind") == "event" and (b.get("state") or {})
                  .get("log_end_offset") is not None]
    carrying = [b for b in with_state if "epoch_cache" in b["state"]]
    # Each leadership adds an entry: the cache appears on few lines, not on every one.
    assert 3 <= len(carrying) < len(with_state) / 100


def test_a_changed_epoch_cache_is_a_divergence(leaderships_dir, tmp_path):
    assert replay_paths([leaderships_dir]).verdict == "accepted"
    run = copy_run(leaderships_dir, tmp_path)
    seen = []

    def shift(body):
        if _carries_cache(body) and body["state"]["epoch_cache"]:
            seen.append(body)
            if len(seen) == 3:  # not the first line of a replica
                body["state"]["epoch_cache"][-1][1] += 1
                return body
        return None

    rewrite(run / "b0.ndjson", shift)
    d = replay_paths([run]).divergence
    assert d is not None and [f for f, _, _ in d.differences] == ["epoch_cache"]


def test_a_cache_change_the_line_does_not_show_is_a_divergence(leaderships_dir, tmp_path):
    """Dropping the cache from a line where it changed claims "unchanged": the spec's changed."""
    run = copy_run(leaderships_dir, tmp_path)
    seen = []

    def hide(body):
        if _carries_cache(body) and body["action"] != "BecomeLeader":
            seen.append(body)
            if len(seen) == 2:
                del body["state"]["epoch_cache"]
                return body
        return None

    line = rewrite(run / "b0.ndjson", hide)
    d = replay_paths([run]).divergence
    assert d is not None and d.event.where == f"{run / 'b0.ndjson'}:{line}"
    (field, _, impl), = d.differences
    assert field == "epoch_cache" and impl.startswith("unchanged since")


def test_a_missing_append_is_a_gap_and_renumbered_a_divergence(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    path = run / "b0.ndjson"
    number = rewrite(path, lambda b: "delete" if b.get("action") == "LeaderAppend"
                     and b["outcome"] == "APPENDED" and b["outcome_args"]["offset"] == 3 else None)
    # The line that took the deleted one's place says a seq is missing.
    with pytest.raises(TraceError, match=re.escape(f"{path}:{number}: node b0 skips seq")):
        load_run([run])
    # Renumbered so that no gap shows, the next event that needs the append diverges.
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for seq, body in enumerate(lines[1:]):
        body["seq"] = seq
    path.write_text("".join(json.dumps(b, sort_keys=True) + "\n" for b in lines))
    # run.json counts one event more than the traces hold.
    with pytest.raises(TraceError, match=r"run.json: summary disagrees with the traces: "
                                         r"events (\d+) \(the traces have (\d+)\)"):
        replay_paths([run])
    # Without run.json (replayed with the user's leave), the next event that needs the append
    # diverges.
    (run / "run.json").unlink()
    result = replay_paths([run], run_json_required=False)
    assert result.verdict == "divergence"
    assert result.divergence.event.node == "b0"


def test_a_seeded_bug_is_a_divergence():
    from model_check.conformance.replay import load_texts, replay_run

    result = simulate(ClusterConfig(bugs=frozenset({"hw-counts-non-isr"})),
                      SimOptions(seed=3, duration_ms=10_000, nemesis=FAULTS))
    replayed = replay_run(load_texts(result.traces))
    assert replayed.verdict == "divergence"
    assert "high_watermark" in [f for f, _, _ in replayed.divergence.differences]


def _first_event(text: str, change) -> str:
    """`text` with the first event line (line 2) changed by `change(body)`."""
    header, line, rest = text.split("\n", 2)
    body = json.loads(line)
    change(body)
    return "\n".join([header, json.dumps(body, sort_keys=True), rest])


@pytest.mark.parametrize("damage, line, message", [
    (lambda text: text.replace("\n", "\n{not json\n", 1), 2, "not JSON"),
    (lambda text: text.split("\n", 1)[1], 1, f"first line must be a {FORMAT} header"),
    (lambda text: text.replace(FORMAT, "isrlab-trace/1", 1), 1,
     f"format 'isrlab-trace/1', expected '{FORMAT}'"),
    (lambda text: text.replace('"seq":3,', '"seq":"3",', 1), 5,
     "event line: Expected `int`, got `str` - at `$.seq`"),
    (lambda text: _first_event(text, lambda b: b.update(send=["b2:3"])), 2,
     "bad message id 'b2:3' (expected <node>:m<k>)"),
    (lambda text: _first_event(text, lambda b: b.update(recv="b0:m")), 2,
     "bad message id 'b0:m' (expected <node>:m<k>)"),
    (lambda text: _first_event(text, lambda b: b.update(send=["b0:m1"])), 2,
     "sends 'b0:m1', an id of another node than b2"),
    (lambda text: _first_event(text, lambda b: b.update(outcome="fetch from 0")), 2,
     "event line: outcome 'fetch from 0' does not match"),
    (lambda text: _first_event(text, lambda b: b.update(gossip=1)), 2,
     "event line: Object contains unknown field `gossip`"),
    (lambda text: _first_event(text, lambda b: b["args"].update(partition=True)), 2,
     "event line: Expected `int | null`, got `bool` - at `$.args.partition`"),
])
def test_unreadable_traces_exit_2_with_file_and_line(run_dir, tmp_path, capsys, damage, line,
                                                      message):
    run = copy_run(run_dir, tmp_path)
    path = run / "b2.ndjson"
    path.write_text(damage(path.read_text()))
    with pytest.raises(TraceError, match=re.escape(f"{path}:{line}: {message}")):
        load_run([run])
    assert main(["replay", str(run)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path}:{line}: " in err[0] and message in err[0]


def test_an_answer_the_spec_never_sent_is_a_divergence(run_dir, tmp_path):
    run = copy_run(run_dir, tmp_path)
    rewrite(run / "b1.ndjson", lambda b: {**b, "recv": "b0:m999999"}
            if b.get("action") == "FollowerHandleFetchResponse" else None)
    result = replay_paths([run])
    assert result.verdict == "divergence"
    assert result.divergence.reason.startswith("handles answer 'b0:m999999', but the spec's")


def test_a_receive_of_a_traced_message_before_it_is_sent_cannot_be_ordered(run_dir, tmp_path):
    # b1 claims to handle an answer that b0 sends only later in its own order: no causal order.
    run = copy_run(run_dir, tmp_path)
    last_send = [json.loads(line) for line in (run / "b0.ndjson").read_text().splitlines()
                 if '"action":"LeaderHandleFetch"' in line and '"follower":1' in line][-1]
    line = rewrite(run / "b1.ndjson", lambda b: {**b, "recv": last_send["send"][0]}
                   if b.get("action") == "FollowerHandleFetchResponse" else None)
    where = f"{run / 'b1.ndjson'}:{line}: receives {last_send['send'][0]!r}, which no causal order"
    with pytest.raises(TraceError, match=re.escape(where)):
        merge(load_run([run]))


def test_merge_respects_send_before_receive_even_with_skewed_clocks(run_dir, tmp_path):
    # Separate processes have separate clocks: push every b1 time far back. The merge must still
    # put each receive after its send, and the replay still accepts the run.
    run = copy_run(run_dir, tmp_path)
    path = run / "b1.ndjson"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for body in lines[1:]:
        body["time_ms"] = max(0, body["time_ms"] - 50)
    path.write_text("".join(json.dumps(b, sort_keys=True) + "\n" for b in lines))
    order = merge(load_run([run]))
    position = {mid: i for i, e in enumerate(order) if e.kind == "event"
                for mid in e.body.get("send", ())}
    for i, e in enumerate(order):
        recv = e.body.get("recv") if e.kind == "event" else None
        if recv in position:
            assert position[recv] < i


def test_replay_cli_exit_codes_and_json(run_dir, tmp_path, capsys):
    assert main(["replay", str(run_dir), "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["verdict"] == "accepted" and body["events"] > 5000 and body["seed"] == 27
    run = copy_run(run_dir, tmp_path)
    rewrite(run / "meta.ndjson", lambda b: {**b, "state": {**b["state"], "registered": [9, 9, 9]}}
            if b.get("action") == "ControllerHandleBrokerFailure" else None)
    assert main(["replay", str(run)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("divergence at") and "registered: spec" in out and "reproduce: isrlab cluster sim --seed 27" in out
    assert main(["replay", str(tmp_path / "nothing-here")]) == 2


class _OverTcp(DrivenCluster):
    """The driven cluster with TCP's delivery: a follower that moves to another leader cannot
    take back a fetch already written to the old leader's socket (impl/tcp/node.py ignores
    `Recall`; the simulator drops the request), so the old leader may still read it."""

    def _recall(self, src, recall) -> None:
        pass


def _stale_fetch_journal() -> tuple[dict, list[dict]]:
    """b0 leads with ISR {0,1,2}; b2's fetch at its new LEO is held on the way while b0 is cut
    off from the controller, which moves the leadership to b1; b2 follows b1, and then b0,
    not yet told, reads b2's old fetch, which moves its HW from 0 to 1. Returns the trace
    header's config and the lines in the order they were written."""
    c = _OverTcp(ClusterConfig(partitions=1, replica_lag_time_max_ms=10_000))

    def settle(hold=frozenset()):
        for _ in range(500):
            links = [link for link in c.links() if link not in hold]
            if not links:
                return
            c.deliver(min(links, key=lambda link: c.sent_order[next(iter(c.in_flight[link]))]))

    c.run_healthy(1_500)
    c.produce()
    settle(hold={("b0", "b2"), ("b2", "b0")})
    c.deliver(("b0", "b2"))  # b2 appends the write and fetches from offset 1: held
    c.isolate("b0")
    for _ in range(40):
        c.advance(250)
        settle(hold={("b2", "b0"), ("b0", "b2"), ("meta", "b0"), ("b0", "meta")})
        if any(e.get("action") == "BecomeFollower" and e["args"]["broker"] == 2
               for e in c.journal):
            break
    c.deliver(("b2", "b0"))
    c.advance(300)
    settle(hold={("meta", "b0"), ("b0", "meta")})
    return header_config(c.config, c.options), [dict(e) for e in c.journal]


def test_an_old_leader_answering_a_fetch_its_follower_abandoned_moves_the_spec_hw_too():
    header, journal = _stale_fetch_journal()
    moved = next(i for i, e in enumerate(journal) if e.get("action") == "BecomeFollower"
                 and e["args"]["broker"] == 2 and e["outcome_args"]["leader"] == 1)
    stale = next(i for i, e in enumerate(journal) if e.get("action") == "LeaderHandleFetch"
                 and e["node"] == "b0" and e["args"]["follower"] == 2 and i > moved)
    assert journal[stale]["outcome_args"]["high_watermark"] == 1
    assert journal[stale]["outcome_args"]["answer_high_watermark"] == 0
    # b0 then serves the record it now counts as committed.
    assert any(e.get("action") == "ConsumerServe" and e["node"] == "b0" for e in journal[stale:])
    replay = IncrementalReplay(header)
    assert replay.feed(journal) is None
    assert replay.replayer.state.replicas[0][0].high_watermark == 1
    assert replay.replayer.state.replicas[0][1].leader == 1


def test_an_abandoned_fetch_answered_with_a_different_hw_is_a_divergence():
    header, journal = _stale_fetch_journal()
    moved = next(i for i, e in enumerate(journal) if e.get("action") == "BecomeFollower"
                 and e["args"]["broker"] == 2)
    stale = next(i for i, e in enumerate(journal) if e.get("action") == "LeaderHandleFetch"
                 and e["node"] == "b0" and i > moved)
    journal[stale]["state"]["high_watermark"] = 0  # as if the fetch had not been read
    replay = IncrementalReplay(header)
    divergence = replay.feed(journal)
    assert divergence is not None and divergence.event.action == "LeaderHandleFetch"
    assert ("high_watermark", 1, 0) in divergence.differences


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_acks_zero_write_to_a_broker_that_no_longer_leads_is_sent_and_lost(seed):
    # acks=0: the producer calls a write sent at once, and a broker that no longer leads drops
    # it without a word. Each of these runs diverged ("never sent to the spec") when replay
    # asked every write the producer called sent to have reached the spec's leader.
    sim = simulate(ClusterConfig(acks="0", partitions=6), SimOptions(
        seed=seed, duration_ms=30_000, nemesis=("crash", "partition", "pause")))
    result = replay_run(load_texts(sim.traces, sim.run_json()))
    assert result.verdict == "accepted", result.divergence
