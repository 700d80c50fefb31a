"""clear-consumers: delete streaming consumers by regex (issue #30), as Paimon's `clear_consumers`.

`include` (default: every consumer) and `exclude` are Java regexes matched against the whole
consumer id, as Paimon's `ConsumerManager.clearConsumers`: the consumers matching `include` and not
`exclude` are deleted. A deleted consumer no longer holds snapshots from expiry; its streaming
reader, if it still runs, writes it again at its next checkpoint.

Each consumer is one file, deleted one by one in id order: a crash leaves some deleted, and a rerun
deletes the rest (exit 0). A pattern that is no valid regex is exit 2 before anything is deleted.
Nothing else is written or deleted, so there is no race to lose. Runs on the driver alone (no Spark).

Spark-submit entry: `spark-submit jobs/clear_consumers.py --config conf/clear-consumers.yaml`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from pydantic import Field, field_validator

from jobs.runtime.config import TableJobConfig
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.consumers import ConsumerManager
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "clear-consumers"


def _regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as error:
            raise ValueError(f"{value!r} is no valid regex: {error}") from None
    return value


class ClearConsumersConfig(TableJobConfig):
    include: str = Field(default=".*", description="regex of the consumer ids to delete (whole id)")
    exclude: str | None = Field(default=None, description="regex of the consumer ids to keep (whole id)")
    branch: str | None = Field(default=None, description="the branch whose consumers go (default main)")

    @field_validator("include", "exclude")
    @classmethod
    def _patterns(cls, value: str | None) -> str | None:
        return _regex(value)

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)


CONFIG_MODEL = ClearConsumersConfig


@dataclass(frozen=True)
class ClearConsumersRequest:
    include: str = ".*"
    exclude: str | None = None

    @staticmethod
    def of(config: ClearConsumersConfig) -> ClearConsumersRequest:
        return ClearConsumersRequest(config.include, config.exclude)


def run(context: JobContext, config: ClearConsumersConfig) -> None:
    clear_consumers(
        open_branch(open_existing_table(config), config.branch),
        ClearConsumersRequest.of(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def clear_consumers(
    table: Table,
    request: ClearConsumersRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Delete the consumers of `table`'s branch matching `include` and not `exclude`."""
    log = log or logging.getLogger("jobs.clear_consumers")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    consumers = ConsumerManager(table.file_io, table.path, table.branch)
    matching = consumers.matching_consumers(request.include, request.exclude)
    record.details["consumers"] = {
        "branch": table.branch,
        "include": request.include,
        "exclude": request.exclude,
    }
    record.count("consumers_to_delete", len(matching))
    record.sample("consumers_to_delete", matching[:SAMPLE_LIMIT])
    record.count("consumers_deleted", 0)
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: would delete %d consumers", len(matching))
        return record
    for consumer_id in matching:
        consumers.delete_consumer(consumer_id)
        record.count("consumers_deleted", 1)
        crash_point(f"{OPERATION}:consumer-deleted")
    log.info("deleted %d consumers of branch %r", len(matching), table.branch)
    return record


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
