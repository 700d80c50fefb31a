"""Differential: the changelog our `compact` job produces on tables whose changelog Paimon produces while
it compacts (`changelog-producer` lookup / full-compaction), against Paimon's own compaction.

Two identical copies of a table with level-0 files on top of upper levels: Java's full compaction on
one, our compact job on the other. Java reads the same rows in both latest snapshots, and a streaming
consumer (Java's changelog read) sees the same multiset of (row kind, row) in both COMPACT snapshots.
"""

from __future__ import annotations

import os
import shutil

import pytest

from jobs.read import read_table
from tests.java.helpers import run_job
from tests.java.oracle import JavaPaimon, sort_key
from tests.java.tables import JavaTable

pytestmark = pytest.mark.java

ENGINE_FIELDS = [("k", "INT NOT NULL"), ("a", "BIGINT"), ("b", "STRING")]
WRITE_ONLY = {"write-only": "true"}  # Java leaves the rows at level 0 (no compaction at commit)


def _latest_id(path: str) -> int:
    return max(
        int(n.removeprefix("snapshot-"))
        for n in os.listdir(os.path.join(path, "snapshot"))
        if n[9:].isdigit()
    )


def _compare_compactions(spark, java: JavaPaimon, tmp_path, warehouse: str, table: JavaTable) -> list:
    """Copy the table, compact one copy with Java and the other with our job; assert both read the same
    rows and carry the same changelog; returns that changelog. Our reader agrees with Java's before."""
    ours = table.path(warehouse)
    frame = read_table(spark, warehouse, table.identifier)
    assert sorted(frame.toArrow().to_pylist(), key=sort_key) == java.read(ours)
    javas = str(tmp_path / "java-copy" / table.name)
    shutil.copytree(ours, javas)
    before = _latest_id(ours)
    java_snapshot = java.compact(javas, full=True)
    code, record = run_job(
        tmp_path / f"compact-{table.name}",
        "compact",
        {"warehouse": warehouse, "table": table.identifier, "strategy": "full"},  # as Java's: full
    )
    assert code == 0, record.get("error")
    assert java_snapshot == before + 1 and record["snapshot_ids"]["committed"] == before + 1
    assert java.read(ours) == java.read(javas)
    changelog = java.read_changelog(javas, after=before)
    assert java.read_changelog(ours, after=before) == changelog
    assert record["counts"].get("changelog_rows", 0) == len(changelog)
    return changelog


@pytest.mark.parametrize("name", ["pk_lookup_dv", "pk_first_row"])
def test_compact_changelog_matches_javas_on_java_lookup_tables(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path, name
):
    """The Java fixtures, after a Java write that leaves level-0 files: updates, deletes, new keys."""
    table: JavaTable = java_templates[1][name]
    path = table.path(java_warehouse)
    if name == "pk_lookup_dv":
        rows = [{"k": 1, "p": 1, "s": "new", "d": 0.5}, {"k": 9, "p": 1, "s": "n9", "d": 9.0}]
        rows += [{"k": 5, "p": 1, "_kind": "-D"}, {"k": 6, "p": 0, "s": "s3-6", "d": 2.0}]  # 6: unchanged
    else:
        rows = [{"k": 1, "a": 100, "b": "later", "c": 0}, {"k": 9, "a": 9, "b": "new", "c": 9}]
    java_paimon.write(path, rows, options=WRITE_ONLY)
    changelog = _compare_compactions(spark_session, java_paimon, tmp_path, java_warehouse, table)
    kinds = sorted(kind for kind, _row in changelog)
    assert kinds == (["+I", "+U", "+U", "-D", "-U", "-U"] if name == "pk_lookup_dv" else ["+I"])


@pytest.mark.parametrize(
    "producer, engine",
    [
        ("lookup", {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum"}),
        ("lookup", {"merge-engine": "partial-update"}),
        ("lookup", {"changelog-producer.row-deduplicate": "true"}),
        ("full-compaction", {}),
        ("full-compaction", {"merge-engine": "partial-update", "changelog-producer.row-deduplicate": "true"}),
    ],
    ids=[
        "lookup-aggregation",
        "lookup-partial-update",
        "lookup-deduplicate-row-deduplicate",
        "full-compaction-deduplicate",
        "full-compaction-partial-update-row-deduplicate",
    ],
)
def test_compact_changelog_matches_javas_on_small_tables(
    spark_session, java_paimon, tmp_path, producer, engine
):
    """Tables made here: Java's own commits build the upper levels (a lookup table compacts at every
    commit, leaving a key's merged value above its older rows: an aggregate must not count those twice),
    then write-only commits leave level-0 updates, deletes and new keys on top."""
    warehouse = str(tmp_path / "wh")
    table = JavaTable("t", [], ["k"])
    path = table.path(warehouse)
    options = {"bucket": "1", "changelog-producer": producer, **engine}
    java_paimon.create_table(path, ENGINE_FIELDS, [], ["k"], options)
    # a large first commit: Java's later lookup compactions stop above it (levels 5, 4, 3), not at it
    java_paimon.write(path, [{"k": k, "a": k, "b": f"b{k}" * 20} for k in range(500)])
    java_paimon.write(path, [{"k": k, "a": 10, "b": None} for k in range(2, 6)])
    if producer == "full-compaction":
        java_paimon.compact(path, full=True)  # the top level a full compaction diffs against
    java_paimon.write(path, [{"k": k, "a": 1, "b": f"c{k}"} for k in range(4, 10)])
    late = [{"k": 3, "a": 7, "b": None}, {"k": 1000, "a": 11, "b": "n"}]
    if engine.get("merge-engine") != "partial-update":
        late.append({"k": 0, "a": 3, "_kind": "-D"})
    if engine.get("merge-engine") != "aggregation":  # the value key 6 holds: row-deduplicate drops it
        late.append({"k": 6, "a": 1, "b": "c6"})
    if engine.get("merge-engine") == "aggregation":  # a lone retraction: Java writes what sum makes of it
        late.append({"k": 2000, "a": 5, "b": "x", "_kind": "-D"})
    java_paimon.write(path, late, options=WRITE_ONLY)
    changelog = _compare_compactions(spark_session, java_paimon, tmp_path, warehouse, table)
    assert {kind for kind, _row in changelog} >= {"+I", "-U", "+U"}
    unchanged = ("+U", {"k": 6, "a": 1, "b": "c6"})
    if producer == "lookup" and engine.get("merge-engine") != "aggregation":  # against the newest upper row
        assert (unchanged in changelog) != ("changelog-producer.row-deduplicate" in engine)


def test_compact_changelog_matches_javas_after_our_write(spark_session, java_paimon, tmp_path):
    """full-compaction, with the level-0 rows written by our write job's APPEND (not Java's)."""
    warehouse = str(tmp_path / "wh")
    table = JavaTable("t", [], ["k"])
    path = table.path(warehouse)
    java_paimon.create_table(
        path, ENGINE_FIELDS, [], ["k"], {"bucket": "2", "changelog-producer": "full-compaction"}
    )
    java_paimon.write(path, [{"k": k, "a": k, "b": f"b{k}"} for k in range(6)])
    java_paimon.compact(path, full=True)
    source = str(tmp_path / "source")
    frame = spark_session.createDataFrame(
        [(1, 10, "ours"), (3, 3, "b3"), (7, 7, "new")], "k int, a long, b string"
    )
    frame.coalesce(1).write.parquet(source)
    code, record = run_job(
        tmp_path / "write",
        "write",
        {"warehouse": warehouse, "table": table.identifier, "source": {"path": source}},
    )
    assert code == 0, record.get("error")
    changelog = _compare_compactions(spark_session, java_paimon, tmp_path, warehouse, table)
    # 1 changed, 3 rewritten with equal values (no row-deduplicate: still -U/+U), 7 new
    assert sorted((kind, row["k"]) for kind, row in changelog) == [
        ("+I", 7),
        ("+U", 1),
        ("+U", 3),
        ("-U", 1),
        ("-U", 3),
    ]
