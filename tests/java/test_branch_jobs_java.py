"""Branch jobs on the Java-written ``pk_changelog`` table, differential against Paimon's own (issue 30).

The fixture (tests/java/tables.py): main's snapshots 8-9, long-lived changelogs 5-7, tag ``t2`` on
the expired snapshot 2, ``t_latest`` on 9, and branch ``b1`` made from ``t2`` by Java with its own
commits. Each job runs on one copy of the table and Paimon's Java procedure of the same name on
another (where the bundle, Paimon 1.0, has one: createBranch, deleteBranch, fastForward); the
metadata both leave is the same, the files ours leaves are Java's minus exactly the files only the
dropped roots used, and Java reads every remaining snapshot, tag and branch as before, and the new
state (a created branch reads as its source, a fast-forwarded main as the branch).
"""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import (
    assert_reads_kept,
    files_under,
    java_reads,
    lists_java_orphan_cleaning_loses,
    run_job,
)
from tests.java.oracle import JavaPaimon, sort_key
from tests.java.tables import JavaTable, copy_warehouse
from tests.support.table_states import missing_needed, unreferenced

pytestmark = pytest.mark.java

HINTS = ("snapshot/LATEST", "snapshot/EARLIEST")


def open_path(path: str) -> Table:
    return Table(FileIO.for_path(path), path)


@pytest.fixture
def pk(java_paimon, java_templates, tmp_path) -> tuple[JavaTable, str, str, dict]:
    """(the fixture table, its path in our copy, its path in Java's copy, the base job config)."""
    template, tables = java_templates
    table = tables["pk_changelog"]
    ours = copy_warehouse(template, str(tmp_path / "ours"))
    java = copy_warehouse(template, str(tmp_path / "java"))
    return table, table.path(ours), table.path(java), {"warehouse": ours, "table": table.identifier}


def metadata(path: str, under: str = "") -> dict[str, bytes]:
    """Every schema, snapshot and tag file (no hints) below `under` of a table, with its bytes."""
    root = os.path.join(path, under)
    found = {}
    for relative in files_under(root) if os.path.isdir(root) else ():
        if relative.split("/")[0] in ("schema", "snapshot", "tag") and relative not in HINTS:
            with open(os.path.join(root, relative), "rb") as handle:
                found[relative] = handle.read()
    return found


def data_and_manifests(path: str) -> set[str]:
    return {p for p in files_under(path) if p.split("/")[0] not in ("schema", "snapshot", "tag", "branch")}


def assert_nothing_lost_nothing_left(java: JavaPaimon, path: str, orphans_before: set[str]) -> None:
    """No file a remaining root needs is gone; no file only dropped roots used is left (our oracle and
    Java's own orphan cleaning, its one known false positive aside)."""
    table = open_path(path)
    assert not missing_needed(table), f"needed files are gone: {sorted(missing_needed(table))[:5]}"
    left = unreferenced(table) - orphans_before
    assert not left, f"files nothing references were left: {sorted(left)[:5]}"
    future = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)
    extra = java.remove_orphan_files(path, future, dry_run=True) - lists_java_orphan_cleaning_loses(
        path, with_data_files=True
    )
    assert not extra, f"Java's orphan cleaning finds files the job should have deleted: {sorted(extra)[:5]}"


def test_created_branches_match_javas_and_read_as_their_sources(spark_session, java_paimon, pk, tmp_path):
    table, ours, theirs, base = pk
    for name, keys in (("c_tag", {"tag": "t_latest"}), ("c_empty", {"empty": True})):
        code, record = run_job(tmp_path / name, "create-branch", {**base, "branch": name, **keys})
        assert code == 0, record.get("error")
        java_paimon.create_branch(theirs, name, tag=keys.get("tag"))
        assert metadata(ours, f"branch/branch-{name}") == metadata(theirs, f"branch/branch-{name}")
    # sources Java 1.0 cannot branch from: a tag on an expired snapshot, a snapshot id
    for name, keys in (("c_t2", {"tag": "t2"}), ("c_8", {"snapshot": 8}), ("c_latest", {})):
        code, record = run_job(tmp_path / name, "create-branch", {**base, "branch": name, **keys})
        assert code == 0, record.get("error")

    read = java_reads(java_paimon, ours)
    assert read[("branch", "c_tag")] == table.reads[("tag", "t_latest")]
    assert read[("branch", "c_t2")] == table.reads[("tag", "t2")]
    assert read[("branch", "c_8")] == table.reads[("snapshot", "8")]
    assert read[("branch", "c_latest")] == table.reads[("snapshot", "9")]
    assert read[("branch", "c_empty")] == []
    assert_reads_kept(java_paimon, table, base["warehouse"])
    assert data_and_manifests(ours) == data_and_manifests(theirs)  # nothing but metadata written
    # Java commits to a branch we created and reads it there
    java_paimon.write(ours, [{**table.reads[("tag", "t2")][0], "v": "on-branch"}], branch="c_t2")
    assert any(row["v"] == "on-branch" for row in java_paimon.read(ours, branch="c_t2"))


def test_delete_branch_leaves_javas_tables_minus_the_files_only_the_branch_used(
    spark_session, java_paimon, pk, tmp_path
):
    table, ours, theirs, base = pk
    orphans_before = unreferenced(open_path(ours))
    code, record = run_job(tmp_path, "delete-branch", {**base, "branches": ["b1"]})
    assert code == 0, record.get("error")
    java_paimon.delete_branch(theirs, "b1")

    assert not os.path.exists(os.path.join(ours, "branch", "branch-b1"))
    assert metadata(ours) == metadata(theirs)
    assert files_under(ours) - {"branch"} <= files_under(theirs)
    gone = data_and_manifests(theirs) - data_and_manifests(ours)
    assert gone and gone == unreferenced(open_path(theirs)) - orphans_before  # exactly the branch's own
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("branch", "b1")})
    assert_nothing_lost_nothing_left(java_paimon, ours, orphans_before)


def test_fast_forward_leaves_javas_main_and_main_reads_the_branch(spark_session, java_paimon, pk, tmp_path):
    table, ours, theirs, base = pk
    orphans_before = unreferenced(open_path(ours))
    branch_rows = table.reads[("branch", "b1")]
    code, record = run_job(tmp_path, "fast-forward", {**base, "branch": "b1"})
    assert code == 0, record.get("error")
    java_paimon.fast_forward(theirs, "b1")

    ours_meta, theirs_meta = metadata(ours), metadata(theirs)
    # b1's snapshot 2 is Java's copy of main's snapshot 2, whose changelog list Java's expiry deleted
    # later: Java copies it as it is (main then names a missing file), ours without that list
    trimmed = json.loads(ours_meta.pop("snapshot/snapshot-2"))
    java_copy = json.loads(theirs_meta.pop("snapshot/snapshot-2"))
    assert not os.path.exists(os.path.join(theirs, "manifest", java_copy["changelogManifestList"]))
    assert trimmed.get("changelogManifestList") is None
    assert {k: v for k, v in java_copy.items() if v is not None and not k.startswith("changelog")} == {
        k: v for k, v in trimmed.items() if v is not None and not k.startswith("changelog")
    }
    assert ours_meta == theirs_meta
    assert java_paimon.read(ours) == branch_rows == java_paimon.read(theirs)
    gone = data_and_manifests(theirs) - data_and_manifests(ours)  # what only old main used
    assert gone and all(path.split("/")[0] not in ("changelog",) for path in gone)
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("tag", "t_latest")})
    assert java_paimon.read(ours, branch="b1") == branch_rows
    assert_nothing_lost_nothing_left(java_paimon, ours, orphans_before)
    # Java commits on top of the fast-forwarded main and reads its rows there
    java_paimon.write(ours, [{**branch_rows[0], "v": "after-ff"}])
    assert java_paimon.read(ours) == sorted(
        [{**branch_rows[0], "v": "after-ff"}, *branch_rows[1:]], key=sort_key
    )


def test_a_renamed_branch_reads_as_before(spark_session, java_paimon, pk, tmp_path):
    table, ours, _theirs, base = pk
    code, record = run_job(tmp_path, "rename-branch", {**base, "from_branch": "b1", "to_branch": "b2"})
    assert code == 0, record.get("error")

    read = java_reads(java_paimon, ours)
    assert ("branch", "b1") not in read
    assert read[("branch", "b2")] == table.reads[("branch", "b1")]
    assert java_paimon.read(ours, branch="b2", tag="t2") == table.reads[("tag", "t2")]
    assert_reads_kept(java_paimon, table, base["warehouse"], changed={("branch", "b1")})
    assert not missing_needed(open_path(ours))
