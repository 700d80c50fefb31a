"""delete-branch: delete branches by name or glob, and the files only they used (issue #30).

Paimon's `delete_branch` deletes the directory `branch/branch-<name>` and leaves the files only the
branch used (its own commits' data files, manifests and manifest lists) to orphan cleaning. Here they
go too, as delete-tag does for a tag: the candidates are what the branch's snapshots, tags,
long-lived changelogs and parked tag deletions need (`jobs.deletion.roots.dropped_root_candidates`),
minus everything every other root of every other branch and main needs, read on the executors.

Order:
1. plan: the branches, their roots, the candidates (Spark only when a branch has a root);
2. the branches' metadata: every file but the schemas (snapshots, tags, changelogs, hints), then
   the schemas, then their empty directories (local disk, HDFS). Readers never open a branch whose
   data is half gone: its snapshots go before any of its files;
3. before any data file goes, the branches are listed again: one created meanwhile may need the
   candidates, so the run stops there with exit 3 (metadata gone, files left for remove-orphan-files);
4. the files in expire-snapshots' stages (data, changelog and index files; manifests, index
   manifests, statistics; manifest lists), so a crash between stages leaves every remaining root whole.

A crash in step 2 leaves a branch with fewer roots: a rerun plans again from what is left (the files
of the roots already gone are then unreferenced, for remove-orphan-files). A crash after step 2 leaves
the files unreferenced; a rerun finds no such branch: exit 2 with `strict: true` (the default: an
unknown name is an error), a warning and exit 0 with `strict: false`.

Spark-submit entry: `spark-submit jobs/delete_branch.py --config conf/delete-branch.yaml`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from jobs.branching.metadata import remove_branch_directories
from jobs.deletion.context import DeletePace, DeletionContext
from jobs.deletion.expire_candidates import future_changelog_roots
from jobs.deletion.roots import dropped_root_candidates
from jobs.deletion.stages import delete_stages, report_candidates_if_any
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import SafetyRefusal
from jobs.runtime.name_patterns import check_name_patterns, matching_names, report_unmatched
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.branches import MAIN_BRANCH, branch_metadata_files, branch_root
from paimon_format.maintenance.references import CHANGELOG_ROOT, PENDING_TAG_ROOT, SNAPSHOT_ROOT, TAG_ROOT
from paimon_format.model.options import (
    CHANGELOG_NUM_RETAINED_MAX,
    CHANGELOG_NUM_RETAINED_MIN,
    CHANGELOG_TIME_RETAINED,
)
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPERATION = "delete-branch"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_METADATA = f"{OPERATION}:metadata-deleted"
STEP_FILES = f"{OPERATION}:files-deleted"
STEP_MANIFESTS = f"{OPERATION}:manifests-deleted"
STEP_LISTS = f"{OPERATION}:manifest-lists-deleted"

Root = tuple[str, str, str]


class DeleteBranchConfig(TableJobConfig):
    branches: list[str] = Field(description="branch names or globs (* ? [..]); never main")
    strict: bool = Field(
        default=True, description="a name or glob matching no branch is an error (false: a warning)"
    )
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("branches")
    @classmethod
    def _branches(cls, value: list[str]) -> list[str]:
        if MAIN_BRANCH in check_name_patterns(value, "branch"):
            raise ValueError("'main' is the table itself and cannot be deleted")
        return value


CONFIG_MODEL = DeleteBranchConfig


@dataclass(frozen=True)
class DeleteBranchRequest:
    """Which branches go (names or globs), whether a pattern matching none is an error, and how fast
    the freed files go."""

    branches: list[str]
    strict: bool = True
    pace: DeletePace = DeletePace()

    @staticmethod
    def of(config: DeleteBranchConfig) -> DeleteBranchRequest:
        return DeleteBranchRequest(list(config.branches), config.strict, DeletePace.of(config))


def run(context: JobContext, config: DeleteBranchConfig) -> None:
    delete_branch(
        lambda: context.spark,  # started only when a deleted branch has a snapshot, tag or changelog
        open_existing_table(config),
        DeleteBranchRequest.of(config),
        **context.job_keywords(),
    )


def matching_branches(names: list[str], patterns: list[str]) -> tuple[list[str], list[str]]:
    """(branches matched by any pattern, sorted; patterns matching none): `matching_names`; main
    never matches."""
    return matching_names(names, patterns, never=(MAIN_BRANCH,))


def delete_branch(
    spark: SparkSession | Callable[[], SparkSession],
    table: Table,
    request: DeleteBranchRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Delete the branches of `table` that `request.branches` name or match, and the files only they
    used (see the module docstring for the order)."""
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    table, record, log = deletion.table, deletion.record, deletion.log
    existing = table.branch_manager.branch_names()
    names, unmatched = matching_branches(existing, request.branches)
    message = (
        f"{table.path}: no branch matches {', '.join(repr(p) for p in unmatched)} "
        f"(branches: {', '.join(existing) or 'none'})"
    )
    report_unmatched(record, log, unmatched, message, request.strict)
    dropped = [root for name in names for root in _branch_roots(table, name)]
    record.details["branches_to_delete"] = names
    record.count("branches_to_delete", len(names))
    record.count("roots_to_drop", len(dropped))
    candidates = _plan_files(deletion, names, dropped)
    try:
        totals = report_candidates_if_any(candidates, record, log)
        crash_point(STEP_PLANNED)
        if deletion.dry_run:
            log.info("dry run: nothing deleted")
            record.count("branches_deleted", 0)
            return record
        for name in names:
            _delete_branch_metadata(table, name, record)
        crash_point(STEP_METADATA)
        if candidates is not None:
            _refuse_new_branches(table, set(existing))
            delete_stages(deletion, candidates, totals, "", (STEP_FILES, STEP_MANIFESTS, STEP_LISTS))
    finally:
        if candidates is not None:
            candidates.unpersist()
    log.info("deleted branches %s", names)
    return record


def _branch_roots(table: Table, name: str) -> list[Root]:
    """A branch's snapshots, tags, long-lived changelogs and parked tag deletions."""
    branch = table.for_branch(name)
    snapshots = branch.snapshot_manager
    roots = [(name, SNAPSHOT_ROOT, str(i)) for i in snapshots.snapshot_ids()]
    roots += [(name, TAG_ROOT, tag) for tag in branch.tag_manager.tag_names()]
    roots += [(name, CHANGELOG_ROOT, str(i)) for i in snapshots.changelog_ids()]
    roots += [(name, PENDING_TAG_ROOT, key) for key in branch.tag_manager.pending_deletion_names()]
    return roots


def _plan_files(deletion: DeletionContext, names: list[str], dropped: list[Root]) -> DataFrame | None:
    """What the dropped branches alone needed (None, and no Spark, when they have no root)."""
    if not dropped:
        return None
    doomed = set(names)
    table = deletion.table

    def keep_root(branch: str, _kind: str, _name: str) -> bool:
        return branch not in doomed

    options = table.schema.options
    decoupled = any(
        k in options
        for k in (CHANGELOG_NUM_RETAINED_MIN, CHANGELOG_NUM_RETAINED_MAX, CHANGELOG_TIME_RETAINED)
    )
    extra = future_changelog_roots(table, 0) if decoupled else []
    deletion.log.info("planning the files of %d roots of branches %s", len(dropped), names)
    return dropped_root_candidates(deletion.spark, table, dropped, keep_root, extra, deletion.log)


def _delete_branch_metadata(table: Table, name: str, record: RunRecord) -> None:
    """Every file of the branch but its schemas, then the schemas, then its empty directories."""
    root = branch_root(table.file_io, table.path, name)
    relative = branch_metadata_files(table.file_io, table.path, name)
    first = [table.file_io.join(root, r) for r in relative if not r.startswith("schema/")]
    last = [table.file_io.join(root, r) for r in relative if r.startswith("schema/")]
    deleted = 0
    for paths in (first, last):
        if paths:
            deleted += len(table.file_io.delete_many(paths))
    remove_branch_directories(table, name)
    record.count("branches_deleted", 1)
    record.count("branch_metadata_files_deleted", deleted)


def _refuse_new_branches(table: Table, at_plan: set[str]) -> None:
    """Exit 3 before any file goes when a branch was created since planning: it may need them."""
    new = set(table.branch_manager.branch_names()) - at_plan
    if new:
        raise SafetyRefusal(
            f"{table.path}: branches {sorted(new)} were created while this job ran; the deleted "
            "branches' metadata is gone and their files are left for remove-orphan-files"
        )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
