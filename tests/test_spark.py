"""The Spark analysis on a corpus the real drivers make: two `isrlab campaign`s (acks=1 and
acks=all, crashes, partitions and pauses, 15 simulated seconds a run) written in the test
session. Every expected number is computed here, in plain Python, from the same NDJSON files
and the campaigns' own result.json: Spark must find the same.

One local[1] SparkSession for the whole session (it takes 7-20 s to start) and one full
`isrlab analyze --replay` run whose tables the tests read back; the jobs are also called
directly where a test needs to make one fail on purpose.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

from pyspark.sql import functions as F  # noqa: E402

from isrlab.cli import main as isrlab  # noqa: E402
from model_check.conformance.replay import load_run, merge  # noqa: E402
from pyspark_harness import jobs as J  # noqa: E402
from pyspark_harness.ingest import InputError, find_trace_files, parse_lines  # noqa: E402
from vocab.actions import ActionName as A  # noqa: E402
from vocab.outcomes import Code  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_spark")]
from vocab.trace import FORMAT, CausalCycle, LineError, check  # noqa: E402

# Campaign directory -> its options; seeds differ, so run ids ("seed-N") are unique.
CAMPAIGNS = {
    "acks-1": ["--seed", "12", "--runs", "2", "--acks", "1", "--min-isr", "1"],
    "acks-all": ["--seed", "14", "--runs", "2", "--acks", "all", "--min-isr", "2"],
}
COMMON = ["--brokers", "3", "--partitions", "2", "--duration", "15s",
          "--nemesis", "crash,partition,pause", "--keep", "all", "--workers", "1"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    for name, options in CAMPAIGNS.items():
        assert isrlab(["campaign", *COMMON, *options, "--out", str(root / name)]) == 0
    return root


@pytest.fixture(scope="session")
def lines(corpus) -> dict[str, list[dict]]:
    """Every line of the corpus by run id, as parsed JSON, each with `_where` (file:line)."""
    runs: dict[str, list[dict]] = {}
    for run_dir in sorted(corpus.glob("*/run-*")):
        for path in sorted(run_dir.glob("*.ndjson")):
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                body = json.loads(text)
                body["_where"] = f"{path}:{number}"
                runs.setdefault(f"seed-{run_dir.name.split('-')[1]}", []).append(body)
    return runs


@pytest.fixture(scope="session")
def spark():
    from pyspark_harness.session import get_session

    session = get_session("local[1]", app_name="isrlab-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def report(spark, corpus, tmp_path_factory):
    """The report directory of one `isrlab analyze --replay` over both campaigns."""
    out = tmp_path_factory.mktemp("report")
    code = isrlab(["analyze", *(str(corpus / name) for name in CAMPAIGNS), "--runs-from",
                   "campaign", "--replay", "--out", str(out), "--master", "local[1]"])
    assert code == 0
    return out


def table(report: Path, name: str, *columns: str) -> list[tuple[str, ...]]:
    """Rows of REPORT/tables/NAME.csv, the named columns only, as strings."""
    with open(report / "tables" / f"{name}.csv", encoding="utf-8") as handle:
        return [tuple(row[c] for c in columns) for row in csv.DictReader(handle)]


def events_of(lines: list[dict], action: str | None = None, node: str | None = None):
    return [b for b in lines if b["kind"] == "event" and (action is None or b["action"] == action)
            and (node is None or b["node"] == node)]


def test_causal_order_waits_for_sends_on_a_real_run(corpus, lines):
    run_dir = corpus / "acks-1" / "run-12"
    events = [{k: v for k, v in b.items() if k != "_where"} for b in events_of(lines["seed-12"])]
    order = J.causal_order(events)
    # The one merge: Spark orders the events exactly as replay does.
    assert [(e["node"], e["seq"]) for e in order] == [
        (e.node, e.seq) for e in merge(load_run([run_dir])) if e.kind == "event"]
    # b1's clock 50 ms early: by time alone hundreds of receives would come before their send.
    skewed = [{**e, "time_ms": e["time_ms"] - 50} if e["node"] == "b1" else e for e in events]
    sent_at = {mid: e["time_ms"] for e in skewed for mid in e["send"]}
    early = [e for e in skewed if e.get("recv") in sent_at and e["time_ms"] < sent_at[e["recv"]]]
    assert len(early) > 100
    order = J.causal_order(skewed)
    position = {mid: i for i, e in enumerate(order) for mid in e["send"]}
    waited = [i for i, e in enumerate(order) if e.get("recv") in position]
    assert len(order) == len(events) and len(waited) > 1000
    assert all(position[order[i]["recv"]] < i for i in waited)
    # A receive of a message its sender sends only later: no causal order, named by file:line.
    last = events_of(lines["seed-12"], A.LEADER_HANDLE_FETCH, "b0")[-1]
    victim = events_of(lines["seed-12"], A.FOLLOWER_HANDLE_FETCH_RESPONSE, "b1")[0]
    rows = []
    for b in events_of(lines["seed-12"]):
        body = {k: v for k, v in b.items() if k != "_where"}
        if b is victim:
            body["recv"] = last["send"][0]
        path, number = b["_where"].rsplit(":", 1)
        rows.append({"raw": json.dumps(body), "file": path, "line": int(number)})
    with pytest.raises(CausalCycle):
        J.causal_order([json.loads(r["raw"]) for r in rows])
    run, verdict, count, detail = J.replay_one(lambda run, events: {"verdict": "ok"}, "x", rows)
    assert (verdict, count) == ("unreadable", len(rows))
    assert detail == f"{victim['_where']}: receives {last['send'][0]!r}, which no causal order " \
                     "sends first (a send after its receive)"


def test_ingest_stores_every_line_of_the_corpus_by_table_config_and_run(spark, report, corpus,
                                                                         lines):
    from pyspark_harness.ingest import read_stored

    stored = read_stored(spark, str(report / "dataset"))
    counts = {r["table"]: r["count"] for r in stored.groupBy("table").count().collect()}
    kinds = Counter(b["kind"] for run in lines.values() for b in run)
    assert counts == {"headers": kinds["header"], "events": kinds["event"],
                      "history": kinds["history"], "nemesis": kinds["nemesis"]}
    assert kinds["event"] > 20_000  # no malformed table: every line of the corpus is valid
    key = "current_acks-1_isr-1_clean_flush-none_nemesis-crash+partition+pause"
    assert (report / "dataset" / "table=events" / f"config_key={key}" / "run=seed-12").is_dir()


def test_columns_of_distinct_values_are_written_without_a_dictionary(spark, report):
    """Parquet's dictionary is skipped for the columns whose values are nearly all distinct
    (`schemas.DISTINCT_COLUMNS`), and kept for the others: read from the footers of the
    events files the ingest wrote."""
    from pyspark_harness.schemas import DISTINCT_COLUMNS

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    files = sorted((report / "dataset" / "table=events").rglob("*.parquet"))
    assert files
    dictionary = {}
    for path in files:
        reader = jvm.org.apache.parquet.hadoop.ParquetFileReader.open(
            jvm.org.apache.parquet.hadoop.util.HadoopInputFile.fromPath(
                jvm.org.apache.hadoop.fs.Path(str(path)), conf))
        try:
            for block in reader.getFooter().getBlocks():
                for chunk in block.getColumns():
                    name = chunk.getPath().toDotString()
                    used = {str(e) for e in chunk.getEncodings()}
                    dictionary[name] = dictionary.get(name, False) or bool(
                        used & {"PLAIN_DICTIONARY", "RLE_DICTIONARY"})
        finally:
            reader.close()
    assert set(DISTINCT_COLUMNS) <= set(dictionary)
    assert not any(dictionary[name] for name in DISTINCT_COLUMNS)
    assert dictionary["action"] and dictionary["node"] and dictionary["outcome"]


def test_ingest_rejects_the_lines_the_format_rejects(spark, corpus, lines, tmp_path):
    # Real lines of one run, each damaged one way; vocab.trace.check and Spark both reject each.
    run = [{k: v for k, v in b.items() if k != "_where"} for b in lines["seed-14"]]
    header = next(b for b in run if b["kind"] == "header" and b["node"] == "b1")
    b1 = [b for b in run if b["node"] == "b1" and b["kind"] == "event"]
    fetch = next(b for b in b1 if b.get("recv"))
    read = next(b for b in run if b["kind"] == "history" and b["f"] == "read")
    damaged = [
        ({**fetch, "recv": "b0:7"}, "field recv: bad message id b0:7"),
        ({**fetch, "send": ["b1:7"]}, "field send: bad message id b1:7"),
        ({**fetch, "send": ["b2:m7"]}, "field send: an id of another node: b2:m7"),
        ({**fetch, "outcome": "fetch from 0"}, "field outcome: not an outcome code: fetch from 0"),
        # A final line terminator: Java's `$` passes it, Python's fullmatch does not.
        ({**fetch, "action": "LeaderHandleFetch\n"},
         "field action: not an action name: LeaderHandleFetch\n"),
        ({**fetch, "recv": "b0:m7\r"}, "field recv: bad message id b0:m7\r"),
        ({**fetch, "seq": "3"}, "field seq: wrong type"),
        ({k: v for k, v in fetch.items() if k != "send"}, "field send: missing"),
        ({**read, "type": "maybe"}, "field type: unknown value maybe"),
    ]
    path = tmp_path / "b1.ndjson"
    path.write_text("".join(json.dumps(b, sort_keys=True) + "\n"
                            for b in [header, b1[0], *(b for b, _ in damaged)]))
    for body, _ in damaged:
        with pytest.raises(LineError):
            check(body)
    found = sorted((r["line"], r["reason"]) for r in parse_lines(spark, [str(path)])
                   .where("table = 'malformed'").collect())
    assert found == [(3 + i, reason) for i, (_, reason) in enumerate(damaged)]
    # A header that is itself malformed takes the lines below it along, each named for it;
    # the next good header starts a run again.
    bad_header = tmp_path / "bad" / "b1.ndjson"
    bad_header.parent.mkdir()
    no_acks = {**header, "config": {k: v for k, v in header["config"].items() if k != "acks"}}
    bad_header.write_text("".join(json.dumps(b) + "\n" for b in [
        {**header, "format": "isrlab-trace/0"}, b1[0], no_acks, b1[0], header, b1[0]]))
    rows = sorted((r["line"], r["table"], r["reason"], r["run"])
                  for r in parse_lines(spark, [str(bad_header)]).collect())
    assert rows == [
        (1, "malformed", f"field format: expected {FORMAT}, found isrlab-trace/0", None),
        (2, "malformed", "its header (line 1) is not valid", None),
        (3, "malformed", "field config.acks: missing", None),
        (4, "malformed", "its header (line 3) is not valid", None),
        (5, "headers", None, "seed-14"),
        (6, "events", None, "seed-14"),
    ]


def test_nesting_is_measured_only_on_lines_the_parser_rejects(spark, lines, tmp_path):
    # 40 levels deep: in a key the format does not have, the line is a good event (the parser
    # skips it); in a field it does have, it is malformed and named for its depth; 100,000
    # levels deep, the parser refuses it before it recurses.
    run = [{k: v for k, v in b.items() if k != "_where"} for b in lines["seed-14"]]
    header = next(b for b in run if b["kind"] == "header" and b["node"] == "b1")
    fetch = next(b for b in run if b["node"] == "b1" and b["kind"] == "event" and b.get("recv"))
    deep = json.loads("[" * 40 + "]" * 40)
    very_deep = json.dumps({**fetch, "seq": 0})[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000
    path = tmp_path / "b1.ndjson"
    path.write_text("".join(json.dumps(b) + "\n" for b in [
        header, {**fetch, "extra": deep}, {**fetch, "seq": deep}]) + very_deep + "}\n")
    found = sorted((r["line"], r["table"], r["reason"]) for r in parse_lines(spark, [str(path)])
                   .where("line > 1").collect())
    deeper = "nested deeper than 16 levels (or brackets unbalanced)"
    assert found == [(2, "events", None), (3, "malformed", deeper), (4, "malformed", deeper)]


def test_poll_order_anomalies_agree_with_the_history_checker(spark, lines, tmp_path):
    # A real consumer's reads of one run, corrupted: one read dropped (the next one skips
    # offsets), one read given again later (the consumer goes back), one read's records put
    # out of order. Spark and model_check.conformance.history must count the same poll anomalies.
    from model_check.conformance.history import check_history

    run = [{k: v for k, v in b.items() if k != "_where"} for b in lines["seed-14"]]
    header = next(b for b in run if b["kind"] == "header" and b["node"] == "consumer")
    reads = [b for b in run if b["kind"] == "history" and b["node"] == "consumer"
             and b["f"] == "read" and b["partition"] == 0 and len(b["records"]) > 1]
    assert len(reads) >= 6
    others = [b for b in run if b["kind"] == "history" and b["node"] == "consumer"
              and b not in reads]
    kept = [dict(b) for b in reads if b is not reads[2]]
    kept.append({**reads[1], "time_ms": kept[-1]["time_ms"] + 1})
    kept[4] = {**kept[4], "records": list(reversed(kept[4]["records"]))}
    corrupted = sorted(others + kept, key=lambda b: b["time_ms"])
    for seq, body in enumerate(corrupted):
        body["seq"] = seq
    path = tmp_path / "consumer.ndjson"
    path.write_text("".join(json.dumps(b, sort_keys=True) + "\n"
                            for b in [header, *corrupted]))
    history = parse_lines(spark, [str(path)]).where("table = 'history'")
    found = Counter(r["kind"] for r in J.poll_order(history).collect())
    counts = check_history(corrupted).counts
    assert found == {"poll-skip": counts["poll-skip"],
                     "nonmonotonic-poll": counts["nonmonotonic-poll"]}
    assert found["poll-skip"] >= 1 and found["nonmonotonic-poll"] >= 2


def test_wilson_intervals_and_the_expected_or_bad_split(spark):
    counts = spark.createDataFrame([(0, 1000), (52, 1117), (0, 0)], "k long, n long")
    low, high = J.wilson(F.col("k"), F.col("n"))
    bounds = [(r[0], r[1]) for r in counts.select(low, high).collect()]
    assert bounds[0][0] == 0 and bounds[0][1] == pytest.approx(0.003827, abs=1e-6)
    # Computed by hand from the score interval's p-form:
    # (p + z²/2n ± z√(p(1-p)/n + z²/4n²)) / (1 + z²/n).
    assert bounds[1] == (pytest.approx(0.035676, abs=1e-6), pytest.approx(0.060539, abs=1e-6))
    assert bounds[2] == (None, None)
    # The same lost writes: expected of acks=1, bad under acks=all with every append flushed.
    runs = spark.createDataFrame([("r1", '{"acks":"1"}'), ("r2", '{"acks":"all",'
                                  '"log_flush_interval_messages":1}')],
                                 "run string, config_json string")
    found = spark.createDataFrame([("r1", "lost-write", 3), ("r2", "lost-write", 2),
                                   ("r2", "duplicate", 1)], "run string, kind string, count long")
    from model_check.conformance.replay import given_up_of
    from pyspark_harness.report import expected_by_config

    expected = spark.createDataFrame(
        expected_by_config([r["config_json"] for r in runs.collect()], given_up_of),
        "config_json string, expected_kinds array<string>")
    split = {r["run"]: (r["anomalies_expected"], r["anomalies_bad"], r["bad_kinds"])
             for r in J.judged(found, runs, expected).collect()}
    assert split == {"r1": (3, 0, ""), "r2": (1, 2, "lost-write")}


def test_availability_and_preferred_leader_tables_match_the_traces(report, lines):
    expected_isr: Counter = Counter()
    elections: Counter = Counter()
    partitions = set()  # (run, partition): every partition of the run's config
    preferred = []
    for run, run_lines in lines.items():
        count = next(b for b in run_lines if b["kind"] == "header")["config"]["partitions"]
        partitions.update((run, p) for p in range(count))
        meta = sorted(events_of(run_lines, node="meta"), key=lambda b: (b["time_ms"], b["seq"]))
        for b in meta:
            if b["action"] in (A.LEADER_SHRINK_ISR, A.LEADER_EXPAND_ISR) \
                    and b["outcome"] == Code.ISR_CHANGED:
                expected_isr[run, b["args"]["partition"], b["action"]] += 1
            if b["action"] == A.CONTROLLER_ELECT_PREFERRED_LEADER \
                    and b["outcome"] == Code.ELECTED_PREFERRED:
                preferred.append((run, str(b["time_ms"]), str(b["args"]["partition"])))
        # Each partition starts at leader epoch 0: the store's first state can be an election.
        epoch = dict.fromkeys(range(count), 0)
        for b in meta:
            for p in b["state"]["partitions"]:
                if p["leader"] >= 0 \
                        and p["leader_epoch"] > epoch[p["partition"]]:
                    elections[run, p["partition"]] += 1
                epoch[p["partition"]] = p["leader_epoch"]
    rows = table(report, "availability", "run", "partition", "elections", "isr_shrinks",
                 "isr_expands")
    assert {(r, int(p)): (int(e), int(s), int(x)) for r, p, e, s, x in rows} == {
        (run, p): (elections[run, p], expected_isr[run, p, A.LEADER_SHRINK_ISR],
                   expected_isr[run, p, A.LEADER_EXPAND_ISR])
        for run, p in partitions}
    assert sum(expected_isr.values()) > 10 and sum(elections.values()) > 5
    effect = table(report, "preferred_leader_election", "run", "time_ms", "partition",
                   "leaders_after", "imbalance_after")
    assert len(preferred) >= 3 and sorted(r[:3] for r in effect) == sorted(preferred)
    # After each, both partitions have a leader: the per-broker counts add up to 2.
    assert all(sum(map(int, r[3].split(","))) == 2 for r in effect)


def test_the_page_gives_the_cross_check_as_a_verdict_and_only_disagreeing_rows(report):
    page = (report / "index.md").read_text(encoding="utf-8")
    section = page.split("## Cross-check with the runs' own summaries\n", 1)[1].split("\n## ")[0]
    compared = len(table(report, "cross_check", "run"))
    assert section.strip() == (f"All {compared} counts agree with the runs' own summaries "
                               "(each count: `tables/cross_check.csv`).")


def test_cross_check_and_replay_agree_with_the_campaigns(spark, report, corpus, lines):
    results = {f"seed-{d.name.split('-')[1]}": json.loads((d / "result.json").read_text())
               for d in sorted(corpus.glob("*/run-*"))}
    expected = {(run, kind): str(n) for run, r in results.items()
                for kind, n in r["history_from_traces"]["anomalies"].items()}
    rows = table(report, "cross_check", "run", "kind", "expected", "found", "agrees")
    assert {(r, k): (e, f, a) for r, k, e, f, a in rows} == {
        key: (n, n, "True") for key, n in expected.items()}
    lost = sum(int(n) for (_, kind), n in expected.items() if kind == "lost-write")
    assert lost > 0  # acks=1 with crashes loses writes: the check compares non-zero counts
    counts = spark.read.parquet(str(report / "parquet" / "cross_check")) \
        .selectExpr("run", "kind", "found as count")
    tampered = spark.createDataFrame(
        [("seed-12", "lost-write", int(expected["seed-12", "lost-write"]) + 1, "result.json"),
         ("seed-12", "fsync_loss", 1, "result.json")],
        "run string, kind string, expected long, source string")
    checked = {(r["kind"], r["agrees"]) for r in J.cross_check(counts, tampered).collect()}
    assert checked == {("lost-write", False), ("fsync_loss", None)}
    # The spec replay inside Spark, on Spark's causal order, agrees with each campaign's.
    replayed = table(report, "replay", "run", "verdict", "events")
    assert replayed == [(run, results[run]["replay"]["verdict"],
                         str(len(events_of(lines[run])))) for run in sorted(results)]
    assert {v for _, v, _ in replayed} == {"accepted"}


def test_per_config_aggregates_and_the_report_files(report, lines):
    acked: Counter = Counter()
    for run_lines in lines.values():
        acks = next(b for b in run_lines if b["kind"] == "header")["config"]["acks"]
        acked[acks] += sum(1 for b in run_lines if b["kind"] == "history"
                           and b["f"] == "send" and b["type"] == "ok")
    rows = table(report, "per_config", "acks", "runs", "writes_acked")
    assert sorted(rows) == [("1", "2", str(acked["1"])), ("all", "2", str(acked["all"]))]
    for name in ("index.md", "lost_write_rate.png", "unavailable_time.png",
                 "election_latency.png", "isr_over_time.png"):
        assert (report / name).stat().st_size > 0, name
    assert (report / "parquet" / "per_config").is_dir()
    page = (report / "index.html").read_text(encoding="utf-8")
    # Self-contained: every plot of the Markdown page is inlined, none is linked.
    plots = (report / "index.md").read_text(encoding="utf-8").count("![")
    assert plots >= 4 and page.count('src="data:image/png;base64,') == plots
    assert ".png\"" not in page and "<table>" in page


def test_every_parquet_table_holds_the_rows_of_its_csv_file(spark, report):
    """The Parquet tables are written concurrently: each must still be its own table."""
    written = {p.name for p in (report / "parquet").iterdir()}
    tables = sorted((report / "tables").glob("*.csv"))
    assert {p.stem for p in tables} | {"leaders_over_time", "partition_timeline"} == written
    for csv_file in tables:
        with open(csv_file, encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        frame = spark.read.parquet(str(report / "parquet" / csv_file.stem))
        assert (csv_file.stem, frame.columns) == (csv_file.stem, rows[0])
        assert (csv_file.stem, frame.count()) == (csv_file.stem, len(rows) - 1)


def test_the_page_counts_the_event_and_malformed_lines(report, lines):
    events = sum(1 for run_lines in lines.values() for b in run_lines if b["kind"] == "event")
    page = (report / "index.md").read_text(encoding="utf-8")
    assert events > 1000 and f"{events:,} events, 0 malformed lines;" in page


def test_the_configs_the_driver_finds_in_the_headers_are_spark_s(spark, report):
    """`run_configs` answers on the driver what `J.runs` does in Spark: each run's smallest
    header config (its files may disagree), a run without one as null."""
    from pyspark_harness.report import collect_headers, run_configs

    headers = J.load(spark, str(report / "dataset")).headers
    runs = sorted(r["run"] for r in headers.select("run").distinct().collect())
    first, second = headers.where(F.col("run") == runs[0]).orderBy("file").take(2)
    acks_0 = F.col("config").withField("acks", F.lit("0"))  # sorts before "1" and "all"
    # The first run: one file says acks 0, one its real config, the others none; the last
    # run: no config at all.
    changed = headers.withColumn("config", F.when(F.col("file") == first["file"], acks_0).when(
        (F.col("file") == second["file"]) | ~F.col("run").isin(runs[0], runs[-1]),
        F.col("config")))
    for frame in (headers, changed):
        spark_configs = sorted({r["config_json"] for r in J.runs(frame).collect()},
                               key=lambda c: (c is not None, c or ""))
        assert run_configs(collect_headers(frame)) == spark_configs
    assert len(runs) == 4 and spark_configs[0] is None
    assert sum('"acks":"0"' in c for c in spark_configs[1:]) == 1


def test_a_browser_renders_the_report_page(report, tmp_path):
    import subprocess

    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); "
                    "the page was checked as text only")
    page = (report / "index.html").as_uri()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu"]
    dom = subprocess.run([*flags, "--dump-dom", page], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    plots = (report / "index.md").read_text(encoding="utf-8").count("![")
    assert dom.count('<img src="data:image/png;base64,') == plots >= 5
    assert dom.count("<table>") >= 5 and "Per configuration</h2>" in dom
    runs = [run for (run,) in table(report, "per_run", "run")]
    for run in runs:  # every run id links to its trace directory, relative to the report
        assert f'">{run}</a>' in dom
    link = dom.split(f'">{runs[0]}</a>')[0].rsplit('href="', 1)[1]
    assert (report / link).resolve().is_dir() and any((report / link).glob("*.ndjson"))
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,2000", page],
                   capture_output=True, timeout=120, check=True)
    assert shot.stat().st_size > 50_000  # a drawn page, not a blank one


def test_cli_bad_input_is_one_line_and_exit_2(spark, report, corpus, tmp_path, capsys):
    garbage = tmp_path / "garbage.ndjson"
    garbage.write_text('{"kind":"event"}\nnot json\n', encoding="utf-8")
    cases = [
        ([str(tmp_path / "missing")], "No such file or directory"),
        ([str(corpus / "acks-1" / "run-12"), "--runs-from", "campaign"],
         "not a campaign directory"),
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
    assert len(find_trace_files([str(corpus / "acks-1")], campaign=True)) == len(
        list((corpus / "acks-1").glob("run-*/*.ndjson")))


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


def test_hostile_lines_and_runs_that_share_an_id(spark, tmp_path, capsys):
    """A header nested 100,000 deep and a 2 MB line are malformed rows, not a dead JVM; two
    runs of seed 5 with other durations stay two runs."""
    from impl.config import ClusterConfig
    from impl.sim import SimOptions, simulate

    corpus = tmp_path / "corpus"
    for name, ms in (("short", 2_000), ("long", 3_000)):
        simulate(ClusterConfig(), SimOptions(seed=5, duration_ms=ms)).write(corpus / name)
    hostile = corpus / "hostile"
    hostile.mkdir()
    deep = '{"kind":"header","x":' + "[" * 100_000 + "]" * 100_000 + "}"
    (hostile / "deep.ndjson").write_text(deep + "\n", encoding="utf-8")
    first = (corpus / "short" / "b0.ndjson").read_text(encoding="utf-8").splitlines()
    huge = json.loads(first[1])
    huge["detail"] = {"pad": "x" * (2 << 20)}
    # In the short run's directory: the same run, one line of it too long.
    (corpus / "short" / "huge.ndjson").write_text(first[0] + "\n" + json.dumps(huge) + "\n",
                                                  encoding="utf-8")
    out = tmp_path / "out"
    code = isrlab(["analyze", str(corpus), "--out", str(out), "--master", "local[1]"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "2 runs share a run id with another run and are kept apart as: seed-5@" in err
    malformed = table(out, "malformed", "file", "reason")
    reasons = {Path(f).name: r for f, r in malformed}
    assert reasons["deep.ndjson"] == "nested deeper than 16 levels (or brackets unbalanced)"
    assert reasons["huge.ndjson"] == "line over 1,048,576 characters"
    runs = {r for (r,) in table(out, "per_run", "run")}
    assert len(runs) == 2 and all(r.startswith("seed-5@") for r in runs)


def test_from_parquet_on_something_else_is_one_line(spark, tmp_path, capsys):
    (tmp_path / "notparquet").mkdir()
    (tmp_path / "notparquet" / "x.txt").write_text("hello", encoding="utf-8")
    for path in (tmp_path / "notparquet", tmp_path / "empty"):
        path.mkdir(exist_ok=True)
        code = isrlab(["analyze", str(path), "--from-parquet", "--out", str(tmp_path / "o"),
                       "--master", "local[1]"])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err and "Py4J" not in err, err
        assert err.strip().splitlines()[-1] == (
            f"isrlab analyze: error: {path}: no ingested Parquet dataset here (expected the "
            "table=*/ directories an earlier analyze wrote)")


@pytest.fixture(scope="module")
def losses(spark, tmp_path_factory):
    """One `isrlab analyze --runs-from campaign` over three campaigns: a run that loses
    acknowledged writes the guarantee excuses, and two runs each of the clean and the ELR
    policy under the isr-kill nemesis; an acks=1 run that loses writes no later read covers
    (the reads alone see none of them); a run whose leader is killed, replaced 1.5 s later. Returns
    (report directory, lost writes by run as run_losses counts them, loss notes by run,
    {policy: lost writes}, outcomes by run)."""
    from impl.config import ClusterConfig
    from impl.sim import SimOptions
    from model_check.conformance.campaign import run_campaign, run_one
    from model_check.conformance.policies import POLICIES

    root = tmp_path_factory.mktemp("losses")
    # The followers cut off, then the leader crashes unflushed (as in tests/test_losses.py).
    faults = ((2000, "partition", "b1", 5000), (2000, "partition", "b2", 5000),
              (4500, "crash", "b0", 1000))
    options = SimOptions(seed=1, duration_ms=12_000, faults=faults, max_faults=3)
    excused = run_one(ClusterConfig(), options, root / "campaign", "all")
    assert excused.loss_note and not excused.failed
    outcomes, by_policy = [excused], {}
    for i, name in enumerate(("clean", "elr")):
        config = ClusterConfig().replace(**POLICIES[name])
        options = SimOptions(seed=40 + 10 * i, duration_ms=20_000, nemesis=("isr-kill",))
        result = run_campaign(config, options, 2, root / name, keep="all", workers=1)
        outcomes += result.outcomes
        by_policy[name] = sum(o.lost for o in result.outcomes)
        assert (result.summary()["acked_writes_lost"] > 0) == (name == "clean")
    unread = ClusterConfig(variant="kip-320", acks="1", min_insync_replicas=1,
                           unclean_leader_election_enable=True)
    outcomes.append(run_one(unread, SimOptions(seed=1012, duration_ms=20_000,
                                               nemesis=("crash", "partition", "pause", "slow"),
                                               max_faults=2), root / "acks-1", "all"))
    killed = ((1000, "pause", "b2", 2500), (6000, "crash", "b0", 5000))
    outcomes.append(run_one(ClusterConfig(), SimOptions(seed=3, duration_ms=12_000,
                                                        faults=killed, max_faults=2),
                            root / "killed", "all"))
    out = root / "out"
    code = isrlab(["analyze", *(str(root / d) for d in ("campaign", "clean", "elr", "acks-1",
                                                        "killed")),
                   "--runs-from", "campaign", "--out", str(out), "--master", "local[1]"])
    assert code == 0
    lost = {f"seed-{o.seed}": o.lost for o in outcomes}
    notes = {f"seed-{o.seed}": o.loss_note for o in outcomes if o.loss_note}
    return out, lost, notes, by_policy, {f"seed-{o.seed}": o for o in outcomes}


def _lines_alone(outcome) -> int:
    """Lost writes the trace lines alone show (the reads as the final state)."""
    return outcome.result["history_from_traces"]["anomalies"].get("lost-write", 0)


def test_the_report_names_lost_writes_first_even_when_excused(losses):
    out, lost, notes, _, _ = losses
    page = (out / "index.md").read_text(encoding="utf-8")
    head = page[:page.index("## Per configuration")]
    lossy = {run for run in lost if lost[run] or run in notes}
    assert "seed-1" in lossy and len(lossy) > 1
    total = sum(lost[run] for run in lossy)
    assert f"**{total:,} acknowledged writes lost in {len(lossy)} runs**" in head
    section = page[page.index("## Lost acknowledged writes"):]
    assert "| [seed-1](../campaign/run-1/) |" in section and notes["seed-1"] in section


def test_the_report_answers_what_happens_when_every_isr_replica_fails(losses):
    out, _, _, summaries, _ = losses
    page = (out / "index.md").read_text(encoding="utf-8")
    start = page.index("## When every ISR replica fails")
    section = page[start:page.index("\n## ", start + 1)]
    assert "policies.png" in section and (out / "policies.png").is_file()
    with open(out / "tables" / "per_config.csv", encoding="utf-8") as handle:
        rows = {r["policy"]: r for r in csv.DictReader(handle) if r["nemesis"] == "isr-kill"}
    assert set(rows) == {"clean", "elr"}
    # The history checker on the same lines and Spark agree, and the policies differ as they
    # should: B8 loses writes, ELR does not.
    assert int(rows["clean"]["writes_lost"]) == summaries["clean"] > 0
    assert int(rows["elr"]["writes_lost"]) == summaries["elr"] == 0
    assert f"| clean | isr-kill | 2 | {rows['clean']['writes_acked']} |" in section


def test_spark_counts_each_run_s_lost_writes_as_run_losses_does(losses):
    """One definition: Spark's writes_lost is the campaign's Losses.lost run by run, also
    where no later read covered the lost writes (the reads alone see none of them)."""
    out, lost, _, _, outcomes = losses
    with open(out / "tables" / "per_run.csv", encoding="utf-8") as handle:
        rows = {r["run"]: r for r in csv.DictReader(handle)}
    assert {run: int(r["writes_lost"]) for run, r in rows.items()} == lost
    unread = rows["seed-1012"]
    assert int(unread["writes_lost"]) > 0 == _lines_alone(outcomes["seed-1012"])
    assert int(unread["lost-write"]) == 0
    # The page's headline is the sum of its rows, and each row reconciles its counts.
    page = (out / "index.md").read_text(encoding="utf-8")
    lossy = [run for run in lost if lost[run]]
    total = sum(lost.values())
    assert f"**{total:,} acknowledged writes lost in {len(lossy)} runs**" in page
    section = page[page.index("## Lost acknowledged writes"):]
    n, acc = lost["seed-1012"], outcomes["seed-1012"].result["losses"]
    assert (f"| [seed-1012](../acks-1/run-1012/) | {n} | {acc['lost']} | {acc['excused']} | "
            f"{acc['unexcused']} | 0 | {n} |") in section


def test_a_killed_leader_leaves_its_partition_offline_until_the_election(losses):
    """The store names the crashed leader until its session times out: no live broker leads
    the partition, so Spark's offline time is the election latency, as the campaign's."""
    out, _, _, _, outcomes = losses
    avail = {(r, int(p)): (int(o), int(n)) for r, p, o, n in table(
        out, "availability", "run", "partition", "offline_ms", "no_leader_ms")}
    latency = [int(ms) for r, p, ms in table(out, "election_latency", "run", "partition",
                                              "latency_ms") if (r, p) == ("seed-3", "0")]
    assert latency and latency[0] > 0
    assert avail["seed-3", 0] == (latency[0], 0)
    assert outcomes["seed-3"].timeline["offline_ms"] == latency[0]
    with open(out / "tables" / "per_config.csv", encoding="utf-8") as handle:
        fractions = [(float(r["offline_fraction"]), float(r["no_leader_fraction"]))
                     for r in csv.DictReader(handle) if r["nemesis"] == "none"]
    assert any(offline > 0 == no_leader for offline, no_leader in fractions)


def test_spark_watch_reports_the_tasks_of_a_running_job(spark):
    from pyspark_harness.watch import SparkWatch

    class Recorder:
        enabled = True

        def __init__(self):
            self.updates = []

        def update(self, done=None, **fields):
            self.updates.append((done, fields))

    shown = Recorder()
    with SparkWatch(spark, shown, every=0.05):
        # A job slow enough to be seen running: 4 tasks that each sleep a little.
        spark.sparkContext.parallelize(range(4), 4).map(
            lambda x: __import__("time").sleep(0.5) or x).collect()
    assert any(f.get("stages", 0) >= 1 and "tasks" in f.get("active", "")
               for _, f in shown.updates)


def test_a_campaign_on_spark_gives_the_local_pool_s_results(spark, tmp_path):
    """Same seeds through Spark tasks and through the process pool: the same outcomes (all but
    the timings), and the same trace files written by the Spark tasks."""
    from pyspark.sql import functions as F

    from impl.config import ClusterConfig
    from impl.sim import SimOptions
    from model_check.conformance.campaign import run_campaign

    config = ClusterConfig(acks="1")
    options = SimOptions(seed=40, duration_ms=4_000, nemesis=("crash", "partition"))
    seen = []
    pooled = run_campaign(config, options, 6, tmp_path / "pool", keep="all", workers=2)
    dataset = str(tmp_path / "spark" / "dataset")
    sparked = run_campaign(config, options, 6, tmp_path / "spark", keep="all",
                           spark="local[2]", progress=lambda o, done, total: seen.append(done),
                           dataset=dataset)

    def strip(summary):
        return {k: v for k, v in summary.items()
                if k not in ("seconds", "replay_events_per_second")}

    assert strip(sparked.summary()) == strip(pooled.summary())
    assert [o.seed for o in sparked.outcomes] == list(range(40, 46)) and seen == list(range(1, 7))
    written = sorted(str(p.relative_to(tmp_path / "spark"))
                     for p in (tmp_path / "spark").rglob("*.ndjson"))
    assert len(written) >= 6 * 4 and written == sorted(
        str(p.relative_to(tmp_path / "pool")) for p in (tmp_path / "pool").rglob("*.ndjson"))
    assert (tmp_path / "spark" / "run-42" / "b0.ndjson").read_bytes() == \
        (tmp_path / "pool" / "run-42" / "b0.ndjson").read_bytes()
    # The dataset the Spark tasks wrote holds what ingesting the pool's NDJSON gives, row for
    # row (but for the directory in each row's file name).
    from pyspark_harness.ingest import ingest, read_stored

    ingest(spark, find_trace_files([str(tmp_path / "pool")]), str(tmp_path / "ingested"))
    keys = ["table", "config_key", "run", "node", "seq", "line", "raw"]
    direct = read_stored(spark, dataset).select(
        *keys, F.regexp_extract("file", r"(run-[0-9]+/[^/]+)$", 1).alias("name"))
    ingested = read_stored(spark, str(tmp_path / "ingested")).select(
        *keys, F.regexp_extract("file", r"(run-[0-9]+/[^/]+)$", 1).alias("name"))
    assert direct.count() == ingested.count() > 6 * 1000
    assert direct.exceptAll(ingested).count() == 0 == ingested.exceptAll(direct).count()


def test_only_a_small_input_gets_the_quick_jvm(monkeypatch, tmp_path, capsys):
    from pyspark_harness import session
    from pyspark_harness.session import (
        LOCAL_JVM_OPTIONS,
        QUICK_JVM_BELOW,
        QUICK_JVM_OPTIONS,
        local_conf,
    )

    key = "spark.driver.extraJavaOptions"
    assert local_conf(QUICK_JVM_BELOW - 1)[key] == f"{LOCAL_JVM_OPTIONS} {QUICK_JVM_OPTIONS}"
    assert local_conf(QUICK_JVM_BELOW)[key] == local_conf(None)[key] == LOCAL_JVM_OPTIONS

    # And `isrlab analyze` hands its files' size to the session it builds: a builder that
    # records its settings and starts no JVM (the CLI then says Spark did not start).
    class Builder:
        conf: dict[str, str] = {}

        def appName(self, name):  # noqa: N802 (pyspark's spelling)
            return self

        def master(self, url):
            return self

        def config(self, k, v):
            Builder.conf[k] = v
            return self

        def getOrCreate(self):  # noqa: N802
            raise RuntimeError("no JVM in this test")

    class FakeSession:
        builder = Builder()

        @staticmethod
        def getActiveSession():  # noqa: N802
            return None

    monkeypatch.setattr(session, "SparkSession", FakeSession)
    (tmp_path / "t.ndjson").write_text('{"kind":"header"}\n', encoding="utf-8")
    for below, quick in ((QUICK_JVM_BELOW, True), (1, False)):
        Builder.conf = {}
        monkeypatch.setattr(session, "QUICK_JVM_BELOW", below)
        code = isrlab(["analyze", str(tmp_path), "--out", str(tmp_path / "o"),
                       "--master", "local[1]"])
        assert code == 2 and "Spark did not start: no JVM" in capsys.readouterr().err
        assert (QUICK_JVM_OPTIONS in Builder.conf[key].split()) is quick
        assert LOCAL_JVM_OPTIONS in Builder.conf[key].split()


def test_the_local_jvm_runs_with_the_options_it_was_given(spark):
    """The session's JVM was started with LOCAL_CONF's heap and LOCAL_JVM_OPTIONS, and runs
    the parallel collector: read from the JVM itself, not from the configuration."""
    from pyspark_harness.session import LOCAL_CONF, LOCAL_JVM_OPTIONS

    management = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    arguments = list(management.getRuntimeMXBean().getInputArguments())
    assert set(LOCAL_JVM_OPTIONS.split()) <= set(arguments)
    assert f"-Xmx{LOCAL_CONF['spark.driver.memory']}" in arguments
    collectors = {bean.getName() for bean in management.getGarbageCollectorMXBeans()}
    assert collectors == {"PS Scavenge", "PS MarkSweep"}


def test_a_trace_file_gone_before_spark_starts_is_one_line(monkeypatch, tmp_path, capsys):
    from pyspark_harness import ingest

    gone = str(tmp_path / "gone.ndjson")
    monkeypatch.setattr(ingest, "find_trace_files", lambda paths, campaign=False: [gone])
    code = isrlab(["analyze", str(tmp_path), "--out", str(tmp_path / "o"),
                   "--master", "local[1]"])
    err = capsys.readouterr().err
    assert code == 2 and err == f"isrlab analyze: error: {gone}: No such file or directory\n"


def test_master_urls_are_checked_before_a_jvm_starts():
    from pyspark_harness.session import master_problem

    for good in ("local", "local[2]", "local[*]", "local[4,2]", "spark://127.0.0.1:7077", "yarn",
                 "k8s://https://127.0.0.1:6443", None):
        assert master_problem(good) is None, good
    for bad in ("nonsense", "local[0]", "local[two]", "spark:/x", "local[2] "):
        assert master_problem(bad), bad


def test_a_campaign_with_a_bad_spark_master_is_one_line_and_exit_2(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "isrlab.cli", "campaign", "--spark", "nonsense",
                           "--runs", "1", "--duration", "1000", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    errors = [x for x in done.stderr.splitlines() if "error" in x.lower()]
    assert errors == ["isrlab campaign: error: --spark nonsense: not a Spark master (local, "
                      "local[N], local[*], spark://HOST:PORT, yarn, k8s://URL)"]
    assert "Traceback" not in done.stderr


def test_replay_from_columns_gives_the_verdicts_of_the_raw_lines(spark, tmp_path):
    """A dataset stored without each event's JSON text (`--no-raw`) replays as one that keeps
    it: the same verdicts, and a run whose trace was tampered with (one post-state's HW)
    diverges at the same line for the same reason."""
    from impl.config import ClusterConfig
    from impl.sim import SimOptions, simulate
    from model_check.conformance.replay import replay_events
    from pyspark_harness.ingest import ingest

    corpus = tmp_path / "corpus"
    for seed in (3, 4):
        simulate(ClusterConfig(), SimOptions(seed=seed, duration_ms=4_000,
                                             nemesis=("crash", "partition"))).write(
            corpus / f"run-{seed}")
    path = corpus / "run-4" / "b1.ndjson"
    text = path.read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(text) if i > 40 and '"high_watermark"' in line
              and '"replicas"' not in line)
    body = json.loads(text[at])
    body["state"]["high_watermark"] += 7
    text[at] = json.dumps(body)
    path.write_text("\n".join(text) + "\n", encoding="utf-8")

    verdicts = {}
    for keep_raw in (True, False):
        dataset = str(tmp_path / f"raw-{keep_raw}")
        ingest(spark, find_trace_files([str(corpus)]), dataset, keep_raw=keep_raw)
        tables = J.load(spark, dataset)
        assert (tables.events.where(F.col("raw").isNotNull()).count() > 0) is keep_raw
        configs = {r["run"]: json.loads(r["config"]) for r in tables.headers.selectExpr(
            "run", "to_json(config) AS config").dropDuplicates(["run"]).collect()}
        verdicts[keep_raw] = sorted(tuple(r) for r in J.distributed_replay(
            tables.events, replay_events, configs).collect())
    assert verdicts[False] == verdicts[True]
    (_, accepted, _, _), (_, diverged, _, detail) = verdicts[True]
    assert (accepted, diverged) == ("accepted", "divergence")
    assert detail.endswith("replica p0 of broker 1 differs"), detail


def test_the_driver_finds_the_header_lines_spark_reads(spark, tmp_path):
    # The driver's scan of mapped files for header lines gives what Spark's line reader
    # gives for them: LF, CRLF and CR line ends, a byte order mark at the start of a file, a
    # header not on the first line, an empty file. A mutant that keeps the CR or the mark, or
    # splits on LF only, fails.
    from pyspark_harness.ingest import _header_candidates

    header = b'{"kind":"header","run":"r%d"}'
    (tmp_path / "lf.ndjson").write_bytes(header % 1 + b'\n{"kind":"event"}\n')
    (tmp_path / "crlf.ndjson").write_bytes(b'{"kind":"event"}\r\n' + header % 2 + b"\r\n")
    (tmp_path / "cr.ndjson").write_bytes(header % 3 + b'\r{"kind":"event"}\r' + header % 4)
    (tmp_path / "bom.ndjson").write_bytes(b"\xef\xbb\xbf" + header % 5 + b"\n")
    (tmp_path / "empty.ndjson").write_bytes(b"")
    files = sorted(str(p) for p in tmp_path.iterdir())
    found = _header_candidates(spark, files)
    assert found is not None
    expected = (spark.read.text(files)
                .select(F.col("_metadata.file_path").alias("file"), F.col("value").alias("text"))
                .where(F.col("text").contains('header"')))
    rows = sorted((r["file"], r["text"]) for r in found.collect())
    assert rows == sorted((r["file"], r["text"]) for r in expected.collect())
    assert len(rows) == 5 and all(text.startswith("{") and text.endswith("}")
                                  for _, text in rows)


def test_the_ingest_counts_what_it_wrote(spark, corpus, tmp_path):
    # The counts `ingest` returns are taken during the write (`DataFrame.observe`): they are
    # those of the dataset read back, with a malformed line and its example among them.
    from pyspark_harness.ingest import ingest, read_stored

    run = sorted(corpus.glob("*/run-*"))[0]
    shutil.copytree(run, tmp_path / "in" / run.name)
    node = sorted((tmp_path / "in" / run.name).glob("*.ndjson"))[0]
    with node.open("a", encoding="utf-8") as handle:
        handle.write('{"kind": "event", "node":\n')
    result = ingest(spark, find_trace_files([str(tmp_path / "in")]), str(tmp_path / "out"))
    stored = read_stored(spark, str(tmp_path / "out"))
    counts = {r["table"]: r["count"] for r in stored.groupBy("table").count().collect()}
    assert result.lines_by_table == counts and counts["malformed"] == 1
    assert result.runs == stored.where("table = 'headers'").select("run").distinct().count() == 1
    assert [(Path(f).name, n) for f, n, _ in result.malformed_examples] == [
        (node.name, len(node.read_text(encoding="utf-8").splitlines()))]


def test_offline_time_counts_a_leader_killed_before_the_store_reports_its_partition(
        spark, tmp_path):
    """Each partition is led by its first replica from the run's start: seed 1004's leader of
    partition 0 crashes at 3.7 s, the store's first line about it comes at 5 s. Spark's
    offline and no-leader time equal the campaign's timeline (policies.timeline) run by run."""
    campaign = tmp_path / "campaign"
    assert isrlab(["campaign", "--seed", "1003", "--runs", "2", "--brokers", "3",
                   "--partitions", "1", "--variant", "kip-320", "--acks", "1", "--min-isr", "1",
                   "--unclean", "--duration", "20s", "--nemesis", "crash,partition,pause,slow",
                   "--faults", "2", "--keep", "all", "--workers", "1", "--quiet",
                   "--out", str(campaign)]) == 0
    early = []  # runs whose first leader crashes before the store's first state
    for run_dir in sorted(campaign.glob("run-*")):
        lines = [json.loads(t) for f in ("meta", "nemesis")
                 for t in (run_dir / f"{f}.ndjson").read_text(encoding="utf-8").splitlines()]
        first_state = min(b["time_ms"] for b in lines if b["kind"] == "event"
                          and b["node"] == "meta" and b["state"].get("partitions"))
        if any(b["kind"] == "nemesis" and b["f"] == "crash" and b["target"] == "b0"
               and b["time_ms"] < first_state for b in lines):
            early.append(run_dir.name)
    assert early == ["run-1004"]
    out = tmp_path / "out"
    assert isrlab(["analyze", str(campaign), "--runs-from", "campaign", "--out", str(out),
                   "--master", "local[1]", "--quiet"]) == 0
    timelines = {f"seed-{d.name.split('-')[1]}": json.loads(
        (d / "result.json").read_text())["timeline"] for d in sorted(campaign.glob("run-*"))}
    rows = table(out, "per_run", "run", "offline_ms", "no_leader_ms", "observed_ms")
    assert {r: (int(o), int(n)) for r, o, n, _ in rows} == {
        run: (t["offline_ms"], t["no_leader_ms"]) for run, t in timelines.items()}
    assert timelines["seed-1004"]["offline_ms"] > 0
    # The whole run is observed: the one partition from 0 past its 20 s, through the liveness
    # phase after the faults healed, to its last line (within a second of run.json's end).
    ends = {f"seed-{d.name.split('-')[1]}": json.loads((d / "run.json").read_text())[
        "summary"]["end_ms"] for d in sorted(campaign.glob("run-*"))}
    observed = {r: int(ms) for r, _, _, ms in rows}
    assert observed.keys() == ends.keys()
    assert all(20_000 < observed[r] <= ends[r] < observed[r] + 1000 for r in ends), (observed,
                                                                                       ends)
