"""The SparkSession every job runs in, and the small helpers that fan driver-held lists out.

Under spark-submit (EMR steps, Dataproc jobs) the cluster's settings must win: a local default that
replaced `--master yarn` would silently run a nightly job on one node. With plain `python -m jobs`
the job gets a safe local session instead (loopback only, no UI, UTC, the same Python on workers).
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa

from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.jvm_archive import LOCAL_DATA_JVM_OPTIONS, LOCAL_JVM_OPTIONS, archive_options
from jobs.runtime.local_frame import LocalSession
from jobs.runtime.report import SAMPLE_LIMIT

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)
Item = TypeVar("Item")

LOCAL_DEFAULTS = {
    "spark.master": "local[2]",
    "spark.driver.extraJavaOptions": LOCAL_JVM_OPTIONS,
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.shuffle.partitions": "8",
}

# How many items a driver-side list may hold before a job refuses: manifest names, partition
# values and directories are fine in the tens of thousands; file listings never belong here.
DRIVER_LIST_LIMIT = 1_000_000


def launched_by_spark_submit() -> bool:
    """True when spark-submit (or a launcher given `--master`) configured this process's Spark.

    spark-submit starts the JVM first and hands Python its gateway port; a SparkConf built before
    connecting to that JVM is empty, so the port, not SparkConf, is the reliable signal.
    """
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        return True
    return "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()


def get_or_create_spark(
    app_name: str,
    conf: dict[str, Any] | None = None,
    log_level: str | None = None,
    console_progress: bool = False,
    moves_rows: bool = False,
) -> SparkSession:
    """The active session if there is one (tests, notebooks, a wrapper); else a new one.

    Under spark-submit, its settings are kept and only keys it did not set are taken from `conf`
    (the YAML `spark:` block), then from our defaults. With plain Python, LOCAL_DEFAULTS and then
    `conf` apply. Our defaults: Spark's own log level `log_level` (`spark.log.level`, applied as the
    context starts, so its thousands of INFO lines stay out of a job's log; the job's own progress
    lines are Python logging and stay), and Spark's console progress bar when `console_progress`.
    `moves_rows`: a local JVM that converts rows in bulk (reads into DataFrames, writes from a query)
    keeps the C2 compiler (`jvm_archive.LOCAL_DATA_JVM_OPTIONS`); maintenance sessions do without.
    """
    # pyspark only here and below: `--help` and configuration errors never load it
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession  # (as above: pyspark only once a session is asked for)

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    requested = {key: _conf_text(value) for key, value in (conf or {}).items()}
    ours = {"spark.ui.showConsoleProgress": "true" if console_progress else "false"}
    if log_level:
        ours["spark.log.level"] = log_level.upper()
    if launched_by_spark_submit():
        SparkContext._ensure_initialized()  # connects to spark-submit's JVM, starts none
        submitted = SparkConf()
        ignored = sorted(key for key in requested if submitted.contains(key))
        if ignored:
            log.warning("spark: settings also given to spark-submit are ignored: %s", ", ".join(ignored))
        settings = {key: value for key, value in {**ours, **requested}.items() if not submitted.contains(key)}
    else:
        # Before the JVM starts: it inherits SPARK_LOCAL_IP, and executors run PYSPARK_PYTHON,
        # which must be this interpreter (with pyarrow and this package), not the first python3.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings = {"spark.app.name": app_name, **local_defaults(moves_rows), **ours, **requested}
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def local_defaults(moves_rows: bool = False) -> dict[str, str]:
    """LOCAL_DEFAULTS, with the JVM class archive mapped when this machine has one (`jvm_archive`),
    and C2 kept when the session `moves_rows` (see `jvm_archive.LOCAL_DATA_JVM_OPTIONS`)."""
    settings = dict(LOCAL_DEFAULTS)
    if moves_rows:
        settings["spark.driver.extraJavaOptions"] = LOCAL_DATA_JVM_OPTIONS
    archive = archive_options()
    if archive:
        settings["spark.driver.extraJavaOptions"] = f"{settings['spark.driver.extraJavaOptions']} {archive}"
    return settings


def _conf_text(value: Any) -> str:
    """Spark settings are text; YAML's `true` must become "true", not Python's "True"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def spark_is_running() -> bool:
    """Whether a SparkContext exists in this process (so a job did not create it and must not stop it)."""
    from pyspark import SparkContext  # called as a session starts: pyspark is needed then anyway

    return SparkContext._active_spark_context is not None


def stop_session(spark: SparkSession) -> None:
    """Stop a session this run created, without pyspark's idle waits (1.3 s of every job process).

    - `SparkContext.stop()` shuts its accumulator server down and waits for it, and that server's
      request handler polls its socket once a second: stop() took 0.92 s, of which the context
      itself 0.06 s. Here the server is shut down after the context, once nothing waits on it.
    - A JVM this process launched (not spark-submit's) exits only once Python has, when its stdin
      closes; whoever waits for the process tree (a shell pipe, a scheduler, the benchmarks) waited
      0.4-0.5 s more. Here its gateway is shut down and the JVM is waited for (0.06 s), and the
      next session in this process launches a new one.
    A pyspark without these internals gets a plain `stop()`.
    """
    from pyspark import SparkContext  # only a running session is stopped: pyspark is loaded already

    context = spark.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = _ignore_hang_up  # the JVM hangs up on its handler when it exits
        context._accumulatorServer = None  # stop() would wait for its next poll
    try:
        spark.stop()
        gateway = SparkContext._gateway
        process = getattr(gateway, "proc", None)  # None: spark-submit's JVM, which outlives us
        if process is not None and not launched_by_spark_submit():
            SparkContext._gateway = None
            SparkContext._jvm = None
            gateway.shutdown()
            if process.stdin is not None:
                process.stdin.close()  # the JVM's gateway server exits on end of input
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                log.warning("the Spark JVM (pid %d) did not exit within 30 s of its end", process.pid)
    finally:
        if server is not None:
            threading.Thread(target=server.shutdown, name="accumulator-server-shutdown", daemon=True).start()


def _ignore_hang_up(_request: Any, _client_address: Any) -> None:
    """The accumulator server's error hook after its session stopped: the JVM closed the socket."""


def assert_small(count: int, limit: int, what: str) -> None:
    """Refuse (exit 3) rather than hold an unexpectedly large list on the driver.

    A table with ten million partitions should fail with a message naming the list and the limit,
    not with an out-of-memory driver an hour later.
    """
    if count > limit:
        raise SafetyRefusal(
            f"{count:,} {what} would be held on the driver, more than the limit of {limit:,}; "
            "this job expects far fewer (is the table or the filter what you meant?)"
        )


def parallelize_small(
    spark: SparkSession,
    items: Sequence[Item],
    num_slices: int | None = None,
    limit: int = DRIVER_LIST_LIMIT,
    what: str = "items",
) -> RDD[Item]:
    """An RDD of a list the driver legitimately holds (manifest names, partitions, directories).

    One item per task up to `num_slices` tasks (default: three per core), so slow items such as
    large manifests spread over the executors instead of queueing behind each other.
    """
    assert_small(len(items), limit, what)
    context = spark.sparkContext
    slices = num_slices or max(3 * context.defaultParallelism, 1)
    return context.parallelize(list(items), max(1, min(len(items), slices)))


def driver_list_frame(
    spark: SparkSession,
    columns: dict[str, Any],
    what: str = "items",
    limit: int = DRIVER_LIST_LIMIT,
    spread: bool = True,
) -> DataFrame:
    """A DataFrame of a list the driver legitimately holds, given as pyarrow arrays, spread over tasks.

    Built from an Arrow table, which the JVM decodes itself: `createDataFrame` of Python rows runs a
    Python task per slice just to unpickle them. In a fresh session (every spark-submit job) that
    stage cost 4-5 CPU-seconds against 1.6-1.9 for the Arrow table (1,000 names, `local[2]`).
    Up to four slices per core, so slow items (large manifests) spread over the executors.
    Spark 3.5 takes no Arrow table: there the same columns go as pandas with the Arrow schema, which
    its Arrow path also converts in the JVM. `spread=False` keeps Spark's local relation as it is:
    counting and collecting it then runs no job at all.
    """
    table = pa.table(columns)
    assert_small(table.num_rows, limit, what)
    if isinstance(spark, LocalSession):
        return spark.createDataFrame(table)
    import pyspark  # a Spark session is running here; a LocalSession run never loads pyspark

    slices = max(1, min(table.num_rows, spark.sparkContext.defaultParallelism * 4))
    if int(pyspark.__version__.split(".")[0]) >= 4:
        frame = spark.createDataFrame(table)
    else:
        from pyspark.sql.pandas.types import from_arrow_schema  # Spark 3.5 only, see above

        frame = spark.createDataFrame(table.to_pandas(), schema=from_arrow_schema(table.schema))
    return frame.repartition(slices) if spread else frame


def take_sample(df: DataFrame, column: str, limit: int = SAMPLE_LIMIT) -> list[str]:
    """Up to `limit` values of one column for a run record's samples; never the whole DataFrame."""
    return [str(row[0]) for row in df.select(column).limit(limit).collect()]
