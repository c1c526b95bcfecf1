"""The history checker: each anomaly kind fires on a crafted history and stays silent on a clean
one; malformed histories and trace files fail with one line naming where; and a property test
corrupts random clean histories and asserts the matching anomaly is reported."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from model_check.conformance.history import (
    KINDS,
    Anomaly,
    Event,
    HistoryError,
    check_history,
    load_history,
)
from vocab.trace import FORMAT


class H:
    """A history under construction: one node per process, `seq` numbered per node."""

    def __init__(self) -> None:
        self.lines: list[dict] = []
        self._seq: dict[str, int] = {}

    def add(self, process: str, time_ms: int, **fields) -> Event:
        seq = self._seq.get(process, 0)
        self._seq[process] = seq + 1
        self.lines.append({"kind": "history", "node": process, "process": process, "seq": seq,
                           "time_ms": time_ms, **fields})
        return Event(process, seq, time_ms)

    def invoke(self, t, value, acks="all", process="producer", partition=0) -> Event:
        return self.add(process, t, type="invoke", f="send", partition=partition, value=value,
                        acks=acks)

    def ok(self, t, value, offset, acks="all", process="producer", partition=0) -> Event:
        return self.add(process, t, type="ok", f="send", partition=partition, value=value,
                        offset=offset, acks=acks)

    def send(self, t, value, offset, acks="all", process="producer", partition=0):
        """An invoke at t and its ok at t + 1; returns both events."""
        return (self.invoke(t, value, acks, process, partition),
                self.ok(t + 1, value, offset, acks, process, partition))

    def read(self, t, records, process="consumer", partition=0) -> Event:
        return self.add(process, t, type="ok", f="read", partition=partition,
                        records=[list(r) for r in records])


def kinds(result) -> dict[str, int]:
    return {k: n for k, n in result.counts.items() if n}


# --- clean histories ------------------------------------------------------------------------


def test_a_clean_history_has_no_anomalies():
    h = H()
    h.send(0, 1, 0)
    h.send(10, 2, 1, acks="1")
    h.send(20, 3, -1, acks="0")
    h.add("producer", 30, type="invoke", f="send", partition=0, value=4, acks="all")
    h.add("producer", 31, type="fail", f="send", partition=0, value=4, acks="all",
          error="NOT_ENOUGH_REPLICAS")
    h.read(40, [(0, 1), (1, 2)])
    h.read(50, [(2, 3)])
    result = check_history(h.lines)
    assert result.clean
    assert result.counts == dict.fromkeys(KINDS, 0)
    assert result.acked == {"0": 1, "1": 1, "all": 1}
    assert result.lost == {"1": 0, "all": 0}
    assert result.unverified == {"1": 0, "all": 0}
    assert result.reads == 2
    assert check_history(h.lines, final_logs={0: [1, 2, 3]}).clean


def test_writes_no_read_covers_are_unverified_not_lost():
    h = H()
    h.send(0, 1, 0)
    h.send(10, 2, 1, acks="1")
    h.read(20, [(0, 1)])
    result = check_history(h.lines)
    assert result.clean
    assert result.unverified == {"1": 1, "all": 0}


def test_lines_of_other_kinds_are_skipped():
    h = H()
    h.send(0, 1, 0)
    lines = [{"kind": "header", "node": "producer"}, *h.lines,
             {"kind": "nemesis", "node": "nemesis", "seq": 0, "time_ms": 0, "f": "crash"}]
    assert check_history(lines).acked["all"] == 1


def test_a_node_clock_going_back_keeps_the_node_in_seq_order():
    # A restarted client process in TCP mode continues its seq but its clock may restart.
    h = H()
    h.invoke(1000, 1)
    h.ok(5, 1, 0)
    h.read(500, [(0, 1)])
    assert check_history(h.lines).clean


# --- lost writes ----------------------------------------------------------------------------


def test_lost_write_when_the_last_read_covering_its_offset_has_another_value():
    h = H()
    inv, ok = h.send(0, 1, 0)
    h.read(5, [(0, 1)])
    final = h.read(20, [(0, 9)])
    result = check_history(h.lines)
    assert result.anomalies[0] == Anomaly(
        "lost-write", 0, (0,), (1, 9), (inv, ok, final),
        "p0: acks=all write 1 acknowledged at offset 0 is lost: the last read covering it "
        "(consumer seq 1) has 9 there", "all")
    assert result.lost == {"1": 0, "all": 1}
    # The same fault is also an uncommitted read, two values at one offset, and a consumer
    # that went back to an offset it had read.
    assert kinds(result) == {"lost-write": 1, "uncommitted-read": 1, "inconsistent-offsets": 1,
                             "nonmonotonic-poll": 1}


def test_lost_write_beyond_the_end_of_the_final_log_per_acks_level():
    h = H()
    h.send(0, 1, 0, acks="all")
    inv, ok = h.send(10, 2, 1, acks="1")
    result = check_history(h.lines, final_logs={0: [1]})
    assert result.anomalies == (Anomaly(
        "lost-write", 0, (1,), (2,), (inv, ok),
        "p0: acks=1 write 2 acknowledged at offset 1 is lost: the final log has nothing there",
        "1"),)
    assert result.lost == {"1": 1, "all": 0}


def test_a_gap_in_the_last_covering_read_loses_the_write():
    h = H()
    h.send(0, 1, 0)
    h.send(2, 2, 1)
    h.send(4, 3, 2)
    h.read(10, [(0, 1), (2, 3)])
    result = check_history(h.lines)
    assert [(a.kind, a.offsets, a.values) for a in result.anomalies] == [
        ("lost-write", (1,), (2,)), ("poll-skip", (1,), ())]


def test_acks_0_writes_are_never_lost():
    h = H()
    h.send(0, 1, -1, acks="0")
    result = check_history(h.lines, final_logs={0: []})
    assert result.clean
    assert result.acked == {"0": 1, "1": 0, "all": 0}


def test_acks_minus_one_means_all():
    h = H()
    h.send(0, 1, 0, acks=-1)
    result = check_history(h.lines, final_logs={0: []})
    assert result.lost == {"1": 0, "all": 1}


# --- duplicates -----------------------------------------------------------------------------


def test_duplicate_value_at_two_offsets_in_reads():
    h = H()
    h.send(0, 1, 0)
    first = h.read(10, [(0, 1)])
    second = h.read(20, [(1, 1)])
    result = check_history(h.lines)
    assert result.anomalies == (Anomaly(
        "duplicate", 0, (0, 1), (1,), (first, second), "p0: value 1 is at offsets 0, 1"),)


def test_duplicate_in_the_final_log():
    h = H()
    h.send(0, 1, 0)
    result = check_history(h.lines, final_logs={0: [1, 1]})
    assert [(a.kind, a.offsets, a.values, a.events) for a in result.anomalies] == [
        ("duplicate", (0, 1), (1,), ())]


def test_the_same_value_in_two_partitions_is_not_a_duplicate_of_one_log():
    h = H()
    h.read(0, [(0, 1)], partition=0)
    h.read(1, [(3, 1)], partition=1)
    assert check_history(h.lines).clean


# --- consumer polls ---------------------------------------------------------------------------


def test_a_poll_that_goes_back_is_nonmonotonic():
    h = H()
    first = h.read(10, [(0, 1), (1, 2)])
    again = h.read(20, [(1, 2), (2, 3)])
    h.read(30, [(3, 4)])
    h.read(40, [(0, 9)], process="c1")  # another consumer starts where it likes
    result = check_history(h.lines)
    assert Anomaly(
        "nonmonotonic-poll", 0, (1, 1), (2, 2), (first, again),
        "p0: consumer (seq 1) read from offset 1 after its previous read (consumer seq 0) had "
        "reached offset 1") in result.anomalies
    assert kinds(result) == {"nonmonotonic-poll": 1, "inconsistent-offsets": 1,
                             "uncommitted-read": 1}
    inside = H()
    inside.read(10, [(0, 1), (2, 3), (1, 2)])
    assert kinds(check_history(inside.lines)) == {"nonmonotonic-poll": 1}


def test_a_poll_that_skips_offsets_is_a_poll_skip():
    h = H()
    first = h.read(10, [(0, 1), (1, 2)])
    skipped = h.read(20, [(4, 5)])
    h.read(20, [(2, 3)], partition=1)  # each partition has its own order
    result = check_history(h.lines)
    assert result.anomalies == (Anomaly(
        "poll-skip", 0, (1, 4), (2, 5), (first, skipped),
        "p0: consumer (seq 1) read from offset 4, skipping offsets 2..3 after its previous "
        "read (consumer seq 0) ended at 1"),)


def test_expected_kinds_follow_the_configuration():
    from model_check.conformance.replay import given_up_of
    from vocab.anomalies import expected_kinds as allowed
    from vocab.anomalies import split

    def expected_kinds(header):  # what the header gives up (spec.promises), then the table
        return allowed(given_up_of(header))

    durable = {"acks": "all", "unclean_leader_election_enable": False, "nemesis": ["crash"],
               "log_flush_interval_messages": 1}
    assert expected_kinds(durable) == {"duplicate"}
    assert expected_kinds({**durable, "acks": "1"}) == {
        "duplicate", "lost-write", "nonmonotonic-send", "inconsistent-offsets"}
    unclean = {**durable, "unclean_leader_election_enable": True}
    assert expected_kinds(unclean) == {
        "duplicate", "lost-write", "nonmonotonic-send", "inconsistent-offsets",
        "uncommitted-read", "nonmonotonic-poll"}
    # Without fsync a crash of every replica holding a write loses it; a pause does not.
    assert "lost-write" in expected_kinds({**durable, "log_flush_interval_messages": None})
    assert "lost-write" in expected_kinds({**durable, "nemesis": [], "faults": ["isr-kill"],
                                           "log_flush_interval_messages": None})
    assert expected_kinds({**durable, "nemesis": ["pause"],
                           "log_flush_interval_messages": None}) == {"duplicate"}
    assert all("poll-skip" not in expected_kinds(c) for c in (durable, unclean))
    assert split({"lost-write": 2, "duplicate": 1, "poll-skip": 0}, given_up_of(durable)) == {
        "expected": {"duplicate": 1}, "bad": {"lost-write": 2}}
    # A partial header is read at the defaults (acks=all, clean, no faults); -1 is all.
    assert expected_kinds({"acks": "1"}) == expected_kinds({**durable, "acks": "1"})
    assert expected_kinds({}) == expected_kinds({"acks": "-1"}) == {"duplicate"}


def test_the_anomaly_split_reads_the_one_promise_table(monkeypatch):
    # Nothing given up in spec.promises: the kinds acks=1 and unclean election excused are bad.
    import spec.promises
    from model_check.conformance.replay import given_up_of
    from pyspark_harness.report import expected_by_config
    from vocab.anomalies import split

    counts = {"lost-write": 2, "uncommitted-read": 1, "duplicate": 1}
    unclean = {"acks": "1", "unclean_leader_election_enable": True}
    spark_config = '{"acks":"1"}'  # Spark's per-config table, as the report builds it
    assert split(counts, given_up_of(unclean))["bad"] == {}
    assert expected_by_config([spark_config], given_up_of) == [
        (spark_config, ["duplicate", "inconsistent-offsets", "lost-write", "nonmonotonic-send"])]
    monkeypatch.setattr(spec.promises, "TRADE_OFFS", ())
    assert split(counts, given_up_of(unclean)) == {
        "expected": {"duplicate": 1}, "bad": {"lost-write": 2, "uncommitted-read": 1}}
    assert expected_by_config([spark_config], given_up_of) == [(spark_config, ["duplicate"])]
    with pytest.raises(TypeError):  # a header config is not a list of given-up invariants
        split(counts, unclean)


# --- reordering -----------------------------------------------------------------------------


def test_reordered_write_acked_below_an_earlier_acked_write():
    h = H()
    _, ok1 = h.send(0, 1, 5)
    inv2, ok2 = h.send(10, 2, 3)
    result = check_history(h.lines)
    assert result.anomalies == (Anomaly(
        "nonmonotonic-send", 0, (5, 3), (1, 2), (ok1, inv2, ok2),
        "p0: producer had 1 acknowledged at offset 5 before it sent 2, which was acknowledged "
        "at the lower offset 3", "all"),)


def test_concurrent_or_other_process_writes_are_not_reordered():
    h = H()
    h.invoke(0, 1)
    h.invoke(1, 2)
    h.ok(2, 1, 5)  # 1 was acknowledged after 2 was invoked: they were concurrent
    h.ok(3, 2, 3)
    h.send(10, 3, 1, process="other")  # another producer may land lower
    h.send(20, 4, 4, partition=1)  # another partition has its own offsets
    assert check_history(h.lines).clean


# --- uncommitted reads and inconsistent offsets -----------------------------------------------


def test_uncommitted_read_when_a_later_read_has_another_value():
    h = H()
    early = h.read(10, [(0, 1), (1, 2)])
    late = h.read(20, [(0, 1), (1, 7)], process="c1")
    result = check_history(h.lines)
    assert result.anomalies == (
        Anomaly("uncommitted-read", 0, (1,), (2, 7), (early, late),
                "p0: consumer (seq 0) read 2 at offset 1, later lost: the last read covering "
                "it (c1 seq 0) has 7 there"),
        Anomaly("inconsistent-offsets", 0, (1,), (2, 7), (early, late),
                "p0: 2 values at offset 1: consumer seq 0 read 2; c1 seq 0 read 7"),
    )


def test_uncommitted_read_against_the_final_log():
    h = H()
    read = h.read(10, [(0, 1), (1, 2)])
    result = check_history(h.lines, final_logs={0: [1]})
    assert result.anomalies == (Anomaly(
        "uncommitted-read", 0, (1,), (2,), (read,),
        "p0: consumer (seq 0) read 2 at offset 1, later lost: the final log has nothing there"),)


def test_inconsistent_offset_two_acks_at_one_offset():
    h = H()
    _, ok1 = h.send(0, 1, 0, acks="1")
    _, ok2 = h.send(10, 2, 0, acks="1", process="other")
    result = check_history(h.lines)
    assert result.anomalies == (Anomaly(
        "inconsistent-offsets", 0, (0,), (1, 2), (ok1, ok2),
        "p0: 2 values at offset 0: producer seq 1 acked 1; other seq 1 acked 2"),)


def test_inconsistent_offset_between_an_ack_and_an_earlier_read():
    h = H()
    read = h.read(0, [(0, 9)])
    _, ok = h.send(10, 1, 0)
    result = check_history(h.lines, final_logs={0: [1]})
    assert result.anomalies == (
        Anomaly("uncommitted-read", 0, (0,), (9, 1), (read,),
                "p0: consumer (seq 0) read 9 at offset 0, later lost: the final log has 1 "
                "there"),
        Anomaly("inconsistent-offsets", 0, (0,), (9, 1), (read, ok),
                "p0: 2 values at offset 0: consumer seq 0 read 9; producer seq 1 acked 1"),
    )


# --- results as JSON --------------------------------------------------------------------------


def test_to_json_counts_every_kind_and_lists_details():
    h = H()
    h.send(0, 1, 0)
    out = check_history(h.lines, final_logs={0: []}).to_json()
    assert out["anomalies"] == {"lost-write": 1, "duplicate": 0, "nonmonotonic-send": 0,
                                "uncommitted-read": 0, "inconsistent-offsets": 0,
                                "poll-skip": 0, "nonmonotonic-poll": 0}
    assert out["details"] == [{
        "kind": "lost-write", "partition": 0, "offsets": [0], "values": [1], "acks": "all",
        "events": [{"process": "producer", "seq": 0, "time_ms": 0},
                   {"process": "producer", "seq": 1, "time_ms": 1}],
        "detail": "p0: acks=all write 1 acknowledged at offset 0 is lost: the final log has "
                  "nothing there"}]
    assert out["acked"] == {"0": 0, "1": 0, "all": 1}
    assert json.loads(json.dumps(out)) == out


# --- malformed histories and files --------------------------------------------------------------


def test_ok_without_invoke_is_malformed():
    h = H()
    h.ok(0, 1, 0)
    with pytest.raises(HistoryError, match=r"history line 0 \(producer seq 0\): ok of send 1 "
                                           r"without an earlier invoke by producer"):
        check_history(h.lines)


def test_ok_from_another_process_or_twice_is_malformed():
    h = H()
    h.invoke(0, 1)
    h.ok(1, 1, 0, process="other")
    with pytest.raises(HistoryError, match="without an earlier invoke by other"):
        check_history(h.lines)
    h = H()
    h.send(0, 1, 0)
    h.ok(5, 1, 0)
    with pytest.raises(HistoryError, match=r"\(producer seq 2\): send 1 completed twice"):
        check_history(h.lines)


def test_missing_field_is_malformed():
    h = H()
    h.invoke(0, 1)
    del h.lines[0]["value"]
    with pytest.raises(HistoryError, match=r"producer seq 0\): missing field 'value'"):
        check_history(h.lines)


def _write(path, lines):
    path.write_text("".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))


def _header(node: str) -> dict:
    config = {"acks": "all", "brokers": 1, "partitions": 1, "variant": "current",
              "min_insync_replicas": 1, "unclean_leader_election_enable": False}
    return {"kind": "header", "format": FORMAT, "node": node, "run": "seed-1", "seed": 1,
            "mode": "sim", "commit": "test", "config": config}


def test_load_history_selects_history_lines_from_files_and_directories(tmp_path):
    h = H()
    h.send(0, 1, 0)
    h.read(5, [(0, 1)])
    _write(tmp_path / "producer.ndjson", [_header("producer"), *h.lines[:2]])
    _write(tmp_path / "consumer.ndjson", [_header("consumer"), h.lines[2]])
    loaded = load_history([tmp_path])
    assert sorted(loaded, key=lambda line: line["node"]) == sorted(h.lines,
                                                                   key=lambda line: line["node"])
    assert check_history(loaded).reads == 1
    assert load_history([tmp_path / "producer.ndjson"]) == h.lines[:2]


def test_load_history_names_file_and_line(tmp_path):
    path = tmp_path / "producer.ndjson"
    header = json.dumps(_header("producer"))
    h = H()
    h.invoke(0, 1)
    invoke = h.lines[0]
    cases = [
        ('{"kind":"history",', "not JSON: "),
        ("[1]", "not a JSON object"),
        ('{"kind":"gossip"}', "unknown line kind 'gossip'"),
        (json.dumps({**invoke, "seq": "0"}), "history line: Expected `int`, got `str` - at `$.seq`"),
        (json.dumps({k: v for k, v in invoke.items() if k != "process"}),
         "history line: Object missing required field `process`"),
        (json.dumps({**invoke, "type": "maybe"}), "history line: Invalid enum value 'maybe' - at "
                                                  "`$.type`"),
        (json.dumps({**invoke, "value": "1"}), "history line: Expected `int | null`, got `str`"),
    ]
    for line, message in cases:
        path.write_text(f"{header}\n{line}\n")
        with pytest.raises(HistoryError, match="^" + re.escape(f"{path}:2: {message}")):
            load_history([path])
    path.write_text(header.replace(FORMAT, "isrlab-trace/1") + "\n")
    with pytest.raises(HistoryError, match=re.escape(f"{path}:1: format 'isrlab-trace/1'")):
        load_history([path])
    h = H()
    h.ok(0, 1, 0)
    _write(path, [_header("producer"), *h.lines])
    with pytest.raises(HistoryError, match=rf"^{path}:2 \(producer seq 0\): ok of send 1"):
        check_history(load_history([path]))


# --- property: clean linear histories, then one corruption ------------------------------------


@st.composite
def linear_runs(draw):
    """A clean run over one log: producers invoke, the leader appends, acks come back, and a
    consumer process reads on from its position up to a committed point; ends with final logs
    or a full read by another consumer.

    Returns (history, log, final_logs or None, index of the final full read or None).
    """
    h = H()
    producers = [f"p{n}" for n in range(draw(st.integers(1, 3)))]
    log: list[int] = []
    invoked: list[tuple[int, str, str]] = []  # (value, process, acks) not yet appended
    appended: list[tuple[int, str, str, int]] = []  # ... with offset, not yet acknowledged
    t, next_value = 0, 100
    position = {"c0": 0, "c1": 0}
    for _ in range(draw(st.integers(0, 50))):
        step = draw(st.sampled_from(["invoke"] + ["append"] * bool(invoked)
                                    + ["ack"] * bool(appended) + ["read"] * bool(log)))
        t += draw(st.integers(0, 2))
        if step == "invoke":
            process = draw(st.sampled_from(producers))
            acks = draw(st.sampled_from(["all", "1", "0"]))
            h.invoke(t, next_value, acks, process)
            invoked.append((next_value, process, acks))
            next_value += 1
        elif step == "append":
            value, process, acks = invoked.pop(draw(st.integers(0, len(invoked) - 1)))
            log.append(value)
            appended.append((value, process, acks, len(log) - 1))
        elif step == "ack":
            value, process, acks, offset = appended.pop(draw(st.integers(0, len(appended) - 1)))
            h.ok(t, value, -1 if acks == "0" else offset, acks, process)
        elif step == "read":
            process = draw(st.sampled_from(["c0", "c1"]))
            start = position[process]
            committed = draw(st.integers(start, len(log)))
            if committed > start:
                h.read(t, [(o, log[o]) for o in range(start, committed)], process=process)
                position[process] = committed
    if draw(st.booleans()):
        return h, log, {0: list(log)}, None
    h.read(t + 1, list(enumerate(log)), process="c2")
    return h, log, None, len(h.lines) - 1


def acked_writes(lines):
    """(value, offset, line index) of every acks 1/all `ok` send."""
    return [(line["value"], line["offset"], i) for i, line in enumerate(lines)
            if line["f"] == "send" and line["type"] == "ok" and line["acks"] != "0"]


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(linear_runs())
def test_random_clean_linear_histories_have_no_anomalies(run):
    h, log, final_logs, _ = run
    result = check_history(h.lines, final_logs)
    assert result.clean, result.to_json()
    assert result.unverified == {"1": 0, "all": 0}
    assert sum(result.acked.values()) == sum(
        1 for line in h.lines if line["f"] == "send" and line["type"] == "ok")


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(linear_runs(), st.data())
def test_dropping_an_acked_value_from_the_final_log_is_a_lost_write(run, data):
    h, log, _, _ = run
    acked = acked_writes(h.lines)
    if not acked:
        event("vacuous: no acknowledged write")
        return
    value, offset, _ = data.draw(st.sampled_from(acked))
    final = [v for v in log if v != value]
    result = check_history(h.lines, {0: final})
    lost = [a for a in result.anomalies if a.kind == "lost-write"]
    assert any(a.values[0] == value and a.offsets == (offset,) for a in lost), result.to_json()


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(linear_runs(), st.data())
def test_a_value_at_a_second_offset_is_a_duplicate(run, data):
    h, log, final_logs, final_read = run
    if not log:
        event("vacuous: empty log")
        return
    offset = data.draw(st.integers(0, len(log) - 1))
    value = log[offset]
    if final_logs is not None:
        final_logs[0].append(value)
    else:
        h.lines[final_read]["records"].append([len(log), value])
    result = check_history(h.lines, final_logs)
    assert [(a.offsets, a.values) for a in result.anomalies if a.kind == "duplicate"] == [
        ((offset, len(log)), (value,))]


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(linear_runs(), st.data())
def test_swapping_two_offsets_in_a_read_is_reported(run, data):
    h, _, final_logs, final_read = run
    reads = [i for i, line in enumerate(h.lines)
             if line["f"] == "read" and len(line["records"]) >= 2 and i != final_read]
    if not reads:
        event("vacuous: no read of two records before the end")
        return
    records = h.lines[data.draw(st.sampled_from(reads))]["records"]
    a, b = sorted(data.draw(st.lists(st.integers(0, len(records) - 1), min_size=2,
                                     max_size=2, unique=True)))
    (oa, va), (ob, vb) = records[a], records[b]
    records[a], records[b] = [oa, vb], [ob, va]
    result = check_history(h.lines, final_logs)
    found = {(x.kind, x.offsets, x.values[0]) for x in result.anomalies}
    # The final state (final log or the last full read) still has the true values.
    assert {("uncommitted-read", (oa,), vb), ("uncommitted-read", (ob,), va)} <= found
    if final_logs is None:
        assert {("inconsistent-offsets", (oa,)), ("inconsistent-offsets", (ob,))} <= {
            (kind, offsets) for kind, offsets, _ in found}


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(linear_runs(), st.data())
def test_swapping_the_ack_offsets_of_two_sequential_writes_is_a_reordering(run, data):
    h, _, final_logs, _ = run
    # Pairs w1, w2 of one process where w1's ok comes before w2's invoke.
    invoked_at = {line["value"]: i for i, line in enumerate(h.lines)
                  if line["f"] == "send" and line["type"] == "invoke"}
    acked = acked_writes(h.lines)
    pairs = [(i1, i2) for v1, o1, i1 in acked for v2, o2, i2 in acked
             if h.lines[i1]["process"] == h.lines[i2]["process"] and i1 < invoked_at[v2]]
    if not pairs:
        event("vacuous: no two sequential acknowledged writes")
        return
    i1, i2 = data.draw(st.sampled_from(pairs))
    w1, w2 = h.lines[i1], h.lines[i2]
    w1["offset"], w2["offset"] = w2["offset"], w1["offset"]
    result = check_history(h.lines, final_logs)
    assert any(a.kind == "nonmonotonic-send" and w2["value"] in a.values
               for a in result.anomalies), result.to_json()


@pytest.mark.parametrize(("line", "reason"), [
    ('{"kind":"history","x":' + "[" * 100_000 + "]" * 100_000 + "}", "JSON nested too deeply"),
    ('{"kind":"history","x":"' + "y" * (2 << 20) + '"}', "line over 1048576 characters"),
])
def test_a_hostile_line_is_a_history_error_naming_it(tmp_path, line, reason):
    from model_check.conformance.history import HistoryError, load_history

    header = json.dumps({"kind": "header", "format": FORMAT, "node": "producer", "run": "r",
                         "seed": 1, "mode": "sim", "commit": "c",
                         "config": {"acks": "all", "brokers": 3, "partitions": 1,
                                    "variant": "current", "min_insync_replicas": 2,
                                    "unclean_leader_election_enable": False}})
    path = tmp_path / "producer.ndjson"
    path.write_text(header + "\n" + line + "\n", encoding="utf-8")
    with pytest.raises(HistoryError, match=re.escape(f"{path}:2: {reason}")):
        load_history([tmp_path])
