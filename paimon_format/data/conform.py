"""Input rows -> the table's columns in table order and stored types, with their row kinds.

The first step of every write (`writer.py`): input from Spark or plain Python is cast to the types
the data files store, NOT NULL and CHAR/VARCHAR lengths are checked, and the optional row-kind
column is read as `_VALUE_KIND` codes.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from paimon_format.errors import DataWriteError
from paimon_format.model.file_layout import table_arrow_schema
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import MAX_LENGTH

ROW_KIND_COLUMN = "_VALUE_KIND"
"""Optional input column with each row's kind (0 +I, 1 -U, 2 +U, 3 -D, or those strings)."""
ROW_KIND_INPUT_COLUMNS = (ROW_KIND_COLUMN, "__row_kind")
ROW_KINDS = ("+I", "-U", "+U", "-D")


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
