"""A data file's metadata gathered row group by row group equals the metadata computed over all of
its rows (what the writer did before it stopped keeping the rows)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from paimon_format.data.file_summary import FileSummary
from paimon_format.data.stats import FULL_STATS, column_stats, value_stats
from paimon_format.data.writer import write_table_files
from paimon_format.model.file_layout import KEY_PREFIX, SEQUENCE_NUMBER, VALUE_KIND
from paimon_format.model.options import CoreOptions
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage.fileio import FileIO

COLUMNS = [
    ("i", "INT"),
    ("d", "DOUBLE"),
    ("s", "STRING"),
    ("dec", "DECIMAL(10, 2)"),
    ("day", "DATE"),
    ("ts", "TIMESTAMP(6)"),
    ("raw", "BYTES"),
    ("arr", {"type": "ARRAY", "element": "INT"}),
    ("none", "STRING"),
]
T0 = dt.datetime(2024, 1, 1, 10, 0, 0, 123456)


def rows(nan_at: int | None) -> pa.Table:
    """Twelve rows; column `d` holds NaN at `nan_at`, `none` is null everywhere but row 11."""
    n = 12
    doubles = [float(k) - 5.5 for k in range(n)]
    if nan_at is not None:
        doubles[nan_at] = float("nan")
    return pa.table(
        {
            "i": pa.array([None if k % 5 == 0 else (k * 7) % 11 - 4 for k in range(n)], pa.int32()),
            "d": doubles,
            "s": [("x" * 20 + str(k)) if k % 2 else f"a{k}" for k in range(n)],  # long: truncated bounds
            "dec": pa.array([Decimal(k) / 4 for k in range(n)], pa.decimal128(10, 2)),
            "day": [dt.date(2024, 1, 1 + k) for k in range(n)],
            "ts": pa.array([T0 + dt.timedelta(hours=k) for k in range(n)], pa.timestamp("us")),
            "raw": [bytes([k]) for k in range(n)],
            "arr": [[k] if k % 3 else None for k in range(n)],
            "none": [None] * (n - 1) + ["z"],
        }
    )


@pytest.mark.parametrize("nan_at", [None, 3, 11])
@pytest.mark.parametrize("cuts", [(), (1,), (4, 8), (1, 2, 3, 10, 11)])
def test_value_stats_from_row_group_extremes_equal_the_stats_over_all_rows(nan_at, cuts):
    schema = new_table_schema([(name, parse_type(t)) for name, t in COLUMNS], (), (), {})
    options = CoreOptions(schema.options)
    data = rows(nan_at)
    summary = FileSummary(schema.fields, [], primary_key=False)
    bounds = [0, *cuts, data.num_rows]
    for start, end in zip(bounds, bounds[1:], strict=False):
        summary.add(data.slice(start, end - start))
    expected = value_stats(data, schema, options)
    assert value_stats(summary.extremes(), schema, options, summary.null_counts) == expected
    assert summary.rows == data.num_rows
    assert expected[0].null_counts[0] == 3  # the check can fail: nulls are counted, not taken from extremes


def test_key_facts_span_row_groups():
    schema = new_table_schema(
        [("id", parse_type("BIGINT")), ("v", parse_type("STRING"))], (), ("id",), {"bucket": "1"}
    )
    n = 10
    data = pa.table(
        {
            KEY_PREFIX + "id": pa.array(range(100, 100 + n), pa.int64()),
            SEQUENCE_NUMBER: pa.array([60, 41, 75, 55, 44, 90, 61, 62, 63, 64], pa.int64()),  # extremes early
            VALUE_KIND: pa.array([3 if k in (2, 7) else 1 if k == 4 else 0 for k in range(n)], pa.int8()),
            "id": pa.array(range(100, 100 + n), pa.int64()),
            "v": [f"v{k}" if k != 5 else None for k in range(n)],
        }
    )
    summary = FileSummary(schema.fields, ["id"], primary_key=True)
    for start in range(0, n, 3):
        summary.add(data.slice(start, 3))
    assert (summary.first_key, summary.last_key) == ([100], [109])
    assert summary.deletes == 3  # UPDATE_BEFORE (1) and DELETE (3) retract
    assert (summary.min_sequence, summary.max_sequence) == (41, 90)
    keys = [schema.field("id")]
    assert column_stats(summary.extremes(), keys, [FULL_STATS], summary.null_counts) == column_stats(
        data, keys, [FULL_STATS]
    )


@pytest.mark.parametrize("mode", ["none", "counts"])
def test_columns_without_bounds_are_never_converted(tmp_path, mode):
    """A DATE before year 1 has no Python value: a column whose stats record no bounds still writes
    (only its null count is kept), as it did when bounds were computed for bounded columns only."""
    schema = new_table_schema(
        [("id", parse_type("BIGINT")), ("day", parse_type("DATE"))], (), (), {"metadata.stats-mode": mode}
    )
    root = str(tmp_path / "t")
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "day": pa.array([-719163, None], pa.date32())})
    ((_partition, _bucket, (meta,)),) = write_table_files(FileIO.for_path(root), root, schema, data, 0)
    assert meta.row_count == 2
    assert meta.value_stats.null_counts == ([] if mode == "none" else [0, 1])
