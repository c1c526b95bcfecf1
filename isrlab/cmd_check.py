"""`isrlab check`: exhaustively check the invariants of a model (or random walks of it).

By default the invariants the configuration promises (spec.promises) are checked, and those
it does not are listed; one named with --invariant is checked, and its violation is reported
as the configuration's trade-off. Exit 0: every promised invariant holds within the bounds (a
trade-off shown included); 1: a promised invariant is violated (shortest counterexample); 2:
bad usage; 3: stopped at --max-states.
"""

from __future__ import annotations

import argparse
import json
import sys

from isrlab.options import (
    SEED,
    SMALL,
    UsageError,
    absolute_path,
    add_expiries_option,
    add_model_options,
    add_quiet_option,
    integer,
    invariant_names,
    kafka_config,
    output_file,
    progress,
    workers_or_auto,
    write_output,
)


def register(sub) -> None:
    from model_check.explore.explorer import SIM_BIASES

    check = sub.add_parser("check", help="exhaustively check the invariants of a model",
                           description="Checks the invariants the configuration promises "
                           "(or those named by --invariant). Exit 0: every promised invariant "
                           "holds within the bounds (a violation of one not promised is shown as "
                           "the configuration's trade-off); 1: a promised invariant is violated "
                           "(shortest counterexample); 2: bad usage; 3: stopped at --max-states.")
    check.add_argument("--model", choices=("kafka", "tla-compat"), default="kafka")
    add_model_options(check)
    for flag, kind, what in (
        ("--brokers", SMALL, "brokers, default 3"),
        ("--partitions", SMALL, "partitions, default 1"),
        ("--replication-factor", SMALL, "replicas per partition, default: every broker"),
        ("--records", integer(1, 1000), "max records written, default 2"),
        ("--epochs", integer(1, 1000), "max leader epochs, default 2"),
        ("--crashes", integer(0, 1000), "max broker crashes, default 0"),
        ("--controller-failovers", integer(0, 1000),
         "max controller failovers, default 0 (0: a controller that never fails)"),
        ("--log-size", integer(1, 1000), "tla-compat only: LogSize, default 2"),
        ("--min-isr", SMALL, "min.insync.replicas, default 1"),
    ):
        check.add_argument(flag, type=kind, metavar="N", help=what)
    add_expiries_option(check)
    check.add_argument("--invariant", action="append", metavar="NAME",
                       help="check only these, promised by the configuration or not")
    check.add_argument("--no-invariants", action="store_true", help="explore without checking")
    check.add_argument("--no-symmetry", action="store_true")
    check.add_argument("--workers", type=workers_or_auto, default="auto",
                       help="worker processes (at most 4 per core), or auto (the default): one "
                       "process, and all cores (at most 4) from the first level of 2,000 "
                       "states; the same counts and trace whichever")
    check.add_argument("--por", action="store_true",
                       help="partial-order reduction: the same states, fewer transitions "
                       "computed (kafka model, one partition)")
    check.add_argument("--spec-states", action="store_true",
                       help="search the spec's own (dataclass) states instead of the flat "
                       "encoding of the same model: the same counts, 2-3x slower (the flat "
                       "one covers one partition on every broker, without controller "
                       "failover, ELR or async ISR changes; elsewhere the spec's are used); "
                       "--simulate too")
    check.add_argument("--max-states", type=integer(1), metavar="N")
    check.add_argument("--max-depth", type=integer(1), metavar="N")
    search = check.add_mutually_exclusive_group()
    search.add_argument("--simulate", action="store_true", help="random walks instead of BFS")
    search.add_argument("--guided", action="store_true",
                        help="best-first search towards states where invariant-relevant "
                        "features hold (kafka model; finds deep bugs BFS cannot reach, "
                        "not the shortest counterexample)")
    check.add_argument("--bias", choices=SIM_BIASES, default="uniform",
                       help="simulation: how a walk picks its next action; rare: action kinds "
                       "taken less often so far are favoured (default uniform)")
    check.add_argument("--seed", type=SEED)
    check.add_argument("--depth", type=integer(1, 10**6), default=50,
                       help="simulation: steps per trace")
    check.add_argument("--traces", type=integer(1), default=100,
                       help="simulation: number of traces")
    check.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_option(check)
    check.add_argument("--itf", type=absolute_path, metavar="FILE",
                       help="write the counterexample as an ITF trace")
    check.add_argument("--junit", type=absolute_path, metavar="FILE",
                       help="write a JUnit XML report")
    check.add_argument("--html", type=absolute_path, metavar="FILE",
                       help="write the counterexample as a space-time view (one HTML file: a "
                       "lane per process, messages as arrows, per step the fields that changed)")
    check.add_argument("--mermaid", type=absolute_path, metavar="FILE",
                       help="write the counterexample as a Mermaid sequence diagram")
    check.add_argument("--drive", action="store_true", help="drive the counterexample through "
                       "the reference broker of the same variant (as isrlab drive)")
    check.set_defaults(func=run, error_prefix="isrlab check")


# Settings of the kafka model that the tla-compat model does not have: refused, not ignored.
_KAFKA_ONLY = (("partitions", "--partitions"), ("crashes", "--crashes"), ("acks", "--acks"),
               ("expiries", "--expiries"), ("controller_failovers", "--controller-failovers"),
               ("min_isr", "--min-isr"), ("unclean", "--unclean"), ("config", "--config"),
               ("elr", "--elr"), ("last_known_leader", "--last-known-leader"),
               ("replication_factor", "--replication-factor"))


def build_model(args: argparse.Namespace):
    """(model, variant name, invariant names) for `--model kafka` or `--model tla-compat`."""
    from spec import INVARIANTS

    if args.model == "kafka":
        from model_check.explore.model import KafkaModel

        if args.log_size is not None:
            raise UsageError("--log-size: only the tla-compat model has it (use --records)")
        from spec.promises import promised

        config = kafka_config(args)
        names = invariant_names(args, list(INVARIANTS), promised(config))
        return KafkaModel(config, names), config.variant.name, names
    from model_check.explore.tla_compat import ALL_INVARIANTS, DEFAULT_INVARIANTS, TlaCompatModel

    for dest, flag in _KAFKA_ONLY:
        if getattr(args, dest) is not None:
            raise UsageError(f"{flag}: the tla-compat model has no such setting")
    variant = args.variant or "kip-320"
    if variant not in ("hw-truncation", "kip-101", "kip-279", "kip-320"):
        raise UsageError(f"--variant: the tla-compat model has hw-truncation, kip-101, kip-279, "
                         f"kip-320, not {variant!r}")
    names = invariant_names(args, list(ALL_INVARIANTS), list(DEFAULT_INVARIANTS))
    model = TlaCompatModel(
        variant,
        brokers=3 if args.brokers is None else args.brokers,
        log_size=2 if args.log_size is None else args.log_size,
        records=2 if args.records is None else args.records,
        epochs=2 if args.epochs is None else args.epochs,
        invariants=names,
    )
    return model, variant, names


def _search(args: argparse.Namespace, model, names: list[str], run, **options):
    """`run` (explore or simulate) on `model`; the kafka model's search goes through
    model_check.explore.flat (the flat encoding where it covers the config) unless --spec-states, or
    --por, which reads the spec's candidates."""
    if args.model != "kafka" or args.por:
        return run(model, **options)
    from model_check.explore.flat import search

    return search(model.config, names, run=run, spec_states=args.spec_states, **options)


def run(args: argparse.Namespace) -> int:
    from model_check.explore.explorer import explore, simulate
    from model_check.explore.progress import search_progress
    from model_check.explore.report import (
        counterexample_table,
        exit_code,
        itf_trace,
        junit_xml,
        result_json,
        summary,
        unchecked,
    )

    # Refused before the work, in run (not by an argparse type) so that `main` returns 2.
    for flag, path in (("--itf", args.itf), ("--junit", args.junit), ("--html", args.html),
                       ("--mermaid", args.mermaid)):
        output_file(flag, path)
    if args.drive and args.model != "kafka":
        raise UsageError("--drive: only the kafka model's counterexamples can be driven")
    model, variant, names = build_model(args)
    # A search by default leaves out, and names, the invariants not promised.
    not_checked = [] if args.invariant or args.no_invariants else unchecked(model, names)
    reduction = None
    if args.por:
        from model_check.prove.por import Reduction, problem

        if args.model != "kafka" or args.guided or args.simulate:
            raise UsageError("--por: only the kafka model's breadth-first search")
        why = problem(model.config)
        if why is not None:
            raise UsageError(f"--por: {why}")
        reduction = Reduction(model.config)
    if args.guided:
        from model_check.explore.guided import guided_search

        if args.model != "kafka":
            raise UsageError("--guided: only the kafka model")
        result = guided_search(model, max_states=args.max_states,
                               check_invariants=bool(names))
    elif args.simulate:
        seed = args.seed if args.seed is not None else 0
        print(f"simulation seed {seed}", file=sys.stderr)
        result = _search(args, model, names, simulate, seed=seed, depth=args.depth,
                         traces=args.traces, check_invariants=bool(names), bias=args.bias)
    else:
        with progress(args, "states", total=args.max_states) as shown:
            result = _search(args, model, names, explore, max_states=args.max_states,
                             max_depth=args.max_depth, workers=args.workers,
                             symmetry=not args.no_symmetry, check_invariants=bool(names),
                             progress=search_progress(shown), reduction=reduction)
    # The files are written after the result is printed: a failed write (a full disk) costs
    # the file, not the search's outcome.
    outputs = []
    if args.itf and result.violation:
        outputs.append(("--itf", args.itf, lambda: json.dumps(itf_trace(model, result), indent=1)))
    if args.junit:
        outputs.append(("--junit", args.junit,
                        lambda: junit_xml(model, variant, result, names, not_checked)))
    if (args.html or args.mermaid) and result.violation:
        from model_check.explore.spacetime import timeline, to_html, to_mermaid

        view = timeline(model, result, f"{variant}: {result.violation.invariant} after "
                        f"{len(result.violation.trace) - 1} steps")
        for flag, path, render in (("--html", args.html, to_html),
                                   ("--mermaid", args.mermaid, to_mermaid)):
            if path:
                outputs.append((flag, path, lambda render=render: render(view)))
    body = result_json(model, variant, result, not_checked)
    driven = None
    if args.drive and result.violation:
        from isrlab.cmd_drive import drive

        driven = drive(body["config"], [(s["action"], s["args"])
                                        for s in body["violation"]["trace"] if s.get("action")])
    if args.json:
        if driven is not None:
            body["drive"] = driven.to_json()
        print(json.dumps(body, sort_keys=True))
    else:
        if result.violation:
            print(counterexample_table(model, result))
            print()
        print(summary(model, variant, result, not_checked))
        if driven is not None:
            print()
            print(driven.render("the counterexample", verbose=False))
    sys.stdout.flush()
    for flag, path, text in outputs:
        write_output(flag, path, text())
    return exit_code(model, result)
