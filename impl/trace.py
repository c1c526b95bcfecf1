"""Trace writing: one NDJSON file per node in the format `vocab.trace` names (docs/traces.md).

Lines are serialised with sorted keys and no spaces, so the same run gives the same bytes.
`NodeTrace` numbers a node's lines (`seq`) and its sent messages (ids from
`vocab.trace.message_id`); a restarted process continues its node's numbering (the driver
keeps the `NodeTrace`). An event's outcome is a `vocab.outcomes.Code` with its fields in
`outcome_args` (omitted when there are none).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from vocab.actions import ActionName
from vocab.outcomes import Code
from vocab.trace import FORMAT, message_id

__all__ = ["FINAL_LOGS_KEY", "FORMAT", "NodeTrace", "dumps", "event_counts", "header_config",
           "reproduce_command", "write_final_logs"]

# The final logs of a run live beside run.json, in bounded lines: inline, a long run's made
# run.json one line longer than a reader takes. run.json names the file under this key.
FINAL_LOGS_KEY = "final_logs_file"
FINAL_LOGS_FILE = "final_logs.jsonl"
FINAL_LOG_LINE_RECORDS = 4096  # records per line: about 60 KB


def header_config(config, options) -> dict:
    """The `config` object of every trace header, for either driver's options."""
    body = config.to_json()
    body["duration_ms"] = options.duration_ms
    body["nemesis"] = list(options.nemesis)
    if getattr(options, "faults", ()):
        body["faults"] = sorted({fault[1] for fault in options.faults})
    if getattr(options, "spec_rules_off", ()):
        body["spec_rules_off"] = list(options.spec_rules_off)
    return body


def reproduce_command(config, options, mode: str = "sim") -> str:
    """The `isrlab cluster sim|tcp` command line that runs the same configuration and seed."""
    parts = [f"isrlab cluster {mode} --seed {options.seed}", f"--brokers {config.brokers}",
             f"--partitions {config.partitions}",
             *([f"--replication-factor {config.replication_factor}"]
               if config.replication_factor else []),
             f"--duration {options.duration_ms}ms",
             f"--variant {config.variant}", f"--acks {config.acks}",
             f"--min-isr {config.min_insync_replicas}"]
    if options.nemesis:
        parts.append(f"--nemesis {','.join(options.nemesis)}")
    if getattr(options, "max_faults", 1) != 1:
        parts.append(f"--faults {options.max_faults}")
    for at, kind, target, length in getattr(options, "faults", ()):
        parts.append(f"--fault {at}:{kind}:{target}:{length}")
    defaults = {f.name: f.default for f in dataclasses.fields(options)}
    if getattr(options, "liveness_ms", None) != defaults.get("liveness_ms"):
        parts.append(f"--liveness {options.liveness_ms}ms")
    if config.unclean_leader_election_enable:
        parts.append("--unclean")
    if config.eligible_leader_replicas_enable:
        parts.append("--elr")
        if not config.last_known_leader_election_enable:
            parts.append("--no-last-known-leader")
    if config.log_flush_interval_messages is not None:
        parts.append(f"--flush-interval {config.log_flush_interval_messages}")
    for bug in sorted(config.bugs):
        parts.append(f"--bug {bug}")
    return " ".join(parts)


def write_final_logs(directory: Path, final_logs: dict) -> dict:
    """Write a run's final logs ({partition: [[offset, value], ...]}) to `directory`, at most
    FINAL_LOG_LINE_RECORDS records a line, each partition's in offset order; return what
    run.json holds instead of them: {FINAL_LOGS_KEY: {"file": name, "records": {partition:
    count}}}."""
    counts = {}
    with open(Path(directory) / FINAL_LOGS_FILE, "w", encoding="utf-8") as out:
        for partition, log in sorted(final_logs.items(), key=lambda item: int(item[0])):
            counts[str(partition)] = len(log)
            for start in range(0, len(log), FINAL_LOG_LINE_RECORDS):
                chunk = [list(record) for record in log[start:start + FINAL_LOG_LINE_RECORDS]]
                out.write(dumps({"partition": int(partition), "records": chunk}) + "\n")
    return {FINAL_LOGS_KEY: {"file": FINAL_LOGS_FILE, "records": counts}}


def dumps(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


class NodeTrace:
    """The lines of one node, kept in memory or streamed to a file."""

    __slots__ = ("node", "seq", "sent", "lines", "file", "enabled")

    def __init__(self, node: str, header: dict, path: Path | None = None, enabled: bool = True):
        self.node = node
        self.seq = 0
        self.sent = 0
        self.enabled = enabled
        self.lines: list[str] = []
        self.file = open(path, "a", encoding="utf-8") if path is not None and enabled else None
        if enabled:
            self._write({"kind": "header", "format": FORMAT, "node": node, **header})

    def _write(self, body: dict) -> None:
        line = dumps(body)
        if self.file is not None:
            self.file.write(line + "\n")
        else:
            self.lines.append(line)

    def message_id(self) -> str:
        self.sent += 1
        return message_id(self.node, self.sent)

    def event(self, time_ms: int, action: str, args: dict, outcome: str, outcome_args: dict,
              state: dict | None, send: list[str], recv: str | None,
              detail: dict | None) -> None:
        if not self.enabled:
            self.seq += 1
            return
        body = {"kind": "event", "node": self.node, "seq": self.seq, "time_ms": time_ms,
                "action": action, "args": args, "outcome": outcome, "send": send}
        if outcome_args:
            body["outcome_args"] = outcome_args
        if state is not None:
            body["state"] = state
        if recv is not None:
            body["recv"] = recv
        if detail is not None:
            body["detail"] = detail
        self.seq += 1
        self._write(body)

    def other(self, body: dict) -> None:
        """A `history` or `nemesis` line: numbered like events."""
        if self.enabled:
            self._write({**body, "node": self.node, "seq": self.seq})
        self.seq += 1

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def text(self) -> str:
        return "".join(line + "\n" for line in self.lines)


_ELECTED = frozenset({Code.ELECTED_CLEAN, Code.ELECTED_UNCLEAN, Code.ELECTED_PREFERRED})


def event_counts(action: str, outcome: str, outcome_args: dict) -> dict[str, int]:
    """What one traced transition adds to a run's statistics, from its code and fields:
    elections (a controller election, or each partition a broker failure moved to a new
    leader) and ISR changes. Both drivers count with this (the simulator as it runs, the TCP
    supervisor from the trace files)."""
    if outcome in _ELECTED:
        return {"elections": 1}
    if outcome == Code.BROKER_FAILURE_HANDLED:
        return {"elections": outcome_args["elected"]}
    if outcome == Code.ISR_CHANGED:
        return {"isr_shrinks" if action == ActionName.LEADER_SHRINK_ISR else "isr_expands": 1}
    return {}
