"""maintain: one scheduled run that maintains many tables (issue #9).

For each table selected by name or glob, in the safe order expire-partitions, expire-snapshots,
compact, compact-manifests, remove-orphan-files (see `jobs.runtime.maintain_config`), each operation
through its own `run(context, config)`, all in one SparkSession, started only when a step needs it
(small tables run in the driver process, `jobs.runtime.local_exec`). Tables run concurrently on a
thread pool of `parallelism` threads; each table's Spark jobs carry a job group `maintain <db.table>` (and the
`scheduler_pool`, if set) so the Spark UI shows which table a job belongs to.

Failures are per table: a failing step ends that table's remaining steps (its state is suspect),
is recorded with its exit code, and the other tables go on. The run's exit code is 0 when no table
failed (tables skipped because another run holds their lock do not count as failures), otherwise
the most severe of the failed tables' codes: 1 (unexpected) over 2 (bad input) over 3 (refused).

The run record has a section per table under `details.tables` with each operation's own record,
totals under `counts`/`bytes`, and a human summary (`details.summary`, also logged at the end).

Spark-submit entry: `spark-submit jobs/maintain.py --config conf/maintain.yaml`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from jobs.report.command import page_after_maintain
from jobs.report.run_records import record_figure
from jobs.runtime.errors import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNEXPECTED,
    BadInputError,
    JobError,
    SafetyRefusal,
    describe,
    exit_code_for,
)
from jobs.runtime.live_writers import race_or_bad_input
from jobs.runtime.maintain_config import MaintainConfig, TablePlan, plan_tables, table_asks_for
from jobs.runtime.registry import JobContext, load
from jobs.runtime.report import RunRecord
from jobs.runtime.run_lock import NOT_TAKEN_DRY_RUN, claim, log_takeover, release
from jobs.runtime.table_globs import resolve_tables
from jobs.runtime.table_lock import TableLock, open_table_lock
from jobs.runtime.table_open import open_existing_table
from paimon_format.storage.crash_points import crash_point

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONFIG_MODEL = MaintainConfig

_STATUS = {EXIT_OK: "done", EXIT_REFUSED: "refused"}
# Which table exit code wins for the run: page someone (1) before asking for a fix (2) before retry (3).
_SEVERITY = {EXIT_UNEXPECTED: 3, EXIT_BAD_INPUT: 2, EXIT_REFUSED: 1}


def summary_figure(record: RunRecord, figure: str) -> int:
    """One summary figure (snapshots, partitions, files, bytes) of one operation's record (the keys
    per operation are `SUMMARY_KEYS`, shared with the health page's rows of past runs)."""
    return record_figure(record.operation, record.dry_run, record.counts, record.bytes, figure)


class MaintenanceFailed(JobError):
    """At least one table failed unexpectedly."""


class MaintenanceBadInput(BadInputError):
    """At least one table failed on bad input (and none unexpectedly)."""


class MaintenanceRefused(SafetyRefusal):
    """At least one table was refused by a safety check (and none failed otherwise)."""


_FAILURE_CLASSES = {EXIT_UNEXPECTED: MaintenanceFailed, EXIT_BAD_INPUT: MaintenanceBadInput}


class _TableLog(logging.LoggerAdapter):
    """Prefixes each line with its table: the frame tags lines with one table, but here many run."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"[{self.extra['table']}] {msg}", kwargs


@dataclass
class TableOutcome:
    """What happened to one table: its status, each operation's record, the lock."""

    table: str
    status: str = "pending"  # done | failed | skipped
    exit_code: int = EXIT_OK
    reason: str | None = None
    lock: str | None = None
    duration_s: float = 0.0
    records: list[RunRecord] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)

    def total(self, figure: str) -> int:
        return sum(summary_figure(record, figure) for record in self.records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "exit_code": self.exit_code,
            "reason": self.reason,
            "lock": self.lock,
            "duration_s": self.duration_s,
            "snapshots_expired": self.total("snapshots"),
            "partitions_expired": self.total("partitions"),
            "files_removed": self.total("files"),
            "bytes_removed": self.total("bytes"),
            "operations": [record.to_dict() for record in self.records],
            "not_run": self.not_run,
        }

    def summary_line(self) -> str:
        if self.status == "skipped":
            return f"{self.table}: skipped ({self.reason})"
        steps = ", ".join(f"{r.operation} {r.status}" for r in self.records) or "no operation enabled"
        line = (
            f"{self.table}: {self.status} in {self.duration_s:.1f} s: {steps}; "
            f"{self.total('snapshots')} snapshots, {self.total('partitions')} partitions expired, "
            f"{self.total('files'):,} files / {self.total('bytes'):,} bytes removed"
        )
        if self.status == "failed":
            line += f"; exit {self.exit_code}: {self.reason}"
        return line


def run(context: JobContext, config: MaintainConfig) -> None:
    log = context.log
    record = context.record
    resolution = resolve_tables(config.warehouse, config.tables, config.exclude, config.storage_options)
    record.details["patterns"] = resolution.matched
    if resolution.unmatched:
        message = f"no table matches {', '.join(resolution.unmatched)} under {config.warehouse}"
        if config.strict:
            raise BadInputError(f"{message} (strict: true)")
        log.warning("%s", message)
        record.details["unmatched_patterns"] = resolution.unmatched
    plans = plan_tables(config, resolution.tables)  # config errors for any table: before Spark starts
    if plans and not any(plan.steps for plan in plans):
        raise BadInputError(
            f"no operation is enabled for any of the {len(plans)} tables: every block applying to them "
            "says enabled: false (leave out `defaults` for the built-in maintenance)"
        )
    record.details["plan"] = {plan.table: [step.operation for step in plan.steps] for plan in plans}
    record.count("tables", len(plans))
    log.info(
        "%s %d tables with up to %d at a time",
        "dry run over" if context.dry_run else "maintaining",
        len(plans),
        config.parallelism,
    )
    if not plans:
        return
    crash_point("maintain:planned")
    starting = threading.Lock()

    def shared_spark() -> SparkSession:  # started by the first step that needs Spark, once for every table
        with starting:
            return context.spark

    with ThreadPoolExecutor(
        max_workers=min(config.parallelism, len(plans)), thread_name_prefix="maintain"
    ) as pool:
        outcomes = list(
            pool.map(lambda plan: maintain_table(shared_spark, plan, config, context.dry_run, log), plans)
        )
    try:
        _report(record, outcomes, log)
    finally:  # the page shows failed tables too; a page that cannot be written never hides a failure
        problem = page_after_maintain(config, record, context.dry_run, log)
    if problem:
        raise BadInputError(f"every table was maintained, but {problem}")


def maintain_table(
    spark: Callable[[], SparkSession],
    plan: TablePlan,
    config: MaintainConfig,
    dry_run: bool,
    log: logging.Logger | logging.LoggerAdapter,
) -> TableOutcome:
    """Run one table's steps under its lock; never raises (a failure is the table's outcome).
    `spark` gives the shared session; a table whose steps all run in the driver never asks for it."""
    started = time.monotonic()
    outcome = TableOutcome(plan.table)
    table_log = _TableLog(
        log.logger if isinstance(log, logging.LoggerAdapter) else log, {"table": plan.table}
    )
    lock: TableLock | None = None
    try:
        if config.lock.enabled:
            lock = open_table_lock(
                config.warehouse,
                plan.table,
                config.lock,
                config.storage_options,
                config.allow_unsafe_overwrite_commit,
            )
            if not _take_lock(lock, outcome, dry_run, table_log):
                return outcome
            lock = None if dry_run else lock
        crash_point("maintain:locked")
        # the steps run through their run() here, never through the frame: none takes the lock again
        _run_steps(
            spark, _applicable(plan, config, table_log), dry_run, outcome, table_log, config.scheduler_pool
        )
    except Exception as error:  # the lock itself failed (storage, a garbled lock file)
        outcome.status, outcome.exit_code, outcome.reason = "failed", exit_code_for(error), describe(error)
        table_log.error("%s", outcome.reason)
    finally:
        if lock is not None:
            release(lock, table_log)
        outcome.duration_s = round(time.monotonic() - started, 3)
    return outcome


def _applicable(plan: TablePlan, config: MaintainConfig, log: logging.LoggerAdapter) -> TablePlan:
    """Open the table (a broken one fails here, exit 2, also in a dry run and with no step enabled)
    and drop the built-in steps whose table option is not set (e.g. partition.expiration-time)."""
    table = open_existing_table(
        SimpleNamespace(
            warehouse=config.warehouse,
            table=plan.table,
            storage_options=config.storage_options,
            allow_unsafe_overwrite_commit=config.allow_unsafe_overwrite_commit,
            io_parallelism=config.io_parallelism,
        )
    )
    kept = []
    for step in plan.steps:
        if step.only_if_options and not table_asks_for(table.schema.options, step.only_if_options):
            log.info(
                "%s: not run (the table does not ask for it: %s)",
                step.operation,
                ", ".join(step.only_if_options),
            )
            continue
        kept.append(step)
    return replace(plan, steps=tuple(kept))


def _take_lock(lock: TableLock, outcome: TableOutcome, dry_run: bool, log: logging.LoggerAdapter) -> bool:
    """Take (or, in a dry run, only look at) the table's lock; False = skip the table."""
    acquired = claim(lock, dry_run)
    if not acquired.held:
        outcome.status, outcome.reason = "skipped", acquired.describe()
        log.info("%s: %s", "would skip" if dry_run else "skipped", outcome.reason)
        return False
    outcome.lock = NOT_TAKEN_DRY_RUN if dry_run else lock.path
    log_takeover(acquired, log)
    return True


def _run_steps(
    spark: Callable[[], SparkSession],
    plan: TablePlan,
    dry_run: bool,
    outcome: TableOutcome,
    log: logging.LoggerAdapter,
    pool: str | None = None,
) -> None:
    outcome.status = "done"
    for index, step in enumerate(plan.steps):
        record = RunRecord(operation=step.operation, table=plan.table, dry_run=dry_run)
        record.details["config_from"] = list(step.sources)
        outcome.records.append(record)

        def labelled_spark(operation: str = step.operation) -> SparkSession:
            session = spark()
            _label_spark_jobs(session, plan.table, pool, operation)
            return session

        context = JobContext(step.operation, step.config, dry_run, record, log, spark_provider=labelled_spark)
        log.info("%s %s", "dry run of" if dry_run else "running", step.operation)
        try:
            load(step.operation).run(context, step.config)
            record.finish("done", None, EXIT_OK)
        except Exception as error:
            code, message = race_or_bad_input(
                error, exit_code_for(error), describe(error), step.config, record.started
            )
            record.finish(_STATUS.get(code, "failed"), message, code)
            if code == EXIT_UNEXPECTED:
                log.exception("%s failed unexpectedly", step.operation)
            log.error("%s: %s", step.operation, record.error)
            outcome.status, outcome.exit_code = "failed", code
            outcome.reason = f"{step.operation}: {record.error}"
            outcome.not_run = [later.operation for later in plan.steps[index + 1 :]]
            return
        crash_point(f"maintain:after-{step.operation}")


def _label_spark_jobs(
    spark: SparkSession, table: str, pool: str | None, operation: str | None = None
) -> None:
    """Mark this thread's Spark jobs with the table (thread-local properties in pinned-thread mode)."""
    context = spark.sparkContext
    context.setJobGroup(f"maintain {table}", f"maintain {table}" + (f": {operation}" if operation else ""))
    if pool:
        context.setLocalProperty("spark.scheduler.pool", pool)


def _report(
    record: RunRecord, outcomes: list[TableOutcome], log: logging.Logger | logging.LoggerAdapter
) -> None:
    """Fill the run record, log the human summary, and raise when any table failed."""
    record.details["tables"] = {outcome.table: outcome.to_dict() for outcome in outcomes}
    by_status: dict[str, int] = {}
    for outcome in outcomes:
        by_status[outcome.status] = by_status.get(outcome.status, 0) + 1
        record.count("snapshots_expired", outcome.total("snapshots"))
        record.count("partitions_expired", outcome.total("partitions"))
        record.count("files_removed", outcome.total("files"))
        record.add_bytes("removed", outcome.total("bytes"))
    for status in ("done", "failed", "skipped"):
        record.count(f"tables_{status}", by_status.get(status, 0))
    lines = [outcome.summary_line() for outcome in outcomes]
    total = (
        f"{len(outcomes)} tables: {by_status.get('done', 0)} done, {by_status.get('failed', 0)} failed, "
        f"{by_status.get('skipped', 0)} skipped; {record.counts['snapshots_expired']} snapshots and "
        f"{record.counts['partitions_expired']} partitions expired, "
        f"{record.counts['files_removed']:,} files / {record.bytes['removed']:,} bytes removed"
    )
    record.details["summary"] = [*lines, ("dry run, would be done: " if record.dry_run else "") + total]
    for line in record.details["summary"]:
        log.info("summary: %s", line)
    failed = [outcome for outcome in outcomes if outcome.status == "failed"]
    if failed:
        code = max((outcome.exit_code for outcome in failed), key=lambda c: _SEVERITY.get(c, 3))
        names = ", ".join(f"{outcome.table} (exit {outcome.exit_code})" for outcome in failed)
        raise _FAILURE_CLASSES.get(code, MaintenanceRefused)(
            f"{len(failed)} of {len(outcomes)} tables failed: {names}"
        )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("maintain")
