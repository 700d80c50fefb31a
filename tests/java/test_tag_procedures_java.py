"""rename-tag, replace-tag, create-tag and rollback by time on the Java-written ``pk_changelog`` table (#30).

The fixture (tests/java/tables.py): snapshots 8-9, tag ``t2`` on the expired snapshot 2 (Java wrote
it), tag ``t_latest`` on 9, branch ``b1`` made from ``t2`` with its own copy of ``t2``. After each
job Paimon's Java reads the renamed tag as the old name read, the replaced tag as its new snapshot,
and every other snapshot, tag and branch as before; nothing a remaining root needs is gone, and
nothing only the old tag used is left (by our oracle and by Java's own orphan cleaning). This
bundle's TagManager and Table have neither renameTag nor replaceTag (javap), so there is no
differential for those two; create-tag and rollback by time are checked against its SnapshotManager's
pick and Java's reads.
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import assert_reads_kept, lists_java_orphan_cleaning_loses, run_job
from tests.java.oracle import JavaPaimon
from tests.java.tables import JavaTable
from tests.support.table_states import missing_needed, unreferenced

pytestmark = pytest.mark.java


def open_path(path: str) -> Table:
    return Table(FileIO.for_path(path), path)


def assert_nothing_lost_nothing_left(java: JavaPaimon, path: str, before_orphans: set[str]) -> None:
    table = open_path(path)
    assert not missing_needed(table), f"needed files are gone: {sorted(missing_needed(table))[:5]}"
    left = unreferenced(table) - before_orphans
    assert not left, f"files nothing references were left: {sorted(left)[:5]}"
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    java_found = java.remove_orphan_files(path, future, dry_run=True)
    extra = java_found - lists_java_orphan_cleaning_loses(path, with_data_files=True)
    assert not extra, f"Java's orphan cleaning finds files the job should have deleted: {sorted(extra)[:5]}"


@pytest.fixture
def pk(java_paimon, java_templates, java_warehouse) -> tuple[JavaTable, str, dict]:
    """(the fixture table, its path in this test's warehouse, the base job config)."""
    table = java_templates[1]["pk_changelog"]
    path = table.path(java_warehouse)
    assert {("tag", "t2"), ("tag", "t_latest"), ("snapshot", "8")} <= set(table.reads)
    return table, path, {"warehouse": java_warehouse, "table": table.identifier}


def test_rename_tag_java_reads_the_new_name_as_the_old(java_paimon, pk, tmp_path):
    table, path, base = pk
    orphans_before = unreferenced(open_path(path))
    code, record = run_job(tmp_path, "rename-tag", {**base, "from_tag": "t2", "to_tag": "t2-renamed"})
    assert code == 0, record.get("error")
    assert not os.path.exists(os.path.join(path, "tag", "tag-t2"))
    assert java_paimon.read(path, tag="t2-renamed") == table.reads[("tag", "t2")]
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("tag", "t2")})
    assert_nothing_lost_nothing_left(java_paimon, path, orphans_before)


def test_replace_tag_java_reads_the_new_snapshot(spark_session, java_paimon, pk, tmp_path):
    table, path, base = pk
    orphans_before = unreferenced(open_path(path))
    code, record = run_job(tmp_path, "replace-tag", {**base, "tag": "t2", "snapshot": 8})
    assert code == 0, record.get("error")
    assert record["details"]["old_snapshot_expired"] is True
    assert java_paimon.read(path, tag="t2") == table.reads[("snapshot", "8")]
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("tag", "t2")})
    assert_nothing_lost_nothing_left(java_paimon, path, orphans_before)


def test_create_tag_and_rollback_by_time_on_a_java_table(spark_session, java_paimon, pk, tmp_path):
    """By a UTC time between Java's commits of snapshots 8 and 9: the tag and the rollback both take
    8, the one Paimon's rollback_to_timestamp takes (SnapshotManager.earlierOrEqualTimeMills; its
    create_tag_from_timestamp would take 9), and Java reads the new tag and the rolled-back main as
    snapshot 8 read, every other root as before."""
    table, path, base = pk
    orphans_before = unreferenced(open_path(path))
    committed = {}
    for snapshot_id in (8, 9):
        with open(os.path.join(path, "snapshot", f"snapshot-{snapshot_id}"), encoding="utf-8") as handle:
            committed[snapshot_id] = json.load(handle)["timeMillis"]
    moment_ms = (committed[8] + committed[9]) // 2  # after 8 was committed, before 9
    assert committed[8] < moment_ms < committed[9]
    java = java_paimon.snapshots_around(path, moment_ms)
    assert java["earlier_or_equal_time"] == 8 and java["later_or_equal_time"] == 9
    moment = dt.datetime.fromtimestamp(moment_ms / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")

    code, record = run_job(tmp_path / "tag", "create-tag", {**base, "tag": "at-8", "timestamp": moment})
    assert code == 0, record.get("error")
    assert record["snapshot_ids"]["tagged"] == 8
    assert java_paimon.read(path, tag="at-8") == table.reads[("snapshot", "8")]
    assert_reads_kept(java_paimon, table, base["warehouse"])

    code, record = run_job(tmp_path / "rollback", "rollback", {**base, "to_timestamp": moment})
    assert code == 0, record.get("error")
    assert record["snapshot_ids"]["target"] == 8
    assert java_paimon.read(path) == table.reads[("snapshot", "8")]
    assert not os.path.exists(os.path.join(path, "snapshot", "snapshot-9"))
    assert java_paimon.read(path, tag="at-8") == table.reads[("snapshot", "8")]
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("tag", "t_latest")})
    assert_nothing_lost_nothing_left(java_paimon, path, orphans_before)
