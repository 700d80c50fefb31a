"""rename-tag, replace-tag, create-tag by watermark and rollback by time or watermark (issue #30).

Oracles: pypaimon reads every remaining snapshot and tag as before (a renamed tag as the old name
read); `missing_needed` (nothing a reader opens is gone) and `unreferenced` (nothing left that no
root needs) are empty after each run; a replaced tag ends with the same files as delete-tag then
create-tag of the same name; crash-then-rerun ends like an uninterrupted run.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main
from jobs.create_tag import CreateTagRequest, create_tag
from jobs.delete_tag import DeleteTagRequest, delete_tag
from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.rename_tag import STEP_COPIED, RenameTagRequest, rename_tag
from jobs.replace_tag import STEP_PARKED, STEP_REPLACED, ReplaceTagRequest, replace_tag
from jobs.rollback import RollbackRequest, rollback
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.local_frame import LocalSession
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.model.binary_row import deserialize_row
from paimon_format.storage import crash_points
from tests.support.table_states import (
    IDENTIFIER,
    _rows_at_tag,
    append_rows,
    batch,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    listed_files,
    missing_needed,
    open_table,
    table_root,
    unreferenced,
    view,
)


class _Crash(BaseException):
    pass


def _raise(step: str) -> None:
    raise _Crash(step)


@contextlib.contextmanager
def at_step(step: str, handler: Callable[[str], None] = _raise) -> Iterator[None]:
    """Run `handler` at the crash point `step` (in-process: raising _Crash is the crash)."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(handler)
    try:
        yield
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()


def run_cli(argv: list[str], capsys) -> tuple[int, dict]:
    code = main(argv)
    return code, json.loads(capsys.readouterr().out)


def set_watermarks(warehouse: str, watermarks: dict[int, int | None]) -> None:
    """Give snapshots a watermark (as a Flink writer's commits carry one); None: no watermark."""
    for snapshot_id, watermark in watermarks.items():
        path = Path(table_root(warehouse)) / "snapshot" / f"snapshot-{snapshot_id}"
        data = json.loads(path.read_text())
        data["watermark"] = watermark
        path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def small_table(tmp_path_factory) -> str:
    """Snapshots 1-3 with watermarks 100, none, 300; tag t2 on snapshot 2."""
    warehouse = str(tmp_path_factory.mktemp("tag-procedures") / "wh")
    build_sample_table(warehouse, commits=3)
    set_watermarks(warehouse, {1: 100, 2: None, 3: 300})
    return warehouse


# -- rename-tag ------------------------------------------------------------------------------------


def test_rename_tag_keeps_the_bytes_and_reads_as_before(small_table, tmp_path):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    table = open_table(warehouse)
    create_tag(table, CreateTagRequest("kept", snapshot_id=1, time_retained="2d"))
    old_bytes = Path(table.tag_manager.tag_path("kept")).read_bytes()
    rows = _rows_at_tag(warehouse, "kept")
    before = fingerprint(warehouse)

    dry = rename_tag(table, RenameTagRequest("kept", "renamed"), dry_run=True)
    assert fingerprint(warehouse) == before and dry.details["rename"]["snapshot"] == 1
    record = rename_tag(table, RenameTagRequest("kept", "renamed"))
    assert record.counts["tags_renamed"] == 1
    assert table.tag_manager.tag_names() == ["renamed", "t2"]
    assert Path(table.tag_manager.tag_path("renamed")).read_bytes() == old_bytes  # retention kept
    assert _rows_at_tag(warehouse, "renamed") == rows
    assert missing_needed(table) == set() and unreferenced(table) == set()
    renamed = fingerprint(warehouse)
    again = rename_tag(table, RenameTagRequest("kept", "renamed"))  # a rerun after it finished
    assert again.details["rename"]["already_done"] and fingerprint(warehouse) == renamed
    with pytest.raises(BadInputError, match="tag 'kept' does not exist"):
        rename_tag(table, RenameTagRequest("kept", "other"))
    with pytest.raises(BadInputError, match="tag 't2' already exists"):
        rename_tag(table, RenameTagRequest("renamed", "t2"))


def test_rename_tag_crash_after_copy_then_rerun_and_a_racing_replace(small_table, tmp_path):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    table = open_table(warehouse)
    with at_step(STEP_COPIED), pytest.raises(_Crash):
        rename_tag(table, RenameTagRequest("t2", "two"))
    assert table.tag_manager.tag_names() == ["t2", "two"]  # both names read snapshot 2
    rerun = rename_tag(table, RenameTagRequest("t2", "two"))
    assert rerun.details["rename"]["resumed"] and table.tag_manager.tag_names() == ["two"]

    def racing_replace(step: str) -> None:  # another writer points the old tag elsewhere meanwhile
        table.tag_manager.create_tag("two", table.snapshot_manager.snapshot(3), replace=True)

    with at_step(STEP_COPIED, racing_replace), pytest.raises(CommitRaceLost, match="replaced or deleted"):
        rename_tag(table, RenameTagRequest("two", "deux"))
    assert table.tag_manager.tag("two").id == 3 and table.tag_manager.tag("deux").id == 2


# -- replace-tag -----------------------------------------------------------------------------------


def overwritten_table(warehouse: str) -> None:
    """Tags t2, t3 on snapshots 2, 3; snapshot 5 overwrites dt=2024-01-01; only 6, 7 stay.

    The expiry is set-up, not under test: it runs in the driver (`LocalSession`), which
    tests/jobs/runtime/test_local_exec.py shows deletes what Spark deletes."""
    table = build_sample_table(warehouse, commits=4)
    table.tag_manager.create_tag("t3", table.snapshot_manager.snapshot(3))
    written = write_table_files(table.file_io, table.path, table.schema, batch(100, 2, days=1), 5000)
    SnapshotCommit(table).overwrite(
        [CommitMessage(p, bucket, -1, files) for p, bucket, files in written],
        partition_filter=lambda p: deserialize_row(p, table.partition_types) == ["2024-01-01"],
    )
    append_rows(table, batch(200, 3))
    append_rows(table, batch(300, 3))
    table.tag_manager.create_tag("t6", table.snapshot_manager.snapshot(6))
    expire_snapshots(LocalSession(), table, ExpiryRequest(retain_min=2, older_than="2100-01-01 00:00:00"))
    assert table.snapshot_manager.snapshot_ids() == [6, 7]


@pytest.fixture(scope="module")
def tagged(tmp_path_factory):
    """t2, t3 on expired snapshots 2, 3 (t3 alone holds the overwritten partition's old files), t6
    on the retained 6; snapshots 6, 7."""
    template = str(tmp_path_factory.mktemp("replace-tag") / "template")
    overwritten_table(template)
    return template, view(template)


def assert_readable(warehouse: str, before, replaced: dict[str, int]) -> None:
    after = view(warehouse)
    for snapshot_id, rows in after.rows_by_snapshot.items():
        assert rows == before.rows_by_snapshot[snapshot_id]
    for name, rows in after.rows_by_tag.items():
        expected = before.rows_by_snapshot[replaced[name]] if name in replaced else before.rows_by_tag[name]
        assert rows == expected, name
    table = open_table(warehouse)
    assert missing_needed(table) == set() and unreferenced(table) == set()


def test_replace_tag_deletes_what_only_the_old_tag_used(spark_session, tagged, tmp_path):
    template, before = tagged
    reference = copy_warehouse(template, str(tmp_path / "reference"))  # delete-tag, then create-tag
    delete_tag(spark_session, open_table(reference), DeleteTagRequest(["t3"]))
    create_tag(open_table(reference), CreateTagRequest("t3", snapshot_id=7))
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    table = open_table(warehouse)
    listed = listed_files(table)

    dry = replace_tag(spark_session, table, ReplaceTagRequest("t3"), dry_run=True)
    assert listed_files(table) == listed and dry.details["old_snapshot_expired"]
    record = replace_tag(spark_session, table, ReplaceTagRequest("t3"))
    assert table.tag_manager.tag("t3").id == 7 and record.counts["tags_replaced"] == 1
    assert record.counts["files_deleted"] == dry.counts["files_to_delete"] > 0
    assert table.tag_manager.pending_deletion_names() == []
    assert listed_files(table) == listed_files(open_table(reference))
    assert_readable(warehouse, before, {"t3": 7})


def test_replace_tag_on_a_retained_snapshot_needs_no_spark(tagged, tmp_path):
    template, before = tagged
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    table = open_table(warehouse)

    def no_spark():
        raise AssertionError("Spark started though the old tag's snapshot is retained")

    listed = listed_files(table)
    replace_tag(no_spark, table, ReplaceTagRequest("t6", snapshot_id=7, time_retained="1d"))
    assert table.tag_manager.tag("t6").id == 7 and table.tag_manager.tag("t6").tag_time_retained_ms
    assert listed_files(table) == listed
    with pytest.raises(BadInputError, match="tag 'nope' does not exist"):
        replace_tag(no_spark, table, ReplaceTagRequest("nope"))
    with pytest.raises(BadInputError, match="snapshot 3 does not exist"):
        replace_tag(no_spark, table, ReplaceTagRequest("t6", snapshot_id=3))
    assert_readable(warehouse, before, {"t6": 7})


@pytest.fixture(scope="module")
def t3_replaced(spark_session, tagged, tmp_path_factory) -> set[str]:
    """The files after an uninterrupted replace-tag t3 on Spark, computed once for the crash cases."""
    template, _before = tagged
    reference = copy_warehouse(template, str(tmp_path_factory.mktemp("replace-tag-reference") / "wh"))
    replace_tag(spark_session, open_table(reference), ReplaceTagRequest("t3"))
    return listed_files(open_table(reference))


@pytest.mark.parametrize("step", [STEP_PARKED, STEP_REPLACED])
def test_replace_tag_crash_then_rerun_ends_like_an_uninterrupted_run(
    spark_session, tagged, t3_replaced, tmp_path, step
):
    """The crashed run plans in the driver (`LocalSession`): its crash points sit in driver code
    between whole steps, so storage is left as a Spark run leaves it, in a fraction of the time; the
    rerun runs on Spark and must end with the uninterrupted Spark run's files (`t3_replaced`)."""
    template, before = tagged
    crashed = copy_warehouse(template, str(tmp_path / "crashed"))
    table = open_table(crashed)
    with at_step(step), pytest.raises(_Crash):
        replace_tag(LocalSession(), table, ReplaceTagRequest("t3"))
    assert missing_needed(table) == set()  # every remaining root still reads
    replace_tag(spark_session, table, ReplaceTagRequest("t3"))
    assert listed_files(table) == t3_replaced
    assert_readable(crashed, before, {"t3": 7})


def test_replace_tag_racing_writer_is_exit_3_and_nothing_goes(spark_session, tagged, tmp_path):
    template, before = tagged
    warehouse = copy_warehouse(template, str(tmp_path / "wh"))
    table = open_table(warehouse)
    listed = listed_files(table)

    def racing_replace(step: str) -> None:
        table.tag_manager.create_tag("t3", table.snapshot_manager.snapshot(6), replace=True)

    with at_step(STEP_PARKED, racing_replace), pytest.raises(CommitRaceLost, match="replaced or deleted"):
        replace_tag(spark_session, table, ReplaceTagRequest("t3"))
    assert table.tag_manager.tag("t3").id == 6  # the other writer's tag stays
    assert listed - listed_files(table) == set()  # nothing deleted (the old tag was parked first)
    assert missing_needed(table) == set()


# -- create-tag by watermark, rollback by time or watermark -----------------------------------------


def test_create_tag_by_watermark_skips_snapshots_without_one(small_table, tmp_path):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    table = open_table(warehouse)
    create_tag(table, CreateTagRequest("w250", watermark=250))  # 2 has none: 1 (100) is the latest
    create_tag(table, CreateTagRequest("w300", watermark=300))
    assert table.tag_manager.tag("w250").id == 1 and table.tag_manager.tag("w300").id == 3
    with pytest.raises(BadInputError, match="no retained snapshot has a watermark at or before 99"):
        create_tag(table, CreateTagRequest("w99", watermark=99))


def test_rollback_to_timestamp_and_to_watermark(spark_session, small_table, tmp_path):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    table = open_table(warehouse)
    seen = view(warehouse)
    moment = table.snapshot_manager.snapshot(2).time_millis
    request = RollbackRequest(to_timestamp=_utc(moment))
    assert request.snapshot_at(table) == 2
    dry = rollback(spark_session, table, request, dry_run=True)
    assert dry.snapshot_ids["target"] == 2 and table.snapshot_manager.latest_id() == 3
    rollback(spark_session, table, RollbackRequest(to_watermark=150))  # 2 has none: back to 1
    assert table.snapshot_manager.snapshot_ids() == [1] and table.tag_manager.tag_names() == []
    assert view(warehouse).rows_by_snapshot[1] == seen.rows_by_snapshot[1]
    assert missing_needed(table) == set() and unreferenced(table) == set()
    with pytest.raises(BadInputError, match="no retained snapshot was committed at or before"):
        rollback(spark_session, table, RollbackRequest(to_timestamp=_utc(moment - 3_600_000)))


def _utc(epoch_ms: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch_ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")


def test_cli_bad_input_is_exit_2_naming_it_and_changes_nothing(small_table, tmp_path, capsys):
    warehouse = copy_warehouse(small_table, str(tmp_path / "wh"))
    before = fingerprint(warehouse)
    cases = {
        "rename-unknown": ("rename-tag", {"from_tag": "nope", "to_tag": "x"}, "tag 'nope' does not exist"),
        "rename-same": ("rename-tag", {"from_tag": "t2", "to_tag": "t2"}, "the same name"),
        "replace-unknown": ("replace-tag", {"tag": "nope"}, "tag 'nope' does not exist"),
        "replace-two": ("replace-tag", {"tag": "t2", "snapshot": 1, "watermark": 5}, "not several"),
        "create-two": ("create-tag", {"tag": "x", "timestamp": "1d", "watermark": 5}, "not several"),
        "rollback-two": ("rollback", {"to_snapshot": 1, "to_watermark": 5}, "exactly one of"),
        "rollback-time": ("rollback", {"to_timestamp": "2000-01-01 00:00:00"}, "no retained snapshot"),
    }
    for name, (operation, keys, expected) in cases.items():
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
        code, record = run_cli([operation, "--config", str(config)], capsys)
        assert code == 2 and expected in record["error"], (name, record["error"])
    assert fingerprint(warehouse) == before


@pytest.mark.parametrize("operation", ["rename-tag", "replace-tag"])
def test_the_example_configs_load(operation):
    from jobs.runtime.config import load_config
    from jobs.runtime.registry import load

    path = Path(__file__).resolve().parents[2] / "conf" / f"{operation}.yaml"
    assert load_config(str(path), [], load(operation).CONFIG_MODEL).table == "db.events"
