"""The source's filters without Spark running: Spark's pushed filter objects as format-layer terms,
and what a term means for an exact value (partitions) and for a range of stats (manifests, files)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from jobs.source.filters import term_of
from paimon_format.model.types import DataType
from paimon_format.scan.partition_pruning import ColumnRange
from paimon_format.scan.value_filter import (
    EITHER,
    FALSE,
    TRUE,
    Negated,
    ValueTest,
    evaluate,
    literal_fits,
    normalise,
    outcomes,
)

datasource = pytest.importorskip("pyspark.sql.datasource")
if not hasattr(datasource, "EqualTo"):
    pytest.skip("this pyspark has no pushed filters (Spark 4.1+)", allow_module_level=True)


@pytest.mark.parametrize(
    "spark_filter, term",
    [
        (datasource.EqualTo(("a",), 1), ValueTest("a", "=", (1,))),
        (datasource.EqualNullSafe(("a",), None), ValueTest("a", "<=>", (None,))),
        (datasource.GreaterThanOrEqual(("a",), "x"), ValueTest("a", ">=", ("x",))),
        (datasource.LessThan(("d",), dt.date(2024, 1, 2)), ValueTest("d", "<", (dt.date(2024, 1, 2),))),
        (datasource.In(("a",), (1, None)), ValueTest("a", "in", (1, None))),
        (datasource.IsNotNull(("a",)), ValueTest("a", "is_not_null")),
        (datasource.StringStartsWith(("s",), "ab"), ValueTest("s", "starts_with", ("ab",))),
        (datasource.Not(datasource.EqualTo(("a",), 3)), Negated(ValueTest("a", "=", (3,)))),
        (datasource.EqualTo(("r", "x"), 1), None),  # a nested field: no stats describe it here
        (datasource.EqualTo(("a",), [1, 2]), None),  # an array literal
        (datasource.StringEndsWith(("s",), "ab"), None),  # no range says anything about a suffix
        (datasource.Not(datasource.StringContains(("s",), "ab")), None),
    ],
)
def test_spark_filters_become_terms_or_nothing(spark_filter, term):
    assert term_of(spark_filter) == term


@pytest.mark.parametrize(
    "term, value, expected",
    [
        (ValueTest("a", "=", (1,)), 1, True),
        (ValueTest("a", "=", (1,)), None, None),  # null compared: UNKNOWN, never selected
        (Negated(ValueTest("a", "=", (1,))), None, None),
        (ValueTest("a", "<=>", (None,)), None, True),
        (ValueTest("a", "<=>", (1,)), None, False),
        (ValueTest("a", "in", (1, None)), 2, None),  # x IN (1, NULL) is UNKNOWN for 2, as in SQL
        (ValueTest("a", "in", (1, None)), 1, True),
        (Negated(ValueTest("a", "in", (1, 2))), 3, True),
        (ValueTest("a", "is_null"), None, True),
        (ValueTest("s", "starts_with", ("eu",)), "eu/west", True),
        (ValueTest("s", "starts_with", ("eu",)), "us", False),
        (ValueTest("d", ">=", (dt.date(2024, 1, 3),)), dt.date(2024, 1, 2), False),
    ],
)
def test_a_term_on_an_exact_value_is_sqls_three_valued_logic(term, value, expected):
    assert evaluate(term, value) is expected


def _range(low, high, nulls: bool = False, values: bool = True, ordered: bool = True) -> ColumnRange:
    return ColumnRange(low, high, values, nulls, ordered)


@pytest.mark.parametrize(
    "term, column, expected",
    [
        (ValueTest("a", ">", (10,)), _range(0, 10), FALSE),  # no value above 10: skip
        (ValueTest("a", ">", (10,)), _range(0, 11), EITHER),
        (ValueTest("a", "=", (5,)), _range(5, 5), TRUE),
        (ValueTest("a", "=", (5,)), _range(6, 9, nulls=True), FALSE),  # nulls add UNKNOWN only
        (Negated(ValueTest("a", "=", (5,))), _range(5, 5), FALSE),  # every value is 5: NOT never TRUE
        (ValueTest("a", "in", (1, 20)), _range(2, 19), FALSE),
        (ValueTest("a", "is_null"), _range(1, 2), FALSE),
        (ValueTest("a", "is_not_null"), _range(None, None, nulls=True, values=False, ordered=False), FALSE),
        (ValueTest("a", "<", (3,)), _range(None, None, nulls=True, values=False, ordered=False), 0),
        (ValueTest("a", "<", (3,)), _range(0.5, 9.0, ordered=False), EITHER),  # unranged: read it
        (ValueTest("a", "<", ("x",)), _range(1, 9), EITHER),  # a literal of another type: read it
        (ValueTest("s", "starts_with", ("s3",)), _range("s1-1", "s2-9"), FALSE),
        (ValueTest("s", "starts_with", ("s3",)), _range("s4", "s9"), FALSE),
        (ValueTest("s", "starts_with", ("s3",)), _range("s3-1", "s4"), EITHER),
        (ValueTest("s", "starts_with", ("s3",)), _range("s2", "s3"), EITHER),  # 's3' itself
    ],
)
def test_a_term_on_a_range_gives_every_outcome_some_value_may_give(term, column, expected):
    assert outcomes(term, column) == expected


def test_only_literals_of_the_columns_own_type_are_applied_exactly():
    date, bigint, double = DataType("DATE"), DataType("BIGINT"), DataType("DOUBLE")
    assert literal_fits(ValueTest("d", "=", (dt.date(2024, 1, 2),)), date)
    assert not literal_fits(ValueTest("d", "=", (dt.datetime(2024, 1, 2),)), date)
    assert not literal_fits(ValueTest("d", "=", ("2024-01-02",)), date)
    assert literal_fits(ValueTest("n", "in", (1, None)), bigint)
    assert not literal_fits(ValueTest("n", "=", (True,)), bigint)  # a bool is an int in Python
    assert not literal_fits(ValueTest("n", "=", (1.5,)), bigint)
    assert not literal_fits(ValueTest("x", "=", (1.5,)), double)  # NaN: never exact
    assert literal_fits(ValueTest("x", "=", (Decimal("1.5"),)), DataType("DECIMAL", precision=10, scale=2))


def test_an_instant_with_a_zone_compares_as_naive_utc_like_the_stats():
    moment = dt.datetime(2024, 6, 1, 14, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert normalise(moment, DataType("TIMESTAMP_LTZ")) == dt.datetime(2024, 6, 1, 12, 0)
