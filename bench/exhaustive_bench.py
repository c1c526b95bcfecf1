"""Explorations too large for `make test`: prints states, depth, wall and CPU seconds.

    python bench/exhaustive_bench.py            # every run
    python bench/exhaustive_bench.py --only b8  # one of them

"b3", "b6" and "b8" explore a configuration in which a catalogue bug is fixed (docs/protocol.md) to
the end; "found" searches from the initial state for B2's kip-101 form, and "b4" for B4 by the
guided search (`isrlab check --guided`), which BFS does not reach. Each compares its
verdict, distinct-state count and depth with the pinned figures; a mismatch is printed and
makes the exit status 1. The small versions of the same checks are in tests/ (B6 without
crashes, B8 to its counterexample's depth, B2 under hw-truncation).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model_check.explore.explorer import explore  # noqa: E402
from model_check.explore.guided import guided_search  # noqa: E402
from model_check.explore.model import KafkaModel  # noqa: E402
from spec import VARIANTS, Config  # noqa: E402

COMMON = dict(brokers=2, partitions=1, acks="all", max_records=1, replica_lag_time_max_ticks=1)

RUNS = {
    # KIP-497's maximal ISR: the HW counts the current members while a shrink is pending.
    "b6": ("B6 absent with the maximal ISR (async ISR changes, 1 crash, 1 expiry, 2 ticks)",
           dict(COMMON, max_leader_epochs=2, max_crashes=1, max_session_expiries=1, max_ticks=2,
                isr_changes_async=True, hw_over_requested_isr=False),
           ("ok", 1_061_657, 45)),
    # KIP-966: min ISR 2, one crash, one session expiry, ELR on.
    "b8": ("B8 absent with eligible leader replicas (min ISR 2, 1 crash, 1 expiry)",
           dict(COMMON, min_insync_replicas=2, max_leader_epochs=3, max_crashes=1,
                max_session_expiries=1, eligible_leader_replicas_enable=True),
           ("ok", 593_963, 43)),
    # KIP-320 with broker epochs at B3's 2-broker bounds: neither B3 nor B2.
    "b3": ("B3 and B2 absent in kip-320 with broker epochs (2 records, 2 crashes, 4 epochs)",
           dict(COMMON, max_records=2, max_leader_epochs=4, max_crashes=2,
                max_session_expiries=0),
           ("ok", 1_998_605, 55)),
    # B2's total-loss form in kip-101, with the rules that fix B3, B5 and B7 switched on.
    "found": ("B2 found from the initial state in kip-101 (fencing, broker epochs, epoch start)",
              dict(COMMON, max_records=2, max_leader_epochs=4, max_crashes=2,
                   max_session_expiries=0),
              ("NoCommittedDataLoss", 740_188, 24)),
    # B4: three brokers, every write flushed (no B2), the rules that fix B3, B5 and B7 on.
    "b4": ("B4 found from the initial state in kip-101 by the guided search",
           dict(COMMON, brokers=3, max_records=2, max_leader_epochs=3, max_crashes=2,
                max_session_expiries=0, log_flush_interval_messages=1),
           ("NoCommittedDataLoss", 993_417, 21)),
}
WITH_FIXES = VARIANTS["kip-101"].with_rules(
    fencing=True, broker_epochs=True, expand_requires_epoch_start=True)
VARIANT = {"found": WITH_FIXES, "b4": WITH_FIXES,
           "b3": VARIANTS["kip-320"].with_rules(broker_epochs=True)}
GUIDED = ("b4",)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(RUNS))
    args = parser.parse_args()
    failed = 0
    for key, (title, fields, pinned) in RUNS.items():
        if args.only and key != args.only:
            continue
        config = Config(variant=VARIANT.get(key, VARIANTS["current"]), **fields)
        wall, cpu = time.perf_counter(), time.process_time()
        model = KafkaModel(config)
        result = guided_search(model) if key in GUIDED else explore(model, workers=1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        found = result.violation.invariant if result.violation else result.result
        got = (found, result.distinct_states, result.depth)
        verdict = "as pinned" if got == pinned else \
            f"MISMATCH: pinned {pinned[0]}, {pinned[1]:,} states, depth {pinned[2]}"
        failed += verdict != "as pinned"
        print(f"{key}: {title}\n    {found}, {result.distinct_states:,} states, depth "
              f"{result.depth}, {wall:.1f} s wall, {cpu:.1f} s CPU, "
              f"{result.distinct_states / wall:,.0f} states/s: {verdict}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
