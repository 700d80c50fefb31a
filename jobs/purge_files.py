"""purge-files: delete every data and metadata file of a table except its schema (Paimon's purge_files).

Destructive by design, so behind `confirm: true`: without it a run is refused (exit 2) before
anything is read; a dry run needs no confirmation and lists what would go. What goes: every file
below the table's root except `schema/` (snapshots, changelogs, tags, branches with their own
schemas, consumers, statistics, manifests, index files, data files, partitions' `_SUCCESS` files).
The table stays, as an empty table with its current schema: readers see no snapshot. Newer Paimon
versions reach the same reading through a truncation snapshot plus expiry and orphan cleaning; we
delete directly, which leaves no snapshot at all (as Paimon's first purge_files did). Data files at
external paths (`data-file.external-paths`) are outside the root and are not deleted.

Crash ordering: metadata first (branches, tags, consumers, then snapshots, changelogs and their
hints), then everything else. A crash during the first phase leaves fewer snapshots, tags or
branches, each of whose files still exist, so the table reads as an older state; a crash during the
second leaves unreferenced files only. A rerun lists again and deletes the rest (exit 0).

Race: a writer that committed while this job ran (a snapshot found after the first phase) stops the
run before any manifest or data file goes: exit 3, the writer's snapshot and everything it reads
stay. Stop the table's writers before purging, as for Paimon's own procedure.

Spark-submit entry: `spark-submit jobs/purge_files.py --config conf/purge-files.yaml`.
"""

from __future__ import annotations

import logging

from pydantic import Field

from jobs.branching.metadata import remove_branch_directories
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.errors import MissingFileError
from paimon_format.storage.crash_points import crash_point
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table

OPERATION = "purge-files"
METADATA_DIRS = ("branch", "tag", "consumer", "snapshot", "changelog")  # deleted first, in this order
KEPT_DIR = "schema"


class PurgeFilesConfig(TableJobConfig):
    confirm: bool = Field(
        default=False, description="must be true: every file of the table except its schema is deleted"
    )


CONFIG_MODEL = PurgeFilesConfig


def run(context: JobContext, config: PurgeFilesConfig) -> None:
    if not config.confirm and not context.dry_run:
        raise BadInputError(
            f"{config.table}: purge-files deletes every data and metadata file of the table except its "
            "schema; set confirm: true to purge (or run with --dry-run to list what would go)"
        )
    purge_files(open_existing_table(config), dry_run=context.dry_run, record=context.record, log=context.log)


def purge_files(
    table: Table,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """List the table's files and delete all but the schema, metadata first (module docstring)."""
    log = log or logging.getLogger("jobs.purge_files")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    record.snapshot_ids["latest"] = table.snapshot_manager.latest_id()
    branches = table.branch_manager.branch_names()
    metadata, files = _planned(table)
    record.count("metadata_files_to_delete", len(metadata))
    record.count("files_to_delete", len(files))
    record.sample("metadata_files_to_delete", [_relative(table, p) for p in metadata[:SAMPLE_LIMIT]])
    record.sample("files_to_delete", [_relative(table, p) for p in files[:SAMPLE_LIMIT]])
    record.details["branches"] = branches
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: would delete %d metadata and %d other files", len(metadata), len(files))
        return record
    deleted = len(table.file_io.delete_many(metadata))
    for name in branches:
        remove_branch_directories(table, name)  # an empty branch directory is a branch to Paimon
    record.count("metadata_files_deleted", deleted)
    crash_point(f"{OPERATION}:metadata-deleted")
    _refuse_new_snapshots(table)
    record.count("files_deleted", len(table.file_io.delete_many(files)))
    log.info("purged %s: %d metadata and %d other files deleted", table.path, deleted, len(files))
    return record


def _planned(table: Table) -> tuple[list[str], list[str]]:
    """(metadata files in deletion order, every other file but the schema's), by one listing of the
    root. A listing that fails is an error, never an empty plan."""
    file_io = table.file_io
    by_dir: dict[str, list[str]] = {}
    for status in file_io.list_files_recursive(table.path):
        top = _relative(table, status.path).split("/", 1)[0]
        by_dir.setdefault(top, []).append(status.path)
    by_dir.pop(KEPT_DIR, None)
    metadata = [path for name in METADATA_DIRS for path in sorted(by_dir.pop(name, []), key=_hints_first)]
    files = sorted(path for paths in by_dir.values() for path in paths)
    return metadata, files


def _hints_first(path: str) -> tuple[int, str]:
    """LATEST and EARLIEST hints go before the files they point at."""
    return (0 if path.rsplit("/", 1)[-1] in ("LATEST", "EARLIEST") else 1, path)


def _relative(table: Table, path: str) -> str:
    return FileIO.relative_to(table.path, path)


def _refuse_new_snapshots(table: Table) -> None:
    """Exit 3 when a snapshot exists after the metadata went: a writer committed meanwhile, and its
    snapshot reads manifests and data files that must stay."""
    try:
        found = [s.path for s in table.file_io.list_dir(table.file_io.join(table.path, "snapshot"))]
    except MissingFileError:
        return
    if found:
        raise CommitRaceLost(
            f"{table.path}: a writer committed while the table was purged "
            f"({_relative(table, found[0])}); its files were kept and no manifest or data file was "
            "deleted. Stop the writers and run purge-files again"
        )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
