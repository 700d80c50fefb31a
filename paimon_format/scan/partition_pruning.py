"""Which manifests may hold partitions a selection picks, proven from their partition stats.

Why: a nightly drop of one day from a table with a year of daily manifests must not read the year.
Paimon's own readers skip a manifest whose `_PARTITION_STATS` (min, max and null count of each
partition column over all its entries, ADD and DELETE alike) rule the filter out; this does the same
for the selections of the partition jobs: a predicate (`partition_predicate`), specs, or exact
partitions.

Safety: a manifest is skipped only when its stats prove that no entry's partition is selected, so
every entry of a selected partition, and every DELETE that cancels one (it has the same partition),
is in a manifest that is read. Whatever is not proven is read: stats of another arity or that do
not decode, a bound that is missing while values exist, a column type whose order we do not share
with every writer's stats (binary, and floats with their NaN), a comparison Python cannot make.

How: for each part of a predicate, which of TRUE and FALSE some partition inside the ranges may
give, taken wide where exactness would cost (columns are ranged independently, so combinations are
over-counted); a manifest is read when TRUE is possible for the whole selection, as `selects` counts
only a definite TRUE. SQL's UNKNOWN (a null compared) needs no tracking: no operator turns it into
TRUE (NOT UNKNOWN is UNKNOWN), so a null value adds neither outcome to a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from paimon_format.manifest.entries import ManifestFileMeta, SimpleStats
from paimon_format.model.binary_row import deserialize_row
from paimon_format.model.types import DataType
from paimon_format.scan.partition_predicate import (
    Connectives,
    Expr,
    InList,
    IsNull,
    PartitionColumns,
    Test,
    bind_tree,
    parse_predicate,
    spec_values,
    typed_literal,
)

TRUE, FALSE = 1, 2  # outcome bits
_EITHER = TRUE | FALSE
# Columns never ranged: Java's byte order for binaries is not one we rely on; floats have NaN,
# which Java's stats order last, Python compares with nothing (`x != 'NaN'` holds for every x) and
# pypaimon's min/max can leave out of a range altogether.
_UNRANGED_ROOTS = {"BINARY", "VARBINARY", "FLOAT", "DOUBLE"}

ManifestTest = Callable[[ManifestFileMeta], bool]  # True: the manifest may hold a selected partition


@dataclass(frozen=True)
class ColumnRange:
    """What a manifest's stats prove about one partition column of its entries."""

    low: Any
    high: Any
    has_values: bool  # some entry's value may be non-null
    has_nulls: bool  # some entry's value may be null
    ordered: bool  # every non-null value lies in [low, high]

    def may_equal(self, value: Any) -> bool:
        """Whether some entry's value may equal `value` (None: null)."""
        if value is None:
            return self.has_nulls
        if not self.has_values:
            return False
        if not self.ordered:
            return True
        return _compares(lambda: self.low <= value <= self.high)

    def only(self, value: Any) -> bool:
        """Whether every entry's value is proven to equal the non-null `value`."""
        return (
            self.ordered
            and self.has_values
            and not self.has_nulls
            and _compares(lambda: self.low == value == self.high, default=False)
        )


def column_ranges(meta: ManifestFileMeta, types: Sequence[DataType]) -> list[ColumnRange] | None:
    """The ranges of a manifest's partition columns; None when its stats prove nothing."""
    return stats_ranges(meta.partition_stats, types, meta.num_added_files + meta.num_deleted_files)


def stats_ranges(stats: SimpleStats, types: Sequence[DataType], entries: int) -> list[ColumnRange] | None:
    """The ranges min/max/null-count stats over `entries` values per column prove (a manifest's
    partition stats, a data file's value stats); None when they prove nothing."""
    try:
        lows = deserialize_row(stats.min_values, types)
        highs = deserialize_row(stats.max_values, types)
    except Exception:  # noqa: BLE001 - stats of another arity or broken bytes: read the manifest
        return None
    nulls = stats.null_counts if stats.null_counts is not None else []
    ranges = []
    for index, data_type in enumerate(types):
        null_count = nulls[index] if index < len(nulls) else None
        has_nulls = null_count is None or null_count > 0
        has_values = null_count is None or null_count < entries
        low, high = lows[index], highs[index]
        ordered = (
            data_type.root not in _UNRANGED_ROOTS
            and low is not None
            and high is not None
            and not _is_nan(low)
            and not _is_nan(high)
            and _compares(lambda low=low, high=high: low <= high, default=False)
        )
        ranges.append(ColumnRange(low, high, has_values, has_nulls, ordered))
    return ranges


def predicate_pruner(text: str, columns: PartitionColumns) -> ManifestTest:
    """The manifests a partition predicate may select from (PredicateError as `predicate_test`)."""
    outcomes = _bind(parse_predicate(text), columns)
    return _pruner(columns.types, lambda ranges: bool(outcomes(ranges) & TRUE))


def spec_pruner(spec: Mapping[str, Any], columns: PartitionColumns) -> ManifestTest:
    """The manifests a partition spec (some or all keys) may select from."""
    wanted = spec_values(spec, columns)
    return _pruner(columns.types, lambda ranges: all(ranges[i].may_equal(v) for i, v in wanted))


def partitions_pruner(partitions: Iterable[bytes], types: Sequence[DataType]) -> ManifestTest:
    """The manifests that may hold any of these exact partitions (serialized BinaryRows)."""
    rows = [deserialize_row(partition, types) for partition in set(partitions)]

    def may_hold(ranges: list[ColumnRange]) -> bool:
        return any(all(r.may_equal(value) for r, value in zip(ranges, row, strict=True)) for row in rows)

    return _pruner(types, may_hold)


def any_of(tests: Sequence[ManifestTest]) -> ManifestTest:
    """A manifest some of the tests may select from (specs are alternatives)."""
    return lambda meta: any(test(meta) for test in tests)


def _pruner(types: Sequence[DataType], may_select: Callable[[list[ColumnRange]], bool]) -> ManifestTest:
    types = tuple(types)

    def test(meta: ManifestFileMeta) -> bool:
        ranges = column_ranges(meta, types)
        return ranges is None or may_select(ranges)

    return test


# -- a predicate over ranges: the outcomes it may give ----------------------------------------------

Outcomes = Callable[[list[ColumnRange]], int]


def _bind(expr: Expr, columns: PartitionColumns) -> Outcomes:
    return bind_tree(expr, lambda test: _bind_test(test, columns), _OUTCOME_LOGIC)


def _bind_test(expr: Test, columns: PartitionColumns) -> Outcomes:
    index = columns.index(expr.column, expr.position)
    data_type = columns.types[index]
    if isinstance(expr, IsNull):
        negated = expr.negated

        def is_null(ranges: list[ColumnRange]) -> int:
            column = ranges[index]
            null, value = (FALSE, TRUE) if negated else (TRUE, FALSE)
            return (null if column.has_nulls else 0) | (value if column.has_values else 0)

        return is_null
    if isinstance(expr, InList):
        listed = [typed_literal(literal, expr.column, data_type) for literal in expr.values]
        inside, outside = (FALSE, TRUE) if expr.negated else (TRUE, FALSE)

        def in_list(ranges: list[ColumnRange]) -> int:
            column = ranges[index]
            out = 0
            if column.has_values:
                if any(column.may_equal(value) for value in listed):
                    out |= inside
                if not any(column.only(value) for value in listed):
                    out |= outside
            return out

        return in_list
    value = typed_literal(expr.value, expr.column, data_type)
    compare = _RANGE_COMPARE[expr.op]

    def comparison(ranges: list[ColumnRange]) -> int:
        column = ranges[index]
        if not column.has_values:
            return 0
        if not column.ordered:
            return _EITHER
        return _compares(lambda: compare(column, value), default=_EITHER)

    return comparison


def _between(column: ColumnRange, value: Any) -> bool:
    return column.low <= value <= column.high


# op -> the outcomes (TRUE/FALSE) some non-null value in [low, high] may give against `value`
_RANGE_COMPARE: dict[str, Callable[[ColumnRange, Any], int]] = {
    "=": lambda c, v: (TRUE if _between(c, v) else 0) | (0 if c.low == v == c.high else FALSE),
    "!=": lambda c, v: (0 if c.low == v == c.high else TRUE) | (FALSE if _between(c, v) else 0),
    "<": lambda c, v: (TRUE if c.low < v else 0) | (FALSE if c.high >= v else 0),
    "<=": lambda c, v: (TRUE if c.low <= v else 0) | (FALSE if c.high > v else 0),
    ">": lambda c, v: (TRUE if c.high > v else 0) | (FALSE if c.low <= v else 0),
    ">=": lambda c, v: (TRUE if c.high >= v else 0) | (FALSE if c.low < v else 0),
}


def _and(left: int, right: int) -> int:
    return (TRUE if left & right & TRUE else 0) | ((left | right) & FALSE)


def _or(left: int, right: int) -> int:
    return ((left | right) & TRUE) | (FALSE if left & right & FALSE else 0)


def _not(outcomes: int) -> int:
    return (FALSE if outcomes & TRUE else 0) | (TRUE if outcomes & FALSE else 0)


_OUTCOME_LOGIC = Connectives(_and, _or, _not)


def _compares(check: Callable[[], Any], default: Any = True) -> Any:
    """`check()`, or `default` when Python cannot compare the values (the wide answer)."""
    try:
        return check()
    except (TypeError, ValueError, ArithmeticError):
        return default


def _is_nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)
