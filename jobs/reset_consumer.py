"""reset-consumer: set a streaming consumer's next snapshot, or delete the consumer (issue #30).

A streaming reader started with `consumer-id` keeps `consumer/consumer-<id>` = {"nextSnapshot": N}:
where it resumes, and what snapshot expiry must keep. Paimon's `reset_consumer` procedure rewrites
that file (`next_snapshot: N`) or deletes it (`delete: true`); so does this job, on main or a branch.

The next snapshot must be one that exists, or the one after the latest (a reader that has read
everything): a consumer pointing at an expired snapshot would make its reader fail with "snapshot
has expired", and one far beyond the latest would make it skip commits. Either is exit 2 naming the
snapshots there are. Deleting a consumer that does not exist is exit 2 (`strict: false`: a warning).

One file is written or deleted, so there is no half state. A racing expiry: after writing, the
snapshot is checked again; gone meanwhile (an expiry planned before this run's consumer existed),
the consumer's previous content is put back (or the new file removed) and the run ends with exit 3.
Runs on the driver alone (no Spark).

Spark-submit entry: `spark-submit jobs/reset_consumer.py --config conf/reset-consumer.yaml`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import check_branch_name, open_branch, open_existing_table
from paimon_format.consumers import ConsumerManager
from paimon_format.errors import MissingFileError
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "reset-consumer"


def check_consumer_id(value: str) -> str:
    """A consumer id is a file name suffix: not blank, no '/' or '\\'."""
    if not value.strip() or any(char in value for char in "/\\"):
        raise ValueError(f"{value!r} is no consumer id (not blank, no '/' or '\\')")
    return value


class ResetConsumerConfig(TableJobConfig):
    consumer_id: str = Field(description="the consumer's id (the streaming reader's `consumer-id`)")
    next_snapshot: int | None = Field(default=None, ge=1, description="the snapshot it reads next")
    delete: bool = Field(default=False, description="or delete the consumer (it then holds nothing)")
    strict: bool = Field(default=True, description="deleting a consumer that does not exist is an error")
    branch: str | None = Field(default=None, description="the branch whose consumer it is (default main)")

    @field_validator("consumer_id")
    @classmethod
    def _consumer(cls, value: str) -> str:
        return check_consumer_id(value)

    @field_validator("branch")
    @classmethod
    def _branch(cls, value: str | None) -> str | None:
        return check_branch_name(value)

    @model_validator(mode="after")
    def _one_action(self) -> ResetConsumerConfig:
        if (self.next_snapshot is not None) == self.delete:
            raise ValueError("give exactly one of next_snapshot: N and delete: true")
        return self


CONFIG_MODEL = ResetConsumerConfig


@dataclass(frozen=True)
class ResetConsumerRequest:
    """A consumer and its new next snapshot (None: delete it)."""

    consumer_id: str
    next_snapshot: int | None = None
    strict: bool = True

    @staticmethod
    def of(config: ResetConsumerConfig) -> ResetConsumerRequest:
        return ResetConsumerRequest(config.consumer_id, config.next_snapshot, config.strict)


def run(context: JobContext, config: ResetConsumerConfig) -> None:
    reset_consumer(
        open_branch(open_existing_table(config), config.branch),
        ResetConsumerRequest.of(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def reset_consumer(
    table: Table,
    request: ResetConsumerRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Set (or delete) consumer `request.consumer_id` of `table`'s branch (see the module docstring)."""
    log = log or logging.getLogger("jobs.reset_consumer")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    consumers = ConsumerManager(table.file_io, table.path, table.branch)
    path = consumers.consumer_path(request.consumer_id)
    before = _read_or_none(table, path)
    previous = consumers.consumer(request.consumer_id) if before is not None else None
    record.details["consumer"] = {
        "id": request.consumer_id,
        "branch": table.branch,
        "previous_next_snapshot": previous,
        "next_snapshot": request.next_snapshot,
    }
    if request.next_snapshot is None:
        _delete(consumers, request, before is not None, dry_run, record, log)
        return record
    _check_snapshot(table, request.next_snapshot)
    crash_point(f"{OPERATION}:planned")
    record.count("consumers_written", 0)
    if dry_run:
        log.info("dry run: would set consumer %r to snapshot %d", request.consumer_id, request.next_snapshot)
        return record
    consumers.reset_consumer(request.consumer_id, request.next_snapshot)
    record.count("consumers_written", 1)
    _refuse_vanished_snapshot(table, request, path, before)
    log.info("consumer %r: next snapshot %s -> %d", request.consumer_id, previous, request.next_snapshot)
    return record


def _read_or_none(table: Table, path: str) -> bytes | None:
    try:
        return table.file_io.read_bytes(path)
    except MissingFileError:
        return None


def _delete(
    consumers: ConsumerManager,
    request: ResetConsumerRequest,
    exists: bool,
    dry_run: bool,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> None:
    record.count("consumers_deleted", 0)
    if not exists:
        message = (
            f"{consumers.consumer_path(request.consumer_id)}: consumer {request.consumer_id!r} does not "
            f"exist (consumers: {', '.join(consumers.consumer_ids()) or 'none'})"
        )
        if request.strict:
            raise BadInputError(message)
        log.warning("%s; nothing to delete (strict: false)", message)
        return
    if dry_run:
        log.info("dry run: would delete consumer %r", request.consumer_id)
        return
    consumers.delete_consumer(request.consumer_id)
    record.count("consumers_deleted", 1)
    log.info("deleted consumer %r", request.consumer_id)


def _check_snapshot(table: Table, snapshot_id: int) -> None:
    """The snapshot exists, or is the one after the latest; BadInputError naming the span otherwise."""
    manager = table.snapshot_manager
    latest = manager.latest_id()
    if manager.snapshot_exists(snapshot_id):
        manager.snapshot(snapshot_id)  # readable: a reader resuming there must be able to read it
        return
    if snapshot_id == (latest or 0) + 1:
        return
    earliest = manager.earliest_id()
    span = f"{earliest}..{latest}" if latest is not None else "none"
    raise BadInputError(
        f"{manager.snapshot_path(snapshot_id)}: next_snapshot {snapshot_id} is neither a snapshot of "
        f"branch {table.branch!r} nor the one after its latest (snapshots: {span})"
    )


def _refuse_vanished_snapshot(
    table: Table, request: ResetConsumerRequest, path: str, before: bytes | None
) -> None:
    """Exit 3 when the snapshot went while the consumer was written (an expiry that planned before
    it existed): the consumer is put back as it was."""
    snapshot_id = request.next_snapshot
    assert snapshot_id is not None
    manager = table.snapshot_manager
    if manager.snapshot_exists(snapshot_id) or snapshot_id > (manager.latest_id() or 0):
        return
    if before is None:
        table.file_io.delete(path)
    else:
        table.file_io.write_bytes(path, before)
    raise CommitRaceLost(
        f"{manager.snapshot_path(snapshot_id)}: snapshot {snapshot_id} was expired by another job while "
        f"consumer {request.consumer_id!r} was written; the consumer was put back. Run reset-consumer "
        "again with a snapshot that stays"
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
