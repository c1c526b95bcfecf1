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
            print(f"{path}: {result.blocks} blocks match")
    return status


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
