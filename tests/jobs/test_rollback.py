"""rollback on real tables: the table reads exactly the target afterwards (pypaimon), newer snapshots,
tags and the files only they used are gone, a later write commits on top; crash, rerun, race.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main
from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files
from jobs.rollback import STEP_METADATA, STEP_PLANNED, STEP_SNAPSHOT, RollbackRequest, rollback
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.local_frame import LocalSession
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    listed_files,
    missing_needed,
    open_table,
    row_ids,
    unreferenced,
    view,
)

FUTURE = "2100-01-01 00:00:00"


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    """Snapshots 1-6, tags t2 (2) and t5 (5); and a copy where only 5, 6 are left (t2 holds 2).
    That copy's expiry is set-up, not under test: it runs in the driver (`LocalSession`), which
    tests/jobs/runtime/test_local_exec.py shows deletes what Spark deletes."""
    base = tmp_path_factory.mktemp("rollback")
    full = str(base / "full")
    table = build_sample_table(full, commits=4)
    append_rows(table, batch(100, 4))
    table.tag_manager.create_tag("t5", table.snapshot_manager.snapshot(5))
    append_rows(table, batch(200, 4))
    expired = copy_warehouse(full, str(base / "expired"))
    expire_snapshots(LocalSession(), open_table(expired), ExpiryRequest(retain_min=2, older_than=FUTURE))
    assert open_table(expired).snapshot_manager.snapshot_ids() == [5, 6]
    return full, view(full), expired


def assert_clean(warehouse: str) -> None:
    table = open_table(warehouse)
    assert missing_needed(table) == set()
    assert unreferenced(table) == set()  # nothing only the rolled-back snapshots and tags used is left


def test_rollback_to_a_snapshot_then_write_on_top(spark_session, history, tmp_path):
    full, before, _ = history
    warehouse = copy_warehouse(full, str(tmp_path / "wh"))
    table = open_table(warehouse)

    listed = listed_files(table)
    dry = rollback(spark_session, table, RollbackRequest(to_snapshot=3), dry_run=True)
    assert listed_files(table) == listed and dry.counts["snapshots_to_delete"] == 3
    record = rollback(spark_session, table, RollbackRequest(to_snapshot=3))
    assert record.counts["snapshots_deleted"] == 3 and record.counts["tags_deleted"] == 1
    assert record.counts["files_deleted"] == dry.counts["files_to_delete"] > 0
    assert table.snapshot_manager.snapshot_ids() == [1, 2, 3] and table.tag_manager.tag_names() == ["t2"]
    assert Path(table.snapshot_manager.latest_hint_path()).read_text() == "3"
    after = view(warehouse)
    assert after.latest == 3 and after.latest_rows == before.rows_by_snapshot[3]
    assert after.rows_by_tag["t2"] == before.rows_by_tag["t2"]
    assert_clean(warehouse)

    append_rows(table, batch(500, 3))  # a later write commits on top
    again = view(warehouse)
    assert again.latest == 4
    assert row_ids(again.latest_rows) == row_ids(before.rows_by_snapshot[3]) + [500, 501, 502]


def test_rollback_to_an_expired_snapshot_restores_it_from_the_tag(spark_session, history, tmp_path):
    full, before, expired = history
    warehouse = copy_warehouse(expired, str(tmp_path / "wh"))
    table = open_table(warehouse)
    with pytest.raises(BadInputError, match="snapshot 3 does not exist and no tag holds it"):
        rollback(spark_session, table, RollbackRequest(to_snapshot=3))
    record = rollback(spark_session, table, RollbackRequest(to_snapshot=2))
    assert record.details["restored_from_tag"] and record.counts["snapshots_restored"] == 1
    assert table.snapshot_manager.snapshot_ids() == [2]
    assert table.snapshot_manager.earliest_id() == 2 and table.tag_manager.tag_names() == ["t2"]
    restored = json.loads(Path(table.snapshot_manager.snapshot_path(2)).read_text())
    assert "tagCreateTime" not in restored
    after = view(warehouse)
    assert after.latest == 2 and after.latest_rows == before.rows_by_snapshot[2]
    assert_clean(warehouse)


def test_rollback_to_tag_and_bad_input_through_the_cli(history, tmp_path, capsys, spark_session):
    full, before, _ = history
    warehouse = copy_warehouse(full, str(tmp_path / "wh"))
    config = tmp_path / "rollback.yaml"
    pristine = fingerprint(warehouse)
    for keys, expected in (
        ({"to_snapshot": 9}, "snapshot 9 does not exist"),
        ({"to_tag": "nope"}, "tag 'nope' does not exist"),
        ({"to_snapshot": 2, "to_tag": "t2"}, "give exactly one of to_snapshot and to_tag"),
        ({}, "give exactly one of to_snapshot and to_tag"),
    ):
        config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
        code = main(["rollback", "--config", str(config)])
        record = json.loads(capsys.readouterr().out)
        assert code == 2 and expected in record["error"], record["error"]
    assert fingerprint(warehouse) == pristine
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "to_tag": "t5"}))
    assert main(["rollback", "--config", str(config)]) == 0
    capsys.readouterr()
    after = view(warehouse)
    assert after.latest == 5 and after.latest_rows == before.rows_by_snapshot[5]
    assert sorted(after.rows_by_tag) == ["t2", "t5"]
    assert_clean(warehouse)


class _Crash(BaseException):
    pass


def _with_crash_handler(step: str, handler, call) -> None:
    from paimon_format.storage import crash_points

    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    monkeypatch.setenv(crash_points.SKIP_ENV, "1" if step == STEP_SNAPSHOT else "0")
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(handler)
    try:
        call()
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()


@pytest.fixture(scope="module")
def rolled_back_to_3(spark_session, history, tmp_path_factory) -> set[str]:
    """The files after an uninterrupted rollback to snapshot 3 on Spark (what a crashed run's rerun
    and orphan cleanup end with), computed once for the crash cases."""
    full, _before, _ = history
    reference = copy_warehouse(full, str(tmp_path_factory.mktemp("rollback-reference") / "wh"))
    rollback(spark_session, open_table(reference), RollbackRequest(to_snapshot=3))
    return listed_files(open_table(reference))


@pytest.mark.parametrize("step", [STEP_SNAPSHOT, STEP_METADATA])
def test_rollback_crash_then_rerun_and_orphan_cleanup(
    spark_session, history, rolled_back_to_3, tmp_path, step
):
    """A crash leaves every remaining snapshot and tag readable; the rerun finishes the metadata and
    what it still sees; remove-orphan-files clears the rest (no remaining root names it).

    The crashed run plans in the driver (`LocalSession`): its crash points sit in driver code between
    whole steps, so storage is left as a Spark run leaves it, in a fraction of the time; the rerun and
    the orphan cleanup run on Spark and must end with the uninterrupted Spark run's files."""
    from jobs.runtime.local_frame import LocalSession

    full, before, _ = history
    warehouse = copy_warehouse(full, str(tmp_path / "crashed"))
    table = open_table(warehouse)

    def crash(reached: str) -> None:
        raise _Crash(reached)

    def run() -> None:
        with pytest.raises(_Crash):
            rollback(LocalSession(), table, RollbackRequest(to_snapshot=3))

    _with_crash_handler(step, crash, run)
    assert missing_needed(table) == set()
    latest = view(warehouse)
    assert latest.latest_rows == before.rows_by_snapshot[latest.latest]
    rollback(spark_session, table, RollbackRequest(to_snapshot=3))
    remove_orphan_files(
        spark_session, table, OrphanSettings(older_than_ms=0, force=True, max_orphan_ratio=1.0)
    )
    hints = {"snapshot/LATEST", "snapshot/EARLIEST"}
    assert listed_files(table) - hints == rolled_back_to_3 - hints
    assert view(warehouse).latest_rows == before.rows_by_snapshot[3]
    assert_clean(warehouse)


def test_a_commit_during_the_rollback_stops_it_before_any_file_goes(spark_session, history, tmp_path):
    full, before, _ = history
    warehouse = copy_warehouse(full, str(tmp_path / "wh"))
    table = open_table(warehouse)

    def writer_commits(reached: str) -> None:
        append_rows(open_table(warehouse), batch(900, 2))  # another writer, on top of snapshot 6

    def run() -> None:
        with pytest.raises(CommitRaceLost, match="snapshot 7 was committed by another writer"):
            rollback(spark_session, table, RollbackRequest(to_snapshot=3))

    _with_crash_handler(STEP_PLANNED, writer_commits, run)
    after = view(warehouse)
    assert after.latest == 7 and row_ids(after.latest_rows) == row_ids(before.rows_by_snapshot[6]) + [
        900,
        901,
    ]
    assert missing_needed(table) == set()
