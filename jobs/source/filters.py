"""Spark's pushed filters (`pyspark.sql.datasource.Filter`, Spark 4.1+) as the format layer's terms.

Spark hands `pushFilters` the top-level AND terms of a query's filter it can express: comparisons
of one column with a literal, IN, IS [NOT] NULL, LIKE 'x%' and NOT of these (OR never arrives).
Each becomes a `paimon_format.scan.value_filter` term, or None when it cannot be used (a nested
column, LIKE '%x' or '%x%', a literal that is an array, map or row). Matched by class name so this
module imports nothing from Spark: on Spark 4.0 the filter classes do not exist, and no filter comes.
"""

from __future__ import annotations

from typing import Any

from paimon_format.scan.value_filter import Negated, ValueFilter, ValueTest

_COMPARISONS = {
    "EqualTo": "=",
    "EqualNullSafe": "<=>",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
    "StringStartsWith": "starts_with",
}
_NULL_TESTS = {"IsNull": "is_null", "IsNotNull": "is_not_null"}
_SCALARS = (bool, int, float, str, bytes)


def term_of(spark_filter: Any) -> ValueFilter | None:
    """The format-layer term of one pushed Spark filter, or None when the source cannot use it."""
    kind = type(spark_filter).__name__
    if kind == "Not":
        inner = term_of(spark_filter.child)
        return Negated(inner) if inner is not None else None
    column = _column(getattr(spark_filter, "attribute", None))
    if column is None:
        return None
    if kind in _NULL_TESTS:
        return ValueTest(column, _NULL_TESTS[kind])
    if kind in _COMPARISONS and _scalar(spark_filter.value):
        return ValueTest(column, _COMPARISONS[kind], (spark_filter.value,))
    if kind == "In" and all(_scalar(value) for value in spark_filter.value):
        return ValueTest(column, "in", tuple(spark_filter.value))
    return None


def _column(attribute: Any) -> str | None:
    """A top-level column's name; None for a nested field (`a.b`), which no stats describe here."""
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0]
    return None


def _scalar(value: Any) -> bool:
    """Literals a term compares with: None and plain values (numbers, text, dates, times, decimals)."""
    if value is None or isinstance(value, _SCALARS):
        return True
    return type(value).__module__ in ("datetime", "decimal")
