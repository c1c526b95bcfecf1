"""`isrlab drive CEX.json`: impose a counterexample of `isrlab check --json` on the reference
broker (the simulator's cores, driven step by step) and check what the broker did.

For each spec action of the counterexample the driver finds the implementation input that
makes the broker take it (a message delivered, a timer, a crash, a flush, a write), using the
replay's refinement mapping as the judge (model_check/drive.py). It prints the inputs, how many
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
from pathlib import Path

from isrlab.options import UsageError

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
    from vocab.config import BUG_RULES

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
    # that is that rule switched off, when there is one.
    name, _, rules = (variant or config["variant"]).partition("+")
    bugs = set()
    for rule in filter(None, rules.split(",")):
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


def run(args) -> int:
    from model_check.campaign import final_logs
    from model_check.drive import Driver, load_schedule
    from model_check.history import check_history
    from model_check.replay import format_result, load_texts, replay_run
    from model_check.scenario import ScenarioError

    try:
        spec_config, schedule = load_schedule(Path(args.counterexample))
    except (OSError, ValueError, KeyError, TypeError, ScenarioError) as error:
        raise UsageError(f"{args.counterexample}: {error}") from None
    config = cluster_config(spec_config, args.variant, args.acks, args.clean, args.elr)
    driver = Driver(config)
    result = driver.drive(schedule)
    sim = driver.finish()
    replay = replay_run(load_texts(sim.traces, sim.run_json()))
    history_lines = [json.loads(line) for node in ("producer", "consumer")
                     for line in sim.traces.get(node, "").splitlines()
                     if '"kind":"history"' in line]
    history = check_history(history_lines, final_logs(sim))
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="isrlab-drive-"))
    sim.write(out)
    anomalies = sorted({a.kind for a in history.anomalies})
    if args.json:
        print(json.dumps({"variant": config.variant, "bugs": sorted(config.bugs), "followed": result.followed,
                          "total": result.total, "inputs": result.inputs,
                          "stuck": result.stuck, "replay": replay.verdict,
                          "invariant_violations": replay.to_json().get("invariant_violations"),
                          "history": history.to_json(), "run": str(out)}, sort_keys=True))
    else:
        bugs = f" with the planted bug {', '.join(sorted(config.bugs))}" if config.bugs else ""
        print(f"isrlab drive: {args.counterexample} on the {config.variant} broker{bugs} "
              f"({config.brokers} brokers, acks={config.acks}, "
              f"min.insync.replicas={config.min_insync_replicas}, unclean election "
              f"{'on' if config.unclean_leader_election_enable else 'off'}"
              f"{', ELR on' if config.eligible_leader_replicas_enable else ''})")
        for label in result.inputs:
            if args.verbose or not label.endswith("(quiet)"):
                print(f"  {label}")
        print(f"followed {result.followed} of {result.total} spec actions")
        if result.stuck is not None:
            stuck = result.stuck
            print(f"the broker cannot take {stuck['action']}"
                  f"({', '.join(f'{k}={v}' for k, v in stuck['args'].items())}) next")
            print(f"  spec state:  {stuck['spec_state']}")
            for node, replicas in stuck["implementation"].items():
                for r in replicas:
                    print(f"  broker {node}: {json.dumps(r, sort_keys=True)}")
            for option in stuck["instead"]:
                print(f"  it could: {option['input']} -> {', '.join(option['spec_steps'])}")
        print(f"replay: {format_result(replay).splitlines()[0]}")
        print(f"client history: {sum(history.acked.values())} acknowledged, "
              f"anomalies: {', '.join(anomalies) or 'none'}")
        for detail in history.to_json().get("details", [])[:5]:
            print(f"  {json.dumps(detail, sort_keys=True)}")
        print(f"run written to {out} (isrlab replay {out})")
    found = bool(anomalies) or replay.verdict != "accepted" or bool(
        replay.to_json().get("invariant_violations"))
    return 1 if found else 0


def register(sub) -> None:
    p = sub.add_parser("drive", help="impose a counterexample on the reference broker",
                       description=__doc__.splitlines()[0])
    p.add_argument("counterexample", metavar="CEX.json|SCENARIO.txt",
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
    p.add_argument("--out", help="directory for the driven run (default: a new temp dir)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--verbose", action="store_true", help="also list the quiet inputs")
    p.set_defaults(func=run, error_prefix="isrlab drive")
