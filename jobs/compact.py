"""compact: rewrite a table's small files and sorted runs into fewer, larger ones (issue #15).

Append tables get their small files bin-packed (Paimon's append compaction rules), primary-key
tables get every bucket fully compacted: all sorted runs merged by key with the table's merge
engine into files at the top level. See `paimon_format.compaction.rules` for the picking rules and
`paimon_format.compaction.rewrite` for what one bin's task writes. On primary-key tables with
`changelog-producer` lookup or full-compaction each task also writes the changelog of its rewrite
(`paimon_format.compaction.changelog`, Paimon's rules), which the COMPACT snapshot commits in its
changelog manifest list, as Paimon's compaction does.

The run, and why in this order (crash ordering):
1. Plan on the executors from the latest snapshot's manifests (`jobs.compaction.plan`); the driver
   gets one summary row per bin. Nothing is written. `buckets` ranges and `max_bytes_per_run`
   (in `job_order`) bound what one run takes; the next run plans the rest (`jobs.compaction.slices`).
2-4. The bins are cut into commit groups (`max_commit_bins`, `max_commit_bytes`; one group without
   `partial_progress`), and each group in turn: one task per bin writes the new data files (and
   changelog files), executors write the delta manifests, and the driver commits one COMPACT
   snapshot naming them, create-if-absent, after checking the snapshots that landed since the
   plan (`jobs.compaction.rewrite` gives each step's crash ordering). A crash leaves the groups
   committed before it committed and the group in flight's files unreferenced; a group a rival
   commit conflicted with is planned again and retried once, else given up (exit 3 at the end,
   the other groups committed): `jobs.compaction.groups`.
5. Nothing is deleted: the inputs stay on storage for the older snapshots that still read them
   until expire-snapshots expires those snapshots.

The run itself lives in `jobs.compaction` (refusals, plan, rewrite and commit), which the write job
shares; this module is the operation: its configuration, `run`, and `compact` for Python callers.

Spark-submit entry: `spark-submit jobs/compact.py --config conf/compact.yaml`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from jobs.compaction.run import CompactRequest, compact_table
from jobs.compaction.slices import parse_bucket_ranges
from jobs.runtime.config import TableJobConfig, check_partition_specs, check_predicate_syntax
from jobs.runtime.registry import JobContext
from jobs.runtime.report import RunRecord
from jobs.runtime.table_open import open_existing_table
from paimon_format.model.options import parse_duration_ms, parse_memory_size
from paimon_format.table import Table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Scalar = str | int | float | bool | None


class CompactConfig(TableJobConfig):
    strategy: Literal["minor", "full"] = Field(
        default="minor", description="minor: Paimon's picking rules; full: rewrite every selected bin"
    )
    partitions: list[dict[str, Scalar]] | None = Field(
        default=None, description="partition specs {key: value} to compact (default: all partitions)"
    )
    where: str | None = Field(default=None, description="a predicate on partition columns, instead of specs")
    order_by: list[str] | None = Field(
        default=None, description="append tables: sort each bin by these columns"
    )
    order_strategy: Literal["order", "zorder", "hilbert"] = Field(
        default="order",
        description="order | zorder | hilbert: sort by the columns, or along a Z-order or Hilbert curve "
        "over them (hilbert needs at least two columns, as Paimon's)",
    )
    partition_idle_time: str | None = Field(
        default=None, description="only partitions whose newest file is older than this, e.g. 1 h"
    )
    max_buckets_per_run: int | None = Field(
        default=None, ge=1, description="compact at most this many buckets"
    )
    target_file_size: str | None = Field(default=None, description="overrides the table's target-file-size")
    skip_unsupported: bool = Field(
        default=False,
        description="a table this job cannot compact (postpone bucket, row tracking, ...) is "
        "skipped with its reason in the record instead of exit 2 (for maintain over many tables)",
    )
    buckets: str | None = Field(
        default=None,
        description="only these bucket ids, ranges and ids separated by commas, e.g. '0-3,7' (a slice of "
        "a huge table; the next run takes the next slice)",
    )
    max_bytes_per_run: str | None = Field(
        default=None,
        description="take buckets in job_order while their input bytes fit, e.g. 500 gb (the first bucket "
        "always); the next run continues with the rest",
    )
    job_order: Literal["files-desc", "bytes-desc", "partition-asc", "none"] = Field(
        default="files-desc",
        description="which partitions first: most files (most fragmented), most bytes, oldest "
        "(partition values ascending), or none (as planned); also the order of the commits",
    )
    partial_progress: bool = Field(
        default=True,
        description="commit groups of bins as they finish (a crash or a rival commit loses only the group "
        "in flight, which is retried once); false: one commit at the end, a rival's conflict is exit 3",
    )
    max_commit_bins: int = Field(
        default=1000, ge=1, description="partial progress: bins per commit at most (a bucket is never split)"
    )
    max_commit_bytes: str = Field(
        default="100 gb",
        description="partial progress: input bytes per commit at most (a bucket is never split)",
    )

    @field_validator("where")
    @classmethod
    def _predicate_syntax(cls, value: str | None) -> str | None:
        return check_predicate_syntax(value)

    @field_validator("partitions")
    @classmethod
    def _specs(cls, value: list[dict[str, Scalar]] | None) -> list[dict[str, Scalar]] | None:
        return check_partition_specs(value, "leave partitions out to compact every partition")

    @field_validator("order_by")
    @classmethod
    def _columns(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            if not value or any(not str(column).strip() for column in value):
                raise ValueError("give one or more column names")
            if len(set(value)) != len(value):
                raise ValueError("a column is named twice")
        return value

    @field_validator("partition_idle_time")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if parse_duration_ms(str(value)) <= 0:
                    raise ValueError("must be positive")
            except ValueError as error:
                raise ValueError(f"{value!r} is not a duration such as 1 h or 30 min: {error}") from None
        return value

    @field_validator("buckets", mode="before")
    @classmethod
    def _buckets(cls, value: object) -> str | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise ValueError("give bucket ids and ranges as text, e.g. '0-3,7'")
        parse_bucket_ranges(str(value))
        return str(value)

    @field_validator("target_file_size", "max_bytes_per_run", "max_commit_bytes")
    @classmethod
    def _size(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if parse_memory_size(str(value)) <= 0:
                    raise ValueError("must be positive")
            except ValueError as error:
                raise ValueError(f"{value!r} is not a size such as 128 mb: {error}") from None
        return value

    @model_validator(mode="after")
    def _one_selector(self) -> CompactConfig:
        if self.partitions is not None and self.where is not None:
            raise ValueError("give partitions (specs) or where (a predicate), not both")
        if self.order_strategy == "zorder" and not self.order_by:
            raise ValueError("order_strategy zorder needs order_by columns")
        if self.order_strategy == "hilbert" and len(self.order_by or ()) < 2:
            raise ValueError("order_strategy hilbert needs at least two order_by columns")
        return self


CONFIG_MODEL = CompactConfig


def compact_request(config: CompactConfig) -> CompactRequest:
    """The run the compact job's configuration asks for."""
    return CompactRequest(
        strategy=config.strategy,
        specs=config.partitions,
        where=config.where,
        order_by=config.order_by,
        order_strategy=config.order_strategy,
        partition_idle_time=config.partition_idle_time,
        max_buckets_per_run=config.max_buckets_per_run,
        target_file_size=config.target_file_size,
        skip_unsupported=config.skip_unsupported,
        bucket_ranges=parse_bucket_ranges(config.buckets) if config.buckets is not None else None,
        max_bytes_per_run=_bytes(config.max_bytes_per_run),
        job_order=config.job_order,
        partial_progress=config.partial_progress,
        max_commit_bins=config.max_commit_bins,
        max_commit_bytes=parse_memory_size(config.max_commit_bytes),
    )


def _bytes(size: str | None) -> int | None:
    return parse_memory_size(size) if size is not None else None


def run(context: JobContext, config: CompactConfig) -> None:
    table = open_existing_table(config)
    compact(
        context.spark,
        table,
        compact_request(config),
        dry_run=context.dry_run,
        record=context.record,
        log=context.log,
    )


def compact(
    spark: SparkSession,
    table: Table,
    request: CompactRequest,
    *,
    dry_run: bool = False,
    record: RunRecord | None = None,
    log: logging.Logger | logging.LoggerAdapter | None = None,
    before_commit: Callable[[], None] | None = None,
) -> RunRecord:
    """Compact `table` as `request` asks (the job's `run`, and Python callers such as tests and
    benchmarks); `before_commit` is a test hook, called before each commit attempt (of each commit
    group, and of a group's retry): a rival commits there."""
    return compact_table(
        spark, table, request, dry_run=dry_run, record=record, log=log, before_commit=before_commit
    )


if __name__ == "__main__":
    from jobs.entry import run_entry

    run_entry("compact")
