"""Fault campaigns: many simulator runs, each replayed against the spec and history-checked.

Theory of operation. Run i uses seed S + i. A worker process simulates the run (traces stay in
memory), replays them through `model_check.conformance.replay`, and checks the client history with
`model_check.conformance.history`, excusing the writes the spec's ghost state says Kafka's guarantee gives
up (every in-sync replica lost them in crashes). A run fails on a divergence, an unreadable
trace, an invariant the configuration promises (spec.promises) broken in the replayed state,
a cluster that did not recover after the faults healed (the simulator's liveness phase: a
partition without a leader, a full ISR or an acknowledged write within `liveness_ms`), or,
for a configuration that promises durability, any anomaly. Failing runs' traces are
written to `OUT/run-<seed>/` with `result.json` (replay and history verdicts) and `run.json`
(seed, config and the command that reproduces the run); `keep="all"` writes every run (a corpus
for `isrlab analyze`). Runs go in parallel over worker processes; results are reported in seed
order, so the summary does not depend on the number of workers.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from impl.config import ClusterConfig
from impl.sim import SimOptions, simulate
from impl.trace import header_config
from model_check.conformance.history import HistoryError, HistoryResult, check_history
from model_check.conformance.losses import Losses, losses_of
from model_check.conformance.policies import policy_of, timeline
from model_check.conformance.replay import (
    TraceError,
    format_result,
    given_up_of,
    load_texts,
    replay_run,
    spec_config,
)
from model_check.explore.progress import die_with_parent
from spec.promises import promise
from vocab import anomalies as K
from vocab.anomalies import KINDS as ANOMALY_KINDS

KIP966_INVARIANTS = ("AckedWritesDurableKip966", "LeaderCandidatesComplete")


def promises_durability(config: ClusterConfig) -> bool:
    """Whether the configuration promises acknowledged writes survive (spec.promises: acks=all
    and clean election), so that any client anomaly fails a run."""
    return promise(spec_config(header_config(config, SimOptions())),
                   "AckedWritesDurable").promised


@dataclass
class RunOutcome:
    seed: int
    events: int
    acked: int
    verdict: str  # accepted | divergence | unreadable
    anomalies: dict[str, int]
    excused: int
    sim_seconds: float
    replay_seconds: float
    failed: bool
    report: str = ""
    result: dict = field(default_factory=dict)
    lost_excused: int = 0  # acknowledged writes lost within the guarantee's exception
    loss_note: str | None = None
    lost: int = 0  # acknowledged writes missing from the final logs
    timeline: dict = field(default_factory=dict)  # model_check.conformance.policies.Timeline.to_json()
    kip966_violations: int = 0  # replayed states that break KIP-966's durability promise
    liveness: str | None = None  # what had not recovered after the faults healed, if anything
    # With run_one(traces=True): {path of the node's trace file: its text}, written or not.
    traces: dict[str, str] | None = None


def final_logs(result) -> dict[int, list[int]]:
    return {int(p): [v for _, v in log] for p, log in result.final_logs.items()}


def lines_of(sim, nodes: tuple[str, ...], kind: str) -> list[dict]:
    """The `kind` lines of the named nodes' traces, parsed, in node then line order."""
    tag = f'"kind":"{kind}"'
    return [json.loads(line) for node in nodes for line in sim.traces.get(node, "").splitlines()
            if tag in line]


@dataclass(frozen=True)
class Replayed:
    """What replay says of a run: its verdict, the report a person reads, its JSON, and the
    writes the spec's ghost state excuses (every in-sync replica lost them in crashes)."""

    verdict: str  # accepted | divergence | unreadable
    report: str
    json: dict
    excused: frozenset[int]

    @property
    def broken_promises(self) -> list[dict]:
        return [v for v in self.json.get("invariant_violations", ()) if v["promised"]]


def replayed(sim) -> Replayed:
    try:
        replay = replay_run(load_texts(sim.traces, sim.run_json()))
    except TraceError as error:
        return Replayed("unreadable", str(error), {}, frozenset())
    report = format_result(replay) if replay.verdict != "accepted" else "; ".join(
        f"{name} violated in the replayed state, which this configuration promises: "
        f"{detail}" for name, detail in replay.broken_promises)
    return Replayed(replay.verdict, report, replay.to_json(), frozenset(replay.excused_values))


@dataclass(frozen=True)
class ClientsChecked:
    """The clients' history checked against the final logs, less what replay excuses."""

    counts: Counter  # anomalies the guarantee does not excuse, by kind
    json: dict
    acked: int
    history: HistoryResult | None  # None: the history is malformed
    # What the trace lines alone show (reads only, nothing excused): Spark's view.
    from_traces: dict


def clients_checked(history_lines: list[dict], logs: dict[int, list[int]],
                    excused: frozenset[int]) -> ClientsChecked:
    try:
        from_traces = {"anomalies": check_history(history_lines).to_json()["anomalies"]}
    except HistoryError as error:
        from_traces = {"error": str(error)}
    try:
        history = check_history(history_lines, logs)
    except HistoryError as error:
        return ClientsChecked(Counter({"malformed_history": 1}), {"error": str(error)}, 0, None,
                              from_traces)
    # An anomaly that involves an excused write (lost, read before it was lost, replaced at
    # its offset, overtaken by a later write) is the guarantee's stated exception.
    counts = Counter(a.kind for a in history.anomalies if not excused.intersection(a.values))
    body = history.to_json()
    body["anomalies"] = dict(counts)
    body["details"] = [d for d in body.get("details", [])
                       if not excused.intersection(d.get("values", ()))]
    return ClientsChecked(counts, body, sum(history.acked.values()), history, from_traces)


def judged(config: ClusterConfig, replay: Replayed, counts: Counter) -> tuple[bool, str]:
    """(failed, report) of a run. A poll-skip is a broker bug under any configuration; an
    invariant the configuration does not promise broken in the replayed state is its
    trade-off, counted, not failed."""
    failed = (replay.verdict != "accepted" or bool(replay.broken_promises)
              or (promises_durability(config) and bool(counts))
              or bool(counts.get(K.POLL_SKIP)))
    report = replay.report
    if counts and not report:
        report = "; ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
    return failed, report


def run_one(config: ClusterConfig, options: SimOptions, out: Path | None, keep: str,
            traces: bool = False) -> RunOutcome:
    """One seeded run, forward: simulate, replay, check the clients' history, count the
    losses and the time without a leader, judge."""
    t0 = time.perf_counter()
    sim = simulate(config, options)
    t1 = time.perf_counter()
    replay = replayed(sim)
    t2 = time.perf_counter()
    clients = clients_checked(lines_of(sim, ("producer", "consumer"), "history"),
                              final_logs(sim), replay.excused)
    meta = lines_of(sim, ("meta",), "event")
    loss = (losses_of(clients.history, replay.excused, meta) if clients.history
            else Losses(0, (), (), None))
    end_ms = sim.summary.get("end_ms", options.duration_ms)  # past the duration: liveness
    line = timeline(meta, config.partitions, config.min_insync_replicas, end_ms,
                    config.brokers, lines_of(sim, ("nemesis",), "nemesis"),
                    {p: config.assignment(p)[0] for p in range(config.partitions)}).to_json()
    line["unclean_elections"] = sim.summary.get("unclean_elections", 0)
    kip966 = [v for v in replay.json.get("invariant_violations", ())
              if v["invariant"] in KIP966_INVARIANTS]
    failed, report = judged(config, replay, clients.counts)
    liveness = sim.summary.get("liveness")
    if liveness:
        failed = True
        report = "; ".join(x for x in (report, f"liveness: {liveness}") if x)
    counts, history_json, excused = clients.counts, clients.json, replay.excused
    history_json["split"] = K.split(counts, given_up_of(header_config(config, options)))
    result = {"seed": options.seed, "run": f"seed-{options.seed}", "replay": replay.json,
              "history": history_json, "history_from_traces": clients.from_traces,
              "failed": failed, "excused_values": sorted(excused), "losses": loss.to_json(),
              "policy": policy_of(config), "timeline": line, "liveness": liveness}
    if out is not None and (keep == "all" or (keep == "failing" and failed)):
        directory = out / f"run-{options.seed}"
        sim.write(directory)
        # default=repr: a report with a value JSON cannot hold is still written, not lost.
        (directory / "result.json").write_text(json.dumps(result, sort_keys=True, default=repr)
                                               + "\n")
    files = None
    if traces:
        directory = (out or Path(".")).resolve() / f"run-{options.seed}"
        files = {str(directory / f"{node}.ndjson"): text for node, text in sim.traces.items()}
    return RunOutcome(options.seed, sim.summary["events"], clients.acked, replay.verdict,
                      dict(counts),
                      len(excused), t1 - t0, t2 - t1, failed, report, result,
                      len(loss.excused), loss.note(), len(loss.lost), line, len(kip966), liveness,
                      files)


class CampaignError(ValueError):
    """A campaign that cannot run (one line: what and why)."""


def _worker(job: tuple) -> RunOutcome:
    return run_one(*job)


def _worker_with_traces(job: tuple) -> RunOutcome:
    return run_one(*job, traces=True)


def _without_traces(outcome: RunOutcome) -> RunOutcome:
    from dataclasses import replace

    return replace(outcome, traces=None)


def _trace_files(outcome: RunOutcome) -> list[tuple[str, str]]:
    return sorted((outcome.traces or {}).items())


@dataclass
class CampaignResult:
    outcomes: list[RunOutcome]
    seconds: float
    config: ClusterConfig

    @property
    def failed(self) -> list[RunOutcome]:
        return [o for o in self.outcomes if o.failed]

    def summary(self) -> dict:
        anomalies: Counter = Counter()
        bad: Counter = Counter()
        broken: Counter = Counter()
        trade_offs: dict[str, dict] = {}
        for o in self.outcomes:
            anomalies.update(o.anomalies)
            bad.update(o.result.get("history", {}).get("split", {}).get(K.BAD, {}))
            for v in {v["invariant"]: v for v in
                      o.result.get("replay", {}).get("invariant_violations", ())}.values():
                if v["promised"]:
                    broken[v["invariant"]] += 1
                else:
                    trade = trade_offs.setdefault(v["invariant"],
                                                  {"runs": 0, "why": v["why_not_promised"]})
                    trade["runs"] += 1
        events = sum(o.events for o in self.outcomes)
        replay = sum(o.replay_seconds for o in self.outcomes)
        return {
            "runs": len(self.outcomes),
            "events": events,
            "acked_writes": sum(o.acked for o in self.outcomes),
            "divergences": sum(o.verdict == "divergence" for o in self.outcomes),
            "unreadable": sum(o.verdict == "unreadable" for o in self.outcomes),
            "anomalies": {k: anomalies.get(k, 0) for k in ANOMALY_KINDS},
            # Of those, the kinds Kafka's contract does not allow for this configuration
            # (vocab.anomalies): the rest are expected of it.
            "anomalies_bad": {k: bad.get(k, 0) for k in ANOMALY_KINDS if bad.get(k)},
            "excused_writes": sum(o.excused for o in self.outcomes),
            "acked_writes_lost_excused": sum(o.lost_excused for o in self.outcomes),
            "runs_losing_acked_writes": [o.seed for o in self.outcomes if o.loss_note],
            "acked_writes_lost": sum(o.lost for o in self.outcomes),
            "kip966_violations": sum(o.kip966_violations for o in self.outcomes),
            # Runs whose replayed state breaks each invariant: promised (bugs), or not (the
            # configuration's trade-offs, spec.promises).
            "broken_promises": dict(sorted(broken.items())),
            "trade_offs": dict(sorted(trade_offs.items())),
            "policy": policy_of(self.config),
            "offline_ms": sum(o.timeline.get("offline_ms", 0) for o in self.outcomes),
            "no_leader_ms": sum(o.timeline.get("no_leader_ms", 0) for o in self.outcomes),
            "under_min_isr_ms": sum(o.timeline.get("under_min_isr_ms", 0)
                                    for o in self.outcomes),
            "elections": sum(o.timeline.get("elections", 0) for o in self.outcomes),
            "unclean_elections": sum(o.timeline.get("unclean_elections", 0)
                                     for o in self.outcomes),
            "failed_runs": [o.seed for o in self.failed],
            "liveness_failed_runs": [o.seed for o in self.outcomes if o.liveness],
            "seconds": round(self.seconds, 2),
            "replay_events_per_second": round(events / replay) if replay else None,
            "promises_durability": promises_durability(self.config),
        }


def run_campaign(config: ClusterConfig, options: SimOptions, runs: int, out: Path | None,
                 keep: str = "failing", workers: int | None = None, progress=None,
                 stop_at_first_failure: bool = False, spark: str | None = None,
                 dataset: str | None = None) -> CampaignResult:
    """Runs seeds options.seed .. options.seed + runs - 1; see the module docstring.

    `spark`: a Spark master (`local[2]`, `spark://host:7077`; "" for the master of the
    session spark-submit started) to run the seeds as Spark tasks
    instead of a local process pool. Each task simulates, replays and history-checks one run
    and writes its traces (as `keep` says) under `out`, which on a cluster must be a path
    every executor shares; only each run's outcome (a few hundred bytes) reaches the driver.
    Same seeds, same outcomes: a run depends on its seed alone.

    `dataset` (with `spark`): also write every run's trace lines, parsed in the same job, to
    the Parquet dataset at that path (`pyspark_harness.ingest`'s layout, replaced), so that
    `isrlab analyze DATASET --from-parquet` reads them without ingesting NDJSON. The traces
    go from the task that simulated them to the writer on the executors, never through the
    driver."""
    from dataclasses import replace

    started = time.perf_counter()
    jobs = [(config, replace(options, seed=options.seed + i), out, keep) for i in range(runs)]
    workers = max(1, min(workers or os.cpu_count() or 1, runs))
    outcomes: list[RunOutcome] = []
    if spark is not None:
        from pyspark_harness.session import get_session, master_problem

        if master_problem(spark or None):
            raise CampaignError(f"--spark {spark}: {master_problem(spark)}")
        try:
            session = get_session(spark or None, app_name="isrlab-campaign")
            context = session.sparkContext
        except Exception as error:  # noqa: BLE001 (a bad master comes back as a JVM error)
            text = str(error).strip()
            raise CampaignError(f"--spark {spark}: Spark did not start: "
                                f"{text.splitlines()[0] if text else type(error).__name__}") \
                from None
        # Waves of eight runs per core, one run per task, each wave collected at once: a
        # Spark job runs its tasks in parallel, while a local iterator would run one
        # partition at a time. Outcomes reach the driver (and the progress) wave by wave.
        wave = max(1, context.defaultParallelism) * 8
        for start in range(0, runs, wave):
            chunk = jobs[start:start + wave]
            done = context.parallelize(chunk, len(chunk)).map(
                _worker_with_traces if dataset else _worker)
            if dataset:
                from pyspark_harness.ingest import parse_text, write_dataset

                # Kept on the executors between the two jobs below: the outcomes, then the
                # traces parsed and written (a lost block is simulated again: same seed,
                # same bytes).
                done = done.cache()
                collected = done.map(_without_traces).collect()
                files = session.createDataFrame(done.flatMap(_trace_files),
                                                "file string, value string")
                write_dataset(parse_text(files), dataset,
                              mode="append" if start else "overwrite")
                done.unpersist()
            else:
                collected = done.collect()
            for outcome in collected:
                outcomes.append(outcome)
                if progress:
                    progress(outcome, len(outcomes), runs)
                if stop_at_first_failure and outcome.failed:
                    break
            if stop_at_first_failure and outcomes and outcomes[-1].failed:
                break
    elif workers == 1:
        for job in jobs:
            outcomes.append(run_one(*job))
            if progress:
                progress(outcomes[-1], len(outcomes), runs)
            if stop_at_first_failure and outcomes[-1].failed:
                break
    else:

        with multiprocessing.get_context("fork").Pool(
                workers, initializer=die_with_parent, initargs=(os.getpid(),)) as pool:
            for outcome in pool.imap_unordered(_worker, jobs):
                outcomes.append(outcome)
                if progress:
                    progress(outcome, len(outcomes), runs)
                if stop_at_first_failure and outcome.failed:
                    pool.terminate()
                    break
    outcomes.sort(key=lambda o: o.seed)
    return CampaignResult(outcomes, time.perf_counter() - started, config)


def _judged(count: int, kind: str, bad: dict[str, int]) -> str:
    if not count:
        return "0"
    if bad.get(kind) == count:
        return f"{count} (bad for this config)"
    if bad.get(kind):
        return f"{count} ({bad[kind]} bad for this config)"
    return f"{count} (expected for this config)"


def format_summary(result: CampaignResult) -> str:
    s = result.summary()
    rows = [
        ("runs", s["runs"]), ("events", s["events"]), ("acked writes", s["acked_writes"]),
        ("divergences", s["divergences"]), ("unreadable traces", s["unreadable"]),
        ("not recovered after the faults healed", len(s["liveness_failed_runs"])),
        *((f"anomalies: {k}", _judged(v, k, s["anomalies_bad"]))
          for k, v in s["anomalies"].items()),
        ("excused writes (every ISR replica crashed)", s["excused_writes"]),
        ("failed runs", len(s["failed_runs"])),
        ("wall time (s)", s["seconds"]),
        ("replay events/s (per core)", s["replay_events_per_second"]),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"  {k.ljust(width)}  {v}" for k, v in rows]
    for o in result.failed[:5]:
        lines.append(f"  FAILED seed {o.seed}: {o.report.splitlines()[0] if o.report else ''}")
    for name, runs in s["broken_promises"].items():
        lines.append(f"  BROKEN PROMISE: {name} violated in {runs} of {s['runs']} runs, which "
                     "this configuration promises (a bug)")
    for name, trade in s["trade_offs"].items():
        lines.append(f"  TRADE-OFF: {name} violated in {trade['runs']} of {s['runs']} runs, not "
                     f"promised by this configuration: {trade['why']}")
    losing = [o for o in result.outcomes if o.loss_note]
    if losing:
        lines.append(f"  LOST ACKNOWLEDGED WRITES in {len(losing)} of {len(result.outcomes)} runs "
                     f"({s['acked_writes_lost_excused']} excused by the guarantee):")
        lines += [f"    seed {o.seed}: {o.loss_note}" for o in losing[:5]]
    return "\n".join(lines)

