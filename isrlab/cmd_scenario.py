"""`isrlab scenario FILE...`: replay scenario transcripts against the spec.

Exit 0 when every block matches, 1 when one differs (the diff is printed), 2 for a malformed
transcript.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from isrlab.options import MAX_INPUT_BYTES, OutputError, output_file, shown_path
from vocab.properties import not_regular


def register(sub) -> None:
    p = sub.add_parser("scenario", help="replay scenario transcripts against the spec")
    p.add_argument("files", nargs="+", metavar="FILE", )
    p.add_argument("--rewrite", action="store_true", help="regenerate the expectations")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the transcript when it matches")
    p.set_defaults(func=run, error_prefix="isrlab scenario")


def run(args: argparse.Namespace) -> int:
    from model_check.explore.scenario import ScenarioError, diff, run_file

    # Every file is checked before any is run: stat before open, so that a FIFO or a device
    # is refused, not read for ever.
    for path in args.files:
        why = _unreadable(path)
        if why:
            print(f"{path}:0: {why}", file=sys.stderr)
            return 2
        if args.rewrite:  # written back
            output_file(shown_path(path), path)
    status = 0
    for path in args.files:
        try:
            result = run_file(path, rewrite=args.rewrite)
        except ScenarioError as error:
            print(error, file=sys.stderr)
            return 2
        except OSError as error:  # only a rewrite writes (a full disk, say)
            raise OutputError(f"{shown_path(path)}: cannot rewrite: {error.strerror}") from None
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


def _unreadable(path: str) -> str | None:
    """Why `path` is not a transcript to read (None when it may be one)."""
    try:
        st = os.stat(path)
    except OSError as error:
        return f"cannot read: {error.strerror}"
    what = not_regular(st.st_mode)
    if what:
        return f"{what}, not a transcript"
    if st.st_size > MAX_INPUT_BYTES:
        return f"{st.st_size} bytes, more than the {MAX_INPUT_BYTES} a transcript may have"
    return None
