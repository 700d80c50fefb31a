"""The column layout of Paimon data files: Arrow schemas with Paimon's field ids (spec §7).

Split out of the writer because readers, the writer, the file encoders and the merge all need the
same answer to "which columns, in which order, with which Parquet field ids does a data file have".
"""

from __future__ import annotations

import functools

import pyarrow as pa

from paimon_format.model.arrow_types import to_arrow
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataField, DataType

KEY_PREFIX = "_KEY_"
SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
KEY_FIELD_ID_OFFSET = 1073741823
SEQUENCE_NUMBER_ID = 2147483646
VALUE_KIND_ID = 2147483645

RETRACT_KINDS = (1, 3)
"""`_VALUE_KIND` codes of retractions: -U (1) and -D (3)."""

FIELD_ID_KEY = b"PARQUET:field_id"
_STRUCTURED_ID_BASE = 2147483647 // 4  # Java SpecialFields.STRUCTURED_TYPE_FIELD_ID_BASE
_STRUCTURED_DEPTH_LIMIT = 1 << 10


# -- file schema: Arrow types with Paimon field ids ---------------------------------------------------


def _java_int(value: int) -> int:
    """Java int arithmetic wraps around; the structured-type ids are computed that way."""
    return (value + 2**31) % 2**32 - 2**31


def _element_id(field_id: int, depth: int) -> int:
    return _java_int(_STRUCTURED_ID_BASE + field_id * _STRUCTURED_DEPTH_LIMIT + depth)


def _map_key_id(field_id: int, depth: int) -> int:
    return _java_int(_STRUCTURED_ID_BASE - field_id * _STRUCTURED_DEPTH_LIMIT - depth)


def _map_value_id(field_id: int, depth: int) -> int:
    return _java_int(_STRUCTURED_ID_BASE + field_id * _STRUCTURED_DEPTH_LIMIT + depth)


def _id_metadata(field_id: int) -> dict[bytes, bytes]:
    return {FIELD_ID_KEY: str(field_id).encode()}


def file_arrow_type(data_type: DataType, field_id: int, depth: int = 0) -> pa.DataType:
    """The Arrow type a column is stored as; nested children carry Java's structured-type ids.

    Differs from `types.to_arrow` only where Java's file layout does: TIME is stored as
    millisecond INT32 (Java reads nothing else), map keys are NOT NULL.
    """
    root = data_type.root
    if root == "TIME":
        return pa.time32("ms")
    if root in ("ARRAY", "VECTOR") and data_type.element is not None:
        element = data_type.element
        child = pa.field(
            "element",
            file_arrow_type(element, field_id, depth + 1),
            nullable=element.nullable,
            metadata=_id_metadata(_element_id(field_id, depth + 1)),
        )
        return pa.list_(child)
    if root == "MAP" and data_type.key is not None and data_type.value is not None:
        key = pa.field(
            "key",
            file_arrow_type(data_type.key, field_id, depth + 1),
            nullable=False,
            metadata=_id_metadata(_map_key_id(field_id, depth + 1)),
        )
        value = pa.field(
            "value",
            file_arrow_type(data_type.value, field_id, depth + 1),
            nullable=data_type.value.nullable,
            metadata=_id_metadata(_map_value_id(field_id, depth + 1)),
        )
        return pa.map_(key, value)
    if root == "ROW":
        return pa.struct([arrow_field(f.name, f.type, f.id) for f in data_type.fields or ()])
    return to_arrow(data_type)


def arrow_field(name: str, data_type: DataType, field_id: int) -> pa.Field:
    """One file column: its Arrow type, nullability and Parquet field id."""
    return pa.field(
        name,
        file_arrow_type(data_type, field_id),
        nullable=data_type.nullable,
        metadata=_id_metadata(field_id),
    )


def key_fields(schema: TableSchema) -> list[DataField]:
    """The trimmed primary key: primary-key columns that are not partition columns."""
    return [schema.field(name) for name in schema.trimmed_primary_keys()]


def key_column_names(schema: TableSchema, options: CoreOptions) -> list[str]:
    """The columns holding the trimmed primary key in a data file (`_KEY_*`, or the value columns
    themselves with `data-file.thin-mode`)."""
    prefix = "" if options.data_file_thin_mode else KEY_PREFIX
    return [prefix + f.name for f in key_fields(schema)]


def table_arrow_schema(schema: TableSchema) -> pa.Schema:
    """The table's columns as stored in data files (what `conform` casts input to)."""
    return _arrow_schema_of(schema.fields)


@functools.lru_cache(maxsize=64)
def _arrow_schema_of(fields: tuple[DataField, ...]) -> pa.Schema:
    """Cached by the (immutable, hashable) fields: readers and writers ask for it once per file or
    batch, thousands of times a task, and a schema has few versions."""
    return pa.schema([arrow_field(f.name, f.type, f.id) for f in fields])


def file_fields(schema: TableSchema, options: CoreOptions | None = None) -> list[tuple[str, DataType, int]]:
    """(name, type, field id) of every column of a data file, in file order (spec §7)."""
    columns = [(f.name, f.type, f.id) for f in schema.fields]
    if not schema.primary_keys:
        return columns
    options = options or CoreOptions(schema.options)
    system: list[tuple[str, DataType, int]] = []
    if not options.data_file_thin_mode:
        system = [
            (KEY_PREFIX + f.name, f.type.with_nullable(False), f.id + KEY_FIELD_ID_OFFSET)
            for f in key_fields(schema)
        ]
    system.append((SEQUENCE_NUMBER, DataType("BIGINT", False), SEQUENCE_NUMBER_ID))
    system.append((VALUE_KIND, DataType("TINYINT", False), VALUE_KIND_ID))
    return system + columns


def file_arrow_schema(schema: TableSchema, options: CoreOptions | None = None) -> pa.Schema:
    """The Arrow schema of a data file, system columns first for primary-key tables."""
    return pa.schema([arrow_field(name, t, i) for name, t, i in file_fields(schema, options)])
