"""The snapshot a tag (or a rollback) points at, and the keys that choose it.

create-tag and replace-tag choose the snapshot to tag the same way (an id, the latest committed at
or before a time, the latest whose watermark is at or before a value, else the latest) and give it
the same retention; rollback's `to_timestamp` / `to_watermark` are the same search. One place, so
that the three read the same snapshot for the same request and say the same when there is none.
"""

from __future__ import annotations

import dataclasses

from pydantic import Field, field_validator, model_validator

from jobs.runtime.config import TableJobConfig, check_instant, check_positive_duration
from jobs.runtime.errors import BadInputError
from jobs.runtime.table_open import check_branch_name
from paimon_format.errors import MissingFileError, SnapshotNotFoundError
from paimon_format.model.instants import instant_ms
from paimon_format.model.options import parse_duration_ms
from paimon_format.snapshot import Snapshot
from paimon_format.table import Table
from paimon_format.tags import TagManager, latest_snapshot_at_or_before, validate_tag_name

DEFAULT_TIME_RETAINED = "tag.default-time-retained"


class TagTargetConfig(TableJobConfig):
    """The keys of a job that writes a tag: the branch, the snapshot it names, its retention."""

    branch: str | None = Field(
        default=None, description="the branch whose tags (branch/branch-NAME/tag/); default: main"
    )
    snapshot: int | None = Field(
        default=None, ge=1, description="the snapshot id to tag; default: the latest"
    )
    timestamp: str | None = Field(
        default=None,
        description="or the latest snapshot committed at or before this UTC time ('2024-05-14 00:00:00', "
        "or a duration such as 1d meaning now - 1d)",
    )
    watermark: int | None = Field(
        default=None,
        description="or the latest snapshot whose watermark (epoch ms) is at or before this; not with "
        "snapshot or timestamp",
    )
    time_retained: str | None = Field(
        default=None, description="how long the tag lives (1d, 12h); default: tag.default-time-retained"
    )

    @field_validator("timestamp")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        return check_instant(value)

    @field_validator("time_retained")
    @classmethod
    def _time_retained(cls, value: str | None) -> str | None:
        return check_positive_duration(value)

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)

    @model_validator(mode="after")
    def _one_source(self) -> TagTargetConfig:
        if sum(x is not None for x in (self.snapshot, self.timestamp, self.watermark)) > 1:
            raise ValueError("give either snapshot or timestamp or watermark, not several")
        return self


def check_tag_name(value: str | None) -> str | None:
    """Pydantic check of a tag name key (Paimon's rules: not blank, not a number, no '/')."""
    if value is not None:
        validate_tag_name(value)
    return value


def choose_snapshot(
    table: Table, snapshot_id: int | None, timestamp: str | None, now_ms: int, watermark: int | None = None
) -> Snapshot:
    """The snapshot to tag: by id, the latest at or before `timestamp` or `watermark`, or the latest
    (at most one of the three is given); BadInputError when it does not exist."""
    manager = table.snapshot_manager
    if snapshot_id is not None:
        try:
            return manager.snapshot(snapshot_id)
        except SnapshotNotFoundError:
            raise BadInputError(
                f"{manager.snapshot_path(snapshot_id)}: snapshot {snapshot_id} does not exist "
                f"({_retained(table)})"
            ) from None
    if manager.latest() is None:
        raise BadInputError(f"{table.path}: the table has no snapshot to tag")
    if timestamp is None and watermark is None:
        latest = manager.latest()
        assert latest is not None
        return latest
    return snapshot_at_or_before(table, timestamp, watermark, now_ms)


def snapshot_at_or_before(
    table: Table, timestamp: str | None, watermark: int | None, now_ms: int, advice: str = ""
) -> Snapshot:
    """The latest retained snapshot committed at or before `timestamp` (a UTC time, or a duration
    meaning `now_ms` - duration), or else whose watermark is at or before `watermark`; BadInputError
    (with `advice` appended) when every retained snapshot is newer."""
    manager = table.snapshot_manager
    if timestamp is not None:
        found = latest_snapshot_at_or_before(manager, time_ms=instant_ms(timestamp, now_ms))
        what = f"was committed at or before {timestamp!r}"
    else:
        found = latest_snapshot_at_or_before(manager, watermark=watermark)
        what = f"has a watermark at or before {watermark}"
    if found is None:
        latest = manager.latest()
        theirs = ""
        if watermark is not None and latest is not None:
            theirs = f"; the latest one's watermark: {latest.watermark}"
        raise BadInputError(f"{table.path}: no retained snapshot {what} ({_retained(table)}{theirs}){advice}")
    return found


def _retained(table: Table) -> str:
    manager = table.snapshot_manager
    earliest, latest = manager.earliest_id(), manager.latest_id()
    return f"snapshots {earliest}..{latest}" if latest is not None else "no snapshot"


def retention_ms(table: Table, time_retained: str | None) -> int | None:
    """The tag's retention: the job's, else the table's `tag.default-time-retained`, else none."""
    text = time_retained if time_retained is not None else table.schema.options.get(DEFAULT_TIME_RETAINED)
    if text is None:
        return None
    try:
        return parse_duration_ms(text)
    except ValueError as error:
        raise BadInputError(f"{table.path}: {DEFAULT_TIME_RETAINED}: {error}") from None


def tag_bytes(manager: TagManager, name: str) -> bytes | None:
    """The tag file's bytes, None when absent (one GET; any other failed read is an error)."""
    try:
        return manager.file_io.read_bytes(manager.tag_path(name))
    except MissingFileError:
        return None


def without_missing_changelog(table: Table, snapshot: Snapshot) -> Snapshot:
    """`snapshot` as it can be restored into a snapshot directory: without a changelog manifest list
    that is gone. Tags keep no changelog, so Paimon's expiry deletes the list of a tagged snapshot
    when it expires (and a tag, or a branch snapshot copied from one, still names it); a restored
    snapshot naming a missing file would fail every job that reads the table's references. Without
    it, it reads as a snapshot whose changelog has expired, as Paimon reads it."""
    name = snapshot.changelog_manifest_list
    if not name or table.file_io.file_exists(table.manifest_path(name)):
        return snapshot
    return dataclasses.replace(
        snapshot, changelog_manifest_list=None, changelog_manifest_list_size=None, changelog_record_count=None
    )
