"""Parsing Paimon types as schema files and job configs spell them (spec §2).

We parse every alias Java and pypaimon write ("INTEGER", "TIMESTAMP_LTZ", a "nullable" key) and
the SQL forms people type in job configs ("ARRAY<INT>", "ROW<a INT, b STRING>"); `types.py` prints
only Java's canonical form.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from paimon_format.model.types import (
    BYTES,
    STRING,
    DataField,
    DataType,
    TypeParseError,
    check_type,
)

_PLAIN_ROOTS = frozenset(
    {"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DATE", "VARIANT", "BLOB"}
)
_ALIASES = {"INTEGER": "INT", "DEC": "DECIMAL", "NUMERIC": "DECIMAL", "BOOL": "BOOLEAN"}


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


def parse_field(data: dict[str, Any]) -> DataField:
    """A field as schema files write it: id, name, type, and optional description / defaultValue."""
    return _parse_field(data, _IdCounter())


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
            return check_type(DataType(root, nullable, element=element, vector_length=int(value["length"])))
        if root == "MAP" and len(words) in (1, 3):
            key = _parse_json(value["key"], counter)
            return DataType(root, nullable, key=key, value=_parse_json(value["value"], counter))
        if root == "ROW" and len(words) in (1, 3):
            fields = tuple(_parse_field(f, counter) for f in value["fields"])
            return check_type(DataType(root, nullable, fields=fields))
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
            return check_type(DataType(root, length=params[0] if params else 1))
        if root == "DECIMAL":
            params = self._params(root, 0, 2)
            precision = params[0] if params else 10
            scale = params[1] if len(params) > 1 else 0
            return check_type(DataType(root, precision=precision, scale=scale))
        if root in ("TIME", "TIMESTAMP", "TIMESTAMP_LTZ"):
            params = self._params(root, 0, 1)
            precision = params[0] if params else (0 if root == "TIME" else 6)
            if root != "TIMESTAMP_LTZ" and self._accept("WITHOUT", "TIME", "ZONE"):
                pass
            elif root == "TIMESTAMP" and self._accept("WITH", "LOCAL", "TIME", "ZONE"):
                root = "TIMESTAMP_LTZ"
            return check_type(DataType(root, precision=precision))
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
            return check_type(DataType(root, element=element, vector_length=length))
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
        return check_type(DataType("ROW", fields=tuple(fields)))


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
