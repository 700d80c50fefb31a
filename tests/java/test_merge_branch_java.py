"""merge-branch read by Paimon's Java (issue #30): after our merge, Java reads main with the branch's
rows added, and every snapshot, tag and branch that was there reads as before.

No differential: `Table.mergeBranch` came with Paimon 2.0, and the bundle the oracle runs is Paimon
1.0, which has none (tests/jobs/test_merge_branch.py holds the rules as read in Paimon's sources).
Two tables: one Java wrote (main, tag t1 on snapshot 1, branch b from t1 with Java's own commits,
then main again), and ours (tests/support/merge_tables.py). Then Java deletes the branch and cleans
orphans: the merged files are main's, and main still reads them.
"""

from __future__ import annotations

import datetime as dt

import pytest

from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import java_reads, run_job
from tests.java.oracle import sort_key
from tests.support.merge_tables import BRANCH, build_mergeable_table
from tests.support.table_states import IDENTIFIER, missing_needed, table_root

pytestmark = pytest.mark.java


def _java_table(java, path: str) -> None:
    """Main 0-5 (snapshot 1, tag t1), 6-9 (2); branch b from t1 with 100-102 and 110-111 (its 2, 3);
    main 10-13 (3). Written, tagged and branched by Paimon's Java."""
    java.create_table(
        path,
        [("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING")],
        ["dt"],
        [],
        {"bucket": "-1", "file.format": "parquet", "branch-merge.enabled": "true"},
    )

    def rows(ids: range) -> list[dict]:
        return [{"id": i, "dt": f"d{i % 2}", "v": f"v{i}"} for i in ids]

    java.write(path, rows(range(0, 6)))
    java.create_tag(path, "t1", 1)
    java.write(path, rows(range(6, 10)))
    java.create_branch(path, BRANCH, tag="t1")
    java.write(path, rows(range(100, 103)), branch=BRANCH)
    java.write(path, rows(range(110, 112)), branch=BRANCH)
    java.write(path, rows(range(10, 14)))


def _merge_and_check(java, tmp_path, warehouse: str) -> None:
    path = table_root(warehouse)
    before = java_reads(java, path)
    main_latest = max(int(name) for kind, name in before if kind == "snapshot")
    branch_rows = before[("branch", BRANCH)]
    t1_rows = before[("tag", "t1")]
    added = [row for row in branch_rows if row not in t1_rows]
    assert added, "the branch has rows of its own"

    code, record = run_job(
        tmp_path, "merge-branch", {"warehouse": warehouse, "table": IDENTIFIER, "source_branch": BRANCH}
    )

    assert code == 0, record.get("error")
    assert record["snapshot_ids"]["committed"] == main_latest + 1
    after = java_reads(java, path)
    merged = ("snapshot", str(main_latest + 1))
    assert after[merged] == sorted(before[("snapshot", str(main_latest))] + added, key=sort_key)
    assert {ref: rows for ref, rows in after.items() if ref != merged} == before
    assert missing_needed(Table(FileIO.for_path(path), path)) == set()

    # the merged files are main's: Java drops the branch and cleans orphans, main still reads them all
    java.delete_branch(path, BRANCH)
    java.remove_orphan_files(path, dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1))
    assert java.read(path, snapshot_id=main_latest + 1) == after[merged]
    assert missing_needed(Table(FileIO.for_path(path), path)) == set()


def test_java_reads_a_java_written_table_merged(java_paimon, tmp_path):
    warehouse = str(tmp_path / "wh")
    _java_table(java_paimon, table_root(warehouse))
    _merge_and_check(java_paimon, tmp_path / "run", warehouse)


def test_java_reads_our_table_merged(java_paimon, tmp_path):
    warehouse = str(tmp_path / "wh")
    build_mergeable_table(warehouse)
    _merge_and_check(java_paimon, tmp_path / "run", warehouse)
