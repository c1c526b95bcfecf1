"""What happens when every in-sync replica fails, per election policy: the numbers.

Kafka has answered "what if every ISR replica dies?" three ways: wait for an ISR member to come
back (clean election), take any live replica (unclean election), and since KIP-966 the eligible
leader replicas (ELR), with the last known leader as a fallback when ISR and ELR are both empty
(Kafka's `PartitionChangeBuilder` does this by default once ELR is on). `POLICIES` names the
four settings; `timeline` measures one run from the metadata store's trace and the nemesis
lines (how long each partition had no live leader, how long its ISR was below min ISR, which
elections happened), and
`policy_table` runs a campaign per policy under the `isr-kill` nemesis and adds the columns up.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from vocab.outcomes import Code

# name -> cluster config changes, in the order of the table.
POLICIES: dict[str, dict] = {
    "clean": {"unclean_leader_election_enable": False, "eligible_leader_replicas_enable": False},
    "unclean": {"unclean_leader_election_enable": True, "eligible_leader_replicas_enable": False},
    "elr": {"unclean_leader_election_enable": False, "eligible_leader_replicas_enable": True,
            "last_known_leader_election_enable": False},
    "elr+last-known-leader": {"unclean_leader_election_enable": False,
                              "eligible_leader_replicas_enable": True,
                              "last_known_leader_election_enable": True},
}

# Elections of a leader for a partition that had none (preferred-leader moves are not counted).
OFFLINE_ELECTIONS = (Code.ELECTED_CLEAN, Code.ELECTED_UNCLEAN, Code.ELECTED_ELR,
                     Code.ELECTED_LAST_KNOWN_LEADER)


def policy_of(config) -> str:
    """The policy a cluster config follows (the first row whose settings all match)."""
    for name, changes in POLICIES.items():
        if all(getattr(config, k) == v for k, v in changes.items()):
            return name
    return "elr" if config.eligible_leader_replicas_enable else "clean"


# Nemesis lines that take a broker down, and the line that brings it back (Apache Kafka runs
# write their controller-kill as a crash of the controller's node).
DOWN_FAULTS = ("crash",)
BACK = "restart"


@dataclass
class Timeline:
    # Summed over partitions: no live broker leads it (the store names no leader, or names one
    # that crashed or was killed and has not been replaced or restarted).
    offline_ms: int = 0
    no_leader_ms: int = 0  # the part of offline_ms where the store names no leader
    under_min_isr_ms: int = 0  # summed over partitions: ISR smaller than min ISR
    elections: int = 0  # new leaders: on a broker's failure, or for an offline partition
    by_code: Counter = field(default_factory=Counter)  # offline elections by outcome code

    def to_json(self) -> dict:
        return {"offline_ms": self.offline_ms, "no_leader_ms": self.no_leader_ms,
                "under_min_isr_ms": self.under_min_isr_ms, "elections": self.elections,
                "by_code": dict(sorted(self.by_code.items()))}


def timeline(meta_events: list[dict], partitions: int, min_isr: int, end_ms: int,
             initial_isr: int, nemesis: list[dict] = (),
             first_leaders: dict[int, int] | None = None) -> Timeline:
    """Measure a run from the metadata store's event lines, in order, and its `nemesis` lines
    (a broker is down from a DOWN_FAULTS line naming it, `bN`, to its BACK line). Every
    partition starts led (by `first_leaders[p]` where given), with a full ISR of
    `initial_isr` members; each event's post-state carries the partitions it changed; the run
    ends at `end_ms`."""
    out = Timeline()
    leader: dict[int, int] = dict(first_leaders or {})
    down: set[int] = set()
    since: dict[str, dict[int, int | None]] = {
        "offline": dict.fromkeys(range(partitions)), "no_leader": dict.fromkeys(range(partitions)),
        "short": {p: (0 if initial_isr < min_isr else None) for p in range(partitions)}}
    totals = dict.fromkeys(since, 0)

    def hold(what: str, p: int, now: int, holds: bool) -> None:
        if holds and since[what][p] is None:
            since[what][p] = now
        elif not holds and since[what][p] is not None:
            totals[what] += now - since[what][p]
            since[what][p] = None

    faults = [(n["time_ms"], n["f"], int(n["target"][1:])) for n in nemesis
              if n.get("f") in (*DOWN_FAULTS, BACK)
              and str(n.get("target", "")).startswith("b") and n["target"][1:].isdigit()]
    merged = sorted([(e["time_ms"], 0, i) for i, e in enumerate(meta_events)]
                    + [(t, 1, i) for i, (t, _, _) in enumerate(faults)])
    for now, is_fault, i in merged:
        if is_fault:
            _, f, broker = faults[i]
            (down.discard if f == BACK else down.add)(broker)
            for p, b in leader.items():
                if b == broker:
                    hold("offline", p, now, b in down)
            continue
        e = meta_events[i]
        code = e.get("outcome")
        if code in OFFLINE_ELECTIONS:
            out.elections += 1
            out.by_code[code] += 1
        elif code == Code.BROKER_FAILURE_HANDLED:
            out.elections += (e.get("outcome_args") or {}).get("elected", 0)
        for ps in ((e.get("state") or {}).get("partitions") or ()):
            p = ps["partition"]
            leader[p] = ps["leader"]
            hold("no_leader", p, now, ps["leader"] < 0)
            hold("offline", p, now, ps["leader"] < 0 or ps["leader"] in down)
            hold("short", p, now, len(ps["isr"]) < min_isr)
    for what, started in since.items():
        totals[what] += sum(end_ms - t for t in started.values() if t is not None)
    out.offline_ms, out.no_leader_ms = totals["offline"], totals["no_leader"]
    out.under_min_isr_ms = totals["short"]
    return out


NEMESES = ("isr-kill", "isr-kill-process", "isr-kill-all")
COLUMNS = ("policy", "nemesis", "runs", "acked", "lost", "runs losing", "KIP-966 violations",
           "offline s", "under min ISR s", "elections", "unclean", "divergences")


def policy_rows(run_campaign, base, options, runs: int, workers: int | None = None,
                nemeses: tuple[str, ...] = NEMESES, progress=None) -> list[dict]:
    """One campaign of `runs` runs per (policy, nemesis) over `base` (a ClusterConfig), each
    run by `run_campaign` (model_check.conformance.campaign's, which itself reads this module's
    `timeline`); a row per campaign with the table's columns (its summary added up)."""
    rows = []
    for policy, changes in POLICIES.items():
        for nemesis in nemeses:
            config = base.replace(**changes)
            result = run_campaign(config, replace(options, nemesis=(nemesis,)), runs, None,
                                  keep="none", workers=workers)
            s = result.summary()
            rows.append({
                "policy": policy, "nemesis": nemesis, "runs": s["runs"],
                "acked": s["acked_writes"], "lost": s["acked_writes_lost"],
                "runs losing": len(s["runs_losing_acked_writes"]),
                "KIP-966 violations": s["kip966_violations"],
                "offline s": round(s["offline_ms"] / 1000, 1),
                "under min ISR s": round(s["under_min_isr_ms"] / 1000, 1),
                "elections": s["elections"], "unclean": s["unclean_elections"],
                "divergences": s["divergences"] + s["unreadable"],
                "failed_runs": s["failed_runs"],
            })
            if progress:
                progress(rows[-1])
    return rows


def format_rows(rows: list[dict]) -> str:
    """The rows as a Markdown table (COLUMNS)."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines)
