"""create-tag: tag a snapshot of a table, as Paimon's `create_tag` procedure does (issue #17).

The tagged snapshot is `snapshot` (an id that must still exist), the latest snapshot committed at or
before `timestamp`, the latest snapshot whose watermark is at or before `watermark` (issue #30), or
else the latest snapshot: by time or watermark the tag holds the table as it was at that moment
(as Iceberg's and Delta's "as of" reads, and Paimon's rollback_to_timestamp; Paimon's
create_tag_from_timestamp / _watermark take the earliest snapshot at or after instead: see
docs/operations/create-tag.md). The tag file `tag/tag-<name>` is the snapshot's JSON; with a
retention (`time_retained`, else the table's `tag.default-time-retained`) it also carries
`tagCreateTime` and `tagTimeRetained`, exactly as Paimon's TagManager writes them, and expire-tags
deletes it once that time has passed.

The file is created atomically and only when absent: an existing name is exit 2 unless
`replace: true`, which overwrites it atomically (files only the old tag used are then left to
remove-orphan-files, as after Paimon's replaceTag; the replace-tag job deletes them too). Nothing
is deleted, so there is no crash ordering to keep: a crash leaves the tag written or not. Runs on
the driver alone (no Spark).

Spark-submit entry: `spark-submit jobs/create_tag.py --config conf/create-tag.yaml`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.errors import SnapshotNotFoundError
from paimon_format.maintenance.tag_periods import missing_automatic_tags
from paimon_format.model.instants import instant_ms
from paimon_format.model.options import parse_duration_ms
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table
from paimon_format.tags import latest_snapshot_at_or_before, validate_tag_name

OPERATION = "create-tag"
DEFAULT_TIME_RETAINED = "tag.default-time-retained"


class CreateTagConfig(TableJobConfig):
    branch: str | None = Field(
        default=None, description="the branch whose tags (branch/branch-NAME/tag/); default: main"
    )
    tag: str | None = Field(default=None, description="the tag name")
    automatic: bool = Field(
        default=False,
        description="instead of one tag: the missing tags the table's tag.automatic-creation asks for",
    )
    snapshot: int | None = Field(default=None, ge=1, description="snapshot id to tag; default: the latest")
    timestamp: str | None = Field(
        default=None,
        description="tag the latest snapshot committed at or before this UTC time ('2024-05-14 00:00:00', "
        "or a duration such as 1d meaning now - 1d)",
    )
    watermark: int | None = Field(
        default=None,
        description="tag the latest snapshot whose watermark (epoch ms) is at or before this; not with "
        "snapshot or timestamp",
    )
    time_retained: str | None = Field(
        default=None, description="how long the tag lives (1d, 12h); default: tag.default-time-retained"
    )
    replace: bool = Field(default=False, description="overwrite an existing tag of the same name")

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str | None) -> str | None:
        if value is not None:
            validate_tag_name(value)
        return value

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        if value is not None:
            instant_ms(value, 0)
        return value

    @field_validator("time_retained")
    @classmethod
    def _time_retained(cls, value: str | None) -> str | None:
        if value is not None and parse_duration_ms(value) <= 0:
            raise ValueError(f"must be a positive duration, got {value!r}")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> CreateTagConfig:
        if sum(x is not None for x in (self.snapshot, self.timestamp, self.watermark)) > 1:
            raise ValueError("give either snapshot or timestamp or watermark, not several")
        sources = (self.tag, self.snapshot, self.timestamp, self.watermark, self.time_retained)
        if self.automatic and sources != (None,) * 5:
            raise ValueError("automatic: true takes the tag names, snapshots and retention from the table")
        return self

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)


CONFIG_MODEL = CreateTagConfig


@dataclass(frozen=True)
class CreateTagRequest:
    """The tag to write: its name, which snapshot (an id, the latest at or before `timestamp` or
    `watermark`, else the latest), its retention (None: the table's `tag.default-time-retained`) and
    whether it may overwrite an existing tag."""

    tag: str
    snapshot_id: int | None = None
    timestamp: str | None = None  # a UTC time, or a duration meaning now - duration
    time_retained: str | None = None
    replace: bool = False
    watermark: int | None = None  # the latest snapshot whose watermark is at or before this

    @staticmethod
    def of(config: CreateTagConfig, tag: str) -> CreateTagRequest:
        return CreateTagRequest(
            tag, config.snapshot, config.timestamp, config.time_retained, config.replace, config.watermark
        )


def run(context: JobContext, config: CreateTagConfig) -> None:
    table = open_branch(open_existing_table(config), config.branch)
    if config.automatic:
        create_automatic_tags(table, dry_run=context.dry_run, record=context.record, log=context.log)
        return
    if config.tag is None:
        raise BadInputError(f"{table.path}: create-tag needs tag: NAME (or automatic: true)")
    request = CreateTagRequest.of(config, config.tag)
    create_tag(table, request, dry_run=context.dry_run, record=context.record, log=context.log)


def create_tag(
    table: Table,
    request: CreateTagRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Write `tag/tag-<request.tag>` for the chosen snapshot (see the module docstring); `now_ms` is
    a test hook (the moment a duration `timestamp` is measured from)."""
    log = log or logging.getLogger("jobs.create_tag")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    snapshot = choose_snapshot(table, request.snapshot_id, request.timestamp, now_ms, request.watermark)
    retained_ms = retention_ms(table, request.time_retained)
    manager, tag = table.tag_manager, request.tag
    exists = manager.tag_exists(tag)
    if exists and not request.replace:
        raise BadInputError(
            f"{manager.tag_path(tag)}: tag {tag!r} already exists (on snapshot {manager.tag(tag).id}); "
            "set replace: true to overwrite it"
        )
    record.snapshot_ids["tagged"] = snapshot.id
    record.details["tag"] = {
        "name": tag,
        "snapshot": snapshot.id,
        "watermark": snapshot.watermark,
        "time_retained_ms": retained_ms,
        "replaces": manager.tag(tag).id if exists else None,
    }
    if dry_run:
        log.info("dry run: would tag snapshot %d as %r", snapshot.id, tag)
        record.count("tags_created", 0)
        return record
    manager.create_tag(tag, snapshot, time_retained_ms=retained_ms, replace=request.replace)
    record.count("tags_created", 1)
    record.count("tags_replaced", 1 if exists else 0)
    log.info("tagged snapshot %d as %r%s", snapshot.id, tag, " (replaced)" if exists else "")
    return record


def choose_snapshot(
    table: Table, snapshot_id: int | None, timestamp: str | None, now_ms: int, watermark: int | None = None
) -> Snapshot:
    """The snapshot to tag: by id, the latest at or before `timestamp` or `watermark`, or the latest."""
    manager = table.snapshot_manager
    if snapshot_id is not None:
        try:
            return manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            ids = manager.snapshot_ids()
            span = f"[{ids[0]}, {ids[-1]}]" if ids else "none"
            raise BadInputError(
                f"{manager.snapshot_path(snapshot_id)}: snapshot {snapshot_id} does not exist "
                f"(snapshots present: {span})"
            ) from None
    latest = manager.latest()
    if latest is None:
        raise BadInputError(f"{table.path}: the table has no snapshot to tag")
    if watermark is not None:
        found = latest_snapshot_at_or_before(manager, watermark=watermark)
        if found is None:
            raise BadInputError(
                f"{table.path}: no retained snapshot has a watermark at or before {watermark} "
                f"(snapshots {manager.earliest_id()}..{latest.id}; the latest one's: {latest.watermark})"
            )
        return found
    if timestamp is None:
        return latest
    found = latest_snapshot_at_or_before(manager, time_ms=instant_ms(timestamp, now_ms))
    if found is None:
        raise BadInputError(
            f"{table.path}: no snapshot was committed at or before {timestamp!r} "
            f"(the earliest retained one, {manager.earliest_id()}, is newer)"
        )
    return found


def retention_ms(table: Table, time_retained: str | None) -> int | None:
    """The tag's retention: the job's, else the table's `tag.default-time-retained`, else none."""
    text = time_retained if time_retained is not None else table.schema.options.get(DEFAULT_TIME_RETAINED)
    if text is None:
        return None
    try:
        value = parse_duration_ms(text)
    except ValueError as error:
        raise BadInputError(f"{table.path}: {DEFAULT_TIME_RETAINED}: {error}") from None
    return value


def create_automatic_tags(
    table: Table,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """The tags the table's `tag.automatic-creation` asks for and that are missing (see
    `paimon_format.maintenance.tag_periods.missing_automatic_tags`), each created if absent with the table's
    `tag.default-time-retained`; `batch` replaces the day's `batch-write-<date>` tag when it names an
    older snapshot. A table without automatic creation gets nothing (recorded)."""
    log = log or logging.getLogger("jobs.create_tag")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    try:
        planned = missing_automatic_tags(table)
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    retained_ms = retention_ms(table, None)
    record.details["automatic_tags"] = {name: snapshot.id for name, snapshot, _ in planned[:100]}
    record.count("tags_to_create", len(planned))
    if dry_run:
        record.count("tags_created", 0)
        return record
    for name, snapshot, replace in planned:
        created = table.tag_manager.create_tag(
            name, snapshot, time_retained_ms=retained_ms, ignore_if_exists=not replace, replace=replace
        )
        record.count("tags_created", 1 if created else 0)
        log.info("automatic tag %r on snapshot %d%s", name, snapshot.id, "" if created else " (existed)")
    return record


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
