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

from impl.config import BUGS
from model_check.conformance.mutants import DIRECTED, caught_by, directed_catch, mutant_campaign


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
        if bug in DIRECTED:
            started = time.perf_counter()
            runs, how = directed_catch(bug)
            print(f"{'':28} {'directed' if runs else 'missed':>10}  "
                  f"{time.perf_counter() - started:6.1f} s  {how}", flush=True)


if __name__ == "__main__":
    main()
