"""remove-orphan-files on a live table (issue #28): a root's metadata that another writer's expiry
deletes while our job reads it is judged, not fatal; anything a present root still needs refuses.

The other writer's moves are made at our job's own steps (right after it listed the roots to read,
or while it judges what it could not read), never by sleeping. The template: snapshots 1-4 of
appends (every file two days old) and planted orphans; snapshot 4 is the latest.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from jobs.__main__ import main
from jobs.deletion import referenced, retained_read
from jobs.remove_orphan_files import OrphanSettings, remove_orphan_files
from jobs.runtime import vanished_roots
from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.local_frame import LocalSession
from paimon_format.errors import MissingFileError
from paimon_format.maintenance.references import manifest_names, manifest_references
from paimon_format.table import Table
from tests.support.dv_tables import three_snapshots_with_a_vector
from tests.support.planted_files import age_tree, files_on_disk, plant_orphans
from tests.support.table_states import (
    IDENTIFIER,
    append_rows,
    batch,
    build_sample_table,
    copy_warehouse,
    missing_needed,
    open_table,
)

SETTINGS = OrphanSettings(max_orphan_ratio=0.9)


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[str, set[str]]:
    """(warehouse, the planted orphans' table-relative paths): snapshots 1-4, tag t2 removed."""
    warehouse = str(tmp_path_factory.mktemp("live-orphans") / "template")
    table = build_sample_table(warehouse, commits=4)
    table.tag_manager.delete_tag("t2")
    age_tree(table.path)
    orphans, _keep = plant_orphans(table.path)
    return warehouse, orphans


def our_session(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, where: str):
    """Our job's session: the driver-side stand-in reading the roots itself, or Spark reading them
    in its tasks (`DRIVER_ROOTS` 0: the executors' root reader)."""
    if where == "driver":
        return LocalSession()
    monkeypatch.setattr(referenced, "DRIVER_ROOTS", 0)
    return request.getfixturevalue("spark_session")


# (where the roots are read, dry run): the dry run takes the real run's path, shown on the driver
RUNS = pytest.mark.parametrize("where, dry_run", [("driver", False), ("driver", True), ("spark", False)])


@pytest.fixture(params=["driver", "spark"])
def session(request, monkeypatch):
    return our_session(request, monkeypatch, request.param)


def fresh(template: tuple[str, set[str]], tmp_path: Path) -> tuple[str, Table]:
    warehouse = copy_warehouse(template[0], str(tmp_path / "wh"))
    return warehouse, open_table(warehouse)


def after_listing_roots(monkeypatch: pytest.MonkeyPatch, action: Callable[[], None]) -> None:
    """Run `action` once, right after our job listed the roots of the referenced set (main's, the
    first branch listed) and before it reads them."""
    real = referenced.metadata_file_relpaths
    done: list[bool] = []

    def listed_then_act(*args, **kwargs):
        listed = real(*args, **kwargs)
        if not done:
            done.append(True)
            action()
        return listed

    monkeypatch.setattr(referenced, "metadata_file_relpaths", listed_then_act)


def delete_lists(table: Table, *snapshot_ids: int) -> list[str]:
    """Delete the manifest lists of the snapshots (Java's expiry deletes them before the snapshot
    files); returns their paths."""
    paths = []
    for snapshot_id in snapshot_ids:
        snapshot = table.snapshot_manager.snapshot(snapshot_id)
        for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            paths.append(table.manifest_path(name))
            os.remove(paths[-1])
    return paths


def relative(table: Table, paths: list[str]) -> set[str]:
    return {path[len(table.path) + 1 :] for path in paths}


@RUNS
def test_lists_gone_with_their_snapshots_are_skipped(
    request, template, tmp_path, monkeypatch, where, dry_run
):
    """Another writer expires snapshots 1 and 2: their lists are gone when we read them, their
    snapshot files go while we judge. Named by nothing present: the run finishes, the planted
    orphans go (a dry run counts them), every file a present root needs stays."""
    session = our_session(request, monkeypatch, where)
    _, table = fresh(template, tmp_path)
    orphans = template[1]
    lost: list[str] = []
    after_listing_roots(monkeypatch, lambda: lost.extend(delete_lists(table, 1, 2)))
    real = vanished_roots.vanished_manifests

    def expiry_completes(_seconds: float) -> None:
        for snapshot_id in (1, 2):
            path = table.snapshot_manager.snapshot_path(snapshot_id)
            if os.path.exists(path):
                os.remove(path)

    monkeypatch.setattr(
        retained_read, "vanished_manifests", lambda t, paths: real(t, paths, wait=expiry_completes)
    )
    before = files_on_disk(table.path)

    record = remove_orphan_files(session, table, SETTINGS, dry_run=dry_run)

    # one list per snapshot: its read stops at the first missing one (a list goes with its root)
    assert record.counts["manifests_vanished"] == 2 and record.counts["roots_vanished"] == 0
    assert set(record.details["manifests_vanished"]) < set(lost)
    # listed before they went: candidates, already absent when deleted
    assert record.counts["orphan_files"] == len(orphans) + len(lost)
    assert record.counts.get("files_already_absent") == (None if dry_run else len(lost))
    gone = before - files_on_disk(table.path) - relative(table, lost)
    gone -= {"snapshot/snapshot-1", "snapshot/snapshot-2"}  # the other writer's
    assert gone == (set() if dry_run else orphans)
    assert missing_needed(table) == set()  # every file snapshots 3 and 4 need is there


@RUNS
def test_a_missing_manifest_a_present_root_names_refuses(
    request, template, tmp_path, monkeypatch, where, dry_run
):
    """Snapshot 3's delta manifest list is missing and snapshot 3 stays: the table lacks a file a
    present root needs; the run fails as the strict read did (MissingFileError: exit 2 without a
    rival commit), the dry run the same way, and nothing is deleted."""
    session = our_session(request, monkeypatch, where)
    _, table = fresh(template, tmp_path)
    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 0.0)
    lost: list[str] = []

    def lose() -> None:
        lost.append(table.manifest_path(table.snapshot_manager.snapshot(3).delta_manifest_list))
        os.remove(lost[0])

    after_listing_roots(monkeypatch, lose)
    before = files_on_disk(table.path)
    with pytest.raises(MissingFileError) as raised:
        remove_orphan_files(session, table, SETTINGS, dry_run=dry_run)
    assert raised.value.path == lost[0] and "present now" in str(raised.value)
    assert files_on_disk(table.path) == before - relative(table, lost)


def test_the_latest_snapshot_at_planning_expired_during_the_run_refuses(
    session, template, tmp_path, monkeypatch
):
    """A writer commits snapshot 5 and its expiry removes snapshots 1-4 (lists and snapshot files;
    the manifests stay, snapshot 5 names them) after we listed the roots: 5 is never read, and
    the files it carries from 4 are protected by nothing we read. The run refuses (exit 3) before
    anything is deleted; the strict read of before skipped the vanished roots and deleted them."""
    warehouse, table = fresh(template, tmp_path)
    table.tag_manager.create_tag("t1", table.snapshot_manager.snapshot(1))  # something stays referenced

    def commit_then_expire() -> None:
        append_rows(open_table(warehouse), batch(900, 3))
        for snapshot_id in (2, 3, 4):  # snapshot 1's lists: t1 names them
            delete_lists(table, snapshot_id)
        for snapshot_id in (1, 2, 3, 4):
            os.remove(table.snapshot_manager.snapshot_path(snapshot_id))
        age_tree(table.path)  # even with old timestamps, snapshot 5's files must survive

    after_listing_roots(monkeypatch, commit_then_expire)
    with pytest.raises(SafetyRefusal, match="snapshot 4 of branch main, the latest when this job planned"):
        remove_orphan_files(session, table, SETTINGS)
    assert missing_needed(table) == set()
    assert template[1] <= files_on_disk(table.path)  # not even the planted orphans went


@pytest.mark.parametrize("rival_commit", [False, True])
def test_the_cli_exit_code_of_a_missing_manifest_is_2_or_3_with_a_rival_commit(
    template, tmp_path, monkeypatch, capsys, rival_commit
):
    """The job's frame maps the failure as before this change: exit 2, or 3 with a rival commit."""
    warehouse, table = fresh(template, tmp_path)
    monkeypatch.setattr(vanished_roots, "SETTLE_SECONDS", 0.0)
    config = tmp_path / "remove-orphan-files.yaml"
    config.write_text(yaml.safe_dump({"warehouse": warehouse, "table": IDENTIFIER, "max_orphan_ratio": 0.9}))
    lost: list[str] = []

    def lose() -> None:
        lost.append(table.manifest_path(table.snapshot_manager.snapshot(3).delta_manifest_list))
        os.remove(lost[0])
        if rival_commit:
            append_rows(open_table(warehouse), batch(900, 1))

    after_listing_roots(monkeypatch, lose)
    assert main(["remove-orphan-files", "--config", str(config), "--set", "local=always"]) == (
        3 if rival_commit else 2
    )
    error = json.loads(capsys.readouterr().out)["error"]
    assert lost[0] in error and ("was committed during this run" in error) == rival_commit


def test_the_lenient_read_notes_each_missing_kind_where_the_strict_read_fails(tmp_path):
    """A snapshot's index manifest, a manifest and a list missing: the strict referenced read fails,
    the lenient one notes all three, keeps them out of the referenced set and reads the rest."""
    table = three_snapshots_with_a_vector(str(tmp_path / "wh"))
    first = table.snapshot_manager.snapshot(1)
    snapshot_2, snapshot_3 = table.snapshot_manager.snapshot(2), table.snapshot_manager.snapshot(3)
    only_in_2 = sorted(set(manifest_names(table, snapshot_2)) - set(manifest_names(table, first)))[0]
    lost = [
        table.manifest_path(name)
        for name in (snapshot_3.index_manifest, only_in_2, first.delta_manifest_list)
    ]
    named_by_lost = set(manifest_references(table, only_in_2))
    named_by_first = {
        path for name in manifest_names(table, first) for path in manifest_references(table, name)
    }
    for path in lost:
        os.remove(path)
    session = LocalSession()
    with pytest.raises(MissingFileError):
        referenced.referenced_paths(session, table)
    read = retained_read.RetainedRead()
    paths = {row["path"] for row in referenced.referenced_paths(session, table, lenient=read).paths.collect()}
    assert sorted(read.missing) == sorted(lost)
    assert set(read.snapshots) == {("main", 2), ("main", 3)} and read.latest_at_plan == {"main": 3}
    assert not any(path.startswith("\x00") for path in paths)
    assert named_by_first <= paths and named_by_lost.isdisjoint(paths)  # unknown: judged by the caller
    assert not any(path.startswith("index/") for path in paths)  # its only index manifest is gone
    assert f"manifest/{snapshot_3.base_manifest_list}" in paths
