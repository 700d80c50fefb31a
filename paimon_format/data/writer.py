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
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.data.bucket import bucket_array, bucket_key_columns
from paimon_format.data.encoders import (  # noqa: F401 - re-exported: callers import them from here
    AvroEncoder,
    FileEncoder,
    OrcEncoder,
    ParquetEncoder,
    avro_schema,
    data_file_extension,
    encode_file,
    new_encoder,
)
from paimon_format.data.stats import (  # noqa: F401 - re-exported: callers import them from here
    FULL_STATS,
    StatsMode,
    column_stats,
    parse_stats_mode,
    stats_modes,
    truncate_max,
    truncate_min,
    value_stats,
)
from paimon_format.errors import DataWriteError, UnsupportedOperationError
from paimon_format.manifest.entries import DataFileMeta, SimpleStats
from paimon_format.model.binary_row import EMPTY_ROW, serialize_row
from paimon_format.model.file_layout import (  # noqa: F401 - re-exported: callers import them from here
    FIELD_ID_KEY,
    KEY_FIELD_ID_OFFSET,
    KEY_PREFIX,
    SEQUENCE_NUMBER,
    SEQUENCE_NUMBER_ID,
    VALUE_KIND,
    VALUE_KIND_ID,
    arrow_field,
    file_arrow_schema,
    file_arrow_type,
    file_fields,
    key_fields,
    table_arrow_schema,
)
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import MAX_LENGTH
from paimon_format.storage.fileio import FileIO
from paimon_format.storage.paths import bucket_dir, new_data_file_name, partition_dir

ROW_KIND_COLUMN = "_VALUE_KIND"
"""Optional input column with each row's kind (0 +I, 1 -U, 2 +U, 3 -D, or those strings)."""
ROW_KIND_INPUT_COLUMNS = (ROW_KIND_COLUMN, "__row_kind")
ROW_KINDS = ("+I", "-U", "+U", "-D")
RETRACT_KINDS = (1, 3)

_MAX_ROW_GROUP_BYTES = 128 * 1024 * 1024  # Java's parquet.block.size
_MAX_ROW_GROUP_ROWS = 1024 * 1024


# -- input -> the table's column types ---------------------------------------------------------------


def _cast_column(column: pa.ChunkedArray, target: pa.Field) -> pa.ChunkedArray:
    """Cast to the stored type; sub-unit time parts are dropped like Java's writers drop them."""
    if column.type.equals(target.type):
        return column
    try:
        options = pc.CastOptions(target.type, allow_time_truncate=True)
        return pc.cast(column, options=options)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise DataWriteError(
            f"column {target.name}: cannot store {column.type} values as {target.type}: {error}"
        ) from None


def _row_kinds(data: pa.Table, schema: TableSchema) -> pa.Array | None:
    """The optional row-kind input column as int8 codes; None when absent (all rows are +I)."""
    table_columns = set(schema.field_names())
    name = next(
        (c for c in ROW_KIND_INPUT_COLUMNS if c in data.column_names and c not in table_columns), None
    )
    if name is None:
        return None
    column = data.column(name)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        codes = pc.index_in(column.cast(pa.string()), value_set=pa.array(ROW_KINDS))
        if codes.null_count > column.null_count:
            raise DataWriteError(f"column {name}: row kinds must be one of {', '.join(ROW_KINDS)}")
        column = codes
    try:
        kinds = column.cast(pa.int8())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise DataWriteError(f"column {name}: not a row kind column ({error})") from None
    if kinds.null_count:
        raise DataWriteError(f"column {name}: row kind is null in {kinds.null_count} row(s)")
    extremes = pc.min_max(kinds)
    low, high = extremes["min"].as_py(), extremes["max"].as_py()
    if low is not None and (low < 0 or high > 3):
        raise DataWriteError(f"column {name}: row kinds are 0..3 (+I, -U, +U, -D), got {low}..{high}")
    if not schema.primary_keys:
        if high:
            raise DataWriteError(f"column {name}: an append table (no primary key) takes only +I rows")
        return None
    return kinds.combine_chunks() if isinstance(kinds, pa.ChunkedArray) else kinds


def conform(data: pa.Table | pa.RecordBatch, schema: TableSchema) -> pa.Table:
    """The table's columns in table order and stored types, plus the row-kind column if given.

    Extra input columns are ignored. A value that does not fit its column raises
    `DataWriteError` naming the column, as does a null in a NOT NULL column.
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    target = table_arrow_schema(schema)
    missing = [name for name in target.names if name not in data.column_names]
    if missing:
        raise DataWriteError(f"input has no column(s) {', '.join(missing)} of the table")
    arrays = []
    for target_field in target:
        column = _cast_column(data.column(target_field.name), target_field)
        if not target_field.nullable and column.null_count:
            raise DataWriteError(
                f"column {target_field.name} is NOT NULL but has {column.null_count} null value(s)"
            )
        arrays.append(column)
    result = pa.Table.from_arrays(arrays, schema=target)
    kinds = _row_kinds(data, schema)
    if kinds is not None:
        result = result.append_column(pa.field(ROW_KIND_COLUMN, pa.int8(), nullable=False), kinds)
    return result


def fit_string_lengths(data: pa.Table, schema: TableSchema) -> pa.Table:
    """CHAR(n) / VARCHAR(n) columns checked against n, CHAR values padded with spaces to n.

    For input that comes as unbounded strings (Spark has no CHAR or VARCHAR(n) values): a value
    longer than its column raises `DataWriteError` naming the column, as Spark's own write-side
    check does; CHAR values are padded as Spark pads them. Other columns pass unchanged.
    """
    for field in schema.fields:
        data_type = field.type
        if data_type.root not in ("CHAR", "VARCHAR") or (data_type.length or MAX_LENGTH) >= MAX_LENGTH:
            continue
        column = data.column(field.name)
        longest = pc.max(pc.utf8_length(column)).as_py()
        if longest is not None and longest > data_type.length:
            raise DataWriteError(
                f"column {field.name}: a value of {longest} characters does not fit {data_type.sql()}"
            )
        if data_type.root == "CHAR":
            padded = pc.utf8_rpad(column, width=data_type.length, padding=" ")
            index = data.schema.get_field_index(field.name)
            data = data.set_column(index, data.schema.field(index), padded)
    return data


# -- splitting input by partition and bucket ----------------------------------------------------------


class BucketSlice(NamedTuple):
    """The rows of one partition and bucket (unpacks as the tuple the write path passes around)."""

    partition_values: list[Any]
    partition: bytes
    bucket: int
    data: pa.Table


def _dense_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, int]:
    """Per row, the index of its value among the column's distinct values (nulls are a value)."""
    distinct = pc.unique(column)
    codes = pc.index_in(column, value_set=distinct, skip_nulls=False)
    return codes.to_numpy(zero_copy_only=False).astype(np.int64, copy=False), len(distinct)


def _group_codes(
    data: pa.Table, columns: Sequence[str], extra: np.ndarray | None, extra_size: int
) -> tuple[np.ndarray, int]:
    """Per row an int64 that is equal exactly for rows with equal values in `columns` (+ `extra`),
    and the bound all codes are below."""
    codes = np.zeros(data.num_rows, dtype=np.int64)
    parts: list[tuple[np.ndarray, int]] = [_dense_codes(data.column(name)) for name in columns]
    if extra is not None:
        parts.append((extra.astype(np.int64, copy=False), max(extra_size, 1)))
    span = 1
    for part, size in parts:
        if span * size >= 2**62:  # keep the mixed-radix number in int64: renumber densely first
            _, codes = np.unique(codes, return_inverse=True)
            codes = codes.astype(np.int64, copy=False)
            span = int(codes.max()) + 1 if len(codes) else 1
        codes = codes * size + part
        span *= size
    return codes, span


def _stable_order(codes: np.ndarray, span: int) -> np.ndarray:
    """Stable argsort; numpy radix-sorts 16-bit keys, ten times faster than sorting int64."""
    if span <= 2**16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    return np.argsort(codes, kind="stable")


def check_bucket_mode(schema: TableSchema, num_buckets: int) -> None:
    """Fixed buckets, or bucket-unaware append tables: the layouts this writer can produce.

    Dynamic-bucket (-1) primary-key tables need a hash index, postpone (-2) tables a later
    compaction; writing them like fixed-bucket tables would put one key in several buckets.
    """
    if num_buckets > 0 or (num_buckets == -1 and not schema.primary_keys):
        return
    raise UnsupportedOperationError(
        f"bucket={num_buckets} is not supported by this writer: use a fixed bucket count for "
        "primary-key tables, or bucket=-1 for append tables"
    )


def _buckets_of(data: pa.Table, schema: TableSchema, num_buckets: int) -> np.ndarray:
    if num_buckets <= 0:
        return np.zeros(data.num_rows, dtype=np.int32)
    keys = bucket_key_columns(schema)
    if not keys:
        raise DataWriteError(f"bucket={num_buckets} needs a primary key or the bucket-key option")
    key_types = [schema.field(k).type for k in keys]
    return bucket_array([data.column(k) for k in keys], key_types, num_buckets)


def split_by_partition_and_bucket(
    data: pa.Table,
    schema: TableSchema,
    num_buckets: int | None = None,
    buckets: np.ndarray | pa.Array | pa.ChunkedArray | None = None,
) -> Iterator[BucketSlice]:
    """Group rows by partition and bucket, keeping input order inside each group.

    `num_buckets` defaults to the table's `bucket` option; `buckets` may carry precomputed bucket
    numbers (the write job computes them before its shuffle). Input that is already grouped --
    the write job sorts by partition -- is sliced without copying. Dynamic-bucket primary-key
    tables (bucket -1) take only precomputed buckets (assigned from the table's hash index,
    `hash_index.PartitionAssigner`).
    """
    if num_buckets is None:
        num_buckets = CoreOptions(schema.options).bucket
    if not (buckets is not None and num_buckets == -1 and schema.primary_keys):
        check_bucket_mode(schema, num_buckets)
    if data.num_rows == 0:
        return
    if buckets is None:
        bucket_numbers = _buckets_of(data, schema, num_buckets)
    elif isinstance(buckets, np.ndarray):
        bucket_numbers = buckets
    else:
        bucket_numbers = buckets.to_numpy(zero_copy_only=False)
    bucket_numbers = np.asarray(bucket_numbers, dtype=np.int64)
    if len(bucket_numbers) != data.num_rows:
        raise DataWriteError(f"{len(bucket_numbers)} bucket numbers for {data.num_rows} rows")
    partition_keys = list(schema.partition_keys)
    bucket_span = int(bucket_numbers.max()) + 1 if bucket_numbers.min() >= 0 else 0
    if bucket_span == 0:
        raise DataWriteError("bucket numbers must not be negative")
    codes, span = _group_codes(data, partition_keys, bucket_numbers, bucket_span)
    if len(codes) > 1 and not bool(np.all(codes[1:] >= codes[:-1])):
        # one gather of the whole table: ~2x faster than a gather per group (memory: one copy)
        order = _stable_order(codes, span)
        data, codes, bucket_numbers = data.take(pa.array(order)), codes[order], bucket_numbers[order]
    starts = np.concatenate(([0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [data.num_rows]))
    partition_types = schema.partition_types()
    for start, end in zip(starts[:-1].tolist(), starts[1:].tolist(), strict=True):
        part = data.slice(start, end - start)
        values = [part.column(k)[0].as_py() for k in partition_keys]
        yield BucketSlice(values, serialize_row(values, partition_types), int(bucket_numbers[start]), part)


# -- primary-key rows ---------------------------------------------------------------------------------


def prepare_primary_key_rows(
    data: pa.Table, schema: TableSchema, first_sequence_number: int, options: CoreOptions | None = None
) -> pa.Table:
    """One bucket's rows as a primary-key data file: merged per key, key-sorted, with system columns.

    Sequence numbers are given in input order (as Java's writer does on arrival); rows of a key
    that occurs more than once are merged by the table's merge engine (`merge.merge_rows`), as
    Java's write buffer merges them before flushing: the last write (by `sequence.field`, then
    sequence number) for deduplicate, the first for first-row, a merged row for partial-update
    and aggregation. Retraction results are kept (a level-0 file must carry its deletes).
    """
    from paimon_format.merge.sorted_runs import merge_rows  # merge imports this module's layout helpers

    options = options or CoreOptions(schema.options)
    rows = primary_key_input_rows(data, schema, first_sequence_number, options)
    return merge_rows(rows, schema, options, drop_deletes=False)


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
    from paimon_format.merge.sorted_runs import key_column_names

    keys = [(name, "ascending") for name in key_column_names(schema, options)]
    keys.append((SEQUENCE_NUMBER, "ascending"))
    order = pc.sort_indices(rows, sort_keys=keys, null_placement="at_start")
    return rows.take(order)


# -- encoding one file --------------------------------------------------------------------------------


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
    """A data file being encoded; its row groups are kept (zero-copy) for the stats at the end."""

    def __init__(self, name: str, encoder: FileEncoder) -> None:
        self.name = name
        self.encoder = encoder
        self.chunks: list[pa.Table] = []
        self.rows = 0

    def write(self, chunk: pa.Table) -> None:
        self.encoder.write(chunk)
        self.chunks.append(chunk)
        self.rows += chunk.num_rows


class BucketWriter:
    """Writes the data files of one partition and bucket, rolling at `target-file-size`.

    Feed it conformed tables (`conform`) with `write`; `close` flushes and returns the
    DataFileMeta of every file written. Append rows are encoded as they come; primary-key rows
    are buffered for the bucket because deduplication needs them together. `abort` deletes the
    files written so far.
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
    ) -> None:
        self.file_io = file_io
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
        self._uuid = str(uuid.uuid4())
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
        """Delete the files this writer stored (after a failure, before anything commits them)."""
        if self._changelog is not None:
            self._changelog.abort()
        self.changelog_files = []
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
        from paimon_format.merge.sorted_runs import merge_rows  # merge imports this module's layout helpers

        raw = primary_key_input_rows(data, self.schema, self.next_sequence_number, self.options)
        if self._changelog is not None:
            self._changelog.write_key_values(changelog_order(raw, self.schema, self.options))
        rows = merge_rows(raw, self.schema, self.options, drop_deletes=False)
        self.next_sequence_number += data.num_rows
        group_rows = _row_group_rows(rows, self._target)
        for start in range(0, rows.num_rows, group_rows):
            self._write_group(rows.slice(start, group_rows))

    def _write_group(self, chunk: pa.Table) -> None:
        """Encode one row group into the open file (opening one if needed); roll at the target size."""
        if self._file is None:
            name = new_data_file_name(self._prefix, self._uuid, self._counter, self._extension)
            self._counter += 1
            self._file = _OpenFile(name, new_encoder(self.schema, self.options))
        self._file.write(chunk)
        if self._file.encoder.size() >= self._target:
            self._finish_file()

    def _finish_file(self) -> None:
        current, self._file = self._file, None
        if current is None or current.rows == 0:
            return
        payload = current.encoder.finish()
        path = self.file_io.join(self.table_root, self.relative_dir, current.name)
        self._paths.append(path)
        self.file_io.write_bytes(path, payload)
        data = pa.concat_tables(current.chunks)
        self._files.append(self._file_meta(current.name, len(payload), data))

    def _file_meta(self, name: str, size: int, data: pa.Table) -> DataFileMeta:
        stats, stats_cols = value_stats(data, self.schema, self.options)
        min_key = max_key = EMPTY_ROW
        key_stats = SimpleStats.empty()
        deletes = 0
        if self._has_pk:
            keys = key_fields(self.schema)
            key_types = [f.type for f in keys]
            first, last = data.slice(0, 1), data.slice(data.num_rows - 1, 1)
            min_key = serialize_row([first.column(f.name)[0].as_py() for f in keys], key_types)
            max_key = serialize_row([last.column(f.name)[0].as_py() for f in keys], key_types)
            key_stats = column_stats(data, keys, [FULL_STATS] * len(keys))
            kinds = data.column(VALUE_KIND).to_numpy()
            deletes = int(np.count_nonzero(np.isin(kinds, RETRACT_KINDS)))
            extremes = pc.min_max(data.column(SEQUENCE_NUMBER))
            min_sequence, max_sequence = extremes["min"].as_py(), extremes["max"].as_py()
        else:
            min_sequence = self.next_sequence_number
            max_sequence = min_sequence + data.num_rows - 1
            self.next_sequence_number = max_sequence + 1
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=data.num_rows,
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
    writer = BucketWriter(file_io, table_root, schema, partition_values, bucket, first_sequence_number, core)
    try:
        for table in _as_tables(batches):
            writer.write(conform(table, schema))
        return writer.close()
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
) -> list[BucketOutput]:
    """`write_table_files`, plus the changelog files of `changelog-producer: input` tables.

    With `changelog` (the default here) a primary-key table whose changelog producer is `input`
    gets its input rows also written as changelog files (`changelog-` prefix, level 0, every row
    as it came, sorted by key then sequence number), which the caller commits as the snapshot's
    changelog (`CommitMessage.changelog_files`). On failure all files written by this call are
    deleted.
    """
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    options = CoreOptions(schema.options)
    buckets = data.column(bucket_column) if bucket_column and bucket_column in data.column_names else None
    conformed = conform(data, schema)
    results: list[BucketOutput] = []
    writers: list[BucketWriter] = []
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
            )
            writers.append(writer)
            writer.write(part.data)
            files = writer.close()
            results.append(BucketOutput(part.partition, part.bucket, files, writer.changelog_files))
    except BaseException:
        for writer in writers:
            writer.abort()
        raise
    return results
