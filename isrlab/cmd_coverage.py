"""`isrlab coverage`: how much of the spec's state graph the reference broker reaches, driven
by the spec's own paths (`isrlab drive` on a covering set) and by seeded random campaigns, side
by side.

The graph is the spec's, breadth-first to `--depth` steps, under the broker's protocol settings
and the exploration bounds given. Directed runs drive every root-to-leaf path of the search
tree (or `--paths K` of them, drawn with `--seed`); campaigns run `--runs R` simulator runs of
`--duration` under `--nemesis`. For each: the graph states and action names reached, the
states not reached grouped by the action that leads to them, the steps the broker could not
follow, and how many runs reached each invariant-relevant feature (model_check/conformance/coverage.py).
"""

from __future__ import annotations

import json
import time

from isrlab.options import (
    SEED,
    SMALL,
    add_quiet_option,
    flag_message,
    integer,
    parse_duration,
    parse_nemesis,
    progress,
)


def register(sub) -> None:
    p = sub.add_parser("coverage", help="spec states and actions reached by directed and random "
                       "runs of the broker", description=__doc__.splitlines()[0])
    p.add_argument("--variant", default="current")
    p.add_argument("--brokers", type=SMALL, default=2)
    p.add_argument("--acks", choices=("0", "1", "all"), default="all")
    p.add_argument("--min-isr", type=SMALL, default=1)
    p.add_argument("--depth", type=integer(1, 12), default=4, help="graph depth (default 4)")
    p.add_argument("--records", type=integer(1, 3), default=1, help="max records (default 1)")
    p.add_argument("--epochs", type=integer(1, 4), default=2, help="max leader epochs (default 2)")
    p.add_argument("--crashes", type=integer(0, 3), default=1, help="max crashes (default 1)")
    p.add_argument("--expiries", type=integer(0, 3), default=1,
                   help="max session expiries of live brokers (default 1)")
    p.add_argument("--paths", type=integer(0), default=None, metavar="K",
                   help="directed: drive K covering paths (default all; 0: none)")
    p.add_argument("--runs", type=integer(0), default=20, help="campaign runs (default 20)")
    p.add_argument("--duration", type=parse_duration, default=10_000, metavar="T",
                   help="campaign run length (default 10s)")
    p.add_argument("--nemesis", type=parse_nemesis, default=("crash", "partition", "pause"),
                   metavar="KINDS", help="campaign faults (default crash,partition,pause)")
    p.add_argument("--seed", type=SEED, default=1, help="campaign seeds start here; also draws "
                   "the paths (default 1)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_option(p)
    p.set_defaults(func=run, error_prefix="isrlab coverage")


# Config key -> the flag of this command that sets it.
_FLAGS = {"variant": "--variant", "brokers": "--brokers", "acks": "--acks",
          "min.insync.replicas": "--min-isr"}


def run(args) -> int:
    from impl.config import ClusterConfig
    from isrlab.options import UsageError
    from model_check.conformance import coverage
    from vocab.config import ConfigError

    try:
        cluster = ClusterConfig(brokers=args.brokers, variant=args.variant, acks=args.acks,
                                min_insync_replicas=args.min_isr)
    except ConfigError as error:
        # Named by the flag that set the value, not by its config key.
        flag = _FLAGS.get(error.key or "")
        raise UsageError(flag_message(flag, error) if flag else str(error)) from None
    config = coverage.graph_config(
        cluster, max_records=args.records, max_leader_epochs=args.epochs,
        max_crashes=args.crashes, max_session_expiries=args.expiries, max_ticks=0,
        max_message_drops=0)
    with progress(args, "spec graph: states") as shown:
        graph = coverage.explore(config, args.depth, progress=shown.update)
    paths = len(graph.covering_paths())
    sides = {}
    started = time.process_time()
    if args.paths != 0:
        with progress(args, "directed: paths driven",
                      total=min(paths, args.paths or paths)) as shown:
            sides["directed"] = coverage.directed(cluster, graph, args.paths, args.seed,
                                                  progress=shown.update)
    directed_cpu = time.process_time() - started
    started = time.process_time()
    if args.runs:
        with progress(args, "campaign: runs", total=args.runs) as shown:
            sides["campaign"] = coverage.campaign(cluster, graph, args.runs, args.seed,
                                                  args.duration, args.nemesis,
                                                  progress=shown.update)
    campaign_cpu = time.process_time() - started
    if args.json:
        print(json.dumps({"graph_states": len(graph.depth_of), "covering_paths": paths,
                          **{k: v.to_json() for k, v in sides.items()}}, sort_keys=True))
        return 0
    print(f"isrlab coverage: {args.variant}, {args.brokers} brokers, acks={args.acks}, "
          f"min ISR {args.min_isr}; spec graph to depth {args.depth} (records {args.records}, "
          f"epochs {args.epochs}, crashes {args.crashes}, expiries {args.expiries}): "
          f"{len(graph.depth_of)} states, {len(graph.actions)} actions, {paths} covering paths")
    cpu = {"directed": directed_cpu, "campaign": campaign_cpu}
    what = {"directed": f"{args.paths or paths} of {paths} covering paths driven",
            "campaign": f"{args.runs} runs of {args.duration} ms, nemesis "
                        f"{','.join(args.nemesis) or 'none'}, seeds {args.seed}.."}
    for name, cov in sides.items():
        body = cov.to_json()
        n = len(graph.depth_of)
        print(f"\n{name}: {what[name]} ({cpu[name]:.1f} s CPU)")
        print(f"  spec states reached: {body['states_reached']} of {n} "
              f"({100 * body['states_reached'] / n:.0f}%)")
        print(f"  spec actions reached: {len(body['actions_reached'])} of "
              f"{len(body['graph_actions'])}; not reached: "
              f"{', '.join(body['actions_not_reached']) or 'none'}")
        if body["stuck"]:
            print("  steps the broker could not take (paths stopped there): " + ", ".join(
                f"{k} {v}" for k, v in body["stuck"].items()))
        if body["extra"]:
            print("  paths followed whose end state differs, by the steps the broker took "
                  "besides: " + ", ".join(f"{k} {v}" for k, v in body["extra"].items()))
        print("  states not reached, by the step that leads to them: " + ", ".join(
            f"{k} {v}" for k, v in body["unreached_states_by_action"].items()))
        if body["divergences"]:
            print(f"  replay divergences: {body['divergences']}")
    print("\nruns reaching each feature" + "".join(f" | {name}" for name in sides))
    for feature in coverage.FEATURES:
        print(f"  {feature}" + "".join(
            f" | {cov.features[feature]} of {cov.runs}" for cov in sides.values()))
    return 0
