"""What the live-table soak (scripts/soak.py) found, each pinned by a small deterministic case.

A branch Java made from a tag, whose snapshot Java's expiry then expired: the branch's first
snapshot (a copy of the tagged one) names the snapshot's changelog manifest list, which Java's
expiry deleted (tags never keep a changelog). Java reads the branch; our jobs sized the table for
`local: auto` by reading every branch's latest changelog list, and failed with exit 2 on it.
"""

from __future__ import annotations

import os

import pytest

from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.support.cli_runs import run_job

pytestmark = pytest.mark.java

FIELDS = [("dt", "STRING NOT NULL"), ("k", "BIGINT NOT NULL"), ("v", "STRING")]


def test_jobs_run_on_a_branch_whose_tag_lost_its_changelog_list(
    java_paimon, spark_session, tmp_path, capsys
) -> None:
    warehouse = str(tmp_path / "wh")
    path = os.path.join(warehouse, "db.db", "t")
    options = {
        "bucket": "1",
        "changelog-producer": "lookup",
        "deletion-vectors.enabled": "true",
        "snapshot.num-retained.min": "1",
        "snapshot.num-retained.max": "1",
    }
    java_paimon.create_table(path, FIELDS, ["dt"], ["dt", "k"], options)
    tagged = java_paimon.write(path, [{"dt": "2024-01-01", "k": 1, "v": "a"}])
    java_paimon.create_tag(path, "t1", tagged)
    java_paimon.create_branch(path, "b1", tag="t1")  # Java copies the snapshot: it must still exist
    for value in ("b", "c"):  # Java's own expiry (num-retained 1) expires the tagged snapshot
        java_paimon.write(path, [{"dt": "2024-01-02", "k": 2, "v": value}])
    branch = Table(FileIO.for_path(path), path).for_branch("b1")
    first = branch.snapshot_manager.latest()
    assert first is not None and first.changelog_manifest_list
    assert not os.path.exists(branch.manifest_path(first.changelog_manifest_list))  # what Java left
    assert java_paimon.read(path, branch="b1") == [{"dt": "2024-01-01", "k": 1, "v": "a"}]

    table = {"warehouse": warehouse, "table": "db.t", "local": "auto"}
    code, record = run_job(
        tmp_path, "drop-partition", {**table, "partitions": [{"dt": "2024-01-01"}]}, capsys, "--dry-run"
    )
    assert code == 0, record["error"]
    code, record = run_job(
        tmp_path, "remove-orphan-files", {**table, "older_than": "1 s", "force": True}, capsys, "--dry-run"
    )
    assert code == 0, record["error"]
    assert java_paimon.read(path, branch="b1") == [{"dt": "2024-01-01", "k": 1, "v": "a"}]
