"""Java reads every table our write job makes (append and primary key with changelog-producer input,
parquet / orc / avro, every type Spark has; TIMESTAMP_LTZ built in Spark by a cast from the
TIMESTAMP_NTZ column in the session time zone) at every snapshot with the rows pypaimon reads, and the
changelog as a streaming consumer. Our write job appending to Java-written tables:
test_write_on_java_tables.py."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.table import Table
from tests.java.oracle import sort_key
from tests.support.pypaimon_reads import pypaimon_rows

pytestmark = pytest.mark.java
pytest.importorskip("pypaimon")

COLUMNS = (
    "id int, p string, b boolean, i8 tinyint, i16 smallint, i64 bigint, f32 float, f64 double, "
    "dec decimal(10,2), s string, bin binary, d date, ts timestamp_ntz, "
    "arr array<int>, m map<string,bigint>, r struct<x:int,y:string>"
)


def typed_rows(ids: range, version: int) -> list[tuple]:
    return [
        (
            i,
            "ab"[i % 2],
            i % 3 == 0,
            i - 5,
            i * 100,
            2**40 + i * version,
            i + 0.5,
            i / 4,
            Decimal(f"{i}.{version:02d}"),
            f"s{version}-{i}",
            bytes([i, version]),
            dt.date(2024, 2, 1) + dt.timedelta(days=i),
            dt.datetime(2024, 2, 1, 10, 0, 0, 123456) + dt.timedelta(minutes=i),
            [i, None],
            {"k": i},
            (i, f"y{i}"),
        )
        for i in ids
    ]


def _frame(spark, ids: range, version: int):
    """Spark's `timestamp` (TIMESTAMP_LTZ) is cast from the TIMESTAMP_NTZ column in Spark, in the
    session time zone: local rows with aware datetimes would go through Spark's Arrow conversion."""
    return spark.createDataFrame(typed_rows(ids, version), COLUMNS).selectExpr(
        "*", "cast(ts as timestamp) as ltz"
    )


def _comparable(rows: list[dict]) -> list[dict]:
    """pypaimon spells a MAP as a list of pairs too; normalise both the same way and sort.
    TIMESTAMP_LTZ as the UTC instant (Java: UTC-aware; pypaimon: naive or aware)."""
    out = []
    for row in rows:
        row = dict(row)
        ltz = row.get("ltz")
        if isinstance(ltz, dt.datetime) and ltz.tzinfo is not None:
            row["ltz"] = ltz.astimezone(dt.timezone.utc).replace(tzinfo=None)
        if isinstance(row.get("m"), dict):
            row["m"] = list(row["m"].items())
        if row.get("m") is not None:
            row["m"] = [tuple(pair) for pair in row["m"]]
        out.append(row)
    return sorted(out, key=sort_key)


@pytest.mark.parametrize("file_format", ["parquet", "orc", "avro"])
def test_java_reads_what_our_write_job_wrote(spark_session, java_paimon, tmp_path, file_format):
    warehouse = str(tmp_path / "wh")
    for name, primary_keys, options in (
        ("append", [], {"file.format": file_format}),
        ("pk", ["id", "p"], {"file.format": file_format, "bucket": "2", "changelog-producer": "input"}),
    ):
        identifier = f"db.{name}"
        first = _frame(spark_session, range(6), 1)
        write_dataframe(
            first,
            WriteSettings(
                warehouse, identifier, partition_keys=["p"], primary_keys=primary_keys, options=options
            ),
        )
        second = _frame(spark_session, range(3, 9), 2)
        write_dataframe(second, WriteSettings(warehouse, identifier))
        table = Table.open(warehouse, identifier)
        for snapshot_id in table.snapshot_manager.snapshot_ids():
            expected = _comparable(pypaimon_rows(warehouse, identifier, snapshot_id))
            got = _comparable(java_paimon.read(table.path, snapshot_id=snapshot_id))
            assert got == expected, f"{file_format} {name} snapshot {snapshot_id}"
            assert len(got) == (6 if snapshot_id == 1 else 9 if primary_keys else 12)
            assert {row["ltz"] for row in got} == {row["ts"] for row in got}  # session time zone UTC
        if primary_keys:  # changelog-producer input: the second write's rows as they came
            changelog = java_paimon.read_changelog(table.path, after=1)
            assert [kind for kind, _ in changelog] == ["+I"] * 6
            assert _comparable([row for _, row in changelog]) == _comparable(
                [row for row in java_paimon.read(table.path) if row["id"] >= 3]
            )
