"""What the write job reads: a Spark DataFrame, or Parquet files the executors read themselves."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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


def parquet_files(path: str, storage_options: dict[str, Any]) -> ParquetFiles | None:
    """The Parquet files under `path`, or None when Spark must read them (Hive-style dirs, no files)."""
    try:
        fs, root = fsspec.core.url_to_fs(path, **storage_options)
        if fs.isfile(root):
            found = [root]
        else:
            found = sorted(fs.find(root))
    except (FileNotFoundError, OSError, ValueError):
        return None
    files = []
    for file_path in found:
        relative = file_path[len(root) :].strip("/").split("/") if file_path != root else [file_path]
        if any(part.startswith(("_", ".")) for part in relative) or not file_path.endswith(".parquet"):
            continue
        if any("=" in part for part in relative[:-1]):
            return None  # partition values live in directory names: Spark's reader adds those columns
        files.append(file_path)
    if not files:
        return None
    with fs.open(files[0], "rb") as handle:
        parquet = pq.ParquetFile(handle)
        columns = parquet.schema
        if any(columns.column(i).physical_type == "INT96" for i in range(len(columns))):
            return None  # Spark's default `timestamp` encoding: instants only Spark's reader knows as such
        schema = parquet.schema_arrow
    return ParquetFiles(tuple(fs.unstrip_protocol(f) for f in files), dict(storage_options), schema)


def count_rows(spark: SparkSession, files: ParquetFiles) -> int:
    """The rows of the Parquet files, from their footers (read on the executors): the dry run's count."""

    def count(path: str) -> int:
        with fsspec.open(path, "rb", **files.storage_options) as handle:
            return pq.ParquetFile(handle).metadata.num_rows

    return (
        spark.sparkContext.parallelize(list(files.paths), max(1, min(len(files.paths), 64))).map(count).sum()
    )


def dataframe_arrow_schema(df: DataFrame) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema  # pyspark: only a DataFrame's write loads it

    time_zone = df.sparkSession.conf.get("spark.sql.session.timeZone")
    try:  # Spark 4 needs the zone of `timestamp` (TIMESTAMP_LTZ) columns: the session's, as mapInArrow
        return to_arrow_schema(df.schema, timezone=time_zone)
    except TypeError:  # Spark 3.5: no timezone argument, `timestamp` is always UTC-adjusted there
        return to_arrow_schema(df.schema)
