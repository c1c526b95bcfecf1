"""Explicit Spark schemas for trace lines, generated from `vocab.trace`, and the stored tables.

Nothing is inferred: a corpus of millions of lines must not be scanned twice to guess types, and
a line whose field has the wrong type must be caught as malformed rather than widen a column.
The line schemas (`HEADER`, `EVENT`, `HISTORY`, `NEMESIS`, and their nested `CONFIG`, `ARGS`,
`STATE`) are generated from the structs of `vocab.trace` by `spark_struct`, so a field added to
the format reaches Spark with its type: every integer is a LongType, a string or a literal a
StringType, a list an ArrayType, a nested struct a StructType, and a free-form object (`detail`,
`outcome_args`) is kept as its raw JSON text. `acks` is a string ("all", "1", "0"): a number in
the JSON is kept as its text. Which fields a line must have (`REQUIRED`) and the values of a
history line's `type` come from the same structs.

`LINE` is the union of the four kinds, used to parse every line once; `_corrupt` receives the
text of a line Spark could not parse into it. `STORED` is what ingest writes: the parsed fields,
where the line came from, and the partition columns `table`, `config_key` and `run`.
"""

from __future__ import annotations

import msgspec
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

from vocab import trace as T

FORMAT = T.FORMAT
KINDS = tuple(T.LINES)

# The `table` partition value each valid kind is stored under; invalid lines go to MALFORMED.
TABLE_OF_KIND = {"header": "headers", "event": "events", "history": "history",
                 "nemesis": "nemesis"}
MALFORMED = "malformed"

# The configuration dimensions results are aggregated over, in the order of the config key.
CONFIG_DIMENSIONS = ("variant", "acks", "min_insync_replicas", "unclean_leader_election_enable",
                     "policy", "log_flush_interval_messages", "nemesis")

LONG = LongType()
TEXT = StringType()


def spark_type(t: msgspec.inspect.Type) -> DataType:
    """The Spark type of one field type of a `vocab.trace` struct (see the module docstring)."""
    i = msgspec.inspect
    if isinstance(t, i.UnionType):
        members = [m for m in t.types if not isinstance(m, i.NoneType)]
        if len(members) == 1:
            return spark_type(members[0])
    elif isinstance(t, i.IntType):
        return LONG
    elif isinstance(t, i.BoolType):
        return BooleanType()
    elif isinstance(t, i.StrType) or (isinstance(t, i.LiteralType)
                                      and all(isinstance(v, str) for v in t.values)):
        return TEXT
    elif isinstance(t, i.ListType):
        return ArrayType(spark_type(t.item_type))
    elif isinstance(t, i.StructType):
        return _fields(t)
    elif isinstance(t, i.DictType) and isinstance(t.value_type, i.AnyType):
        return TEXT
    raise TypeError(f"no Spark type for the trace field type {t!r}")


def _fields(info: msgspec.inspect.StructType) -> StructType:
    tag = [StructField(info.tag_field, TEXT, True)] if info.tag_field else []
    return StructType(tag + [StructField(f.encode_name, spark_type(f.type), True)
                             for f in info.fields])


def spark_struct(cls: type) -> StructType:
    """The Spark schema of a `vocab.trace` struct (a line kind's struct starts with `kind`)."""
    return _fields(msgspec.inspect.type_info(cls))


def required(cls: type) -> tuple[str, ...]:
    """The fields a struct of `vocab.trace` must have."""
    return tuple(f.encode_name for f in msgspec.inspect.type_info(cls).fields if f.required)


HEADER = spark_struct(T.HeaderLine)
EVENT = spark_struct(T.EventLine)
HISTORY = spark_struct(T.HistoryLine)
NEMESIS = spark_struct(T.NemesisLine)
CONFIG = spark_struct(T.HeaderConfig)
ARGS = spark_struct(T.Args)
STATE = spark_struct(T.State)
# The values of a history line's `type` (invoke, ok, fail, info).
HISTORY_TYPES = next(tuple(f.type.values) for f in msgspec.inspect.type_info(T.HistoryLine).fields
                     if f.name == "type")

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

# Fields each kind must have, checked after parsing (a missing one makes the line malformed),
# and the config fields a header must have.
REQUIRED = {kind: required(cls) for kind, cls in T.LINES.items()}
REQUIRED_CONFIG = required(T.HeaderConfig)

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

# Stored columns whose values are nearly all distinct (a line's text, numbers and times that
# grow along a run, message ids): Parquet's dictionary for them is built, hashed into and then
# thrown away for plain encoding, which cost the ingest about 8% for nothing (docs/spark.md).
# Named as Parquet names the leaf columns (a list's elements under `list.element`).
DISTINCT_COLUMNS = ("raw", "line", "seq", "time_ms", "outcome_args", "send.list.element",
                    "recv")

# The columns each stored table is read back with (besides config_key and run).
TABLE_COLUMNS = {
    "headers": ("file", "line", "node", "format", "mode", "commit", "seed", "config"),
    "events": ("file", "line") + tuple(f.name for f in EVENT.fields) + ("raw",),
    "history": ("file", "line") + tuple(f.name for f in HISTORY.fields),
    "nemesis": ("file", "line") + tuple(f.name for f in NEMESIS.fields),
    "malformed": ("file", "line", "reason", "raw"),
}

REPLAY = StructType([StructField(name, kind, True) for name, kind in (
    ("run", TEXT), ("verdict", TEXT), ("events", LONG), ("detail", TEXT))])
