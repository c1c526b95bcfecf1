"""`isrlab replay TRACE_DIR_OR_FILES...`: check a reference-broker run against the spec.

Exit 0 when every event is accepted, 1 at the first divergence (the report names the event,
the guard or the fields that differ, the last accepted events, and how to reproduce the run),
2 for an unreadable trace.
"""

from __future__ import annotations

import json
import sys


def run(args) -> int:
    from model_check.replay import TraceError, format_result, replay_paths

    try:
        result = replay_paths(args.traces, check_invariants=not args.no_invariants)
    except TraceError as error:
        print(f"isrlab replay: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result.to_json(), sort_keys=True))
    else:
        print(format_result(result))
    return 0 if result.verdict == "accepted" else 1


def register(sub) -> None:
    p = sub.add_parser("replay", help="check a run's traces against the spec",
                       description=__doc__.splitlines()[0])
    p.add_argument("traces", nargs="+", metavar="TRACE_DIR_OR_FILE")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--no-invariants", action="store_true",
                   help="skip checking the spec's invariants on the replayed state")
    p.set_defaults(func=run)
