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

from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_branch, open_existing_table
from jobs.tagging.target import TagTargetConfig, check_tag_name, choose_snapshot, retention_ms
from paimon_format.maintenance.tag_periods import missing_automatic_tags
from paimon_format.table import Table

OPERATION = "create-tag"


class CreateTagConfig(TagTargetConfig):
    tag: str | None = Field(default=None, description="the tag name")
    automatic: bool = Field(
        default=False,
        description="instead of one tag: the missing tags the table's tag.automatic-creation asks for",
    )
    replace: bool = Field(default=False, description="overwrite an existing tag of the same name")

    @field_validator("tag")
    @classmethod
    def _tag(cls, value: str | None) -> str | None:
        return check_tag_name(value)

    @model_validator(mode="after")
    def _automatic_alone(self) -> CreateTagConfig:
        sources = (self.tag, self.snapshot, self.timestamp, self.watermark, self.time_retained)
        if self.automatic and sources != (None,) * 5:
            raise ValueError("automatic: true takes the tag names, snapshots and retention from the table")
        return self


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
        create_automatic_tags(table, **context.job_keywords())
        return
    if config.tag is None:
        raise BadInputError(f"{table.path}: create-tag needs tag: NAME (or automatic: true)")
    request = CreateTagRequest.of(config, config.tag)
    create_tag(table, request, **context.job_keywords())


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
