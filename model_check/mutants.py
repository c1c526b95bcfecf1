"""Campaigns with one seeded implementation bug switched on: the settings under which each bug
can show, and how many runs replay or the history checker needs to catch it.

Used by the campaign tests (every bug is caught within 200 runs: the evidence that these checks
check something) and by `bench/mutants_bench.py`.
"""

from __future__ import annotations

from impl.config import ClusterConfig
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
