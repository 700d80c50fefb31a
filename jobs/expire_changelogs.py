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
from jobs.deletion.context import DeletionContext
from jobs.deletion.retention import RetentionRequest, retention_keys
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.maintenance.expire import ChangelogSettings, ExpireRange
from paimon_format.maintenance.read_memo import with_read_memo
from paimon_format.model.instants import iso_utc
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

OPERATION = "expire-changelogs"


class ExpireChangelogsConfig(TableJobConfig, retention_keys("changelog")):
    delete_all: bool = Field(default=False, description="expire every long-lived changelog")
    branch: str | None = Field(default=None, description="the branch whose changelogs go (default main)")

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
class ChangelogExpiryRequest(RetentionRequest):
    """What a run asks for; None takes the table's option (Paimon's default where that is unset);
    `delete_all` expires every long-lived changelog."""

    delete_all: bool = False

    @staticmethod
    def of(config: ExpireChangelogsConfig) -> ChangelogExpiryRequest:
        return ChangelogExpiryRequest(**RetentionRequest.keys_of(config), delete_all=config.delete_all)


def run(context: JobContext, config: ExpireChangelogsConfig) -> None:
    table = open_branch(open_existing_table(config), config.branch)
    expire_changelogs_of(context.spark, table, ChangelogExpiryRequest.of(config), **context.job_keywords())


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
            **request.over(
                options.changelog_num_retained_min,
                options.changelog_num_retained_max,
                options.changelog_time_retained_ms,
                options.snapshot_expire_limit,
                now_ms,
            )
        )
        if settings.retain_min > settings.retain_max:
            raise ValueError(
                f"retain_min {settings.retain_min} > retain_max {settings.retain_max}: need min <= max"
            )
    except ValueError as error:
        raise BadInputError(f"{table.path}: {error}") from None
    return settings


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
