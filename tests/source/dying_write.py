"""A `df.write.format("paimon")` that never reaches its commit, for tests/source/test_write_killed.py to
kill: `python -m tests.source.dying_write <warehouse>` appends 40 rows to `db.t` in two Spark tasks
(its own local SparkSession); task 0 writes its files and finishes, task 1 hands its rows to the
writer and then never ends, so the job is alive, files exist and no commit can come."""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator

import pyarrow as pa
from pyspark import TaskContext

from jobs.runtime.spark import get_or_create_spark
from jobs.source import register

COLUMNS = "k long, dt string, v string"


def _rows_then_hang(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches
    context = TaskContext.get()
    if context is not None and context.partitionId() == 1:
        threading.Event().wait()  # task 1 never ends: the process is killed while it runs


def main(warehouse: str) -> None:
    # two rows an Arrow batch: the writer (table option target-file-size: 1 b) flushes a file per batch
    spark = get_or_create_spark(
        "dying-write", {"spark.sql.execution.arrow.maxRecordsPerBatch": "2"}, log_level="WARN"
    )
    register(spark)
    rows = [(k, f"d{k % 3}", f"v{k}") for k in range(40)]
    frame = spark.createDataFrame(rows, COLUMNS).repartition(2).mapInArrow(_rows_then_hang, COLUMNS)
    frame.write.format("paimon").option("warehouse", warehouse).mode("append").save("db.t")
    print("the write ended, which it must not", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
