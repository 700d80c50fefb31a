"""Which partitions a user means: a SQL-like predicate or a list of specs, tested on partition values.

Maintenance jobs pick partitions by value (`dt < '2024-01-01'`, `{dt: "2024-05-14", hr: "01"}`).
A typo here must never widen what gets dropped, so parsing is strict: every column must be a
partition key, every literal must fit its column's type, and a malformed text fails with the
position of the problem. Nulls follow SQL's three-valued logic: `dt < '2024-01-01'` does not select
the default partition (null), `dt IS NULL` does, and `NOT` of an unknown stays unknown.

Grammar (keywords case-insensitive):

    expr    := or
    or      := and ("OR" and)*
    and     := unary ("AND" unary)*
    unary   := "NOT" unary | "(" expr ")" | test
    test    := column op literal | column ["NOT"] "IN" "(" literal ("," literal)* ")"
             | column "IS" ["NOT"] "NULL"
    op      := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
    literal := 'text' | number | TRUE | FALSE | DATE 'yyyy-mm-dd' | TIMESTAMP 'yyyy-mm-dd hh:mm:ss'
    column  := name | `name` | "name"
"""

from __future__ import annotations

import datetime as dt
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from paimon_format.errors import PaimonFormatError
from paimon_format.model.partition_spec import PartitionSpecError, parse_partition_value
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataType

_EPOCH = dt.date(1970, 1, 1)


class PredicateError(PaimonFormatError, ValueError):
    """A partition predicate that cannot be parsed or does not fit the table (bad input)."""


# -- tokens -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<string>'(?:[^']|'')*')
  | (?P<quoted>`[^`]+`|"[^"]+")
  | (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<punct>[(),])
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "TRUE", "FALSE", "DATE", "TIMESTAMP"}


@dataclass(frozen=True)
class _Token:
    kind: str  # string, name, number, op, punct, keyword, end
    text: str
    position: int  # 1-based character position in the predicate


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise PredicateError(f"unexpected character {text[position]!r} at position {position + 1}")
        kind = match.lastgroup or ""
        value = match.group()
        if kind == "string":
            tokens.append(_Token("string", value[1:-1].replace("''", "'"), position + 1))
        elif kind == "quoted":
            tokens.append(_Token("name", value[1:-1], position + 1))
        elif kind == "word":
            upper = value.upper()
            if upper in _KEYWORDS:
                tokens.append(_Token("keyword", upper, position + 1))
            else:
                tokens.append(_Token("name", value, position + 1))
        elif kind != "space":
            tokens.append(_Token(kind, value, position + 1))
        position = match.end()
    tokens.append(_Token("end", "", len(text) + 1))
    return tokens


# -- syntax tree --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Literal:
    kind: str  # string, number, boolean, date, timestamp
    text: str
    position: int


@dataclass(frozen=True)
class Comparison:
    column: str
    op: str  # =, !=, <, <=, >, >=
    value: Literal
    position: int


@dataclass(frozen=True)
class InList:
    column: str
    values: tuple[Literal, ...]
    negated: bool
    position: int


@dataclass(frozen=True)
class IsNull:
    column: str
    negated: bool
    position: int


@dataclass(frozen=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not:
    operand: Expr


Expr = Comparison | InList | IsNull | And | Or | Not


class _Parser:
    def __init__(self, text: str) -> None:
        self._tokens = _tokenize(text)
        self._index = 0

    def parse(self) -> Expr:
        if self._peek().kind == "end":
            raise PredicateError("the predicate is empty")
        expr = self._or()
        token = self._peek()
        if token.kind != "end":
            raise PredicateError(f"unexpected {_describe(token)} at position {token.position}")
        return expr

    def _peek(self) -> _Token:
        return self._tokens[self._index]

    def _next(self) -> _Token:
        token = self._tokens[self._index]
        self._index += 1
        return token

    def _accept(self, kind: str, text: str | None = None) -> _Token | None:
        token = self._peek()
        if token.kind == kind and (text is None or token.text == text):
            self._index += 1
            return token
        return None

    def _expect(self, kind: str, text: str, what: str) -> _Token:
        token = self._accept(kind, text)
        if token is None:
            found = self._peek()
            raise PredicateError(f"expected {what} at position {found.position}, found {_describe(found)}")
        return token

    def _or(self) -> Expr:
        expr = self._and()
        while self._accept("keyword", "OR"):
            expr = Or(expr, self._and())
        return expr

    def _and(self) -> Expr:
        expr = self._unary()
        while self._accept("keyword", "AND"):
            expr = And(expr, self._unary())
        return expr

    def _unary(self) -> Expr:
        if self._accept("keyword", "NOT"):
            return Not(self._unary())
        if self._accept("punct", "("):
            expr = self._or()
            self._expect("punct", ")", "')'")
            return expr
        return self._test()

    def _test(self) -> Expr:
        token = self._next()
        if token.kind != "name":
            raise PredicateError(
                f"expected a partition column at position {token.position}, found {_describe(token)}"
            )
        column = token.text
        following = self._next()
        if following.kind == "op":
            op = {"==": "=", "<>": "!="}.get(following.text, following.text)
            return Comparison(column, op, self._literal(), token.position)
        if following.kind == "keyword" and following.text == "IS":
            negated = self._accept("keyword", "NOT") is not None
            self._expect("keyword", "NULL", "NULL")
            return IsNull(column, negated, token.position)
        negated = following.kind == "keyword" and following.text == "NOT"
        if negated:
            following = self._next()
        if following.kind == "keyword" and following.text == "IN":
            self._expect("punct", "(", "'(' after IN")
            values = [self._literal()]
            while self._accept("punct", ","):
                values.append(self._literal())
            self._expect("punct", ")", "')' or ','")
            return InList(column, tuple(values), negated, token.position)
        raise PredicateError(
            f"expected a comparison (=, !=, <, <=, >, >=), IN or IS NULL after {column!r} "
            f"at position {following.position}, found {_describe(following)}"
        )

    def _literal(self) -> Literal:
        token = self._next()
        if token.kind == "string":
            return Literal("string", token.text, token.position)
        if token.kind == "number":
            return Literal("number", token.text, token.position)
        if token.kind == "keyword" and token.text in ("TRUE", "FALSE"):
            return Literal("boolean", token.text, token.position)
        if token.kind == "keyword" and token.text in ("DATE", "TIMESTAMP"):
            value = self._next()
            if value.kind != "string":
                raise PredicateError(
                    f"expected a quoted value after {token.text} at position {value.position}, "
                    f"found {_describe(value)}"
                )
            return Literal(token.text.lower(), value.text, token.position)
        if token.kind == "keyword" and token.text == "NULL":
            raise PredicateError(
                f"NULL at position {token.position} never compares equal: use 'column IS NULL' "
                "to select the default partition"
            )
        raise PredicateError(f"expected a value at position {token.position}, found {_describe(token)}")


def _describe(token: _Token) -> str:
    if token.kind == "end":
        return "the end of the predicate"
    if token.kind == "string":
        return f"'{token.text}'"
    return repr(token.text)


def parse_predicate(text: str) -> Expr:
    """The syntax tree of a predicate; PredicateError naming the position of the first problem."""
    return _Parser(text).parse()


# -- binding to a table's partition columns and testing partitions ------------------------------

# A bound predicate tests a partition's values (in partition-key order): True, False or None (unknown).
PartitionTest = Callable[[Sequence[Any]], "bool | None"]


@dataclass(frozen=True)
class PartitionColumns:
    """What binding needs to know about the table: partition keys, their types, the default name."""

    keys: tuple[str, ...]
    types: tuple[DataType, ...]
    default_name: str = "__DEFAULT_PARTITION__"

    @staticmethod
    def of(schema: TableSchema) -> PartitionColumns:
        return PartitionColumns(
            tuple(schema.partition_keys),
            tuple(schema.partition_types()),
            schema.options.get("partition.default-name", "__DEFAULT_PARTITION__") or "__DEFAULT_PARTITION__",
        )

    def index(self, column: str, position: int | None = None) -> int:
        if column in self.keys:
            return self.keys.index(column)
        lowered = [key.lower() for key in self.keys]
        if lowered.count(column.lower()) == 1:
            return lowered.index(column.lower())
        where = f" at position {position}" if position else ""
        raise PredicateError(
            f"{column!r}{where} is not a partition column (partition keys: {', '.join(self.keys) or 'none'})"
        )


Test = Comparison | InList | IsNull  # the leaves of a predicate


@dataclass(frozen=True)
class Connectives:
    """How a bound predicate combines its parts' results (three-valued logic, or another algebra)."""

    and_: Callable[[Any, Any], Any]
    or_: Callable[[Any, Any], Any]
    not_: Callable[[Any], Any]


def bind_tree(
    expr: Expr, leaf: Callable[[Test], Callable[[Any], Any]], logic: Connectives
) -> Callable[[Any], Any]:
    """A predicate as one function of one argument: `leaf` binds each test, `logic` joins them.
    Shared by the test on partition values and by manifest pruning on partition ranges."""
    if isinstance(expr, And):
        left, right = bind_tree(expr.left, leaf, logic), bind_tree(expr.right, leaf, logic)
        return lambda arg: logic.and_(left(arg), right(arg))
    if isinstance(expr, Or):
        left, right = bind_tree(expr.left, leaf, logic), bind_tree(expr.right, leaf, logic)
        return lambda arg: logic.or_(left(arg), right(arg))
    if isinstance(expr, Not):
        inner = bind_tree(expr.operand, leaf, logic)
        return lambda arg: logic.not_(inner(arg))
    return leaf(expr)


def bind_predicate(expr: Expr, columns: PartitionColumns) -> PartitionTest:
    """A test over partition values; PredicateError when a column or literal does not fit the table."""
    return bind_tree(expr, lambda test: _bind_test(test, columns), _THREE_VALUED)


def _bind_test(expr: Test, columns: PartitionColumns) -> PartitionTest:
    index = columns.index(expr.column, expr.position)
    data_type = columns.types[index]
    if isinstance(expr, IsNull):
        negated = expr.negated
        return lambda values: (values[index] is not None) if negated else (values[index] is None)
    if isinstance(expr, InList):
        wanted = [typed_literal(literal, expr.column, data_type) for literal in expr.values]
        negated = expr.negated

        def test_in(values: Sequence[Any]) -> bool | None:
            value = values[index]
            if value is None:
                return None
            return (value not in wanted) if negated else (value in wanted)

        return test_in
    wanted_value = typed_literal(expr.value, expr.column, data_type)
    compare = _COMPARE[expr.op]

    def test_comparison(values: Sequence[Any]) -> bool | None:
        value = values[index]
        return None if value is None else compare(value, wanted_value)

    return test_comparison


def predicate_test(text: str, columns: PartitionColumns) -> PartitionTest:
    """Parse and bind in one step."""
    return bind_predicate(parse_predicate(text), columns)


def spec_test(spec: Mapping[str, Any], columns: PartitionColumns) -> PartitionTest:
    """A test for one partition spec: every given key equals its value; the default name means null.

    A spec may name only some of the keys (`{dt: "2024-05-14"}` of a table partitioned by dt, hr):
    it then selects every partition with those values.
    """
    wanted = spec_values(spec, columns)
    return lambda values: all(values[index] == value for index, value in wanted)


def spec_values(spec: Mapping[str, Any], columns: PartitionColumns) -> list[tuple[int, Any]]:
    """(column index, value as `deserialize_row` gives it; None for the default name) per spec key."""
    if not spec:
        raise PredicateError("an empty partition spec would select every partition; name at least one key")
    wanted: list[tuple[int, Any]] = []
    for key, raw in spec.items():
        index = columns.index(str(key))
        data_type = columns.types[index]
        try:
            text = raw if isinstance(raw, str) or raw is None else _scalar_text(raw)
            value = parse_partition_value(text, data_type, columns.default_name)
        except PartitionSpecError as error:
            raise PredicateError(f"partition spec {dict(spec)}: {key}: {error}") from None
        wanted.append((index, _normalise(value, data_type)))
    return wanted


def _scalar_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def typed_literal(literal: Literal, column: str, data_type: DataType) -> Any:
    """The literal as the Python value `deserialize_row` gives for the column's type."""
    root = data_type.root
    problem = f"value at position {literal.position} does not fit column {column!r} of type {data_type}"
    text_root = root in ("CHAR", "VARCHAR")
    if literal.kind == "number" and text_root:
        raise PredicateError(f"{problem}: the column holds text, quote the value ('{literal.text}')")
    if literal.kind == "boolean" and root != "BOOLEAN":
        raise PredicateError(f"{problem}: {literal.text} is a boolean")
    if literal.kind == "date" and root != "DATE":
        raise PredicateError(f"{problem}: a DATE literal")
    if literal.kind == "timestamp" and root not in ("TIMESTAMP", "TIMESTAMP_LTZ"):
        raise PredicateError(f"{problem}: a TIMESTAMP literal")
    try:
        value = parse_partition_value(literal.text, data_type, default_name="\0never a default name\0")
    except PartitionSpecError as error:
        raise PredicateError(f"{problem}: {error}") from None
    return _normalise(value, data_type)


def _normalise(value: Any, data_type: DataType) -> Any:
    """Make a parsed value compare equal to what the BinaryRow decoder returns for the same value."""
    if value is None:
        return None
    root = data_type.root
    if root == "DATE" and isinstance(value, int) and not isinstance(value, bool):
        return _EPOCH + dt.timedelta(days=value)
    if root == "FLOAT":
        return struct.unpack("<f", struct.pack("<f", float(value)))[0]
    if root == "DOUBLE":
        return float(value)
    if root == "DECIMAL":
        try:
            quantum = Decimal(1).scaleb(-(data_type.scale or 0))
            return Decimal(value).quantize(quantum)
        except InvalidOperation:
            raise PredicateError(f"{value!r} does not fit {data_type}") from None
    if root in ("TIMESTAMP", "TIMESTAMP_LTZ") and isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    if root in ("TINYINT", "SMALLINT", "INT", "BIGINT") and isinstance(value, float):
        if not value.is_integer():
            raise PredicateError(f"{value!r} is not an integer")
        return int(value)
    return value


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _and(left: bool | None, right: bool | None) -> bool | None:
    if left is False or right is False:
        return False
    if left is None or right is None:
        return None
    return True


def _or(left: bool | None, right: bool | None) -> bool | None:
    if left is True or right is True:
        return True
    if left is None or right is None:
        return None
    return False


def _not(value: bool | None) -> bool | None:
    return None if value is None else not value


_THREE_VALUED = Connectives(_and, _or, _not)


def selects(test: PartitionTest, values: Sequence[Any]) -> bool:
    """Whether a partition is selected: only a definite True counts (unknown is not selected)."""
    return test(values) is True
