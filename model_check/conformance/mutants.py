"""Campaigns with one seeded implementation bug switched on: the settings under which each bug
can show, and how many runs replay or the history checker needs to catch it.

Used by the campaign tests (every bug is caught within 200 runs: the evidence that these checks
check something) and by `bench/mutants_bench.py`.
"""

from __future__ import annotations

from impl.config import ClusterConfig
from impl.sim import SimOptions
from model_check.conformance.campaign import run_campaign

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
    # min.insync.replicas is 2 of 3: only two faults at once take the ISR below it.
    "ignore-min-isr": {"max_faults": 2},
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
                return index, "replay: " + _reason(outcome.report)
            return index, "history: " + ", ".join(sorted(outcome.anomalies))
    return None, "not caught"


# Seeded bugs that random campaigns do not reach within 200 runs: the bug's window needs a
# new leader with a stale HW and an empty replica fetching from 0 at that moment (the coverage
# report finds no campaign run in that state). Each is caught instead by a directed run: the
# explorer's counterexample for the spec with the same rule switched off, driven through the
# broker with the bug and replayed against the variant itself. The spec config of that search:
DIRECTED: dict[str, dict] = {
    "expand-without-epoch-start": {
        "variant": "current", "brokers": 2, "min_insync_replicas": 2, "max_records": 1,
        "max_leader_epochs": 3, "max_crashes": 1, "invariants": ("AckedWritesDurable",)},
}


def directed_catch(bug: str) -> tuple[int | None, str]:
    """(1, what caught it) when the directed run diverges from the variant, else (None, why)."""
    from model_check.conformance.drive import Driver
    from model_check.conformance.replay import format_result, load_texts, replay_run
    from model_check.explore.flat import search
    from spec import VARIANTS, Config
    from vocab.config import BUG_RULES

    settings = dict(DIRECTED[bug])
    invariants = settings.pop("invariants")
    variant = VARIANTS[settings.pop("variant")]
    config = Config(variant=variant.with_rules(**{BUG_RULES[bug]: False}), **settings)
    found = search(config, invariants, workers=1).violation
    if found is None:
        return None, "the spec with the rule off has no counterexample at these bounds"
    schedule = [(a.name, a.args()) for a, _ in found.trace[1:]]
    cluster = ClusterConfig(variant=variant.name, brokers=config.brokers,
                            min_insync_replicas=config.min_insync_replicas,
                            bugs=frozenset({bug}))
    driver = Driver(cluster)
    driven = driver.drive(schedule)
    if not driven.complete:
        return None, f"the broker with the bug did not follow the counterexample: {driven.stuck}"
    sim = driver.finish()
    run_json = sim.run_json()
    run = load_texts(sim.traces, run_json)
    for header in (run.header["config"], run_json["config"]):
        header.pop("spec_rules_off")  # judged by the variant itself, not the mutant
    replayed = replay_run(run)
    if replayed.verdict == "accepted":
        return None, "the directed run replays against the variant"
    return 1, "directed run, replay: " + _reason(format_result(replayed))


def _reason(report: str) -> str:
    """The first line under a replay report's verdict: why it diverged."""
    return report.splitlines()[1].strip()[:70]
