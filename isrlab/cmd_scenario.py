"""`isrlab scenario FILE...`: replay scenario transcripts against the spec.

Exit 0 when every block matches, 1 when one differs (the diff is printed), 2 for a malformed
transcript.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> None:
    p = sub.add_parser("scenario", help="replay scenario transcripts against the spec")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--rewrite", action="store_true", help="regenerate the expectations")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the transcript when it matches")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from model_check.explore.scenario import ScenarioError, diff, run_file

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
                print(Path(path).read_text(encoding="utf-8"), end="")
            # Show where the transcript expects each violation: the step and the invariant.
            for block in result.blocks_run:
                for line in block.expected:
                    if line.startswith("VIOLATED"):
                        print(f"{path}:{block.line}: after `{block.command}`: {line}")
            print(f"{path}: {result.blocks} blocks match")
    return status
