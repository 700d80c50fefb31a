"""expire-changelogs: expire a table's long-lived (decoupled) changelogs on their own (issue #30), as
Paimon's `expire_changelogs` procedure.

A table whose changelog retention outlives its snapshots keeps `changelog/changelog-<id>` files for
expired snapshots (expire-snapshots writes them). This job expires them without touching any snapshot,
by the same logic expire-snapshots runs after its snapshot expiry (`jobs.deletion.changelogs`): the
changelogs beyond the retention go, with the files only they needed, minus what every snapshot, tag,
branch and retained changelog needs; then their `changelog-<id>` files oldest first, then
`changelog/EARLIEST`. Retention: `retain_max`, `retain_min`, `older_than`, `max_deletes` over the
table's `changelog.num-retained.*` / `changelog.time-retained` (which fall back to the snapshot
options, as in Paimon) and `snapshot.expire.limit`; counted from the latest snapshot id (snapshots and
changelogs share one id sequence). `delete_all: true` expires every long-lived changelog (Paimon's
`expireAll`). Consumers hold their next snapshot's changelog, after the stale ones are expired
(`consumer.expiration-time`), unless `delete_all`.

Crash ordering: data, changelog and index files; manifests; manifest lists; the `changelog-<id>`
files oldest first; `changelog/EARLIEST`. A crash leaves every retained root readable; a rerun plans
the same range again and finishes it. The crash points are the changelog steps expire-snapshots names
(`expire-snapshots:changelog-*`), as this is the same code.

Spark-submit entry: `spark-submit jobs/expire_changelogs.py --config conf/expire-changelogs.yaml`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import Field, field_validator, model_validator

from jobs.deletion.changelogs import expire_changelogs, live_consumers_next
from jobs.deletion.context import DeletePace, DeletionContext
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.maintenance.expire import ChangelogSettings, ExpireRange
from paimon_format.maintenance.read_memo import with_read_memo
from paimon_format.model.instants import instant_ms, iso_utc
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPERATION = "expire-changelogs"


class ExpireChangelogsConfig(TableJobConfig):
    retain_max: int | None = Field(default=None, ge=1, description="default: changelog.num-retained.max")
    retain_min: int | None = Field(default=None, ge=1, description="default: changelog.num-retained.min")
    older_than: str | None = Field(
        default=None,
        description="duration (1h, 7d) or UTC timestamp ('2024-05-14 00:00:00'); "
        "default: changelog.time-retained",
    )
    max_deletes: int | None = Field(default=None, ge=1, description="default: snapshot.expire.limit")
    delete_all: bool = Field(default=False, description="expire every long-lived changelog")
    delete_batch_size: int = Field(default=1000, ge=1, le=1000, description="files per delete call")
    max_deletes_per_second: float | None = Field(default=None, gt=0, description="overall file delete rate")
    branch: str | None = Field(default=None, description="the branch whose changelogs go (default main)")

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

    @model_validator(mode="after")
    def _all_or_retention(self) -> ExpireChangelogsConfig:
        asked = (self.retain_max, self.retain_min, self.older_than, self.max_deletes)
        if self.delete_all and any(value is not None for value in asked):
            raise ValueError("delete_all: true expires every changelog: give no retention keys with it")
        return self


CONFIG_MODEL = ExpireChangelogsConfig


@dataclass(frozen=True)
class ChangelogExpiryRequest:
    """What a run asks for; None takes the table's option (Paimon's default where that is unset)."""

    retain_max: int | None = None
    retain_min: int | None = None
    older_than: str | None = None
    max_deletes: int | None = None
    delete_all: bool = False
    pace: DeletePace = DeletePace()

    @staticmethod
    def of(config: ExpireChangelogsConfig) -> ChangelogExpiryRequest:
        return ChangelogExpiryRequest(
            config.retain_max,
            config.retain_min,
            config.older_than,
            config.max_deletes,
            config.delete_all,
            DeletePace.of(config),
        )


def run(context: JobContext, config: ExpireChangelogsConfig) -> None:
    table = open_branch(open_existing_table(config), config.branch)
    expire_changelogs_of(
        context.spark,
        table,
        ChangelogExpiryRequest.of(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def expire_changelogs_of(
    spark: SparkSession,
    table: Table,
    request: ChangelogExpiryRequest = ChangelogExpiryRequest(),
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Expire the long-lived changelogs of `table`'s branch (see the module docstring); no snapshot
    is expired. `now_ms` is a test hook (the moment retention is measured from)."""
    table = with_read_memo(table)
    deletion = DeletionContext.of_call(OPERATION, table, spark, request.pace, dry_run, record, log)
    now = int(time.time() * 1000) if now_ms is None else now_ms
    settings = changelog_settings_of(table, request, now)
    deletion.record.details["settings"] = {
        "retain_min": settings.retain_min,
        "retain_max": settings.retain_max,
        "cutoff": iso_utc(settings.cutoff_ms),
        "max_deletes": settings.max_deletes,
        "delete_all": request.delete_all,
    }
    ids = table.snapshot_manager.snapshot_ids()
    if not ids:  # as Paimon: retention counts from the latest snapshot
        deletion.log.info("no snapshot: nothing to expire")
        deletion.record.count("changelogs_expired", 0)
        return deletion.record
    kept_snapshots = ExpireRange(ids[0], ids[-1], ids[0], ids[0], "none")  # no snapshot expires
    consumer_next = None if request.delete_all else live_consumers_next(deletion, now)
    deletion.record.details["settings"]["min_consumer_next_snapshot"] = consumer_next
    expire_changelogs(deletion, kept_snapshots, settings, consumer_next, set(), everything=request.delete_all)
    return deletion.record


def changelog_settings_of(table: Table, request: ChangelogExpiryRequest, now_ms: int) -> ChangelogSettings:
    """The request over the table's changelog options (which fall back to the snapshot ones)."""
    options = table.options
    try:
        settings = ChangelogSettings(
            retain_min=_or(request.retain_min, options.changelog_num_retained_min),
            retain_max=_or(request.retain_max, options.changelog_num_retained_max),
            cutoff_ms=instant_ms(request.older_than, now_ms)
            if request.older_than is not None
            else now_ms - options.changelog_time_retained_ms,
            max_deletes=_or(request.max_deletes, options.snapshot_expire_limit),
        )
        if settings.retain_min > settings.retain_max:
            raise ValueError(
                f"retain_min {settings.retain_min} > retain_max {settings.retain_max}: need min <= max"
            )
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    return settings


def _or(asked: int | None, option: int) -> int:
    return asked if asked is not None else option


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
