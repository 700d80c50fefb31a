"""Partition predicates and specs: syntax errors with positions, typed literals, SQL null logic."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

import pytest

from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.partition_predicate import (
    PartitionColumns,
    PredicateError,
    parse_predicate,
    predicate_test,
    selects,
    spec_test,
)

COLUMNS = PartitionColumns(
    ("dt", "hr", "day", "amount", "flag"),
    tuple(parse_type(t) for t in ("STRING", "INT", "DATE", "DECIMAL(10, 2)", "BOOLEAN")),
)
ROWS = [
    ("2023-12-31", 1, dt.date(2023, 12, 31), Decimal("1.50"), True),
    ("2024-01-01", 2, dt.date(2024, 1, 1), Decimal("2.00"), False),
    ("2024-01-02", 3, dt.date(2024, 1, 2), Decimal("3.25"), True),
    (None, None, None, None, None),
]


def selected(text: str) -> list[int]:
    test = predicate_test(text, COLUMNS)
    return [i for i, row in enumerate(ROWS) if selects(test, row)]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("dt < '2024-01-01'", [0]),
        ("dt <= '2024-01-01'", [0, 1]),
        ("dt != '2024-01-01'", [0, 2]),
        ("dt <> '2024-01-01'", [0, 2]),
        ("hr > 1 AND hr >= 3", [2]),
        ("hr = 1 OR hr == 3", [0, 2]),
        ("hr IN (1, 2)", [0, 1]),
        ("hr NOT IN (1, 2)", [2]),
        ("NOT hr IN (1, 2)", [2]),
        ("NOT (hr = 1)", [1, 2]),  # null stays unknown under NOT
        ("dt IS NULL", [3]),
        ("dt IS NOT NULL AND NOT (dt = '2024-01-01')", [0, 2]),
        ("day < DATE '2024-01-01'", [0]),
        ("day >= '2024-01-01'", [1, 2]),
        ("amount > 2", [2]),
        ("amount = '2.0'", [1]),
        ("flag = true", [0, 2]),
        ("(hr = 1 OR hr = 2) AND flag = FALSE", [1]),
        ("hr = 1 OR dt IS NULL", [0, 3]),
        ("`dt` = '2024-01-02'", [2]),
        ("DT = '2024-01-02'", [2]),
    ],
)
def test_predicates_select_like_sql(text, expected):
    assert selected(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "empty"),
        ("dt <", "expected a value at position 5"),
        ("dt < '2024' AND", "position 16"),
        ("dt ~ 'x'", "unexpected character '~' at position 4"),
        ("(dt = 'a'", "expected ')' at position 10"),
        ("dt = 'a')", "unexpected ')' at position 9"),
        ("dt IN 'a'", "'(' after IN"),
        ("dt IS 'a'", "expected NULL"),
        ("dt = NULL", "IS NULL"),
        ("dt = 'unclosed", "unexpected character"),
        ("'a' = dt", "expected a partition column at position 1"),
        ("dt LIKE 'a%'", "position 4"),
    ],
)
def test_syntax_errors_name_the_position(text, message):
    with pytest.raises(PredicateError, match=re.escape(message)):
        predicate_test(text, COLUMNS)


@pytest.mark.parametrize(
    "text, message",
    [
        ("v = 'a'", "'v' at position 1 is not a partition column"),
        ("hr = 'x'", "does not fit column 'hr'"),
        ("hr = 1.5", "does not fit column 'hr'"),
        ("dt = 5", "quote the value"),
        ("day = DATE '2024-13-01'", "does not fit column 'day'"),
        ("hr = DATE '2024-01-01'", "DATE literal"),
        ("flag = 'maybe'", "does not fit column 'flag'"),
        ("hr = TRUE", "boolean"),
    ],
)
def test_literals_must_fit_their_column(text, message):
    with pytest.raises(PredicateError, match=message):
        predicate_test(text, COLUMNS)


def test_syntax_is_checked_without_a_table():
    with pytest.raises(PredicateError, match="position 9"):
        parse_predicate("a = 'x' b = 'y'")


def test_specs_match_given_keys_typed_and_the_default_name_is_null():
    assert [i for i, r in enumerate(ROWS) if selects(spec_test({"hr": 2}, COLUMNS), r)] == [1]
    assert [i for i, r in enumerate(ROWS) if selects(spec_test({"hr": "3", "flag": True}, COLUMNS), r)] == [2]
    assert [i for i, r in enumerate(ROWS) if selects(spec_test({"day": "2024-01-01"}, COLUMNS), r)] == [1]
    assert [
        i for i, r in enumerate(ROWS) if selects(spec_test({"dt": "__DEFAULT_PARTITION__"}, COLUMNS), r)
    ] == [3]
    with pytest.raises(PredicateError, match="not a partition column"):
        spec_test({"nope": "x"}, COLUMNS)
    with pytest.raises(PredicateError, match="hr"):
        spec_test({"hr": "two"}, COLUMNS)
    with pytest.raises(PredicateError, match="every partition"):
        spec_test({}, COLUMNS)
