"""`isrlab campaign --runs N --seed S [cluster options]`: simulate, replay and history-check
N runs with seeds S, S+1, ...

Exit 0 when every run replays and, for a configuration that promises durability (acks=all,
min.insync.replicas >= 2, clean election, kip-320 or current), shows no anomaly; 1 otherwise
(failing runs' traces are kept under --out with their seeds); 2 on bad usage.
"""

from __future__ import annotations

import json
from pathlib import Path

from isrlab.options import WORKERS, add_cluster_options, cluster_config, integer, output_dir


def run(args) -> int:
    from impl.sim import SimOptions
    from model_check.campaign import format_summary, run_campaign, tty_progress

    output_dir("--out", args.out)
    config = cluster_config(args)
    seed = 1 if args.seed is None else args.seed
    nemesis = args.nemesis if args.nemesis else ("crash", "partition", "pause")
    options = SimOptions(seed=seed, duration_ms=args.duration, nemesis=nemesis,
                         max_faults=args.faults)
    out = Path(args.out)
    if not args.json:
        print(f"isrlab campaign: {args.runs} runs, seeds {seed}..{seed + args.runs - 1}, "
              f"variant {config.variant}, acks={config.acks}, min ISR "
              f"{config.min_insync_replicas}, unclean {config.unclean_leader_election_enable}, "
              f"nemesis {','.join(nemesis)}, {args.duration / 1000:g} s each"
              + (f", bugs {','.join(sorted(config.bugs))}" if config.bugs else ""))
    result = run_campaign(config, options, args.runs, out, keep=args.keep, workers=args.workers,
                          progress=None if args.json else tty_progress)
    summary = result.summary()
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(format_summary(result))
        if result.failed and args.keep != "none":
            print(f"  failing runs' traces: {out}/run-<seed>/ (replay with isrlab replay)")
    if args.keep != "none":
        out.mkdir(parents=True, exist_ok=True)
        (out / "campaign.json").write_text(json.dumps(
            {"summary": summary, "config": config.to_json(), "seed": seed, "runs": args.runs,
             "nemesis": list(nemesis), "duration_ms": args.duration}, sort_keys=True) + "\n")
    return 1 if result.failed else 0


def register(sub) -> None:
    p = sub.add_parser("campaign", help="many simulated runs, each replayed and history-checked",
                       description=__doc__.split("\n\n")[0])
    add_cluster_options(p)
    p.set_defaults(duration=20_000)
    p.add_argument("--runs", type=integer(1, 10**6), default=20)
    p.add_argument("--workers", type=WORKERS, default=None,
                   help="processes (default: all cores; at most 4 per core)")
    p.add_argument("--out", default="campaign-out", metavar="DIR")
    p.add_argument("--keep", choices=("failing", "all", "none"), default="failing",
                   help="which runs' traces to write (all: a corpus for isrlab analyze)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.set_defaults(func=run, error_prefix="isrlab campaign")
