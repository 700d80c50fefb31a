"""remove-unexisting-manifests: repair a latest snapshot whose manifest list names a lost manifest.

Such a table cannot be read at all: every reader of the latest snapshot opens every manifest it
names. This job checks each data manifest of the latest snapshot (its base and delta lists) for
existence, many checks in flight, reports the missing ones (name, entries added and deleted), and
commits one OVERWRITE snapshot whose base list holds every manifest that still exists and whose
delta is empty: the latest state without the lost manifests (as Paimon's
`remove_unexisting_manifests`). The data files only a lost manifest added leave the table with it;
the files a lost manifest deleted come back, since nothing else records their deletion (reported
as `deleted_entries_lost`). Older snapshots and tags still name the lost manifests.

Refused (exit 3, nothing committed) when more than `max_missing_ratio` of the manifests are missing,
with remove-unexisting-files' breaker (`jobs/repair/breaker.py`): that is a wrong path or an outage
far more often than a loss. A writer that commits while this job runs makes it exit 3 with nothing
committed (the check is of the snapshot it planned on; run it again). Only the commit writes: the
new manifest lists first, then the snapshot file, so a crash leaves the table as it was (plus
unreferenced lists, which remove-orphan-files deletes) or repaired. A dry run reports and commits
nothing. Runs on the driver alone (no Spark): it reads manifest lists, never manifests.

Spark-submit entry:
`spark-submit jobs/remove_unexisting_manifests.py --config conf/remove-unexisting-manifests.yaml`.
"""

from __future__ import annotations

import logging

from pydantic import Field

from jobs.repair.breaker import refuse_beyond_ratio
from jobs.runtime.config import TableJobConfig
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.commit import OVERWRITE, SnapshotCommit
from paimon_format.commit_conflicts import AttemptContext
from paimon_format.errors import CommitConflictError
from paimon_format.manifest.entries import ManifestFileMeta
from paimon_format.scan.snapshot_scan import data_manifests
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.in_flight import map_in_flight
from paimon_format.table import Table

OPERATION = "remove-unexisting-manifests"


class RemoveUnexistingManifestsConfig(TableJobConfig):
    max_missing_ratio: float = Field(
        default=0.1, ge=0, le=1, description="refuse (exit 3) when more of the manifests are missing"
    )


CONFIG_MODEL = RemoveUnexistingManifestsConfig


def run(context: JobContext, config: RemoveUnexistingManifestsConfig) -> None:
    remove_unexisting_manifests(
        open_existing_table(config),
        max_missing_ratio=config.max_missing_ratio,
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def remove_unexisting_manifests(
    table: Table,
    *,
    max_missing_ratio: float = 0.1,
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
    manifests = data_manifests(table, latest)
    file_io = table.file_io
    present = map_in_flight(
        lambda meta: file_io.file_exists(table.manifest_path(meta.file_name)),
        manifests,
        file_io.io_parallelism,
    )
    missing = [meta for meta, found in zip(manifests, present, strict=True) if not found]
    record.count("manifests", len(manifests))
    record.count("missing_manifests", len(missing))
    record.count("added_entries_lost", sum(meta.num_added_files for meta in missing))
    record.count("deleted_entries_lost", sum(meta.num_deleted_files for meta in missing))
    record.sample("missing_manifests", [meta.file_name for meta in missing[:SAMPLE_LIMIT]])
    log.info("%d of %d manifests of snapshot %d are missing", len(missing), len(manifests), latest.id)
    if not missing:
        return record
    ratio = refuse_beyond_ratio(table.path, len(missing), len(manifests), max_missing_ratio, "manifests")
    record.details["missing_ratio"] = round(ratio, 6)
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: nothing committed")
        return record
    snapshot = _commit_without(table, latest.id, {meta.file_name for meta in missing})
    record.snapshot_ids["committed"] = snapshot.id
    record.count("manifests_removed", len(missing))
    log.info("committed snapshot %d without %d missing manifests", snapshot.id, len(missing))
    return record


def _commit_without(table: Table, planned_on: int, missing: set[str]) -> Snapshot:
    """One OVERWRITE snapshot: base = the planned snapshot's manifests but the missing ones, delta
    empty. Refused (CommitConflictError, exit 3) when the latest is no longer the planned one."""

    def rewrite(ctx: AttemptContext, previous: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        if ctx.latest is None or ctx.latest.id != planned_on:
            raise CommitConflictError(
                f"{table.path}: another writer committed after snapshot {planned_on} while this job ran; "
                "nothing was committed, run remove-unexisting-manifests again"
            )
        return [meta for meta in previous if meta.file_name not in missing]

    snapshot = SnapshotCommit(table).commit(
        lambda _ctx: [], kind=OVERWRITE, allow_empty=True, rewrite_base=rewrite, check_conflicts=False
    )
    assert snapshot is not None
    return snapshot


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
