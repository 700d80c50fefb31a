"""Reading a Paimon table into a Spark DataFrame: splits planned on the driver, read on the executors.

The driver resolves the snapshot (latest, an id, or a tag), plans the splits from metadata
(`paimon_format.scan.splits.plan_splits`) and ships each split, pickled, as one row of a small
DataFrame; `mapInArrow` then runs `paimon_format.scan.split_read.read_split` on the executors, one task
per split, so the rows never pass through the driver. What a split reads, and how primary-key
buckets are merged and deletion vectors applied, is the format layer's business; this module only
fans out and converts Arrow types to Spark's.

`where` is a Spark SQL predicate applied to the result. Its top-level AND terms that name only
partition columns (in the grammar of `paimon_format.scan.partition_predicate`) also prune partitions
before any file is opened; the full predicate is still applied by Spark, so pruning only saves work.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.runtime.errors import BadInputError
from jobs.runtime.spark import parallelize_small
from paimon_format.data.prefetch import tasks_for_files
from paimon_format.data.reader import output_arrow_schema, prefetch_data_files
from paimon_format.errors import PaimonFormatError
from paimon_format.merge.table_engine import check_merge_supported
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.scan.partition_predicate import (
    And,
    PartitionColumns,
    PartitionTest,
    bind_predicate,
    parse_predicate,
    selects,
)
from paimon_format.scan.snapshot_scan import resolve_snapshot
from paimon_format.scan.split_read import projected_schema, read_split, split_files
from paimon_format.scan.splits import PartitionFilter, Split, plan_splits
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)
SPLIT_COLUMN = "split"


def read_table(
    spark: SparkSession,
    warehouse: str,
    table: str,
    snapshot: int | None = None,
    tag: str | None = None,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    storage_options: dict[str, Any] | None = None,
) -> DataFrame:
    """The rows of `table` (`db.name` in `warehouse`) at the latest snapshot, snapshot `snapshot`
    or tag `tag`, as a DataFrame with the table's columns (or `columns`, in that order).

    Time travel reads with the schema of the snapshot travelled to, as Paimon does. An empty table
    reads as an empty DataFrame. Bad arguments (unknown table, snapshot, tag or column) raise
    `BadInputError`; a missing or corrupt file fails the Spark job with the format layer's error.
    """
    try:
        handle = Table.open(warehouse, table, storage_options)
        handle.check_metadata()
        resolved = resolve_snapshot(handle, snapshot, tag)
        schema = read_schema_at(handle, resolved)
        projected_schema(schema, columns)  # unknown columns are bad input
        partition_filter = _partition_filter(handle, schema, where)
    except (ValueError, PaimonFormatError) as error:
        raise BadInputError(f"read {table}: {error}") from None
    # `where` may name columns left out of `columns`: then read them all, filter, and project.
    read_columns = list(columns) if columns and not where else None
    read_schema_spark = spark_schema_of(output_arrow_schema(projected_schema(schema, read_columns)))

    def finish(frame: DataFrame) -> DataFrame:
        frame = frame.where(where) if where else frame
        return frame.select(*columns) if columns and where else frame

    if resolved is None:
        log.info("read %s: no snapshot yet, empty result", table)
        return finish(spark.createDataFrame([], read_schema_spark))
    splits = plan_splits(handle, resolved, partition_filter)
    log.info(
        "read %s: snapshot %d, %d split(s), %d file(s)",
        table,
        resolved.id,
        len(splits),
        sum(len(s.files) for s in splits),
    )
    if not splits:
        return finish(spark.createDataFrame([], read_schema_spark))
    # pyspark: loaded by a read that runs, not on import (--help)
    from pyspark.sql.types import BinaryType, StructField, StructType

    tasks = read_task_count(splits, spark.sparkContext.defaultParallelism)
    blobs = parallelize_small(spark, [pickle.dumps(s) for s in splits], tasks, what="splits")
    frame = spark.createDataFrame(
        blobs.map(lambda blob: (blob,)), StructType([StructField(SPLIT_COLUMN, BinaryType(), False)])
    )
    time_zone = spark.conf.get("spark.sql.session.timeZone", "UTC")
    task = _read_task(handle, schema, read_columns, read_schema_spark, time_zone)
    return finish(frame.mapInArrow(task, read_schema_spark))


def read_schema_at(table: Table, snapshot: Snapshot | None) -> TableSchema:
    """The schema a read of `snapshot` returns (the snapshot's own: time travel reads as the table
    was); an engine or option we cannot merge is refused here, before any task runs."""
    schema = table.schema_by_id(snapshot.schema_id) if snapshot is not None else table.schema
    if schema.primary_keys:
        check_merge_supported(schema, CoreOptions(schema.options))
    return schema


def read_task_count(splits: Sequence[Split], parallelism: int) -> int:
    """How many tasks read `splits`: splits share tasks (a few a core, see `tasks_for_files`), each
    reading its files with the next ones in flight (on a store with latency a task per split kept
    one file in flight per core)."""
    return tasks_for_files(len(splits), sum(meta.file_size for s in splits for meta in s.files), parallelism)


def read_task_groups(splits: Sequence[Split], parallelism: int) -> list[list[Split]]:
    """`splits` cut into `read_task_count` consecutive groups of near-equal length, one per task, as
    Spark's `parallelize` slices the list `read_table` ships."""
    tasks = read_task_count(splits, parallelism) if splits else 0
    return [list(splits[i * len(splits) // tasks : (i + 1) * len(splits) // tasks]) for i in range(tasks)]


def read_splits_as(
    table: Table, schema: TableSchema, columns: list[str] | None, splits: Sequence[Split], target: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The rows of a task's `splits` in the Arrow types `target` (Spark's), files fetched ahead: the
    task (file metadata only) is known up front. Shared by `read_table` and the Spark source."""
    with prefetch_data_files(table, split_files(splits)) as prefetch:
        for split in splits:
            for rows in read_split(table, split, read_schema=schema, columns=columns, prefetch=prefetch):
                yield pa.RecordBatch.from_arrays(
                    [rows.column(i).cast(field.type) for i, field in enumerate(target)], schema=target
                )


def spark_schema_of(arrow_schema: pa.Schema) -> StructType:
    """Spark's schema for Arrow columns as `read_data_file` yields them (TIMESTAMP -> TIMESTAMP_NTZ)."""
    from pyspark.sql.pandas.types import from_arrow_schema  # pyspark: not loaded on import (--help)

    plain = pa.schema([field.remove_metadata() for field in arrow_schema])
    try:
        return from_arrow_schema(plain, prefer_timestamp_ntz=True)
    except (TypeError, ValueError) as error:
        raise BadInputError(f"a column type cannot be read into Spark: {error}") from None


def _read_task(
    table: Table, schema: TableSchema, columns: list[str] | None, spark_schema: StructType, time_zone: str
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The executor side: each input row is a pickled split; yields its rows in Spark's Arrow types."""
    from pyspark.sql.pandas.types import to_arrow_schema  # pyspark: not loaded on import (--help)

    try:
        target = to_arrow_schema(spark_schema, timezone=time_zone)
    except TypeError:  # Spark 3.5: no timezone argument, TIMESTAMP is always UTC-adjusted there
        target = to_arrow_schema(spark_schema)

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        splits = [pickle.loads(blob) for batch in batches for blob in batch.column(SPLIT_COLUMN).to_pylist()]
        yield from read_splits_as(table, schema, columns, splits, target)

    return read


# -- partition pruning from `where` -------------------------------------------------------------


def _conjuncts(expr: Any) -> list[Any]:
    if isinstance(expr, And):
        return _conjuncts(expr.left) + _conjuncts(expr.right)
    return [expr]


def _partition_filter(table: Table, schema: TableSchema, where: str | None) -> PartitionFilter | None:
    """A partition test from the AND terms of `where` that are about partition columns only."""
    if not where or not schema.partition_keys:
        return None
    try:
        expr = parse_predicate(where)
    except ValueError:
        return None  # beyond the partition grammar: Spark alone filters
    columns = PartitionColumns.of(schema)
    tests: list[PartitionTest] = []
    for term in _conjuncts(expr):
        try:
            tests.append(bind_predicate(term, columns))
        except ValueError:
            continue  # names a non-partition column or a literal that does not fit: not for pruning
    if not tests:
        return None
    log.info("read %s: %d term(s) of the where clause prune partitions", table.path, len(tests))

    def accepts(partition: bytes) -> bool:
        values = table.partition_values(partition)
        return all(selects(test, values) for test in tests)

    return accepts
