"""Every file under a table directory as a DataFrame, listed by the executors in waves.

On an object store that lists flat key ranges (S3) the table is listed by key ranges instead
(`prefix_listing`): objects / 1000 LIST requests plus one per range, not one per directory. Waves
serve local disk (os.scandir per directory is cheap there) and every other store.

Walking a table with millions of files on the driver is what runs other cleaners out of memory. Here
the driver only keeps a count per wave: wave 1 lists the table root on an executor, the directories
it finds are the next wave's input (a DataFrame, never collected), and so on: partition levels are
expanded in parallel, one wave per level, until a wave has enough directories to keep every core
busy; that wave lists each of its directories' whole subtree in one task, so a table with one
partition level needs two waves, not four.

Each wave is local-checkpointed as soon as it is listed: a later stage never re-lists a directory
(a second listing could differ from the first, and race safety depends on listing exactly once).

A directory that cannot be listed fails the job; only a directory that vanished between its parent's
listing and its own (removed by a concurrent cleaner) is skipped and counted, since what no longer
exists cannot be deleted. Each file row is judged on the executor (`paimon_format.maintenance.orphan_rules`).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.deletion.listed import BATCH_ROWS, LISTED_COLUMNS, LISTED_SCHEMA, Listing
from jobs.deletion.prefix_listing import list_by_key_ranges, lists_by_key_ranges
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_frame import functions_for
from paimon_format.errors import MissingFileError, StorageError
from paimon_format.maintenance.orphan_rules import FileNaming, directory_judge, judge_file
from paimon_format.storage.fileio import FileIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
_WAVE_COLUMNS = "path string, is_dir boolean, size long, modification_time_ms long, rule string, kind string"
_WAVE_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("is_dir", pa.bool_()),
        ("size", pa.int64()),
        ("modification_time_ms", pa.int64()),
        ("rule", pa.string()),
        ("kind", pa.string()),
    ]
)
TASKS_PER_CORE = 4
MAX_WAVES = 64  # deeper than any Paimon layout: a symlink loop or a runaway tree, not a table


# One directory entry as listed: (name, is_dir, size, modification time in ms).
Entry = tuple[str, bool, int, int]


def list_entries(file_io: FileIO, path: str) -> list[Entry]:
    """One level of `path` as plain tuples; `os.scandir` on local disk (one syscall per entry), else
    FileIO.list_dir. Tuples, not FileStatus objects: a listing builds one per file of the table.

    Raises MissingFileError when the directory does not exist, StorageError for any other failure.
    """
    if file_io.protocol != "file" or type(file_io).list_dir is not FileIO.list_dir:
        # object stores, and FileIO subclasses (e.g. fault injection)
        return [
            (
                status.path.rstrip("/").rsplit("/", 1)[-1],
                status.is_dir,
                status.size,
                status.modification_time_ms,
            )
            for status in file_io.list_dir(path)
        ]
    local = path[len("file://") :] if path.startswith("file://") else path
    entries: list[Entry] = []
    append = entries.append
    is_dir_mode = stat.S_ISDIR
    try:
        with os.scandir(local) as found:
            for entry in found:
                info = entry.stat(follow_symlinks=False)
                if is_dir_mode(info.st_mode):
                    append((entry.name, True, 0, info.st_mtime_ns // 1_000_000))
                else:
                    append((entry.name, False, info.st_size, info.st_mtime_ns // 1_000_000))
    except FileNotFoundError as error:
        raise MissingFileError(path) from error
    except NotADirectoryError as error:
        raise StorageError(f"list {path}: not a directory") from error
    except OSError as error:
        reason = errno.errorcode.get(error.errno or 0, "error")
        raise StorageError(f"list {path}: cannot list this directory ({reason}: {error.strerror})") from error
    return entries


class WaveCounters:
    """Spark accumulators the listing tasks add to, so the driver learns counts without another job."""

    def __init__(self, spark: SparkSession) -> None:
        context = spark.sparkContext
        self.files = context.accumulator(0)
        self.directories = context.accumulator(0)  # directories listed
        self.frontier = context.accumulator(0)  # directories handed to the next wave
        self.vanished = context.accumulator(0)


def _wave_lister(file_io: FileIO, root: str, naming: FileNaming, recursive: bool, counters: WaveCounters):
    """The mapInArrow function of one wave: relative directories in, their entries out.

    Not `recursive`: the subdirectories found are output rows (is_dir) for the next wave.
    `recursive`: each directory's whole subtree is listed in this task, depth first, streaming rows.
    """

    def list_wave(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows: dict[str, list] = {name: [] for name in _WAVE_SCHEMA.names}
        for batch in batches:
            pending = batch.column("path").to_pylist()
            while pending:
                directory = pending.pop()
                full = file_io.join(root, directory) if directory else root
                try:
                    entries = list_entries(file_io, full)
                except MissingFileError:
                    if not directory:
                        raise  # the table root itself: never an empty table by accident
                    counters.vanished.add(1)
                    continue
                counters.directories.add(1)
                judge = directory_judge(directory, naming)
                prefix = f"{directory}/" if directory else ""
                paths, is_dirs, sizes = rows["path"], rows["is_dir"], rows["size"]
                mtimes, rules, kinds = rows["modification_time_ms"], rows["rule"], rows["kind"]
                files = 0
                for name, is_dir, size, mtime in entries:
                    if is_dir and recursive:
                        pending.append(prefix + name)
                    elif is_dir:
                        counters.frontier.add(1)
                        _append(rows, prefix + name, True, 0, 0, None, None)
                    else:
                        files += 1
                        judgement = judge(name)
                        paths.append(prefix + name)
                        is_dirs.append(False)
                        sizes.append(size)
                        mtimes.append(mtime)
                        rules.append(judgement.rule)
                        kinds.append(judgement.kind)
                counters.files.add(files)
                if len(paths) >= BATCH_ROWS:
                    yield pa.RecordBatch.from_pydict(rows, schema=_WAVE_SCHEMA)
                    rows = {name: [] for name in _WAVE_SCHEMA.names}
        if rows["path"]:
            yield pa.RecordBatch.from_pydict(rows, schema=_WAVE_SCHEMA)

    return list_wave


def _append(rows: dict[str, list], path: str, is_dir: bool, size: int, mtime: int, rule, kind) -> None:
    rows["path"].append(path)
    rows["is_dir"].append(is_dir)
    rows["size"].append(size)
    rows["modification_time_ms"].append(mtime)
    rows["rule"].append(rule)
    rows["kind"].append(kind)


def list_table_files(
    spark: SparkSession,
    file_io: FileIO,
    root: str,
    naming: FileNaming,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    expected_objects: int | None = None,
) -> Listing:
    """List every file below `root` on the executors: by key ranges where the store lists them
    (`prefix_listing.lists_by_key_ranges`; `expected_objects` sizes the ranges), else wave by wave.
    Either way each file is listed once and the result is checkpointed before anything reads it."""
    if lists_by_key_ranges(file_io):
        return list_by_key_ranges(spark, file_io, root, naming, log, expected_objects)
    return list_in_waves(spark, file_io, root, naming, log)


def list_in_waves(
    spark: SparkSession,
    file_io: FileIO,
    root: str,
    naming: FileNaming,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> Listing:
    """List every file below `root` on the executors, wave by wave (see the module docstring).

    Levels are expanded one wave each until the frontier has enough directories to keep every core
    busy (TASKS_PER_CORE tasks per core); that wave then lists each of its directories' subtrees whole.
    """
    F = functions_for(spark)

    log = log or logging.getLogger(__name__)
    parallelism = max(1, spark.sparkContext.defaultParallelism)
    wide_enough = parallelism * TASKS_PER_CORE
    frontier = spark.createDataFrame([("",)], "path string").coalesce(1)
    frontier_size = 1
    file_waves = []
    waves = 0
    counters = WaveCounters(spark)
    while frontier_size:
        if waves >= MAX_WAVES:
            raise StorageError(f"list {root}: more than {MAX_WAVES} directory levels (a symlink loop?)")
        recursive = frontier_size >= wide_enough
        lister = _wave_lister(file_io, root, naming, recursive, counters)
        if frontier_size > 1:
            frontier = frontier.repartition(min(frontier_size, wide_enough))
        files_before, frontier_before = counters.files.value, counters.frontier.value
        wave = frontier.mapInArrow(lister, _WAVE_COLUMNS).localCheckpoint(eager=True)
        waves += 1
        frontier_size = counters.frontier.value - frontier_before
        log.info(
            "listing wave %d%s: %s files, %s directories for the next wave",
            waves,
            " (whole subtrees)" if recursive else "",
            f"{counters.files.value - files_before:,}",
            f"{frontier_size:,}",
        )
        file_waves.append(wave.filter(~F.col("is_dir")).drop("is_dir"))
        frontier = wave.filter(F.col("is_dir")).select("path")
    files = file_waves[0]
    for wave_files in file_waves[1:]:
        files = files.unionByName(wave_files)
    return Listing(files, counters.directories.value, counters.vanished.value, waves)


# -- a storage inventory instead of a listing ------------------------------------------------------

_PATH_COLUMNS = ("path", "key", "file_path")
_SIZE_COLUMNS = ("size", "file_size")
_MTIME_COLUMNS = ("modification_time_ms", "modification_time", "last_modified_date", "last_modified")


def root_forms(root: str) -> list[str]:
    """The prefixes an inventory may write the table root as: URL, scheme-less path, bucket-relative key."""
    stripped = root.rstrip("/")
    forms = [stripped]
    scheme, separator, rest = stripped.partition("://")
    if separator:
        forms.append(rest)
        if scheme.lower() in ("s3", "s3a", "s3n", "gs", "gcs") and "/" in rest:
            forms.append(rest.split("/", 1)[1])  # S3 Inventory / GCS keys are relative to the bucket
    elif stripped.startswith("/"):
        forms.append(f"file://{stripped}")
    return forms


def relative_to_root(path: str, forms: list[str]) -> str | None:
    """`path` relative to the table root in any of its `forms`; None when it lies elsewhere."""
    for form in forms:
        if path.startswith(form + "/"):
            relative = path[len(form) + 1 :].strip("/")
            return relative or None
    return None


def _pick(columns: list[str], names: tuple[str, ...], what: str, source: str) -> str:
    lowered = {column.lower(): column for column in columns}
    for name in names:
        if name in lowered:
            return lowered[name]
    raise BadInputError(
        f"inventory {source}: no {what} column "
        f"(expected one of {', '.join(names)}; found {', '.join(columns)})"
    )


def read_inventory(
    spark: SparkSession, source: str, root: str, naming: FileNaming, file_format: str = "auto"
) -> DataFrame:
    """An inventory (Parquet or CSV with a header: path, size, modification time) as LISTED_COLUMNS.

    Paths may be full URLs, scheme-less or bucket-relative keys (S3 Inventory), not URL-encoded;
    rows outside the table and directory markers are dropped. The modification time is epoch
    milliseconds or a timestamp.
    """
    # Spark's own readers read an inventory, so such a run is always on Spark (never a LocalSession)
    from pyspark.sql import functions as F
    from pyspark.sql.types import NumericType, StringType  # (with the line above)

    chosen = file_format
    if chosen == "auto":
        chosen = "csv" if source.rstrip("/").lower().endswith((".csv", ".csv.gz")) else "parquet"
    spark_path = "s3a://" + source[len("s3://") :] if source.startswith("s3://") else source
    reader = (
        spark.read.option("header", "true").option("inferSchema", "false") if chosen == "csv" else spark.read
    )
    frame = reader.format(chosen).load(spark_path)
    path_column = _pick(frame.columns, _PATH_COLUMNS, "path", source)
    size_column = _pick(frame.columns, _SIZE_COLUMNS, "size", source)
    mtime_column = _pick(frame.columns, _MTIME_COLUMNS, "modification time", source)
    mtime_type = frame.schema[mtime_column].dataType
    if isinstance(mtime_type, NumericType):
        mtime = F.col(mtime_column).cast("long")
    elif isinstance(mtime_type, StringType):
        text = F.col(mtime_column)
        mtime = F.when(text.rlike(r"^\d+$"), text.cast("long")).otherwise(F.unix_millis(F.to_timestamp(text)))
    else:
        mtime = F.unix_millis(F.col(mtime_column).cast("timestamp"))
    rows = frame.select(
        F.col(path_column).cast("string").alias("path"),
        F.col(size_column).cast("long").alias("size"),
        mtime.alias("modification_time_ms"),
    )
    forms = root_forms(root)

    def judge(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out: dict[str, list] = {name: [] for name in LISTED_SCHEMA.names}
            paths = batch.column("path").to_pylist()
            sizes = batch.column("size").to_pylist()
            mtimes = batch.column("modification_time_ms").to_pylist()
            for path, size, mtime_ms in zip(paths, sizes, mtimes, strict=True):
                if path is None or path.endswith("/"):
                    continue
                relative = relative_to_root(path, forms)
                if relative is None:
                    continue
                if size is None or mtime_ms is None:
                    raise BadInputError(f"inventory {source}: {path} has no size or modification time")
                judgement = judge_file(relative, naming)
                out["path"].append(relative)
                out["size"].append(size)
                out["modification_time_ms"].append(mtime_ms)
                out["rule"].append(judgement.rule)
                out["kind"].append(judgement.kind)
            yield pa.RecordBatch.from_pydict(out, schema=LISTED_SCHEMA)

    return rows.mapInArrow(judge, LISTED_COLUMNS).localCheckpoint(eager=True)
