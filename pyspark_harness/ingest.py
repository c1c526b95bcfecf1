"""NDJSON trace files to one Parquet dataset, partitioned by table, config key and run.

Theory of operation. Each file is read whole (`wholetext`), split on "\\n" and exploded with
its line numbers, all inside the JVM: that is what keeps a file and line number on every row
without a shuffle and without a Python round trip per line. A file may hold one run (the
broker's layout: one file per node) or several runs one after another: every line belongs to
the nearest `header` line above it, whose `run` and `config` it is stored under. Each line is
parsed once with the union schema `schemas.LINE`.

A line that cannot be used is never dropped and never stops the job: it is stored in the
`malformed` table with its file, line number, a one-line reason and (up to 2,000 characters
of) its text. Reasons: a blank line, not a JSON object, not valid JSON, a field of the wrong
type, an unknown or missing `kind`, a missing required field, what `vocab.trace.check` also
rejects in an event (an action or outcome not in the form of a name or code, a bad message
id, a send id of another node), no header above the line, or a header above it that is
itself invalid. A final "\\n" does not make an empty last line.

Limits: a file is one JVM string, so one file must stay well under 2 GB (a node's file of a
run is a few MB). Keys other than the format's are ignored by the parser.

Layout written: OUT/table=<headers|events|history|nemesis|malformed>/config_key=<key>/run=<run>/
with the columns of `schemas.STORED`. Lines without a usable header have a null config key
and run (Spark's `__HIVE_DEFAULT_PARTITION__` directory).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from pyspark_harness import schemas as S
from vocab import trace as T
from vocab.anomalies import KINDS

HEADER_PATTERN = r'"kind"\s*:\s*"header"'
# Lines are checked for size before the parser sees them, and the lines it rejects for
# nesting before anything that recurses reads them: the format nests at most 6 levels (a
# crash's post-state) and a node writes no line near 1 MB, while one line nested 100,000 deep
# would exhaust a recursive reader (a line nested deeper than MAX_DEPTH that still parses keeps
# the deep part in keys the parser ignores).
MAX_LINE_CHARS = 1 << 20
MAX_DEPTH = 16
_STRINGS = r'"(?:[^"\\]|\\.)*"'
PARSE_OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": S.CORRUPT}


class InputError(Exception):
    """Bad input named in one line: a missing path, no trace files, a bad campaign layout."""


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one ingest wrote: line counts per table, files read, and wall time."""

    out: str
    files: int
    lines_by_table: dict[str, int]
    runs: int
    seconds: float
    malformed_examples: tuple[tuple[str, int, str], ...] = field(default=())
    renamed: tuple[str, ...] = ()  # runs stored as `<id>@<hash>`: their id named several runs

    @property
    def lines(self) -> int:
        """Every line read, malformed ones included."""
        return sum(self.lines_by_table.values())

    @property
    def malformed(self) -> int:
        """Lines put aside in the malformed table."""
        return self.lines_by_table.get(S.MALFORMED, 0)


def find_trace_files(paths: list[str], campaign: bool = False) -> list[str]:
    """Absolute paths of the `*.ndjson` files named by `paths` (files, or dirs searched deeply).

    With `campaign`, every path must be a campaign directory and only its `run-*/` directories
    are read. Raises InputError naming the first path that does not fit.
    """
    found: list[str] = []
    for name in paths:
        path = Path(name)
        if not path.exists():
            raise InputError(f"{name}: no such file or directory")
        if campaign:
            if not path.is_dir():
                raise InputError(f"{name}: --runs-from campaign needs a campaign directory")
            run_dirs = sorted(d for d in path.glob("run-*") if d.is_dir())
            if not run_dirs:
                raise InputError(f"{name}: not a campaign directory (no run-*/ directories)")
            files = [f for d in run_dirs for f in sorted(d.glob("*.ndjson"))]
        elif path.is_dir():
            files = sorted(path.rglob("*.ndjson"))
        else:
            files = [path]
        if not files:
            raise InputError(f"{name}: no *.ndjson trace files")
        found.extend(str(f.resolve()) for f in files)
    return sorted(set(found))


def _missing(struct: Column, names: tuple[str, ...], prefix: str = "") -> Column:
    """The first `field NAME: missing` among `names` that is null in `struct`, else null."""
    return F.coalesce(*(F.when(struct[n].isNull(), F.lit(f"field {prefix}{n}: missing"))
                        for n in names))


def _header_reason(h: Column) -> Column:
    """Why a parsed header line cannot be used, or null."""
    return (
        F.when(h.isNull() | h[S.CORRUPT].isNotNull(), F.lit("header: not valid JSON or a field "
                                                            "has the wrong type"))
        .when(h["format"] != S.FORMAT,
              F.concat(F.lit(f"field format: expected {S.FORMAT}, found "), h["format"]))
        .otherwise(F.coalesce(_missing(h, S.REQUIRED["header"]),
                              _missing(h["config"], S.REQUIRED_CONFIG, "config."))))


def _wrong_type(line: Column, parsed: Column) -> Column:
    """For a line the parser marked corrupt: which top-level field has the wrong type."""
    names = [f.name for f in S.LINE.fields if f.name != S.CORRUPT]
    return F.coalesce(
        F.when(F.get_json_object(line, "$").isNull(), F.lit("not valid JSON")),
        *(F.when(parsed[n].isNull() & F.get_json_object(line, f"$.{n}").isNotNull(),
                 F.lit(f"field {n}: wrong type")) for n in names),
        F.lit("a field has the wrong type"),
    )


def _event_reason(p: Column) -> Column:
    """What `vocab.trace.check` rejects in a parsed event beyond types, or null: a missing
    field, an action name or outcome code of the wrong form, a bad message id, or a send id of
    another node."""
    def bad(field: str, pattern: str, what: str) -> Column:
        return F.when(~p[field].rlike(_whole(pattern)),
                      F.concat(F.lit(f"field {field}: {what} "), p[field]))

    bad_sends = F.filter(p["send"], lambda mid: ~mid.rlike(_whole(T.MESSAGE_ID_PATTERN)))
    foreign = F.filter(p["send"], lambda mid: F.substring_index(mid, ":", 1) != p["node"])
    return F.coalesce(
        _missing(p, S.REQUIRED["event"]),
        bad("action", T.ACTION_PATTERN, "not an action name:"),
        bad("outcome", T.CODE_PATTERN, "not an outcome code:"),
        bad("recv", T.MESSAGE_ID_PATTERN, "bad message id"),
        F.when(F.size(bad_sends) > 0,
               F.concat(F.lit("field send: bad message id "), bad_sends[0])),
        F.when(F.size(foreign) > 0,
               F.concat(F.lit("field send: an id of another node: "), foreign[0])),
    )


def _whole(pattern: str) -> str:
    r"""A `^...$` pattern of `vocab.trace` for Java's regex: `$` there also matches before a
    final line terminator, which Python's `fullmatch` does not accept; `\z` is the end."""
    return pattern[:-1] + r"\z" if pattern.endswith("$") else pattern


def _kind_reason(p: Column) -> Column:
    """Missing required fields of a parsed line of a known kind, or null."""
    history = F.coalesce(
        _missing(p, S.REQUIRED["history"]),
        F.when(~p["type"].isin(*S.HISTORY_TYPES),
               F.concat(F.lit("field type: unknown value "), p["type"])),
        F.when(p["f"] == "send", _missing(p, ("partition", "value"))),
        F.when((p["f"] == "send") & (p["type"] == "ok"), _missing(p, ("offset",))),
        F.when((p["f"] == "read") & (p["type"] == "ok"), _missing(p, ("partition", "records"))),
    )
    return (F.when(p["kind"] == "event", _event_reason(p))
            .when(p["kind"] == "history", history)
            .when(p["kind"] == "nemesis", _missing(p, S.REQUIRED["nemesis"])))


def election_policy(config: Column) -> Column:
    """What a run does when every ISR replica fails: clean, unclean, elr, elr+lkl (ELR with the
    last known leader, Kafka's default once ELR is on), and +unclean where ELR runs with unclean
    election enabled. Traces from before KIP-966 lack the ELR keys: ELR off."""
    elr = F.coalesce(config["eligible_leader_replicas_enable"], F.lit(False))
    lkl = F.coalesce(config["last_known_leader_election_enable"], F.lit(True))
    unclean = config["unclean_leader_election_enable"]
    return (F.when(~elr, F.when(unclean, "unclean").otherwise("clean"))
            .otherwise(F.concat(F.lit("elr"), F.when(lkl, "+lkl").otherwise(""),
                                F.when(unclean, "+unclean").otherwise(""))))


def config_key(config: Column) -> Column:
    """`variant_acks-A_isr-N_(un)clean_flush-F_nemesis-X+Y`: one readable string per config."""
    nemesis = F.coalesce(F.nullif(F.array_join(F.array_sort(config["nemesis"]), "+"),
                                  F.lit("")), F.lit("none"))
    return F.concat_ws(
        "_",
        config["variant"],
        F.concat(F.lit("acks-"), config["acks"]),
        F.concat(F.lit("isr-"), config["min_insync_replicas"].cast("string")),
        election_policy(config),
        F.concat(F.lit("flush-"), F.coalesce(
            config["log_flush_interval_messages"].cast("string"), F.lit("none"))),
        F.concat(F.lit("nemesis-"), nemesis),
    )


def too_long(line: Column) -> Column:
    """`line over ... characters`, or null."""
    # A line has no more characters than bytes: characters (a scan of every byte) are
    # counted only on the rare line with more bytes than the limit.
    return F.when((F.octet_length(line) > MAX_LINE_CHARS) & (F.length(line) > MAX_LINE_CHARS),
                  F.lit(f"line over {MAX_LINE_CHARS:,} characters"))


def too_deep(line: Column) -> Column:
    """`nested deeper than ...`, or null. Depth is counted on the brackets outside strings:
    each pass removes the innermost `[]` and `{}` pairs, so a line nested at most MAX_DEPTH
    deep has no bracket left after MAX_DEPTH passes."""
    # Most lines open too few brackets to nest that deep: one scan, which stops at the
    # (MAX_DEPTH + 1)th opening bracket, settles them; only the others pay for the passes.
    many = line.rlike(r"^(?:[^\[{]*+[\[{]){" + str(MAX_DEPTH + 1) + "}")
    left = F.regexp_replace(F.regexp_replace(line, _STRINGS, ""), r"[^\[\]{}]", "")
    for _ in range(MAX_DEPTH):
        left = F.regexp_replace(left, r"\[\]|\{\}", "")
    return F.when(many & (F.length(left) > 0),
                  F.lit(f"nested deeper than {MAX_DEPTH} levels (or brackets unbalanced)"))


def unsafe_reason(line: Column) -> Column:
    """Why a line must not be given to a parser that recurses (too long, too deep), or null."""
    return F.coalesce(too_long(line), too_deep(line))


def _identity(file: Column, header: Column) -> Column:
    """A run's identity: its directory and its header without the node's name. Two runs that
    share a run id (the same seed run twice with other settings, or copied side by side)
    differ in one or the other."""
    directory = F.regexp_extract(file, r"^(.*)/[^/]*$", 1)
    content = F.to_json(F.struct(header["run"], header["seed"], header["mode"],
                                 header["commit"], header["config"]))
    return F.sha2(F.concat_ws("\n", directory, content), 256)


def _stored_run(file: Column, header: Column,
                renamed: dict[tuple[str, str], str] | None) -> Column:
    """The run a header's lines are stored under: its run id, or the name `colliding_runs`
    gives a run whose id another run shares."""
    column = header["run"]
    if renamed:
        ident = _identity(file, header)
        for (run, identity), stored_as in renamed.items():
            column = F.when((header["run"] == run) & (ident == identity),
                            F.lit(stored_as)).otherwise(column)
    return column


def colliding_runs(spark: SparkSession, files: list[str]) -> dict[tuple[str, str], str]:
    """{(run id, identity): stored run name} for run ids that name more than one run: those
    are stored as `<run id>@<first 8 hex digits of the identity>`; others keep their id."""
    text = _header_candidates(spark, files)
    if text is None:
        # Line by line: only the header lines matter here.
        text = spark.read.text(files).select(F.col("_metadata.file_path").alias("file"),
                                             F.col("value").alias("text"))
    headers = (text.where(F.col("text").contains('"header"')
                          & F.col("text").rlike(HEADER_PATTERN)
                          & unsafe_reason(F.col("text")).isNull())
               .select("file", F.from_json("text", S.LINE, PARSE_OPTIONS).alias("h"))
               .where(F.col("h.run").isNotNull())
               .select(F.col("h.run").alias("run"),
                       _identity(F.col("file"), F.col("h")).alias("identity"))
               .distinct().collect())
    by_run: dict[str, list[str]] = {}
    for row in headers:
        by_run.setdefault(row["run"], []).append(row["identity"])
    return {(run, ident): f"{run}@{ident[:8]}" for run, idents in by_run.items()
            if len(idents) > 1 for ident in idents}


# The lines a header line must contain, and how many bytes of such lines the driver collects
# before it leaves the search to Spark.
_HEADER_NEEDLE = b'header"'
_CANDIDATE_BYTES_MAX = 64 << 20
_BOM = b"\xef\xbb\xbf"


def _header_candidates(spark: SparkSession, files: list[str]) -> DataFrame | None:
    """(file, text) of every line of `files` that contains `header"`, found by the driver in
    local files: the lines `spark.read.text` would give (ended by LF, CR or CRLF, a byte order
    mark dropped at the start of a file), with the file named as `_metadata.file_path` names
    it. None when a file is not a local `.ndjson` file (Spark's reader may decompress it) or
    the lines are too many to collect: Spark then reads every line instead.

    A scan for one byte string in memory-mapped files is many times cheaper than Spark's line
    by line read, which was a sixth of a large ingest."""
    import mmap

    rows: list[tuple[str, bytes]] = []
    size = 0
    checked = False
    for listed in spark.read.text(files).inputFiles():
        # The listing names a local file `file:///x`, the scan's metadata `file:/x`: checked
        # on the first file that has a line, against Spark's own reading of it.
        uri = "file:/" + listed[len("file:///"):] if listed.startswith("file:///") else listed
        path = local_path(uri)
        if path is None or not path.endswith(".ndjson"):
            return None
        if not checked and os.path.getsize(path) > 0:
            first = spark.read.text(path).select("_metadata.file_path").first()
            if first is None or first[0] != uri:
                return None
            checked = True
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size == 0:
                    continue
                data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None  # Spark reports it as it does for any other read
        with data:
            at = data.find(_HEADER_NEEDLE)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                start = data.rfind(b"\r", start, at) + 1 or start
                end = data.find(b"\n", at)
                end = len(data) if end < 0 else end
                cr = data.find(b"\r", at, end)
                end = end if cr < 0 else cr
                line = data[start:end]
                if start == 0 and line.startswith(_BOM):
                    line = line[len(_BOM):]
                size += len(line)
                if size > _CANDIDATE_BYTES_MAX:
                    return None
                rows.append((uri, line))
                at = data.find(_HEADER_NEEDLE, end)
    frame = spark.createDataFrame(rows, "file string, text binary")
    return frame.select("file", F.col("text").cast("string").alias("text"))


def parse_lines(spark: SparkSession, files: list[str], keep_raw: bool = True,
                renamed: dict[tuple[str, str], str] | None = None) -> DataFrame:
    """One row per line of `files`, in the columns of `schemas.STORED` (not yet written)."""
    text = (spark.read.text(files, wholetext=True)
            .select(F.col("_metadata.file_path").alias("file"), "value"))
    return parse_text(text, keep_raw, renamed)


def parse_text(text: DataFrame, keep_raw: bool = True,
               renamed: dict[tuple[str, str], str] | None = None) -> DataFrame:
    """`parse_lines` of files given as rows (file, value: the whole text of the file), however
    they were made: read from disk, or the traces of runs simulated in the same job."""
    # Per file (one row): its lines, and every header line in it parsed once.
    per_file = text.select(
        "file", F.split("value", "\n", -1).alias("lines"),
    ).select(
        "file", "lines",
        F.transform(
            F.filter(
                F.sequence(F.lit(1), F.size("lines")),
                # By text, not by parsing: a header that is not valid JSON must still end
                # the previous run's lines (they would otherwise be stored under it).
                lambda n: F.element_at("lines", n).contains('"header"')
                & F.element_at("lines", n).rlike(HEADER_PATTERN),
            ),
            # (An unsafe header line is a header all the same: it ends the run above it, and
            # its own lines are malformed because it is.)
            lambda n: F.struct(
                n.alias("line"),
                F.when(unsafe_reason(F.element_at("lines", n)).isNull(),
                       F.from_json(F.element_at("lines", n), S.LINE, PARSE_OPTIONS)).alias("p"),
            ),
        ).alias("parsed"),
    ).select(
        # What the lines below a header take from it, worked out once per header rather than
        # once per line: why it cannot be used (null if it can), its config key and the run
        # its lines are stored under. The lines no longer read `p`, but it stays: without it
        # whole-stage code generation made the per-line projection slower (docs/spark.md).
        "file", "lines",
        F.transform("parsed", lambda h: F.struct(
            h["line"].alias("line"), h["p"].alias("p"),
            _header_reason(h["p"]).alias("bad"),
            config_key(h["p"]["config"]).alias("key"),
            _stored_run(F.col("file"), h["p"], renamed).alias("run"),
        )).alias("headers"),
    )
    rows = per_file.select(
        "file", "headers", F.size("lines").alias("count"),
        F.posexplode("lines").alias("pos", "text"),
    ).select(
        "file", "headers", "count", (F.col("pos") + 1).alias("line"), "text",
    ).where(~((F.col("line") == F.col("count")) & (F.col("text") == "")))
    # The header that governs a line: the last header line at or above it. Every line short
    # enough is parsed: Jackson refuses nesting past its own limit, and the schema's parser
    # skips unknown keys without recursing, so no line exhausts it. Nesting is measured only
    # on the lines it rejects, before `_wrong_type` (which recurses) reads them: the passes
    # that measure it were a third of the parse time of a simulator corpus.
    rows = rows.select(
        "file", "line", "text", too_long(F.col("text")).alias("unsafe"),
        F.try_element_at(F.filter("headers", lambda h: h["line"] <= F.col("line")),
                         F.lit(-1)).alias("h"),
    ).select(
        "*", F.when(F.col("unsafe").isNull(),
                    F.from_json("text", S.LINE, PARSE_OPTIONS)).alias("p"),
    )
    p, h, line = F.col("p"), F.col("h"), F.col("text")
    trimmed = F.trim(line)
    reason = (
        F.when(F.col("unsafe").isNotNull(), F.col("unsafe"))
        .when(trimmed == "", F.lit("blank line"))
        .when(~trimmed.startswith("{"), F.lit("not a JSON object"))
        .when(p[S.CORRUPT].isNotNull(), F.coalesce(too_deep(line), _wrong_type(line, p)))
        .when(~trimmed.endswith("}"), F.lit("not valid JSON: text after the object"))
        .when(p["kind"].isNull(), F.lit("field kind: missing"))
        .when(~p["kind"].isin(*S.KINDS), F.concat(F.lit("field kind: unknown value "), p["kind"]))
        .when(h.isNull(), F.lit("no header line above this line"))
        .when(p["kind"] == "header", _header_reason(p))
        .when(h["bad"].isNotNull(),
              F.concat(F.lit("its header (line "), h["line"].cast("string"),
                       F.lit(") is not valid")))
        .otherwise(_kind_reason(p))
    )
    rows = rows.select("file", "line", "text", "h", "p", reason.alias("reason"))
    good_header = F.col("h").isNotNull() & F.col("h.bad").isNull()
    table = F.when(F.col("reason").isNotNull(), F.lit(S.MALFORMED)).otherwise(
        F.coalesce(*(F.when(F.col("p.kind") == kind, F.lit(name))
                     for kind, name in S.TABLE_OF_KIND.items())))
    is_event = F.col("reason").isNull() & (F.col("p.kind") == "event")
    raw = (F.when(F.col("reason").isNotNull(), F.substring("text", 1, S.RAW_MALFORMED_CHARS))
           .when(is_event, F.col("text") if keep_raw else F.lit(None)))
    columns = []
    for stored in S.STORED.fields:
        name = stored.name
        if name in ("file", "line", "reason"):
            column = F.col(name)
        elif name == "raw":
            column = raw
        elif name == "table":
            column = table
        elif name == "config_key":
            column = F.when(good_header, F.col("h.key"))
        elif name == "run":
            column = F.when(good_header, F.col("h.run"))
        else:
            # A malformed line keeps only where it came from and why.
            column = F.when(F.col("reason").isNull(), F.col("p")[name])
        columns.append(column.cast(stored.dataType).alias(name))
    return rows.select(*columns)


# Parquet's per-column switch (the write's options reach its Hadoop configuration).
_WRITE_OPTIONS = {f"parquet.enable.dictionary#{c}": "false" for c in S.DISTINCT_COLUMNS}


def write_dataset(lines: DataFrame, out: str, mode: str = "overwrite") -> None:
    """Write parsed lines (`parse_text`'s rows) as the dataset layout the module doc names."""
    lines.write.mode(mode).partitionBy(*S.PARTITION_COLUMNS).options(**_WRITE_OPTIONS) \
        .parquet(out)


def ingest(spark: SparkSession, files: list[str], out: str, keep_raw: bool = True,
           examples: int = 20) -> IngestResult:
    """Parse `files` and write them to `out` (replaced), partitioned by table, config, run.

    Returns the line count of every table and the first `examples` malformed lines as
    (file, line, reason), sorted by file and line.
    """
    if not files:
        raise InputError("no trace files to ingest")
    start = time.perf_counter()
    renamed = colliding_runs(spark, files)
    # The counts are taken by the write itself: reading the dataset back for them was three
    # more jobs over every file written.
    tables = (*S.TABLE_OF_KIND.values(), S.MALFORMED)
    observation = Observation("ingest")
    table = F.col("table")
    lines = parse_lines(spark, files, keep_raw, renamed).observe(
        observation, *(F.count(F.when(table == name, True)).alias(name) for name in tables),
        F.collect_set(F.when(table == "headers", F.col("run"))).alias("runs"))
    write_dataset(lines, out)
    seconds = time.perf_counter() - start
    metrics = observation.get
    counts = {name: metrics[name] for name in tables if metrics[name]}
    runs = len(metrics["runs"])
    bad = []
    if counts.get(S.MALFORMED):
        bad = (read_stored(spark, out).where(F.col("table") == S.MALFORMED)
               .select("file", "line", "reason").orderBy("file", "line").limit(examples)
               .collect())
    return IngestResult(out=out, files=len(files), lines_by_table=counts, runs=runs,
                        seconds=seconds, renamed=tuple(sorted(renamed.values())),
                        malformed_examples=tuple((local_path(r["file"]) or r["file"], r["line"],
                                                  r["reason"]) for r in bad))


def read_stored(spark: SparkSession, path: str) -> DataFrame:
    """The whole ingested dataset at `path`, with its explicit schema."""
    if not os.path.isdir(path) or not any(
            name.startswith("table=") for name in os.listdir(path)):
        raise InputError(f"{path}: no ingested Parquet dataset here (expected the table=*/ "
                         "directories an earlier analyze wrote)")
    try:
        return spark.read.schema(S.STORED).parquet(path)
    except Exception as error:  # noqa: BLE001 (Spark's errors arrive as Py4J/Analysis errors)
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        raise InputError(f"{path}: not a readable Parquet dataset: {first}") from None


def read_summaries(directories: list[str]) -> list[tuple[str, str | None, str, str, int]]:
    """(directory, run, source file, kind, count) from each directory's result.json/run.json.

    The counts are the document's `history.anomalies` by kind (a number, or a list whose
    length is the count); `run` is the document's own `run` field when it has one. Kind names
    are normalised to the Spark ones (lower case, `-` to `_`, a plural `s` dropped:
    `lost_writes` -> `lost-write`). A file that cannot be read or has no such object
    contributes nothing; result.json wins over run.json.
    """
    rows = []
    for directory in sorted(set(directories)):
        for name in ("result.json", "run.json"):
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="utf-8") as handle:
                    document = json.load(handle)
                # A campaign's result.json also says what the trace lines alone show (no final
                # logs from the simulator, no excused writes): that is what Spark can see.
                section = document.get("history_from_traces") or document["history"]
                anomalies = section["anomalies"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if not isinstance(anomalies, dict):
                continue
            run = document.get("run") if isinstance(document.get("run"), str) else None
            for kind, count in sorted(anomalies.items()):
                if isinstance(count, list):
                    count = len(count)
                if isinstance(count, int) and not isinstance(count, bool):
                    rows.append((directory, run, path, normalise_kind(kind), count))
            break
    return rows


def local_path(uri: str) -> str | None:
    """The local path of a `file:` URI as Spark reports it; None for other file systems."""
    from urllib.parse import unquote, urlparse

    if uri.startswith("/"):
        return uri
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def normalise_kind(kind: str) -> str:
    """`Lost_Writes` -> `lost-write`, `inconsistent_offset` -> `inconsistent-offsets`: the
    spelling of `vocab.anomalies.KINDS` when the name is one of them in another case, with
    `_` for `-`, or in the other number; otherwise lower case with `-`."""
    kind = kind.strip().lower().replace("_", "-").replace(" ", "-")
    for name in (kind, kind + "s", kind[:-1] if kind.endswith("s") else kind):
        if name in KINDS:
            return name
    return kind
