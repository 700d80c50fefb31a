"""rename-branch: give a branch another name (issue #30), as Paimon's `rename_branch`.

A branch is metadata only, so renaming it moves the files under `branch/branch-<from>/` to
`branch/branch-<to>/` (same relative paths, same bytes); its data files, manifests and lists are the
table's and stay where they are. Paimon renames the directory, which on an object store is a copy
and a delete anyway; here that is done file by file, in an order a crash cannot hurt:

1. copy every file, schemas first, then snapshots, changelogs and tags, hint files last: a crash
   leaves the new branch with fewer files (readable as a branch with fewer snapshots, or empty),
   and the old one whole;
2. delete the old branch's files, everything but its schemas first, then its schemas and (local
   disk, HDFS) its empty directories.

Nothing is lost at any point: every file exists under at least one of the names. A rerun of the same
request finds both branches and goes on when every file they share holds the same bytes (the new one
is the unfinished copy of the old one); a `to_branch` branch holding anything else is exit 2, as are an
unknown `from_branch`, "main" on either side, and the same name twice.

Spark-submit entry: `spark-submit jobs/rename_branch.py --config conf/rename-branch.yaml`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from jobs.branching.metadata import branch_files, existing_branch, read_or_none, remove_branch_directories
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.branches import branch_root, validate_branch_name
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "rename-branch"
STEP_COPIED = f"{OPERATION}:copied"
_ORDER = ("schema/", "snapshot/snapshot-", "changelog/changelog-", "tag/")


class RenameBranchConfig(TableJobConfig):
    from_branch: str = Field(description="the branch to rename")
    to_branch: str = Field(description="its new name (not main, not a number, no '/')")

    @field_validator("from_branch", "to_branch")
    @classmethod
    def _name(cls, value: str) -> str:
        validate_branch_name(value)
        return value

    @model_validator(mode="after")
    def _different(self) -> RenameBranchConfig:
        if self.from_branch == self.to_branch:
            raise ValueError(f"from and to are the same name {self.from_branch!r}")
        return self


CONFIG_MODEL = RenameBranchConfig


@dataclass(frozen=True)
class RenameBranchRequest:
    from_branch: str
    to_branch: str

    @staticmethod
    def of(config: RenameBranchConfig) -> RenameBranchRequest:
        return RenameBranchRequest(config.from_branch, config.to_branch)


def run(context: JobContext, config: RenameBranchConfig) -> None:
    rename_branch(open_existing_table(config), RenameBranchRequest.of(config), **context.job_keywords())


def copy_order(relative: str) -> tuple[int, str]:
    """Schemas, then snapshots, changelogs and tags, then anything else (hint files) last."""
    for rank, prefix in enumerate(_ORDER):
        if relative.startswith(prefix):
            return rank, relative
    return len(_ORDER), relative


def rename_branch(
    table: Table,
    request: RenameBranchRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Move branch `request.from_branch`'s metadata to `request.to_branch` (module docstring: order)."""
    log = log or logging.getLogger("jobs.rename_branch")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    source, target = request.from_branch, request.to_branch
    existing_branch(table, source)
    files = branch_files(table, source)
    resumed = _check_target(table, source, target, files)
    record.details["rename"] = {"from": source, "to": target, "resumed": resumed}
    record.count("files_to_move", len(files))
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: would rename branch %r to %r (%d files)", source, target, len(files))
        return record
    file_io = table.file_io
    old_root = branch_root(file_io, table.path, source)
    new_root = branch_root(file_io, table.path, target)
    copied = 0
    for relative in sorted(files, key=copy_order):
        path = file_io.join(new_root, relative)
        if read_or_none(file_io, path) != files[relative]:
            file_io.write_bytes(path, files[relative])
            copied += 1
    record.count("files_copied", copied)
    crash_point(STEP_COPIED)
    first = [file_io.join(old_root, r) for r in files if not r.startswith("schema/")]
    last = [file_io.join(old_root, r) for r in files if r.startswith("schema/")]
    deleted = 0
    for paths in (first, last):
        if paths:
            deleted += len(file_io.delete_many(paths))
    remove_branch_directories(table, source)
    record.count("files_deleted", deleted)
    log.info("renamed branch %r to %r (%d files)", source, target, len(files))
    return record


def _check_target(table: Table, source: str, target: str, files: dict[str, bytes]) -> bool:
    """False when `target` does not exist; True when it is the unfinished copy of `source` (or
    `source` the unfinished remainder of a copy that finished): every file both have holds the same
    bytes, and one's files include the other's. BadInputError otherwise."""
    if target not in table.branch_manager.branch_names():
        return False
    there = branch_files(table, target)
    same = all(files[r] == there[r] for r in set(files) & set(there))
    if same and (set(there) <= set(files) or set(files) <= set(there)):
        return True
    raise BadInputError(
        f"{table.branch_manager.branch_path(target)}: branch {target!r} already exists "
        "(delete-branch it first, or choose another name)"
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
