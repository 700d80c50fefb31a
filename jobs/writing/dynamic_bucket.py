"""The write job on dynamic-bucket primary-key tables (`bucket = -1`, Paimon's default for them).

A key's bucket comes from the partition's HASH index (`paimon_format.index.hash_index`), not from the key,
so the write runs in two shuffles, as Paimon's own Spark writer does:

1. every row gets its key hash and assigner number (`abs(hash % assigners)`), and the rows are
   shuffled by (partition, assigner) and sorted by input order: each task reads the HASH index
   files of its partitions, assigns buckets (known keys keep theirs, new keys fill buckets up to
   `dynamic-bucket.target-row-num` in the order they come) and adds a bucket column;
2. the rows are shuffled by (partition, bucket): each task writes the bucket's data files and, when
   the bucket took a new key, a new HASH index file (its old hashes plus the new ones).

Only file metadata reaches the driver, which commits data files and index changes in one snapshot
(`SnapshotCommit.append/overwrite(index=...)`): the new HASH entries replace those of their
(partition, bucket). Paimon allows one writer per dynamic-bucket partition; if another commit
changed the HASH index of a partition we wrote since the snapshot we assigned from, our commit is
refused (exit 3) instead of committing a key to two buckets.

Crash ordering: data and HASH index files get new names and are written before the commit; the
snapshot (create-if-absent) is what makes them, and the replacement of the old HASH entries,
visible. A crash before it leaves only unreferenced files (orphans for remove-orphan-files, removed
by the job itself when the commit definitely failed) and the table as it was: a rerun assigns from
the same index again. The HASH files the new snapshot replaced stay for the older snapshots that
still name them; expire-snapshots deletes them with those snapshots.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from jobs.runtime.errors import BadInputError
from jobs.runtime.job_group import run_action
from jobs.writing.columns import (
    BUCKET_COLUMN,
    ORDER_COLUMN,
    WRITTEN_FILE_DDL,
    WRITTEN_FILE_SCHEMA,
    WrittenRows,
    written_file_rows,
)
from jobs.writing.settings import PartitionTest
from paimon_format.commit import IndexUpdate
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.data.bucket_slices import split_by_partition_and_bucket
from paimon_format.data.conform import conform, fit_string_lengths
from paimon_format.data.writer import write_bucket_outputs
from paimon_format.errors import CommitConflictError
from paimon_format.index.hash_index import (
    HASH_INDEX,
    PartitionAssigner,
    assigner_of,
    check_single_entry_per_bucket,
    hash_index_entries,
    key_hashes,
    updated_bucket_index,
)
from paimon_format.manifest.entries import IndexManifestEntry
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

HASH_COLUMN = "__paimon_key_hash"
ASSIGNER_COLUMN = "__paimon_assigner"
ROW_COLUMN = "__paimon_row"
# The write job's result rows (`WRITTEN_FILE_SCHEMA`), plus, for dynamic buckets, a pickled new
# HASH IndexManifestEntry (then meta is empty)
DYNAMIC_RESULT_SCHEMA = WRITTEN_FILE_SCHEMA.append(pa.field("index", pa.binary()))
_RESULT_DDL = WRITTEN_FILE_DDL + ", index binary"  # the same columns for Spark
ArrowTask = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def is_dynamic_bucket(schema: TableSchema) -> bool:
    return bool(schema.primary_keys) and int(schema.options.get("bucket", "-1")) == -1


def check_bucket_mode(schema: TableSchema, table: str) -> None:
    """Refuse the primary-key bucket modes the write job cannot write (exit 2), before any work.

    Postpone buckets (-2) need Paimon's later compaction to place rows; a primary key without every
    partition key (cross-partition upsert) needs Paimon's global index of keys across partitions.
    """
    if not schema.primary_keys:
        return
    try:
        num_buckets = CoreOptions(schema.options).bucket
    except ValueError as error:
        raise BadInputError(f"table {table}: {error}") from None
    if num_buckets == -2:
        raise BadInputError(
            f"table {table}: primary-key tables with bucket=-2 (postpone buckets) are not supported by "
            "the write job; use a fixed bucket count or bucket=-1 (dynamic buckets)"
        )
    if num_buckets != -1:
        return
    try:
        target_row_num = CoreOptions(schema.options).dynamic_bucket_target_row_num
    except ValueError as error:
        raise BadInputError(f"table {table}: {error}") from None
    if target_row_num < 1:
        raise BadInputError(
            f"table {table}: dynamic-bucket.target-row-num must be at least 1, got {target_row_num}"
        )
    num_assigners(schema, 1)  # its options parse
    if not set(schema.partition_keys) <= set(schema.primary_keys):
        raise BadInputError(
            f"table {table}: dynamic bucket (bucket=-1) with a primary key {list(schema.primary_keys)} that "
            f"does not contain every partition key {list(schema.partition_keys)} is a cross-partition "
            "upsert, which needs Paimon's global key index: not supported by the write job; write it with "
            "Paimon's own writer (Flink or Spark with the Paimon connector)"
        )


def num_assigners(schema: TableSchema, parallelism: int) -> int:
    """Assigners per partition, as Paimon's Spark writer: `dynamic-bucket.assigner-parallelism`
    (default: the Spark parallelism), at most `dynamic-bucket.initial-buckets` when that is set."""
    options = schema.options
    try:
        count = int(options.get("dynamic-bucket.assigner-parallelism", parallelism))
        if "dynamic-bucket.initial-buckets" in options:
            count = min(count, int(options["dynamic-bucket.initial-buckets"]))
    except ValueError as error:
        raise BadInputError(f"dynamic-bucket options: {error}") from None
    if count < 1:
        raise BadInputError(f"dynamic-bucket assigner count must be at least 1, got {count}")
    return count


# -- the two shuffles ----------------------------------------------------------------------------------


def write_dynamic(
    df: DataFrame,
    target: Table,
    schema: TableSchema,
    first_sequence: int,
    base_snapshot_id: int | None,
    mode: str,
    overwrite_filter: PartitionTest | None,
) -> tuple[WrittenRows, IndexUpdate]:
    """The write job's dynamic-bucket path: (result rows of the data and changelog files, the
    index change to commit with them)."""
    from pyspark.sql import functions as F  # pyspark: loaded when the job runs, not on import (--help)

    replaces = None if mode == "append" else (overwrite_filter or _every_partition)
    frame = df.select(*[F.col(f.name) for f in schema.fields])
    frame = frame.withColumn(ORDER_COLUMN, F.monotonically_increasing_id())
    assigners = num_assigners(schema, df.sparkSession.sparkContext.defaultParallelism)
    written = write_dynamic_buckets(
        frame, target, schema, first_sequence, base_snapshot_id, replaces, assigners
    )
    files, entries = split_index_rows(written)
    partitions = {bytes(row["partition"]) for row in files}
    return files, index_update(target, base_snapshot_id, entries, partitions, replaces)


def _every_partition(_partition: bytes) -> bool:
    return True


def write_dynamic_buckets(
    frame: DataFrame,
    target: Table,
    schema: TableSchema,
    first_sequence: int,
    base_snapshot_id: int | None,
    replaces: PartitionTest | None,
    assigners: int,
) -> WrittenRows:
    """Write `frame` (table columns, plus the input-order column) into dynamic buckets; the result
    rows of every data, changelog and new HASH index file (`DYNAMIC_RESULT_SCHEMA`).

    `replaces(partition)` is true for partitions an overwrite replaces: their keys are assigned
    from an empty index, since the commit drops their files and index entries.
    """
    from pyspark.sql import functions as F  # pyspark: loaded when the job runs, not on import (--help)
    from pyspark.sql.types import IntegerType, StructField, StructType  # pyspark: as above

    partition_columns = [F.col(k) for k in schema.partition_keys]
    hashed_schema = StructType(
        [
            *frame.schema.fields,
            StructField(HASH_COLUMN, IntegerType(), False),
            StructField(ASSIGNER_COLUMN, IntegerType(), False),
        ]
    )
    hashed = frame.mapInArrow(_hash_task(schema, assigners), hashed_schema)
    # sorted by input order inside each task: the assignment of new keys then does not depend on
    # the order shuffle blocks arrive in, so a recomputed task assigns exactly as the first attempt
    shuffled = hashed.repartition(*partition_columns, F.col(ASSIGNER_COLUMN)).sortWithinPartitions(
        ORDER_COLUMN
    )
    bucket_schema = StructType([*hashed_schema.fields, StructField(BUCKET_COLUMN, IntegerType(), False)])
    assigned = shuffled.mapInArrow(
        _assign_task(target, schema, base_snapshot_id, replaces, assigners), bucket_schema
    )
    by_bucket = assigned.repartition(*partition_columns, F.col(BUCKET_COLUMN))
    writer = _bucket_writer_task(target, schema, first_sequence, base_snapshot_id, replaces, ORDER_COLUMN)
    # a failure stops every task first: no file is written after the write's cleanup
    write = by_bucket.mapInArrow(writer, _RESULT_DDL).collect
    return run_action(frame.sparkSession, "write: dynamic buckets", write)


def _hash_task(schema: TableSchema, assigners: int) -> ArrowTask:
    """Adds each row's key hash (of the table-typed trimmed primary key) and its assigner number."""

    def add(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:  # CHAR keys padded first: Java hashes the stored value
            hashes = key_hashes(fit_string_lengths(conform(batch, schema), schema), schema)
            batch = batch.append_column(HASH_COLUMN, pa.array(hashes, pa.int32()))
            yield batch.append_column(ASSIGNER_COLUMN, pa.array(assigner_of(hashes, assigners), pa.int32()))

    return add


def _grouped(
    data: pa.Table, schema: TableSchema, groups: np.ndarray
) -> Iterator[tuple[bytes, int, np.ndarray]]:
    """(partition bytes, group, row positions) for the rows of `data` by partition and `groups`."""
    conformed = conform(data, schema)
    helper = pa.table(
        {
            **{k: conformed.column(k) for k in schema.partition_keys},
            ROW_COLUMN: pa.array(np.arange(data.num_rows, dtype=np.int64)),
        }
    )
    # num_buckets=1: the groups are given, this only splits (the check is for computed buckets)
    for part in split_by_partition_and_bucket(helper, schema, 1, groups):
        yield part.partition, part.bucket, part.data.column(ROW_COLUMN).to_numpy()


def _assign_task(
    target: Table,
    schema: TableSchema,
    base_snapshot_id: int | None,
    replaces: PartitionTest | None,
    assigners: int,
) -> ArrowTask:
    """Assigns buckets; one PartitionAssigner per (partition, assigner) the task meets."""
    target_rows = CoreOptions(schema.options).dynamic_bucket_target_row_num

    def assign(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        index: dict[bytes, list[IndexManifestEntry]] | None = None
        states: dict[tuple[bytes, int], PartitionAssigner] = {}
        for batch in batches:
            if not batch.num_rows:
                continue
            if index is None:  # read once per task, only by tasks that have rows
                index = _base_index(target, base_snapshot_id)
            data = pa.Table.from_batches([batch])
            hashes = data.column(HASH_COLUMN).to_numpy()
            groups = data.column(ASSIGNER_COLUMN).to_numpy()
            buckets = np.empty(data.num_rows, dtype=np.int32)
            for partition, assigner_id, rows in _grouped(data, schema, groups):
                state = states.get((partition, assigner_id))
                if state is None:
                    entries = [] if replaces is not None and replaces(partition) else index.get(partition, [])
                    state = PartitionAssigner.load(target, entries, target_rows, assigners, assigner_id)
                    states[(partition, assigner_id)] = state
                buckets[rows] = state.assign(hashes[rows])
            yield batch.append_column(BUCKET_COLUMN, pa.array(buckets, pa.int32()))

    return assign


def _base_index(target: Table, base_snapshot_id: int | None) -> dict[bytes, list[IndexManifestEntry]]:
    """The HASH entries of the snapshot buckets are assigned from, by partition (one file per bucket)."""
    snapshot = target.snapshot_manager.snapshot(base_snapshot_id) if base_snapshot_id is not None else None
    entries = hash_index_entries(target, snapshot)
    for partition_entries in entries.values():
        check_single_entry_per_bucket(partition_entries, f"{target.path} snapshot {base_snapshot_id}")
    return entries


def _bucket_writer_task(
    target: Table,
    schema: TableSchema,
    first_sequence: int,
    base_snapshot_id: int | None,
    replaces: PartitionTest | None,
    order_column: str,
) -> ArrowTask:
    """Writes each (partition, bucket)'s data files, and its new HASH index file if a new key came."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        collected = [b for b in batches if b.num_rows]
        if not collected:
            return
        data = pa.Table.from_batches(collected).sort_by(order_column)  # the last write of a key wins
        data = (
            fit_string_lengths(conform(data, schema), schema)
            .append_column(BUCKET_COLUMN, data.column(BUCKET_COLUMN))
            .append_column(HASH_COLUMN, data.column(HASH_COLUMN))
        )
        rows = []
        index = _base_index(target, base_snapshot_id)
        hashes = data.column(HASH_COLUMN).to_numpy()
        written_index = []
        try:
            for partition, bucket, positions in _grouped(data, schema, data.column(BUCKET_COLUMN).to_numpy()):
                old = None
                if replaces is None or not replaces(partition):
                    old = next((e for e in index.get(partition, []) if e.bucket == bucket), None)
                entry = updated_bucket_index(target, partition, bucket, old, hashes[positions])
                if entry is not None:
                    written_index.append(entry)
                    rows.append(_index_row(target, entry))
            outputs = write_bucket_outputs(
                target.file_io, target.path, schema, data, first_sequence, bucket_column=BUCKET_COLUMN
            )
        except BaseException:
            target.file_io.delete_many([target.full_path(index_relpath(target, e)) for e in written_index])
            raise
        rows.extend({**row, "index": None} for row in written_file_rows(target, outputs))
        yield pa.RecordBatch.from_pylist(rows, schema=DYNAMIC_RESULT_SCHEMA)

    return write


def check_base_index(target: Table, base_snapshot_id: int | None) -> int:
    """Read the base snapshot's index manifest on the driver (the dry run's check that the executors
    will be able to); the number of HASH index files."""
    return sum(len(entries) for entries in _base_index(target, base_snapshot_id).values())


def index_relpath(table: Table, entry: IndexManifestEntry) -> str:
    """Where a HASH index file we wrote lives, relative to the table (as data file paths are)."""
    in_data_dir = table.options.get("index-file-in-data-file-dir", "false").strip().lower() == "true"
    if in_data_dir:
        return f"{table.bucket_relpath(entry.partition, entry.bucket)}/{entry.file_name}"
    return f"index/{entry.file_name}"


def _index_row(table: Table, entry: IndexManifestEntry) -> dict[str, Any]:
    return {
        "partition": entry.partition,
        "bucket": entry.bucket,
        "meta": b"",
        "rows": entry.row_count,
        "size": entry.file_size,
        "path": index_relpath(table, entry),
        "changelog": False,
        "index": pickle.dumps(entry),
    }


# -- the commit ----------------------------------------------------------------------------------------


def split_index_rows(written: WrittenRows) -> tuple[WrittenRows, list[IndexManifestEntry]]:
    """(data and changelog file rows, new HASH index entries) of the executors' result rows."""
    files, entries = [], []
    for row in written:
        if row["index"] is not None:
            entries.append(pickle.loads(row["index"]))
        else:
            files.append(row)
    return files, entries


def index_update(
    target: Table,
    base_snapshot_id: int | None,
    new_entries: list[IndexManifestEntry],
    written_partitions: set[bytes],
    replaces: PartitionTest | None,
) -> IndexUpdate:
    """The commit's index change: new HASH entries replace those of their (partition, bucket).

    Checked on every commit attempt: the HASH entries of every partition we wrote that the commit
    does not replace must still be those of the snapshot the buckets were assigned from; otherwise
    another writer added keys there meanwhile, and our assignment may put a key in a second bucket.
    """
    changed = {(bytes(entry.partition), entry.bucket) for entry in new_entries}
    checked = {p for p in written_partitions if replaces is None or not replaces(p)}
    base = _base_index(target, base_snapshot_id) if checked else {}
    expected = {p: sorted(e.file_name for e in base.get(p, [])) for p in checked}

    def drop(entry: IndexManifestEntry) -> bool:
        return entry.index_type == HASH_INDEX and (bytes(entry.partition), entry.bucket) in changed

    def check_base(ctx: AttemptContext) -> None:
        latest_id = ctx.latest.id if ctx.latest is not None else None
        if latest_id == base_snapshot_id or not checked:
            return
        now = hash_index_entries(target, ctx.latest)
        for partition in checked:
            if sorted(e.file_name for e in now.get(partition, [])) != expected[partition]:
                where = target.partition_dir(partition) or "(unpartitioned)"
                raise CommitConflictError(
                    f"{target.path}: another writer changed the hash index of partition "
                    f"{where} after snapshot {base_snapshot_id}, "
                    "which this write assigned buckets from; a dynamic-bucket partition takes one writer at "
                    "a time: rerun the write"
                )

    return IndexUpdate(add=list(new_entries), drop=drop, check_base=check_base)
