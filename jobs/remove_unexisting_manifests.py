"""remove-unexisting-manifests: repair a latest snapshot whose manifest list names a lost manifest.

Such a table cannot be read at all: every reader of the latest snapshot opens every manifest it
names. This job checks each data manifest of the latest snapshot (its base and delta lists) for
existence, many checks in flight, reports the missing ones (name, entries added and deleted), and
commits one OVERWRITE snapshot whose base list holds every manifest that still exists and whose
delta is empty: the latest state without the lost manifests (as Paimon's
`remove_unexisting_manifests`). The data files only a lost manifest added leave the table with it.
The files a lost manifest deleted would come back, since nothing else records their deletion: a
compaction's inputs beside its output (rows twice on an append, aggregation or first-row table), rows
a deletion vector or a dropped retraction had removed. So when a lost manifest deleted files the job
refuses (exit 2, naming the count), unless `revive_deleted_files: true` accepts that, as Paimon's
repair does without asking (reported as `deleted_entries_lost`; remove-unexisting-files repairs
those whose file is gone too). Older snapshots and tags still name the lost manifests.

The new snapshot's `totalRecordCount` is recounted from the files left, and a kept manifest that
deletes a file whose ADD was lost is rewritten without that DELETE (`jobs/repair/lost_manifests.py`
says why both matter and where we differ from Paimon's repair); this reads the kept manifests once.

Besides the data manifests the latest snapshot names two more metadata files:
* its index manifest (hash index, deletion vectors): when it is missing the job refuses (exit 2,
  naming it, nothing committed). Paimon's repair keeps naming it, which leaves the table as broken
  as before; dropping it would bring deleted rows back or put a key in two buckets.
* its changelog (a changelog manifest list and its manifests): only streaming readers of that
  snapshot read it, and no commit can restore it. Alongside lost data manifests the repair goes
  on and reports it (`missing_changelog_manifests`): the new snapshot has no changelog, as in
  Paimon's repair. A lost changelog alone is exit 2 naming the files, nothing committed, with what
  to do for the streaming readers (move their consumers past that snapshot).

Refused (exit 3, nothing committed) when more than `max_missing_ratio` of the manifests are missing,
with remove-unexisting-files' breaker (`jobs/repair/breaker.py`): that is a wrong path or an outage
far more often than a loss. A writer that commits while this job runs makes it exit 3 with nothing
committed (the check is of the snapshot it planned on; run it again). Writes, in order: the
rewritten manifests, then the commit's new manifest lists, then the snapshot file; so a crash leaves
the table as it was (plus unreferenced manifests and lists, which remove-orphan-files deletes) or
repaired. A dry run reports (counts included) and writes nothing. Runs on the driver alone (no Spark).

Spark-submit entry:
`spark-submit jobs/remove_unexisting_manifests.py --config conf/remove-unexisting-manifests.yaml`.
"""

from __future__ import annotations

import logging
import uuid

from pydantic import Field

from jobs.repair.breaker import refuse_beyond_ratio
from jobs.repair.lost_manifests import KeptState, recount_kept, with_replacements, write_rewrites
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.commit import OVERWRITE, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.errors import CommitConflictError
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.scan.snapshot_scan import data_manifests, read_list
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

OPERATION = "remove-unexisting-manifests"


class RemoveUnexistingManifestsConfig(TableJobConfig):
    max_missing_ratio: float = Field(
        default=0.1, ge=0, le=1, description="refuse (exit 3) when more of the manifests are missing"
    )
    revive_deleted_files: bool = Field(
        default=False,
        description="repair even when a lost manifest deleted files (they come back: rows twice, undeleted)",
    )


CONFIG_MODEL = RemoveUnexistingManifestsConfig


def run(context: JobContext, config: RemoveUnexistingManifestsConfig) -> None:
    remove_unexisting_manifests(
        open_existing_table(config),
        max_missing_ratio=config.max_missing_ratio,
        revive_deleted_files=config.revive_deleted_files,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def remove_unexisting_manifests(
    table: Table,
    *,
    max_missing_ratio: float = 0.1,
    revive_deleted_files: bool = False,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Find the latest snapshot's missing manifests and commit the state without them (module docstring)."""
    log = log or logging.getLogger("jobs.remove_unexisting_manifests")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    latest = table.snapshot_manager.latest()
    if latest is None:
        record.count("missing_manifests", 0)
        return record
    record.snapshot_ids["scanned"] = latest.id
    _refuse_lost_index_manifest(table, latest)
    manifests = data_manifests(table, latest)
    missing = _missing(table, manifests)
    lost_changelog = _lost_changelog(table, latest)
    record.count("manifests", len(manifests))
    record.count("missing_manifests", len(missing))
    record.count("added_entries_lost", sum(meta.num_added_files for meta in missing))
    record.count("deleted_entries_lost", sum(meta.num_deleted_files for meta in missing))
    record.count("missing_changelog_manifests", len(lost_changelog))
    record.sample("missing_manifests", [meta.file_name for meta in missing[:SAMPLE_LIMIT]])
    record.sample("missing_changelog_manifests", lost_changelog)
    log.info("%d of %d manifests of snapshot %d are missing", len(missing), len(manifests), latest.id)
    if lost_changelog and not missing:
        raise BadInputError(_changelog_message(table, latest, lost_changelog, repaired=False))
    if lost_changelog:
        log.warning("%s", _changelog_message(table, latest, lost_changelog, repaired=True))
    if not missing:
        return record
    ratio = refuse_beyond_ratio(table.path, len(missing), len(manifests), max_missing_ratio, "manifests")
    record.details["missing_ratio"] = round(ratio, 6)
    _refuse_revived_files(table, missing, revive_deleted_files)
    missing_names = {meta.file_name for meta in missing}
    kept = [meta for meta in manifests if meta.file_name not in missing_names]
    state = recount_kept(table, kept, f"{table.path} snapshot {latest.id} without its missing manifests")
    record.details["total_record_count"] = {"before": latest.total_record_count, "after": state.total_rows}
    record.count("live_files", state.live_files)
    record.count("dangling_deletes_dropped", state.dangling_deletes)
    record.count("manifests_rewritten", len(state.rewrites))
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: nothing committed")
        return record
    snapshot = _commit_without(table, latest.id, manifests, missing_names, state)
    record.snapshot_ids["committed"] = snapshot.id
    record.count("manifests_removed", len(missing))
    log.info("committed snapshot %d without %d missing manifests", snapshot.id, len(missing))
    return record


def _missing(table: Table, manifests: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
    """The manifests that do not exist (many checks in flight; a check that fails is an error)."""
    file_io = table.file_io
    present = map_in_flight(
        lambda meta: file_io.file_exists(table.manifest_path(meta.file_name)),
        manifests,
        file_io.io_parallelism,
    )
    return [meta for meta, found in zip(manifests, present, strict=True) if not found]


def _lost_changelog(table: Table, snapshot: Snapshot) -> list[str]:
    """The missing files of the snapshot's changelog: its changelog manifest list, or the changelog
    manifests the list names."""
    name = snapshot.changelog_manifest_list
    if not name:
        return []
    if not table.file_io.file_exists(table.manifest_path(name)):
        return [name]
    return [meta.file_name for meta in _missing(table, read_list(table, name))]


def _changelog_message(table: Table, snapshot: Snapshot, lost: list[str], *, repaired: bool) -> str:
    """Why a lost changelog is not repaired, and what the streaming readers at that snapshot need."""
    shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
    outcome = (
        "the repaired snapshot has no changelog (as Paimon's repair)"
        if repaired
        else "nothing was committed: no commit can restore it, and batch reads do not need it"
    )
    return (
        f"{table.path}: the changelog of snapshot {snapshot.id} is lost ({shown} missing); {outcome}. "
        f"Streaming readers that have not read snapshot {snapshot.id} fail on it: move their consumers "
        f"past it (reset-consumer next_snapshot: {snapshot.id + 1}) or restore the files from a backup"
    )


def _refuse_lost_index_manifest(table: Table, snapshot: Snapshot) -> None:
    """BadInputError (exit 2) when the snapshot's index manifest is missing: it lists the hash index
    and deletion vectors, which nothing in the data manifests can rebuild, and a snapshot without
    them would put one key in two buckets or bring deleted rows back."""
    name = snapshot.index_manifest
    if name and not table.file_io.file_exists(table.manifest_path(name)):
        raise BadInputError(
            f"{table.path}: the index manifest {name} of snapshot {snapshot.id} is missing; it lists "
            "the table's hash index and deletion vectors, which no commit can rebuild from the data "
            "manifests (dropping it would bring deleted rows back or put a key in two buckets). "
            "Nothing was committed: restore it from a backup, or roll back to a snapshot whose index "
            "manifest exists"
        )


def _commit_without(
    table: Table, planned_on: int, manifests: list[ManifestFileMeta], missing: set[str], state: KeptState
) -> Snapshot:
    """One OVERWRITE snapshot: base = the planned snapshot's manifests but the missing ones (those
    holding a DELETE whose ADD was lost replaced by their rewrites, written first), delta empty,
    total = the rows of the files left. Refused (CommitConflictError, exit 3) when the latest is no
    longer the planned one; the rewrites written are then deleted again (best effort)."""
    kept = [meta for meta in manifests if meta.file_name not in missing]
    replacements = write_rewrites(table, kept, state.rewrites, str(uuid.uuid4()))
    base = with_replacements(manifests, missing, replacements)

    def rewrite(ctx: AttemptContext, _previous: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        if ctx.latest is None or ctx.latest.id != planned_on:
            raise CommitConflictError(
                f"{table.path}: another writer committed after snapshot {planned_on} while this job ran; "
                "nothing was committed, run remove-unexisting-manifests again"
            )
        return base

    try:
        snapshot = SnapshotCommit(table).commit(
            lambda _ctx: [],
            kind=OVERWRITE,
            allow_empty=True,
            rewrite_base=rewrite,
            check_conflicts=False,
            total_record_count=state.total_rows,
        )
    except CommitConflictError:
        for written in replacements.values():
            for meta in written:
                table.file_io.delete(table.manifest_path(meta.file_name))
        raise
    assert snapshot is not None
    return snapshot


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)


def _refuse_revived_files(table: Table, missing: list[ManifestFileMeta], revive: bool) -> None:
    """BadInputError (exit 2) when the lost manifests deleted files and `revive` was not given: their
    DELETEs are gone, so the repaired snapshot would read those files again (module docstring)."""
    deleted = sum(meta.num_deleted_files for meta in missing)
    if deleted and not revive:
        names = ", ".join(meta.file_name for meta in missing if meta.num_deleted_files)
        raise BadInputError(
            f"{table.path}: the missing manifests ({names}) deleted {deleted} data files; without them "
            "those files would be read again (a compaction's inputs beside its output, rows a deletion "
            "vector or a compaction removed). Restore the manifests if you can, or roll back to a "
            "snapshot before them; set revive_deleted_files: true to repair anyway (as Paimon's repair)"
        )
