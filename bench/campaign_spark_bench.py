"""Campaign wall time through Spark tasks against the local process pool, side by side.

    .venv/bin/python bench/campaign_spark_bench.py [--runs 200] [--duration-ms 20000] [--dataset]

The same seeds run both ways (simulate, replay, history check; traces of failing runs kept):
the local pool on every core, then `--spark local[2]` (its JVM start counted). Prints each
wall and CPU time, the ratio (target: Spark within 1.3x of the pool), and whether the two
summaries agree. With `--dataset`, a third pass through Spark also writes every run's trace
lines to a Parquet dataset in the same job (what `isrlab campaign --spark` does by default),
and its time is printed beside the others.

What the driver holds: the job list (a config and a seed per run) and each run's outcome
(about 1 KB: counts, verdicts, a report line), collected wave by wave; traces stay on the
executors (written to disk or to the dataset by the task that made them).
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
from model_check.conformance.campaign import run_campaign  # noqa: E402


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
    parser.add_argument("--dataset", action="store_true",
                        help="also time Spark writing the Parquet dataset in the same job")
    args = parser.parse_args()
    config = ClusterConfig(acks="all", min_insync_replicas=2)
    options = SimOptions(seed=args.seed, duration_ms=args.duration_ms,
                         nemesis=("crash", "partition", "pause"))
    print(f"{args.runs} runs x {args.duration_ms / 1000:g} s, seeds {args.seed}.."
          f"{args.seed + args.runs - 1}, acks=all, min ISR 2, crash/partition/pause")
    results = {}
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-") as tmp:
        passes = [("pool", None, None), (f"spark {args.master}", args.master, None)]
        if args.dataset:
            passes.append((f"spark+dataset {args.master}", args.master,
                           str(Path(tmp) / "dataset")))
        for name, spark, dataset in passes:
            wall, cpu = time.perf_counter(), cpu_seconds()
            result = run_campaign(config, options, args.runs, Path(tmp) / name.split()[0],
                                  keep="failing", spark=spark, dataset=dataset)
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            results[name] = (result, wall)
            s = result.summary()
            print(f"  {name:<16} {wall:7.1f} s wall  {cpu:7.1f} s CPU (this process and its "
                  f"pool; Spark's workers not counted)  events {s['events']:,}  "
                  f"failed {len(s['failed_runs'])}")
    def strip(result) -> dict:
        return {k: v for k, v in result.summary().items()
                if k not in ("seconds", "replay_events_per_second")}

    (pool, pool_wall), *sparks = results.values()
    same = all(strip(spark) == strip(pool) for spark, _ in sparks)
    print(f"spark / pool wall time: {sparks[0][1] / pool_wall:.2f} (target <= 1.3)"
          + (f"; with the dataset written: {sparks[1][1] / pool_wall:.2f}"
             if len(sparks) > 1 else "")
          + f"; summaries {'agree' if same else 'DIFFER'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
