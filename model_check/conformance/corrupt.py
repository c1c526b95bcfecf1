"""Corruptions of a real run directory, for testing that replay rejects what changed a run's
meaning and accepts what did not.

A run is held as `{file name: bytes}` (the `*.ndjson` traces and `run.json`). Each `Kind` is a
pure function `(files, rng) -> files | None` (None: the run has nothing it could corrupt) and
says whether it changes what the run means. Meaning-changing kinds must be rejected by
`isrlab replay` (exit 1 or 2, one message, no traceback); controls must be accepted.

    from model_check.conformance.corrupt import KINDS, read_run, write_run
    files = read_run(run_dir)
    for kind in KINDS: bad = kind.apply(files, random.Random(seed))
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from impl.trace import FINAL_LOGS_FILE, FINAL_LOGS_KEY, write_final_logs

Files = dict[str, bytes]


@dataclass(frozen=True)
class Kind:
    name: str
    changes_meaning: bool
    apply: Callable[[Files, random.Random], Files | None]
    what: str


def read_run(run_dir: Path) -> Files:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())
            if p.suffix == ".ndjson" or p.name in ("run.json", FINAL_LOGS_FILE)}


def write_run(files: Files, run_dir: Path) -> Path:
    """`files` as the whole run in `run_dir`: a run file of an earlier case that `files` has
    not (a deleted or renamed node's) is removed, or it would be read with this run."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for stale in read_run(run_dir).keys() - files.keys():
        (run_dir / stale).unlink()
    for name, data in files.items():
        (run_dir / name).write_bytes(data)
    return run_dir


# Lines ----------------------------------------------------------------------------------------


def _lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.splitlines() if line.strip()]


def _dump(lines: list[dict]) -> bytes:
    return b"".join(json.dumps(b, sort_keys=True).encode() + b"\n" for b in lines)


def _renumber(lines: list[dict]) -> list[dict]:
    for seq, body in enumerate(lines[1:]):
        body["seq"] = seq
    return lines


def _edit_one(files: Files, rng: random.Random, name: str, pick: Callable[[dict], bool],
              change: Callable[[dict, list[dict]], None]) -> Files | None:
    """Change one line of `name` chosen by `rng` among those `pick` accepts."""
    if name not in files:
        return None
    lines = _lines(files[name])
    chosen = [i for i, b in enumerate(lines) if pick(b)]
    if not chosen:
        return None
    i = rng.choice(chosen)
    change(lines[i], lines)
    return {**files, name: _dump(lines)}


def _is_ok_write(b: dict) -> bool:
    return b.get("kind") == "history" and b.get("f") == "send" and b.get("type") == "ok"


def _is_read(b: dict) -> bool:
    return (b.get("kind") == "history" and b.get("f") == "read" and b.get("type") == "ok"
            and bool(b.get("records")))


def _never_sent(lines: list[dict]) -> int:
    return max((b.get("value") or 0 for b in lines), default=0) + 1_000


def _set(key: str, value) -> Callable[[dict, list[dict]], None]:
    def change(body: dict, lines: list[dict]) -> None:
        body[key] = value
    return change


def _drop_key(key: str) -> Callable[[dict, list[dict]], None]:
    def change(body: dict, lines: list[dict]) -> None:
        body.pop(key, None)
    return change


def ack_of_a_value_never_sent(files, rng):
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write,
                     lambda b, lines: b.update(value=_never_sent(lines)))


def ack_without_offset(files, rng):
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write, _drop_key("offset"))


def ack_at_offset_minus_one(files, rng):
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write, _set("offset", -1))


def ack_at_a_negative_offset(files, rng):
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write, _set("offset", -7))


def ack_at_another_offset(files, rng):
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write,
                     lambda b, lines: b.update(offset=b["offset"] + 1))


def ack_at_another_acks_level(files, rng):
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write,
                     lambda b, lines: b.update(acks="1" if b.get("acks") != "1" else "all"))


def ack_rewritten_as_failure(files, rng):
    def change(b: dict, lines: list[dict]) -> None:
        b.update(type="fail", error="NOT_ENOUGH_REPLICAS")
        b.pop("offset", None)
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write, change)


def _delete(name: str, pick, renumber: bool):
    def apply(files, rng):
        if name not in files:
            return None
        lines = _lines(files[name])
        chosen = [i for i, b in enumerate(lines) if pick(b)]
        if not chosen:
            return None
        del lines[rng.choice(chosen)]
        return {**files, name: _dump(_renumber(lines) if renumber else lines)}
    return apply


def _duplicate(name: str, pick, renumber: bool):
    def apply(files, rng):
        if name not in files:
            return None
        lines = _lines(files[name])
        chosen = [i for i, b in enumerate(lines) if pick(b)]
        if not chosen:
            return None
        i = rng.choice(chosen)
        lines.insert(i + 1, dict(lines[i]))
        return {**files, name: _dump(_renumber(lines) if renumber else lines)}
    return apply


def read_of_a_value_never_written(files, rng):
    def change(b: dict, lines: list[dict]) -> None:
        records = b["records"]
        k = rng.randrange(len(records))
        records[k] = [records[k][0], 10**6 + records[k][1]]
    return _edit_one(files, rng, "consumer.ndjson", _is_read, change)


def read_at_a_negative_offset(files, rng):
    def change(b: dict, lines: list[dict]) -> None:
        b["records"][0] = [-3, b["records"][0][1]]
    return _edit_one(files, rng, "consumer.ndjson", _is_read, change)


def append_value_changed(files, rng):
    names = [n for n in files if n.startswith("b")]
    rng.shuffle(names)
    for name in names:
        out = _edit_one(files, rng, name, lambda b: b.get("action") == "LeaderAppend",
                        lambda b, lines: b["args"].update(value=b["args"]["value"] + 1))
        if out is not None:
            return out
    return None


def eligible_replica_forged(files, rng):
    """A store state that lists an eligible leader replica (KIP-966) the spec has not."""
    def change(b: dict, lines: list[dict]) -> None:
        partition = b["state"]["partitions"][0]
        partition["elr"] = [*(partition.get("elr") or []), 9]
    return _edit_one(files, rng, "meta.ndjson",
                     lambda b: b.get("kind") == "event" and bool((b.get("state") or {})
                                                                 .get("partitions")), change)


def run_erased(files, rng):
    """Every file reduced to its header, run.json gone: nothing left to check."""
    return {name: data.split(b"\n", 1)[0] + b"\n" for name, data in files.items()
            if name != "run.json"}


def post_states_nulled(files, rng):
    out = dict(files)
    for name, data in files.items():
        if name.endswith(".ndjson"):
            lines = _lines(data)
            for b in lines:
                if b.get("kind") == "event" and "state" in b:
                    b["state"] = None
            out[name] = _dump(lines)
    return out


def config_boolean_as_string(files, rng):
    out = dict(files)
    for name, data in files.items():
        if name.endswith(".ndjson"):
            lines = _lines(data)
            value = lines[0]["config"]["unclean_leader_election_enable"]
            lines[0]["config"]["unclean_leader_election_enable"] = str(value).lower()
            out[name] = _dump(lines)
    return out


def drop_of_an_answered_fetch(files, rng):
    """A NetworkDrop of a fetch that the leader did handle, in the nemesis trace at the
    fetch's time, run.json counting it."""
    handled = []
    for name, data in files.items():
        if name.startswith("b"):
            handled += [b for b in _lines(data) if b.get("action") == "LeaderHandleFetch"]
    if not handled or "nemesis.ndjson" not in files:
        return None
    fetch = rng.choice(handled)
    lines = _lines(files["nemesis.ndjson"])
    at = next((i for i, b in enumerate(lines) if i and b["time_ms"] > fetch["time_ms"]),
              len(lines))  # where its time puts it: the nemesis's clock never goes back
    lines.insert(at, {"kind": "event", "node": "nemesis", "seq": 0,
                      "time_ms": fetch["time_ms"], "action": "NetworkDrop", "args": {},
                      "outcome": "DROPPED", "send": [], "recv": fetch["recv"],
                      "detail": {"src": f"b{fetch['args']['follower']}",
                                 "dst": f"b{fetch['args']['broker']}", "type": "Fetch",
                                 "partition": fetch["args"]["partition"], "why": "partition"}})
    out = {**files, "nemesis.ndjson": _dump(_renumber(lines))}
    run = _run_json(files)
    if run is not None:  # counted, so that only the drop itself is wrong
        run["summary"]["dropped_messages"] += 1
        out = _with_run_json(out, run)
    return out


def run_json_count_changed(files, rng):
    if "run.json" not in files:
        return None
    run = json.loads(files["run.json"])
    key = rng.choice(["writes_acked", "reads", "events"])
    run["summary"][key] += 1
    return {**files, "run.json": json.dumps(run, sort_keys=True).encode() + b"\n"}


def run_json_not_json(files, rng):
    if "run.json" not in files:
        return None
    data = files["run.json"]
    return {**files, "run.json": data[:rng.randrange(1, len(data) - 2)]}


def run_json_count_as_a_string(files, rng):
    if "run.json" not in files:
        return None
    run = json.loads(files["run.json"])
    run["summary"]["writes_acked"] = str(run["summary"]["writes_acked"])
    return {**files, "run.json": json.dumps(run, sort_keys=True).encode() + b"\n"}


def final_log_changed(files, rng):
    files = _final_logs_inline(files)
    if files is None:
        return None
    run = json.loads(files["run.json"])
    logs = [log for log in run.get("final_logs", {}).values() if log]
    if not logs:
        return None
    log = rng.choice(logs)
    k = rng.randrange(len(log))
    log[k] = [log[k][0], log[k][1] + 10**6]
    return {**files, "run.json": json.dumps(run, sort_keys=True).encode() + b"\n"}


def run_json_config_changed(files, rng):
    if "run.json" not in files:
        return None
    run = json.loads(files["run.json"])
    run["config"]["min_insync_replicas"] = 1 + run["config"]["min_insync_replicas"] % 3
    return {**files, "run.json": json.dumps(run, sort_keys=True).encode() + b"\n"}


def invoke_of_another_value(files, rng):
    """An invoke whose write later completed names another value (the invoke of a write the
    run ended before sending names nothing anyone can check)."""
    if "producer.ndjson" not in files:
        return None
    completed = {b.get("value") for b in _lines(files["producer.ndjson"])
                 if b.get("kind") == "history" and b.get("type") in ("ok", "fail", "info")}
    return _edit_one(files, rng, "producer.ndjson",
                     lambda b: (b.get("kind") == "history" and b.get("type") == "invoke"
                                and b.get("value") in completed),
                     lambda b, lines: b.update(value=_never_sent(lines)))


def _raw_line(files, rng, name: str, change: Callable[[bytes], bytes]):
    if name not in files:
        return None
    lines = files[name].split(b"\n")
    i = rng.randrange(1, max(2, len(lines) - 1))
    lines[i] = change(lines[i])
    return {**files, name: b"\n".join(lines)}


def not_utf8(files, rng):
    return _raw_line(files, rng, "b0.ndjson", lambda line: line[:20] + b"\xff\xfe" + line[20:])


def deeply_nested(files, rng):
    def change(line: bytes) -> bytes:
        body = json.loads(line)
        text = json.dumps(body, sort_keys=True)
        return (text[:-1] + ',"detail":' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    return _raw_line(files, rng, "b0.ndjson", change)


def history_field_of_a_wrong_type(files, rng):
    field = rng.choice(["value", "offset", "partition"])
    return _edit_one(files, rng, "producer.ndjson", _is_ok_write,
                     lambda b, lines: b.update({field: str(b.get(field))}))


def oversize_line(files, rng):
    return _edit_one(files, rng, "b0.ndjson", lambda b: b.get("kind") == "event",
                     lambda b, lines: b.update(detail={"pad": "x" * (2 << 20)}))


def truncated_mid_line(files, rng):
    data = files["b0.ndjson"]
    return {**files, "b0.ndjson": data[:rng.randrange(len(data) // 2, len(data) - 2)]}


def event_seq_gap(files, rng):
    return _delete("b0.ndjson", lambda b: b.get("kind") == "event", renumber=False)(files, rng)


# What the run says about how to judge it, and what it leaves out ---------------------------------


def _run_json(files: Files) -> dict | None:
    return json.loads(files["run.json"]) if "run.json" in files else None


def _with_run_json(files: Files, run: dict) -> Files:
    return {**files, "run.json": json.dumps(run, sort_keys=True).encode() + b"\n"}


def _each_header(files: Files, change: Callable[[dict], None]) -> Files:
    """Every file's header (and run.json, which repeats it) changed alike."""
    out = dict(files)
    for name, data in files.items():
        if name.endswith(".ndjson"):
            header, rest = data.split(b"\n", 1)
            body = json.loads(header)
            change(body)
            out[name] = json.dumps(body, sort_keys=True).encode() + b"\n" + rest
    run = _run_json(files)
    if run is not None:
        change(run)
        out = _with_run_json(out, run)
    return out


def rules_claimed_off(files, rng):
    """Every header and run.json claim the run is judged without fencing, as a planted
    bug's run would to be judged by the spec without the rule it breaks."""
    return _each_header(files, lambda b: b["config"].update(spec_rules_off=["fencing"]))


def _cut(files: Files, fraction: float) -> Files:
    """Every trace file cut after its lines up to `fraction` of the run's duration."""
    header = json.loads(files["b0.ndjson"].split(b"\n", 1)[0])
    until = int(header["config"]["duration_ms"] * fraction)
    out = dict(files)
    for name, data in files.items():
        if name.endswith(".ndjson"):
            lines = _lines(data)
            out[name] = _dump([b for b in lines if b.get("kind") == "header"
                               or b["time_ms"] <= until])
    return out


def cut_short_without_run_json(files, rng):
    out = _cut(files, 0.6)
    out.pop("run.json", None)
    return out


def cut_short_with_run_json_emptied(files, rng):
    return {**_cut(files, 0.6), "run.json": b'{"summary": {}}\n'}


def node_file_deleted(files, rng):
    """The consumer's file gone, and run.json's count of its reads with it."""
    run = _run_json(files)
    if run is None or "consumer.ndjson" not in files:
        return None
    run["summary"]["reads"] = 0
    out = _with_run_json(files, run)
    del out["consumer.ndjson"]
    return out


def header_of_another_commit(files, rng):
    """One file's header (not the first read) names another commit than the rest and
    run.json."""
    header, rest = files["b2.ndjson"].split(b"\n", 1)
    body = json.loads(header)
    body["commit"] = "0" * 40
    return {**files, "b2.ndjson": json.dumps(body, sort_keys=True).encode() + b"\n" + rest}


def run_json_unknown_key(files, rng):
    run = _run_json(files)
    if run is None:
        return None
    run["verdict"] = "accepted"
    return _with_run_json(files, run)


def run_json_summary_key_removed(files, rng):
    run = _run_json(files)
    if run is None:
        return None
    del run["summary"][rng.choice(["events", "writes_acked", "isr_shrinks", "leaders"])]
    return _with_run_json(files, run)


def run_json_elections_changed(files, rng):
    run = _run_json(files)
    if run is None:
        return None
    run["summary"]["elections"] += 1
    return _with_run_json(files, run)


# Outcomes ---------------------------------------------------------------------------------------


def _edit_event(files, rng, pick: Callable[[dict], bool], change) -> Files | None:
    """Change one event line, chosen by `rng` among those `pick` accepts, of any broker's or
    the metadata store's file."""
    names = sorted(n for n in files if n.endswith(".ndjson"))
    rng.shuffle(names)
    for name in names:
        out = _edit_one(files, rng, name, lambda b: b.get("kind") == "event" and pick(b),
                        change)
        if out is not None:
            return out
    return None


def outcome_not_a_code(files, rng):
    return _edit_event(files, rng, lambda b: b["action"] == "FollowerSendFetch",
                       _set("outcome", "ZZZ_NOT_A_CODE"))


def isr_change_rewritten_unchanged(files, rng):
    return _edit_event(files, rng, lambda b: b.get("outcome") == "ISR_CHANGED",
                       _set("outcome", "ISR_UNCHANGED"))


def outcome_another_code(files, rng):
    """A follower's answer handled as a truncation: a real code, not the spec's."""
    return _edit_event(files, rng, lambda b: b.get("outcome") == "RECORDS_APPENDED",
                       _set("outcome", "TRUNCATED"))


def outcome_field_changed(files, rng):
    """A fetch answer's HW, one more, in its outcome's fields only."""
    def change(b: dict, lines: list[dict]) -> None:
        b["outcome_args"]["high_watermark"] += 1
    return _edit_event(files, rng, lambda b: b.get("outcome") == "RECORDS_SENT", change)


# Who logged what, and when ---------------------------------------------------------------------


def node_renamed(files, rng):
    """b2's file, its lines and message ids, say b9 (a broker the run does not have)."""
    out = {}
    for name, data in files.items():
        data = data.replace(b'"b2:m', b'"b9:m')
        if name == "b2.ndjson":
            data = data.replace(b'"node":"b2"', b'"node":"b9"').replace(
                b'"node": "b2"', b'"node": "b9"')
            name = "b9.ndjson"
        out[name] = data
    return out


def event_moved_to_another_node(files, rng):
    """One of b2's events that sends nothing moved into b1's file, at its time, both files
    renumbered: the same events, one logged by the wrong node."""
    b1, b2 = _lines(files["b1.ndjson"]), _lines(files["b2.ndjson"])
    chosen = [i for i, b in enumerate(b2) if b.get("kind") == "event" and not b["send"]
              and b["action"] == "FollowerHandleFetchResponse"]
    if not chosen:
        return None
    moved = b2.pop(rng.choice(chosen))
    moved["node"] = "b1"
    at = next((i for i, b in enumerate(b1) if i and b["time_ms"] > moved["time_ms"]), len(b1))
    b1.insert(at, moved)
    return {**files, "b1.ndjson": _dump(_renumber(b1)), "b2.ndjson": _dump(_renumber(b2))}


def clock_goes_back(files, rng):
    """Two neighbouring event lines of one node with their times swapped."""
    lines = _lines(files["b0.ndjson"])
    pairs = [i for i in range(1, len(lines) - 1)
             if lines[i]["time_ms"] < lines[i + 1]["time_ms"]]
    if not pairs:
        return None
    i = rng.choice(pairs)
    lines[i]["time_ms"], lines[i + 1]["time_ms"] = lines[i + 1]["time_ms"], lines[i]["time_ms"]
    return {**files, "b0.ndjson": _dump(lines)}


def drop_of_a_message_never_sent(files, rng):
    """A NetworkDrop of a fetch no follower sent, run.json counting it."""
    run = _run_json(files)
    if run is None or "nemesis.ndjson" not in files:
        return None
    lines = _lines(files["nemesis.ndjson"])
    time_ms = max(b["time_ms"] for b in lines[1:]) if len(lines) > 1 else 1
    lines.append({"kind": "event", "node": "nemesis", "seq": len(lines) - 1,
                  "time_ms": time_ms, "action": "NetworkDrop", "args": {},
                  "outcome": "DROPPED", "send": [], "recv": "b1:m999999",
                  "detail": {"src": "b1", "dst": "b0", "type": "Fetch", "partition": 0,
                             "why": "partition"}})
    run["summary"]["dropped_messages"] += 1
    return {**_with_run_json(files, run), "nemesis.ndjson": _dump(lines)}


def consumer_read_repeated(files, rng):
    """A consumer read line twice, renumbered, run.json counting it."""
    run = _run_json(files)
    out = _duplicate("consumer.ndjson", _is_read, renumber=True)(files, rng)
    if run is None or out is None:
        return None
    run["summary"]["reads"] += 1
    return _with_run_json(out, run)


def consumer_reads_swapped(files, rng):
    """Two reads of one partition, one after the other, with their records swapped."""
    lines = _lines(files["consumer.ndjson"])
    reads = [i for i, b in enumerate(lines) if _is_read(b)]
    pairs = [(i, j) for i, j in zip(reads, reads[1:], strict=False)
             if lines[i]["partition"] == lines[j]["partition"]]
    if not pairs:
        return None
    i, j = rng.choice(pairs)
    lines[i]["records"], lines[j]["records"] = lines[j]["records"], lines[i]["records"]
    return {**files, "consumer.ndjson": _dump(lines)}


def key_given_twice(files, rng):
    """An event line whose `outcome` is given twice, a forged one first: a reader that keeps
    the last sees the real one, one that keeps the first sees the forgery."""
    def change(line: bytes) -> bytes:
        return line.replace(b'{', b'{"outcome":"DIVERGED",', 1)
    lines = files["b0.ndjson"].split(b"\n")
    chosen = [i for i, line in enumerate(lines) if b'"kind":"event"' in line]
    if not chosen:
        return None
    i = rng.choice(chosen)
    lines[i] = change(lines[i])
    return {**files, "b0.ndjson": b"\n".join(lines)}


def _final_logs_inline(files: Files) -> Files | None:
    """The run with its final logs in run.json (as runs wrote them before the file beside
    it), or None if it has none."""
    run = _run_json(files)
    if run is None or (FINAL_LOGS_KEY not in run and "final_logs" not in run):
        return None
    if FINAL_LOGS_KEY in run and FINAL_LOGS_FILE in files:
        del run[FINAL_LOGS_KEY]
        logs: dict[str, list] = {}
        for chunk in _lines(files[FINAL_LOGS_FILE]):
            logs.setdefault(str(chunk["partition"]), []).extend(chunk["records"])
        run["final_logs"] = logs
        files = {name: data for name, data in files.items() if name != FINAL_LOGS_FILE}
    return _with_run_json(files, run)


def _final_logs_beside(files: Files) -> Files | None:
    """The run with its final logs in the file beside run.json."""
    run = _run_json(files)
    if run is not None and FINAL_LOGS_KEY in run and FINAL_LOGS_FILE in files:
        return files
    if run is None or "final_logs" not in run:
        return None
    with tempfile.TemporaryDirectory() as directory:
        run.update(write_final_logs(Path(directory), run.pop("final_logs")))
        logs = (Path(directory) / FINAL_LOGS_FILE).read_bytes()
    return {**_with_run_json(files, run), FINAL_LOGS_FILE: logs}


def final_log_file_changed(files, rng):
    out = _final_logs_beside(files)
    if out is None:
        return None
    lines = _lines(out[FINAL_LOGS_FILE])
    chunk = rng.choice([b for b in lines if b["records"]])
    k = rng.randrange(len(chunk["records"]))
    chunk["records"][k][1] += 10**6
    return {**out, FINAL_LOGS_FILE: _dump(lines)}


def final_log_file_short(files, rng):
    """The final logs' file missing its last records, run.json's count unchanged."""
    out = _final_logs_beside(files)
    if out is None:
        return None
    lines = _lines(out[FINAL_LOGS_FILE])
    lines[-1]["records"] = lines[-1]["records"][:-1]
    return {**out, FINAL_LOGS_FILE: _dump(lines)}


def final_logs_in_run_json(files, rng):
    return _final_logs_inline(files)


# Controls: the same run in other bytes --------------------------------------------------------


def keys_reordered(files, rng):
    out = dict(files)
    for name, data in files.items():
        if name.endswith(".ndjson"):
            lines = []
            for body in _lines(data):
                keys = list(body)
                rng.shuffle(keys)
                lines.append(json.dumps({k: body[k] for k in keys}).encode() + b"\n")
            out[name] = b"".join(lines)
    return out


def whitespace_changed(files, rng):
    out = dict(files)
    for name, data in files.items():
        if name.endswith(".ndjson"):
            out[name] = b"".join(json.dumps(b, indent=None, separators=(" , ", " : ")).encode()
                                 + b"\n" for b in _lines(data))
    return out



def leaf_paths(value, path: tuple = ()):
    """The path (keys and indices) of every scalar in a JSON value: where a fuzzer may
    write."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaf_paths(v, (*path, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            yield from leaf_paths(v, (*path, k))
    else:
        yield path


KINDS: tuple[Kind, ...] = (
    Kind("ack of a value never sent", True, ack_of_a_value_never_sent,
         "a producer `ok` names a value no ProducerSend carried"),
    Kind("ack without an offset", True, ack_without_offset,
         "an acks=1/all `ok` with its offset removed"),
    Kind("ack at offset -1", True, ack_at_offset_minus_one, "an acks=1/all `ok` at -1"),
    Kind("ack at a negative offset", True, ack_at_a_negative_offset, "an `ok` at offset -7"),
    Kind("ack at another offset", True, ack_at_another_offset, "an `ok` one offset later"),
    Kind("ack at another acks level", True, ack_at_another_acks_level,
         "an `ok` whose acks differs from the run's"),
    Kind("ack rewritten as a failure", True, ack_rewritten_as_failure,
         "an `ok` turned into `fail`"),
    Kind("history line deleted", True,
         _delete("producer.ndjson", _is_ok_write, renumber=False), "an `ok` line removed"),
    Kind("history line deleted, renumbered", True,
         _delete("producer.ndjson", _is_ok_write, renumber=True),
         "an `ok` line removed and the seqs closed up"),
    Kind("history line duplicated", True,
         _duplicate("producer.ndjson", _is_ok_write, renumber=False), "an `ok` line twice"),
    Kind("history line duplicated, renumbered", True,
         _duplicate("producer.ndjson", _is_ok_write, renumber=True),
         "an `ok` line twice, seqs renumbered"),
    Kind("read of a value never written", True, read_of_a_value_never_written,
         "a consumer read record with another value"),
    Kind("read at a negative offset", True, read_at_a_negative_offset,
         "a consumer read record at offset -3"),
    Kind("append of another value", True, append_value_changed,
         "LeaderAppend's args.value changed"),
    Kind("eligible replica forged", True, eligible_replica_forged,
         "a metadata post-state lists an ELR member the spec has not"),
    Kind("run erased", True, run_erased, "headers only, no run.json"),
    Kind("post-states nulled", True, post_states_nulled, "every event's state null"),
    Kind("config boolean as a string", True, config_boolean_as_string,
         'unclean_leader_election_enable "false" in every header'),
    Kind("drop of an answered fetch", True, drop_of_an_answered_fetch,
         "a NetworkDrop forged for a fetch the leader handled"),
    Kind("run.json count changed", True, run_json_count_changed,
         "run.json's summary counts one more"),
    Kind("run.json cut short", True, run_json_not_json, "run.json truncated: not JSON"),
    Kind("run.json count as a string", True, run_json_count_as_a_string,
         "run.json's writes_acked as a string"),
    Kind("final log changed", True, final_log_changed,
         "a value of a final log held in run.json replaced"),
    Kind("run.json config changed", True, run_json_config_changed,
         "run.json's min ISR differs from the headers'"),
    Kind("invoke of another value", True, invoke_of_another_value,
         "a producer invoke names a value it then never sends"),
    Kind("event seq gap", True, event_seq_gap, "an event line removed"),
    Kind("not UTF-8", True, not_utf8, "two bytes that are not UTF-8 in a line"),
    Kind("deeply nested line", True, deeply_nested, "a detail nested 100,000 deep"),
    Kind("history field of a wrong type", True, history_field_of_a_wrong_type,
         "value, offset or partition as a string"),
    Kind("oversize line", True, oversize_line, "a 2 MiB detail"),
    Kind("truncated mid-line", True, truncated_mid_line, "a file cut inside a line"),
    Kind("spec rules claimed off", True, rules_claimed_off,
         "headers and run.json claim the run is judged without fencing"),
    Kind("cut short, run.json deleted", True, cut_short_without_run_json,
         "every file cut at 60% of the duration, run.json gone"),
    Kind("cut short, run.json emptied", True, cut_short_with_run_json_emptied,
         "every file cut at 60% of the duration, run.json's summary empty"),
    Kind("node file deleted", True, node_file_deleted,
         "the consumer's file gone, run.json counting no reads"),
    Kind("header of another commit", True, header_of_another_commit,
         "b2's header names another commit"),
    Kind("run.json unknown key", True, run_json_unknown_key, "run.json says verdict: accepted"),
    Kind("run.json summary key removed", True, run_json_summary_key_removed,
         "a count left out of run.json's summary"),
    Kind("run.json elections changed", True, run_json_elections_changed,
         "run.json counts one election more"),
    Kind("outcome not a code", True, outcome_not_a_code, "ZZZ_NOT_A_CODE for a fetch sent"),
    Kind("ISR change rewritten as unchanged", True, isr_change_rewritten_unchanged,
         "ISR_CHANGED written ISR_UNCHANGED"),
    Kind("outcome of another code", True, outcome_another_code,
         "RECORDS_APPENDED written TRUNCATED"),
    Kind("outcome field changed", True, outcome_field_changed,
         "a fetch answer's outcome_args.high_watermark one more"),
    Kind("node renamed", True, node_renamed, "b2's lines and ids say b9"),
    Kind("event moved to another node", True, event_moved_to_another_node,
         "one of b2's events in b1's file"),
    Kind("clock goes back", True, clock_goes_back, "two lines of b0 with their times swapped"),
    Kind("drop of a message never sent", True, drop_of_a_message_never_sent,
         "a NetworkDrop of a fetch nobody sent"),
    Kind("consumer read repeated", True, consumer_read_repeated, "a read line twice"),
    Kind("consumer reads swapped", True, consumer_reads_swapped,
         "two reads of a partition with their records swapped"),
    Kind("key given twice", True, key_given_twice, "an event's outcome twice, a forgery first"),
    Kind("final log file changed", True, final_log_file_changed,
         "a value in final_logs.jsonl replaced"),
    Kind("final log file short", True, final_log_file_short,
         "the last record of final_logs.jsonl gone"),
    Kind("final logs in run.json (control)", False, final_logs_in_run_json,
         "the same final logs inline in run.json, as older runs hold them"),
    Kind("keys reordered (control)", False, keys_reordered, "same JSON, keys shuffled"),
    Kind("whitespace changed (control)", False, whitespace_changed, "same JSON, other spacing"),
)
