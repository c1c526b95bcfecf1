"""`isrlab scenario FILE...`: replay scenario transcripts against the spec.

Exit 0 when every block matches, 1 when one differs (the diff is printed), 2 for a malformed
transcript.
"""

from __future__ import annotations

import argparse
import os
import sys

from isrlab.options import MAX_INPUT_BYTES, output_file, write_output
from vocab.properties import not_regular


def register(sub) -> None:
    p = sub.add_parser("scenario", help="replay scenario transcripts against the spec")
    p.add_argument("files", nargs="+", metavar="FILE", )
    p.add_argument("--rewrite", action="store_true", help="regenerate the expectations")
    p.add_argument("-v", "--verbose", action="store_true",
                   help="print the transcript when it matches")
    p.set_defaults(func=run, error_prefix="isrlab scenario")


def run(args: argparse.Namespace) -> int:
    from model_check.explore.scenario import ScenarioError, diff, run_text

    # Every file is checked before any is run: stat before open, so that a FIFO or a device
    # is refused, not read for ever.
    for path in args.files:
        why = _unreadable(path)
        if why:
            print(f"{path}:0: {why}", file=sys.stderr)
            return 2
        if args.rewrite:  # written back
            output_file("FILE", path)
    status = 0
    for path in args.files:
        try:
            text = _read(path)
            result = run_text(text, path)
        except ScenarioError as error:
            print(error, file=sys.stderr)
            return 2
        if args.rewrite:
            if result.rewritten != text:  # whole or not at all: a full disk keeps the old one
                write_output("FILE", path, result.rewritten)
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
                print(text, end="")
            # Show where the transcript expects each violation: the step and the invariant.
            for block in result.blocks_run:
                for line in block.expected:
                    if line.startswith("VIOLATED"):
                        print(f"{path}:{block.line}: after `{block.command}`: {line}")
            print(f"{path}: {result.blocks} blocks match")
    return status


def _read(path: str) -> str:
    """A transcript's text, read from the open file under the same checks (a file swapped
    for a FIFO since it was checked is refused too)."""
    from model_check.explore.scenario import ScenarioError

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            what = not_regular(st.st_mode)
            if what:
                raise ScenarioError(f"{path}:0: {what}, not a transcript")
            data = handle.read(MAX_INPUT_BYTES + 1)
    except OSError as error:
        raise ScenarioError(f"{path}:0: cannot read: {error.strerror}") from None
    if len(data) > MAX_INPUT_BYTES:
        raise ScenarioError(f"{path}:0: more than the {MAX_INPUT_BYTES} bytes a transcript "
                            "may have")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}:0: not UTF-8 text") from None


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
