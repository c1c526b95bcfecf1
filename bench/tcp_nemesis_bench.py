"""N TCP runs under the crash nemesis, each replayed: every run must exit 0 with no traceback
and every replay must be accepted.

    .venv/bin/python bench/tcp_nemesis_bench.py [--runs 20] [--duration 10] [--first-seed 1]
                                                [--nemesis crash] [--out DIR]

Prints one row per run (seed, cluster exit, traceback seen, replay verdict, wall and CPU
seconds of the run and its replay) and a total. Exit 1 if any run failed any of the three.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(args: list[str]) -> tuple[int, str, str, float, float]:
    cpu, wall = _children_cpu(), time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "isrlab.cli", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=600)
    return (proc.returncode, proc.stdout, proc.stderr, time.monotonic() - wall,
            _children_cpu() - cpu)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--duration", default="10", help="seconds per run")
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--nemesis", default="crash")
    p.add_argument("--out", help="keep the run directories here (default: a temporary dir)")
    args = p.parse_args()
    root = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="tcp-nemesis-"))
    print(f"{args.runs} TCP runs, nemesis {args.nemesis}, {args.duration} s each, seeds "
          f"{args.first_seed}..{args.first_seed + args.runs - 1}, runs in {root}")
    print(f"{'seed':>5} {'exit':>4} {'traceback':>9} {'replay':>9} {'events':>7} "
          f"{'run wall/cpu s':>15} {'replay wall/cpu s':>18}")
    failed = 0
    total_wall, total_cpu = time.monotonic(), _children_cpu()
    for seed in range(args.first_seed, args.first_seed + args.runs):
        run_dir = root / f"seed-{seed}"
        code, _, err, wall, cpu = _run(["cluster", "tcp", "--seed", str(seed), "--nemesis",
                                        args.nemesis, "--duration", args.duration,
                                        "--trace-out", str(run_dir)])
        logs = "".join(p.read_text(errors="replace") for p in run_dir.glob("*.log"))
        traceback = "Traceback" in err or "Traceback" in logs
        r_code, r_out, r_err, r_wall, r_cpu = _run(["replay", "--json", str(run_dir)])
        try:
            result = json.loads(r_out)
            verdict, events = result["verdict"], result.get("events", 0)
        except (ValueError, KeyError):
            verdict, events = f"exit {r_code}", 0
        ok = code == 0 and not traceback and verdict == "accepted"
        failed += not ok
        print(f"{seed:>5} {code:>4} {'yes' if traceback else 'no':>9} {verdict:>9} {events:>7} "
              f"{wall:>7.1f}/{cpu:<7.1f} {r_wall:>9.1f}/{r_cpu:<8.1f}"
              + ("" if ok else f"  <- {(err or r_err).strip().splitlines()[-1:]}"))
    print(f"{args.runs - failed} of {args.runs} runs: exit 0, no traceback, replay accepted; "
          f"{time.monotonic() - total_wall:.0f} s wall, {_children_cpu() - total_cpu:.0f} s CPU")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
