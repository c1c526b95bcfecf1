"""A SparkSession for the harness: quiet, loopback-bound in local mode, unchanged on a cluster.

Local mode on these machines must bind to 127.0.0.1 (traffic to any other address is refused),
start in well under a gigabyte and keep the console quiet: no UI, no progress bar, log4j at
`error`. The log4j2 configuration is written at run time into a temporary SPARK_CONF_DIR, since
the JVM reads it once at start-up; nothing binary is committed.

Under `spark-submit` the JVM is already running: pass `master=None` and the master, resources
and binding come from spark-submit (docs/spark.md); only the SQL settings the jobs rely on are
applied.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"

LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.gateway.additivity = false
"""

# Settings every job relies on, local or not: two shuffle partitions suit the small per-run
# tables; partition values (run ids like "7") must stay strings when Parquet is read back.
SQL_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.pythonUDF.arrow.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
}

LOCAL_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # With the throughput collector a larger young generation means fewer collections: the
    # 1M simulator ingest took 6% less time cold and 9-12% warm with 2 GB than with 1 GB (4 GB:
    # no better).
    "spark.driver.memory": "2g",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # Local files are listed by the driver: a listing job (Spark's choice past 32 paths) cost
    # 10-14 s for a 1,400-file corpus, where the driver's own stat calls take under 2 s.
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
}
# The throughput collector: a batch job has no pauses to keep short, and G1's write barriers
# and concurrent work cost the 1M simulator ingest 4-11% (warm, docs/spark.md).
LOCAL_JVM_OPTIONS = "-XX:+UseParallelGC"


# For a small input the JVM's optimising compiler (C2) costs more CPU than it ever saves: it
# compiles Spark's own start-up and planning code on the cores the job needs. With the quick
# compiler alone an analysis of a 2,362-line corpus on local[1] used 79 s of JVM CPU instead
# of 139 s (57 s wall instead of 67 s, one core free); at 958,821 lines (343 MB) the two are
# even in CPU and C2 is 6% faster in wall time, so inputs from QUICK_JVM_BELOW up keep it.
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
QUICK_JVM_BELOW = 32 << 20


def local_conf(input_bytes: int | None) -> dict[str, str]:
    """LOCAL_CONF and the local JVM's options: LOCAL_JVM_OPTIONS, and QUICK_JVM_OPTIONS for an
    input known to be under QUICK_JVM_BELOW."""
    options = LOCAL_JVM_OPTIONS
    if input_bytes is not None and input_bytes < QUICK_JVM_BELOW:
        options = f"{options} {QUICK_JVM_OPTIONS}"
    return {**LOCAL_CONF, "spark.driver.extraJavaOptions": options}


def _quiet_conf_dir() -> str:
    """A fresh SPARK_CONF_DIR holding only a log4j2.properties; removed when Python exits."""
    path = tempfile.mkdtemp(prefix="isrlab-spark-conf-")
    with open(os.path.join(path, "log4j2.properties"), "w", encoding="utf-8") as out:
        out.write(LOG4J2)
    atexit.register(shutil.rmtree, path, True)
    return path


# The master URL forms Spark accepts (SparkContext's master parsing), checked before a JVM is
# started for one: a bad one would otherwise cost a JVM start and print its stack trace.
_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?|yarn"
                     r"|(spark|mesos)://[^\s/]+(:\d+)?(,[^\s/]+(:\d+)?)*|k8s://\S+")


def master_problem(master: str | None) -> str | None:
    """Why `master` is not a Spark master URL, or None when it is one (or None)."""
    if master is None or _MASTER.fullmatch(master):
        return None
    return ("not a Spark master (local, local[N], local[*], spark://HOST:PORT, yarn, "
            "k8s://URL)")


def is_local(master: str | None) -> bool:
    """True for `local`, `local[N]`, `local[*]` and `local[N,F]` masters."""
    return master is not None and (master == "local" or master.startswith("local["))


def get_session(master: str | None = DEFAULT_MASTER, app_name: str = "isrlab-analyze",
                extra_conf: dict[str, str] | None = None,
                input_bytes: int | None = None) -> SparkSession:
    """Return the active session, or build one for `master` (None: keep spark-submit's).

    A session that already exists is returned as it is (Spark has one per JVM): the first
    caller decides the master. Local masters are bound to 127.0.0.1. `input_bytes`: how much
    the session will read, when known; a local JVM for less than QUICK_JVM_BELOW starts with
    QUICK_JVM_OPTIONS.
    """
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # The worker processes must run this interpreter (it has pyspark_harness installed), not
    # whatever `python3` is first on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        # Not under spark-submit (which starts the JVM first and sets the gateway port), so
        # nobody else will choose a master: default to local, loopback-bound.
        master = DEFAULT_MASTER
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    if "SPARK_CONF_DIR" not in os.environ:
        os.environ["SPARK_CONF_DIR"] = _quiet_conf_dir()
    if is_local(master):
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        for key, value in local_conf(input_bytes).items():
            builder = builder.config(key, value)
    for key, value in {**SQL_CONF, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
