"""Campaign wall time through Spark tasks against the local process pool, side by side.

    .venv/bin/python bench/campaign_spark_bench.py [--runs 200] [--duration-ms 20000]

The same seeds run both ways (simulate, replay, history check; traces of failing runs kept):
the local pool on every core, then `--spark local[2]` (its JVM start counted). Prints each
wall and CPU time, the ratio (target: Spark within 1.3x of the pool), and whether the two
summaries agree.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from impl.config import ClusterConfig  # noqa: E402
from impl.sim import SimOptions  # noqa: E402
from model_check.campaign import run_campaign  # noqa: E402


def cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--duration-ms", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    config = ClusterConfig(acks="all", min_insync_replicas=2)
    options = SimOptions(seed=args.seed, duration_ms=args.duration_ms,
                         nemesis=("crash", "partition", "pause"))
    print(f"{args.runs} runs x {args.duration_ms / 1000:g} s, seeds {args.seed}.."
          f"{args.seed + args.runs - 1}, acks=all, min ISR 2, crash/partition/pause")
    results = {}
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-") as tmp:
        for name, spark in (("pool", None), (f"spark {args.master}", args.master)):
            wall, cpu = time.perf_counter(), cpu_seconds()
            result = run_campaign(config, options, args.runs, Path(tmp) / name.split()[0],
                                  keep="failing", spark=spark)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            results[name] = (result, wall)
            s = result.summary()
            print(f"  {name:<16} {wall:7.1f} s wall  {cpu:7.1f} s CPU (this process and its "
                  f"pool; Spark's workers not counted)  events {s['events']:,}  "
                  f"failed {len(s['failed_runs'])}")
    (pool, pool_wall), (spark, spark_wall) = results.values()
    same = {k: v for k, v in pool.summary().items() if k not in ("seconds",
            "replay_events_per_second")} == {k: v for k, v in spark.summary().items()
                                              if k not in ("seconds", "replay_events_per_second")}
    print(f"spark / pool wall time: {spark_wall / pool_wall:.2f} (target <= 1.3); "
          f"summaries {'agree' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
