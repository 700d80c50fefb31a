"""Driver or Spark: the estimate that decides, from the requests a run needs and their latency.

Why: on local disk a request costs microseconds, so what a small table's run costs is decoding its
entries and listing its files, and Spark's start-up (a JVM, a session, the first Python job: 4.3 s
on this project's machine, `scripts/bench_spark_startup.py`) is what the driver saves. On an object
store every request waits 20-100 ms for its first byte; a run is bound by how many requests it
sends and how many it keeps in flight (`FileIO.io_parallelism`), and Spark multiplies the requests
in flight by its parallelism. So the choice compares two estimates:

    driver_s = requests x latency / io_parallelism + rows x DRIVER_S_PER_ROW
    spark_s  = start-up + requests x latency / (io_parallelism x spark parallelism)
               + rows x DRIVER_S_PER_ROW / spark parallelism

`latency` is the median of the first storage calls sizing the table makes (`LatencyProbe`), so it is
the store's answer time as this process sees it, measured without a request of its own. The
estimate only chooses among tables that already fit the driver's row limit: the memory guard
(`local_exec.row_limit`) is a hard cap whatever the estimate says.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from jobs.runtime.spark import LOCAL_DEFAULTS, launched_by_spark_submit
from paimon_format.storage.file_status import FileStatus
from paimon_format.storage.fileio import FileIO

R = TypeVar("R")

# Spark's start-up before a job's first task: session 2.3 s + first Python job 2.0 s
# (docs/benchmarks.md, scripts/bench_spark_startup.py on this project's 2-core machine); in a
# process whose SparkContext already runs (maintain's later steps, a notebook) only a job's own
# scheduling and its Python workers' first tasks are left.
SPARK_START_S = 4.3
SPARK_RUNNING_JOB_S = 0.5
# Driver CPU per row read (a listed file or a manifest entry decoded, with its share of the joins
# and group-bys of the in-process frame): remove-orphan-files' driver path took 4.6 s for 202,000
# files and 200,000 entries on this machine (11.5 us per row).
DRIVER_S_PER_ROW = 12e-6
# Spark parallelism assumed on a cluster master whose executors the configuration does not name.
CLUSTER_PARALLELISM = 16
LIST_PAGE = 1000  # keys per ListObjectsV2 page
PROBE_SAMPLES = 16  # storage calls timed per run (the first ones sizing makes)
_LOCAL = re.compile(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$")


class LatencyProbe:
    """Times the first PROBE_SAMPLES storage calls made through the FileIOs it wraps (`wrap`)."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self.samples: list[float] = []
        self._clock = clock

    def wrap(self, file_io: FileIO) -> FileIO:
        return _TimedFileIO(file_io, self)

    def time(self, call: Callable[[], R]) -> R:
        if len(self.samples) >= PROBE_SAMPLES:
            return call()
        started = self._clock()
        result = call()
        self.samples.append(self._clock() - started)
        return result

    @property
    def latency_s(self) -> float:
        """The median call: robust to the first call's connection set-up and a large list's transfer."""
        return statistics.median(self.samples) if self.samples else 0.0


class _TimedFileIO(FileIO):
    """`inner` with its read calls timed; everything else (paths, protocol) is `inner`'s own."""

    def __init__(self, inner: FileIO, probe: LatencyProbe) -> None:
        super().__init__(
            inner.protocol,
            inner.storage_options,
            inner.allow_unsafe_overwrite_commit,
            inner.configured_parallelism,
        )
        self._inner = inner
        self._probe = probe

    @property
    def fs(self) -> Any:
        return self._inner.fs

    def read_bytes(self, path: str) -> bytes:
        return self._probe.time(lambda: self._inner.read_bytes(path))

    def open_input(self, path: str, size: int | None = None) -> Any:
        return self._probe.time(lambda: self._inner.open_input(path, size))

    def exists(self, path: str) -> bool:
        return self._probe.time(lambda: self._inner.exists(path))

    def file_exists(self, path: str) -> bool:
        return self._probe.time(lambda: self._inner.file_exists(path))

    def size(self, path: str) -> int:
        return self._probe.time(lambda: self._inner.size(path))

    def list_dir(self, path: str) -> list[FileStatus]:
        return self._probe.time(lambda: self._inner.list_dir(path))

    def list_files_recursive(self, path: str) -> Iterator[FileStatus]:
        return self._inner.list_files_recursive(path)


@dataclass(frozen=True)
class Work:
    """What a run reads: storage requests and rows (listed files, decoded entries)."""

    requests: int
    rows: int


def listing_pages(files: int, protocol: str) -> int:
    """Requests to list `files` files under a table: a flat listing pages 1,000 keys at a time on an
    object store; on local disk the listing is one call per directory, which the table's metadata
    cannot count, but there a call costs microseconds and each file's cost is in its row."""
    return max(1, -(-files // LIST_PAGE)) if protocol not in ("file", "memory") else 1


def spark_parallelism(spark_conf: dict[str, Any] | None) -> int:
    """How many tasks Spark runs at once for this job: the running context's default parallelism,
    else what the configuration says (`spark.default.parallelism`, a `local[N]` master, executors
    x cores), else `local[2]`'s 2 for a plain run and CLUSTER_PARALLELISM under spark-submit."""
    context = running_context()
    if context is not None:
        return max(1, int(context.defaultParallelism))
    conf = {str(k): str(v) for k, v in (spark_conf or {}).items()}
    if "spark.default.parallelism" in conf:
        return max(1, int(conf["spark.default.parallelism"]))
    master = conf.get("spark.master") or _submitted_master()
    if master is None:
        master = "cluster" if launched_by_spark_submit() else LOCAL_DEFAULTS["spark.master"]
    local = _LOCAL.match(master)
    if local:
        threads = local.group(1) or "1"
        return (os.cpu_count() or 1) if threads == "*" else max(1, int(threads))
    if "spark.executor.instances" in conf:
        return max(1, int(conf["spark.executor.instances"]) * int(conf.get("spark.executor.cores", "1")))
    return CLUSTER_PARALLELISM


def _submitted_master() -> str | None:
    args = os.environ.get("PYSPARK_SUBMIT_ARGS", "").split()
    return args[args.index("--master") + 1] if "--master" in args[:-1] else None


def running_context() -> Any:
    """This process's SparkContext if one runs, else None; never imports (starts) pyspark itself."""
    pyspark = sys.modules.get("pyspark")
    return getattr(getattr(pyspark, "SparkContext", None), "_active_spark_context", None)


def spark_start_s() -> float:
    """What Spark costs before a job's first task in this process (see SPARK_START_S)."""
    return SPARK_RUNNING_JOB_S if running_context() is not None else SPARK_START_S


@dataclass(frozen=True)
class Estimate:
    """Where a run that fits the driver's row limit goes, and why (`details.placement`)."""

    latency_ms: float
    requests: int
    rows: int
    io_parallelism: int
    spark_parallelism: int
    driver_s: float
    spark_s: float

    @property
    def driver_faster(self) -> bool:
        return self.driver_s <= self.spark_s

    def reason(self) -> str:
        verdict = "faster in the driver" if self.driver_faster else "faster on Spark"
        return f"{verdict}: {self.driver_s:.2f} s estimated in the driver, {self.spark_s:.2f} s on Spark"


def estimate(work: Work, latency_s: float, io_parallelism: int, parallelism: int, start_s: float) -> Estimate:
    """The two estimates of the module docstring for `work` at `latency_s` per request."""
    io = max(1, io_parallelism)
    waiting = work.requests * latency_s / io
    decoding = work.rows * DRIVER_S_PER_ROW
    return Estimate(
        latency_ms=round(latency_s * 1000, 3),
        requests=work.requests,
        rows=work.rows,
        io_parallelism=io,
        spark_parallelism=parallelism,
        driver_s=round(waiting + decoding, 3),
        spark_s=round(start_s + (waiting + decoding) / parallelism, 3),
    )
