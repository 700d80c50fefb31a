"""Tag, rollback, branch-expiry and repair jobs on the Java-written ``pk_changelog`` table (issue 17).

The fixture (tests/java/tables.py) has what these jobs must be careful with: snapshots 8-9, long-lived
changelogs 5-7, tag ``t2`` on the expired snapshot 2 (its changelog list deleted by Java's expiry),
tag ``t_latest`` on snapshot 9, and branch ``b1`` made from ``t2`` (its own snapshots 2-5 and its own
copy of ``t2``) that shares the table's manifests and data files.

After each job: Java reads every remaining snapshot, tag and branch with the rows it read before (a
rollback's latest reads exactly the target), no file a remaining root needs is missing, and Java's
own orphan cleaning finds nothing that only the dropped roots used (its one known false positive,
`lists_java_orphan_cleaning_loses`, aside): the job deleted exactly what it should.
"""

from __future__ import annotations

import datetime as dt
import os
import time

import pytest

from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import (
    assert_reads_kept,
    java_reads,
    lists_java_orphan_cleaning_loses,
    our_read,
    run_job,
)
from tests.java.oracle import JavaPaimon, sort_key
from tests.java.tables import JavaTable
from tests.support.table_states import missing_needed, unreferenced

pytestmark = pytest.mark.java

BRANCH_TAG = ("b1", "t2")  # branch b1's own copy of tag t2


def open_path(path: str) -> Table:
    return Table(FileIO.for_path(path), path)


def assert_nothing_lost_nothing_left(java: JavaPaimon, path: str, before_orphans: set[str]) -> None:
    """No file a remaining root needs is gone; no file only dropped roots used is left (by our
    independent oracle and by Java's OrphanFilesClean)."""
    table = open_path(path)
    assert not missing_needed(table), f"needed files are gone: {sorted(missing_needed(table))[:5]}"
    left = unreferenced(table) - before_orphans
    assert not left, f"files nothing references were left: {sorted(left)[:5]}"
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    java_found = java.remove_orphan_files(path, future, dry_run=True)
    extra = java_found - lists_java_orphan_cleaning_loses(path, with_data_files=True)
    assert not extra, f"Java's orphan cleaning finds files the job should have deleted: {sorted(extra)[:5]}"


def branch_tag_rows(java: JavaPaimon, path: str) -> list:
    return java.read(path, branch=BRANCH_TAG[0], tag=BRANCH_TAG[1])


@pytest.fixture
def pk(java_paimon, java_templates, java_warehouse) -> tuple[JavaTable, str, dict]:
    """(the fixture table, its path in this test's warehouse, the base job config)."""
    table = java_templates[1]["pk_changelog"]
    path = table.path(java_warehouse)
    assert {("tag", "t2"), ("tag", "t_latest"), ("branch", "b1")} <= set(table.reads)
    return table, path, {"warehouse": java_warehouse, "table": table.identifier}


@pytest.mark.parametrize("operation", ["delete-tag", "expire-tags"])
def test_deleting_the_tag_on_an_expired_snapshot_keeps_what_the_branch_shares(
    spark_session, java_paimon, pk, tmp_path, operation
):
    table, path, base = pk
    orphans_before = unreferenced(open_path(path))
    if operation == "delete-tag":
        settings = {"tags": ["t2"], "strict": True}
    else:  # t2 looks written 3 days ago (Java's tags carry no create time): older_than 1d expires it
        old = time.time() - 3 * 86400
        os.utime(os.path.join(path, "tag", "tag-t2"), (old, old))
        settings = {"older_than": "1d"}

    code, record = run_job(tmp_path, operation, {**base, **settings})

    assert code == 0, record.get("error")
    assert record["counts"]["tags_deleted"] == 1
    assert not os.path.exists(os.path.join(path, "tag", "tag-t2"))
    assert os.path.exists(os.path.join(path, "tag", "tag-t_latest"))
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("tag", "t2")})
    # (Java 1.0 reads a branch's tag only while main has that tag too: b1's copy is checked by
    # `missing_needed` below, which covers every branch's tags)
    assert os.path.exists(os.path.join(path, "branch", "branch-b1", "tag", "tag-t2"))
    # b1's snapshot 2 and tag t2 name t2's manifest lists: those stay
    assert record["counts"]["manifest_lists_deleted"] == 0
    assert_nothing_lost_nothing_left(java_paimon, path, orphans_before)


@pytest.mark.parametrize("target", [{"to_snapshot": 8}, {"to_tag": "t2"}])
def test_rollback_reads_exactly_the_target(spark_session, java_paimon, pk, tmp_path, target):
    table, path, base = pk
    orphans_before = unreferenced(open_path(path))
    expected = table.reads[("snapshot", "8")] if "to_snapshot" in target else table.reads[("tag", "t2")]

    code, record = run_job(tmp_path, "rollback", {**base, **target})

    assert code == 0, record.get("error")
    assert java_paimon.read(path) == expected
    refs = java_reads(java_paimon, path)
    assert ("tag", "t_latest") not in refs  # on snapshot 9, newer than either target
    if "to_tag" in target:
        # snapshot 2 expired long ago: restored from the tag; the newer snapshots and changelogs go
        assert record["details"]["restored_from_tag"] is True
        assert [ref for ref in refs if ref[0] == "snapshot"] == [("snapshot", "2")]
        assert not [name for name in os.listdir(os.path.join(path, "changelog")) if name[-1].isdigit()]
    else:
        assert [ref for ref in refs if ref[0] == "snapshot"] == [("snapshot", "8")]
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("tag", "t_latest")})
    assert branch_tag_rows(java_paimon, path) == table.reads[("tag", "t2")]
    assert_nothing_lost_nothing_left(java_paimon, path, orphans_before)
    # Java commits on top of the rolled-back table and reads its rows there
    java_paimon.write(path, [{**expected[0], "v": "after-rollback"}])
    assert java_paimon.read(path) == sorted(
        [{**expected[0], "v": "after-rollback"}, *expected[1:]], key=sort_key
    )


def test_expire_snapshots_on_every_branch_keeps_shared_and_tagged_files(
    spark_session, java_paimon, pk, tmp_path
):
    table, path, base = pk
    orphans_before = unreferenced(open_path(path))
    branch_tag = branch_tag_rows(java_paimon, path)
    settings = {"branches": "all", "retain_min": 1, "retain_max": 1, "older_than": "0s"}

    code, record = run_job(tmp_path, "expire-snapshots", {**base, **settings})

    assert code == 0, record.get("error")
    assert sorted(record["details"]["branches"]) == ["b1", "main"]
    assert os.listdir(os.path.join(path, "branch", "branch-b1", "snapshot")).count("snapshot-5") == 1
    branch_snapshots = [
        n for n in os.listdir(os.path.join(path, "branch", "branch-b1", "snapshot")) if n[-1].isdigit()
    ]
    assert branch_snapshots == ["snapshot-5"]
    assert [ref for ref in java_reads(java_paimon, path) if ref[0] == "snapshot"] == [("snapshot", "9")]
    assert_reads_kept(java_paimon, table, base["warehouse"])
    assert branch_tag_rows(java_paimon, path) == branch_tag
    assert_nothing_lost_nothing_left(java_paimon, path, orphans_before)


def test_remove_unexisting_files_after_a_lost_data_file(spark_session, java_paimon, pk, tmp_path):
    """A data file only the latest snapshot and t_latest name is lost: the repair commit removes it;
    Java and pypaimon read the repaired latest alike, every key the file did not hold as before."""
    from paimon_format.scan.snapshot_scan import live_entries

    table, path, base = pk
    ours = open_path(path)
    latest = ours.snapshot_manager.latest()
    branch_files = {
        e.file.file_name
        for e in live_entries(ours.for_branch("b1"), ours.for_branch("b1").snapshot_manager.latest())
    }
    candidates = [e for e in live_entries(ours, latest) if e.file.file_name not in branch_files]
    lost = max(candidates, key=lambda e: (e.file.row_count, e.file.file_name))
    lost_keys = {row["id"] for row in _file_rows(ours, lost)}
    os.remove(ours.data_file_path(lost))

    code, record = run_job(tmp_path, "remove-unexisting-files", {**base, "max_missing_ratio": 0.5})

    assert code == 0, record.get("error")
    assert record["counts"]["files_removed"] == 1 and record["counts"]["rows_lost"] == lost.file.row_count
    repaired = java_paimon.read(path)
    before = table.reads[("snapshot", str(latest.id))]
    assert [r for r in repaired if r["id"] not in lost_keys] == [
        r for r in before if r["id"] not in lost_keys
    ]
    assert len(repaired) < len(before)
    # our reader too (pypaimon 2.1.0 cannot read Paimon 1.0's manifest layout, which the repair's
    # commit keeps for the manifests it merges by blocks: KeyError '_VALUE_STATS_COLS', docs/safety.md)
    repaired_ref = ("snapshot", str(record["snapshot_ids"]["committed"]))
    assert sorted(r["id"] for r in our_read(path, repaired_ref)) == sorted(r["id"] for r in repaired)
    # the branch and the tag on the expired snapshot never named the file: they read as before
    assert java_paimon.read(path, branch="b1") == table.reads[("branch", "b1")]
    assert java_paimon.read(path, tag="t2") == table.reads[("tag", "t2")]


def _file_rows(table: Table, entry) -> list[dict]:
    import pyarrow.parquet as pq

    return pq.ParquetFile(table.data_file_path(entry)).read(columns=["id"]).to_pylist()
