"""The `isrlab` console script: one subcommand per job.

Exit codes are part of the contract: 0 success, 1 a finding (mismatch, violation), 2 bad usage
or bad input (one line naming where and what, never a traceback).
"""

from __future__ import annotations

import argparse
import sys

from isrlab import __version__


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def _cmd_scenario(args: argparse.Namespace) -> int:
    from model_check.scenario import ScenarioError, diff, run_file

    status = 0
    for path in args.files:
        try:
            result = run_file(path, rewrite=args.rewrite)
        except ScenarioError as error:
            print(error, file=sys.stderr)
            return 2
        if args.rewrite:
            changed = len(result.mismatches)
            print(f"{path}: {result.blocks} blocks, {changed} expectations rewritten")
            continue
        if result.mismatches:
            status = 1
            for block, actual in result.mismatches:
                print(diff(block, actual, path))
            print(f"{path}: {len(result.mismatches)} of {result.blocks} blocks differ")
        else:
            if args.verbose:
                from pathlib import Path

                print(Path(path).read_text(encoding="utf-8"), end="")
            # Show where the transcript expects each violation: the step and the invariant.
            for block in result.blocks_run:
                for line in block.expected:
                    if line.startswith("VIOLATED"):
                        print(f"{path}:{block.line}: after `{block.command}`: {line}")
            print(f"{path}: {result.blocks} blocks match")
    return status


def _fail(message: str) -> int:
    print(f"isrlab: error: {message}", file=sys.stderr)
    return 2


def _kafka_config(args: argparse.Namespace, base=None):
    """Config from --config FILE (else `base`, else the defaults), then the explicit flags on
    top of it. Shared by `check`, `fuzz` and `prove`."""
    from spec import VARIANTS, Config, load_properties

    config = load_properties(args.config) if args.config else (base or Config())
    flags = {
        "variant": VARIANTS.get(args.variant) if args.variant else None,
        "brokers": args.brokers,
        "partitions": getattr(args, "partitions", None),
        "max_records": args.records,
        "max_leader_epochs": args.epochs,
        "max_crashes": args.crashes,
        "acks": "all" if args.acks == "-1" else args.acks,
        "min_insync_replicas": args.min_isr,
        "unclean_leader_election_enable": args.unclean,
        "log_flush_interval_messages": getattr(args, "flush", None),
    }
    if args.variant and args.variant not in VARIANTS:
        raise _UsageError(f"--variant: unknown variant {args.variant!r} (known: {', '.join(VARIANTS)})")
    return config.replace(**{k: v for k, v in flags.items() if v is not None})


class _UsageError(Exception):
    pass


def _build_model(args: argparse.Namespace):
    from spec import INVARIANTS

    if args.model == "kafka":
        from model_check.model import KafkaModel

        config = _kafka_config(args)
        known = list(INVARIANTS)
        names = _invariant_names(args, known)
        return KafkaModel(config, names), config.variant.name, names
    from model_check.tla_compat import ALL_INVARIANTS, DEFAULT_INVARIANTS, TlaCompatModel

    variant = args.variant or "kip-320"
    if variant not in ("hw-truncation", "kip-101", "kip-279", "kip-320"):
        raise _UsageError(f"--variant: the tla-compat model has hw-truncation, kip-101, kip-279, kip-320, not {variant!r}")
    names = _invariant_names(args, list(ALL_INVARIANTS), list(DEFAULT_INVARIANTS))
    model = TlaCompatModel(
        variant,
        brokers=args.brokers or 3,
        log_size=args.log_size or 2,
        records=args.records or 2,
        epochs=args.epochs or 2,
        invariants=names,
    )
    return model, variant, names


def _invariant_names(
    args: argparse.Namespace, known: list[str], default: list[str] | None = None
) -> list[str]:
    if args.no_invariants:
        return []
    if not args.invariant:
        return known if default is None else default
    for name in args.invariant:
        if name not in known:
            raise _UsageError(f"--invariant: unknown invariant {name!r} (known: {', '.join(known)})")
    return list(args.invariant)


def _cmd_check(args: argparse.Namespace) -> int:
    import json

    from model_check.explorer import explore, simulate, tty_progress
    from model_check.report import counterexample_table, itf_trace, junit_xml, result_json, summary
    from spec import ConfigError

    try:
        model, variant, names = _build_model(args)
    except (ConfigError, _UsageError) as error:
        return _fail(str(error))
    if args.workers < 1:
        return _fail("--workers: must be >= 1")
    if args.simulate:
        seed = args.seed if args.seed is not None else 0
        print(f"simulation seed {seed}", file=sys.stderr)
        result = simulate(model, seed=seed, depth=args.depth, traces=args.traces,
                          check_invariants=bool(names))
    else:
        progress = None if args.json else tty_progress()
        result = explore(model, max_states=args.max_states, max_depth=args.max_depth,
                         workers=args.workers, symmetry=not args.no_symmetry,
                         check_invariants=bool(names), progress=progress)
        if progress:
            sys.stderr.write("\n")
    if args.itf and result.violation:
        with open(args.itf, "w", encoding="utf-8") as out:
            json.dump(itf_trace(model, result), out, indent=1)
    if args.junit:
        with open(args.junit, "w", encoding="utf-8") as out:
            out.write(junit_xml(model, variant, result, names))
    if args.json:
        print(json.dumps(result_json(model, variant, result), sort_keys=True))
    else:
        if result.violation:
            print(counterexample_table(model, result))
            print()
        print(summary(model, variant, result))
    return {"ok": 0, "violation": 1, "incomplete": 3}[result.result]


def _cmd_fuzz(args: argparse.Namespace) -> int:
    from model_check.fuzz import fuzz
    from spec import INVARIANTS, ConfigError

    try:
        config = _kafka_config(args)
        names = _invariant_names(args, list(INVARIANTS))
    except (ConfigError, _UsageError) as error:
        return _fail(str(error))
    if args.examples < 1 or args.steps < 1:
        return _fail("--examples and --steps must be >= 1")
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
        out = args.out or "fuzz-counterexample.txt"
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(result.transcript)
        status = "reproduces" if result.reproduced else "DOES NOT reproduce"
        print(f"transcript written to {out} ({status}: isrlab scenario {out})")
    return 1


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="isrlab", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"isrlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    scenario = sub.add_parser("scenario", help="replay scenario transcripts against the spec")
    scenario.add_argument("files", nargs="+", metavar="FILE")
    scenario.add_argument("--rewrite", action="store_true", help="regenerate the expectations")
    scenario.add_argument("-v", "--verbose", action="store_true",
                          help="print the transcript when it matches")
    scenario.set_defaults(func=_cmd_scenario)

    check = sub.add_parser("check", help="exhaustively check the invariants of a model",
                           description="Exit 0: all invariants hold within the bounds; 1: a "
                           "violation (shortest counterexample); 2: bad usage; 3: stopped at "
                           "--max-states.")
    check.add_argument("--model", choices=("kafka", "tla-compat"), default="kafka")
    check.add_argument("--variant", help="hw-truncation, kip-101, kip-279, kip-320, current")
    check.add_argument("--config", metavar="FILE.properties", help="Kafka-style config file")
    for flag, metavar, what in (
        ("--brokers", "N", "brokers (= replication factor), default 3"),
        ("--partitions", "N", "partitions, default 1"),
        ("--records", "N", "max records written, default 2"),
        ("--epochs", "N", "max leader epochs, default 2"),
        ("--crashes", "N", "max broker crashes, default 0"),
        ("--log-size", "N", "tla-compat only: LogSize, default 2"),
        ("--min-isr", "N", "min.insync.replicas, default 1"),
    ):
        check.add_argument(flag, type=int, metavar=metavar, help=what)
    check.add_argument("--acks", choices=("0", "1", "all", "-1"))
    check.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=None,
                       help="unclean.leader.election.enable (default off)")
    check.add_argument("--invariant", action="append", metavar="NAME", help="check only these")
    check.add_argument("--no-invariants", action="store_true", help="explore without checking")
    check.add_argument("--no-symmetry", action="store_true")
    check.add_argument("--workers", type=int, default=1)
    check.add_argument("--max-states", type=int, metavar="N")
    check.add_argument("--max-depth", type=int, metavar="N")
    check.add_argument("--simulate", action="store_true", help="random walks instead of BFS")
    check.add_argument("--seed", type=int)
    check.add_argument("--depth", type=int, default=50, help="simulation: steps per trace")
    check.add_argument("--traces", type=int, default=100, help="simulation: number of traces")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    check.add_argument("--itf", metavar="FILE", help="write the counterexample as an ITF trace")
    check.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    check.set_defaults(func=_cmd_check)

    fuzz = sub.add_parser("fuzz", help="Hypothesis random walks of the spec, shrunk counterexamples",
                          description="Exit 0: no violation found; 1: a violation (written as a "
                          "scenario transcript); 2: bad usage.")
    fuzz.add_argument("--examples", type=int, default=100, help="number of runs")
    fuzz.add_argument("--steps", type=int, default=50, help="max steps per run")
    fuzz.add_argument("--seed", type=int)
    fuzz.add_argument("--out", metavar="FILE", help="where to write the transcript")
    fuzz.add_argument("--variant")
    fuzz.add_argument("--config", metavar="FILE.properties")
    for flag in ("--brokers", "--partitions", "--records", "--epochs", "--crashes", "--min-isr"):
        fuzz.add_argument(flag, type=int, metavar="N")
    fuzz.add_argument("--acks", choices=("0", "1", "all", "-1"))
    fuzz.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=None)
    fuzz.add_argument("--invariant", action="append", metavar="NAME")
    fuzz.set_defaults(func=_cmd_fuzz, no_invariants=False)

    # Later jobs live in their own modules `isrlab/cmd_*.py`, each with
    # `register(sub, usage_error)` that adds its parser and sets `func`.
    import importlib
    import pkgutil

    import isrlab

    for module in sorted(m.name for m in pkgutil.iter_modules(isrlab.__path__)):
        if module.startswith("cmd_"):
            importlib.import_module(f"isrlab.{module}").register(sub, _UsageError)

    demo = sub.add_parser("demo", help="the main job on embedded defaults")
    demo.set_defaults(func=lambda args: __import__("isrlab.demo", fromlist=["main"]).main())
    return parser



def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("isrlab: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
