"""Paimon data types: the JSON type strings of schema files, and their pyarrow counterparts (spec §2).

Schema files spell types the way Java prints them ("INT NOT NULL", "DECIMAL(10, 2)", nested types
as JSON objects). We parse every alias Java and pypaimon write (and the SQL forms people type in
job configs, "ARRAY<INT>", "ROW<a INT, b STRING>"), but print only Java's canonical form, so the
schemas we write read back identically in Java, pypaimon and here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from paimon_format.errors import PaimonFormatError

MAX_LENGTH = 2147483647
"""Longest CHAR/VARCHAR/BINARY/VARBINARY; VARCHAR(MAX_LENGTH) is STRING, VARBINARY(MAX_LENGTH) BYTES."""

MAX_DECIMAL_PRECISION = 38
MAX_TIME_PRECISION = 9

_PLAIN_ROOTS = frozenset(
    {"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE", "VARIANT", "BLOB"}
)
_ALIASES = {"INTEGER": "INT", "DEC": "DECIMAL", "NUMERIC": "DECIMAL", "BOOL": "BOOLEAN"}


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

    @staticmethod
    def from_json(data: dict[str, Any]) -> DataField:
        return _parse_field(data, _IdCounter())


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
            return {"type": root + self._suffix(), "element": _child(self.element, self).to_json()}
        if root == "VECTOR":
            return {
                "type": root + self._suffix(),
                "element": _child(self.element, self).to_json(),
                "length": self.vector_length,
            }
        if root == "MAP":
            return {
                "type": root + self._suffix(),
                "key": _child(self.key, self).to_json(),
                "value": _child(self.value, self).to_json(),
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
            return f"{root}<{_child(self.element, self).full_sql()}>"
        if root == "VECTOR":
            return f"VECTOR<{_child(self.element, self).full_sql()}, {self.vector_length}>"
        if root == "MAP":
            return f"MAP<{_child(self.key, self).full_sql()}, {_child(self.value, self).full_sql()}>"
        if root == "ROW":
            return f"ROW<{', '.join(_field_sql(f) for f in self.fields or ())}>"
        return root

    def full_sql(self) -> str:
        """`sql()` with " NOT NULL" when the type is not nullable."""
        return self.sql() + self._suffix()

    def __str__(self) -> str:
        return self.full_sql()


def _child(value: DataType | None, parent: DataType) -> DataType:
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
    return _checked(DataType("DECIMAL", nullable, precision=precision, scale=scale))


def TIMESTAMP(precision: int = 6, nullable: bool = True) -> DataType:  # noqa: N802
    return _checked(DataType("TIMESTAMP", nullable, precision=precision))


def TIMESTAMP_LTZ(precision: int = 6, nullable: bool = True) -> DataType:  # noqa: N802
    return _checked(DataType("TIMESTAMP_LTZ", nullable, precision=precision))


# -- parsing -------------------------------------------------------------------------------------


class _IdCounter:
    """Java's AtomicInteger(-1) for nested fields written without ids (all or none, like Java)."""

    def __init__(self) -> None:
        self.value = -1
        self.saw_explicit = False

    def next(self) -> int:
        if self.saw_explicit:
            raise TypeParseError("nested fields mix explicit and missing ids")
        self.value += 1
        return self.value


def parse_type(json_value: str | dict[str, Any] | DataType) -> DataType:
    """Parse a type as schema files spell it: canonical strings, aliases, nested JSON objects."""
    if isinstance(json_value, DataType):
        return json_value
    return _parse_json(json_value, _IdCounter())


def _parse_json(value: Any, counter: _IdCounter) -> DataType:
    if isinstance(value, str):
        return _SqlParser(value).parse()
    if not isinstance(value, dict):
        raise TypeParseError(f"not a Paimon type: {value!r}")
    type_text = value.get("type")
    if not isinstance(type_text, str):
        raise TypeParseError(f"nested type without a 'type' string: {value!r}")
    words = type_text.upper().split()
    root = words[0] if words else ""
    # Java reads nullability from the type string only; pypaimon also writes "nullable" (consistently).
    # A file saying NOT NULL either way is taken as NOT NULL.
    nullable = words[-2:] != ["NOT", "NULL"] and value.get("nullable", True) is not False
    try:
        if root in ("ARRAY", "MULTISET") and len(words) in (1, 3):
            return DataType(root, nullable, element=_parse_json(value["element"], counter))
        if root == "VECTOR" and len(words) in (1, 3):
            element = _parse_json(value["element"], counter)
            return _checked(DataType(root, nullable, element=element, vector_length=int(value["length"])))
        if root == "MAP" and len(words) in (1, 3):
            key = _parse_json(value["key"], counter)
            return DataType(root, nullable, key=key, value=_parse_json(value["value"], counter))
        if root == "ROW" and len(words) in (1, 3):
            fields = tuple(_parse_field(f, counter) for f in value["fields"])
            return _checked(DataType(root, nullable, fields=fields))
    except KeyError as missing:
        raise TypeParseError(f"{root} type {value!r} has no {missing}") from None
    except (TypeError, ValueError) as error:
        if isinstance(error, TypeParseError):
            raise
        raise TypeParseError(f"malformed {root} type {value!r}: {error}") from None
    return _SqlParser(type_text).parse().with_nullable(nullable)


def _parse_field(data: Any, counter: _IdCounter) -> DataField:
    if not isinstance(data, dict):
        raise TypeParseError(f"a field must be a JSON object, got {data!r}")
    try:
        name = data["name"]
        raw_type = data["type"]
    except KeyError as missing:
        raise TypeParseError(f"field {data!r} has no {missing}") from None
    if not isinstance(name, str):
        raise TypeParseError(f"field name must be a string: {data!r}")
    if data.get("id") is not None:
        if counter.value != -1:
            raise TypeParseError("nested fields mix explicit and missing ids")
        counter.saw_explicit = True
        try:
            field_id = int(data["id"])
        except (TypeError, ValueError):
            raise TypeParseError(f"field id must be an integer: {data!r}") from None
    else:
        field_id = counter.next()
    description = data.get("description")
    default_value = data.get("defaultValue")
    return DataField(
        field_id,
        name,
        _parse_json(raw_type, counter),
        None if description is None else str(description),
        None if default_value is None else str(default_value),
    )


_TOKEN_RE = re.compile(
    r"\s*(?:(?P<punct>[<>(),])|(?P<int>\d+)|`(?P<quoted>(?:[^`]|``)*)`|'(?P<literal>(?:[^']|'')*)'"
    r"|(?P<word>[^\s<>(),`']+))"
)


class _SqlParser:
    """Recursive descent over Java's type grammar (`DataTypeJsonParser`) plus Flink-style nested forms.

    Accepts: every atomic type with Java's defaults (TIMESTAMP = 6, TIME = 0, DECIMAL = (10, 0),
    CHAR/VARCHAR/BINARY/VARBINARY = 1), aliases INTEGER/DEC/NUMERIC/STRING/BYTES/TIMESTAMP_LTZ,
    "TIMESTAMP(3) WITH LOCAL TIME ZONE", "... WITHOUT TIME ZONE", "DOUBLE PRECISION", explicit NULL /
    NOT NULL, suffix arrays ("INT ARRAY"), ARRAY<..>, MULTISET<..>, MAP<k, v>, ROW<name type 'comment', ..>
    and VECTOR<type, n>.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = list(self._tokenize(text))
        self.pos = 0

    def _tokenize(self, text: str) -> Iterator[tuple[str, str, str]]:
        """(kind, value, raw) with kind punct/int/name/literal/keyword; keywords upper-cased in value."""
        index = 0
        while text[index:].strip():
            match = _TOKEN_RE.match(text, index)
            if not match:
                raise self._error(f"unexpected character {text[index:].lstrip()[:1]!r}")
            kind = match.lastgroup or ""
            raw = match.group(kind)
            if kind == "quoted":
                raw = raw.replace("``", "`")
                yield "name", raw, raw
            elif kind == "literal":
                raw = raw.replace("''", "'")
                yield "literal", raw, raw
            elif kind == "word":
                upper = raw.upper()
                yield ("keyword", upper, raw) if upper in _KEYWORDS else ("name", raw, raw)
            else:
                yield kind, raw, raw
            index = match.end()

    def _error(self, reason: str) -> TypeParseError:
        return TypeParseError(f"not a Paimon type: {self.text!r} ({reason})")

    def _peek(self, offset: int = 0) -> tuple[str, str, str] | None:
        index = self.pos + offset
        return self.tokens[index] if index < len(self.tokens) else None

    def _next(self) -> tuple[str, str, str]:
        token = self._peek()
        if token is None:
            raise self._error("unexpected end")
        self.pos += 1
        return token

    def _expect(self, value: str) -> None:
        kind, token, _ = self._next()
        if token != value or kind == "literal":
            raise self._error(f"expected {value!r}, got {token!r}")

    def _accept(self, *values: str) -> bool:
        for offset, value in enumerate(values):
            token = self._peek(offset)
            if token is None or token[1] != value or token[0] not in ("keyword", "punct"):
                return False
        self.pos += len(values)
        return True

    def _int(self) -> int:
        kind, token, _ = self._next()
        if kind != "int":
            raise self._error(f"expected a number, got {token!r}")
        return int(token)

    def parse(self) -> DataType:
        try:
            data_type = self._type_with_nullability()
        except TypeParseError as error:
            if str(error).startswith("not a Paimon type"):
                raise
            raise self._error(str(error)) from None
        if self._peek() is not None:
            raise self._error(f"unexpected {self._peek()[1]!r}")  # type: ignore[index]
        return data_type

    def _nullability(self) -> bool:
        if self._accept("NOT", "NULL"):
            return False
        self._accept("NULL")
        return True

    def _type_with_nullability(self) -> DataType:
        data_type = self._type().with_nullable(self._nullability())
        while True:  # Java's suffix notation: "INT ARRAY", "STRING NOT NULL MULTISET NOT NULL"
            if self._accept("ARRAY"):
                data_type = DataType("ARRAY", self._nullability(), element=data_type)
            elif self._accept("MULTISET"):
                data_type = DataType("MULTISET", self._nullability(), element=data_type)
            else:
                return data_type

    def _optional_params(self) -> list[int]:
        params: list[int] = []
        if self._accept("("):
            params.append(self._int())
            while self._accept(","):
                params.append(self._int())
            self._expect(")")
        return params

    def _type(self) -> DataType:
        kind, word, _ = self._next()
        if kind != "keyword":
            raise self._error(f"unknown type {word!r}")
        root = _ALIASES.get(word, word)
        if root in _PLAIN_ROOTS:
            if root == "DOUBLE":
                self._accept("PRECISION")
            return DataType(root)
        if root == "STRING":
            return STRING()
        if root == "BYTES":
            return BYTES()
        if root in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
            params = self._params(root, 0, 1)
            return _checked(DataType(root, length=params[0] if params else 1))
        if root == "DECIMAL":
            params = self._params(root, 0, 2)
            precision = params[0] if params else 10
            scale = params[1] if len(params) > 1 else 0
            return _checked(DataType(root, precision=precision, scale=scale))
        if root in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
            params = self._params(root, 0, 1)
            precision = params[0] if params else (0 if root == "TIME" else 6)
            if root != "TIMESTAMP_LTZ" and self._accept("WITHOUT", "TIME", "ZONE"):
                pass
            elif root == "TIMESTAMP" and self._accept("WITH", "LOCAL", "TIME", "ZONE"):
                root = "TIMESTAMP_LTZ"
            return _checked(DataType(root, precision=precision))
        if root in ("ARRAY", "MULTISET"):
            self._expect("<")
            element = self._type_with_nullability()
            self._expect(">")
            return DataType(root, element=element)
        if root == "VECTOR":
            self._expect("<")
            element = self._type_with_nullability()
            self._expect(",")
            length = self._int()
            self._expect(">")
            return _checked(DataType(root, element=element, vector_length=length))
        if root == "MAP":
            self._expect("<")
            key = self._type_with_nullability()
            self._expect(",")
            value = self._type_with_nullability()
            self._expect(">")
            return DataType(root, key=key, value=value)
        if root == "ROW":
            return self._row()
        raise self._error(f"unsupported type {word!r}")

    def _params(self, root: str, low: int, high: int) -> list[int]:
        params = self._optional_params()
        if not low <= len(params) <= high:
            raise self._error(f"{root} takes at most {high} parameter(s)")
        return params

    def _row(self) -> DataType:
        fields: list[DataField] = []
        closing = ">" if self._accept("<") else ")" if self._accept("(") else None
        if closing is None:
            raise self._error("ROW needs its fields: ROW<name type, ...>")
        if not self._accept(closing):
            while True:
                kind, _, name = self._next()
                if kind not in ("name", "keyword"):
                    raise self._error(f"expected a field name, got {name!r}")
                field_type = self._type_with_nullability()
                description = None
                token = self._peek()
                if token is not None and token[0] == "literal":
                    description = self._next()[1]
                fields.append(DataField(-1, name, field_type, description))  # ids: assign_field_ids
                if self._accept(closing):
                    break
                self._expect(",")
        return _checked(DataType("ROW", fields=tuple(fields)))


_KEYWORDS = frozenset(
    {
        *_PLAIN_ROOTS,
        *_ALIASES,
        "CHAR",
        "VARCHAR",
        "STRING",
        "BINARY",
        "VARBINARY",
        "BYTES",
        "DECIMAL",
        "PRECISION",
        "TIME",
        "TIMESTAMP",
        "TIMESTAMP_LTZ",
        "WITH",
        "WITHOUT",
        "LOCAL",
        "ZONE",
        "ARRAY",
        "MULTISET",
        "MAP",
        "ROW",
        "VECTOR",
        "NULL",
        "NOT",
    }
)


def _checked(data_type: DataType) -> DataType:
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
            key = renumber(_child(data_type.key, data_type))
            return replace(data_type, key=key, value=renumber(_child(data_type.value, data_type)))
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


# -- pyarrow ---------------------------------------------------------------------------------------

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
        element = _child(t.element, t)
        return pa.list_(pa.field("element", to_arrow(element), nullable=element.nullable))
    if root == "VECTOR":
        element = _child(t.element, t)
        item = pa.field("element", to_arrow(element), nullable=element.nullable)
        return pa.list_(item, t.vector_length or -1)
    if root == "MAP":
        value = _child(t.value, t)
        return pa.map_(
            pa.field("key", to_arrow(_child(t.key, t)), nullable=False),
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
