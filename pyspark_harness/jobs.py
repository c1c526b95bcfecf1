"""The analyses: pure functions from DataFrames to DataFrames over an ingested corpus.

Each job takes the tables `load` returns (or another job's output) and returns a new
DataFrame; nothing here writes, collects or prints, so the same jobs run in the tests, in the
report and on a cluster. Times are the trace's `time_ms` (the simulator's virtual clock; in
tcp mode each node's own clock). What each job counts, precisely:

Lost acknowledged writes, per run (`writes_lost`, from `history` lines and the final logs of
the run's run.json): model_check/conformance/losses.py's one definition, the history
checker's `lost-write` given the final logs. An acknowledged write at acks 1 or all (`ok`,
offset >= 0) is lost when its partition has a final log and the value is not at its offset
there, or when its partition has none and the reads' `lost-write` below finds it.

Client anomalies, per partition of a run (from `history` lines), as model_check/conformance/history.py
defines them when it has no final logs (same names, same questions):
  The final state at an offset is the value the latest `ok` read with a record there returned
  (the larger value breaks a tie at one time_ms). A `lost-write` is an acknowledged write at
  acks 1 or all (`ok`, offset >= 0) whose value is not the final state at its offset (acks=0
  writes are counted, never judged). An `uncommitted-read` is a (offset, value) a read
  returned that is not the final state there. A `duplicate` is a value read at two or more
  offsets; an `inconsistent-offsets` is an offset with two or more values among reads and
  acknowledgements; a `nonmonotonic-send` is an acknowledged write of a producer process
  below an offset that process had acknowledged before it sent it. Taking each consumer
  process's reads of a partition in `seq` order: a `nonmonotonic-poll` is a read whose first
  offset is at or below the previous read's last, or whose own offsets do not increase; a
  `poll-skip` is a read whose first offset is above the previous read's last plus one, or
  (its offsets increasing) that leaves one out. Whether a kind is expected or bad for a
  configuration is `vocab.anomalies.expected_kinds` of what its header config gives up
  (spec.promises; the caller hands in the decision, `report.GivenUp`).

Availability, per partition of a run (from the metadata store's `partitions` states):
  The partition's state holds from one change to the next; the last one until the run's end
  (its latest `time_ms` in any line, or its configured duration when later). Time is counted
  from 0: until the store first reports a partition, its first replica leads it with every
  replica in sync at epoch 0 (`first_states`; runs whose store wrote no trace have none).
  A broker is down from a nemesis `crash` naming it to its `restart` (or
  the run's end). `offline_ms`: no live broker leads the partition: the store names no leader
  (`no_leader_ms`, leader -1) or names one that is down. `under_min_isr_ms`: a live leader,
  but fewer ISR members than min.insync.replicas (acks=all writes refused); it never overlaps
  `offline_ms`. `elections`:
  changes that raise the leader epoch to a live leader (from epoch 0 at the start). Election
  latency: from a nemesis `crash` of the broker that led the partition
  just before it, to the first later state with a live leader and a higher leader epoch (null
  when none came before the run ended). ISR shrinks and expands: `LeaderShrinkIsr` and
  `LeaderExpandIsr` events with outcome code `ISR_CHANGED` where they commit, at the metadata
  store (the leader's later `LeaderApplyIsr` is not counted).

Balance: leaders per broker at every change, time-weighted leadership, and for each
`ControllerElectPreferredLeader` with outcome code `ELECTED_PREFERRED` the leader counts just
before it and once its partition's new state is installed.

Jobs select events by action name and outcome code (`vocab.actions`, `vocab.outcomes`) and read
fields, never outcome text.

Distributed replay: `distributed_replay(events, fn)` groups the event lines by run inside
Spark and calls `fn(run_id, events)` once per run on the executors, with the events as dicts
in causal order (`vocab.trace.causal_merge`, as replay merges); what `fn` checks is up to it
(the spec replay, model_check.conformance.replay).
"""

from __future__ import annotations

import inspect
import json
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pyspark_harness import schemas as S
from pyspark_harness.ingest import election_policy, local_path, read_stored
from vocab import anomalies as K
from vocab.actions import ActionName as A
from vocab.anomalies import KINDS as ANOMALY_KINDS
from vocab.outcomes import Code
from vocab.trace import CausalCycle, causal_merge

METADATA_NODE = "meta"
FAULTS_OF_LEADERS = ("crash",)  # Apache Kafka runs log their controller-kill as a crash
BACK = "restart"  # the nemesis line that ends a broker's FAULTS_OF_LEADERS
FINAL_LOGS = "map<string, array<array<long>>>"  # run.json's final_logs: [[offset, value]]
AVAILABILITY_MS = ("offline_ms", "no_leader_ms", "under_min_isr_ms")


@dataclass(frozen=True, slots=True)
class Tables:
    """The ingested tables, each with its own columns plus `config_key` and `run`."""

    headers: DataFrame
    events: DataFrame
    history: DataFrame
    nemesis: DataFrame
    malformed: DataFrame


def load(spark: SparkSession, path: str) -> Tables:
    """The tables of an ingested dataset (ingest.ingest wrote it at `path`)."""
    stored = read_stored(spark, path)

    def table(name: str) -> DataFrame:
        columns = S.TABLE_COLUMNS[name] + ("config_key", "run")
        return stored.where(F.col("table") == name).select(*columns)

    return Tables(*(table(name) for name in ("headers", "events", "history", "nemesis",
                                             "malformed")))


# ------------------------------------------------------------------------------------------
# The lines the jobs read


def relevant_events(events: DataFrame, metadata_node: str = METADATA_NODE) -> DataFrame:
    """The event lines and columns the availability and balance jobs read (a small part of a
    corpus: metadata-store transitions, ISR changes, preferred-leader elections)."""
    actions = (A.LEADER_SHRINK_ISR, A.LEADER_EXPAND_ISR, A.CONTROLLER_ELECT_PREFERRED_LEADER)
    return events.where((F.col("node") == metadata_node) | F.col("action").isin(*actions)) \
        .select("run", "node", "seq", "time_ms", "action", "outcome", "args", "state")


def relevant_history(history: DataFrame) -> DataFrame:
    """The history lines and columns the anomaly jobs read: sends, and completed reads."""
    return history.where((F.col("f") == "send")
                         | ((F.col("f") == "read") & (F.col("type") == "ok"))).select(
        "run", "node", "seq", "time_ms", "type", "f", "partition", "value", "offset", "acks",
        "records")


# ------------------------------------------------------------------------------------------
# Runs


def runs(headers: DataFrame) -> DataFrame:
    """One row per run: its config key, the config dimensions, seed and mode.

    `config_conflict` is true when the files of a run disagree on the config (the format
    says they never do); the smallest key is kept.
    """
    c = F.col("config")
    return headers.groupBy("run").agg(
        F.min("config_key").alias("config_key"),
        F.min(c["variant"]).alias("variant"),
        F.min(c["acks"]).alias("acks"),
        F.min(c["min_insync_replicas"]).alias("min_insync_replicas"),
        F.min(c["unclean_leader_election_enable"]).alias("unclean_leader_election_enable"),
        F.min(election_policy(c)).alias("policy"),
        F.min(c["log_flush_interval_messages"]).alias("log_flush_interval_messages"),
        F.min(F.coalesce(F.nullif(F.array_join(F.array_sort(c["nemesis"]), "+"), F.lit("")),
                         F.lit("none"))).alias("nemesis"),
        F.min(c["brokers"]).alias("brokers"),
        F.min(c["partitions"]).alias("partitions"),
        F.min(c["duration_ms"]).alias("duration_ms"),
        F.min("seed").alias("seed"),
        F.min("mode").alias("mode"),
        F.min(F.to_json(c)).alias("config_json"),
        F.count("*").alias("files"),
        (F.countDistinct("config_key") > 1).alias("config_conflict"),
    )


def run_ends(events: DataFrame, history: DataFrame, nemesis: DataFrame,
             run_table: DataFrame | None = None) -> DataFrame:
    """(run, end_ms): the latest `time_ms` of any line of the run, or its configured
    `duration_ms` (`runs`) when later: the run lasts that long after its last line."""
    times = (events.select("run", "time_ms")
             .unionByName(history.select("run", "time_ms"))
             .unionByName(nemesis.select("run", "time_ms")))
    ends = times.groupBy("run").agg(F.max("time_ms").alias("end_ms"))
    if run_table is None:
        return ends
    return ends.join(run_table.select("run", "duration_ms"), "run", "left").select(
        "run", F.greatest("end_ms", F.col("duration_ms").cast("long")).alias("end_ms"))


# ------------------------------------------------------------------------------------------
# Availability


def first_states(headers: DataFrame, metadata_node: str = METADATA_NODE) -> DataFrame:
    """Each partition's state from the run's start, before the store reports it: replicas
    (p + j) mod brokers for j below the replication factor (every broker without one), the
    first of them leader, all in sync, epochs 0 (impl.config.ClusterConfig.assignment; the
    campaign's timeline starts there too). Only for runs whose metadata store wrote a trace:
    without one nothing says who led later. Columns as `partition_timeline`'s input, at
    start_ms 0 and seq -1 (before any line at 0), action null."""
    c = F.col("config")
    runs = headers.where(F.col("node") == metadata_node).groupBy("run").agg(
        F.min(c["partitions"]).alias("partitions"), F.min(c["brokers"]).alias("brokers"),
        F.min(F.coalesce(c["replication_factor"], c["brokers"])).alias("replicas"))
    runs = runs.where((F.col("partitions") > 0) & (F.col("brokers") > 0)
                      & (F.col("replicas") > 0))
    parts = runs.select("run", "brokers", "replicas", F.explode(
        F.sequence(F.lit(0).cast("long"), F.col("partitions").cast("long") - 1))
        .alias("partition"))
    replicas = F.transform(F.sequence(F.lit(0).cast("long"), F.col("replicas").cast("long") - 1),
                           lambda j: (F.col("partition") + j) % F.col("brokers"))
    return parts.select("run", "partition", F.lit(0).cast("long").alias("start_ms"),
                        F.lit(-1).cast("long").alias("seq"), F.lit(None).alias("action"),
                        (F.col("partition") % F.col("brokers")).alias("leader"),
                        F.lit(0).alias("leader_epoch"), replicas.alias("isr"),
                        F.lit(0).alias("partition_epoch"))


def partition_timeline(events: DataFrame, ends: DataFrame,
                       metadata_node: str = METADATA_NODE,
                       first: DataFrame | None = None) -> DataFrame:
    """Every partition state the metadata store reported, as intervals [start_ms, end_ms),
    after `first` (`first_states`: each partition's state from the run's start).

    Columns: run, partition, start_ms, seq, end_ms, duration_ms, is_last, leader,
    leader_epoch, isr, isr_size, partition_epoch, is_election, action. The last state of a
    partition lasts until the run's end. States at one time_ms are ordered by seq; all but the
    last of them last 0 ms.
    """
    changes = (
        events.where((F.col("node") == metadata_node) & F.col("state.partitions").isNotNull())
        .select("run", "time_ms", "seq", "action",
                F.explode("state.partitions").alias("p"))
        .select("run", F.col("p.partition").alias("partition"),
                F.col("time_ms").alias("start_ms"), "seq", "action",
                F.col("p.leader").alias("leader"), F.col("p.leader_epoch").alias("leader_epoch"),
                F.col("p.isr").alias("isr"), F.col("p.partition_epoch").alias("partition_epoch"))
    )
    if first is not None:
        # A leader can die before the store's first line about its partition: count from 0.
        types = dict(changes.dtypes)
        changes = changes.unionByName(first.select(
            *(F.col(name).cast(types[name]).alias(name) for name in changes.columns)))
    order = Window.partitionBy("run", "partition").orderBy("start_ms", "seq")
    previous_epoch = F.lag("leader_epoch").over(order)
    timeline = changes.select(
        "*",
        F.lead("start_ms").over(order).alias("next_ms"),
        (F.coalesce(F.size("isr"), F.lit(0))).alias("isr_size"),
        (previous_epoch.isNotNull() & (F.col("leader") >= 0)
         & (F.col("leader_epoch") > previous_epoch)).alias("is_election"),
    ).join(ends, "run", "left")
    end = F.coalesce("next_ms", F.greatest("end_ms", "start_ms"))
    return timeline.select(
        "run", "partition", "start_ms", "seq", end.alias("end_ms"),
        (end - F.col("start_ms")).alias("duration_ms"), F.col("next_ms").isNull().alias("is_last"),
        "leader", "leader_epoch", "isr", "isr_size", "partition_epoch", "is_election", "action",
    )


def isr_changes(events: DataFrame, metadata_node: str = METADATA_NODE) -> DataFrame:
    """(run, partition, isr_shrinks, isr_expands): LeaderShrinkIsr/LeaderExpandIsr events that
    commit (`ISR_CHANGED`) at the metadata store (the leader's later LeaderApplyIsr is not
    counted)."""
    changes = events.where(
        F.col("action").isin(A.LEADER_SHRINK_ISR, A.LEADER_EXPAND_ISR)
        & (F.col("outcome") == Code.ISR_CHANGED) & (F.col("node") == metadata_node))
    return changes.groupBy("run", F.col("args.partition").alias("partition")).agg(
        F.sum(F.when(F.col("action") == A.LEADER_SHRINK_ISR, 1).otherwise(0))
        .alias("isr_shrinks"),
        F.sum(F.when(F.col("action") == A.LEADER_EXPAND_ISR, 1).otherwise(0))
        .alias("isr_expands"),
    )


def brokers_down(nemesis: DataFrame, ends: DataFrame) -> DataFrame:
    """(run, broker, down_ms, up_ms): each time a broker was down, from a FAULTS_OF_LEADERS
    line naming it (`bN`; another while down adds nothing) to its next BACK line or the run's
    end."""
    lines = nemesis.where(F.col("f").isin(*FAULTS_OF_LEADERS, BACK)
                          & F.col("target").rlike("^b[0-9]+$")).select(
        "run", "f", "time_ms", "seq",
        F.substring("target", 2, 12).try_cast("long").alias("broker"))
    order = Window.partitionBy("run", "broker").orderBy("time_ms", "seq")
    after = order.rowsBetween(1, Window.unboundedFollowing)
    marked = lines.select(
        "*", F.lag("f").over(order).alias("before"),
        F.min(F.when(F.col("f") == BACK, F.col("time_ms"))).over(after).alias("back_ms"))
    return marked.where((F.col("f") != BACK)
                        & (F.col("before").isNull() | (F.col("before") == BACK))).join(
        ends, "run", "left").select(
        "run", "broker", F.col("time_ms").alias("down_ms"),
        F.coalesce("back_ms", F.greatest("end_ms", "time_ms")).alias("up_ms"))


def with_leader_down(timeline: DataFrame, down: DataFrame) -> DataFrame:
    """The timeline with `leader_down_ms`: how much of each state its leader was down
    (`brokers_down`), 0 for a state with no leader."""
    keys = ["run", "partition", "start_ms", "seq"]
    t, d = timeline.alias("t"), down.alias("d")
    overlap = (F.least("t.end_ms", "d.up_ms") - F.greatest("t.start_ms", "d.down_ms"))
    spans = t.join(d, (F.col("t.run") == F.col("d.run"))
                   & (F.col("t.leader") == F.col("d.broker"))).where(overlap > 0).groupBy(
        *(F.col(f"t.{k}").alias(k) for k in keys)).agg(F.sum(overlap).alias("leader_down_ms"))
    return timeline.join(spans, keys, "left").withColumn(
        "leader_down_ms", F.coalesce("leader_down_ms", F.lit(0)).cast("long"))


def availability(timeline: DataFrame, run_table: DataFrame, isr: DataFrame) -> DataFrame:
    """Per (run, partition): observed_ms, offline_ms, no_leader_ms, under_min_isr_ms,
    elections, isr_shrinks, isr_expands (zeros where nothing happened). `timeline`:
    `with_leader_down` of `partition_timeline`."""
    with_min = timeline.join(run_table.select("run", "min_insync_replicas"), "run", "left")
    no_leader = F.col("leader") < 0
    short = (F.col("leader") >= 0) & (F.col("isr_size") < F.col("min_insync_replicas"))
    states = with_min.groupBy("run", "partition").agg(
        F.sum("duration_ms").alias("observed_ms"),
        F.sum(F.when(no_leader, F.col("duration_ms")).otherwise(F.col("leader_down_ms")))
        .alias("offline_ms"),
        F.sum(F.when(no_leader, F.col("duration_ms")).otherwise(0)).alias("no_leader_ms"),
        F.sum(F.when(short, F.col("duration_ms") - F.col("leader_down_ms")).otherwise(0))
        .alias("under_min_isr_ms"),
        F.sum(F.col("is_election").cast("long")).alias("elections"),
    )
    counts = ("observed_ms", *AVAILABILITY_MS, "elections", "isr_shrinks", "isr_expands")
    joined = states.join(isr, ["run", "partition"], "full")
    return joined.select("run", "partition",
                         *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in counts))


def election_latency(timeline: DataFrame, nemesis: DataFrame) -> DataFrame:
    """One row per (fault of a leader, partition it led): run, partition, fault, broker,
    fault_ms, elected_ms, latency_ms (null: no new leader before the run ended)."""
    faults = nemesis.where(F.col("f").isin(*FAULTS_OF_LEADERS)
                           & F.col("target").rlike("^b[0-9]+$")).select(
        "run", F.col("f").alias("fault"), F.col("time_ms").alias("fault_ms"),
        F.substring("target", 2, 12).try_cast("long").alias("broker"))
    t = timeline.alias("t")
    # The state just before the fault: the one that started before it and lasted up to it.
    led = faults.join(t, "run").where(
        (F.col("t.start_ms") < F.col("fault_ms")) & (F.col("fault_ms") <= F.col("t.end_ms"))
        & (F.col("t.leader") == F.col("broker"))
    ).select("run", "partition", "fault", "broker", "fault_ms",
             F.col("t.leader_epoch").alias("epoch_at_fault"))
    n = timeline.select("run", "partition", F.col("start_ms").alias("next_ms"),
                        F.col("leader").alias("next_leader"),
                        F.col("leader_epoch").alias("next_epoch"))
    elected = led.join(n, ["run", "partition"]).where(
        (F.col("next_ms") >= F.col("fault_ms")) & (F.col("next_leader") >= 0)
        & (F.col("next_epoch") > F.col("epoch_at_fault"))
    ).groupBy("run", "partition", "fault", "broker", "fault_ms").agg(
        F.min("next_ms").alias("elected_ms"))
    keys = ["run", "partition", "fault", "broker", "fault_ms"]
    return led.join(elected, keys, "left").select(
        *keys, "elected_ms", (F.col("elected_ms") - F.col("fault_ms")).alias("latency_ms"))


# ------------------------------------------------------------------------------------------
# Balance


def leaders_over_time(timeline: DataFrame, run_table: DataFrame) -> DataFrame:
    """(run, time_ms, broker, leaders): partitions each broker leads after every change,
    every broker of the run listed (zeros included)."""
    points = timeline.select("run", F.col("start_ms").alias("time_ms")).distinct()
    t = timeline.alias("t")
    at = points.join(t, "run").where(
        (F.col("t.start_ms") <= F.col("time_ms"))
        & ((F.col("time_ms") < F.col("t.end_ms")) | F.col("t.is_last"))
        & (F.col("t.leader") >= 0))
    counts = at.groupBy("run", "time_ms", F.col("t.leader").alias("broker")).agg(
        F.count("*").alias("leaders"))
    brokers = points.join(run_table.select("run", "brokers"), "run").select(
        "run", "time_ms",
        F.explode(F.sequence(F.lit(0).cast("long"), F.col("brokers") - 1)).alias("broker"))
    return brokers.join(counts, ["run", "time_ms", "broker"], "left").select(
        "run", "time_ms", "broker", F.coalesce("leaders", F.lit(0)).cast("long").alias("leaders"))


def imbalance(leaders: DataFrame) -> DataFrame:
    """(run, time_ms, leaders, imbalance): leaders as "n0,n1,..." by broker, and the spread
    max - min across brokers (0 is perfectly balanced)."""
    return leaders.groupBy("run", "time_ms").agg(
        F.array_join(F.transform(F.array_sort(F.collect_list(F.struct("broker", "leaders"))),
                                 lambda x: x["leaders"].cast("string")), ",").alias("leaders"),
        (F.max("leaders") - F.min("leaders")).alias("imbalance"),
    )


def leadership(timeline: DataFrame, run_table: DataFrame) -> DataFrame:
    """(run, broker, leader_ms): partition-milliseconds each broker led (zeros included)."""
    led = timeline.where(F.col("leader") >= 0).groupBy("run", F.col("leader").alias("broker")) \
        .agg(F.sum("duration_ms").alias("leader_ms"))
    brokers = run_table.select(
        "run", F.explode(F.sequence(F.lit(0).cast("long"), F.col("brokers") - 1)).alias("broker"))
    return brokers.join(led, ["run", "broker"], "left").select(
        "run", "broker", F.coalesce("leader_ms", F.lit(0)).cast("long").alias("leader_ms"))


def preferred_leader_effect(events: DataFrame, timeline: DataFrame,
                            spread: DataFrame) -> DataFrame:
    """Per ControllerElectPreferredLeader that elected (`ELECTED_PREFERRED`): run, time_ms,
    partition, leaders_before, imbalance_before (just before it), leaders_after,
    imbalance_after (once its partition's next state is installed). Null where the store
    reported no such state."""
    elections = events.where((F.col("action") == A.CONTROLLER_ELECT_PREFERRED_LEADER)
                             & (F.col("outcome") == Code.ELECTED_PREFERRED)).select(
        "run", "time_ms", F.col("args.partition").alias("partition")).distinct()
    s = spread.select("run", F.col("time_ms").alias("at_ms"), "leaders", "imbalance")
    before = elections.join(s, "run").where(F.col("at_ms") < F.col("time_ms")).groupBy(
        "run", "time_ms", "partition").agg(F.max("at_ms").alias("before_ms"))
    after = elections.join(
        timeline.select("run", "partition", F.col("start_ms").alias("at_ms")),
        ["run", "partition"]).where(F.col("at_ms") >= F.col("time_ms")).groupBy(
        "run", "time_ms", "partition").agg(F.min("at_ms").alias("after_ms"))
    keys = ["run", "time_ms", "partition"]
    b = s.select("run", F.col("at_ms").alias("before_ms"),
                 F.col("leaders").alias("leaders_before"),
                 F.col("imbalance").alias("imbalance_before"))
    a = s.select("run", F.col("at_ms").alias("after_ms"),
                 F.col("leaders").alias("leaders_after"),
                 F.col("imbalance").alias("imbalance_after"))
    return (elections.join(before, keys, "left").join(after, keys, "left")
            .join(b, ["run", "before_ms"], "left").join(a, ["run", "after_ms"], "left")
            .select(*keys, "leaders_before", "imbalance_before", "leaders_after",
                    "imbalance_after"))


# ------------------------------------------------------------------------------------------
# Client anomalies


def _read_records(history: DataFrame) -> DataFrame:
    reads = history.where((F.col("f") == "read") & (F.col("type") == "ok"))
    return reads.select("run", "partition", F.col("time_ms").alias("read_ms"), "node", "seq",
                        F.explode("records").alias("r")).select(
        "run", "partition", "read_ms", "node", "seq",
        F.try_element_at("r", F.lit(1)).alias("offset"),
        F.try_element_at("r", F.lit(2)).alias("value"))


def anomalies(history: DataFrame) -> DataFrame:
    """One row per anomaly: run, partition, kind, acks, offset, value, detail, time_ms (when
    the write was acknowledged or the read returned; null for the kinds found by offset or
    value across reads).

    Kinds are ANOMALY_KINDS; the definitions are in this module's docstring. The read records
    are shuffled twice, once by offset and once by value; everything else joins small tables.
    """
    records = _read_records(history)
    sends = history.where(F.col("f") == "send")
    acked = sends.where((F.col("type") == "ok") & (F.col("offset") >= 0)
                        & F.col("acks").isin("1", "all", "-1"))
    # By offset: the final state (the value of the latest read there; the larger value breaks
    # a tie between two reads at one time_ms, so the result never depends on order), and every
    # value read or acknowledged there.
    by_offset = records.groupBy("run", "partition", "offset").agg(
        F.max_by("value", F.struct("read_ms", "value")).alias("final_value"),
        F.collect_set("value").alias("read_values"))
    acked_at = acked.groupBy("run", "partition", "offset").agg(
        F.collect_set("value").alias("acked_values"))
    # By value: every offset it was read at.
    by_value = records.groupBy("run", "partition", "value").agg(
        F.array_sort(F.collect_set("offset")).alias("offsets"))
    # Each is read several times below: compute it once (a planner hint, not a result).
    by_offset, by_value = by_offset.cache(), by_value.cache()
    no_acks = F.lit(None).cast("string").alias("acks")
    no_time = F.lit(None).cast("long")

    lost = acked.join(by_offset, ["run", "partition", "offset"]).where(
        F.col("final_value") != F.col("value")).select(
        "run", "partition", F.lit(K.LOST_WRITE).alias("kind"), "acks", "offset", "value",
        F.concat(F.lit("acknowledged at "), F.col("time_ms").cast("string"),
                 F.lit(" ms; the final state there is "),
                 F.col("final_value").cast("string")).alias("detail"),
        F.col("time_ms").alias("time_ms"))
    uncommitted = by_offset.select(
        "run", "partition", "offset", "final_value", F.explode("read_values").alias("value")
    ).where(F.col("value") != F.col("final_value")).select(
        "run", "partition", F.lit(K.UNCOMMITTED_READ).alias("kind"), no_acks, "offset",
        "value",
        F.concat(F.lit("read, but the final state there is "),
                 F.col("final_value").cast("string")).alias("detail"),
        no_time.alias("time_ms"))
    duplicate = by_value.where(F.size("offsets") > 1).select(
        "run", "partition", F.lit(K.DUPLICATE).alias("kind"), no_acks,
        F.col("offsets")[0].alias("offset"), "value",
        F.concat(F.lit("read at offsets "), F.array_join("offsets", ",")).alias("detail"),
        no_time.alias("time_ms"))
    values = F.array_sort(F.array_union(F.coalesce("read_values", F.array().cast("array<long>")),
                                        F.coalesce("acked_values",
                                                   F.array().cast("array<long>"))))
    inconsistent = by_offset.join(acked_at, ["run", "partition", "offset"], "full").select(
        "run", "partition", "offset", values.alias("values")).where(F.size("values") > 1).select(
        "run", "partition", F.lit(K.INCONSISTENT_OFFSETS).alias("kind"), no_acks, "offset",
        F.lit(None).cast("long").alias("value"),
        F.concat(F.lit("values "), F.array_join("values", ",")).alias("detail"),
        no_time.alias("time_ms"))
    # Reordered: per producer process and partition in seq order, the highest offset
    # acknowledged before each send was invoked; a later ack below it is reordered.
    order = Window.partitionBy("run", "node", "partition").orderBy("seq") \
        .rowsBetween(Window.unboundedPreceding, -1)
    marked = sends.select(
        "run", "node", "partition", "seq", "type", "value", "offset", "acks",
        F.max(F.when((F.col("type") == "ok") & (F.col("offset") >= 0), F.col("offset")))
        .over(order).alias("highest_before"))
    invoked = marked.where(F.col("type") == "invoke").select(
        "run", "node", "partition", "value", "highest_before")
    reordered = acked.select("run", "node", "partition", "value", "offset", "acks",
                             "time_ms").join(
        invoked, ["run", "node", "partition", "value"]).where(
        F.col("offset") < F.col("highest_before")).select(
        "run", "partition", F.lit(K.NONMONOTONIC_SEND).alias("kind"), "acks", "offset",
        "value",
        F.concat(F.lit("offset "), F.col("highest_before").cast("string"),
                 F.lit(" was acknowledged before it was sent")).alias("detail"),
        F.col("time_ms").alias("time_ms"))
    return (lost.unionByName(duplicate).unionByName(reordered).unionByName(uncommitted)
            .unionByName(inconsistent).unionByName(poll_order(history)))


def poll_order(history: DataFrame) -> DataFrame:
    """nonmonotonic-poll and poll-skip rows (the anomalies' columns), one per read at most
    for each kind: each consumer process's reads of a partition in `seq` order."""
    reads = history.where((F.col("f") == "read") & (F.col("type") == "ok")
                          & (F.size("records") > 0))
    offsets = F.transform("records", lambda r: r[0])
    order = Window.partitionBy("run", "node", "partition").orderBy("seq")
    marked = reads.select(
        "run", "partition", "time_ms", offsets.alias("offsets"),
        F.col("records")[0][1].alias("value"),
        F.lag(F.element_at(offsets, -1)).over(order).alias("before"))
    low, high, n = F.col("offsets")[0], F.element_at("offsets", -1), F.size("offsets")
    back = F.exists(F.sequence(F.lit(1), F.greatest(n - 1, F.lit(1))),
                    lambda i: (i < n) & (F.col("offsets")[i] <= F.col("offsets")[i - 1]))
    went_back = F.col("before").isNotNull() & (low <= F.col("before"))
    skipped = F.col("before").isNotNull() & (low > F.col("before") + 1)

    def rows(kind: str, where: F.Column, against_previous: F.Column, word: str) -> DataFrame:
        return marked.where(where).select(
            "run", "partition", F.lit(kind).alias("kind"),
            F.lit(None).cast("string").alias("acks"), low.alias("offset"), "value",
            F.when(against_previous, F.concat(F.lit("read from "), low.cast("string"),
                                              F.lit(f" after a read that {word} "),
                                              F.col("before").cast("string")))
            .otherwise(F.concat(F.lit("offsets "), F.array_join("offsets", ",")))
            .alias("detail"),
            F.col("time_ms").alias("time_ms"))

    nonmonotonic = rows(K.NONMONOTONIC_POLL, went_back | back, went_back, "reached")
    skip = rows(K.POLL_SKIP, skipped | (~back & (high - low + 1 != n)), skipped, "ended at")
    return nonmonotonic.unionByName(skip)


def final_log_records(final_logs: DataFrame) -> tuple[DataFrame, DataFrame]:
    """From (run, final_logs: run.json's text of it): (run, partition) of every partition
    with a final log, and (run, partition, offset, value) of its records."""
    logs = final_logs.select("run", F.explode(F.from_json("final_logs", FINAL_LOGS)).alias(
        "partition", "log")).select(
        "run", F.col("partition").try_cast("long").alias("partition"), "log")
    records = logs.select("run", "partition", F.explode("log").alias("r")).select(
        "run", "partition", F.col("r")[0].alias("offset"), F.col("r")[1].alias("value"))
    return logs.select("run", "partition"), records


def acked_writes_lost(history: DataFrame, found: DataFrame,
                      final_logs: DataFrame | None) -> DataFrame:
    """(run, partition, acks, offset, value, time_ms, judged_by): each lost acknowledged write
    (the module docstring), `judged_by` "final log" or "reads". `found`: `anomalies`;
    `final_logs`: see `final_log_records` (None: no run has one)."""
    by_reads = found.where(F.col("kind") == K.LOST_WRITE).select(
        "run", "partition", "acks", "offset", "value", "time_ms",
        F.lit("reads").alias("judged_by"))
    if final_logs is None:
        return by_reads
    logged, records = final_log_records(final_logs)
    acked = history.where((F.col("f") == "send") & (F.col("type") == "ok")
                          & (F.col("offset") >= 0) & F.col("acks").isin("1", "all", "-1"))
    kept = records.withColumnRenamed("value", "kept")
    by_log = acked.join(logged, ["run", "partition"]).join(
        kept, ["run", "partition", "offset"], "left").where(
        F.col("kept").isNull() | (F.col("kept") != F.col("value"))).select(
        "run", "partition", "acks", "offset", "value", "time_ms",
        F.lit("final log").alias("judged_by"))
    return by_log.unionByName(by_reads.join(logged, ["run", "partition"], "left_anti"))


def write_outcomes(history: DataFrame, lost: DataFrame) -> DataFrame:
    """(run, acks, writes_acked, writes_lost) by the acks level each send was made with;
    `lost`: `acked_writes_lost`."""
    acked = history.where((F.col("f") == "send") & (F.col("type") == "ok")).groupBy(
        "run", "acks").agg(F.count("*").alias("writes_acked"))
    lost = lost.groupBy("run", "acks").agg(F.count("*").alias("writes_lost"))
    return acked.join(lost, ["run", "acks"], "left").select(
        "run", "acks", "writes_acked", F.coalesce("writes_lost", F.lit(0)).alias("writes_lost"))


def anomaly_counts(found: DataFrame, run_table: DataFrame) -> DataFrame:
    """(run, kind, count) for every run and every kind in ANOMALY_KINDS, zeros included."""
    kinds = F.array(*(F.lit(k) for k in ANOMALY_KINDS))
    grid = run_table.select("run", F.explode(kinds).alias("kind"))
    counts = found.groupBy("run", "kind").agg(F.count("*").alias("count"))
    return grid.join(counts, ["run", "kind"], "left").select(
        "run", "kind", F.coalesce("count", F.lit(0)).alias("count"))


def cross_check(counts: DataFrame, summaries: DataFrame) -> DataFrame:
    """Spark's anomaly counts against a run's own summary (run.json/result.json).

    `summaries` has (run, kind, expected, source). Returns (run, kind, source, expected,
    found, agrees); `found` and `agrees` are null for a kind Spark does not compute.
    """
    joined = summaries.join(counts.withColumnRenamed("count", "found"), ["run", "kind"], "left")
    return joined.select(
        "run", "kind", "source", "expected", "found",
        F.when(F.col("kind").isin(*ANOMALY_KINDS),
               F.coalesce(F.col("found"), F.lit(0)) == F.col("expected")).alias("agrees"))


# ------------------------------------------------------------------------------------------
# Per run and per configuration


def judged(counts: DataFrame, run_table: DataFrame, expected: DataFrame) -> DataFrame:
    """(run, anomalies_expected, anomalies_bad, bad_kinds): each run's anomaly counts split by
    whether its configuration allows the kind. `expected` is (config_json, expected_kinds),
    `report.expected_by_config` of each distinct config the caller found."""
    allowed = F.coalesce(F.col("expected_kinds"), F.array().cast("array<string>"))
    rows = counts.join(run_table.select("run", "config_json"), "run").join(
        expected, "config_json", "left").select(
        "run", "kind", "count", F.array_contains(allowed, F.col("kind")).alias("ok"))
    return rows.groupBy("run").agg(
        F.sum(F.when(F.col("ok"), F.col("count")).otherwise(0)).alias("anomalies_expected"),
        F.sum(F.when(~F.col("ok"), F.col("count")).otherwise(0)).alias("anomalies_bad"),
        F.array_join(F.array_sort(F.collect_list(
            F.when(~F.col("ok") & (F.col("count") > 0), F.col("kind")))), ",").alias(
            "bad_kinds"))


def run_summary(run_table: DataFrame, ends: DataFrame, outcomes: DataFrame, counts: DataFrame,
                avail: DataFrame, latency: DataFrame,
                expected: DataFrame | None = None) -> DataFrame:
    """One row per run: its config dimensions and every count above, zeros where none; with
    `expected` (see `judged`), its anomalies split into expected and bad for its config."""
    writes = outcomes.groupBy("run").agg(F.sum("writes_acked").alias("writes_acked"),
                                         F.sum("writes_lost").alias("writes_lost"))
    kinds = counts.groupBy("run").pivot("kind", list(ANOMALY_KINDS)).agg(F.sum("count"))
    partitions = avail.groupBy("run").agg(
        *(F.sum(c).alias(c) for c in ("observed_ms", *AVAILABILITY_MS, "elections",
                                      "isr_shrinks", "isr_expands")))
    faults = latency.groupBy("run").agg(
        F.count("*").alias("leader_faults"),
        F.count("latency_ms").alias("leader_faults_recovered"),
        F.max("latency_ms").alias("election_latency_ms_max"))
    summary = (run_table.drop("config_json")
               .join(ends, "run", "left").join(writes, "run", "left")
               .join(kinds, "run", "left").join(partitions, "run", "left")
               .join(faults, "run", "left"))
    zero = ["writes_acked", "writes_lost", *ANOMALY_KINDS, "observed_ms", *AVAILABILITY_MS,
            "elections", "isr_shrinks", "isr_expands", "leader_faults",
            "leader_faults_recovered"]
    if expected is not None:
        summary = summary.join(judged(counts, run_table, expected), "run", "left")
        zero += ["anomalies_expected", "anomalies_bad"]
    return summary.select(
        *(c for c in summary.columns if c not in zero),
        *(F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in zero))


Z95 = 1.959964  # the normal quantile of a two-sided 95% interval


def wilson(k: F.Column, n: F.Column, z: float = Z95) -> tuple[F.Column, F.Column]:
    """The Wilson score interval (95%) of a proportion k/n, null when n is 0. Unlike k/n +- a
    normal error it stays inside [0, 1] and gives an upper bound when k is 0: no loss in n
    writes still allows a rate up to about 3.8/n."""
    k, n = k.cast("double"), n.cast("double")
    centre = (k + z * z / 2) / (n + z * z)
    half = z * F.sqrt(k * (n - k) / n + z * z / 4) / (n + z * z)
    return (F.when(n > 0, F.greatest(F.lit(0.0), centre - half)),
            F.when(n > 0, F.least(F.lit(1.0), centre + half)))


def per_config(summary: DataFrame, latency: DataFrame) -> DataFrame:
    """Aggregate run summaries over the config dimensions (one row per config key)."""
    dims = ["config_key", *S.CONFIG_DIMENSIONS]
    sums = ["writes_acked", "writes_lost", *ANOMALY_KINDS, "observed_ms", *AVAILABILITY_MS,
            "elections", "isr_shrinks", "isr_expands", "leader_faults",
            "leader_faults_recovered"]
    sums += [c for c in ("anomalies_expected", "anomalies_bad") if c in summary.columns]
    totals = summary.groupBy(*dims).agg(F.count("*").alias("runs"),
                                        *(F.sum(c).alias(c) for c in sums))
    latencies = latency.join(summary.select("run", "config_key"), "run").groupBy(
        "config_key").agg(
        F.percentile_approx("latency_ms", 0.5).alias("election_latency_ms_p50"),
        F.max("latency_ms").alias("election_latency_ms_max"))

    def ratio(part: str, whole: str) -> F.Column:
        return F.when(F.col(whole) > 0, F.col(part) / F.col(whole))

    low, high = wilson(F.col("writes_lost"), F.col("writes_acked"))
    return totals.join(latencies, "config_key", "left").select(
        *dims, "runs", *sums,
        ratio("writes_lost", "writes_acked").alias("lost_write_rate"),
        low.alias("lost_write_rate_low"), high.alias("lost_write_rate_high"),
        ratio("offline_ms", "observed_ms").alias("offline_fraction"),
        ratio("no_leader_ms", "observed_ms").alias("no_leader_fraction"),
        ratio("under_min_isr_ms", "observed_ms").alias("under_min_isr_fraction"),
        "election_latency_ms_p50", "election_latency_ms_max",
    ).orderBy("config_key")


# ------------------------------------------------------------------------------------------
# Distributed replay

ReplayFn = Callable[[str, list[dict]], dict]


def causal_order(events: Iterable[dict]) -> list[dict]:
    """One run's events in one order that respects each node's `seq` and causality:
    `vocab.trace.causal_merge` by `time_ms` (a receive waits for its send when some event of
    the run sends it). Raises `vocab.trace.CausalCycle` when no such order exists."""
    by_node: dict[str, list[dict]] = {}
    for event in events:
        by_node.setdefault(str(event.get("node")), []).append(event)
    for queue in by_node.values():
        queue.sort(key=lambda e: e.get("seq", 0))
    return causal_merge(by_node, _sends, _recv, _time)


def _sends(event: dict) -> list[str]:
    return event.get("send") or []


def _recv(event: dict) -> str | None:
    return event.get("recv")


def _time(event: dict) -> int:
    return event.get("time_ms", 0)


def _event_dict(row) -> dict:
    """An event line as the dict the broker wrote: its raw text when kept, else its columns
    without nulls (also those the broker wrote, as an empty log's `last`: replay reads an
    absent field and a null one alike)."""
    if row["raw"] is not None:
        return json.loads(row["raw"])
    event = _without_nulls(row.asDict(recursive=True))
    for name in ("raw", "file", "line"):
        event.pop(name, None)
    for name in ("outcome_args", "detail"):  # kept as JSON text
        if name in event:
            event[name] = json.loads(event[name])
    return event


def _without_nulls(value):
    """A row's fields without the nulls Spark fills in for keys a line does not have (a
    broker writes an action's arguments and a post-state's fields only where they exist)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def replay_one(fn: ReplayFn, run: str, rows: Iterable,
               config: dict | None = None) -> tuple[str, str, int, str]:
    """Call `fn` on one run (with the run's header config when `fn` takes three arguments);
    a run with no causal order is `unreadable` naming the line, and any exception of `fn`
    becomes verdict `error` with its last line."""
    where: dict[int, str] = {}
    events = []
    for row in rows:
        event = _event_dict(row)
        where[id(event)] = f"{local_path(row['file']) or row['file']}:{row['line']}"
        events.append(event)
    try:
        events = causal_order(events)
    except CausalCycle as cycle:
        return run, "unreadable", len(events), f"{where[id(cycle.item)]}: {cycle}"
    try:
        takes_config = len(inspect.signature(fn).parameters) >= 3
        result = fn(run, events, config) if takes_config else fn(run, events)
        verdict = str(result["verdict"])
        count = int(result.get("events", len(events)))
        detail = result.get("detail")
        detail = None if detail is None else str(detail)
    except Exception as error:  # noqa: BLE001 (one bad run must not stop the corpus)
        last = traceback.format_exception_only(type(error), error)[-1].strip()
        return run, "error", len(events), last
    return run, verdict, count, detail


def distributed_replay(events: DataFrame, fn: ReplayFn,
                       configs: dict[str, dict] | None = None) -> DataFrame:
    """(run, verdict, events, detail): `fn(run_id, events_in_causal_order)` once per run,
    executed on the executors (grouped by run with an RDD groupByKey: no pandas needed).

    `fn` must be picklable (a module-level function) and return a dict with `verdict` and
    optionally `events` (how many it replayed) and `detail`.
    """
    columns = [f.name for f in S.EVENT.fields] + ["raw", "file", "line"]
    configs = dict(configs or {})
    rows = events.select("run", *columns).rdd.map(lambda row: (row["run"], row))
    results = rows.groupByKey().map(
        lambda item: replay_one(fn, item[0], item[1], configs.get(item[0])))
    return events.sparkSession.createDataFrame(results, S.REPLAY)
