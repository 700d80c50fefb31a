"""expire-tags on a live table (issue #28): what a concurrent writer does between our planning and our
deletes is either proved harmless (exit 0) or refused (exit 2/3), never a lost file.

The concurrent writer's moves are made at our job's own steps (a crash point handler that acts
instead of crashing, or a wrapper around one of our functions), never by sleeping. The template:
tags t2, t3 on expired snapshots 2, 3 (they alone keep the overwritten partition's files), t6 on
snapshot 6; snapshots 6 and 7 remain.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main
from jobs.deletion import roots, tags
from jobs.deletion.retained_read import RetainedRead
from jobs.expire_snapshots import ExpiryRequest, expire_snapshots
from jobs.expire_tags import STEPS, ExpireTagsRequest, expire_tags
from jobs.runtime import vanished_roots
from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.local_frame import LocalSession
from paimon_format.commit import CommitMessage, SnapshotCommit
from paimon_format.data.writer import write_table_files
from paimon_format.errors import MissingFileError
from paimon_format.maintenance.references import manifest_names
from paimon_format.model.binary_row import deserialize_row
from paimon_format.storage import crash_points
from paimon_format.table import Table
from tests.support.dv_tables import three_snapshots_with_a_vector
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    copy_warehouse,
    listed_files,
    missing_needed,
    open_table,
    view,
)

OLDER_THAN = "2001-01-01 00:00:00"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> str:
    """Tags t2, t3 on snapshots 2, 3; snapshot 5 overwrites dt=2024-01-01; t6 on 6; only 6, 7 stay."""
    warehouse = str(tmp_path_factory.mktemp("live-tags") / "template")
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
    assert table.snapshot_manager.snapshot_ids() == [6, 7] and table.tag_manager.tag_names() == [
        "t2",
        "t3",
        "t6",
    ]
    return warehouse


@pytest.fixture(params=["local", "spark"])
def session(request):
    """Our job's session: the driver-side stand-in, or Spark (the readers then run in its tasks)."""
    return LocalSession() if request.param == "local" else request.getfixturevalue("spark_session")


def fresh(template: str, tmp_path: Path, name: str = "wh") -> tuple[str, Table]:
    warehouse = copy_warehouse(template, str(tmp_path / name))
    return warehouse, open_table(warehouse)


def expire(session, table: Table, *names: str) -> dict:
    """expire-tags with `older_than` after dating the `names` tag files back to 2000 (tags without a
    create time expire by their file's time)."""
    for name in names:
        os.utime(table.tag_manager.tag_path(name), (946_684_800, 946_684_800))
    return expire_tags(session, table, ExpireTagsRequest(older_than=OLDER_THAN))


@contextmanager
def at_step(step: str, action: Callable[[], None]) -> Iterator[None]:
    """Run `action` (the other writer's move) when our job passes crash point `step`."""
    monkeypatch = pytest.MonkeyPatch()
    monkeypatch.setenv(crash_points.CRASH_ENV, step)
    crash_points.reset_passes()
    previous = crash_points.set_crash_handler(lambda _step: action())
    try:
        yield
    finally:
        crash_points.set_crash_handler(previous)
        crash_points.reset_passes()
        monkeypatch.undo()


def after_listing_retained_roots(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run `action` once, right after our job listed the retained roots and before it reads them."""
    real = roots._retained_roots
    done: list[bool] = []

    def listed_then_act(*args, **kwargs):
        listed = real(*args, **kwargs)
        if not done:
            done.append(True)
            action()
        return listed

    monkeypatch.setattr(roots, "_retained_roots", listed_then_act)


def delete_lists(table: Table, tag: str) -> list[str]:
    """Delete the manifest lists of `tag` (Java's expiry deletes manifests before the root file)."""
    tagged = table.tag_manager.tag(tag)
    paths = [table.manifest_path(name) for name in (tagged.base_manifest_list, tagged.delta_manifest_list)]
    for path in paths:
        os.remove(path)
    return paths


def tag_copier(table: Table, source: str, target: str, edit: Callable[[dict], None] | None = None):
    """A function creating tag `target` with the content `source` has now (a tag created from a
    tag), optionally edited: it runs later, when `source` may be gone."""
    data = json.loads(Path(table.tag_manager.tag_path(source)).read_text())
    if edit:
        edit(data)
    return lambda: Path(table.tag_manager.tag_path(target)).write_text(json.dumps(data))


def reference_files(template: str, tmp_path: Path, *names: str) -> set[str]:
    """The files left by an undisturbed run expiring `names`."""
    _, table = fresh(template, tmp_path, "reference")
    expire(LocalSession(), table, *names)
    return listed_files(table)


# -- rule 3: a manifest missing while reading the retained roots ------------------------------------


def test_a_list_gone_with_its_tag_is_skipped(session, template, tmp_path, monkeypatch):
    """t3 (retained) is being expired by another writer: its lists are gone when we read it, its tag
    file while we judge. The list is named by nothing present: exit 0, and what t2 alone needed
    goes (t3, which shared it, is gone)."""
    _, table = fresh(template, tmp_path)
    after_listing_retained_roots(monkeypatch, lambda: delete_lists(table, "t3"))
    real = tags.vanished_manifests
    monkeypatch.setattr(
        tags,
        "vanished_manifests",
        lambda t, paths: real(t, paths, wait=lambda _s: table.tag_manager.delete_tag("t3")),
    )
    record = expire(session, table, "t2")
    assert record.counts["tags_deleted"] == 1 and record.counts["retained_manifests_vanished"] == 1
    assert "named by no snapshot" in next(iter(record.details["retained_manifests_vanished"].values()))
    assert record.counts["files_deleted"] > 0  # the overwritten partition's files: no present root needs them
    assert table.tag_manager.tag_names() == ["t6"]
    assert missing_needed(table) == set()  # every file a present root needs is there


def test_a_missing_list_still_named_fails_and_deletes_nothing(template, tmp_path, monkeypatch):
    """t3's list is missing but t3 stays: the table is missing a file a present root needs; the run
    fails as a strict read would (MissingFileError, exit 2 without a rival commit) before any delete."""
    _, table = fresh(template, tmp_path)
    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 0.0)
    lost: list[str] = []
    after_listing_retained_roots(monkeypatch, lambda: lost.extend(delete_lists(table, "t3")))
    before = listed_files(table)
    with pytest.raises(MissingFileError) as raised:
        expire(LocalSession(), table, "t2")
    assert raised.value.path == lost[0] and "present now" in str(raised.value)
    lost_relative = {path[len(table.path) + 1 :] for path in lost}
    assert listed_files(table) == before - lost_relative  # nothing of ours went, not even the tag file


@pytest.mark.parametrize("rival_commit", [False, True])
def test_the_cli_exit_code_of_a_missing_list_is_2_or_3_with_a_rival_commit(
    spark_session, template, tmp_path, monkeypatch, capsys, rival_commit
):
    """The job's frame maps the failure as before this change: exit 2, or 3 with a rival commit."""
    warehouse, table = fresh(template, tmp_path)
    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 0.0)
    os.utime(table.tag_manager.tag_path("t2"), (946_684_800, 946_684_800))
    config = tmp_path / "expire-tags.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "older_than": OLDER_THAN}))
    lost: list[str] = []

    def lose() -> None:  # with a commit during the run: a race, run again
        lost.extend(delete_lists(table, "t3"))
        if rival_commit:
            append_rows(open_table(warehouse), batch(900, 1))

    after_listing_retained_roots(monkeypatch, lose)
    assert main(["expire-tags", "--config", str(config)]) == (3 if rival_commit else 2)
    error = json.loads(capsys.readouterr().out)["error"]
    assert lost[0] in error and ("was committed during this run" in error) == rival_commit


# -- rule 2: a root listed at planning and gone when read -------------------------------------------


def test_a_retained_tag_gone_when_read_protects_nothing(session, template, tmp_path, monkeypatch):
    """t3 is deleted (tag file only, as Java's tag expiry starts) after we listed it: on Spark's
    tasks it is gone when read and needs nothing any more (exit 0, counted); the driver-side
    session answers from the run's read memo (t3 was read when choosing the tags), which protects
    t3's files as if it were there. Either way no file a present root needs goes."""
    _, table = fresh(template, tmp_path)
    after_listing_retained_roots(monkeypatch, lambda: table.tag_manager.delete_tag("t3"))
    record = expire(session, table, "t2")
    assert record.counts["tags_deleted"] == 1 and missing_needed(table) == set()
    if isinstance(session, LocalSession):
        assert record.counts["retained_roots_vanished"] == 0 and record.counts["files_deleted"] == 0
    else:
        assert record.counts["retained_roots_vanished"] == 1
        assert record.details["retained_roots_vanished"] == ["main/tag/t3"]
        assert record.counts["files_deleted"] > 0  # what t2 and the gone t3 alone needed


def test_a_tag_to_expire_deleted_by_someone_else_counts_as_absent(template, tmp_path):
    """t3 is expired by another writer after our plan: the run ends like an undisturbed one."""
    expected = reference_files(template, tmp_path, "t2", "t3")
    _, table = fresh(template, tmp_path)
    with at_step(STEPS.planned, lambda: table.tag_manager.delete_tag("t3")):
        record = expire(LocalSession(), table, "t2", "t3")
    assert record.counts["tags_deleted"] == 1 and record.counts["tags_already_absent"] == 1
    assert listed_files(table) == expected and missing_needed(table) == set()


# -- rule 1: tags created during the run ------------------------------------------------------------


def test_a_new_tag_on_a_snapshot_the_plan_read_needs_no_read(template, tmp_path):
    expected = reference_files(template, tmp_path, "t2", "t3")
    _, table = fresh(template, tmp_path)
    latest = table.snapshot_manager.latest()
    with at_step(STEPS.tags_deleted, lambda: table.tag_manager.create_tag("java-7", latest)):
        record = expire(LocalSession(), table, "t2", "t3")
    assert record.counts["new_tags"] == 1 and record.counts["new_tags_read"] == 0
    assert listed_files(table) == expected | {"tag/tag-java-7"}


def test_a_new_tag_on_a_snapshot_the_plan_did_not_read_keeps_its_files(template, tmp_path):
    """A tag created from t3 while t2 and t3 expire: the plan never read snapshot 3, so the new tag is
    read and everything it needs stays; it reads as t3 did."""
    warehouse, table = fresh(template, tmp_path)
    before = view(warehouse)
    with at_step(STEPS.tags_deleted, tag_copier(table, "t3", "copy-of-t3")):
        record = expire(LocalSession(), table, "t2", "t3")
    assert record.counts["new_tags_read"] == 1 and record.counts["candidates_kept_for_new_tags"] > 0
    assert record.counts["files_deleted"] == 0  # the overwritten files: the new tag needs every one
    assert table.tag_manager.tag_names() == ["copy-of-t3", "t6"]
    assert missing_needed(table) == set()
    assert view(warehouse).rows_by_tag["copy-of-t3"] == before.rows_by_tag["t3"]


def test_a_new_tag_that_cannot_be_read_or_a_new_branch_refuses(template, tmp_path):
    def unreadable(data: dict) -> None:
        data["baseManifestList"] = "manifest-list-missing-0"

    for number, action in enumerate(
        (
            lambda table: tag_copier(table, "t3", "broken", unreadable),
            lambda table: lambda: os.makedirs(os.path.join(table.path, "branch", "branch-b")),
        )
    ):
        _, table = fresh(template, tmp_path, f"wh{number}")
        planned = listed_files(table)
        with at_step(STEPS.tags_deleted, action(table)):
            with pytest.raises(SafetyRefusal, match="while this job ran|during this run"):
                expire(LocalSession(), table, "t2", "t3")
        gone = planned - listed_files(table)
        assert gone == {"tag/tag-t2", "tag/tag-t3"}  # the tag files only; their files wait for a rerun
        assert table.tag_manager.pending_deletion_names()


# -- the lenient read itself, on both sessions -------------------------------------------------------


def test_the_lenient_read_notes_each_missing_kind_where_the_strict_read_fails(session, tmp_path):
    """A retained snapshot's index manifest, a manifest and a list missing: the strict read fails,
    the lenient one names all three and the snapshots it read."""
    table = three_snapshots_with_a_vector(str(tmp_path / "wh"))
    first = table.snapshot_manager.snapshot(1)
    snapshot_2, snapshot_3 = table.snapshot_manager.snapshot(2), table.snapshot_manager.snapshot(3)
    data_files = sorted(p for p in listed_files(table) if p.endswith(".parquet"))
    os.remove(table.manifest_path(snapshot_3.index_manifest))
    only_in_2 = sorted(set(manifest_names(table, snapshot_2)) - set(manifest_names(table, first)))[0]
    os.remove(table.manifest_path(only_in_2))
    os.remove(table.manifest_path(first.delta_manifest_list))
    candidates = session.createDataFrame([(p, 1, 0) for p in data_files], "path string, size long, stage int")

    def needs(lenient: RetainedRead | None) -> set[str]:
        log = logging.getLogger(__name__)
        frame = roots.retained_needs(session, table, candidates, lambda *_: True, [], log, lenient=lenient)
        return {row["path"] for row in frame.collect()}

    with pytest.raises(Exception, match="does not exist"):
        needs(None)
    read = RetainedRead()
    protected = needs(read)
    assert sorted(read.missing) == sorted(
        table.manifest_path(name)
        for name in (snapshot_3.index_manifest, only_in_2, first.delta_manifest_list)
    )
    assert set(read.snapshots) == {("main", 2), ("main", 3)} and read.vanished == []
    assert read.covers("main", snapshot_3) and not read.covers("main", first)
    assert all(not path.startswith("\x00") for path in protected)


def test_the_latest_snapshot_at_planning_expired_during_the_run_refuses(
    session, template, tmp_path, monkeypatch
):
    """A writer commits snapshot 8 and then its own expiry removes snapshot 7, the latest when we
    planned, while we read: snapshot 8 was never read and holds what 7 held, so with 7's metadata
    gone nothing would protect those files. The run refuses (exit 3) before anything is deleted."""
    warehouse, table = fresh(template, tmp_path)

    def commit_then_expire_7() -> None:
        append_rows(open_table(warehouse), batch(900, 1))
        seven = table.snapshot_manager.snapshot(7)
        for name in (seven.base_manifest_list, seven.delta_manifest_list):
            os.remove(table.manifest_path(name))
        os.remove(table.snapshot_manager.snapshot_path(7))

    after_listing_retained_roots(monkeypatch, commit_then_expire_7)
    planned = listed_files(table)
    with pytest.raises(SafetyRefusal, match="snapshot 7 of branch main, the latest when this job planned"):
        expire(session, table, "t2")
    assert planned - listed_files(table) == {
        "snapshot/snapshot-7",
        *(p for p in planned if p.startswith("manifest/manifest-list") and p not in listed_files(table)),
    }  # only what the other writer removed: not a tag file, not a data file of ours


def test_the_latest_snapshot_at_planning_expiring_while_a_manifest_is_judged_refuses(template, tmp_path):
    """Snapshot 7 (the latest when we planned) was read, one of its manifests was missing, and its
    snapshot file goes while that manifest is judged (the verdict waits for an expiry in progress):
    'named by nothing present' is true by then, but snapshots committed during the run, never read,
    hold what 7 held. The check after the verdicts refuses before anything is deleted."""
    from jobs.deletion.context import DeletionContext
    from jobs.deletion.retained_read import signature
    from jobs.runtime.report import RunRecord

    _, table = fresh(template, tmp_path)
    seven = table.snapshot_manager.snapshot(7)
    missing = table.manifest_path(manifest_names(table, seven)[0])
    read = RetainedRead(
        missing=[missing], snapshots={("main", 7): signature(seven)}, latest_at_plan={"main": 7}
    )

    def expired_while_judged(_table: Table, paths: list[str]) -> dict[str, str]:
        os.remove(table.snapshot_manager.snapshot_path(7))
        return {path: "named by no snapshot, tag or changelog any more" for path in paths}

    deletion = DeletionContext(table, RunRecord(operation="expire-tags"), logging.getLogger(__name__))
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(tags, "vanished_manifests", expired_while_judged)
        with pytest.raises(
            SafetyRefusal, match="snapshot 7 of branch main, the latest when this job planned"
        ):
            tags._judge_retained_read(deletion, read)


def test_a_tag_replaced_by_another_writer_since_planning_is_not_deleted(template, tmp_path):
    """Another writer points t3 at snapshot 6 after our plan (a replace-tag of its own): deleting
    t3 by name would delete that writer's tag, and the plan's files are old t3's. The run refuses
    before any tag or file goes; the replaced tag stays as the other writer left it."""
    _, table = fresh(template, tmp_path)
    planned = listed_files(table)
    with at_step(STEPS.planned, tag_copier(table, "t6", "t3")):
        with pytest.raises(SafetyRefusal, match="tag 't3' now points at snapshot 6, not 3"):
            expire(LocalSession(), table, "t2", "t3")
    assert listed_files(table) == planned
    assert table.tag_manager.tag("t3").id == 6 and not table.tag_manager.pending_deletion_names()
