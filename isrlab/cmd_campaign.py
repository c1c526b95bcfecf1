"""`isrlab campaign --runs N --seed S [cluster options]`: simulate, replay and history-check
N runs with seeds S, S+1, ...

Exit 0 when every run replays, breaks no invariant its configuration promises (spec.promises;
one it does not promise is listed as a TRADE-OFF) and, for a configuration that promises
durability (acks=all, clean election), shows no anomaly; 1 otherwise (failing runs' traces are
kept under --out with their seeds); 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from isrlab.cmd_cluster import add_sim_options
from isrlab.options import (
    MESSAGE_FAULTS,
    WORKERS,
    UsageError,
    absolute_path,
    add_cluster_options,
    add_quiet_option,
    cluster_config,
    integer,
    output_dir,
    progress,
)
from vocab.anomalies import DUPLICATE, LOST_WRITE


def _clients(text: str) -> list[str]:
    from impl.kafka.clients import CLIENTS

    names = [c.strip() for c in text.split(",") if c.strip()]
    unknown = [c for c in names if c not in CLIENTS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{(unknown or [text])[0][:40]!r}: not a client "
                                         f"(known: {', '.join(CLIENTS)})")
    return names


def run(args) -> int:
    if args.target == "kafka" and not args.clients:
        args.clients = ["confluent-kafka"]
    if args.clients:
        return run_clients(args)
    if "controller-kill" in args.nemesis:
        raise UsageError("--nemesis: controller-kill is for --target kafka (the reference "
                         "broker's controller does not fail over)")
    if not args.duration:
        raise UsageError("--duration 0 (run until stopped) is for isrlab cluster tcp")
    from impl.sim import SimOptions
    from model_check.conformance.campaign import CampaignError, format_summary, run_campaign
    from model_check.explore.progress import campaign_progress

    output_dir("--out", args.out)
    config = cluster_config(args)
    seed = 1 if args.seed is None else args.seed
    nemesis = args.nemesis if args.nemesis else ("crash", "partition", "pause")
    options = SimOptions(seed=seed, duration_ms=args.duration, nemesis=nemesis,
                         max_faults=args.faults, liveness_ms=args.liveness)
    out = Path(args.out)
    if args.spark == SUBMITTED_OR_LOCAL:
        # spark-submit starts the JVM with its own master and sets the gateway port.
        args.spark = "" if "PYSPARK_GATEWAY_PORT" in os.environ else "local[2]"
    dataset = str((out / "dataset").resolve()) if args.spark is not None and args.dataset \
        else None
    if not args.json:
        print(f"isrlab campaign: {args.runs} runs, seeds {seed}..{seed + args.runs - 1}, "
              f"variant {config.variant}, acks={config.acks}, min ISR "
              f"{config.min_insync_replicas}, unclean {config.unclean_leader_election_enable}, "
              f"nemesis {','.join(nemesis)}, {args.duration / 1000:g} s each"
              + (f", bugs {','.join(sorted(config.bugs))}" if config.bugs else ""))
    try:
        with progress(args, "runs", total=args.runs) as shown:
            result = run_campaign(config, options, args.runs, out, keep=args.keep,
                                  workers=args.workers, progress=campaign_progress(shown),
                                  spark=args.spark, dataset=dataset)
    except CampaignError as error:
        raise UsageError(str(error)) from None
    summary = result.summary()
    if args.json:
        print(json.dumps(summary, sort_keys=True))
    else:
        print(format_summary(result))
        if result.failed and args.keep != "none":
            print(f"  failing runs' traces: {out}/run-<seed>/ (replay with isrlab replay)")
        if dataset:
            print(f"  every run's trace lines as Parquet: {dataset} (isrlab analyze "
                  f"{dataset} --from-parquet --out REPORT_DIR)")
    if args.keep != "none":
        out.mkdir(parents=True, exist_ok=True)
        (out / "campaign.json").write_text(json.dumps(
            {"summary": summary, "config": config.to_json(), "seed": seed, "runs": args.runs,
             "nemesis": list(nemesis), "duration_ms": args.duration}, sort_keys=True) + "\n")
    return 1 if result.failed else 0


def run_clients(args) -> int:
    """Real Kafka clients against a cluster, one fresh cluster per seed
    (model_check/conformance/kafka_runs.py): the reference broker's TCP cluster, or Apache Kafka with
    `--target kafka`. A run fails when the reference broker's traces do not replay, or when
    a configuration that promises durability lost an acknowledged write. Each run's
    `result.json` holds its target, config, client history verdict and fault counts."""
    from model_check.conformance.campaign import promises_durability
    from model_check.conformance.history import check_history, load_history
    from model_check.conformance.kafka_runs import (
        KafkaRunError,
        kafka_batch,
        kafka_run,
        unavailable_seconds,
    )

    output_dir("--out", args.out)
    config = cluster_config(args)
    seed = 1 if args.seed is None else args.seed
    kafka = args.target == "kafka"
    default = ("crash", "pause") if kafka else ("crash", "partition", "pause")
    nemesis = args.nemesis if args.nemesis else default
    simulated = [k for k in nemesis if k in MESSAGE_FAULTS]
    if simulated:
        raise UsageError(f"--nemesis: {simulated[0]} runs in the simulator only (campaign "
                         "without --clients)")
    cluster_args = ["--brokers", str(config.brokers), "--partitions", str(config.partitions),
                    "--min-isr", str(config.min_insync_replicas),
                    "--unclean" if config.unclean_leader_election_enable else "--no-unclean",
                    "--elr" if config.eligible_leader_replicas_enable else "--no-elr",
                    "--nemesis", ",".join(nemesis)]
    if not kafka:
        cluster_args += ["--variant", config.variant]
    if config.replication_factor:
        cluster_args += ["--replication-factor", str(config.replication_factor)]
    if config.log_flush_interval_messages:
        cluster_args += ["--flush-interval", str(config.log_flush_interval_messages)]
    # On Kafka the sends are spread over --duration so that they meet the nemesis's faults
    # (a few seconds apart); the reference campaign sends as fast as the clients go.
    until_ms = args.duration if kafka else None
    durable = promises_durability(config)
    out = Path(args.out)
    where = "Apache Kafka" if kafka else "TCP"
    print(f"isrlab campaign: {args.runs} {where} runs with {', '.join(args.clients)}, "
          f"{args.count} records per client, seeds {seed}..{seed + args.runs - 1}, "
          f"acks={config.acks}, min ISR {config.min_insync_replicas}, unclean "
          f"{config.unclean_leader_election_enable}, nemesis {','.join(nemesis)}", flush=True)
    failed = 0
    totals = {"acked": 0, "lost": 0, "duplicates": 0, "events": 0, "unavailable_s": 0}
    results = []
    seeds = list(range(seed, seed + args.runs))
    batch = args.runs_per_cluster if kafka else 1
    with progress(args, "runs", total=args.runs) as shown:
        for first in range(0, len(seeds), batch):
            group = seeds[first:first + batch]
            if batch > 1:
                try:
                    runs = kafka_batch(out, group, tuple(args.clients), args.count,
                                       acks=config.acks, cluster_args=tuple(cluster_args),
                                       until_ms=until_ms)
                except KafkaRunError as error:
                    runs = [error] * len(group)
                runs += [KafkaRunError("the batch's cluster stopped first")] * (len(group) - len(runs))
            else:
                try:
                    runs = [kafka_run(out / f"run-{group[0]}", tuple(args.clients), args.count,
                                      acks=config.acks, cluster_args=tuple(cluster_args),
                                      seed=group[0], until_ms=until_ms, target=args.target)]
                except KafkaRunError as error:
                    runs = [error]
            for s, r in zip(group, runs, strict=True):
                if isinstance(r, KafkaRunError):
                    print(f"  seed {s}: FAILED: {r}")
                    failed += 1
                    results.append({"seed": s, "target": args.target, "failed": True,
                                    "error": str(r)})
                    continue
                run_dir = out / f"run-{s}"
                acked = sum(r.history.acked.values())
                lost = r.history.counts[LOST_WRITE]
                replayed = r.replay.verdict if r.replay else "none (no broker traces)"
                bad = (r.replay is not None and r.replay.verdict != "accepted") or (
                    durable and lost > 0)
                failed += bad
                down = unavailable_seconds(run_dir)
                totals["acked"] += acked
                totals["lost"] += lost
                totals["duplicates"] += r.history.counts[DUPLICATE]
                totals["events"] += r.replay.events if r.replay else 0
                totals["unavailable_s"] += down
                anomalies = ", ".join(f"{k} {n}" for k, n in r.history.counts.items() if n) \
                    or "none"
                if kafka:
                    j = r.run_json or {}
                    faults = (f"faults: crashes {j.get('crashes', 0)}, pauses {j.get('pauses', 0)}"
                              f", partitions {j.get('partitions', 0)}")
                else:
                    faults = next((line.strip().split(";")[0]
                                   for line in r.cluster_output.splitlines()
                                   if line.strip().startswith("faults:")), "faults: unknown")
                result = {"seed": s, "run": f"seed-{s}", "target": args.target,
                          "failed": bool(bad), "config": config.to_json(),
                          "clients": list(args.clients), "history": r.history.to_json(),
                          "replay": replayed, "told": r.told, "unavailable_seconds": down,
                          "faults": faults}
                if kafka:
                    # What the history lines alone show (no read-back as the final log): what
                    # isrlab analyze counts from the same files.
                    lines_only = check_history(load_history([run_dir])).to_json()["anomalies"]
                    result["history_from_traces"] = {"anomalies": lines_only}
                (run_dir / "result.json").write_text(json.dumps(result, sort_keys=True) + "\n")
                results.append(result)
                events = f" ({r.replay.events:,} events)" if r.replay else ""
                print(f"  seed {s}: {'FAILED' if bad else 'ok'}: replay {replayed}{events}, "
                      f"{acked:,} acknowledged, anomalies: {anomalies}; {down} s unavailable; "
                      f"{faults}", flush=True)
            shown.update(first + len(group), failed=failed)
    print(f"  total: {totals['acked']:,} acknowledged writes, {totals['lost']:,} lost "
          f"({'durability promised' if durable else 'no durability promised'}), "
          f"{totals['duplicates']:,} duplicates (client retries, no idempotence), "
          f"{totals['unavailable_s']} s unavailable, "
          f"{totals['events']:,} events replayed; {failed} of {args.runs} runs failed")
    out.mkdir(parents=True, exist_ok=True)
    (out / "campaign.json").write_text(json.dumps(
        {"target": args.target, "config": config.to_json(), "seed": seed, "runs": args.runs,
         "nemesis": list(nemesis), "clients": list(args.clients), "totals": totals,
         "failed": failed, "durable": durable,
         "results": [{k: v for k, v in r.items() if k != "config"} for r in results]},
        sort_keys=True) + "\n")
    return 1 if failed else 0


SUBMITTED_OR_LOCAL = "submitted-or-local"  # --spark without a master


def register(sub) -> None:
    p = sub.add_parser("campaign", help="many simulated runs, each replayed and history-checked",
                       description=__doc__.split("\n\n")[0])
    add_cluster_options(p)
    add_sim_options(p)
    p.set_defaults(duration=20_000)
    p.add_argument("--runs", type=integer(1, 10**6), default=20)
    p.add_argument("--workers", type=WORKERS, default=None,
                   help="processes (default: all cores; at most 4 per core)")
    p.add_argument("--out", type=absolute_path, default="campaign-out", metavar="DIR")
    p.add_argument("--spark", nargs="?", const=SUBMITTED_OR_LOCAL, default=None,
                   metavar="MASTER",
                   help="run the seeds as Spark tasks on MASTER (default local[2], or "
                   "spark-submit's master under spark-submit) instead of a local process "
                   "pool; same seeds, same results (docs/spark.md)")
    p.add_argument("--dataset", action=argparse.BooleanOptionalAction, default=True,
                   help="with --spark: write every run's trace lines to OUT/dataset as "
                   "Parquet in the same job, for isrlab analyze --from-parquet (default on)")
    p.add_argument("--keep", choices=("failing", "all", "none"), default="failing",
                   help="which runs' traces to write (all: a corpus for isrlab analyze)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_quiet_option(p)
    p.add_argument("--clients", type=_clients, default=None, metavar="LIST",
                   help="real Kafka clients against the TCP cluster instead of simulated runs: "
                        "kafka-python,confluent-kafka,aiokafka (docs/kafka.md)")
    p.add_argument("--target", choices=("reference", "kafka"), default="reference",
                   help="with real clients: the reference broker (default) or Apache Kafka's "
                        "own jars (isrlab cluster kafka; --clients defaults to confluent-kafka)")
    p.add_argument("--runs-per-cluster", type=integer(1, 1000), default=1, metavar="K",
                   help="with --target kafka: K runs on one cluster, each on a topic of its "
                        "own, the nemesis running through them (default 1: a fresh cluster "
                        "per run)")
    p.add_argument("--count", type=integer(1, 10**7), default=1000, metavar="N",
                   help="records per client with --clients (default 1000)")
    p.set_defaults(func=run, error_prefix="isrlab campaign")
