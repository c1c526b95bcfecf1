"""Replay throughput: events per second on one core, for traces of growing length.

    .venv/bin/python bench/replay_bench.py [--durations 15,30,60,120]

Target: >= 100,000 events/s on one core, growing linearly with trace length. Each
line: the simulated duration, events, parse + merge + replay seconds, events/s.
"""

from __future__ import annotations

import argparse
import time

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from model_check.replay import load_texts, replay_run

FAULTS = ("crash", "partition", "pause")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--durations", default="15,30,60,120", help="simulated seconds")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print(f"seed {args.seed}, nemesis {','.join(FAULTS)}, one core")
    for seconds in (int(x) for x in args.durations.split(",")):
        sim = simulate(ClusterConfig(), SimOptions(seed=args.seed, duration_ms=seconds * 1000,
                                                   nemesis=FAULTS))
        started = time.perf_counter()
        run = load_texts(sim.traces)
        parsed = time.perf_counter()
        result = replay_run(run, check_invariants=False)
        done = time.perf_counter()
        print(f"  {seconds:4d} s  {result.events:8,} events  parse {parsed - started:5.2f} s  "
              f"replay {done - parsed:5.2f} s  {result.events / (done - started):9,.0f} events/s"
              f"  ({result.verdict})")


if __name__ == "__main__":
    main()
