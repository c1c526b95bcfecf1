"""`isrlab analyze`: the Spark analysis of a trace corpus (pyspark_harness), as a subcommand.

Nothing Spark is imported until the command runs, so `isrlab --help` stays fast.
"""

from __future__ import annotations

import argparse
import os

from isrlab.options import UsageError, add_quiet_option, output_dir, progress, shown_path
from vocab.properties import not_regular


def register(sub) -> None:
    """Add the `analyze` parser to the `isrlab` subcommands."""
    from pyspark_harness.main import __doc__ as description
    from pyspark_harness.main import add_arguments

    parser = sub.add_parser(
        "analyze", help="Spark analysis of trace files: Parquet, tables, plots, a report",
        description=description.split("\n\n")[0] + " Exit 0: report written; 1: anomaly "
        "counts disagree with a run's own summary; 2: bad input or usage.")
    add_arguments(parser)
    add_quiet_option(parser)
    parser.set_defaults(func=run, error_prefix="isrlab analyze")


def run(args: argparse.Namespace) -> int:
    """Run the analysis (pyspark_harness.main.run) and return its exit code."""
    from pyspark_harness.main import run as analyze

    _check_paths(args)
    return analyze(args, lambda what: progress(args, what))


def _check_paths(args: argparse.Namespace) -> None:
    """Refuse, before Spark starts, a TRACES path that is neither a regular file nor a
    directory (a FIFO or a device would never end) and an --out that cannot be written."""
    for path in args.traces:
        try:
            what = not_regular(os.stat(path).st_mode)
        except OSError as error:
            raise UsageError(f"TRACES: {shown_path(path)}: {error.strerror}") from None
        if what and what != "a directory":
            raise UsageError(f"TRACES: {shown_path(path)} is {what}, not a trace file or "
                             "directory")
    output_dir("--out", os.path.abspath(args.out))
