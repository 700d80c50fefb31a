"""mark-partition-done: mark partitions done, as Paimon's `mark_partition_done` procedure (issue #30).

Which partitions: the ones named in `partitions` (full specs, every partition key), or with
`idle_time_to_done` (default: the table option `partition.idle-time-to-done`) every partition of the
latest snapshot whose newest live data file was created longer ago than that (the update time
expire-partitions reads too). A spec naming no partition of the latest snapshot is bad input (exit 2):
Paimon marks whatever it is given, but a typo would report success for a partition that never
comes; we say so in the docs.

How: the table option `partition.mark-done-action` (default `success-file`; the job's `actions`
overrides it). `success-file` writes `<table>/<partition dir>/_SUCCESS`, the JSON Paimon writes and
reads (`creationTime` and `modificationTime`, epoch milliseconds): a new file gets both set to now,
an existing one keeps its creation time and gets a new modification time, as Paimon does, so a rerun
leaves the same files. `done-partition` and `mark-event` mark partitions in a metastore, which a
filesystem warehouse has not: refused with exit 2 naming the action, before anything is written.

Crash ordering: each `_SUCCESS` file is one whole-file write, so a crash leaves some partitions
marked and the others not; a rerun marks them all (exit 0). Nothing is deleted, no snapshot is
committed. Race: a partition dropped by another job while this one ran (its spec is checked against
the latest snapshot again after writing) gets its new `_SUCCESS` file removed again, and the run
exits 3. Runs on the driver alone (no Spark): it reads the latest snapshot's manifests once.

Spark-submit entry: `spark-submit jobs/mark_partition_done.py --config conf/mark-partition-done.yaml`.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import time
from dataclasses import dataclass

from pydantic import Field, field_validator, model_validator

from jobs.runtime.config import TableJobConfig, check_partition_specs
from jobs.runtime.errors import BadInputError, CommitRaceLost
from jobs.runtime.registry import JobContext
from jobs.runtime.report import SAMPLE_LIMIT, RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.errors import MissingFileError
from paimon_format.model.json import jackson_json
from paimon_format.model.options import parse_duration_ms
from paimon_format.model.partition_spec import PartitionSpecError, partition_bytes
from paimon_format.scan.snapshot_scan import live_entries
from paimon_format.storage.crash_points import crash_point
from paimon_format.table import Table

OPERATION = "mark-partition-done"
SUCCESS_FILE = "_SUCCESS"
ACTION_OPTION = "partition.mark-done-action"
IDLE_OPTION = "partition.idle-time-to-done"
SUCCESS_FILE_ACTION = "success-file"
METASTORE_ACTIONS = ("done-partition", "mark-event")
Scalar = str | int | float | bool | None


class MarkPartitionDoneConfig(TableJobConfig):
    partitions: list[dict[str, Scalar]] | None = Field(
        default=None, description="full partition specs to mark done: {key: value, ...} naming every key"
    )
    idle_time_to_done: str | None = Field(
        default=None,
        description="or every partition whose newest file is older than this (default: the table's "
        "partition.idle-time-to-done)",
    )
    actions: list[str] | None = Field(
        default=None, description="mark-done actions (default: the table's partition.mark-done-action)"
    )

    @field_validator("partitions")
    @classmethod
    def _specs(cls, value: list[dict[str, Scalar]] | None) -> list[dict[str, Scalar]] | None:
        return check_partition_specs(value, "name every partition key")

    @field_validator("idle_time_to_done")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None and parse_duration_ms(value) <= 0:
            raise ValueError("must be a positive duration such as 1h or 30min")
        return value

    @model_validator(mode="after")
    def _one_selector(self) -> MarkPartitionDoneConfig:
        if self.partitions is not None and self.idle_time_to_done is not None:
            raise ValueError("give partitions or idle_time_to_done, not both")
        return self


CONFIG_MODEL = MarkPartitionDoneConfig


@dataclass(frozen=True)
class MarkDoneRequest:
    """Which partitions (specs, or idle longer than `idle_time_to_done`; neither: the table's
    idle time option) and the actions (None: the table's option)."""

    specs: tuple[dict[str, Scalar], ...] | None = None
    idle_time_to_done: str | None = None
    actions: tuple[str, ...] | None = None

    @staticmethod
    def of(config: MarkPartitionDoneConfig) -> MarkDoneRequest:
        specs = tuple(config.partitions) if config.partitions is not None else None
        actions = tuple(config.actions) if config.actions is not None else None
        return MarkDoneRequest(specs, config.idle_time_to_done, actions)


def run(context: JobContext, config: MarkPartitionDoneConfig) -> None:
    mark_partition_done(
        open_existing_table(config),
        MarkDoneRequest.of(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def mark_partition_done(
    table: Table,
    request: MarkDoneRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now_ms: int | None = None,
) -> RunRecord:
    """Mark the requested partitions done (see the module docstring for the order and the race)."""
    log = log or logging.getLogger("jobs.mark_partition_done")
    record = record or RunRecord(operation=OPERATION, table=table.path, dry_run=dry_run)
    actions = mark_done_actions(table, request.actions)
    if not table.schema.partition_keys:
        raise BadInputError(f"{table.path}: the table has no partition keys, so no partition to mark done")
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    live = _live_partitions(table, record)
    chosen = _chosen(table, request, live, now_ms)
    directories = sorted({table.partition_dir(partition) for partition in chosen})
    record.details["actions"] = list(actions)
    record.count("partitions_to_mark", len(directories))
    record.sample("partitions_to_mark", directories[:SAMPLE_LIMIT])
    crash_point(f"{OPERATION}:planned")
    if dry_run:
        log.info("dry run: would mark %d partitions done", len(directories))
        record.count("success_files_written", 0)
        return record
    created: dict[bytes, str] = {}
    for partition in sorted(chosen, key=table.partition_dir):
        path, new = write_success_file(table, table.partition_dir(partition), now_ms)
        if new:
            created[partition] = path
        if len(created) == 1 and new:
            crash_point(f"{OPERATION}:first-marked")
    record.count("success_files_written", len(directories))
    record.count("success_files_created", len(created))
    _refuse_dropped_meanwhile(table, chosen, created, record)
    log.info("marked %d partitions done (%d new _SUCCESS files)", len(directories), len(created))
    return record


def mark_done_actions(table: Table, requested: tuple[str, ...] | None) -> tuple[str, ...]:
    """The actions to run: `requested`, else the table option (comma-separated), else success-file.
    A metastore action or an unknown one is bad input, named."""
    if requested is None:
        text = table.schema.options.get(ACTION_OPTION) or SUCCESS_FILE_ACTION
        requested = tuple(part.strip() for part in text.split(",") if part.strip())
    for action in requested:
        if action in METASTORE_ACTIONS:
            raise BadInputError(
                f"{table.path}: mark-done action {action!r} marks partitions in a metastore, which a "
                f"filesystem warehouse has not; use {SUCCESS_FILE_ACTION!r} (set actions: or the table's "
                f"{ACTION_OPTION})"
            )
        if action != SUCCESS_FILE_ACTION:
            raise BadInputError(
                f"{table.path}: unknown mark-done action {action!r} (supported: {SUCCESS_FILE_ACTION})"
            )
    if not requested:
        raise BadInputError(f"{table.path}: no mark-done action given")
    return requested


def _live_partitions(table: Table, record: RunRecord | None = None) -> dict[bytes, int]:
    """The latest snapshot's partitions and their newest live file's creation time (epoch ms, the
    naive local wall-clock time Paimon stores read as local; 0 when a file has none)."""
    latest = table.snapshot_manager.latest()
    if record is not None:
        record.snapshot_ids["scanned"] = latest.id if latest else None
    if latest is None:
        return {}
    newest: dict[bytes, int] = {}
    for entry in live_entries(table, latest):
        created = entry.file.creation_time
        millis = int(created.timestamp() * 1000) if isinstance(created, dt.datetime) else 0
        newest[entry.partition] = max(newest.get(entry.partition, 0), millis)
    return newest


def _chosen(table: Table, request: MarkDoneRequest, live: dict[bytes, int], now_ms: int) -> set[bytes]:
    """The partitions to mark: the specs' (each must be live) or the idle ones."""
    if request.specs is not None:
        chosen = set()
        for spec in request.specs:
            try:
                partition = partition_bytes(spec, table.schema)
            except PartitionSpecError as error:
                raise BadInputError(f"{table.path}: {error}") from None
            if partition not in live:
                raise BadInputError(
                    f"{table.path}: partition {dict(spec)} has no data in the latest snapshot; nothing "
                    "was marked done (a typo, or a partition not written yet?)"
                )
            chosen.add(partition)
        return chosen
    idle = request.idle_time_to_done or table.schema.options.get(IDLE_OPTION)
    if not idle:
        raise BadInputError(
            f"{table.path}: give partitions, or idle_time_to_done (or set the table's {IDLE_OPTION})"
        )
    try:
        idle_ms = parse_duration_ms(idle)
    except ValueError as error:
        raise BadInputError(f"{table.path}: {IDLE_OPTION} {idle!r}: {error}") from None
    return {partition for partition, newest in live.items() if newest + idle_ms <= now_ms}


def write_success_file(table: Table, directory: str, now_ms: int) -> tuple[str, bool]:
    """Write `<directory>/_SUCCESS` (path, True when it did not exist): both times now for a new
    file, the old creation time and a new modification time for an existing one, as Paimon."""
    path = table.file_io.join(table.path, directory, SUCCESS_FILE)
    creation = now_ms
    new = True
    try:
        old = json.loads(table.file_io.read_bytes(path))
        creation = int(old["creationTime"])
        new = False
    except MissingFileError:
        pass
    except (ValueError, KeyError, TypeError) as error:
        raise BadInputError(
            f"{path}: not a Paimon _SUCCESS file ({error}); nothing was overwritten"
        ) from None
    body = jackson_json({"creationTime": creation, "modificationTime": now_ms})
    table.file_io.write_bytes(path, body.encode("utf-8"))
    return path, new


def _refuse_dropped_meanwhile(
    table: Table, chosen: set[bytes], created: dict[bytes, str], record: RunRecord
) -> None:
    """Exit 3 when a marked partition left the latest snapshot while this run wrote (a racing
    drop-partition or expire-partitions): the `_SUCCESS` files this run created there go again."""
    scanned = record.snapshot_ids.get("scanned")
    latest = table.snapshot_manager.latest_id()
    if latest == scanned:
        return
    gone = chosen - set(_live_partitions(table))
    if not gone:
        return
    for partition in gone:
        if partition in created:
            table.file_io.delete(created[partition])
    names = sorted(table.partition_dir(partition) for partition in gone)
    raise CommitRaceLost(
        f"{table.path}: partitions {names[:5]} were dropped by another job while they were marked done; "
        "their new _SUCCESS files were removed again. Run mark-partition-done again"
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry(OPERATION)
