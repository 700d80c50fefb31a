"""The write job: a DataFrame (files or a query) into a Paimon table, committed as one snapshot.

Plan on the driver (create or check the table, find where sequence numbers continue), write data
files on the executors with pyarrow inside mapInArrow, collect only the new files' metadata, and
commit once through `SnapshotCommit`. A failed commit removes the data files this run wrote.
The write itself lives in `jobs.writing` (`jobs.writing.run`); this module is the operation: its
configuration, `run`, and `write_dataframe` for Python callers.

Spark-submit entry: `spark-submit jobs/write.py --config conf/write.yaml`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, model_validator

from jobs.runtime.config import StrictModel, TableJobConfig
from jobs.runtime.errors import BadInputError
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.writing.run import write_to_table
from jobs.writing.settings import WriteSettings
from jobs.writing.source import ParquetFiles, parquet_files

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class SourceConfig(StrictModel):
    """Where the rows come from: files Spark can read, or a SQL query."""

    format: str = Field(
        default="parquet", description="the format Spark reads `path` in (parquet, csv, json, ...)"
    )
    path: str | None = Field(default=None, description="files or a directory to read (or give `query`)")
    query: str | None = Field(
        default=None, description="a Spark SQL query whose rows are written (or give `path`)"
    )
    options: dict[str, str] = Field(
        default_factory=dict, description="reader options for `format` (e.g. header: 'true' for csv)"
    )

    @model_validator(mode="after")
    def _one_source(self) -> SourceConfig:
        if (self.path is None) == (self.query is None):
            raise ValueError("give exactly one of source.path or source.query")
        return self


class CreateConfig(StrictModel):
    """How to create the table when it does not exist yet (ignored otherwise)."""

    partition_keys: list[str] = Field(default_factory=list, description="the new table's partition columns")
    primary_keys: list[str] = Field(
        default_factory=list, description="the new table's primary key columns (none: an append table)"
    )
    options: dict[str, Any] = Field(
        default_factory=dict, description="the new table's options (bucket, merge-engine, ...)"
    )


class WriteConfig(TableJobConfig):
    mode: Literal["append", "overwrite"] = Field(
        default="append", description="append the rows, or overwrite what `overwrite_scope` names with them"
    )
    source: SourceConfig = Field(description="where the rows come from: `path` (with `format`) or `query`")
    create: CreateConfig | None = Field(
        default=None, description="how to create the table when it does not exist yet (ignored otherwise)"
    )
    overwrite_scope: Literal["touched", "table", "partitions"] = Field(
        default="touched",
        description="overwrite: the partitions the input touches, the whole table, or `partitions`",
    )
    partitions: list[dict[str, Any]] = Field(
        default_factory=list,
        description="overwrite_scope partitions: the partition specs {key: value} the overwrite replaces",
    )
    strict_create: bool = Field(
        default=False,
        description="a `create:` block that differs from the existing table (keys, bucket): exit 2, "
        "not a warning",
    )


CONFIG_MODEL = WriteConfig


def write_settings(config: WriteConfig) -> WriteSettings:
    """The write the configuration asks for."""
    create = config.create
    return WriteSettings(
        warehouse=config.warehouse,
        table=config.table,
        mode=config.mode,
        partition_keys=create.partition_keys if create else None,
        primary_keys=create.primary_keys if create else None,
        options=create.options if create else None,
        overwrite_scope=config.overwrite_scope,
        overwrite_partitions=config.partitions,
        storage_options=config.storage_options,
        allow_unsafe_overwrite_commit=config.allow_unsafe_overwrite_commit,
        strict_create=config.strict_create,
        io_parallelism=config.io_parallelism,
    )


def run(context: JobContext, config: WriteConfig) -> None:
    source = config.source
    files = None
    if source.path is not None and source.format == "parquet" and not source.options:
        files = parquet_files(source.path, config.storage_options, config.io_parallelism)
    if files is not None:
        context.log.info(
            "source: %d Parquet files under %s (read by the executors)", len(files.paths), source.path
        )
    else:
        context.log.info("source: %s", f"{source.format} at {source.path}" if source.path else "a query")
    df = files if files is not None else load_source(context.spark, source)
    write_dataframe(
        df,
        write_settings(config),
        dry_run=context.dry_run,
        spark=context.spark,
        record=context.record,
        log=context.log,
    )


def load_source(spark: SparkSession, source: SourceConfig) -> DataFrame:
    """The source DataFrame; a missing path or a bad query is the user's input, not a crash."""
    from pyspark.errors import AnalysisException, ParseException  # pyspark: only a run with a source loads it

    try:
        if source.query is not None:
            return spark.sql(source.query)
        return spark.read.format(source.format).options(**source.options).load(source.path)
    except (AnalysisException, ParseException) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        where = f"source.path {source.path}" if source.path is not None else "source.query"
        raise BadInputError(f"{where}: {first_line}") from None


def write_dataframe(
    df: DataFrame | ParquetFiles,
    settings: WriteSettings,
    *,
    dry_run: bool = False,
    spark: SparkSession | None = None,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
) -> RunRecord:
    """Write `df` into `settings.warehouse`/`settings.table` (`db.name`) as `settings` asks (the
    job's `run`, and Python callers); creates the table from the DataFrame if missing.

    `df` is a Spark DataFrame, or `ParquetFiles` (then `spark` is needed) for the direct path.
    """
    return write_to_table(df, settings, dry_run=dry_run, spark=spark, record=record, log=log)


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("write")
