"""fast-forward: make main the state of a branch, as Paimon's `fast_forward` procedure (issue #30).

What Paimon's `BranchManager.fastForward` leaves (Paimon 1.0 and later alike), with E the branch's
earliest snapshot id and S that snapshot's schema id: main's snapshots with ids >= E, its schemas
>= S and its tags on snapshots >= E are gone, and every snapshot, schema and tag file of the branch
is copied into main (replacing a file of the same name; a branch snapshot naming a changelog
manifest list that expiry deleted is copied without it, see `_readable`). Main's snapshots and
tags older than E, and its long-lived changelogs, stay. The branch itself stays as it is.

Paimon deletes main's LATEST hint and those files first and copies the branch's afterwards, so until
it finishes main reads an older snapshot, or none. Here the same end state is reached in an order
in which main's newest snapshot is always whole:

1. plan: E, S, the branch's files, main's files they replace or drop, and the files only the dropped
   main snapshots and tags needed (`jobs.deletion.roots.dropped_root_candidates`; Spark only then);
2. the branch's schema files into main (one of the same id and other bytes is replaced in place:
   between this step and step 3 main's newest snapshot is read with the branch's schema of that
   id; the two differ only when both main and the branch altered the table since the branch was
   made, and then only until step 3 ends);
3. the branch's snapshot files into main, oldest first: ids main has are replaced in place, newer
   ids created (create-if-absent: a writer that committed that id first wins, and this run stops with
   exit 3); before each, a snapshot committed on top of main's latest also stops the run (exit 3);
4. main's snapshots newer than the branch's latest, newest first; `LATEST` and `EARLIEST` written;
5. main's tags on snapshots >= E the branch does not have; the branch's tags copied; main's schemas
   >= S the branch does not have, unless a snapshot or tag main keeps uses one (`_schemas_to_drop`);
6. before any data file goes, a snapshot committed on top of the new main, or a tag or branch
   created since planning, stops the run (exit 3);
7. the files only the dropped main snapshots and tags needed, in expire-snapshots' stages (data,
   changelog and index files; manifests; manifest lists). Paimon leaves these to orphan cleaning.

A crash anywhere leaves main reading a whole snapshot (the old main's latest until step 4, the
branch's latest after it), and a rerun goes on: what it would copy is already there, what it would
delete is gone. The files of main snapshots a crashed run already replaced are then no longer
planned (their snapshots are gone): they stay unreferenced, for remove-orphan-files.

Spark-submit entry: `spark-submit jobs/fast_forward.py --config conf/fast-forward.yaml`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from jobs.branching.metadata import existing_branch, put_bytes, read_or_none
from jobs.deletion.context import DeletePace, DeletionContext
from jobs.deletion.roots import dropped_root_candidates
from jobs.deletion.stages import delete_stages, report_candidates_if_any
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from jobs.tagging.target import without_missing_changelog
from paimon_format.branches import MAIN_BRANCH, validate_branch_name
from paimon_format.maintenance.references import SNAPSHOT_ROOT, TAG_ROOT
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPERATION = "fast-forward"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_SCHEMAS = f"{OPERATION}:schemas-copied"
STEP_SNAPSHOT = f"{OPERATION}:snapshot-copied"  # once per snapshot file
STEP_METADATA = f"{OPERATION}:metadata-done"
STEP_FILES = f"{OPERATION}:files-deleted"
STEP_MANIFESTS = f"{OPERATION}:manifests-deleted"
STEP_LISTS = f"{OPERATION}:manifest-lists-deleted"


class FastForwardConfig(TableJobConfig):
    branch: str = Field(description="the branch whose state main takes (not main)")
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str) -> str:
        validate_branch_name(value)
        return value


CONFIG_MODEL = FastForwardConfig


@dataclass(frozen=True)
class FastForwardRequest:
    branch: str
    pace: DeletePace = DeletePace()

    @staticmethod
    def of(config: FastForwardConfig) -> FastForwardRequest:
        return FastForwardRequest(config.branch, DeletePace.of(config))


def run(context: JobContext, config: FastForwardConfig) -> None:
    fast_forward(
        lambda: context.spark,  # started only when main snapshots or tags are dropped
        open_existing_table(config),
        FastForwardRequest.of(config),
        **context.job_keywords(),
    )


@dataclass(frozen=True)
class FastForwardPlan:
    earliest: int  # E: the branch's earliest snapshot id
    schema_id: int  # S: its schema
    latest: int | None  # main's latest snapshot id at planning (L)
    snapshots: dict[int, bytes]  # the branch's snapshot files
    schemas: dict[int, bytes]  # the branch's schema files
    tags: dict[str, bytes]  # the branch's tag files
    drop_snapshots: list[int]  # main snapshots >= E the branch has not (newest first)
    drop_tags: list[str]  # main tags on snapshots >= E the branch has not
    drop_schemas: list[int]  # main schemas >= S the branch has not
    replaced: list[tuple[str, str]]  # main roots (kind, name) whose file the branch's replaces
    tags_at_plan: frozenset[str]
    branches_at_plan: frozenset[str]


def plan_fast_forward(table: Table, name: str) -> FastForwardPlan:
    """What main gets and loses; BadInputError for an unknown branch or one without snapshots."""
    branch = existing_branch(table, name)
    io, manager = table.file_io, table.snapshot_manager
    ids = branch.snapshot_manager.snapshot_ids()
    if not ids:
        raise BadInputError(f"{branch.metadata_root}: branch {name!r} has no snapshot to fast-forward to")
    snapshots = {i: _readable(table, io.read_bytes(branch.snapshot_manager.snapshot_path(i))) for i in ids}
    earliest = ids[0]
    schema_id = Snapshot.from_json(snapshots[earliest]).schema_id
    bm, bt = branch.schema_manager, branch.tag_manager
    schemas = {i: io.read_bytes(bm.schema_path(i)) for i in bm.list_ids()}
    tags = {t: io.read_bytes(bt.tag_path(t)) for t in bt.tag_names()}
    main_ids = manager.snapshot_ids()
    main_tags = table.tag_manager.tags()
    replaced = [
        (SNAPSHOT_ROOT, str(i))
        for i in main_ids
        if i >= earliest and read_or_none(io, manager.snapshot_path(i)) != snapshots.get(i)
    ]
    replaced += [
        (TAG_ROOT, t)
        for t, tag in main_tags.items()
        if (tag.id >= earliest or t in tags)
        and read_or_none(io, table.tag_manager.tag_path(t)) != tags.get(t)
    ]
    return FastForwardPlan(
        earliest=earliest,
        schema_id=schema_id,
        latest=main_ids[-1] if main_ids else None,
        snapshots=snapshots,
        schemas=schemas,
        tags=tags,
        drop_snapshots=sorted((i for i in main_ids if i >= earliest and i not in snapshots), reverse=True),
        drop_tags=sorted(t for t, tag in main_tags.items() if tag.id >= earliest and t not in tags),
        drop_schemas=_schemas_to_drop(table, schema_id, schemas, main_ids, main_tags, earliest),
        replaced=replaced,
        tags_at_plan=frozenset(main_tags),
        branches_at_plan=frozenset(table.branch_manager.branch_names()),
    )


def _schemas_to_drop(
    table: Table,
    schema_id: int,
    schemas: dict[int, bytes],
    main_ids: list[int],
    main_tags: dict[str, Snapshot],
    earliest: int,
) -> list[int]:
    """Main's schemas >= S the branch lacks, except one a snapshot, tag or long-lived changelog main
    keeps (older than E) still uses: Paimon deletes those too, which leaves such a snapshot without
    its schema (possible when the branch expired its first snapshots and main altered its schema
    meanwhile). Schema ids grow with snapshot ids, so the newest kept roots bound what is in use."""
    older = [i for i in main_ids if i < earliest]
    used = [table.snapshot_manager.snapshot(older[-1]).schema_id] if older else []
    used += [tag.schema_id for tag in main_tags.values() if tag.id < earliest]
    # long-lived changelogs main keeps are read with their own schema too
    manager = table.snapshot_manager
    used += [manager.changelog(i).schema_id for i in manager.changelog_ids() if i < earliest]
    floor = max(used, default=-1)
    return [i for i in table.schema_manager.list_ids() if i >= schema_id and i > floor and i not in schemas]


def _readable(table: Table, data: bytes) -> bytes:
    """A branch snapshot as main gets it: byte for byte, unless it names a changelog manifest list
    that expiry deleted (a branch Paimon 1.0 made from a tag on an expired snapshot copies that
    snapshot's file, whose changelog list expiry had deleted): then without it, as rollback restores
    such a snapshot, so that main names no missing file (Paimon copies it as it is)."""
    snapshot = Snapshot.from_json(data)
    trimmed = without_missing_changelog(table, snapshot)
    return data if trimmed is snapshot else trimmed.to_json().encode("utf-8")


def fast_forward(
    spark: SparkSession | Callable[[], SparkSession],
    table: Table,
    request: FastForwardRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Make main the state of branch `request.branch` (module docstring: what and in which order)."""
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    table, record, log = deletion.table, deletion.record, deletion.log
    plan = plan_fast_forward(table, request.branch)
    _record_plan(deletion, plan, request.branch)
    candidates = _plan_files(deletion, plan)
    try:
        totals = report_candidates_if_any(candidates, record, log)
        crash_point(STEP_PLANNED)
        if deletion.dry_run:
            log.info("dry run: nothing changed")
            return record
        _copy_schemas(table, plan, record)
        crash_point(STEP_SCHEMAS)
        _copy_snapshots(table, plan, record)
        _drop_newer_snapshots(table, plan, record)
        _tags_and_schemas(table, plan, record)
        crash_point(STEP_METADATA)
        if candidates is not None:
            _refuse_changes_since_plan(table, plan)
            delete_stages(deletion, candidates, totals, "", (STEP_FILES, STEP_MANIFESTS, STEP_LISTS))
    finally:
        if candidates is not None:
            candidates.unpersist()
    log.info("main fast-forwarded to branch %r (snapshot %d)", request.branch, max(plan.snapshots))
    return record


def _record_plan(deletion: DeletionContext, plan: FastForwardPlan, branch: str) -> None:
    record = deletion.record
    record.details["fast_forward"] = {
        "branch": branch,
        "branch_earliest": plan.earliest,
        "branch_latest": max(plan.snapshots),
        "main_latest": plan.latest,
    }
    record.snapshot_ids.update(latest=plan.latest, target=max(plan.snapshots))
    record.count("snapshots_to_copy", len(plan.snapshots))
    record.count("snapshots_to_delete", len(plan.drop_snapshots))
    record.count("tags_to_delete", len(plan.drop_tags))
    record.count("main_roots_replaced", len(plan.replaced))
    record.sample("tags_to_delete", plan.drop_tags[:SAMPLE_LIMIT])
    deletion.log.info(
        "fast-forwarding main to branch %r: its snapshots %d..%d replace main's from %d (main latest %s)",
        branch,
        plan.earliest,
        max(plan.snapshots),
        plan.earliest,
        plan.latest,
    )


def _plan_files(deletion: DeletionContext, plan: FastForwardPlan) -> DataFrame | None:
    """What the main snapshots and tags this run drops or replaces alone needed (None, and no Spark,
    when none is dropped). The branch's roots, which main gets, are retained ones."""
    if not plan.replaced:
        return None
    dropped = set(plan.replaced)

    def keep_root(branch: str, kind: str, name: str) -> bool:
        return branch != MAIN_BRANCH or (kind, name) not in dropped

    roots = [(MAIN_BRANCH, kind, name) for kind, name in plan.replaced]
    return dropped_root_candidates(deletion.spark, deletion.table, roots, keep_root, [], deletion.log)


def _copy_schemas(table: Table, plan: FastForwardPlan, record: RunRecord) -> None:
    manager = table.schema_manager
    written = sum(
        put_bytes(table.file_io, manager.schema_path(i), data) for i, data in sorted(plan.schemas.items())
    )
    record.count("schemas_copied", written)


def _copy_snapshots(table: Table, plan: FastForwardPlan, record: RunRecord) -> None:
    """The branch's snapshot files into main, oldest first (see step 3 of the module docstring)."""
    manager, io = table.snapshot_manager, table.file_io
    top = plan.latest or 0  # the newest main snapshot id this run knows of
    copied = 0
    for snapshot_id, data in sorted(plan.snapshots.items()):
        _refuse_commit_on_top(table, top, "copying the branch's snapshots")
        path = manager.snapshot_path(snapshot_id)
        if snapshot_id <= top:
            copied += put_bytes(io, path, data)
        elif io.create_if_absent(path, data):
            copied += 1
        elif read_or_none(io, path) != data:
            raise CommitRaceLost(
                f"{path}: another writer committed snapshot {snapshot_id} while main was fast-forwarded; "
                "main holds the branch's snapshots below it. Stop the writers and run fast-forward again"
            )
        top = max(top, snapshot_id)
        crash_point(STEP_SNAPSHOT)
    record.count("snapshots_copied", copied)


def _drop_newer_snapshots(table: Table, plan: FastForwardPlan, record: RunRecord) -> None:
    """Main's snapshots the branch has not (newest first: the newest left is always whole), then
    the hints: LATEST the branch's latest, EARLIEST main's earliest."""
    manager = table.snapshot_manager
    branch_latest = max(plan.snapshots)
    top = max(branch_latest, plan.latest or 0)
    deleted = 0
    for snapshot_id in plan.drop_snapshots:
        if snapshot_id > branch_latest:
            _refuse_commit_on_top(table, top, f"deleting snapshot {snapshot_id}")
            top = snapshot_id - 1
        deleted += table.file_io.delete(manager.snapshot_path(snapshot_id))
    _refuse_commit_on_top(table, max(top, branch_latest), "snapshots replaced")
    manager.write_latest_hint(branch_latest)
    manager.write_earliest_hint(min(manager.snapshot_ids()))
    record.count("snapshots_deleted", deleted)


def _tags_and_schemas(table: Table, plan: FastForwardPlan, record: RunRecord) -> None:
    """Main's tags on snapshots >= E the branch lacks go; the branch's tags are copied; then main's
    schemas >= S the branch lacks go (no remaining snapshot uses them)."""
    tags, io = table.tag_manager, table.file_io
    for name in plan.drop_tags:
        tags.delete_tag(name)
    copied = sum(put_bytes(io, tags.tag_path(name), data) for name, data in sorted(plan.tags.items()))
    for schema_id in plan.drop_schemas:
        io.delete(table.schema_manager.schema_path(schema_id))
    record.count("tags_deleted", len(plan.drop_tags))
    record.count("tags_copied", copied)
    record.count("schemas_deleted", len(plan.drop_schemas))


def _refuse_commit_on_top(table: Table, top: int, when: str) -> None:
    if table.snapshot_manager.snapshot_exists(top + 1):
        raise CommitRaceLost(
            f"{table.path}: snapshot {top + 1} was committed by another writer while main was "
            f"fast-forwarded ({when}); no data file was deleted. Stop the writers and run fast-forward again"
        )


def _refuse_changes_since_plan(table: Table, plan: FastForwardPlan) -> None:
    """Exit 3 before any file goes when a writer committed on main, or a tag or branch was created,
    since planning: it may reference what this run would delete."""
    _refuse_commit_on_top(table, max(plan.snapshots), "before deleting files")
    # a writer that read an old latest (L) may have committed L+1 while L..B+1 went, newest first:
    # only a fresh listing sees it, and its lists may name the files old main alone used
    newest = max(table.snapshot_manager.snapshot_ids(), default=None)
    if newest != max(plan.snapshots):
        raise CommitRaceLost(
            f"{table.path}: snapshot {newest} was committed by another writer while main was "
            "fast-forwarded; no data file was deleted. Stop the writers and run fast-forward again"
        )
    new_tags = set(table.tag_manager.tag_names()) - plan.tags_at_plan - set(plan.tags)
    new_branches = set(table.branch_manager.branch_names()) - plan.branches_at_plan
    if new_tags or new_branches:
        raise CommitRaceLost(
            f"{table.path}: tags {sorted(new_tags)} / branches {sorted(new_branches)} were created while "
            "main was fast-forwarded; main is the branch's state, its old files are left for now: run "
            "fast-forward again to finish"
        )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
