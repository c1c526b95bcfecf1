"""`isrlab drive CEX.json`: impose a counterexample of `isrlab check --json` on the reference
broker (the simulator's cores, driven step by step) and check what the broker did.

For each spec action of the counterexample the driver finds the implementation input that
makes the broker take it (a message delivered, a timer, a crash, a flush, a write), using the
replay's refinement mapping as the judge (model_check/conformance/drive.py). It prints the inputs, how many
spec actions the broker followed, and where it could not follow, the spec action with the spec
state and the broker's replicas side by side. The driven run is then checked as any run is:
its traces replayed against the spec, its client history checked (lost acknowledged writes).

Exit 0: the broker lost nothing (the schedule was followed harmlessly, or refused); 1: the
driven run shows an anomaly (a lost acknowledged write, a spec invariant broken in the replayed
state) or the replay diverged; 2: bad input.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from isrlab.options import (
    UsageError,
    absolute_path,
    add_quiet_option,
    check_input,
    output_dir,
    progress,
)

# Settings of the spec that the reference broker has no switch for: a schedule that needs
# them cannot be imposed on it.
SPEC_ONLY = {"isr.changes.async": "false", "hw.over.requested.isr": "false",
             "max.controller.failovers": "0"}


def cluster_config(config: dict, variant: str | None, acks: str | None = None,
                   clean: bool = False, elr: bool = False):
    """The reference broker's config for a counterexample's spec config; `variant`, `acks`,
    `clean` (unclean election off) and `elr` (KIP-966 on) drive the same schedule under other
    settings."""
    from impl.config import ClusterConfig
    from vocab.config import BUG_RULES, GUARD_RULES

    config = dict(config)
    if acks is not None:
        config["acks"] = acks
    if clean:
        config["unclean.leader.election.enable"] = "false"
    if elr:
        config["eligible.leader.replicas.enable"] = "true"
    for key, default in SPEC_ONLY.items():
        if str(config.get(key, default)) != default:
            raise UsageError(f"the counterexample needs {key}={config[key]}, which the "
                             "reference broker does not implement")
    # A mutant of the spec (`check --without RULE`) runs on the broker with the planted bug
    # that is that rule switched off, when there is one; `check --with RULE` for a rule that
    # only adds a guard runs on the base variant's broker.
    name, _, rules = (variant or config["variant"]).partition("+")
    bugs = set()
    for rule in filter(None, rules.split(",")):
        if rule in {f"{r}=True" for r in GUARD_RULES}:
            continue  # `check --with RULE`: a guard added, the base variant's broker follows
        bug = {f"{r}=False": b for b, r in BUG_RULES.items()}.get(rule)
        if bug is None:
            raise UsageError(f"the counterexample's variant switches {rule}, which the "
                             "reference broker has no switch for")
        bugs.add(bug)
    try:
        flush = config.get("log.flush.interval.messages", "none")
        return ClusterConfig(
            brokers=int(config["brokers"]), partitions=int(config.get("partitions", 1)),
            variant=name, bugs=frozenset(bugs), acks=str(config.get("acks", "all")),
            min_insync_replicas=int(config.get("min.insync.replicas", 1)),
            unclean_leader_election_enable=config.get("unclean.leader.election.enable")
            == "true",
            eligible_leader_replicas_enable=config.get("eligible.leader.replicas.enable")
            == "true",
            last_known_leader_election_enable=config.get(
                "last.known.leader.election.enable", "true") == "true",
            log_flush_interval_messages=None if flush in ("none", None) else int(flush))
    except (KeyError, ValueError) as error:
        raise UsageError(f"counterexample config: {error}") from None


@dataclass
class Driven:
    """A directed run and its checks."""

    config: object  # the broker's ClusterConfig
    result: object  # model_check.conformance.drive.DriveResult
    replay: object  # ReplayResult
    history: object  # HistoryResult
    out: Path

    @property
    def anomalies(self) -> list[str]:
        return sorted({a.kind for a in self.history.anomalies})

    @property
    def found(self) -> bool:
        """An anomaly, a divergence, or a spec invariant broken in the replayed state."""
        return (bool(self.anomalies) or self.replay.verdict != "accepted"
                or self.result.violation is not None
                or bool(self.replay.to_json().get("invariant_violations")))

    def to_json(self) -> dict:
        r = self.result
        return {"variant": self.config.variant, "bugs": sorted(self.config.bugs),
                "followed": r.followed, "total": r.total, "inputs": r.inputs,
                "stuck": r.stuck, "violation": r.violation, "replay": self.replay.verdict,
                "invariant_violations": self.replay.to_json().get("invariant_violations"),
                "history": self.history.to_json(), "run": str(self.out)}

    def render(self, source: str, verbose: bool) -> str:
        from model_check.conformance.replay import format_result

        c, r = self.config, self.result
        bugs = f" with the planted bug {', '.join(sorted(c.bugs))}" if c.bugs else ""
        lines = [f"isrlab drive: {source} on the {c.variant} broker{bugs} "
                 f"({c.brokers} brokers, acks={c.acks}, "
                 f"min.insync.replicas={c.min_insync_replicas}, unclean election "
                 f"{'on' if c.unclean_leader_election_enable else 'off'}"
                 f"{', ELR on' if c.eligible_leader_replicas_enable else ''})"]
        lines += [f"  {label}" for label in r.inputs
                  if verbose or not label.endswith("(quiet)")]
        lines.append(f"followed {r.followed} of {r.total} spec actions")
        if r.violation is not None:
            lines.append(f"spec invariant {r.violation['invariant']} broken in the replayed "
                         f"state after {r.violation['followed']} steps: "
                         f"{r.violation['detail']}")
        if r.stuck is not None:
            stuck = r.stuck
            lines.append(f"the broker cannot take {stuck['action']}"
                         f"({', '.join(f'{k}={v}' for k, v in stuck['args'].items())}) next")
            lines.append(f"  spec state:  {stuck['spec_state']}")
            for node, replicas in stuck["implementation"].items():
                lines += [f"  broker {node}: {json.dumps(x, sort_keys=True)}" for x in replicas]
            lines += [f"  it could: {o['input']} -> {', '.join(o['spec_steps'])}"
                      for o in stuck["instead"]]
        replayed = format_result(self.replay).splitlines()
        lines.append(f"replay: {replayed[0]}")
        lines += [f"  {line}" for line in replayed[1:] if line.startswith("spec invariant")]
        lines.append(f"client history: {sum(self.history.acked.values())} acknowledged, "
                     f"anomalies: {', '.join(self.anomalies) or 'none'}")
        lines += [f"  {json.dumps(d, sort_keys=True)}"
                  for d in self.history.to_json().get("details", [])[:5]]
        lines.append(f"run written to {self.out} (isrlab replay {self.out})")
        return "\n".join(lines)


def drive(spec_config: dict, schedule: list, variant: str | None = None,
          acks: str | None = None, clean: bool = False, elr: bool = False,
          out: str | None = None, shown=None) -> Driven:
    """Impose `schedule` on the broker for `spec_config`, finish the run, write it, check it;
    `shown`: a progress display for the spec actions followed."""
    from model_check.conformance.campaign import final_logs
    from model_check.conformance.drive import Driver
    from model_check.conformance.history import check_history
    from model_check.conformance.replay import load_texts, replay_run

    config = cluster_config(spec_config, variant, acks, clean, elr)
    driver = Driver(config)
    result = driver.drive(schedule, progress=shown.update if shown is not None else None)
    sim = driver.finish()
    replay = replay_run(load_texts(sim.traces, sim.run_json()),
                        rules_off=sim.options.spec_rules_off)  # the rules it planted itself
    history_lines = [json.loads(line) for node in ("producer", "consumer")
                     for line in sim.traces.get(node, "").splitlines()
                     if '"kind":"history"' in line]
    history = check_history(history_lines, final_logs(sim))
    where = Path(out) if out else Path(tempfile.mkdtemp(prefix="isrlab-drive-"))
    sim.write(where)
    return Driven(config, result, replay, history, where)


def run(args) -> int:
    from model_check.conformance.drive import load_schedule
    from model_check.explore.scenario import ScenarioError

    output_dir("--out", args.out)
    check_input("CEX.json", args.counterexample)  # a FIFO would hang the reader
    try:
        spec_config, schedule = load_schedule(Path(args.counterexample))
    except (OSError, ValueError, KeyError, TypeError, ScenarioError) as error:
        raise UsageError(f"{args.counterexample}: {error}") from None
    with progress(args, "spec actions followed", total=len(schedule)) as shown:
        driven = drive(spec_config, schedule, args.variant, args.acks, args.clean, args.elr,
                       args.out, shown)
    if args.json:
        print(json.dumps(driven.to_json(), sort_keys=True))
    else:
        print(driven.render(args.counterexample, args.verbose))
    return 1 if driven.found else 0


def register(sub) -> None:
    p = sub.add_parser("drive", help="impose a counterexample on the reference broker",
                       description=__doc__.splitlines()[0])
    p.add_argument("counterexample", metavar="CEX.json|SCENARIO.txt", type=absolute_path,
                   help="the output of isrlab check --json with a violation, or a scenario "
                   "transcript (its first config section)")
    p.add_argument("--variant", help="drive the broker of another variant (e.g. current) "
                   "through the same schedule")
    p.add_argument("--acks", choices=("0", "1", "all"), help="drive the same schedule with "
                   "another acks setting (e.g. all for a counterexample found with acks=1)")
    p.add_argument("--clean", action="store_true", help="drive the same schedule with "
                   "unclean leader election off")
    p.add_argument("--elr", action="store_true", help="drive the same schedule with "
                   "eligible leader replicas (KIP-966) on")
    p.add_argument("--out", type=absolute_path, metavar="DIR",
                   help="directory for the driven run (default: a new temp dir)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--verbose", action="store_true", help="also list the quiet inputs")
    add_quiet_option(p)
    p.set_defaults(func=run, error_prefix="isrlab drive")
