"""Simulator speed: simulated seconds per wall second, and wall time for a batch of runs.

    .venv/bin/python bench/sim_bench.py [--runs 1000] [--duration 60] [--workers 2] [--no-trace]

Target: 1,000 runs of 60 simulated seconds with a 3-broker cluster under the full
nemesis in under 5 minutes on 2 cores. Prints the per-run figures and the batch wall time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate

FAULTS = ("crash", "partition", "pause", "slow")


def one(job: tuple) -> tuple[int, float]:
    seed, duration_ms, trace = job
    started = time.perf_counter()
    result = simulate(ClusterConfig(), SimOptions(seed=seed, duration_ms=duration_ms,
                                                  nemesis=FAULTS, trace=trace))
    return result.summary["events"], time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--duration", type=int, default=60, help="simulated seconds per run")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-trace", action="store_true", help="skip writing trace lines")
    args = parser.parse_args()
    jobs = [(seed, args.duration * 1000, not args.no_trace) for seed in range(1, args.runs + 1)]
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.workers) as pool:
        results = pool.map(one, jobs, chunksize=4)
    wall = time.perf_counter() - started
    events = sum(e for e, _ in results)
    cpu = sum(s for _, s in results)
    print(f"{args.runs} runs x {args.duration} s simulated, 3 brokers, nemesis "
          f"{','.join(FAULTS)}, trace {'off' if args.no_trace else 'on'}, {args.workers} workers")
    print(f"  wall time           {wall:8.1f} s   (target: 1,000 runs in < 300 s)")
    print(f"  per run (one core)  {cpu / args.runs:8.3f} s")
    print(f"  simulated s / wall s per core  {args.duration * args.runs / cpu:8.0f}")
    print(f"  events              {events:,} ({events / cpu:,.0f} events/s per core)")


if __name__ == "__main__":
    main()
