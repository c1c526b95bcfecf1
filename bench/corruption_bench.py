"""Replay against many corruptions of real runs: the table of corruption kind and verdict.

    .venv/bin/python bench/corruption_bench.py [--runs 3] [--cases 10] [--random 500] [--seed 1]

For each of `--runs` simulated runs (seeds from `--seed`, crash and partition nemesis), every
kind in `model_check.conformance.corrupt.KINDS` is applied `--cases` times (each with its own rng seed),
then `--random` random field changes (1-3 leaves of random lines set to random JSON values).
Prints per kind: cases, rejected (exit 1 or 2), accepted, tracebacks; exit 1 if any
meaning-changing case was accepted, any control rejected, or anything raised.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from isrlab.cli import main as isrlab_main
from model_check.conformance.corrupt import KINDS, leaf_paths, read_run, write_run


def replay(files: dict, run_dir: Path) -> tuple[int | None, str]:
    write_run(files, run_dir)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = isrlab_main(["replay", str(run_dir)])
    except BaseException:  # noqa: BLE001 - counted as a traceback, which is the finding
        return None, traceback.format_exc()
    return code, err.getvalue()


def _random_change(files: dict, rng: random.Random, changed: list[str]) -> dict:
    files = dict(files)
    for _ in range(rng.randint(1, 3)):
        name = rng.choice(sorted(files))
        lines = files[name].splitlines()
        i = 0 if name == "run.json" else rng.randrange(len(lines))
        body = json.loads(lines[i])
        path = rng.choice(list(leaf_paths(body)))
        target = body
        for key in path[:-1]:
            target = target[key]
        kind = "run.json" if name == "run.json" else body.get("kind", "?")
        label = body.get("action") or body.get("f") or ""
        changed.append(".".join([kind, label, *(str(k) for k in path if not isinstance(k, int))]))
        if path:
            old = target[path[-1]]
            new = rng.choice([None, True, False, -1, 0, rng.randint(1, 10**6), "", "x", [], {},
                              2**63])
            if type(new) is type(old) and new == old:
                changed.pop()  # the same value: no change at all
            target[path[-1]] = new
        lines[i] = json.dumps(body).encode()
        files[name] = b"\n".join(lines) + b"\n"
    return files


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cases", type=int, default=10)
    p.add_argument("--random", type=int, default=500)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    print(f"corruption bench: {args.runs} runs (sim seeds {args.seed}..{args.seed + args.runs - 1}"
          f"), {args.cases} cases per kind, {args.random} random changes per run")
    wall, cpu = time.perf_counter(), time.process_time()
    table: dict[str, Counter] = {k.name: Counter() for k in KINDS}
    table["random field changes"] = Counter()
    bad = 0
    accepted_fields: Counter = Counter()  # what the accepted random changes touched
    root = Path(tempfile.mkdtemp(prefix="corrupt-"))
    for run_seed in range(args.seed, args.seed + args.runs):
        result = simulate(ClusterConfig(), SimOptions(seed=run_seed, duration_ms=6_000,
                                                      nemesis=("crash", "partition"),
                                                      max_faults=2))
        clean = root / f"clean-{run_seed}"
        result.write(clean)
        files = read_run(clean)
        code, _ = replay(files, root / "check")
        if code != 0:
            print(f"sim seed {run_seed}: the clean run is not accepted (exit {code})")
            return 1
        for kind in KINDS:
            for case in range(args.cases):
                corrupted = kind.apply(files, random.Random(f"{run_seed}/{kind.name}/{case}"))
                row = table[kind.name]
                if corrupted is None:
                    row["not applicable"] += 1
                    continue
                code, text = replay(corrupted, root / "case")
                row["cases"] += 1
                if code is None:
                    row["tracebacks"] += 1
                    bad += 1
                    print(f"{kind.name}: traceback\n{text}")
                elif code == 0:
                    row["accepted"] += 1
                    bad += kind.changes_meaning
                else:
                    row["rejected"] += 1
                    bad += not kind.changes_meaning
        row = table["random field changes"]
        rng = random.Random(f"{run_seed}/random")
        for _ in range(args.random):
            changed: list[str] = []
            code, text = replay(_random_change(files, rng, changed), root / "case")
            row["cases"] += 1
            if code is None:
                row["tracebacks"] += 1
                bad += 1
                print(f"random change: traceback\n{text}")
            else:
                row["accepted" if code == 0 else "rejected"] += 1
                if code == 0:
                    accepted_fields.update(changed)
    meaning = {k.name: k.changes_meaning for k in KINDS}
    print(f"\n{'corruption kind':<40} {'changes meaning':>15} {'cases':>6} {'rejected':>9} "
          f"{'accepted':>9} {'tracebacks':>10}")
    for name, row in table.items():
        changes = {True: "yes", False: "no (control)"}.get(meaning.get(name), "unknown")
        print(f"{name:<40} {changes:>15} {row['cases']:>6} {row['rejected']:>9} "
              f"{row['accepted']:>9} {row['tracebacks']:>10}")
    if accepted_fields:
        print("\nfields touched by accepted random changes (kind.action-or-f.path: times); "
              "fields replay does not compare, or values it cannot tell apart:")
        for name, n in accepted_fields.most_common(25):
            print(f"  {name}: {n}")
    print(f"\n{'FAILED' if bad else 'OK'}: {bad} wrong verdicts or tracebacks; "
          f"{time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s CPU")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
