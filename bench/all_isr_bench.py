"""When every in-sync replica fails: the per-policy table (clean, unclean, ELR, ELR + last
known leader) under the three isr-kill nemeses, from simulated runs that are each replayed
against the spec and history-checked.

    .venv/bin/python bench/all_isr_bench.py [--runs 70] [--seed 1] [--duration 20s] [--workers N]

`--runs` runs per (policy, nemesis): the default gives 210 runs per policy. Columns: acked
writes, acknowledged writes missing from the final logs, runs that lost any, replayed states
that break KIP-966's durability promise (AckedWritesDurableKip966, LeaderCandidatesComplete),
seconds with no leader and with the ISR below min ISR (summed over runs), elections of a new
leader, unclean ones (last-known-leader elections count as unclean, as in Kafka), and runs that
did not replay. Exit 1 if any run diverged, or lost a write under a policy Kafka promises
durability for (ELR) to a nemesis that left a replica with every write (isr-kill,
isr-kill-process).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

from impl.config import ClusterConfig
from impl.sim import SimOptions
from isrlab.options import parse_duration
from model_check.conformance.campaign import run_campaign
from model_check.conformance.policies import format_rows, policy_rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=70)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=parse_duration, default=20_000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    print(f"all-ISR bench: seed {args.seed}, {args.runs} runs per row, "
          f"{args.duration / 1000:g} s each, {args.workers} workers, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    wall = time.perf_counter()
    rows = policy_rows(run_campaign, ClusterConfig(), SimOptions(seed=args.seed, duration_ms=args.duration),
                       args.runs, workers=args.workers,
                       progress=lambda r: print(f"  {r['policy']} / {r['nemesis']}: done",
                                                file=sys.stderr, flush=True))
    wall = time.perf_counter() - wall
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = sum(u.ru_utime + u.ru_stime for u in usage)
    print(format_rows(rows))
    print(f"wall {wall:.1f} s, CPU {cpu:.1f} s (this process and its workers)")
    bad = [r for r in rows if r["divergences"]
           or (r["policy"].startswith("elr") and r["nemesis"] != "isr-kill-all" and r["lost"])]
    for r in bad:
        print(f"UNEXPECTED: {r['policy']} / {r['nemesis']}: failed runs {r['failed_runs'][:10]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
