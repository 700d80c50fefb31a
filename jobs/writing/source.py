"""What the write job reads: a Spark DataFrame, or Parquet files the executors read themselves.

Requests: the source directory is listed once (one flat listing, which gives every file's size), and
each file is then read with the size its listing gave (`FileIO.open_input`): no HEAD, and a file of at
most 32 MB in one GET, where an fsspec file object asks for its size and then reads the footer and
the column chunks in separate requests.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

from paimon_format.storage.fileio import FileIO

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPEN_COST = 4 << 20  # a file of unknown size counts as this much (Spark's openCostInBytes)
MIN_TASK_BYTES = 32 << 20  # less source than this per task only makes smaller data files


@dataclass(frozen=True)
class ParquetFiles:
    """A Parquet file source that executors read themselves with pyarrow.

    Rows then never cross the JVM: the driver lists the files, each task reads some of them and
    writes data files directly. Used for append tables with `bucket: -1`; anything else goes
    through a Spark DataFrame of the same files.
    """

    paths: tuple[str, ...]
    storage_options: dict[str, Any]
    arrow_schema: pa.Schema
    sizes: tuple[int | None, ...] = ()  # each path's size from the listing (empty: unknown)
    io_parallelism: int | None = None  # reads in flight per task (None: the storage's default)

    def file_io(self) -> FileIO:
        """The FileIO reading these files (the same storage options; made where it is used)."""
        return FileIO.for_path(self.paths[0], self.storage_options, io_parallelism=self.io_parallelism)

    def sized_paths(self) -> list[tuple[str, int | None]]:
        """(path, size from the listing or None) of every file."""
        return list(zip(self.paths, self.sizes or [None] * len(self.paths), strict=True))

    def tasks(self, target_file_size: int, parallelism: int) -> int:
        """How many tasks read these files. Each task writes its own data files per partition, so
        a task per small source file would turn four 1 MiB files into four files per partition:
        tasks get at least MIN_TASK_BYTES of source (or all of it), at most the target file size,
        and in between the source spread over the cores (as Spark sizes its read splits). A file
        of unknown size counts as OPEN_COST."""
        total = sum(size if size is not None else OPEN_COST for _path, size in self.sized_paths())
        split = min(target_file_size, max(MIN_TASK_BYTES, total // max(parallelism, 1)))
        return max(1, min(len(self.paths), -(-total // max(split, 1))))


def parquet_files(
    path: str, storage_options: dict[str, Any], io_parallelism: int | None = None
) -> ParquetFiles | None:
    """The Parquet files under `path` (a directory or one file), or None when Spark must read them
    (Hive-style directories, no files). One listing names them and their sizes; the first file's
    footer gives the schema."""
    try:
        fs, root = fsspec.core.url_to_fs(path, **storage_options)
        listed = fs.find(root, detail=True)  # a file's own path lists as itself (S3: LIST, then HEAD)
    except (FileNotFoundError, OSError, ValueError):
        return None
    found = sorted(listed)
    files: list[str] = []
    for file_path in found:
        relative = file_path[len(root) :].strip("/").split("/") if file_path != root else [file_path]
        if any(part.startswith(("_", ".")) for part in relative) or not file_path.endswith(".parquet"):
            continue
        if any("=" in part for part in relative[:-1]):
            return None  # partition values live in directory names: Spark's reader adds those columns
        files.append(file_path)
    if not files:
        return None
    sizes = tuple(_listed_size(listed[f]) for f in files)
    source = ParquetFiles(
        tuple(fs.unstrip_protocol(f) for f in files),
        dict(storage_options),
        pa.schema([]),
        sizes,
        io_parallelism,
    )
    with source.file_io().open_input(source.paths[0], sizes[0]) as handle:
        parquet = pq.ParquetFile(handle)
        columns = parquet.schema
        if any(columns.column(i).physical_type == "INT96" for i in range(len(columns))):
            return None  # Spark's default `timestamp` encoding: instants only Spark's reader knows as such
        schema = parquet.schema_arrow
    return dataclasses.replace(source, arrow_schema=schema)


def _listed_size(info: dict[str, Any]) -> int | None:
    size = info.get("size")
    return int(size) if isinstance(size, int) and size >= 0 else None


def count_rows(spark: SparkSession, files: ParquetFiles) -> int:
    """The rows of the Parquet files, from their footers (read on the executors): the dry run's count."""

    def count(item: tuple[str, int | None]) -> int:
        path, size = item
        with files.file_io().open_input(path, size) as handle:
            return pq.ParquetFile(handle).metadata.num_rows

    items = files.sized_paths()
    return spark.sparkContext.parallelize(items, max(1, min(len(items), 64))).map(count).sum()


def dataframe_arrow_schema(df: DataFrame) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema  # pyspark: only a DataFrame's write loads it

    time_zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    try:  # Spark 4 needs the zone of `timestamp` (TIMESTAMP_LTZ) columns: the session's, as mapInArrow
        return to_arrow_schema(df.schema, timezone=time_zone)
    except TypeError:  # Spark 3.5: no timezone argument, `timestamp` is always UTC-adjusted there
        return to_arrow_schema(df.schema)
