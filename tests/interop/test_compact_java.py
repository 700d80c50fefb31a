"""Our `compact` job and `read_table` against Paimon's own Java implementation (issues 15 and 16).

Java writes one lean set of tables (every merge engine, deletion vectors, dynamic bucket, an append
table of many small files), with files at several levels: Java's full compaction, then new level-0
files on top. Java's reads at every snapshot and tag are recorded before anything else touches them.
Then, once per module on a copy of that warehouse:

- `read_table` on the untouched tables returns exactly Java's rows, at the latest snapshot, an older
  snapshot and a tag;
- our `compact` job (the real job entry point, in this process's SparkSession) compacts each table;
  Java reads the new snapshot with the rows it read before, every older snapshot and tag as before,
  and our `read_table` agrees with Java on our compacted output (first-row: Paimon's batch read skips
  level-0 files, so the compacted table reads as after Java's own full compaction of the same table);
  a second run commits nothing;
- Java then commits on top of our files and compacts again (our output at the top level must satisfy
  Java's LSM invariants), and reads what a table with those upserts holds.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from jobs.read import read_table
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.table import Table
from tests.java.helpers import run_job
from tests.java.oracle import JavaPaimon, Row, sort_key
from tests.java.tables import read_ref, refs_of

pytestmark = pytest.mark.java

DATABASE = "db"
DAY1, DAY2 = dt.date(2024, 1, 2), dt.date(2024, 1, 3)
ENGINE_FIELDS = [("k", "INT NOT NULL"), ("a", "BIGINT"), ("b", "STRING"), ("c", "INT")]


def table_path(warehouse: str, name: str) -> str:
    return os.path.join(warehouse, f"{DATABASE}.db", name)


def _dedup_rows(keys: range, version: int) -> list[Row]:
    return [{"id": k, "dt": DAY1 if k % 2 else DAY2, "v": f"v{version}-{k}", "n": k * version} for k in keys]


def build_dedup(java: JavaPaimon, path: str, options: dict[str, str]) -> None:
    """Deduplicate, DATE partition, 2 buckets: three commits, Java's full compaction (files at the top
    level), a tag, then two commits with upserts and deletes (level-0 files over the compacted ones)."""
    java.create_table(
        path,
        [("id", "BIGINT NOT NULL"), ("dt", "DATE NOT NULL"), ("v", "STRING"), ("n", "BIGINT")],
        ["dt"],
        ["id", "dt"],
        {"bucket": "2", **options},
    )
    java.write(path, _dedup_rows(range(0, 10), 1))
    java.write(path, _dedup_rows(range(5, 15), 2))
    java.write(
        path, _dedup_rows(range(12, 16), 3) + [{**r, "_kind": "-D"} for r in _dedup_rows(range(0, 2), 1)]
    )
    compacted = java.compact(path, full=True)
    java.create_tag(path, "t_compacted", compacted)
    java.write(path, _dedup_rows(range(3, 7), 4))
    java.write(
        path, _dedup_rows(range(14, 18), 5) + [{**r, "_kind": "-D"} for r in _dedup_rows(range(8, 9), 2)]
    )


def build_engine(java: JavaPaimon, path: str, options: dict[str, str]) -> None:
    """Unpartitioned, 2 buckets: two commits, a tag, Java's full compaction, then two more commits."""
    java.create_table(path, ENGINE_FIELDS, [], ["k"], {"bucket": "2", **options})
    java.write(path, [{"k": k, "a": k, "b": f"b{k}", "c": k} for k in range(6)])
    java.write(path, [{"k": k, "a": 10, "b": None, "c": 2} for k in range(2, 8)])
    java.create_tag(path, "t2", 2)
    java.compact(path, full=True)
    # write-only: first-row (a lookup table) would otherwise compact every commit into the top level
    level0 = {"write-only": "true"}
    java.write(path, [{"k": k, "a": 1, "b": None, "c": 9} for k in range(4, 6)], options=level0)
    java.write(path, [{"k": k, "a": 5, "b": f"late{k}", "c": -1} for k in range(5, 9)], options=level0)


def build_dynamic(java: JavaPaimon, path: str) -> None:
    java.create_table(
        path,
        [("k", "BIGINT NOT NULL"), ("p", "STRING NOT NULL"), ("v", "STRING")],
        ["p"],
        ["k", "p"],
        {"bucket": "-1", "dynamic-bucket.target-row-num": "4"},
    )
    java.write(path, [{"k": k, "p": "ab"[k % 2], "v": "v1"} for k in range(12)])
    java.create_tag(path, "t1", 1)
    java.compact(path, full=True)
    for version in range(2, 4):
        java.write(path, [{"k": k, "p": "ab"[k % 2], "v": f"v{version}"} for k in range(version * 3, 14)])


def build_append(java: JavaPaimon, path: str) -> None:
    """bucket -1, 2 partitions, 6 small commits (6 files per partition)."""
    java.create_table(
        path, [("id", "INT NOT NULL"), ("p", "STRING NOT NULL"), ("v", "STRING")], ["p"], [], {}
    )
    for commit in range(6):
        java.write(path, [{"id": commit * 10 + i, "p": "xy"[i % 2], "v": f"c{commit}"} for i in range(4)])
        if commit == 2:
            java.create_tag(path, "t3", 3)


# name -> builder; every table has a tag and at least four snapshots
TABLES = {
    "pk_dedup": lambda java, path: build_dedup(java, path, {}),
    "pk_dv": lambda java, path: build_dedup(java, path, {"deletion-vectors.enabled": "true"}),
    "pk_partial_update": lambda java, path: build_engine(java, path, {"merge-engine": "partial-update"}),
    "pk_aggregation": lambda java, path: build_engine(
        java,
        path,
        {
            "merge-engine": "aggregation",
            "fields.a.aggregate-function": "sum",
            "fields.b.aggregate-function": "last_non_null_value",
            "fields.c.aggregate-function": "max",
        },
    ),
    "pk_first_row": lambda java, path: build_engine(java, path, {"merge-engine": "first-row"}),
    "pk_dynamic": build_dynamic,
    "append_small_files": build_append,
}


def java_reads_everything(java: JavaPaimon, path: str) -> dict[tuple[str, str], list[Row]]:
    return {ref: read_ref(java, path, ref) for ref in refs_of(path) if ref[0] != "branch"}


def our_rows(spark: Any, warehouse: str, name: str, **at: Any) -> list[Row]:
    frame = read_table(spark, warehouse, f"{DATABASE}.{name}", **at)
    return sorted(frame.toArrow().to_pylist(), key=sort_key)


def latest_snapshot_id(path: str) -> int:
    with open(os.path.join(path, "snapshot", "LATEST")) as handle:
        return int(handle.read().strip())


@pytest.fixture(scope="module")
def java_written(java_paimon, tmp_path_factory) -> tuple[str, dict[str, dict]]:
    """(warehouse, name -> Java's reads at every snapshot and tag); never modified after building."""
    warehouse = str(tmp_path_factory.mktemp("compact-java") / "wh")
    reads = {}
    for name, build in TABLES.items():
        path = table_path(warehouse, name)
        build(java_paimon, path)
        reads[name] = java_reads_everything(java_paimon, path)
    return warehouse, reads


# compacted with the default strategy (minor, Paimon's picking rules); the others with strategy full
# (pk_dedup's buckets hold fewer sorted runs than the universal trigger: minor leaves them, as Paimon;
# tests/java/test_minor_compaction_java.py is the minor differential)
DEFAULT_STRATEGY = {"append_small_files"}


@pytest.fixture(scope="module")
def compacted(spark_session, java_written, tmp_path_factory) -> tuple[str, dict[str, dict]]:
    """A copy of the Java warehouse with our compact job run once on every table:
    (warehouse, name -> {"record": first run's record, "base": snapshot it compacted})."""
    template, _reads = java_written
    root = tmp_path_factory.mktemp("compacted")
    warehouse = shutil.copytree(template, str(root / "wh"))
    runs = {}
    for name in TABLES:
        base = latest_snapshot_id(table_path(warehouse, name))
        config = {"warehouse": warehouse, "table": f"{DATABASE}.{name}"}
        if name not in DEFAULT_STRATEGY:
            config["strategy"] = "full"
        code, record = run_job(Path(root / name), "compact", config)
        assert code == 0, f"{name}: {record.get('error')}"
        runs[name] = {"record": record, "base": base}
    return warehouse, runs


@pytest.mark.parametrize("name", list(TABLES))
def test_read_table_returns_javas_rows(spark_session, java_written, name):
    """read_table on Java's tables: Java's rows at the latest snapshot, the oldest snapshot, a tag."""
    warehouse, reads = java_written
    snapshots = sorted(int(ref[1]) for ref in reads[name] if ref[0] == "snapshot")
    tags = [ref[1] for ref in reads[name] if ref[0] == "tag"]
    assert len(snapshots) >= 4 and tags
    assert our_rows(spark_session, warehouse, name) == reads[name][("snapshot", str(snapshots[-1]))]
    older = snapshots[1]
    assert our_rows(spark_session, warehouse, name, snapshot=older) == reads[name][("snapshot", str(older))]
    assert our_rows(spark_session, warehouse, name, tag=tags[0]) == reads[name][("tag", tags[0])]


@pytest.mark.parametrize("name", list(TABLES))
def test_java_reads_our_compaction_as_before(
    spark_session, java_paimon, java_written, compacted, tmp_path, name
):
    """The new snapshot reads, in Java, the rows Java read at the compacted snapshot; every older
    snapshot and tag reads as before; our read_table of our output equals Java's read of it."""
    _template, before = java_written
    warehouse, runs = compacted
    path = table_path(warehouse, name)
    base = runs[name]["base"]
    new = latest_snapshot_id(path)
    assert new == base + 1, f"{name}: compact committed no snapshot"
    expected = before[name][("snapshot", str(base))]
    assert expected
    if name == "pk_first_row":
        # Paimon's batch read of a first-row table skips level-0 files (their keys are not yet known
        # to be first), so any full compaction, Java's own too, makes them visible: compare with Java's.
        javas_own = shutil.copytree(table_path(_template, name), str(tmp_path / name))
        java_paimon.compact(javas_own, full=True)
        expected_after = java_paimon.read(javas_own)
        assert expected_after != expected and {"k": 8, "a": 5, "b": "late8", "c": -1} in expected_after
        expected = expected_after
    java_latest = java_paimon.read(path)
    assert java_latest == expected
    assert our_rows(spark_session, warehouse, name) == java_latest
    for ref, rows in before[name].items():
        assert read_ref(java_paimon, path, ref) == rows, f"{name} {ref}"
    table = Table.open(warehouse, f"{DATABASE}.{name}")
    entries = list(live_entries(table, table.snapshot_manager.snapshot(new)))
    if name == "append_small_files":
        assert len(entries) == 2, "one file per partition"
    else:
        # Paimon's default num-levels is num-sorted-run.compaction-trigger (5) + 1: the top is level 5
        levels = {e.file.level for e in entries}
        assert levels == {5}, f"{name}: all output at the top level, got {levels}"


@pytest.mark.parametrize("name", list(TABLES))
def test_second_compact_changes_nothing(compacted, tmp_path, name):
    warehouse, _runs = compacted
    path = table_path(warehouse, name)
    copy = shutil.copytree(os.path.dirname(os.path.dirname(path)), str(tmp_path / "wh"))
    before = latest_snapshot_id(table_path(copy, name))
    code, record = run_job(
        tmp_path / "run", "compact", {"warehouse": copy, "table": f"{DATABASE}.{name}", "strategy": "full"}
    )
    assert code == 0, record.get("error")
    assert latest_snapshot_id(table_path(copy, name)) == before


UPSERTS = {
    "pk_dedup": _dedup_rows(range(4, 20, 3), 9),
    "pk_dv": _dedup_rows(range(4, 20, 3), 9),
    "pk_partial_update": [{"k": k, "a": 100, "b": None, "c": 50} for k in (0, 6, 11)],
    "pk_aggregation": [{"k": k, "a": 100, "b": None, "c": 50} for k in (0, 6, 11)],
    "pk_first_row": [{"k": k, "a": 100, "b": "new", "c": 50} for k in (0, 6, 11)],
    "pk_dynamic": [{"k": k, "p": "ab"[k % 2], "v": "v9"} for k in (1, 2, 20)],
    "append_small_files": [{"id": 99, "p": "x", "v": "on-top"}],
}


@pytest.mark.parametrize("name", list(TABLES))
def test_java_writes_and_compacts_on_top_of_our_files(
    spark_session, java_paimon, java_written, compacted, tmp_path, name
):
    """Java commits upserts over our top-level files and runs its own full compaction: the rows equal
    what Java reads from the same upserts over its own (uncompacted) table, and our read agrees."""
    warehouse, _runs = compacted
    source = os.path.dirname(table_path(warehouse, name))
    ours = shutil.copytree(source, str(tmp_path / "ours" / f"{DATABASE}.db"))
    path = os.path.join(ours, name)
    java_paimon.write(path, UPSERTS[name])
    if name != "append_small_files":  # Paimon 1.0 compacts bucket -1 append tables only in its jobs
        java_paimon.compact(path, full=True)
    rows = java_paimon.read(path)
    our_warehouse = str(tmp_path / "ours")
    assert our_rows(spark_session, our_warehouse, name) == rows
    # the same upserts on the table as Java left it before our compaction
    reference = os.path.join(str(tmp_path / "theirs"), name)
    shutil.copytree(table_path(java_written[0], name), reference)
    java_paimon.write(reference, UPSERTS[name])
    assert java_paimon.read(reference) == rows
