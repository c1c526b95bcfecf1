"""Spark jobs over trace corpora: NDJSON traces -> Parquet -> anomaly, availability and
balance tables -> a report, on local Spark by default and unchanged on a cluster.

    session.py  a quiet SparkSession, bound to 127.0.0.1 in local mode
    schemas.py  explicit schemas of the trace lines (docs/traces.md) and the stored tables
    ingest.py   NDJSON files -> Parquet partitioned by table, config key and run; malformed
                lines kept aside with file and line
    jobs.py     the analyses: pure DataFrame -> DataFrame functions, and the distributed replay
    report.py   every job over one dataset -> REPORT_DIR (index.md, PNG plots, CSV, Parquet)
    main.py     the `analyze` command (also `isrlab analyze`, and spark-submit's entry point)

Nothing here imports `spec` or `impl`: the replay function is passed in (docs/spark.md).
"""
