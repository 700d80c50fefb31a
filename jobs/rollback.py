"""rollback: make a snapshot or a tag the table's latest state again, as Paimon's rollback_to (issue #17).

The target is `to_snapshot: N`, `to_tag: NAME` (the tag's snapshot), or (issue #30, as Paimon's
rollback_to_timestamp / rollback_to_watermark and Iceberg's rollback_to_timestamp) `to_timestamp`
(the latest retained snapshot committed at or before it) or `to_watermark` (the latest retained
snapshot whose watermark is at or before it); those search the retained snapshots only.
What goes, as in Paimon's RollbackHelper: every snapshot newer than the target, every long-lived
changelog newer than it, every tag on a newer snapshot; and here also the files only they used
(Paimon leaves those to orphan cleaning): `jobs.deletion.roots.dropped_root_candidates` minus what
every snapshot up to the target, every remaining tag, every branch and every remaining changelog
needs, on the executors.
When the target snapshot itself has expired but a tag holds it (`to_tag`, or `to_snapshot` of an
expired id some tag holds), `snapshot-N` is restored from the tag (its JSON without the tag fields)
and EARLIEST points at it, as Paimon's createSnapshotFileIfNeeded.

Order, so that readers always find a readable latest snapshot:
1. plan (latest id L, the roots to drop, the candidates) and, when needed, restore `snapshot-N`;
2. `snapshot/LATEST` = N; snapshot files L, L-1 ... N+1, newest first;
3. changelogs newer than N (newest first, changelog/LATEST adjusted), then tags on snapshots > N;
4. the files in expire-snapshots' stages (data, changelog and index files; manifests; lists).
A crash between 2-3 and 4 leaves files that no remaining root names at all (retained manifests are
older than everything added after N), so remove-orphan-files clears them; a rerun finds N latest
and has nothing to do. Another writer committing meanwhile: before and after each step the newest
snapshot id is checked (L before step 2, N after it); a commit on top of either stops the run with
exit 3 before any data file is deleted.

Spark-submit entry: `spark-submit jobs/rollback.py --config conf/rollback.yaml`.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from jobs.deletion.context import DeletePace, DeletionContext
from jobs.deletion.roots import dropped_root_candidates
from jobs.deletion.stages import delete_stages, report_candidates_if_any
from jobs.runtime.config import TableJobConfig, check_instant
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from jobs.tagging.target import snapshot_at_or_before, without_missing_changelog
from paimon_format.branches import MAIN_BRANCH
from paimon_format.errors import SnapshotNotFoundError
from paimon_format.maintenance.references import CHANGELOG_ROOT, SNAPSHOT_ROOT, TAG_ROOT
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

OPERATION = "rollback"
STEP_PLANNED = f"{OPERATION}:planned"
STEP_RESTORED = f"{OPERATION}:snapshot-restored"
STEP_SNAPSHOT = f"{OPERATION}:snapshot-deleted"  # once per snapshot file
STEP_METADATA = f"{OPERATION}:changelogs-and-tags-deleted"
STEP_FILES = f"{OPERATION}:files-deleted"
STEP_MANIFESTS = f"{OPERATION}:manifests-deleted"
STEP_LISTS = f"{OPERATION}:manifest-lists-deleted"
_TAG_FIELDS = ("tagCreateTime", "tagTimeRetained")


class RollbackConfig(TableJobConfig):
    to_snapshot: int | None = Field(default=None, ge=1, description="the snapshot id to roll back to")
    to_tag: str | None = Field(default=None, description="or the tag to roll back to")
    to_timestamp: str | None = Field(
        default=None,
        description="or the latest snapshot committed at or before this UTC time ('2024-05-14 00:00:00', "
        "or a duration such as 1h meaning now - 1h)",
    )
    to_watermark: int | None = Field(
        default=None, description="or the latest snapshot whose watermark (epoch ms) is at or before this"
    )
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("to_timestamp")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        return check_instant(value)

    @model_validator(mode="after")
    def _one_target(self) -> RollbackConfig:
        targets = (self.to_snapshot, self.to_tag, self.to_timestamp, self.to_watermark)
        if sum(target is not None for target in targets) != 1:
            raise ValueError("give exactly one of to_snapshot and to_tag (or to_timestamp, to_watermark)")
        return self


CONFIG_MODEL = RollbackConfig


@dataclasses.dataclass(frozen=True)
class RollbackRequest:
    """The target, exactly one of a snapshot id, a tag name, a time and a watermark, and how fast the
    freed files go."""

    to_snapshot: int | None = None
    to_tag: str | None = None
    pace: DeletePace = DeletePace()
    to_timestamp: str | None = None  # a UTC time, or a duration meaning now - duration
    to_watermark: int | None = None

    @staticmethod
    def of(config: RollbackConfig) -> RollbackRequest:
        return RollbackRequest(
            config.to_snapshot,
            config.to_tag,
            DeletePace.of(config),
            config.to_timestamp,
            config.to_watermark,
        )

    def snapshot_at(self, table: Table, now_ms: int | None = None) -> int | None:
        """`to_snapshot`, or the id `to_timestamp` / `to_watermark` name (BadInputError when every
        retained snapshot is newer); None for `to_tag`."""
        if self.to_timestamp is None and self.to_watermark is None:
            return self.to_snapshot
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        advice = "; roll back to a tag or snapshot id instead"
        return snapshot_at_or_before(table, self.to_timestamp, self.to_watermark, now_ms, advice).id


def run(context: JobContext, config: RollbackConfig) -> None:
    rollback(
        lambda: context.spark,  # started only when there is something newer to delete
        open_existing_table(config),
        RollbackRequest.of(config),
        **context.job_keywords(),
    )


@dataclasses.dataclass(frozen=True)
class RollbackPlan:
    target: Snapshot  # the snapshot the table reads afterwards
    restore: bool  # snapshot-N must be written from a tag
    latest: int
    snapshots: list[int]  # newer snapshot ids to delete, newest first
    changelogs: list[int]  # newer long-lived changelog ids, newest first
    tags: list[str]  # tags on newer snapshots


def plan_rollback(table: Table, to_snapshot: int | None, to_tag: str | None) -> RollbackPlan:
    """The target and what goes; BadInputError for a target that does not exist or is newer."""
    manager = table.snapshot_manager
    latest = manager.latest_id()
    if latest is None:
        raise BadInputError(f"{table.path}: the table has no snapshot to roll back")
    tags = table.tag_manager.tags()
    if to_tag is not None:
        if to_tag not in tags:
            raise BadInputError(f"{table.tag_manager.tag_path(to_tag)}: tag {to_tag!r} does not exist")
        target = _trimmed(tags[to_tag])
    else:
        assert to_snapshot is not None
        try:
            target = manager.snapshot(to_snapshot)
        except SnapshotNotFoundError:
            holders = [name for name, tag in tags.items() if tag.id == to_snapshot]
            if not holders:
                raise BadInputError(
                    f"{manager.snapshot_path(to_snapshot)}: snapshot {to_snapshot} does not exist and no tag "
                    f"holds it (snapshots {manager.earliest_id()}..{latest}, "
                    f"tags on {sorted({t.id for t in tags.values()})})"
                ) from None
            target = _trimmed(tags[holders[0]])
    if target.id > latest:
        raise BadInputError(f"{table.path}: snapshot {target.id} is newer than the latest snapshot {latest}")
    restore = not manager.snapshot_exists(target.id)
    if restore:
        target = without_missing_changelog(table, target)
    if not restore and manager.snapshot(target.id).base_manifest_list != target.base_manifest_list:
        raise BadInputError(
            f"{table.path}: tag {to_tag!r} names snapshot {target.id}, but snapshot {target.id} of the "
            "table is a different one (written after an earlier rollback); roll back to a snapshot id"
        )
    snapshots = sorted((i for i in manager.snapshot_ids() if i > target.id), reverse=True)
    changelogs = sorted((i for i in manager.changelog_ids() if i > target.id), reverse=True)
    newer_tags = [name for name, tag in tags.items() if tag.id > target.id]
    return RollbackPlan(target, restore, latest, snapshots, changelogs, newer_tags)


def _trimmed(tag: Snapshot) -> Snapshot:
    """The tag as the snapshot it was (Paimon's trimToSnapshot): without the tag's own fields."""
    extra = {k: v for k, v in tag.extra.items() if k not in _TAG_FIELDS}
    return dataclasses.replace(tag, extra=extra)


def rollback(
    spark: SparkSession | Callable[[], SparkSession],
    table: Table,
    request: RollbackRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Roll the table back to `request`'s target (see the module docstring for the order). `spark`: a
    session or a function returning one (not started when nothing newer exists)."""
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    table, record, log = deletion.table, deletion.record, deletion.log
    plan = plan_rollback(table, request.snapshot_at(table), request.to_tag)
    _record_plan(deletion, plan)
    candidates = _plan_files(deletion, plan)
    try:
        totals = report_candidates_if_any(candidates, record, log)
        crash_point(STEP_PLANNED)
        if deletion.dry_run:
            log.info("dry run: nothing changed")
            return record
        _refuse_newer_commit(table, plan.latest, plan.latest, "planned")
        _make_target_latest(deletion, plan)
        _drop_newer_changelogs_and_tags(deletion, plan)
        crash_point(STEP_METADATA)
        if candidates is None:
            return record
        _refuse_newer_commit(table, plan.target.id, plan.latest, "before deleting files")
        delete_stages(deletion, candidates, totals, "", (STEP_FILES, STEP_MANIFESTS, STEP_LISTS))
    finally:
        if candidates is not None:
            candidates.unpersist()
    log.info("rolled back to snapshot %d", plan.target.id)
    return record


def _record_plan(deletion: DeletionContext, plan: RollbackPlan) -> None:
    table, record = deletion.table, deletion.record
    record.snapshot_ids.update(target=plan.target.id, latest=plan.latest)
    record.details["restored_from_tag"] = plan.restore
    record.count("snapshots_to_delete", len(plan.snapshots))
    record.count("changelogs_to_delete", len(plan.changelogs))
    record.count("tags_to_delete", len(plan.tags))
    paths = [table.snapshot_manager.snapshot_path(i) for i in plan.snapshots[:SAMPLE_LIMIT]]
    record.sample("snapshots_to_delete", paths)
    record.sample("tags_to_delete", [table.tag_manager.tag_path(n) for n in plan.tags[:SAMPLE_LIMIT]])
    deletion.log.info(
        "rolling back from %d to %d: %d snapshots, %d changelogs, %d tags go%s",
        plan.latest,
        plan.target.id,
        len(plan.snapshots),
        len(plan.changelogs),
        len(plan.tags),
        " (snapshot restored from a tag)" if plan.restore else "",
    )


def _plan_files(deletion: DeletionContext, plan: RollbackPlan) -> DataFrame | None:
    """The candidates of the dropped snapshots, changelogs and tags (None when nothing is dropped,
    and Spark is not started): what they need minus what every remaining root needs."""
    target = plan.target.id
    dropped = [(MAIN_BRANCH, SNAPSHOT_ROOT, str(i)) for i in plan.snapshots]
    dropped += [(MAIN_BRANCH, CHANGELOG_ROOT, str(i)) for i in plan.changelogs]
    dropped += [(MAIN_BRANCH, TAG_ROOT, name) for name in plan.tags]
    if not dropped:
        return None
    doomed_tags = set(plan.tags)

    def keep_root(branch: str, kind: str, name: str) -> bool:
        if branch != MAIN_BRANCH:
            return True
        if kind == TAG_ROOT:
            return name not in doomed_tags
        return int(name) <= target  # snapshots and changelogs

    return dropped_root_candidates(deletion.spark, deletion.table, dropped, keep_root, [], deletion.log)


def _make_target_latest(deletion: DeletionContext, plan: RollbackPlan) -> None:
    """Restore `snapshot-N` from its tag when needed, point LATEST at it, then delete the newer
    snapshot files newest first (the newest left is always whole), checking for a concurrent
    commit before each."""
    table, record = deletion.table, deletion.record
    manager = table.snapshot_manager
    target = plan.target.id
    if plan.restore:
        data = plan.target.to_json().encode("utf-8")
        if table.file_io.create_if_absent(manager.snapshot_path(target), data):
            record.count("snapshots_restored", 1)
        crash_point(STEP_RESTORED)
    manager.write_latest_hint(target)
    expected_latest = plan.latest
    for snapshot_id in plan.snapshots:  # newest first: the newest left is always whole
        _refuse_newer_commit(table, expected_latest, plan.latest, f"deleting snapshot {snapshot_id}")
        table.file_io.delete(manager.snapshot_path(snapshot_id))
        record.count("snapshots_deleted", 1)
        expected_latest = snapshot_id - 1
        crash_point(STEP_SNAPSHOT)
    manager.write_latest_hint(target)
    if plan.restore:
        manager.write_earliest_hint(min(manager.snapshot_ids()))
    _refuse_newer_commit(table, target, plan.latest, "snapshots deleted")


def _drop_newer_changelogs_and_tags(deletion: DeletionContext, plan: RollbackPlan) -> None:
    """The changelogs newer than the target (changelog/LATEST adjusted), then the tags on newer
    snapshots."""
    table, record = deletion.table, deletion.record
    manager = table.snapshot_manager
    for changelog_id in plan.changelogs:
        table.file_io.delete(manager.changelog_path(changelog_id))
        record.count("changelogs_deleted", 1)
    if plan.changelogs:
        remaining = [i for i in manager.changelog_ids() if i <= plan.target.id]
        if remaining:
            manager.write_changelog_latest_hint(max(remaining))
    for name in plan.tags:
        table.tag_manager.delete_tag(name)
        record.count("tags_deleted", 1)


def _refuse_newer_commit(table: Table, expected_latest: int, planned_latest: int, when: str) -> None:
    """Exit 3 when another writer committed: a snapshot right above the newest one this run leaves
    (a writer that saw the rolled-back table) or above the latest at planning (one that did not)."""
    manager = table.snapshot_manager
    for candidate in sorted({expected_latest + 1, planned_latest + 1}):
        if not manager.snapshot_exists(candidate):
            continue
        raise CommitRaceLost(
            f"{table.path}: snapshot {candidate} was committed by another writer while "
            f"rolling back ({when}); no data file was deleted. Stop the writers and run rollback again"
        )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
