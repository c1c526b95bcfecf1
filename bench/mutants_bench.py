"""How many campaign runs each seeded implementation bug needs before replay or the history
checker catches it (evidence that the checks check something).

    .venv/bin/python bench/mutants_bench.py [--max-runs 200] [--duration 20s] [--bug NAME]

Prints one row per bug: the campaign settings, runs needed, what caught it (divergence or an
anomaly kind) and the wall time. Runs go in seed order from --seed; the first failing run ends
the bug's campaign.
"""

from __future__ import annotations

import argparse
import time

from impl.config import BUGS, ClusterConfig
from impl.sim import SimOptions
from model_check.campaign import run_campaign

# Settings under which each bug can show: most need only the default safe config.
MUTANT_SETTINGS: dict[str, dict] = {
    "truncate-to-hw": {},
    "expand-without-epoch-start": {"nemesis": ("crash", "partition", "pause", "slow"),
                                   "max_faults": 2, "log_flush_interval_messages": 1},
    "hw-counts-non-isr": {},
    "serve-above-hw": {},
    # kip-320's controller bumps the leader epoch when a follower fails, so stale fetches come
    # at once; under `current` only leader changes do.
    "skip-fetch-fencing": {"variant": "kip-320"},
    "early-ack": {},
    "ignore-min-isr": {},
    # The leader cut off from its followers shrinks the ISR to itself, then dies: only an
    # out-of-sync replica is left. A fixed schedule; the seeds vary everything else.
    "unclean-when-disabled": {"faults": ((3000, "partition-brokers", "b0", 6000),
                                         (6000, "crash", "b0", 3000))},
    "false-flush": {"log_flush_interval_messages": 1},
    "no-epoch-cache-on-leader": {},
    "follower-hw-is-leo": {},
}


def mutant_campaign(bug: str, seed: int, max_runs: int, duration_ms: int, workers=None):
    settings = dict(MUTANT_SETTINGS[bug])
    nemesis = settings.pop("nemesis", ("crash", "partition", "pause"))
    max_faults = settings.pop("max_faults", 1)
    faults = settings.pop("faults", ())
    config = ClusterConfig(bugs=frozenset({bug}), **settings)
    options = SimOptions(seed=seed, duration_ms=duration_ms, nemesis=nemesis,
                         max_faults=max_faults, faults=faults)
    return run_campaign(config, options, max_runs, None, keep="none", workers=workers,
                        stop_at_first_failure=True)


def caught_by(result) -> tuple[int | None, str]:
    """(runs needed: the first failing seed's position from the campaign's first seed, how)."""
    first = result.outcomes[0].seed if result.outcomes else 0
    for outcome in result.outcomes:
        index = outcome.seed - first + 1
        if outcome.failed:
            if outcome.verdict != "accepted":
                return index, "replay: " + outcome.report.splitlines()[1].strip()[:70]
            return index, "history: " + ", ".join(sorted(outcome.anomalies))
    return None, "not caught"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-runs", type=int, default=200)
    parser.add_argument("--duration", type=int, default=20_000, help="ms per run")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bug", action="append", choices=sorted(BUGS))
    args = parser.parse_args()
    print(f"seed {args.seed}, up to {args.max_runs} runs of {args.duration} ms per bug")
    for bug in args.bug or list(BUGS):
        started = time.perf_counter()
        result = mutant_campaign(bug, args.seed, args.max_runs, args.duration)
        runs, how = caught_by(result)
        print(f"{bug:28} runs {runs if runs else '>' + str(args.max_runs):>5}  "
              f"{time.perf_counter() - started:6.1f} s  {how}", flush=True)


if __name__ == "__main__":
    main()
