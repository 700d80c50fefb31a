"""Data files written on the executors: through a Spark DataFrame, or straight from Parquet files.

Each task writes its rows with pyarrow (inside `mapInArrow`, or reading Parquet files itself) and
answers one row per file (`jobs.writing.columns`); only those rows reach the driver. The
dynamic-bucket path of primary-key tables is `jobs.writing.dynamic_bucket`.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from jobs.runtime.job_group import run_action
from jobs.writing.columns import (
    BUCKET_COLUMN,
    ORDER_COLUMN,
    WRITTEN_FILE_DDL,
    WRITTEN_FILE_SCHEMA,
    WrittenRows,
    written_file_rows,
)
from jobs.writing.source import ParquetFiles
from paimon_format.data.bucket import bucket_array, bucket_key_columns
from paimon_format.data.conform import conform, fit_string_lengths
from paimon_format.data.prefetch import Prefetch
from paimon_format.data.writer import write_bucket_outputs, write_table_files
from paimon_format.manifest.codec import read_manifest
from paimon_format.manifest.entries import ADD
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.snapshot_scan import data_manifests, read_entries
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ArrowTask = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def next_sequence_number(spark: SparkSession, table: Table) -> int:
    """One more than the largest sequence number of any live file, read from manifests on executors."""
    latest = table.snapshot_manager.latest(reuse_read=True)  # the plan's (the open check's) read
    if latest is None:
        return 0
    names = [meta.file_name for meta in data_manifests(table, latest)]
    if not names:
        return 0

    def max_in_manifest(name: str) -> int:
        entries = read_manifest(table.file_io, table.manifest_path(name))
        return max((e.file.max_sequence_number for e in entries if e.kind == ADD), default=-1)

    slices = min(len(names), max(spark.sparkContext.defaultParallelism, 1) * 4)
    return spark.sparkContext.parallelize(names, slices).map(max_in_manifest).fold(-1, max) + 1


def next_sequence_number_on_driver(table: Table) -> int:
    """`next_sequence_number` read where it is called (the Spark data source plans in a Python
    worker with no SparkSession): the manifests stream through with read-ahead, one at a time."""
    latest = table.snapshot_manager.latest(reuse_read=True)  # the plan's (the open check's) read
    if latest is None:
        return 0
    entries = read_entries(table, data_manifests(table, latest))
    return max((e.file.max_sequence_number for e in entries if e.kind == ADD), default=-1) + 1


# -- through Spark ---------------------------------------------------------------------------------


def write_through_spark(
    df: DataFrame, target: Table, schema: TableSchema, num_buckets: int, first_sequence: int
) -> WrittenRows:
    """Fixed buckets (or an append table): each row gets its bucket, a bucket goes to one task."""
    from pyspark.sql import functions as F  # pyspark: loaded when the job runs, not on import (--help)
    from pyspark.sql.types import IntegerType, StructField, StructType  # pyspark: as above

    frame = df.select(*[F.col(f.name) for f in schema.fields])
    if schema.primary_keys:
        frame = frame.withColumn(ORDER_COLUMN, F.monotonically_increasing_id())
    if num_buckets > 0:
        # a new StructType: `schema.add` would mutate the DataFrame's cached schema
        bucket_schema = StructType([*frame.schema.fields, StructField(BUCKET_COLUMN, IntegerType(), False)])
        frame = frame.mapInArrow(_bucket_task(schema), bucket_schema)
        frame = frame.repartition(*[F.col(k) for k in schema.partition_keys], F.col(BUCKET_COLUMN))
    write = frame.mapInArrow(_writer_task(target, schema, first_sequence), WRITTEN_FILE_DDL).collect
    return run_action(df.sparkSession, "write: data files", write)  # a failure stops every task first


def _writer_task(table: Table, schema: TableSchema, first_sequence: int) -> ArrowTask:
    """The function each Spark task runs: its rows -> data files -> one result row per file."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        data = pa.Table.from_batches(collected)
        if ORDER_COLUMN in data.column_names:  # keep the input order for "last write wins"
            data = data.sort_by(ORDER_COLUMN)
        data = fit_string_lengths(conform(data, schema), schema)
        outputs = write_bucket_outputs(table.file_io, table.path, schema, data, first_sequence)
        yield pa.RecordBatch.from_pylist(written_file_rows(table, outputs), schema=WRITTEN_FILE_SCHEMA)

    return write


def _bucket_task(schema: TableSchema) -> ArrowTask:
    """Adds each row's Paimon bucket, so the shuffle can send a whole bucket to one task."""
    keys = bucket_key_columns(schema)
    key_types = [schema.field(k).type for k in keys]
    num_buckets = int(schema.options["bucket"])

    def add_bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            buckets = bucket_array([batch.column(k) for k in keys], key_types, num_buckets)
            yield batch.append_column(BUCKET_COLUMN, pa.array(buckets, pa.int32()))

    return add_bucket


# -- straight from Parquet files -------------------------------------------------------------------


def write_files_directly(
    spark: SparkSession, files: ParquetFiles, target: Table, schema: TableSchema, first_sequence: int
) -> list[dict[str, Any]]:
    """Each task reads its share of the source files with pyarrow and writes data files, flushing at
    `target-file-size` of buffered rows so memory stays bounded. A task's next source files are
    fetched while one is decoded (`Prefetch`: bounded by count and bytes), each with its listed size."""
    flush_bytes = CoreOptions(schema.options).target_file_size(False)

    def write(items: Iterator[tuple[str, int | None]]) -> Iterator[dict[str, Any]]:
        pending: list[pa.Table] = []
        pending_bytes = 0

        def flush() -> Iterator[dict[str, Any]]:
            data = pa.concat_tables(pending)
            pending.clear()
            for partition, bucket, metas in write_table_files(
                target.file_io, target.path, schema, data, first_sequence
            ):
                for meta in metas:
                    yield {
                        "partition": partition,
                        "bucket": bucket,
                        "meta": pickle.dumps(meta),
                        "rows": meta.row_count,
                        "size": meta.file_size,
                        "path": f"{target.bucket_relpath(partition, bucket)}/{meta.file_name}",
                        "changelog": False,  # append tables have no changelog files
                    }

        sized = list(items)
        with Prefetch(files.file_io(), sized) as prefetch:
            for path, size in sized:
                with prefetch.open(path, size) as handle:
                    data = conform(pq.read_table(handle), schema)
                    data = fit_string_lengths(data, schema)
                pending.append(data)
                pending_bytes += data.nbytes
                if pending_bytes >= flush_bytes:
                    yield from flush()
                    pending_bytes = 0
        if pending:
            yield from flush()

    # small files packed into few tasks (each task's reads are in flight already), big ones spread
    slices = files.tasks(flush_bytes, spark.sparkContext.defaultParallelism)
    action = spark.sparkContext.parallelize(files.sized_paths(), slices).mapPartitions(write).collect
    return run_action(spark, "write: data files", action)  # a failure stops every task first
