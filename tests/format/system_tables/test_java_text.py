"""Values spelled as Paimon's Java prints them (the outputs of `Double.toString`, `Duration.toString`,
`LocalDateTime.toString` and Paimon's casts to STRING, as the JDK documents them)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from paimon_format.model.type_parsing import parse_type
from paimon_format.system_tables.java_text import (
    cast_text,
    duration_text,
    internal_text,
    java_double_text,
    java_float_text,
    local_date_time_text,
    partition_path_text,
    row_cast_text,
    tree_map_text,
)


@pytest.mark.parametrize(
    "value, text",
    [
        (1.0, "1.0"),
        (0.001, "0.001"),
        (1.5e-4, "1.5E-4"),
        (1e7, "1.0E7"),
        (12345678.0, "1.2345678E7"),
        (-2.5e-9, "-2.5E-9"),
        (123456.789, "123456.789"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
    ],
)
def test_doubles_as_java_prints_them(value: float, text: str) -> None:
    assert java_double_text(value) == text


def test_floats_print_their_shortest_float_digits() -> None:
    assert java_float_text(0.10000000149011612) == "0.1"  # 0.1f widened to a double
    assert java_float_text(3.0) == "3.0"


@pytest.mark.parametrize(
    "millis, text",
    [
        (0, "PT0S"),
        (500, "PT0.5S"),
        (3_600_000, "PT1H"),
        (5_400_000, "PT1H30M"),
        (172_800_000, "PT48H"),
        (61_250, "PT1M1.25S"),
    ],
)
def test_durations_as_java_prints_them(millis: int, text: str) -> None:
    assert duration_text(millis) == text


def test_local_date_times_drop_zero_seconds_and_group_fractions_by_three() -> None:
    assert local_date_time_text(dt.datetime(2024, 1, 2, 3, 4)) == "2024-01-02T03:04"
    assert local_date_time_text(dt.datetime(2024, 1, 2, 3, 4, 5)) == "2024-01-02T03:04:05"
    assert local_date_time_text(dt.datetime(2024, 1, 2, 3, 4, 5, 120000)) == "2024-01-02T03:04:05.120"
    assert local_date_time_text(dt.datetime(2024, 1, 2, 3, 4, 5, 123456)) == "2024-01-02T03:04:05.123456"


def test_internal_values_and_casts_differ_where_java_does() -> None:
    date, ts, time = parse_type("DATE"), parse_type("TIMESTAMP(3)"), parse_type("TIME")
    day = dt.date(2024, 1, 2)
    assert internal_text(day, date) == "19724" and cast_text(day, date) == "2024-01-02"
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, 100000)
    assert internal_text(moment, ts) == "2024-01-02T03:04:05.100"
    assert cast_text(moment, ts) == "2024-01-02 03:04:05.100"  # never fewer digits than the precision
    assert cast_text(moment.replace(microsecond=123456), ts) == "2024-01-02 03:04:05.123456"
    assert cast_text(moment.replace(microsecond=0), parse_type("TIMESTAMP(0)")) == "2024-01-02 03:04:05"
    assert cast_text(dt.time(0, 0, 1, 500000), parse_type("TIME(3)")) == "00:00:01.5"
    assert internal_text(dt.time(0, 0, 1, 500000), time) == "1500"
    assert cast_text(Decimal("1.50"), parse_type("DECIMAL(10, 2)")) == "1.50"
    assert internal_text(True, parse_type("BOOLEAN")) == "true" and internal_text(None, date) == "null"


def test_rows_partitions_and_maps() -> None:
    types = [parse_type("DATE"), parse_type("STRING"), parse_type("INT")]
    values = [dt.date(2024, 1, 2), "eu/west", None]
    assert row_cast_text(values, types) == "{2024-01-02, eu/west, null}"
    assert partition_path_text(values, ["dt", "region", "hr"], types, "__DEFAULT__") == (
        "dt=2024-01-02/region=eu/west/hr=__DEFAULT__"
    )
    assert tree_map_text([("v", "1"), ("a", "null")]) == "{a=null, v=1}"
