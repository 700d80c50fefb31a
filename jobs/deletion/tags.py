"""Deleting tags and the files only they used: shared by delete-tag and expire-tags (issue #17).

Paimon's TagManager.deleteTag deletes the tag file, then (when the tagged snapshot itself has
expired) the files that neither the neighbouring tags nor the earliest snapshot use. Here the
"neither" is wider and exact: the files the deleted tags need (`root_deletion.dropped_root_candidates`:
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
from typing import Any

from jobs.deletion.expire_candidates import future_changelog_roots
from jobs.deletion.roots import delete_stages, dropped_root_candidates, report_candidates
from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from paimon_format.maintenance.references import PENDING_TAG_ROOT, TAG_ROOT
from paimon_format.model.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
)
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table


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


def delete_tags(
    spark: Any,
    table: Table,
    tags: dict[str, Snapshot],
    steps: TagSteps,
    dry_run: bool,
    record: RunRecord,
    log: Any,
    batch_size: int = 1000,
    max_per_second: float | None = None,
) -> None:
    """Delete the `tags` (name -> tagged snapshot, as read when chosen) of `table`'s branch and the
    files only they used.

    `spark`: a SparkSession, or a function returning one: Spark is only started when a deleted
    tag's snapshot has expired. A tag on a snapshot that still exists shares every file with it
    (Paimon skips the file cleanup then too).
    """
    manager = table.tag_manager
    names = sorted(tags)
    unfinished = manager.pending_deletion_names()  # parked by interrupted runs: finished here
    record.count("tags_to_delete", len(names))
    record.count("unfinished_deletions", len(unfinished))
    record.sample("tags_to_delete", [manager.tag_path(name) for name in names[:SAMPLE_LIMIT]])
    record.details["tags_to_delete"] = {name: tags[name].id for name in names[:SAMPLE_LIMIT]}
    if unfinished:
        log.warning(
            "finishing %d tag deletions an interrupted run left: %s", len(unfinished), unfinished[:10]
        )
    if not names and not unfinished:
        log.info("no tag to delete")
        record.count("tags_deleted", 0)
        return
    with_files = [name for name in names if not _snapshot_still_there(table, tags[name])]
    branch = table.branch  # a branch's tags live under branch/branch-<name>/tag/
    dropped = [(branch, TAG_ROOT, name) for name in with_files]
    dropped += [(branch, PENDING_TAG_ROOT, key) for key in unfinished]
    tags_at_plan = set(manager.tag_names())
    branches_at_plan = set(table.branch_manager.branch_names())
    candidates = None
    session = None
    totals: dict[int, tuple[int, int]] = {}
    if dropped:
        doomed = set(names)

        def keep_root(root_branch: str, kind: str, name: str) -> bool:
            return not (root_branch == branch and kind == TAG_ROOT and name in doomed)

        extra = future_changelog_roots(table, 0) if _changelog_options(table) else []
        log.info("planning the files of %d tags on expired snapshots", len(dropped))
        session = spark() if callable(spark) else spark
        candidates = dropped_root_candidates(session, table, dropped, keep_root, extra, log)
    try:
        if candidates is not None:
            totals = report_candidates(candidates, record, "")
        else:
            report_candidates_empty(record)
        crash_point(steps.planned)
        if dry_run:
            log.info("dry run: nothing deleted")
            record.count("tags_deleted", 0)
            return
        parked = list(unfinished)
        for name in names:
            if name in with_files:
                parked.append(manager.park_for_deletion(name))
            if manager.delete_tag(name):
                record.count("tags_deleted", 1)
            else:
                record.count("tags_already_absent", 1)
        log.info("deleted %d tag files", len(names))
        crash_point(steps.tags_deleted)
        if candidates is not None:
            new_tags = set(manager.tag_names()) - tags_at_plan
            new_branches = set(table.branch_manager.branch_names()) - branches_at_plan
            if new_tags or new_branches:
                raise SafetyRefusal(
                    f"{table.path}: tags {sorted(new_tags)} / branches {sorted(new_branches)} were created "
                    "while this job ran; the tag files are deleted and their files left for now: run the job "
                    "again to finish (it plans again with the new ones)"
                )
            delete_stages(
                session,
                table,
                candidates,
                totals,
                "",
                (steps.files, steps.manifests, steps.lists),
                record,
                log,
                batch_size,
                max_per_second,
            )
        for key in parked:
            manager.finish_deletion(key)
        record.count("unfinished_deletions_finished", len(unfinished))
    finally:
        if candidates is not None:
            candidates.unpersist()


def _snapshot_still_there(table: Table, tagged: Snapshot) -> bool:
    """The tagged snapshot exists with the same manifest lists: it needs every file the tag needs."""
    manager = table.snapshot_manager
    if not manager.snapshot_exists(tagged.id):
        return False
    return manager.snapshot(tagged.id).base_manifest_list == tagged.base_manifest_list


def report_candidates_empty(record: RunRecord) -> None:
    """The counts of `report_candidates` when no tag needs a file cleanup."""
    for name in ("files", "manifests", "manifest_lists"):
        record.count(f"{name}_to_delete", 0)
        record.add_bytes(f"{name}_to_delete", 0)


def _changelog_options(table: Table) -> bool:
    """True when the table may keep long-lived changelogs: protect what retained snapshots will need
    as changelogs (wider than needed when the retention is not actually decoupled; never narrower)."""
    options = table.schema.options
    return any(
        key in options
        for key in (CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX, CHANGELOG_TIME_RETAINED)
    )
