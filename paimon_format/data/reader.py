"""One data file -> Arrow batches in a reader's schema (spec §1, §7): no Spark, no merging.

Every read of table data goes through `read_data_file`: the merge-on-read of a split, compaction,
and the Spark read job. It streams (Parquet row-group batches, ORC stripes, Avro record blocks), so
memory stays at about one batch per open file however big the file is.

Why columns are matched by field id: a file is written under the schema of its `_SCHEMA_ID`, and
the table may have evolved since. Paimon resolves columns as Java's `FormatReaderMapping` does:
each column of the reader's schema is looked up by field id in the file's own schema (so a renamed
column is found under its old name), columns added later read as nulls, widened types are cast,
and dropped columns are simply not read.

Primary-key files carry `_KEY_<k>`, `_SEQUENCE_NUMBER` and `_VALUE_KIND` before the table columns;
with `data-file.thin-mode` the `_KEY_` columns are absent and the key is the value columns. With
`system_columns=True` the output always has the full key-value layout, so the merge code sees one
layout whatever the writer's mode.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq

from paimon_format.data.prefetch import AHEAD_BYTES, Prefetch
from paimon_format.errors import (
    CorruptFileError,
    MissingDependencyError,
    MissingFileError,
    PaimonFormatError,
    UnsupportedOperationError,
    missing_codec_library,
)
from paimon_format.manifest.entries import DataFileMeta
from paimon_format.model.file_layout import (
    KEY_PREFIX,
    SEQUENCE_NUMBER,
    VALUE_KIND,
    file_arrow_schema,
    file_arrow_type,
    file_fields,
    key_fields,
    table_arrow_schema,
)
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataType
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyroaring import BitMap

FORMATS = ("parquet", "orc", "avro")
DEFAULT_BATCH_ROWS = 8192

# A Parquet column chunk is read through a buffer of this size, not whole: a primary-key merge keeps
# a file of every sorted run open at once, and whole column chunks (up to a row group of 128 MB
# each) made a task's memory follow the size of the files. Measured on 20 open files of 500,000
# rows (6.3 MB each, one row group): whole chunks +277 MiB resident, a 64 KiB buffer +173 MiB
# (what is left is each column's current page, decompressed, and the string dictionaries).
PARQUET_READ_BUFFER = 64 << 10


def data_file_path(table: Table, partition: bytes, bucket: int, meta: DataFileMeta) -> str:
    """Full path of a data file: its `_EXTERNAL_PATH` when set, else `<table>/<partition>/bucket-N/<name>`
    (`data-file.path-directory` honoured, partition directory as Paimon computes it)."""
    if meta.external_path:
        return meta.external_path
    return table.file_io.join(table.path, table.bucket_relpath(partition, bucket), meta.file_name)


def prefetch_data_files(
    table: Table, files: Iterable[tuple[bytes, int, DataFileMeta]], max_bytes: int = AHEAD_BYTES
) -> Prefetch:
    """A `Prefetch` of these (partition, bucket, file) in the order a task will read them, for
    `read_data_file(prefetch=...)`: the next files are fetched while one decodes (see `prefetch`)."""
    return Prefetch(
        table.file_io,
        ((data_file_path(table, part, bucket, meta), meta.file_size) for part, bucket, meta in files),
        max_bytes=max_bytes,
    )


def file_format_of(file_name: str) -> str:
    """The format named by a data file's extension (`data-<uuid>-0.parquet`, `...-0.zst.orc`)."""
    extension = posixpath.splitext(file_name)[1].lstrip(".").lower()
    if extension not in FORMATS:
        raise UnsupportedOperationError(
            f"{file_name}: unknown data file format {extension!r} (expected one of {', '.join(FORMATS)})"
        )
    return extension


def key_value_arrow_schema(schema: TableSchema) -> pa.Schema:
    """The full key-value layout of a primary-key table (`_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`,
    then the columns), whatever `data-file.thin-mode` says: what `system_columns=True` yields."""
    options = dict(schema.options)
    options["data-file.thin-mode"] = "false"
    return file_arrow_schema(schema, CoreOptions(options))


def output_arrow_schema(schema: TableSchema, system_columns: bool = False) -> pa.Schema:
    """What `read_data_file` yields for this read schema."""
    if system_columns and schema.primary_keys:
        return key_value_arrow_schema(schema)
    return table_arrow_schema(schema)


# -- which file column feeds which output column --------------------------------------------------


@dataclass(frozen=True)
class _Column:
    """One output column: its target field and the file column it is read from (None = nulls)."""

    target: pa.Field
    source: str | None


def _file_fields_by_id(file_schema: TableSchema) -> dict[int, tuple[str, DataType]]:
    return {f.id: (f.name, f.type) for f in file_schema.fields}


def _plan_columns(
    read_schema: TableSchema,
    file_schema: TableSchema,
    file_columns: Sequence[str],
    system_columns: bool,
    path: str,
) -> list[_Column]:
    """Map each output column to the file column holding it, by field id (see module docstring)."""
    present = set(file_columns)
    by_id = _file_fields_by_id(file_schema)
    layout = output_arrow_schema(read_schema, system_columns)
    plan: list[_Column] = []
    key_ids = {KEY_PREFIX + f.name: f.id for f in key_fields(read_schema)} if system_columns else {}
    for target in layout:
        name = target.name
        if name in (SEQUENCE_NUMBER, VALUE_KIND) and system_columns and read_schema.primary_keys:
            if name not in present:
                raise CorruptFileError(path, f"primary-key data file has no {name} column")
            plan.append(_Column(target, name))
            continue
        if name in key_ids:
            found = by_id.get(key_ids[name])
            if found is None:
                key = name[len(KEY_PREFIX) :]
                raise CorruptFileError(path, f"key column {key} is not in the file's schema")
            stored_key = KEY_PREFIX + found[0]
            source = stored_key if stored_key in present else found[0]  # thin mode: the value column
            if source not in present:
                raise CorruptFileError(path, f"file has neither {stored_key} nor {found[0]}")
            plan.append(_Column(target, source))
            continue
        field_id = read_schema.field(name).id
        found = by_id.get(field_id)
        if found is None:
            plan.append(_Column(target, None))  # added after this file was written
            continue
        if found[0] not in present:
            raise CorruptFileError(
                path, f"column {found[0]} (field id {field_id}) of schema {file_schema.id} is not in the file"
            )
        plan.append(_Column(target, found[0]))
    return plan


def _cast(column: pa.Array, target: pa.Field, path: str) -> pa.Array:
    if column.type.equals(target.type):
        return column
    try:
        return pc.cast(column, target.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        raise UnsupportedOperationError(
            f"{path}: column {target.name}: cannot read {column.type} as {target.type}: {error}"
        ) from None


def _project(batch: pa.RecordBatch, plan: Sequence[_Column], layout: pa.Schema, path: str) -> pa.RecordBatch:
    arrays = []
    for column in plan:
        if column.source is None:
            arrays.append(pa.nulls(batch.num_rows, column.target.type))
        else:
            arrays.append(_cast(batch.column(column.source), column.target, path))
    return pa.RecordBatch.from_arrays(arrays, schema=layout)


# -- deletion vectors ---------------------------------------------------------------------------


class _DeletedRows:
    """Row positions to skip, answered per batch by position range (sorted numpy positions)."""

    def __init__(self, deleted_rows: BitMap | None) -> None:
        self._positions = (
            np.fromiter(deleted_rows, dtype=np.int64, count=len(deleted_rows))
            if deleted_rows
            else np.empty(0, dtype=np.int64)
        )

    def filter(self, batch: pa.RecordBatch, first_row: int) -> pa.RecordBatch:
        if not len(self._positions):
            return batch
        low, high = np.searchsorted(self._positions, [first_row, first_row + batch.num_rows])
        if low == high:
            return batch
        keep = np.ones(batch.num_rows, dtype=bool)
        keep[self._positions[low:high] - first_row] = False
        return batch.filter(pa.array(keep))


# -- the three formats ----------------------------------------------------------------------------


def _parquet_batches(
    parquet: pq.ParquetFile, columns: list[str] | None, batch_rows: int
) -> Iterator[pa.RecordBatch]:
    names = parquet.schema_arrow.names
    wanted = [c for c in names if columns is None or c in columns]
    if not wanted:  # nothing to read but the row count (e.g. a schema with only added columns)
        yield from _row_count_batches(parquet.metadata.num_rows, batch_rows)
        return
    yield from parquet.iter_batches(batch_size=batch_rows, columns=wanted, use_threads=False)


def _row_count_batches(rows: int, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Placeholder batches carrying only a row count, for reads that need no stored column."""
    for start in range(0, rows, batch_rows):
        yield pa.record_batch([pa.nulls(min(batch_rows, rows - start))], names=["__rows"])


def _orc_batches(
    handle: Any, columns: list[str] | None, batch_rows: int, file_types: dict[str, tuple[DataType, int]]
) -> Iterator[pa.RecordBatch]:
    orc_file = orc.ORCFile(handle)
    names = orc_file.schema.names
    wanted = [c for c in names if columns is None or c in columns]
    if not wanted:
        yield from _row_count_batches(orc_file.nrows, batch_rows)
        return
    trimmed = _java_orc_char_columns(orc_file, wanted, file_types)
    for stripe in range(orc_file.nstripes):
        data = orc_file.read_stripe(stripe, columns=wanted)
        for name in trimmed:
            index = data.schema.get_field_index(name)
            data = data.set_column(index, name, pc.utf8_rtrim(data.column(index), characters=" "))
        for start in range(0, data.num_rows, batch_rows):
            yield data.slice(start, batch_rows)


def _java_orc_char_columns(
    orc_file: orc.ORCFile, wanted: list[str], file_types: dict[str, tuple[DataType, int]]
) -> list[str]:
    """CHAR columns of an ORC file Paimon's Java writer wrote, whose values Java reads right-trimmed.

    Java's writer declares CHAR(n) columns as ORC `char(n)` and ORC pads the values; Java's ORC
    reader right-trims a `char` column's values, so Java reads 'ab', not 'ab '. pyarrow shows the
    stored, padded bytes and not the ORC type, so the writer tells: ORC's Java library is what writes
    `char`; our writer and pypaimon's (ORC's C++ library, through pyarrow) write `string` columns,
    whose padded values every reader returns as stored.
    """
    if orc_file.writer != "ORC_JAVA":
        return []
    return [name for name in wanted if name in file_types and file_types[name][0].root == "CHAR"]


def _avro_value(value: Any, data_type: DataType) -> Any:
    """fastavro's Python value -> what pyarrow builds the column from (maps of non-string keys come
    as arrays of key/value records; nested values recurse)."""
    if value is None:
        return None
    root = data_type.root
    if root == "MAP" and data_type.key is not None and data_type.value is not None:
        pairs = value.items() if isinstance(value, dict) else ((e["key"], e["value"]) for e in value)
        return [(_avro_value(k, data_type.key), _avro_value(v, data_type.value)) for k, v in pairs]
    if root in ("ARRAY", "MULTISET") and data_type.element is not None:
        return [_avro_value(v, data_type.element) for v in value]
    if root == "ROW":
        return {f.name: _avro_value(value.get(f.name), f.type) for f in data_type.fields or ()}
    return value


def _needs_avro_conversion(data_type: DataType) -> bool:
    return data_type.root in ("MAP", "ARRAY", "MULTISET", "ROW")


def _avro_batches(
    handle: Any, columns: list[str] | None, batch_rows: int, file_types: dict[str, tuple[DataType, int]]
) -> Iterator[pa.RecordBatch]:
    reader = fastavro.reader(handle)
    names = _avro_field_names(reader.writer_schema)
    wanted = [c for c in names if (columns is None or c in columns) and c in file_types]
    arrow_types = {name: file_arrow_type(*file_types[name]) for name in wanted}

    def build(records: list[dict[str, Any]]) -> pa.RecordBatch:
        if not wanted:
            return pa.record_batch([pa.nulls(len(records))], names=["__rows"])
        arrays = []
        for name in wanted:
            data_type = file_types[name][0]
            values = [record.get(name) for record in records]
            if _needs_avro_conversion(data_type):
                values = [_avro_value(v, data_type) for v in values]
            arrays.append(pa.array(values, type=arrow_types[name]))
        return pa.record_batch(arrays, names=wanted)

    records: list[dict[str, Any]] = []
    for record in reader:
        records.append(record)
        if len(records) == batch_rows:
            yield build(records)
            records = []
    if records:
        yield build(records)


def _file_types(file_schema: TableSchema) -> dict[str, tuple[DataType, int]]:
    """Name -> (Paimon type, field id) of every column a file of this schema may hold."""
    options = dict(file_schema.options)
    options["data-file.thin-mode"] = "false"
    fields = file_fields(file_schema, CoreOptions(options))
    return {name: (data_type, field_id) for name, data_type, field_id in fields}


def _file_column_names(file_format: str, handle: Any) -> list[str]:
    if file_format == "parquet":
        return handle.schema_arrow.names  # an open `pq.ParquetFile`: its footer parsed once
    if file_format == "orc":
        return orc.ORCFile(handle).schema.names
    return _avro_field_names(fastavro.reader(handle).writer_schema)


def _avro_field_names(writer_schema: Any) -> list[str]:
    """The columns of an Avro data file's row record.

    Paimon's Java writer declares the row as a nullable record (the union ["null", record]); ours
    and pypaimon's write the record itself. Either way the rows are the record's fields.
    """
    if isinstance(writer_schema, list):
        records = [branch for branch in writer_schema if isinstance(branch, dict) and "fields" in branch]
        if len(records) != 1:
            raise ValueError(f"the file's schema is a union without exactly one record: {writer_schema}")
        writer_schema = records[0]
    return [field["name"] for field in writer_schema["fields"]]


def _decode_error(error: Exception, path: str, what: str) -> PaimonFormatError:
    """A decoder's failure: a missing codec library is the environment's problem, not corruption, and
    a file gone from an object store shows only at the first read (opened with its size, no HEAD)."""
    if isinstance(error, FileNotFoundError):
        return MissingFileError(path)
    if isinstance(error, ImportError):
        return MissingDependencyError(f"reading {path}", error.name or str(error), str(error))
    missing = missing_codec_library(error, f"reading {path}")
    if missing is not None:
        return missing
    return CorruptFileError(path, f"{what}: {type(error).__name__}: {error}")


def read_data_file(
    table: Table,
    partition: bytes,
    bucket: int,
    meta: DataFileMeta,
    *,
    read_schema: TableSchema | None = None,
    system_columns: bool = False,
    deleted_rows: BitMap | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    prefetch: Prefetch | None = None,
) -> Iterator[pa.RecordBatch]:
    """The rows of one data file, in file order, as batches of at most `batch_rows` rows.

    Columns are exactly those of `read_schema` (default: the table's latest schema) in its types
    (`writer.table_arrow_schema`), resolved by field id against the file's own schema; with
    `system_columns=True` on a primary-key table the full key-value layout
    (`key_value_arrow_schema`). `deleted_rows` are 0-based row positions to skip (a deletion
    vector). Errors: `MissingFileError` naming the path when the file is gone, `CorruptFileError`
    when it cannot be decoded or lacks a column its schema promises. `prefetch`: the task's
    read-ahead (`prefetch_data_files`), which hands over this file's bytes if it fetched them; the
    file is opened on the first batch asked for either way.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows must be positive, got {batch_rows}")
    opener = prefetch.open if prefetch is not None else table.file_io.open_input
    return _read(
        table, partition, bucket, meta, read_schema, system_columns, deleted_rows, batch_rows, opener
    )


def _read(
    table: Table,
    partition: bytes,
    bucket: int,
    meta: DataFileMeta,
    read_schema: TableSchema | None,
    system_columns: bool,
    deleted_rows: BitMap | None,
    batch_rows: int,
    opener: Callable[[str, int | None], Any],
) -> Iterator[pa.RecordBatch]:
    path = data_file_path(table, partition, bucket, meta)
    read_schema = read_schema or table.schema
    file_schema = table.schema_by_id(meta.schema_id)
    file_format = file_format_of(meta.file_name)
    layout = output_arrow_schema(read_schema, system_columns)
    deleted = _DeletedRows(deleted_rows)
    handle = opener(path, meta.file_size)  # size known: no HEAD, small files in 1 GET
    try:
        try:
            source = (
                pq.ParquetFile(handle, buffer_size=PARQUET_READ_BUFFER)
                if file_format == "parquet"
                else handle
            )
            file_columns = _file_column_names(file_format, source)
            if source is handle:
                handle.seek(0)
        except Exception as error:  # noqa: BLE001 - decoders raise anything on damaged bytes
            raise _decode_error(error, path, f"not a readable {file_format} file") from None
        plan = _plan_columns(read_schema, file_schema, file_columns, system_columns, path)
        needed = sorted({c.source for c in plan if c.source is not None})
        if file_format == "parquet":
            batches = _parquet_batches(source, needed, batch_rows)
        elif file_format == "orc":
            batches = _orc_batches(handle, needed, batch_rows, _file_types(file_schema))
        else:
            batches = _avro_batches(handle, needed, batch_rows, _file_types(file_schema))
        position = 0
        while True:
            try:
                batch = next(batches)
            except StopIteration:
                break
            except PaimonFormatError:
                raise
            except Exception as error:  # noqa: BLE001 - decoders raise anything on damaged bytes
                raise _decode_error(error, path, f"cannot decode {file_format} data") from None
            first_row, position = position, position + batch.num_rows
            projected = deleted.filter(_project(batch, plan, layout, path), first_row)
            if projected.num_rows:
                yield projected
        if position != meta.row_count:
            raise CorruptFileError(
                path, f"file has {position} rows, its manifest entry says {meta.row_count}"
            )
    finally:
        handle.close()
