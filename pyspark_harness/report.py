"""The report: every job of `jobs` run over one ingested dataset, written as a directory.

    REPORT_DIR/index.md          the page: tables and the plots, with what each number means
    REPORT_DIR/index.html        the same page, self-contained (plots inlined)
    REPORT_DIR/*.png             lost-write rate and unavailable time per config, election
                                 latency distribution, ISR size and leaders over time (one run)
    REPORT_DIR/tables/*.csv      the small tables (one file each, written with the csv module)
    REPORT_DIR/parquet/<table>/  every table as Parquet (Spark's writer, one file each)

Everything is computed from the ingested Parquet, so the same call works on a cluster; only
the small result tables are collected to the driver for the CSV files, the page and the plots.
"""

from __future__ import annotations

import csv
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NamedTuple

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pyspark_harness import jobs as J
from pyspark_harness.ingest import local_path, read_summaries
from pyspark_harness.page import markdown_page
from pyspark_harness.session import is_local
from vocab.anomalies import LOST_WRITE, expected_kinds

MALFORMED_CSV_ROWS_MAX = 10_000


@dataclass(frozen=True, slots=True)
class Report:
    """What `analyze` wrote and the figures the CLI prints."""

    out: str
    index: str
    runs: int
    configs: int
    events: int
    malformed: int
    disagreements: int
    chosen_run: str | None
    seconds: float
    replay_verdicts: dict[str, int] = field(default_factory=dict)
    figures: tuple[str, ...] = ()


# What a run's header config (a dict) does not promise, as invariant names: the decision
# spec.promises makes, handed in by the caller (model_check.conformance.replay.given_up_of) so
# that the harness judges anomalies by it without reading the spec itself.
GivenUp = Callable[[dict], Iterable[str]]


def expected_by_config(configs: Sequence[str | None],
                       given_up: GivenUp) -> list[tuple[str | None, list[str]]]:
    """(config_json, sorted expected kinds) of each distinct config: vocab.anomalies of what
    `given_up` says its header config does not promise (a null config is read as `{}`)."""
    return [(config, sorted(expected_kinds(given_up(json.loads(config or "{}")))))
            for config in configs]


def compute(tables: J.Tables, replay_fn: J.ReplayFn | None = None,
            summaries: DataFrame | None = None,
            header_rows: list[HeaderRow] | None = None,
            final_logs: DataFrame | None = None, *,
            given_up: GivenUp) -> dict[str, DataFrame]:
    """Every result table as a DataFrame (lazy, cached), keyed by file name. `header_rows`:
    `collect_headers(tables.headers)` when the caller has it already (saves a job);
    `final_logs`: `final_logs_frame` (the runs' final logs, for `writes_lost`); `given_up`:
    see GivenUp, what splits the anomalies into expected and bad."""
    run_table = J.runs(tables.headers).cache()
    ends = J.run_ends(tables.events, tables.history, tables.nemesis, run_table).cache()
    # Scan the big tables once each: keep only the lines and columns the jobs read.
    events = J.relevant_events(tables.events).cache()
    history = J.relevant_history(tables.history).cache()
    timeline = J.with_leader_down(J.partition_timeline(
        events, ends, first=J.first_states(tables.headers)),
                                  J.brokers_down(tables.nemesis, ends)).cache()
    found = J.anomalies(history).cache()
    lost = J.acked_writes_lost(history, found, final_logs).cache()
    outcomes = J.write_outcomes(history, lost).cache()
    counts = J.anomaly_counts(found, run_table).cache()
    avail = J.availability(timeline, run_table, J.isr_changes(events)).cache()
    latency = J.election_latency(timeline, tables.nemesis).cache()
    leaders = J.leaders_over_time(timeline, run_table).cache()
    spread = J.imbalance(leaders).cache()
    configs = run_configs(header_rows if header_rows is not None
                          else collect_headers(tables.headers))
    expected = tables.headers.sparkSession.createDataFrame(
        expected_by_config(configs, given_up),
        "config_json string, expected_kinds array<string>")
    summary = J.run_summary(run_table, ends, outcomes, counts, avail, latency,
                            expected).cache()
    frames = {
        "per_config": J.per_config(summary, latency),
        "per_run": summary.orderBy("run"),
        "writes_by_acks": outcomes.join(run_table.select("run", "config_key"), "run")
        .groupBy("config_key", "acks").agg(F.sum("writes_acked").alias("writes_acked"),
                                           F.sum("writes_lost").alias("writes_lost"))
        .withColumn("lost_write_rate", F.col("writes_lost") / F.col("writes_acked"))
        .orderBy("config_key", "acks"),
        "anomalies": found.orderBy("run", "partition", "kind", "offset", "value"),
        "lost_writes": lost.orderBy("run", "partition", "offset", "value"),
        "availability": avail.orderBy("run", "partition"),
        "election_latency": latency.orderBy("run", "fault_ms", "partition"),
        "leadership": J.leadership(timeline, run_table).orderBy("run", "broker"),
        "leaders_over_time": spread.orderBy("run", "time_ms"),
        "preferred_leader_election": J.preferred_leader_effect(events, timeline, spread)
        .orderBy("run", "time_ms", "partition"),
        "partition_timeline": timeline.withColumn(
            "isr", F.array_join(F.col("isr").cast("array<string>"), ","))
        .orderBy("run", "partition", "start_ms", "seq"),
        "malformed": tables.malformed.orderBy("file", "line"),
    }
    if summaries is not None:
        frames["cross_check"] = J.cross_check(counts, summaries).orderBy("run", "kind")
    if replay_fn is not None:
        configs = {row["run"]: json.loads(row["config_json"]) for row in tables.headers
                   .selectExpr("run", "to_json(config) AS config_json").dropDuplicates(["run"])
                   .collect()}
        frames["replay"] = J.distributed_replay(tables.events, replay_fn, configs).orderBy("run")
    frames["_leaders"] = leaders
    # Each table is both collected (CSV, page, plots) and written (Parquet): compute it once.
    return {name: frame.cache() for name, frame in frames.items()}


class HeaderRow(NamedTuple):
    """One header line: its run, its file and its config as JSON (`to_json`, as `J.runs`)."""

    run: str | None
    file: str | None
    config_json: str | None


def collect_headers(headers: DataFrame) -> list[HeaderRow]:
    """The header lines (one per trace file: small), collected once for every question the
    driver asks of them: runs, their directories and summaries, the distinct configs."""
    return [HeaderRow(*row) for row in headers.select(
        "run", "file", F.to_json("config").alias("config_json")).collect()]


def run_configs(header_rows: list[HeaderRow]) -> list[str | None]:
    """The distinct `config_json` of `J.runs` (each run's smallest non-null header config, as
    Spark's `min`: UTF-8 byte order is code point order), sorted, null first."""
    config: dict[str | None, str | None] = {}
    for row in header_rows:
        known = config.get(row.run)
        if known is None or (row.config_json is not None and row.config_json < known):
            config[row.run] = row.config_json
    return sorted(set(config.values()), key=lambda c: (c is not None, c or ""))


def _runs_by_dir(header_rows: list[HeaderRow]) -> dict[str, set[str]]:
    runs_by_dir: dict[str, set[str]] = {}
    for row in header_rows:
        path = local_path(row.file) if row.file is not None else None
        if path is not None and row.run is not None:
            runs_by_dir.setdefault(os.path.dirname(path), set()).add(row.run)
    return runs_by_dir


def summaries_frame(spark: SparkSession, header_rows: list[HeaderRow]) -> DataFrame | None:
    """(run, kind, expected, source) from the result.json/run.json next to the trace files.

    A summary without its own `run` field belongs to the one run whose files share its
    directory (skipped when that directory holds several runs). None when there are none.
    """
    runs_by_dir = _runs_by_dir(header_rows)
    rows = []
    for directory, run, source, kind, count in read_summaries(sorted(runs_by_dir)):
        if run is None:
            candidates = runs_by_dir.get(directory, set())
            if len(candidates) != 1:
                continue
            run = next(iter(candidates))
        rows.append((run, kind, count, source))
    if not rows:
        return None
    return spark.createDataFrame(rows, "run string, kind string, expected long, source string")


def _write_csv(path: str, columns: Sequence[str], rows: list) -> None:
    with open(path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else v for v in row])


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).replace("|", "\\|")


def _markdown_table(columns: Sequence[str], rows: list, limit: int = 50) -> str:
    if not rows:
        return "_(none)_\n"
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(_cell(row[c]) for c in columns) + " |")
    if len(rows) > limit:
        lines.append(f"\n_{len(rows) - limit} more rows in the CSV file._")
    return "\n".join(lines) + "\n"


def _save(plt, fig, out: str, name: str) -> str:
    """Lay out, write `out/name` as PNG, free the figure; return the name."""
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=110)
    plt.close(fig)
    return name


def _per_config_axes(ax, xlabel: str, title: str) -> None:
    """One bar per configuration, first at the top, long labels in small type."""
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)


def _rate_intervals(ax, rows: list, labels: list[str]) -> None:
    """Lost-write rate per row as a point with its 95% Wilson interval, on a log scale: the
    rates that matter differ by orders of magnitude, and a row with no loss still shows how
    high its rate could be (a bar from the axis to the interval's upper end, marked '<')."""
    highs = [r["lost_write_rate_high"] for r in rows if r["lost_write_rate_high"]]
    lows = [r["lost_write_rate_low"] for r in rows if r["lost_write_rate_low"]]
    floor = min([*lows, *highs, 1e-3]) / 3
    for y, r in enumerate(rows):
        lost, acked = r["writes_lost"] or 0, r["writes_acked"] or 0
        if not acked:
            ax.annotate("  no acknowledged writes", (floor, y), va="center", fontsize=8)
            continue
        high = 100 * r["lost_write_rate_high"]
        if lost:
            rate, low = 100 * lost / acked, 100 * max(r["lost_write_rate_low"], floor)
            ax.errorbar([rate], [y], xerr=[[rate - low], [high - rate]], fmt="o",
                        color="#c0392b", capsize=3)
            text = f" {lost:,}/{acked:,} = {rate:.3g}% [{low:.2g}, {high:.2g}]"
        else:
            ax.plot([100 * floor, high], [y, y], color="#7f8c8d", linewidth=2)
            ax.plot([high], [y], marker="<", color="#7f8c8d")
            text = f" 0/{acked:,}: below {high:.2g}%"
        ax.annotate(text, (high, y), va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(100 * floor, 100 * 4)
    ax.set_yticks(range(len(rows)), labels)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("acknowledged writes lost (%, log scale; 95% Wilson interval)")


def _plots(out: str, data: dict[str, list], chosen: str | None) -> list[str]:
    """Write the PNG plots; return their file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    configs = data["per_config"]
    policies = policy_rows(configs)
    if policies:
        labels = [f"{r['policy']} / {r['nemesis']}" for r in policies]
        height = max(2.5, 0.45 * len(labels) + 1.2)
        fig, (lost, offline) = plt.subplots(1, 2, figsize=(13, height), sharey=True,
                                            gridspec_kw={"width_ratios": [3, 2]})
        _rate_intervals(lost, policies, labels)
        lost.set_title("Lost")
        offline.barh(range(len(policies)),
                     [100 * (r["offline_fraction"] or 0) for r in policies], color="#2c3e50")
        offline.set_xlabel("time with no live leader (% of partition time)")
        offline.set_title("Offline")
        fig.suptitle("When every ISR replica fails: durability against availability, "
                     "per election policy")
        written.append(_save(plt, fig, out, "policies.png"))
    if configs:
        labels = [r["config_key"] for r in configs]
        height = max(2.5, 0.45 * len(labels) + 1.2)

        fig, ax = plt.subplots(figsize=(11, height))
        _rate_intervals(ax, configs, labels)
        ax.tick_params(axis="y", labelsize=7)
        ax.set_title("Lost acknowledged writes per configuration")
        written.append(_save(plt, fig, out, "lost_write_rate.png"))

        fig, ax = plt.subplots(figsize=(10, height))
        offline = [100 * (r["offline_fraction"] or 0) for r in configs]
        under = [100 * (r["under_min_isr_fraction"] or 0) for r in configs]
        ax.barh(labels, offline, color="#2c3e50", label="offline (no live leader)")
        ax.barh(labels, under, left=offline, color="#e67e22",
                label="ISR below min.insync.replicas (acks=all refused)")
        ax.legend(fontsize=8)
        _per_config_axes(ax, "share of observed partition time (%)",
                         "Unavailable time per configuration")
        written.append(_save(plt, fig, out, "unavailable_time.png"))

    if data.get("timelines"):
        written.append(_timelines(plt, out, data))

    latencies = [r["latency_ms"] for r in data["election_latency"] if r["latency_ms"] is not None]
    unrecovered = sum(1 for r in data["election_latency"] if r["latency_ms"] is None)
    if data["election_latency"]:
        fig, ax = plt.subplots(figsize=(8, 4))
        if latencies:
            ax.hist(latencies, bins=min(40, max(5, len(set(latencies)))), color="#2980b9")
            ax.set_yscale("log")  # the tail is a few elections against hundreds
        ax.set_xlabel("failure of a leader to a new leader (ms)")
        ax.set_ylabel("elections (log scale)")
        ax.set_title(f"Election latency ({len(latencies)} elections, {unrecovered} partitions "
                     "without a new leader by the end of the run)")
        written.append(_save(plt, fig, out, "election_latency.png"))

    if chosen is not None and data["chosen_timeline"]:
        run = data["chosen_run"]
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
        by_partition: dict[int, list] = {}
        for r in data["chosen_timeline"]:
            by_partition.setdefault(r["partition"], []).append(r)
        for partition, states in sorted(by_partition.items()):
            xs = [s["start_ms"] for s in states] + [states[-1]["end_ms"]]
            ys = [s["isr_size"] for s in states] + [states[-1]["isr_size"]]
            top.step(xs, ys, where="post", label=f"partition {partition}")
            for s in states:
                if s["leader"] is not None and s["leader"] < 0:
                    top.axvspan(s["start_ms"], s["end_ms"], color="#2c3e50", alpha=0.15)
        if run and run["min_insync_replicas"] is not None:
            top.axhline(run["min_insync_replicas"], color="#e67e22", linestyle="--",
                        label="min.insync.replicas")
        for fault in data["chosen_nemesis"]:
            for axis in (top, bottom):
                axis.axvline(fault["time_ms"], color="#c0392b", alpha=0.4, linewidth=0.8)
            top.annotate(f"{fault['f']} {fault['target'] or ''}".strip(),
                         (fault["time_ms"], top.get_ylim()[1]), rotation=90, fontsize=7,
                         va="top", ha="right")
        top.set_ylabel("ISR size")
        top.set_title(f"Run {chosen}: ISR size (shaded: no leader) and leaders per broker")
        top.legend(fontsize=7, loc="lower left")
        by_broker: dict[int, list] = {}
        for r in data["chosen_leaders"]:
            by_broker.setdefault(r["broker"], []).append(r)
        end = max(s["end_ms"] for s in data["chosen_timeline"])
        for broker, points in sorted(by_broker.items()):
            xs = [p["time_ms"] for p in points] + [end]
            ys = [p["leaders"] for p in points] + [points[-1]["leaders"]]
            bottom.step(xs, ys, where="post", label=f"b{broker}")
        bottom.set_ylabel("partitions led")
        bottom.set_xlabel("time (ms)")
        bottom.legend(fontsize=7, loc="lower left")
        written.append(_save(plt, fig, out, "isr_over_time.png"))
    return written


TIMELINE_RUNS = 12


def timeline_runs(summary_rows: list) -> list[str]:
    """The runs drawn as timelines: those with bad anomalies first (most first), then those
    losing the most acknowledged writes, then the least available, TIMELINE_RUNS at most."""
    def rank(r):
        return (-(r["anomalies_bad"] or 0), -(r["writes_lost"] or 0),
                -((r["offline_ms"] or 0) + (r["under_min_isr_ms"] or 0)), r["run"])

    return [r["run"] for r in sorted(summary_rows, key=rank)[:TIMELINE_RUNS]
            if r["observed_ms"] or r["anomalies_bad"]]


def _timelines(plt, out: str, data: dict) -> str:
    """One lane per chosen run: faults as red spans (crash to restart, pause to resume,
    partition to heal), time with a partition offline (dark) or under min ISR (orange),
    elections as black ticks and lost acknowledged writes as crosses at their ack time; runs
    with bad anomalies are labelled in red."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    runs = data["timelines"]
    by_run = {r["run"]: r for r in data["per_run"]}
    fig, ax = plt.subplots(figsize=(11, max(2.8, 0.5 * len(runs) + 1.6)))
    for y, run in enumerate(runs):
        r = by_run[run]
        min_isr = r["min_insync_replicas"] or 0
        for start, end, kind in data["timeline_faults"].get(run, ()):
            ax.broken_barh([(start, max(end - start, 1))], (y - 0.42, 0.84), color="#e74c3c",
                           alpha=0.18)
            ax.annotate(kind, (start, y - 0.42), fontsize=6, va="top", color="#c0392b")
        for state in data["timeline_states"].get(run, ()):
            span = (state["start_ms"], state["end_ms"] - state["start_ms"])
            if state["leader"] is not None and state["leader"] < 0:
                ax.broken_barh([span], (y - 0.2, 0.4), color="#2c3e50")
            elif state["isr_size"] < min_isr:
                ax.broken_barh([span], (y - 0.2, 0.4), color="#e67e22")
            if state["is_election"]:
                ax.plot([state["start_ms"]] * 2, [y - 0.3, y + 0.3], color="black",
                        linewidth=0.8)
        lost = data["timeline_lost"].get(run, ())
        if lost:
            ax.plot(lost, [y] * len(lost), "x", color="#c0392b", markersize=5)
    ax.set_yticks(range(len(runs)), [
        f"{run}" + (f"  bad: {by_run[run]['bad_kinds']}" if by_run[run]["anomalies_bad"]
                    else "") for run in runs], fontsize=7)
    for label, run in zip(ax.get_yticklabels(), runs, strict=True):
        if by_run[run]["anomalies_bad"]:
            label.set_color("#c0392b")
    ax.set_ylim(len(runs) - 0.5, -0.5)
    ax.set_xlabel("time (ms)")
    ax.legend(handles=[Patch(color="#e74c3c", alpha=0.18, label="fault"),
                       Patch(color="#2c3e50", label="a partition offline"),
                       Patch(color="#e67e22", label="under min ISR"),
                       Line2D([], [], color="black", linewidth=0.8, label="election"),
                       Line2D([], [], marker="x", linestyle="", color="#c0392b",
                              label="acknowledged write later lost")],
              fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=5)
    ax.set_title("Run timelines (bad anomalies first, then lost writes, then unavailability)")
    return _save(plt, fig, out, "timelines.png")


def choose_run(summary_rows: list) -> str | None:
    """The run with the most offline plus under-min-ISR time (ties: the smallest id)."""
    candidates = [r for r in summary_rows if r["observed_ms"] > 0]
    if not candidates:
        return None
    best = min(candidates, key=lambda r: (-(r["offline_ms"] + r["under_min_isr_ms"]), r["run"]))
    return best["run"]


RECOVERIES = ("restart", "resume", "heal")  # nemesis lines that end a fault


def fault_spans(lines: list, end_ms: int | None) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each fault in a run's nemesis lines (in time order): from the
    fault to the next recovery line of the same target, or to the run's end."""
    spans, open_faults = [], {}
    for line in lines:
        target = line["target"]
        if line["f"] in RECOVERIES:
            started = open_faults.pop(target, None)
            if started is not None:
                spans.append((started[0], line["time_ms"], started[1]))
        else:
            open_faults.setdefault(target, (line["time_ms"], line["f"]))
    last = max([end_ms or 0, *(t for t, _ in open_faults.values())])
    spans += [(t, last, f) for t, f in open_faults.values()]
    return sorted(spans)


def run_directories(header_rows: list[HeaderRow]) -> dict[str, str]:
    """run -> the local directory of its trace files (the first, if they are spread)."""
    found: dict[str, str] = {}
    for row in sorted((r for r in header_rows if r.run is not None and r.file is not None),
                      key=lambda r: (r.run, r.file)):
        path = local_path(row.file)
        if path is not None:
            found.setdefault(row.run, os.path.dirname(path))
    return found


def _run_link(run: str, data: dict) -> str:
    """The run's id as a Markdown link to its trace directory, relative to the report."""
    directory = data.get("run_dirs", {}).get(run)
    if directory is None:
        return run
    target = os.path.relpath(directory, data["out"]).replace(os.sep, "/")
    return f"[{run}]({target}/)"


def _run_documents(header_rows: list[HeaderRow], name: str):
    """(run, parsed `name`) for each directory that holds one run and a readable such file."""
    for directory, runs in sorted(_runs_by_dir(header_rows).items()):
        if len(runs) != 1:
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as handle:
                yield next(iter(runs)), directory, json.load(handle)
        except (OSError, ValueError):
            continue


def campaign_losses(header_rows: list[HeaderRow]) -> dict[str, dict]:
    """run -> the campaign's account of the acknowledged writes it lost (result.json's
    `losses`: `lost`, `excused`, `unexcused`, `note`), for runs whose directory holds one run
    and such a file."""
    found = {}
    for run, _, document in _run_documents(header_rows, "result.json"):
        losses = document.get("losses") if isinstance(document, dict) else None
        if isinstance(losses, dict) and isinstance(losses.get("lost"), int):
            found[run] = losses
    return found


def final_logs_frame(spark: SparkSession, header_rows: list[HeaderRow]) -> DataFrame | None:
    """(run, final_logs as JSON text) from the run.json of each directory that holds one run
    (a simulated or tcp run's final logs); None when no run has them."""
    rows = [(run, json.dumps(logs))
            for run, directory, document in _run_documents(header_rows, "run.json")
            if (logs := _final_logs(directory, document)) is not None]
    if not rows:
        return None
    return spark.createDataFrame(rows, "run string, final_logs string")


def _final_logs(directory: str, document) -> dict | None:
    """A run's final logs: in run.json, or in the file beside it that run.json names
    (impl.trace.write_final_logs: lines of a partition and a chunk of its records). The
    report only shows them; replay is what checks them."""
    if not isinstance(document, dict):
        return None
    if isinstance(document.get("final_logs"), dict):
        return document["final_logs"]
    named = document.get("final_logs_file")
    if not isinstance(named, dict) or not isinstance(named.get("file"), str):
        return None
    logs: dict[str, list] = {}
    try:
        with open(os.path.join(directory, os.path.basename(named["file"])),
                  encoding="utf-8") as handle:
            for line in handle:
                body = json.loads(line)
                logs.setdefault(str(int(body["partition"])), []).extend(body["records"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return logs


def _write_parquet(frame: DataFrame, path: str) -> None:
    frame.coalesce(1).write.mode("overwrite").parquet(path)


def _line_counts(tables: J.Tables) -> tuple[int, int]:
    """(event lines, malformed lines) of the dataset, in one job."""
    tagged = tables.events.select(F.lit("events").alias("table")).unionByName(
        tables.malformed.select(F.lit("malformed").alias("table")))
    counts = {row["table"]: row["count"] for row in tagged.groupBy("table").count().collect()}
    return counts.get("events", 0), counts.get("malformed", 0)


# Adaptive execution runs every shuffle and broadcast of a query as a job of its own and
# re-plans the rest after each; locally, with two shuffle partitions and nothing to coalesce,
# that is fixed cost only: on the demo's report, 157 jobs instead of 59 and 43 s instead of
# 35 s (local[2], machine shared), with identical tables. On a cluster it stays as configured.
LOCAL_ANALYSIS_CONF = {"spark.sql.adaptive.enabled": "false"}


def analyze(spark: SparkSession, dataset: str, out: str, chosen_run: str | None = None,
            replay_fn: J.ReplayFn | None = None, cross_check: bool = True,
            parquet: bool = True, *, given_up: GivenUp) -> Report:
    """Run every job over the ingested `dataset` and write the report directory `out`.

    `chosen_run` picks the run of the ISR-over-time plot (default: see `choose_run`); a run
    that is not in the data raises ValueError. `replay_fn` adds the distributed replay;
    `given_up` (see GivenUp) decides which anomalies each run's configuration allows. On a
    local master, LOCAL_ANALYSIS_CONF holds while it runs.
    """
    before = {}
    if is_local(spark.sparkContext.master):
        for key, value in LOCAL_ANALYSIS_CONF.items():
            before[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
    try:
        return _analyze(spark, dataset, out, chosen_run, replay_fn, cross_check, parquet,
                        given_up)
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _analyze(spark: SparkSession, dataset: str, out: str, chosen_run: str | None,
             replay_fn: J.ReplayFn | None, cross_check: bool, parquet: bool,
             given_up: GivenUp) -> Report:
    start = time.perf_counter()
    tables = J.load(spark, dataset)
    header_rows = collect_headers(tables.headers)
    if chosen_run is not None:
        known = sorted({r.run for r in header_rows if r.run is not None})
        if chosen_run not in known:
            raise ValueError(f"--run: no run {chosen_run!r} in the traces "
                             f"(runs: {', '.join(known[:10])})")
    summaries = summaries_frame(spark, header_rows) if cross_check else None
    frames = compute(tables, replay_fn, summaries, header_rows,
                     final_logs_frame(spark, header_rows), given_up=given_up)
    os.makedirs(os.path.join(out, "tables"), exist_ok=True)
    small = ["per_config", "per_run", "writes_by_acks", "availability", "election_latency",
             "leadership", "preferred_leader_election", "cross_check", "replay"]
    data: dict[str, list] = {}
    for name in small:
        if name in frames:
            data[name] = frames[name].collect()
            _write_csv(os.path.join(out, "tables", f"{name}.csv"), frames[name].columns,
                       data[name])
    for name in ("anomalies", "lost_writes", "malformed"):
        data[name] = frames[name].limit(MALFORMED_CSV_ROWS_MAX).collect()
        _write_csv(os.path.join(out, "tables", f"{name}.csv"), frames[name].columns, data[name])
    # The Parquet writes (a small job each, their frames mostly cached by now) run in two
    # threads while the driver collects the plots' rows and draws them.
    writes = ThreadPoolExecutor(max_workers=2, thread_name_prefix="parquet")
    try:
        pending = [writes.submit(_write_parquet, frame, os.path.join(out, "parquet", name))
                   for name, frame in frames.items() if parquet and not name.startswith("_")]
        data["campaign_losses"] = campaign_losses(header_rows)
        data["run_dirs"] = run_directories(header_rows)
        data["out"] = out
        data["timelines"] = timeline_runs(data["per_run"])
        data["timeline_states"], data["timeline_faults"], data["timeline_lost"] = {}, {}, {}
        if data["timelines"]:
            wanted = F.col("run").isin(*data["timelines"])
            for r in frames["partition_timeline"].where(wanted).select(
                    "run", "start_ms", "end_ms", "leader", "isr_size", "is_election").collect():
                data["timeline_states"].setdefault(r["run"], []).append(r)
            nemesis: dict[str, list] = {}
            for r in tables.nemesis.where(wanted).orderBy("run", "time_ms", "seq").select(
                    "run", "time_ms", "f", "target").collect():
                nemesis.setdefault(r["run"], []).append(r)
            ends = {r["run"]: r["end_ms"] for r in data["per_run"]}
            for run, lines in nemesis.items():
                data["timeline_faults"][run] = fault_spans(lines, ends.get(run))
            for r in frames["lost_writes"].where(wanted & F.col("time_ms").isNotNull()).select(
                    "run", "time_ms").collect():
                data["timeline_lost"].setdefault(r["run"], []).append(r["time_ms"])
        chosen = chosen_run or choose_run(data["per_run"])
        data["chosen_run"] = next((r for r in data["per_run"] if r["run"] == chosen), None)
        data["chosen_timeline"] = frames["partition_timeline"].where(F.col("run") == chosen) \
            .collect() if chosen else []
        data["chosen_leaders"] = frames["_leaders"].where(F.col("run") == chosen) \
            .orderBy("broker", "time_ms").collect() if chosen else []
        data["chosen_nemesis"] = tables.nemesis.where(F.col("run") == chosen) \
            .orderBy("time_ms", "seq").select("time_ms", "f", "target").collect() if chosen else []
        figures = _plots(out, data, chosen)
        for done in pending:
            done.result()
    finally:
        writes.shutdown(wait=True, cancel_futures=True)
    events, malformed = _line_counts(tables)
    disagreements = sum(1 for r in data.get("cross_check", []) if r["agrees"] is False)
    verdicts: dict[str, int] = {}
    for r in data.get("replay", []):
        verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    seconds = time.perf_counter() - start
    index = os.path.join(out, "index.md")
    text = _page(data, frames, figures, chosen, events, malformed, dataset, seconds)
    with open(index, "w", encoding="utf-8") as page:
        page.write(text)
    with open(os.path.join(out, "index.html"), "w", encoding="utf-8") as page:
        page.write(markdown_page(text, out, "isrlab report"))
    return Report(out=out, index=index, runs=len(data["per_run"]),
                  configs=len(data["per_config"]), events=events, malformed=malformed,
                  disagreements=disagreements, chosen_run=chosen, seconds=seconds,
                  replay_verdicts=verdicts, figures=tuple(figures))


def cross_check_section(rows: list) -> list[str]:
    """The page's cross-check: a verdict in one line, and a table only of the counts that
    disagree (every count is in tables/cross_check.csv)."""
    bad = [r for r in rows if r["agrees"] is False]
    parts = ["## Cross-check with the runs' own summaries\n"]
    if not bad:
        return parts + [f"All {len(rows)} counts agree with the runs' own summaries (each "
                        "count: `tables/cross_check.csv`).\n"]
    return parts + [f"**{len(bad)} of {len(rows)} counts disagree** with the runs' own "
                    "summaries (all counts: `tables/cross_check.csv`):\n",
                    _markdown_table(["run", "kind", "expected", "found", "agrees", "source"],
                                    bad)]


# The nemeses that kill every ISR replica of a partition (impl.sim.ISR_KILLS).
ISR_KILL_NEMESES = ("isr-kill", "isr-kill-process", "isr-kill-all")
POLICY_ORDER = ("clean", "unclean", "elr", "elr+lkl")


def policy_rows(per_config: list) -> list[dict]:
    """The per-configuration rows of runs under an isr-kill nemesis, one per (policy, nemesis),
    in POLICY_ORDER: the answer to "what if every ISR replica fails?"."""
    rows = [r for r in per_config
            if r["nemesis"] and set(r["nemesis"].split("+")) <= set(ISR_KILL_NEMESES)]

    def order(r):
        policy = r["policy"]
        rank = POLICY_ORDER.index(policy) if policy in POLICY_ORDER else len(POLICY_ORDER)
        return rank, policy, r["nemesis"], r["config_key"]

    return sorted(rows, key=order)


def _policy_section(data: dict) -> list[str]:
    rows = policy_rows(data["per_config"])
    if not rows:
        return []
    return ["## When every ISR replica fails: election policies\n",
            "Runs under a nemesis that kills every ISR replica of a partition (`isr-kill`: the "
            "followers are cut off until the leader is alone in the ISR, then it loses power; "
            "`isr-kill-process`: only the process dies, the page cache survives; "
            "`isr-kill-all`: every replica loses power at once). Policies: `clean` waits for an "
            "ISR member, `unclean` takes any replica, `elr` adds KIP-966's eligible leader "
            "replicas, `elr+lkl` also elects the last known leader (Kafka's default with ELR). "
            "Fractions are of the partition time of the runs.\n",
            _markdown_table(["policy", "nemesis", "runs", "writes_acked", "writes_lost",
                             "lost_write_rate", "lost_write_95", "offline_fraction",
                             "under_min_isr_fraction", "elections"],
                            [{**r.asDict(), "lost_write_95": _interval(r)} for r in rows])]


def loss_rows(data: dict) -> list[dict]:
    """The runs that lost acknowledged writes (by the final log, by the reads, or by their
    campaign's account), each with the counts the losses section reconciles."""
    accounts = data.get("campaign_losses", {})
    rows = []
    for r in data["per_run"]:
        account = accounts.get(r["run"], {})
        if not (r["writes_lost"] or r[LOST_WRITE] or account.get("lost")):
            continue
        rows.append({"run": r["run"], "writes_lost": r["writes_lost"] or 0,
                     "campaign lost": account.get("lost", ""),
                     "excused": account.get("excused", ""),
                     "unexcused": account.get("unexcused", ""),
                     "seen by reads": r[LOST_WRITE] or 0,
                     "not read again": (r["writes_lost"] or 0) - (r[LOST_WRITE] or 0),
                     "note": account.get("note") or ""})
    return rows


def _losses_section(data: dict) -> list[str]:
    """Lost acknowledged writes first, whether or not the guarantee allows them: a loss the
    guarantee excuses is still a loss a user must see. Each row reconciles the counts."""
    rows = loss_rows(data)
    if not rows:
        return []
    total = sum(r["writes_lost"] for r in rows)
    return ["## Lost acknowledged writes\n",
            f"**{total:,} acknowledged writes lost in {len(rows)} runs** (the sum of "
            "`writes_lost` below). `writes_lost`: acks=1/all writes acknowledged to a client "
            "whose value is not at its offset in the run's final log (run.json), or, for a "
            "partition with no final log, in the last read there; `campaign lost` is the same "
            "count from the run's result.json, split into `excused` (the pre-KIP-966 "
            "guarantee allows them: every in-sync replica lost them unflushed) and "
            "`unexcused`. `seen by reads` is the `lost-write` anomaly (the reads alone as the "
            "final state); `not read again` = `writes_lost` - `seen by reads`: lost writes no "
            "later read covered, which only the final log shows.\n",
            _markdown_table(["run", "writes_lost", "campaign lost", "excused", "unexcused",
                             "seen by reads", "not read again", "note"],
                            [{**r, "run": _run_link(r["run"], data)} for r in rows])]


def verdict_line(per_run: list) -> str:
    """The page's first finding: bad anomalies (by kind and run count), or none."""
    bad_runs = [r for r in per_run if r["anomalies_bad"]]
    expected = sum(r["anomalies_expected"] or 0 for r in per_run)
    if not bad_runs:
        return (f"**No bad anomaly.** Every anomaly found ({expected:,}) is one its "
                "configuration allows (see *Anomalies*).\n")
    kinds: dict[str, int] = {}
    for r in bad_runs:
        for kind in (r["bad_kinds"] or "").split(","):
            if kind:
                kinds[kind] = kinds.get(kind, 0) + 1
    named = ", ".join(f"{kind} in {n} run{'s' * (n > 1)}" for kind, n in sorted(kinds.items()))
    total = sum(r["anomalies_bad"] for r in bad_runs)
    return (f"**{total:,} bad anomalies in {len(bad_runs)} of {len(per_run)} runs**: {named}. "
            f"{expected:,} more are expected of their configurations.\n")


def loss_line(data: dict) -> list[str]:
    """Lost acknowledged writes named before any table, whether or not the guarantee allows
    them: a loss the guarantee excuses is still a loss a user must see."""
    rows = loss_rows(data)
    if not rows:
        return []
    total = sum(r["writes_lost"] for r in rows)
    runs = f"{len(rows)} run{'s' * (len(rows) > 1)}"
    return [f"**{total:,} acknowledged writes lost in {runs}** (against each run's final "
            "log; run by run under *Lost acknowledged writes*).\n"]


def _anomalies_section(data: dict) -> list[str]:
    """The bad anomalies one by one, linked to their runs; the expected ones as counts."""
    bad_kinds = {r["run"]: set((r["bad_kinds"] or "").split(",")) - {""}
                 for r in data["per_run"]}
    bad = [r for r in data["anomalies"] if r["kind"] in bad_kinds.get(r["run"], ())]
    parts = ["## Anomalies\n",
             "Kinds as Jepsen's Kafka workload names them; *bad* where the run's "
             "configuration does not allow the kind, *expected* where it does (the rule: "
             "`vocab.anomalies`, docs/spark.md). Every anomaly: `tables/anomalies.csv`.\n",
             "### Bad\n"]
    rows = [{**r.asDict(), "run": _run_link(r["run"], data)} for r in bad]
    parts.append(_markdown_table(["run", "partition", "kind", "offset", "value", "detail"],
                                 rows, limit=30))
    per_kind = [{"config_key": r["config_key"], "kind": kind, "count": r[kind]}
                for r in data["per_config"] for kind in J.ANOMALY_KINDS if r[kind]]
    parts += ["### All, per configuration\n",
              _markdown_table(["config_key", "kind", "count"], per_kind)]
    return parts


def _page(data: dict, frames: dict, figures: list[str], chosen: str | None, events: int,
          malformed: int, dataset: str, seconds: float) -> str:
    config_columns = ["config_key", "runs", "writes_acked", "writes_lost", "lost_write_rate",
                      "lost_write_95", "anomalies_bad", "anomalies_expected",
                      "offline_fraction", "no_leader_fraction", "under_min_isr_fraction",
                      "elections", "election_latency_ms_p50", "election_latency_ms_max"]
    configs = [{**r.asDict(), "lost_write_95": _interval(r)} for r in data["per_config"]]
    runs = [{**r.asDict(), "run": _run_link(r["run"], data)} for r in data["per_run"]]
    parts = [
        "# isrlab trace analysis\n",
        f"{len(data['per_run'])} runs in {len(data['per_config'])} configurations, "
        f"{events:,} events, {malformed:,} malformed lines; analysed in {seconds:.1f} s "
        f"from `{dataset}`.\n",
        verdict_line(data["per_run"]),
        *loss_line(data),
        "## Per configuration\n",
        "Definitions: `pyspark_harness/jobs.py` (module docstring). Rates are lost / "
        "acknowledged writes, with a 95% Wilson interval; fractions are of the partition time "
        "of the runs.\n",
        _markdown_table(config_columns, configs),
    ]
    for name, title in (("lost_write_rate.png", "Lost acknowledged writes"),
                        ("unavailable_time.png", "Unavailable time")):
        if name in figures:
            parts.append(f"![{title}]({name})\n")
    parts += [*_policy_section(data),
              *(["![Election policies when every ISR replica fails](policies.png)\n"]
                if "policies.png" in figures else []),
              *_losses_section(data),
              *_anomalies_section(data)]
    if "timelines.png" in figures:
        parts += ["## Run timelines\n", "![Run timelines](timelines.png)\n"]
    if "election_latency.png" in figures:
        parts += ["## Election latency\n", "![Election latency](election_latency.png)\n"]
    parts += [
        "## Writes by acks level\n",
        _markdown_table(["config_key", "acks", "writes_acked", "writes_lost",
                         "lost_write_rate"], data["writes_by_acks"]),
        "## Per run\n",
        "Each run links to its trace directory.\n",
        _markdown_table(["run", "config_key", "writes_acked", "anomalies_bad", "bad_kinds",
                         "anomalies_expected", "offline_ms", "no_leader_ms", "under_min_isr_ms",
                         "elections",
                         "isr_shrinks", "isr_expands"], runs),
        "## Preferred-leader elections\n",
        "Leaders per broker (b0,b1,...) just before each ControllerElectPreferredLeader and "
        "once its partition's new state is installed; imbalance = max - min.\n",
        _markdown_table(["run", "time_ms", "partition", "leaders_before", "imbalance_before",
                         "leaders_after", "imbalance_after"], data["preferred_leader_election"]),
    ]
    if chosen is not None:
        parts.append(f"## Run {_run_link(chosen, data)}\n")
        if "isr_over_time.png" in figures:
            parts.append(f"![ISR size over time, run {chosen}](isr_over_time.png)\n")
    if "cross_check" in data:
        parts += cross_check_section(data["cross_check"])
    if "replay" in data:
        parts += ["## Distributed replay\n",
                  _markdown_table(["run", "verdict", "events", "detail"], data["replay"])]
    parts += ["## Malformed lines\n",
              f"{malformed:,} lines put aside (all of them: `parquet/malformed`).\n",
              _markdown_table(["file", "line", "reason"],
                              [{"file": local_path(r["file"]) or r["file"], "line": r["line"],
                                "reason": r["reason"]} for r in data["malformed"]], limit=20),
              "## Files\n",
              "Tables as CSV in `tables/`, as Parquet in `parquet/` (also "
              + ", ".join(f"`{n}`" for n in sorted(frames) if not n.startswith("_")) + ").\n"]
    return "\n".join(parts)


def _interval(row) -> str:
    """`[low, high] %` of a configuration's lost-write rate, or empty without acked writes."""
    low, high = row["lost_write_rate_low"], row["lost_write_rate_high"]
    if low is None or high is None:
        return ""
    return f"[{100 * low:.2g}, {100 * high:.2g}] %"
