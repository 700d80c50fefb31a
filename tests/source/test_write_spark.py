"""`df.write.format("paimon")` end to end on the session's SparkSession: several Spark tasks write,
the driver commits one snapshot, and Paimon's Java and pypaimon read back the DataFrame's rows; a
failing task leaves the table as it was; a DataFrame that does not fit is refused naming why.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import LongType, StringType, StructField, StructType

from jobs.source import register
from jobs.source.writer import make_writer
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.oracle import sort_key
from tests.support.pypaimon_reads import pypaimon_rows

COLUMNS = "k long, dt string, v string"
SCHEMA = StructType(
    [StructField("k", LongType()), StructField("dt", StringType()), StructField("v", StringType())]
)


@pytest.fixture(scope="module")
def spark(spark_session: Any) -> Any:
    register(spark_session)
    return spark_session


def _frame(spark: Any, rows: list[tuple], tasks: int = 3) -> Any:
    return spark.createDataFrame(rows, COLUMNS).repartition(tasks)


def _save(frame: Any, warehouse: str, mode: str = "append", **options: str) -> None:
    writer = frame.write.format("paimon").option("warehouse", warehouse).mode(mode)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save("db.t")


def _seed(warehouse: str) -> None:
    """The table with one row, written in this process (the writer as one task, no Spark job)."""
    writer = make_writer({"warehouse": warehouse, "path": "db.t", "partition": "dt"}, SCHEMA, False)
    batch = pa.RecordBatch.from_pylist([{"k": 1, "dt": "d0", "v": "a"}], schema=to_arrow_schema(SCHEMA))
    writer.commit([writer.write(iter([batch]))])


def _dicts(rows: list[tuple]) -> list[dict[str, Any]]:
    return sorted(({"k": k, "dt": dt, "v": v} for k, dt, v in rows), key=sort_key)


def _table(warehouse: str) -> Table:
    path = f"{warehouse}/db.db/t"
    return Table(FileIO.for_path(path), path)


def _files(warehouse: str) -> set[str]:
    root = f"{warehouse}/db.db/t"
    return {os.path.join(d, n) for d, _, names in os.walk(root) for n in names}


@pytest.mark.java
@pytest.mark.parametrize(
    "create",
    [
        pytest.param({"partition": "dt"}, id="append"),
        pytest.param({"primary-key": "dt,k", "partition": "dt", "bucket": "2"}, id="fixed-bucket-pk"),
        pytest.param(
            {"primary-key": "dt,k", "partition": "dt", "dynamic-bucket.target-row-num": "5"},
            id="dynamic-bucket-pk",
        ),
    ],
)
def test_a_dataframe_reads_back_in_java_and_pypaimon(spark, java_paimon, tmp_path, create):
    warehouse = str(tmp_path / "wh")
    rows = [(k, f"d{k % 3}", f"v{k}") for k in range(40)]
    _save(_frame(spark, rows), warehouse, **create)
    table = _table(warehouse)
    assert table.snapshot_manager.latest_id() == 1
    assert java_paimon.read(table.path) == _dicts(rows)
    assert pypaimon_rows(warehouse, "db.t") == _dicts(rows)
    if "primary-key" in create:  # an upsert of half the keys, and new ones
        again = [(k, f"d{k % 3}", f"w{k}") for k in range(20, 60)]
        _save(_frame(spark, again), warehouse)
        assert java_paimon.read(table.path) == _dicts(rows[:20] + again)
        assert pypaimon_rows(warehouse, "db.t") == _dicts(rows[:20] + again)


@pytest.mark.parametrize(
    ("options", "new", "kept"),
    [
        pytest.param({}, [(9, "d0", "n")], [], id="whole-table"),
        pytest.param({"partitionOverwriteMode": "dynamic"}, [(9, "d0", "n")], [(2, "d1", "b")], id="dynamic"),
        pytest.param({"overwrite-partition": "dt=d1"}, [(9, "d1", "n")], [(1, "d0", "a")], id="static"),
    ],
)
def test_overwrite(spark, tmp_path, options, new, kept):
    warehouse = str(tmp_path / "wh")
    _save(_frame(spark, [(1, "d0", "a"), (2, "d1", "b")]), warehouse, partition="dt")
    _save(_frame(spark, new, 1), warehouse, "overwrite", **options)
    assert pypaimon_rows(warehouse, "db.t") == _dicts(kept + new)


@pytest.mark.java
def test_a_failing_task_leaves_the_table_as_it_was(spark, java_paimon, tmp_path):
    """No snapshot; abort removed the finished tasks' files and the failed task its own. A task Spark
    killed meanwhile (the stage is cancelled) may leave files its message never reported: those, and
    only those, are what Paimon's orphan cleaning finds."""
    warehouse = str(tmp_path / "wh")
    _seed(warehouse)
    before = _files(warehouse)

    @F.udf(StringType())
    def fail_on_one_row(v: str) -> str:
        if v == "v13":
            raise ValueError("boom on row v13")
        return v

    rows = [(k, f"d{k % 3}", f"v{k}") for k in range(40)]
    frame = _frame(spark, rows, 4).withColumn("v", fail_on_one_row("v"))
    with pytest.raises(Exception, match="boom on row v13"):
        _save(frame, warehouse)
    table = _table(warehouse)
    assert table.snapshot_manager.latest_id() == 1
    left = _files(warehouse) - before
    assert before <= _files(warehouse)
    assert all(os.path.basename(p).startswith("data-") for p in left), left
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    assert java_paimon.remove_orphan_files(table.path, future, dry_run=True) == {
        os.path.normpath(p) for p in left
    }
    assert pypaimon_rows(warehouse, "db.t") == _dicts([(1, "d0", "a")])


def test_a_dataframe_that_does_not_fit_is_refused_and_nothing_is_written(spark, tmp_path):
    """(The unit tests check each kind of mismatch; here that Spark shows the cause.)"""
    warehouse = str(tmp_path / "wh")
    _seed(warehouse)
    before = _files(warehouse)
    wrong = spark.createDataFrame([("x", "d0", "a")], "k string, dt string, v string")
    with pytest.raises(Exception, match=r"incompatible types: k \(STRING -> table BIGINT\)"):
        _save(wrong, warehouse)
    assert _files(warehouse) == before
