"""merge-branch on our own append tables (issue #30): main gets the branch's new files, nothing else
changes; a dry run changes nothing; every refusal Paimon makes is exit 2 naming the reason; a writer
committing on the target meanwhile is exit 3; a crash then a rerun merges exactly once.

The table (tests/support/merge_tables.py): main 0-17 in snapshots 1-3, tag t1 on 1, branch b from t1
with 600-602 and 660-662. Oracle: our reader (the one pypaimon agrees with in tests/interop) at every
snapshot, tag and branch; tests/java/test_merge_branch_java.py has Paimon's Java read the result.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from jobs.__main__ import main
from jobs.create_branch import CreateBranchRequest, create_branch
from jobs.delete_branch import DeleteBranchRequest, delete_branch
from jobs.merge_branch import STEP_COMMITTED, STEP_PLANNED, merge_branch
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.model.schema import new_table_schema
from paimon_format.model.type_parsing import parse_type
from paimon_format.storage import crash_points
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from tests.java.helpers import our_read
from tests.support.merge_tables import BRANCH, BRANCH_IDS, MAIN_IDS, build_mergeable_table
from tests.support.table_states import (
    IDENTIFIER,
    TABLE_OPTIONS,
    append_rows,
    batch,
    copy_warehouse,
    fingerprint,
    missing_needed,
    open_table,
    table_root,
    unreferenced,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("merge-branch") / "wh")
    build_mergeable_table(warehouse)
    return warehouse


@pytest.fixture
def warehouse(template, tmp_path) -> str:
    return copy_warehouse(template, str(tmp_path / "wh"))


def ids_at(table: Table, ref: tuple[str, str]) -> list[int]:
    return sorted(row["id"] for row in our_read(table.path, ref))


def reads(table: Table) -> dict[tuple[str, str], list[int]]:
    refs = [("snapshot", str(i)) for i in table.snapshot_manager.snapshot_ids()]
    refs += [("tag", name) for name in table.tag_manager.tag_names()]
    refs += [("branch", name) for name in table.branch_manager.branch_names()]
    return {ref: ids_at(table, ref) for ref in refs}


def run_cli(tmp_path, keys: dict, warehouse: str, *extra: str) -> tuple[int, dict]:
    config = tmp_path / "merge-branch.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
    output = tmp_path / "record.json"
    code = main(["merge-branch", "--config", str(config), "--output", str(output), *extra])
    return code, json.loads(output.read_text())


def test_main_reads_the_union_and_nothing_else_changes(warehouse, tmp_path):
    table = open_table(warehouse)
    before = reads(table)
    branch_files = fingerprint(f"{table.path}/branch")

    code, record = run_cli(tmp_path, {"source_branch": BRANCH}, warehouse)

    assert code == 0, record.get("error")
    table = open_table(warehouse)
    latest = table.snapshot_manager.latest()
    assert latest.id == 4 and latest.commit_kind == "APPEND"
    assert record["snapshot_ids"]["committed"] == 4 and record["counts"]["files_added"] == 6
    assert ids_at(table, ("snapshot", "4")) == sorted(MAIN_IDS + BRANCH_IDS)
    assert {ref: rows for ref, rows in reads(table).items() if ref != ("snapshot", "4")} == before
    assert fingerprint(f"{table.path}/branch") == branch_files  # the source is untouched
    assert missing_needed(table) == set()

    # merged again: nothing new on the branch, nothing committed
    code, record = run_cli(tmp_path, {"source_branch": BRANCH}, warehouse)
    assert code == 0 and record["counts"]["files_to_add"] == 0
    assert "committed" not in record["snapshot_ids"]
    assert open_table(warehouse).snapshot_manager.latest_id() == 4


def test_merge_into_a_branch_and_back(warehouse):
    """main into b adds main's 6-17 to b (b's own files stay); then b into main adds only b's own."""
    table = open_table(warehouse)
    record = merge_branch(table, "main", BRANCH)
    assert record.counts["files_to_add"] == 6  # main's snapshots 2 and 3: three partitions each
    assert ids_at(table, ("branch", BRANCH)) == sorted(MAIN_IDS + BRANCH_IDS)
    assert table.snapshot_manager.latest_id() == 3  # main untouched
    record = merge_branch(open_table(warehouse), BRANCH, "main")
    assert record.counts["files_to_add"] == 6
    assert ids_at(open_table(warehouse), ("snapshot", "4")) == sorted(MAIN_IDS + BRANCH_IDS)


def test_dry_run_lists_the_files_and_changes_nothing(warehouse, tmp_path):
    pristine = fingerprint(warehouse)
    code, record = run_cli(tmp_path, {"source_branch": BRANCH}, warehouse, "--dry-run")
    assert code == 0 and record["dry_run"] is True
    listed = record["details"]["merge_branch"]["files_to_add"]
    assert len(listed) == record["counts"]["files_to_add"] == 6
    assert all(path.startswith("dt=2024-01-0") and "/bucket-0/data-" in path for path in listed)
    assert record["counts"]["rows_to_add"] == 6
    assert fingerprint(warehouse) == pristine


def _new_schema(table: Table, **changes) -> None:
    """A schema change on `table` (its branch): the latest schema with `changes`, as ALTER TABLE does."""
    schema = table.latest_schema()
    assert table.schema_manager.commit_new_schema(dataclasses.replace(schema, id=schema.id + 1, **changes))


def _overwrite_on_branch(table: Table) -> None:
    branch = table.for_branch(BRANCH)
    written = write_table_files(branch.file_io, branch.path, branch.schema, batch(700, 1, days=1), 9000)
    SnapshotCommit(branch).overwrite([CommitMessage(p, b, -1, files) for p, b, files in written])


def _drop_option(table: Table) -> None:
    options = {k: v for k, v in table.latest_schema().options.items() if k != "branch-merge.enabled"}
    _new_schema(table, options=options)


def _column_on_branch(table: Table) -> None:
    branch = table.for_branch(BRANCH)
    schema = branch.latest_schema()
    extra = new_table_schema([("extra", parse_type("INT"))]).fields[0]
    extra = dataclasses.replace(extra, id=schema.highest_field_id + 1)
    _new_schema(branch, fields=(*schema.fields, extra), highest_field_id=extra.id)


def _empty_branch(table: Table) -> None:
    create_branch(table, CreateBranchRequest("empty", empty=True))


def _branch_from_snapshot_2(table: Table) -> None:
    create_branch(table, CreateBranchRequest("late", snapshot=2))


def _expire_main_snapshot_1(table: Table) -> None:
    table.file_io.delete(table.snapshot_manager.snapshot_path(1))
    table.snapshot_manager.write_earliest_hint(2)


REFUSALS = [
    ({"source_branch": "nope"}, None, "branch 'nope' does not exist"),
    ({"source_branch": BRANCH, "target_branch": "nope"}, None, "branch 'nope' does not exist"),
    ({"source_branch": "main"}, None, "cannot merge branch 'main' into itself"),
    ({"source_branch": "123"}, None, "must not be a number"),
    ({"source_branch": BRANCH}, _drop_option, "does not set 'branch-merge.enabled' = 'true'"),
    ({"source_branch": BRANCH}, _overwrite_on_branch, "snapshot 4 has commit kind OVERWRITE"),
    ({"source_branch": BRANCH}, _column_on_branch, "schema mismatch"),
    ({"source_branch": "empty"}, _empty_branch, "branch 'empty' has no snapshot"),
    ({"source_branch": "late"}, _branch_from_snapshot_2, "does not start at snapshot 1 (earliest is 2)"),
    ({"source_branch": BRANCH}, _expire_main_snapshot_1, "does not start at snapshot 1 (earliest is 2)"),
]


@pytest.mark.parametrize(("keys", "setup", "expected"), REFUSALS, ids=[r[2][:40] for r in REFUSALS])
def test_refusals_are_exit_2_naming_the_reason_and_change_nothing(warehouse, tmp_path, keys, setup, expected):
    if setup is not None:
        setup(open_table(warehouse))
    pristine = fingerprint(warehouse)
    code, record = run_cli(tmp_path, keys, warehouse)
    assert code == 2 and expected in record["error"], record["error"]
    assert fingerprint(warehouse) == pristine


@pytest.mark.parametrize(
    ("options", "primary_keys", "expected"),
    [
        ({"bucket": "1", "branch-merge.enabled": "false"}, ["id", "dt"], "has primary keys ['id', 'dt']"),
        ({"deletion-vectors.enabled": "true"}, [], "sets 'deletion-vectors.enabled' = 'true'"),
        ({"row-tracking.enabled": "true"}, [], "sets 'row-tracking.enabled' = 'true'"),
    ],
)
def test_tables_paimon_does_not_merge_are_refused(tmp_path, options, primary_keys, expected):
    """Checked on the schemas alone, before any snapshot is read (tables without data suffice)."""
    warehouse = str(tmp_path / "wh")
    root = table_root(warehouse)
    table = Table(FileIO.for_path(root), root)
    schema = new_table_schema(
        [("id", parse_type("BIGINT NOT NULL")), ("dt", parse_type("STRING NOT NULL"))],
        partition_keys=["dt"],
        primary_keys=primary_keys,
        options={**TABLE_OPTIONS, "branch-merge.enabled": "true", **options},
    )
    table.schema_manager.create_table(schema)
    create_branch(Table(table.file_io, root), CreateBranchRequest("x", empty=True))
    code, record = run_cli(tmp_path, {"source_branch": "x"}, warehouse)
    assert code == 2 and expected in record["error"], record["error"]


class _Crash(BaseException):
    pass


def _at_step(step: str, handler, call) -> None:
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(handler)
    try:
        call()
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()


def test_a_commit_on_the_target_meanwhile_is_exit_3_and_the_writer_keeps_it(warehouse, tmp_path):
    def writer_commits(_step: str) -> None:
        append_rows(open_table(warehouse), batch(800, 2))  # snapshot 4 on main

    codes = []
    _at_step(
        STEP_PLANNED,
        writer_commits,
        lambda: codes.append(run_cli(tmp_path, {"source_branch": BRANCH}, warehouse)),
    )
    code, record = codes[0]
    assert code == 3 and "another writer committed snapshot 4 on branch 'main'" in record["error"]
    table = open_table(warehouse)
    assert table.snapshot_manager.latest_id() == 4  # the writer's, and nothing of ours
    assert ids_at(table, ("snapshot", "4")) == sorted(MAIN_IDS + [800, 801])
    code, record = run_cli(tmp_path, {"source_branch": BRANCH}, warehouse)  # the rerun merges
    assert code == 0 and record["snapshot_ids"]["committed"] == 5
    assert ids_at(open_table(warehouse), ("snapshot", "5")) == sorted(MAIN_IDS + [800, 801] + BRANCH_IDS)


@pytest.mark.parametrize("step", [STEP_PLANNED, STEP_COMMITTED])
def test_crash_then_rerun_merges_exactly_once(warehouse, tmp_path, step):
    def crash(reached: str) -> None:
        raise _Crash(reached)

    def run() -> None:
        with pytest.raises(_Crash):
            merge_branch(open_table(warehouse), BRANCH)

    _at_step(step, crash, run)
    assert open_table(warehouse).snapshot_manager.latest_id() == (4 if step == STEP_COMMITTED else 3)
    record = merge_branch(open_table(warehouse), BRANCH)
    assert record.counts["files_to_add"] == (0 if step == STEP_COMMITTED else 6)
    table = open_table(warehouse)
    assert table.snapshot_manager.latest_id() == 4
    assert ids_at(table, ("snapshot", "4")) == sorted(MAIN_IDS + BRANCH_IDS)
    assert missing_needed(table) == set()


def test_the_merged_files_outlive_the_branch(spark_session, warehouse):
    """Merged files are main's now: deleting the branch keeps every one of them (its own manifests and
    lists go), and leaves nothing unreferenced."""
    table = open_table(warehouse)
    merge_branch(table, BRANCH)
    record = delete_branch(spark_session, open_table(warehouse), DeleteBranchRequest([BRANCH]))
    assert record.counts.get("files_deleted", 0) == 0  # every data file of b is main's too
    table = open_table(warehouse)
    assert table.branch_manager.branch_names() == []
    assert ids_at(table, ("snapshot", "4")) == sorted(MAIN_IDS + BRANCH_IDS)
    assert missing_needed(table) == set() and unreferenced(table) == set()
