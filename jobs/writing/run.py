"""One write: plan on the driver, write data files on the executors, commit once.

Plan on the driver (create or check the table, find where sequence numbers continue), write data
files on the executors with pyarrow inside mapInArrow (or reading a Parquet source directly),
collect only the new files' metadata, and commit once through `SnapshotCommit`. A failed commit
removes the data files this run wrote, and a table this run created. On tables whose batch reads
skip level 0, the buckets written are compacted after the commit (`jobs.writing.level0`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.compaction.refusals import check_supported
from jobs.runtime.errors import BadInputError
from jobs.runtime.report import RunRecord
from jobs.writing.columns import WrittenRows
from jobs.writing.commit import commit_written, overwrite_filter, remove_created_table
from jobs.writing.data_files import next_sequence_number, write_files_directly, write_through_spark
from jobs.writing.dynamic_bucket import check_base_index, check_bucket_mode, is_dynamic_bucket, write_dynamic
from jobs.writing.level0 import compact_written_buckets, compacts_level0
from jobs.writing.settings import WritePlan, WriteSettings
from jobs.writing.source import ParquetFiles, count_rows, dataframe_arrow_schema
from jobs.writing.table_check import check_compatible, check_create_matches
from paimon_format.commit import IndexUpdate
from paimon_format.errors import PaimonFormatError
from paimon_format.model.arrow_types import from_arrow
from paimon_format.model.schema import TableSchema, new_table_schema
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Log = logging.Logger | logging.LoggerAdapter


def write_to_table(
    source: DataFrame | ParquetFiles,
    settings: WriteSettings,
    *,
    dry_run: bool = False,
    spark: SparkSession | None = None,
    record: RunRecord | None = None,
    log: Log | None = None,
) -> RunRecord:
    """Write `source` into `settings.table`; creates the table from the source's columns if missing.

    `source` is a Spark DataFrame, or `ParquetFiles` (then `spark` is needed) for the direct path.
    A table this call created is removed again when its first commit fails, so a corrected
    definition takes effect on the next run.
    """
    log = log or logging.getLogger("jobs.write")
    record = record or RunRecord(operation="write", table=settings.table, dry_run=dry_run)
    target = _open_target(settings)
    files = source if isinstance(source, ParquetFiles) else None
    spark = spark if files is not None else source.sparkSession
    arrow_schema = files.arrow_schema if files is not None else dataframe_arrow_schema(source)
    plan = plan_write(
        target,
        arrow_schema,
        files is not None,
        settings,
        dry_run,
        record,
        log,
        lambda table: next_sequence_number(spark, table),
    )
    df = source
    if files is not None and not plan.direct:
        df = spark.read.parquet(*files.paths)
    if dry_run:
        record.count("input_rows", count_rows(spark, files) if plan.direct else df.count())
        log.info("dry run: would write %d rows", record.counts["input_rows"])
        return record
    log.info(
        "writing data files on the executors (%s%s)",
        "primary-key table" if plan.schema.primary_keys else "append table",
        f", {plan.num_buckets} buckets" if plan.num_buckets > 0 else "",
    )
    try:
        written, index = _write_files(spark, df, plan, settings, record)
        log.info(
            "wrote %d data files (%s bytes); committing",
            len(written),
            f"{sum(row['size'] for row in written):,}",
        )
        commit_written(written, plan, settings, record, log, index)
    except BaseException:
        if plan.created:
            remove_created_table(target, log)
            record.details["created_table"] = False
        raise
    if plan.compacts_level0 and record.snapshot_ids.get("committed") is not None:
        touched = {(bytes(row["partition"]), row["bucket"]) for row in written}
        compact_written_buckets(spark, target, touched, record, log)
    return record


def _open_target(settings: WriteSettings) -> Table:
    if settings.mode not in ("append", "overwrite"):
        raise BadInputError(f"mode must be append or overwrite, got {settings.mode!r}")
    try:
        return Table.open(
            settings.warehouse,
            settings.table,
            settings.storage_options,
            settings.allow_unsafe_overwrite_commit,
            settings.io_parallelism,
        )
    except ValueError as error:
        raise BadInputError(str(error)) from None


# -- planning ------------------------------------------------------------------------------------


def plan_write(
    target: Table,
    arrow_schema: pa.Schema,
    from_files: bool,
    settings: WriteSettings,
    dry_run: bool,
    record: RunRecord,
    log: Log,
    next_sequence: Callable[[Table], int],
) -> WritePlan:
    """Create (unless `dry_run`) or check the table, then everything decided before a data file is
    written. `next_sequence(table)`: where the new files' sequence numbers begin (the write job reads
    the manifests on the executors; the Spark data source, which has no session there, on the driver)."""
    existing = target.latest_schema()
    if existing is None:
        schema, compact_level0 = _create_table(target, arrow_schema, settings, dry_run, record, log)
    else:
        schema = existing
        compact_level0 = _check_existing_table(target, arrow_schema, schema, settings, record, log)
    num_buckets = int(schema.options.get("bucket", "-1"))
    scope_filter = overwrite_filter(
        settings.mode, settings.overwrite_scope, settings.overwrite_partitions or [], schema, settings.table
    )
    previous = None
    if existing is not None:  # a snapshot naming a schema that is gone is a broken table: refuse
        target.check_metadata()
        latest = target.snapshot_manager.latest(reuse_read=True)  # the check's read
        previous = latest.id if latest else None
    record.snapshot_ids["base"] = previous
    # before the dry-run exit: reading every manifest of the latest snapshot is the check that the
    # dry run must share with the real run (a corrupt or missing manifest fails both, with exit 2)
    if existing is not None:
        log.info("reading the manifests of snapshot %s for the next sequence number", previous)
    first_sequence = next_sequence(target) if existing is not None else 0
    if compact_level0:
        record.details["compacts_written_buckets"] = True
    if is_dynamic_bucket(schema) and previous is not None:
        record.count("hash_index_files_before", check_base_index(target, previous))
    return WritePlan(
        target=target,
        schema=schema,
        num_buckets=num_buckets,
        overwrite_filter=scope_filter,
        previous=previous,
        first_sequence=first_sequence,
        direct=from_files and not schema.primary_keys and num_buckets <= 0,
        compacts_level0=compact_level0,
        created=bool(record.details.get("created_table")),
    )


def _create_table(
    target: Table,
    arrow_schema: pa.Schema,
    settings: WriteSettings,
    dry_run: bool,
    record: RunRecord,
    log: Log,
) -> tuple[TableSchema, bool]:
    """The new table's schema from the source's columns and the `create:` settings (created now,
    unless this is a dry run), and whether its written buckets need compacting; refused (exit 2)
    when the write job could not write it."""
    try:
        schema = new_table_schema(
            [(f.name, from_arrow(f.type, f.nullable)) for f in arrow_schema],
            partition_keys=settings.partition_keys or [],
            primary_keys=settings.primary_keys or [],
            options={k: str(v) for k, v in (settings.options or {}).items()},
        )
    except (ValueError, PaimonFormatError) as error:
        raise BadInputError(f"cannot create table {settings.table}: {error}") from None
    check_bucket_mode(schema, settings.table)
    compact_level0 = compacts_level0(schema, settings.table)
    record.details["created_table"] = True
    if not dry_run:
        target.adopt_created_schema(target.schema_manager.create_table(schema))
        log.info("created table %s at %s", settings.table, target.path)
    return schema, compact_level0


def _check_existing_table(
    target: Table,
    arrow_schema: pa.Schema,
    schema: TableSchema,
    settings: WriteSettings,
    record: RunRecord,
    log: Log,
) -> bool:
    """An existing table: the `create:` settings compared, its bucket mode and the source checked;
    whether its written buckets need compacting."""
    check_create_matches(
        schema,
        settings.table,
        settings.partition_keys,
        settings.primary_keys,
        settings.options,
        settings.strict_create,
        record,
        log,
    )
    check_bucket_mode(schema, settings.table)
    compact_level0 = compacts_level0(schema, settings.table)
    if compact_level0:
        check_supported(target, None)  # what the compaction after the commit would refuse: now
    check_compatible(arrow_schema, schema, settings.table)
    return compact_level0


# -- the distributed write -----------------------------------------------------------------------


def _write_files(
    spark: SparkSession,
    df: DataFrame | ParquetFiles,
    plan: WritePlan,
    settings: WriteSettings,
    record: RunRecord,
) -> tuple[WrittenRows, IndexUpdate | None]:
    """The executors write the data files: (their result rows, the HASH index change if any)."""
    if plan.direct:
        assert isinstance(df, ParquetFiles)
        written = write_files_directly(spark, df, plan.target, plan.schema, plan.first_sequence)
        record.details["path"] = "direct (executors read the Parquet source with pyarrow)"
        return written, None
    if is_dynamic_bucket(plan.schema):
        written, index = write_dynamic(
            df,
            plan.target,
            plan.schema,
            plan.first_sequence,
            plan.previous,
            settings.mode,
            plan.overwrite_filter,
        )
        record.details["dynamic_bucket"] = True
        record.count("hash_index_files_written", len(index.add) if index else 0)
        return written, index
    return write_through_spark(df, plan.target, plan.schema, plan.num_buckets, plan.first_sequence), None
