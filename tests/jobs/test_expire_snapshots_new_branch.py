"""A branch created from an expiring snapshot while expire-snapshots runs stops it before any file goes."""

from __future__ import annotations

import pytest

from jobs.create_branch import CreateBranchRequest, create_branch
from jobs.expire_snapshots import STEP_PLANNED, ExpiryRequest, expire_snapshots
from jobs.runtime.errors import SafetyRefusal
from paimon_format.storage import crash_points
from tests.support.table_states import build_sample_table, listed_files, open_table, view

FUTURE = "2100-01-01 00:00:00"


def test_a_branch_made_from_an_expiring_snapshot_during_the_run_keeps_its_files(spark_session, tmp_path):
    warehouse = str(tmp_path / "wh")
    table = build_sample_table(warehouse, commits=5)
    files_before = listed_files(table)

    def user_creates_a_branch(reached: str) -> None:  # at the plan, before any file goes
        create_branch(open_table(warehouse), CreateBranchRequest(branch="b", snapshot=1))

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, STEP_PLANNED)
    monkeypatch.setenv(crash_points.SKIP_ENV, "0")
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(user_creates_a_branch)
    try:
        with pytest.raises(SafetyRefusal, match="branches \\['b'\\] were created"):
            expire_snapshots(
                spark_session, table, ExpiryRequest(retain_min=1, retain_max=1, older_than=FUTURE)
            )
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()

    assert files_before <= listed_files(table)  # nothing deleted: the branch's snapshot 1 reads whole
    assert 1 in view(warehouse).rows_by_snapshot
    assert "branch/branch-b/snapshot/snapshot-1" in listed_files(table)
