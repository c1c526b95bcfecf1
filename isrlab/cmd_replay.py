"""`isrlab replay TRACE_DIR_OR_FILES...`: check a reference-broker run against the spec.

The spec that judges the run is the user's: the run's variant, with the rules `--without`
names switched off. A run whose headers claim it was run without some rules (a planted bug's,
`spec_rules_off`) is still judged by the full variant unless `--without` names the same rules;
a claim that differs from them is reported and the run is refused. The run's run.json is
required (`--no-run-json` replays a run that has none, and says what that leaves unchecked).

Exit 0 when every event is accepted and every invariant the run's configuration promises
(spec.promises) holds in the replayed state (one it does not promise is reported as its
trade-off); 1 at the first divergence (the report names the event, the guard or the fields that
differ, the last accepted events, and how to reproduce the run), when a promised invariant is
violated, or when the run is refused (rules claimed other than those judged by, traces cut
short); 2 for an unreadable trace or run.json, or an output file that cannot be written.
"""

from __future__ import annotations

import json
import sys

from isrlab.options import absolute_path


def _kafka_run(path: str) -> bool:
    """Whether `path` is the directory of an `isrlab cluster kafka` run."""
    from pathlib import Path

    from isrlab.options import input_problem

    marker = Path(path) / "kafka.json"
    if not marker.exists() or input_problem(str(marker)):
        return False  # a FIFO or a device of that name is not read (nor is it a Kafka run)
    try:
        info = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("target") == "kafka"


def run(args) -> int:
    from isrlab.options import UsageError, output_file
    from model_check.conformance.replay import TraceError, format_result, replay_paths

    window = None
    try:
        output_file("--html", args.html)  # its directory, writability, no device, no /proc
        if args.window is not None:
            window = _window(args.window)
        rules_off = _rules(args.without or [])
    except UsageError as error:
        print(f"isrlab replay: error: {error}", file=sys.stderr)
        return 2
    kafka = [t for t in args.traces if _kafka_run(t)]
    if kafka:
        print(f"isrlab replay: error: {kafka[0]}: a run of Apache Kafka has no broker traces to "
              "replay (its client histories are checked by the run: isrlab campaign "
              "--target kafka)", file=sys.stderr)
        return 2
    try:
        result = replay_paths(args.traces, check_invariants=not args.no_invariants,
                              rules_off=rules_off, run_json_required=not args.no_run_json)
        if args.html:
            _write_html(args, result, window)
    except (TraceError, UsageError) as error:  # UsageError: --html could not be written
        print(f"isrlab replay: error: {error}", file=sys.stderr)
        return 2
    if result.unchecked:
        print(f"isrlab replay: without run.json, not checked: {'; '.join(result.unchecked)}",
              file=sys.stderr)
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True))
    else:
        print(format_result(result))
    return 1 if result.failed else 0


def _rules(names: list[str]) -> tuple[str, ...]:
    """`--without` rules, each a switchable rule of the spec."""
    from isrlab.options import UsageError
    from vocab.config import SWITCHABLE_RULES

    for rule in names:
        if rule not in SWITCHABLE_RULES:
            raise UsageError(f"--without: unknown rule {rule!r} (known: "
                             f"{', '.join(SWITCHABLE_RULES)})")
    return tuple(sorted(set(names)))


# Lines shown around a divergence, and from the start of an accepted run, without --window.
AROUND_DIVERGENCE, FIRST_LINES = 40, 150


def _window(text: str) -> tuple[int, int]:
    from isrlab.options import UsageError

    try:
        start, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise UsageError(f"--window {text!r}: expected FROM_MS:TO_MS, e.g. 2000:2600") from None
    if not 0 <= start <= end:
        raise UsageError(f"--window {text!r}: FROM_MS must be >= 0 and <= TO_MS")
    return start, end


def _write_html(args, result, window) -> None:
    """The run's lines in `window` (ms), or around the divergence, as a space-time view."""
    from isrlab.options import write_output
    from model_check.conformance.replay import load_run, merge
    from model_check.explore.spacetime import run_timeline, to_html

    order = [e for e in merge(load_run(args.traces, run_json_required=not args.no_run_json))
             if e.kind != "header"]
    d = result.divergence
    if window is not None:
        lines = [e for e in order if window[0] <= e.time_ms <= window[1]]
        what = f"{window[0]}-{window[1]} ms"
    elif d is not None:
        at = next(i for i, e in enumerate(order) if e.where == d.event.where)
        lines = order[max(0, at - AROUND_DIVERGENCE):at + 1]
        what = f"the {len(lines)} lines up to the divergence"
    else:
        lines = order[:FIRST_LINES]
        what = f"the first {len(lines)} lines"
    verdict = (f"divergence at {d.event.where}: {d.reason}" if d is not None
               else f"accepted: {result.events:,} events")
    view = run_timeline(lines, f"{result.command or 'run'}: {what}", verdict)
    write_output("--html", args.html, to_html(view))


def register(sub) -> None:
    from vocab.config import SWITCHABLE_RULES

    p = sub.add_parser("replay", help="check a run's traces against the spec",
                       description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", metavar="TRACE_DIR_OR_FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-invariants", action="store_true",
                   help="skip checking the spec's invariants on the replayed state")
    p.add_argument("--html", type=absolute_path, metavar="FILE",
                   help="write a space-time view of the run: the lines up to a divergence, "
                   "the first ones of an accepted run, or those in --window")
    p.add_argument("--window", metavar="FROM_MS:TO_MS",
                   help="with --html: the lines whose time is in this range (ms)")
    p.add_argument("--without", action="append", metavar="RULE",
                   help="judge the run by the variant with this rule switched off (repeatable; "
                   "a planted bug's run is judged so only when its header claims the same "
                   "rules): " + ", ".join(SWITCHABLE_RULES))
    p.add_argument("--no-run-json", action="store_true",
                   help="do not require the run's run.json (for a run that has none: its "
                   "counts and final logs are then not checked)")
    p.set_defaults(func=run)
