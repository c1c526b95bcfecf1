"""The reference broker in the simulator: determinism, failover, error codes, storage semantics,
placement and the controller's batch election. Every check here fails on a broken broker."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import re

import pytest

from impl.broker_storage import BrokerStorage
from impl.config import BUGS, ClusterConfig, Mutants
from impl.protocol.broker import BrokerCore
from impl.protocol.messages import (
    FENCED_LEADER_EPOCH,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
    AlterIsr,
    AlterIsrResponse,
    Fetch,
    FetchResponse,
    Heartbeat,
    LeaderAndIsr,
    Produce,
    ProduceResponse,
    Send,
    Transition,
)
from impl.protocol.meta import MetaCore
from impl.sim import SimOptions, simulate
from impl.storage import MemoryDisk
from model_check.conformance.history import check_history
from model_check.conformance.replay import load_texts, replay_run
from vocab.actions import ActionName
from vocab.config import ConfigError
from vocab.outcomes import Code, render

FAULTS = ("crash", "partition", "pause", "slow")


def events(result, node: str, action: str | None = None) -> list[dict]:
    out = []
    for line in result.traces[node].splitlines():
        body = json.loads(line)
        if body["kind"] == "event" and (action is None or body["action"] == action):
            out.append(body)
    return out


def history(result) -> list[dict]:
    return [json.loads(line) for node in ("producer", "consumer")
            for line in result.traces[node].splitlines() if '"kind":"history"' in line]


# Determinism ----------------------------------------------------------------------------------


def test_same_seed_same_bytes_and_another_seed_differs():
    options = SimOptions(seed=11, duration_ms=8000, nemesis=FAULTS, max_faults=2)
    first = simulate(ClusterConfig(), options)
    second = simulate(ClusterConfig(), options)
    assert first.traces == second.traces
    assert first.summary["events"] > 1000 and first.summary["crashes"] + \
        first.summary["pauses"] + first.summary["partitions"] >= 1
    other = simulate(ClusterConfig(), SimOptions(seed=12, duration_ms=8000, nemesis=FAULTS,
                                                 max_faults=2))
    assert other.traces["producer"] != first.traces["producer"]


def outcome_problems(lines) -> list[str]:
    """Every event line's action must be an `ActionName`, its outcome a `Code`, and its
    `outcome_args` the fields that code renders with; what is wrong, one entry per line."""
    problems = []
    for line in lines:
        body = json.loads(line)
        if body["kind"] != "event":
            continue
        if body["action"] not in set(ActionName):
            problems.append(f"unknown action {body['action']!r}")
        if body["outcome"] not in set(Code):
            problems.append(f"{body['action']}: unknown outcome code {body['outcome']!r}")
            continue
        try:
            render(body["outcome"], body.get("outcome_args", {}))
        except (KeyError, IndexError, TypeError, ValueError) as error:
            problems.append(f"{body['action']} {body['outcome']}: bad fields ({error!r})")
    return problems


@pytest.mark.parametrize("variant", ["current", "kip-279", "kip-320", "hw-truncation"])
def test_every_event_outcome_is_a_code_with_the_fields_its_english_needs(variant):
    # A zombie leader, crashes, a pause and a full partition: elections, truncation of each
    # variant's kind, drops, restarts.
    faults = ((2000, "partition-meta", "b0", 3000), (4500, "crash", "b0", 2000),
              (8000, "pause", "b1", 2500), (11000, "crash", "b1", 1500),
              (13500, "partition", "b2", 2000))
    result = simulate(ClusterConfig(variant=variant, partitions=2, log_flush_interval_messages=1),
                      SimOptions(seed=3, duration_ms=16000, faults=faults))
    lines = [line for text in result.traces.values() for line in text.splitlines()]
    assert outcome_problems(lines) == []
    codes = {json.loads(line).get("outcome") for line in lines} - {None}
    assert len(codes) >= 20, codes  # the run exercises many transitions, not a handful
    assert result.summary["elections"] == 4
    # The check fails on a line with an unknown code, and on a code missing a field.
    event = next(line for line in lines if '"outcome":"APPENDED"' in line)
    assert outcome_problems([event.replace('"APPENDED"', '"APPENDED_AT"')]) == [
        "LeaderAppend: unknown outcome code 'APPENDED_AT'"]
    assert outcome_problems([event.replace('"outcome_args":{"offset"', '"outcome_args":{"at"')]
                            ) == ["LeaderAppend APPENDED: bad fields (KeyError('offset'))"]
    assert outcome_problems([event.replace('"LeaderAppend"', '"LeaderAppends"')]) == [
        "unknown action 'LeaderAppends'"]


def test_cluster_sim_cli_writes_identical_files_for_one_seed(tmp_path):
    from isrlab.cli import main

    for name in ("a", "b"):
        assert main(["cluster", "sim", "--seed", "5", "--duration", "3s", "--nemesis",
                     "crash,pause", "--trace-out", str(tmp_path / name)]) == 0
    files = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert files == ["b0.ndjson", "b1.ndjson", "b2.ndjson", "consumer.ndjson",
                     "final_logs.jsonl", "meta.ndjson", "nemesis.ndjson", "producer.ndjson",
                     "run.json"]
    for name in files:
        if name != "run.json":
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


@pytest.mark.parametrize("argv", [
    ["--variant", "nope"], ["--nemesis", "crash,meteor"], ["--duration", "soon"],
    ["--min-isr", "4"], ["--bug", "no-such-bug"], ["--acks", "2"],
])
def test_cluster_sim_bad_flags_exit_2_with_one_line(argv, tmp_path, capsys):
    from isrlab.cli import main

    with pytest.raises(SystemExit) as exit_info:
        code = main(["cluster", "sim", "--trace-out", str(tmp_path), *argv])
        raise SystemExit(code)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0] and "Traceback" not in err[0]


def test_config_file_errors_name_file_and_line(tmp_path, capsys):
    from isrlab.cli import main

    bad = tmp_path / "bad.properties"
    bad.write_text("acks=all\nmin.insync.replicas=two\n")
    assert main(["cluster", "sim", "--config", str(bad), "--trace-out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"isrlab cluster: error: {bad}:2: min.insync.replicas: expected an integer, got 'two'\n")


# Failover -------------------------------------------------------------------------------------


def test_leader_killed_new_leader_elected_acked_writes_kept_old_leader_truncates_and_rejoins():
    # b0 leads; cut off from the metadata store it keeps leading as a zombie after the store
    # elects b1, appends a write nobody replicates (flushed: flush interval 1), is killed, and
    # comes back as a follower that must cut that write off and rejoin the ISR.
    config = ClusterConfig(log_flush_interval_messages=1)
    options = SimOptions(seed=7, duration_ms=9000,
                         faults=((2000, "partition-meta", "b0", 3000), (4500, "crash", "b0", 2000)))
    result = simulate(config, options)
    failure = events(result, "meta", "ControllerHandleBrokerFailure")
    assert [(e["args"]["broker"], e["state"]["partitions"][0]["leader"]) for e in failure] == [(0, 1)]
    assert [e["time_ms"] for e in events(result, "b0", "BrokerCrash")] == [4500]
    diverged = [e["outcome_args"] for e in events(result, "b0", "FollowerHandleFetchResponse")
                if e["outcome"] == Code.DIVERGED]
    assert diverged == [{"before": 76, "after": 75}]
    rejoin = [e for e in events(result, "meta", "LeaderExpandIsr") if e["args"]["follower"] == 0]
    assert rejoin and rejoin[0]["state"]["partitions"][0]["isr"] == [0, 1, 2]
    assert result.summary["leaders"] == {"0": 1}
    # Every acks=all acknowledgement is still in the final log, at its offset.
    checked = check_history(history(result), {p: [v for _, v in log]
                                              for p, log in result.final_logs.items()})
    assert checked.clean and checked.acked["all"] == result.summary["writes_acked"] > 150
    assert replay_run(load_texts(result.traces)).verdict == "accepted"


# Error codes, driven on the sans-I/O core ----------------------------------------------------


def leader_core(config=None, isr=(0, 1, 2)) -> BrokerCore:
    config = config or ClusterConfig()
    core = BrokerCore(0, config)
    core.bootstrap([LeaderAndIsr(0, 0, 0, tuple(isr), 0)])
    return core


def outcomes(effects) -> list[tuple[str, dict]]:
    return [(t.outcome, t.outcome_args) for t in effects if isinstance(t, Transition)]


def replies(effects, kind):
    return [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, kind)] + [
        m for t in effects if isinstance(t, Transition) for _, m in t.sends if isinstance(m, kind)]


def test_produce_to_a_follower_is_not_leader_or_follower():
    core = BrokerCore(1, ClusterConfig())
    core.bootstrap([LeaderAndIsr(0, 0, 0, (0, 1, 2), 0)])
    effects = core.on_message(5, "producer", "producer:m1", Produce(0, (7,), (b"",), "all"))
    assert replies(effects, ProduceResponse)[0].results == ((7, -1, NOT_LEADER_OR_FOLLOWER),)
    assert [(t.action, t.outcome, t.outcome_args) for t in effects
            if isinstance(t, Transition)] == [("LeaderAppend", Code.NOT_LEADER_OR_FOLLOWER, {})]


def test_acks_all_below_min_isr_is_not_enough_replicas_but_acks_1_is_appended():
    core = leader_core(isr=(0,))
    effects = core.on_message(5, "producer", "p:m1", Produce(0, (7,), (b"",), "all"))
    assert replies(effects, ProduceResponse)[0].results == ((7, -1, NOT_ENOUGH_REPLICAS),)
    assert core.replicas[0].leo == 0
    assert outcomes(effects) == [(Code.NOT_ENOUGH_REPLICAS, {})]
    effects = core.on_message(6, "producer", "p:m2", Produce(0, (8,), (b"",), "1"))
    assert replies(effects, ProduceResponse)[0].results == ((8, 0, "NONE"),)
    assert core.replicas[0].leo == 1
    assert outcomes(effects) == [(Code.APPENDED_ACKNOWLEDGED, {"offset": 0})]
    effects = core.on_message(7, "producer", "p:m3", Produce(0, (9,), (b"",), "0"))
    assert outcomes(effects) == [(Code.APPENDED, {"offset": 1})]


def test_ignore_min_isr_bug_appends_what_the_broker_must_refuse():
    core = leader_core(ClusterConfig(bugs=frozenset({"ignore-min-isr"})), isr=(0,))
    core.on_message(5, "producer", "p:m1", Produce(0, (7,), (b"",), "all"))
    assert core.replicas[0].leo == 1


def test_ack_after_the_isr_shrank_below_min_isr_is_not_enough_replicas_after_append():
    config = ClusterConfig(variant="kip-320")  # kip-320 still advances HW below min ISR
    core = leader_core(config, isr=(0, 1))
    core.on_message(5, "producer", "p:m1", Produce(0, (7,), (b"",), "all"))
    # Follower 1 lags; the store commits the shrink to [0]; HW then moves to the leader's LEO.
    core.on_timer(1200)  # past replica.lag.time.max.ms, before the write's request timeout
    alter = core.replicas[0].alter
    assert alter is not None and alter.isr == (0,) and not alter.expand
    effects = core.on_message(1201, "meta", "meta:m1", AlterIsrResponse(
        alter.request_id, 0, "NONE", 0, 0, (0,), 1))
    acks = [t for t in effects if isinstance(t, Transition) and t.action == "LeaderAckProduce"]
    assert [(t.outcome, t.outcome_args) for t in acks] == [
        (Code.NOT_ENOUGH_REPLICAS_AFTER_APPEND, {})]
    assert replies(effects, ProduceResponse)[0].results == (
        (7, 0, NOT_ENOUGH_REPLICAS_AFTER_APPEND),)


def test_an_isr_change_lost_on_a_cut_link_is_sent_again_after_the_request_timeout():
    # A partition drops frames without breaking the connection, so no disconnect tells the
    # leader its AlterIsr is lost. Until the answer comes the partition defers every input, a
    # client's writes included: without a retry it would wait forever.
    core = leader_core(isr=(0, 1))
    core.on_timer(1200)
    alter = core.replicas[0].alter
    assert alter is not None and alter.isr == (0,)
    core.on_message(1300, "producer", "p:m1", Produce(0, (7,), (b"",), "1"))
    assert core.replicas[0].leo == 0  # deferred behind the ISR change
    timeout = ClusterConfig().request_timeout_ms
    assert core.next_deadline() <= 1200 + timeout
    assert [e for e in core.on_timer(1200 + timeout - 1) if isinstance(e, Send)
            and isinstance(e.message, AlterIsr)] == []
    resent = [e for e in core.on_timer(1200 + timeout) if isinstance(e, Send)
              and isinstance(e.message, AlterIsr)]
    assert [(e.dst, e.message) for e in resent] == [("meta", alter)]
    effects = core.on_message(1200 + timeout + 5, "meta", "meta:m1", AlterIsrResponse(
        alter.request_id, 0, "NONE", 0, 0, (0,), 1))
    assert core.replicas[0].isr == (0,) and core.replicas[0].leo == 1
    assert replies(effects, ProduceResponse)[0].results == ((7, 0, "NONE"),)


@pytest.mark.parametrize("epoch, code", [(-1, FENCED_LEADER_EPOCH), (3, UNKNOWN_LEADER_EPOCH)])
def test_fetch_with_another_leader_epoch_is_fenced(epoch, code):
    core = leader_core()
    effects = core.on_message(5, "b1", "b1:m1", Fetch(0, 1, 0, -1, epoch, 0))
    assert replies(effects, FetchResponse)[0].error == code


def test_skip_fetch_fencing_bug_serves_a_stale_epoch():
    core = leader_core(ClusterConfig(bugs=frozenset({"skip-fetch-fencing"})))
    core.on_message(4, "producer", "p:m1", Produce(0, (7,), (b"",), "1"))
    effects = core.on_message(5, "b1", "b1:m1", Fetch(0, 1, 0, -1, -1, 0))
    assert replies(effects, FetchResponse)[0].kind == "records"


def test_fetch_past_the_log_end_is_offset_out_of_range_before_kip_320():
    core = leader_core(ClusterConfig(variant="kip-279"))
    effects = core.on_message(5, "b1", "b1:m1", Fetch(0, 1, 3, 0, 0, 0))
    response = replies(effects, FetchResponse)[0]
    assert (response.error, response.end_offset) == (OFFSET_OUT_OF_RANGE, 0)


def test_a_fetch_to_a_broker_that_does_not_lead_is_not_leader():
    core = BrokerCore(2, ClusterConfig())
    core.bootstrap([LeaderAndIsr(0, 0, 0, (0, 1, 2), 0)])
    effects = core.on_message(5, "b1", "b1:m1", Fetch(0, 1, 0, -1, 0, 0))
    assert replies(effects, FetchResponse)[0].error == NOT_LEADER_OR_FOLLOWER


# Storage semantics through the broker ---------------------------------------------------------


def crash_and_recover(config: ClusterConfig, values: int, torn: int = 0) -> dict:
    core = BrokerCore(0, config)
    storage = BrokerStorage(MemoryDisk(), config.partitions)
    for effect in core.bootstrap([LeaderAndIsr(0, 0, 0, (0,), 0)]):
        storage.apply(effect)
    for v in range(1, values + 1):
        for effect in core.on_message(v, "producer", f"p:m{v}", Produce(0, (v,), (b"x" * 10,), "1")):
            if not isinstance(effect, (Send, Transition)):
                storage.apply(effect)
    assert core.replicas[0].leo == values
    storage.disk.crash(torn_bytes=torn)
    storage.open()
    return storage.recovered()


@pytest.mark.parametrize("interval, kept", [(None, 0), (1, 7), (3, 6), (7, 7), (8, 0)])
def test_a_crash_loses_exactly_the_unflushed_suffix(interval, kept):
    config = ClusterConfig(log_flush_interval_messages=interval, min_insync_replicas=1)
    recovered = crash_and_recover(config, 7)
    records, hw, cache = recovered[0]
    assert [v for _, v, _ in records] == list(range(1, kept + 1))
    assert (hw, cache) == (7, [(0, 0)])  # checkpoints are durable...
    r = BrokerCore(0, config, recovered).replicas[0]  # ...and capped by what the log kept
    assert (r.leo, r.high_watermark, r.epoch_cache) == (kept, kept, [(0, 0)] if kept else [])


def test_false_flush_bug_claims_records_durable_that_a_crash_loses():
    config = ClusterConfig(log_flush_interval_messages=1, bugs=frozenset({"false-flush"}))
    core = leader_core(config, isr=(0,))
    core.on_message(1, "producer", "p:m1", Produce(0, (1,), (b"",), "1"))
    assert core.replicas[0].flushed == 1  # what the trace reports
    assert crash_and_recover(config, 3)[0][0] == []  # what the disk kept


def test_torn_tail_is_cut_on_recovery_and_the_crash_is_accepted_by_replay():
    recovered = crash_and_recover(ClusterConfig(log_flush_interval_messages=2), 5, torn=20)
    # (HW stays 0: `current` does not advance it while the ISR is below min ISR.)
    assert [v for _, v, _ in recovered[0][0]] == [1, 2, 3, 4]
    # In the simulator torn tails happen on every crash; the replay accepts what recovery kept.
    result = simulate(ClusterConfig(),
                      SimOptions(seed=2, duration_ms=6000, faults=((2000, "crash", "b1", 1000),)))
    crash = events(result, "b1", "BrokerCrash")
    assert len(crash) == 1 and crash[0]["detail"]["torn_bytes"] > 0
    assert replay_run(load_texts(result.traces)).verdict == "accepted"


# Placement and the controller -------------------------------------------------------------------


def test_placement_puts_replica_j_of_partition_i_on_broker_i_plus_j_mod_n():
    meta = MetaCore(ClusterConfig(brokers=3, partitions=6))
    views = [meta.initial_view(p) for p in range(6)]
    assert [v.leader for v in views] == [0, 1, 2, 0, 1, 2]
    assert ClusterConfig(brokers=3, partitions=6).assignment(4) == (1, 2, 0)
    assert all(v.isr == (0, 1, 2) and v.leader_epoch == 0 for v in views)


def test_session_expiry_reelects_every_partition_of_the_broker_in_one_batch():
    config = ClusterConfig(brokers=3, partitions=6)
    meta = MetaCore(config)
    for b in (1, 2):
        meta.on_message(1000, f"b{b}", "x", Heartbeat(b, 0))
    effects = meta.on_timer(1800)  # b0 missed its heartbeats for > session.timeout.ms
    batch = [t for t in effects if isinstance(t, Transition)]
    assert [t.action for t in batch] == ["ControllerHandleBrokerFailure"]
    changed = {p["partition"]: (p["leader"], p["leader_epoch"], p["isr"])
               for p in batch[0].state["partitions"]}
    assert changed == {0: (1, 1, [1, 2]), 3: (1, 1, [1, 2]),
                       1: (1, 0, [1, 2]), 2: (2, 0, [1, 2]), 4: (1, 0, [1, 2]), 5: (2, 0, [1, 2])}
    sent = sorted((dst, m.partition) for dst, m in batch[0].sends)
    assert sent == [(f"b{b}", p) for b in (1, 2) for p in range(6)]


def test_a_retried_isr_change_gets_its_committed_answer_after_later_changes():
    # b1's answer to a committed ISR expansion is lost in a partition, and the store commits
    # another change before b1 retries. The retry must get the original answer: NOT_LEADER
    # would leave b1 never learning the ISR it committed, and replay would diverge.
    from impl.protocol.messages import NONE, AlterIsr, AlterIsrResponse

    meta = MetaCore(ClusterConfig())
    shrink = AlterIsr("b0/0/1", 0, 0, 0, 0, (0, 1), 2, 0, False)
    (first,) = meta.on_message(10, "b0", "m1", shrink)
    (_, answer), = first.sends
    assert (answer.error, answer.isr, answer.partition_epoch) == (NONE, (0, 1), 1)
    later = AlterIsr("b0/0/2", 0, 0, 0, 1, (0,), 1, 0, False)
    meta.on_message(20, "b0", "m2", later)
    (retry,) = meta.on_message(30, "b0", "m3", shrink)
    assert retry.message == answer and isinstance(retry.message, AlterIsrResponse)
    assert meta.partitions[0].isr == (0,)  # the retry changed nothing


def test_clean_election_leaves_the_partition_offline_and_the_bug_elects_out_of_sync():
    for bugs, leader in ((frozenset(), -1), (frozenset({"unclean-when-disabled"}), 1)):
        meta = MetaCore(ClusterConfig(bugs=bugs))
        meta.partitions[0].isr = (0,)  # followers fell out of the ISR earlier
        for b in (1, 2):
            meta.on_message(1000, f"b{b}", "x", Heartbeat(b, 0))
        (t,) = meta.on_timer(1800)
        assert t.state["partitions"][0]["leader"] == leader


def field_docs(cls: type) -> dict[str, str]:
    """The string literal under each annotated field of a class's source, by field name."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    return {field.target.id: doc.value.value
            for field, doc in zip(body[:-1], body[1:], strict=True) if isinstance(field, ast.AnnAssign) and isinstance(doc, ast.Expr)
            and isinstance(doc.value, ast.Constant) and isinstance(doc.value.value, str)}


def test_each_planted_bug_is_one_switch_that_says_what_it_breaks_and_mirrors():
    assert ClusterConfig().mutants == Mutants()
    for bug in BUGS:
        on = [name for name, value in dataclasses.asdict(ClusterConfig(bugs=frozenset({bug}))
                                                          .mutants).items() if value]
        assert on == [bug.replace("-", "_")]
    docs = field_docs(Mutants)
    assert sorted(docs) == sorted(f.name for f in dataclasses.fields(Mutants))
    # Each names the catalogue entry (docs/protocol.md), KIP or Kafka JIRA it mirrors.
    assert {name for name, doc in docs.items()
            if not re.search(r"\bB\d+\b|\bKIP-\d+|\bKAFKA-\d+", doc)} == set()


def test_cluster_config_rejects_unknown_bugs_and_variants():
    with pytest.raises(ConfigError, match="unknown bug 'nope'"):
        ClusterConfig(bugs=frozenset({"nope"}))
    with pytest.raises(ConfigError, match="variant"):
        ClusterConfig(variant="kip-999")


def test_a_leader_re_elected_after_a_missed_epoch_keeps_its_followers_leos():
    # B11 (docs/protocol.md) on the reference broker: like Kafka's makeLeader, a broker that
    # was leader keeps what it recorded of each follower when named leader in a later epoch,
    # even two epochs later, and its HW moves to that record at once.
    core = leader_core(isr=(0, 1, 2))
    core.on_message(5, "producer", "p:m1", Produce(0, (7, 8), (b"", b""), "1"))
    core.on_message(6, "b2", "b2:m1", Fetch(0, 2, 2, 0, 0, 0))
    r = core.replicas[0]
    assert (r.remote_leo[2], r.high_watermark) == (2, 0)  # broker 1 has not fetched
    effects = core.on_message(7, "meta", "meta:m9", LeaderAndIsr(0, 0, 2, (0, 2), 3))
    assert outcomes(effects) == [(Code.STILL_LEADER, {"leader_epoch": 2})]
    assert (r.leader_epoch, r.remote_leo[2], r.high_watermark) == (2, 2, 2)


def test_a_truncation_at_the_leo_sheds_and_persists_an_epoch_led_without_writing():
    # KAFKA-10706, as spec.state.Replica.truncated_to: the log stays, the entry goes, and the
    # cache is checkpointed; with nothing to shed the truncation does nothing.
    from impl.protocol.broker import Replica
    from impl.protocol.messages import DiskCheckpoint

    core = BrokerCore(0, ClusterConfig())
    r = Replica(0, 3, log=[(0, 1, b"")])
    r.epoch_cache = [(0, 0), (2, 1)]  # the constructor keeps only entries below the LEO
    assert core._truncate(r, 1) == [DiskCheckpoint(0, ((0, 0),), 0)]
    assert (r.leo, r.epoch_cache) == (1, [(0, 0)])
    assert core._truncate(r, 1) == []


def test_the_reproduce_command_runs_the_same_run(tmp_path):
    # The liveness bound is part of the run: a command without it runs another one.
    import shlex

    from isrlab.cli import main

    first = tmp_path / "first"
    assert main(["cluster", "sim", "--seed", "3", "--duration", "3s", "--liveness", "4s",
                 "--nemesis", "crash,drop", "--trace-out", str(first)]) == 0
    command = json.loads((first / "run.json").read_text())["command"]
    assert "--liveness 4000ms" in command and "--nemesis crash,drop" in command
    again = tmp_path / "again"
    assert main([*shlex.split(command)[1:], "--trace-out", str(again)]) == 0
    for path in sorted(first.glob("*.ndjson")):
        assert path.read_bytes() == (again / path.name).read_bytes(), path.name
