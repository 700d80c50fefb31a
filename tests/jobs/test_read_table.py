"""read_table on local Spark, compared with pypaimon's reads of the same tables and snapshots.

Tables written by our write job (append with an overwrite, a fixed-bucket primary-key table with
upserts) and by pypaimon (the sample tables of tests/interop/oracle.py: dynamic-bucket PK, three
formats, dropped partitions, every column type), at the latest snapshot, an older one and a tag.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.read import read_table
from jobs.runtime.errors import BadInputError
from jobs.write import write_dataframe
from jobs.writing.settings import WriteSettings
from paimon_format.table import Table
from tests.interop import oracle
from tests.support.factories import make_table

pytest.importorskip("pypaimon")


def rows_of(frame: Any) -> list[dict]:
    """Collected through Arrow: Row objects would round DECIMAL(38, 18) to 28 digits and drop the
    time zone of TIMESTAMP_LTZ values. Spark 3.5 (the 3.5 CI lane) has only the private collector."""
    if hasattr(frame, "toArrow"):
        return oracle.sort_rows(frame.toArrow().to_pylist())
    import pyarrow as pa

    return oracle.sort_rows(pa.Table.from_batches(frame._collect_as_arrow()).to_pylist())


@pytest.fixture(scope="module")
def our_tables(spark_session, tmp_path_factory) -> str:
    """db.events (append by dt: 2 appends, an overwrite of dt=a, tag `first` at 1) and db.pk
    (fixed 2-bucket PK table, 2 commits of upserts)."""
    warehouse = str(tmp_path_factory.mktemp("read-ours"))
    schema = "id long, dt string, v string"
    spark = spark_session
    write_dataframe(
        spark.createDataFrame([(1, "a", "x"), (2, "b", "y")], schema),
        WriteSettings(warehouse, "db.events", partition_keys=["dt"]),
    )
    write_dataframe(
        spark.createDataFrame([(3, "a", "z"), (4, "c", "w")], schema), WriteSettings(warehouse, "db.events")
    )
    write_dataframe(
        spark.createDataFrame([(5, "a", "new")], schema),
        WriteSettings(warehouse, "db.events", mode="overwrite"),
    )
    events = Table.open(warehouse, "db.events")
    events.tag_manager.create_tag("first", events.snapshot_manager.snapshot(1))
    pk_schema = "id long not null, dt string not null, v string"
    write_dataframe(
        spark.createDataFrame([(k, "d", f"v0-{k}") for k in range(12)], pk_schema),
        WriteSettings(warehouse, "db.pk", primary_keys=["id", "dt"], options={"bucket": "2"}),
    )
    write_dataframe(
        spark.createDataFrame([(k, "d", f"v1-{k}") for k in range(0, 16, 3)], pk_schema),
        WriteSettings(warehouse, "db.pk"),
    )
    return warehouse


@pytest.mark.parametrize(
    "identifier, snapshot, tag",
    [
        ("db.events", None, None),
        ("db.events", 2, None),
        ("db.events", None, "first"),
        ("db.pk", None, None),
        ("db.pk", 1, None),
    ],
)
def test_tables_we_wrote_read_like_pypaimon(spark_session, our_tables, identifier, snapshot, tag):
    frame = read_table(spark_session, our_tables, identifier, snapshot=snapshot, tag=tag)
    expected = oracle.read_rows(our_tables, identifier, snapshot_id=snapshot, tag=tag)
    assert expected and rows_of(frame) == expected


def test_columns_where_and_partition_pruning(spark_session, our_tables):
    frame = read_table(spark_session, our_tables, "db.events", columns=["v"], where="dt = 'a' AND id > 1")
    assert frame.columns == ["v"]
    assert rows_of(frame) == [{"v": "new"}]
    pruned = read_table(spark_session, our_tables, "db.events", where="dt IN ('b', 'c')")
    assert rows_of(pruned) == [r for r in oracle.read_rows(our_tables, "db.events") if r["dt"] in ("b", "c")]


def test_bad_arguments_are_bad_input(spark_session, our_tables):
    with pytest.raises(BadInputError, match="nope"):
        read_table(spark_session, our_tables, "db.events", columns=["nope"])
    with pytest.raises(BadInputError, match="99"):
        read_table(spark_session, our_tables, "db.events", snapshot=99)
    with pytest.raises(BadInputError, match="missing"):
        read_table(spark_session, our_tables, "db.missing")
    make_table(
        f"{our_tables}/db.db/agg",
        (("id", "BIGINT NOT NULL"), ("v", "BIGINT")),
        partition_keys=(),
        primary_keys=("id",),
        options={"bucket": "1", "merge-engine": "aggregation", "fields.v.aggregate-function": "product"},
    )
    with pytest.raises(BadInputError, match="product"):
        read_table(spark_session, our_tables, "db.agg")


@pytest.fixture(scope="module")
def samples(tmp_path_factory) -> tuple[str, dict[str, oracle.TableInfo]]:
    warehouse = str(tmp_path_factory.mktemp("read-pypaimon"))
    return warehouse, oracle.create_sample_tables(warehouse)


@pytest.mark.parametrize(
    "name, snapshot, tag",
    [
        ("append_parted", None, None),
        ("append_parted", None, "t3"),
        ("pk_fixed", 2, None),
        ("pk_dynamic", None, None),
        ("fmt_orc", None, None),
        ("dropped_part", 3, None),
        ("all_types", None, None),
    ],
)
def test_tables_pypaimon_wrote_read_like_pypaimon(spark_session, samples, name, snapshot, tag):
    warehouse, tables = samples
    info = tables[name]
    frame = read_table(spark_session, warehouse, info.identifier, snapshot=snapshot, tag=tag)
    assert rows_of(frame) == oracle.read_rows(warehouse, info.identifier, snapshot_id=snapshot, tag=tag)
    assert rows_of(frame) == info.expected_rows(snapshot, tag)
