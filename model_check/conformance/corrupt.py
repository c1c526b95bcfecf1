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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Files = dict[str, bytes]


@dataclass(frozen=True)
class Kind:
    name: str
    changes_meaning: bool
    apply: Callable[[Files, random.Random], Files | None]
    what: str


def read_run(run_dir: Path) -> Files:
    return {p.name: p.read_bytes() for p in sorted(run_dir.iterdir())
            if p.suffix == ".ndjson" or p.name == "run.json"}


def write_run(files: Files, run_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
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
    """A NetworkDrop of a fetch that the leader did handle, appended to the nemesis trace."""
    handled = []
    for name, data in files.items():
        if name.startswith("b"):
            handled += [b for b in _lines(data) if b.get("action") == "LeaderHandleFetch"]
    if not handled or "nemesis.ndjson" not in files:
        return None
    fetch = rng.choice(handled)
    lines = _lines(files["nemesis.ndjson"])
    lines.append({"kind": "event", "node": "nemesis", "seq": len(lines) - 1,
                  "time_ms": fetch["time_ms"], "action": "NetworkDrop", "args": {},
                  "outcome": "DROPPED", "send": [], "recv": fetch["recv"],
                  "detail": {"src": f"b{fetch['args']['follower']}",
                             "dst": f"b{fetch['args']['broker']}", "type": "Fetch",
                             "partition": fetch["args"]["partition"], "why": "partition"}})
    return {**files, "nemesis.ndjson": _dump(lines)}


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
    if "run.json" not in files:
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
         "a value of run.json's final log replaced"),
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
    Kind("keys reordered (control)", False, keys_reordered, "same JSON, keys shuffled"),
    Kind("whitespace changed (control)", False, whitespace_changed, "same JSON, other spacing"),
)
