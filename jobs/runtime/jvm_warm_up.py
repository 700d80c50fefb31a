"""The small Spark run whose JVM dumps the local class archive (`jobs.runtime.jvm_archive`).

`jvm_archive.build` runs `python -m jobs.runtime.jvm_warm_up "<java options>"` in a child process:
the options carry `-XX:ArchiveClassesAtExit`, so the JVM this run starts writes the classes it
loaded when it exits. It lives apart from `jvm_archive` because it needs a Spark session, and the
session module needs `jvm_archive` (to map the archive): one direction, no circle.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pyarrow as pa

from jobs.runtime.spark import get_or_create_spark


def _same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield from batches


def warm_up(java_options: str) -> None:
    """What the jobs make the JVM load: Arrow batches to and from Python, a shuffle, an aggregate, a
    join, a local checkpoint, in a local session whose driver JVM runs with `java_options`."""
    spark = get_or_create_spark(
        "paimon-jobs-jvm-archive", {"spark.driver.extraJavaOptions": java_options}, log_level="ERROR"
    )
    frame = spark.range(1000).selectExpr("id", "cast(id as string) as name").repartition(4)
    frame = frame.mapInArrow(_same, "id long, name string").localCheckpoint(eager=True)
    counted = frame.groupBy((frame.id % 7).alias("k")).count()
    frame.join(counted, frame.id == counted.k, "left_anti").count()
    frame.filter(frame.id > 5).limit(3).collect()
    spark.createDataFrame([(1, "a")], "x long, y string").collect()


if __name__ == "__main__":
    warm_up(sys.argv[1])
