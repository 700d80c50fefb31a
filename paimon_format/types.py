"""Paimon data types: the JSON type strings of schema files, and their pyarrow counterparts (spec §2).

Schema files spell types the way Java prints them ("INT NOT NULL", "DECIMAL(10, 2)", nested types
as JSON objects). We parse every alias Java and pypaimon write, and print only Java's canonical
form, so schemas we write read back identically everywhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from paimon_format.errors import PaimonFormatError

MAX_LENGTH = 2147483647

_FIXED_ROOTS = {
    "BOOLEAN",
    "TINYINT",
    "SMALLINT",
    "INT",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DATE",
    "VARIANT",
    "BLOB",
}
_ALIASES = {"INTEGER": "INT", "DEC": "DECIMAL", "NUMERIC": "DECIMAL", "BOOL": "BOOLEAN"}
_ATOMIC_RE = re.compile(
    r"^\s*([A-Za-z_]+(?:\s+[A-Za-z_]+)*?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?"
    r"(\s+WITH\s+LOCAL\s+TIME\s+ZONE)?\s*(NOT\s+NULL)?\s*$",
    re.IGNORECASE,
)


class TypeParseError(PaimonFormatError, ValueError):
    """A type string or type object that is not a Paimon type."""


@dataclass(frozen=True)
class DataField:
    """A named column (or nested row field) with the id that schema evolution tracks it by."""

    id: int
    name: str
    type: DataType
    description: str | None = None
    default_value: str | None = None

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            result["description"] = self.description
        if self.default_value is not None:
            result["defaultValue"] = self.default_value
        return result

    @staticmethod
    def from_json(data: dict[str, Any]) -> DataField:
        try:
            return DataField(
                id=int(data["id"]),
                name=str(data["name"]),
                type=parse_type(data["type"]),
                description=data.get("description"),
                default_value=data.get("defaultValue"),
            )
        except KeyError as missing:
            raise TypeParseError(f"field {data!r} has no {missing}") from None


@dataclass(frozen=True)
class DataType:
    """One Paimon type; `root` is the canonical root name, parameters only where the root has them."""

    root: str
    nullable: bool = True
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    element: DataType | None = None
    key: DataType | None = None
    value: DataType | None = None
    fields: tuple[DataField, ...] | None = None
    vector_length: int | None = None

    def with_nullable(self, nullable: bool) -> DataType:
        return replace(self, nullable=nullable)

    def is_string(self) -> bool:
        return self.root in ("CHAR", "VARCHAR")

    def is_binary(self) -> bool:
        return self.root in ("BINARY", "VARBINARY")

    def _suffix(self) -> str:
        return "" if self.nullable else " NOT NULL"

    def to_json(self) -> str | dict[str, Any]:
        """Java's canonical JSON: a string for atomic types, an object for nested ones."""
        root = self.root
        if root == "ARRAY" or root == "MULTISET":
            return {"type": root + self._suffix(), "element": _require(self.element, root).to_json()}
        if root == "VECTOR":
            return {
                "type": root + self._suffix(),
                "element": _require(self.element, root).to_json(),
                "length": self.vector_length,
            }
        if root == "MAP":
            return {
                "type": root + self._suffix(),
                "key": _require(self.key, root).to_json(),
                "value": _require(self.value, root).to_json(),
            }
        if root == "ROW":
            return {"type": root + self._suffix(), "fields": [f.to_json() for f in self.fields or ()]}
        return self.sql() + self._suffix()

    def sql(self) -> str:
        """The atomic type as Java's `asSQLString()` without nullability."""
        root = self.root
        if root == "VARCHAR":
            return "STRING" if self.length == MAX_LENGTH else f"VARCHAR({self.length})"
        if root == "VARBINARY":
            return "BYTES" if self.length == MAX_LENGTH else f"VARBINARY({self.length})"
        if root in ("CHAR", "BINARY"):
            return f"{root}({self.length})"
        if root == "DECIMAL":
            return f"DECIMAL({self.precision}, {self.scale})"
        if root in ("TIME", "TIMESTAMP"):
            return f"{root}({self.precision})"
        if root == "TIMESTAMP_LTZ":
            return f"TIMESTAMP({self.precision}) WITH LOCAL TIME ZONE"
        return root

    def __str__(self) -> str:
        json_form = self.to_json()
        return json_form if isinstance(json_form, str) else str(json_form)


def _require(value: DataType | None, root: str) -> DataType:
    if value is None:
        raise TypeParseError(f"{root} type is missing its element/key/value type")
    return value


# -- constructors used across the code base ------------------------------------------------------


def STRING(nullable: bool = True) -> DataType:  # noqa: N802 - reads like the type it builds
    return DataType("VARCHAR", nullable, length=MAX_LENGTH)


def BIGINT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("BIGINT", nullable)


def INT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("INT", nullable)


# -- parsing -------------------------------------------------------------------------------------


def parse_type(value: str | dict[str, Any]) -> DataType:
    """Parse a type as schema files spell it (canonical strings, aliases, nested objects)."""
    if isinstance(value, DataType):
        return value
    if isinstance(value, dict):
        return _parse_nested(value)
    if not isinstance(value, str):
        raise TypeParseError(f"not a Paimon type: {value!r}")
    return _parse_atomic(value)


def _parse_nested(data: dict[str, Any]) -> DataType:
    type_text = data.get("type")
    if not isinstance(type_text, str):
        raise TypeParseError(f"nested type without a 'type' string: {data!r}")
    words = type_text.strip().upper()
    nullable = not words.endswith("NOT NULL")
    root = words.replace("NOT NULL", "").strip()
    if "nullable" in data:
        nullable = bool(data["nullable"])
    try:
        if root in ("ARRAY", "MULTISET"):
            return DataType(root, nullable, element=parse_type(data["element"]))
        if root == "VECTOR":
            return DataType(
                root, nullable, element=parse_type(data["element"]), vector_length=int(data["length"])
            )
        if root == "MAP":
            return DataType(root, nullable, key=parse_type(data["key"]), value=parse_type(data["value"]))
        if root == "ROW":
            return DataType(root, nullable, fields=tuple(DataField.from_json(f) for f in data["fields"]))
    except KeyError as missing:
        raise TypeParseError(f"{root} type {data!r} has no {missing}") from None
    return _parse_atomic(type_text).with_nullable(nullable)


def _parse_atomic(text: str) -> DataType:
    match = _ATOMIC_RE.match(text)
    if not match:
        raise TypeParseError(f"not a Paimon type: {text!r}")
    name, first, second, ltz, not_null = match.groups()
    root = " ".join(name.upper().split())
    root = _ALIASES.get(root, root)
    nullable = not_null is None
    p1 = int(first) if first is not None else None
    p2 = int(second) if second is not None else None
    if root in _FIXED_ROOTS and p1 is None:
        return DataType(root, nullable)
    if root == "STRING" and p1 is None:
        return DataType("VARCHAR", nullable, length=MAX_LENGTH)
    if root == "BYTES" and p1 is None:
        return DataType("VARBINARY", nullable, length=MAX_LENGTH)
    if root in ("VARCHAR", "CHAR", "VARBINARY", "BINARY"):
        default = MAX_LENGTH if root.startswith("VAR") else 1
        return DataType(root, nullable, length=p1 if p1 is not None else default)
    if root == "DECIMAL":
        return DataType(
            root, nullable, precision=p1 if p1 is not None else 10, scale=p2 if p2 is not None else 0
        )
    if root == "TIME":
        return DataType(root, nullable, precision=p1 if p1 is not None else 0)
    if root == "TIMESTAMP":
        precision = p1 if p1 is not None else 6
        return DataType("TIMESTAMP_LTZ" if ltz else "TIMESTAMP", nullable, precision=precision)
    if root in ("TIMESTAMP_LTZ", "TIMESTAMP WITH LOCAL TIME ZONE"):
        return DataType("TIMESTAMP_LTZ", nullable, precision=p1 if p1 is not None else 6)
    raise TypeParseError(f"not a Paimon type: {text!r}")


# -- field ids -----------------------------------------------------------------------------------


def assign_field_ids(
    named_types: list[tuple[str, DataType]], start: int = 0
) -> tuple[tuple[DataField, ...], int]:
    """Give columns ids the way Paimon does: a ROW takes its id, then its nested fields the next ones."""
    counter = [start - 1]

    def next_id() -> int:
        counter[0] += 1
        return counter[0]

    def renumber(data_type: DataType) -> DataType:
        if data_type.root == "ROW":
            nested = []
            for field in data_type.fields or ():
                field_id = next_id()
                nested.append(DataField(field_id, field.name, renumber(field.type), field.description))
            return replace(data_type, fields=tuple(nested))
        if data_type.element is not None:
            return replace(data_type, element=renumber(data_type.element))
        if data_type.root == "MAP":
            return replace(
                data_type,
                key=renumber(_require(data_type.key, "MAP")),
                value=renumber(_require(data_type.value, "MAP")),
            )
        return data_type

    fields = []
    for name, data_type in named_types:
        field_id = next_id()
        fields.append(DataField(field_id, name, renumber(data_type)))
    return tuple(fields), counter[0]


# -- pyarrow ---------------------------------------------------------------------------------------


def _timestamp_unit(precision: int) -> str:
    if precision == 0:
        return "s"
    if precision <= 3:
        return "ms"
    if precision <= 6:
        return "us"
    return "ns"


def to_arrow(data_type: DataType) -> pa.DataType:
    """The pyarrow type that holds values of a Paimon type without loss."""
    root = data_type.root
    simple = {
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
    if root in simple:
        return simple[root]
    if root == "DECIMAL":
        return pa.decimal128(data_type.precision, data_type.scale)
    if root == "TIMESTAMP":
        return pa.timestamp(_timestamp_unit(data_type.precision or 0))
    if root == "TIMESTAMP_LTZ":
        return pa.timestamp(_timestamp_unit(data_type.precision or 0), tz="UTC")
    if root == "TIME":
        precision = data_type.precision or 0
        return pa.time32("ms") if precision <= 3 else pa.time64("us" if precision <= 6 else "ns")
    if root in ("ARRAY", "MULTISET", "VECTOR"):
        element = _require(data_type.element, root)
        return pa.list_(pa.field("element", to_arrow(element), nullable=element.nullable))
    if root == "MAP":
        return pa.map_(to_arrow(_require(data_type.key, root)), to_arrow(_require(data_type.value, root)))
    if root == "ROW":
        return pa.struct(
            [pa.field(f.name, to_arrow(f.type), nullable=f.type.nullable) for f in data_type.fields or ()]
        )
    raise TypeParseError(f"no pyarrow type for {data_type}")


def from_arrow(arrow_type: pa.DataType, nullable: bool = True) -> DataType:
    """The Paimon type for data arriving as `arrow_type` (used when a job creates a table from data)."""
    t = pa.types
    checks: list[tuple[Any, DataType]] = [
        (t.is_boolean, DataType("BOOLEAN", nullable)),
        (t.is_int8, DataType("TINYINT", nullable)),
        (t.is_int16, DataType("SMALLINT", nullable)),
        (t.is_int32, DataType("INT", nullable)),
        (t.is_int64, DataType("BIGINT", nullable)),
        (t.is_float32, DataType("FLOAT", nullable)),
        (t.is_float64, DataType("DOUBLE", nullable)),
        (t.is_date32, DataType("DATE", nullable)),
        (t.is_date64, DataType("DATE", nullable)),
    ]
    for check, data_type in checks:
        if check(arrow_type):
            return data_type
    if t.is_string(arrow_type) or t.is_large_string(arrow_type):
        return STRING(nullable)
    if t.is_binary(arrow_type) or t.is_large_binary(arrow_type):
        return DataType("VARBINARY", nullable, length=MAX_LENGTH)
    if t.is_fixed_size_binary(arrow_type):
        return DataType("BINARY", nullable, length=arrow_type.byte_width)
    if t.is_decimal(arrow_type):
        return DataType("DECIMAL", nullable, precision=arrow_type.precision, scale=arrow_type.scale)
    if t.is_timestamp(arrow_type):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[arrow_type.unit]
        root = "TIMESTAMP_LTZ" if arrow_type.tz else "TIMESTAMP"
        return DataType(root, nullable, precision=precision)
    if t.is_time(arrow_type):
        precision = {"s": 0, "ms": 3, "us": 6, "ns": 9}[arrow_type.unit]
        return DataType("TIME", nullable, precision=precision)
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        field = arrow_type.value_field
        return DataType("ARRAY", nullable, element=from_arrow(field.type, field.nullable))
    if t.is_map(arrow_type):
        return DataType(
            "MAP",
            nullable,
            key=from_arrow(arrow_type.key_type, False),
            value=from_arrow(arrow_type.item_type, arrow_type.item_field.nullable),
        )
    if t.is_struct(arrow_type):
        fields = tuple(
            DataField(
                -1,
                arrow_type.field(i).name,
                from_arrow(arrow_type.field(i).type, arrow_type.field(i).nullable),
            )
            for i in range(arrow_type.num_fields)
        )
        return DataType("ROW", nullable, fields=fields)
    raise TypeParseError(f"no Paimon type for pyarrow type {arrow_type}")
