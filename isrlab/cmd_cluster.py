"""`isrlab cluster sim|tcp`: run the reference broker cluster under faults and write its traces.

Both modes take the same options. `sim` runs every node in one process under virtual time
(deterministic: the same seed gives the same trace bytes); `tcp` runs each broker and the
metadata store as an OS process on 127.0.0.1 with real files, signals and sockets.
Exit 0 on a completed run, 2 on bad usage or config.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from impl.config import BUGS, VARIANTS, ClusterConfig, ClusterConfigError

NEMESIS = ("crash", "partition", "pause", "slow")


def parse_duration(text: str) -> int:
    """'60s', '500ms', '2m' or a bare number of seconds -> milliseconds."""
    match = re.fullmatch(r"(\d+)(ms|s|m)?", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"bad duration {text!r} (e.g. 60s, 500ms, 2m)")
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * {"ms": 1, "s": 1000, "m": 60_000}[unit]


def parse_nemesis(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in (x.strip() for x in text.split(",")) if k)
    for kind in kinds:
        if kind not in NEMESIS:
            raise argparse.ArgumentTypeError(
                f"unknown nemesis {kind!r} (known: {', '.join(NEMESIS)})")
    return kinds


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=int, default=None, help="random seed (printed; default 1)")
    p.add_argument("--brokers", type=int, default=3)
    p.add_argument("--partitions", type=int, default=1)
    p.add_argument("--duration", type=parse_duration, default=60_000, metavar="T",
                   help="simulated (sim) or real (tcp) run time, e.g. 60s, 500ms")
    p.add_argument("--nemesis", type=parse_nemesis, default=(), metavar="KINDS",
                   help=f"comma-separated faults: {','.join(NEMESIS)}")
    p.add_argument("--variant", default="current", help=", ".join(VARIANTS))
    p.add_argument("--acks", choices=("0", "1", "all", "-1"), default="all")
    p.add_argument("--min-isr", type=int, default=2, help="min.insync.replicas")
    p.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable")
    p.add_argument("--flush-interval", type=int, default=None, metavar="N",
                   help="log.flush.interval.messages (default: never flush on append)")
    p.add_argument("--faults", type=int, default=1, metavar="N",
                   help="faults at once (default 1: a majority stays healthy)")
    p.add_argument("--config", metavar="FILE.properties", help="Kafka-style settings")
    p.add_argument("--bug", action="append", default=[], metavar="NAME",
                   help=f"switch on a seeded implementation bug: {', '.join(BUGS)}")


_PROPERTIES = {
    "acks": ("acks", str),
    "min.insync.replicas": ("min_insync_replicas", int),
    "unclean.leader.election.enable": ("unclean_leader_election_enable",
                                       lambda v: {"true": True, "false": False}[v.lower()]),
    "log.flush.interval.messages": ("log_flush_interval_messages", int),
    "replica.lag.time.max.ms": ("replica_lag_time_max_ms", int),
    "replica.fetch.wait.max.ms": ("replica_fetch_wait_max_ms", int),
    "session.timeout.ms": ("session_timeout_ms", int),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", int),
    "request.timeout.ms": ("request_timeout_ms", int),
    "variant": ("variant", str),
}


def load_cluster_properties(path: str) -> dict:
    """Kafka-style `key=value` lines; any problem is a ClusterConfigError naming file:line."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as error:
        raise ClusterConfigError(f"{path}: cannot read: {error.strerror}") from None
    values: dict = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in _PROPERTIES:
            known = ", ".join(sorted(_PROPERTIES))
            raise ClusterConfigError(f"{path}:{number}: unknown key {key!r} (known: {known})")
        name, parse = _PROPERTIES[key]
        try:
            values[name] = parse(value)
        except (KeyError, ValueError):
            raise ClusterConfigError(f"{path}:{number}: {key}: bad value {value!r}") from None
    return values


def cluster_config(args: argparse.Namespace) -> ClusterConfig:
    values = load_cluster_properties(args.config) if args.config else {}
    values.update(
        brokers=args.brokers, partitions=args.partitions, variant=args.variant,
        acks="all" if args.acks == "-1" else args.acks, min_insync_replicas=args.min_isr,
        bugs=frozenset(args.bug),
    )
    if args.unclean:
        values["unclean_leader_election_enable"] = True
    if args.flush_interval is not None:
        values["log_flush_interval_messages"] = args.flush_interval
    config = ClusterConfig(**values)
    if config.min_insync_replicas > config.brokers:
        raise ClusterConfigError(f"min.insync.replicas: {config.min_insync_replicas} exceeds "
                                 f"the {config.brokers} brokers")
    return config


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
        f"partitions {summary['partitions']}; {summary['events']} trace events",
    ]


def _run(args: argparse.Namespace, usage_error) -> int:
    try:
        config = cluster_config(args)
    except ClusterConfigError as error:
        print(f"isrlab cluster: error: {error}", file=sys.stderr)
        return 2
    seed = 1 if args.seed is None else args.seed
    out = Path(args.trace_out)
    if args.mode == "sim":
        from impl.sim import SimOptions, simulate

        options = SimOptions(seed=seed, duration_ms=args.duration, nemesis=args.nemesis,
                             commit=_commit(), max_faults=args.faults)
        print(f"isrlab cluster sim: seed {seed}, {config.brokers} brokers, "
              f"{config.partitions} partitions, {args.duration / 1000:g} s simulated, "
              f"nemesis {','.join(args.nemesis) or 'none'}")
        result = simulate(config, options)
        result.write(out)
        summary = result.summary
    else:
        from impl.tcp import TcpOptions, run_cluster

        options = TcpOptions(seed=seed, duration_ms=args.duration, nemesis=args.nemesis,
                             commit=_commit(), base_port=args.base_port)
        print(f"isrlab cluster tcp: seed {seed}, {config.brokers} broker processes on "
              f"127.0.0.1, {args.duration / 1000:g} s, nemesis {','.join(args.nemesis) or 'none'}")
        summary = run_cluster(config, options, out)
    for line in _summary_lines(summary):
        print(line)
    print(f"  traces: {out}/ (replay with: isrlab replay {out})")
    return 0


def register(sub, usage_error) -> None:
    cluster = sub.add_parser("cluster", help="run the reference broker cluster (sim or tcp)",
                             description=__doc__.splitlines()[0])
    modes = cluster.add_subparsers(dest="mode", metavar="MODE", required=True,
                                   parser_class=type(cluster))
    for mode, what in (("sim", "deterministic simulation under virtual time"),
                       ("tcp", "OS processes on 127.0.0.1 with real files and signals")):
        p = modes.add_parser(mode, help=what)
        add_cluster_options(p)
        p.add_argument("--trace-out", required=True, metavar="DIR", help="where traces go")
        if mode == "tcp":
            p.add_argument("--base-port", type=int, default=0,
                           help="first port (default: any free ports)")
        p.set_defaults(func=lambda args: _run(args, usage_error))
