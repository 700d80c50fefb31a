"""`spark.read.format("paimon")` on Paimon Java's fixture tables: the rows Java reads there, at the
latest snapshot, an older one and a tag, with and without pushed filters (a filter changes what is
skipped, never the rows), system tables through the same source, and bad options named in the error.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.read import read_table
from jobs.source import register
from tests.java.helpers import _spelled
from tests.java.oracle import sort_key
from tests.java.tables import JavaTable

pytestmark = pytest.mark.java


@pytest.fixture(scope="module")
def spark(spark_session: Any) -> Any:
    register(spark_session)
    return spark_session


def rows(frame: Any) -> list[dict]:
    return sorted((_spelled(row) for row in frame.toArrow().to_pylist()), key=sort_key)


def load(spark: Any, warehouse: str, identifier: str, **options: str) -> Any:
    reader = spark.read.format("paimon").option("warehouse", warehouse)
    for key, value in options.items():
        reader = reader.option(key.replace("_", "-"), value)
    return reader.load(identifier)


def refs(table: JavaTable) -> list[tuple[str, str]]:
    """The latest snapshot, an older one and a tag (where the table has them)."""
    snapshots = sorted((int(n) for kind, n in table.reads if kind == "snapshot"))
    tags = sorted(n for kind, n in table.reads if kind == "tag")
    chosen = [("snapshot", str(snapshots[-1]))]
    if len(snapshots) > 1:
        chosen.append(("snapshot", str(snapshots[0])))
    return chosen + [("tag", t) for t in tags[:1]]


@pytest.mark.parametrize(
    "name",
    [
        "pk_changelog",
        "pk_lookup_dv",
        "pk_first_row",
        "pk_partial_update",
        "pk_aggregation",
        "pk_dynamic",
        "types_parquet",
        "types_orc",
        "types_avro",
    ],
)
def test_reads_equal_javas_at_latest_older_snapshot_and_tag(spark, java_templates, name):
    warehouse, fixtures = java_templates
    table = fixtures[name]
    latest = max(int(n) for kind, n in table.reads if kind == "snapshot")
    for kind, ref in refs(table):
        if kind == "tag":
            frame = load(spark, warehouse, table.identifier, tag=ref)
        elif int(ref) == latest:
            frame = load(spark, warehouse, table.identifier)  # no option: the latest
        else:
            frame = load(spark, warehouse, table.identifier, snapshot_id=ref)
        assert rows(frame) == table.reads[(kind, ref)], (name, kind, ref)


def test_reads_equal_read_tables_also_by_paimons_option_names(spark, java_templates):
    warehouse, fixtures = java_templates
    table = fixtures["pk_changelog"]
    ours = read_table(spark, warehouse, table.identifier, tag="t_latest")
    frame = load(
        spark, warehouse, table.identifier, **{"scan.tag-name": "t_latest", "scan.mode": "from-snapshot"}
    )
    assert rows(frame) == rows(ours) == table.reads[("tag", "t_latest")]
    path = table.path(warehouse)
    by_path = spark.read.format("paimon").option("branch", "b1").load(path)
    assert rows(by_path) == table.reads[("branch", "b1")]


def _record(tmp_path, name: str) -> tuple[str, Any]:
    path = str(tmp_path / f"{name}.json")
    return path, lambda: json.loads(open(path, encoding="utf-8").read())


@pytest.mark.parametrize(
    "name, where, python_filter, skipped_key",
    [
        # partition terms: partitions and manifests never planned, applied exactly
        (
            "pk_changelog",
            "dt = DATE '2024-01-02' AND region IN ('eu/west') AND id > 5",
            lambda r: str(r["dt"]) == "2024-01-02" and r["region"] == "eu/west" and r["id"] > 5,
            "partitions_skipped",
        ),
        # an append table evolved: the first file (i64 up to 2^40 + 2) is skipped by its stats
        (
            "types_parquet",
            f"i64 > {2**40 + 2}",
            lambda r: r["i64"] is not None and r["i64"] > 2**40 + 2,
            "files_skipped_by_stats",
        ),
        # deletion vectors: batch reads skip level 0, so a value column may skip files too
        (
            "pk_lookup_dv",
            "s > 's3-6'",  # partition 0's one file holds s up to 's3-6'
            lambda r: r["s"] is not None and r["s"] > "s3-6",
            "files_skipped_by_stats",
        ),
    ],
)
def test_a_pushed_filter_skips_files_and_never_changes_the_rows(
    spark, java_templates, tmp_path, name, where, python_filter, skipped_key
):
    warehouse, fixtures = java_templates
    table = fixtures[name]
    latest = max(int(n) for kind, n in table.reads if kind == "snapshot")
    expected = [row for row in table.reads[("snapshot", str(latest))] if python_filter(row)]
    whole_path, whole = _record(tmp_path, "whole")
    filtered_path, filtered = _record(tmp_path, "filtered")
    everything = table.reads[("snapshot", str(latest))]
    assert rows(load(spark, warehouse, table.identifier, scan_record=whole_path)) == everything
    assert expected, "the filter must select some rows"
    assert rows(load(spark, warehouse, table.identifier, scan_record=filtered_path).where(where)) == expected
    assert whole()[skipped_key] == 0 and filtered()[skipped_key] > 0
    assert filtered()["files"] < whole()["files"]


def test_system_tables_read_through_the_source(spark, java_templates):
    from paimon_format import system_tables

    if not hasattr(system_tables, "system_table_batches"):
        pytest.skip("paimon_format.system_tables not there yet (H5)")
    warehouse, fixtures = java_templates
    table = fixtures["pk_changelog"]
    frame = load(spark, warehouse, table.identifier + "$snapshots")
    handle = table.path(warehouse)
    from paimon_format.storage.fileio import FileIO
    from paimon_format.table import Table

    expected = system_tables.system_table(Table(FileIO.for_path(handle), handle), "snapshots")
    assert frame.count() == expected.num_rows > 1
    assert frame.columns == expected.schema.names


@pytest.mark.parametrize(
    "options, named",
    [
        ({"tag": "no-such-tag"}, "option 'tag'"),
        ({"snapshot_id": "999"}, "option 'snapshot-id'"),
        ({"tag": "t_latest", "snapshot_id": "1"}, "give at most one snapshot"),
        ({"scan.mode": "incremental"}, "option 'scan.mode'"),
    ],
)
def test_bad_options_fail_the_load_naming_the_option(spark, java_templates, options, named):
    warehouse, fixtures = java_templates
    with pytest.raises(Exception, match=named):
        load(spark, warehouse, fixtures["pk_changelog"].identifier, **options).count()


def test_a_missing_table_names_the_path(spark, tmp_path):
    with pytest.raises(Exception, match="option 'path': no Paimon table"):
        spark.read.format("paimon").load(str(tmp_path / "nothing")).count()


def test_a_table_without_snapshots_reads_empty_with_its_columns(spark, java_paimon, tmp_path):
    path = str(tmp_path / "wh" / "db.db" / "empty")
    java_paimon.create_table(path, [("k", "INT NOT NULL"), ("v", "STRING")], [], ["k"], {"bucket": "1"})
    frame = spark.read.format("paimon").load(path)
    assert frame.columns == ["k", "v"] and frame.count() == 0


def test_a_user_schema_that_is_not_the_tables_is_refused(spark, java_templates):
    warehouse, fixtures = java_templates
    reader = spark.read.format("paimon").option("warehouse", warehouse).schema("k INT, other STRING")
    with pytest.raises(Exception, match="the query's columns .* are not the table's"):
        reader.load(fixtures["pk_partial_update"].identifier).count()
