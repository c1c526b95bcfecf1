"""`isrlab fuzz`: Hypothesis random walks of the spec, with shrunk counterexamples.

Exit 0: no violation found; 1: a violation (written as a scenario transcript); 2: bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from isrlab.options import (
    SEED,
    SMALL,
    absolute_path,
    add_model_options,
    integer,
    invariant_names,
    kafka_config,
    output_file,
    write_output,
)

# Where the transcript goes without --out: the directory the user is in.
DEFAULT_OUT = "fuzz-counterexample.txt"


def register(sub) -> None:
    fuzz = sub.add_parser("fuzz", help="Hypothesis random walks of the spec, shrunk counterexamples",
                          description="Exit 0: no violation found; 1: a violation (written as a "
                          "scenario transcript); 2: bad usage.")
    fuzz.add_argument("--examples", type=integer(1, 10**7), default=100, help="number of runs")
    fuzz.add_argument("--steps", type=integer(1, 10**5), default=50, help="max steps per run")
    fuzz.add_argument("--seed", type=SEED)
    fuzz.add_argument("--out", type=absolute_path, metavar="FILE",
                      help=f"where to write the transcript (default ./{DEFAULT_OUT})")
    add_model_options(fuzz)
    for flag, kind in (("--brokers", SMALL), ("--partitions", SMALL),
                       ("--records", integer(1, 1000)), ("--epochs", integer(1, 1000)),
                       ("--crashes", integer(0, 1000)), ("--min-isr", SMALL)):
        fuzz.add_argument(flag, type=kind, metavar="N")
    fuzz.add_argument("--invariant", action="append", metavar="NAME")
    fuzz.set_defaults(func=run, no_invariants=False, error_prefix="isrlab fuzz")


def run(args: argparse.Namespace) -> int:
    from model_check.explore.fuzz import fuzz
    from spec import INVARIANTS

    out = args.out or os.path.abspath(DEFAULT_OUT)
    output_file("--out", out)
    config = kafka_config(args)
    names = invariant_names(args, list(INVARIANTS))
    seed = args.seed if args.seed is not None else 0
    print(f"fuzz seed {seed}: {args.examples} runs of up to {args.steps} steps, "
          f"variant {config.variant.name}, {config.brokers} brokers, {config.partitions} partitions",
          file=sys.stderr)
    result = fuzz(config, examples=args.examples, steps=args.steps, seed=seed, invariants=names)
    print(f"{result.examples} runs, {result.steps:,} steps, deepest {result.deepest}, "
          f"{result.seconds:.1f} s")
    if result.error:
        print(f"spec error after {len(result.actions)} actions: {result.error}")
        return 1
    if result.invariant is None:
        print("OK: no invariant violated")
        return 0
    print(f"VIOLATED {result.invariant} after {len(result.actions)} actions "
          f"(Hypothesis shrank to {result.hypothesis_actions}): {result.detail}")
    for number, action in enumerate(result.actions, start=1):
        print(f"  {number:>3}. {action}")
    if result.transcript is not None:
        write_output("--out", out, result.transcript)
        status = "reproduces" if result.reproduced else "DOES NOT reproduce"
        print(f"transcript written to {out} ({status}: isrlab scenario {out})")
    return 1
