"""create-branch, delete-branch, rename-branch and fast-forward on our own tables (issue #30).

The template: four appends to main, tag t2 on snapshot 2, and branch b made from t2 by pypaimon with
its own commits (an append, an overwrite of one partition, another append: `branch_from_t2`), so b
shares main's files up to t2 and has files of its own. Oracles: our reader (the one pypaimon agrees
with in tests/interop) at every ref, `missing_needed` (nothing a remaining root needs is gone) and
`unreferenced` (nothing is left that no root needs) after every run.
"""

from __future__ import annotations

import json
import os

import pytest
import yaml

from jobs.__main__ import main
from jobs.create_branch import CreateBranchRequest, create_branch
from jobs.delete_branch import DeleteBranchRequest, delete_branch, matching_branches
from jobs.fast_forward import STEP_SNAPSHOT, FastForwardRequest, fast_forward
from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files
from jobs.rename_branch import STEP_COPIED, RenameBranchRequest, rename_branch
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.report import RunRecord
from paimon_format.storage import crash_points
from tests.java.helpers import our_read
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    branch_from_t2,
    build_sample_table,
    copy_warehouse,
    fingerprint,
    listed_files,
    missing_needed,
    open_table,
    unreferenced,
)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    warehouse = str(tmp_path_factory.mktemp("branch-jobs") / "wh")
    branch_from_t2(build_sample_table(warehouse, commits=4))
    return warehouse


@pytest.fixture
def warehouse(template, tmp_path) -> str:
    return copy_warehouse(template, str(tmp_path / "wh"))


def reads(warehouse: str) -> dict[tuple[str, str], list]:
    """Rows our reader reads at every snapshot and tag of main and at every branch's latest."""
    table = open_table(warehouse)
    refs = [("snapshot", str(i)) for i in table.snapshot_manager.snapshot_ids()]
    refs += [("tag", name) for name in table.tag_manager.tag_names()]
    refs += [("branch", name) for name in table.branch_manager.branch_names()]
    return {ref: our_read(table.path, ref) for ref in refs}


def assert_clean(warehouse: str, orphans_before: set[str] = frozenset()) -> None:
    table = open_table(warehouse)
    assert missing_needed(table) == set()
    assert unreferenced(table) - set(orphans_before) == set()


def run_cli(tmp_path, operation: str, keys: dict, warehouse: str, capsys) -> tuple[int, dict]:
    config = tmp_path / f"{operation}.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, **keys}))
    code = main([operation, "--config", str(config)])
    return code, json.loads(capsys.readouterr().out)


# -- create-branch ---------------------------------------------------------------------------------


def test_a_created_branch_reads_as_its_source(warehouse):
    table = open_table(warehouse)
    before = reads(warehouse)
    create_branch(table, CreateBranchRequest("latest"))
    create_branch(table, CreateBranchRequest("at1", snapshot=1))
    create_branch(table, CreateBranchRequest("fromtag", tag="t2"))
    create_branch(table, CreateBranchRequest("nothing", empty=True))

    after = reads(warehouse)
    assert after[("branch", "latest")] == before[("snapshot", "4")]
    assert after[("branch", "at1")] == before[("snapshot", "1")]
    assert after[("branch", "fromtag")] == before[("tag", "t2")]
    assert after[("branch", "nothing")] == []
    assert {ref: rows for ref, rows in after.items() if ref in before} == before
    root = os.path.join(table.path, "branch")
    assert sorted(os.listdir(os.path.join(root, "branch-fromtag", "tag"))) == ["tag-t2"]
    assert sorted(os.listdir(os.path.join(root, "branch-nothing"))) == ["schema"]
    assert_clean(warehouse)


def test_create_branch_refuses_an_existing_name_and_resumes_its_own_unfinished_run(warehouse):
    table = open_table(warehouse)
    with pytest.raises(BadInputError, match="branch 'b' already exists"):
        create_branch(table, CreateBranchRequest("b"))

    def crash(step: str) -> None:
        raise _Crash(step)

    def create() -> None:
        with pytest.raises(_Crash):
            create_branch(table, CreateBranchRequest("c", tag="t2"))

    _with_crash_handler("create-branch:schemas-written", crash, create)
    assert sorted(os.listdir(os.path.join(table.path, "branch", "branch-c"))) == ["schema"]
    record = create_branch(table, CreateBranchRequest("c", tag="t2"))  # the rerun finishes it
    assert record.details["branch"]["resumed"] is True and record.counts["files_written"] == 2
    assert reads(warehouse)[("branch", "c")] == reads(warehouse)[("tag", "t2")]
    with pytest.raises(BadInputError, match="already exists"):  # finished: a third run is refused
        create_branch(table, CreateBranchRequest("c", tag="t2"))


def test_a_source_removed_while_the_branch_is_written_is_exit_3_and_nothing_is_left(warehouse):
    table = open_table(warehouse)
    create_branch(table, CreateBranchRequest("keep", tag="t2"))
    before = reads(warehouse)

    def delete_the_tag(_step: str) -> None:  # a racing delete-tag or expiry
        table.tag_manager.delete_tag("t2")

    def create() -> None:
        with pytest.raises(CommitRaceLost, match="tag t2 was removed by another job"):
            create_branch(table, CreateBranchRequest("c", tag="t2"))

    _with_crash_handler("create-branch:schemas-written", delete_the_tag, create)
    assert table.branch_manager.branch_names() == ["b", "keep"]  # its files and directories went
    assert reads(warehouse) == {ref: rows for ref, rows in before.items() if ref != ("tag", "t2")}


# -- delete-branch ---------------------------------------------------------------------------------


def test_delete_branch_deletes_its_metadata_and_the_files_only_it_used(spark_session, warehouse):
    table = open_table(warehouse)
    before = reads(warehouse)
    files_before = listed_files(table)
    dry = delete_branch(spark_session, table, DeleteBranchRequest(["b"]), dry_run=True)
    assert listed_files(table) == files_before and dry.counts["branches_to_delete"] == 1

    record = delete_branch(spark_session, table, DeleteBranchRequest(["b"]))

    assert not os.path.exists(os.path.join(table.path, "branch", "branch-b"))
    assert table.branch_manager.branch_names() == []
    assert record.counts["files_deleted"] >= 3  # its three commits' own data files
    assert reads(warehouse) == {ref: rows for ref, rows in before.items() if ref != ("branch", "b")}
    assert_clean(warehouse)


def test_delete_branch_by_glob_keeps_what_another_branch_shares(spark_session, warehouse):
    table = open_table(warehouse)
    create_branch(table, CreateBranchRequest("keep", tag="t2"))
    create_branch(table, CreateBranchRequest("tmp-1", snapshot=3))
    before = reads(warehouse)
    assert matching_branches(["b", "keep", "tmp-1"], ["tmp-*", "b", "x?"]) == (["b", "tmp-1"], ["x?"])
    with pytest.raises(BadInputError, match="no branch matches 'x'"):
        delete_branch(spark_session, table, DeleteBranchRequest(["b", "x"]))
    assert reads(warehouse) == before

    delete_branch(spark_session, table, DeleteBranchRequest(["tmp-*", "b", "x"], strict=False))

    assert table.branch_manager.branch_names() == ["keep"]
    removed = {("branch", "b"), ("branch", "tmp-1")}
    assert reads(warehouse) == {ref: rows for ref, rows in before.items() if ref not in removed}
    assert_clean(warehouse)


# -- rename-branch ---------------------------------------------------------------------------------


def test_rename_branch_moves_every_file_and_a_crashed_run_is_finished_by_the_rerun(
    warehouse, capsys, tmp_path
):
    table = open_table(warehouse)
    before = reads(warehouse)
    code, record = run_cli(
        tmp_path, "rename-branch", {"from_branch": "b", "to_branch": "main"}, warehouse, capsys
    )
    assert code == 2 and "'main' is the table itself" in record["error"]
    code, record = run_cli(
        tmp_path, "rename-branch", {"from_branch": "zz", "to_branch": "c"}, warehouse, capsys
    )
    assert code == 2 and "branch 'zz' does not exist" in record["error"]

    def crash(step: str) -> None:
        raise _Crash(step)

    def rename() -> None:
        with pytest.raises(_Crash):
            rename_branch(table, RenameBranchRequest("b", "c"))

    _with_crash_handler(STEP_COPIED, crash, rename)
    assert table.branch_manager.branch_names() == ["b", "c"]  # both whole: nothing lost
    assert reads(warehouse)[("branch", "c")] == before[("branch", "b")]
    rename_branch(table, RenameBranchRequest("b", "c"))

    assert table.branch_manager.branch_names() == ["c"]
    after = reads(warehouse)
    assert after.pop(("branch", "c")) == before.pop(("branch", "b"))
    assert after == before
    assert our_read(table.path, ("tag", "t2")) == before[("tag", "t2")]
    assert_clean(warehouse)


# -- fast-forward ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fast_forwarded(spark_session, template, tmp_path_factory) -> tuple[str, RunRecord, set[str]]:
    """fast-forward to b on Spark on a copy of the template, once for the module: (that warehouse,
    its record, its files). Tests that go on from it work on a copy."""
    warehouse = copy_warehouse(template, str(tmp_path_factory.mktemp("fast-forwarded") / "wh"))
    record = fast_forward(spark_session, open_table(warehouse), FastForwardRequest("b"))
    return warehouse, record, listed_files(open_table(warehouse))


def test_fast_forward_makes_main_the_branch_and_deletes_what_only_old_main_used(
    spark_session, template, fast_forwarded, tmp_path
):
    before = reads(template)
    template_table = open_table(template)
    branch_ids = template_table.for_branch("b").snapshot_manager.snapshot_ids()
    assert branch_ids[0] == 2 and template_table.snapshot_manager.snapshot_ids() == [1, 2, 3, 4]

    done, record, _files = fast_forwarded  # the run itself, shared with the crash test's reference
    warehouse = copy_warehouse(done, str(tmp_path / "wh"))
    table = open_table(warehouse)

    manager = table.snapshot_manager
    assert manager.snapshot_ids() == [1, *branch_ids] and manager.latest_id() == branch_ids[-1]
    after = reads(warehouse)
    assert after[("snapshot", str(branch_ids[-1]))] == before[("branch", "b")]
    assert after[("snapshot", "1")] == before[("snapshot", "1")]
    assert after[("branch", "b")] == before[("branch", "b")] and after[("tag", "t2")] == before[("tag", "t2")]
    assert record.counts["files_deleted"] >= 2  # main's own appends 3 and 4
    assert_clean(warehouse)
    # a rerun finds main already the branch: nothing to copy or delete
    again = fast_forward(spark_session, table, FastForwardRequest("b"))
    assert again.counts["snapshots_copied"] == 0 and again.counts["main_roots_replaced"] == 0
    append_rows(table, batch(900, 2))  # a writer commits on top of the fast-forwarded main
    assert len(reads(warehouse)[("snapshot", str(branch_ids[-1] + 1))]) == len(before[("branch", "b")]) + 2


def test_fast_forward_crash_then_rerun(spark_session, template, fast_forwarded, tmp_path):
    """A crash between two snapshot copies (the chaos matrix covers every step, scripts/chaos.py).
    The crashed run plans in the driver (`LocalSession`): the crash point sits in driver code between
    two copies, so storage is left as a Spark run leaves it, in a fraction of the time; the rerun and
    the orphan cleanup run on Spark and must end with the uninterrupted Spark run's files."""
    from jobs.runtime.local_frame import LocalSession

    step = STEP_SNAPSHOT
    reference_files = fast_forwarded[2]
    warehouse = copy_warehouse(template, str(tmp_path / "crashed"))
    table = open_table(warehouse)
    before = reads(warehouse)

    def crash(reached: str) -> None:
        raise _Crash(reached)

    def run() -> None:
        with pytest.raises(_Crash):
            fast_forward(LocalSession(), table, FastForwardRequest("b"))

    _with_crash_handler(step, crash, run)
    assert missing_needed(table) == set()
    latest = table.snapshot_manager.latest_id()
    assert our_read(table.path, ("snapshot", str(latest))) in (
        before[("snapshot", "4")],
        before[("branch", "b")],
    )
    fast_forward(spark_session, table, FastForwardRequest("b"))
    remove_orphan_files(
        spark_session, table, OrphanSettings(older_than_ms=0, force=True, max_orphan_ratio=1.0)
    )
    hints = {"snapshot/LATEST", "snapshot/EARLIEST"}
    assert listed_files(table) - hints == reference_files - hints
    assert_clean(warehouse)


def test_a_commit_during_fast_forward_stops_it_with_exit_3(spark_session, warehouse):
    table = open_table(warehouse)

    def commit(_step: str) -> None:  # a writer commits snapshot 5 on the old main meanwhile
        append_rows(open_table(warehouse), batch(800, 2))

    def run() -> None:
        with pytest.raises(CommitRaceLost, match="snapshot 5 was committed by another writer"):
            fast_forward(spark_session, table, FastForwardRequest("b"))

    files_before = listed_files(table)
    _with_crash_handler("fast-forward:planned", commit, run)
    assert files_before <= listed_files(table)  # no file deleted; the writer's commit is kept
    assert our_read(table.path, ("snapshot", "5"))
    assert missing_needed(table) == set()


def test_bad_input_names_the_problem_and_changes_nothing(warehouse, capsys, tmp_path):
    pristine = fingerprint(warehouse)
    cases = [
        ("create-branch", {"branch": "main"}, "'main' is the table itself"),
        ("create-branch", {"branch": "123"}, "must not be a number"),
        ("create-branch", {"branch": "x", "tag": "nope"}, "tag 'nope' does not exist"),
        ("create-branch", {"branch": "x", "snapshot": 99}, "snapshot 99 does not exist"),
        ("create-branch", {"branch": "x", "snapshot": 1, "tag": "t2"}, "at most one of"),
        ("create-branch", {"branch": "b"}, "already exists"),
        ("delete-branch", {"branches": ["main"]}, "cannot be deleted"),
        ("delete-branch", {"branches": ["nope"]}, "no branch matches 'nope'"),
        ("fast-forward", {"branch": "main"}, "'main' is the table itself"),
        ("fast-forward", {"branch": "nope"}, "branch 'nope' does not exist"),
    ]
    for operation, keys, expected in cases:
        code, record = run_cli(tmp_path, operation, keys, warehouse, capsys)
        assert code == 2 and expected in record["error"], (operation, keys, record["error"])
    assert fingerprint(warehouse) == pristine


class _Crash(BaseException):
    pass


def _with_crash_handler(step: str, handler, call) -> None:
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


def test_fast_forward_keeps_a_schema_a_kept_main_snapshot_uses(warehouse):
    """Main altered its schema (1) at snapshot 4, which is older than the branch's earliest snapshot 5
    (made at schema 0, its first snapshots expired): Paimon deletes schemas >= 0 the branch lacks,
    schema 1 included; here it stays, as snapshot 4 needs it. Schema 2 (main's, unused) goes."""
    from types import SimpleNamespace

    from jobs.fast_forward import _schemas_to_drop

    snapshots = {3: SimpleNamespace(schema_id=0), 4: SimpleNamespace(schema_id=1)}
    changelogs: dict[int, SimpleNamespace] = {}
    table = SimpleNamespace(
        snapshot_manager=SimpleNamespace(
            snapshot=snapshots.__getitem__,
            changelog_ids=lambda: sorted(changelogs),
            changelog=changelogs.__getitem__,
        ),
        schema_manager=SimpleNamespace(list_ids=lambda: [0, 1, 2]),
    )
    tags = {"t3": SimpleNamespace(id=3, schema_id=0)}
    assert _schemas_to_drop(table, 0, {0: b"{}"}, [3, 4], tags, earliest=5) == [2]
    assert _schemas_to_drop(table, 0, {0: b"{}"}, [], {}, earliest=5) == [1, 2]  # nothing kept uses them
    changelogs[2] = SimpleNamespace(schema_id=2)  # a long-lived changelog main keeps, at schema 2
    assert _schemas_to_drop(table, 0, {0: b"{}"}, [], {}, earliest=5) == []
