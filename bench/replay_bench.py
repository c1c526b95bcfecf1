"""Replay throughput: events per second on one core, for traces of growing length.

    .venv/bin/python bench/replay_bench.py [--durations 24,2400]

Target: >= 50,000 events/s on one core at 1,000,000 events, and the rate there at least 0.8 of
the rate at 10,000 events (linear). The defaults simulate 24 s (about 10,000 events) and 2,400 s
(about 1,000,000) of a 3-broker cluster under crash, partition and pause faults. Each line: the
simulated duration, events, parse + merge + replay seconds, events/s (wall) and CPU seconds.
"""

from __future__ import annotations

import argparse
import time

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from model_check.conformance.replay import load_texts, replay_run

FAULTS = ("crash", "partition", "pause")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", default="24,2400", help="simulated seconds")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"seed {args.seed}, nemesis {','.join(FAULTS)}, one core")
    rates = []
    for seconds in (int(x) for x in args.durations.split(",")):
        sim = simulate(ClusterConfig(), SimOptions(seed=args.seed, duration_ms=seconds * 1000,
                                                   nemesis=FAULTS))
        cpu = time.process_time()
        started = time.perf_counter()
        run = load_texts(sim.traces)
        parsed = time.perf_counter()
        result = replay_run(run, check_invariants=False)
        done = time.perf_counter()
        cpu = time.process_time() - cpu
        rate = result.events / (done - started)
        rates.append((result.events, rate))
        print(f"  {seconds:5d} s  {result.events:9,} events  parse {parsed - started:6.2f} s  "
              f"replay {done - parsed:6.2f} s  {rate:9,.0f} events/s  cpu {cpu:6.2f} s"
              f"  ({result.verdict})")
        del sim, run
    if len(rates) > 1:
        (small, first), (large, last) = rates[0], rates[-1]
        print(f"rate at {large:,} events / rate at {small:,} events: {last / first:.2f}")


if __name__ == "__main__":
    main()
