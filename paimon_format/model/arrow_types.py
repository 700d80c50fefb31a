"""Paimon types and their pyarrow counterparts: what Arrow type a column is read and written as.

`to_arrow` maps a Paimon type to the Arrow type of a column (`file_layout.file_arrow_type` adjusts
it where Java's file layout differs); `from_arrow` maps Arrow input (a write's DataFrame) back.
"""

from __future__ import annotations

import pyarrow as pa

from paimon_format.model.types import (
    BYTES,
    MAX_DECIMAL_PRECISION,
    STRING,
    DataField,
    DataType,
    TypeParseError,
    child_type,
)

_UNIT_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}


def _timestamp_unit(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    if precision <= 6:
        return "us"
    return "ns"


_SIMPLE_TO_ARROW = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INT": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "DATE": pa.date32(),
    "CHAR": pa.string(),
    "VARCHAR": pa.string(),
    "BINARY": pa.binary(),
    "VARBINARY": pa.binary(),
    "VARIANT": pa.binary(),
    "BLOB": pa.binary(),
}


def to_arrow(t: DataType) -> pa.DataType:
    """The pyarrow type that holds values of a Paimon type without loss (same choices as pypaimon).

    TIMESTAMP(p) -> timestamp with the smallest unit covering p (0 s, 1-3 ms, 4-6 us, 7-9 ns);
    TIMESTAMP_LTZ additionally carries tz="UTC". Map keys are NOT NULL as in Java.
    """
    root = t.root
    simple = _SIMPLE_TO_ARROW.get(root)
    if simple is not None:
        return simple
    if root == "DECIMAL":
        return pa.decimal128(t.precision or 10, t.scale or 0)
    if root == "TIMESTAMP":
        return pa.timestamp(_timestamp_unit(t.precision or 0))
    if root == "TIMESTAMP_LTZ":
        return pa.timestamp(_timestamp_unit(t.precision or 0), tz="UTC")
    if root == "TIME":
        precision = t.precision or 0
        return pa.time32("ms") if precision <= 3 else pa.time64("us" if precision <= 6 else "ns")
    if root in ("ARRAY", "MULTISET"):
        element = child_type(t.element, t)
        return pa.list_(pa.field("element", to_arrow(element), nullable=element.nullable))
    if root == "VECTOR":
        element = child_type(t.element, t)
        item = pa.field("element", to_arrow(element), nullable=element.nullable)
        return pa.list_(item, t.vector_length or -1)
    if root == "MAP":
        value = child_type(t.value, t)
        return pa.map_(
            pa.field("key", to_arrow(child_type(t.key, t)), nullable=False),
            pa.field("value", to_arrow(value), nullable=value.nullable),
        )
    if root == "ROW":
        fields = t.fields or ()
        return pa.struct([pa.field(f.name, to_arrow(f.type), nullable=f.type.nullable) for f in fields])
    raise TypeParseError(f"no pyarrow type for {t}")


def from_arrow(t: pa.DataType, nullable: bool = True) -> DataType:
    """The Paimon type for data arriving as `t` (used when a job creates a table from data).

    Nested ROW fields get id -1: the schema module numbers them (`assign_field_ids`).
    """
    types = pa.types
    if types.is_dictionary(t):
        return from_arrow(t.value_type, nullable)
    simple = [
        (types.is_boolean, "BOOLEAN"),
        (types.is_int8, "TINYINT"),
        (types.is_int16, "SMALLINT"),
        (types.is_int32, "INT"),
        (types.is_int64, "BIGINT"),
        (types.is_float32, "FLOAT"),
        (types.is_float64, "DOUBLE"),
        (types.is_date, "DATE"),
    ]
    for check, root in simple:
        if check(t):
            return DataType(root, nullable)
    if types.is_string(t) or types.is_large_string(t) or _is_view(t, "string_view"):
        return STRING(nullable)
    if types.is_binary(t) or types.is_large_binary(t) or _is_view(t, "binary_view"):
        return BYTES(nullable)
    if types.is_fixed_size_binary(t):
        return DataType("BINARY", nullable, length=t.byte_width)
    if types.is_decimal(t):
        if t.precision > MAX_DECIMAL_PRECISION:
            raise TypeParseError(f"{t}: Paimon decimals have at most 38 digits")
        return DataType("DECIMAL", nullable, precision=t.precision, scale=t.scale)
    if types.is_timestamp(t):
        root = "TIMESTAMP_LTZ" if t.tz else "TIMESTAMP"
        return DataType(root, nullable, precision=_UNIT_PRECISION[t.unit])
    if types.is_time(t):
        return DataType("TIME", nullable, precision=_UNIT_PRECISION[t.unit])
    if types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        field = t.value_field
        return DataType("ARRAY", nullable, element=from_arrow(field.type, field.nullable))
    if types.is_map(t):
        item = t.item_field
        return DataType(
            "MAP", nullable, key=from_arrow(t.key_type, False), value=from_arrow(item.type, item.nullable)
        )
    if types.is_struct(t):
        fields = tuple(DataField(-1, f.name, from_arrow(f.type, f.nullable)) for f in t)
        return DataType("ROW", nullable, fields=fields)
    raise TypeParseError(f"no Paimon type for pyarrow type {t}")


def _is_view(t: pa.DataType, name: str) -> bool:
    check = getattr(pa.types, f"is_{name}", None)  # pyarrow >= 16 only
    return bool(check and check(t))
