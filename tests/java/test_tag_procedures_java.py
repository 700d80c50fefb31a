"""rename-tag and replace-tag on the Java-written ``pk_changelog`` table (issue 30).

The fixture (tests/java/tables.py): snapshots 8-9, tag ``t2`` on the expired snapshot 2 (Java wrote
it), tag ``t_latest`` on 9, branch ``b1`` made from ``t2`` with its own copy of ``t2``. After each
job Paimon's Java reads the renamed tag as the old name read, the replaced tag as its new snapshot,
and every other snapshot, tag and branch as before; nothing a remaining root needs is gone, and
nothing only the old tag used is left (by our oracle and by Java's own orphan cleaning).
"""

from __future__ import annotations

import datetime as dt
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
