"""replace-tag: point an existing tag at another snapshot (issue #30), as Paimon's `replace_tag`.

The new snapshot is `snapshot` (an id that must still exist), the latest snapshot committed at or
before `timestamp`, the latest whose watermark is at or before `watermark`, or else the latest; the
retention is `time_retained`, else the table's `tag.default-time-retained`, as create-tag writes it.
Paimon's replaceTag overwrites the tag file and leaves the files only the old tag used to orphan
cleaning; here they go too, through delete-tag's shared stages (`jobs.deletion.tags.delete_tags`),
when the old tag's snapshot has expired (otherwise that snapshot still holds every file the tag used).

Order, so that no reader ever opens a tag whose files are gone and nothing the old tag used is lost
track of:
1. plan: read the old tag and choose the new snapshot;
2. when the old tag's snapshot has expired, park the old tag's JSON in `tag-deletion/` (the pending
   deletion delete-tag uses): a crash here leaves the old tag as it was and a parked copy that the
   next tag deletion (or a rerun) finishes without deleting anything the still-present tag uses;
3. overwrite `tag/tag-<name>` atomically (a reader sees the old or the new tag);
4. the files of the parked copies that no snapshot, tag (the replaced one included), branch or
   changelog needs, in expire-snapshots' stages, then the parked copies. A crash in 4 is finished by
   the rerun (any parked copy left is finished first).

Bad input (exit 2): an unknown tag, a snapshot that does not exist, a time or watermark no retained
snapshot is at or before. A racing writer (exit 3, nothing deleted): the tag was replaced or deleted
meanwhile, the chosen snapshot expired before the tag was written, or a tag or branch was created
before the files go (delete-tag's check).

Spark-submit entry: `spark-submit jobs/replace_tag.py --config conf/replace-tag.yaml`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from jobs.deletion.context import DeletePace, DeletionContext
from jobs.deletion.tags import TagSteps, delete_tags
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_branch, open_existing_table
from jobs.tagging.target import TagTargetConfig, choose_snapshot, retention_ms, tag_bytes
from paimon_format.errors import SnapshotNotFoundError
from paimon_format.snapshot import Snapshot
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table
from paimon_format.tags import validate_tag_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPERATION = "replace-tag"
STEPS = TagSteps.of(OPERATION)
STEP_PARKED = f"{OPERATION}:old-tag-parked"
STEP_REPLACED = f"{OPERATION}:tag-replaced"


class ReplaceTagConfig(TagTargetConfig):
    tag: str = Field(description="the existing tag to point at another snapshot")
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str) -> str:
        validate_tag_name(value)
        return value


CONFIG_MODEL = ReplaceTagConfig


@dataclass(frozen=True)
class ReplaceTagRequest:
    """The tag, its new snapshot (an id, the latest at or before `timestamp` or `watermark`, else the
    latest), its retention (None: the table's default) and how fast the freed files go."""

    tag: str
    snapshot_id: int | None = None
    timestamp: str | None = None
    watermark: int | None = None
    time_retained: str | None = None
    pace: DeletePace = DeletePace()

    @staticmethod
    def of(config: ReplaceTagConfig) -> ReplaceTagRequest:
        return ReplaceTagRequest(
            config.tag,
            config.snapshot,
            config.timestamp,
            config.watermark,
            config.time_retained,
            DeletePace.of(config),
        )


def run(context: JobContext, config: ReplaceTagConfig) -> None:
    replace_tag(
        lambda: context.spark,  # started only when the old tag's snapshot has expired
        open_branch(open_existing_table(config), config.branch),
        ReplaceTagRequest.of(config),
        **context.job_keywords(),
    )


def replace_tag(
    spark: SparkSession | Callable[[], SparkSession],
    table: Table,
    request: ReplaceTagRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Point tag `request.tag` at the chosen snapshot and delete what only the old tag used (module
    docstring: order). `spark`: a session or a function returning one, called only when the old
    tag's snapshot has expired; `now_ms` is a test hook for a duration `timestamp`."""
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    record, log, manager = deletion.record, deletion.log, table.tag_manager
    old_bytes = tag_bytes(manager, request.tag)
    if old_bytes is None:
        raise BadInputError(
            f"{manager.tag_path(request.tag)}: tag {request.tag!r} does not exist "
            f"(tags: {manager.tag_names()[:20]}); create-tag creates it"
        )
    old = Snapshot.from_json(old_bytes, manager.tag_path(request.tag))
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    new = choose_snapshot(table, request.snapshot_id, request.timestamp, now_ms, request.watermark)
    retained_ms = retention_ms(table, request.time_retained)
    frees_files = not _snapshot_still_there(table, old)
    record.snapshot_ids.update(old=old.id, tagged=new.id)
    record.details["replace"] = {"tag": request.tag, "old_snapshot": old.id, "new_snapshot": new.id}
    record.details["old_snapshot_expired"] = frees_files
    if dry_run:
        log.info("dry run: would point tag %r from snapshot %d to %d", request.tag, old.id, new.id)
        if frees_files:  # the old tag's files as delete-tag would plan them (the new snapshot is kept)
            delete_tags(deletion, {request.tag: old}, STEPS)
        record.count("tags_replaced", 0)
        return record
    if frees_files:
        _refuse_changed_tag(table, request.tag, old_bytes)
        manager.park_for_deletion(request.tag)
        crash_point(STEP_PARKED)
    _refuse_changed_tag(table, request.tag, old_bytes)
    if not manager.file_io.file_exists(table.snapshot_manager.snapshot_path(new.id)):
        raise CommitRaceLost(
            f"{table.snapshot_manager.snapshot_path(new.id)}: snapshot {new.id} expired while replacing "
            f"tag {request.tag!r}; the tag is left as it was: run the job again"
        )
    manager.create_tag(request.tag, new, time_retained_ms=retained_ms, replace=True)
    record.count("tags_replaced", 1)
    crash_point(STEP_REPLACED)
    log.info("tag %r now on snapshot %d (was %d)", request.tag, new.id, old.id)
    if manager.pending_deletion_names():  # ours, and any an interrupted run left
        delete_tags(deletion, {}, STEPS)
    return record


def _refuse_changed_tag(table: Table, name: str, expected: bytes) -> None:
    """Exit 3 when another writer replaced or deleted the tag since it was read."""
    if tag_bytes(table.tag_manager, name) != expected:
        raise CommitRaceLost(
            f"{table.tag_manager.tag_path(name)}: tag {name!r} was replaced or deleted by another writer "
            "while this job ran; nothing was deleted: run the job again"
        )


def _snapshot_still_there(table: Table, tagged: Snapshot) -> bool:
    """The tagged snapshot exists with the same manifest lists: it holds every file the tag needs."""
    manager = table.snapshot_manager
    try:
        return manager.snapshot(tagged.id).base_manifest_list == tagged.base_manifest_list
    except SnapshotNotFoundError:
        return False


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
