"""Spark's fixed start-up cost per job on this machine: session start, then a first job with Python work.

    .venv/bin/python scripts/bench_spark_startup.py

Every spark-submit job pays both before it does any work: the JVM and SparkSession, then the first
job that runs Python on the executors (the Python daemon and workers start, pyarrow and this
package are imported). The benchmark scripts call `start_spark` so they report the same figures
next to their own, and time their jobs after it (a job's own figure excludes the start-up).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from jobs.runtime.spark import get_or_create_spark, stop_session  # noqa: E402


@dataclass(frozen=True)
class StartUp:
    session_s: float  # JVM + SparkSession
    first_job_s: float  # first job running Python on the executors (a one-row mapInArrow)

    @property
    def total_s(self) -> float:
        return self.session_s + self.first_job_s

    def describe(self) -> str:
        return (
            f"Spark start-up {self.total_s:.1f} s (session {self.session_s:.1f} s + first Python job "
            f"{self.first_job_s:.1f} s), {load()}"
        )


def load() -> str:
    """The 1-minute load average, printed next to every figure: the machine is shared."""
    return f"load {os.getloadavg()[0]:.1f}"


def _passthrough(batches: Iterator[Any]) -> Iterator[Any]:
    import paimon_format.manifest.codec  # noqa: F401 - what a real job's workers import first

    yield from batches


def start_spark(app_name: str, conf: dict[str, Any] | None = None) -> tuple[Any, StartUp]:
    """A new local session and its measured start-up cost (a running session would measure nothing)."""
    import pyarrow as pa

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    start = time.perf_counter()
    spark = get_or_create_spark(app_name, conf)
    session = time.perf_counter() - start
    start = time.perf_counter()
    spark.createDataFrame(pa.table({"x": pa.array([1], pa.int64())})).mapInArrow(
        _passthrough, "x long"
    ).collect()
    return spark, StartUp(session, time.perf_counter() - start)


def main() -> None:
    spark, startup = start_spark("bench-spark-startup")
    print(f"{startup.describe()}, {spark.sparkContext.defaultParallelism} cores")
    stop_session(spark)


if __name__ == "__main__":
    main()
