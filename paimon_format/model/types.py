"""Paimon data types and fields (spec §2): what they are, how Java prints them, how ids are numbered.

Schema files spell types the way Java prints them ("INT NOT NULL", "DECIMAL(10, 2)", nested types
as JSON objects). We print only Java's canonical form, so the schemas we write read back
identically in Java, pypaimon and here. Parsing (every alias Java and pypaimon write, and the SQL
forms people type in job configs) is in `type_parsing.py`; the pyarrow counterparts in
`arrow_types.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from paimon_format.errors import PaimonFormatError

MAX_LENGTH = 2147483647
"""Longest CHAR/VARCHAR/BINARY/VARBINARY; VARCHAR(MAX_LENGTH) is STRING, VARBINARY(MAX_LENGTH) BYTES."""

MAX_DECIMAL_PRECISION = 38
MAX_TIME_PRECISION = 9


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
        """Java's `DataField#serializeJson`: description/defaultValue only when set."""
        result: dict[str, Any] = {"id": self.id, "name": self.name, "type": self.type.to_json()}
        if self.description is not None:
            result["description"] = self.description
        if self.default_value is not None:
            result["defaultValue"] = self.default_value
        return result


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
        return self if nullable == self.nullable else replace(self, nullable=nullable)

    def is_string(self) -> bool:
        return self.root in ("CHAR", "VARCHAR")

    def is_binary(self) -> bool:
        return self.root in ("BINARY", "VARBINARY")

    def is_nested(self) -> bool:
        return self.root in ("ARRAY", "MULTISET", "MAP", "ROW", "VECTOR")

    def _suffix(self) -> str:
        return "" if self.nullable else " NOT NULL"

    def to_json(self) -> str | dict[str, Any]:
        """Java's canonical JSON: a string for atomic types, an object for nested ones.

        Java carries a nested type's nullability in its "type" string ("ARRAY NOT NULL") and writes no
        "nullable" key (pypaimon adds one; Java ignores it), so neither do we.
        """
        root = self.root
        if root in ("ARRAY", "MULTISET"):
            return {"type": root + self._suffix(), "element": child_type(self.element, self).to_json()}
        if root == "VECTOR":
            return {
                "type": root + self._suffix(),
                "element": child_type(self.element, self).to_json(),
                "length": self.vector_length,
            }
        if root == "MAP":
            return {
                "type": root + self._suffix(),
                "key": child_type(self.key, self).to_json(),
                "value": child_type(self.value, self).to_json(),
            }
        if root == "ROW":
            return {"type": root + self._suffix(), "fields": [f.to_json() for f in self.fields or ()]}
        return self.sql() + self._suffix()

    def sql(self) -> str:
        """Java's `asSQLString()` without the nullability of this type (nested children keep theirs)."""
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
        if root in ("ARRAY", "MULTISET"):
            return f"{root}<{child_type(self.element, self).full_sql()}>"
        if root == "VECTOR":
            return f"VECTOR<{child_type(self.element, self).full_sql()}, {self.vector_length}>"
        if root == "MAP":
            return f"MAP<{child_type(self.key, self).full_sql()}, {child_type(self.value, self).full_sql()}>"
        if root == "ROW":
            return f"ROW<{', '.join(_field_sql(f) for f in self.fields or ())}>"
        return root

    def full_sql(self) -> str:
        """`sql()` with " NOT NULL" when the type is not nullable."""
        return self.sql() + self._suffix()

    def __str__(self) -> str:
        return self.full_sql()


def child_type(value: DataType | None, parent: DataType) -> DataType:
    if value is None:
        raise TypeParseError(f"{parent.root} type is missing its element/key/value type")
    return value


def _field_sql(field: DataField) -> str:
    text = "`" + field.name.replace("`", "``") + "` " + field.type.full_sql()
    if field.description is not None:
        text += " '" + field.description.replace("'", "''") + "'"
    return text


# -- constructors ----------------------------------------------------------------------------------
# Named like the SQL types they build (as in Java's DataTypes), hence the noqa.


def BOOLEAN(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("BOOLEAN", nullable)


def TINYINT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("TINYINT", nullable)


def SMALLINT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("SMALLINT", nullable)


def INT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("INT", nullable)


def BIGINT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("BIGINT", nullable)


def FLOAT(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("FLOAT", nullable)


def DOUBLE(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("DOUBLE", nullable)


def DATE(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("DATE", nullable)


def STRING(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("VARCHAR", nullable, length=MAX_LENGTH)


def BYTES(nullable: bool = True) -> DataType:  # noqa: N802
    return DataType("VARBINARY", nullable, length=MAX_LENGTH)


def DECIMAL(precision: int, scale: int, nullable: bool = True) -> DataType:  # noqa: N802
    return check_type(DataType("DECIMAL", nullable, precision=precision, scale=scale))


def TIMESTAMP(precision: int = 6, nullable: bool = True) -> DataType:  # noqa: N802
    return check_type(DataType("TIMESTAMP", nullable, precision=precision))


def TIMESTAMP_LTZ(precision: int = 6, nullable: bool = True) -> DataType:  # noqa: N802
    return check_type(DataType("TIMESTAMP_LTZ", nullable, precision=precision))


def check_type(data_type: DataType) -> DataType:
    """Java's constructor checks, so a bad type fails here and not in some reader later."""
    root = data_type.root
    if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        if data_type.length is None or not 1 <= data_type.length <= MAX_LENGTH:
            raise TypeParseError(f"{root} length must be between 1 and {MAX_LENGTH}, got {data_type.length}")
    elif root == "DECIMAL":
        precision, scale = data_type.precision, data_type.scale
        if precision is None or not 1 <= precision <= MAX_DECIMAL_PRECISION:
            raise TypeParseError(f"DECIMAL precision must be between 1 and 38, got {precision}")
        if scale is None or not 0 <= scale <= precision:
            raise TypeParseError(f"DECIMAL scale must be between 0 and precision {precision}, got {scale}")
    elif root in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
        if data_type.precision is None or not 0 <= data_type.precision <= MAX_TIME_PRECISION:
            raise TypeParseError(f"{root} precision must be between 0 and 9, got {data_type.precision}")
    elif root == "VECTOR":
        if data_type.vector_length is None or data_type.vector_length < 1:
            raise TypeParseError(f"VECTOR length must be at least 1, got {data_type.vector_length}")
    elif root == "ROW":
        names = [f.name for f in data_type.fields or ()]
        if len(set(names)) != len(names):
            raise TypeParseError(f"ROW has duplicate field names: {names}")
    return data_type


# -- field ids -----------------------------------------------------------------------------------


def assign_field_ids(
    named_types: Sequence[tuple[str, DataType]] | Sequence[tuple[str, DataType, str | None]],
    start: int = 0,
) -> tuple[tuple[DataField, ...], int]:
    """Number columns the way Java's `Schema.Builder` + `ReassignFieldId` do; returns (fields, highest id).

    A top-level column takes the next id, then its nested ROW fields consume the following ids. Inside
    a ROW, a field's own nested fields are numbered before the field itself (Java evaluates the field
    type before allocating its id): `a INT, b ROW<x ROW<p INT>, y INT>` -> a=0, b=1, p=2, x=3, y=4.
    `highest` is `start - 1` when there are no columns.
    """
    counter = [start - 1]

    def next_id() -> int:
        counter[0] += 1
        return counter[0]

    def renumber(data_type: DataType) -> DataType:
        if data_type.root == "ROW":
            nested = []
            for field in data_type.fields or ():
                field_type = renumber(field.type)
                nested.append(replace(field, id=next_id(), type=field_type))
            return replace(data_type, fields=tuple(nested))
        if data_type.root == "MAP":
            key = renumber(child_type(data_type.key, data_type))
            return replace(data_type, key=key, value=renumber(child_type(data_type.value, data_type)))
        if data_type.element is not None:
            return replace(data_type, element=renumber(data_type.element))
        return data_type

    fields = []
    for column in named_types:
        name, data_type = column[0], column[1]
        description = column[2] if len(column) > 2 else None
        field_id = next_id()
        fields.append(DataField(field_id, name, renumber(data_type), description))
    return tuple(fields), counter[0]


def max_field_id(fields: Sequence[DataField]) -> int:
    """The highest id among fields and all their nested ROW fields (-1 when there are none)."""
    highest = -1
    stack: list[DataType] = []
    for field in fields:
        highest = max(highest, field.id)
        stack.append(field.type)
    while stack:
        data_type = stack.pop()
        for nested in data_type.fields or ():
            highest = max(highest, nested.id)
            stack.append(nested.type)
        stack.extend(t for t in (data_type.element, data_type.key, data_type.value) if t is not None)
    return highest
