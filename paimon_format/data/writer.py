"""Arrow data -> Paimon data files and their DataFileMeta (spec §1, §4.5, §7).

Runs inside Spark executors (the write job feeds it Arrow batches through mapInArrow) and in plain
Python. This is the hot path of bulk writes, so every per-row step is vectorised with pyarrow
compute / numpy; Python loops run over columns, row groups, files and buckets only (and over rows
only for Avro, whose encoder is per-record anyway).

What readers rely on, and therefore what this module guarantees:

* file columns and Parquet field ids as Java's `ParquetSchemaConverter` writes them, so readers
  that match by name and readers that match by id both find every column;
* `_FILE_SIZE` is the exact byte size (files are encoded in memory, then stored in one write);
* primary-key files follow the LSM writer's invariants: rows sorted by the trimmed primary key,
  each key once per file (the last write wins), `_SEQUENCE_NUMBER` assigned in input order and
  continuing from the caller's first number, exact `_MIN_KEY`/`_MAX_KEY`/`_DELETE_ROW_COUNT` --
  Java reads a single level-0 file without deletes *raw*, so a duplicate key would surface as a
  duplicate row;
* value stats as Java's `metadata.stats-mode` collectors produce them (default `truncate(16)`).

Input is first conformed to the table's columns (`conform.py`) and split by partition and bucket
(`bucket_slices.py`); this module writes each bucket's files.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.data.bucket_slices import split_by_partition_and_bucket
from paimon_format.data.conform import ROW_KIND_COLUMN, conform
from paimon_format.data.encoders import FileEncoder, data_file_extension, new_encoder
from paimon_format.data.file_summary import FileSummary
from paimon_format.data.spool import payload_size, spool_path, store
from paimon_format.data.stats import FULL_STATS, bounded_columns, column_stats, value_stats
from paimon_format.data.uploads import Uploads
from paimon_format.errors import DataWriteError
from paimon_format.manifest.entries import DataFileMeta, SimpleStats
from paimon_format.merge.sorted_runs import merge_rows
from paimon_format.model.binary_row import EMPTY_ROW, serialize_row
from paimon_format.model.file_layout import (
    KEY_PREFIX,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    file_arrow_schema,
    key_column_names,
    key_fields,
)
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.paths import bucket_dir, new_data_file_name, partition_dir

_MAX_ROW_GROUP_BYTES = 128 * 1024 * 1024  # Java's parquet.block.size
_MAX_ROW_GROUP_ROWS = 1024 * 1024


# -- primary-key rows in file layout -----------------------------------------------------------------


def primary_key_input_rows(
    data: pa.Table, schema: TableSchema, first_sequence_number: int, options: CoreOptions
) -> pa.Table:
    """The rows as they came, in file layout with system columns, not merged (keys may repeat).

    Sequence numbers follow the input order; the value kind is the row-kind column's, else +I.
    """
    layout = file_arrow_schema(schema, options)
    if data.num_rows == 0:
        return layout.empty_table()
    n = data.num_rows
    sequence = pa.array(np.arange(first_sequence_number, first_sequence_number + n, dtype=np.int64))
    if ROW_KIND_COLUMN in data.column_names:
        kinds = data.column(ROW_KIND_COLUMN)
    else:
        kinds = pa.array(np.zeros(n, dtype=np.int8))
    columns = []
    for name in layout.names[: len(layout) - len(schema.fields)]:
        if name == SEQUENCE_NUMBER:
            columns.append(sequence)
        elif name == VALUE_KIND:
            columns.append(kinds)
        else:
            columns.append(data.column(name[len(KEY_PREFIX) :]))
    columns += [data.column(f.name) for f in schema.fields]
    return pa.Table.from_arrays(columns, schema=layout)


def changelog_order(rows: pa.Table, schema: TableSchema, options: CoreOptions) -> pa.Table:
    """Input rows ordered as Paimon's write buffer hands them to the changelog file: by key, then
    sequence number (every row kept, a key repeating as often as it came)."""
    keys = [(name, "ascending") for name in key_column_names(schema, options)]
    keys.append((SEQUENCE_NUMBER, "ascending"))
    order = pc.sort_indices(rows, sort_keys=keys, null_placement="at_start")
    return rows.take(order)


# -- writing the files of one bucket ------------------------------------------------------------------


def _creation_time() -> dt.datetime:
    """Local wall-clock time at millisecond precision, as Java's `LocalDateTime.now()` is stored."""
    now = dt.datetime.now()
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def _row_group_rows(data: pa.Table, target_bytes: int) -> int:
    """Rows per row group: about min(target file size, 128 MB) of Arrow memory, at most 1 Mi rows."""
    per_row = max(data.nbytes / max(data.num_rows, 1), 1.0)
    budget = min(target_bytes, _MAX_ROW_GROUP_BYTES)
    return int(min(max(budget / per_row, 1), _MAX_ROW_GROUP_ROWS))


class _OpenFile:
    """A data file being encoded; of its row groups only what its metadata needs is kept
    (`FileSummary`), so a writer's memory is its encoded bytes, not its rows."""

    def __init__(self, name: str, encoder: FileEncoder, summary: FileSummary) -> None:
        self.name = name
        self.encoder = encoder
        self.summary = summary

    @property
    def rows(self) -> int:
        return self.summary.rows

    def write(self, chunk: pa.Table) -> None:
        self.encoder.write(chunk)
        self.summary.add(chunk)


class BucketWriter:
    """Writes the data files of one partition and bucket, rolling at `target-file-size`.

    Feed it conformed tables (`conform`) with `write`; `close` flushes and returns the
    DataFileMeta of every file written. Append rows are encoded as they come; primary-key rows
    are buffered for the bucket because deduplication needs them together. `abort` deletes the
    files written so far.

    `uploads`: finished files are stored through it in the background (`data.uploads`); then the
    files `close` returns may still be uploading, and the owner of `uploads` calls its `wait` before
    their metadata goes anywhere (a commit names a file only after its upload finished). Without
    it each file is stored before the next is encoded.
    """

    def __init__(
        self,
        file_io: FileIO,
        table_root: str,
        schema: TableSchema,
        partition_values: Sequence[Any],
        bucket: int,
        first_sequence_number: int,
        options: CoreOptions | None = None,
        level: int = 0,
        file_source: int = 0,
        target_file_size: int | None = None,
        changelog: bool = False,
        file_prefix: str | None = None,
        uploads: Uploads | None = None,
        file_uuids: Callable[[], str] | None = None,
    ) -> None:
        self.file_io = file_io
        self._uploads = uploads
        self.table_root = table_root
        self.schema = schema
        self.options = options or CoreOptions(schema.options)
        self.partition_values = list(partition_values)
        self.bucket = bucket
        self.next_sequence_number = first_sequence_number
        self._has_pk = bool(schema.primary_keys)
        self._target = target_file_size or self.options.target_file_size(self._has_pk)
        self._level = level
        self._file_source = file_source
        # `file_uuids`: the caller names its files (e.g. a Spark write's id and task attempt, so that the
        # files of an attempt whose result never reached the commit can be found and removed)
        self._uuid = file_uuids() if file_uuids is not None else str(uuid.uuid4())
        self._counter = 0
        self._extension = data_file_extension(self.options)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self._group_rows: int | None = None
        self._file: _OpenFile | None = None
        self._files: list[DataFileMeta] = []
        self._paths: list[str] = []
        self.relative_dir = self._relative_dir()
        self._prefix = self.options.data_file_prefix if file_prefix is None else file_prefix
        self._key_names = [f.name for f in key_fields(schema)] if self._has_pk else []
        self._bounded = bounded_columns(schema, self.options, self._key_names)
        # changelog-producer input: the rows as they came also go to changelog files (Java's
        # MergeTreeWriter hands the write buffer's raw records to a changelog writer at level 0)
        self._changelog: BucketWriter | None = None
        if changelog and self._has_pk and self.options.changelog_producer == "input":
            self._changelog = BucketWriter(
                file_io,
                table_root,
                schema,
                partition_values,
                bucket,
                first_sequence_number,
                self.options,
                target_file_size=target_file_size,
                file_prefix=self.options.changelog_file_prefix,
                uploads=uploads,
                file_uuids=file_uuids,
            )
        self.changelog_files: list[DataFileMeta] = []

    def _relative_dir(self) -> str:
        directory = ""
        if self.schema.partition_keys:
            directory = partition_dir(
                self.partition_values,
                self.schema.partition_keys,
                self.schema.partition_types(),
                self.options.partition_default_name,
                self.options.partition_legacy_name,
            )
        relative = bucket_dir(directory, self.bucket)
        prefix = self.options.data_file_path_directory
        return f"{prefix.rstrip('/')}/{relative}" if prefix else relative

    def write(self, data: pa.Table) -> None:
        """Add conformed rows (table columns in stored types, optionally the row-kind column)."""
        if data.num_rows == 0:
            return
        if not self._has_pk and ROW_KIND_COLUMN in data.column_names:
            data = data.drop_columns([ROW_KIND_COLUMN])
        self._pending.append(data)
        self._pending_rows += data.num_rows
        if not self._has_pk:
            if self._group_rows is None:
                self._group_rows = _row_group_rows(data, self._target)
            while self._pending_rows >= self._group_rows:
                self._write_group(self._take_pending(self._group_rows))

    def write_key_values(self, rows: pa.Table) -> None:
        """Add primary-key rows already in file layout (`file_arrow_schema`), sorted by key, each key
        once, with their own sequence numbers and value kinds (a compaction's merged output).

        Nothing is deduplicated or renumbered: the rows are encoded as they come, so the caller's
        streaming merge bounds the memory (one row group at a time), and files roll at the target.
        """
        if not self._has_pk:
            raise DataWriteError("write_key_values is for primary-key tables")
        if rows.num_rows == 0:
            return
        if self._group_rows is None:
            self._group_rows = _row_group_rows(rows, self._target)
        for start in range(0, rows.num_rows, self._group_rows):
            self._write_group(rows.slice(start, self._group_rows))

    def close(self) -> list[DataFileMeta]:
        """Write what is buffered, finish the open file, and return every file's metadata."""
        if self._has_pk:
            self._flush_primary_key()
        elif self._pending_rows:
            self._write_group(self._take_pending(self._pending_rows))
        self._finish_file()
        if self._changelog is not None:
            self.changelog_files = self._changelog.close()
        return list(self._files)

    def abort(self) -> None:
        """Delete the files this writer stored (after a failure, before anything commits them), once
        no upload of them is still running (which could store one again after its delete)."""
        if self._uploads is not None:
            self._uploads.drain()
        if self._changelog is not None:
            self._changelog.abort()
        self.changelog_files = []
        if self._file is not None:
            self._file.encoder.discard()
        self._file = None
        if self._paths:
            self.file_io.delete_many(self._paths)
        self._paths.clear()
        self._files.clear()

    def _take_pending(self, rows: int) -> pa.Table:
        data = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        head, rest = data.slice(0, rows), data.slice(rows)
        self._pending = [rest] if rest.num_rows else []
        self._pending_rows = rest.num_rows
        return head

    def _flush_primary_key(self) -> None:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending)
        self._pending, self._pending_rows = [], 0
        raw = primary_key_input_rows(data, self.schema, self.next_sequence_number, self.options)
        if self._changelog is not None:
            self._changelog.write_key_values(changelog_order(raw, self.schema, self.options))
        rows = merge_rows(raw, self.schema, self.options, drop_deletes=False)
        self.next_sequence_number += data.num_rows
        group_rows = _row_group_rows(rows, self._target)
        for start in range(0, rows.num_rows, group_rows):
            self._write_group(rows.slice(start, group_rows))

    def _write_group(self, chunk: pa.Table) -> None:
        """Encode one row group into the open file (opening one if needed); roll at the target size.
        The file is encoded into a spool on local disk (`data.spool`), not memory."""
        if self._file is None:
            name = new_data_file_name(self._prefix, self._uuid, self._counter, self._extension)
            self._counter += 1
            summary = FileSummary(self.schema.fields, self._key_names, self._has_pk, self._bounded)
            spool = spool_path(self.file_io, self.file_io.join(self.table_root, self.relative_dir, name))
            self._file = _OpenFile(name, new_encoder(self.schema, self.options, spool), summary)
        self._file.write(chunk)
        if self._file.encoder.size() >= self._target:
            self._finish_file()

    def _finish_file(self) -> None:
        current, self._file = self._file, None
        if current is None:
            return
        if current.rows == 0:
            current.encoder.discard()
            return
        payload = current.encoder.finish()
        path = self.file_io.join(self.table_root, self.relative_dir, current.name)
        self._paths.append(path)
        if self._uploads is not None:
            self._uploads.put(path, payload)
        else:
            store(self.file_io, path, payload)
        self._files.append(self._file_meta(current.name, payload_size(payload), current.summary))

    def _file_meta(self, name: str, size: int, summary: FileSummary) -> DataFileMeta:
        extremes, nulls = summary.extremes(), summary.null_counts
        stats, stats_cols = value_stats(extremes, self.schema, self.options, nulls)
        min_key = max_key = EMPTY_ROW
        key_stats = SimpleStats.empty()
        deletes = 0
        if self._has_pk:
            keys = key_fields(self.schema)
            key_types = [f.type for f in keys]
            min_key = serialize_row(summary.first_key or [], key_types)
            max_key = serialize_row(summary.last_key or [], key_types)
            key_stats = column_stats(extremes, keys, [FULL_STATS] * len(keys), nulls)
            deletes = summary.deletes
            min_sequence, max_sequence = summary.min_sequence, summary.max_sequence
        else:
            min_sequence = self.next_sequence_number
            max_sequence = min_sequence + summary.rows - 1
            self.next_sequence_number = max_sequence + 1
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=summary.rows,
            min_key=min_key,
            max_key=max_key,
            key_stats=key_stats,
            value_stats=stats,
            min_sequence_number=min_sequence,
            max_sequence_number=max_sequence,
            schema_id=self.schema.id,
            level=self._level,
            extra_files=[],
            creation_time=_creation_time(),
            delete_row_count=deletes,
            file_source=self._file_source,
            value_stats_cols=stats_cols,
        )


def _as_tables(batches: Iterable[pa.RecordBatch] | pa.Table | pa.RecordBatch) -> Iterator[pa.Table]:
    if isinstance(batches, pa.Table):
        yield batches
    elif isinstance(batches, pa.RecordBatch):
        yield pa.Table.from_batches([batches])
    else:
        for batch in batches:
            yield batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])


def write_bucket_files(
    file_io: FileIO,
    table_root: str,
    schema: TableSchema,
    partition_values: Sequence[Any],
    bucket: int,
    batches: Iterable[pa.RecordBatch] | pa.Table | pa.RecordBatch,
    first_sequence_number: int,
    options: CoreOptions | dict[str, str] | None = None,
) -> list[DataFileMeta]:
    """Write rows that all belong to one partition and bucket; returns the new files' metadata.

    The caller vouches that every row has these partition values and this bucket (use
    `split_by_partition_and_bucket` otherwise). On failure the files written so far are deleted.
    """
    core = options if isinstance(options, CoreOptions) else CoreOptions(options or schema.options)
    with Uploads(file_io) as uploads:
        writer = BucketWriter(
            file_io,
            table_root,
            schema,
            partition_values,
            bucket,
            first_sequence_number,
            core,
            uploads=uploads,
        )
        try:
            for table in _as_tables(batches):
                writer.write(conform(table, schema))
            files = writer.close()
            uploads.wait()
            return files
        except BaseException:
            writer.abort()
            raise


def write_table_files(
    file_io: FileIO,
    table_root: str,
    schema: TableSchema,
    data: pa.Table | pa.RecordBatch,
    first_sequence_number: int,
    bucket_column: str | None = None,
) -> list[tuple[bytes, int, list[DataFileMeta]]]:
    """Write an Arrow table into data files; returns (partition bytes, bucket, files) per bucket.

    Every bucket's sequence numbers start at `first_sequence_number`. `bucket_column` names an
    input column with precomputed bucket numbers (saves hashing the keys again). On failure all
    files written by this call are deleted.
    """
    outputs = write_bucket_outputs(
        file_io, table_root, schema, data, first_sequence_number, bucket_column, changelog=False
    )
    return [(out.partition, out.bucket, out.files) for out in outputs]


@dataclass
class BucketOutput:
    """What one partition and bucket of a write produced: data files, and changelog files."""

    partition: bytes
    bucket: int
    files: list[DataFileMeta]
    changelog_files: list[DataFileMeta]


def write_bucket_outputs(
    file_io: FileIO,
    table_root: str,
    schema: TableSchema,
    data: pa.Table | pa.RecordBatch,
    first_sequence_number: int,
    bucket_column: str | None = None,
    *,
    changelog: bool = True,
    file_uuids: Callable[[], str] | None = None,
) -> list[BucketOutput]:
    """`write_table_files`, plus the changelog files of `changelog-producer: input` tables.

    With `changelog` (the default here) a primary-key table whose changelog producer is `input`
    gets its input rows also written as changelog files (`changelog-` prefix, level 0, every row
    as it came, sorted by key then sequence number), which the caller commits as the snapshot's
    changelog (`CommitMessage.changelog_files`). Finished files upload in the background while the
    next bucket is encoded; this returns once every upload finished. On failure all files written
    by this call are deleted (after their uploads ended). `file_uuids`: the uuid part of each
    bucket writer's file names (`data-<uuid>-<n>`), a random uuid when None.
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    options = CoreOptions(schema.options)
    buckets = data.column(bucket_column) if bucket_column and bucket_column in data.column_names else None
    conformed = conform(data, schema)
    results: list[BucketOutput] = []
    writers: list[BucketWriter] = []
    with Uploads(file_io) as uploads:
        try:
            for part in split_by_partition_and_bucket(conformed, schema, options.bucket, buckets):
                writer = BucketWriter(
                    file_io,
                    table_root,
                    schema,
                    part.partition_values,
                    part.bucket,
                    first_sequence_number,
                    options,
                    changelog=changelog,
                    uploads=uploads,
                    file_uuids=file_uuids,
                )
                writers.append(writer)
                writer.write(part.data)
                files = writer.close()
                results.append(BucketOutput(part.partition, part.bucket, files, writer.changelog_files))
            uploads.wait()
        except BaseException:
            for writer in writers:
                writer.abort()
            raise
    return results
