"""Filters on column values that a read uses before it opens a file: partitions it never plans,
manifests it never reads, data files it never opens.

Why: a query engine hands a reader the simple terms of its WHERE clause (`dt = '2024-05-14'`,
`id > 100`, `name LIKE 'a%'`); a table of a year of partitions and thousands of files should not be
read whole to answer them. This module knows the format side: what a term means for an exact
partition value, for a manifest's partition stats and for a data file's value stats. The engine
side (which terms arrive, and in what shape) lives with the engine (`jobs/source/filters.py`).

Safety: a term is one of the conjuncts of the query's filter, so skipping is allowed only where it
is proven that no row of the skipped thing makes the term TRUE. Ranges come from
`partition_pruning.stats_ranges` (truncated string bounds still bound every value; floats, doubles
and binaries are never ranged), so an unproven case reads. For primary-key tables whose reads merge
files, a file may be skipped only by key columns: every version of a key has the key's value, so all
versions of a matching key stay together, while a value column's stats in an old version say nothing
about the newest one.

Nulls follow SQL: a comparison with null is UNKNOWN, which no term turns into TRUE (`NOT` of UNKNOWN
is UNKNOWN), so a null adds no outcome; `<=>` (null-safe equality) and IS [NOT] NULL do see nulls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from paimon_format.manifest.entries import DataFileMeta, ManifestEntry, ManifestFileMeta
from paimon_format.model.schema import TableSchema
from paimon_format.model.types import DataType
from paimon_format.scan.partition_pruning import ColumnRange, column_ranges, stats_ranges

TRUE, FALSE = 1, 2  # outcome bits: which truth values some row may give
EITHER = TRUE | FALSE
OPS = ("=", "<=>", "<", "<=", ">", ">=", "in", "is_null", "is_not_null", "starts_with")
# Types whose values compare in Python exactly as the engine compares them: a partition term on these
# is applied exactly (the engine need not re-apply it). CHAR is padded, floats have NaN: never exact.
_EXACT_TYPES: dict[str, tuple[type, ...]] = {
    "TINYINT": (int,),
    "SMALLINT": (int,),
    "INT": (int,),
    "BIGINT": (int,),
    "VARCHAR": (str,),
    "DATE": (dt.date,),
    "BOOLEAN": (bool,),
    "DECIMAL": (Decimal, int),
}


@dataclass(frozen=True)
class ValueTest:
    """One term on one top-level column: `column op values` (`values` empty for the null tests,
    one value for comparisons and `starts_with`, the list for `in`)."""

    column: str
    op: str
    values: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"unknown filter operator {self.op!r} (known: {', '.join(OPS)})")


@dataclass(frozen=True)
class Negated:
    """NOT of a term."""

    operand: ValueFilter


ValueFilter = ValueTest | Negated


def column_of(term: ValueFilter) -> str:
    """The one column a term is about."""
    return _leaf(term).column


def _leaf(term: ValueFilter) -> ValueTest:
    while isinstance(term, Negated):
        term = term.operand
    return term


def normalise(value: Any, data_type: DataType) -> Any:
    """An engine's literal as `deserialize_row` gives the column's values: instants with a zone
    (TIMESTAMP_LTZ) as naive UTC, a date-time for a DATE column left as it is (it then fits nothing)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def literal_fits(term: ValueFilter, data_type: DataType) -> bool:
    """Whether every literal of the term has the Python type of the column's exact-compare type."""
    accepted = _EXACT_TYPES.get(data_type.root)
    if accepted is None:
        return False
    for value in _leaf(term).values:
        if value is None:
            continue
        if isinstance(value, bool) != (data_type.root == "BOOLEAN") or not isinstance(value, accepted):
            return False
        if isinstance(value, dt.datetime):  # a datetime is a date too: not a DATE literal
            return False
    return True


# -- exact values (partitions) ------------------------------------------------------------------


def evaluate(term: ValueFilter, value: Any) -> bool | None:
    """The term on one exact value: True, False or None (SQL's UNKNOWN)."""
    if isinstance(term, Negated):
        inner = evaluate(term.operand, value)
        return None if inner is None else not inner
    op, values = term.op, term.values
    if op == "is_null":
        return value is None
    if op == "is_not_null":
        return value is not None
    if op == "<=>":
        return value == values[0] if value is not None and values[0] is not None else value is values[0]
    if value is None:
        return None
    if op == "in":
        listed = [v for v in values if v is not None]
        return True if value in listed else (None if len(listed) < len(values) else False)
    if values[0] is None:
        return None
    if op == "starts_with":
        return value.startswith(values[0])
    return _COMPARE[op](value, values[0])


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


# -- ranges (manifest partition stats, data-file value stats) ---------------------------------------


def outcomes(term: ValueFilter, column: ColumnRange) -> int:
    """Which of TRUE and FALSE some value inside the range may give (wide where unsure)."""
    if isinstance(term, Negated):
        inner = outcomes(term.operand, column)
        return (FALSE if inner & TRUE else 0) | (TRUE if inner & FALSE else 0)
    op, values = term.op, term.values
    nulls = column.has_nulls
    if op in ("is_null", "is_not_null") or (op == "<=>" and values[0] is None):
        is_null, not_null = (TRUE, FALSE) if op != "is_not_null" else (FALSE, TRUE)
        return (is_null if nulls else 0) | (not_null if column.has_values else 0)
    if op == "<=>":
        return (TRUE if column.may_equal(values[0]) else 0) | (
            FALSE if nulls or not column.only(values[0]) else 0
        )
    if not column.has_values:
        return 0  # every value null: UNKNOWN only
    if op == "in":
        listed = [v for v in values if v is not None]
        return (TRUE if any(column.may_equal(v) for v in listed) else 0) | (
            0 if any(column.only(v) for v in listed) else FALSE
        )
    if not column.ordered or values[0] is None:
        return EITHER if values[0] is not None else 0
    return _checked(lambda: _RANGE[op](column, values[0]))


def _starts_with(column: ColumnRange, prefix: str) -> int:
    """Values with the prefix lie in [prefix, anything that starts with it]: none when the range ends
    below the prefix, or starts above it without starting with it."""
    low, high = column.low, column.high
    below = high < prefix
    above = low > prefix and not low.startswith(prefix)
    return (0 if below or above else TRUE) | FALSE


_RANGE: dict[str, Callable[[ColumnRange, Any], int]] = {
    "=": lambda c, v: (TRUE if c.low <= v <= c.high else 0) | (0 if c.low == v == c.high else FALSE),
    "<": lambda c, v: (TRUE if c.low < v else 0) | (FALSE if c.high >= v else 0),
    "<=": lambda c, v: (TRUE if c.low <= v else 0) | (FALSE if c.high > v else 0),
    ">": lambda c, v: (TRUE if c.high > v else 0) | (FALSE if c.low <= v else 0),
    ">=": lambda c, v: (TRUE if c.high >= v else 0) | (FALSE if c.low < v else 0),
    "starts_with": _starts_with,
}


def _checked(check: Callable[[], int]) -> int:
    """`check()`, or both outcomes when Python cannot compare the values (a literal of another type)."""
    try:
        return check()
    except (TypeError, ValueError, ArithmeticError, AttributeError):
        return EITHER


# -- what a read skips --------------------------------------------------------------------------


@dataclass
class SkipCounts:
    """What a read's filters skipped, for its log and its record."""

    partitions_skipped: set[bytes] = field(default_factory=set)
    manifests_read: int = 0
    manifests_skipped: int = 0
    files_skipped: int = 0
    files_kept: int = 0


@dataclass
class PartitionTerms:
    """Terms on partition columns, applied exactly to partition values and widely to manifests."""

    terms: list[tuple[int, ValueFilter]]  # (partition column index, term)
    partition_types: Sequence[DataType]
    counts: SkipCounts

    def accepts(self, values: Sequence[Any]) -> bool:
        """Whether a partition (its values) may hold matching rows: only a definite TRUE counts."""
        return all(evaluate(term, values[index]) is True for index, term in self.terms)

    def manifest_may_match(self, meta: ManifestFileMeta) -> bool:
        """Whether a manifest's partition stats leave room for a matching partition (counted)."""
        ranges = column_ranges(meta, self.partition_types)
        keep = ranges is None or all(outcomes(term, ranges[index]) & TRUE for index, term in self.terms)
        if keep:
            self.counts.manifests_read += 1
        else:
            self.counts.manifests_skipped += 1
        return keep


class FileSkipping:
    """Which data files hold no row making every term TRUE, proven by their value stats.

    Terms name columns of `read_schema` (the schema the read returns); a file written under an older
    schema is matched by field id, and a column it does not have, or has with another type root,
    proves nothing. Stats are decoded once per file, only for the columns terms name.
    """

    def __init__(
        self, read_schema: TableSchema, terms: Sequence[ValueFilter], schemas: Callable[[int], TableSchema]
    ) -> None:
        by_name = {f.name: f for f in read_schema.fields}
        self._terms = [(by_name[column_of(t)], t) for t in terms if column_of(t) in by_name]
        self._schemas = schemas
        self.counts = SkipCounts()

    @property
    def active(self) -> bool:
        return bool(self._terms)

    def keeps(self, entry: ManifestEntry) -> bool:
        """False when the file's stats prove no row matches (counted either way)."""
        keep = self._may_match(entry.file)
        if keep:
            self.counts.files_kept += 1
        else:
            self.counts.files_skipped += 1
        return keep

    def _may_match(self, meta: DataFileMeta) -> bool:
        file_schema = self._schemas(meta.schema_id)
        stats_names = (
            meta.value_stats_cols if meta.value_stats_cols is not None else file_schema.field_names()
        )
        file_fields = {f.id: f for f in file_schema.fields}
        by_name = {f.name: f for f in file_schema.fields}
        try:
            stats_types = [by_name[name].type for name in stats_names]
        except KeyError:
            return True  # stats of columns the schema does not know: prove nothing
        ranges = stats_ranges(meta.value_stats, stats_types, meta.row_count)
        if ranges is None:
            return True
        for read_field, term in self._terms:
            file_field = file_fields.get(read_field.id)
            if file_field is None or file_field.type.root != read_field.type.root:
                continue
            if file_field.name not in stats_names:
                continue
            column = ranges[stats_names.index(file_field.name)]
            if not outcomes(_normalised(term, read_field.type), column) & TRUE:
                return False
        return True


def _normalised(term: ValueFilter, data_type: DataType) -> ValueFilter:
    if isinstance(term, Negated):
        return Negated(_normalised(term.operand, data_type))
    return ValueTest(term.column, term.op, tuple(normalise(v, data_type) for v in term.values))
