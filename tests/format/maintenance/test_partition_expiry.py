"""Partition expiry rules: Java formatter subset, timestamp patterns, selection order and caps."""

from __future__ import annotations

import datetime as dt

import pytest

from paimon_format.commit import PrewrittenDelta, SnapshotCommit
from paimon_format.maintenance.partition_expiry import (
    ExpiryConfigError,
    ExpiryRule,
    TimestampFormatter,
    parse_default_timestamp,
    partition_time,
    select_expired,
)
from paimon_format.manifest.entries import DELETE
from paimon_format.manifest.files import rolling_write_manifests
from paimon_format.model.partition_spec import PartitionStats
from paimon_format.model.type_parsing import parse_type
from paimon_format.scan.partition_predicate import PartitionColumns
from paimon_format.scan.snapshot_scan import live_entries
from tests.support.factories import data_file, make_table, message

DAY = 86_400_000


@pytest.mark.parametrize(
    "pattern, text, expected",
    [
        ("yyyy-MM-dd", "2024-05-14", dt.datetime(2024, 5, 14)),
        ("yyyyMMdd", "20240514", dt.datetime(2024, 5, 14)),
        ("yyyy-MM-dd HH:mm:ss", "2024-05-14 07:08:09", dt.datetime(2024, 5, 14, 7, 8, 9)),
        ("yyyyMMddHH", "2024051407", dt.datetime(2024, 5, 14, 7)),
        ("yyyy/M/d H", "2024/5/4 7", dt.datetime(2024, 5, 4, 7)),
        ("yyyy-MM-dd'T'HH", "2024-05-14T07", dt.datetime(2024, 5, 14, 7)),
        ("yyyy-MM-dd HH:mm:ss.SSS", "2024-05-14 07:08:09.123", dt.datetime(2024, 5, 14, 7, 8, 9, 123000)),
        ("yyyy-MM-dd", "2024-5-14", None),  # MM is exactly two digits
        ("yyyy-MM-dd", "2024-05-14 00:00:00", None),  # the whole text must match
        ("yyyy-MM-dd", "2024-02-30", None),  # no such day
        ("yyyyMMdd", "x", None),
    ],
)
def test_java_formatter_subset(pattern, text, expected):
    assert TimestampFormatter.compile(pattern).parse(text) == expected


@pytest.mark.parametrize(
    "pattern, message",
    [("yyyy-QQ-dd", "pattern letter 'Q'"), ("HH:mm", "no year, month, day"), ("yyyy-MM-dd 'T", "unclosed")],
)
def test_unsupported_formatters_are_refused(pattern, message):
    with pytest.raises(ExpiryConfigError, match=message):
        TimestampFormatter.compile(pattern)


def test_default_reading_is_lenient_year_month_day_with_optional_time():
    assert parse_default_timestamp("2024-5-4") == dt.datetime(2024, 5, 4)
    assert parse_default_timestamp("2024-05-04 1:02:03.5") == dt.datetime(2024, 5, 4, 1, 2, 3, 500000)
    assert parse_default_timestamp("20240504") is None


def columns(*typed: tuple[str, str]) -> PartitionColumns:
    return PartitionColumns(tuple(k for k, _ in typed), tuple(parse_type(t) for _, t in typed))


def test_patterns_combine_columns_and_null_never_has_a_time():
    cols = columns(("dt", "STRING"), ("hr", "INT"))
    rule = ExpiryRule.create("values-time", DAY, "yyyyMMdd H:mm", "$dt $hr:00")
    assert partition_time(["20240514", 7], cols, rule) == dt.datetime(2024, 5, 14, 7)
    assert partition_time([None, 7], cols, rule) is None
    assert partition_time(["20240514", 7], cols, ExpiryRule.create("values-time", DAY, "yyyyMMdd")) == (
        dt.datetime(2024, 5, 14)
    )
    date_cols = columns(("day", "DATE"))
    default_rule = ExpiryRule.create("values-time", DAY)
    assert partition_time([dt.date(2024, 5, 14)], date_cols, default_rule) == dt.datetime(2024, 5, 14)
    with pytest.raises(ExpiryConfigError, match=r"\$month"):
        ExpiryRule.create("values-time", DAY, None, "$year-$month").check_pattern(columns(("year", "STRING")))
    with pytest.raises(ExpiryConfigError, match="strategy"):
        ExpiryRule.create("newest", DAY)


def test_selection_is_strictly_older_than_the_cutoff_ordered_by_text_and_capped():
    cols = columns(("dt", "STRING"))
    now = dt.datetime(2024, 5, 10, 12)
    values = ["2024-05-09", "2024-05-01", "2024-05-08", "bad", "2024-05-03"]
    partitions = [(PartitionStats(v.encode(), 1, 10, 1), [v]) for v in values]
    cutoff_exact = [(PartitionStats(b"x", 1, 1, 1), ["2024-05-08 12:00:00"])]
    rule = ExpiryRule.create("values-time", 2 * DAY)

    selection = select_expired(partitions + cutoff_exact, cols, rule, now, max_expires=2)

    assert [item.values[0] for item in selection.expired] == ["2024-05-01", "2024-05-03"]
    assert (
        selection.expired_total == 3
        and selection.unreadable_total == 1
        and selection.unreadable == [("bad",)]
    )


def test_update_time_compares_the_newest_file_and_skips_unknown_creation_times():
    cols = columns(("dt", "STRING"))
    now = dt.datetime(2024, 5, 10)
    partitions = [
        (PartitionStats(b"a", 1, 1, 1, dt.datetime(2024, 5, 1)), ["a"]),
        (PartitionStats(b"b", 1, 1, 1, dt.datetime(2024, 5, 9, 12)), ["b"]),
        (PartitionStats(b"c", 1, 1, 1, None), ["c"]),
    ]
    selection = select_expired(partitions, cols, ExpiryRule.create("update-time", DAY), now)
    assert [item.values for item in selection.expired] == [("a",)]


def test_a_prewritten_delta_is_committed_with_its_record_count(tmp_path):
    table = make_table(str(tmp_path / "t"))
    committer = SnapshotCommit(table)
    committer.append([message(table, ["a"], data_file("data-1.parquet", rows=7))])
    committer.append([message(table, ["b"], data_file("data-2.parquet", rows=5))])
    doomed = [e.as_delete() for e in live_entries(table, table.snapshot_manager.latest()) if e.bucket == 0]
    doomed = [e for e in doomed if e.file.file_name == "data-1.parquet"]
    metas = rolling_write_manifests(
        table.file_io,
        table.file_io.join(table.path, "manifest"),
        lambda: "manifest-prewritten-0",
        doomed,
        1 << 20,
        "zstd",
        table.partition_types,
        0,
    )
    assert doomed[0].kind == DELETE

    snapshot = SnapshotCommit(table).commit(
        lambda _ctx: [], kind="OVERWRITE", prewritten_delta=lambda _ctx: PrewrittenDelta(metas, -7)
    )

    assert snapshot.total_record_count == 5 and snapshot.delta_record_count == -7
    assert {e.file.file_name for e in live_entries(table, snapshot)} == {"data-2.parquet"}
