"""The Spark analysis on the golden traces: every number worked out by hand in
tests/testdata/traces/README.md.

One local[1] SparkSession for the whole session (it takes 7-20 s to start) and one full
`isrlab analyze` run whose tables the tests read back; the jobs are also called directly where a
test needs to make one fail on purpose.
"""

from __future__ import annotations

import csv
import os
import shutil
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

from isrlab.cli import main as isrlab  # noqa: E402
from pyspark_harness import jobs as J  # noqa: E402
from pyspark_harness.ingest import InputError, find_trace_files, read_stored  # noqa: E402

TRACES = Path(__file__).resolve().parent / "testdata" / "traces"
CONFIG_1 = "current_acks-all_isr-2_clean_flush-none_nemesis-crash"
CONFIG_2 = "hw-truncation_acks-1_isr-1_unclean_flush-none_nemesis-controller-kill+crash+partition"
CONFIG_3 = "current_acks-0_isr-1_clean_flush-1000_nemesis-none"


@pytest.fixture(scope="session")
def spark():
    from pyspark_harness.session import get_session

    session = get_session("local[1]", app_name="isrlab-tests")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def report(spark, tmp_path_factory):
    """The report directory of one `isrlab analyze` over every golden trace."""
    out = tmp_path_factory.mktemp("report")
    assert isrlab(["analyze", str(TRACES), "--out", str(out), "--master", "local[1]"]) == 0
    return out


def table(report: Path, name: str, *columns: str) -> list[tuple[str, ...]]:
    """Rows of REPORT/tables/NAME.csv, the named columns only, as strings."""
    with open(report / "tables" / f"{name}.csv", encoding="utf-8") as handle:
        return [tuple(row[c] for c in columns) for row in csv.DictReader(handle)]


def test_causal_order_waits_for_the_send_whatever_the_clocks_say():
    events = [
        {"node": "b1", "seq": 0, "time_ms": 5, "recv": "b0:1:0"},  # b1's clock runs early
        {"node": "b0", "seq": 0, "time_ms": 9},
        {"node": "b0", "seq": 1, "time_ms": 10},
        {"node": "b1", "seq": 1, "time_ms": 6, "recv": "producer:4"},  # a client: never waits
        {"node": "b2", "seq": 0, "time_ms": 1, "recv": "b9:0:0"},  # unknown sender: no wait
    ]
    order = [(e["node"], e["seq"]) for e in J.causal_order(events)]
    assert order == [("b2", 0), ("b0", 0), ("b0", 1), ("b1", 0), ("b1", 1)]


def test_ingest_partitions_by_table_config_run_and_keeps_malformed_lines(spark, report):
    stored = read_stored(spark, str(report / "dataset"))
    counts = {r["table"]: r["count"] for r in stored.groupBy("table").count().collect()}
    assert counts == {"headers": 13, "events": 25, "history": 40, "nemesis": 10, "malformed": 13}
    assert (report / "dataset" / "table=events" / f"config_key={CONFIG_1}" / "run=seed-1").is_dir()
    malformed = [(os.path.basename(f.split(":", 1)[1]), int(n), why)
                 for f, n, why in table(report, "malformed", "file", "line", "reason")]
    assert malformed == [
        ("broken.ndjson", 1, "no header line above this line"),
        ("broken.ndjson", 3, "not valid JSON"),
        ("broken.ndjson", 4, "blank line"),
        ("broken.ndjson", 5, "field seq: wrong type"),
        ("broken.ndjson", 6, "field kind: unknown value gossip"),
        ("broken.ndjson", 7, "field kind: missing"),
        ("broken.ndjson", 8, "field outcome: missing"),
        ("broken.ndjson", 9, "field offset: missing"),
        ("broken.ndjson", 11, "not a JSON object"),
        ("broken.ndjson", 13, "not valid JSON: text after the object"),
        ("two-runs.ndjson", 11, "field config.acks: missing"),
        ("two-runs.ndjson", 12, "its header (line 11) is not valid"),
        ("two-runs.ndjson", 13, "its header (line 11) is not valid"),
    ]
    # A malformed line keeps its run when its header is fine, and has none when not.
    runs = {(r["line"], r["run"]) for r in stored.where("table = 'malformed'")
            .where("file like '%broken.ndjson' and line in (1, 3)").collect()}
    assert runs == {(1, None), (3, "seed-5")}


def test_anomalies_lost_writes_by_acks_level(report):
    assert sorted(table(report, "anomalies", "run", "partition", "kind", "acks", "offset",
                        "value")) == [
        ("seed-2", "0", "inconsistent_offset", "", "2", ""),
        ("seed-2", "0", "lost_write", "1", "2", "12"),
        ("seed-2", "0", "uncommitted_read", "", "2", "12"),
        ("seed-2", "1", "duplicate", "", "1", "21"),
    ]
    assert table(report, "writes_by_acks", "config_key", "acks", "writes_acked",
                 "writes_lost") == [
        (CONFIG_3, "0", "3", "0"), (CONFIG_1, "all", "4", "0"), (CONFIG_2, "1", "5", "1")]


def test_availability_elections_and_isr_churn(report):
    assert table(report, "availability", "run", "partition", "observed_ms", "offline_ms",
                 "under_min_isr_ms", "elections", "isr_shrinks", "isr_expands") == [
        ("seed-1", "0", "9900", "1200", "2300", "3", "1", "1"),
        ("seed-2", "0", "5000", "0", "0", "2", "0", "1"),
        ("seed-2", "1", "5000", "0", "0", "0", "0", "1"),
        ("seed-3", "0", "50", "0", "0", "0", "0", "0"),
    ]
    assert table(report, "election_latency", "run", "partition", "fault", "broker",
                 "fault_ms", "latency_ms") == [
        ("seed-1", "0", "crash", "0", "4000", "500"),
        ("seed-1", "0", "crash", "1", "5000", "1500"),
        ("seed-2", "0", "crash", "0", "1000", "400"),
        ("seed-2", "1", "controller-kill", "1", "4500", ""),
    ]


def test_balance_and_preferred_leader_election(report):
    assert table(report, "leadership", "run", "broker", "leader_ms") == [
        ("seed-1", "0", "5400"), ("seed-1", "1", "3300"), ("seed-1", "2", "0"),
        ("seed-2", "0", "2400"), ("seed-2", "1", "7600"),
        ("seed-3", "0", "50"), ("seed-5", "0", "0"),
    ]
    assert table(report, "preferred_leader_election", "run", "time_ms", "leaders_before",
                 "imbalance_before", "leaders_after", "imbalance_after") == [
        ("seed-1", "9000", "0,1,0", "1", "1,0,0", "1"),
        ("seed-2", "4000", "0,2", "2", "1,1", "0"),
    ]


def test_per_config_aggregates_and_the_report_files(report):
    assert table(report, "per_config", "config_key", "runs", "writes_acked", "writes_lost",
                 "lost_write_rate", "offline_ms", "under_min_isr_ms", "elections",
                 "election_latency_ms_max") == [
        (CONFIG_3, "1", "3", "0", "0.0", "0", "0", "0", ""),
        ("current_acks-all_isr-1_clean_flush-none_nemesis-none", "1", "0", "0", "", "0", "0",
         "0", ""),
        (CONFIG_1, "1", "4", "0", "0.0", "1200", "2300", "3", "1500"),
        (CONFIG_2, "1", "5", "1", "0.2", "0", "0", "2", "400"),
    ]
    for name in ("index.md", "lost_write_rate.png", "unavailable_time.png",
                 "election_latency.png", "isr_over_time.png"):
        assert (report / name).stat().st_size > 0, name
    assert (report / "parquet" / "per_config").is_dir()
    index = (report / "index.md").read_text(encoding="utf-8")
    assert "## Run seed-1" in index  # the run with the most unavailable time is plotted


def test_cross_check_agrees_with_the_summaries_and_can_fail(spark, report):
    rows = table(report, "cross_check", "run", "kind", "expected", "found", "agrees")
    assert len(rows) == 7 and all(r[4] == "True" for r in rows)
    counts = spark.read.parquet(str(report / "parquet" / "cross_check")) \
        .selectExpr("run", "kind", "found as count")
    tampered = spark.createDataFrame(
        [("seed-2", "lost_write", 2, "run.json"), ("seed-2", "fsync_loss", 1, "run.json")],
        "run string, kind string, expected long, source string")
    checked = {(r["kind"], r["agrees"]) for r in J.cross_check(counts, tampered).collect()}
    assert checked == {("lost_write", False), ("fsync_loss", None)}


def toy_replay(run: str, events: list[dict]) -> dict:
    """A stand-in for model_check.replay: fails run seed-2, crashes on seed-3."""
    if run == "seed-3":
        raise RuntimeError("replay crashed")
    first = f"{events[0]['node']}:{events[0]['action']}" if events else None
    return {"verdict": "mismatch" if run == "seed-2" else "ok", "events": len(events),
            "detail": first}


def test_distributed_replay_runs_one_call_per_run(spark, report):
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers lack tests/ on path
    events = J.load(spark, str(report / "dataset")).events
    rows = sorted(tuple(r) for r in J.distributed_replay(events, toy_replay).collect())
    assert rows == [
        ("seed-1", "ok", 14, "meta:ControllerElectLeader"),
        ("seed-2", "mismatch", 9, "meta:ControllerElectLeader"),
        ("seed-3", "error", 1, "RuntimeError: replay crashed"),
        ("seed-5", "ok", 1, "b0:BrokerFlush"),
    ]


def test_cli_bad_input_is_one_line_and_exit_2(spark, report, tmp_path, capsys):
    garbage = tmp_path / "garbage.ndjson"
    garbage.write_text('{"kind":"event"}\nnot json\n', encoding="utf-8")
    cases = [
        ([str(tmp_path / "missing")], "no such file or directory"),
        ([str(TRACES / "loose"), "--runs-from", "campaign"], "not a campaign directory"),
        ([str(garbage)], "no valid header line"),
        ([str(report / "dataset"), "--from-parquet", "--run", "seed-9"], "no run 'seed-9'"),
    ]
    for argv, message in cases:
        code = isrlab(["analyze", *argv, "--out", str(tmp_path / "out"), "--master", "local[1]"])
        err = capsys.readouterr().err
        last = err.strip().splitlines()[-1]
        assert code == 2 and message in last and "Traceback" not in err, (argv, err)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no \\*.ndjson"):
        find_trace_files([str(tmp_path / "empty")])
    assert len(find_trace_files([str(TRACES / "campaign")], campaign=True)) == 11


def test_the_harness_never_imports_spec_or_impl():
    # The replay function is passed in: two independent descriptions of the protocol.
    import ast

    root = Path(__file__).resolve().parent.parent / "pyspark_harness"
    for path in root.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {alias.name.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.Import) for alias in node.names}
        names |= {node.module.split(".")[0] for node in ast.walk(tree)
                  if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        assert names.isdisjoint({"spec", "impl", "model_check"}), path
