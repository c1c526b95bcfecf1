"""`isrlab prove`: bounded model checking and inductive proofs with Z3 (model_check.prove.engine).

Exit codes: 0 proved (or no violation within K steps), 1 a violation or a CTI classified
reachable, 2 bad usage, 3 unknown or a CTI classified unreachable (the output says which).

Defaults differ by mode, both printed in the output's config: BMC runs at the explorer's small
bounds (2 brokers, 1 record, 2 leader epochs, 1 crash), where its shortest counterexamples are
pinned; induction runs at 3 brokers with every exploration bound lifted.
"""

from __future__ import annotations

import argparse
import json
import sys

from isrlab.options import (
    SEED,
    WORKERS,
    UsageError,
    absolute_path,
    add_expiries_option,
    add_model_options,
    add_quiet_option,
    input_file,
    integer,
    kafka_config,
    output_file,
    progress,
    read_input,
    write_output,
)

BMC_DEFAULTS = dict(brokers=2, max_records=1, max_leader_epochs=2, max_crashes=1)
INDUCTION_DEFAULTS = dict(brokers=3)


def register(sub) -> None:
    """Add the `prove` subcommand to the isrlab parser."""
    p = sub.add_parser(
        "prove", help="Z3: bounded model checking (--bmc K) or induction (--induction)",
        description="Exit 0: proved / no violation within K steps; 1: a violation or a CTI "
        "classified reachable; 2: bad usage; 3: unknown, or a CTI classified unreachable "
        "(unreachable within the bounds searched: the invariant needs strengthening, or a "
        "longer run reaches it).")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--bmc", type=integer(0, 1000), metavar="K",
                      help="search K steps for a violation")
    mode.add_argument("--induction", action="store_true", help="prove the invariants inductive")
    add_model_options(p)
    for flag, what in (
        ("--brokers", "brokers (BMC default 2, induction default 3)"),
        ("--records", "max records written (BMC; default 1)"),
        ("--epochs", "max leader epochs (BMC; default 2)"),
        ("--crashes", "max broker crashes (BMC; default 1)"),
        ("--min-isr", "min.insync.replicas, default 1"),
        ("--flush", "log.flush.interval.messages, default never"),
        ("--cache-slots", "induction: leader-epoch cache entries represented, default 3"),
    ):
        p.add_argument(flag, type=integer(1, 64) if flag != "--crashes" else integer(0, 64),
                       metavar="N", help=what)
    add_expiries_option(p)
    p.add_argument("--invariant", action="append", metavar="NAME",
                   help="check only these (repeatable); induction default: NoCommittedDataLoss, "
                   "LogMatching, HighWatermarkBelowLogEnd")
    p.add_argument("--lemma", action="append", metavar="NAME",
                   help="induction: strengthening lemmas (repeatable; default: what the "
                   "invariants' proofs use, and for the data invariants the proved invariants "
                   "and the structural, history and values layers, with the data layer for "
                   "current: docs/prove.md)")
    p.add_argument("--add-lemma", action="append", metavar="NAME",
                   help="induction: add these to the lemmas (repeatable); `answers`, "
                   "`snapshots` and `delivered` add those opt-in layers (docs/prove.md, "
                   "\"Answers in flight\", \"Snapshots\" and \"Delivered writes\")")
    p.add_argument("--no-lemmas", action="store_true", help="induction: no lemmas")
    # The induction defaults' whole graph at 3 brokers (2,031,731 states for `current`) fits,
    # so a CTI found there is classified, not left at the cap (about 70 s on the flat encoding).
    p.add_argument("--max-states", type=integer(1), default=2_500_000,
                   help="explorer bound when classifying a CTI (default 2,500,000)")
    p.add_argument("--workers", type=WORKERS, default=1, metavar="N",
                   help="BMC: ask depths in N processes (same result as 1)")
    p.add_argument("--houdini", action="store_true",
                   help="induction: infer more lemmas (Houdini over a grammar of candidates, "
                   "filtered by reachable states; docs/prove.md), then check them all")
    p.add_argument("--lemmas-file", type=input_file(), metavar="FILE.json",
                   help="induction: check these inferred lemmas (a JSON list of names, as "
                   "--save-lemmas writes) instead of searching")
    p.add_argument("--save-lemmas", type=absolute_path, metavar="FILE.json",
                   help="--houdini: write the inferred lemmas' names here")
    p.add_argument("--seed", type=SEED, default=1,
                   help="--houdini: seed of the random runs that filter candidates")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_option(p)
    p.set_defaults(func=run, error_prefix="isrlab prove")


def _config(args: argparse.Namespace):
    from model_check.explore.model import core_problem
    from spec import Config

    defaults = BMC_DEFAULTS if args.bmc is not None else INDUCTION_DEFAULTS
    config = kafka_config(args, base=Config().replace(**defaults))
    why = core_problem(config, kip966=True)
    if why is not None:
        # (the encoding also takes replica j of the partition to be broker j)
        raise UsageError(f"{why}: not in the symbolic encoding yet (use isrlab check)")
    return config


def run(args: argparse.Namespace) -> int:
    """Run BMC or induction; print a summary or one JSON object; return the exit code."""
    from model_check.prove import engine as prove
    from model_check.prove.lemmas import LAYERS, LEMMAS, proof_lemmas
    from model_check.prove.symbolic import VIOLATIONS, NotRepresentable
    from spec import INVARIANTS

    if args.bmc is None and not args.induction:
        raise UsageError("prove: choose --bmc K or --induction")
    output_file("--save-lemmas", args.save_lemmas)
    if args.workers < 1:
        raise UsageError("--workers: must be >= 1")
    config = _config(args)
    for name in args.invariant or []:
        if name not in INVARIANTS:
            raise UsageError(f"--invariant: unknown invariant {name!r} "
                             f"(known: {', '.join(INVARIANTS)})")
        if name not in VIOLATIONS:
            raise UsageError(f"--invariant: {name} is not in the symbolic encoding yet "
                             f"(it has {', '.join(VIOLATIONS)})")
    for flag, names in (("--lemma", args.lemma), ("--add-lemma", args.add_lemma)):
        for name in names or []:
            if name not in LEMMAS and not (flag == "--add-lemma" and name in LAYERS):
                raise UsageError(f"{flag}: unknown lemma {name!r} (known: {', '.join(LEMMAS)})")
    inferred = args.houdini or args.lemmas_file is not None
    if inferred and not args.induction:
        raise UsageError("--houdini and --lemmas-file go with --induction")
    if args.save_lemmas is not None and not args.houdini:
        raise UsageError("--save-lemmas goes with --houdini")
    found = _lemmas_file(args.lemmas_file, config.brokers) if args.lemmas_file else None
    invariants = args.invariant or list(prove.TARGETS)
    lemmas = [] if args.no_lemmas else (args.lemma or proof_lemmas(invariants, config))
    added = [x for name in args.add_lemma or [] for x in LAYERS.get(name, (name,))]
    lemmas = list(dict.fromkeys([*lemmas, *added]))
    inferred_names = None  # written after the outcome is printed, which a failed write keeps
    try:
        if args.bmc is not None:
            with progress(args, "BMC depths", total=args.bmc + 1) as shown:
                outcome = prove.bmc(config, args.bmc, args.invariant, workers=args.workers,
                                    progress=shown.update)
        elif inferred:
            from model_check.prove import houdini

            outcome, search = houdini.prove(
                config, invariants, lemmas, found, cache_slots=args.cache_slots or 3,
                seed=args.seed, log=None if args.json or args.quiet else _progress,
                classify_states=args.max_states)
            if search is not None:
                inferred_names = [c.name for c in search.lemmas]
        else:
            with progress(args, "induction: action instances asked") as shown:
                outcome = prove.induction(config, invariants, lemmas,
                                          classify_states=args.max_states,
                                          cache_slots=args.cache_slots or 3,
                                          progress=shown.update)
    except NotRepresentable as error:
        print(f"isrlab: {error}", file=sys.stderr)
        return 3
    if args.json:
        print(json.dumps(prove.to_json(outcome, config), sort_keys=True))
    else:
        print(prove.summary(outcome, config))
    if args.save_lemmas is not None and inferred_names is not None:
        sys.stdout.flush()
        _write_lemmas(args.save_lemmas, inferred_names)
    if outcome.result == "cti":
        reachable = outcome.cti is not None and outcome.cti.classification == "reachable"
        return 1 if reachable else 3
    return {"proved": 0, "violation": 1, "unknown": 3}[outcome.result]


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _lemmas_file(path: str, brokers: int):
    """The candidates a --lemmas-file names; one error line when it is not such a file."""
    from model_check.prove import houdini

    try:
        names = json.loads(read_input("--lemmas-file", path))
    except ValueError as error:
        raise UsageError(f"--lemmas-file {path}: not JSON ({error})") from None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise UsageError(f"--lemmas-file {path}: expected a JSON list of lemma names")
    try:
        return houdini.by_name(brokers, names)
    except ValueError as error:
        raise UsageError(f"--lemmas-file {path}: {error}") from None


def _write_lemmas(path: str, names: list[str]) -> None:
    write_output("--save-lemmas", path, json.dumps(names, indent=1) + "\n")
