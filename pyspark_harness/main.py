"""`analyze`: trace files -> Parquet -> report directory. The one entry point of the harness.

The same arguments and exit codes everywhere:

    isrlab analyze TRACES... --out REPORT_DIR             (isrlab/cmd_analyze.py)
    python -m pyspark_harness.main TRACES... --out REPORT_DIR
    spark-submit --py-files harness.zip pyspark_harness/main.py TRACES... --out REPORT_DIR

Exit codes: 0 the report was written; 1 a finding: Spark's anomaly counts disagree with a
run's own summary (result.json/run.json); 2 bad input or usage (one line, no traceback).
Malformed trace lines are not an error: they are counted, shown and kept in the report.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time


class UsageError(Exception):
    """Bad input or flags, reported as one line and exit code 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The analyze flags, shared by `isrlab analyze` and `python -m pyspark_harness.main`."""
    parser.add_argument("traces", nargs="+", metavar="TRACES",
                        help="NDJSON trace files or directories (searched for *.ndjson)")
    parser.add_argument("--out", required=True, metavar="REPORT_DIR",
                        help="report directory (index.md, PNG plots, tables/, parquet/)")
    parser.add_argument("--master", default=None,
                        help="Spark master (default local[2]; under spark-submit, its own)")
    parser.add_argument("--runs-from", choices=("campaign",), default=None,
                        help="TRACES are campaign directories: read CAMPAIGN_DIR/run-*/")
    parser.add_argument("--run", metavar="RUN_ID", help="the run of the ISR-over-time plot")
    parser.add_argument("--from-parquet", action="store_true",
                        help="TRACES is a dataset written by an earlier analyze (REPORT_DIR/"
                        "dataset): skip ingestion")
    parser.add_argument("--replay", action="store_true",
                        help="replay every run against the spec inside Spark")
    parser.add_argument("--replay-fn", metavar="MODULE:FUNCTION",
                        default="model_check.conformance.replay:replay_events",
                        help="the replay function, FUNCTION(run_id, events) -> dict(verdict, "
                        "events, detail) (default %(default)s)")
    parser.add_argument("--no-raw", action="store_true",
                        help="do not keep each event's JSON text (smaller; replay then sees "
                        "only the fields of the schema)")


# What each run's configuration does not promise, decided by spec.promises; named, as the
# replay function is, so that the harness itself imports nothing of the checkers.
GIVEN_UP_FN = "model_check.conformance.replay:given_up_of"


def _replay_function(spec: str):
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise UsageError(f"--replay-fn: expected MODULE:FUNCTION, got {spec!r}")
    try:
        function = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as error:
        raise UsageError(f"--replay-fn: cannot load {spec}: {error}") from None
    if not callable(function):
        raise UsageError(f"--replay-fn: {spec} is not callable")
    return function


def run(args: argparse.Namespace, progress=None) -> int:
    """Ingest, analyse, write the report; print where it is. Returns the exit code.
    `progress(what)`: a progress display for each stage (a context manager with `update`)."""
    try:
        return _run(args, progress)
    except UsageError as error:
        print(f"isrlab analyze: error: {error}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, progress=None) -> int:
    from pyspark_harness.ingest import InputError, find_trace_files, ingest
    from pyspark_harness.report import analyze

    replay_fn = _replay_function(args.replay_fn) if args.replay else None
    module_name, _, name = GIVEN_UP_FN.partition(":")
    given_up = getattr(importlib.import_module(module_name), name)
    out = os.path.abspath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise UsageError(f"--out {args.out}: exists and is not a directory")
    if args.from_parquet:
        if len(args.traces) != 1 or not os.path.isdir(args.traces[0]):
            raise UsageError("--from-parquet: give one dataset directory")
        dataset, files = os.path.abspath(args.traces[0]), None
    else:
        try:
            files = find_trace_files(args.traces, campaign=args.runs_from == "campaign")
        except InputError as error:
            raise UsageError(str(error)) from None
        dataset = os.path.join(out, "dataset")
    os.makedirs(out, exist_ok=True)

    from pyspark_harness.session import get_session, master_problem
    from pyspark_harness.watch import Quiet, SparkWatch

    try:
        size = None if files is None else sum(os.path.getsize(f) for f in files)
    except OSError as error:  # a file gone since it was listed
        raise UsageError(f"{error.filename}: {error.strerror}") from None
    start = time.perf_counter()
    try:
        if master_problem(args.master):
            raise UsageError(f"--master {args.master}: {master_problem(args.master)}")
        spark = get_session(args.master, input_bytes=size)
    except Exception as error:  # noqa: BLE001 (a bad master comes back as a JVM error)
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise UsageError(f"--master {args.master}: Spark did not start: {first}") from None
    print(f"spark {spark.version} on {spark.sparkContext.master} "
          f"({time.perf_counter() - start:.1f} s to start)", file=sys.stderr)
    if files is not None:
        print(f"ingesting {len(files)} trace files ...", file=sys.stderr)
        with (progress or Quiet)("ingest: tasks") as shown, SparkWatch(spark, shown):
            result = ingest(spark, files, dataset, keep_raw=not args.no_raw)
        print(f"ingested {result.lines:,} lines from {result.files} files, {result.runs} runs, "
              f"in {result.seconds:.1f} s ({result.lines / max(result.seconds, 1e-9):,.0f} "
              f"lines/s) -> {dataset}", file=sys.stderr)
        if result.renamed:
            print(f"{len(result.renamed)} runs share a run id with another run and are kept "
                  f"apart as: {', '.join(result.renamed[:6])}", file=sys.stderr)
        if result.malformed:
            print(f"{result.malformed} malformed lines kept aside (report: Malformed lines):",
                  file=sys.stderr)
            for path, line, reason in result.malformed_examples[:5]:
                print(f"  {path}:{line}: {reason}", file=sys.stderr)
        if not result.lines_by_table.get("headers"):
            where = result.malformed_examples[0] if result.malformed_examples else None
            first = f" (first: {where[0]}:{where[1]}: {where[2]})" if where else ""
            raise UsageError(f"no usable trace in {len(files)} files: no valid header "
                             f"line{first}")
    print("analysing ...", file=sys.stderr)
    try:
        with (progress or Quiet)("analysis: tasks") as shown, SparkWatch(spark, shown):
            report = analyze(spark, dataset, out, chosen_run=args.run, replay_fn=replay_fn,
                             given_up=given_up)
    except (ValueError, InputError) as error:
        raise UsageError(str(error)) from None
    print(f"{report.runs} runs, {report.configs} configs, {report.events:,} events analysed "
          f"in {report.seconds:.1f} s")
    if report.replay_verdicts:
        verdicts = ", ".join(f"{k}: {v}" for k, v in sorted(report.replay_verdicts.items()))
        print(f"replay verdicts: {verdicts}")
    print(f"report: {report.index} (self-contained: "
          f"{os.path.join(os.path.dirname(report.index), 'index.html')})")
    if report.disagreements:
        print(f"{report.disagreements} anomaly counts disagree with the runs' own summaries "
              "(report: Cross-check)")
        return 1
    return 0


def main(argv: list[str] | None = None, progress=None) -> int:
    """`python -m pyspark_harness.main` and spark-submit's entry point."""
    parser = argparse.ArgumentParser(prog="analyze", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv), progress)


if __name__ == "__main__":
    sys.exit(main())
