"""Options shared by several subcommands, and how their values become a config.

A setting comes from the command line when its flag is given, else from `--config FILE`, else
from the built-in default: flags default to None so that a file's value is never overwritten by
a default the user did not type.
"""

from __future__ import annotations

import argparse
import os
import re
import stat
import tempfile
from pathlib import Path

from impl.config import BUGS, VARIANTS, ClusterConfig
from vocab.config import (
    ACKS_ALIASES,
    ACKS_LEVELS,
    KEYS_BY_NAME,
    SWITCHABLE_RULES,
    ConfigError,
    Layer,
)
from vocab.properties import MAX_CONFIG_BYTES, load_pairs, not_regular, settings


class UsageError(Exception):
    """Bad usage the command line cannot catch by itself; `isrlab` prints it and exits 2."""


class OutputError(UsageError):
    """An output file could not be written (a full disk, say): one line, exit 2."""


ACKS_CHOICES = (*ACKS_LEVELS, *ACKS_ALIASES)

# More worker processes than this only thrash the machine (and a typo of 100000 would fork
# until the process table is full).
MAX_WORKERS = 4 * (os.cpu_count() or 1)
_INTEGER = re.compile(r"-?[0-9]+")


def shown(text: str, limit: int = 60) -> str:
    """A user's value, quoted, cut short: an error line never echoes megabytes."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


# Java's long: the widest integer any flag takes (a seed, a count), as Kafka's LONG.
LONG_MAX = (1 << 63) - 1


def integer(lo: int, hi: int | None = None):
    """An argparse type: a plain ASCII integer in [lo, hi] (Python's int() would also take
    other scripts' digits, underscores and spaces); without `hi`, at most LONG_MAX."""
    top = LONG_MAX if hi is None else hi

    def parse(text: str) -> int:
        if not _INTEGER.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{shown(text)} is not an integer")
        # More digits than a long has: out of range, without converting megabytes of them.
        value = int(text) if len(text) <= 40 else None
        if value is None or value < lo or value > top:
            shown_value = shown(text) if value is None else value
            if hi is not None:
                span = f"{lo}..{hi}"
            else:
                span = f">= {lo}" if value is not None and value < lo else f"<= {top}"
            raise argparse.ArgumentTypeError(f"{shown_value} is out of range ({span})")
        return value
    parse.__name__ = "integer"
    return parse


SEED = integer(0, LONG_MAX)
WORKERS = integer(1, MAX_WORKERS)
SMALL = integer(1, 64)  # brokers, partitions, min ISR and such model sizes

PORT_MIN = 1024  # below: ports only root may bind


def port(text: str) -> int:
    """An argparse type: a TCP port in PORT_MIN..65535, or 0 for any free port; plain ASCII
    digits only (int() would also take ' 2000', '+2000' and '2_000')."""
    value = integer(0, 65535)(text)
    if 0 < value < PORT_MIN:
        raise argparse.ArgumentTypeError(f"{value} is out of range ({PORT_MIN}..65535, or 0)")
    return value


def port_span(flag: str, first: int, count: int) -> None:
    """Refuse, naming `flag` as the user typed it, a first port whose `count` consecutive
    ports run past 65535 (0, any free ports, always fits)."""
    if first and first + count - 1 > 65535:
        raise UsageError(f"{flag}: {first} + {count} ports runs past 65535 (at most "
                         f"{65536 - count}, or 0 for any free ports)")


def workers_or_auto(text: str) -> int | str:
    """An argparse type: WORKERS, or `auto`."""
    if text == "auto":
        return text
    if not _INTEGER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{shown(text)} is neither an integer nor auto")
    return WORKERS(text)


workers_or_auto.__name__ = "workers"


def absolute_path(text: str) -> str:
    """An argparse type for every path flag: the path made absolute where the options are
    parsed, so that it names the same place in every process the command starts, whatever
    directory that process runs in (node processes start in the repository root)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return os.path.abspath(text)


absolute_path.__name__ = "path"


# Files --------------------------------------------------------------------------------------------
#
# A path flag is checked before any work: an input must be a regular file (a FIFO or /dev/zero
# would never end, a directory is not a file) no larger than its cap; an output must be a place
# a file (or directory) can be written, not a device, not under /proc or /sys. The checks run
# as argparse types (input_file, output_file_path, output_dir_path) or, where an in-process
# `main()` must return 2 rather than exit, at the top of run (check_input, output_file,
# output_dir). `write_output` then turns a failed write (a full disk) into one line.

# Inputs read whole (transcripts, lemma lists): far above any real one, far below the memory.
MAX_INPUT_BYTES = 16 << 20
# Pseudo-filesystems: a write there changes the kernel's settings or fails half-way.
SYSTEM_ROOTS = ("/proc", "/sys")


def shown_path(path: str) -> str:
    """A path in an error line: quoted, cut short only when absurdly long."""
    return shown(path, limit=256)


def input_problem(path: str, max_bytes: int = MAX_INPUT_BYTES) -> str | None:
    """Why `path` cannot be read as an input file (None when it can): os.stat, before any
    open, so that nothing blocks on a FIFO or reads a device."""
    try:
        st = os.stat(path)
    except OSError as error:
        return f"{shown_path(path)}: {error.strerror}"
    what = not_regular(st.st_mode)
    if what:
        return f"{shown_path(path)} is {what}, not a regular file"
    if st.st_size > max_bytes:
        return f"{shown_path(path)} is {st.st_size} bytes, more than the {max_bytes} this reads"
    return None


def _checked_path(problem, name: str):
    """An argparse type: the path made absolute (as `absolute_path`), refused with `problem`'s
    reason when it has one; `name` is what argparse calls the value."""
    def parse(text: str) -> str:
        path = absolute_path(text)
        why = problem(path)
        if why:
            raise argparse.ArgumentTypeError(why)
        return path
    parse.__name__ = name
    return parse


def input_file(max_bytes: int = MAX_INPUT_BYTES):
    """An argparse type for an input file flag: an existing regular file of at most
    `max_bytes`."""
    return _checked_path(lambda path: input_problem(path, max_bytes), "file")


CONFIG_FILE = input_file(MAX_CONFIG_BYTES)


def check_input(flag: str, path: str, max_bytes: int = MAX_INPUT_BYTES) -> None:
    """Refuse an input file as `input_file` does, for a path that is not parsed by a type
    (a positional list, say): a UsageError naming the flag."""
    why = input_problem(path, max_bytes)
    if why:
        raise UsageError(f"{flag}: {why}")


def read_input(flag: str, path: str, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """An input file's UTF-8 text; anything else is one UsageError line naming the flag. The
    checks are made again on the open file: a file swapped for a FIFO since is refused too."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as handle:
            what = not_regular(os.fstat(handle.fileno()).st_mode)
            if what:
                raise UsageError(f"{flag}: {shown_path(path)} is {what}, not a regular file")
            data = handle.read(max_bytes + 1)
    except OSError as error:
        raise UsageError(f"{flag}: {shown_path(path)}: {error.strerror}") from None
    if len(data) > max_bytes:
        raise UsageError(f"{flag}: {shown_path(path)} is more than the {max_bytes} bytes this reads")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{flag}: {shown_path(path)} is not UTF-8 text") from None


def _system_root(path: str) -> str | None:
    real = os.path.realpath(path)
    return next((root for root in SYSTEM_ROOTS
                 if real == root or real.startswith(root + os.sep)), None)


def _cannot_write_in(directory: str) -> str | None:
    """Why no file can be made in `directory` (None when one can): a real attempt, since
    os.access says yes to root on a read-only filesystem."""
    try:
        with tempfile.TemporaryFile(dir=directory):
            return None
    except OSError as error:
        return f"cannot write in {shown_path(directory)}: {error.strerror}"


def output_file_problem(path: str) -> str | None:
    """Why `path` cannot be written as an output file (None when it can)."""
    root = _system_root(path)
    if root:
        return f"{shown_path(path)} is under {root}, not a place for a file"
    target = Path(path)
    try:
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as error:
        return f"{shown_path(path)}: {error.strerror}"
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            return f"{shown_path(path)} is a directory"
        what = not_regular(st.st_mode)
        if what:
            return f"{shown_path(path)} is {what}, not a regular file"
    parent = target.parent
    if not parent.is_dir():
        return f"{shown_path(str(parent))} is not a directory"
    why = _cannot_write_in(str(parent))
    if why:
        return why
    if st is not None:
        try:  # opening for append writes nothing and says whether a write would be allowed
            os.close(os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC))
        except OSError as error:
            return f"{shown_path(path)} is not writable: {error.strerror}"
    return None


def output_dir_problem(path: str) -> str | None:
    """Why `path` cannot be (made and) written as an output directory (None when it can)."""
    root = _system_root(path)
    if root:
        return f"{shown_path(path)} is under {root}, not a place for a directory"
    target = Path(path)
    if target.exists() and not target.is_dir():
        return f"{shown_path(path)} exists and is not a directory"
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        return f"cannot write in {shown_path(str(existing))}: not a directory"
    return _cannot_write_in(str(existing))


# Argparse types for output flags, checked (`output_file_problem`, `output_dir_problem`) before
# any work is done.
output_file_path = _checked_path(output_file_problem, "file")
output_dir_path = _checked_path(output_dir_problem, "directory")


def write_output(flag: str, path: str, text: str) -> None:
    """Write an output file whole: into a temporary file beside it, renamed over it once
    written, so that a failed write (a full disk) leaves no half file and any old one as it
    was. Any OSError is an OutputError, one line naming the flag and the path."""
    real = os.path.realpath(path)  # through a symlink, not over it
    try:
        st = os.stat(real)
    except OSError:
        st = None
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            # Not a file to replace (a device the caller let through): written in place.
            with open(real, "w", encoding="utf-8") as out:
                out.write(text)
            return
        fd, temporary = tempfile.mkstemp(dir=os.path.dirname(real), prefix=".isrlab-")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
                os.fchmod(out.fileno(), st.st_mode & 0o777 if st else 0o666 & ~_umask())
            os.replace(temporary, real)
        except BaseException:
            try:
                os.unlink(temporary)
            except OSError:
                pass
            raise
    except OSError as error:
        raise OutputError(f"{flag}: cannot write {shown_path(path)}: {error.strerror}") from None


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--quiet", action="store_true",
                   help="no progress on stderr (ISRLAB_NO_PROGRESS=1 does the same)")


def progress(args: argparse.Namespace, what: str, total: int | None = None):
    """The command's progress display on stderr: none with --quiet or --json."""
    from model_check.explore.progress import Progress

    return Progress(what, total, quiet=args.quiet or getattr(args, "json", False))


def output_file(flag: str, path: str | None) -> None:
    """Refuse an output path that cannot be written, before any work is done."""
    why = None if path is None else output_file_problem(path)
    if why:
        raise UsageError(f"{flag}: {why}")


def output_dir(flag: str, path: str | None) -> None:
    """Refuse an output directory that cannot be made or written, before any work is done."""
    why = None if path is None else output_dir_problem(path)
    if why:
        raise UsageError(f"{flag}: {why}")


def acks_level(flag: str | None) -> str | None:
    """`--acks` as a level: `-1` is `all`."""
    return None if flag is None else ACKS_ALIASES.get(flag, flag)


# The model --------------------------------------------------------------------------------------


def kafka_config(args: argparse.Namespace, base=None):
    """The spec's config: the flags given, over `--config FILE`, over `base` (else the
    defaults). Shared by `check`, `fuzz` and `prove`."""
    from spec import VARIANTS, Config, load_properties

    base = base or Config()
    config = load_properties(args.config, base) if args.config else base
    if args.variant and args.variant not in VARIANTS:
        raise UsageError(f"--variant: unknown variant {args.variant!r} "
                         f"(known: {', '.join(VARIANTS)})")
    flags = {
        "variant": VARIANTS.get(args.variant) if args.variant else None,
        "brokers": args.brokers,
        "partitions": getattr(args, "partitions", None),
        "replication_factor": getattr(args, "replication_factor", None),
        "max_records": args.records,
        "max_leader_epochs": args.epochs,
        "max_crashes": args.crashes,
        "max_session_expiries": getattr(args, "expiries", None),
        "max_controller_failovers": getattr(args, "controller_failovers", None),
        "acks": acks_level(args.acks),
        "min_insync_replicas": args.min_isr,
        "unclean_leader_election_enable": args.unclean,
        "eligible_leader_replicas_enable": getattr(args, "elr", None),
        "last_known_leader_election_enable": getattr(args, "last_known_leader", None),
        "log_flush_interval_messages": getattr(args, "flush", None),
    }
    given = {k: v for k, v in flags.items() if v is not None}
    try:
        config = config.replace(**given)
    except ConfigError as error:
        raise _flag_error(error, given, args.config) from None
    without = getattr(args, "without", None) or []
    with_ = getattr(args, "with_rules", None) or []
    if set(without) & set(with_):
        raise UsageError(f"--with and --without name the same rule: "
                         f"{', '.join(sorted(set(without) & set(with_)))}")
    for flag, rules, has in (("--without", without, True), ("--with", with_, False)):
        for rule in rules:
            if rule not in SWITCHABLE_RULES:
                raise UsageError(f"{flag}: unknown rule {rule!r} (known: "
                                 f"{', '.join(SWITCHABLE_RULES)})")
            if bool(getattr(config.variant, rule)) != has:
                raise UsageError(f"{flag} {rule}: the variant {config.variant.name} "
                                 f"{'does not have' if has else 'already has'} that rule")
    if without or with_:
        config = config.replace(variant=config.variant.with_rules(
            **{rule: False for rule in sorted(set(without))},
            **{rule: True for rule in sorted(set(with_))}))
    return config


def flag_message(flag: str, error: ConfigError) -> str:
    """A config error about a value a flag set, named by the flag; the key too when its name
    differs (`--min-isr: min.insync.replicas: ...`, but `--brokers: ...`)."""
    message = str(error)
    if error.key and flag == f"--{error.key}" and message.startswith(f"{error.key}: "):
        message = message[len(error.key) + 2:]
    return f"{flag}: {message}"


# A spec Config field -> the flag of check, prove and fuzz that sets it.
MODEL_FLAGS = {
    "brokers": "--brokers", "partitions": "--partitions",
    "replication_factor": "--replication-factor", "max_records": "--records",
    "max_leader_epochs": "--epochs", "max_crashes": "--crashes",
    "max_session_expiries": "--expiries", "max_controller_failovers": "--controller-failovers",
    "acks": "--acks", "min_insync_replicas": "--min-isr",
    "log_flush_interval_messages": "--flush",
}


def _flag_error(error: ConfigError, given: dict, config_file: str | None) -> ConfigError:
    """A value refused by the config, named by the flag that set it (`--min-isr:
    min.insync.replicas: ...`), or by the flag that moved its bound when the key came from
    the file (`--brokers 2` under a file's `min.insync.replicas=3`)."""
    key = KEYS_BY_NAME.get(error.key or "")
    if key is None or key.model is None:
        return error
    if key.model.field in given and key.model.field in MODEL_FLAGS:
        return ConfigError(flag_message(MODEL_FLAGS[key.model.field], error), key=error.key)
    bound = KEYS_BY_NAME.get(key.model.max) if isinstance(key.model.max, str) else None
    if bound is not None and bound.model.field in given and bound.model.field in MODEL_FLAGS:
        where = f" (set in {config_file})" if config_file else ""
        return ConfigError(f"{MODEL_FLAGS[bound.model.field]}: {error}{where}", key=error.key)
    return error


def add_expiries_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--expiries", type=integer(0, 1000), metavar="N",
                   help="max session expiries of live brokers (a zombie fenced without a "
                   "crash), default 1")


def add_rule_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--without", action="append", metavar="RULE",
                   help="switch off one rule of the variant (a mutant named VARIANT+RULE=False; "
                   f"repeatable): {', '.join(SWITCHABLE_RULES)}")
    p.add_argument("--with", action="append", metavar="RULE", dest="with_rules",
                   help="switch on one rule the variant lacks (VARIANT+RULE=True; repeatable), "
                   "e.g. broker_epochs in kip-320, so that the bug it fixes (B7) cannot hide "
                   "another")


def invariant_names(
    args: argparse.Namespace, known: list[str], default: list[str] | None = None
) -> list[str]:
    """`--invariant` names checked against `known` (all of them, or `default`, when none)."""
    if args.no_invariants:
        return []
    if not args.invariant:
        return known if default is None else default
    for name in args.invariant:
        if name not in known:
            raise UsageError(f"--invariant: unknown invariant {name!r} (known: {', '.join(known)})")
    return list(args.invariant)


# The reference broker cluster -------------------------------------------------------------------

# Faults of inter-node messages (impl.sim.MESSAGE_FAULTS): the reference broker's clusters only.
MESSAGE_FAULTS = ("drop", "duplicate", "delay")
NEMESIS = ("crash", "partition", "pause", "slow", "isr-kill", "isr-kill-process",
           "isr-kill-all", "controller-kill", *MESSAGE_FAULTS)

# A cluster's partitions unless the flags or the config file say otherwise: enough for
# leadership to spread over three brokers (two per broker).
CLUSTER_PARTITIONS = 6

# Flags that set a config key: (argparse dest, key).
CLUSTER_FLAGS = (
    ("brokers", "brokers"),
    ("partitions", "partitions"),
    ("replication_factor", "replication.factor"),
    ("variant", "variant"),
    ("acks", "acks"),
    ("min_isr", "min.insync.replicas"),
    ("unclean", "unclean.leader.election.enable"),
    ("elr", "eligible.leader.replicas.enable"),
    ("last_known_leader", "last.known.leader.election.enable"),
    ("flush_interval", "log.flush.interval.messages"),
)


def parse_duration(text: str) -> int:
    """'60s', '500ms', '2m' or a bare number of seconds -> milliseconds (0: until stopped,
    where a command allows it)."""
    match = re.fullmatch(r"([0-9]{1,9})(ms|s|m)?", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"bad duration {shown(text)} (e.g. 60s, 500ms, 2m)")
    value, unit = int(match.group(1)), match.group(2) or "s"
    ms = value * {"ms": 1, "s": 1000, "m": 60_000}[unit]
    if not 0 <= ms <= 24 * 3_600_000:
        raise argparse.ArgumentTypeError(f"duration {shown(text)} out of range (0..24h)")
    return ms


def parse_nemesis(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in (x.strip() for x in text.split(",")) if k)
    for kind in kinds:
        if kind not in NEMESIS:
            raise argparse.ArgumentTypeError(
                f"unknown nemesis {kind!r} (known: {', '.join(NEMESIS)})")
    return kinds


def add_elr_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--elr", action=argparse.BooleanOptionalAction, default=None,
                   help="eligible.leader.replicas.enable: KIP-966 (default off)")
    p.add_argument("--last-known-leader", action=argparse.BooleanOptionalAction, default=None,
                   help="last.known.leader.election.enable: with ELR, elect the last known "
                   "leader when ISR and ELR are empty (default on, as Kafka)")


def add_model_options(p: argparse.ArgumentParser) -> None:
    """The protocol settings of a spec Config, shared by check, prove and fuzz: the variant, a
    Kafka-style config file, acks, unclean election, KIP-966 and the variant's rule switches."""
    p.add_argument("--variant", help="hw-truncation, kip-101, kip-279, kip-320, current")
    p.add_argument("--config", type=CONFIG_FILE, metavar="FILE.properties",
                   help="Kafka-style config file")
    p.add_argument("--acks", choices=ACKS_CHOICES)
    p.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=None,
                   help="unclean.leader.election.enable (default off)")
    add_elr_options(p)
    add_rule_options(p)


def add_cluster_options(p: argparse.ArgumentParser) -> None:
    defaults = ClusterConfig()
    p.add_argument("--seed", type=SEED, default=None, help="random seed (printed; default 1)")
    p.add_argument("--brokers", type=SMALL, help=f"default {defaults.brokers}")
    p.add_argument("--partitions", type=SMALL, help=f"default {CLUSTER_PARTITIONS}")
    p.add_argument("--replication-factor", type=SMALL, metavar="N",
                   help="replicas per partition, at most --brokers (default: every broker)")
    p.add_argument("--duration", type=parse_duration, default=60_000, metavar="T",
                   help="simulated (sim) or real (tcp) run time, e.g. 60s, 500ms")
    p.add_argument("--nemesis", type=parse_nemesis, default=(), metavar="KINDS",
                   help=f"comma-separated faults: {','.join(NEMESIS)}")
    p.add_argument("--variant", help=f"{', '.join(VARIANTS)} (default {defaults.variant})")
    p.add_argument("--acks", choices=ACKS_CHOICES, help=f"default {defaults.acks}")
    p.add_argument("--min-isr", type=SMALL,
                   help=f"min.insync.replicas (default {defaults.min_insync_replicas})")
    p.add_argument("--unclean", action=argparse.BooleanOptionalAction, default=None,
                   help="unclean.leader.election.enable (default off)")
    add_elr_options(p)
    p.add_argument("--flush-interval", type=integer(1), default=None, metavar="N",
                   help="log.flush.interval.messages (default: never flush on append)")
    p.add_argument("--faults", type=SMALL, default=1, metavar="N",
                   help="faults at once (default 1: a majority stays healthy; with --nemesis)")
    p.add_argument("--config", type=CONFIG_FILE, metavar="FILE.properties",
                   help="Kafka-style settings; flags given beside it win")
    p.add_argument("--bug", action="append", default=[], metavar="NAME",
                   help=f"switch on a seeded implementation bug: {', '.join(BUGS)}")


def cluster_config(args: argparse.Namespace) -> ClusterConfig:
    """The cluster's config: the flags given, over `--config FILE`, over the defaults.

    A bad file is a `vocab.properties.PropertiesError`, a bad value a
    `vocab.config.ConfigError`; both name the file and line when the value came from the file."""
    values: dict[str, object] = {"partitions": CLUSTER_PARTITIONS}
    where: dict[str, str] = {}
    if args.config:
        for line, key, value in settings(load_pairs(args.config), Layer.CLUSTER):
            values[key.cluster.field] = value
            where[key.name] = line
    for dest, name in CLUSTER_FLAGS:
        value = getattr(args, dest)
        if value is not None:
            values[KEYS_BY_NAME[name].cluster.field] = acks_level(value) if dest == "acks" else value
            where.pop(name, None)
    try:
        return ClusterConfig(bugs=frozenset(args.bug), **values)
    except ConfigError as error:
        # The line that set the key, else the line that set the key its range depends on.
        key = KEYS_BY_NAME.get(error.key or "")
        bound = key.cluster.max if key and key.cluster else None
        line = where.get(error.key or "") or (where.get(bound) if isinstance(bound, str) else None)
        # A rule between two keys (session.timeout.ms over heartbeat.interval.ms): the line of
        # the other key it names, when only that one came from the file.
        line = line or next((at for name, at in where.items()
                             if re.search(rf"\b{re.escape(name)}\b", str(error))), None)
        if line:
            raise ConfigError(f"{line}: {error}", key=error.key) from None
        flag = next((f"--{dest.replace('_', '-')}" for dest, name in CLUSTER_FLAGS
                     if name == error.key and getattr(args, dest) is not None), None)
        if flag:
            raise ConfigError(flag_message(flag, error), key=error.key) from None
        raise
