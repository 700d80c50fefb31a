"""expire-tags: delete the tags whose time is up, and the files only they used (issue #17).

Which tags expire (Paimon's TagTimeExpire and TagAutoCreation rules):
- a tag with `tagCreateTime` and `tagTimeRetained` once create time + retention has passed;
- a tag without them once the table's `tag.default-time-retained` has passed since its tag file was
  written (its modification time; Paimon writes that option into new tags instead, so this covers
  tags written before the option was set);
- with `older_than`, every tag created (or, without a create time, written) before that moment, as
  Paimon's expire_tags procedure;
- beyond `tag.num-retained-max` (or `num_retained_max`), the oldest *automatic* tags (names in the
  table's `tag.creation-period`/`tag.period-formatter` format, ordered by snapshot id as Paimon),
  when the table creates tags automatically or `num_retained_max` is given.
Times are local, as Paimon stores `tagCreateTime` (a LocalDateTime of the writer's clock).

The deletion itself is delete-tag's (`jobs/deletion/tags.py`): tag files first, then the files no
snapshot, other tag, branch or long-lived changelog needs; a crash in between leaves orphans that
remove-orphan-files clears, and a rerun expires the tags that are left. On a live table (Paimon's
Java writers tag and expire while this runs, issue #28) it finishes whenever that is provably safe:
new tags' files are kept, roots and manifests that went with another writer's expiry are skipped
only when no present root names them (the argument, with the crash ordering, is in that module).

Spark-submit entry: `spark-submit jobs/expire_tags.py --config conf/expire-tags.yaml`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator

from jobs.deletion.context import DeletePace, DeletionContext
from jobs.deletion.tags import TagSteps, delete_tags
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.maintenance.read_memo import ReadMemoFileIO, with_read_memo
from paimon_format.maintenance.tag_periods import (
    AUTOMATIC_CREATION,
    DEFAULT_TIME_RETAINED,
    NUM_RETAINED_MAX,
    TagPeriod,
)
from paimon_format.model.instants import instant_ms
from paimon_format.model.options import parse_duration_ms
from paimon_format.snapshot import Snapshot
from paimon_format.storage.fileio import FileIO
from paimon_format.table import Table
from paimon_format.tags import TAG_PREFIX

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPERATION = "expire-tags"
STEPS = TagSteps.of(OPERATION)


class ExpireTagsConfig(TableJobConfig):
    branch: str | None = Field(
        default=None, description="the branch whose tags (branch/branch-NAME/tag/); default: main"
    )
    older_than: str | None = Field(
        default=None,
        description="also expire every tag created before now - duration (7d) or a UTC timestamp",
    )
    num_retained_max: int | None = Field(
        default=None, ge=1, description="automatic tags kept at most; default: tag.num-retained-max"
    )
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")

    @field_validator("older_than")
    @classmethod
    def _older_than(cls, value: str | None) -> str | None:
        if value is not None:
            instant_ms(value, 0)
        return value

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)


CONFIG_MODEL = ExpireTagsConfig


@dataclass(frozen=True)
class ExpireTagsRequest:
    """What a run asks for beyond the table's tag options, and how fast the freed files go."""

    older_than: str | None = None  # also every tag created before now - duration, or a UTC timestamp
    num_retained_max: int | None = None  # automatic tags kept at most; None: tag.num-retained-max
    pace: DeletePace = DeletePace()

    @staticmethod
    def of(config: ExpireTagsConfig) -> ExpireTagsRequest:
        return ExpireTagsRequest(config.older_than, config.num_retained_max, DeletePace.of(config))


def run(context: JobContext, config: ExpireTagsConfig) -> None:
    # one read memo for the run: the table check and the deletion read the same tags and snapshots
    table = open_branch(open_existing_table(config, ReadMemoFileIO.wrapping), config.branch)
    expire_tags(
        lambda: context.spark,  # started only when an expired tag's snapshot has expired too
        table,
        ExpireTagsRequest.of(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def expire_tags(
    spark: SparkSession | Callable[[], SparkSession],
    table: Table,
    request: ExpireTagsRequest = ExpireTagsRequest(),
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Delete the expired tags of `table`'s branch (see the module docstring) and the files only they
    used. `spark`: a session or a function returning one (called only when a file needs planning);
    `now_ms` is a test hook (the moment retention is measured from). Every metadata file is read
    once per call (`with_read_memo`)."""
    table = with_read_memo(table)
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    tags = table.tag_manager.tags()
    reasons = expired_tags(table, tags, request.older_than, request.num_retained_max, now_ms)
    deletion.record.details["expired_because"] = dict(list(reasons.items())[:100])
    deletion.record.count("tags_retained", len(tags) - len(reasons))
    delete_tags(deletion, {name: tags[name] for name in reasons}, STEPS)
    return deletion.record


def expired_tags(
    table: Table,
    tags: dict[str, Snapshot],
    older_than: str | None,
    num_retained_max: int | None,
    now_ms: int,
) -> dict[str, str]:
    """{tag name: why it expires}, in the tags' order (snapshot id, then name)."""
    options = table.schema.options
    now = dt.datetime.fromtimestamp(now_ms / 1000)
    cutoff = dt.datetime.fromtimestamp(instant_ms(older_than, now_ms) / 1000) if older_than else None
    try:
        default_ms = (
            parse_duration_ms(options[DEFAULT_TIME_RETAINED]) if DEFAULT_TIME_RETAINED in options else None
        )
        if num_retained_max is None and NUM_RETAINED_MAX in options and _creates_tags(options):
            num_retained_max = int(options[NUM_RETAINED_MAX])
        period = TagPeriod.of(options) if num_retained_max is not None else None
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    if not tags:
        return {}
    written = _tag_file_times(table) if default_ms is not None or cutoff is not None else {}
    reasons: dict[str, str] = {}
    for name, tag in tags.items():
        created, retained_ms = tag.tag_create_time, tag.tag_time_retained_ms
        if created is None or retained_ms is None:
            created, retained_ms = written.get(name), default_ms
        if created is None:
            continue
        if retained_ms is not None and created + dt.timedelta(milliseconds=retained_ms) < now:
            reasons[name] = f"created {created.isoformat()} + retained {retained_ms} ms has passed"
        elif cutoff is not None and created < cutoff:
            reasons[name] = f"created {created.isoformat()} before older_than {older_than!r}"
    if period is not None and num_retained_max is not None:
        automatic = [name for name in tags if period.is_auto_tag(name) and name not in reasons]
        for name in automatic[: max(0, len(automatic) - num_retained_max)]:
            reasons[name] = f"beyond {num_retained_max} automatic tags (tag.num-retained-max)"
    return {name: reasons[name] for name in tags if name in reasons}


def _creates_tags(options: dict[str, str]) -> bool:
    return options.get(AUTOMATIC_CREATION, "none").strip().lower() != "none"


def _tag_file_times(table: Table) -> dict[str, dt.datetime]:
    """Tag name -> its file's modification time (local), from one listing of the tag directory."""
    manager = table.tag_manager
    times: dict[str, dt.datetime] = {}
    for status in manager.file_io.list_dir(manager.tag_dir()):
        base = FileIO.relative_to(manager.tag_dir(), status.path)
        if base.startswith(TAG_PREFIX) and not status.is_dir:
            times[base[len(TAG_PREFIX) :]] = dt.datetime.fromtimestamp(status.modification_time_ms / 1000)
    return times


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
