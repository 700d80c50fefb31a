"""expire-partitions: drop the partitions whose time is older than an expiration time (seed 004).

Paimon's `partition.expiration-*` rules (see `paimon_format/maintenance/partition_expiry.py`):
`values-time` reads the time from the partition values (`timestamp_pattern`, `timestamp_formatter`),
`update-time` uses the creation time of the partition's newest file. Every key falls back to the
table option of the same meaning, so a table configured for Paimon's own expiry needs only
`warehouse` and `table`.

The executors read every manifest once and summarise the partitions (one row per partition, never per
file; `jobs/partitions/scan.py`), the expired ones are chosen on the driver (ordered by their values,
at most `max_expires` per run) and dropped in commits of `batch_size` partitions each, every one an
OVERWRITE snapshot as drop-partition makes. With `values-time` the executors already know which
partitions are expired by value: on a snapshot without DELETE entries they write those partitions'
DELETE manifests in the scan itself (no shuffle), which are committed as they are when one commit
takes all of them (the usual nightly run); otherwise (a DELETE in the snapshot, `update-time`, or a
`max_expires` / `batch_size` that splits them) the expired partitions' entries are kept, arranged
by partition, and each batch's DELETE manifests are written from them, so the manifests are not
read again per batch.

Spark-submit entry: `spark-submit jobs/expire_partitions.py --config conf/expire-partitions.yaml`.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from jobs.partitions.commit import DropOutcome, drop_partitions, open_partitioned_table, record_drop
from jobs.partitions.records import partition_label, record_partitions
from jobs.partitions.scan import PartitionScan, scan_partitions
from jobs.runtime.config import TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.local_exec import LocalRunOptions, run_where_it_fits
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from paimon_format.maintenance.partition_expiry import (
    DEFAULT_MAX_EXPIRES,
    VALUES_TIME,
    ExpiryConfigError,
    ExpiryRule,
    ExpirySelection,
    TimestampFormatter,
    partition_time,
    select_expired,
)
from paimon_format.model.binary_row import deserialize_row
from paimon_format.model.options import parse_duration_ms
from paimon_format.model.partition_spec import PartitionStats
from paimon_format.model.types import DataType
from paimon_format.scan.partition_predicate import PartitionColumns
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from jobs.runtime.local_frame import LocalSession

EXPIRATION_TIME = "partition.expiration-time"
STRATEGY = "partition.expiration-strategy"
FORMATTER = "partition.timestamp-formatter"
PATTERN = "partition.timestamp-pattern"
MAX_NUM = "partition.expiration-max-num"
BATCH_SIZE = "partition.expiration-batch-size"


class ExpirePartitionsConfig(TableJobConfig, LocalRunOptions):
    expiration_time: str | None = Field(
        default=None, description="e.g. 30d; default: partition.expiration-time"
    )
    strategy: Literal["values-time", "update-time"] | None = Field(
        default=None, description="default: partition.expiration-strategy, else values-time"
    )
    timestamp_formatter: str | None = Field(default=None, description="Java DateTimeFormatter pattern")
    timestamp_pattern: str | None = Field(default=None, description="e.g. '$dt $hr:00:00'")
    max_expires: int | None = Field(default=None, ge=1, description="default: partition.expiration-max-num")
    batch_size: int | None = Field(default=None, ge=1, description="partitions per commit (default: all)")
    max_replans: int = Field(default=3, ge=0, description="plans again when a rival changed the partitions")

    @field_validator("expiration_time")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            if parse_duration_ms(value) <= 0:
                raise ValueError("must be a positive duration such as 30d or 12h")
        return value

    @field_validator("timestamp_formatter")
    @classmethod
    def _formatter(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                TimestampFormatter.compile(value)
            except ExpiryConfigError as error:
                raise ValueError(str(error)) from None
        return value


CONFIG_MODEL = ExpirePartitionsConfig


@dataclass(frozen=True)
class ExpirePartitionsRequest:
    """What one expiry is asked to do: the validated config's options (`of`), or built by a Python
    caller. A setting left None falls back to the table option of the same meaning (`rule`,
    `max_expires_for`, `batch_size_for`), as in the job's config."""

    expiration_time: str | None = None  # e.g. 30d; default: partition.expiration-time
    strategy: str | None = None  # values-time | update-time; default: the table's, else values-time
    timestamp_formatter: str | None = None  # Java DateTimeFormatter pattern
    timestamp_pattern: str | None = None  # e.g. '$dt $hr:00:00'
    max_expires: int | None = None  # default: partition.expiration-max-num
    batch_size: int | None = None  # partitions per commit (default: all)
    max_replans: int = 3  # plans again when a rival changed the partitions

    @classmethod
    def of(cls, config: ExpirePartitionsConfig) -> ExpirePartitionsRequest:
        """The expiry the configuration asks for."""
        return cls(
            expiration_time=config.expiration_time,
            strategy=config.strategy,
            timestamp_formatter=config.timestamp_formatter,
            timestamp_pattern=config.timestamp_pattern,
            max_expires=config.max_expires,
            batch_size=config.batch_size,
            max_replans=config.max_replans,
        )

    def rule(self, table: Table) -> ExpiryRule:
        """The rule, each setting falling back to the table option; BadInputError if unusable."""
        options = table.schema.options
        expiration = self.expiration_time or options.get(EXPIRATION_TIME)
        if not expiration:
            raise BadInputError(
                f"{table.path}: no expiration time: set expiration_time in the job "
                f"or {EXPIRATION_TIME} on the table"
            )
        try:
            rule = ExpiryRule.create(
                self.strategy or options.get(STRATEGY) or VALUES_TIME,
                parse_duration_ms(expiration),
                self.timestamp_formatter or options.get(FORMATTER),
                self.timestamp_pattern or options.get(PATTERN),
            )
            rule.check_pattern(PartitionColumns.of(table.schema))
        except ValueError as error:
            raise BadInputError(f"{table.path}: {error}") from None
        return rule

    def max_expires_for(self, table: Table) -> int:
        """At most this many partitions expire in one run."""
        return _option_int(table, MAX_NUM, self.max_expires, DEFAULT_MAX_EXPIRES) or DEFAULT_MAX_EXPIRES

    def batch_size_for(self, table: Table) -> int | None:
        """Partitions per commit (None: all in one)."""
        return _option_int(table, BATCH_SIZE, self.batch_size, None)


def run(context: JobContext, config: ExpirePartitionsConfig) -> None:
    table = open_partitioned_table(config)
    request = ExpirePartitionsRequest.of(config)
    # checked before Spark; values-time scans stream (update-time merges all)
    rule = request.rule(table)
    run_where_it_fits(
        context,
        table,
        config,
        lambda spark: expire_partitions(
            spark, table, request, dry_run=context.dry_run, record=context.record, log=context.log
        ),
        scan_bound=rule.strategy == VALUES_TIME,
    )


def _option_int(table: Table, key: str, configured: int | None, default: int | None) -> int | None:
    if configured is not None:
        return configured
    text = table.schema.options.get(key)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadInputError(f"{table.path}: table option {key}={text!r} is not an integer") from None
    return value if value > 0 else default


def expire_partitions(
    spark: SparkSession | LocalSession,
    table: Table,
    request: ExpirePartitionsRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    now: dt.datetime | None = None,
    before_commit: Callable[[], None] | None = None,
) -> RunRecord:
    """Drop the expired partitions of the latest snapshot; `now` is local wall-clock time (default
    now) and `before_commit` a test hook (a rival commits there)."""
    log = log or logging.getLogger("jobs.expire_partitions")
    record = record or RunRecord(operation="expire-partitions", table=table.path, dry_run=dry_run)
    rule = request.rule(table)
    max_expires, batch_size = request.max_expires_for(table), request.batch_size_for(table)
    now = now or dt.datetime.now()
    columns = PartitionColumns.of(table.schema)
    latest = table.snapshot_manager.latest()
    record.snapshot_ids["base"] = latest.id if latest else None
    cutoff = now - dt.timedelta(milliseconds=rule.expiration_ms)
    wanted = (
        functools.partial(may_expire, types=table.partition_types, columns=columns, rule=rule, cutoff=cutoff)
        if rule.strategy == VALUES_TIME
        else _every_partition
    )
    # values-time: the scan tasks know which partitions expire by value; on a snapshot without
    # DELETE entries they write those partitions' DELETEs at once (no shuffle), which a run that
    # takes them all in one commit (its usual case) hands over as they are
    values_time = rule.strategy == VALUES_TIME
    scan = scan_partitions(
        spark, table, latest, wanted, keep=not dry_run, direct=values_time, summarize_all=True
    )
    try:
        stats = scan.stats
        selection = select_expired(
            ((s, table.partition_values(s.partition)) for s in stats),
            columns,
            rule,
            now,
            max_expires,
        )
        record.details["strategy"] = rule.strategy
        record.details["expire_before"] = cutoff.isoformat(sep=" ")
        record.count("partitions_scanned", len(stats))
        _record_selection(table, selection, record, log)
        chosen = [(item.stats, item.values) for item in selection.expired]
        record_partitions(record, table, chosen)
        if not chosen:
            log.info("no partition expired before %s", record.details["expire_before"])
            return record
        if dry_run:
            log.info("dry run: %d partitions would be expired", len(chosen))
            return record
        batches = _drop_in_batches(spark, table, scan, chosen, batch_size, request.max_replans, before_commit)
        for batch, outcome in batches:
            record_drop(record, outcome)
            record.count("commits", 1 if outcome.snapshot else 0)
            log.info(
                "snapshot %s: expired %d partitions (%d files)",
                outcome.snapshot.id if outcome.snapshot else None,
                len(batch),
                outcome.files,
            )
    finally:
        scan.close()
    return record


def _record_selection(
    table: Table,
    selection: ExpirySelection,
    record: RunRecord,
    log: logging.Logger | logging.LoggerAdapter,
) -> None:
    """How many partitions expired, and which have no readable time (they never expire by value)."""
    record.count("partitions_expired_total", selection.expired_total)
    if selection.unreadable_total:
        record.count("partitions_without_time", selection.unreadable_total)
        record.details["partitions_without_time"] = [
            partition_label(table, values) for values in selection.unreadable
        ]
        log.warning(
            "%d partitions have no readable time in their values and never expire by value "
            "(check timestamp_formatter/timestamp_pattern, or drop them with drop-partition)",
            selection.unreadable_total,
        )


def _drop_in_batches(
    spark: SparkSession | LocalSession,
    table: Table,
    scan: PartitionScan,
    chosen: Sequence[tuple[PartitionStats, Sequence[object]]],
    batch_size: int | None,
    max_replans: int,
    before_commit: Callable[[], None] | None,
) -> Iterator[tuple[list[bytes], DropOutcome]]:
    """One OVERWRITE commit per batch of `batch_size` chosen partitions (all in one by default),
    each batch's DELETE manifests written from the scan; yields (batch, what it committed)."""
    size = batch_size or len(chosen)
    own: list[int] = []  # our earlier batches: they drop other partitions, their deltas need no reading
    for start in range(0, len(chosen), size):
        batch = [stats.partition for stats, _values in chosen[start : start + size]]
        outcome = drop_partitions(
            spark,
            table,
            batch,
            max_replans=max_replans,
            before_commit=before_commit,
            step_prefix="expire-partitions",
            first_plan=scan.write_deletes(batch),
            own_snapshots=own,
        )
        if outcome.snapshot is not None:
            own.append(outcome.snapshot.id)
        yield batch, outcome


def may_expire(
    partition: bytes,
    types: Sequence[DataType],
    columns: PartitionColumns,
    rule: ExpiryRule,
    cutoff: dt.datetime,
) -> bool:
    """values-time: whether the partition's values stand for a time before `cutoff` (on the executors)."""
    moment = partition_time(deserialize_row(partition, types), columns, rule)
    return moment is not None and moment < cutoff


def _every_partition(_partition: bytes) -> bool:
    return True  # update-time: the newest live file decides, known only after the merge


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("expire-partitions")
