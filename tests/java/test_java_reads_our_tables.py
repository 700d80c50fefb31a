"""Java reads every table our write job makes (append and primary key, parquet / orc / avro, every
type Spark builds from local rows: TIMESTAMP_LTZ is covered by the Java-written fixtures, as Spark's
Arrow conversion of local rows asserts a time zone there) at every snapshot with the rows pypaimon
reads. Our write job appending to Java-written tables: test_write_on_java_tables.py."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from jobs.write import write_dataframe
from paimon_format.table import Table
from tests.java.oracle import sort_key
from tests.pypaimon_reads import pypaimon_rows

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


def _comparable(rows: list[dict]) -> list[dict]:
    """pypaimon spells a MAP as a list of pairs too; normalise both the same way and sort."""
    out = []
    for row in rows:
        row = dict(row)
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
        ("pk", ["id", "p"], {"file.format": file_format, "bucket": "2"}),
    ):
        identifier = f"db.{name}"
        first = spark_session.createDataFrame(typed_rows(range(6), 1), COLUMNS)
        write_dataframe(
            first, warehouse, identifier, partition_keys=["p"], primary_keys=primary_keys, options=options
        )
        second = spark_session.createDataFrame(typed_rows(range(3, 9), 2), COLUMNS)
        write_dataframe(second, warehouse, identifier)
        table = Table.open(warehouse, identifier)
        for snapshot_id in table.snapshot_manager.snapshot_ids():
            expected = _comparable(pypaimon_rows(warehouse, identifier, snapshot_id))
            got = _comparable(java_paimon.read(table.path, snapshot_id=snapshot_id))
            assert got == expected, f"{file_format} {name} snapshot {snapshot_id}"
            assert len(got) == (6 if snapshot_id == 1 else 9 if primary_keys else 12)
