"""Deleting tags and the files only they used: shared by delete-tag and expire-tags (issue #17).

Paimon's TagManager.deleteTag deletes the tag file, then (when the tagged snapshot itself has
expired) the files that neither the neighbouring tags nor the earliest snapshot use. Here the
"neither" is wider and exact: the files the deleted tags need (`roots.dropped_root_candidates`:
their lists, manifests, index manifests, statistics, index files and live data and changelog files)
minus everything every snapshot, every other tag, every branch and every long-lived changelog needs
(on a table with decoupled changelog retention also what each retained snapshot needs as the
changelog it becomes), read on the executors and joined there; the driver holds tag names and counts.

Order (Paimon's): plan; then the tag files; then the files in expire-snapshots' stages (data, changelog
and index files; manifests, index manifests, statistics; manifest lists). The tag file goes first so
that no reader ever opens a tag whose files are half gone. A crash after the tag files went and
before (or while) their files go leaves those files unreferenced: a rerun does not find the tag any
more, and remove-orphan-files clears them (they are orphans by its rules). Before any file is
deleted the tags and branches are listed again: a tag or branch created meanwhile may reference
the candidates, so the run stops there (exit 3, the tag files already gone, the files left for
remove-orphan-files to judge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.deletion.context import DeletionContext
from jobs.deletion.expire_candidates import future_changelog_roots
from jobs.deletion.roots import dropped_root_candidates
from jobs.deletion.stages import delete_stages, report_candidates_if_any
from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.report import SAMPLE_LIMIT
from paimon_format.maintenance.references import PENDING_TAG_ROOT, TAG_ROOT
from paimon_format.model.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
)
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class TagSteps:
    """The crash points of the calling operation (`<operation>:<step>`)."""

    planned: str
    tags_deleted: str
    files: str
    manifests: str
    lists: str

    @staticmethod
    def of(operation: str) -> TagSteps:
        return TagSteps(
            f"{operation}:planned",
            f"{operation}:tags-deleted",
            f"{operation}:files-deleted",
            f"{operation}:manifests-deleted",
            f"{operation}:manifest-lists-deleted",
        )


def delete_tags(deletion: DeletionContext, tags: dict[str, Snapshot], steps: TagSteps) -> None:
    """Delete the `tags` (name -> tagged snapshot, as read when chosen) of the branch of
    `deletion.table` and the files only they used.

    Spark (`deletion.spark`) is only started when a deleted tag's snapshot has expired. A tag on a
    snapshot that still exists shares every file with it (Paimon skips the file cleanup then too).
    """
    table, record, log = deletion.table, deletion.record, deletion.log
    manager = table.tag_manager
    names = sorted(tags)
    unfinished = manager.pending_deletion_names()  # parked by interrupted runs: finished here
    _record_tags_to_delete(deletion, tags, unfinished)
    if not names and not unfinished:
        log.info("no tag to delete")
        record.count("tags_deleted", 0)
        return
    with_files = _tags_on_expired_snapshots(table, tags, names)
    # Only a plan of files needs the roots as they were at plan time (`_refuse_new_roots`): a run
    # that deletes tag files alone lists no tags or branches again.
    plans_files = bool(with_files or unfinished)
    tags_at_plan = set(manager.tag_names()) if plans_files else set()
    branches_at_plan = set(table.branch_manager.branch_names()) if plans_files else set()
    candidates = _plan_tag_files(deletion, names, with_files, unfinished)
    try:
        totals = report_candidates_if_any(candidates, record, log)
        crash_point(steps.planned)
        if deletion.dry_run:
            log.info("dry run: nothing deleted")
            record.count("tags_deleted", 0)
            return
        parked = _delete_tag_files(deletion, names, with_files, unfinished)
        crash_point(steps.tags_deleted)
        if candidates is not None:
            _refuse_new_roots(table, tags_at_plan, branches_at_plan)
            delete_stages(deletion, candidates, totals, "", (steps.files, steps.manifests, steps.lists))
        for key in parked:
            manager.finish_deletion(key)
        record.count("unfinished_deletions_finished", len(unfinished))
    finally:
        if candidates is not None:
            candidates.unpersist()


def _record_tags_to_delete(
    deletion: DeletionContext, tags: dict[str, Snapshot], unfinished: list[str]
) -> None:
    manager = deletion.table.tag_manager
    names = sorted(tags)
    record = deletion.record
    record.count("tags_to_delete", len(names))
    record.count("unfinished_deletions", len(unfinished))
    record.sample("tags_to_delete", [manager.tag_path(name) for name in names[:SAMPLE_LIMIT]])
    record.details["tags_to_delete"] = {name: tags[name].id for name in names[:SAMPLE_LIMIT]}
    if unfinished:
        deletion.log.warning(
            "finishing %d tag deletions an interrupted run left: %s", len(unfinished), unfinished[:10]
        )


def _plan_tag_files(
    deletion: DeletionContext, names: list[str], with_files: list[str], unfinished: list[str]
) -> DataFrame | None:
    """The candidates of the tags on expired snapshots and of the unfinished deletions (None when
    there are none, and Spark is not started): what they need minus what every other root needs."""
    table = deletion.table
    branch = table.branch  # a branch's tags live under branch/branch-<name>/tag/
    dropped = [(branch, TAG_ROOT, name) for name in with_files]
    dropped += [(branch, PENDING_TAG_ROOT, key) for key in unfinished]
    if not dropped:
        return None
    doomed = set(names)

    def keep_root(root_branch: str, kind: str, name: str) -> bool:
        return not (root_branch == branch and kind == TAG_ROOT and name in doomed)

    extra = future_changelog_roots(table, 0) if _changelog_options(table) else []
    deletion.log.info("planning the files of %d tags on expired snapshots", len(dropped))
    return dropped_root_candidates(deletion.spark, table, dropped, keep_root, extra, deletion.log)


def _delete_tag_files(
    deletion: DeletionContext, names: list[str], with_files: list[str], unfinished: list[str]
) -> list[str]:
    """Delete the tag files; a tag whose files go too is parked first (`tag-deletion/`), so that an
    interrupted run's rerun still finds what to delete. Returns every parked key to finish.

    Every parking comes before any tag file goes, and the tag files go together (one DeleteObjects
    on S3): their order among themselves does not matter, each tag is a root of its own. A crash
    or a failed delete in between leaves tags that are still there (expired again by a rerun) and
    parked copies that the rerun finishes. On S3 a tag deleted by someone else meanwhile counts as
    deleted (DeleteObjects does not say which keys existed); elsewhere as `tags_already_absent`."""
    manager = deletion.table.tag_manager
    parked = list(unfinished)
    for name in names:
        if name in with_files:
            parked.append(manager.park_for_deletion(name))
    paths = [manager.tag_path(name) for name in names]
    deleted = set(deletion.table.file_io.delete_many(paths)) if paths else set()
    gone = sum(1 for path in paths if path in deleted)
    deletion.record.count("tags_deleted", gone)
    if len(paths) > gone:
        deletion.record.count("tags_already_absent", len(paths) - gone)
    deletion.log.info("deleted %d tag files", len(names))
    return parked


def _refuse_new_roots(table: Table, tags_at_plan: set[str], branches_at_plan: set[str]) -> None:
    """Exit 3 before any file goes when a tag or branch was created since planning: it may need them."""
    new_tags = set(table.tag_manager.tag_names()) - tags_at_plan
    new_branches = set(table.branch_manager.branch_names()) - branches_at_plan
    if new_tags or new_branches:
        raise SafetyRefusal(
            f"{table.path}: tags {sorted(new_tags)} / branches {sorted(new_branches)} were created "
            "while this job ran; the tag files are deleted and their files left for now: run the job "
            "again to finish (it plans again with the new ones)"
        )


def _tags_on_expired_snapshots(table: Table, tags: dict[str, Snapshot], names: list[str]) -> list[str]:
    """Of `names`, the tags whose snapshot is gone (or differs): their files may go with them. The
    snapshots are read with `io_parallelism` reads in flight, one small read per tag."""
    there = map_in_flight(
        lambda name: _snapshot_still_there(table, tags[name]), names, table.file_io.io_parallelism
    )
    return [name for name, still_there in zip(names, there, strict=True) if not still_there]


def _snapshot_still_there(table: Table, tagged: Snapshot) -> bool:
    """The tagged snapshot exists with the same manifest lists: it needs every file the tag needs."""
    manager = table.snapshot_manager
    if not manager.snapshot_exists(tagged.id):
        return False
    return manager.snapshot(tagged.id).base_manifest_list == tagged.base_manifest_list


def _changelog_options(table: Table) -> bool:
    """True when the table may keep long-lived changelogs: protect what retained snapshots will need
    as changelogs (wider than needed when the retention is not actually decoupled; never narrower)."""
    options = table.schema.options
    return any(
        key in options
        for key in (CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX, CHANGELOG_TIME_RETAINED)
    )
