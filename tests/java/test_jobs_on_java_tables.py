"""Every job on Java-written tables: exit 0, and Java then reads every remaining snapshot, tag and
branch with the rows it read before (the latest with the job's intended change).

One template warehouse of Java fixtures (tests/java/tables.py) per session; each test works on its own
copy. The maintenance jobs run once per test over *every* fixture table (a job per table in the same
process and SparkSession), to keep the Java part of the suite inside its time budget.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from tests.java.helpers import (
    assert_reads_kept,
    files_under,
    lists_java_orphan_cleaning_loses,
    run_job,
)
from tests.java.oracle import JavaError, sort_key
from tests.java.tables import DAY1, REGIONS

pytestmark = pytest.mark.java

LONG_AGO = "2000-01-01 00:00:00"


def test_tag_on_an_expired_snapshot_whose_changelog_java_deleted(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path
):
    """Issue 16's bug: Java's expiry deleted tag t2's changelog manifest list (tags keep no changelog);
    expire-snapshots and remove-orphan-files read every list a root names and failed with exit 2."""
    table = java_templates[1]["pk_changelog"]
    path = table.path(java_warehouse)
    with open(os.path.join(path, "tag", "tag-t2")) as handle:
        tag = json.load(handle)
    assert not os.path.exists(os.path.join(path, "manifest", tag["changelogManifestList"]))
    assert os.path.exists(os.path.join(path, "manifest", tag["baseManifestList"]))
    base = {"warehouse": java_warehouse, "table": table.identifier}

    code, record = run_job(tmp_path, "remove-orphan-files", {**base, "older_than": "0s", "force": True})
    assert code == 0, record.get("error")
    code, record = run_job(
        tmp_path, "expire-snapshots", {**base, "retain_min": 1, "retain_max": 1, "older_than": "0s"}
    )
    assert code == 0, record.get("error")
    assert_reads_kept(java_paimon, table, java_warehouse)
    # Java's own orphan cleaning finds nothing our runs left behind; what it does find are tag t2's
    # lists, a bug of Paimon 1.0's OrphanFilesClean (docs/safety.md): run for real, tag t2 is lost.
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    java_bug = lists_java_orphan_cleaning_loses(path)
    assert any(name.endswith(tag["baseManifestList"]) for name in java_bug)
    assert java_paimon.remove_orphan_files(path, future, dry_run=True) == java_bug
    java_paimon.remove_orphan_files(path, future)
    with pytest.raises(JavaError):
        java_paimon.read(path, tag="t2")


# Java's first-row writer compacts every commit up (a lookup table) until each bucket of this small table
# is one top-level file: our compact finds nothing to do there
ALREADY_COMPACT = {"pk_first_row"}


def test_maintain_on_the_java_warehouse(spark_session, java_paimon, java_templates, java_warehouse, tmp_path):
    """expire-snapshots, compact (full), compact-manifests and remove-orphan-files on every Java table,
    through maintain: Java then reads every remaining snapshot, tag and branch as before, and the
    compacted latest with the rows it read before the compaction. The jobs' own differential tests
    (test_differential.py) compare expiry and orphan cleaning with Java's on every table."""
    config = {
        "warehouse": java_warehouse,
        "tables": ["db.*"],
        "lock": {"enabled": False},
        "defaults": {
            "expire_snapshots": {"retain_min": 2, "retain_max": 2, "older_than": "0s"},
            "compact": {"strategy": "full", "skip_unsupported": True},
            "compact_manifests": {"mode": "full"},
            "remove_orphan_files": {"older_than": "0s", "force": True},
        },
    }
    code, record = run_job(tmp_path, "maintain", config)
    assert code == 0, json.dumps(record)[:2000]
    for name, table in java_templates[1].items():
        assert_reads_kept(java_paimon, table, java_warehouse)
        path = table.path(java_warehouse)
        latest = max(int(ref[1]) for ref in table.reads if ref[0] == "snapshot")
        section = record["details"]["tables"][table.identifier]
        operations = {op["operation"]: op for op in section["operations"]}
        compaction = operations["compact"]
        assert "skipped" not in compaction["details"], (name, compaction["details"])
        if name in ALREADY_COMPACT:
            assert compaction["snapshot_ids"].get("committed") is None, name
            assert compaction["counts"]["bins"] == 0, name
            compacted = []
        else:
            assert compaction["snapshot_ids"].get("committed") == latest + 1, (name, compaction)
            compacted = [latest + 1]
        # expire-snapshots kept 2, then compact and compact-manifests committed on top of them
        kept = [latest - 1, latest, *compacted, latest + 1 + len(compacted)]
        snapshots = {p for p in files_under(path) if p.startswith("snapshot/snapshot-")}
        assert snapshots == {f"snapshot/snapshot-{i}" for i in kept}, name
        rows = table.reads[("snapshot", str(latest))]
        for snapshot_id in kept[2:]:
            assert java_paimon.read(path, snapshot_id=snapshot_id) == rows, (name, snapshot_id)
        if compacted:  # every live data file now sits at one level: the top one for primary keys
            top = _top_level(path) if table.primary_keys else 0
            assert _levels_of_latest(path) == {top}, name

    # Java goes on writing and compacting over our compaction's files
    pk = java_templates[1]["pk_changelog"]
    path = pk.path(java_warehouse)
    before = java_paimon.read(path)
    update = dict(before[0], v="java-after-ours")
    java_paimon.write(path, [update])
    java_paimon.compact(path, full=True)
    expected = sorted([update if r == before[0] else r for r in before], key=sort_key)
    assert java_paimon.read(path) == expected


def _table(path: str):
    from paimon_format.storage.fileio import FileIO
    from paimon_format.table import Table

    return Table(FileIO.for_path(path), path)


def _levels_of_latest(path: str) -> set[int]:
    from paimon_format.scan.snapshot_scan import live_entries

    table = _table(path)
    return {entry.file.level for entry in live_entries(table, table.snapshot_manager.latest())}


def _top_level(path: str) -> int:
    from paimon_format.compaction.rules import CompactionSettings

    return CompactionSettings.of(_table(path).schema.options, has_primary_key=True).top_level


def test_drop_partition_with_escaped_values_on_java_tables(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path
):
    pk = java_templates[1]["pk_changelog"]
    code, record = run_job(
        tmp_path / "pk",
        "drop-partition",
        {
            "warehouse": java_warehouse,
            "table": pk.identifier,
            "partitions": [{"dt": DAY1.isoformat(), "region": REGIONS[0]}],
            "strict": True,
        },
    )
    assert code == 0, record.get("error")
    latest = java_paimon.read(pk.path(java_warehouse))
    before = pk.reads[("tag", "t_latest")]
    assert latest == [r for r in before if not (r["dt"] == DAY1 and r["region"] == REGIONS[0])]
    assert len(latest) < len(before)
    assert record["details"]["manifests_skipped"] > 0  # Java's partition stats ruled some out
    assert_reads_kept(java_paimon, pk, java_warehouse)

    dv = java_templates[1]["pk_lookup_dv"]
    code, record = run_job(
        tmp_path / "dv",
        "drop-partition",
        {"warehouse": java_warehouse, "table": dv.identifier, "partitions": [{"p": 1}], "strict": True},
    )
    assert code == 0, record.get("error")
    latest_id = max(int(ref[1]) for ref in dv.reads if ref[0] == "snapshot")
    assert java_paimon.read(dv.path(java_warehouse)) == [
        r for r in dv.reads[("snapshot", str(latest_id))] if r["p"] != 1
    ]
    assert_reads_kept(java_paimon, dv, java_warehouse)


def test_expire_partitions_on_a_java_date_partitioned_table(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path
):
    pk = java_templates[1]["pk_changelog"]
    code, record = run_job(
        tmp_path,
        "expire-partitions",
        {
            "warehouse": java_warehouse,
            "table": pk.identifier,
            "expiration_time": "1d",
            "strategy": "values-time",
            "timestamp_formatter": "yyyy-MM-dd",
            "timestamp_pattern": "$dt",
        },
    )
    assert code == 0, record.get("error")
    assert java_paimon.read(pk.path(java_warehouse)) == []  # 2024 partitions are all long expired
    assert_reads_kept(java_paimon, pk, java_warehouse)


@pytest.mark.parametrize("name", ["pk_dynamic", "pk_lookup_dv"])
def test_drop_partition_leaves_the_index_java_leaves(
    spark_session, java_paimon, java_templates, java_warehouse, tmp_path, name
):
    """On identical copies, our drop-partition and Java's leave the same live data files and the same
    index files (a dropped partition's HASH index / deletion vectors go with it)."""
    from tests.java.tables import copy_warehouse

    table = java_templates[1][name]
    dropped = {"p": "a"} if name == "pk_dynamic" else {"p": "1"}
    java_copy = copy_warehouse(java_templates[0], str(tmp_path / "java-wh"))
    java_paimon.drop_partitions(table.path(java_copy), [dropped])
    code, record = run_job(
        tmp_path / "ours",
        "drop-partition",
        {"warehouse": java_warehouse, "table": table.identifier, "partitions": [dropped], "strict": True},
    )
    assert code == 0, record.get("error")
    ours, javas = _latest_files(table.path(java_warehouse)), _latest_files(table.path(java_copy))
    assert ours == javas
    assert ours[1], "the table keeps index files of the partitions it still has"
    if name == "pk_lookup_dv":  # its manifests' partition stats (Java's) rule some out: not read
        assert record["details"]["manifests_skipped"] > 0
    assert java_paimon.read(table.path(java_warehouse)) == java_paimon.read(table.path(java_copy))


def _latest_files(path: str) -> tuple[set[str], set[tuple]]:
    """(live data files, index files by partition, bucket and type) of the latest snapshot."""
    from paimon_format.scan.snapshot_scan import index_entries, live_entries

    table = _table(path)
    snapshot = table.snapshot_manager.latest()
    data = {entry.file.file_name for entry in live_entries(table, snapshot)}
    index = {(e.partition, e.bucket, e.index_type, e.file_name) for e in index_entries(table, snapshot)}
    return data, index
