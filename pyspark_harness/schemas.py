"""Explicit Spark schemas for `isrlab-trace/1` lines (docs/traces.md) and for the stored tables.

Nothing is inferred: a corpus of millions of lines must not be scanned twice to guess types, and
a line whose field has the wrong type must be caught as malformed rather than widen a column.
Every integer is a LongType. Free-form objects (`detail`, a metadata store's `registered`) are
kept as their raw JSON text. `acks` is a string ("all", "1", "0"): a number in the JSON is kept
as its text.

`LINE` is the union of the four kinds, used to parse every line once; `_corrupt` receives the
text of a line Spark could not parse into it. `STORED` is what ingest writes: the parsed fields,
where the line came from, and the partition columns `table`, `config_key` and `run`.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

FORMAT = "isrlab-trace/1"
KINDS = ("header", "event", "history", "nemesis")
HISTORY_TYPES = ("invoke", "ok", "fail", "info")

# The `table` partition value each valid kind is stored under; invalid lines go to MALFORMED.
TABLE_OF_KIND = {"header": "headers", "event": "events", "history": "history",
                 "nemesis": "nemesis"}
MALFORMED = "malformed"

# The configuration dimensions results are aggregated over, in the order of the config key.
CONFIG_DIMENSIONS = ("variant", "acks", "min_insync_replicas", "unclean_leader_election_enable",
                     "log_flush_interval_messages", "nemesis")


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, kind, True) for name, kind in fields])


LONG = LongType()
TEXT = StringType()

CONFIG = _struct(
    ("acks", TEXT),
    ("brokers", LONG),
    ("duration_ms", LONG),
    ("log_flush_interval_messages", LONG),
    ("min_insync_replicas", LONG),
    ("nemesis", ArrayType(TEXT)),
    ("partitions", LONG),
    ("replica_lag_time_max_ms", LONG),
    ("unclean_leader_election_enable", BooleanType()),
    ("variant", TEXT),
)

ARGS = _struct(*((name, LONG) for name in (
    "partition", "broker", "follower", "value", "offset", "leader_epoch", "partition_epoch")))

PARTITION_STATE = _struct(
    ("partition", LONG),
    ("leader", LONG),
    ("leader_epoch", LONG),
    ("isr", ArrayType(LONG)),
    ("partition_epoch", LONG),
)

STATE = _struct(
    # A replica's post-state.
    ("partition", LONG),
    ("broker", LONG),
    ("log_end_offset", LONG),
    ("high_watermark", LONG),
    ("flushed_offset", LONG),
    ("last", ArrayType(LONG)),
    ("epoch_cache", ArrayType(ArrayType(LONG))),
    ("leader", LONG),
    ("leader_epoch", LONG),
    ("isr", ArrayType(LONG)),
    ("partition_epoch", LONG),
    # A metadata-store transition's post-state: the changed partitions, and broker sessions.
    ("partitions", ArrayType(PARTITION_STATE)),
    ("registered", TEXT),
)

COMMON = (("kind", TEXT), ("node", TEXT), ("seq", LONG), ("time_ms", LONG))

HEADER = _struct(
    ("commit", TEXT),
    ("config", CONFIG),
    ("format", TEXT),
    ("kind", TEXT),
    ("mode", TEXT),
    ("node", TEXT),
    ("run", TEXT),
    ("seed", LONG),
)

EVENT = _struct(
    *COMMON,
    ("action", TEXT),
    ("args", ARGS),
    ("outcome", TEXT),
    ("recv", TEXT),
    ("send", ArrayType(TEXT)),
    ("state", STATE),
    ("detail", TEXT),
)

HISTORY = _struct(
    *COMMON,
    ("process", TEXT),
    ("type", TEXT),
    ("f", TEXT),
    ("partition", LONG),
    ("value", LONG),
    ("offset", LONG),
    ("acks", TEXT),
    ("error", TEXT),
    ("records", ArrayType(ArrayType(LONG))),
)

NEMESIS = _struct(
    *COMMON,
    ("f", TEXT),
    ("target", TEXT),
    ("groups", ArrayType(ArrayType(TEXT))),
    ("delay_ms", LONG),
)

CORRUPT = "_corrupt"


def _union(*schemas: StructType) -> StructType:
    fields: dict[str, StructField] = {}
    for schema in schemas:
        for field in schema.fields:
            seen = fields.setdefault(field.name, field)
            assert seen.dataType == field.dataType, f"{field.name} has two types in the format"
    return StructType(list(fields.values()))


# Every field any kind of line may carry, plus the parser's corrupt-record column.
LINE = StructType(_union(HEADER, EVENT, HISTORY, NEMESIS).fields
                  + [StructField(CORRUPT, TEXT, True)])

# Fields each kind must have, checked after parsing (a missing one makes the line malformed).
REQUIRED = {
    "header": ("format", "node", "run", "config"),
    "event": ("node", "seq", "time_ms", "action", "outcome"),
    "history": ("node", "seq", "time_ms", "type", "f"),
    "nemesis": ("time_ms", "f"),
}
# The config fields a header must have: the ones the config key is made of (a null flush
# interval means "never flush"; a null nemesis list means none).
REQUIRED_CONFIG = ("variant", "acks", "min_insync_replicas", "unclean_leader_election_enable",
                   "brokers")

# What ingest writes, one row per line, in this column order. Columns a line's kind does not
# have are null. `raw` is the line's text for events (the replay reads it) and malformed lines
# (cut to RAW_MALFORMED_CHARS); `reason` says why a line is malformed.
RAW_MALFORMED_CHARS = 2000
PARTITION_COLUMNS = ("table", "config_key", "run")
STORED = StructType(
    [StructField("file", TEXT, True), StructField("line", IntegerType(), True)]
    + [field for field in _union(HEADER, EVENT, HISTORY, NEMESIS).fields if field.name != "run"]
    + [StructField("raw", TEXT, True), StructField("reason", TEXT, True)]
    + [StructField(name, TEXT, True) for name in PARTITION_COLUMNS]
)

# The columns each stored table is read back with (besides config_key and run).
TABLE_COLUMNS = {
    "headers": ("file", "line", "node", "format", "mode", "commit", "seed", "config"),
    "events": ("file", "line") + tuple(f.name for f in EVENT.fields) + ("raw",),
    "history": ("file", "line") + tuple(f.name for f in HISTORY.fields),
    "nemesis": ("file", "line") + tuple(f.name for f in NEMESIS.fields),
    "malformed": ("file", "line", "reason", "raw"),
}

REPLAY = _struct(("run", TEXT), ("verdict", TEXT), ("events", LONG), ("detail", TEXT))
