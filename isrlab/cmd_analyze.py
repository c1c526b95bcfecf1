"""`isrlab analyze`: the Spark analysis of a trace corpus (pyspark_harness), as a subcommand.

Nothing Spark is imported until the command runs, so `isrlab --help` stays fast.
"""

from __future__ import annotations

import argparse

from isrlab.options import add_quiet_option, progress


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
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the analysis (pyspark_harness.main.run) and return its exit code."""
    from pyspark_harness.main import run as analyze

    return analyze(args, lambda what: progress(args, what))
