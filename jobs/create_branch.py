"""create-branch: a new branch of a table, as Paimon's `create_branch` procedure (issue #30).

A branch is metadata only (`branch/branch-<name>/`): it shares main's data files, manifests and
manifest lists. What the new branch holds, by its source:

- the latest snapshot (the default) or `snapshot: N`: main's `snapshot-N` file, byte for byte;
- `tag: T`: main's `tag-T` file in the branch's `tag/`, and the snapshot it tags in the branch's
  `snapshot/` (main's snapshot file when it still exists, else the tag without its own fields, as
  Paimon's `trimToSnapshot`, and without a changelog manifest list expiry already deleted);
- `empty: true`: no snapshot, the current schema file only (as Paimon);

and with a snapshot main's schema files up to the schema that snapshot uses, as newer Paimon
versions copy them (Paimon 1.0 copied only that one, which leaves older data files of an evolved
table without their schema). No hint file is written, as in Paimon: readers list.

Order: schemas (oldest first), the snapshot, the tag. A crash in between leaves a branch with fewer
files, which readers see as an empty branch or the branch without its tag; a rerun of the same
request finds every file it would write either absent or holding the same bytes and writes the rest
(exit 0). A branch of that name holding anything else is exit 2. Nothing is deleted.

A racing expiry: after writing, the source snapshot (or tag) is checked again; gone meanwhile, its
files may be going too, so the files this run wrote are removed again and the run ends with exit 3.
Runs on the driver alone (no Spark).

Spark-submit entry: `spark-submit jobs/create_branch.py --config conf/create-branch.yaml`.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from jobs.branching.metadata import branch_files, read_or_none, remove_branch_directories
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.branches import branch_root, validate_branch_name
from paimon_format.errors import MissingFileError
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "create-branch"
_TAG_FIELDS = ("tagCreateTime", "tagTimeRetained")


class CreateBranchConfig(TableJobConfig):
    branch: str = Field(description="the new branch's name (not main, not a number, no '/')")
    snapshot: int | None = Field(default=None, ge=1, description="branch from this snapshot id")
    tag: str | None = Field(default=None, description="or from this tag of main (copied into the branch)")
    empty: bool = Field(default=False, description="or an empty branch: the current schema, no snapshot")

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        validate_branch_name(value)
        return value

    @model_validator(mode="after")
    def _one_source(self) -> CreateBranchConfig:
        if sum((self.snapshot is not None, self.tag is not None, self.empty)) > 1:
            raise ValueError(
                "give at most one of snapshot, tag and empty: true (default: the latest snapshot)"
            )
        return self


CONFIG_MODEL = CreateBranchConfig


@dataclass(frozen=True)
class CreateBranchRequest:
    """The branch to create and its source: a snapshot id, a tag, empty, or (none given) the latest."""

    branch: str
    snapshot: int | None = None
    tag: str | None = None
    empty: bool = False

    @staticmethod
    def of(config: CreateBranchConfig) -> CreateBranchRequest:
        return CreateBranchRequest(config.branch, config.snapshot, config.tag, config.empty)


def run(context: JobContext, config: CreateBranchConfig) -> None:
    create_branch(
        open_existing_table(config),
        CreateBranchRequest.of(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


@dataclass(frozen=True)
class BranchPlan:
    files: dict[str, bytes]  # path relative to the branch root -> content, in the order written
    snapshot_id: int | None
    source: str  # "snapshot 7", "tag t1", "empty"


def create_branch(
    table: Table,
    request: CreateBranchRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Write branch `request.branch` of `table` (see the module docstring for what and in which order)."""
    log = log or logging.getLogger("jobs.create_branch")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    validate_or_bad_input(request.branch)
    plan = plan_branch(table, request)
    resumed = _check_existing(table, request.branch, plan)
    record.details["branch"] = {"name": request.branch, "source": plan.source, "resumed": resumed}
    record.snapshot_ids["branched"] = plan.snapshot_id
    record.sample("files_to_write", sorted(plan.files)[:20])
    record.count("files_to_write", len(plan.files))
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: would create branch %r from %s", request.branch, plan.source)
        record.count("files_written", 0)
        return record
    root = branch_root(table.file_io, table.path, request.branch)
    written = []
    first_other = next((r for r in plan.files if not r.startswith("schema/")), None)
    for relative, data in plan.files.items():
        if relative == first_other:
            crash_point(f"{OPERATION}:schemas-written")
        path = table.file_io.join(root, relative)
        if read_or_none(table.file_io, path) != data:
            table.file_io.write_bytes(path, data)
            written.append(path)
    record.count("files_written", len(written))
    _refuse_vanished_source(table, request, plan, written)
    log.info("created branch %r from %s (%d files written)", request.branch, plan.source, len(written))
    return record


def validate_or_bad_input(name: str) -> None:
    try:
        validate_branch_name(name)
    except ValueError as error:
        raise BadInputError(str(error)) from None


def plan_branch(table: Table, request: CreateBranchRequest) -> BranchPlan:
    """The files the branch gets, by its path relative to the branch root, in the order written."""
    snapshots = table.snapshot_manager
    files: dict[str, bytes] = {}
    if request.empty:
        schema = table.schema_manager.latest()
        if schema is None:
            raise BadInputError(f"{table.path}: the table has no schema")
        files[f"schema/schema-{schema.id}"] = table.file_io.read_bytes(
            table.schema_manager.schema_path(schema.id)
        )
        return BranchPlan(files, None, "empty")
    tag_bytes = None
    if request.tag is not None:
        tags = table.tag_manager
        if not tags.tag_exists(request.tag):
            raise BadInputError(
                f"{tags.tag_path(request.tag)}: tag {request.tag!r} does not exist "
                f"(tags: {', '.join(tags.tag_names()) or 'none'})"
            )
        tag_bytes = table.file_io.read_bytes(tags.tag_path(request.tag))
        snapshot_bytes = _snapshot_of_tag(table, Snapshot.from_json(tag_bytes))
        source = f"tag {request.tag}"
    else:
        snapshot_id = request.snapshot if request.snapshot is not None else snapshots.latest_id()
        if snapshot_id is None:
            raise BadInputError(f"{table.path}: the table has no snapshot to branch from (empty: true?)")
        try:
            snapshot_bytes = table.file_io.read_bytes(snapshots.snapshot_path(snapshot_id))
        except MissingFileError:
            ids = snapshots.snapshot_ids()
            span = f"{ids[0]}..{ids[-1]}" if ids else "none"
            raise BadInputError(
                f"{snapshots.snapshot_path(snapshot_id)}: snapshot {snapshot_id} does not exist "
                f"(snapshots: {span}; a tag holding an expired snapshot: use tag:)"
            ) from None
        source = f"snapshot {snapshot_id}"
    snapshot = Snapshot.from_json(snapshot_bytes)
    files.update(_schema_files(table, snapshot.schema_id))
    files[f"snapshot/snapshot-{snapshot.id}"] = snapshot_bytes
    if tag_bytes is not None:
        files[f"tag/tag-{request.tag}"] = tag_bytes
    return BranchPlan(files, snapshot.id, source)


def _schema_files(table: Table, schema_id: int) -> dict[str, bytes]:
    """Main's schema files 0..`schema_id` that exist (a table may have none of the early ones)."""
    manager = table.schema_manager
    present = [i for i in manager.list_ids() if i <= schema_id]
    if schema_id not in present:
        raise BadInputError(f"{manager.schema_path(schema_id)}: schema {schema_id} does not exist")
    return {f"schema/schema-{i}": table.file_io.read_bytes(manager.schema_path(i)) for i in present}


def _snapshot_of_tag(table: Table, tag: Snapshot) -> bytes:
    """The branch's first snapshot for a tag: main's snapshot file when it is still the tagged one,
    else the tag as the snapshot it was, without a changelog list expiry deleted."""
    manager = table.snapshot_manager
    if manager.snapshot_exists(tag.id):
        data = table.file_io.read_bytes(manager.snapshot_path(tag.id))
        if Snapshot.from_json(data).base_manifest_list == tag.base_manifest_list:
            return data
    extra = {k: v for k, v in tag.extra.items() if k not in _TAG_FIELDS}
    snapshot = dataclasses.replace(tag, extra=extra)
    listed = snapshot.changelog_manifest_list
    if listed and not table.file_io.file_exists(table.manifest_path(listed)):
        snapshot = dataclasses.replace(
            snapshot,
            changelog_manifest_list=None,
            changelog_manifest_list_size=None,
            changelog_record_count=None,
        )
    return snapshot.to_json().encode("utf-8")


def _check_existing(table: Table, name: str, plan: BranchPlan) -> bool:
    """False for a new branch; True for the unfinished branch of an earlier run of this request
    (every file it has is one this run writes, with the same bytes); BadInputError otherwise."""
    if name not in table.branch_manager.branch_names():
        return False
    existing = branch_files(table, name)
    foreign = sorted(r for r, data in existing.items() if plan.files.get(r) != data)
    if foreign or len(existing) == len(plan.files):
        raise BadInputError(
            f"{table.branch_manager.branch_path(name)}: branch {name!r} already exists "
            f"({len(existing)} files; delete-branch or rename-branch it first)"
        )
    return True


def _refuse_vanished_source(
    table: Table, request: CreateBranchRequest, plan: BranchPlan, written: list[str]
) -> None:
    """Exit 3 when the source snapshot or tag went while the branch was written (an expiry or a
    rollback racing this run may be deleting its files): the files written are removed again."""
    if plan.snapshot_id is None:
        return
    if request.tag is not None:
        still = table.tag_manager.tag_exists(request.tag)
    else:
        still = table.snapshot_manager.snapshot_exists(plan.snapshot_id)
    if still:
        return
    for path in reversed(written):
        table.file_io.delete(path)
    remove_branch_directories(table, request.branch)  # an empty branch directory is a branch to Paimon
    raise CommitRaceLost(
        f"{table.path}: {plan.source} was removed by another job while branch {request.branch!r} was "
        "written; the branch's files were removed again. Run create-branch again from a source that stays"
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
