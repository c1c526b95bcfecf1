"""`isrlab cluster sim|tcp|kafka`: run the reference broker cluster (or Apache Kafka) under faults.

Both modes take the same options. `sim` runs every node in one process under virtual time
(deterministic: the same seed gives the same trace bytes); `tcp` runs each broker and the
metadata store as an OS process on 127.0.0.1 with real files, signals and sockets; `kafka`
runs Apache Kafka's own jars the same way (apache_kafka/run.py), for the same clients.
Exit 0 on a completed run, 1 when a node process died without a fault asking it to (named on
stderr and in run.json) or when the cluster did not recover within `--liveness`
after the faults healed (named on stderr and in run.json's summary), 2 on bad usage, config or
set-up (a port in use, say).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from isrlab.options import (
    MESSAGE_FAULTS,
    UsageError,
    absolute_path,
    add_cluster_options,
    cluster_config,
    integer,
    output_dir,
    parse_duration,
)


def _commit() -> str:
    import subprocess

    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=5, cwd=Path(__file__).resolve().parent)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _summary_lines(summary: dict) -> list[str]:
    leaders = ", ".join(f"p{p}->b{b}" if b >= 0 else f"p{p} offline"
                        for p, b in sorted(summary["leaders"].items(), key=lambda x: int(x[0])))
    return [
        f"  leaders at the end: {leaders}",
        f"  elections {summary['elections']} (unclean {summary['unclean_elections']}), "
        f"ISR shrinks {summary['isr_shrinks']}, expands {summary['isr_expands']}",
        f"  writes acked {summary['writes_acked']}, failed {summary['writes_failed']}, "
        f"unknown {summary['writes_unknown']}; consumer reads {summary['reads']}",
        f"  faults: crashes {summary['crashes']}, pauses {summary['pauses']}, "
        f"partitions {summary['partitions']}"
        + (f", message faults {summary['message_faults']} ({summary['dropped_messages']} "
           f"messages lost, {summary['duplicates_discarded']} copies discarded)"
           if summary.get("message_faults") else "")
        + f"; {summary['events']} trace events",
    ]


def run(args: argparse.Namespace) -> int:
    if args.mode == "kafka":
        return run_kafka(args)
    output_dir("--trace-out", args.trace_out)
    if "controller-kill" in args.nemesis:
        raise UsageError("--nemesis: controller-kill is for isrlab cluster kafka (the reference "
                         "broker's controller does not fail over)")
    config = cluster_config(args)
    seed = 1 if args.seed is None else args.seed
    out = Path(args.trace_out)
    if not args.duration and args.mode == "sim":
        raise UsageError("--duration 0 (run until stopped) is for isrlab cluster tcp")
    if args.mode == "sim":
        from impl.sim import SimOptions, simulate

        options = SimOptions(seed=seed, duration_ms=args.duration, nemesis=args.nemesis,
                             commit=_commit(), max_faults=args.faults,
                             liveness_ms=args.liveness)
        print(f"isrlab cluster sim: seed {seed}, {config.brokers} brokers, "
              f"{config.partitions} partitions, {args.duration / 1000:g} s simulated, "
              f"nemesis {','.join(args.nemesis) or 'none'}")
        result = simulate(config, options)
        result.write(out)
        summary = result.summary
    else:
        from impl.sim import ISR_KILLS
        from impl.tcp import ClusterError, TcpOptions, run_cluster

        late = [f[2] for f in args.fault if int(f[2][1:]) >= config.brokers]
        if late:
            raise UsageError(f"--fault: no broker {late[0]} ({config.brokers} brokers)")
        scripted = [k for k in args.nemesis if k in ISR_KILLS]
        if scripted:
            raise UsageError(f"--nemesis: {scripted[0]} runs in the simulator only "
                             f"(isrlab cluster sim)")

        # Kafka clients are served on --port-base (default 19092) when it is given or the
        # cluster runs until stopped; then isrlab's own producer and consumer stay idle.
        kafka = args.port_base is not None or not args.duration
        options = TcpOptions(seed=seed, duration_ms=args.duration, nemesis=args.nemesis,
                             commit=_commit(), base_port=args.base_port,
                             kafka_port_base=(DEFAULT_KAFKA_PORT if args.port_base is None
                                              else args.port_base) if kafka else None,
                             topic=args.topic, workload=not kafka,
                             faults=tuple(args.fault), liveness_ms=args.liveness)
        length = f"{args.duration / 1000:g} s" if args.duration else "until SIGINT/SIGTERM"
        print(f"isrlab cluster tcp: seed {seed}, {config.brokers} broker processes on "
              f"127.0.0.1, {length}, nemesis {','.join(args.nemesis) or 'none'}", flush=True)
        try:
            summary = run_cluster(config, options, out)
        except ClusterError as error:
            print(f"isrlab cluster tcp: {error}", file=sys.stderr)
            return 2
    for line in _summary_lines(summary):
        print(line)
    note = losses_note(out)
    if note:
        print(f"  LOST: {note}")
    print(f"  traces: {out}/ (replay with: isrlab replay {out})")
    failures = summary.get("node_failures", [])
    for f in failures:
        print(f"isrlab cluster: FAILED: {f['node']} exited with status {f['exit']} at "
              f"{f['time_ms'] / 1000:.1f} s without a fault asking it to (log: {f['log']})",
              file=sys.stderr)
    if summary.get("liveness"):
        print(f"isrlab cluster: FAILED: not recovered: {summary['liveness']}", file=sys.stderr)
    elif "live_after_ms" in summary:
        print(f"  recovered {summary['live_after_ms']} ms after the faults healed")
    return 1 if failures or summary.get("liveness") else 0


def losses_note(run_dir: Path) -> str | None:
    """The line that says which acknowledged writes the run lost and whether the guarantee
    excuses them (replaying the run to learn which it does); None when none were lost."""
    from model_check.conformance.losses import run_losses
    from model_check.conformance.replay import TraceError, load_run, replay_run

    try:
        run = load_run([run_dir])
    except TraceError as error:
        return f"cannot tell (the traces do not load: {error})"
    history = [e.body for events in run.nodes.values() for e in events
               if e.kind == "history"]
    meta = [e.body for e in run.nodes.get("meta", ()) if e.kind == "event"]
    final_logs = (run.run_json or {}).get("final_logs") or {}
    if not run_losses(history, final_logs, (), meta).lost:
        return None
    result = replay_run(run, check_invariants=False)
    note = run_losses(history, final_logs, result.excused_values, meta).note()
    if result.verdict != "accepted":
        note += " (replay diverged before the end: the excused count may be short)"
    return note


DEFAULT_KAFKA_PORT = 19092
TCP_FAULTS = ("crash", "partition", "pause", "slow", *MESSAGE_FAULTS)
KAFKA_FAULTS = ("crash", "pause", "partition", "controller-kill", "isr-kill-all")


def run_kafka(args: argparse.Namespace) -> int:
    """`isrlab cluster kafka`: Apache Kafka's own jars as a KRaft cluster (apache_kafka/)."""
    from apache_kafka.cluster import KafkaClusterError, KafkaSettings
    from apache_kafka.install import KAFKA_VERSION, InstallError
    from apache_kafka.run import KAFKA_NEMESIS, KafkaRunOptions
    from apache_kafka.run import run_kafka as start

    output_dir("--out", args.out)
    config = cluster_config(args)
    if config.bugs:
        raise UsageError("--bug: seeded bugs are the reference broker's (isrlab cluster sim|tcp)")
    unknown = [k for k in args.nemesis if k not in KAFKA_NEMESIS]
    if unknown:
        raise UsageError(f"--nemesis: {unknown[0]} is not run on Apache Kafka (known here: "
                         f"{', '.join(KAFKA_NEMESIS)})")
    for _, _, target, _ in args.fault:
        if target[0] == "b" and int(target[1:]) >= config.brokers:
            raise UsageError(f"--fault: no broker {target} ({config.brokers} brokers)")
    seed = 1 if args.seed is None else args.seed
    settings = KafkaSettings(
        brokers=config.brokers, partitions=config.partitions,
        replication_factor=config.replication_factor,
        min_insync_replicas=config.min_insync_replicas,
        unclean_leader_election_enable=config.unclean_leader_election_enable,
        eligible_leader_replicas_enable=config.eligible_leader_replicas_enable,
        log_flush_interval_messages=config.log_flush_interval_messages,
        replica_lag_time_max_ms=args.replica_lag_ms, topic=args.topic, topics=args.topics,
        port_base=args.port_base or 0, heap_mb=args.heap_mb, netns=args.netns)
    from vocab.trace import HeaderConfig

    # Only the keys every target shares: the reference broker's timers do not apply here.
    header = {k: v for k, v in config.to_json().items() if k in HeaderConfig.__struct_fields__}
    header.update(duration_ms=args.duration, nemesis=list(args.nemesis),
                  replica_lag_time_max_ms=args.replica_lag_ms)
    if args.fault:
        header["faults"] = sorted({f[1] for f in args.fault})
    options = KafkaRunOptions(seed=seed, duration_ms=args.duration, nemesis=args.nemesis,
                              faults=tuple(args.fault), commit=_commit())
    length = f"{args.duration / 1000:g} s" if args.duration else "until SIGINT/SIGTERM"
    where = "in network namespaces of their own" if settings.netns else "on 127.0.0.1"
    print(f"isrlab cluster kafka: Apache Kafka {KAFKA_VERSION}, seed {seed}, {config.brokers} "
          f"combined KRaft nodes {where}, {length}, nemesis "
          f"{','.join(args.nemesis) or 'none'}", flush=True)
    try:
        summary = start(settings, options, Path(args.out), header)
    except (KafkaClusterError, InstallError) as error:
        print(f"isrlab cluster kafka: {error}", file=sys.stderr)
        return 2
    leaders = ", ".join(f"p{p}->b{b}" if b >= 0 else f"p{p} offline"
                        for p, b in summary["leaders"].items()) or "unknown (no answer)"
    print(f"  started in {summary['start_seconds']:.1f} s; RSS per node (MB): "
          + ", ".join(f"{k} {v:.0f}" for k, v in summary["rss_mb"].items()))
    print(f"  leaders at the end: {leaders}; controller b{summary['controller']}")
    print(f"  faults: crashes {summary['crashes']} (controller {summary['controller_kills']}), "
          f"pauses {summary['pauses']}, partitions {summary['partitions']}")
    print(f"  logs and config: {args.out}/kafka-<id>/; faults: {args.out}/nemesis.ndjson")
    return 0


def _faults(kinds: tuple[str, ...], targets: str, shape: str):
    """An argparse type for `--fault AT_MS:KIND:TARGET:LENGTH_MS` of one mode."""
    def parse(text: str) -> tuple[int, str, str, int]:
        parts = text.split(":")
        ok = len(parts) == 4 and parts[0].isdigit() and parts[3].isdigit()
        if not ok or parts[1] not in kinds or not re.fullmatch(targets, parts[2]):
            raise argparse.ArgumentTypeError(
                f"{text[:60]!r}: expected {shape} with KIND one of {', '.join(kinds)}")
        return int(parts[0]), parts[1], parts[2], int(parts[3])
    parse.__name__ = "fault"
    return parse


_fault = _faults(TCP_FAULTS, r"b[0-9]{1,2}", "AT_MS:KIND:bN:LENGTH_MS")
_kafka_fault = _faults(KAFKA_FAULTS, r"b[0-9]{1,2}|leader|controller",
                       "AT_MS:KIND:TARGET:LENGTH_MS (TARGET bN, leader or controller)")


def _topic(text: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", text) or text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a Kafka topic name ([A-Za-z0-9._-], "
                                         "1..249 characters)")
    return text


def _port(text: str) -> int:
    try:
        value = int(text) if text.isascii() else None
    except ValueError:
        value = None
    if value is None or not (value == 0 or 1024 <= value <= 65535):
        raise argparse.ArgumentTypeError(f"{text[:40]!r}: a port in 1024..65535, or 0")
    return value


def add_sim_options(p: argparse.ArgumentParser) -> None:
    """What the reference broker's clusters run and Apache Kafka's does not: --liveness."""
    p.add_argument("--liveness", type=parse_duration, default=10_000, metavar="T",
                   help="after the faults heal at --duration, how long the cluster has to "
                   "lead every partition with a full ISR and acknowledge a write (default "
                   "10s; 0: no check)")


def register(sub) -> None:
    cluster = sub.add_parser("cluster", help="run the reference broker cluster (sim or tcp)",
                             description=__doc__.splitlines()[0])
    modes = cluster.add_subparsers(dest="mode", metavar="MODE", required=True,
                                   parser_class=type(cluster))
    for mode, what in (("sim", "deterministic simulation under virtual time"),
                       ("tcp", "OS processes on 127.0.0.1 with real files and signals")):
        p = modes.add_parser(mode, help=what)
        add_cluster_options(p)
        add_sim_options(p)
        p.add_argument("--trace-out", type=absolute_path, required=True, metavar="DIR",
                       help="where traces go")
        if mode == "tcp":
            p.add_argument("--base-port", type=_port, default=0,
                           help="first port of the cluster's own traffic (default: any free "
                                "ports)")
            p.add_argument("--port-base", type=_port, default=None, metavar="P",
                           help="serve Kafka clients: broker i on 127.0.0.1:P+i (default "
                                f"{DEFAULT_KAFKA_PORT} when --duration is 0, else not served)")
            p.add_argument("--fault", type=_fault, action="append", default=[],
                           metavar="AT:KIND:TARGET:LENGTH",
                           help="a scripted fault instead of the seeded nemesis, e.g. "
                                "1000:partition:b0:4000 (times in ms; repeatable, in order)")
            p.add_argument("--topic", default="isrlab", type=_topic,
                           help="the one topic Kafka clients see (its partitions: --partitions)")
        p.set_defaults(func=run, error_prefix="isrlab cluster")
    p = modes.add_parser("kafka", help="Apache Kafka's own jars as a KRaft cluster on "
                         "127.0.0.1 (fetched by make)")
    add_cluster_options(p)
    p.add_argument("--out", "--trace-out", dest="out", type=absolute_path, required=True,
                   metavar="DIR",
                   help="run directory: each node's storage, config and log4j output")
    p.add_argument("--port-base", type=_port, default=None, metavar="P",
                   help="broker i serves clients on port P+i of 127.0.0.1 (or of its "
                        "namespace's address) (default: any free ports)")
    p.add_argument("--fault", type=_kafka_fault, action="append", default=[],
                   metavar="AT:KIND:TARGET:LENGTH",
                   help="a scripted fault instead of the seeded nemesis, e.g. "
                        "4000:crash:leader:5000 (KIND crash, pause, partition, "
                        "controller-kill, isr-kill-all; TARGET bN, leader, controller)")
    p.add_argument("--topic", default="isrlab", type=_topic, help="the topic created")
    p.add_argument("--topics", type=integer(1, 1000), default=1, metavar="K",
                   help="create K topics, TOPIC-0 .. TOPIC-(K-1), each with --partitions (a "
                        "campaign batch gives each run its own; default 1: TOPIC alone)")
    p.add_argument("--replica-lag-ms", type=integer(600), default=10_000, metavar="MS",
                   help="replica.lag.time.max.ms (default 10000; Kafka's is 30000)")
    p.add_argument("--netns", action="store_true",
                   help="run each node in its own network namespace, on its own address, as "
                        "a partition fault does (root only; default: 127.0.0.1)")
    p.add_argument("--heap-mb", type=integer(256, 8192), default=512, metavar="MB",
                   help="each JVM's -Xmx (default 512)")
    p.set_defaults(func=run, error_prefix="isrlab cluster")
