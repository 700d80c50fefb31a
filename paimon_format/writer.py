"""Arrow data -> Paimon data files and their DataFileMeta (spec §4.5, §7).

Runs inside Spark executors (the write job feeds it Arrow batches) and in plain Python. Every
per-row step is vectorised with pyarrow compute; Python loops run over columns, files and
partitions only.

Primary-key files follow the LSM writer's invariants that readers rely on: rows sorted by key,
each key once per file (the last write wins), `_SEQUENCE_NUMBER` increasing from the bucket's
previous maximum, and exact `_MIN_KEY`/`_MAX_KEY`/`_DELETE_ROW_COUNT`.
"""

from __future__ import annotations

import datetime as dt
import io
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq

from paimon_format.binary_row import EMPTY_ROW, serialize_row
from paimon_format.bucket import bucket_array, bucket_key_columns
from paimon_format.errors import PaimonFormatError
from paimon_format.fileio import FileIO
from paimon_format.manifest import DataFileMeta, SimpleStats
from paimon_format.options import CoreOptions
from paimon_format.paths import bucket_dir, partition_dir
from paimon_format.schema import TableSchema
from paimon_format.types import DataField, DataType, to_arrow

KEY_PREFIX = "_KEY_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
KEY_FIELD_ID_OFFSET = 1073741823
SEQUENCE_NUMBER_ID = 2147483646
VALUE_KIND_ID = 2147483645
ROW_KIND_COLUMN = "_VALUE_KIND"  # optional input column: 0 +I, 1 -U, 2 +U, 3 -D
_STATS_TRUNCATE_DEFAULT = 16
_COMPRESSION_EXTENSIONS = {"zstd": "zst", "gzip": "gz", "snappy": "snappy", "lz4": "lz4", "none": ""}


class DataWriteError(PaimonFormatError, ValueError):
    """Input data that cannot become a data file of this table (wrong types, null keys, ...)."""


# -- schema of the files ------------------------------------------------------------------------


def _arrow_field(name: str, data_type: DataType, field_id: int) -> pa.Field:
    return pa.field(
        name,
        to_arrow(data_type),
        nullable=data_type.nullable,
        metadata={b"PARQUET:field_id": str(field_id).encode()},
    )


def table_arrow_schema(schema: TableSchema) -> pa.Schema:
    """The Arrow schema of the table's columns, carrying Paimon field ids for Parquet."""
    return pa.schema([_arrow_field(f.name, f.type, f.id) for f in schema.fields])


def key_fields(schema: TableSchema) -> list[DataField]:
    """The trimmed primary key: primary-key columns that are not partition columns."""
    return [schema.field(name) for name in schema.trimmed_primary_keys()]


def file_arrow_schema(schema: TableSchema) -> pa.Schema:
    """Columns of a data file: the table's, preceded by the key/system columns for primary-key tables."""
    columns = table_arrow_schema(schema)
    if not schema.primary_keys:
        return columns
    system = [
        _arrow_field(KEY_PREFIX + f.name, f.type.with_nullable(False), f.id + KEY_FIELD_ID_OFFSET)
        for f in key_fields(schema)
    ]
    system.append(_arrow_field(SEQUENCE_NUMBER, DataType("BIGINT", False), SEQUENCE_NUMBER_ID))
    system.append(_arrow_field(VALUE_KIND, DataType("TINYINT", False), VALUE_KIND_ID))
    return pa.schema(system + list(columns))


def conform(data: pa.Table, schema: TableSchema) -> pa.Table:
    """Select and cast the table's columns; name the column that does not fit."""
    target = table_arrow_schema(schema)
    missing = [name for name in target.names if name not in data.column_names]
    if missing:
        raise DataWriteError(f"input has no column(s) {', '.join(missing)} of the table")
    arrays = []
    for target_field in target:
        column = data.column(target_field.name)
        if not column.type.equals(target_field.type):
            try:
                column = column.cast(target_field.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise DataWriteError(
                    f"column {target_field.name}: cannot store {column.type} values "
                    f"as {target_field.type}: {error}"
                ) from None
        if not target_field.nullable and column.null_count:
            raise DataWriteError(
                f"column {target_field.name} is NOT NULL but has {column.null_count} null value(s)"
            )
        arrays.append(column)
    extra = [c for c in data.column_names if c == ROW_KIND_COLUMN]
    result = pa.Table.from_arrays(arrays, schema=target)
    if extra:
        result = result.append_column(ROW_KIND_COLUMN, data.column(ROW_KIND_COLUMN).cast(pa.int8()))
    return result


# -- splitting input by partition and bucket ------------------------------------------------------


def _run_boundaries(data: pa.Table, columns: Sequence[str]) -> list[int]:
    """Start offsets of runs of equal values in `columns` (data must be sorted by them)."""
    n = data.num_rows
    if n == 0:
        return []
    if not columns or n == 1:
        return [0]
    change = np.zeros(n - 1, dtype=bool)
    for name in columns:
        column = data.column(name)
        left, right = column.slice(0, n - 1), column.slice(1)
        differs = pc.fill_null(pc.not_equal(left, right), False)
        nulls_differ = pc.xor(pc.is_null(left), pc.is_null(right))
        change |= pc.or_(differs, nulls_differ).to_numpy(zero_copy_only=False)
    return [0] + (np.nonzero(change)[0] + 1).tolist()


@dataclass(frozen=True)
class BucketSlice:
    """The rows of one partition and bucket."""

    partition_values: list[Any]
    partition: bytes
    bucket: int
    data: pa.Table


def split_by_partition_and_bucket(data: pa.Table, schema: TableSchema) -> Iterator[BucketSlice]:
    """Group rows by partition and bucket (stable: input order is kept inside a group)."""
    options = CoreOptions(schema.options)
    num_buckets = options.bucket
    partition_keys = list(schema.partition_keys)
    partition_types = schema.partition_types()
    if num_buckets > 0:
        keys = bucket_key_columns(schema)
        key_types = [schema.field(k).type for k in keys]
        buckets = bucket_array([data.column(k).combine_chunks() for k in keys], key_types, num_buckets)
    elif num_buckets == -1 and not schema.primary_keys:
        buckets = np.zeros(data.num_rows, dtype=np.int32)
    else:
        raise DataWriteError(
            f"bucket={num_buckets} is not supported by this writer yet: use a fixed bucket count for "
            "primary-key tables, or bucket=-1 for append tables"
        )
    data = data.append_column("__bucket", pa.array(buckets, pa.int32()))
    data = data.append_column("__order", pa.array(np.arange(data.num_rows, dtype=np.int64)))
    group_columns = partition_keys + ["__bucket"]
    order = pc.sort_indices(
        data, [(c, "ascending") for c in group_columns + ["__order"]], null_placement="at_end"
    )
    data = data.take(order)
    starts = _run_boundaries(data, group_columns)
    for index, start in enumerate(starts):
        end = starts[index + 1] if index + 1 < len(starts) else data.num_rows
        part = data.slice(start, end - start)
        values = [part.column(k)[0].as_py() for k in partition_keys]
        bucket = part.column("__bucket")[0].as_py()
        yield BucketSlice(
            values, serialize_row(values, partition_types), bucket, part.drop_columns(["__bucket", "__order"])
        )


# -- statistics -----------------------------------------------------------------------------------


def _stats_mode(options: CoreOptions, name: str) -> tuple[str, int | None]:
    text = options.get(f"fields.{name}.stats-mode") or options.get("metadata.stats-mode") or "truncate(16)"
    text = text.strip().lower()
    if text.startswith("truncate(") and text.endswith(")"):
        return "truncate", int(text[len("truncate(") : -1])
    if text in ("none", "counts", "full"):
        return text, None
    raise DataWriteError(f"unsupported metadata.stats-mode {text!r}")


def _truncate_min(value: Any, length: int) -> Any:
    return value[:length] if isinstance(value, (str, bytes)) else value


def _truncate_max(value: Any, length: int) -> Any:
    """A value >= every value with this prefix, or None when none fits in `length`."""
    if not isinstance(value, (str, bytes)) or len(value) <= length:
        return value
    prefix = value[:length]
    if isinstance(prefix, str):
        for i in range(len(prefix) - 1, -1, -1):
            code = ord(prefix[i])
            if code < 0x10FFFF and not (0xD7FF <= code < 0xDFFF):
                return prefix[:i] + chr(code + 1)
        return None
    for i in range(len(prefix) - 1, -1, -1):
        if prefix[i] < 0xFF:
            return prefix[:i] + bytes([prefix[i] + 1])
    return None


def _has_min_max(data_type: DataType) -> bool:
    if data_type.root in ("ARRAY", "MAP", "MULTISET", "ROW", "VARIANT", "BLOB", "VECTOR"):
        return False
    # Python datetimes hold microseconds: a nanosecond max would be rounded below the real max.
    return not (data_type.root in ("TIMESTAMP", "TIMESTAMP_LTZ", "TIME") and (data_type.precision or 0) > 6)


def column_stats(
    data: pa.Table, fields: Sequence[DataField], options: CoreOptions, truncate: bool = True
) -> SimpleStats:
    """Min, max and null count of each field's column, as Paimon's SimpleStats."""
    minimums: list[Any] = []
    maximums: list[Any] = []
    nulls: list[int | None] = []
    for f in fields:
        column = data.column(f.name)
        mode, length = _stats_mode(options, f.name) if truncate else ("full", None)
        nulls.append(None if mode == "none" else column.null_count)
        low = high = None
        if mode in ("full", "truncate") and _has_min_max(f.type) and column.null_count < len(column):
            extremes = pc.min_max(column)
            low, high = extremes["min"].as_py(), extremes["max"].as_py()
            if isinstance(low, float) and (low != low or high != high):  # NaN: no usable bounds
                low = high = None
            if mode == "truncate" and length is not None:
                low, high = _truncate_min(low, length), _truncate_max(high, length)
                if high is None:
                    low = None
        minimums.append(low)
        maximums.append(high)
    types = [f.type for f in fields]
    return SimpleStats(serialize_row(minimums, types), serialize_row(maximums, types), nulls)


# -- primary-key rows -------------------------------------------------------------------------------


def prepare_primary_key_rows(data: pa.Table, schema: TableSchema, first_sequence_number: int) -> pa.Table:
    """Assign sequence numbers in input order, keep the last row per key, sort by key, add system columns."""
    keys = [f.name for f in key_fields(schema)]
    n = data.num_rows
    sequence = pa.array(np.arange(first_sequence_number, first_sequence_number + n, dtype=np.int64))
    data = data.append_column(SEQUENCE_NUMBER, sequence)
    sequence_field = CoreOptions(schema.options).get("sequence.field")
    order_columns = (
        keys + ([c.strip() for c in sequence_field.split(",")] if sequence_field else []) + [SEQUENCE_NUMBER]
    )
    data = data.take(pc.sort_indices(data, [(c, "ascending") for c in order_columns]))
    if n > 1:
        starts = _run_boundaries(data, keys)
        last_of_key = np.array(starts[1:] + [n], dtype=np.int64) - 1
        data = data.take(pa.array(last_of_key))
    if ROW_KIND_COLUMN in data.column_names:
        kinds = data.column(ROW_KIND_COLUMN)
        data = data.drop_columns([ROW_KIND_COLUMN])
    else:
        kinds = pa.array(np.zeros(data.num_rows, dtype=np.int8))
    file_schema = file_arrow_schema(schema)
    columns = [data.column(k) for k in keys] + [data.column(SEQUENCE_NUMBER), kinds]
    columns += [data.column(f.name) for f in schema.fields]
    return pa.Table.from_arrays(columns, schema=file_schema)


# -- writing files ----------------------------------------------------------------------------------


def _extension(options: CoreOptions) -> str:
    file_format = options.file_format
    if options.get("file.suffix.include.compression", "false").lower() == "true":
        suffix = _COMPRESSION_EXTENSIONS.get(options.file_compression.lower(), options.file_compression)
        if suffix:
            return f".{suffix}.{file_format}"
    return f".{file_format}"


def encode_file(data: pa.Table, options: CoreOptions) -> bytes:
    """One data file's bytes in the table's `file.format` and `file.compression`."""
    file_format = options.file_format
    compression = options.file_compression.lower()
    buffer = io.BytesIO()
    if file_format == "parquet":
        int96 = any(pa.types.is_timestamp(f.type) and f.type.unit == "ns" for f in data.schema)
        level = options.get("file.compression.zstd-level")
        pq.write_table(
            data,
            buffer,
            compression="none" if compression == "none" else compression,
            compression_level=int(level) if level and compression == "zstd" else None,
            use_deprecated_int96_timestamps=int96,
            store_schema=False,
        )
    elif file_format == "orc":
        orc.write_table(data, buffer, compression="uncompressed" if compression == "none" else compression)
    elif file_format == "avro":
        from paimon_format.avro_data import write_avro_data_file

        write_avro_data_file(buffer, data, compression)
    else:
        raise DataWriteError(f"unsupported file.format {file_format!r} (parquet, orc or avro)")
    return buffer.getvalue()


@dataclass
class BucketWriter:
    """Writes the files of one partition and bucket, rolling at `target-file-size`.

    Feed it tables with `write`; `close` flushes and returns the DataFileMeta of every file.
    Append rows are written as they come; primary-key rows are buffered per bucket because
    deduplication needs them together.
    """

    file_io: FileIO
    table_root: str
    schema: TableSchema
    partition_values: list[Any]
    bucket: int
    first_sequence_number: int
    options: CoreOptions = field(init=False)
    _pending: list[pa.Table] = field(default_factory=list, init=False)
    _pending_bytes: int = field(default=0, init=False)
    _next_sequence: int = field(init=False)
    _files: list[DataFileMeta] = field(default_factory=list, init=False)
    _uuid: str = field(default_factory=lambda: str(uuid.uuid4()), init=False)
    _counter: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.options = CoreOptions(self.schema.options)
        self._next_sequence = self.first_sequence_number
        self._has_pk = bool(self.schema.primary_keys)
        self._target = self.options.target_file_size(self._has_pk)
        relative = bucket_dir(
            partition_dir(
                self.partition_values,
                self.schema.partition_keys,
                self.schema.partition_types(),
                self.options.partition_default_name,
                self.options.partition_legacy_name,
            )
            if self.schema.partition_keys
            else "",
            self.bucket,
        )
        prefix = self.options.data_file_path_directory
        self.relative_dir = f"{prefix}/{relative}" if prefix else relative

    def write(self, data: pa.Table) -> None:
        if data.num_rows == 0:
            return
        self._pending.append(data)
        self._pending_bytes += data.nbytes
        if not self._has_pk and self._pending_bytes >= self._target:
            self._flush_append()

    def close(self) -> list[DataFileMeta]:
        if self._has_pk:
            self._flush_primary_key()
        else:
            self._flush_append()
        return self._files

    def _flush_append(self) -> None:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending)
        self._pending, self._pending_bytes = [], 0
        for chunk in _chunks(data, self._target):
            self._write_file(
                chunk, chunk, self._next_sequence, self._next_sequence + chunk.num_rows - 1, None
            )
            self._next_sequence += chunk.num_rows

    def _flush_primary_key(self) -> None:
        if not self._pending:
            return
        data = pa.concat_tables(self._pending)
        self._pending, self._pending_bytes = [], 0
        rows = prepare_primary_key_rows(data, self.schema, self._next_sequence)
        self._next_sequence += data.num_rows
        for chunk in _chunks(rows, self._target):
            sequences = chunk.column(SEQUENCE_NUMBER)
            extremes = pc.min_max(sequences)
            self._write_file(chunk, chunk, extremes["min"].as_py(), extremes["max"].as_py(), chunk)

    def _write_file(
        self, file_data: pa.Table, values: pa.Table, min_seq: int, max_seq: int, keyed: pa.Table | None
    ) -> None:
        payload = encode_file(file_data, self.options)
        name = f"{self.options.data_file_prefix}{self._uuid}-{self._counter}{_extension(self.options)}"
        self._counter += 1
        self.file_io.write_bytes(self.file_io.join(self.table_root, self.relative_dir, name), payload)
        min_key = max_key = EMPTY_ROW
        key_stats = SimpleStats.empty()
        delete_rows = 0
        if keyed is not None:
            keys = key_fields(self.schema)
            key_types = [f.type for f in keys]
            first = [keyed.column(f.name)[0].as_py() for f in keys]
            last = [keyed.column(f.name)[keyed.num_rows - 1].as_py() for f in keys]
            min_key, max_key = serialize_row(first, key_types), serialize_row(last, key_types)
            key_stats = column_stats(keyed, keys, self.options, truncate=False)
            kinds = keyed.column(VALUE_KIND)
            delete_rows = int(pc.sum(pc.is_in(kinds, pa.array([1, 3], pa.int8()))).as_py() or 0)
        self._files.append(
            DataFileMeta(
                file_name=name,
                file_size=len(payload),
                row_count=file_data.num_rows,
                min_key=min_key,
                max_key=max_key,
                key_stats=key_stats,
                value_stats=column_stats(values, self.schema.fields, self.options),
                min_sequence_number=min_seq,
                max_sequence_number=max_seq,
                schema_id=self.schema.id,
                level=0,
                extra_files=[],
                creation_time=dt.datetime.now().replace(
                    microsecond=dt.datetime.now().microsecond // 1000 * 1000
                ),
                delete_row_count=delete_rows,
                file_source=0,
                value_stats_cols=None,
            )
        )


def _chunks(data: pa.Table, target_bytes: int) -> Iterator[pa.Table]:
    """Row slices of about `target_bytes` of in-memory size (files come out smaller once compressed)."""
    if data.num_rows == 0:
        return
    per_row = max(data.nbytes / data.num_rows, 1)
    rows_per_file = max(int(target_bytes / per_row), 1)
    for start in range(0, data.num_rows, rows_per_file):
        yield data.slice(start, rows_per_file)


def write_table_files(
    file_io: FileIO, table_root: str, schema: TableSchema, data: pa.Table, first_sequence_number: int
) -> list[tuple[bytes, int, list[DataFileMeta]]]:
    """Write an Arrow table into data files; returns (partition bytes, bucket, files) per bucket written."""
    conformed = conform(data, schema)
    results = []
    for part in split_by_partition_and_bucket(conformed, schema):
        writer = BucketWriter(
            file_io, table_root, schema, part.partition_values, part.bucket, first_sequence_number
        )
        writer.write(part.data)
        results.append((part.partition, part.bucket, writer.close()))
    return results
